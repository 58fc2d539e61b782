#!/usr/bin/env bash
# Draws the benchmarks' data files as PNG images with gnuplot
# (tools/install-deps.sh installs gnuplot-nox):
#
#   tools/bench_plot.sh DATA_DIR OUT_DIR
#
# From DATA_DIR/write (ftvm-bench-vmm --only write --data-dir DATA_DIR; the
# format is at the top of tools/bench_write.c):
#   write-latency-1.png    the CDF of a 4 KiB write's latency, one client
#                          waiting for each write: ftvm at each ack level
#                          beside bare TCP, the relay and Redis (log x, us)
#   write-latency-16.png   the same with 16 clients
#   write-clients.png      writes/s against clients (1, 4, 16), every subject
#   write-depth.png        writes/s of one client against its queue depth
#                          (1, 8, 32), every subject that has a queue
# From DATA_DIR/nbd (tools/bench_nbd.sh --data-dir DATA_DIR; the format is
# at its top):
#   nbd-iops.png           fio's IOPS through NBD, each job, ftvm beside
#                          nbdkit memory (medians of the rounds)
#
# Each image's title says what it shows and its footer the machine (CPUs,
# load average before the run) and the date of the run, from the
# machine.txt beside the data. What is missing from DATA_DIR is not drawn;
# nothing at all to draw is an error. Prints the path of each PNG made.
set -euo pipefail

