#!/usr/bin/env bash
# Bad configuration and impossible requests stop ftvmd at start with a message
# naming the problem; ftvmctl's exit codes follow INTERFACES.md.
. "$(dirname "$0")/lib.sh"

# expect_start_failure CONF PATTERN: ftvmd --config CONF exits 1 saying PATTERN.
expect_start_failure() {
	local conf=$1 pattern=$2 out rc=0
	out=$(timeout 10 "$FTVMD" --config "$conf" 2>&1) || rc=$?
	[ "$rc" -eq 1 ] || fail "ftvmd with $(basename "$conf") exited $rc, wanted 1; said: $out"
	grep -q -- "$pattern" <<<"$out" || fail "ftvmd said '$out', wanted '$pattern'"
	ok "$(basename "$conf"): $(grep -m1 -- "$pattern" <<<"$out")"
}

write_pair_configs

printf '[node]\nid = a\n[memory]\nsize = 12Q\n' >"$WORK/badsize.conf"
expect_start_failure "$WORK/badsize.conf" "badsize.conf:4: \[memory\] size"

printf '[node]\nid = a\nlisten = 127.0.0.1:7101\nfrobnicate = yes\n' >"$WORK/unknown.conf"
expect_start_failure "$WORK/unknown.conf" "unknown.conf:4: \[node\] frobnicate: unknown key"

printf '[memory]\nsize = 1M\n' >"$WORK/noid.conf"
expect_start_failure "$WORK/noid.conf" "noid.conf.*\[node\] id"

expect_start_failure "$WORK/missing.conf" "missing.conf"

sed 's/^log_level = debug$/log_level = debug\ntransport = rdma/' "$WORK/a.conf" >"$WORK/rdma.conf"
expect_start_failure "$WORK/rdma.conf" "no RDMA transport\|no RDMA device"
[ ! -e "$WORK/a.sock" ] || fail "a refused start left a socket behind"

# The partner port taken by another process (here a running node a).
start_node a
sed -e 's/^socket = a.sock$/socket = a2.sock/' -e 's/^state_dir = a$/state_dir = a2/' \
	"$WORK/a.conf" >"$WORK/a2.conf"
expect_start_failure "$WORK/a2.conf" "cannot listen on 127.0.0.1:$PORT_A"
[ ! -e "$WORK/a2.sock" ] || fail "the refused node left its client socket behind"

# A second ftvmd on a's state_dir while a lives: refused, naming a's pid.
sed -e 's/^listen = .*$/listen = 127.0.0.1:1/' -e 's/^socket = a.sock$/socket = a3.sock/' \
	"$WORK/a.conf" >"$WORK/a3.conf"
expect_start_failure "$WORK/a3.conf" "state_dir .* is in use by another ftvmd (pid ${PIDS[a]})"

# A second node on a's client socket while a lives.
sed -e 's/^listen = .*$/listen = 127.0.0.1:1/' -e 's/^state_dir = a$/state_dir = a6/' \
	"$WORK/a.conf" >"$WORK/a6.conf"
expect_start_failure "$WORK/a6.conf" "a.sock"
ctl a status >/dev/null || fail "a stopped serving after another node tried its socket"

# A page table made with one store refuses another: its extents would read
# garbage. a has run with shared/store; point it at a new file.
kill -TERM "${PIDS[a]}"
wait "${PIDS[a]}" || fail "a did not stop cleanly"
unset 'PIDS[a]'
sed 's|^path = shared/store$|path = shared/other-store|' "$WORK/a.conf" >"$WORK/a4.conf"
expect_start_failure "$WORK/a4.conf" "shared/other-store: cannot open the store: No such file"
[ ! -e "$WORK/shared/other-store" ] || fail "the refused start created a store"
: >"$WORK/shared/other-store" # an empty file is no store either
expect_start_failure "$WORK/a4.conf" "other-store is empty, and this node's data is in an existing store"
b_conf_other=$(sed 's|^path = shared/store$|path = shared/other-store|; s/^id = a$/id = b/' "$WORK/b.conf")
printf '%s\n' "$b_conf_other" | sed 's/^state_dir = b$/state_dir = b9/; s/^socket = b.sock$/socket = b9.sock/' >"$WORK/b9.conf"
rm -f "$WORK/shared/other-store"
timeout 5 "$FTVMD" --config "$WORK/b9.conf" >"$WORK/b9.log" 2>&1 &
b9=$!
PIDS[b9]=$b9
# Serving, its store's header is written: a file merely not empty may be
# one killed before its header, which is no store at all.
wait_for 5000 "a fresh node b9 made the other store and serves" ctl_ok b9
kill -TERM "$b9"; wait "$b9" 2>/dev/null || true
unset 'PIDS[b9]'
expect_start_failure "$WORK/a4.conf" "is not the store this node's page table was made with"

# A store made for another page size is refused too.
sed -e 's/^state_dir = a$/state_dir = a5/' -e 's/^\[memory\]$/[memory]\npage_size = 8192/' \
	"$WORK/a.conf" >"$WORK/a5.conf"
expect_start_failure "$WORK/a5.conf" "store made for page_size 4096, this node has 8192"

# --check validates without starting.
"$FTVMD" --config "$WORK/a.conf" --check | grep -q "ok" || fail "--check on a good config"
ok "ftvmd --check accepts a good config"

# ftvmctl: 3 when the node cannot be reached, 2 on usage errors.
rc=0; "$FTVMCTL" --socket "$WORK/nobody.sock" status >/dev/null 2>&1 || rc=$?
[ "$rc" -eq 3 ] || fail "ftvmctl against no node exited $rc, wanted 3"
rc=0; "$FTVMCTL" --socket "$WORK/nobody.sock" frobnicate >/dev/null 2>&1 || rc=$?
[ "$rc" -eq 2 ] || fail "ftvmctl with an unknown command exited $rc, wanted 2"
rc=0; "$FTVMCTL" --config "$WORK/badsize.conf" status >/dev/null 2>&1 || rc=$?
[ "$rc" -eq 2 ] || fail "ftvmctl with a bad config exited $rc, wanted 2"
ok "ftvmctl exit codes 3 (unreachable) and 2 (usage)"
