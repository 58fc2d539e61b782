#!/usr/bin/env bash
# Traces (common/TRACE.md) on a real pair: recording from [trace] path and by
# `ftvmctl trace start/stop`, refusals that change nothing, the previous
# trace kept as FILE.1, and what `trace dump` shows of what was recorded.
. "$(dirname "$0")/lib.sh"

write_pair_configs
printf '[trace]\npath = b.trace\nchannels = partner\n' >>"$WORK/b.conf"
start_node a
start_node b
wait_for 5000 "pair linked" pair_up

[ "$(head -c 8 "$WORK/b.trace")" = "FTVMTRC" ] || fail "b.trace does not start with the magic"
ok "[trace] path: b records from its start"

ctl a trace start "$WORK/a.trace" >/dev/null || fail "trace start"
expect_fail a "already recording to $WORK/a.trace" trace start "$WORK/other.trace"
[ ! -e "$WORK/other.trace" ] || fail "a refused start created its file"
g=$(ctl a alloc --size 8K)
head -c 4096 /dev/urandom >"$WORK/page"
ctl a write "$g" 1 --file "$WORK/page" >/dev/null
ctl b read "$g" 1 --file "$WORK/back" >/dev/null
cmp -n 4096 "$WORK/page" "$WORK/back" || fail "page read back differs"
out=$(ctl a trace stop)
grep -Eq '^stopped: [0-9]+ records$' <<<"$out" || fail "trace stop said '$out'"
n=$(grep -Eo '[0-9]+' <<<"$out")
[ "$n" -ge 10 ] || fail "only $n records for an alloc and a write"
ok "trace start/stop on a: $n records"

expect_fail a "no trace is being recorded" trace stop
expect_fail a "cannot create trace $WORK/a.trace: File exists" trace start "$WORK/a.trace"
rc=0
ctl a trace start "$WORK/x.trace" --channels both >/dev/null 2>&1 || rc=$?
[ "$rc" -eq 2 ] || fail "a bad --channels exited $rc, wanted 2"
[ ! -e "$WORK/x.trace" ] || fail "a bad --channels created the file"
ok "bad trace requests refused, nothing created"

# Relative to ftvmctl's folder, and --json.
(cd "$WORK" && "$FTVMCTL" --config a.conf --json trace start rel.trace) | jq -e '. == {}' >/dev/null ||
	fail "trace start --json did not print {}"
ctl a --json trace stop | jq -e '. == {}' >/dev/null || fail "trace stop --json did not print {}"
[ -s "$WORK/rel.trace" ] || fail "a relative FILE is not taken from ftvmctl's folder"
ok "relative FILE and --json"

# A restart keeps the last trace as b.trace.1.
size=$(stat -c %s "$WORK/b.trace")
kill -TERM "${PIDS[b]}"
wait "${PIDS[b]}" || fail "b did not stop cleanly"
unset 'PIDS[b]'
start_node b
[ "$(stat -c %s "$WORK/b.trace.1")" -ge "$size" ] || fail "b's last trace was not kept as b.trace.1"
ok "restart keeps the previous trace as b.trace.1"
