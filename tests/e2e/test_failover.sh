#!/usr/bin/env bash
# Failover (node/ha/HA.md) on a real pair: acknowledged writes survive kill -9 of
# either node; the survivor adopts the dead node's allocations, lets go of
# its clients' locks and serves alone at a new epoch; a node that comes back
# is resynced (writes made alone included) until verify says equal; a clean
# stop is taken over at once; [failover] solo = refuse serves reads only.
. "$(dirname "$0")/lib.sh"

FTVM_HOLD=${FTVM_HOLD:?FTVM_HOLD must name the ftvm-hold binary}
MARGIN_MS=700

start_pair

# write_page ID GUID PAGE: an acknowledged write of fresh random bytes,
# remembered in $WORK/want.GUID.PAGE.
write_page() {
	head -c 4096 /dev/urandom >"$WORK/want.$2.$3"
	ctl "$1" write "$2" "$3" --file "$WORK/want.$2.$3" >/dev/null ||
		fail "write $2 page $3 on $1 was not acknowledged"
}

# check_pages ID: every remembered write reads back on ID; sets CHECKED.
check_pages() {
	local f guid page lost=0
	CHECKED=0
	for f in "$WORK"/want.*; do
		guid=${f#"$WORK"/want.}
		page=${guid##*.}
		guid=${guid%.*}
		CHECKED=$((CHECKED + 1))
		ctl "$1" read "$guid" "$page" | cmp -s - "$f" || {
			echo "lost on $1: $guid page $page" >&2
			lost=$((lost + 1))
		}
	done
	[ "$lost" -eq 0 ] || fail "$lost of $CHECKED acknowledged writes lost on $1"
}

owner_of() { ctl "$1" --json list | jq -r --arg g "$2" '.[] | select(.guid == $g) | .owner'; }

ga=$(ctl a alloc --size 64K)
gb=$(ctl b alloc --size 64K)
gc=$(ctl a alloc --size 256K) # nothing touches it while a is alone
for p in 0 1 2 3 4 5 6 7; do
	write_page "$([ $((p % 2)) = 0 ] && echo a || echo b)" "$ga" "$p"
	write_page "$([ $((p % 2)) = 0 ] && echo b || echo a)" "$gb" "$p"
	write_page a "$gc" "$p"
done

# Everything destaged before the fault: a resync then has no dirty page to
# send of an allocation nobody touches meanwhile.
destaged() { [ "$(ctl "$1" --json sense | jq .queues.destage)" = 0 ]; }
wait_for 5000 "a's pages destaged" destaged a
wait_for 5000 "b's pages destaged" destaged b

# A client of b holds a write pointer on a page a owns.
mkfifo "$WORK/holder.in"
"$FTVM_HOLD" "$WORK/b.sock" "$ga" 15 write --release-after-stdin <"$WORK/holder.in" \
	>"$WORK/holder.out" 2>&1 &
PIDS[holder]=$!
exec {holder_in}>"$WORK/holder.in" # it holds until this closes
wait_for 5000 "b's client holding a's page 15" grep -q "^held " "$WORK/holder.out"
printf 'x' | ctl a write "$ga" 15 >/dev/null 2>&1 && fail "a wrote a page b's client holds"

# ---- kill -9 b ----
t0=$(now_ms)
kill -9 "${PIDS[b]}"
wait "${PIDS[b]}" 2>/dev/null || true
unset 'PIDS[b]'
wait_for $((DEAD_AFTER_MS + MARGIN_MS)) "a takes over" field_is a state solo
ok "kill -9 b: a took over after $(($(now_ms) - t0)) ms: $(status_field a reason)"
[ "$(status_field a epoch)" = 2 ] || fail "epoch $(status_field a epoch) after the takeover, not 2"
[ "$(owner_of a "$gb")" = a ] || fail "$gb was not adopted: owner $(owner_of a "$gb")"
check_pages a
ok "all $CHECKED acknowledged writes read back on a, 0 lost; $gb is a's now"
write_page a "$ga" 15
ok "the lock b's client held is let go: a wrote page 15"
for p in 8 9 10 11; do write_page a "$gb" "$p"; done
ok "a serves b's allocation alone: 4 more writes to $gb"
out=$("$FTVM_HOLD" "$WORK/a.sock" "$gb" 13 write --modify 7 2>&1) ||
	fail "a write pointer on a alone: $out"
head -c 4096 /dev/zero | tr '\0' '\7' >"$WORK/want.$gb.13"
[ "$(status_field a state)" = solo ] || fail "a is not serving after a pointer call alone"
ok "pointers alone too: $(tr '\n' ' ' <<<"$out")"
# A trim round (each second) since: what b has not seen must stay.
trims() { grep -c "journal trim while alone" "$WORK/a.log" || true; }
trimmed_since() { [ "$(trims)" -gt "$1" ]; }
wait_for 3000 "a trim round on a since its writes alone" trimmed_since "$(trims)"
[ "$(status_field a journal_rows)" -ge 5 ] ||
	fail "a trimmed journal rows b has not applied: $(status_field a journal_rows) left"
exec {holder_in}>&-
wait "${PIDS[holder]}" 2>/dev/null || true # its node died under it
unset 'PIDS[holder]'

# ---- b comes back: resynced ----
t0=$(now_ms)
start_node b
wait_for 5000 "b resynced and the pair active" pair_up
ok "b restarted and was resynced in $(($(now_ms) - t0)) ms: $(status_field a reason)"
# Only what changed while a was alone: $ga and $gb whole (their resident
# pages: those written; a has no frames for the others, never written, which b
# knows as zeroes), and $gc (64 pages, all destaged by now) not at all.
status_field a reason | grep -q "resynced (incremental)" ||
	fail "not an incremental resync: $(status_field a reason)"
written=$(find "$WORK" -name "want.$ga.*" -o -name "want.$gb.*" | wc -l)
[ "$(status_field a last_resync_pages)" = "$written" ] ||
	fail "the resync sent $(status_field a last_resync_pages) pages, not the $written written of $ga and $gb"
[ "$(status_field b epoch)" = 2 ] || fail "b is at epoch $(status_field b epoch), not 2"
ctl a verify >/dev/null || fail "not equal after the resync: $(ctl a verify 2>&1)"
check_pages b
ok "verify equal; all $CHECKED writes read back on b, those a made alone too"
resync_blocks_went a b
journal_trimmed() { [ "$(status_field a journal_rows)" -le 2 ] && [ "$(status_field b journal_rows)" -le 2 ]; }
wait_for 5000 "the journals trimmed once both applied everything (a $(status_field a journal_rows), b $(status_field b journal_rows))" journal_trimmed
ok "journals trimmed: a $(status_field a journal_rows) rows, b $(status_field b journal_rows)"

# ---- failback: b's allocation goes home ----
[ "$(owner_of b "$gb")" = a ] || fail "$gb is not a's on b after the resync"
out=$(ctl b failback) || fail "failback: $out"
[ "$(owner_of a "$gb")" = b ] && [ "$(owner_of b "$gb")" = b ] ||
	fail "after failback $gb is owned by $(owner_of a "$gb") on a, $(owner_of b "$gb") on b"
[ "$(owner_of a "$ga")" = a ] || fail "failback moved a's own $ga"
write_page b "$gb" 12
ctl a verify >/dev/null || fail "not equal after failback: $(ctl a verify 2>&1)"
[ "$(ctl a --json failback)" = "{}" ] || fail "a second failback did not say {}"
ok "failback: $out; $gb is b's on both nodes, b writes it, verify equal"

# ---- a stops cleanly: its slot says so, b takes over at once ----
t0=$(now_ms)
kill -TERM "${PIDS[a]}"
wait "${PIDS[a]}" || fail "a did not stop cleanly"
unset 'PIDS[a]'
wait_for $((DEAD_AFTER_MS + MARGIN_MS)) "b takes over" field_is b state solo
elapsed=$(($(now_ms) - t0))
status_field b reason | grep -q "took over" || fail "b's reason: $(status_field b reason)"
grep -q "its slot in the store says stopped" "$WORK/b.log" ||
	fail "b did not take over on a's stopped slot"
ok "SIGTERM a: b took over in $elapsed ms, on a's slot saying stopped"
check_pages b
write_page b "$ga" 3
out=$(ctl b failback 2>&1) && fail "failback while alone was accepted: $out"
grep -q "needs the pair whole" <<<"$out" || fail "failback while alone: $out"
# Writes go on at b while a comes back and is resynced: each is acknowledged
# (alone, or mirrored once the resync began) and none may be lost or stale.
# Over RDMA a write mirrored between b's snapshot and the landed blocks,
# a round trip later, reaches a before the snapshot's block of its page: a
# must keep the newer (resync.pages_dropped counts the blocks it dropped).
# The writer notes each acknowledged write, one line each, in written-during.
(
	n=0
	until [ -e "$WORK/stop-writing" ]; do
		write_page b "$gc" $((8 + n % 8))
		n=$((n + 1))
		echo >>"$WORK/written-during"
	done
) &
writer=$!
start_node a
wait_for 5000 "a resynced" pair_up
written() { wc -l <"$WORK/written-during" 2>/dev/null || echo 0; }
written_past() { [ "$(written)" -ge "$1" ]; }
wait_for 5000 "5 more writes at b, mirrored to a" written_past $(($(written) + 5))
touch "$WORK/stop-writing"
wait "$writer" || fail "a write at b failed while a was being resynced"
ctl b verify >/dev/null || fail "not equal after a's resync: $(ctl b verify 2>&1)"
check_pages a
ok "a back and resynced at epoch $(status_field a epoch) while b took $(written) writes; verify equal; $CHECKED writes on a"
resync_blocks_went b a

# ---- [failover] solo = refuse: alone, reads only ----
for id in a b; do
	kill -TERM "${PIDS[$id]}"
	wait "${PIDS[$id]}" || true
	unset "PIDS[$id]"
	printf '[failover]\nsolo = refuse\n' >>"$WORK/$id.conf"
done
start_node a
start_node b
wait_for 5000 "pair linked with solo = refuse" pair_up
kill -9 "${PIDS[b]}"
wait "${PIDS[b]}" 2>/dev/null || true
unset 'PIDS[b]'
wait_for $((DEAD_AFTER_MS + MARGIN_MS)) "a takes over, reads only" field_is a state solo
out=$(printf 'y' | ctl a write "$ga" 1 2>&1) && fail "a wrote while solo with solo = refuse"
grep -q "reads only" <<<"$out" || fail "the refusal does not say why: $out"
check_pages a
ok "solo = refuse: a refuses writes ($out), and reads all $CHECKED pages"
