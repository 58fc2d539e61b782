#!/usr/bin/env bash
# ftvmctl trace replay (common/TRACE.md, "Replay") of traces recorded here on
# a real pair: b's partner channel against a fresh node (the replayer plays
# a), a's partner channel and clients against a fresh node (the replayer
# plays b and a's clients), a's client API alone against a fresh pair. Then
# what replay does with bad traces.
. "$(dirname "$0")/lib.sh"

write_pair_configs
printf '[policy stripe]\nblock_size = 8192\n' | tee -a "$WORK/a.conf" >>"$WORK/b.conf"
start_node a
start_node b
wait_for 5000 "pair linked" pair_up

# A trace replays against a fresh node: each starts before anything was
# allocated. b's has its partner channel only, and b's clients stay idle
# while it records (what they asked would be missing from it).
ctl b trace start "$WORK/b.trace" --channels partner >/dev/null
ctl a trace start "$WORK/a.trace.all" >/dev/null
g=$(ctl a alloc --size 16K --policy stripe)
head -c 8192 /dev/urandom >"$WORK/page"
ctl a write "$g" 1 --file "$WORK/page" >/dev/null
ctl a read "$g" 1 >/dev/null
ctl a header "$g" >/dev/null
ctl a list >/dev/null
ctl b trace stop >/dev/null
h=$(ctl b alloc --size 4K)
head -c 4096 "$WORK/page" | ctl a write "$h" 0 >/dev/null
ctl a free "$g"
ctl a trace stop >/dev/null
ctl b free "$h"
ctl a trace start "$WORK/c.trace" --channels client >/dev/null
g=$(ctl a alloc --size 16K --policy stripe)
ctl a write "$g" 0 --file "$WORK/page" >/dev/null
ctl a read "$g" 0 >/dev/null
ctl a sense >/dev/null
ctl a verify >/dev/null
ctl a trace stop >/dev/null
kill -TERM "${PIDS[a]}" "${PIDS[b]}"
wait "${PIDS[a]}" "${PIDS[b]}" || fail "the pair did not stop cleanly"
PIDS=()

# The replays' temporary directories go under $WORK, so that what is left
# behind is this test's and not another run's on the same machine.
export TMPDIR=$WORK/replay-tmp
mkdir "$TMPDIR"

replay() {
	local file=$1 out
	out=$("$FTVMCTL" trace replay "$file" 2>&1) || fail "replay of $file: $out"
	echo "$out"
}

# b answered a's page write in one run (replica/SESSION.md, "Answers in
# runs"): the replayer waits for it answer by answer, and plays it to a so.
runs=$("$FTVMCTL" trace dump "$WORK/b.trace" | grep -c "answers_count=") ||
	fail "b's trace holds no answer to a run"
out=$(replay "$WORK/b.trace")
grep -Eq "^$WORK/b.trace: [0-9]+ records replayed against a fresh node, [1-9][0-9]* answers matched$" <<<"$out" ||
	fail "b.trace: '$out'"
ok "b's partner channel replayed, the replayer playing a ($runs answers to runs): $out"
out=$(replay "$WORK/a.trace.all")
grep -q "against a fresh node" <<<"$out" || fail "a.trace.all: '$out'"
ok "a's partner channel and clients replayed, the replayer playing b: $out"
out=$(replay "$WORK/c.trace")
grep -q "against a fresh pair" <<<"$out" || fail "c.trace: '$out'"
ok "a's client API replayed against a fresh pair: $out"

json=$("$FTVMCTL" --json trace replay "$WORK/c.trace") || fail "replay --json failed"
jq -e '.records > 0 and .matched > 0 and .first_divergence == null' <<<"$json" >/dev/null ||
	fail "replay --json said $json"
ok "replay --json: $json"

# Nothing left behind: no ftvmd, no temporary directory.
! pgrep -f "ftvmd --config $TMPDIR/ftvm-replay" >/dev/null || fail "a replay left its ftvmd running"
[ -z "$(ls -A "$TMPDIR")" ] || fail "a replay left $(ls "$TMPDIR") in $TMPDIR"

