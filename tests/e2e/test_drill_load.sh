#!/usr/bin/env bash
# Drills under load (node/ha/HA.md, "Drills"): with whole-page writers and
# ftvm-race's write pointers on both nodes, each of several `drill cut` and
# a `drill kill` brings the pair whole again, nothing acknowledged lost and
# verify equal; the load goes on through every drill and the pair is equal
# at rest after it.
. "$(dirname "$0")/lib.sh"
. "$(dirname "$0")/load.sh"

CUTS=${FTVM_E2E_DRILL_CUTS:-5}
CUT_S=2

# A cut must outlast dead_after_ms for the survivor to take over; the margin
# is for the loop pauses of a loaded 2-core host (375 ms seen under ASan).
start_pair_dead_after 1000
ga=$(alloc_written a "$LOAD_PAGES")
gb=$(alloc_written b "$LOAD_PAGES")
load_start "$ga" "$gb"
ok "writers on both nodes to $ga (a) and $gb (b), ftvm-race on both"

# The drill starts the node it kills again itself; the cleanup must find it.
adopt_pids() {
	local id
	for id in a b; do
		PIDS[$id]=$(status_field "$id" pid)
	done
}

drills=0
equal=0
# drill ARGS...: one drill through a, under the load; it must say equal and
# nothing lost.
drill() {
	local rc=0 J
	J=$(ctl a --json drill "$@" --timeout $((30 * E2E_TIME_SCALE)) 2>"$WORK/drill.err") || rc=$?
	adopt_pids
	drills=$((drills + 1))
	[ "$(jq -r .equal <<<"$J" 2>/dev/null)" != true ] || equal=$((equal + 1))
	[ "$rc" -eq 0 ] || fail "drill $* ($drills) under load exited $rc: $J $(cat "$WORK/drill.err")"
	[ "$(jq -r .lost <<<"$J")" = 0 ] && [ "$(jq -r .equal <<<"$J")" = true ] ||
		fail "drill $* ($drills) under load: $J $(cat "$WORK/drill.err")"
	wait_for 20000 "pair whole after drill $*" pair_up
	ok "drill $* ($drills): equal, verify_busy $(jq -r .verify_busy <<<"$J"), resync $(jq -r .resync_pages <<<"$J") pages"
}

for ((i = 1; i <= CUTS; i++)); do
	drill cut "$CUT_S"
done
drill kill b
drill cut "$CUT_S"
ok "$drills drills under load, $equal equal"

# Back-to-back drills may fence a node inside every 2 s ftvm-race run, so
# its runs during them may all fail; once the pair is whole, one that starts
# after the last drill must succeed.
race_before=$(load_race_runs)
race_after_drills() { [ "$(load_race_runs)" -ge $((race_before + 2)) ]; }
wait_for 30000 "an ftvm-race run after the drills" race_after_drills

load_stop
ok "load stopped: $LOAD_WRITES whole-page writes ($LOAD_FAILED failed during the drills), $RACE_RUNS ftvm-race runs ($RACE_FAILED failed)"

V=$(ctl a --json verify) || fail "verify at rest after the drills: $V"
[ "$(jq -r .equal <<<"$V")" = true ] && [ "$(jq -r '.busy // 0' <<<"$V")" = 0 ] ||
	fail "verify at rest after the drills: $V"
ok "at rest after the drills: $V"
