#!/usr/bin/env bash
# Each client method's paths, from node a and from node b (VMM.md, "The lock
# rule across the pair": the allocation's owner arbitrates):
#  - allocate: refused at once when it does not fit here (--immediate); waiting
#    for space, granted when another allocation is freed (from either node) or
#    refused at the deadline; refused when the partner alone lacks the space;
#  - write and read pointers (ftvm-hold) on pages homed on either node, held
#    on the same node or on the partner: refused as locked without --wait,
#    granted in order after the release with --wait, refused at the deadline;
#  - read pointers shared by both nodes, writers (pointer, whole page, free)
#    refused beside them;
#  - a write through a write pointer on one node read back on the other;
#  - bad input refused with a reason, changing nothing (verify equal).
. "$(dirname "$0")/lib.sh"

FTVM_HOLD=${FTVM_HOLD:?FTVM_HOLD must name the ftvm-hold binary}
TIMEOUT_MS=2000 # [failover] request_timeout_ms: how long a queued request waits

write_pair_configs
for id in a b; do
	printf '[failover]\nrequest_timeout_ms = %s\n' "$TIMEOUT_MS" >>"$WORK/$id.conf"
done
start_node a
start_node b
wait_for 5000 "pair linked" pair_up

other() { if [ "$1" = a ]; then echo b; else echo a; fi; }

# expect_fail ID PATTERN ARGS...: ftvmctl exits 1 saying PATTERN.
expect_fail() {
	local id=$1 pattern=$2 out rc=0
	shift 2
	out=$(ctl "$id" "$@" 2>&1 </dev/null) || rc=$?
	[ "$rc" -eq 1 ] || fail "ftvmctl $* on $id exited $rc, wanted 1: $out"
	grep -q -- "$pattern" <<<"$out" || fail "ftvmctl $* on $id said '$out', wanted '$pattern'"
	ok "refused: ftvmctl $* on $id: $out"
}

# ---- ftvm-hold in the background: holds its pointer until hold_end ----
declare -A HOLD_FD=() # name -> our end of the holder's stdin
# A child must not keep another holder's stdin open, or closing ours would
# not reach that holder.
close_hold_fds() {
	local fd
	for fd in "${HOLD_FD[@]}"; do
		exec {fd}>&-
	done
}

# hold_start NAME ID GUID PAGE read|write [OPTIONS...]: ftvm-hold on node ID,
# holding until hold_end NAME; its lines in $WORK/NAME.out.
hold_start() {
	local name=$1 id=$2 fd
	shift 2
	rm -f "$WORK/$name.in" "$WORK/$name.out" "$WORK/$name.err"
	mkfifo "$WORK/$name.in"
	(
		close_hold_fds
		exec "$FTVM_HOLD" "$WORK/$id.sock" "$@" --release-after-stdin \
			<"$WORK/$name.in" >"$WORK/$name.out" 2>"$WORK/$name.err"
	) &
	PIDS[$name]=$! # killed by the cleanup if a check fails first
	exec {fd}>"$WORK/$name.in"
	HOLD_FD[$name]=$fd
}

said() { grep -q "^$2 " "$WORK/$1.out" 2>/dev/null; }
gone() { ! kill -0 "$1" 2>/dev/null; }

# t_of NAME WORD: the monotonic time on NAME's line starting with WORD.
t_of() { sed -n "/^$2 /s/.* t=\([0-9]*\)\$/\1/p" "$WORK/$1.out"; }

# hold_end NAME: end of input for the holder, which releases and exits; its
# exit status is ours.
hold_end() {
	local name=$1 fd=${HOLD_FD[$1]} pid=${PIDS[$1]} rc=0
	exec {fd}>&-
	unset "HOLD_FD[$name]"
	wait_for 5000 "$name to release and exit" gone "$pid"
	wait "$pid" || rc=$?
	unset "PIDS[$name]"
	return "$rc"
}

# hold_kill NAME: kill -9 the holder, as a client that dies.
hold_kill() {
	local name=$1 fd=${HOLD_FD[$1]} pid=${PIDS[$1]}
	kill -9 "$pid"
	wait_for 5000 "$name killed" gone "$pid"
	wait "$pid" 2>/dev/null || true
	unset "PIDS[$name]"
	exec {fd}>&-
	unset "HOLD_FD[$name]"
}

hold_held() { wait_for 5000 "$1 holding its pointer" said "$1" held; }

# expect_hold_fail ID PATTERN ARGS...: ftvm-hold on node ID exits 1 saying PATTERN.
expect_hold_fail() {
	local id=$1 pattern=$2 out rc=0
	shift 2
	out=$("$FTVM_HOLD" "$WORK/$id.sock" "$@" 2>&1 </dev/null) || rc=$?
	[ "$rc" -eq 1 ] || fail "ftvm-hold $* on $id exited $rc, wanted 1: $out"
	grep -q -- "$pattern" <<<"$out" || fail "ftvm-hold $* on $id said '$out', wanted '$pattern'"
	HOLD_SAID=$(grep -m1 '^ftvm-hold:' <<<"$out")
}

# A block of 4096 bytes all BYTE (0..255), in $WORK/fill.BYTE.
fill() {
	[ -f "$WORK/fill.$1" ] ||
		head -c 4096 /dev/zero | tr '\0' "\\$(printf '%03o' "$1")" >"$WORK/fill.$1"
	echo "$WORK/fill.$1"
}

sense_is() { [ "$(ctl "$1" --json sense | jq -r ".$2")" = "$3" ]; }

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
# 16M pools of 4K frames. A 12M blocker leaves about 4M free on both nodes.
waits_logged() { grep -c "allocation .* waits for" "$WORK/$1.log" || true; }
more_waits() { [ "$(waits_logged "$1")" -gt "$2" ]; }