# Bad traces: an error naming file, record and problem; nothing started.
size=$(stat -c %s "$WORK/b.trace")
cp "$WORK/b.trace" "$WORK/bad.trace"
printf '\xff' | dd of="$WORK/bad.trace" bs=1 seek=$((size - 30)) conv=notrunc status=none
rc=0
out=$("$FTVMCTL" trace replay "$WORK/bad.trace" 2>&1) || rc=$?
[ "$rc" -eq 1 ] || fail "a corrupt trace: exit $rc"
grep -Eq "$WORK/bad.trace: record [0-9]+: checksum mismatch" <<<"$out" || fail "corrupt: '$out'"
ok "corrupt trace refused: $out"
undecodable=$FTVM_SRCDIR/tests/fuzz/corpus/trace/three-records
out=$("$FTVMCTL" trace replay "$undecodable" 2>&1) && fail "a trace without memory_size replayed"
grep -q "$undecodable: record 0: the header lacks memory_size, which a replay needs" <<<"$out" ||
	fail "a header without memory_size: '$out'"
out=$("$FTVMCTL" trace replay "$WORK/nothing.trace" 2>&1) && fail "a missing trace replayed"
grep -q "$WORK/nothing.trace: No such file or directory" <<<"$out" || fail "missing: '$out'"
head -c $((size - 7)) "$WORK/b.trace" >"$WORK/torn.trace"
out=$("$FTVMCTL" trace replay "$WORK/torn.trace" 2>&1) || fail "a torn trace did not replay: $out"
grep -Eq "warning: $WORK/torn.trace: record [0-9]+: torn" <<<"$out" || fail "torn: '$out'"
ok "a header lacking a key, a missing and a torn trace: said with file and record"
rc=0
out=$("$FTVMCTL" trace replay "$WORK/b.trace" --ftvmd /nonexistent/ftvmd 2>&1) || rc=$?
[ "$rc" -eq 3 ] && grep -q "cannot find ftvmd" <<<"$out" || fail "no ftvmd: exit $rc, '$out'"
ok "no ftvmd to start: exit 3"

# A node that answers differently: the same ftvmd with half the frame pool
# (a wrapper given as --ftvmd edits the fresh config). The sense answer
# diverges, and the replay names the record, the field and both messages.
cat >"$WORK/halved-ftvmd" <<WRAP
#!/bin/sh
sed -i '/^\[memory\]/,/^\[/ s/^size = .*/size = 8388608/' "\$2"
exec "$FTVMD" "\$@"
WRAP
chmod +x "$WORK/halved-ftvmd"
rc=0
out=$("$FTVMCTL" trace replay "$WORK/c.trace" --ftvmd "$WORK/halved-ftvmd" 2>&1) || rc=$?
[ "$rc" -eq 1 ] || fail "a diverging replay exited $rc: $out"
sense=$("$FTVMCTL" trace dump "$WORK/c.trace" | grep -E 'client  out .*SenseInformation' | awk '{print $1}')
grep -q "$WORK/c.trace: record $sense: divergence after [0-9]* matched answers: ClientReply.sense.media\[0\].capacity: expected 16777216, got 8388608" <<<"$out" ||
	fail "the divergence said '$out' (sense answer at record $sense)"
grep -q "expected: id=1 SenseInformation media=\[{type=dram capacity=16777216" <<<"$out" ||
	fail "the expected message is not shown: $out"
grep -q "actual:   id=1 SenseInformation media=\[{type=dram capacity=8388608" <<<"$out" ||
	fail "the actual message is not shown: $out"
json=$("$FTVMCTL" --json trace replay "$WORK/c.trace" --ftvmd "$WORK/halved-ftvmd" 2>/dev/null) && fail "--json diverging exit 0"
jq -e ".first_divergence.record == \"$sense\" and (.first_divergence.field | startswith(\"ClientReply.sense.media[0].capacity\")) and .matched < .records" \
	<<<"$json" >/dev/null || fail "--json divergence: $json"
ok "a diverging node: record $sense, field and both messages named; exit 1"

