# Helpers for end-to-end tests: real ftvmd processes on loopback, driven with
# ftvmctl. Sourced by test_*.sh. Polls with deadlines; never bare sleeps.
#
# FTVM_TRANSPORT (auto, tcp or rdma) goes into both configs when set, and
# FTVM_E2E_ADDR replaces 127.0.0.1 as the partner-channel address: the RDMA
# job in the qemu guest (tests/vm/jobs/rdma_pair.sh) runs these tests over
# Soft-RoCE, which serves a NIC's address, never loopback.
# FTVM_E2E_EXPECT_TRANSPORT: what `ftvmctl status` must then say runs
# (default: FTVM_TRANSPORT, else tcp). Where every step is slow (qemu's
# emulation), FTVM_E2E_DEAD_AFTER_MS (default 300) widens the failure
# detector, for tests that act "well inside dead_after_ms", and
# FTVM_E2E_TIME_SCALE (default 1) multiplies every wait_for deadline and the
# request timeouts tests configure (E2E_TIME_SCALE).
set -euo pipefail

FTVMD=${FTVMD:?FTVMD must name the ftvmd binary}
FTVMCTL=${FTVMCTL:?FTVMCTL must name the ftvmctl binary}
FTVM_FREE_PORT=${FTVM_FREE_PORT:?FTVM_FREE_PORT must name the ftvm-free-port binary}
WORK=$(mktemp -d "${TMPDIR:-/tmp}/ftvm-e2e.XXXXXX")
declare -A PIDS=()
FAILED=0

cleanup() {
	local id
	for id in "${!PIDS[@]}"; do
		kill -CONT "${PIDS[$id]}" 2>/dev/null || true
		kill -9 "${PIDS[$id]}" 2>/dev/null || true
	done
	wait 2>/dev/null || true
	# A test's own mounts, in its own mount namespace (test_table_full.sh).
	[ -z "${FTVM_E2E_MOUNT_NS:-}" ] || umount "$WORK"/* 2>/dev/null || true
	if [ "$FAILED" -ne 0 ] || [ -n "${E2E_KEEP_LOGS:-}" ]; then
		for f in "$WORK"/*.log; do
			[ -f "$f" ] && { echo "---- $f"; tail -n 40 "$f"; }
		done
	fi
	rm -rf "$WORK"
}
trap cleanup EXIT

fail() {
	echo "FAIL: $*" >&2
	FAILED=1
	exit 1
}

ok() {
	echo "ok: $*"
}

E2E_ADDR=${FTVM_E2E_ADDR:-127.0.0.1}
E2E_TRANSPORT=${FTVM_E2E_EXPECT_TRANSPORT:-${FTVM_TRANSPORT:-tcp}}
DEAD_AFTER_MS=${FTVM_E2E_DEAD_AFTER_MS:-300}
E2E_TIME_SCALE=${FTVM_E2E_TIME_SCALE:-1}

free_port() {
	"$FTVM_FREE_PORT"
}

# "$POKE" ARGS...: what ftvmctl does not do (raw bytes on a node's sockets,
# its frame pool, its page table, systemd's notify socket); see its --help.
POKE=$FTVM_SRCDIR/tests/poke.py

# write_pair_configs [extra ini lines for both]: a.conf and b.conf in $WORK,
# whose partner channel proves the key $WORK/pair.key (made here once).
write_pair_configs() {
	PORT_A=$(free_port)
	PORT_B=$(free_port)
	local id port partner transport=
	[ -n "${FTVM_TRANSPORT:-}" ] && transport="transport = $FTVM_TRANSPORT"
	[ -f "$WORK/pair.key" ] || "$FTVMCTL" keygen "$WORK/pair.key" >/dev/null
	for id in a b; do
		if [ "$id" = a ]; then port=$PORT_A; partner=$PORT_B; else port=$PORT_B; partner=$PORT_A; fi
		cat >"$WORK/$id.conf" <<-CONF
		[node]
		id = $id
		listen = $E2E_ADDR:$port
		partner = $E2E_ADDR:$partner
		key_file = pair.key
		$transport
		socket = $id.sock
		state_dir = $id
		log_level = debug
		[memory]
		size = 16M
		[store]
		path = shared/store
		[failover]
		heartbeat_ms = 50
		dead_after_ms = $DEAD_AFTER_MS
		CONF
	done
}

# need_tools TOOL...: skips the test (77) naming the first TOOL not installed.
need_tools() {
	local tool
	for tool in "$@"; do
		command -v "$tool" >/dev/null || {
			echo "SKIP: $tool is not installed (tools/install-deps.sh)"
			exit 77
		}
	done
}

# write_nbd_pair_configs: write_pair_configs with a storage cache of 25% on
# both nodes and each node's NBD socket at $WORK/ID.nbd (node/NBD.md).
write_nbd_pair_configs() {
	write_pair_configs
	sed -i '/^\[memory\]/a cache = 25%' "$WORK/a.conf" "$WORK/b.conf"
	for id in a b; do printf '[nbd]\nsocket = %s.nbd\n' "$id" >>"$WORK/$id.conf"; done
}

# start_pair: both nodes from write_pair_configs, linked and active.
start_pair() {
	write_pair_configs
	start_node a
	start_node b
	wait_for 5000 "pair linked" pair_up
}

# start_pair_dead_after MS: start_pair with dead_after_ms = MS (scaled).
start_pair_dead_after() {
	write_pair_configs
	sed -i "s/^dead_after_ms = .*/dead_after_ms = $(($1 * E2E_TIME_SCALE))/" "$WORK/a.conf" "$WORK/b.conf"
	start_node a
	start_node b
	wait_for 5000 "pair linked" pair_up
}

