#!/usr/bin/env bash
# A partner killed with SIGKILL, or hung with SIGSTOP, is reported down within
# dead_after_ms plus a margin and taken over; when it comes back it is
# resynced (a hung one fences itself first) and the link is restored.
. "$(dirname "$0")/lib.sh"

MARGIN_MS=400

start_pair

# kill -9: the kernel resets the connection, so a knows at once.
t0=$(now_ms)
kill -9 "${PIDS[b]}"
wait "${PIDS[b]}" 2>/dev/null || true
unset 'PIDS[b]'
wait_for $((DEAD_AFTER_MS + MARGIN_MS)) "a reports b down after kill -9" field_is a partner.link down
ok "kill -9 b: a reported the link down after $(($(now_ms) - t0)) ms"
ctl a status | grep -q "last seen" || fail "text status does not say when b was last seen"
# The reset alone proves nothing; b's store heartbeat stopping does (ha/HA.md).
wait_for $((DEAD_AFTER_MS + MARGIN_MS)) "a takes over" field_is a state solo
[ "$(status_field a epoch)" = 2 ] || fail "the takeover did not bump the epoch"
ok "a took over after $(($(now_ms) - t0)) ms: $(status_field a reason)"

# Dirty pages made alone, more than one chunk of landings (VMM_RESYNC_CHUNK,
# 1024) and fewer than half of a's free frames: all of them go one-sided over
# RDMA, in two ResyncLandings rounds.
FTVM_HOLD=${FTVM_HOLD:?FTVM_HOLD must name the ftvm-hold binary}
big=$(ctl a alloc --size $((1100 * 4096)))
"$FTVM_HOLD" "$WORK/a.sock" "$big" 0 write --modify 9 --count 1100 >"$WORK/hold.out" 2>&1 ||
	fail "1100 pages written alone: $(tail -n 3 "$WORK/hold.out")"
ok "a wrote 1100 pages of $big alone"

start_node b
wait_for 5000 "link back after restart" pair_up
[ "$(status_field b epoch)" = 2 ] || fail "b was not resynced to epoch 2"
ok "b restarted: resynced, link back, both active"
resync_blocks_went a b
ctl a verify >/dev/null || fail "not equal after the resync: $(ctl a verify 2>&1)"
head -c 4096 /dev/zero | tr '\0' '\011' >"$WORK/nines"
for p in 0 1023 1024 1099; do
	ctl b read "$big" "$p" | cmp -s - "$WORK/nines" || fail "b's page $p of $big is not a's"
done
ok "verify equal; b reads a's pages on both sides of the chunk boundary"

# Over RDMA b grants a landing runs for whole-page writes again once it is
# resynced (its grant at link up went at the old epoch, which a refused): a's
# whole-page writes then go one-sided into them (replica/RDMA.md).
if [ "$E2E_TRANSPORT" = rdma ]; then
	guid=$(ctl a alloc --size 4096)
	wrote_one_sided() {
		local before
		before=$(status_field a page_writes.one_sided)
		echo resynced | ctl a write "$guid" 0 >/dev/null
		[ "$(status_field a page_writes.one_sided)" -gt "$before" ]
	}
	wait_for 2000 "a's whole-page write to go one-sided after the resync" wrote_one_sided
	ok "after the resync a's whole-page writes go one-sided into b's grants"
fi

# SIGSTOP: the connection stays open and silent; only the heartbeat timeout
# can tell.
kill -STOP "${PIDS[b]}"
t0=$(now_ms)
wait_for $((DEAD_AFTER_MS + MARGIN_MS)) "a reports a hung b down" field_is a partner.link down
elapsed=$(($(now_ms) - t0))
[ "$elapsed" -ge $((DEAD_AFTER_MS - 100)) ] || fail "hung partner reported after only $elapsed ms"
grep -q "silent for" "$WORK/a.log" || fail "a's log does not say the partner went silent"
ok "SIGSTOP b: a reported it silent after $elapsed ms (dead_after_ms $DEAD_AFTER_MS)"

kill -CONT "${PIDS[b]}"
wait_for 5000 "link back after SIGCONT" pair_up
# b either read that a took over and fenced itself, or a's resync reached it
# first; its requests at the old epoch were refused meanwhile (test_session).
grep -qE "fencing this node|receiving everything from a" "$WORK/b.log" ||
	fail "b went on as before after a took over"
ok "SIGCONT b: fenced or resynced at once, link back at epoch $(status_field b epoch)"
