# The paths of the trace library (tests/traces/README.md), one function each,
# run by record.sh on a fresh pair recording both nodes: ctl ID ARGS... is
# ftvmctl on node ID, hold/let_go hold a pointer with ftvm-hold. The pair:
# pages of LIB_PAGE_SIZE, LIB_MEMORY of frames, store partitions of 32K. A
# function config_NAME, where there is one, adds to the configs ($WORK/a.conf,
# $WORK/b.conf) before the pair starts.
# shellcheck shell=bash disable=SC2034

LIB_PAGE_SIZE=512
LIB_MEMORY=16K # 32 frames
LIB_STORE=128K # the store's header (64K) and a partition of 32K per node
LIB_TIMEOUT_MS=2000

LIB_PATHS=(
	alloc_granted alloc_denied alloc_waiting
	read_pointer_resident read_pointer_not_resident
	write_pointer_resident write_pointer_not_resident
	locked_locally locked_by_partner space_short
	release_modified release_unmodified release_memory
	read_header sense race destaged failover space_refused
	partner_page_in read_header_after_resync
)

# expect_refused ID PATTERN ARGS...: ftvmctl on ID exits 1 saying PATTERN.
expect_refused() {
	local id=$1 pattern=$2 out rc=0
	shift 2
	out=$(ctl "$id" "$@" 2>&1 </dev/null) || rc=$?
	[ "$rc" -eq 1 ] && grep -q -- "$pattern" <<<"$out" ||
		fail "ftvmctl $* on $id: exit $rc, '$out' (wanted 1, '$pattern')"
}

# Fig. 5: allocate, granted at once (a policy of 4 pages a block, a header).
path_alloc_granted() {
	printf 'journal v1' >"$WORK/hdr"
	ctl a alloc --size 4K --policy stripe --header-file "$WORK/hdr" >/dev/null
}

# Fig. 5: denied at once (--immediate): a's store partition (32K) has 8K left.
path_alloc_denied() {
	ctl a alloc --size 24K >/dev/null
	expect_refused a "denied" alloc --size 16K --immediate
}

# Fig. 5: waiting for room in the partition, granted once a blocker is freed.
path_alloc_waiting() {
	local g pid
	g=$(ctl a alloc --size 24K)
	ctl a alloc --size 16K >"$WORK/waited" &
	pid=$!
	wait_until grep -q "allocation .* waits for .* bytes in a's partition" "$WORK/a.log"
	kill -0 "$pid" 2>/dev/null || fail "the second allocation did not wait"
	ctl a free "$g"
	wait "$pid" || fail "the waiting allocation was refused"
}

# Fig. 6: a read pointer to a page in a frame (written first), released.
path_read_pointer_resident() {
	local g
	g=$(ctl a alloc --size 1K)
	echo resident | ctl a write "$g" 0 >/dev/null
	hold r a "$g" 0 read
	let_go r
}

# Fig. 6: a read pointer to a page never written: it gets a frame on demand.
path_read_pointer_not_resident() {
	local g
	g=$(ctl a alloc --size 1K)
	hold r a "$g" 1 read
	let_go r
}

# Fig. 7: a write pointer to a resident page, filled, released modified.
path_write_pointer_resident() {
	local g
	g=$(ctl a alloc --size 1K)
	echo resident | ctl a write "$g" 0 >/dev/null
	hold w a "$g" 0 write --modify 7
	let_go w
}

# Fig. 7: a write pointer to a page never written.
path_write_pointer_not_resident() {
	local g
	g=$(ctl a alloc --size 1K)
	hold w a "$g" 1 write --modify 7
	let_go w
}

# Figs. 6, 7: page locked by a write pointer on the same node: a writer and
# a reader are refused at once.
path_locked_locally() {
	local g
	g=$(ctl a alloc --size 1K)
	hold w a "$g" 0 write
	expect_refused a "locked" write "$g" 0 --file /dev/null
	expect_refused a "locked" read "$g" 0
	let_go w
}

