#!/usr/bin/env bash
# Pointers held on the survivor while its partner is resynced (node/ha/HA.md,
# "Solo and rejoin"): b is killed and comes back while clients of a hold
# pointers granted before (mirrored to the old b) and while a served alone
# (never mirrored). Once b is resynced each is released: a write pointer
# modified, a read pointer, and one whose client dies holding it (released
# for it as modified). As soon as b serves, it refuses to read a page a's
# client holds a write pointer to. Every release must succeed on both
# nodes: b reads what the holders wrote and verify finds the mirror equal.
# Before the survivor mirrored its holdings behind the snapshot, b read
# those pages beside the writer, refused the releases ("WritePage ... which
# nobody has write-locked"), a kept the bytes alone and the mirror differed.
# A block a holder has written into and not released yet does not go with
# the resync (it is not the page's acknowledged contents): before, b refused
# the resync ("ResyncPage ... checksum differs") until the holder let go.
. "$(dirname "$0")/lib.sh"

FTVM_HOLD=${FTVM_HOLD:?FTVM_HOLD must name the ftvm-hold binary}

start_pair
guid=$(alloc_written a 4)

# hold NAME PAGE ARGS...: ftvm-hold takes a pointer on a and holds it.
hold() { hold_pointer "$1" a "$guid" "${@:2}"; }

# release NAME: its holder lets go and must say it released.
release() {
	local rc=0
	hold_end "$1" || rc=$?
	[ "$rc" = 0 ] && hold_said "$1" released ||
		fail "$1's release failed (exit $rc): $(cat "$WORK/$1.err")"
}

hold before 0 write --modify 0x11
hold reader 2 read
ok "pointers held with b linked: write on page 0, read on page 2"

kill -9 "${PIDS[b]}"
wait "${PIDS[b]}" 2>/dev/null || true
unset 'PIDS[b]'
wait_for $((DEAD_AFTER_MS + 3000)) "a takes over" field_is a state solo
hold alone 1 write --modify 0x22
hold dies 3 write
# An allocation made alone goes whole with the resync, its page under a
# write pointer that has already written into the block.
g2=$(ctl a alloc --size 4096)
hold_pointer scribbler a "$g2" 0 write --scribble 0x33 --modified
ok "a alone: write pointers granted on pages 1 and 3, and on a new allocation's page, written into"

start_node b
wait_for 10000 "b resynced and the pair active" pair_up
grep -q "pointer(s) held by this node's clients mirrored to b" "$WORK/a.log" ||
	fail "a did not mirror its clients' pointers behind the snapshot"
ok "b back: $(status_field a reason); $(grep -o 'resync: [0-9]* pointer(s) held.*' "$WORK/a.log")"
# The locks reach b ahead of ResyncEnd, so b never serves a reader beside a
# writer of a.
expect_fail b "write-locked" read "$guid" 0
expect_fail b "write-locked" read "$guid" 1

release before
release alone
release reader
release scribbler
hold_kill dies
released_for_gone() { grep -q "client gone: releasing its write pointer to $guid page 3" "$WORK/a.log"; }
wait_for 5000 "a releases the dead client's pointer" released_for_gone
# Its release is mirrored: b's copy of page 3 moves to a's version.
page3_equal() { ctl a verify >/dev/null 2>&1; }
wait_for 5000 "verify equal after the dead client's release" page3_equal
! grep -q "released here only" "$WORK/a.log" ||
	fail "a let a pointer go alone: $(grep 'released here only' "$WORK/a.log")"
ok "released after the resync: write (granted linked), write (granted alone), read, and a dead client's write"

for id in a b; do
	ctl "$id" read "$guid" 0 | cmp -s - "$(fill 17)" ||
		fail "page 0 on $id is not the holder's 0x11 bytes"
	ctl "$id" read "$guid" 1 | cmp -s - "$(fill 34)" ||
		fail "page 1 on $id is not the holder's 0x22 bytes"
	ctl "$id" read "$guid" 2 | cmp -s - "$WORK/p2" || fail "page 2 on $id changed under a read pointer"
	ctl "$id" read "$guid" 3 | cmp -s - "$WORK/p3" || fail "page 3 on $id is not as written"
	ctl "$id" read "$g2" 0 | cmp -s - "$(fill 51)" ||
		fail "the new allocation's page on $id is not the holder's 0x33 bytes"
done
ctl a verify >/dev/null || fail "verify: $(ctl a verify 2>&1)"
ok "both nodes read what the holders wrote; verify: $(ctl a verify)"
