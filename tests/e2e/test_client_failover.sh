#!/usr/bin/env bash
# libftvm follows its pair through a failover (ftvm.h, "Failover"): a client
# made with ftvm_connect_pair() writes through a kill -9 of its node; the
# write in flight at the kill fails with a clear "outcome unknown" error (it
# is made to wait in a's paging queue, so the kill always finds it in
# flight), the client moves to b, writes on by GUID, and every acknowledged
# write reads back. A client started while a is down connects to b; a
# restarted a resyncs and verify says equal; the first client's pointer taken
# on a is then refused on b, and a new one maps b's pool; with both active a
# new client prefers a again. Last, a client of b sees b fence itself when
# the link is cut (a fenced refusal: its writes go on on a, sent again), and
# a client of a hung a moves to b when its call times out and b serves alone.
. "$(dirname "$0")/lib.sh"

FTVM_FAILOVER_CLIENT=${FTVM_FAILOVER_CLIENT:?FTVM_FAILOVER_CLIENT must name the ftvm-failover-client binary}
FTVM_HOLD=${FTVM_HOLD:?FTVM_HOLD must name the ftvm-hold binary}
COUNT=200
BLOCKED=100 # the write of this seq waits for a page lock when a dies

start_pair

# lines PATTERN: how many lines of the client's output match.
lines() { grep -c -- "$1" "$WORK/client.out" || true; }

paging_waits() {
	[ "$(ctl a --json sense 2>/dev/null | jq -r .queues.paging)" -ge 1 ] 2>/dev/null
}

mkfifo "$WORK/client.in" "$WORK/holder.in"
"$FTVM_FAILOVER_CLIENT" --pace-ms 2 --go-on-stdin --pointer "$WORK/a.sock" "$WORK/b.sock" \
	"$COUNT" <"$WORK/client.in" >"$WORK/client.out" 2>&1 &
PIDS[client]=$!
exec {client_in}>"$WORK/client.in"
wait_for 5000 "the client allocated" grep -q '^alloc ' "$WORK/client.out"
grep -qx "connected to $WORK/a.sock" "$WORK/client.out" ||
	fail "with both nodes active the client did not take a: $(head -n 1 "$WORK/client.out")"
guid=$(awk '/^alloc /{print $2}' "$WORK/client.out")

# Another client of a holds page BLOCKED: the write of seq BLOCKED waits.
"$FTVM_HOLD" "$WORK/a.sock" "$guid" "$BLOCKED" write --release-after-stdin \
	<"$WORK/holder.in" >"$WORK/holder.out" 2>&1 &
PIDS[holder]=$!
exec {holder_in}>"$WORK/holder.in"
wait_for 5000 "a client of a holding page $BLOCKED" grep -q '^held ' "$WORK/holder.out"
echo go >&"$client_in"
wait_for 10000 "writes acked up to seq $((BLOCKED - 1))" \
	grep -q "^acked seq $((BLOCKED - 1)) " "$WORK/client.out"
wait_for 4000 "the write of seq $BLOCKED waiting in a's paging queue" paging_waits
acked_before=$(lines '^acked ')

# ---- kill -9 a, the client's node, with the write of seq BLOCKED in flight ----
t0=$(now_ms)
kill -9 "${PIDS[a]}"
wait "${PIDS[a]}" 2>/dev/null || true
unset 'PIDS[a]'
exec {holder_in}>&-
wait "${PIDS[holder]}" 2>/dev/null || true # its node died under it
unset 'PIDS[holder]'
wait_for 30000 "the client checked its writes" grep -q '^checked ' "$WORK/client.out"
grep -v '^acked ' "$WORK/client.out" | sed 's/^/  client: /'

grep -qx "checked $COUNT lost 0" "$WORK/client.out" ||
	fail "not every acknowledged write read back: $(grep '^checked\|^lost' "$WORK/client.out")"
