#!/usr/bin/env bash
# vm: guests=2
# The pair on two hosts over RDMA (issue 5): two guests, two kernels, each
# with Soft-RoCE on the NIC that joins them (10.0.3.1 and 10.0.3.2), node a
# in guest a and node b in guest b with transport = rdma, the store in a
# folder both share (ftvmshared). Each guest runs this job with its role
# (ftvm.role=a|b); they keep step through flag files in the shared folder.
#   both: link up, active, `ftvmctl status` says rdma
#   a writes a page, b reads it back; b writes one, a reads it; verify equal
#   b's ftvmd is killed (kill -9): a sees the link go down with the reason,
#   takes over, writes alone; b starts again, is resynced; verify equal
#   the link is cut on b's side (netem drops all b sends): a sees it go down
#   (the partner silent; b sees a work completion in error), serves alone;
#   the link comes back, b is resynced; verify equal
#   both stop cleanly
# shellcheck source=tests/vm/joblib.sh
. "$FTVM_SRC/tests/vm/joblib.sh"

if [ ! -x "$FTVM_BUILD/tests/test_rdma_channel" ]; then
	echo "skipped: this build has no RDMA transport (rdma-core not found)"
	exit 77
fi
role=$(sed -n 's/.*ftvm\.role=\([ab]\).*/\1/p' /proc/cmdline)
case $role in
a) me=a other=b addr=10.0.3.1 peer=10.0.3.2 ;;
b) me=b other=a addr=10.0.3.2 peer=10.0.3.1 ;;
*) fail "no ftvm.role=a|b on the kernel command line" ;;
esac
shared=/mnt/ftvm/shared
conf=/etc/ftvm/$me.conf
ctl=$FTVM_BUILD/tools/ftvmctl
ftvmd=$FTVM_BUILD/node/ftvmd
log=$FTVM_OUT/ftvmd-$me.log
pid=
# A guest boots in 30-120 s under TCG, one vCPU each: a step of the other
# guest may be that far behind.
SLOW=600

# On the way out: no ftvmd left behind, and its log when something failed.
on_exit() {
	local rc=$?
	[ -z "$pid" ] || kill -9 "$pid" 2>/dev/null || true
	if [ "$rc" -ne 0 ] && [ -f "$log" ]; then
		echo "---- ftvmd $me (last 80 lines)"
		tail -n 80 "$log"
	fi
}
trap on_exit EXIT

flag() { # flag NAME: tell the other guest
	touch "$shared/$me-$1"
}
flagged() { # flagged NAME: the other guest said NAME
	[ -e "$shared/$other-$1" ]
}
wait_flag() {
	wait_for "$SLOW" "guest $other: $1" flagged "$1"
}

step "guest $me: Soft-RoCE on the link to guest $other ($addr)"
mkdir -p "$shared"
mount -t 9p -o trans=virtio,version=9p2000.L ftvmshared "$shared" || fail "mount ftvmshared"
nic=
for dev in /sys/class/net/*; do
	dev=${dev##*/}
	[ "$dev" != lo ] && nic=$dev && break
done
[ -n "$nic" ] || fail "no NIC"
ip addr add "$addr/24" dev "$nic"
ip link set "$nic" up
modprobe rdma_rxe || fail "modprobe rdma_rxe"
rdma link add rxe0 type rxe netdev "$nic" || fail "rdma link add rxe0 type rxe netdev $nic"
wait_for 30 "rxe0's port active" rxe0_active
reachable() {
	ping -c 1 -W 1 "$peer" >/dev/null 2>&1
}
wait_for "$SLOW" "guest $other reachable at $peer" reachable
ok "rxe0 on $nic ($addr), $peer answers"

mkdir -p /etc/ftvm /var/lib/ftvm
# Off loopback the pair needs its shared key: a makes it, both copy it.
if [ "$me" = a ]; then
	"$ctl" keygen "$shared/pair.key" >/dev/null || fail "ftvmctl keygen"
	flag key
else
	wait_flag key
fi
install -m 0600 "$shared/pair.key" /etc/ftvm/pair.key
cat >"$conf" <<CONF
[node]
id = $me
listen = $addr:7101
partner = $peer:7101
key_file = /etc/ftvm/pair.key
transport = rdma
socket = /run/ftvm-$me.sock
state_dir = /var/lib/ftvm/$me
log_level = debug
[memory]
size = 16M
[store]
path = $shared/store
[failover]
heartbeat_ms = 200
dead_after_ms = 5000
CONF

