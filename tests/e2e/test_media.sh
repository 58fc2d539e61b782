#!/usr/bin/env bash
# Where copies rest (node/vmm/MEDIA.md) on a real pair, each node with its
# own flash file ([flash] path) and a frame pool of 1M (256 frames of 4K),
# beside an allocation of 512 pages (two pools):
#  - a capacity allocation's copy rests on flash on both nodes (list and
#    header say so; status and sense count its extent), a policy's too;
#  - every page written, from a (even pages) and b (odd ones), is written to
#    flash on both nodes, and read back on both: pages come back from flash
#    (status counts flash page-ins), verify says equal;
#  - kill -9 of a: b serves every page; a comes back, resyncs, and reads every
#    page, from its flash where the resync changed nothing; a clean stop and a
#    cold start of both: every page reads back, from flash;
#  - a flash block damaged on purpose: its page is read from the store;
#  - no room on flash: an allocation with --immediate is denied naming the
#    node's flash; one that fits a's flash and not b's is refused by b's
#    answer to its SpaceRequest, and neither node keeps anything; without
#    --immediate it waits until an allocation freed makes room on b;
#  - performance high rests in DRAM on both nodes: its frames are taken at
#    once and never evicted while the flash allocation's pages are read
#    through the pool; one that would pass the pool is denied naming DRAM;
#    standard rests in DRAM while it has room, then spills to flash; a DRAM
#    copy's pages survive a kill -9 of a node and its resync; freeing one
#    gives its frames back.
. "$(dirname "$0")/lib.sh"

PAGES=512

write_pair_configs
dead_after=$((DEAD_AFTER_MS > 2000 ? DEAD_AFTER_MS : 2000))
for id in a b; do
	sed -i '/^\[memory\]/,/^\[/ s/^size = .*/size = 1M/' "$WORK/$id.conf"
	sed -i "s/^dead_after_ms = .*/dead_after_ms = $dead_after/" "$WORK/$id.conf"
	printf '[store]\nsize = 16448K\n[policy bulk]\nblock_size = 4K\nperformance = capacity\n' >>"$WORK/$id.conf"
	printf '[policy fast]\nblock_size = 4K\nperformance = high\n' >>"$WORK/$id.conf"
	printf '[policy std]\nblock_size = 4K\nperformance = standard\n' >>"$WORK/$id.conf"
done
# a's flash holds 4M, b's 3M (after the header's 64K).
printf '[flash]\npath = a/flash\nsize = 4160K\n' >>"$WORK/a.conf"
printf '[flash]\npath = b/flash\nsize = 3136K\n' >>"$WORK/b.conf"
start_node a
start_node b
wait_for 5000 "pair linked" pair_up

flash_of() { ctl "$1" --json status | jq -r ".flash.$2"; }
for n in a b; do
	[ -f "$WORK/$n/flash" ] || fail "$n made no flash file"
	ctl "$n" flash show "$WORK/$n/flash" | grep -q "flash" || fail "flash show $n: $(ctl "$n" flash show "$WORK/$n/flash")"
	grep -q "flash $WORK/$n/flash: partition of" "$WORK/$n.log" || fail "$n did not log its flash"
done
ok "each node made its flash file on first start: $(grep -o 'flash .*: partition of .*' "$WORK/a.log" | head -n 1)"

free_a0=$(flash_of a free) free_b0=$(flash_of b free)
g=$(ctl a alloc --size $((PAGES * 4))K)
for n in a b; do
	media=$(ctl "$n" --json list | jq -r ".[] | select(.guid == \"$g\") | .media")
	[ "$media" = flash ] || fail "$g rests on '$media' on $n, wanted flash"
	ctl "$n" header "$g" | grep -q "media: flash" || fail "header $g on $n: $(ctl "$n" header "$g")"
done
[ "$(flash_of a free)" -lt "$free_a0" ] && [ "$(flash_of b free)" -lt "$free_b0" ] ||
	fail "flash free did not drop: a $free_a0 -> $(flash_of a free), b $free_b0 -> $(flash_of b free)"
