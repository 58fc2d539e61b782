#!/usr/bin/env bash
# Each client method's paths, from node a and from node b (vmm/VMM.md, "The lock
# rule across the pair": the allocation's owner arbitrates):
#  - allocate: refused at once when its extent does not fit in the home
#    node's store partition (--immediate); waiting for space, granted when
#    another allocation homed there is freed (from either node) or refused at
#    the deadline; the partner's partition and either frame pool do not limit
#    it (pools of different sizes, allocations larger than a pool);
#  - write and read pointers (ftvm-hold) on pages homed on either node, held
#    on the same node or on the partner: refused as locked without --wait,
#    granted in order after the release with --wait, refused at the deadline;
#  - read pointers shared by both nodes, writers (pointer, whole page, free)
#    refused beside them;
#  - a write through a write pointer on one node read back on the other;
#  - bad input refused with a reason, changing nothing (verify equal).
. "$(dirname "$0")/lib.sh"

FTVM_HOLD=${FTVM_HOLD:?FTVM_HOLD must name the ftvm-hold binary}
# [failover] request_timeout_ms: how long a queued request waits
TIMEOUT_MS=$((2000 * E2E_TIME_SCALE))

write_pair_configs
# The store's two partitions hold 16M each (the least the 16M pools allow).
for id in a b; do
	printf '[failover]\nrequest_timeout_ms = %s\n[store]\nsize = 32832K\n' "$TIMEOUT_MS" \
		>>"$WORK/$id.conf"
done
start_node a
start_node b
wait_for 5000 "pair linked" pair_up

# ---- ftvm-hold in the background (lib.sh's hold_start) ----
# t_of NAME WORD: the monotonic time on NAME's line starting with WORD.
t_of() { sed -n "/^$2 /s/.* t=\([0-9]*\)\$/\1/p" "$WORK/$1.out"; }

hold_held() { wait_for 5000 "$1 holding its pointer" hold_said "$1" held; }

# expect_hold_fail ID PATTERN ARGS...: ftvm-hold on node ID exits 1 saying PATTERN.
expect_hold_fail() {
	local id=$1 pattern=$2 out rc=0
	shift 2
	out=$("$FTVM_HOLD" "$WORK/$id.sock" "$@" 2>&1 </dev/null) || rc=$?
	[ "$rc" -eq 1 ] || fail "ftvm-hold $* on $id exited $rc, wanted 1: $out"
	grep -q -- "$pattern" <<<"$out" || fail "ftvm-hold $* on $id said '$out', wanted '$pattern'"
	HOLD_SAID=$(grep -m1 '^ftvm-hold:' <<<"$out")
}

verify_equal() {
	ctl a verify >/dev/null || fail "verify after $1: $(ctl a verify 2>&1)"
	ctl b verify >/dev/null || fail "verify on b after $1: $(ctl b verify 2>&1)"
}

# One allocation homed on each node, 3 pages of known contents.
declare -A G=()
for home in a b; do
	G[$home]=$(ctl "$home" alloc --size 12K)
	for p in 0 1 2; do
		head -c 4096 /dev/urandom >"$WORK/$home.p$p"
		ctl "$home" write "${G[$home]}" "$p" --file "$WORK/$home.p$p" >/dev/null
	done
done
ok "allocations ${G[a]} (home a) and ${G[b]} (home b), 3 pages each, written"

# =============================== allocate ===============================
# An allocation's extent goes in its home node's partition of the store (16M
# each here), and nothing else limits it: a 12M blocker homed on a node leaves
# about 4M there, and none of the partner's partition is taken.
waits_logged() { grep -c "allocation .* waits for .* partition of the store" "$WORK/$1.log" || true; }
more_waits() { [ "$(waits_logged "$1")" -gt "$2" ]; }
store_free() { ctl "$1" --json sense | jq '.media[] | select(.type == "store") | .free'; }

