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
crc=$(ctl a --json write "$g" 1 --file "$WORK/page" | jq -r .crc32c)
ctl b read "$g" 1 --file "$WORK/back" >/dev/null
cmp -n 4096 "$WORK/page" "$WORK/back" || fail "page read back differs"
"$FTVM_HOLD" "$WORK/a.sock" "$g" 1 read >/dev/null || fail "read pointer taken and released"
"$FTVM_HOLD" "$WORK/a.sock" "$g" 1 write >/dev/null || fail "write pointer taken and released"
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

# What dump shows: the client's calls and the node's answers, the partner
# messages they caused, page payloads as length and checksum.
dump=$("$FTVMCTL" trace dump "$WORK/a.trace")
grep -q '^# node=a$' <<<"$dump" || fail "dump lacks the header's node"
grep -q '^# partner=b$' <<<"$dump" || fail "dump lacks the header's partner"
grep -Eq "client  in  client [0-9]+ pid [0-9]+ +id=1 AllocRequest size=8192\$" <<<"$dump" ||
	fail "dump lacks the AllocRequest: $dump"
grep -q "AllocReply guid=$g pages=2 block_size=4096" <<<"$dump" || fail "dump lacks the AllocReply"
hex=$(printf '0x%08x' "$crc")
grep -q "WritePageRequest guid=$g page=1 data=<4096 bytes crc32c $hex>" <<<"$dump" ||
	fail "dump does not show the page as length and crc32c $hex"
grep -Eq "partner out b +Batch of 3" <<<"$dump" || fail "dump lacks the write's partner batch"
grep -q "seq=[0-9]* lsn=[0-9]* AllocateWrite guid=$g page=1 owner=a/" <<<"$dump" ||
	fail "dump lacks the AllocateWrite inside the batch"
grep -q "answers=[0-9]* answers_count=3 CommandComplete lock={version=1}" <<<"$dump" ||
	fail "dump lacks b's one answer to the batch, the ReleasePointer's with the lock status"
grep -q "WritePageReply crc32c=$crc version=1" <<<"$dump" || fail "dump lacks the WritePageReply"
# A plain release makes no new version: the page stays at the write's.
n=$(grep -c "ReleasePointerReply crc32c=$crc version=1\$" <<<"$dump" || true)
[ "$n" -eq 2 ] || fail "$n plain releases answered version=1, wanted 2: $(grep ReleasePointer <<<"$dump")"
! grep -q "ReleasePointer .*version=2" <<<"$dump" || fail "a plain release proposed version 2"
bdump=$("$FTVMCTL" trace dump "$WORK/b.trace")
! grep -q " client " <<<"$bdump" || fail "b records only the partner channel, yet dumps a client line"
grep -Eq "AllocateMemory guid=$g size=8192 block_size=4096 policy=default home=a" <<<"$bdump" ||
	fail "b's trace lacks a's AllocateMemory"
grep -Eq "partner out 127.0.0.1:[0-9]+ +.*Hello node_id=b" <<<"$bdump" || fail "b's trace lacks its Hello"
ok "trace dump: header, client calls, partner messages, pages as length and crc32c"

"$FTVMCTL" --json trace dump "$WORK/a.trace" >"$WORK/a.json" || fail "dump --json failed"
jq -e -s '.[0].record == 1 and all(.record > 0 and .channel and .direction and .type)' \
	"$WORK/a.json" >/dev/null || fail "dump --json is not one object per record"
jq -e -s "[.[] | select(.type == \"WritePageRequest\")][0].message.write_page.data == {\"bytes\": 4096, \"crc32c\": $crc}" \
	"$WORK/a.json" >/dev/null || fail "dump --json does not show the page as bytes and crc32c"
ok "trace dump --json: one object per record"

