#!/usr/bin/env bash
# The README's commands: set up a fresh Debian machine and then
#   tools/dev.sh demo    build, run a local pair on loopback, drill a partner loss, summarise
#   tools/dev.sh test    build (gcc -Werror, clang ASan+UBSan), run every suite in both,
#                        fuzz every parser briefly, then the qemu guest's suite (vm)
#                        on the gcc build
#   tools/dev.sh bench   the partner-channel and memory-manager benchmarks (the latter
#                        ends with the write path of issue 24: ftvm at each ack level
#                        beside the relay and Redis), then the block path's
#                        (tools/bench_nbd.sh: NBD with fio, beside nbdkit)
#   tools/dev.sh bench --plot
#                        the same, keeping the write table's and fio's figures
#                        in run/bench/ (--data-dir), then drawing them as PNGs
#                        into tools/bench-plots/ (tools/bench_plot.sh), the
#                        README's pictures
set -euo pipefail

ROOT=$(cd "$(dirname "$0")/.." && pwd)
cd "$ROOT"

build() { # build DIR [meson options...]
	local dir=$1
	shift
	if [ ! -f "$dir/build.ninja" ]; then
		meson setup "$dir" "$@" >"$dir.setup.log" 2>&1 || {
			cat "$dir.setup.log"
			return 1
		}
	fi
	ninja -C "$dir"
}

