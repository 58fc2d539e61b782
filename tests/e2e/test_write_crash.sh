#!/usr/bin/env bash
# The whole-page write of a page owned by the partner journals the page's
# expected state as the request leaves (node/vmm/VMM.md, "The whole-page write of
# a page owned by the partner"). Killed (-9) right after that row committed,
# before the owner's answer (the owner b is stopped meanwhile, so the moment
# is certain), the writer a comes back and is resynced by b, which took over:
#  - b refused the write at its WritePage for want of frames: b did not note
#    a's LSN, so a's last own LSN (the early row's) is one b never applied
#    and the resync is full; a's page is b's again;
#  - b applied it: the histories agree and the resync is incremental; a's
#    page is the written one.
# Either way verify then finds the nodes equal, and the page reads the same
# on both.
. "$(dirname "$0")/lib.sh"

FTVM_HOLD=${FTVM_HOLD:?FTVM_HOLD must name the ftvm-hold binary}
FRAMES=256

write_pair_configs
# The writer is killed well inside the failure detector: b's stop must not
# make a take over first (wait_for scales its deadline by E2E_TIME_SCALE).
dead_after=$(((DEAD_AFTER_MS > 2000 ? DEAD_AFTER_MS : 2000) * E2E_TIME_SCALE))
window=$((dead_after * 3 / 4 / E2E_TIME_SCALE))
for id in a b; do
	sed -i "s/^dead_after_ms = .*/dead_after_ms = $dead_after/" "$WORK/$id.conf"
done
sed -i '/^\[memory\]/,/^\[/ s/^size = .*/size = 1M/' "$WORK/b.conf"
start_node a
start_node b
wait_for 5000 "pair linked" pair_up
g=$(ctl b alloc --size $(((FRAMES + 2) * 4))K)

# a's page table is its daemon's alone while it runs (a reader gets "database
# is locked"); the row shows by the idle fold logged once a commit left page
# rows waiting: with b stopped, the early row is a's only change.
folds() { grep -c "idle: .* page writes folded" "$WORK/a.log" || true; }
folded_since() { [ "$(folds)" -gt "$1" ]; }
gone() { ! kill -0 "$1" 2>/dev/null; }
resyncs() { grep -c "a resynced ($1)" "$WORK/b.log" || true; }

# crash_in_window PAGE: a writes PAGE of g while b is stopped; a is killed once its early row committed,
# then b goes on, takes over, and resyncs a started again.
crash_in_window() {
	local page=$1 rc=0 before
	head -c 4096 /dev/urandom >"$WORK/block.$page"
	wait_for 5000 "a's idle fold of what came before" field_is a pagetable.fold_waiting 0
	before=$(folds)
	kill -STOP "${PIDS[b]}"
	ctl a write "$g" "$page" --file "$WORK/block.$page" >"$WORK/write.out" 2>&1 &
	PIDS[write]=$!
	wait_for "$window" "a's early row of page $page committed" folded_since "$before"
	kill -9 "${PIDS[a]}"
	wait "${PIDS[a]}" 2>/dev/null || true
	unset 'PIDS[a]'
	kill -CONT "${PIDS[b]}"
	wait "${PIDS[write]}" || rc=$?
	unset 'PIDS[write]'
	[ "$rc" -ne 0 ] || fail "the write of page $page was acknowledged by a killed node"
	wait_for $((dead_after * 3)) "b serving alone" field_is b state solo
}
rejoin() {
	start_node a
	wait_for 15000 "a resynced by b" pair_up
}
# same_on_both PAGE FILE: the page reads FILE's bytes on a and on b.
same_on_both() {
	local n
	for n in a b; do
		ctl "$n" read "$g" "$1" | head -c 4096 | cmp -s - "$2" ||
			fail "page $1 of $g on $n is not what it should be"
	done
}

# ================= refused at b's WritePage, a killed =================
wait_for 10000 "b settled" frames_settled b
hold_write_pointers b "$g" $FRAMES

full=$(resyncs full)
crash_in_window $FRAMES
release_write_pointers
rejoin
[ "$(resyncs full)" -gt "$full" ] ||
	fail "b's resync of a after a write b refused was not full: $(grep 'a resynced' "$WORK/b.log" | tail -n 1)"
ctl a verify >/dev/null || fail "verify after the rejoin: $(ctl a verify 2>&1)"
head -c 4096 /dev/zero >"$WORK/zeroes"
same_on_both $FRAMES "$WORK/zeroes"
ok "a killed after its early row of a write b refused: full resync, verify equal, the page unwritten on both"

# ==================== applied by b, a killed ====================
incremental=$(resyncs incremental)
crash_in_window $((FRAMES + 1))
rejoin
[ "$(resyncs incremental)" -gt "$incremental" ] ||
	fail "b's resync of a after a write b applied was not incremental: $(grep 'a resynced' "$WORK/b.log" | tail -n 1)"
ctl a verify >/dev/null || fail "verify after the rejoin: $(ctl a verify 2>&1)"
same_on_both $((FRAMES + 1)) "$WORK/block.$((FRAMES + 1))"
ok "a killed after its early row of a write b applied: incremental resync, verify equal, the page written on both"
