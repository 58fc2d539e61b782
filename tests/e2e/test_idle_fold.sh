#!/usr/bin/env bash
# Page writes reach the page table's pages at an idle fold (node/vmm/VMM.md,
# "Page writes: journal now, pages at the next fold"): a few writes, far
# fewer than a commit folds at, are folded once the node has been idle for a
# moment, on both nodes, and the fold is committed: after a kill -9 (no close
# to fold them) pagetable.db's pages hold them and its fold mark is the last
# page row's.
. "$(dirname "$0")/lib.sh"

start_pair

guid=$(ctl a alloc --size 16K)
for page in 0 1 2 3; do
	echo "page $page" | ctl a write "$guid" "$page" >/dev/null
done
echo "page 1 again" | ctl a write "$guid" 1 >/dev/null
# Both nodes committed the last write before a answered it. The fold may
# come at once, before this line runs: what the node says of its page writes
# is judged, not which log lines come after a point.
folded_when_idle() {
	[ "$(status_field "$1" pagetable.fold_waiting)" = 0 ] &&
		[ "$(status_field "$1" pagetable.folds_idle)" -gt 0 ]
}
for id in a b; do
	wait_for 5000 "$id folds the writes when idle" folded_when_idle "$id"
done
ok "a and b folded the page writes when idle"

for id in a b; do
	kill -9 "${PIDS[$id]}"
	wait "${PIDS[$id]}" 2>/dev/null || true
	unset "PIDS[$id]"
done
# A destage may add clean rows after the writes (the same versions): the
# fold mark is at least the last write's row. A journal trim (each second,
# once both nodes applied the rows) folds before it deletes: rows gone were
# folded.
for id in a b; do
	db=$WORK/$id/pagetable.db
	mark=$("$POKE" sql "$db" "SELECT value FROM meta WHERE key = 'folded_seq'")
	last=$("$POKE" sql "$db" "SELECT max(seq) FROM journal WHERE op = 'page'")
	versions=$("$POKE" sql "$db" "SELECT version FROM pages WHERE guid = ? ORDER BY page" "$guid" |
		paste -sd ' ')
	got="versions [${versions// /, }], fold mark $mark, last write's row ${last:-trimmed after its fold}"
	[ "$versions" = "1 2 1 1" ] && { [ -z "$last" ] || [ "$mark" -ge "$last" ]; } ||
		fail "$id's pagetable.db after kill -9: $got NOT folded"
	ok "$id's pagetable.db after kill -9: $got folded"
done
