#!/usr/bin/env bash
# Read header on a real pair (node/vmm/VMM.md, "Read header: whose record
# answers"): a record known current answers where it is asked; after a
# resync a node received, its records of the allocations its partner owns
# are read from the owner (ReadHeader) until one answer confirms each.
#  - before any failure, header on either node asks nobody;
#  - b killed (kill -9), a takes over, b restarts and a resyncs it: b's
#    first header of a's allocation and of b's own (a owns it since the
#    takeover) asks a, and answers a's record, byte for byte in JSON but
#    for where b's copy rests; the second is answered by b alone; a, which
#    received no resync, asks nobody;
#  - with a stopped (SIGSTOP), b's header of a record still unconfirmed
#    waits for a at most request_timeout_ms, then b's own record answers.
. "$(dirname "$0")/lib.sh"

start_pair
printf 'journal v7' >"$WORK/hdr"
ga=$(ctl a alloc --size 8K --header-file "$WORK/hdr")
gb=$(ctl b alloc --size 4K --name b-app)
gc=$(ctl a alloc --size 4K)
asked() { ctl "$1" --json status | jq .read_header.asked_owner; }
for n in a b; do
	for g in "$ga" "$gb"; do ctl "$n" header "$g" >/dev/null || fail "header $g on $n"; done
	[ "$(asked "$n")" = 0 ] || fail "$n asked its partner $(asked "$n") times before any resync"
done
ok "headers on both nodes before any failure: answered where asked, nothing asked of the owner"

kill -9 "${PIDS[b]}"
wait "${PIDS[b]}" 2>/dev/null || true
unset 'PIDS[b]'
wait_for 10000 "a takes over" field_is a state solo
start_node b
wait_for 20000 "a resyncs b, both active" pair_up
header_json() { ctl "$1" --json header "$2" | jq -cS 'del(.media)'; }
for g in "$ga" "$gb"; do
	before=$(asked b)
	mine=$(header_json b "$g") || fail "header $g on b after the resync"
	[ "$(asked b)" = $((before + 1)) ] || fail "b's header of $g after the resync did not ask a"
	[ "$mine" = "$(header_json a "$g")" ] || fail "b answered $mine for $g, a has $(header_json a "$g")"
	header_json b "$g" >/dev/null
	[ "$(asked b)" = $((before + 1)) ] || fail "b asked a again for $g, confirmed once"
done
[ "$(asked a)" = 0 ] || fail "a, which received no resync, asked b $(asked a) times"
ctl b status | grep -q "read header: 2 asked of the owner after a resync, 0 differed" ||
	fail "b's status text: $(ctl b status | grep 'read header')"
grep -q "header: 10 bytes $(printf "journal v7" | od -An -tx1 | tr -d " \n")" <(ctl b header "$ga") || fail "b's header of $ga: $(ctl b header "$ga")"
ok "b resynced: its first header of $ga and of $gb asked a (their owner), the answer a's record; the next stayed on b"

kill -STOP "${PIDS[a]}"
before=$(asked b)
started=$(now_ms)
out=$(header_json b "$gc") || { kill -CONT "${PIDS[a]}"; fail "header $gc on b with a stopped"; }
took=$(($(now_ms) - started))
kill -CONT "${PIDS[a]}"
[ "$(asked b)" = $((before + 1)) ] || fail "b did not ask a for $gc, still unconfirmed"
[ "$(jq -r .guid <<<"$out")" = "$gc" ] || fail "b's answer for $gc with a stopped: $out"
ok "a stopped: b's header of $gc waited $took ms for a, then b's own record answered"
