#!/usr/bin/env bash
# The frame pool grows and shrinks in registration blocks (node/vmm/VMM.md, "The
# pool grows before it evicts"; replica/RDMA.md, "The pool grows and
# shrinks"). Pools of 16M in 1M blocks: writes of 256K pages from both nodes
# bring blocks into use, freeing the allocation lets them go again (their
# memory back to the OS: the process's shared memory shrinks), and a second
# workload brings them back. The mirror stays equal throughout.
# Over RDMA, a block that leaves takes its registration with it (stale, then
# purged) and the page writes after the regrowth still go one-sided into the
# partner's re-registered blocks, with none refused; rewrites of pages the
# writer holds resident but does not own go from staging slabs, which go
# again once idle. Over TCP nothing is registered or staged.
. "$(dirname "$0")/lib.sh"

PAGES=24 # 24 pages of 256K: 6M, six blocks of each node's pool

write_pair_configs
for id in a b; do
	sed -i 's/^size = 16M$/&\npool_block_size = 1M/' "$WORK/$id.conf"
	printf '[policy big]\nblock_size = 256K\n' >>"$WORK/$id.conf"
done
start_node a
start_node b
wait_for 5000 "pair linked" pair_up

# pool_line ID: the pool's status fields in one line, for messages.
pool_line() {
	ctl "$1" --json status |
		jq -r '"\(.pool.blocks_in_use)/\(.pool.blocks) blocks in use, \(.frames.free)/\(.frames.total) frames free, grown \(.pool.grown), shrunk \(.pool.shrunk); registrations \(.registrations.current) current, \(.registrations.stale) stale, \(.registrations.purged) purged"'
}

# shmem_kib ID: the node's resident shared memory (the frame pool's memfd).
shmem_kib() {
	awk '/^RssShmem:/ { print $2 }' "/proc/${PIDS[$1]}/status"
}

in_use_at_most() {
	[ "$(status_field "$1" pool.blocks_in_use)" -le "$2" ]
}

for id in a b; do
	[ "$(status_field "$id" pool.blocks)" = 16 ] &&
		[ "$(status_field "$id" pool.block_bytes)" = 1048576 ] &&
		in_use_at_most "$id" 1 ||
		fail "$id at the start: want 1 of 16 blocks of 1M in use: $(pool_line "$id")"
	ok "$id at the start: $(pool_line "$id")"
done

declare -A sided0
for id in a b; do
	sided0[$id]=$(status_field "$id" page_writes.one_sided)
done

# write_pages GUID: every page written, alternately from a and from b.
write_pages() {
	local guid=$1 page id
	for ((page = 0; page < PAGES; page++)); do
		id=a
		((page % 2)) && id=b
		head -c 262144 /dev/urandom >"$WORK/page$page"
		ctl "$id" write "$guid" "$page" --file "$WORK/page$page" >/dev/null ||
			fail "$id: write $guid page $page: $(ctl "$id" write "$guid" "$page" \
				--file "$WORK/page$page" 2>&1)"
	done
}

# ---- grow ----
guid=$(ctl a alloc --size $((PAGES * 256))K --policy big)
write_pages "$guid"
declare -A peak_kib
for id in a b; do
	in_use=$(status_field "$id" pool.blocks_in_use)
	[ "$in_use" -ge 6 ] || fail "$id after writing 6M: $(pool_line "$id")"
	peak_kib[$id]=$(shmem_kib "$id")
	ok "$id after writing $PAGES pages of 256K: $(pool_line "$id"), ${peak_kib[$id]} KiB shared memory"
done
ctl a verify >/dev/null || fail "verify after growing: $(ctl a verify 2>&1)"
ok "verify after growing: $(ctl a verify)"

# ---- shrink ----
ctl a free "$guid" >/dev/null || fail "free $guid: $(ctl a free "$guid" 2>&1)"
shrunk_at_least() {
	[ "$(status_field "$1" pool.shrunk)" -ge "$2" ]
}
# memory_fits_blocks ID: ID's shared memory fits in its blocks in use; sets
# kib and in_use.
memory_fits_blocks() {
	in_use=$(status_field "$1" pool.blocks_in_use)
	kib=$(shmem_kib "$1")
	[ "$kib" -le $((in_use * 1024 + 512)) ]
}
for id in a b; do
	# One block leaves per 500 ms tick. Over TCP down to two (hysteresis:
	# the blocks that stay keep a block's worth of frames free); over RDMA
	# the partner's landing grants (2 runs per block size) may keep up to
	# four blocks in use, so at least three of the seven or so leave.
	if [ "$E2E_TRANSPORT" = rdma ]; then
		wait_for 10000 "$id's pool shrinks by 3 blocks" shrunk_at_least "$id" 3
	else
		wait_for 10000 "$id's pool shrinks to 2 blocks" in_use_at_most "$id" 2
		shrunk_at_least "$id" 4 || fail "$id: $(pool_line "$id")"
	fi
	# A block not in use holds no memory: what is still resident fits in
	# the blocks in use (and 512 KiB for anything else shared). Not "the
	# peak less the blocks that left": a block that left may not have been
	# all resident at the peak. Blocks go on leaving meanwhile, so the
	# count is read before the memory.
	wait_for 5000 "$id's memory back to the OS" memory_fits_blocks "$id"
	[ "$kib" -lt "${peak_kib[$id]}" ] ||
		fail "$id's memory did not go back to the OS: ${peak_kib[$id]} KiB shared, now $kib"
	ok "$id after the free: $(pool_line "$id"); shared memory ${peak_kib[$id]} -> $kib KiB"
