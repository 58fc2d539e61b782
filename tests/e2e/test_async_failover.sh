#!/usr/bin/env bash
# libftvm's asynchronous page calls through a failover (ftvm.h, "Asynchronous
# calls", "Failover"), with tests/async/async_failover.c:
#  - a ftvm_connect_pair() client keeps 32 writes in flight on a while a is
#    killed with kill -9. One of them waits in a's paging queue for a page
#    another client holds, so the kill always finds a write that left and
#    got no answer. The client moves to b once; every write completes
#    exactly once; those that failed say why, the in-flight ones "the call's
#    outcome is unknown"; every page holds the bytes of its last write that
#    completed OK, or of a later one of unknown outcome; the completion
#    descriptor is the same one after the move.
#  - a restarted, resynced: a client submits 128 writes of one 64 KiB page
#    that another client of a holds. a reads 64 requests and stops reading;
#    the socket holds some more, and the rest never leave the client. kill
#    -9 a: the requests that left fail as of unknown outcome, and those that
#    had not wholly left are sent to b and complete OK there (a answered
#    none: its holder kept the page until it died). The page holds the
#    bytes of one of the OK writes, the last, or a later unknown one.
. "$(dirname "$0")/lib.sh"

FTVM_ASYNC_FAILOVER=${FTVM_ASYNC_FAILOVER:?FTVM_ASYNC_FAILOVER must name the ftvm-async-failover binary}
FTVM_HOLD=${FTVM_HOLD:?FTVM_HOLD must name the ftvm-hold binary}
HELD=40 # the page another client of a holds in the first part

write_pair_configs
# Writes waiting for a held page wait for the kill, not for a timeout.
sed -i "/^\[failover\]/a request_timeout_ms = $((60000 * E2E_TIME_SCALE))" "$WORK/a.conf" "$WORK/b.conf"
printf '[policy big]\nblock_size = 64K\n' | tee -a "$WORK/a.conf" >>"$WORK/b.conf"
start_node a
start_node b
wait_for 5000 "pair linked" pair_up

paging_at_least() {
	[ "$(ctl a --json sense 2>/dev/null | jq -r .queues.paging)" -ge "$1" ] 2>/dev/null
}

kill_a() {
	kill -9 "${PIDS[a]}"
	wait "${PIDS[a]}" 2>/dev/null || true
	unset 'PIDS[a]'
}

# run_client NAME ARGS...: the client in the background (PIDS[NAME]), its
# output in $WORK/NAME.out; it allocates, then waits for a line on its stdin
# (client_go NAME) before its first write.
run_client() {
	local name=$1
	shift
	mkfifo "$WORK/$name.in"
	"$FTVM_ASYNC_FAILOVER" --go-on-stdin "$@" "$WORK/a.sock" "$WORK/b.sock" \
		<"$WORK/$name.in" >"$WORK/$name.out" 2>&1 &
	PIDS[$name]=$!
	exec {CLIENT_IN}>"$WORK/$name.in"
	wait_for 5000 "$name allocated" grep -q '^alloc ' "$WORK/$name.out"
	grep -qx "connected to $WORK/a.sock" "$WORK/$name.out" ||
		fail "with both nodes active $name did not take a: $(head -n 1 "$WORK/$name.out")"
	GUID=$(awk '/^alloc /{print $2}' "$WORK/$name.out")
}

# client_end NAME: waits for the client's end; its exit status in RC.
client_end() {
	local name=$1
	wait_for 90000 "$name checked its pages" grep -q '^checked ' "$WORK/$name.out"
	exec {CLIENT_IN}>&-
	RC=0
	wait "${PIDS[$name]}" || RC=$?
	unset "PIDS[$name]"
	grep -v '^progress \|^failed ' "$WORK/$name.out" | sed "s/^/  $name: /"
}

# failures NAME: its failed lines that do not say the outcome is unknown.
known_failures() { grep '^failed ' "$WORK/$1.out" | grep -v 'outcome is unknown' || true; }