# waiting_alloc N FREER: an 8M allocation on N waits behind a 12M blocker
# homed on N, and is granted once FREER frees it.
waiting_alloc() {
	local n=$1 freer=$2 o blocker before rc=0 w
	o=$(other "$n")
	blocker=$(ctl "$n" alloc --size 12M)
	before=$(waits_logged "$n")
	"$FTVMCTL" --config "$WORK/$n.conf" alloc --size 8M >"$WORK/waiting.out" 2>&1 </dev/null &
	PIDS[waiting]=$!
	wait_for 5000 "the allocation on $n waiting for space" more_waits "$n" "$before"
	pid_gone "${PIDS[waiting]}" && fail "the waiting allocation on $n ended before space was freed"
	sense_is "$n" queues.paging 1 || fail "sense on $n does not count the waiting allocation"
	ctl "$freer" free "$blocker"
	wait_for 5000 "the waiting allocation on $n to complete" pid_gone "${PIDS[waiting]}"
	wait "${PIDS[waiting]}" || rc=$?
	unset 'PIDS[waiting]'
	w=$(cat "$WORK/waiting.out")
	[ "$rc" -eq 0 ] && [[ $w =~ ^$n-[0-9]+$ ]] ||
		fail "the waiting allocation on $n (blocker freed on $freer): exit $rc, '$w'"
	[ "$(ctl "$o" --json header "$w" | jq -r '.home + " " + (.pages|tostring)')" = "$n 2048" ] ||
		fail "$w not mirrored on $o"
	ok "alloc on $n waited for room in its partition, granted $w once $freer freed the blocker; mirrored on $o"
	ctl "$o" free "$w"
}

for n in a b; do
	o=$(other "$n")
	free_n=$(store_free "$n") free_o=$(store_free "$o")
	blocker=$(ctl "$n" alloc --size 12M)
	# 12M of blocks and 48K of page records, rounded to a page.
	[ "$(store_free "$n")" = $((free_n - 12 * 1048576 - 49152)) ] ||
		fail "sense on $n: store free $(store_free "$n"), wanted $free_n less the blocker's extent"
	[ "$(store_free "$o")" = "$free_o" ] || fail "the blocker homed on $n took room on $o"
	expect_fail "$n" "denied.*do not fit in $n's partition of the store" alloc --size 8M --immediate
	g=$(ctl "$o" alloc --size 8M --immediate)
	ok "with $n's partition nearly full, 8M homed on $o fits at once ($g): $o's own partition is what counts"
	ctl "$n" free "$g"

	# Waiting, and nothing is freed: refused at the deadline, not before.
	t0=$(now_ms)
	expect_fail "$n" "no space.*within $TIMEOUT_MS ms.*$n's partition of the store" alloc --size 8M
	[ $(($(now_ms) - t0)) -ge "$TIMEOUT_MS" ] || fail "the waiting allocation gave up early"
	ok "alloc on $n waited ${TIMEOUT_MS} ms for room, then refused"
	ctl "$o" free "$blocker"
	[ "$(store_free "$n")" = "$free_n" ] || fail "freeing the blocker did not give $n its room back"

	# Waiting, and the blocker is freed on either node.
	for freer in "$n" "$o"; do
		waiting_alloc "$n" "$freer"
	done
done
verify_equal "the allocations"
ok "allocation paths left the pair equal (verify)"

