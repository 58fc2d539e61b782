#!/usr/bin/env bash
# Online verify (node/vmm/VMM.md, "Verify while clients write"): with writers on
# both nodes (whole-page writes to pages owned here and by the partner, and
# ftvm-race's write pointers), every one of 40 verifies says equal; a page
# whose frame is corrupted on one node behind its back is still found under
# the same load, and nothing else is reported.
. "$(dirname "$0")/lib.sh"
. "$(dirname "$0")/load.sh"

VERIFIES=40

# The load is heavy for a 2-core host (under ASan a loop turn took 375 ms):
# this test is about verify, not failure detection, so the link must hold.
start_pair_dead_after 3000
ga=$(alloc_written a "$LOAD_PAGES")
gb=$(alloc_written b "$LOAD_PAGES")
# The page to corrupt: written once, homed on a, never written again, so b's
# frame holds these bytes alone and nothing of b's is ever destaged for it.
gt=$(ctl a alloc --size 4K)
head -c 4096 /dev/urandom >"$WORK/target"
ctl a write "$gt" 0 --file "$WORK/target" >/dev/null
ok "allocations $ga (a) and $gb (b) of $LOAD_PAGES pages, target $gt"

load_start "$ga" "$gb"

# verify_json ID: one verify on ID; its JSON in $V, its exit status in $VRC.
verify_json() {
	VRC=0
	V=$(ctl "$1" --json verify 2>"$WORK/verify.err") || VRC=$?
}

busy=0
rounds_max=0
for ((i = 1; i <= VERIFIES; i++)); do
	id=$([ $((i % 2)) -eq 0 ] && echo a || echo b)
	verify_json "$id"
	[ "$VRC" -eq 0 ] && [ "$(jq -r .equal <<<"$V")" = true ] ||
		fail "verify $i of $VERIFIES on $id under load exited $VRC: $V $(cat "$WORK/verify.err")"
	busy=$((busy + $(jq -r '.busy // 0' <<<"$V")))
	r=$(jq -r '.rounds // 1' <<<"$V")
	[ "$r" -le "$rounds_max" ] || rounds_max=$r
done
ok "$VERIFIES verifies under writers on both nodes: all equal ($busy pages busy in total, up to $rounds_max rounds)"

# ---- a frame corrupted on b, under the same load: found, and alone ----
pid_b=${PIDS[b]}
memfd=$(find "/proc/$pid_b/fd" -lname '/memfd:ftvm-frames*' | head -n 1)
[ -n "$memfd" ] || fail "b's frame pool memfd not found"
hit=$("$POKE" clobber "$memfd" --frames-of "$WORK/target")
[ "$hit" -ge 1 ] || fail "the target page's bytes are in no frame of b's pool"
ok "target page's frame on b overwritten with 0xa5 ($hit frame)"

verify_json a
[ "$VRC" -eq 1 ] && [ "$(jq -r .equal <<<"$V")" = false ] ||
	fail "verify after corrupting $gt page 0 on b exited $VRC: $V"
jq -e --arg g "$gt" '.differences | length == 1 and (.[0] | startswith($g + " page 0: crc32c"))' \
	<<<"$V" >/dev/null || fail "verify under load should name $gt page 0 alone: $V"
ok "corrupted page found under load: $(jq -r '.differences[0]' <<<"$V")"

load_stop
[ "$LOAD_FAILED" -eq 0 ] || fail "the writers had $LOAD_FAILED failed writes: $(tail -n 3 "$WORK/w.err")"
[ "$RACE_RUNS" -gt 0 ] && [ "$RACE_FAILED" -eq 0 ] ||
	fail "ftvm-race: $RACE_RUNS runs, $RACE_FAILED failed: $(tail -n 5 "$WORK/race.out")"
ok "writers stopped: $LOAD_WRITES whole-page writes, $RACE_RUNS ftvm-race runs"

# At rest: the corrupted page is still reported, nothing is busy.
verify_json b
[ "$VRC" -eq 1 ] && [ "$(jq -r '.busy // 0' <<<"$V")" = 0 ] &&
	jq -e --arg g "$gt" '.differences | length == 1 and (.[0] | startswith($g + " page 0"))' \
		<<<"$V" >/dev/null || fail "verify at rest after the corruption: $V"
ctl a write "$gt" 0 --file "$WORK/target" >/dev/null
verify_json b
[ "$VRC" -eq 0 ] && [ "$(jq -r .equal <<<"$V")" = true ] && [ "$(jq -r '.busy // 0' <<<"$V")" = 0 ] ||
	fail "verify at rest after rewriting $gt page 0: $V"
ok "at rest: the corruption still found, then equal once the page is written again: $V"
