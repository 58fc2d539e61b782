#!/usr/bin/env bash
# The block path's benchmark (issue 23's aims): 4 KiB random I/O through NBD
# to a volume on a pair of ftvmd, held against two references taken in the
# same run, interleaved with it:
#  - `nbdkit memory`: an NBD server of plain memory, not mirrored; the same
#    fio jobs, alternating with ftvm's, run by run;
#  - ftvm_write_page(): a whole-page 4 KiB write through libftvm on the same
#    pair (ftvm-bench-vmm --node), once per round.
# Each round runs, in turn: the whole-page writes; then for each fio job
# (randwrite and randread, queue depth 1 and 16) ftvm and nbdkit, the one
# first that went second in the round before. The table has the median of
# the rounds; each ratio is the ratio of two medians, with the range of the
# same ratio taken within each round. Figures are printed, never asserted.
#
# The pair: pools of 128M, a quarter of them the storage cache ([memory]
# cache = 25%), an NBD socket on both nodes; a 16M volume made on node a,
# so that it fits the cache (nothing is evicted: this measures the mirrored
# write, not destage), written through once before the rounds; fio reaches
# it through node a, which owns it, as the whole-page writes' pages are
# owned by node a. fio's engine is its nbd one (libnbd): one connection,
# up to iodepth requests in flight on it.
#
# With --data-dir DIR, the figures also go to files, for tools/bench_plot.sh
# and anyone's own tools (files of an earlier run are overwritten):
#   DIR/nbd/fio.csv      every fio job of every round:
#                        round,job,rw,depth,target,p50_us,p99_us,iops
#                        e.g. 2,randwrite-qd16,randwrite,16,ftvm,190,420,71210
#                        (target ftvm or nbdkit; latencies in microseconds)
#   DIR/nbd/summary.csv  the table's medians over the rounds, one line per
#                        job and target: job,rw,depth,target,p50_us,p99_us,iops
#   DIR/nbd/machine.txt  key=value lines: nproc, load (1-minute load average
#                        before the run), date (UTC, ISO 8601, when the run
#                        ended), rounds, seconds (each job's)
#
# tools/bench_nbd.sh [--build DIR] [--rounds N] [--seconds S] [--ramp S] [--count N]
#                    [--data-dir DIR]
set -euo pipefail

ROOT=$(cd "$(dirname "$0")/.." && pwd)
BUILD=$ROOT/build-gcc
ROUNDS=3
SECONDS_EACH=5
RAMP=1
COUNT=2000
VOLUME_SIZE=16M
DATA_DIR=

usage() {
	cat <<-EOF
	Usage: tools/bench_nbd.sh [--build DIR] [--rounds N] [--seconds S] [--ramp S] [--count N]
	                          [--data-dir DIR]
	Starts a pair of ftvmd with a volume served over NBD and measures 4 KiB random
	writes and reads through it with fio, interleaved with the same jobs against
	nbdkit memory and with ftvm_write_page() on the same pair.
	  --build DIR   the build tree (default: build-gcc); its ftvmd, ftvmctl and
	                ftvm-bench-vmm are run
	  --rounds N    rounds of every measurement (default 3)
	  --seconds S   each fio job's measured run time (default 5)
	  --ramp S      each fio job's run time before it measures (default 1; 0: none)
	  --count N     ftvm_write_page() samples per round (default 2000)
	  --data-dir D  fio's figures also as files: D/nbd/fio.csv (each job of each
	                round), D/nbd/summary.csv (the medians) and D/nbd/machine.txt
	                (nproc, load, date); tools/bench_plot.sh draws them
	EOF
}

while [ $# -gt 0 ]; do
	case $1 in
	--build) BUILD=$2; shift 2 ;;
	--rounds) ROUNDS=$2; shift 2 ;;
	--seconds) SECONDS_EACH=$2; shift 2 ;;
	--ramp) RAMP=$2; shift 2 ;;
	--count) COUNT=$2; shift 2 ;;
	--data-dir) DATA_DIR=$2; shift 2 ;;
	--help) usage; exit 0 ;;
	*) usage >&2; exit 2 ;;
	esac
done
for n in "$ROUNDS" "$SECONDS_EACH" "$COUNT"; do
	[[ $n =~ ^[1-9][0-9]*$ ]] || { echo "bench_nbd: '$n' is not a whole number from 1" >&2; exit 2; }
done
[[ $RAMP =~ ^[0-9]+$ ]] || { echo "bench_nbd: --ramp '$RAMP' is not a whole number" >&2; exit 2; }

