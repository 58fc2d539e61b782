# Load for e2e tests, sourced after lib.sh: whole-page writers and ftvm-race's
# write pointers on both nodes, running until $WORK/stop.
#
# LOAD_PAGES: the pages each writer goes round (written first with
# alloc_written, whose $WORK/pN blocks the writers write again).

FTVM_RACE=${FTVM_RACE:?FTVM_RACE must name the ftvm-race binary}
LOAD_PAGES=${LOAD_PAGES:-8}

# load_writer NODE GUID: whole-page writes through NODE, page after page,
# until $WORK/stop; counts its writes and failures in $WORK/w.NODE.GUID.
load_writer() {
	local id=$1 guid=$2 p=0 n=0 failed=0
	while [ ! -e "$WORK/stop" ]; do
		if ctl "$id" write "$guid" "$p" --wait --file "$WORK/p$p" >/dev/null 2>>"$WORK/w.err"; then
			n=$((n + 1))
			[ "$n" -gt 1 ] || touch "$WORK/going.$id.$guid"
		else
			failed=$((failed + 1))
		fi
		p=$(((p + 1) % LOAD_PAGES))
	done
	echo "$n $failed" >"$WORK/w.$id.$guid"
}

# load_racer: ftvm-race's write pointers from both nodes, run after run,
# until $WORK/stop (each run leaves its allocation, which verify compares
# too); counts its runs and failed runs in $WORK/w.race, and its runs so far
# in $WORK/race.runs.
load_racer() {
	local runs=0 failed=0
	while [ ! -e "$WORK/stop" ]; do
		if "$FTVM_RACE" "$WORK/a.sock" "$WORK/b.sock" --clients 2 --pages 4 --seconds 2 \
			--writes 70 >>"$WORK/race.out" 2>&1; then
			runs=$((runs + 1))
			echo "$runs" >"$WORK/race.runs"
		else
			failed=$((failed + 1))
		fi
	done
	echo "$runs $failed" >"$WORK/w.race"
}

# load_start GUID...: a writer per node and GUID, and the racer, in the
# background; returns once every writer has written since the start.
load_start() {
	local id g n=0
	rm -f "$WORK/stop" "$WORK"/going.* "$WORK/race.runs"
	for id in a b; do
		for g in "$@"; do
			load_writer "$id" "$g" &
			PIDS[w.$id.$g]=$!
			n=$((n + 1))
		done
	done
	load_racer &
	PIDS[racer]=$!
	LOAD_WRITERS=$n
	wait_for 20000 "the writers under way" load_going
}

load_going() { [ "$(find "$WORK" -name 'going.*' | wc -l)" -eq "$LOAD_WRITERS" ]; }

# load_race_runs: the racer's successful runs so far.
load_race_runs() { cat "$WORK/race.runs" 2>/dev/null || echo 0; }

# load_stop: stops the writers and the racer; LOAD_WRITES, LOAD_FAILED (the
# writers' totals), RACE_RUNS and RACE_FAILED say what they did.
load_stop() {
	local name f n failed
	touch "$WORK/stop"
	for name in "${!PIDS[@]}"; do
		case $name in w.* | racer)
			wait "${PIDS[$name]}" || fail "$name exited $?"
			unset "PIDS[$name]"
			;;
		esac
	done
	LOAD_WRITES=0
	LOAD_FAILED=0
	for f in "$WORK"/w.a.* "$WORK"/w.b.*; do
		read -r n failed <"$f"
		[ "$n" -gt 0 ] || fail "writer ${f#"$WORK"/w.} wrote nothing: $(tail -n 3 "$WORK/w.err")"
		LOAD_WRITES=$((LOAD_WRITES + n))
		LOAD_FAILED=$((LOAD_FAILED + failed))
	done
	read -r RACE_RUNS RACE_FAILED <"$WORK/w.race"
}