# ============================ write pointers ============================
# A write pointer to page 0 of the allocation homed on HOME, held on HOLDER
# (the same node as the waiter: locked locally; the other: locked by the
# partner). Without --wait a writer and a reader on WAITER are refused; with
# --wait a writer (or a reader) is granted once the holder let go, and sees
# what the holder wrote through its pointer.
byte=16
for home in a b; do
	g=${G[$home]}
	for holder in a b; do
		for waiter in a b; do
			for wmode in write read; do
				byte=$((byte + 1))
				hold_start h "$holder" "$g" 0 write --modify "$byte"
				hold_held h
				expect_hold_fail "$waiter" "page is locked.*write-locked" "$g" 0 write
				said_w=$HOLD_SAID
				expect_hold_fail "$waiter" "page is locked.*write-locked" "$g" 0 read
				said_r=$HOLD_SAID
				hold_start w "$waiter" "$g" 0 "$wmode" --wait
				wait_for 5000 "the waiter asking" hold_said w asking
				wait_for 5000 "the waiter queued on $waiter" sense_is "$waiter" queues.paging 1
				hold_said w held && fail "the waiter on $waiter was granted while $holder held the page"
				hold_end h || fail "the holder on $holder: $(cat "$WORK/h.err")"
				hold_held w
				t_asked=$(t_of w asking) t_rel=$(t_of h releasing) t_held=$(t_of w held)
				[ "$t_asked" -lt "$t_rel" ] && [ "$t_rel" -lt "$t_held" ] ||
					fail "order: waiter asked at $t_asked, holder releasing at $t_rel, waiter held at $t_held"
				crc_h=$(sed -n 's/^released crc32c \(0x[0-9a-f]*\) .*/\1/p' "$WORK/h.out")
				grep -q "^held $wmode $g page 0: 4096 bytes, crc32c $crc_h " "$WORK/w.out" ||
					fail "the waiter did not see the holder's bytes: $(cat "$WORK/h.out" "$WORK/w.out")"
				hold_end w || fail "the waiter on $waiter: $(cat "$WORK/w.err")"
				ctl "$(other "$holder")" read "$g" 0 | cmp -s - "$(fill "$byte")" ||
					fail "the holder's bytes did not reach $(other "$holder")"
				if [ "$holder" = "$waiter" ]; then how="locally"; else how="by the partner"; fi
				ok "write pointer to $g (home $home) page 0 locked $how ($holder), asked on $waiter: refused without --wait ('${said_w#*: }', '${said_r#*: }'); a $wmode pointer with --wait granted after the release (asked $(((t_rel - t_asked) / 1000)) us before it, held $(((t_held - t_rel) / 1000)) us after), saw the holder's crc32c $crc_h"
			done
		done
	done
done
verify_equal "the write pointers"
ok "write pointers left the pair equal (verify)"

# A waiter that goes away while queued: the node drops its request, and the
# page is free for others once the holder lets go (nothing granted to it).
for holder in a b; do
	for waiter in a b; do
		g=${G[a]}
		hold_start h "$holder" "$g" 1 write
		hold_held h
		hold_start w "$waiter" "$g" 1 write --wait
		wait_for 5000 "the waiter asking" hold_said w asking
		wait_for 5000 "the waiter queued on $waiter" sense_is "$waiter" queues.paging 1
		hold_kill w
		# Its node must see it go before the holder lets go, or the grant
		# reaches a dead client and is released for it a round trip later.
		wait_for 5000 "the dead waiter dropped on $waiter" sense_is "$waiter" queues.paging 0
		hold_end h || fail "the holder on $holder: $(cat "$WORK/h.err")"
		# A waiter on the node that does not own the page held a ticket in
		# the owner's queue, which nothing withdraws: its turn keeps the page
		# for at most VMM_TICKET_HOLD_MS (1 s) for an ask that never comes.
		for n in a b; do
			page_free() { out=$("$FTVM_HOLD" "$WORK/$1.sock" "$g" 1 write 2>&1); }
			wait_for 3000 "page 1 free on $n after the queued waiter on $waiter died" page_free "$n"
		done
		ok "waiter on $waiter killed while queued behind a write pointer on $holder: after the release the page is free on both nodes"
	done
done
verify_equal "the killed waiters"