FTVMD=$BUILD/node/ftvmd
FTVMCTL=$BUILD/tools/ftvmctl
BENCH_VMM=$BUILD/tools/ftvm-bench-vmm
FREE_PORT=$BUILD/tests/support/ftvm-free-port
for bin in "$FTVMD" "$FTVMCTL" "$BENCH_VMM" "$FREE_PORT"; do
	[ -x "$bin" ] || { echo "bench_nbd: no $bin (build first, or name the tree with --build)" >&2; exit 1; }
done
for tool in fio nbdkit jq; do
	command -v "$tool" >/dev/null || {
		echo "bench_nbd: $tool is not installed (tools/install-deps.sh)" >&2
		exit 1
	}
done
fio --enghelp=nbd >/dev/null 2>&1 || { echo "bench_nbd: this fio has no nbd engine" >&2; exit 1; }
LOAD=$(cut -d' ' -f1 /proc/loadavg 2>/dev/null || echo -1)

# Short: the unix sockets live in it.
WORK=$(mktemp -d "${TMPDIR:-/tmp}/ftvm-bench-nbd.XXXXXX")
declare -A PIDS=()
KEEP=0
cleanup() {
	local name
	for name in "${!PIDS[@]}"; do
		kill "${PIDS[$name]}" 2>/dev/null || true
	done
	wait 2>/dev/null || true
	if [ "$KEEP" -eq 0 ]; then
		rm -rf "$WORK"
	else
		echo "bench_nbd: configs and logs kept in $WORK" >&2
	fi
}
trap cleanup EXIT

die() {
	echo "bench_nbd: $*" >&2
	KEEP=1
	exit 1
}

# until_ok SECONDS WHAT COMMAND...: polls COMMAND until it succeeds.
until_ok() {
	local end=$((SECONDS + $1)) what=$2
	shift 2
	until "$@" >/dev/null 2>&1; do
		[ "$SECONDS" -lt "$end" ] || die "$what: not within $1 s"
		sleep 0.05
	done
}

ctl() {
	local id=$1
	shift
	"$FTVMCTL" --config "$WORK/$id.conf" "$@"
}

linked() {
	local st
	st=$(ctl "$1" --json status) || return 1
	[ "$(jq -r '.partner.link + " " + .state' <<<"$st")" = "up active" ]
}

# ---- the pair and nbdkit ----

"$FTVMCTL" keygen "$WORK/pair.key" >/dev/null
port_a=$("$FREE_PORT")
port_b=$("$FREE_PORT")
for id in a b; do
	if [ "$id" = a ]; then port=$port_a partner=$port_b; else port=$port_b partner=$port_a; fi
	cat >"$WORK/$id.conf" <<-CONF
	# written by tools/bench_nbd.sh
	[node]
	id = $id
	listen = 127.0.0.1:$port
	partner = 127.0.0.1:$partner
	key_file = pair.key
	socket = $id.sock
	state_dir = $id
	[memory]
	size = 128M
	cache = 25%
	[store]
	path = shared/store
	[failover]
	heartbeat_ms = 100
	dead_after_ms = 2000
	[nbd]
	socket = $id.nbd
	CONF
	"$FTVMD" --config "$WORK/$id.conf" >>"$WORK/$id.log" 2>&1 &
	PIDS[$id]=$!
done
until_ok 10 "the pair linked" linked a
until_ok 10 "the pair linked" linked b
ctl a volume create disk --size "$VOLUME_SIZE" >/dev/null || die "volume create disk on a"

nbdkit --foreground --unix "$WORK/mem.nbd" memory 64M >>"$WORK/nbdkit.log" 2>&1 &
PIDS[nbdkit]=$!
until_ok 10 "nbdkit serving on $WORK/mem.nbd" test -S "$WORK/mem.nbd"

declare -A URI=(
	[ftvm]="nbd+unix:///disk?socket=$WORK/a.nbd"
	[nbdkit]="nbd+unix:///?socket=$WORK/mem.nbd"
)
echo "pair: ftvmd $FTVMD, a pid ${PIDS[a]}, b pid ${PIDS[b]}, volume disk ($VOLUME_SIZE) on a;" \
	"nbdkit memory pid ${PIDS[nbdkit]}; in $WORK"

