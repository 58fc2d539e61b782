#!/usr/bin/env bash
# A whole-page write of b's to a page its partner owns, in flight when a
# resync replaces b's copy of the allocation (node/ha/HA.md, "Requests in
# flight across a resync"). The partner a is played by ftvm-fake-originator,
# so that the order is certain: it holds b's request unanswered, resyncs b
# from a later epoch (the allocation replaced, its page 1 a block of 0x02
# bytes), and only then answers OK. b must leave the new allocation's page
# alone (the write pinned the old one's) and tell its client the write's
# outcome went with the resync. Before, b applied the late answer to the new
# page and died at vmm_unpin's assertion `p->pins > 0`.
. "$(dirname "$0")/lib.sh"

FAKE=${FTVM_FAKE_ORIGINATOR:?FTVM_FAKE_ORIGINATOR must name ftvm-fake-originator}
ANSWER_S=$((30 * E2E_TIME_SCALE))
GUID=a-9
OFFSET=$((65536 + (32 << 20))) # a's partition: the second half of the store b made

write_pair_configs
# b's request waits for the fake's answer, not for its own deadline.
sed -i "/^\[failover\]/a request_timeout_ms = $((60000 * E2E_TIME_SCALE))" "$WORK/b.conf"
start_node b
pid_b=${PIDS[b]}
mkfifo "$WORK/fake.in" "$WORK/fake.out"
FTVM_KEY_FILE="$WORK/pair.key" "$FAKE" "$E2E_ADDR:$PORT_A" "$E2E_ADDR:$PORT_B" "${FTVM_TRANSPORT:-tcp}" 4096 4096 \
	<"$WORK/fake.in" >"$WORK/fake.out" 2>"$WORK/fake.log" &
PIDS[fake]=$!
exec {FAKE_IN}>"$WORK/fake.in" {FAKE_OUT}<"$WORK/fake.out"

fake_line() {
	IFS= read -r -t "$ANSWER_S" line <&"$FAKE_OUT" ||
		fail "ftvm-fake-originator said nothing more: $(cat "$WORK/fake.log")"
}

# fake_until PATTERN: the fake's lines up to the first matching PATTERN (an
# extended regular expression) go into $said.
fake_until() {
	said=
	while fake_line; do
		said+="$line"$'\n'
		[[ "$line" =~ $1 ]] && return 0
	done
}

fake_line
[[ "$line" == "linked one_sided="* ]] || fail "ftvm-fake-originator: '$line'"
wait_for 5000 "b linked" field_is b partner.link up
echo "alloc $GUID 8192 $OFFSET" >&"$FAKE_IN"
fake_until "^alloc:"
[[ "$said" == "alloc: OK"* ]] || fail "b did not take a's allocation: $said"
ok "the fake a linked to b and mirrored its allocation $GUID"

echo hold >&"$FAKE_IN"
ctl b write "$GUID" 1 --file "$(fill 7)" >"$WORK/write.out" 2>"$WORK/write.err" &
write_pid=$!
fake_until "^held: ([4-9]|[1-9][0-9])"
ok "b's whole-page write to $GUID page 1 is in flight, held by the fake ($line)"

echo "epoch 2" >&"$FAKE_IN"
echo "resync $GUID $OFFSET" >&"$FAKE_IN"
fake_until "^end:"
for want in "begin: OK" "allocation: OK" "page1: OK" "end: OK"; do
	grep -qx "$want *" <<<"$said" || fail "b answered the resync: wanted '$want' in: $said"
done
ok "b resynced from epoch 2 with the write still in flight"

echo "answer OK" >&"$FAKE_IN"
fake_until "^answered:"
wait_for 10000 "b's client answered" pid_gone "$write_pid"
rc=0
wait "$write_pid" || rc=$?
kill -0 "$pid_b" 2>/dev/null && ctl_ok b || fail "b died at the late answer: $(tail -n 3 "$WORK/b.log")"
[ "$rc" -ne 0 ] && grep -q "resynced meanwhile" "$WORK/write.err" ||
	fail "the write in flight across the resync exited $rc: $(cat "$WORK/write.out" "$WORK/write.err")"
ok "b lives; the write's client was told: $(cat "$WORK/write.err")"

head -c 4096 /dev/zero | tr '\0' '\002' >"$WORK/page1"
head -c 4096 /dev/zero | tr '\0' '\003' >"$WORK/page0"
ctl b read "$GUID" 1 | cmp -s - "$WORK/page1" || fail "b's page 1 is not the resync's block"
ctl b read "$GUID" 0 | cmp -s - "$WORK/page0" || fail "b's page 0 is not the mirrored write's"
ok "b's pages are the resync's, untouched by the late answer"

exec {FAKE_IN}>&-
wait "${PIDS[fake]}" || fail "ftvm-fake-originator exited $?: $(cat "$WORK/fake.log")"
unset 'PIDS[fake]'
