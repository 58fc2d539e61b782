#!/usr/bin/env bash
# ftvm-bench-vmm's write-path table (issue 24) runs and prints: one round,
# 100 ms a cell, about four seconds of load in all. A smoke run of the table,
# not of its figures: timing is never asserted; what is checked is that every
# subject has its figures in every row it runs (the servers' CPU time per
# write among them, measured for ftvm's busiest row), writes per commit for each
# ftvm row, and that every aim is judged; then that --data-dir wrote the
# summary, the samples and the machine, well formed, and that
# tools/bench_plot.sh draws PNGs of them (that part skipped without gnuplot).
. "$(dirname "$0")/lib.sh"

BUILD=$(cd "$(dirname "$FTVMD")/.." && pwd)
BENCH=$BUILD/tools/ftvm-bench-vmm
[ -x "$BENCH" ] || fail "no $BENCH"
DATA=$WORK/data
TMPDIR=$WORK "$BENCH" --only write --rounds 1 --cell-ms 100 --data-dir "$DATA" \
	>"$WORK/bench.out" 2>&1 || {
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
cpu='([0-9]+\.[0-9]|-)' # the servers' CPU us per write; "-" when no tick fell in a cell
figures="+$n +$n +$n +$x +$x +$x +$x +$cpu"
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
rows_of "16 clients" | grep -Eq "^  ftvm ack=mirror +$n +$n +$n +$x +$x +$x +$x +$n\.[0-9] " ||
	fail "no CPU time per write of the pair for ack=mirror with 16 clients"

aims=$(sed -n '/^aims (issue 24)/,/^$/p' "$out")
[ "$(grep -Ec '(: met|: not met|: not met, within 1.2x the relay| not judged \(.*\))$' \
	<<<"$aims")" -eq 8 ] || fail "not every aim is judged"
if [ "$have_redis" = yes ]; then
	for aim in "ack=mirror: 1 client p50" "ack=mirror: 16 clients" "ack=commit: 1 client p50" \
		"ack=commit: 16 clients"; do
		grep -Eq "^  $aim .*; the relay [0-9]+ (us, ftvm [0-9.]+x it|writes/s, [0-9.]+x ftvm's): (met|not met|not met, within 1.2x the relay)$" \
			<<<"$aims" || fail "aim '$aim' not judged beside the relay"
	done
fi
grep -Eq "^to run it again: .*ftvm-bench-vmm --only write --rounds 1 --cell-ms 100 --data-dir $DATA$" \
	"$out" || fail "the command line is not printed"
ok "ftvm-bench-vmm printed the write-path table, writes per commit, and judged every aim"

# ---- --data-dir: the files of the top of tools/bench_write.c ----
W=$DATA/write
for f in summary.csv machine.txt; do
	[ -s "$W/$f" ] || fail "--data-dir: no $W/$f"
done
[ "$(head -n 1 "$W/summary.csv")" = "row,clients,depth,subject,p50_us,p99_us,writes_per_s,samples,cpu_us_per_write" ] ||
	fail "summary.csv's header: $(head -n 1 "$W/summary.csv")"
subjects="tcp relay mirror commit durable"
[ "$have_redis" = no ] || subjects="$subjects redis"
for row in 1,1,0 4,4,0 16,16,0 qd1,1,1 qd8,1,8 qd32,1,32; do
	for subject in $subjects; do
		line=$(grep -E "^$row,$subject,$n,$n,$n,$n,$cpu$" "$W/summary.csv") ||
			fail "summary.csv: no well-formed line for row $row, $subject"
		file=$W/${row%%,*}/$subject.samples
		[ -s "$file" ] || fail "no samples in $file"
		grep -Evq '^[0-9]+$' "$file" && fail "$file: a line that is not a whole number"
		sort -n -c "$file" || fail "$file is not sorted"
		samples=$(cut -d, -f8 <<<"$line")
		[ "$(wc -l <"$file")" = "$samples" ] ||
			fail "$file: $(wc -l <"$file") samples, summary.csv says $samples"
	done
done
[ "$(($(wc -l <"$W/summary.csv") - 1))" = "$((6 * $(wc -w <<<"$subjects")))" ] ||
	fail "summary.csv: lines beyond the cells measured"
if ! { grep -Eqx "nproc=$n" "$W/machine.txt" &&
	grep -Eqx 'load=-?[0-9]+\.[0-9]{2}' "$W/machine.txt" &&
	grep -Eqx 'date=[0-9]{4}-[0-9]{2}-[0-9]{2}T[0-9:]{8}Z' "$W/machine.txt"; }; then
	fail "machine.txt: $(cat "$W/machine.txt")"
fi
ok "--data-dir wrote summary.csv, every cell's sorted samples and machine.txt"

# ---- tools/bench_plot.sh on them ----
if ! command -v gnuplot >/dev/null; then
	echo "SKIP (part): gnuplot is not installed; tools/bench_plot.sh not run"
	exit 0
fi
bash "$FTVM_SRCDIR/tools/bench_plot.sh" "$DATA" "$WORK/plots" >"$WORK/plot.out" 2>&1 || {
	cat "$WORK/plot.out"
	fail "tools/bench_plot.sh failed"
}
cat "$WORK/plot.out"
for png in write-latency-1 write-latency-16 write-clients write-depth; do
	f=$WORK/plots/$png.png
	grep -qx "$f" "$WORK/plot.out" || fail "bench_plot.sh did not name $f"
	[ "$(head -c 8 "$f" | od -An -tx1 | tr -d ' \n')" = 89504e470d0a1a0a ] ||
		fail "$f is not a PNG"
done
[ ! -e "$WORK/plots/nbd-iops.png" ] || fail "an NBD plot drawn without NBD data"
ok "tools/bench_plot.sh drew the write path's four PNGs"
