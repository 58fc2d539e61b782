#!/usr/bin/env bash
# [node] ack (node/vmm/VMM.md, "Acknowledgement levels"), each level on a
# pair of its own:
#  - status says the level, in text and JSON;
#  - the partner's order of work for a page write, seen with strace on it:
#    at mirror its answer leaves before its commit writes the WAL; at commit
#    after it; at durable after the WAL is synced too (synchronous = full);
#  - both nodes killed at once under writers (as in test_double_failure.sh),
#    then both restarted, checked against the writers' log of what was
#    acknowledged: at durable nothing acknowledged is lost, not even the
#    last write before the kill; at commit and mirror what is lost is the
#    data of pages not destaged yet, and every such page is named in a
#    node's recovery report, at the version it went back to.
# The writers keep each page's content equal to its version ("P K": the K-th
# write of page P), so a read says which version a page holds.
. "$(dirname "$0")/lib.sh"
need_tools strace jq

PAGES=8
KILLER_PAGES=4

# start_level LEVEL [LEVEL_B]: a fresh pair whose nodes acknowledge at
# LEVEL (node b at LEVEL_B when given).
start_level() {
	rm -rf "$WORK/a" "$WORK/b" "$WORK/shared" "$WORK"/acked.* "$WORK"/*.log
	write_pair_configs
	sed -i "/^\[node\]/a ack = $1" "$WORK/a.conf"
	sed -i "/^\[node\]/a ack = ${2:-$1}" "$WORK/b.conf"
	start_node a
	start_node b
	wait_for 5000 "pair linked" pair_up
}

# partner_order LEVEL GUID: b's system calls while a's client writes 20
# pages of GUID (a owns them, so b applies each write and answers), with
# the files they touch. In most writes (heartbeats and destage come between
# some) b's turn that reads a's request must write the WAL, sync it and
# answer a in LEVEL's order.
partner_order() {
	local level=$1 g=$2 tracer want got i
	strace -f -yy -e trace=read,readv,recvmsg,pwrite64,fdatasync,fsync,writev,sendmsg,write \
		-o "$WORK/strace.$level" -p "${PIDS[b]}" 2>"$WORK/strace.err" &
	tracer=$!
	wait_for 5000 "strace attached" grep -q "attached" "$WORK/strace.err"
	head -c 4096 /dev/urandom >"$WORK/block"
	for ((i = 0; i < 20; i++)); do
		ctl a write "$g" $((i % PAGES)) --file "$WORK/block" >/dev/null || fail "write $i at $level"
	done
	kill -INT "$tracer"
	wait "$tracer" 2>/dev/null || true
	# One letter per call: R a read from a TCP socket (the partner
	# channel), A a write to one, W a WAL write, S a WAL sync; a run of
	# one letter is one step.
	sed -n -e 's/.*pwrite64([0-9]*<[^>]*-wal>.*/W/p' \
		-e 's/.*\(fdatasync\|fsync\)([0-9]*<[^>]*-wal>.*/S/p' \
		-e 's/.*\(writev\|sendmsg\|write\)([0-9]*<TCP:.*/A/p' \
		-e 's/.*\(read\|readv\|recvmsg\)([0-9]*<TCP:.*/R/p' "$WORK/strace.$level" |
		tr -d '\n' | tr -s 'RWSA' >"$WORK/order.$level"
	case $level in
	mirror) want=RAW ;;
	commit) want=RWA ;;
	durable) want=RWSA ;;
	esac
	got=$({ grep -o "$want" "$WORK/order.$level" || true; } | wc -l)
	[ "$got" -ge 10 ] ||
		fail "at $level b's steps ($want expected per write) were: $(cat "$WORK/order.$level")"
	if [ "$level" != durable ]; then
		! grep -q S "$WORK/order.$level" || fail "at $level b synced its WAL: $(cat "$WORK/order.$level")"
	fi
	ok "$level: b took the steps $want $got times while a's client wrote 20 pages ($(cut -c1-40 "$WORK/order.$level")...)"
}

