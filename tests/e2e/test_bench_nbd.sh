#!/usr/bin/env bash
# tools/bench_nbd.sh runs and prints its table: one round, one second per
# fio job, no ramp. A smoke run of the script, not of its figures: timing
# is never asserted; what is checked is that each row has its numbers and
# that both aims are judged.
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
	--ramp 0 --count 100 >"$WORK/bench.out" 2>&1 || {
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