start_node() {
	local id=$1
	"$FTVMD" --config "$WORK/$id.conf" >>"$WORK/$id.log" 2>&1 &
	PIDS[$id]=$!
	wait_for 5000 "node $id serving" ctl_ok "$id"
}

ctl_ok() {
	"$FTVMCTL" --config "$WORK/$1.conf" status >/dev/null 2>&1
}

ctl() {
	local id=$1
	shift
	"$FTVMCTL" --config "$WORK/$id.conf" "$@"
}

# status_field ID PATH: one field of `ftvmctl status --json`, e.g. partner.link
status_field() {
	ctl "$1" --json status 2>/dev/null | jq -r ".$2"
}

# A block of 4096 bytes all BYTE (0..255), in $WORK/fill.BYTE.
fill() {
	[ -f "$WORK/fill.$1" ] ||
		head -c 4096 /dev/zero | tr '\0' "\\$(printf '%03o' "$1")" >"$WORK/fill.$1"
	echo "$WORK/fill.$1"
}

# sense_is ID PATH VALUE: one field of `ftvmctl sense --json` on ID, e.g.
# queues.paging, is VALUE.
sense_is() { [ "$(ctl "$1" --json sense | jq -r ".$2")" = "$3" ]; }

field_is() {
	[ "$(status_field "$1" "$2" 2>/dev/null)" = "$3" ]
}

# wait_for TIMEOUT_MS WHAT COMMAND...: polls COMMAND until it succeeds.
wait_for() {
	local timeout_ms=$(($1 * E2E_TIME_SCALE)) what=$2
	shift 2
	local deadline=$(($(date +%s%3N) + timeout_ms))
	until "$@"; do
		if [ "$(date +%s%3N)" -ge "$deadline" ]; then
			fail "timed out after ${timeout_ms} ms waiting for: $what"
		fi
		sleep 0.01
	done
}

# connected ID PID: node ID logged the connection of the client process PID.
connected() { grep -q "client pid $2 uid [0-9]* connected" "$WORK/$1.log"; }

# frames_settled ID: every dirty page of ID destaged and every resident page
# in its replacement queue, so that nothing holds a frame but the pages.
frames_settled() {
	ctl "$1" --json sense | jq -e '(.media[] | select(.type == "dram")) as $d |
		.queues.destage == 0 and ($d.capacity - $d.free) / 4096 == .queues.replacement' >/dev/null
}

# ---- ftvm-hold (tests/race/hold.c) in the background ----
# hold_start NAME ID ARGS...: ftvm-hold on node ID's socket with ARGS and
# --release-after-stdin, in the background (PIDS[NAME]), its lines in
# $WORK/NAME.out and NAME.err, holding until hold_end NAME. Its stdin is a
# fifo whose one writer is a sleep (PIDS[NAME.pipe]): the test's shell never
# opens the fifo, so nothing else it starts (a node, another holder) can
# keep the end of file that is the release from coming.
hold_start() {
	local name=$1 id=$2
	shift 2
	rm -f "$WORK/$name.in" "$WORK/$name.out" "$WORK/$name.err"
	mkfifo "$WORK/$name.in"
	"$FTVM_HOLD" "$WORK/$id.sock" "$@" --release-after-stdin \
		<"$WORK/$name.in" >"$WORK/$name.out" 2>"$WORK/$name.err" &
	PIDS[$name]=$!
	sleep infinity >"$WORK/$name.in" &
	PIDS[$name.pipe]=$!
}

# hold_pointer NAME ID GUID PAGE ARGS...: hold_start, then waits until it
# holds its pointer.
hold_pointer() {
	hold_start "$@"
	wait_for 10000 "$1 holding page $4 of $3 on $2" hold_said "$1" held
}

# hold_said NAME WORD: NAME printed a line starting with WORD.
hold_said() { grep -q "^$2" "$WORK/$1.out" 2>/dev/null; }

pid_gone() { ! kill -0 "$1" 2>/dev/null; }

hold_pipe_close() {
	kill "${PIDS[$1.pipe]}" 2>/dev/null || true
	wait "${PIDS[$1.pipe]}" 2>/dev/null || true
	unset "PIDS[$1.pipe]"
}

# hold_end NAME: end of file for the holder, which releases and exits; its
# exit status is ours.
hold_end() {
	local name=$1 pid=${PIDS[$1]} rc=0
	hold_pipe_close "$name"
	wait_for 5000 "$name to release and exit" pid_gone "$pid"
	wait "$pid" || rc=$?
	unset "PIDS[$name]"
	return "$rc"
}

