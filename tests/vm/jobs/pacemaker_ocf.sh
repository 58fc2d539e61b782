#!/usr/bin/env bash
# The resource agent ocf:ftvm:ftvmd (ocf/ftvmd.in) under a real Pacemaker,
# inside the guest as root (issue 25):
#   - corosync and pacemaker as a cluster of this one host (stonith-enabled
#     false), the agent installed where Pacemaker looks for it, the pair's
#     configs of systemd/example/etc-ftvm, user ftvm;
#   - Pacemaker reads the agent's meta-data and runs its validate-all
#     (crm_resource), on a good config and on one ftvmd refuses;
#   - the two nodes as two primitives (one host has room for a pair but
#     not for a clone of it: the README's clone needs two hosts), the
#     folders of their sockets, state_dirs and store made by the agent; both
#     started and active, ftvmd as ftvm with CAP_IPC_LOCK alone, its log in
#     the journal;
#   - data written; b's ftvmd killed (kill -9): Pacemaker's monitor finds it
#     not running and starts it again (fail count 1), the survivor resyncs
#     it, the data reads back, verify equal;
#   - both stopped through Pacemaker, cleanly.
# shellcheck source=tests/vm/joblib.sh
. "$FTVM_SRC/tests/vm/joblib.sh"

JOURNAL_UNITS=(corosync.service pacemaker.service)
agent_src=$FTVM_BUILD/ocf/ftvmd
agent=/usr/lib/ocf/resource.d/ftvm/ftvmd
conf_a=/etc/ftvm/a.conf
conf_b=/etc/ftvm/b.conf
scratch=$(mktemp -d)

on_exit() {
	local rc=$?
	if [ "$rc" -ne 0 ]; then
		echo "---- crm_mon -1 (failures, fail counts)"
		crm_mon -1 --include=failcounts,failures 2>&1 || true
		echo "---- journalctl -t ftvmd (last 60 lines)"
		journalctl -t ftvmd --no-pager -o short-monotonic 2>&1 | tail -n 60 || true
		echo "---- the agent's lines (pacemaker-execd, last 40)"
		journalctl --no-pager -o short-monotonic 2>&1 | grep -E 'ftvmd\(ftvm-' | tail -n 40 || true
	fi
	rm -rf "$scratch"
}
trap on_exit EXIT

step "installing ftvmd, ftvmctl, libftvm, the agent and the configs"
[ -f "$agent_src" ] || fail "no $agent_src: is $FTVM_BUILD a configured build tree?"
[ -f /usr/lib/ocf/lib/heartbeat/ocf-shellfuncs ] || fail "no ocf-shellfuncs (resource-agents) in the image"
command -v crm_resource >/dev/null || fail "no crm_resource (pacemaker-cli-utils) in the image"
# The agent's defaults name the installed binaries (meson's bindir).
bindir=$(sed -n 's|^OCF_RESKEY_ftvmd_default=\(/.*\)/ftvmd$|\1|p' "$agent_src")
[ -n "$bindir" ] || fail "no OCF_RESKEY_ftvmd_default in $agent_src"
install -D -m 0755 -t "$bindir" "$FTVM_BUILD/node/ftvmd" "$FTVM_BUILD/tools/ftvmctl"
lib=$(find "$FTVM_BUILD/node" -maxdepth 1 -type f -name 'libftvm.so.0.*' | head -n 1)
[ -n "$lib" ] || fail "no libftvm.so.0.* in $FTVM_BUILD/node"
install -D -m 0755 -t /usr/local/lib "$lib"
ln -sf "$(basename "$lib")" /usr/local/lib/libftvm.so.0
ldconfig
install -D -m 0755 "$agent_src" "$agent"
# The README's steps for user ftvm: the configs readable by its group, the
# pair's key its own.
install -D -m 0644 "$FTVM_SRC/systemd/ftvm.sysusers.conf" /etc/sysusers.d/ftvm.conf
systemd-sysusers /etc/sysusers.d/ftvm.conf || fail "systemd-sysusers made no user ftvm"
install -D -m 0640 -g ftvm -t /etc/ftvm "$FTVM_SRC/systemd/example/etc-ftvm/a.conf" \
	"$FTVM_SRC/systemd/example/etc-ftvm/b.conf"
ctl=$bindir/ftvmctl
"$ctl" keygen /etc/ftvm/pair.key >/dev/null || fail "ftvmctl keygen /etc/ftvm/pair.key"
chown ftvm:ftvm /etc/ftvm/pair.key
ok "$bindir/ftvmd, ftvmctl; $agent; /etc/ftvm/{a,b}.conf; user ftvm"

