#!/usr/bin/env bash
# A destage writes a page's block and then its record (node/vmm/destage.c,
# on_destage_timer; node/vmm/VMM.md, "The backing store"):
# - each write of the record starts only once the block's write before it
#   returned (strace on the owner while it destages), so a node killed in
#   between leaves the old record beside the new block, never a record
#   naming a block the store does not hold;
# - a start that finds a record behind its block takes the block when it
#   holds the page table's version: here the store is left as that kill
#   would leave it (the record of version 1 beside the block of version 2),
#   and both nodes serve version 2 after a cold start. Before, both took
#   the page for stale, went back to the record's version, and then refused
#   the block ("the store's block fails its checksum").
. "$(dirname "$0")/lib.sh"
need_tools strace jq

stop_both() {
	kill -TERM "${PIDS[a]}" "${PIDS[b]}"
	wait "${PIDS[a]}" "${PIDS[b]}" || true
	unset "PIDS[a]" "PIDS[b]"
}

start_both() {
	start_node a
	start_node b
	wait_for 15000 "pair linked" pair_up
}

# reads ID GUID BYTE: page 0 of GUID reads back on ID as 4096 BYTEs.
reads() { ctl "$1" read "$2" 0 2>/dev/null | cmp -s - "$(fill "$3")"; }

PAGES=64

# records_after_blocks TRACE EXTENT PAGES: in an strace -f -ttt -T of
# pwrite64 on a node, each write of a page's record (16 bytes at EXTENT + 16
# page) began after the latest write of its block that began before it (4096
# bytes at EXTENT + the records' room, node/storage/store.c, + 4096 page)
# had returned. A page may be destaged twice, the same version again when a
# stop's last destage comes before the round that wrote it was done with, so
# each record is paired with the block write before it, not the last one.
# Prints the records seen, fails naming the first that did not.
records_after_blocks() {
	python3 - "$1" "$2" "$3" <<'PY'
import re, sys
trace, extent, pages = sys.argv[1], int(sys.argv[2]), int(sys.argv[3])
records_size = (pages * 16 + 4095) // 4096 * 4096
entry = re.compile(r'^(\d+) +([\d.]+) pwrite64\(\d+, .*, (\d+), (\d+)(\) += (\d+) <([\d.]+)>| <unfinished)')
resumed = re.compile(r'^(\d+) +([\d.]+) <\.\.\. pwrite64 resumed>.* = (\d+)')
pending, blocks, records = {}, {}, []
for line in open(trace):
    m = entry.match(line)
    if m:
        pid, ts, length, off = m.group(1), float(m.group(2)), int(m.group(3)), int(m.group(4))
        if length == 16:
            records.append((off, ts))
        elif m.group(6) is not None:
            blocks.setdefault(off, []).append([ts, ts + float(m.group(7))])
        else:
            write = [ts, None]
            blocks.setdefault(off, []).append(write)
            pending[pid] = write
        continue
    m = resumed.match(line)
    if m and m.group(1) in pending:
        pending.pop(m.group(1))[1] = float(m.group(2))
seen = 0
for off, start in records:
    if off < extent or off >= extent + pages * 16:
        continue
    page = (off - extent) // 16
    before = [w for w in blocks.get(extent + records_size + page * 4096, []) if w[0] < start]
    end = max(before)[1] if before else None
    if end is None or start < end:
        print("page %d: its record began at %.6f, its block's write before it returned at %s"
              % (page, start, end if end is not None else "never"))
        sys.exit(1)
    seen += 1
print(seen)
PY
}

start_pair
g=$(ctl a alloc --size $((PAGES * 4))K)

# The order of the writes of a node's last destage, on its store threads.
strace -f -ttt -T -e trace=pwrite64 -o "$WORK/strace.destage" -p "${PIDS[a]}" 2>"$WORK/strace.err" &
tracer=$!
wait_for 5000 "strace attached" grep -q "attached" "$WORK/strace.err"
for ((p = 0; p < PAGES; p++)); do
	ctl a write "$g" "$p" --file "$(fill 65)" >/dev/null || fail "write 1 of page $p"
done
stop_both
kill -INT "$tracer" 2>/dev/null || true # gone with the node it traced
wait "$tracer" 2>/dev/null || true
extent=$("$POKE" sql "$WORK/a/pagetable.db" "SELECT store_offset FROM allocations WHERE guid = ?" "$g")
[ -n "$extent" ] || fail "no store_offset for $g"
seen=$(records_after_blocks "$WORK/strace.destage" "$extent" "$PAGES") || fail "a destage: $seen"
[ "$seen" -ge 1 ] || fail "no record written in the trace"
ok "destages of $PAGES pages: each of $seen records began after its block's write returned"

# Version 1's record, as the store holds it now.
dd if="$WORK/shared/store" of="$WORK/record.1" bs=1 skip="$extent" count=16 status=none
start_both
ctl a write "$g" 0 --file "$(fill 66)" >/dev/null || fail "write 2"
stop_both
# As a kill between version 2's block and its record would leave it.
dd if="$WORK/record.1" of="$WORK/shared/store" bs=1 seek="$extent" count=16 conv=notrunc status=none
start_both
for id in a b; do
	reads "$id" "$g" 66 || fail "$id does not read version 2: $(ctl "$id" read "$g" 0 2>&1 | head -c 200)"
done
grep -q "a destage was cut before its record; the page is clean at 2" "$WORK/a.log" ||
	fail "a did not say so: $(grep "$g page 0" "$WORK/a.log" | tail -3)"
ctl a --json verify | jq -e .equal >/dev/null || fail "verify: $(ctl a verify 2>&1)"
ok "the record of version 1 beside the block of version 2: both nodes serve version 2, verify equal"
