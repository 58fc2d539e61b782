#!/usr/bin/env bash
# The pair as two systemd units under a real systemd (issue 4), inside the
# guest as root: installs the built ftvmd, ftvmctl and libftvm, the unit meson
# generated and the example configs of systemd/example/etc-ftvm; starts
# ftvmd@a and ftvmd@b; checks READY (active), the watchdog and the STATUS=
# line; writes data on both nodes; runs `ftvmctl drill kill b`, `drill restart
# a` and `drill hang b 2`, which find the units through /proc/PID/cgroup and
# go through systemctl; checks systemd restarted or started what the drills
# hit; stops both cleanly. Any failure prints both units' journal.
# shellcheck source=tests/vm/joblib.sh
. "$FTVM_SRC/tests/vm/joblib.sh"

JOURNAL_UNITS=(ftvmd@a.service ftvmd@b.service)
unit_file=$FTVM_BUILD/systemd/ftvmd@.service
conf_a=/etc/ftvm/a.conf
conf_b=/etc/ftvm/b.conf
scratch=$(mktemp -d)

step "installing ftvmd, ftvmctl, libftvm, the unit and the configs"
[ -f "$unit_file" ] || fail "no $unit_file: is $FTVM_BUILD a configured build tree?"
# The unit runs ExecStart=BINDIR/ftvmd (BINDIR: the meson prefix's bindir).
bindir=$(sed -n 's|^ExecStart=\(/.*\)/ftvmd --config .*|\1|p' "$unit_file")
[ -n "$bindir" ] || fail "no ExecStart=.../ftvmd in $unit_file"
install -D -m 0755 -t "$bindir" "$FTVM_BUILD/node/ftvmd" "$FTVM_BUILD/tools/ftvmctl"
# ftvmctl links libftvm.so.0; its build-tree RUNPATH ($ORIGIN/../node) does not
# hold once installed, so the library goes where ld.so looks.
lib=$(find "$FTVM_BUILD/node" -maxdepth 1 -type f -name 'libftvm.so.0.*' | head -n 1)
[ -n "$lib" ] || fail "no libftvm.so.0.* in $FTVM_BUILD/node"
install -D -m 0755 -t /usr/local/lib "$lib"
ln -sf "$(basename "$lib")" /usr/local/lib/libftvm.so.0
ldconfig
install -D -m 0644 -t /etc/systemd/system "$unit_file"
# The steps of systemd/OPERATIONS.md: the user the unit runs as, the configs readable by its
# group, the pair's key its own.
install -D -m 0644 "$FTVM_SRC/systemd/ftvm.sysusers.conf" /etc/sysusers.d/ftvm.conf
systemd-sysusers /etc/sysusers.d/ftvm.conf || fail "systemd-sysusers made no user ftvm"
install -D -m 0640 -g ftvm -t /etc/ftvm "$FTVM_SRC/systemd/example/etc-ftvm/a.conf" \
	"$FTVM_SRC/systemd/example/etc-ftvm/b.conf"
ctl=$bindir/ftvmctl
"$ctl" --version >/dev/null || fail "$ctl does not run here (ldd: $(ldd "$ctl" | grep 'not found'))"
"$ctl" keygen /etc/ftvm/pair.key >/dev/null || fail "ftvmctl keygen /etc/ftvm/pair.key"
chown ftvm:ftvm /etc/ftvm/pair.key
ok "$bindir/ftvmd and ftvmctl ($("$ctl" --version)), /etc/systemd/system/ftvmd@.service, /etc/ftvm/{a,b}.conf"

step "systemctl start ftvmd@a ftvmd@b"
systemctl daemon-reload
t=$(now_ms)
# Type=notify: systemctl returns once both sent READY=1 (or failed).
systemctl start ftvmd@a ftvmd@b || fail "systemctl start ftvmd@a ftvmd@b exited $?"
ok "both started (READY=1) in $(($(now_ms) - t)) ms"

state_is() { # state_is CONF STATE
	[ "$("$ctl" --config "$1" --json status 2>/dev/null | jq -r .state)" = "$2" ]
}
wait_for 120 "a active" state_is "$conf_a" active
wait_for 120 "b active" state_is "$conf_b" active
ok "both nodes say state active: $("$ctl" --config "$conf_a" status | head -n 1)"

