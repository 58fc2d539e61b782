#!/usr/bin/env bash
# The replacement queue (node/vmm/VMM.md, "Replacement") on a real pair whose
# frame pools are small (1M: 256 frames of 4K) beside allocations of 1.5M on
# each node (768 pages in all, three times a pool):
#  - every page written (from a for even pages, from b for odd ones, of both
#    allocations), destaged, then read back on both nodes (pages come back
#    from the store, others are evicted) and verify says equal; resident pages
#    never more than the pool; the same with blocks of 16 frames among them;
#  - frames short: pointers held on every frame of one node; a write to
#    another page, from the other node and from that node, is refused naming
#    the node, and with --wait goes through once a pointer is released;
#  - at start no page is resident, and the pages whose writes were refused
#    read back from the store as before (no page table kept them); a page
#    whose block in the store was damaged on purpose fails its page-in with
#    a clear error, on both nodes, and is whole again once written.
# Status counts the evictions the log shows, in its JSON and its text.
. "$(dirname "$0")/lib.sh"

FTVM_HOLD=${FTVM_HOLD:?FTVM_HOLD must name the ftvm-hold binary}
FRAMES=256
PAGES=384 # per allocation

write_pair_configs
# Nothing here is about failure detection, and a link declared lost on a
# loaded machine (ASan, 4 workers, 300 ms) made a take over in the middle of
# the reads: a detector of at least 2 s.
dead_after=$((DEAD_AFTER_MS > 2000 ? DEAD_AFTER_MS : 2000))
for id in a b; do
	sed -i '/^\[memory\]/,/^\[/ s/^size = .*/size = 1M/' "$WORK/$id.conf"
	sed -i "s/^dead_after_ms = .*/dead_after_ms = $dead_after/" "$WORK/$id.conf"
	printf '[store]\nsize = 16448K\n[policy stripe]\nblock_size = 64K\n' >>"$WORK/$id.conf" # 8M partitions
done
start_node a
start_node b
wait_for 5000 "pair linked" pair_up

sense() { ctl "$1" --json sense; }
# residency ID: the pages (of 4K) in ID's frames, and how many of them may be
# evicted (its replacement queue), from one sense.
residency() {
	sense "$1" | jq -r '(.media[] | select(.type == "dram")) as $d |
		"\(($d.capacity - $d.free) / 4096) \(.queues.replacement)"'
}
resident() { residency "$1" | cut -d' ' -f1; }
evictable() { residency "$1" | cut -d' ' -f2; }
# All clean and nothing locked: every resident page may be evicted.
settled() {
	local n r e
	for n in a b; do
		[ "$(sense "$n" | jq .queues.destage)" = 0 ] || return 1
		read -r r e <<<"$(residency "$n")"
		[ "$r" = "$e" ] || return 1
	done
}
count_log() { grep -c "$2" "$WORK/$1.log" || true; }
# How often ID refused the partner's WritePage for want of frames.
refusals() { count_log "$1" "partner seq .* WritePage: no frame free on $1"; }
refused_past() { [ "$(refusals "$1")" -ge "$2" ]; }