start() {
	"$ftvmd" --config "$conf" >>"$log" 2>&1 &
	pid=$!
	wait_for 60 "ftvmd $me serving" serving
}
serving() {
	"$ctl" --config "$conf" status >/dev/null 2>&1
}
field() { # field PATH: of ftvmctl status --json
	"$ctl" --config "$conf" --json status 2>/dev/null | jq -r ".$1"
}
is() {
	[ "$(field "$1")" = "$2" ]
}
linked() {
	is partner.link up && is state active
}

step "guest $me: ftvmd $me with transport = rdma"
# a creates the store; b starts once it is there.
[ "$me" = a ] || wait_flag started
start
[ "$me" = b ] || flag started
wait_for "$SLOW" "the pair linked over rdma" linked
is transport rdma || fail "transport is $(field transport), not rdma"
ok "linked, active: transport $(field transport) ($(field transport_reason))"

step "guest $me: data across the hosts"
head -c 4096 /dev/urandom >"/tmp/page-$me"
g=$("$ctl" --config "$conf" alloc --size 64K) || fail "alloc on $me"
"$ctl" --config "$conf" write "$g" 3 --file "/tmp/page-$me" >/dev/null || fail "write $g on $me"
cp "/tmp/page-$me" "$shared/page-$me"
echo "$g" >"$shared/guid-$me"
flag wrote
wait_flag wrote
theirs=$(cat "$shared/guid-$other")
"$ctl" --config "$conf" read "$theirs" 3 | cmp -s - "$shared/page-$other" ||
	fail "$theirs page 3 (written on $other) reads back differently on $me"
"$ctl" --config "$conf" verify >/dev/null || fail "verify: $("$ctl" --config "$conf" verify 2>&1)"
ok "$g written here, $theirs (written on $other) read back here, verify equal"
flag checked
wait_flag checked

if [ "$me" = b ]; then
	step "guest b: kill -9 ftvmd b; then start it again"
	kill -9 "$pid"
	wait "$pid" 2>/dev/null || true
	pid=
	flag killed
	wait_flag solo
	start
	wait_for "$SLOW" "b linked again" linked
	ok "b back: $(field state), epoch $(field epoch)"
	flag back
else
	step "guest a: b's ftvmd killed on the other host"
	wait_flag killed
	t=$(now_ms)
	wait_for 60 "a sees the link down" is partner.link down
	ok "link down after $(($(now_ms) - t)) ms: $(grep -o 'partner b down: .*' "$log" | tail -n 1)"
	wait_for 120 "a takes over" is state solo
	ok "a took over: $(field reason)"
	head -c 4096 /dev/urandom >/tmp/alone
	"$ctl" --config "$conf" write "$g" 5 --file /tmp/alone >/dev/null || fail "write alone"
	flag solo
	wait_flag back
	wait_for "$SLOW" "a linked again" linked
	"$ctl" --config "$conf" verify >/dev/null ||
		fail "verify after b's return: $("$ctl" --config "$conf" verify 2>&1)"
	ok "b resynced: verify equal, the page written alone included"
	flag verified
fi

if [ "$me" = b ]; then
	step "guest b: the link cut (netem: every packet b sends lost) until a has seen it"
	wait_flag verified
	# Not `ip link set down`: that takes rxe0's port down too, and in this
	# kernel its connection manager then answered no more requests after the
	# port came back (seen: every reconnect UNREACHABLE).
	tc qdisc add dev "$nic" root netem loss 100% || fail "tc qdisc add dev $nic root netem loss 100%"
	flag cut
	wait_flag seen-cut
	tc qdisc del dev "$nic" root
	flag restored
	wait_for "$SLOW" "b linked again" linked
	ok "b back after the cut: $(field state), epoch $(field epoch); b had seen: $(grep -o 'partner a down: .*' "$log" | tail -n 1)"
	flag relinked
else
	step "guest a: the link to b cut on b's side"
	wait_flag cut
	t=$(now_ms)
	wait_for 120 "a sees the link down" is partner.link down
	ok "link down after $(($(now_ms) - t)) ms: $(grep -o 'partner b down: .*' "$log" | tail -n 1)"
	wait_for 120 "a serves alone" is state solo
	ok "a serves alone: $(field reason)"
	flag seen-cut
	wait_flag relinked
	wait_for "$SLOW" "a linked again" linked
	"$ctl" --config "$conf" verify >/dev/null ||
		fail "verify after the cut: $("$ctl" --config "$conf" verify 2>&1)"
	ok "relinked after the cut, verify equal"
	flag verified-cut
fi

step "guest $me: stop"
[ "$me" = a ] || wait_flag verified-cut
flag stopping
wait_flag stopping
kill -TERM "$pid"
wait "$pid" || fail "ftvmd $me exited $? on SIGTERM"
pid=
ok "ftvmd $me stopped cleanly"
echo "rdma_two_hosts ($me): all checks passed in $(elapsed) s"
