#!/usr/bin/env bash
# Read and write pointers (seed 002 Figs. 6-8) from both nodes: clients on a
# and b race for the same few pages with pointers, waiting in the paging
# queue; ftvm-race checks that no writer overlapped anyone, no page was torn
# and every client got pointers. Then the mirror must be equal, and a client
# killed while holding a write pointer has it released for it.
. "$(dirname "$0")/lib.sh"

FTVM_RACE=${FTVM_RACE:?FTVM_RACE must name the ftvm-race binary}

start_pair

out=$("$FTVM_RACE" "$WORK/a.sock" "$WORK/b.sock" --clients 3 --pages 3 --seconds 3) ||
	fail "ftvm-race: $out"
ok "race: $(grep grants, <<<"$out")"
ctl a verify >/dev/null || fail "verify after the race: $(ctl a verify 2>&1)"
ok "verify after the race: $(ctl a verify)"

# One-sided pointer writes (replica/RDMA.md, "One-sided page writes"): over
# RDMA each node's modified releases wrote their blocks into the landings the
# partner gave with the locks, and each node adopted the partner's; over TCP
# no landing is offered and every block goes inline.
for id in a b; do
	sided=$(status_field "$id" page_writes.one_sided)
	inline=$(status_field "$id" page_writes.inline)
	adopted=$(status_field "$id" landings.adopted)
	refused=$(status_field "$id" landings.refused)
	counts="$sided one-sided, $inline inline, $adopted landings adopted, $refused refused"
	if [ "$E2E_TRANSPORT" = rdma ]; then
		[ "$sided" -gt 0 ] && [ "$adopted" -gt 0 ] ||
			fail "$id over rdma: no one-sided pointer writes ($counts)"
	else
		[ "$sided" = 0 ] && [ "$adopted" = 0 ] && [ "$inline" -gt 0 ] ||
			fail "$id over $E2E_TRANSPORT: want every page write inline ($counts)"
	fi
	[ "$refused" = 0 ] || fail "$id refused landed writes ($counts)"
	ok "$id after the race over $E2E_TRANSPORT: $counts"
done

# Whole-page writes (ftvmctl write) from both nodes, to pages each node owns
# and pages the other owns: over RDMA their blocks go one-sided into the
# landing runs the partner granted ahead (RDMA.md, "Whole-page write"), so
# page_writes.one_sided and landings.adopted grow on both nodes; over TCP no
# run is granted and every block goes inline.
declare -A sided0 adopted0
for id in a b; do
	sided0[$id]=$(status_field "$id" page_writes.one_sided)
	adopted0[$id]=$(status_field "$id" landings.adopted)
done
head -c 4096 /dev/urandom >"$WORK/whole"
ga=$(ctl a alloc --size 16384)
gb=$(ctl b alloc --size 16384)
for page in 0 1 2 3; do
	for id in a b; do
		for g in "$ga" "$gb"; do
			ctl "$id" write "$g" "$page" --file "$WORK/whole" >/dev/null ||
				fail "$id: write $g page $page: $(ctl "$id" write "$g" "$page" \
					--file "$WORK/whole" 2>&1)"
		done
	done
done
for id in a b; do
	sided=$(status_field "$id" page_writes.one_sided)
	adopted=$(status_field "$id" landings.adopted)
	granted=$(status_field "$id" landings.granted)
	refused=$(status_field "$id" landings.refused)
	counts="$((sided - sided0[$id])) one-sided, $((adopted - adopted0[$id])) adopted,"
	counts+=" $granted granted, $refused refused since start"
	if [ "$E2E_TRANSPORT" = rdma ]; then
		[ "$sided" -gt "${sided0[$id]}" ] && [ "$adopted" -gt "${adopted0[$id]}" ] &&
			[ "$granted" -gt 0 ] ||
			fail "$id over rdma: whole-page writes did not go one-sided ($counts)"
	else
		[ "$sided" = 0 ] && [ "$granted" = 0 ] ||
			fail "$id over $E2E_TRANSPORT: want no grants and every write inline ($counts)"
	fi
	[ "$refused" = 0 ] || fail "$id refused landed writes ($counts)"
	ok "$id whole-page writes over $E2E_TRANSPORT: $counts"
done
ctl a verify >/dev/null || fail "verify after whole-page writes: $(ctl a verify 2>&1)"
ok "verify after whole-page writes: $(ctl a verify)"
for g in "$ga" "$gb"; do
	ctl b read "$g" 3 >"$WORK/back" && cmp -s "$WORK/whole" "$WORK/back" ||
		fail "b reads $g page 3 other than written"
done
ok "whole-page writes read back equal"

# A client that dies holding a write pointer: its connection closes, the
# node releases the pointer (as modified), and others can lock the page.
guid=$(ctl a alloc --size 4096)
# A bare client (no libftvm): a write pointer, held until it is killed.
"$POKE" hold-write-pointer "$WORK/a.sock" "$guid" &
holder=$!
PIDS[holder]=$holder # killed by the cleanup if a check fails first
locked() {
	local out
	out=$(ctl b write "$guid" 0 </dev/null 2>&1) || true
	grep -q "locked" <<<"$out"
}
wait_for 5000 "the page write-locked by the holder" locked
ok "a client holds the write pointer: b's write is refused as locked"
# A whole-page write with --wait queues behind the holder instead.
(printf 'waited' | ctl b write "$guid" 0 --wait >"$WORK/waited.out" 2>&1) &
PIDS[waiter]=$!
queued() { [ "$(ctl b --json sense | jq .queues.paging)" = 1 ]; }
wait_for 5000 "the whole-page write queued on b" queued
kill -9 "$holder"
wait "$holder" 2>/dev/null || true
unset 'PIDS[holder]'
wait "${PIDS[waiter]}" || fail "the waiting write failed: $(cat "$WORK/waited.out")"
unset 'PIDS[waiter]'
[ "$(ctl a read "$guid" 0 | head -c 6)" = waited ] || fail "the waiting write's bytes are not on a"
ok "write --wait on b queued behind the holder and went through once it was gone"
unlocked() { printf 'after' | ctl b write "$guid" 0 >/dev/null 2>&1; }
wait_for 5000 "the dead client's pointer released" unlocked
grep -q "client gone: releasing its write pointer to $guid page 0" "$WORK/a.log" ||
	fail "a did not log the release of the dead client's pointer"
ctl a verify >/dev/null || fail "verify after the dead client: $(ctl a verify 2>&1)"
ok "client killed holding a write pointer: released by the node, page writable, mirror equal"

# A client that dies while its grant is in flight (the owner b is stopped for a
# moment, well inside dead_after_ms): the node finishes the call, then lets the
# pointer go with the connection, so the page does not stay locked.
FTVM_HOLD=${FTVM_HOLD:?FTVM_HOLD must name the ftvm-hold binary}
g2=$(ctl b alloc --size 4096)
kill -STOP "${PIDS[b]}"
hold_start late a "$g2" 0 write
# It asked, connected to a, which sends the request to the stopped owner at once.
wait_for 5000 "the pointer asked" hold_said late asking
wait_for 5000 "the pointer's client at a" connected a "${PIDS[late]}"
hold_kill late
kill -CONT "${PIDS[b]}"
writable() { printf 'x' | ctl a write "$g2" 0 >/dev/null 2>&1; }
wait_for 5000 "the page free again after the late grant" writable
field_is a partner.link up || fail "the link dropped: the stop was longer than meant"
ctl a verify >/dev/null || fail "verify after the late grant: $(ctl a verify 2>&1)"
ok "a client gone before its grant arrived: the grant was released, the page writable, verify equal"
