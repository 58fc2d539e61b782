#!/usr/bin/env bash
# libftvm's asynchronous page calls on one connection to a real node (ftvm.h,
# "Asynchronous calls"; tests/async/async_basic.c says what each step
# checks): writes keep completing while an earlier one waits for a page
# another client holds, each once with its CRC-32C; a reap with timeout 0
# returns 0 and the completion descriptor is readable only when something
# came; FTVM_SUBMIT_MAX submitted and not reaped, the next is refused
# -EAGAIN; pages hold their last write, read back with blocking and with
# submitted reads; failures complete as the blocking calls return them, with
# their reasons; blocking calls between submits take no completion away.
# Then b mirrors what a wrote and verify says equal.
. "$(dirname "$0")/lib.sh"

FTVM_ASYNC_BASIC=${FTVM_ASYNC_BASIC:?FTVM_ASYNC_BASIC must name the ftvm-async-basic binary}
start_pair

rc=0
"$FTVM_ASYNC_BASIC" "$WORK/a.sock" >"$WORK/basic.out" 2>&1 || rc=$?
sed 's/^/    /' "$WORK/basic.out"
[ "$rc" = 0 ] || fail "ftvm-async-basic exited $rc: $(grep -v '^ok' "$WORK/basic.out")"
[ "$(tail -n 1 "$WORK/basic.out")" = "async: ok" ] || fail "ftvm-async-basic did not end with 'async: ok'"
ok "$(grep -c '^ok' "$WORK/basic.out") checks of submitted page calls on one connection"
ctl a verify >/dev/null || fail "the nodes differ after the submitted writes: $(ctl a verify 2>&1)"
ok "verify: both nodes equal"