# A trace cut short reads to its last whole record; a flipped bit, a foreign
# file and a wrong version are errors naming file, record and problem.
size=$(stat -c %s "$WORK/a.trace")
head -c $((size - 10)) "$WORK/a.trace" >"$WORK/torn.trace"
out=$("$FTVMCTL" trace dump "$WORK/torn.trace" 2>&1 >/dev/null) || fail "a torn trace failed: $out"
grep -Eq "warning: $WORK/torn.trace: record [0-9]+: torn" <<<"$out" || fail "torn tail not said: $out"
cp "$WORK/a.trace" "$WORK/bad.trace"
printf '\xff' | dd of="$WORK/bad.trace" bs=1 seek=$((size - 30)) conv=notrunc status=none
rc=0
out=$("$FTVMCTL" trace dump "$WORK/bad.trace" 2>&1 >/dev/null) || rc=$?
[ "$rc" -eq 1 ] || fail "a corrupt trace exited $rc"
grep -Eq "$WORK/bad.trace: record [0-9]+: checksum mismatch" <<<"$out" || fail "corruption said '$out'"
rc=0
out=$("$FTVMCTL" trace dump "$WORK/a.conf" 2>&1) || rc=$?
[ "$rc" -eq 1 ] && grep -q "$WORK/a.conf: record 0: not an ftvm trace" <<<"$out" ||
	fail "a foreign file: exit $rc, '$out'"
cp "$WORK/a.trace" "$WORK/v2.trace"
printf '\x02' | dd of="$WORK/v2.trace" bs=1 seek=9 conv=notrunc status=none
out=$("$FTVMCTL" trace dump "$WORK/v2.trace" 2>&1) && fail "a version 2 trace dumped"
grep -q "record 0: trace format version 2, this build reads version 1" <<<"$out" ||
	fail "wrong version said '$out'"
ok "torn, corrupt, foreign and wrong-version traces: $out"
undecodable=$FTVM_SRCDIR/tests/fuzz/corpus/trace/three-records
out=$("$FTVMCTL" trace dump "$undecodable" 2>&1) && fail "a record that does not decode dumped"
grep -q "$undecodable: record 3: partner message does not decode: unknown protocol version 0" <<<"$out" ||
	fail "an undecodable record said '$out'"
ok "a record that does not decode: named with its number"

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

# A node killed while recording: its trace reads cleanly up to its last whole
# record (the writer thread was at most a batch behind).
ctl a trace start "$WORK/killed.trace" >/dev/null
g=$(ctl a alloc --size 8K)
head -c 4096 /dev/urandom | ctl a write "$g" 0 >/dev/null
wait_for 2000 "the write's reply in the trace" \
	eval "\"$FTVMCTL\" trace dump \"$WORK/killed.trace\" 2>/dev/null | grep -q WritePageReply"
kill -9 "${PIDS[a]}"
wait "${PIDS[a]}" 2>/dev/null || true
unset 'PIDS[a]'
out=$("$FTVMCTL" trace dump "$WORK/killed.trace" 2>&1) || fail "a killed node's trace: $out"
grep -q "WritePageReply" <<<"$out" || fail "a killed node's trace lost the write"
ok "kill -9 while recording: the trace reads cleanly ($(grep -c '^ *[0-9]* ' <<<"$out") records)"

# A [trace] path that cannot be made stops ftvmd at start, saying so.
kill -TERM "${PIDS[b]}"
wait "${PIDS[b]}" || fail "b did not stop cleanly"
unset 'PIDS[b]'
sed 's|^path = b.trace|path = nothere/b.trace|' "$WORK/b.conf" >"$WORK/bad-trace.conf"
rc=0
out=$("$FTVMD" --config "$WORK/bad-trace.conf" 2>&1) || rc=$?
[ "$rc" -eq 1 ] || fail "ftvmd with a bad [trace] path exited $rc"
grep -q "\[trace\] path $WORK/nothere/b.trace: cannot create it: No such file or directory" <<<"$out" ||
	fail "a bad [trace] path said '$out'"
ok "a [trace] path that cannot be made: ftvmd refuses to start ($(grep "\[trace\]" <<<"$out"))"
