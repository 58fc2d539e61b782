#!/usr/bin/env bash
# tools/bench_nbd.sh runs and prints its table: one round, one second per
# fio job, no ramp. A smoke run of the script, not of its figures: timing
# is never asserted; what is checked is that each row has its numbers and
# that both aims are judged; and that --data-dir wrote fio's figures as CSV
# and tools/bench_plot.sh draws them (that part skipped without gnuplot).
for tool in fio nbdkit jq; do
	command -v "$tool" >/dev/null || {
		echo "SKIP: $tool is not installed (tools/install-deps.sh)"
		exit 77
	}
done
fio --enghelp=nbd >/dev/null 2>&1 || {
	echo "SKIP: this fio has no nbd engine"
	exit 77
}
. "$(dirname "$0")/lib.sh"

BUILD=$(cd "$(dirname "$FTVMD")/.." && pwd)
TMPDIR=$WORK bash "$FTVM_SRCDIR/tools/bench_nbd.sh" --build "$BUILD" --rounds 1 --seconds 1 \
	--ramp 0 --count 100 --data-dir "$WORK/data" >"$WORK/bench.out" 2>&1 || {
	cat "$WORK/bench.out"
	fail "tools/bench_nbd.sh failed"
}
cat "$WORK/bench.out"
n='[0-9]+(\.[0-9]+)?'
for job in "randwrite QD1" "randwrite QD16" "randread QD1" "randread QD16"; do
	grep -Eq "^NBD $job +($n +){6}${n}x +${n}x$" "$WORK/bench.out" ||
		fail "no figures for NBD $job"
done
grep -Eq "^ftvm_write_page 4 KiB +$n +$n$" "$WORK/bench.out" || fail "no figures for ftvm_write_page"
for aim in "QD1 p50 <= 1.2x ftvm_write_page" "QD16 IOPS >= 0.25x nbdkit"; do
	grep -Eq "$aim.*: (met|not met)$" "$WORK/bench.out" || fail "the aim '$aim' is not judged"
done
ok "tools/bench_nbd.sh printed its table and judged both aims"

D=$WORK/data/nbd
[ "$(head -n 1 "$D/fio.csv")" = "round,job,rw,depth,target,p50_us,p99_us,iops" ] ||
	fail "fio.csv's header: $(head -n 1 "$D/fio.csv" 2>&1)"
[ "$(head -n 1 "$D/summary.csv")" = "job,rw,depth,target,p50_us,p99_us,iops" ] ||
	fail "summary.csv's header: $(head -n 1 "$D/summary.csv" 2>&1)"
for job in randwrite:1 randwrite:16 randread:1 randread:16; do
	rw=${job%%:*} depth=${job#*:}
	for target in ftvm nbdkit; do
		grep -Eq "^1,$rw-qd$depth,$rw,$depth,$target,$n,$n,$n$" "$D/fio.csv" ||
			fail "fio.csv: no line for $rw QD$depth on $target"
		grep -Eq "^$rw-qd$depth,$rw,$depth,$target,$n,$n,$n$" "$D/summary.csv" ||
			fail "summary.csv: no line for $rw QD$depth on $target"
	done
done
for f in fio.csv summary.csv; do
	[ "$(wc -l <"$D/$f")" = 9 ] || fail "$f: not one round's 8 jobs: $(cat "$D/$f")"
done
grep -Eqx 'nproc=[0-9]+' "$D/machine.txt" || fail "machine.txt: $(cat "$D/machine.txt")"
ok "--data-dir wrote fio.csv, summary.csv and machine.txt"

if ! command -v gnuplot >/dev/null; then
	echo "SKIP (part): gnuplot is not installed; tools/bench_plot.sh not run"
	exit 0
fi
bash "$FTVM_SRCDIR/tools/bench_plot.sh" "$WORK/data" "$WORK/plots" >"$WORK/plot.out" 2>&1 || {
	cat "$WORK/plot.out"
	fail "tools/bench_plot.sh failed"
}
cat "$WORK/plot.out"
grep -qx "$WORK/plots/nbd-iops.png" "$WORK/plot.out" || fail "bench_plot.sh drew no nbd-iops.png"
[ "$(head -c 8 "$WORK/plots/nbd-iops.png" | od -An -tx1 | tr -d ' \n')" = 89504e470d0a1a0a ] ||
	fail "nbd-iops.png is not a PNG"
ok "tools/bench_plot.sh drew fio's IOPS through NBD"