# Figs. 6, 7, 10: a's page write-locked by a client of b: a's writer and
# reader are refused (a, the owner, arbitrates).
path_locked_by_partner() {
	local g
	g=$(ctl a alloc --size 1K)
	hold w b "$g" 0 write
	expect_refused a "locked" write "$g" 0 --file /dev/null
	expect_refused a "locked" read "$g" 0
	let_go w
}

# Fig. 7: no frame to spare: every frame of a held by write pointers, a
# write to another page is refused naming the node.
path_space_short() {
	local g h
	g=$(ctl a alloc --size 16K)
	h=$(ctl a alloc --size 1K)
	hold w a "$g" 0 write --count 32
	expect_refused a "no frame free on a" write "$h" 0 --file /dev/null
	let_go w
}

# Fig. 8: a write pointer released modified (the page goes to the partner).
path_release_modified() {
	local g
	g=$(ctl a alloc --size 1K)
	hold w a "$g" 0 write --modify 42
	let_go w
}

# Fig. 8: a write pointer released unmodified (nothing to mirror).
path_release_unmodified() {
	local g
	g=$(ctl a alloc --size 1K)
	hold w a "$g" 0 write
	let_go w
}

# Fig. 9: release memory, with a written page.
path_release_memory() {
	local g
	g=$(ctl a alloc --size 1K)
	echo gone | ctl a write "$g" 0 >/dev/null
	ctl a free "$g"
}

# Fig. 10 (read header): on the home node and on its partner.
path_read_header() {
	local g
	printf 'journal v1' >"$WORK/hdr"
	g=$(ctl a alloc --size 2K --header-file "$WORK/hdr")
	ctl a header "$g" >/dev/null
	ctl b header "$g" >/dev/null
}

# Fig. 10 (sense): capacities and queues of both nodes, and verify (which
# senses the partner's page table).
path_sense() {
	local g
	g=$(ctl a alloc --size 1K)
	echo x | ctl a write "$g" 0 >/dev/null
	ctl a sense >/dev/null
	ctl b sense >/dev/null
	ctl a verify >/dev/null
}

# Both nodes race for one page of a's: a write pointer asked on a and on b
# at once, both waiting; one is granted, the other after its release.
path_race() {
	local g first second
	g=$(ctl a alloc --size 1K)
	hold wa a --no-wait-held "$g" 0 write --wait --modify 1
	hold wb b --no-wait-held "$g" 0 write --wait --modify 2
	wait_until eval 'grep -q "^held" "$WORK/wa.out" || grep -q "^held" "$WORK/wb.out"'
	if grep -q '^held' "$WORK/wa.out"; then first=wa second=wb; else first=wb second=wa; fi
	let_go "$first"
	wait_until grep -q '^held' "$WORK/$second.out"
	let_go "$second"
}

# Destage (node/vmm/VMM.md): a's written page reaches the store and a tells b
# it is clean (Destaged). In a's trace the replayer answers the node's
# Destaged whenever it comes; in b's it plays a's at its place.
path_destaged() {
	local g
	g=$(ctl a alloc --size 1K)
	echo stable | ctl a write "$g" 0 >/dev/null
	wait_until eval '"$FTVMCTL" trace dump "$WORK/b.trace" 2>/dev/null | grep -q Destaged'
}

# Failover and resync (node/ha/HA.md), in a's trace: b is killed with kill -9
# between two of a's client writes, a takes over and writes alone; b is
# started again, a resyncs it (incremental: b lost nothing), both are
# mirrored again, and a writes once more. No write is in flight at the kill
# (it would fail or not by the instant: not a path a replay can repeat), and
# every page is in the store before the kill and before b comes back, so
# which pages a resync sends as dirty does not depend on when a destage
# round ran. The waits read a's log, not its status, so that the trace holds
# the path and not the polling. b's trace is not kept: it restarted.
path_failover() {
	local g
	g=$(ctl a alloc --size 2K)
	echo before | ctl a write "$g" 0 >/dev/null
	wait_until destaged a
	kill_node b
	WAIT_TRIES=1500 wait_until grep -q -- '-> solo: took over from b' "$WORK/a.log"
	echo alone | ctl a write "$g" 1 >/dev/null
	wait_until destaged a
	start_node b
	WAIT_TRIES=1500 wait_until grep -q -- '-> active: b resynced' "$WORK/a.log"
	echo mirrored | ctl a write "$g" 2 >/dev/null
}

