#!/usr/bin/env bash
# Both nodes killed at once under writers (node/ha/HA.md, "Recovery"): the
# pages written since the last destage round were in the two nodes' memory
# alone and are lost with them. When both come back, each settles those
# pages on the store's copy and says which went back, from which version to
# which: in its log, in status (recovery), and in `ftvmctl recovery`. Every
# page then reads on both nodes, verify is equal, and the two reports are
# checked against the writers' own log of what was acknowledged:
#  - a page whose content is older than its last acknowledged version is in
#    both reports, gone back to the version it now holds;
#  - every page in a report went back from a newer version to the one it
#    holds now, and that one was acknowledged;
#  - a page only one node lists lost a version never acknowledged: a write
#    in flight at the kill, in one node's page table alone (HA.md,
#    "Recovery").
# The writers keep each page's content equal to its version ("P K": the
# K-th write of page P), so a read tells which version a page holds. The kill
# comes from a client of its own, right after its last acknowledged write,
# so that at least its pages are in memory alone on any host.
. "$(dirname "$0")/lib.sh"

PAGES=8
start_pair
ga=$(ctl a alloc --size $((PAGES * 4))K)
gb=$(ctl b alloc --size $((PAGES * 4))K)

# kill_both_under_writers: both writers run; once each has written every
# page a few times, ftvm-failover-client writes KILLER_PAGES pages of an
# allocation of b's and SIGKILLs both nodes right after its last ack: that
# page (version 1) is in the two nodes' memory alone, however slowly the
# writers' ftvmctl processes start and exit on a loaded or sanitized build.
KILLER_PAGES=4
kill_both_under_writers() {
	local wa wb
	writer a "$ga" &
	wa=$!
	writer b "$gb" &
	wb=$!
	want=$(($(wc -l <"$WORK/acked.b") + PAGES * 3))
	acks() { [ "$(wc -l <"$WORK/acked.b")" -ge "$want" ]; }
	wait_for 30000 "writers under way" acks
	"$FTVM_FAILOVER_CLIENT" --kill "${PIDS[a]}" --kill "${PIDS[b]}" "$WORK/b.sock" "$WORK/a.sock" \
		$KILLER_PAGES >"$WORK/killer.out" 2>&1 || fail "the killing client: $(cat "$WORK/killer.out")"
	killer=$(sed -n 's/^alloc \([^ ]*\) .*/\1/p' "$WORK/killer.out")
	wait "$wa" "$wb" 2>/dev/null || true
	wait "${PIDS[a]}" "${PIDS[b]}" 2>/dev/null || true
	unset "PIDS[a]" "PIDS[b]"
}

# killer_went_back: the killing client's last page is in the report, from
# version 1 back to 0 (never destaged: zeroes).
killer_went_back() {
	jq -e --arg g "$killer" --argjson p $((KILLER_PAGES - 1)) \
		'any(.guid == $g and .page == $p and .from_version == 1 and .to_version == 0)' "$1" >/dev/null ||
		fail "the killing client's last page ($killer page $((KILLER_PAGES - 1))) is not in the report: $(jq -c . "$1")"
	ctl "$2" read "$killer" $((KILLER_PAGES - 1)) | cmp -s - <(head -c 4096 /dev/zero) ||
		fail "$killer page $((KILLER_PAGES - 1)) does not read as zeroes on $2"
}

: >"$WORK/acked.a"
: >"$WORK/acked.b"
kill_both_under_writers
ok "both nodes killed at once, $(wc -l <"$WORK/acked.a") and $(wc -l <"$WORK/acked.b") writes acknowledged"
start_node a
start_node b
wait_for 10000 "pair back" pair_up
[ "$(status_field a epoch)" = "$(status_field b epoch)" ] || fail "epochs differ"

ctl a --json recovery >"$WORK/recovery.a.json"
ctl b --json recovery >"$WORK/recovery.b.json"
n=$(jq length "$WORK/recovery.a.json")
[ "$n" -gt 0 ] || fail "no page went back"
killer_went_back "$WORK/recovery.a.json" a
killer_went_back "$WORK/recovery.b.json" b
# The killing client's writes were all acknowledged: both nodes list each
# of its pages that went back, alike.
[ "$(jq -c --arg g "$killer" 'map(select(.guid == $g) | [.page, .from_version, .to_version])' "$WORK/recovery.a.json")" = \
	"$(jq -c --arg g "$killer" 'map(select(.guid == $g) | [.page, .from_version, .to_version])' "$WORK/recovery.b.json")" ] ||
	fail "the nodes' reports differ on $killer: a $(jq -c . "$WORK/recovery.a.json"), b $(jq -c . "$WORK/recovery.b.json")"
for id in a b; do
	jq -e 'all(.why == "both nodes restarted")' "$WORK/recovery.$id.json" >/dev/null || fail "$id's occasion: $(jq -c 'map(.why)' "$WORK/recovery.$id.json")"