# waiting_alloc N BLOCKER_HOME FREER: an 8M allocation on N waits behind a
# 12M blocker homed on BLOCKER_HOME, and is granted once FREER frees it.
waiting_alloc() {
	local n=$1 bhome=$2 freer=$3 o blocker before rc=0 w
	o=$(other "$n")
	blocker=$(ctl "$bhome" alloc --size 12M)
	before=$(waits_logged "$n")
	(
		close_hold_fds
		exec "$FTVMCTL" --config "$WORK/$n.conf" alloc --size 8M \
			>"$WORK/waiting.out" 2>&1 </dev/null
	) &
	PIDS[waiting]=$!
	wait_for 5000 "the allocation on $n waiting for space" more_waits "$n" "$before"
	gone "${PIDS[waiting]}" && fail "the waiting allocation on $n ended before space was freed"
	sense_is "$n" queues.paging 1 || fail "sense on $n does not count the waiting allocation"
	ctl "$freer" free "$blocker"
	wait_for 5000 "the waiting allocation on $n to complete" gone "${PIDS[waiting]}"
	wait "${PIDS[waiting]}" || rc=$?
	unset 'PIDS[waiting]'
	w=$(cat "$WORK/waiting.out")
	[ "$rc" -eq 0 ] && [[ $w =~ ^$n-[0-9]+$ ]] ||
		fail "the waiting allocation on $n (blocker homed on $bhome, freed on $freer): exit $rc, '$w'"
	[ "$(ctl "$o" --json header "$w" | jq -r '.home + " " + (.pages|tostring)')" = "$n 2048" ] ||
		fail "$w not mirrored on $o"
	ok "alloc on $n waited for space, granted $w once $freer freed the blocker (homed on $bhome); mirrored on $o"
	ctl "$o" free "$w"
}

for n in a b; do
	o=$(other "$n")
	blocker=$(ctl "$o" alloc --size 12M)
	expect_fail "$n" "denied.*do not fit in .* free frames (immediate)" alloc --size 8M --immediate

	# Waiting, and nothing is freed: refused at the deadline, not before.
	t0=$(now_ms)
	expect_fail "$n" "no space.*within $TIMEOUT_MS ms" alloc --size 8M
	[ $(($(now_ms) - t0)) -ge "$TIMEOUT_MS" ] || fail "the waiting allocation gave up early"
	ok "alloc on $n waited ${TIMEOUT_MS} ms for space, then refused"
	ctl "$o" free "$blocker"

	# Waiting, and the blocker (homed on either node) is freed on either node:
	# freed on the other one, the partner is short a moment longer than we are.
	for bhome in "$n" "$o"; do
		for freer in "$n" "$o"; do
			waiting_alloc "$n" "$bhome" "$freer"
		done
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
				wait_for 5000 "the waiter asking" said w asking
				wait_for 5000 "the waiter queued on $waiter" sense_is "$waiter" queues.paging 1
				said w held && fail "the waiter on $waiter was granted while $holder held the page"
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
		wait_for 5000 "the waiter asking" said w asking
		hold_kill w
		hold_end h || fail "the holder on $holder: $(cat "$WORK/h.err")"
		for n in a b; do
			out=$("$FTVM_HOLD" "$WORK/$n.sock" "$g" 1 write 2>&1) ||
				fail "page 1 not free on $n after the queued waiter on $waiter died: $out"
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
		wait_for 5000 "the writer asking" said w asking
		hold_end ra || fail "reader on a: $(cat "$WORK/ra.err")"
		said w held && fail "the writer on $wn was granted beside the reader on b"
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

# ================= space short on the partner only =================
# The pools differ: a refuses what fits on it alone. [memory] size is set
# already, and the parser refuses a key twice, so it is changed in place.
restart_with_sizes() {
	local id
	for id in a b; do
		kill -TERM "${PIDS[$id]}"
		wait "${PIDS[$id]}" || fail "$id did not stop cleanly"
		unset "PIDS[$id]"
	done
	sed -i "s/^size = .*/size = $1/" "$WORK/a.conf"
	sed -i "s/^size = .*/size = $2/" "$WORK/b.conf"
	start_node a
	start_node b
	wait_for 5000 "pair linked after the restart" pair_up
}
for home in a b; do ctl a free "${G[$home]}"; done
for small in b a; do
	big=$(other "$small")
	if [ "$small" = b ]; then restart_with_sizes 16M 8M; else restart_with_sizes 8M 16M; fi
	free_before=$(ctl "$small" --json sense | jq '.media[0].free')
	[ "$free_before" = 8388608 ] || fail "$small's pool is not 8M: $free_before"
	# Waiting (Fig. 5): it waits for the partner's space too, then gives up.
	expect_fail "$big" "no space.*within $TIMEOUT_MS ms" alloc --size 12M
	expect_fail "$big" "denied.*free on $small" alloc --size 12M --immediate
	[ "$(ctl "$big" --json list | jq length)" = 0 ] && [ "$(ctl "$small" --json list | jq length)" = 0 ] ||
		fail "a refused allocation was left behind"
	[ "$(ctl "$big" --json sense | jq '.media[0].free')" = 16777216 ] ||
		fail "$big kept the frames of the refused allocation"
	g=$(ctl "$big" alloc --size 6M)
	ctl "$small" free "$g"
	verify_equal "the partner's refusal"
	ok "alloc of 12M on $big (16M pool) refused by $small (8M pool): at once with --immediate, at the deadline when waiting; nothing left behind; 6M fits both"
done