moved=$(grep -m1 '^now on ' "$WORK/client.out") || fail "the client never moved"
[[ "$moved" == "now on $WORK/b.sock "* ]] || fail "the client moved elsewhere: $moved"
t_moved=$(sed -n 's/.* t=\([0-9]*\) .*/\1/p' <<<"$moved")
[ "$(lines '^now on ')" = 1 ] || fail "the client moved more than once: $(grep '^now on' "$WORK/client.out")"
# The one error of an unknown outcome: the write in flight at the kill, and it
# says what happened. Beside it, only refusals b made before doing anything
# (partner unavailable while it decides who serves), which the client retries.
others=$(grep '^error ' "$WORK/client.out" | grep -v "went away during the call" |
	grep -v "partner unavailable: a page write is mirrored before it completes" || true)
[ -z "$others" ] || fail "unexpected failed calls: $others"
[ "$(lines 'went away during the call')" = 1 ] ||
	fail "want exactly one call of unknown outcome, got: $(grep '^error' "$WORK/client.out")"
err=$(grep '^error .*went away during the call' "$WORK/client.out")
[[ "$err" == "error seq $BLOCKED: "* ]] || fail "the failed call is not the write in flight: $err"
for want in "node at $WORK/a.sock went away during the call" \
	"the client now talks to $WORK/b.sock" "outcome is unknown"; do
	grep -qF "$want" <<<"$err" || fail "the in-flight error does not say '$want': $err"
done
# Every seq acked exactly once, the in-flight one after the move.
[ "$(lines '^acked ')" = "$COUNT" ] || fail "$(lines '^acked ') acks for $COUNT writes"
after=$(sed -n '/^now on /,$p' "$WORK/client.out" | grep -c '^acked ')
[ "$after" -ge $((COUNT - BLOCKED)) ] || fail "only $after writes acked after the move"
ok "kill -9 a: $acked_before writes acked before, $after after; the write in flight failed clearly; the client was on b $((t_moved - t0)) ms after the kill; $COUNT checked, 0 lost"

# ---- a client started while a is down connects to b ----
"$FTVM_FAILOVER_CLIENT" "$WORK/a.sock" "$WORK/b.sock" 20 >"$WORK/client2.out" 2>&1 ||
	fail "a client started with a down failed: $(cat "$WORK/client2.out")"
grep -qx "connected to $WORK/b.sock" "$WORK/client2.out" ||
	fail "with a down the client did not take b: $(head -n 1 "$WORK/client2.out")"
grep -qx "checked 20 lost 0" "$WORK/client2.out" || fail "$(tail -n 1 "$WORK/client2.out")"
ok "with a down from the start, ftvm_connect_pair() took b: 20 writes, 0 lost"

# ---- a comes back: resynced, equal ----
start_node a
wait_for 5000 "a resynced and the pair active" pair_up
ctl a verify >/dev/null || fail "not equal after the resync: $(ctl a verify 2>&1)"
ok "a restarted, resynced, verify equal"

# ---- the first client's pointers: the one taken on a is refused on b ----
echo go >&"$client_in"
exec {client_in}>&-
rc=0
wait "${PIDS[client]}" || rc=$?
unset 'PIDS[client]'
sed -n '/^checked /,$p' "$WORK/client.out" | sed 1d | sed 's/^/  client: /'
[ "$rc" = 0 ] || fail "the client exited $rc"
grep -q "^stale pointer release refused: r=-22 " "$WORK/client.out" ||
	fail "the pointer taken on a was not refused on b"
grep -qx "pointer on $WORK/b.sock page 0: seq 0's bytes" "$WORK/client.out" ||
	fail "no good pointer on b after the move"
ok "the pointer held on a was refused on b (-EINVAL); a new one maps b's pool and shows the acked bytes"

# ---- both active: the client prefers a again ----
"$FTVM_FAILOVER_CLIENT" "$WORK/a.sock" "$WORK/b.sock" 5 >"$WORK/client3.out" 2>&1 ||
	fail "a client of the whole pair failed: $(cat "$WORK/client3.out")"