# A waiter whose page stays locked: refused at the node's deadline.
for waiter in a b; do
	g=${G[a]}
	hold_start h a "$g" 2 write
	hold_held h
	t0=$(now_ms)
	expect_hold_fail "$waiter" "page is locked.*stayed locked for $TIMEOUT_MS ms" "$g" 2 write --wait
	[ $(($(now_ms) - t0)) -ge "$TIMEOUT_MS" ] || fail "the waiter on $waiter gave up early"
	hold_end h || fail "the holder: $(cat "$WORK/h.err")"
	ok "write pointer waited on $waiter for a page a holds: refused after ${TIMEOUT_MS} ms ($HOLD_SAID)"
done

# ============================= read pointers =============================
# Readers on a and b share page 1; writers are refused beside them (pointer,
# whole page, free), whole-page reads are served; a writer with --wait on
# either node is granted once both readers let go.
for home in a b; do
	g=${G[$home]}
	for wn in a b; do
		hold_start ra a "$g" 1 read
		hold_start rb b "$g" 1 read
		hold_held ra
		hold_held rb
		for n in a b; do
			out=$("$FTVM_HOLD" "$WORK/$n.sock" "$g" 1 read 2>&1) || fail "a third reader on $n: $out"
			expect_hold_fail "$n" "page is locked.*read-locked" "$g" 1 write
			expect_fail "$n" "page is locked.*read-locked" write "$g" 1 --file "$(fill 1)"
			ctl "$n" read "$g" 1 | cmp -s - "$WORK/$home.p1" ||
				fail "whole-page read on $n beside readers"
			expect_fail "$n" "page is locked.*locked" free "$g"
		done
		hold_start w "$wn" "$g" 1 write --wait
		wait_for 5000 "the writer asking" hold_said w asking
		hold_end ra || fail "reader on a: $(cat "$WORK/ra.err")"
		hold_said w held && fail "the writer on $wn was granted beside the reader on b"
		hold_end rb || fail "reader on b: $(cat "$WORK/rb.err")"
		hold_held w
		t_asked=$(t_of w asking) t_held=$(t_of w held)
		t_ra=$(t_of ra releasing) t_rb=$(t_of rb releasing)
		[ "$t_asked" -lt "$t_ra" ] && [ "$t_ra" -lt "$t_held" ] && [ "$t_rb" -lt "$t_held" ] ||
			fail "order: writer asked $t_asked, readers releasing $t_ra and $t_rb, writer held $t_held"
		hold_end w || fail "writer on $wn: $(cat "$WORK/w.err")"
		for n in a b; do
			ctl "$n" read "$g" 1 | cmp -s - "$WORK/$home.p1" ||
				fail "page 1 changed under the readers ($n)"
		done
		ok "read pointers to $g (home $home) page 1 held on a and b at once (and a third on each); writer pointer, whole-page write and free refused on both; whole-page reads served; a writer waiting on $wn granted after both readers released"
	done
done
verify_equal "the read pointers"

# =================== a write through a write pointer ===================
byte=96
for home in a b; do
	for writer in a b; do
		g=${G[$home]}
		byte=$((byte + 1))
		out=$("$FTVM_HOLD" "$WORK/$writer.sock" "$g" 2 write --modify "$byte" 2>&1) ||
			fail "write pointer on $writer: $out"
		for n in a b; do
			ctl "$n" read "$g" 2 | cmp -s - "$(fill "$byte")" ||
				fail "$n does not read the bytes $writer wrote through its pointer"
		done
		verify_equal "the pointer write"
		ok "write pointer on $writer to $g (home $home) page 2 filled with $byte: both nodes read it; verify equal ($(grep -o 'released crc32c 0x[0-9a-f]*' <<<"$out"))"
		cp "$(fill "$byte")" "$WORK/$home.p2"
	done
done

