# shellcheck shell=bash
# Helpers for the jobs in tests/vm/jobs/, sourced inside the guest (as root,
# from the ftvm-job unit). FTVM_SRC and FTVM_BUILD name the host's source and
# build trees, shared read-only; FTVM_OUT the folder whose job.log and rc
# tests/vm/run.sh reads back. Polls with deadlines, never bare sleeps.
set -euo pipefail

: "${FTVM_SRC:?FTVM_SRC must name the shared source tree}"
: "${FTVM_BUILD:?FTVM_BUILD must name the shared build tree}"

# The units whose journal a failure prints.
JOURNAL_UNITS=()
JOB_T0=$(date +%s%3N)

now_ms() {
	date +%s%3N
}

# elapsed: seconds since the job started, with a tenth.
elapsed() {
	local ms=$(($(now_ms) - JOB_T0))
	printf '%d.%d' $((ms / 1000)) $((ms % 1000 / 100))
}

ok() {
	echo "ok [$(elapsed) s]: $*"
}

step() {
	echo "== [$(elapsed) s] $*"
}

fail() {
	local u args=()
	echo "FAIL [$(elapsed) s]: $*" >&2
	if [ ${#JOURNAL_UNITS[@]} -gt 0 ]; then
		for u in "${JOURNAL_UNITS[@]}"; do
			args+=(-u "$u")
		done
		echo "---- journalctl ${args[*]} (last 200 lines)" >&2
		journalctl "${args[@]}" --no-pager -o short-monotonic 2>&1 | tail -n 200 >&2 || true
	fi
	exit 1
}

# wait_for SECONDS WHAT COMMAND...: polls COMMAND until it succeeds.
wait_for() {
	local timeout_s=$1 what=$2
	shift 2
	local deadline=$(($(now_ms) + timeout_s * 1000))
	until "$@"; do
		if [ "$(now_ms)" -ge "$deadline" ]; then
			fail "timed out after ${timeout_s} s waiting for: $what"
		fi
		sleep 0.1
	done
}

# unit_prop UNIT PROPERTY: one property of `systemctl show`.
unit_prop() {
	systemctl show "$1" -p "$2" --value
}

# unit_is UNIT PROPERTY VALUE: for wait_for.
unit_is() {
	[ "$(unit_prop "$1" "$2")" = "$3" ]
}

# indent PREFIX: stdin with PREFIX before each line.
indent() {
	local line
	while IFS= read -r line; do
		echo "$1$line"
	done
}

# softroce_up ADDR: Soft-RoCE (rdma_rxe) as rxe0 on a dummy NIC holding
# ADDR/24. rxe serves a NIC's address, never loopback; between two addresses
# of one guest it loops the packets back itself, so one guest needs no qemu
# network (../shared/RDMA.md). Prints the device; fails when its port does
# not come up.
softroce_up() {
	local addr=$1
	modprobe rdma_rxe || fail "modprobe rdma_rxe"
	modprobe dummy || fail "modprobe dummy"
	ip link add dummy0 type dummy || fail "ip link add dummy0 type dummy"
	ip addr add "$addr/24" dev dummy0
	ip link set dummy0 up
	rdma link add rxe0 type rxe netdev dummy0 || fail "rdma link add rxe0 type rxe netdev dummy0"
	wait_for 30 "rxe0's port active" rxe0_active
	ibv_devices | indent "  "
}

rxe0_active() {
	ibv_devinfo -d rxe0 2>/dev/null | grep -q PORT_ACTIVE
}
