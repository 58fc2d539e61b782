#!/usr/bin/env bash
# Fairness of the paging queue across the pair (node/vmm/VMM.md, "Fairness across
# the pair"): requests for a page are served in the order they asked,
# whichever node they came from; a waiting writer is not overtaken by readers;
# a waiting client that dies does not hold the page up.
. "$(dirname "$0")/lib.sh"

FTVM_HOLD=${FTVM_HOLD:?FTVM_HOLD must name the ftvm-hold binary}

write_pair_configs
# No failover here: a loaded machine's pause must not look like a dead node.
sed -i 's/^dead_after_ms = .*/dead_after_ms = 3000/' "$WORK/a.conf" "$WORK/b.conf"
start_node a
start_node b
wait_for 5000 "pair linked" pair_up

paging() { ctl "$1" --json sense | jq .queues.paging; }
paging_is() { [ "$(paging "$1")" = "$2" ]; }

# hold ID GUID MODE NAME: ftvm-hold takes a MODE pointer to GUID page 0 on ID
# and keeps it until release NAME. Its standard input is a fifo that only a
# feeder process writes, which ends when the file NAME.go appears (a writer
# opened here would be inherited by every later background job).
hold() {
	local id=$1 guid=$2 mode=$3 name=$4
	rm -f "$WORK/$name.go" "$WORK/$name.in"
	mkfifo "$WORK/$name.in"
	(until [ -e "$WORK/$name.go" ]; do sleep 0.01; done) >"$WORK/$name.in" &
	PIDS[$name-feed]=$!
	"$FTVM_HOLD" "$WORK/$id.sock" "$guid" 0 "$mode" --release-after-stdin \
		<"$WORK/$name.in" >"$WORK/$name.out" 2>&1 &
	PIDS[$name]=$!
	wait_for 5000 "$name holds a $mode pointer on $id" grep -q "^held" "$WORK/$name.out"
}
release() {
	local name=$1
	touch "$WORK/$name.go"
	wait "${PIDS[$name]}" || fail "$name: $(cat "$WORK/$name.out")"
	wait "${PIDS[$name-feed]}" || true
	unset "PIDS[$name]" "PIDS[$name-feed]"
}
# write_bg ID GUID TEXT NAME: a whole-page write of TEXT that waits for the lock.
write_bg() {
	(printf '%s' "$3" | ctl "$1" write "$2" 0 --wait >"$WORK/$4.out" 2>&1) &
	PIDS[$4]=$!
}
write_done() {
	wait "${PIDS[$1]}" || fail "the waiting write $1 failed: $(cat "$WORK/$1.out")"
	unset "PIDS[$1]"
}

# 1. b asks first, then a (the owner): b goes first, so a's bytes are last.
guid=$(ctl a alloc --size 4096)
hold a "$guid" write holder
write_bg b "$guid" from-b wb
wait_for 5000 "b's write waiting on b, its ticket in a's queue" \
	eval 'paging_is b 1 && paging_is a 1'
write_bg a "$guid" from-a wa
wait_for 5000 "a's own write queued behind b's ticket" paging_is a 2
release holder
write_done wb
write_done wa
[ "$(ctl a read "$guid" 0 | head -c 6)" = from-a ] ||
	fail "a's write went before b's, which asked first (page holds '$(ctl a read "$guid" 0 | head -c 6)')"
ok "b asked first, a (the owner) second: b's write went first"

# 2. The other way round: the owner's earlier request stays ahead of b's.
hold a "$guid" write holder
write_bg a "$guid" from-a wa
wait_for 5000 "a's write queued" paging_is a 1
write_bg b "$guid" from-b wb
wait_for 5000 "b's ticket behind a's write" eval 'paging_is a 2 && paging_is b 1'
release holder
write_done wa
write_done wb
[ "$(ctl b read "$guid" 0 | head -c 6)" = from-b ] ||
	fail "b's write went before a's, which asked first"
ok "a asked first, b second: a's write went first"

# 3. Readers do not overtake a waiting writer, on the owner or from b.
hold a "$guid" read reader
write_bg a "$guid" writer-a wa
wait_for 5000 "the writer waiting behind the read pointer" paging_is a 1
for id in a b; do
	out=$("$FTVM_HOLD" "$WORK/$id.sock" "$guid" 0 read 2>&1) &&
		fail "a new read pointer on $id was granted while a writer waited: $out"
	grep -q "awaited by 1 earlier request" <<<"$out" ||
		fail "the read pointer on $id was refused for another reason: $out"
	ok "a new read pointer on $id is refused while a writer waits: $out"
done
release reader
write_done wa
ok "the writer went once the read pointer was released"

# 4. A waiting client that dies: its node keeps its request until its turn
# (the connection drains, node/client_server.c), is granted it for nobody and
# lets it go at once; the owner's own write behind it then goes on.
hold a "$guid" write holder
"$FTVM_HOLD" "$WORK/b.sock" "$guid" 0 write --wait >"$WORK/gone.out" 2>&1 &
gone=$!
PIDS[gone]=$gone
wait_for 5000 "b's waiting pointer has a ticket on a" eval 'paging_is a 1 && paging_is b 1'
kill -9 "$gone"
wait "$gone" 2>/dev/null || true
unset 'PIDS[gone]'
write_bg a "$guid" after-gone wa
wait_for 5000 "a's write queued behind b's ticket" paging_is a 2
t=$(now_ms)
release holder
write_done wa
ok "a's write went $(($(now_ms) - t)) ms after the release, behind the dead client's turn"
[ "$(ctl b read "$guid" 0 | head -c 10)" = after-gone ] || fail "a's write is not on b"
wait_for 5000 "both paging queues empty" eval 'paging_is a 0 && paging_is b 0'
ctl a verify >/dev/null || fail "verify: $(ctl a verify 2>&1)"
ok "the dead client's turn passed; both queues are empty and verify says equal"