done
[ "$(status_field a recovery.pages)" = "$n" ] || fail "a's status says $(status_field a recovery.pages) pages, recovery lists $n"
nb=$(jq length "$WORK/recovery.b.json")
[ "$(status_field b recovery.list | jq length)" = "$((nb < 16 ? nb : 16))" ] || fail "b's status lists $(status_field b recovery.list)"
grep -q "recovery (both nodes restarted): $n pages of .* allocations went back to the store's copy" "$WORK/a.log" ||
	fail "a's log does not report the recovery: $(grep -i recover "$WORK/a.log" | tail -3)"
ctl a recovery | grep -q "page .*: version [0-9]* lost, back to [0-9]* (both nodes restarted)" ||
	fail "ftvmctl recovery printed: $(ctl a recovery | head -3)"
ok "a reports $n pages gone back, b $(jq length "$WORK/recovery.b.json") (log, status, ftvmctl recovery)"

# The report against the writers' log.
for id in a b; do
	g=$([ "$id" = a ] && echo "$ga" || echo "$gb")
	for ((p = 0; p < PAGES; p++)); do
		acked=$(awk -v p="$p" '$1 == p { k = $2 } END { print k + 0 }' "$WORK/acked.$id")
		now=$(page_version a "$g" "$p")
		[ "$(page_version b "$g" "$p")" = "$now" ] || fail "$g page $p: a holds version $now, b $(page_version b "$g" "$p")"
		[ "$now" -le $((acked + 1)) ] || fail "$g page $p holds version $now, never written (acknowledged: $acked)"
		listed=0
		for r in a b; do
			entry=$(jq -c --arg g "$g" --argjson p "$p" 'map(select(.guid == $g and .page == $p)) | .[0] // empty' "$WORK/recovery.$r.json")
			if [ -z "$entry" ]; then
				[ "$now" -ge "$acked" ] || fail "$g page $p holds version $now, older than the acknowledged $acked, and is not in $r's report"
				continue
			fi
			listed=$((listed + 1))
			from=$(jq .from_version <<<"$entry")
			[ "$(jq .to_version <<<"$entry")" = "$now" ] || fail "$g page $p: $r's report says back to $(jq .to_version <<<"$entry"), it holds $now"
			[ "$from" -gt "$now" ] || fail "$g page $p: $r's report says from $from"
			[ "$now" -le "$acked" ] || fail "$g page $p went back to $now, never acknowledged (acknowledged: $acked)"
			echo "  $g page $p: acknowledged $acked, $r lost $from, back to $now"
			last_from=$from
		done
		# On one node only: a write in flight at the kill, never acknowledged.
		[ "$listed" != 1 ] || [ "$last_from" -gt "$acked" ] ||
			fail "$g page $p: only one node lists version $last_from lost, which was acknowledged ($acked)"
	done
done
ok "both reports match the writers' log: every page older than its last acknowledged version is in both, at the version it holds; a page one node alone lists lost a write never acknowledged"

ctl a --json verify | jq -e .equal >/dev/null || fail "verify: $(ctl a verify 2>&1)"
head -c 4096 < <(yes "again") >"$WORK/again"
for ((p = 0; p < PAGES; p++)); do
	ctl b write "$ga" "$p" --file "$WORK/again" >/dev/null || fail "cannot write $ga page $p after the recovery"
done
ctl a read "$ga" 0 | cmp -s - "$WORK/again" || fail "a does not read b's new write"
ok "verify equal; the pages take new writes"

# The report outlives a restart.
kill -TERM "${PIDS[b]}"
wait "${PIDS[b]}" || fail "b did not stop cleanly"
unset "PIDS[b]"
start_node b
wait_for 10000 "b back" pair_up
[ "$(ctl b --json recovery | jq length)" = "$nb" ] || fail "b's report after a restart: $(ctl b --json recovery | jq length) pages, not $nb"
ok "b's report of $nb pages outlived its restart"

# ---- Both killed again; only b comes back, and is forced to serve ----
# b did not serve alone when it was killed, so it waits for a; a is gone for
# good, the operator forces b, and b settles what was lost with both.
before=$(ctl b --json recovery | jq length)
kill_both_under_writers
start_node b
wait_for 5000 "b waiting" field_is b state starting
silent() { [ "$(status_field b partner.store_silent_ms)" -gt "$DEAD_AFTER_MS" ]; }
wait_for $((DEAD_AFTER_MS * 4)) "a's slot silent for dead_after_ms" silent
ctl b takeover --force --yes >/dev/null || fail "forced takeover of b failed"
field_is b state solo || fail "b is $(status_field b state) after the forced takeover"
ctl b --json recovery | jq --argjson n "$before" '.[$n:] | map(select(.why == "forced takeover"))' >"$WORK/forced.json"
forced=$(jq length "$WORK/forced.json")
killer_went_back "$WORK/forced.json" b
status_field b reason | grep -q "pages went back to the store's copy" || fail "b's reason: $(status_field b reason)"
for g in "$ga" "$gb"; do
	for ((p = 0; p < PAGES; p++)); do
		ctl b read "$g" "$p" >/dev/null || fail "b cannot read $g page $p after the forced takeover"
	done
done
start_node a
wait_for 15000 "a back and resynced" pair_up
ctl a --json verify | jq -e .equal >/dev/null || fail "verify after a's resync: $(ctl a verify 2>&1)"
ok "b, forced, settled $forced lost pages and reads every page; a came back, was resynced; verify equal"
