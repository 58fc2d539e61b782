#!/usr/bin/env bash
# What one client, or many, can take from a node (issue 19, "Bounded
# resources"; node/vmm/VMM.md, "Who may do what"):
#  - [client] max_clients: the connection beyond it is refused with a reason
#    ftvmctl prints (exit 1), and a place that frees up is taken again;
#  - [client] output_limit: a client that floods ReadPage and never reads
#    its replies is dropped with a log line naming its pid and uid, the
#    node's memory (VmHWM, its peak RSS) stays near the limit, and the node
#    serves on;
#  - an allocation waiting for room in the store is dropped when its client
#    goes.
. "$(dirname "$0")/lib.sh"

FTVM_RAW_CLIENT=${FTVM_RAW_CLIENT:?FTVM_RAW_CLIENT must name the ftvm-raw-client binary}
# Replies a flood asks for: 4 KiB each, 800 MiB if they were all kept.
FLOOD=${FTVM_E2E_FLOOD:-200000}
# The node may grow this much past its RSS before the flood: the 1 MiB limit,
# the requests it has read and not yet answered, and the allocator's slack.
GROWTH_MAX_KB=16384

write_pair_configs
# A small pool and so a small store: 4M partitions, filled in a moment.
sed -i 's/^size = 16M$/size = 2M/' "$WORK/a.conf" "$WORK/b.conf"
printf '[client]\nmax_clients = 2\noutput_limit = 1M\n' >>"$WORK/a.conf"
start_node a
start_node b
wait_for 5000 "pair linked" pair_up

# raw_start NAME ARGS...: ftvm-raw-client on a's socket with ARGS in the
# background (PIDS[NAME]), its output in $WORK/NAME.out, holding its
# connection until raw_end NAME (its stdin is a fifo only a sleep writes).
raw_start() {
	local name=$1
	shift
	rm -f "$WORK/$name.in"
	mkfifo "$WORK/$name.in"
	"$FTVM_RAW_CLIENT" "$WORK/a.sock" "$@" <"$WORK/$name.in" >"$WORK/$name.out" 2>&1 &
	PIDS[$name]=$!
	sleep infinity >"$WORK/$name.in" &
	PIDS[$name.pipe]=$!
}
raw_end() {
	local pid=${PIDS[$1]}
	kill "${PIDS[$1.pipe]}"
	wait "${PIDS[$1.pipe]}" 2>/dev/null || true
	unset "PIDS[$1.pipe]"
	wait_for 5000 "$1 to exit" pid_gone "$pid"
	wait "$pid" 2>/dev/null || true
	unset "PIDS[$1]"
}
said() { grep -q "$2" "$WORK/$1.out" 2>/dev/null; }
# kb PID FIELD: a /proc/PID/status field in kB.
kb() { awk -v f="$2:" '$1 == f { print $2 }' "/proc/$1/status"; }

# ---- max_clients ----
raw_start c1 flood none 0 0
raw_start c2 flood none 0 0
wait_for 5000 "two clients connected" said c1 "^sent 0"
wait_for 5000 "two clients connected" said c2 "^sent 0"
# ftvmctl's own connection is accepted after theirs (one backlog, in order).
wait_for 5000 "a's log of two clients" grep -q "client pid .* uid 0 connected" "$WORK/a.log"
rc=0
out=$(ctl a status 2>&1) || rc=$?
[ "$rc" = 1 ] || fail "a third client got exit $rc, wanted 1: $out"
grep -q "the node serves at most 2 clients at once (\[client\] max_clients); try again later" <<<"$out" ||
	fail "a third client was told '$out'"
ok "a third client is refused: $out"
grep -q "refused: 2 clients connected, \[client\] max_clients is 2" "$WORK/a.log" ||
	fail "a did not log the refusal"
raw_end c1
wait_for 5000 "a place again once one left" ctl_ok a
ok "once one left, a third client is served"
raw_end c2

# ---- output_limit ----
guid=$(ctl a alloc --size 4K)
ctl a write "$guid" 0 --file "$(fill 3)" >/dev/null
ctl a read "$guid" 0 | cmp -s - "$(fill 3)" || fail "page 0 reads back other bytes"
pid=${PIDS[a]}
rss_before=$(kb "$pid" VmRSS)
hwm_before=$(kb "$pid" VmHWM)
raw_start flood flood "$guid" 0 "$FLOOD"
wait_for 30000 "a drops the flood" grep -q "replies unread, at \[client\] output_limit (1048576), dropping it" "$WORK/a.log"
wait_for 30000 "the flood client to finish sending" said flood "^dropped after\|^sent"
line=$(grep "output_limit (1048576), dropping it" "$WORK/a.log" | head -n 1)
grep -q "client pid ${PIDS[flood]} uid 0:" <<<"$line" || fail "the drop's log line names another client: $line"
hwm=$(kb "$pid" VmHWM)
rss=$(kb "$pid" VmRSS)
ok "a dropped the flood: $line; the client: $(cat "$WORK/flood.out")"
ok "a's memory: VmRSS ${rss_before} kB before, VmHWM ${hwm_before} kB before and ${hwm} kB after (+$((hwm - rss_before)) kB), VmRSS ${rss} kB after"
[ $((hwm - rss_before)) -le "$GROWTH_MAX_KB" ] ||
	fail "a grew by $((hwm - rss_before)) kB under the flood, more than $GROWTH_MAX_KB"
raw_end flood
ctl a read "$guid" 0 | cmp -s - "$(fill 3)" || fail "a does not serve page 0 after the flood"
[ "$(ctl a --json verify | jq .equal)" = true ] || fail "verify is not equal after the flood"
ok "a serves on, and verify is equal"

# An allocation waiting for room in the store is dropped when its client
# goes, not made later for nobody.
big=$(ctl a alloc --size 3M)
"$FTVMCTL" --config "$WORK/a.conf" alloc --size 2M >"$WORK/waiter.out" 2>&1 &
waiter=$!
waiting_for_space() { [ "$(ctl a --json sense | jq .queues.paging)" = 1 ]; }
wait_for 5000 "the 2M allocation waiting for room" waiting_for_space
kill -9 "$waiter"
wait "$waiter" 2>/dev/null || true
nothing_waits() { [ "$(ctl a --json sense | jq .queues.paging)" = 0 ]; }
wait_for 2000 "a to drop the gone client's allocation (request_timeout_ms is 5000)" nothing_waits
ctl a free "$big"
[ "$(ctl a --json list | jq --arg g "$guid" 'map(select(.guid != $g)) | length')" = 0 ] ||
	fail "an allocation was made after its client went: $(ctl a --json list)"
ok "an allocation waiting for room is dropped when its client goes"
