#!/usr/bin/env bash
# Pointers held by clients of a node that fences itself are revoked
# (node/ha/HA.md, "Pointers of a fenced node are revoked"). b's clients hold
# write pointers to pages 0, 2 and 3 and two read pointers to page 1 of an
# allocation b made; the link is cut, b fences itself, a takes over and
# writes pages 0 to 2; the link comes back and a resyncs b. Releases are
# answered "pointer revoked" (-ESTALE), while b is fenced (pages 3 and 1)
# and after (0 and 1); bytes written through the old write pointers reach
# no page; a client that dies holding a revoked pointer (page 2) has it
# dropped, not released; the frames set aside go back to the pool. Before,
# the old frames went back to the pool at the resync and on to the pages it
# brought: b served the 0x5a bytes the revoked writer of page 0 put there,
# and verify found the mirror unequal.
. "$(dirname "$0")/lib.sh"

FTVM_HOLD=${FTVM_HOLD:?FTVM_HOLD must name the ftvm-hold binary}

start_pair
guid=$(alloc_written b 4)

# hold NAME PAGE ARGS...: ftvm-hold takes a pointer on b and holds it.
hold() { hold_pointer "$1" b "$guid" "${@:2}"; }

# revoked_count ID POINTERS FRAMES: status says so (pointers_revoked,
# frames.revoked), and the text line too while there are any.
revoked_count() {
	local st
	st=$(ctl "$1" --json status)
	[ "$(jq -r '"\(.pointers_revoked) \(.frames.revoked)"' <<<"$st")" = "$2 $3" ] ||
		fail "$1's status: $(jq -c '{pointers_revoked, frames}' <<<"$st"), wanted $2 pointers revoked and $3 frames"
	if [ "$2" = 0 ]; then
		! ctl "$1" status | grep -q "^revoked pointers" || fail "$1's status still lists revoked pointers"
	else
		ctl "$1" status | grep -q "^revoked pointers: $2 not released yet by their clients, $3 frames" ||
			fail "$1's status text: $(ctl "$1" status | grep revoked)"
	fi
}

# revoked NAME: its holder lets go, and b must answer that it was revoked.
revoked() {
	local rc=0
	hold_end "$1" || rc=$?
	[ "$rc" = 1 ] && grep -q "Stale file handle (.*pointer revoked: node b was fenced" \
		"$WORK/$1.err" ||
		fail "$1: not told its pointer was revoked (exit $rc): $(cat "$WORK/$1.err")"
}

hold writer 0 write --modify 0x5a
hold reader1 1 read
hold reader2 1 read
hold dies 2 write
hold early 3 write --modify 0x33
ok "b's clients hold write pointers to pages 0, 2 and 3, two read pointers to page 1"

# The drill cuts the link from a (the smaller id survives): b fences itself
# once a asks it through the store, and stays fenced until the cut ends and
# a resyncs it: seconds, for the checks below.
ctl a --json drill cut 8 --timeout 30 >"$WORK/drill.json" 2>"$WORK/drill.err" &
drill=$!
wait_for 10000 "b fenced" field_is b state fenced
grep -q "5 pointer(s) held by this node's clients revoked" "$WORK/b.log" ||
	fail "b did not revoke its clients' pointers: $(grep -i revok "$WORK/b.log")"
# (ftvmctl would move to a; a client of b alone is refused.)
rc=0
"$FTVM_HOLD" "$WORK/b.sock" "$guid" 3 read >/dev/null 2>"$WORK/fenced.err" || rc=$?
[ "$rc" = 1 ] && grep -q "node b is fenced" "$WORK/fenced.err" ||
	fail "a new pointer on the fenced b: exit $rc, $(cat "$WORK/fenced.err")"
revoked_count b 5 4 # pages 0, 2, 3 and page 1's two readers' one
revoked early
revoked reader1
revoked_count b 3 3
field_is b state fenced || fail "b is no longer fenced: the revoked releases were not tested there"
ok "b fenced: pointers revoked and counted; releases answered 'revoked', other requests 'fenced'"
wait_for 5000 "a serves alone" field_is a state solo
for p in 0 1 2; do
	head -c 4096 /dev/urandom >"$WORK/q$p"
	ctl a write "$guid" "$p" --file "$WORK/q$p" >/dev/null
done

rc=0
wait "$drill" || rc=$?
[ "$rc" = 0 ] || fail "drill cut exited $rc: $(cat "$WORK/drill.json" "$WORK/drill.err")"
wait_for 5000 "a resyncs b, both active" pair_up
revoked writer
revoked reader2
revoked_count b 1 1
for id in a b; do
	for p in 0 1 2; do
		ctl "$id" read "$guid" "$p" | cmp -s - "$WORK/q$p" ||
			fail "page $p on $id is not what a wrote while b was fenced"
	done
	ctl "$id" read "$guid" 3 | cmp -s - "$WORK/p3" || fail "page 3 on $id changed"
done
ctl a verify >/dev/null || fail "verify: $(ctl a verify 2>&1)"
ok "the revoked writers' bytes (0x33 while fenced, 0x5a after the resync) are on no page: $(ctl a verify)"

hold_kill dies
dropped() { grep -q "client gone: its revoked write pointer to $guid page 2 dropped" "$WORK/b.log"; }
wait_for 5000 "b drops the dead client's revoked pointer" dropped
ctl b read "$guid" 2 | cmp -s - "$WORK/q2" || fail "page 2 on b changed when its revoked holder died"
ctl a verify >/dev/null || fail "verify after the dead holder: $(ctl a verify 2>&1)"
revoked_count b 0 0
ok "a dead client's revoked pointer dropped, not released; status counts none left"
# Every frame set aside is back: only resident pages hold frames (over TCP:
# over RDMA the landing runs b grants hold frames too).
if [ "$E2E_TRANSPORT" = tcp ]; then
	wait_for 10000 "b's frames settled" frames_settled b
	ok "b's set-aside frames back in its pool"
fi