# The text form: converts back byte for byte; bad lines are refused naming
# the text file and line, leaving no binary behind; a record whose message
# does not decode is refused by replay naming file and record.
lib=$FTVM_SRCDIR/tests/traces/alloc_granted.a.txt
"$FTVMCTL" trace text "$WORK/c.trace" >"$WORK/c.txt"
"$FTVMCTL" trace binary "$WORK/c.txt" "$WORK/c.back"
cmp "$WORK/c.trace" "$WORK/c.back" || fail "text form did not convert back byte for byte"
out=$("$FTVMCTL" trace binary "$WORK/c.txt" "$WORK/c.back" 2>&1) && fail "trace binary replaced a file"
grep -q "cannot create $WORK/c.back: File exists" <<<"$out" || fail "existing OUT: '$out'"
line=$(grep -n '^  ' "$lib" | sed -n 3p | cut -d: -f1)
sed "${line}s/^  ../  zz/" "$lib" >"$WORK/badhex.txt"
out=$("$FTVMCTL" trace binary "$WORK/badhex.txt" "$WORK/badhex.trace" 2>&1) && fail "bad hex converted"
grep -q "$WORK/badhex.txt:$line: 'zz' is not two lowercase hex digits" <<<"$out" || fail "bad hex: '$out'"
[ ! -e "$WORK/badhex.trace" ] || fail "a refused conversion left its output"
sed 's/^record \([0-9]*\) partner/record \1 partnre/' "$lib" >"$WORK/badch.txt"
out=$("$FTVMCTL" trace binary "$WORK/badch.txt" "$WORK/badch.trace" 2>&1) && fail "bad channel converted"
grep -Eq "$WORK/badch.txt:[0-9]+: channel 'partnre' \(want partner or client\)" <<<"$out" || fail "bad channel: '$out'"
# Record 3's bytes replaced by ones that are no envelope.
awk -v want=3 '/^record /{n++} n==want && /^  /{ if (!done) print "  ffffffff"; done=1; next } {print}' "$lib" >"$WORK/undec.txt"
"$FTVMCTL" trace binary "$WORK/undec.txt" "$WORK/undec.trace"
rc=0
out=$("$FTVMCTL" trace replay "$WORK/undec.trace" 2>&1) || rc=$?
[ "$rc" -eq 1 ] || fail "an undecodable record: exit $rc"
grep -q "$WORK/undec.trace: record 3: .*does not \(decode\|parse\)" <<<"$out" || fail "undecodable: '$out'"
ok "text form: lossless, bad lines named by line, undecodable record named by number ($out)"

# A failover replayed against a node that answers it differently: the
# library's failover trace with one byte changed in a block the node sends
# in its resync (a recorded ResyncPage whose CRC-32C is then not the one the
# node's block has). The replay plays b's death, the takeover and b's
# return, and then names that record; exit 1.
lib=$FTVM_SRCDIR/tests/traces/failover.a.txt
page=$(grep -m1 -E '^# +[0-9]+ .*partner out .*ResyncPage' "$lib" | awk '{print $2}')
[ -n "$page" ] || fail "no ResyncPage in $lib"
# The record's fifth data line: bytes 128-159 of the envelope, in the block.
awk -v want="$page" '/^record /{n++}
	n==want && /^  /{ if (++k == 5) $0 = "  " (substr($0, 3, 2) == "00" ? "11" : "00") substr($0, 5) }
	{print}' "$lib" >"$WORK/resync.txt"
"$FTVMCTL" trace binary "$WORK/resync.txt" "$WORK/resync.trace"
rc=0
out=$("$FTVMCTL" trace replay "$WORK/resync.trace" 2>&1) || rc=$?
[ "$rc" -eq 1 ] || fail "a changed resync page: exit $rc: $out"
grep -q "$WORK/resync.trace: record $page: divergence after [0-9]* matched answers: Envelope.resync_page.data: expected <512 bytes crc32c 0x[0-9a-f]*>, got <512 bytes crc32c 0x[0-9a-f]*>" <<<"$out" ||
	fail "a changed resync page (record $page): '$out'"
ok "a failover replayed to a resync page that differs: record $page named, exit 1"
