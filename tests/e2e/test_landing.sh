#!/usr/bin/env bash
# Page blocks written one-sided into b's landing runs (replica/RDMA.md,
# "One-sided page writes"), with node a played by ftvm-fake-originator so
# that it can send what a correct node never sends. b owns the allocation.
# b must keep its copy of the page whole and old unless it adopts a run whose
# WritePage names the landing b holds for the lock, at its current generation,
# with a matching CRC-32C; and a node that dies between the RDMA WRITE and the
# WritePage leaves b's page as it was.
# Over TCP nothing goes one-sided: a WritePage naming a landing is refused.
. "$(dirname "$0")/lib.sh"

FAKE=${FTVM_FAKE_ORIGINATOR:?FTVM_FAKE_ORIGINATOR must name ftvm-fake-originator}
ANSWER_S=$((30 * E2E_TIME_SCALE))

write_pair_configs
start_node b
# The fake's input and output are fifos, not a coproc: bash closes a
# coproc's descriptors as soon as it exits (the cut), maybe before its last
# lines are read. Both ends open in the same order, in and then out.
mkfifo "$WORK/fake.in" "$WORK/fake.out"
FTVM_KEY_FILE="$WORK/pair.key" "$FAKE" "$E2E_ADDR:$PORT_A" "$E2E_ADDR:$PORT_B" "${FTVM_TRANSPORT:-tcp}" 4096 4096 \
	<"$WORK/fake.in" >"$WORK/fake.out" 2>"$WORK/fake.log" &
FAKE_PID=$!
PIDS["fake"]=$FAKE_PID
exec {FAKE_IN}>"$WORK/fake.in" {FAKE_OUT}<"$WORK/fake.out"

# fake_line: the fake's next line of output, into $line.
fake_line() {
	IFS= read -r -t "$ANSWER_S" line <&"$FAKE_OUT" ||
		fail "ftvm-fake-originator said nothing more: $(cat "$WORK/fake.log")"
}

# fake_write HOW: one write command; the fake's lines up to and including the
# last one it prints for HOW go into $said, one per line.
fake_write() {
	local how=$1 last=release
	[ "$how" = cut ] && last="cut"
	echo "write $guid 0 $how" >&"$FAKE_IN"
	said=
	while fake_line; do
		said+="$line"$'\n'
		[[ "$line" == "$last:"* ]] && break
		[[ "$line" == "write_page: not sent"* ]] && [ "$how" != landed ] &&
			fail "write $how: $line"
	done
}

# said_line NAME: the fake's answer line for NAME in $said.
said_line() {
	grep -m1 "^$1:" <<<"$said" || true
}

page_is() {
	ctl b read "$guid" 0 | cmp -s - "$1"
}

fake_line
case "$line" in
"linked one_sided=yes") one_sided=yes ;;
"linked one_sided=no") one_sided=no ;;
*) fail "ftvm-fake-originator: '$line'" ;;
esac
want=no
[ "$E2E_TRANSPORT" = rdma ] && want=yes
[ "$one_sided" = "$want" ] || fail "one_sided=$one_sided over $E2E_TRANSPORT, wanted $want"
ok "the fake originator linked to b over $E2E_TRANSPORT, one_sided=$one_sided"
wait_for 5000 "b linked" field_is b partner.link up

guid=$(ctl b alloc --size 4096)
head -c 4096 /dev/zero | tr '\0' '\021' >"$WORK/old"
head -c 4096 /dev/zero | tr '\0' 'Z' >"$WORK/new" # the fake writes 0x5a
ctl b write "$guid" 0 --file "$WORK/old" >/dev/null
page_is "$WORK/old" || fail "b does not read back what it wrote"

# A WritePage naming a landing b never gave: refused, the page unchanged.
fake_write landed
grep -q "^write_page: BAD_REQUEST" <<<"$said" || fail "made-up landing: $said"
grep -q "^release: OK" <<<"$said" || fail "the release after a refused write: $said"
page_is "$WORK/old" || fail "b's page changed after a refused WritePage"
ok "a WritePage naming a landing b did not give is refused: $(said_line write_page)"

if [ "$one_sided" = no ]; then
	ok "over $E2E_TRANSPORT b gives no landings; the one-sided cases run over rdma"
	exec {FAKE_IN}>&- # end of input: the fake exits 0
	wait "$FAKE_PID" || fail "ftvm-fake-originator exited $?: $(cat "$WORK/fake.log")"
	unset 'PIDS[fake]'
	exit 0
fi

grep -q "locked landing=frame:" <<<"$said" || fail "b gave no landing with the lock: $said"
ok "b gave a landing with the write lock: $(grep -m1 '^locked' <<<"$said")"

fake_write badcrc
grep -q "^write_page: BAD_REQUEST.*CRC" <<<"$said" || fail "bad CRC-32C: $said"
page_is "$WORK/old" || fail "b adopted a landing whose CRC-32C did not match"
ok "a landed block with the wrong CRC-32C is refused, page unchanged: $(said_line write_page)"

fake_write stale
grep -q "^write_page: BAD_REQUEST.*stale" <<<"$said" || fail "stale generation: $said"
page_is "$WORK/old" || fail "b adopted a landing at a stale generation"
ok "a landing named at another generation is refused, page unchanged: $(said_line write_page)"

fake_write good
grep -q "^write_page: OK" <<<"$said" || fail "a good landed write: $said"
page_is "$WORK/new" || fail "b did not adopt a good landed block"
ok "a good landed block is adopted: b reads the new bytes"

ctl b write "$guid" 0 --file "$WORK/old" >/dev/null
fake_write cut
wait "$FAKE_PID" 2>/dev/null || true
unset 'PIDS[fake]'
wait_for $((DEAD_AFTER_MS + 5000)) "b takes over from the dead originator" field_is b state solo
page_is "$WORK/old" || fail "b's page is not the old version after a death between WRITE and WritePage"
ok "a node dead between its RDMA WRITE and WritePage: b serves the old page whole"