# kill_both_under_writers: writers on both nodes; then ftvm-failover-client
# writes KILLER_PAGES pages through b and SIGKILLs both nodes right after
# its last acknowledgement.
kill_both_under_writers() {
	local wa wb want
	: >"$WORK/acked.a"
	: >"$WORK/acked.b"
	writer a "$ga" &
	wa=$!
	writer b "$gb" &
	wb=$!
	want=$((PAGES * 3))
	acks() { [ "$(wc -l <"$WORK/acked.b")" -ge "$want" ] && [ "$(wc -l <"$WORK/acked.a")" -ge "$want" ]; }
	wait_for 60000 "writers under way" acks
	"$FTVM_FAILOVER_CLIENT" --kill "${PIDS[a]}" --kill "${PIDS[b]}" "$WORK/b.sock" "$WORK/a.sock" \
		$KILLER_PAGES >"$WORK/killer.out" 2>&1 || fail "the killing client: $(cat "$WORK/killer.out")"
	killer=$(sed -n 's/^alloc \([^ ]*\) .*/\1/p' "$WORK/killer.out")
	wait "$wa" "$wb" 2>/dev/null || true
	wait "${PIDS[a]}" "${PIDS[b]}" 2>/dev/null || true
	unset "PIDS[a]" "PIDS[b]"
	start_node a
	start_node b
	wait_for 15000 "pair back" pair_up
	ctl a --json recovery >"$WORK/recovery.a.json"
	ctl b --json recovery >"$WORK/recovery.b.json"
}

# check_losses LEVEL: every page against the writers' log.
check_losses() {
	local level=$1 id g p acked now named lost=0
	for id in a b; do
		g=$([ "$id" = a ] && echo "$ga" || echo "$gb")
		for ((p = 0; p < PAGES; p++)); do
			acked=$(awk -v p="$p" '$1 == p { k = $2 } END { print k + 0 }' "$WORK/acked.$id")
			now=$(page_version a "$g" "$p")
			[ "$(page_version b "$g" "$p")" = "$now" ] || fail "$level: $g page $p: a holds version $now, b another"
			[ "$now" -ge "$acked" ] && continue
			[ "$level" != durable ] || fail "durable: $g page $p holds version $now, the acknowledged $acked is lost"
			named=$(jq -s --arg g "$g" --argjson p "$p" --argjson now "$now" \
				'add | any(.guid == $g and .page == $p and .to_version == $now)' \
				"$WORK/recovery.a.json" "$WORK/recovery.b.json")
			[ "$named" = true ] ||
				fail "$level: $g page $p lost the acknowledged version $acked (holds $now) and no report names it: a $(jq -c . "$WORK/recovery.a.json") b $(jq -c . "$WORK/recovery.b.json")"
			lost=$((lost + 1))
		done
	done
	LOST=$lost
}

# last_page_written LEVEL WHY: the killing client's last page reads back
# as written (not zeroes) on both nodes.
last_page_written() {
	local id last=$((KILLER_PAGES - 1))
	for id in a b; do
		ctl "$id" read "$killer" "$last" >"$WORK/killer.last" ||
			fail "$1: cannot read $killer page $last on $id"
		! cmp -s "$WORK/killer.last" <(head -c 4096 /dev/zero) ||
			fail "$1: $killer page $last, acknowledged right before the kill, reads as zeroes on $id$2"
	done
}

# killer_pages LEVEL: the killing client's pages after the restart. At
# durable its last page is there. At commit and mirror it is usually named
# in a report (its block was in memory only), unless a destage round wrote
# it between the acknowledgement and the kill: then it reads back.
killer_pages() {
	local level=$1 in_report
	[ -n "$killer" ] || fail "$level: no allocation in the killing client's output: $(cat "$WORK/killer.out")"
	in_report=$(jq -s --arg g "$killer" 'add | map(select(.guid == $g)) | length' \
		"$WORK/recovery.a.json" "$WORK/recovery.b.json")
	if [ "$level" = durable ]; then
		[ "$in_report" = 0 ] || fail "durable: a report names the killing client's pages: $(cat "$WORK"/recovery.*.json)"
		last_page_written durable ""
		KILLER="its last page there"
	elif [ "$in_report" -gt 0 ]; then
		KILLER="its pages named in a report"
	else
		last_page_written "$level" " and no report names it"
		KILLER="its last page destaged before the kill, so read back"
	fi
}

