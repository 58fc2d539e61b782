#!/usr/bin/env bash
# Threads sharing one libftvm client mix submitted page writes and reads,
# reaps of any thread's completions, polls of the completion descriptor and
# blocking writes and reads (tests/async/async_race.c): no completion lost,
# none twice, none for a request never submitted, every block whole, every
# blocking call answered with its own bytes. Twice: four threads on a's
# socket, then eight on b's. Run by both builds (gcc, and clang with ASan and
# UBSan), which is where a race in the library would show.
. "$(dirname "$0")/lib.sh"

FTVM_ASYNC_RACE=${FTVM_ASYNC_RACE:?FTVM_ASYNC_RACE must name the ftvm-async-race binary}
start_pair

for run in "a 4" "b 8"; do
	read -r id threads <<<"$run"
	rc=0
	"$FTVM_ASYNC_RACE" "$WORK/$id.sock" --threads "$threads" --seconds 3 >"$WORK/race.$id.out" 2>&1 || rc=$?
	sed 's/^/    /' "$WORK/race.$id.out"
	[ "$rc" = 0 ] || fail "ftvm-async-race on $id exited $rc"
	line=$(tail -n 1 "$WORK/race.$id.out")
	[[ "$line" == *"never completed 0, completed twice 0, faults 0" ]] || fail "on $id: $line"
	ok "$threads threads on $id's client: $line"
done
ctl a verify >/dev/null || fail "the nodes differ after the race: $(ctl a verify 2>&1)"
ok "verify: both nodes equal"