demo() {
	build build-gcc --werror
	local run="$ROOT/run/demo" bin="$ROOT/build-gcc"
	rm -rf "$run"
	mkdir -p "$run"
	cp systemd/example/a.conf systemd/example/b.conf "$run/"
	local ctl="$bin/tools/ftvmctl"
	"$ctl" keygen "$run/pair.key" # the pair's key (key_file in both configs)
	declare -gA pid=() # global: the EXIT trap runs outside this function
	start() {
		"$bin/node/ftvmd" --config "$run/$1.conf" >>"$run/$1.log" 2>&1 &
		pid[$1]=$!
	}
	wait_until() { # wait_until SECONDS COMMAND...
		local end=$((SECONDS + $1))
		shift
		until "$@" >/dev/null 2>&1; do
			[ "$SECONDS" -lt "$end" ] || return 1
			sleep 0.05
		done
	}
	linked() { "$ctl" --config "$run/$1.conf" status | grep -q "link up"; }
	down() { "$ctl" --config "$run/$1.conf" status | grep -q "link down"; }
	trap 'kill -9 ${pid[*]} 2>/dev/null || true' EXIT

	echo "== starting a local pair on loopback (configs and logs in $run)"
	start a
	start b
	if ! { wait_until 10 linked a && wait_until 10 linked b; }; then
		tail "$run"/*.log
		return 1
	fi
	for id in a b; do
		echo "-- ftvmctl status on $id"
		"$ctl" --config "$run/$id.conf" status
	done

	echo "== workload: allocations on both nodes, whole-page writes from both, reads on the other"
	local ga gb writes=0
	ga=$("$ctl" --config "$run/a.conf" alloc --size 64K)
	gb=$("$ctl" --config "$run/b.conf" alloc --size 256K --policy stripe)
	for p in $(seq 0 15); do
		head -c 4096 /dev/urandom >"$run/page"
		"$ctl" --config "$run/$([ $((p % 2)) = 0 ] && echo a || echo b).conf" write "$ga" "$p" \
			--file "$run/page" >/dev/null
		"$ctl" --config "$run/b.conf" read "$ga" "$p" | cmp -s - "$run/page" || {
			echo "page $p of $ga reads back differently on b"
			return 1
		}
		writes=$((writes + 1))
	done
	for p in 0 1 2 3; do
		head -c 65536 /dev/urandom | "$ctl" --config "$run/a.conf" write "$gb" "$p" >/dev/null
		writes=$((writes + 1))
	done
	"$ctl" --config "$run/a.conf" list
	"$ctl" --config "$run/a.conf" verify

	echo "== drill: kill -9 b while writes go on; a takes over, b comes back and is resynced"
	local drill
	drill=$("$ctl" --config "$run/a.conf" --json drill kill b --ftvmd "$bin/node/ftvmd") || {
		echo "drill failed: $drill"
		tail "$run"/*.log
		return 1
	}
	echo "$drill" | jq .
	pid[b]=$("$ctl" --config "$run/b.conf" --json status | jq -r .pid)
	"$ctl" --config "$run/a.conf" status
	echo "== failback: b's allocation goes home"
	"$ctl" --config "$run/a.conf" failback
	"$ctl" --config "$run/a.conf" list
	"$ctl" --config "$run/a.conf" verify

	echo "== stopping both (SIGTERM)"
	kill -TERM "${pid[a]}" "${pid[b]}"
	wait "${pid[a]}" || true
	# b was started again by the drill, not by this shell: wait until it is gone.
	wait_until 30 bash -c "! kill -0 ${pid[b]}"
	trap - EXIT
	echo "== summary"
	echo "pair linked on tcp; $writes mirrored page writes from both nodes, verify equal"
	jq -r '"drill kill b: detected in \(.detect_ms) ms, a took over in \(.takeover_ms) ms; " +
		"\(.acked_during) writes acknowledged during the fault, \(.failed_during) failed; " +
		"b resynced (\(.resync_pages) " +
		"pages in \(.resync_ms) ms); \(.checked) pages checked on both nodes, \(.lost) lost; " +
		"equal: \(.equal)"' <<<"$drill"
	echo "failback: b's allocations home again, verify equal"
}

run_tests() { # run_tests DIR: every suite but vm (a qemu guest: slow, one build is enough)
	meson test -C "$1" --print-errorlogs --num-processes 2 --no-suite vm
}

check_format() {
	local files
	files=$(find common replica node tools tests -name '*.[ch]')
	# shellcheck disable=SC2086
	if clang-format --dry-run --Werror $files; then
		echo "style: $(wc -w <<<"$files") C files match .clang-format"
	else
		echo "style: the files above differ from .clang-format (fix: clang-format -i FILE)"
		return 1
	fi
}

test_all() {
	local failed=0
	check_format || failed=1
	build build-gcc --werror
	run_tests build-gcc || failed=1
	CC=clang build build-asan -Db_sanitize=address,undefined -Db_lundef=false --werror
	ASAN_OPTIONS=detect_leaks=1 UBSAN_OPTIONS=halt_on_error=1:print_stacktrace=1 \
		run_tests build-asan || failed=1
	# libFuzzer on each target of tests/fuzz/ (each has a corpus directory),
	# briefly, one at a time, on a copy of its corpus: 10 targets x
	# FUZZ_SECONDS (20 s) is under 4 minutes.
	# The targets' own stderr (parsers that print what they refuse) is
	# closed; libFuzzer's reports and sanitizer findings still come.
	CC=clang build build-fuzz -Dfuzz=true -Db_sanitize=address,undefined -Db_lundef=false
	local corpus target
	for target in tests/fuzz/corpus/*/; do
		target=$(basename "$target")
		corpus=$(mktemp -d)
		cp "tests/fuzz/corpus/$target"/* "$corpus/"
		if build-fuzz/tests/fuzz_$target -max_total_time="${FUZZ_SECONDS:-20}" -print_final_stats=1 \
			-close_fd_mask=2 "$corpus" >"build-fuzz/fuzz_$target.log" 2>&1; then
			echo "fuzz_$target: $(grep -E 'stat::number_of_executed_units' "build-fuzz/fuzz_$target.log" | awk '{print $2}') inputs, no crash"
		else
			tail -n 40 "build-fuzz/fuzz_$target.log"
			echo "fuzz_$target: FAILED"
			failed=1
		fi
		rm -rf "$corpus"
	done
	# The qemu guest (tests/vm/): the pair as systemd units, the drills through
	# systemctl. Its own log, testlog-vm.json (.ci/run counts it too): a
	# second `meson test` would overwrite testlog.json. A skip (77: no qemu or
	# no image here) is not a failure; meson exits 0 for it.
	meson test -C build-gcc --print-errorlogs --suite vm --logbase testlog-vm || failed=1
	return $failed
}

case "${1:-}" in
demo)
	bash tools/install-deps.sh
	demo
	;;
test)
	bash tools/install-deps.sh
	test_all
	;;
bench)
	plot=()
	case "${2:-}" in
	"") ;;
	--plot)
		rm -rf run/bench
		mkdir -p run/bench
		plot=(--data-dir "$ROOT/run/bench")
		;;
	*)
		echo "usage: tools/dev.sh bench [--plot]" >&2
		exit 2
		;;
	esac
	bash tools/install-deps.sh
	build build-gcc --werror
	build-gcc/tools/ftvm-bench-channel
	build-gcc/tools/ftvm-bench-vmm "${plot[@]}"
	bash tools/bench_nbd.sh --build build-gcc "${plot[@]}"
	if [ ${#plot[@]} -gt 0 ]; then
		echo "== plots of run/bench (tools/bench_plot.sh)"
		bash tools/bench_plot.sh run/bench tools/bench-plots
		echo "the PNGs are in $ROOT/tools/bench-plots; the data they came from in $ROOT/run/bench"
	fi
	;;
*)
	echo "usage: tools/dev.sh demo | test | bench [--plot]" >&2
	exit 2
	;;
esac
