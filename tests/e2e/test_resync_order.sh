#!/usr/bin/env bash
# A resync whose blocks are overtaken by a change mirrored after the
# snapshot (node/ha/HA.md, "Solo and rejoin"; replica/RDMA.md, "Resync"), with
# the survivor a played by ftvm-fake-originator at epoch 2, so that the
# order is certain: ResyncLandings, then page 0 written again (version 2),
# only then the snapshot's blocks of pages 0 and 1 (version 1), one-sided
# into b's landings over RDMA, inline over TCP. b must keep page 0's newer
# bytes (dropping the older block, its landing back to the pool) and take
# page 1's block; its frames free must come back to what they were.
. "$(dirname "$0")/lib.sh"

FAKE=${FTVM_FAKE_ORIGINATOR:?FTVM_FAKE_ORIGINATOR must name ftvm-fake-originator}
ANSWER_S=$((30 * E2E_TIME_SCALE))

write_pair_configs
start_node b
free0=$(status_field b frames.free)
coproc FAKE_PROC {
	FTVM_KEY_FILE="$WORK/pair.key" exec "$FAKE" "$E2E_ADDR:$PORT_A" "$E2E_ADDR:$PORT_B" "${FTVM_TRANSPORT:-tcp}" 4096 4096 2 \
		2>"$WORK/fake.log"
}
FAKE_PID=$FAKE_PROC_PID FAKE_OUT=${FAKE_PROC[0]} FAKE_IN=${FAKE_PROC[1]}
PIDS["fake"]=$FAKE_PID

fake_line() {
	IFS= read -r -t "$ANSWER_S" line <&"$FAKE_OUT" ||
		fail "ftvm-fake-originator said nothing more: $(cat "$WORK/fake.log")"
}

fake_line
case "$line" in
"linked one_sided=yes") landings_want=2 ;;
"linked one_sided=no") landings_want=0 ;;
*) fail "ftvm-fake-originator: '$line'" ;;
esac
[ "$E2E_TRANSPORT" = rdma ] && [ "$landings_want" = 0 ] && fail "not one-sided over rdma"
ok "the fake survivor linked to b at epoch 2: $line"

# b made the store: a's partition is its second half (16M pool: 64M + 64K).
echo "resync a-9 $((65536 + (32 << 20)))" >&"$FAKE_IN"
said=
while fake_line; do
	said+="$line"$'\n'
	[[ "$line" == "end:"* ]] && break
done
for want in "begin: OK" "allocation: OK" "landings: $landings_want" "mirrored: OK" \
	"page0: OK" "page1: OK" "end: OK"; do
	grep -qx "$want *" <<<"$said" || fail "b answered the resync: wanted '$want' in: $said"
done
ok "b answered the resync, $landings_want landings, the mirrored write ahead of the blocks"

[ "$(status_field b epoch)" = 2 ] || fail "b is at epoch $(status_field b epoch), not 2"
[ "$(status_field b resync.pages_dropped)" = 1 ] ||
	fail "b dropped $(status_field b resync.pages_dropped) blocks as older, not 1"
[ "$(status_field b landings.refused)" = 0 ] ||
	fail "b refused $(status_field b landings.refused) landings"
[ "$(status_field b landings.adopted)" = $((landings_want / 2)) ] ||
	fail "b adopted $(status_field b landings.adopted) landings, not $((landings_want / 2))"
ok "b dropped the older block of page 0 and took page 1's ($(status_field b landings.adopted) adopted one-sided)"

head -c 4096 /dev/zero | tr '\0' '\003' >"$WORK/page0"
head -c 4096 /dev/zero | tr '\0' '\002' >"$WORK/page1"
ctl b read a-9 0 | cmp -s - "$WORK/page0" || fail "b's page 0 is not the mirrored write's bytes"
ctl b read a-9 1 | cmp -s - "$WORK/page1" || fail "b's page 1 is not the resync's block"
ok "b reads page 0 as mirrored after the snapshot and page 1 as resynced"

# Two pages resident, and over RDMA the two one-page runs b grants the fake
# again once resynced (vmm/VMM.md, "Landing grants"; the fake keeps them): every
# resync landing run b took came back.
grants=$((landings_want > 0 ? 2 : 0))
[ "$(status_field b frames.free)" = $((free0 - 2 - grants)) ] ||
	fail "b has $(status_field b frames.free) frames free, wanted $((free0 - 2 - grants)) (free at start $free0, $grants granted)"
ok "b's frames: $free0 free before; after, 2 pages resident, $grants granted, no resync landing run held"

exec {FAKE_IN}>&-
wait "$FAKE_PID" || fail "ftvm-fake-originator exited $?: $(cat "$WORK/fake.log")"
unset 'PIDS[fake]'