# ============ whole-page write while a pointer is held ============
ctl a read "${G[a]}" 0 >"$WORK/old0"
for mode in read write; do
	for holder in a b; do
		for n in a b; do
			g=${G[a]}
			hold_start h "$holder" "$g" 0 "$mode"
			hold_held h
			expect_fail "$n" "page is locked.*$mode-locked" write "$g" 0 --file "$(fill 200)"
			hold_end h || fail "the holder on $holder: $(cat "$WORK/h.err")"
			for m in a b; do
				ctl "$m" read "$g" 0 | cmp -s - "$WORK/old0" ||
					fail "page 0 changed by a refused write ($m)"
			done
			ok "whole-page write on $n while $holder holds a $mode pointer: refused, page unchanged on both"
		done
	done
done
verify_equal "refused whole-page writes"

# ============================== bad input ==============================
snapshot() {
	ctl a --json list | jq -S . >"$WORK/list.$1"
	for home in a b; do
		for p in 0 1 2; do
			for n in a b; do ctl "$n" read "${G[$home]}" "$p" >"$WORK/$1.$home.$p.$n"; done
		done
	done
}
snapshot before
for n in a b; do
	g=${G[a]}
	expect_hold_fail "$n" "invalid request.*holds no pointer to $g page 0" "$g" 0 release
	ok "release of a pointer not held on $n: $HOLD_SAID"
	expect_hold_fail "$n" "invalid request.*holds no pointer" "$g" 1 release --modified
	ok "release as modified of a pointer not held on $n: $HOLD_SAID"
	expect_hold_fail "$n" "read pointer cannot be released as modified" "$g" 1 read --modified
	out=$("$FTVM_HOLD" "$WORK/$n.sock" "$g" 1 write 2>&1) ||
		fail "page 1 still locked after the refused release on $n: $out"
	ok "read pointer released as modified on $n: $HOLD_SAID; released plainly after, page unlocked"
	for mode in read write; do
		expect_hold_fail "$n" "has pages 0..2, not 3" "$g" 3 "$mode"
		expect_hold_fail "$n" "has pages 0..2, not 18446744073709551615" "$g" 18446744073709551615 "$mode"
		ok "$mode pointer to a page out of range on $n: $HOLD_SAID"
		expect_hold_fail "$n" "not found.*no allocation nosuch-1" nosuch-1 0 "$mode"
		ok "$mode pointer to an unknown guid on $n: $HOLD_SAID"
	done
	expect_fail "$n" "not found\|no allocation" header nosuch-1
	expect_fail "$n" "not found\|no allocation" read nosuch-1 0
	expect_fail "$n" "not found\|no allocation" free nosuch-1
	gt=$(ctl "$n" alloc --size 4096)
	ctl "$n" free "$gt"
	expect_fail "$n" "not found\|no allocation" free "$gt"
	expect_fail "$(other "$n")" "not found\|no allocation" free "$gt"
	ok "double free of $gt (made and freed on $n) refused on both nodes"
done
rc=0
out=$("$FTVM_HOLD" "$WORK/nosuch.sock" "${G[a]}" 0 read 2>&1) || rc=$?
[ "$rc" -eq 3 ] || fail "ftvm-hold on a socket nobody listens on exited $rc: $out"
ok "ftvm-hold with no node behind the socket: exit 3"
snapshot after
cmp -s "$WORK/list.before" "$WORK/list.after" || fail "bad input changed the list"
for f in "$WORK"/before.*; do
	cmp -s "$f" "${f/before/after}" || fail "bad input changed ${f##*/before.}"
done
verify_equal "bad input"
ok "bad input changed nothing: list, every page on both nodes, verify: $(ctl a verify)"

# A write pointer written into, then released as not modified: refused, the
# pointer still held (the write was in place: a plain release would leave
# its node serving bytes its table and the partner know nothing of).
# ftvm-hold then releases it as modified: both nodes read what it wrote.
for n in a b; do
	byte=$([ "$n" = a ] && echo 90 || echo 91)
	expect_hold_fail "$n" "released as not modified, but its block changed" "${G[a]}" 2 write \
		--scribble "$byte"
	for m in a b; do
		ctl "$m" read "${G[a]}" 2 | cmp -s - "$(fill "$byte")" ||
			fail "page 2 on $m is not what the pointer from $n wrote"
	done
	verify_equal "a write pointer written into, released as modified after the refusal"
	ok "write pointer written into, released as not modified on $n: $HOLD_SAID; as modified after, read back on both"