# ---- 32 in flight through kill -9 of a ----
run_client c1 --window 32 --pages 256 --after-move 300
hold_pointer holder a "$GUID" "$HELD" write
echo go >&"$CLIENT_IN"
wait_for 20000 "1000 writes completed on a" grep -q '^progress completed 1000$' "$WORK/c1.out"
wait_for 4000 "a write of page $HELD waiting in a's paging queue" paging_at_least 1
t0=$(now_ms)
kill_a
hold_end holder || true # its node died under it
client_end c1
[ "$RC" = 0 ] || fail "the client exited $RC: $(grep '^wrong\|^lost' "$WORK/c1.out")"
grep -qx "checked 256 pages lost 0" "$WORK/c1.out" || fail "$(grep '^checked' "$WORK/c1.out")"
grep -qx "fd same" "$WORK/c1.out" || fail "the completion descriptor changed with the move"
[ "$(grep -c '^now on ' "$WORK/c1.out")" = 1 ] || fail "moved $(grep -c '^now on ' "$WORK/c1.out") times"
grep -q "^now on $WORK/b.sock " "$WORK/c1.out" || fail "the client moved elsewhere: $(grep '^now on' "$WORK/c1.out")"
t_moved=$(sed -n 's/^now on .* t=\([0-9]*\) .*/\1/p' "$WORK/c1.out")
unknown=$(grep '^failed ' "$WORK/c1.out" | grep -c 'outcome is unknown' || true)
[ "$unknown" -ge 1 ] || fail "no write failed as of unknown outcome: $(grep '^failed' "$WORK/c1.out" | head)"
err=$(grep "^failed seq $HELD page $HELD: " "$WORK/c1.out") ||
	fail "the write of the held page did not fail: $(grep '^failed' "$WORK/c1.out" | head)"
for want in "r=-104 " "node at $WORK/a.sock went away during the call" \
	"the client now talks to $WORK/b.sock" "the call's outcome is unknown, check or retry"; do
	grep -qF -- "$want" <<<"$err" || fail "the held page's write does not say '$want': $err"
done
# Beside those, only refusals b made while it took over, which applied nothing.
others=$(known_failures c1 | grep -v "r=-113 (partner unavailable) from_node=1" || true)
[ -z "$others" ] || fail "unexpected failures: $others"
summary=$(grep '^summary ' "$WORK/c1.out")
ok "kill -9 a with 32 writes in flight: on b $((t_moved - t0)) ms after the kill; $unknown failed of unknown outcome (the held page's among them), $(known_failures c1 | wc -l) refused by b while it took over; each write completed once, 256 pages checked, 0 lost ($summary)"

# ---- requests that had not wholly left go to the survivor ----
start_node a
wait_for 10000 "a resynced and the pair active" pair_up
run_client c2 --window 128 --pages 1 --total 128 --policy big --block-size 65536
hold_pointer holder a "$GUID" 0 write
echo go >&"$CLIENT_IN"
wait_for 10000 "the client submitted its 128 writes" grep -qx 'submitted 128' "$WORK/c2.out"
# a stops reading a client at 64 calls unanswered (node/client_server.c).
wait_for 10000 "64 writes waiting in a's paging queue" paging_at_least 64
kill_a
hold_end holder || true
client_end c2
[ "$RC" = 0 ] || fail "the second client exited $RC: $(grep '^wrong\|^lost' "$WORK/c2.out")"
grep -qx "checked 1 pages lost 0" "$WORK/c2.out" || fail "$(grep '^checked' "$WORK/c2.out")"
grep -q "^now on $WORK/b.sock " "$WORK/c2.out" || fail "the second client did not move to b"
read -r ok_n unknown_n before_n < <(awk '/^summary /{print $5, $9, $11}' "$WORK/c2.out")
[ "$before_n" = 0 ] || fail "$before_n writes completed OK before the move, while the page was held"
[ "$ok_n" -ge 1 ] || fail "no write completed OK on b: $(grep '^summary' "$WORK/c2.out")"
[ "$((ok_n + unknown_n))" = 128 ] || fail "failures other than of unknown outcome: $(known_failures c2 | head)"
[ "$unknown_n" -ge 64 ] || fail "only $unknown_n of unknown outcome: a had read 64"
ok "128 writes of a held 64 KiB page, kill -9 a: $unknown_n had left (outcome unknown), $ok_n had not wholly left and were sent to b, where they completed OK; the page holds an OK write's bytes"