# fio_run TARGET RW DEPTH RAMP RUNTIME OUT: one fio job on TARGET's export,
# its JSON in OUT. Both targets get the same size (the volume's), so the
# same pages are chosen among.
fio_run() {
	local target=$1 rw=$2 depth=$3 ramp=$4 runtime=$5 out=$6
	fio --name="$target-$rw-qd$depth" --ioengine=nbd --uri="${URI[$target]}" \
		--rw="$rw" --bs=4k --iodepth="$depth" --size="$VOLUME_SIZE" \
		--time_based --ramp_time="$ramp" --runtime="$runtime" \
		--lat_percentiles=1 --percentile_list=50:99 \
		--output-format=json --output="$out" >>"$WORK/fio.log" 2>&1 ||
		die "fio $rw at depth $depth on $target failed: $(tail -n 5 "$WORK/fio.log")"
}

# Every page written once before any round: the volume's pages resident and
# mirrored, nbdkit's memory allocated.
for target in ftvm nbdkit; do
	fio --name="fill-$target" --ioengine=nbd --uri="${URI[$target]}" --rw=write --bs=64k \
		--iodepth=4 --size="$VOLUME_SIZE" --output="$WORK/fill-$target.json" \
		--output-format=json >>"$WORK/fio.log" 2>&1 || die "filling $target failed"
done

# ---- the rounds ----

