#!/usr/bin/env bash
# A node stopped cleanly (SIGTERM) while a client of its holds a write
# pointer to a dirty page and has written into the block, not released yet
# (node/ha/HA.md, "A node stopped while its clients hold pointers"):
# - alone (solo), the block as the client left it becomes the page's new
#   version, as the client's going would make it, and goes to the store with
#   the last destage: the page reads back after a cold start of both nodes,
#   the same on both. Before, the last destage wrote that block under the
#   acknowledged version's number, and after the restart neither node served
#   the page again ("the store's block fails its checksum").
# - mirrored, the unreleased write does not count: the last destage leaves
#   the page alone, the partner takes over with the acknowledged block, and
#   that is what both nodes read once the stopped one is back.
. "$(dirname "$0")/lib.sh"

FTVM_HOLD=${FTVM_HOLD:?FTVM_HOLD must name the ftvm-hold binary}
DEAD_AFTER_MS=2000
MARGIN_MS=700

# reads ID GUID BYTE: page 0 of GUID reads back on ID as 4096 BYTEs.
reads() { ctl "$1" read "$2" 0 2>/dev/null | cmp -s - "$(fill "$3")"; }

# acked_then_scribbled ID GUID: page 0 of GUID is written with 'C's through
# a pointer released as modified (acknowledged), and in the same turn granted
# to a second holder that was waiting for it, which writes 'S's into the
# block and holds on. The destage due 50 ms after the release finds the page
# write-locked, so it stays dirty.
acked_then_scribbled() {
	hold_pointer first "$1" "$2" 0 write --modify 67
	hold_start second "$1" "$2" 0 write --wait --scribble 83
	wait_for 5000 "the second holder queued on $1" sense_is "$1" queues.paging 1
	hold_end first || fail "the first holder: $(cat "$WORK/first.err")"
	wait_for 5000 "the second holder holding on $1" hold_said second held
}

stop_node() {
	local rc=0
	kill -TERM "${PIDS[$1]}"
	wait "${PIDS[$1]}" || rc=$?
	unset "PIDS[$1]"
	[ "$rc" = 0 ] || fail "ftvmd $1 exited $rc on SIGTERM"
}

start_pair

# ---- alone: the unreleased block becomes the page's new version ----
g1=$(ctl a alloc --size 4096)
stop_node b
wait_for $((DEAD_AFTER_MS + MARGIN_MS)) "a serves alone" field_is a state solo
acked_then_scribbled a "$g1"
stop_node a
hold_kill second
start_node a
wait_for 5000 "a serves alone again" field_is a state solo
reads a "$g1" 83 || fail "page 0 on a after the cold start: $(ctl a read "$g1" 0 2>&1 | head -c 200)"
grep -q "stopping alone: a client's write pointer to $g1 page 0 released as modified" "$WORK/a.log" ||
	fail "a's log does not say it released the held write pointer"
grep -q "shutdown: 1 dirty pages destaged" "$WORK/a.log" || fail "a did not destage the page at its stop"
start_node b
wait_for 10000 "pair linked again" pair_up
reads b "$g1" 83 || fail "page 0 on b after its resync: $(ctl b read "$g1" 0 2>&1 | head -c 200)"
ctl a verify >/dev/null || fail "not equal after the cold start: $(ctl a verify 2>&1)"
ok "stopped alone with a write pointer held: the block as the client left it is the new version, read back on both after a cold start; verify equal"

# ---- mirrored: the partner takes over with the acknowledged block ----
g2=$(ctl a alloc --size 4096)
acked_then_scribbled a "$g2"
stop_node a
hold_kill second
wait_for $((DEAD_AFTER_MS + MARGIN_MS)) "b takes over" field_is b state solo
reads b "$g2" 67 || fail "page 0 on b after the takeover: $(ctl b read "$g2" 0 2>&1 | head -c 200)"
grep -q "shutdown: 1 write-locked dirty pages left to the partner" "$WORK/a.log" ||
	fail "a's log does not say it left the write-locked page to b"
start_node a
wait_for 10000 "pair linked again" pair_up
reads a "$g2" 67 || fail "page 0 on a after its resync: $(ctl a read "$g2" 0 2>&1 | head -c 200)"
reads a "$g1" 83 || fail "the first page on a changed"
ctl b verify >/dev/null || fail "not equal after the rejoin: $(ctl b verify 2>&1)"
ok "stopped mirrored with a write pointer held: b took over with the acknowledged block, a read it back after its resync; verify equal"