step "corosync and pacemaker: a cluster of this host alone"
# One node on loopback, no secret (nothing else can reach this guest).
cat >/etc/corosync/corosync.conf <<'EOF'
totem {
	version: 2
	cluster_name: ftvm-vm
	crypto_cipher: none
	crypto_hash: none
}
nodelist {
	node {
		ring0_addr: 127.0.0.1
		name: ftvm-guest
		nodeid: 1
	}
}
quorum {
	provider: corosync_votequorum
}
logging {
	to_syslog: yes
}
EOF
t=$(now_ms)
systemctl start corosync pacemaker || fail "systemctl start corosync pacemaker exited $?"
dc_elected() {
	crm_mon -1 2>/dev/null | grep -q "Current DC: ftvm-guest"
}
wait_for 180 "ftvm-guest online and DC" dc_elected
crm_attribute --type crm_config --name stonith-enabled --update false ||
	fail "crm_attribute stonith-enabled=false"
ok "ftvm-guest is the DC after $(($(now_ms) - t)) ms; stonith-enabled=false"

step "Pacemaker reads the agent: meta-data, validate-all"
crm_resource --show-metadata ocf:ftvm:ftvmd >"$scratch/meta.xml" ||
	fail "crm_resource --show-metadata ocf:ftvm:ftvmd exited $?"
for p in config ftvmd ftvmctl pidfile user log; do
	grep -q "<parameter name=\"$p\"" "$scratch/meta.xml" || fail "meta-data has no parameter $p"
done
validate() { # validate CONFIG: crm_resource --validate, as Pacemaker runs the agent
	crm_resource --validate --class ocf --provider ftvm --agent ftvmd \
		--option "config=$1" --option user=ftvm 2>&1
}
out=$(validate "$conf_a") || fail "validate-all of $conf_a through Pacemaker: $out"
# Where ftvm may read it: the agent runs ftvmd --check as the user.
install -m 0640 -g ftvm "$conf_a" /etc/ftvm/bad.conf
echo "bogus = 1" >>/etc/ftvm/bad.conf
rc=0
out=$(validate /etc/ftvm/bad.conf) || rc=$?
[ "$rc" -ne 0 ] || fail "validate-all of a config ftvmd refuses passed: $out"
grep -q "bogus: unknown key" <<<"$out" || fail "validate-all did not say why: $out"
indent "  " <<<"$out"
ok "meta-data parsed by crm_resource; validate-all: $conf_a passes, a refused config fails (crm_resource exit $rc)"

step "the pair as two primitives, monitor every 5 s"
primitive() { # primitive ID CONFIG
	cat <<EOF
<primitive id="$1" class="ocf" provider="ftvm" type="ftvmd">
  <instance_attributes id="$1-params">
    <nvpair id="$1-config" name="config" value="$2"/>
    <nvpair id="$1-user" name="user" value="ftvm"/>
  </instance_attributes>
  <operations>
    <op id="$1-start" name="start" interval="0s" timeout="120s"/>
    <op id="$1-stop" name="stop" interval="0s" timeout="120s"/>
    <op id="$1-monitor" name="monitor" interval="5s" timeout="20s"/>
  </operations>
</primitive>
EOF
}
t=$(now_ms)
for id in a b; do
	cibadmin --create -o resources --xml-text "$(primitive "ftvm-$id" "/etc/ftvm/$id.conf")" ||
		fail "cibadmin --create ftvm-$id"
done
running() { # running RSC
	crm_resource --resource "$1" --locate 2>/dev/null | grep -q "is running on: ftvm-guest"
}
state_is() { # state_is CONF STATE
	[ "$("$ctl" --config "$1" --json status 2>/dev/null | jq -r .state)" = "$2" ]
}
wait_for 240 "ftvm-a and ftvm-b started" eval 'running ftvm-a && running ftvm-b'
wait_for 120 "a active" state_is "$conf_a" active
wait_for 120 "b active" state_is "$conf_b" active
ok "both started by Pacemaker and active after $(($(now_ms) - t)) ms"
for d in /run/ftvm/a /run/ftvm/b /var/lib/ftvm/a /var/lib/ftvm/b /var/lib/ftvm/shared; do
	[ "$(stat -c %U "$d")" = ftvm ] || fail "$d is $(stat -c %U:%G "$d")"
