#!/usr/bin/env bash
# libftvm's status, sense, verify, discover and mapping calls write the
# caller's struct size (a row's, for discover and mapping) and no more, and
# zero what a newer caller knows and this library does not (ftvm.h,
# "Compatibility"): ftvm-status-size checks each against a running pair,
# with an allocation made on each node.
. "$(dirname "$0")/lib.sh"

FTVM_STATUS_SIZE=${FTVM_STATUS_SIZE:?FTVM_STATUS_SIZE must name the ftvm-status-size binary}
start_pair
ctl a alloc --size 4K >/dev/null
ctl b alloc --size 4K >/dev/null
"$FTVM_STATUS_SIZE" "$WORK/a.sock" >"$WORK/abi.out" 2>&1 || fail "$(grep -v '^ok' "$WORK/abi.out")"
ok "sized status, sense, verify, discover and mapping: $(grep -c '^ok' "$WORK/abi.out") checks"