done

# A write through a read pointer: libftvm's view of the pool under read
# pointers is read-only, so the client faults at once (SIGSEGV) and changes
# nothing; its node releases the read pointer with the connection.
for n in a b; do
	ctl "$n" read "${G[b]}" 1 >"$WORK/read_before"
	rc=0
	"$FTVM_HOLD" "$WORK/$n.sock" "${G[b]}" 1 read --scribble 92 >"$WORK/scribble.out" 2>&1 || rc=$?
	# (Under AddressSanitizer its SEGV handler reports the fault and exits 1.)
	[ "$rc" -eq $((128 + 11)) ] || { [ "$rc" -ne 0 ] && grep -q "AddressSanitizer: SEGV" "$WORK/scribble.out"; } ||
		fail "a write through a read pointer on $n exited $rc, not by SIGSEGV: $(cat "$WORK/scribble.out")"
	grep -q "^scribbling through the read pointer" "$WORK/scribble.out" || fail "ftvm-hold never held the read pointer on $n: $(cat "$WORK/scribble.out")"
	for m in a b; do
		ctl "$m" read "${G[b]}" 1 | cmp -s - "$WORK/read_before" ||
			fail "page 1 on $m changed through a read pointer taken on $n"
	done
	wait_for 5000 "the faulted client's read pointer released on $n" \
		"$FTVM_HOLD" "$WORK/$n.sock" "${G[b]}" 1 write >/dev/null 2>&1
	verify_equal "a write through a read pointer"
	ok "write through a read pointer on $n: the client got SIGSEGV, page unchanged on both, released"
done

# ============ pools of different sizes, allocations larger ============
# The frame pools differ (16M and 8M): an allocation larger than either pool
# is made on either node, written from both, read back on both, and the pair
# stays equal. [memory] size is set
# already, and the parser refuses a key twice, so it is changed in place.
restart_with_sizes() {
	local id
	for id in a b; do
		kill -TERM "${PIDS[$id]}"
		wait "${PIDS[$id]}" || fail "$id did not stop cleanly"
		unset "PIDS[$id]"
	done
	sed -i "/^\[memory\]/,/^\[/ s/^size = .*/size = $1/" "$WORK/a.conf"
	sed -i "/^\[memory\]/,/^\[/ s/^size = .*/size = $2/" "$WORK/b.conf"
	start_node a
	start_node b
	wait_for 5000 "pair linked after the restart" pair_up
}
for home in a b; do ctl a free "${G[$home]}"; done
restart_with_sizes 16M 8M
[ "$(ctl b --json sense | jq '.media[0].capacity')" = 8388608 ] || fail "b's pool is not 8M"
for home in a b; do
	g=$(ctl "$home" alloc --size 12M --immediate)
	for p in 0 1000 3071; do
		for n in a b; do
			printf '%s page %s from %s' "$g" "$p" "$n" >"$WORK/big.$n"
			ctl "$n" write "$g" "$p" --file "$WORK/big.$n" >/dev/null
		done
		for n in a b; do
			ctl "$n" read "$g" "$p" | head -c 64 | tr -d '\0' >"$WORK/big.read"
			[ "$(cat "$WORK/big.read")" = "$g page $p from b" ] ||
				fail "$g page $p read on $n: '$(cat "$WORK/big.read")'"
		done
	done
	verify_equal "the 12M allocation homed on $home"
	ok "12M allocated on $home (pools of 16M on a, 8M on b): pages written from both nodes read back on both; verify equal"
	ctl "$(other "$home")" free "$g"
done
