#!/usr/bin/env bash
# The unit the pair runs under (systemd/ftvmd@.service.in, as meson generated
# it): systemd-analyze verify has nothing to say about ftvmd@a.service, the
# unit has the properties the daemon relies on and the hardening issue 19
# asks for (its own user, CAP_IPC_LOCK alone, each instance writing only its
# own state_dir and the shared store), systemd-sysusers takes the user's
# entry, and the example configs in systemd/example/etc-ftvm/ that go with
# it pass ftvmd --check.
. "$(dirname "$0")/lib.sh"

UNIT=${FTVM_UNIT:?FTVM_UNIT must name the generated ftvmd@.service}
SRCDIR=${FTVM_SRCDIR:?FTVM_SRCDIR must name the source tree}

if ! command -v systemd-analyze >/dev/null 2>&1; then
	echo "SKIP: systemd-analyze is not installed (package systemd)"
	exit 77
fi
[ -f "$UNIT" ] || fail "no generated unit at $UNIT"

# ---- the properties the issue names, in the unit as installed ----
# has LINE_REGEX WHY: the unit has a line matching ^LINE_REGEX$.
has() {
	grep -Eq "^$1\$" "$UNIT" || fail "$(basename "$UNIT") has no line '$1' ($2)"
	ok "$(grep -Em1 "^$1\$" "$UNIT")"
}
has 'Type=notify' 'ftvmd sends READY=1'
has 'NotifyAccess=main' 'only ftvmd itself notifies'
has 'WatchdogSec=[1-9][0-9]*(ms|s|min)?' 'ftvmd pings the watchdog'
has 'Restart=on-failure' 'a crashed node comes back'
has 'User=ftvm' 'a user of its own, not root'
has 'Group=ftvm' 'a user of its own, not root'
has 'StateDirectory=ftvm/%i ftvm/shared' 'state_dir of the example configs, and the shared store'
has 'RuntimeDirectory=ftvm/%i' 'socket of the example configs'
has 'LimitMEMLOCK=infinity' 'RDMA pins memory'
has 'AmbientCapabilities=CAP_IPC_LOCK' 'RDMA pins memory'
has 'CapabilityBoundingSet=CAP_IPC_LOCK' 'no capability but the one it needs'
has 'LimitNOFILE=[0-9]+' 'max_clients sockets'
has 'NoNewPrivileges=yes' 'hardening'
has 'ProtectSystem=strict' 'hardening'
has 'ProtectHome=yes' 'hardening'
has 'SystemCallFilter=@system-service' 'hardening'
has 'ProtectProc=invisible' 'hardening'
has 'MemoryDenyWriteExecute=yes' 'hardening'
# Node a may not write node b's state_dir: nothing but the StateDirectory=
# folders is writable under ProtectSystem=strict.
! grep -Eq '^ReadWritePaths=' "$UNIT" || fail "ReadWritePaths= lets one instance write another's"
sysusers="$SRCDIR/systemd/ftvm.sysusers.conf"
out=$(systemd-sysusers --dry-run "$sysusers" 2>&1) || fail "systemd-sysusers --dry-run $sysusers: $out"
grep -q "user 'ftvm'\|ftvm.*exists" <<<"$out" || fail "systemd-sysusers makes no user ftvm: $out"
ok "systemd-sysusers takes $(basename "$sysusers"): $(grep -m1 ftvm <<<"$out")"
has 'ExecStartPre=/[^@ ]*/ftvmd --config /etc/ftvm/%i.conf --check' 'a bad config fails before start'
has 'ExecStart=/[^@ ]*/ftvmd --config /etc/ftvm/%i.conf' 'one config per instance'
# RDMA needs /dev/infiniband and AF_IB; these would take them away.
! grep -Eq '^PrivateDevices=(yes|true|on|1)$' "$UNIT" || fail "PrivateDevices= hides /dev/infiniband"
! grep -Eq '^(DevicePolicy|DeviceAllow|ProtectClock)=' "$UNIT" ||
	fail "DevicePolicy=/DeviceAllow=/ProtectClock= would deny /dev/infiniband"
