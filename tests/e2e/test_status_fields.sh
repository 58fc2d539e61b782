#!/usr/bin/env bash
# Every row of FTVM_STATUS_FIELDS (node/libftvm/ftvm_status.h) carried end to
# end: ftvm-fake-status answers with each row a value no other row has, put
# into the reply by the node's status_counts_to_reply(); libftvm reads it and
# `ftvmctl status` must show each at its JSON path and, for the rows the
# text shows as numbers, in its words there. Then on a real pair every row's
# JSON path is there.
. "$(dirname "$0")/lib.sh"

FAKE=${FTVM_FAKE_STATUS:?FTVM_FAKE_STATUS must name the ftvm-fake-status binary}
"$FAKE" --rows >"$WORK/rows"
n=$(wc -l <"$WORK/rows")
[ "$n" -gt 0 ] || fail "ftvm-fake-status --rows listed no row"

"$FAKE" "$WORK/fake.sock" >>"$WORK/fake.log" 2>&1 &
PIDS[fake]=$!
fake_answers() { "$FTVMCTL" --socket "$WORK/fake.sock" status >/dev/null 2>&1; }
wait_for 5000 "the fake node answers" fake_answers
"$FTVMCTL" --socket "$WORK/fake.sock" --json status >"$WORK/fake.json" || fail "status --json"
"$FTVMCTL" --socket "$WORK/fake.sock" status >"$WORK/fake.txt" || fail "status"

texts=0
while IFS=$'\t' read -r path value text; do
	got=$(jq -c "$path" "$WORK/fake.json")
	[ "$got" = "$value" ] || fail "JSON $path: expected $value, got $got"
	if [ -n "$text" ]; then
		grep -qF -- "$text" "$WORK/fake.txt" || fail "text: no '$text' in: $(cat "$WORK/fake.txt")"
		texts=$((texts + 1))
	fi
done <"$WORK/rows"
# No JSON value that is not a row's (the recovery list aside).
leaves=$(jq '[del(.recovery.list) | paths(scalars)] | length' "$WORK/fake.json")
[ "$leaves" = "$n" ] || fail "JSON has $leaves values, the table $n rows"
ok "$n rows carried from the node's reply to ftvmctl's JSON, $texts to its text"

# The LIST rows (StatusReply.counters) from a node from before the list: 0.
"$FAKE" --list-rows >"$WORK/list_rows"
[ -s "$WORK/list_rows" ] || fail "ftvm-fake-status --list-rows listed no LIST row"
"$FAKE" --no-list "$WORK/old.sock" >>"$WORK/old.log" 2>&1 &
PIDS[old]=$!
old_answers() { "$FTVMCTL" --socket "$WORK/old.sock" status >/dev/null 2>&1; }
wait_for 5000 "the fake node without the list answers" old_answers
"$FTVMCTL" --socket "$WORK/old.sock" --json status >"$WORK/old.json" || fail "status --json (no list)"
while read -r path; do
	got=$(jq -c "$path" "$WORK/old.json")
	[ "$got" = 0 ] || fail "JSON $path from a node without the list: expected 0, got $got"
done <"$WORK/list_rows"
# ... and every other row as before: the fake's values with the LIST rows 0.
zeroed=$(sed 's/[[:space:]]*$/ = 0/' "$WORK/list_rows" | paste -sd '|')
[ "$(jq -S "$zeroed" "$WORK/fake.json")" = "$(jq -S . "$WORK/old.json")" ] ||
	fail "the node without the list: other rows differ: $(cat "$WORK/old.json")"
ok "$(wc -l <"$WORK/list_rows") LIST rows read as 0 from a node that sends no list"

start_pair
for id in a b; do
	ctl "$id" --json status >"$WORK/$id.json"
	while IFS=$'\t' read -r path _; do
		jq -e "$path != null" "$WORK/$id.json" >/dev/null || fail "node $id: no $path"
	done <"$WORK/rows"
done
ok "a pair's status has all $n rows"
