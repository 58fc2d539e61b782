#!/usr/bin/env bash
# A node stopped (SIGTERM) while a request of its to the partner is still
# unanswered exits cleanly: the request fails with "shutting down" while the
# memory manager that made it still exists (under ASan a use after free
# showed here), and the client is told. The partner is hung (SIGSTOP) so the
# request stays pending; the failure detector is widened so that the link
# is not declared lost first.
. "$(dirname "$0")/lib.sh"

DEAD_AFTER_MS=5000
start_pair
guid=$(ctl a alloc --size 4096)

kill -STOP "${PIDS[b]}"
echo pending | ctl a write "$guid" 0 >"$WORK/write.out" 2>&1 &
writer=$!
# The write's client is connected and not done: its request went to b.
write_in_flight() {
	[ "$(grep -c 'uid 0 connected' "$WORK/a.log")" -gt "$(grep -c ': done' "$WORK/a.log")" ]
}
wait_for 3000 "a has the write in flight to the hung b" write_in_flight

kill -TERM "${PIDS[a]}"
rc=0
wait "${PIDS[a]}" || rc=$?
unset 'PIDS[a]'
[ "$rc" = 0 ] || fail "ftvmd a exited with $rc on SIGTERM with a request pending"
grep -q "AddressSanitizer\|runtime error" "$WORK/a.log" && fail "a's log shows a memory error at stop"
ok "SIGTERM with a request pending at the partner: clean exit 0"

wrc=0
wait "$writer" || wrc=$?
[ "$wrc" != 0 ] || fail "the pending write reported success although a stopped"
ok "the client's write failed ($wrc): $(tail -n 1 "$WORK/write.out")"

