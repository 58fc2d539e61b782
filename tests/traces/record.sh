#!/usr/bin/env bash
# Re-records the trace library (tests/traces/README.md): for each path of
# seed 002's Figures 5-10, a fresh pair that records both nodes' partner
# channel and client API from its start ([trace] path), the path driven with
# ftvmctl and ftvm-hold, the pair stopped, and both traces written here in
# their text form as NAME.a.txt and NAME.b.txt (but for a node the path
# restarted). Run it when the protocol changes on purpose, read the diff,
# commit it.
#
#   tests/traces/record.sh [--build DIR] [NAME...]   (default: every path)
set -euo pipefail

HERE=$(cd "$(dirname "$0")" && pwd)
BUILD=$HERE/../../build-gcc
if [ "${1:-}" = --build ]; then
	BUILD=$(cd "$2" && pwd)
	shift 2
fi
FTVMD=$BUILD/node/ftvmd
FTVMCTL=$BUILD/tools/ftvmctl
HOLD=$BUILD/tests/race/ftvm-hold
FREE_PORT=$BUILD/tests/support/ftvm-free-port
for b in "$FTVMD" "$FTVMCTL" "$HOLD" "$FREE_PORT"; do
	[ -x "$b" ] || { echo "record.sh: $b is not built (give --build DIR)" >&2; exit 2; }
done

# shellcheck source=paths.sh
. "$HERE/paths.sh"

WORK=
declare -A PIDS=()
cleanup() {
	local p
	for p in "${PIDS[@]}"; do kill -9 "$p" 2>/dev/null || true; done
	[ -n "$WORK" ] && rm -rf "$WORK"
	return 0
}
trap cleanup EXIT

fail() {
	echo "record.sh: $CURRENT: $*" >&2
	[ -n "$WORK" ] && tail -n 20 "$WORK"/*.log "$WORK"/*.out "$WORK"/*.err >&2
	exit 1
}

ctl() {
	local id=$1
	shift
	"$FTVMCTL" --config "$WORK/$id.conf" "$@"
}

# wait_until CMD...: up to 5 s, or WAIT_TRIES hundredths of a second.
wait_until() {
	local tries=${WAIT_TRIES:-500}
	until "$@"; do
		tries=$((tries - 1))
		[ "$tries" -gt 0 ] || fail "timed out waiting for: $*"
		sleep 0.01
	done
}

state_is() { [ "$(ctl "$1" --json status 2>/dev/null | jq -r .state)" = "$2" ]; }

# hold NAME ID GUID PAGE read|write [OPTIONS...]: ftvm-hold on node ID in the
# background, holding its pointer until let_go NAME. Waits for "held" unless
# --no-wait-held is the first option.
declare -A HOLD_FD=()
hold() {
	local name=$1 id=$2 wait_held=1 fd
	shift 2
	if [ "${1:-}" = --no-wait-held ]; then
		wait_held=0
		shift
	fi
	mkfifo "$WORK/$name.in"
	(
		# Another holder's stdin left open here would never see its end.
		for fd in "${HOLD_FD[@]}"; do exec {fd}>&-; done
		exec "$HOLD" "$WORK/$id.sock" "$@" --release-after-stdin <"$WORK/$name.in" \
			>"$WORK/$name.out" 2>"$WORK/$name.err"
	) &
	PIDS[$name]=$!
	exec {fd}>"$WORK/$name.in"
	HOLD_FD[$name]=$fd
	[ "$wait_held" = 0 ] || wait_until grep -q '^held' "$WORK/$name.out"
}

let_go() {
	local name=$1 fd=${HOLD_FD[$1]}
	exec {fd}>&-
	wait "${PIDS[$name]}" || true
	unset "PIDS[$name]"
}

start_node() {
	"$FTVMD" --config "$WORK/$1.conf" >>"$WORK/$1.log" 2>&1 &
	PIDS[$1]=$!
}

# kill_node ID: kill -9, as a crash: ID's slot in the store stops moving.
kill_node() {
	kill -9 "${PIDS[$1]}"
	wait "${PIDS[$1]}" 2>/dev/null || true
	unset "PIDS[$1]"
}

destaged() { [ "$(ctl "$1" --json sense | jq .queues.destage)" = 0 ]; }

start_pair() {
	local pa pb id port partner
	WORK=$(mktemp -d "${TMPDIR:-/tmp}/ftvm-record.XXXXXX")
	pa=$("$FREE_PORT")
	pb=$("$FREE_PORT")
	for id in a b; do
		if [ "$id" = a ]; then port=$pa partner=$pb; else port=$pb partner=$pa; fi
		cat >"$WORK/$id.conf" <<-CONF
		[node]
		id = $id
		listen = 127.0.0.1:$port
		partner = 127.0.0.1:$partner
		socket = $id.sock
		state_dir = $id
		log_level = debug
		[memory]
		size = $LIB_MEMORY
		page_size = $LIB_PAGE_SIZE
		[store]
		path = shared/store
		size = $LIB_STORE
		[failover]
		heartbeat_ms = 1000
		dead_after_ms = 5000
		request_timeout_ms = $LIB_TIMEOUT_MS
		[trace]
		path = $id.trace
		[policy stripe]
		block_size = $((LIB_PAGE_SIZE * 4))
		CONF
	done
	if declare -F "config_$CURRENT" >/dev/null; then "config_$CURRENT"; fi
	start_node a
	start_node b
	wait_until state_is a active
	wait_until state_is b active
}

stop_pair() {
	local id
	for id in a b; do
		kill -TERM "${PIDS[$id]}"
		wait "${PIDS[$id]}" || fail "ftvmd $id did not stop cleanly"
		unset "PIDS[$id]"
	done
}

names=("$@")
[ ${#names[@]} -gt 0 ] || names=("${LIB_PATHS[@]}")
for CURRENT in "${names[@]}"; do
	declare -F "path_$CURRENT" >/dev/null || fail "no such path (see paths.sh)"
	start_pair
	"path_$CURRENT"
	stop_pair
	# A node restarted during the path (its first life's trace was kept as
	# ID.trace.1) did not run from a fresh start: no replay can start it as
	# it was, so its trace is not kept.
	summary=
	for id in a b; do
		rm -f "$HERE/$CURRENT.$id.txt"
		if [ -e "$WORK/$id.trace.1" ]; then
			summary+=" $id restarted, not kept;"
			continue
		fi
		"$FTVMCTL" trace text "$WORK/$id.trace" | sed "2s|$WORK/||" >"$HERE/$CURRENT.$id.txt"
		summary+=" $(grep -c '^record ' "$HERE/$CURRENT.$id.txt") records on $id;"
	done
	echo "recorded $CURRENT:${summary%;}"
	rm -rf "$WORK"
	WORK=
done