grep -qx "connected to $WORK/a.sock" "$WORK/client3.out" ||
	fail "with both active the client did not take a: $(head -n 1 "$WORK/client3.out")"
ok "both active: a new client took a again"

# ---- the link cut under a client of b: b fences itself, the client moves ----
# node/ha/HA.md: the larger node id yields. b refuses the client's writes
# (partner unavailable while it decides, then fenced); a fenced refusal is
# sent again to a once a serves alone, so nothing fails with "outcome unknown".
"$FTVM_FAILOVER_CLIENT" --pace-ms 5 --cut-at 50 --cut-ms 1500 "$WORK/b.sock" "$WORK/a.sock" \
	150 >"$WORK/client4.out" 2>&1 || fail "the client of a cut pair failed: $(cat "$WORK/client4.out")"
grep -v '^acked ' "$WORK/client4.out" | sed 's/^/  client: /'
grep -qx "connected to $WORK/b.sock" "$WORK/client4.out" || fail "the client did not take b first"
grep -qx "checked 150 lost 0" "$WORK/client4.out" || fail "$(tail -n 1 "$WORK/client4.out")"
[ "$(grep -c '^now on ' "$WORK/client4.out")" = 1 ] &&
	grep -q "^now on $WORK/a.sock " "$WORK/client4.out" || fail "the client did not move to a once"
if grep '^error ' "$WORK/client4.out" | grep -qv ': r=-113 '; then
	fail "a failure other than partner unavailable: $(grep '^error ' "$WORK/client4.out")"
fi
wait_for 10000 "b resynced after the cut" pair_up
ctl b verify >/dev/null || fail "not equal at the end: $(ctl b verify 2>&1)"
ok "link cut: b fenced itself, the client moved to a after $(grep -c '^error ' "$WORK/client4.out") partner-unavailable refusals, 150 checked, 0 lost; b resynced, verify equal"

# ---- a hung node (SIGSTOP): the call times out, b serves alone, the client moves ----
"$FTVM_FAILOVER_CLIENT" --pace-ms 5 "$WORK/a.sock" "$WORK/b.sock" 300 >"$WORK/client5.out" 2>&1 &
PIDS[client]=$!
wait_for 10000 "writes acked on a" grep -q '^acked seq 100 ' "$WORK/client5.out"
grep -qx "connected to $WORK/a.sock" "$WORK/client5.out" || fail "the client did not take a"
kill -STOP "${PIDS[a]}"
wait_for 30000 "the client checked its writes" grep -q '^checked ' "$WORK/client5.out"
kill -CONT "${PIDS[a]}"
rc=0
wait "${PIDS[client]}" || rc=$?
unset 'PIDS[client]'
grep -v '^acked ' "$WORK/client5.out" | sed 's/^/  client: /'
[ "$rc" = 0 ] || fail "the client of a hung node exited $rc"
grep -qx "checked 300 lost 0" "$WORK/client5.out" || fail "$(tail -n 1 "$WORK/client5.out")"
[ "$(grep -c '^error ' "$WORK/client5.out")" = 1 ] ||
	fail "want one failed call, got: $(grep '^error ' "$WORK/client5.out")"
err=$(grep '^error ' "$WORK/client5.out")
for want in ": r=-110 " "node at $WORK/a.sock did not answer" "node at $WORK/b.sock serves alone" \
	"outcome is unknown"; do
	grep -qF -- "$want" <<<"$err" || fail "the timed-out call does not say '$want': $err"
done
grep -q "^now on $WORK/b.sock " "$WORK/client5.out" || fail "the client did not move to b"
wait_for 10000 "a fenced itself and was resynced" pair_up
ctl a verify >/dev/null || fail "not equal after the hang: $(ctl a verify 2>&1)"
ok "SIGSTOP a: the call in flight timed out clearly, the client moved to b, 300 checked, 0 lost; a resynced, verify equal"
