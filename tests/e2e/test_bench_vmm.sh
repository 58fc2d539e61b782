#!/usr/bin/env bash
# ftvm-bench-vmm's write-path table (issue 24) runs and prints: one round,
# 100 ms a cell, about four seconds of load in all. A smoke run of the table,
# not of its figures: timing is never asserted; what is checked is that every
# subject has its figures in every row it runs, writes per commit for each
# ftvm row, and that every aim is judged.
. "$(dirname "$0")/lib.sh"

BUILD=$(cd "$(dirname "$FTVMD")/.." && pwd)
BENCH=$BUILD/tools/ftvm-bench-vmm
[ -x "$BENCH" ] || fail "no $BENCH"
TMPDIR=$WORK "$BENCH" --only write --rounds 1 --cell-ms 100 >"$WORK/bench.out" 2>&1 || {
	cat "$WORK/bench.out"
	fail "ftvm-bench-vmm --only write failed"
}
cat "$WORK/bench.out"
out=$WORK/bench.out
n='[0-9]+'
x='([0-9]+(\.[0-9]+)?x|-)'
have_redis=$(command -v redis-server >/dev/null && echo yes || echo no)

# The rows between a row's name and the next: rows_of NAME
rows_of() {
	awk -v row="$1" '$0 == row { on = 1; next } /^[^ ]/ { on = 0 } on' "$out"
}
figures="+$n +$n +$n +$x +$x +$x +$x"
for row in "1 client" "4 clients" "16 clients" "1 client, queue depth 1" \
	"1 client, queue depth 8" "1 client, queue depth 32"; do
	grep -qx "$row" "$out" || fail "no row '$row'"
	lines=$(rows_of "$row")
	for ref in "bare TCP ping-pong" "relay \(design floor\)"; do
		grep -Eq "^  $ref $figures$" <<<"$lines" || fail "$row: no figures for $ref"
	done
	if [ "$have_redis" = yes ]; then
		grep -Eq "^  redis SET \+ WAIT 1 $figures$" <<<"$lines" ||
			fail "$row: no figures for Redis"
	else
		grep -Eq "^  redis SET \+ WAIT 1 +skipped \(redis-server not installed\)$" <<<"$lines" ||
			fail "$row: Redis is not said to be skipped"
	fi
	for level in mirror commit durable; do
		grep -Eq "^  ftvm ack=$level $figures +($n\.$n|-) +($n\.$n|-)$" <<<"$lines" ||
			fail "$row: no figures or writes per commit for ftvm ack=$level"
	done
done
rows_of "16 clients" | grep -Eq "^  ftvm ack=mirror $figures +$n\.$n +$n\.$n$" ||
	fail "no writes per commit of either node for ack=mirror with 16 clients"

aims=$(sed -n '/^aims (issue 24)/,/^$/p' "$out")
[ "$(grep -Ec '(: met|: not met| not judged \(.*\))$' <<<"$aims")" -eq 8 ] ||
	fail "not every aim is judged"
if [ "$have_redis" = yes ]; then
	for aim in "ack=mirror: 1 client p50" "ack=mirror: 16 clients" "ack=commit: 1 client p50" \
		"ack=commit: 16 clients"; do
		grep -Eq "^  $aim .*: (met|not met)$" <<<"$aims" || fail "aim '$aim' not judged"
	done
fi
grep -Eq "^to run it again: .*ftvm-bench-vmm --only write --rounds 1 --cell-ms 100$" "$out" ||
	fail "the command line is not printed"
ok "ftvm-bench-vmm printed the write-path table, writes per commit, and judged every aim"