usage() {
	echo "Usage: tools/bench_plot.sh DATA_DIR OUT_DIR" >&2
	exit 2
}
[ $# -eq 2 ] || usage
DATA=$1
OUT=$2
command -v gnuplot >/dev/null || {
	echo "bench_plot: gnuplot is not installed (tools/install-deps.sh: gnuplot-nox)" >&2
	exit 1
}
case $OUT in *\'* | *\"*)
	echo "bench_plot: OUT_DIR '$OUT' has a quote in it; gnuplot's output path cannot" >&2
	exit 2
	;;
esac
mkdir -p "$OUT"

# pngcairo draws smoother lines; the png terminal (libgd) is the fallback.
if gnuplot -e 'set terminal' 2>&1 | grep -qw pngcairo; then
	TERM_LINE="set terminal pngcairo size 800,500 font 'sans,10'"
else
	TERM_LINE="set terminal png size 800,500 font 'sans,10'"
fi

TMP=$(mktemp -d "${TMPDIR:-/tmp}/ftvm-bench-plot.XXXXXX")
trap 'rm -rf "$TMP"' EXIT
made=0

# machine FILE KEY: a value of a machine.txt (key=value lines), or "?"
machine() {
	awk -F= -v k="$2" '$1 == k { v = substr($0, length(k) + 2) } END { print (v == "" ? "?" : v) }' "$1"
}

# footer MACHINE_TXT WHAT: the caption line under a plot
footer() {
	local m=$1
	printf '%s; %s CPUs, load average %s before the run; %s' "$2" \
		"$(machine "$m" nproc)" "$(machine "$m" load)" "$(machine "$m" date)"
}

# plot NAME: runs the gnuplot script on stdin into OUT/NAME.png
plot() {
	local png=$OUT/$1.png
	{
		echo "$TERM_LINE"
		echo "set output '$png'"
		echo "set termoption noenhanced" # file names have underscores
		echo "set datafile separator whitespace"
		echo "set grid lc rgb '#dddddd'"
		echo "set key top left box opaque"
		echo "set bmargin 5"
		cat
	} >"$TMP/$1.gp"
	gnuplot "$TMP/$1.gp" || {
		echo "bench_plot: gnuplot failed on $TMP/$1.gp" >&2
		trap - EXIT
		exit 1
	}
	echo "$png"
	made=$((made + 1))
}

# ---- the write path ----

# Subjects in the order they are drawn: slug, legend, colour, dash type
SUBJECTS=(
	"tcp|bare TCP ping-pong|#888888|2"
	"relay|relay (design floor)|#444444|3"
	"redis|Redis SET + WAIT 1|#d62728|1"
	"mirror|ftvm ack=mirror|#1f77b4|1"
	"commit|ftvm ack=commit|#2ca02c|1"
	"durable|ftvm ack=durable|#9467bd|1"
)
W=$DATA/write
SUMMARY=$W/summary.csv

# has ROW SUBJECT: whether summary.csv has that cell
has() { awk -F, -v r="$1" -v s="$2" 'NR > 1 && $1 == r && $4 == s { f = 1 } END { exit !f }' "$SUMMARY"; }

# cdf ROW SUBJECT: the cell's sorted samples as "us fraction" lines, at most
# about 2000 of them spread over the ranks and every one of the top 1%
# (the tail is the point); a 0 us sample drawn at 1 us (the axis is log).
cdf() {
	awk -v n="$(wc -l <"$W/$1/$2.samples")" '
		BEGIN { step = int(n / 2000); if (step < 1) step = 1 }
		NR % step == 0 || NR >= 0.99 * n || NR == 1 {
			print ($1 < 1 ? 1 : $1), NR / n
		}' "$W/$1/$2.samples"
}

write_footer() {
	footer "$W/machine.txt" "ftvm-bench-vmm --only write, $(machine "$W/machine.txt" rounds) round(s) of $(machine "$W/machine.txt" cell_ms) ms a cell"
}

latency_plot() { # latency_plot ROW CLIENTS
	local row=$1 clients=$2 plots=() sub slug name colour dash
	for sub in "${SUBJECTS[@]}"; do
		IFS='|' read -r slug name colour dash <<<"$sub"
		if ! has "$row" "$slug" || [ ! -s "$W/$row/$slug.samples" ]; then continue; fi
		cdf "$row" "$slug" >"$TMP/cdf-$row-$slug"
		plots+=("'$TMP/cdf-$row-$slug' using 1:2 with steps lw 2 dt $dash lc rgb '$colour' title '$name'")
	done
	[ ${#plots[@]} -gt 0 ] || return 0
	local s=""
	[ "$clients" = 1 ] || s=s
	plot "write-latency-$row" <<-EOF
	set title "4 KiB mirrored writes, $clients client$s each waiting for its write: latency CDF"
	set xlabel "latency, us (log scale)"
	set ylabel "fraction of writes at most this long"
	set logscale x 10
	set yrange [0:1]
	set key outside right top box
	set label 1 "$(write_footer)" at screen 0.01, 0.02 font ',8'
	plot $(IFS=,; echo "${plots[*]}")
	EOF
}

throughput_plot() { # throughput_plot NAME COLUMN(clients 2, depth 3) XLABEL TITLE
	local name=$1 col=$2 xlabel=$3 title=$4 plots=() sub slug label colour dash
	for sub in "${SUBJECTS[@]}"; do
		IFS='|' read -r slug label colour dash <<<"$sub"
		# clients: the rows where each client waits (depth 0); depth: the queued rows
		awk -F, -v s="$slug" -v c="$col" '
			NR > 1 && $4 == s && (c == 2 ? $3 == 0 : $3 > 0) { print $c, $7 }' \
			"$SUMMARY" | sort -n >"$TMP/$name-$slug"
		[ -s "$TMP/$name-$slug" ] || continue
		plots+=("'$TMP/$name-$slug' using 1:2 with linespoints lw 2 pt 7 dt $dash lc rgb '$colour' title '$label'")
	done
	[ ${#plots[@]} -gt 0 ] || return 0
	local tics
	tics=$(cat "$TMP/$name"-* | awk '{ print $1 }' | sort -un | paste -sd, -)
	plot "$name" <<-EOF
	set title "$title"
	set xlabel "$xlabel (log scale)"
	set ylabel "writes/s (log scale)"
	set logscale x 2
	set logscale y 10
	set format y "%.0s%c"
	set xtics ($tics)
	set xrange [*:*]
	set offsets graph 0.05, graph 0.05, 0, 0
	set key outside right top box
	set label 1 "$(write_footer)" at screen 0.01, 0.02 font ',8'
	plot $(IFS=,; echo "${plots[*]}")
	EOF
}

if [ -f "$SUMMARY" ] && [ -f "$W/machine.txt" ]; then
	latency_plot 1 1
	latency_plot 16 16
	throughput_plot write-clients 2 "clients, each on its own connection and waiting for its write" \
		"4 KiB mirrored writes: writes/s against clients"
	throughput_plot write-depth 3 "writes in flight (queue depth) of one client" \
		"4 KiB mirrored writes: writes/s of one client against its queue depth"
fi

# ---- the block path ----

N=$DATA/nbd
if [ -f "$N/summary.csv" ] && [ -f "$N/machine.txt" ]; then
	# One line per job: "rw QD" ftvm nbdkit, the jobs in the file's order.
	awk -F, '
		NR > 1 {
			job = $2 " QD" $3
			if (!(job in seen)) { seen[job] = 1; order[++n] = job }
			iops[job, $4] = $7
		}
		END {
			for (i = 1; i <= n; i++) {
				j = order[i]
				printf "\"%s\" %s %s\n", j, ((j, "ftvm") in iops ? iops[j, "ftvm"] : "NaN"),
					((j, "nbdkit") in iops ? iops[j, "nbdkit"] : "NaN")
			}
		}' "$N/summary.csv" >"$TMP/nbd"
	if [ -s "$TMP/nbd" ]; then
		plot nbd-iops <<-EOF
		set title "4 KiB random I/O through NBD with fio: IOPS, ftvm (mirrored) beside nbdkit memory"
		set ylabel "IOPS (median of the rounds)"
		set style data histogram
		set style histogram clustered gap 1
		set style fill solid 0.8 border -1
		set boxwidth 0.9
		set yrange [0:*]
		set key top left box opaque
		set label 1 "$(footer "$N/machine.txt" "tools/bench_nbd.sh, $(machine "$N/machine.txt" rounds) round(s) of $(machine "$N/machine.txt" seconds) s a job")" at screen 0.01, 0.02 font ',8'
		plot '$TMP/nbd' using 2:xtic(1) lc rgb '#1f77b4' title 'ftvm, a volume on a pair', \
		     '' using 3 lc rgb '#888888' title 'nbdkit memory, not mirrored'
		EOF
	fi
fi

if [ "$made" -eq 0 ]; then
	echo "bench_plot: nothing to draw in $DATA (no write/summary.csv, no nbd/summary.csv)" >&2
	exit 1
fi
