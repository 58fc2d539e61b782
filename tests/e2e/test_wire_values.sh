#!/usr/bin/env bash
# Values from the partner are checked, not taken as given (issue 19, "Wire
# values are checked"), with node a played by ftvm-fake-originator: an
# AllocateMemory whose size or store offset does not fit in a's partition of
# the store is refused and changes nothing; a LockRequest that asks to wait
# in b's paging queue for days waits request_timeout_ms at most. b keeps
# serving throughout.
. "$(dirname "$0")/lib.sh"

FAKE=${FTVM_FAKE_ORIGINATOR:?FTVM_FAKE_ORIGINATOR must name ftvm-fake-originator}
ANSWER_S=$((30 * E2E_TIME_SCALE))
TIMEOUT_MS=1000

write_pair_configs
echo "request_timeout_ms = $TIMEOUT_MS" >>"$WORK/b.conf" # [failover] is last
start_node b
mkfifo "$WORK/fake.in" "$WORK/fake.out"
FTVM_KEY_FILE="$WORK/pair.key" "$FAKE" "$E2E_ADDR:$PORT_A" "$E2E_ADDR:$PORT_B" \
	"${FTVM_TRANSPORT:-tcp}" 4096 4096 <"$WORK/fake.in" >"$WORK/fake.out" 2>"$WORK/fake.log" &
PIDS["fake"]=$!
exec {FAKE_IN}>"$WORK/fake.in" {FAKE_OUT}<"$WORK/fake.out"

# fake COMMAND: one command; its answer line into $line.
fake() {
	echo "$1" >&"$FAKE_IN"
	IFS= read -r -t "$ANSWER_S" line <&"$FAKE_OUT" ||
		fail "ftvm-fake-originator said nothing more after '$1': $(cat "$WORK/fake.log")"
}

fake_expect() { # fake_expect COMMAND PATTERN
	fake "$1"
	grep -q -- "$2" <<<"$line" || fail "'$1': the fake got '$line', wanted '$2'"
	ok "$1: $line"
}

IFS= read -r -t "$ANSWER_S" line <&"$FAKE_OUT" || fail "the fake never linked: $(cat "$WORK/fake.log")"
# b made the store: its partition is the first, a's the second, each half of
# what follows the 64 KiB header (16M pool: a store of 64M + 64K).
half=$((32 << 20))
a_start=$((65536 + half))

fake_expect "alloc big 18446744073709551615 $a_start" \
	"alloc: BAD_REQUEST .*do not fit in a's partition of the store"
fake_expect "alloc past $((half - 4096)) $((a_start + 8192))" "alloc: BAD_REQUEST"
fake_expect "alloc header 4096 0" "alloc: BAD_REQUEST"
fake_expect "alloc wrap 8192 18446744073709547520" "alloc: BAD_REQUEST"
fake_expect "alloc bs 4096 65536" "alloc: BAD_REQUEST" # b's own partition, homed on a
ctl b --json list | jq -e 'length == 0' >/dev/null || fail "a refused allocation is in b's list"
fake_expect "alloc fits $((1 << 20)) $a_start" "alloc: OK"
ctl b --json list | jq -e 'map(.guid) == ["fits"]' >/dev/null ||
	fail "b's list after the allocation that fits: $(ctl b --json list)"

# A writer holds b's page: a's LockRequest is refused and waits in b's queue,
# asking for 4e9 ms; b forgets it after request_timeout_ms.
g=$(ctl b alloc --size 4K)
hold_pointer w b "$g" 0 write
fake_expect "wait $g 0 4000000000" "wait: LOCKED"
sense_is b queues.paging 1 || fail "a's waiting request is not in b's paging queue"
t0=$(now_ms)
wait_for $((4 * TIMEOUT_MS)) "a's request to leave b's queue" sense_is b queues.paging 0
ok "a's request asking to wait 4000000000 ms left b's queue after $(($(now_ms) - t0)) ms (request_timeout_ms $TIMEOUT_MS)"
hold_end w

ctl b write "$g" 0 --file "$(fill 3)" >/dev/null
ctl b read "$g" 0 | cmp -s - "$(fill 3)" || fail "b does not serve after the bad values"
ok "b serves on"
