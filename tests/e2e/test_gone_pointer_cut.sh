#!/usr/bin/env bash
# Write pointers on the survivor while the link is cut (node/ha/HA.md, "A gone
# client's pointer"): a's clients hold write pointers to pages 0 and 1 of
# an allocation a owns and have written into both blocks; the link is cut
# (a drill), and page 0's client dies meanwhile, so its release (as
# modified) never reaches b and fails when a finds the link down. a must not keep what that client
# wrote under the page's old version and checksum: it tries the release
# again until it serves alone, then completes it there, and the resync
# (whole, for page 2 written alone) brings b the block as version 2. Page 1's client holds on through the
# resync (sent without its block) and releases as modified after it. The
# drill must find the pair whole and equal. Before, a let page 0's pointer
# go "here only" with the client's bytes in its frames: every resync sent
# them, b refused them ("ResyncPage ... checksum differs"), and the pair
# never became whole again.
. "$(dirname "$0")/lib.sh"

FTVM_HOLD=${FTVM_HOLD:?FTVM_HOLD must name the ftvm-hold binary}

# Time for page 0's client to die after the cut begins and before a finds
# the link down: its release goes into the silent link and fails with it.
start_pair_dead_after 1500
guid=$(alloc_written a 3)
hold_pointer dies a "$guid" 0 write --scribble 0x77
hold_pointer keeper a "$guid" 1 write --scribble 0x66 --modified
ok "a's clients hold write pointers to $guid pages 0 and 1, both written into"

ctl a --json drill cut 4 --timeout 20 >"$WORK/drill.json" 2>"$WORK/drill.err" &
drill=$!
PIDS[drill]=$drill
cut_begun() { grep -q "link cut for" "$WORK/a.log"; }
wait_for 5000 "the cut on a" cut_begun
hold_kill dies
field_is a partner.link up || fail "a found the link down before page 0's client died"
ok "page 0's client died with the link cut, its release sent into the silence"
# Written alone, page 2 makes the allocation one the resync sends whole.
wait_for 10000 "a serving alone" field_is a state solo
ctl a write "$guid" 2 --file "$(fill 0x55)" >/dev/null

wait_for 30000 "the drill done" pid_gone "$drill"
rc=0
wait "$drill" || rc=$?
unset 'PIDS[drill]'
J=$(cat "$WORK/drill.json")
[ "$rc" -eq 0 ] && [ "$(jq -r .equal <<<"$J")" = true ] && [ "$(jq -r .lost <<<"$J")" = 0 ] ||
	fail "drill cut with a gone writer exited $rc: $J $(cat "$WORK/drill.err")"
! grep -q "checksum differs" "$WORK/b.log" || fail "b refused a block: $(grep -m1 'checksum differs' "$WORK/b.log")"
grep -q "page 0: pointer of a gone client released here only" "$WORK/a.log" &&
	fail "a let the gone client's pointer go here only: $(grep -m1 'here only' "$WORK/a.log")"
ok "drill cut: the pair whole and equal ($(jq -c '{takeover_ms, resync_pages, verify_busy}' <<<"$J"))"

hold_end keeper || fail "page 1's holder: $(cat "$WORK/keeper.err")"
for id in a b; do
	ctl "$id" read "$guid" 0 | cmp -s - "$(fill 0x77)" || fail "$id: page 0 is not the gone client's block"
	ctl "$id" read "$guid" 1 | cmp -s - "$(fill 0x66)" || fail "$id: page 1 is not its release's block"
done
V=$(ctl a --json verify) && [ "$(jq -r .equal <<<"$V")" = true ] || fail "verify: $V"
ok "both nodes read page 0 as its gone client left it and page 1 as released; verify equal"
