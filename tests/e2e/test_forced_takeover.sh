#!/usr/bin/env bash
# `ftvmctl takeover --force --yes` (node/ha/HA.md, "Forced takeover"): a node
# that starts while its partner is away, and was not the one serving, waits
# for the partner; an operator whose partner is gone for good makes it serve.
#  - without --force, or without --yes, ftvmctl refuses and asks nothing of
#    the node; with the link up, or while the partner's store heartbeat may
#    still move, the node refuses and says why, and nothing changes;
#  - otherwise the node takes over at an epoch above the partner's, serves
#    alone what the store and its own table hold (what the partner did alone
#    and never destaged is gone: its allocation here), logs who asked;
#  - the partner, started again, is behind: it is resynced in full, and
#    verify is equal.
# (Who may ask is in test_client_access.sh.)
. "$(dirname "$0")/lib.sh"

# Wide enough that "at once after the start" is inside it on a loaded host.
DEAD_AFTER_MS=$((5000 * E2E_TIME_SCALE))
start_pair
g=$(ctl a alloc --size 8K)
ctl a write "$g" 0 --file "$(fill 1)" >/dev/null
ctl a write "$g" 1 --file "$(fill 2)" >/dev/null

# a stops cleanly, b serves alone, writes, makes an allocation, and dies.
kill -TERM "${PIDS[a]}"
wait "${PIDS[a]}" || fail "a did not stop cleanly"
unset "PIDS[a]"
wait_for 10000 "b solo" field_is b state solo
epoch_b=$(status_field b epoch)
ctl b write "$g" 0 --file "$(fill 3)" >/dev/null
destaged() { [ "$(ctl "$1" --json sense | jq .queues.destage)" = 0 ]; }
wait_for 5000 "b's write destaged" destaged b
h=$(ctl b alloc --size 4K)
ctl b write "$h" 0 --file "$(fill 4)" >/dev/null
kill -9 "${PIDS[b]}"
wait "${PIDS[b]}" 2>/dev/null || true
unset "PIDS[b]"
ok "a stopped, b served alone at epoch $epoch_b (wrote $g page 0, made $h), then was killed"

start_node a
waiting() { field_is a state starting && status_field a reason | grep -q "behind: b is at epoch $epoch_b"; }
wait_for 5000 "a waiting for b" waiting
ok "a started and waits: $(status_field a reason)"

# b's slot was last written when it was killed, but a has watched it for
# less than dead_after_ms: b may yet be alive.
expect_fail a "forced takeover refused: b's slot in the store has been still for only .* ms" takeover --force --yes
field_is a state starting || fail "a refused, but its state is $(status_field a state)"
[ "$(status_field a takeovers)" = 0 ] || fail "a refused, but counts a takeover"

# ftvmctl's own refusals: exit 2, the node is not asked.
usage_refused() {
	local pattern=$1 out rc=0
	shift
	out=$(ctl a "$@" 2>&1) || rc=$?
	[ "$rc" = 2 ] || fail "ftvmctl $* exited $rc, wanted 2: $out"
	grep -q "$pattern" <<<"$out" || fail "ftvmctl $* said '$out', wanted '$pattern'"
}
usage_refused "a node takes over by itself" takeover
usage_refused "a node takes over by itself" takeover --yes
usage_refused "say --yes" takeover --force
ok "takeover without --force or --yes: usage errors"

silent() { [ "$(status_field a partner.store_silent_ms)" -gt "$DEAD_AFTER_MS" ]; }
wait_for $((DEAD_AFTER_MS * 3)) "b's slot silent for dead_after_ms" silent
out=$(ctl a takeover --force --yes) || fail "forced takeover failed: $out"
grep -q "^a serves alone at epoch" <<<"$out" || fail "takeover printed: $out"
field_is a state solo || fail "after the takeover a is $(status_field a state)"
epoch_a=$(status_field a epoch)
[ "$epoch_a" -gt "$epoch_b" ] || fail "a took epoch $epoch_a, not above b's $epoch_b"
status_field a reason | grep -q "forced by an operator" || fail "a's reason: $(status_field a reason)"
grep -q "forced takeover asked by uid $(id -u)" "$WORK/a.log" || fail "a did not log who asked"
ok "forced: $out"

expect_fail a "forced takeover refused: this node serves already (solo)" takeover --force --yes
ctl a read "$g" 0 | cmp -s - "$(fill 3)" || fail "a lost b's destaged write of $g page 0"
ctl a read "$g" 1 | cmp -s - "$(fill 2)" || fail "a lost $g page 1"
expect_fail a "$h" header "$h"
g2=$(ctl a alloc --size 4K)
ctl a write "$g2" 0 --file "$(fill 5)" >/dev/null
ok "a serves alone: b's destaged write is there, b's allocation made alone is not, new writes go"

start_node b
wait_for 15000 "b resynced" pair_up
grep -q "resync (full): .* sent to b" "$WORK/a.log" || fail "a's resync of b was not full: $(grep -i resync "$WORK/a.log" | tail -3)"
ctl b read "$g2" 0 | cmp -s - "$(fill 5)" || fail "b lacks a's new page"
expect_fail b "$h" header "$h"
ctl a --json verify | jq -e .equal >/dev/null || fail "verify: $(ctl a verify 2>&1)"
ok "b came back behind, was resynced in full; verify equal"