if grep -q '^RestrictAddressFamilies=' "$UNIT"; then
	families=$(sed -n 's/^RestrictAddressFamilies=//p' "$UNIT")
	for af in AF_UNIX AF_INET AF_INET6 AF_NETLINK AF_IB; do
		grep -qw -- "$af" <<<"$families" || fail "RestrictAddressFamilies= lacks $af: $families"
	done
	ok "RestrictAddressFamilies=$families"
fi

# ---- systemd-analyze verify ----
# A copy whose commands name the built ftvmd: verify refuses a command that is
# not there, and the install prefix's ftvmd need not exist yet. A link named
# after the instance makes verify load ftvmd@a.service (%i = a) from the
# template, as systemctl start ftvmd@a would.
UNITS="$WORK/units"
mkdir -p "$UNITS"
sed -E "s#^(ExecStart(Pre)?=)/[^ ]*/ftvmd #\\1$FTVMD #" "$UNIT" >"$UNITS/ftvmd@.service"
n=$(grep -Ec "^ExecStart(Pre)?=$FTVMD " "$UNITS/ftvmd@.service" || true)
[ "$n" -eq 2 ] || fail "rewrote $n of the 2 commands to $FTVMD"
ln -s ftvmd@.service "$UNITS/ftvmd@a.service"
# The trailing ':' keeps systemd's own directories in the path, for the
# targets the unit names (network-online.target, multi-user.target, and
# sysinit.target through the default dependencies).
rc=0
out=$(SYSTEMD_UNIT_PATH="$UNITS:" systemd-analyze verify --man=no "$UNITS/ftvmd@a.service" 2>&1) ||
	rc=$?
# verify exits 0 after warnings such as "Unknown key", so its words count too.
# Lines about other units (the host's own) are shown, not held against us.
about_us=$(grep -F -e ftvmd@ -e "$UNITS" <<<"$out" || true)
other=$(grep -Fv -e ftvmd@ -e "$UNITS" <<<"$out" || true)
[ -z "$other" ] || echo "note: systemd-analyze about other units: $other"
[ "$rc" -eq 0 ] || fail "systemd-analyze verify exited $rc: $out"
[ -z "$about_us" ] || fail "systemd-analyze verify warns about the unit: $about_us"
ok "systemd-analyze verify ftvmd@a.service: no warnings"

# ---- the example configs the unit reads ----
# --check reads and validates the file only: state_dir, socket and the store
# are not opened, so /var/lib/ftvm and /run/ftvm need not exist here.
"$FTVMCTL" keygen "$WORK/pair.key" >/dev/null
for id in a b; do
	conf="$SRCDIR/systemd/example/etc-ftvm/$id.conf"
	# The key the unit reads is made at install time (systemd/OPERATIONS.md): a new one
	# stands in for it here.
	grep -qx "key_file = /etc/ftvm/pair.key" "$conf" || fail "$conf: key_file is not /etc/ftvm/pair.key"
	sed "s|^key_file = .*|key_file = $WORK/pair.key|" "$conf" >"$WORK/$id.conf"
	out=$("$FTVMD" --config "$WORK/$id.conf" --check 2>&1) || fail "ftvmd --check $conf: $out"
	grep -q "ok (node $id)" <<<"$out" || fail "ftvmd --check $conf said: $out"
	# The paths must be the ones the unit makes and lets ftvmd write.
	grep -qx "state_dir = /var/lib/ftvm/$id" "$conf" || fail "$conf: state_dir is not the unit's StateDirectory"
	grep -qx "socket = /run/ftvm/$id/ftvmd.sock" "$conf" || fail "$conf: socket is not in the unit's RuntimeDirectory"
	grep -qx "path = /var/lib/ftvm/shared/store" "$conf" || fail "$conf: the store is not in the shared StateDirectory"
	ok "$out"
done