step "what systemd knows of the units"
status_active() {
	[[ $(unit_prop "ftvmd@$1" StatusText) == active* ]]
}
for id in a b; do
	wait_for 30 "ftvmd@$id's STATUS= to say active" status_active "$id"
	props=$(systemctl show "ftvmd@$id" -p Type -p NotifyAccess -p WatchdogUSec -p ActiveState \
		-p SubState -p StatusText -p MainPID)
	indent "  ftvmd@$id: " <<<"$props"
	for want in Type=notify NotifyAccess=main WatchdogUSec=5s ActiveState=active SubState=running; do
		grep -qx "$want" <<<"$props" || fail "ftvmd@$id: expected $want"
	done
	# `systemctl status` shows the STATUS= line as "Status:".
	systemctl status "ftvmd@$id" --no-pager 2>&1 | grep -q 'Status: "active' ||
		fail "ftvmd@$id: systemctl status shows no Status: \"active...\" line"
done
ok "Type=notify, NotifyAccess=main, WatchdogUSec=5s, active (READY came), StatusText follows the node state"

step "the sandbox: user ftvm, CAP_IPC_LOCK alone, systemd-analyze security"
for id in a b; do
	pid=$(unit_prop "ftvmd@$id" MainPID)
	user=$(ps -o user= -p "$pid")
	[ "$user" = ftvm ] || fail "ftvmd@$id runs as $user, not ftvm"
	caps=$(grep -E '^Cap(Eff|Prm|Bnd):' "/proc/$pid/status" | tr '\n' ' ')
	# CAP_IPC_LOCK is bit 14: 0x4000.
	for set in CapEff CapPrm CapBnd; do
		grep -q "$set:	0000000000004000" <<<"$caps" || fail "ftvmd@$id capabilities: $caps"
	done
	ok "ftvmd@$id (pid $pid) runs as ftvm with CAP_IPC_LOCK alone ($caps)"
done
# Node a may not write node b's state_dir: in ftvmd@a's mount namespace it
# is on a read-only mount, a's own is not.
pid_a=$(unit_prop ftvmd@a MainPID)
out=$(nsenter -t "$pid_a" -m touch /var/lib/ftvm/b/probe 2>&1) &&
	fail "inside ftvmd@a's sandbox /var/lib/ftvm/b is writable"
grep -q "Read-only file system" <<<"$out" || fail "touching b's state_dir from a's sandbox: $out"
nsenter -t "$pid_a" -m touch /var/lib/ftvm/a/probe || fail "a cannot write its own state_dir"
rm -f /var/lib/ftvm/a/probe
ok "inside ftvmd@a's sandbox /var/lib/ftvm/b is read-only ($out), /var/lib/ftvm/a writable"
security=$(systemd-analyze security ftvmd@a.service --no-pager 2>&1) || true
indent "  " <<<"$(grep -E '✗|Overall exposure' <<<"$security" | head -40)"
exposure=$(sed -n 's/.*Overall exposure level for ftvmd@a.service: \([0-9.]*\).*/\1/p' <<<"$security")
ok "systemd-analyze security ftvmd@a: overall exposure ${exposure:-unknown} (aim: 2.5 or less)"

step "data on both nodes"
ga=$("$ctl" --config "$conf_a" alloc --size 64K) || fail "alloc on a"
gb=$("$ctl" --config "$conf_b" alloc --size 256K --policy stripe) || fail "alloc on b"
head -c 4096 /dev/urandom >"$scratch/pa"
head -c 65536 /dev/urandom >"$scratch/pb"
"$ctl" --config "$conf_a" write "$ga" 3 --file "$scratch/pa" >/dev/null || fail "write $ga on a"
"$ctl" --config "$conf_b" write "$gb" 1 --file "$scratch/pb" >/dev/null || fail "write $gb on b"
data_intact() {
	"$ctl" --config "$conf_b" read "$ga" 3 | cmp -s - "$scratch/pa" ||
		fail "$ga page 3 reads back differently on b"
	"$ctl" --config "$conf_a" read "$gb" 1 | cmp -s - "$scratch/pb" ||
		fail "$gb page 1 reads back differently on a"
	"$ctl" --config "$conf_a" verify >/dev/null || fail "verify on a: the nodes differ"
}
data_intact
ok "$ga (a) and $gb (b, stripe) written, read back on the other node, verify equal"

pid_of() {
	unit_prop "ftvmd@$1" MainPID
}
# check_drill JSON WHAT: lost 0, equal true.
check_drill() {
	local lost equal
	lost=$(jq -r .lost <<<"$1")
	equal=$(jq -r .equal <<<"$1")
	if [ "$lost" != 0 ] || [ "$equal" != true ]; then
		fail "$2: lost $lost, equal $equal: $1"
	fi
}

