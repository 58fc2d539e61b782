#!/usr/bin/env bash
# The journal kept for a partner that is away is bounded ([failover]
# journal_limit, node/ha/HA.md "Solo and rejoin"): a survivor that writes past
# it lets the partner's rows go, says so in its log and status, and resyncs
# the partner in full when it returns; nothing is lost and verify is equal.
. "$(dirname "$0")/lib.sh"

LIMIT=100
write_pair_configs
for id in a b; do
	echo "journal_limit = $LIMIT" >>"$WORK/$id.conf" # [failover] is last
done
start_node a
start_node b
wait_for 5000 "pair linked" pair_up
[ "$(status_field a journal_limit)" = "$LIMIT" ] || fail "a's status says journal_limit $(status_field a journal_limit)"
g=$(ctl a alloc --size 16K)

kill -9 "${PIDS[b]}"
wait "${PIDS[b]}" 2>/dev/null || true
unset "PIDS[b]"
wait_for 10000 "a solo" field_is a state solo
for i in $(seq 1 $((LIMIT + 50))); do
	ctl a write "$g" $((i % 4)) --file "$(fill $((i % 200)))" >/dev/null
done
wait_for 5000 "a to let the journal go" field_is a journal_given_up true
grep -q "past journal_limit ($LIMIT): no more are kept" "$WORK/a.log" || fail "a did not log it"
journal_within_limit() { [ "$(status_field a journal_rows)" -le $LIMIT ]; }
wait_for 5000 "a's journal trimmed" journal_within_limit
ok "a wrote $((LIMIT + 50)) pages alone; past journal_limit $LIMIT it let the partner's rows go ($(status_field a journal_rows) rows now)"

start_node b
wait_for 10000 "b back and resynced" pair_up
grep -q "resync (full): .* sent to b" "$WORK/a.log" || fail "a's resync of b was not full: $(grep -i resync "$WORK/a.log" | tail -3)"
field_is a journal_given_up false || fail "a still says the journal was let go"
for p in 0 1 2 3; do
	last=$(((LIMIT + 50) - ((LIMIT + 50 - p) % 4)))
	ctl b read "$g" "$p" | cmp -s - "$(fill $((last % 200)))" || fail "b lacks a's last write of page $p"
done
ctl a --json verify | jq -e .equal >/dev/null || fail "verify differs after the full resync"
ok "b was resynced in full, holds a's last writes, verify equal"