done

if [ "$E2E_TRANSPORT" = rdma ]; then
	# The blocks that left were registered (landings, sources): their
	# registrations went stale and are purged once no WRITE is in flight.
	stale_purged() {
		[ "$(status_field "$1" registrations.stale)" = 0 ] &&
			[ "$(status_field "$1" registrations.purged)" -ge 1 ]
	}
	for id in a b; do
		wait_for 10000 "$id purges the registrations of the blocks that left" stale_purged "$id"
		ok "$id over rdma: $(pool_line "$id")"
	done
else
	for id in a b; do
		[ "$(status_field "$id" registrations.current)" = 0 ] &&
			[ "$(status_field "$id" registrations.purged)" = 0 ] ||
			fail "$id over $E2E_TRANSPORT registered something: $(pool_line "$id")"
	done
	ok "over $E2E_TRANSPORT: no registrations"
fi

# ---- grow again ----
declare -A grown1 sided1
for id in a b; do
	grown1[$id]=$(status_field "$id" pool.grown)
	sided1[$id]=$(status_field "$id" page_writes.one_sided)
done
guid=$(ctl b alloc --size $((PAGES * 256))K --policy big)
write_pages "$guid"
for id in a b; do
	[ "$(status_field "$id" pool.grown)" -gt "${grown1[$id]}" ] &&
		[ "$(status_field "$id" pool.blocks_in_use)" -ge 6 ] ||
		fail "$id did not grow again: $(pool_line "$id")"
	# The lowest block out comes in first: one that left before.
	back=$(awk 'match($0, /frame pool: block [0-9]+ (leaves|comes)/) {
			split(substr($0, RSTART, RLENGTH), w, " ")
			if (w[5] == "leaves") gone[w[4]] = 1
			else if (w[4] in gone) { print w[4]; exit }
		}' "$WORK/$id.log")
	[ -n "$back" ] || fail "$id: no block that left came back (its log: $(grep 'frame pool' "$WORK/$id.log"))"
	ok "$id: block $back left and came into use again"
	sided=$(status_field "$id" page_writes.one_sided)
	refused=$(status_field "$id" landings.refused)
	counts="page writes one-sided: $((sided1[$id] - sided0[$id])) before the shrink,"
	counts+=" $((sided - sided1[$id])) after; $refused refused"
	if [ "$E2E_TRANSPORT" = rdma ]; then
		[ "$sided" -gt "${sided1[$id]}" ] && [ "$(status_field "$id" registrations.current)" -ge 2 ] ||
			fail "$id over rdma: no one-sided writes after the regrowth ($counts; $(pool_line "$id"))"
	fi
	[ "$refused" = 0 ] || fail "$id refused landed writes ($counts)"
	ok "$id grew again: $(pool_line "$id"); $counts"
done
ctl a verify >/dev/null || fail "verify after growing again: $(ctl a verify 2>&1)"
ok "verify after growing again: $(ctl a verify)"
for page in 0 1 $((PAGES - 1)); do
	for id in a b; do
		ctl "$id" read "$guid" "$page" | cmp -s - "$WORK/page$page" ||
			fail "$id reads page $page other than written"
	done
done
ok "pages read back equal on both nodes"

# ---- staging slabs ----
# a writes pages of b's allocation that a holds resident: over RDMA their
# blocks go one-sided from registered staging slabs (a's frames keep the old
# version until b answers), and the slabs go again once idle.
sided2=$(status_field a page_writes.one_sided)
for ((page = 0; page < 4; page++)); do
	head -c 262144 /dev/urandom >"$WORK/page$page"
	ctl a write "$guid" "$page" --file "$WORK/page$page" >/dev/null ||
		fail "a: rewrite page $page: $(ctl a write "$guid" "$page" --file "$WORK/page$page" 2>&1)"
done
allocated=$(status_field a staging.allocated)
sided=$(($(status_field a page_writes.one_sided) - sided2))
if [ "$E2E_TRANSPORT" = rdma ]; then
	[ "$allocated" -ge 1 ] && [ "$sided" = 4 ] ||
		fail "a over rdma: $allocated slabs, $sided of 4 rewrites one-sided: $(ctl a status | grep staging)"
	no_slabs() { [ "$(status_field a staging.slabs)" = 0 ]; }
	wait_for 10000 "a's idle staging slabs go" no_slabs
	ok "a over rdma: 4 rewrites one-sided from $allocated staging slab(s), all gone once idle ($(pool_line a))"
else
	[ "$allocated" = 0 ] || fail "a over $E2E_TRANSPORT staged writes: $allocated slabs"
	ok "over $E2E_TRANSPORT: no staging slabs"
fi
ctl a verify >/dev/null || fail "verify after the rewrites: $(ctl a verify 2>&1)"
for ((page = 0; page < 4; page++)); do
	ctl b read "$guid" "$page" | cmp -s - "$WORK/page$page" ||
		fail "b reads rewritten page $page other than written"
done
ok "verify after the rewrites: $(ctl a verify); b reads them back equal"