for level in mirror commit durable; do
	start_level $level
	[ "$(status_field a ack)" = $level ] && [ "$(status_field b ack)" = $level ] ||
		fail "status says ack $(status_field a ack) / $(status_field b ack), not $level"
	ctl a status | grep -q "acknowledges at $level" || fail "ftvmctl status: $(ctl a status | head -3)"
	[ "$(status_field a partner.ack)" = $level ] && [ "$(status_field b partner.ack)" = $level ] ||
		fail "status says the partners ack at $(status_field a partner.ack) / $(status_field b partner.ack), not $level"
	! grep -q "this node at" "$WORK/a.log" "$WORK/b.log" || fail "$level: a warning of two levels: $(grep -h "this node at" "$WORK"/*.log)"
	ok "$level: status says so (text and JSON), and what the partner said at its Hello"

	partner_order $level "$(ctl a alloc --size $((PAGES * 4))K)"
	# Fresh allocations: a page's version in the page table is then the
	# version its content says.
	ga=$(ctl a alloc --size $((PAGES * 4))K)
	gb=$(ctl b alloc --size $((PAGES * 4))K)

	kill_both_under_writers
	check_losses $level
	killer_pages $level
	ctl a --json verify | jq -e .equal >/dev/null || fail "$level: verify: $(ctl a verify 2>&1)"
	ok "$level: both killed under $(wc -l <"$WORK/acked.a") + $(wc -l <"$WORK/acked.b") acknowledged writes; $LOST pages lost an acknowledged version (each named in a recovery report); the killing client: $KILLER; verify equal"
	kill -TERM "${PIDS[a]}" "${PIDS[b]}"
	wait "${PIDS[a]}" "${PIDS[b]}" || true
	unset "PIDS[a]" "PIDS[b]"
done

# Two levels in one pair: each node acknowledges at its own, and both say
# so, in the log (a warning, so an event too), status and metrics; the
# pair links and serves all the same (a rolling change of the level).
start_level mirror durable
wait_for 5000 "a's warning" grep -q "partner b acknowledges at durable, this node at mirror" "$WORK/a.log"
wait_for 5000 "b's warning" grep -q "partner a acknowledges at mirror, this node at durable" "$WORK/b.log"
[ "$(status_field a partner.ack)" = durable ] && [ "$(status_field b partner.ack)" = mirror ] ||
	fail "two levels: status says the partners ack at $(status_field a partner.ack) / $(status_field b partner.ack)"
# Whole outputs first: grep -q stops reading at its match, and the
# writer's SIGPIPE would fail the pipe.
ctl a status >"$WORK/status.a"
grep -q "acknowledges at durable, not as this node" "$WORK/status.a" || fail "two levels: ftvmctl status: $(head -4 "$WORK/status.a")"
ctl a metrics >"$WORK/metrics.a"
grep -q '^ftvm_partner_ack_level{node="a",level="durable"} 1$' "$WORK/metrics.a" ||
	fail "two levels: metrics: $(grep partner_ack "$WORK/metrics.a")"
g=$(ctl a alloc --size 8K)
ctl a write "$g" 0 --file "$WORK/block" >/dev/null && ctl b write "$g" 1 --file "$WORK/block" >/dev/null ||
	fail "two levels: a write failed"
ctl b --json verify | jq -e .equal >/dev/null || fail "two levels: verify: $(ctl b verify 2>&1)"
ok "two levels (a mirror, b durable): both warned, status and metrics say the partner's, writes through both, verify equal"
