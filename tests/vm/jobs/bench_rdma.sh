#!/usr/bin/env bash
# Benchmarks of the RDMA transport inside the guest (issue 5), not part of
# the vm suite: `tests/vm/run.sh --build DIR bench_rdma`. Soft-RoCE on a
# dummy NIC (joblib.sh's softroce_up); perftest's ib_send_lat and
# ib_write_bw on rxe0 as the floor; ftvm-bench-channel (the partner round
# trip) over rdma and over tcp; ftvm-bench-vmm (libftvm latency and page-write
# throughput) with the pair on rdma and on tcp. Under TCG the absolute
# figures mean little: the ratios to the floor are what to compare. Figures
# are printed, never asserted; the job fails only when a benchmark cannot run.
# shellcheck source=tests/vm/joblib.sh
. "$FTVM_SRC/tests/vm/joblib.sh"

ADDR=10.0.3.1
ITERS=${FTVM_BENCH_ITERS:-2000}
bench_channel=$FTVM_BUILD/tools/ftvm-bench-channel
bench_vmm=$FTVM_BUILD/tools/ftvm-bench-vmm

step "Soft-RoCE: rdma_rxe on dummy0 ($ADDR)"
softroce_up "$ADDR"
# The IPv4-mapped GID of ADDR (RoCEv2): perftest connects by GID index.
gid=$(ibv_devinfo -v -d rxe0 | sed -n "s/^[[:space:]]*GID\[ *\([0-9]*\)\]:[[:space:]]*::ffff:$ADDR.*/\1/p" |
	head -n 1)
[ -n "$gid" ] || fail "no GID for $ADDR on rxe0: $(ibv_devinfo -v -d rxe0 | grep GID)"
ok "rxe0 on dummy0, GID index $gid for $ADDR"

# perftest NAME ARGS...: server and client of one perftest on rxe0 in this
# guest; the client retries until the server listens. Prints the result rows.
# --CPU-freq: perftest checks the "cpu MHz" of /proc/cpuinfo, which TCG's
# vCPUs need not agree on. One run without it (on a loaded host) printed
# "inf" for every latency figure; the cause was not pinned down.
perftest() {
	local name=$1 server out deadline
	shift
	"$name" -d rxe0 -x "$gid" --CPU-freq "$@" >/tmp/perftest-server.log 2>&1 &
	server=$!
	deadline=$(($(now_ms) + 60000))
	until out=$("$name" -d rxe0 -x "$gid" --CPU-freq "$@" "$ADDR" 2>&1); do
		if [ "$(now_ms)" -ge "$deadline" ]; then
			kill "$server" 2>/dev/null || true
			echo "$out" | tail -n 5
			fail "$name $* did not run"
		fi
		sleep 0.2
	done
	wait "$server" || true
	grep -E '^ *#bytes|^ *[0-9]+ +[0-9]+ ' <<<"$out" | indent "  "
}

step "floor: ib_send_lat (one-way latency, half a round trip) on rxe0"
perftest ib_send_lat -n "$ITERS" -s 64
step "floor: ib_write_bw on rxe0, 4 KiB and 64 KiB"
perftest ib_write_bw -n "$ITERS" -s 4096
perftest ib_write_bw -n "$((ITERS / 4))" -s 65536

step "the partner round trip: ftvm-bench-channel over rdma ($ADDR)"
"$bench_channel" --transport rdma --addr "$ADDR" --count "$ITERS" --warmup 200 2>&1 |
	indent "  " || fail "ftvm-bench-channel over rdma"
step "the partner round trip: ftvm-bench-channel over tcp ($ADDR)"
"$bench_channel" --transport tcp --addr "$ADDR" --count "$ITERS" --warmup 200 2>&1 |
	indent "  " || fail "ftvm-bench-channel over tcp"

for transport in rdma tcp; do
	step "the memory manager: ftvm-bench-vmm, the pair on $transport ($ADDR)"
	"$bench_vmm" --transport "$transport" --addr "$ADDR" --count 300 --seconds 2 2>&1 |
		indent "  " || fail "ftvm-bench-vmm on $transport"
done
echo "bench_rdma: done in $(elapsed) s"