step "ftvmctl drill kill b (SIGKILL through systemctl kill; systemd's Restart=on-failure)"
pid_b=$(pid_of b)
restarts_b=$(unit_prop ftvmd@b NRestarts)
t=$(now_ms)
out=$("$ctl" --config "$conf_a" --json drill kill b --timeout 120) ||
	fail "drill kill b exited $?: $out"
echo "  $out"
check_drill "$out" "drill kill b"
wait_for 60 "ftvmd@b active again" unit_is ftvmd@b ActiveState active
[ "$(pid_of b)" != "$pid_b" ] || fail "ftvmd@b still runs as PID $pid_b after drill kill b"
now_restarts=$(unit_prop ftvmd@b NRestarts)
if [ "$now_restarts" -gt "$restarts_b" ]; then
	how="systemd restarted it (NRestarts $restarts_b -> $now_restarts)"
else
	how="the drill started it (systemctl start; NRestarts $now_restarts)"
fi
ok "drill kill b in $(($(now_ms) - t)) ms: lost 0, equal; ftvmd@b active again as PID $(pid_of b), $how"

step "ftvmctl drill restart a (SIGTERM through systemctl kill; a clean stop, started again)"
pid_a=$(pid_of a)
restarts_a=$(unit_prop ftvmd@a NRestarts)
t=$(now_ms)
out=$("$ctl" --config "$conf_a" drill restart a --timeout 120) || fail "drill restart a exited $?: $out"
indent "  " <<<"$out"
grep -q "under systemd ftvmd@a.service" <<<"$out" ||
	fail "drill restart a did not find ftvmd@a.service (no \"under systemd\" in its report)"
grep -q ": 0 lost" <<<"$out" || fail "drill restart a lost pages"
grep -q "verify: equal" <<<"$out" || fail "drill restart a: the nodes differ"
wait_for 60 "ftvmd@a active again" unit_is ftvmd@a ActiveState active
[ "$(pid_of a)" != "$pid_a" ] || fail "ftvmd@a still runs as PID $pid_a after drill restart a"
# Exit 0 on SIGTERM: Restart=on-failure leaves it stopped, the drill starts it.
[ "$(unit_prop ftvmd@a NRestarts)" = "$restarts_a" ] ||
	fail "systemd restarted ftvmd@a after a clean stop (NRestarts $restarts_a -> $(unit_prop ftvmd@a NRestarts))"
ok "drill restart a in $(($(now_ms) - t)) ms: under systemd, 0 lost, equal; the drill started ftvmd@a again (PID $(pid_of a))"

step "ftvmctl drill hang b 2 (SIGSTOP, SIGCONT 2 s later, through systemctl kill)"
pid_b=$(pid_of b)
t=$(now_ms)
out=$("$ctl" --config "$conf_a" --json drill hang b 2 --timeout 120) ||
	fail "drill hang b 2 exited $?: $out"
echo "  $out"
check_drill "$out" "drill hang b 2"
[ "$(jq -r .takeover_ms <<<"$out")" -ge 0 ] || fail "drill hang b 2: no takeover"
[ "$(unit_prop ftvmd@b ActiveState)" = active ] || fail "ftvmd@b not active after the hang"
[ "$(pid_of b)" = "$pid_b" ] || fail "ftvmd@b was replaced during a 2 s hang (watchdog 5 s)"
ok "drill hang b 2 in $(($(now_ms) - t)) ms: taken over, lost 0, equal; ftvmd@b is the same process, resynced"

step "the data from before the drills"
wait_for 60 "a active" state_is "$conf_a" active
wait_for 60 "b active" state_is "$conf_b" active
data_intact
ok "$ga and $gb read back on the other node, verify equal"

step "systemctl stop ftvmd@a ftvmd@b"
t=$(now_ms)
systemctl stop ftvmd@a ftvmd@b || fail "systemctl stop exited $?"
for id in a b; do
	props=$(systemctl show "ftvmd@$id" -p ActiveState -p Result -p ExecMainStatus)
	indent "  ftvmd@$id: " <<<"$props"
	for want in ActiveState=inactive Result=success ExecMainStatus=0; do
		grep -qx "$want" <<<"$props" || fail "ftvmd@$id after stop: expected $want"
	done
done
ok "both stopped in $(($(now_ms) - t)) ms, exit status 0 (the shutdown destage done)"

echo "---- journal of ftvmd@b around the kill (systemd's view)"
journalctl -u ftvmd@b --no-pager -o short-monotonic | grep -E 'systemd\[1\]' | tail -n 20 || true
rm -rf "$scratch"
echo "systemd_pair: all checks passed in $(elapsed) s"