JOBS=(randwrite:1 randwrite:16 randread:1 randread:16)
# One line per measurement: round job target p50_us p99_us iops
RESULTS=$WORK/results
: >"$RESULTS"
for round in $(seq 1 "$ROUNDS"); do
	"$BENCH_VMM" --node "$WORK/a.sock" --count "$COUNT" >"$WORK/write_page.$round" ||
		die "ftvm-bench-vmm --node failed: $(cat "$WORK/write_page.$round")"
	awk -v r="$round" '/^write_page 4 KiB, owned here/ { print r, "write_page", "ftvm", $(NF-2), $(NF-1), 0 }' \
		"$WORK/write_page.$round" >>"$RESULTS"
	if [ $((round % 2)) = 1 ]; then order=(ftvm nbdkit); else order=(nbdkit ftvm); fi
	for job in "${JOBS[@]}"; do
		rw=${job%%:*} depth=${job#*:}
		for target in "${order[@]}"; do
			out=$WORK/$target-$rw-$depth.$round.json
			fio_run "$target" "$rw" "$depth" "$RAMP" "$SECONDS_EACH" "$out"
			dir=${rw#rand}
			jq -r --arg r "$round" --arg j "$rw-qd$depth" --arg t "$target" --arg d "$dir" \
				'.jobs[0][$d] as $x |
				 "\($r) \($j) \($t) \($x.lat_ns.percentile["50.000000"] / 1000 | round)" +
				 " \($x.lat_ns.percentile["99.000000"] / 1000 | round) \($x.iops | round)"' \
				"$out" >>"$RESULTS" || die "no figures in $out"
		done
	done
	echo "round $round of $ROUNDS done"
done

# ---- the table ----

# med JOB TARGET FIELD (4 p50, 5 p99, 6 iops): the median over the rounds.
med() {
	awk -v j="$1" -v t="$2" -v f="$3" '$2 == j && $3 == t { print $f }' "$RESULTS" | sort -n |
		awk '{ v[NR] = $1 } END { print NR % 2 ? v[(NR + 1) / 2] : (v[NR / 2] + v[NR / 2 + 1]) / 2 }'
}
# ratio_range JOB1 TARGET1 JOB2 TARGET2 FIELD: the ratio within each round, min-max.
ratio_range() {
	awk -v j1="$1" -v t1="$2" -v j2="$3" -v t2="$4" -v f="$5" '
		$2 == j1 && $3 == t1 { a[$1] = $f }
		$2 == j2 && $3 == t2 { b[$1] = $f }
		END {
			for (r in a) if (b[r] > 0) {
				x = a[r] / b[r]
				if (n++ == 0 || x < lo) lo = x
				if (n == 1 || x > hi) hi = x
			}
			printf "%.2f-%.2fx", lo, hi
		}' "$RESULTS"
}
ratio() { awk -v a="$1" -v b="$2" 'BEGIN { printf "%.2f", (b > 0 ? a / b : 0) }'; }

printf '\n%-24s %8s %8s %8s   %8s %8s %8s   %s\n' "4 KiB, $VOLUME_SIZE" "ftvm" "" "" \
	"nbdkit" "" "" "ftvm/nbdkit"
printf '%-24s %8s %8s %8s   %8s %8s %8s   %-6s %s\n' "" "p50 us" "p99 us" "IOPS" \
	"p50 us" "p99 us" "IOPS" "p50" "IOPS"
for job in "${JOBS[@]}"; do
	rw=${job%%:*} depth=${job#*:}
	j=$rw-qd$depth
	printf '%-24s %8s %8s %8s   %8s %8s %8s   %-6s %s\n' "NBD $rw QD$depth" \
		"$(med "$j" ftvm 4)" "$(med "$j" ftvm 5)" "$(med "$j" ftvm 6)" \
		"$(med "$j" nbdkit 4)" "$(med "$j" nbdkit 5)" "$(med "$j" nbdkit 6)" \
		"$(ratio "$(med "$j" ftvm 4)" "$(med "$j" nbdkit 4)")x" \
		"$(ratio "$(med "$j" ftvm 6)" "$(med "$j" nbdkit 6)")x"
done
printf '%-24s %8s %8s\n' "ftvm_write_page 4 KiB" "$(med write_page ftvm 4)" "$(med write_page ftvm 5)"
echo "(medians of $ROUNDS rounds, interleaved; fio's nbd engine, ${SECONDS_EACH} s per job after $RAMP s"
echo " of ramp, over the volume's $VOLUME_SIZE; ftvm through node a's NBD socket, nbdkit memory 64M"
echo " not mirrored; ftvm_write_page: $COUNT whole-page writes per round, owned by node a,"
echo " through libftvm (ftvm-bench-vmm --node); IOPS at QD1 follow the mean latency, not p50)"
evictions=$(for id in a b; do ctl "$id" --json status | jq -r .replacement.evictions; done | paste -sd/)
echo "evictions on a/b during the run: $evictions"

qd1=$(med randwrite-qd1 ftvm 4)
wp=$(med write_page ftvm 4)
iops=$(med randwrite-qd16 ftvm 6)
kit=$(med randwrite-qd16 nbdkit 6)
echo
echo "aims (issue 23):"
printf '  NBD randwrite QD1 p50 <= 1.2x ftvm_write_page p50:  %s us / %s us = %sx (rounds %s): %s\n' \
	"$qd1" "$wp" "$(ratio "$qd1" "$wp")" "$(ratio_range randwrite-qd1 ftvm write_page ftvm 4)" \
	"$(awk -v a="$qd1" -v b="$wp" 'BEGIN { print (a <= 1.2 * b ? "met" : "not met") }')"
printf '  NBD randwrite QD16 IOPS >= 0.25x nbdkit memory:     %s / %s = %sx (rounds %s): %s\n' \
	"$iops" "$kit" "$(ratio "$iops" "$kit")" "$(ratio_range randwrite-qd16 ftvm randwrite-qd16 nbdkit 6)" \
	"$(awk -v a="$iops" -v b="$kit" 'BEGIN { print (a >= 0.25 * b ? "met" : "not met") }')"

if [ -n "$DATA_DIR" ]; then
	mkdir -p "$DATA_DIR/nbd" || die "--data-dir: cannot make $DATA_DIR/nbd"
	{
		echo "round,job,rw,depth,target,p50_us,p99_us,iops"
		awk '$2 != "write_page" {
			rw = $2; sub(/-qd[0-9]+$/, "", rw); depth = $2; sub(/^.*-qd/, "", depth)
			print $1 "," $2 "," rw "," depth "," $3 "," $4 "," $5 "," $6
		}' "$RESULTS"
	} >"$DATA_DIR/nbd/fio.csv"
	{
		echo "job,rw,depth,target,p50_us,p99_us,iops"
		for job in "${JOBS[@]}"; do
			rw=${job%%:*} depth=${job#*:}
			for target in ftvm nbdkit; do
				printf '%s,%s,%s,%s,%s,%s,%s\n' "$rw-qd$depth" "$rw" "$depth" "$target" \
					"$(med "$rw-qd$depth" "$target" 4)" "$(med "$rw-qd$depth" "$target" 5)" \
					"$(med "$rw-qd$depth" "$target" 6)"
			done
		done
	} >"$DATA_DIR/nbd/summary.csv"
	printf 'nproc=%s\nload=%s\ndate=%s\nrounds=%s\nseconds=%s\n' "$(nproc)" "$LOAD" \
		"$(date -u +%Y-%m-%dT%H:%M:%SZ)" "$ROUNDS" "$SECONDS_EACH" >"$DATA_DIR/nbd/machine.txt"
	echo "its data: $DATA_DIR/nbd: fio.csv, summary.csv, machine.txt"
fi
