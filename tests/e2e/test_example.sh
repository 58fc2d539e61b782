#!/usr/bin/env bash
# tests/example/example.c, the libftvm example program, against a real pair:
# it allocates, writes, reads back, prints the header and frees through a's
# socket; then 8 threads share one client. Afterwards b mirrors nothing.
. "$(dirname "$0")/lib.sh"

EXAMPLE=${FTVM_EXAMPLE:?FTVM_EXAMPLE must name the example binary}

start_pair

# run_example ARGS...: the example on a's socket exits 0 and ends with
# "example: ok"; its output is left in $OUT.
run_example() {
	local rc=0
	OUT=$("$EXAMPLE" "$WORK/a.sock" "$@" 2>&1) || rc=$?
	[ "$rc" -eq 0 ] || fail "example $* exited $rc: $OUT"
	[ "$(tail -n 1 <<<"$OUT")" = "example: ok" ] || fail "example $* did not end with 'example: ok': $OUT"
	grep -q "header 'controller-7 journal v1'" <<<"$OUT" || fail "example $* printed no header: $OUT"
	sed 's/^/    /' <<<"$OUT"
}

list_empty() {
	[ "$(ctl "$1" --json list | jq length)" = 0 ]
}

run_example
list_empty b || fail "b still mirrors allocations after the example: $(ctl b --json list)"
list_empty a || fail "a still holds allocations after the example: $(ctl a --json list)"
ok "example: 3 pages written and read back through a, header printed, freed on both"

run_example --partner "$WORK/b.sock"
grep -q "through a write pointer, read it on the partner" <<<"$OUT" ||
	fail "example --partner did not use pointers: $OUT"
list_empty b || fail "b still mirrors allocations after the pointer example"
ok "example --partner: a page written through a write pointer on a reads the same on b"

run_example --threads 8
grep -q "8 threads on one client" <<<"$OUT" || fail "the threaded run did not report its threads: $OUT"
list_empty b || fail "b still mirrors allocations after the threaded example: $(ctl b --json list)"
ok "example --threads 8: one shared client, 200 writes and reads per thread, each thread's errors its own"

ctl a verify >/dev/null || fail "verify after the example: $(ctl a verify 2>&1)"
ok "verify equal after the example"

# Usage errors exit 2; no node at the socket exits 1 with the reason.
rc=0
"$EXAMPLE" >/dev/null 2>&1 || rc=$?
[ "$rc" -eq 2 ] || fail "example without arguments exited $rc, wanted 2"
rc=0
out=$("$EXAMPLE" "$WORK/nosuch.sock" 2>&1) || rc=$?
[ "$rc" -eq 1 ] || fail "example against no node exited $rc, wanted 1: $out"
grep -q "cannot connect" <<<"$out" || fail "example against no node said: $out"
ok "example: usage error exits 2; no node: exit 1, '$out'"