ctl a --json sense | jq -e '.media[] | select(.type == "flash") | .capacity > 0' >/dev/null ||
	fail "sense on a shows no flash: $(ctl a --json sense)"
ok "$g ($PAGES pages, capacity) rests on flash on both nodes; flash free a $free_a0 -> $(flash_of a free), b $free_b0 -> $(flash_of b free)"

block() { local out="$1 "; while [ ${#out} -lt 4096 ]; do out+=$out; done; printf '%s' "${out:0:4096}"; }
writer() { if (($1 % 2)); then echo b; else echo a; fi; }
for ((p = 0; p < PAGES; p++)); do
	block "$g/$p" | ctl "$(writer "$p")" write "$g" "$p" --wait >/dev/null || fail "writing page $p"
done
# read_all ID WHAT: every page of $g read on ID holds its stamp.
read_all() {
	local p
	for ((p = 0; p < PAGES; p++)); do
		ctl "$1" read "$g" "$p" --wait | cmp -s - <(block "$g/$p") ||
			fail "$2: page $p of $g read on $1 is not what was written"
	done
}
read_all a "after the writes"
read_all b "after the writes"
for n in a b; do
	w=$(flash_of "$n" writes) ins=$(flash_of "$n" page_ins)
	[ "$w" -ge "$PAGES" ] || fail "$n wrote $w pages to flash, wanted every one of $PAGES"
	[ "$ins" -gt 0 ] || fail "$n read no page from flash"
	grep -qF "flash: $(flash_of "$n" capacity) bytes" <(ctl "$n" status) ||
		fail "$n's status text shows no flash line: $(ctl "$n" status)"
	ok "$n: $w pages written to flash, $ins page-ins from flash, $(ctl "$n" --json status | jq .replacement.evictions) evictions"
done
ctl a verify >/dev/null || fail "verify: $(ctl a verify 2>&1)"
ok "every page written from both nodes and read back on both (two pools' worth); verify equal"

# ======================= kill -9, resync, cold start =======================
kill -9 "${PIDS[a]}"
wait "${PIDS[a]}" 2>/dev/null || true
unset 'PIDS[a]'
wait_for 10000 "b serving alone" field_is b state solo
read_all b "with a killed"
ok "a killed: b serves every page"
start_node a
wait_for 20000 "pair linked again" pair_up
read_all a "after a's resync"
ctl a verify >/dev/null || fail "verify after the resync: $(ctl a verify 2>&1)"
# Whether the resync replaced a's copy or left it, what a's flash held of
# pages the resync did not change is still used.
[ "$(flash_of a page_ins)" -gt 0 ] || fail "a read nothing from flash after its resync"
ok "a back and resynced: it reads every page, $(flash_of a page_ins) of them from its flash; verify equal"

stop_both() {
	local n
	for n in a b; do
		kill -TERM "${PIDS[$n]}"
		wait "${PIDS[$n]}" 2>/dev/null || true
		unset "PIDS[$n]"
	done
}
stop_both
start_node a
start_node b
wait_for 10000 "pair linked after the cold start" pair_up
for n in a b; do
	[ "$(flash_of "$n" page_ins)" = 0 ] || fail "$n counted flash page-ins before any read"
	read_all "$n" "after the cold start"
	[ "$(flash_of "$n" page_ins)" -gt 0 ] || fail "$n read nothing from flash after the cold start"
done
ok "both stopped and started: every page reads back on both, $(flash_of a page_ins) and $(flash_of b page_ins) of them from flash"

# ================= write pointers: the partner pages in =================
# The reads above left pages 256 to 511 in both pools: pages 0 and 2 rest on
# flash alone. A write pointer on page 0 from a, then on page 2 from b: the
# node asked pages the page in from its flash, and so does its partner, for
# the pointer (AllocateWrite page_in; seed 002 Fig. 7, node/vmm/VMM.md "The
# partner pages in"), before the pointer is granted.
partner_ins() { ctl "$1" --json status | jq .replacement.partner_page_ins; }
pointer_pages_in() {
	local asked=$1 partner=$2 page=$3 p0 f0
	p0=$(partner_ins "$partner") f0=$(flash_of "$partner" page_ins)
	hold_pointer "w$asked" "$asked" "$g" "$page" write
	[ "$(partner_ins "$partner")" = $((p0 + 1)) ] ||
		fail "$partner paged in $(($(partner_ins "$partner") - p0)) pages for $asked's pointer on page $page, wanted 1"
	wait_for 5000 "$partner's page-in from flash" eval '[ "$(flash_of "$partner" page_ins)" -gt "$f0" ]'
	hold_end "w$asked" || fail "w$asked: $(cat "$WORK/w$asked.err")"
	ctl "$partner" read "$g" "$page" --wait | cmp -s - <(block "$g/$page") ||
		fail "page $page on $partner after $asked's pointer is not what was written"
}
pointer_pages_in a b 0
pointer_pages_in b a 2
ctl a status | grep -q "(1 for the partner's pointers)" || fail "a's status text: $(ctl a status)"
ok "write pointers on flash pages from a and b: each partner paged its copy in from flash for the pointer"

# =========================== a damaged block ===========================
stop_both
# The first extent on a's flash starts at its partition (after the 64K
# header): 512 records of 16 bytes (8K), then the blocks.
dd if=/dev/urandom of="$WORK/a/flash" bs=4096 seek=$(((65536 + 8192) / 4096)) count=1 conv=notrunc 2>/dev/null
start_node a
start_node b
wait_for 10000 "pair linked after the damage" pair_up
ctl a read "$g" 0 --wait | cmp -s - <(block "$g/0") || fail "page 0 on a after its flash block was damaged"
grep -q "$g page 0: its block on flash fails its checksum: read from the store" "$WORK/a.log" ||
	fail "a did not say it read page 0 from the store"
ok "page 0's block damaged on a's flash: read from the store, whole"

# ============================== no room ==============================
expect_fail a "denied.*do not fit on a's flash: .* bytes free; policy 'default' asks for capacity; immediate" alloc --size 3M --immediate
free_a=$(flash_of a free) free_b=$(flash_of b free) count_a=$(ctl a --json list | jq length)
# 1.5M fits a's flash (2M left) and not b's (1M left): b's SpaceRequest
# answer says so (Fig. 5 step 520), and b keeps nothing.
expect_fail a "denied (partner: 384 pages of 4096 bytes do not fit on b's flash: .* bytes free; policy 'bulk' asks for capacity; immediate)" \
	alloc --size 1536K --policy bulk --immediate
[ "$(flash_of a free)" = "$free_a" ] && [ "$(flash_of b free)" = "$free_b" ] ||
	fail "a refused allocation kept flash: a $free_a -> $(flash_of a free), b $free_b -> $(flash_of b free)"
[ "$(ctl a --json list | jq length)" = "$count_a" ] && [ "$(ctl b --json list | jq length)" = "$count_a" ] ||
	fail "a refused allocation left a row: $(ctl a --json list | jq -c '[.[].guid]') / $(ctl b --json list | jq -c '[.[].guid]')"
ok "no room: denied with --immediate naming a's flash; refused by b naming its flash, nothing kept on either"

# Without --immediate it waits for room on b, which freeing an allocation makes.
f=$(ctl b alloc --size 512K --policy bulk)
"$FTVMCTL" --config "$WORK/a.conf" alloc --size 768K --policy bulk >"$WORK/waiting.out" 2>&1 </dev/null &
PIDS[waiting]=$!
wait_for 5000 "a's allocation waiting for room on b's flash" \
	grep -q "waits: partner: 192 pages of 4096 bytes do not fit on b's flash" "$WORK/a.log"
ctl b free "$f"
wait_for 5000 "the waiting allocation made" pid_gone "${PIDS[waiting]}"
wait "${PIDS[waiting]}" || fail "the waiting allocation: $(cat "$WORK/waiting.out")"
unset 'PIDS[waiting]'
w=$(cat "$WORK/waiting.out")
[ "$(ctl a --json list | jq -r ".[] | select(.guid == \"$w\") | .media")" = flash ] &&
	[ "$(ctl b --json list | jq -r ".[] | select(.guid == \"$w\") | .media")" = flash ] ||
	fail "the waiting allocation '$w' does not rest on flash on both nodes"
ok "without --immediate: $w waited for room on b's flash and was made once $f was freed"
ctl a free "$w"

# ============================ DRAM: high, standard ============================
media_on() { ctl "$1" --json list | jq -r ".[] | select(.guid == \"$2\") | .media"; }
dram_used() { ctl "$1" --json sense | jq '.media[] | select(.type == "dram") | (.capacity - .free) / 4096'; }
h=$(ctl a alloc --size 512K --policy fast)
for n in a b; do
	[ "$(media_on "$n" "$h")" = dram ] || fail "$h (high) rests on '$(media_on "$n" "$h")' on $n"
	[ "$(dram_used "$n")" -ge 128 ] || fail "$n holds $(dram_used "$n") frames after $h (128 pages) was made"
done
ok "$h (128 pages, high) rests in DRAM on both nodes, its frames taken at once"
for ((p = 0; p < 128; p += 2)); do
	block "$h/$p" | ctl "$(writer "$((p / 2))")" write "$h" "$p" >/dev/null || fail "writing page $p of $h"
done
read_all a "with $h in DRAM"
read_all b "with $h in DRAM"
for n in a b; do
	! grep -q "evicted $h page" "$WORK/$n.log" || fail "$n evicted a page of $h: $(grep "evicted $h page" "$WORK/$n.log" | head -n 1)"
	[ "$(dram_used "$n")" -ge 128 ] || fail "$n holds $(dram_used "$n") frames, fewer than $h's 128"
done
ok "$g's $PAGES pages read through the pool on both nodes: no page of $h evicted"
expect_fail a "denied.*a's DRAM has 128 of its 256 frames not promised to other dram allocations; .* needs 200; policy 'fast' asks for high; immediate" \
	alloc --size 800K --policy fast --immediate
s1=$(ctl b alloc --size 800K --policy std)
s2=$(ctl b alloc --size 400K --policy std)
for n in a b; do
	[ "$(media_on "$n" "$s1")" = flash ] || fail "$s1 (standard, 200 pages) rests on '$(media_on "$n" "$s1")' on $n, wanted flash"
	[ "$(media_on "$n" "$s2")" = dram ] || fail "$s2 (standard, 100 pages) rests on '$(media_on "$n" "$s2")' on $n, wanted dram"
done
ok "standard: $s1 (200 pages) spilled to flash, $s2 (100 pages) rests in DRAM, on both nodes"

kill -9 "${PIDS[b]}"
wait "${PIDS[b]}" 2>/dev/null || true
unset 'PIDS[b]'
wait_for 10000 "a serving alone" field_is a state solo
for ((p = 0; p < 128; p += 2)); do
	ctl a read "$h" "$p" | cmp -s - <(block "$h/$p") || fail "page $p of $h on a with b killed"
done
start_node b
wait_for 20000 "pair linked again" pair_up
for ((p = 0; p < 128; p += 2)); do
	ctl b read "$h" "$p" --wait | cmp -s - <(block "$h/$p") || fail "page $p of $h on b after its resync"
done
[ "$(media_on b "$h")" = dram ] || fail "$h rests on '$(media_on b "$h")' on b after its resync"
ok "b killed and back: $h's pages whole on both, in DRAM on b again"
before=$(dram_used a)
ctl a free "$h"
[ "$(dram_used a)" -le $((before - 128)) ] || fail "freeing $h left a's frames at $(dram_used a) (from $before)"
ok "$h freed: its 128 frames back on a ($before -> $(dram_used a))"
ctl a free "$g"