done
ok "the agent made /run/ftvm/{a,b}, /var/lib/ftvm/{a,b,shared}, owned by ftvm"
pid_of() { # pid_of ID: as the node says
	"$ctl" --config "/etc/ftvm/$1.conf" --json status | jq -r .pid
}
for id in a b; do
	pid=$(pid_of "$id")
	[ "$(ps -o user= -p "$pid")" = ftvm ] || fail "ftvmd $id runs as $(ps -o user= -p "$pid")"
	grep -q "^CapEff:	0000000000004000" "/proc/$pid/status" ||
		fail "ftvmd $id: $(grep ^Cap "/proc/$pid/status" | tr '\n' ' ')"
	[ "$(cat "/run/resource-agents/ftvmd-ftvm-$id.pid")" = "$pid" ] ||
		fail "the pid file of ftvm-$id does not say $pid"
done
journalctl -t ftvmd --no-pager | grep -q "node b" || fail "no line of node b in journalctl -t ftvmd"
ok "ftvmd a and b run as ftvm with CAP_IPC_LOCK alone, pid files in /run/resource-agents; their log in the journal (journalctl -t ftvmd)"

step "data, then b's ftvmd killed: Pacemaker starts it again"
ga=$("$ctl" --config "$conf_a" alloc --size 64K) || fail "alloc on a"
gb=$("$ctl" --config "$conf_b" alloc --size 64K) || fail "alloc on b"
head -c 4096 /dev/urandom >"$scratch/pa"
head -c 4096 /dev/urandom >"$scratch/pb"
"$ctl" --config "$conf_a" write "$ga" 1 --file "$scratch/pa" >/dev/null || fail "write $ga on a"
"$ctl" --config "$conf_b" write "$gb" 2 --file "$scratch/pb" >/dev/null || fail "write $gb on b"
pid_b=$(pid_of b)
t=$(now_ms)
kill -9 "$pid_b"
restarted() {
	local p
	p=$("$ctl" --config "$conf_b" --json status 2>/dev/null | jq -r .pid) &&
		[ -n "$p" ] && [ "$p" != "$pid_b" ]
}
wait_for 120 "ftvmd b started again" restarted
ok "b up again as PID $(pid_of b) $(($(now_ms) - t)) ms after the kill"
wait_for 120 "b active (resynced)" state_is "$conf_b" active
wait_for 60 "a active" state_is "$conf_a" active
fails=$(crm_failcount --query --resource ftvm-b --node ftvm-guest 2>&1)
grep -q "value=1" <<<"$fails" || fail "ftvm-b's fail count: $fails"
indent "  " <<<"$(crm_mon -1 --include=failcounts,failures 2>&1 | grep -E 'ftvm-|fail' || true)"
"$ctl" --config "$conf_b" read "$ga" 1 | cmp -s - "$scratch/pa" || fail "$ga page 1 differs on b"
"$ctl" --config "$conf_a" read "$gb" 2 | cmp -s - "$scratch/pb" || fail "$gb page 2 differs on a"
"$ctl" --config "$conf_a" verify >/dev/null || fail "verify: the nodes differ"
ok "Pacemaker restarted ftvm-b ($fails), resynced, both active; the data reads back on the other node, verify equal"

step "both stopped through Pacemaker"
t=$(now_ms)
for id in a b; do
	crm_resource --resource "ftvm-$id" --meta --set-parameter target-role --parameter-value Stopped \
		>/dev/null || fail "target-role=Stopped on ftvm-$id"
done
stopped() {
	! running ftvm-a && ! running ftvm-b && [ ! -e /run/ftvm/a/ftvmd.sock ] &&
		[ ! -e /run/ftvm/b/ftvmd.sock ]
}
wait_for 240 "ftvm-a and ftvm-b stopped" stopped
for id in a b; do
	[ ! -e "/run/resource-agents/ftvmd-ftvm-$id.pid" ] || fail "ftvm-$id's pid file is left"
done
[ "$(journalctl -t ftvmd --no-pager | grep -c ': stopped$')" -ge 2 ] ||
	fail "not two clean stops in journalctl -t ftvmd: $(journalctl -t ftvmd --no-pager | grep -i stop)"
ok "both stopped in $(($(now_ms) - t)) ms, sockets and pid files gone, clean stops in the journal"
systemctl stop pacemaker corosync || fail "systemctl stop pacemaker corosync exited $?"
echo "pacemaker_ocf: all checks passed in $(elapsed) s"