# The workers write and read pages in parallel: page P of G holds its writer
# W's stamp "G/P/W " over and over. Writes wait for frames; reads do not
# (read-wait does). Each job done adds a line to jobs.done.
cat >"$WORK/io.sh" <<'IO'
set -euo pipefail
trap 'echo >>"$WORK/jobs.done"' EXIT
block() { local out="$1 "; while [ ${#out} -lt 4096 ]; do out+=$out; done; printf '%s' "${out:0:4096}"; }
op=$1 n=$2 g=$3 p=$4 w=$5
conf="$WORK/$n.conf"
wait=()
[ "$op" = read-wait ] && wait=(--wait)
if [ "$op" = write ]; then
	block "$g/$p/$w" | "$FTVMCTL" --config "$conf" write "$g" "$p" --wait >/dev/null
elif ! "$FTVMCTL" --config "$conf" read "$g" "$p" "${wait[@]}" | head -c 4096 |
	cmp -s - <(block "$g/$p/$w"); then
	echo "$g page $p read on $n is not what $w wrote" >&2
	exit 1
fi
IO
export WORK FTVMCTL
# page_jobs OP [NODE [GUID PAGES]]: OP for every page of both allocations (or
# of GUID's PAGES pages), on NODE or on the page's writer.
page_jobs() {
	local op=$1 node=${2:-} g p w gs=("${G[@]}") pages=$PAGES
	if [ $# -gt 2 ]; then gs=("$3") pages=$4; fi
	for g in "${gs[@]}"; do
		for ((p = 0; p < pages; p++)); do
			if ((p % 2)); then w=b; else w=a; fi
			echo "$op ${node:-$w} $g $p $w"
		done
	done
}
run_jobs() { xargs -P 4 -L 1 bash "$WORK/io.sh"; }

# Samples both nodes' resident pages while a phase runs, in $WORK/samples:
# again each time the workers have done 8 more jobs.
jobs_done() { wc -l <"$WORK/jobs.done" 2>/dev/null || echo 0; }
jobs_past() { [ "$(jobs_done)" -ge "$1" ]; }
sampler() {
	local next
	while :; do
		for n in a b; do echo "$n $(residency "$n")" >>"$WORK/samples"; done
		next=$(($(jobs_done) + 8))
		wait_for 300000 "8 more jobs done" jobs_past "$next"
	done
}
check_samples() {
	local bad
	bad=$(awk -v max="$FRAMES" '$2 > max || $3 > $2' "$WORK/samples" | head -n 1)
	[ -z "$bad" ] || fail "a node held more pages than its pool, or counted more evictable than resident: $bad"
	ok "$1: $(wc -l <"$WORK/samples") samples, resident pages at most $(awk 'm < $2 {m = $2} END {print m}' "$WORK/samples") of $FRAMES"
}

# ====================== more pages than frames ======================
declare -a G=()
G[0]=$(ctl a alloc --size $((PAGES * 4))K)
G[1]=$(ctl b alloc --size $((PAGES * 4))K)
[ "$(resident a)" = 0 ] && [ "$(resident b)" = 0 ] || fail "an allocation took frames"
ok "allocated ${G[0]} (home a) and ${G[1]} (home b), $PAGES pages each, in 1M pools: no frames taken"

sampler &
PIDS[sampler]=$!
t0=$(now_ms)
page_jobs write | run_jobs || fail "writing every page"
t1=$(now_ms)
wait_for 10000 "every page destaged and clean on both nodes" settled
page_jobs read a | run_jobs || fail "reading every page back on a"
page_jobs read b | run_jobs || fail "reading every page back on b"
t2=$(now_ms)
kill "${PIDS[sampler]}"
wait "${PIDS[sampler]}" 2>/dev/null || true
unset 'PIDS[sampler]'
check_samples "the workload"
for n in a b; do
	counted=$(ctl "$n" --json status | jq .replacement.evictions)
	counted_ins=$(ctl "$n" --json status | jq .replacement.page_ins)
	text=$(ctl "$n" status)
	evicted=$(count_log "$n" "vmm: evicted ") paged=$(count_log "$n" "vmm: paged in ")
	[ "$evicted" -gt 0 ] && [ "$paged" -gt 0 ] || fail "$n evicted $evicted pages and paged in $paged"
	# status counts the evictions the log shows (a LIST row, ftvm_status.h).
	[ "$counted" = "$evicted" ] || fail "$n: status says $counted evictions, its log $evicted"
	[ "$counted_ins" = "$paged" ] || fail "$n: status says $counted_ins page-ins, its log $paged"
	grep -qF "replacement: $evicted evictions, $paged page-ins" <<<"$text" ||
		fail "$n: no 'replacement: $evicted evictions, $paged page-ins' in: $text"
	ok "$n: $evicted evictions, $paged page-ins (status says so too)"
done
ok "$((2 * PAGES)) pages written from both nodes in $((t1 - t0)) ms, read back on both in $((t2 - t1)) ms"
ctl a verify >/dev/null || fail "verify after the workload: $(ctl a verify 2>&1)"
ok "verify: $(ctl a verify)"

# Blocks of 64K (16 frames each, 16 fill a pool) among the 4K pages: a run of
# 16 free frames is made by evicting until one is free.
# The frames of a dirty block on the partner come free with the owner's
# Destaged, which sense does not show: these reads wait for frames.
gs=$(ctl b alloc --size 2M --policy stripe)
page_jobs write "" "$gs" 32 | run_jobs || fail "writing every block of $gs"
for n in a b; do
	page_jobs read-wait "$n" "$gs" 32 | run_jobs || fail "reading every block of $gs on $n"
	page_jobs read-wait "$n" "${G[0]}" 16 | run_jobs || fail "reading 4K pages of ${G[0]} again on $n"
done
ctl a verify >/dev/null || fail "verify after the 64K blocks: $(ctl a verify 2>&1)"
ok "$gs: 32 blocks of 64K written from both nodes and read back on both beside 4K pages (1M pools); verify equal"
ctl a free "$gs"

# ============================ frames short ============================
stamp_of() { ctl "$1" read "$2" "$3" | head -c 64 | tr -d '\0' | cut -d' ' -f1; }
# holds ID G P FILE: page P of G read on ID starts with FILE's bytes.
holds() { ctl "$1" read "$2" "$3" | head -c "$(stat -c %s "$4")" | cmp -s - "$4"; }

# waiting_write NAME WRITER ARGS...: ftvmctl ARGS --wait on WRITER in the background.
waiting_write() {
	local name=$1 writer=$2
	shift 2
	"$FTVMCTL" --config "$WORK/$writer.conf" "$@" --wait >"$WORK/$name.out" 2>&1 </dev/null &
	PIDS[$name]=$!
}
waiting_done() {
	local rc=0
	wait_for 5000 "$1 to complete" pid_gone "${PIDS[$1]}"
	wait "${PIDS[$1]}" || rc=$?
	unset "PIDS[$1]"
	[ "$rc" -eq 0 ] || fail "$1: exit $rc: $(cat "$WORK/$1.out")"
}

for full in a b; do
	o=$(other "$full")
	gh=$(ctl "$full" alloc --size $((FRAMES * 4))K)
	wait_for 10000 "both nodes settled" settled
	# Pointers to every frame of $full: FRAMES - 1 read pointers held by one
	# client, a write pointer by another. A read pointer takes no frame on
	# the partner; the write pointer has $o page its copy in (node/vmm/
	# VMM.md, "The partner pages in"): one frame.
	hold_start many "$full" "$gh" 0 read --count $((FRAMES - 1))
	hold_start one "$full" "$gh" $((FRAMES - 1)) write
	wait_for 10000 "$((FRAMES - 1)) read pointers held on $full" hold_said many holding
	wait_for 5000 "one write pointer held on $full" hold_said one held
	[ "$(residency "$full")" = "$FRAMES 0" ] ||
		fail "$full holds $(residency "$full") (resident, evictable) pages"
	ok "$FRAMES pointers held on $full: every frame locked, nothing evictable"

	# Pages 10 and 11 of each allocation: a page homed on $full and one homed on $o.
	for g in "${G[@]}"; do
		before=$(stamp_of "$o" "$g" 10)
		expect_fail "$o" "no space.*partner: no frame free on $full: $FRAMES resident pages, all dirty or locked" \
			write "$g" 10 --file "$WORK/io.sh"
		[ "$(stamp_of "$o" "$g" 10)" = "$before" ] || fail "the refused write changed $g page 10 on $o"
		expect_fail "$full" "no space.*no frame free on $full: $FRAMES resident pages" write "$g" 11 --file "$WORK/io.sh"
		expect_fail "$full" "no space.*no frame free on $full" read "$g" 12
	done
	ok "frames short on $full: writes from $o and from $full refused naming $full; $o's copy unchanged"

	# With --wait: from $o (retried until $full has a frame) and from $full.
	waiting_write wo "$o" write "${G[0]}" 20 --file "$WORK/io.sh"
	waiting_write wf "$full" write "${G[1]}" 21 --file "$WORK/io.sh"
	wait_for 5000 "the write from $o waiting" sense_is "$o" queues.paging 1
	wait_for 5000 "the write from $full waiting" sense_is "$full" queues.paging 1
	# Several retries, all still short: $full refuses $o's each time (those
	# of $full's own write, on the same timer, leave no trace).
	refused=$(refusals "$full")
	wait_for 5000 "4 more retries from $o refused" refused_past "$full" $((refused + 4))
	pid_gone "${PIDS[wo]}" && fail "the write from $o ended while $full had no frame: $(cat "$WORK/wo.out")"
	pid_gone "${PIDS[wf]}" && fail "the write from $full ended while it had no frame: $(cat "$WORK/wf.out")"
	hold_end one || fail "one: $(cat "$WORK/one.err")"
	waiting_done wo
	waiting_done wf
	hold_end many || fail "many: $(cat "$WORK/many.err")"
	for n in a b; do
		holds "$n" "${G[0]}" 20 "$WORK/io.sh" || fail "the waiting write from $o did not reach $n"
		holds "$n" "${G[1]}" 21 "$WORK/io.sh" || fail "the waiting write from $full did not reach $n"
	done
	ok "with --wait, writes from $o and from $full waited for a frame on $full and went through once a pointer was released"
	ctl "$o" free "$gh"
	ctl a verify >/dev/null || fail "verify after frames short on $full: $(ctl a verify 2>&1)"
done

# =========== at start nothing resident; a damaged block ===========
for id in a b; do
	kill -TERM "${PIDS[$id]}"
	wait "${PIDS[$id]}" || fail "$id did not stop cleanly"
	unset "PIDS[$id]"
done
start_node a
start_node b
wait_for 5000 "pair linked after the restart" pair_up
[ "$(resident a)" = 0 ] && [ "$(resident b)" = 0 ] || fail "pages resident right after the start"
ok "restarted: no page resident on either node"

# Page 10 of each allocation took only the refused writes above (refused by
# its owner, or by the owner's partner, for want of frames): paged in from
# the store now, it must match what each page table recorded before them.
for g in "${G[@]}"; do
	for n in a b; do
		[ "$(stamp_of "$n" "$g" 10)" = "$g/10/a" ] ||
			fail "$g page 10 on $n after the restart is not the workload's block"
	done
done
ok "refused writes left no trace in either page table: page 10 of both allocations reads back from the store on both nodes"

# The block of page 5 of G[0] in the store: its extent (a's log), then a
# record of 16 bytes per page rounded up to 4K, then the blocks.
extent=$(sed -n "s/.*allocation ${G[0]}: extent at \([0-9]*\),.*/\1/p" "$WORK/a.log" | head -n 1)
[ -n "$extent" ] || fail "a's log does not say where ${G[0]}'s extent is"
offset=$((extent + (PAGES * 16 + 4095) / 4096 * 4096 + 5 * 4096))
printf 'damaged on purpose' | dd of="$WORK/shared/store" bs=1 seek="$offset" conv=notrunc status=none
for n in a b; do
	expect_fail "$n" "the node failed.*page 5: the store's block fails its checksum" read "${G[0]}" 5
	[ "$(stamp_of "$n" "${G[0]}" 4)" = "${G[0]}/4/a" ] || fail "page 4 next to it does not read back on $n"
done
ctl a verify >/dev/null || fail "verify with the damaged block: $(ctl a verify 2>&1)"
ok "a damaged block in the store: its page-in fails on both nodes with a reason, its neighbours read; verify (which compares what the page tables record) equal"
ctl b write "${G[0]}" 5 --file "$WORK/io.sh" >/dev/null
for n in a b; do
	holds "$n" "${G[0]}" 5 "$WORK/io.sh" || fail "page 5 rewritten does not read on $n"
done
ok "page 5 written whole again: it reads on both nodes"