# hold_kill NAME: kill -9 the holder, as a client that dies.
hold_kill() {
	local name=$1 pid=${PIDS[$1]}
	kill -9 "$pid"
	wait_for 5000 "$name killed" pid_gone "$pid"
	wait "$pid" 2>/dev/null || true
	unset "PIDS[$name]"
	hold_pipe_close "$name"
}

# hold_write_pointers ID GUID COUNT: ftvm-hold (PIDS[hold]) holds write
# pointers on pages 0 to COUNT-1 of GUID through node ID, until
# release_write_pointers.
hold_write_pointers() {
	hold_start hold "$1" "$2" 0 write --count "$3"
	wait_for 10000 "$3 write pointers held on $1" hold_said hold holding
}

release_write_pointers() {
	hold_end hold || fail "ftvm-hold: $(cat "$WORK/hold.err")"
}

# alloc_written ID PAGES: an allocation made on ID of PAGES 4 KiB pages, each
# written with random bytes, which $WORK/pN keeps; prints its GUID.
alloc_written() {
	local guid p
	guid=$(ctl "$1" alloc --size $(($2 * 4))K)
	for ((p = 0; p < $2; p++)); do
		head -c 4096 /dev/urandom >"$WORK/p$p"
		ctl "$1" write "$guid" "$p" --file "$WORK/p$p" >/dev/null
	done
	echo "$guid"
}

now_ms() {
	date +%s%3N
}

pair_up() {
	field_is a partner.link up && field_is b partner.link up &&
		field_is a state active && field_is b state active
}

# resync_blocks_went SENDER RECEIVER: how the resync SENDER sent (its only
# one since it started) carried its blocks (replica/RDMA.md, "Resync"): over
# RDMA every one by RDMA WRITE into RECEIVER's landing runs, none refused;
# over TCP every one inline.
resync_blocks_went() {
	local sent one inline refused
	sent=$(status_field "$1" last_resync_pages)
	one=$(status_field "$1" resync.pages_one_sided)
	inline=$(status_field "$1" resync.pages_inline)
	refused=$(status_field "$2" landings.refused)
	if [ "$E2E_TRANSPORT" = rdma ]; then
		[ "$one" = "$sent" ] && [ "$inline" = 0 ] && [ "$refused" = 0 ] ||
			fail "$1's resync of $sent blocks: $one one-sided, $inline inline; $2 refused $refused"
	else
		[ "$one" = 0 ] && [ "$inline" = "$sent" ] ||
			fail "$1's resync of $sent blocks over TCP: $one one-sided, $inline inline"
	fi
	ok "$1's resync sent its $sent blocks $([ "$E2E_TRANSPORT" = rdma ] && echo one-sided || echo inline); $2 dropped $(status_field "$2" resync.pages_dropped) as older"
}

# other ID: the other node of the pair.
other() { if [ "$1" = a ]; then echo b; else echo a; fi; }

# expect_fail ID PATTERN ARGS...: ftvmctl exits 1 saying PATTERN.
expect_fail() {
	local id=$1 pattern=$2
	shift 2
	expect_refused "$pattern" "ftvmctl $* on $id" ctl "$id" "$@"
}

# expect_refused PATTERN WHAT COMMAND...: COMMAND exits 1 saying PATTERN
# (on stdout or stderr); WHAT names it in the messages.
expect_refused() {
	local pattern=$1 what=$2 out rc=0
	shift 2
	out=$("$@" 2>&1 </dev/null) || rc=$?
	[ "$rc" -eq 1 ] || fail "$what exited $rc, wanted 1: $out"
	grep -q -- "$pattern" <<<"$out" || fail "$what said '$out', wanted '$pattern'"
	ok "refused: $what: $out"
}

# page_version ID GUID PAGE: the version page PAGE holds, read through ID.
page_version() {
	local head
	ctl "$1" read "$2" "$3" >"$WORK/read.$1" || fail "$1 cannot read $2 page $3: $(ctl "$1" read "$2" "$3" 2>&1 >/dev/null)"
	head=$(head -c 15 "$WORK/read.$1" | tr -d '\0')
	[ -n "$head" ] || { echo 0; return; }
	set -- $head
	echo "$2"
}

# Writers whose page content says its version ("P K": the K-th write of
# page P), so that a read tells which version a page holds (tests of both
# nodes killed at once: test_double_failure.sh, test_ack_levels.sh).
#
# writer ID GUID: rewrites pages 0..PAGES-1 of GUID through ID in turn, each
# with its next version, until a write fails; logs "PAGE VERSION" per ack.
writer() {
	local id=$1 g=$2 p k
	local -a ver
	for ((p = 0; p < PAGES; p++)); do ver[p]=$(page_version "$id" "$g" "$p"); done
	while :; do
		for ((p = 0; p < PAGES; p++)); do
			k=$((ver[p] + 1))
			head -c 4096 < <(yes "$p $k") >"$WORK/data.$id"
			ctl "$id" write "$g" "$p" --file "$WORK/data.$id" >/dev/null 2>&1 || return 0
			ver[p]=$k
			echo "$p $k" >>"$WORK/acked.$id"
		done
	done
}