# Fig. 5 step 520: b has no room for its copy. b's flash holds 16K after its
# header, a has none (a's copy rests in the store): 24K --immediate is
# denied by b's answer to the SpaceRequest, and neither node keeps it.
config_space_refused() {
	printf '[flash]\npath = flash\nsize = 80K\n' >>"$WORK/b.conf"
}
path_space_refused() {
	expect_refused a "denied (partner: .* do not fit on b's flash" alloc --size 24K --immediate
	[ "$(ctl b --json list | jq length)" = 0 ] || fail "b kept the refused allocation"
}

# Fig. 7 steps 720-750 (node/vmm/VMM.md, "The partner pages in"): a write
# pointer asks the partner to page its copy in. b has 4 frames. a's page 0,
# written and destaged, leaves b's frames when b reads pages 1 to 4; a's
# write pointer on it has b page it in from the store (AllocateWrite
# page_in). Then b's read pointers hold all 4 frames, and a's write pointer
# on page 5 is refused: b has no frame for its copy, so nothing is granted.
config_partner_page_in() {
	sed -i "s/^size = $LIB_MEMORY\$/size = 2K/" "$WORK/b.conf"
}
destaged_on_b() {
	[ "$("$FTVMCTL" trace dump "$WORK/b.trace" 2>/dev/null | grep -c Destaged)" -ge "$1" ]
}
path_partner_page_in() {
	local g p out rc=0
	g=$(ctl a alloc --size 4K)
	echo stable | ctl a write "$g" 0 >/dev/null
	wait_until destaged_on_b 1
	for p in 1 2 3 4; do ctl b read "$g" "$p" >/dev/null; done
	hold w a "$g" 0 write --modify 7
	let_go w
	wait_until destaged_on_b 2
	hold r b "$g" 1 read --count 4
	wait_until grep -q '^holding 4' "$WORK/r.out"
	out=$("$HOLD" "$WORK/a.sock" "$g" 5 write 2>&1) || rc=$?
	[ "$rc" -eq 1 ] && grep -q "partner: .*no frame free on b" <<<"$out" ||
		fail "a's write pointer with b's frames held: exit $rc, '$out'"
	let_go r
}

# Fig. 10 steps 1050-1055 (node/vmm/VMM.md, "Read header: whose record
# answers"), in a's trace: a's allocation, with a header; b killed with
# kill -9, a takes over, b comes back and a resyncs it; b's record of a's
# allocation is then unconfirmed, so b's first header of it asks a
# (ReadHeader, answered with a's Header), and its second is answered by b
# alone, as is a's own on a. b's trace is not kept: it restarted.
path_read_header_after_resync() {
	local g
	printf 'journal v1' >"$WORK/hdr"
	g=$(ctl a alloc --size 2K --header-file "$WORK/hdr")
	kill_node b
	WAIT_TRIES=1500 wait_until grep -q -- '-> solo: took over from b' "$WORK/a.log"
	start_node b
	WAIT_TRIES=1500 wait_until grep -q -- '-> active: b resynced' "$WORK/a.log"
	ctl b header "$g" >/dev/null
	ctl b header "$g" >/dev/null
	ctl a header "$g" >/dev/null
	[ "$(ctl b --json status | jq .read_header.asked_owner)" = 1 ] ||
		fail "b asked a $(ctl b --json status | jq .read_header.asked_owner) times, wanted 1"
}
