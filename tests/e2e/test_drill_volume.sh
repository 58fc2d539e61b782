#!/usr/bin/env bash
# ftvmctl drill --volume (tools/drill_volume.c): block writes to a volume
# over NBD through both nodes, kept going through the fault, read back
# through both once the pair is whole. Both nodes have [memory] cache = 25%
# and an [nbd] socket; the volume is 8M, twice the cache.
#  - drill kill b, cut 2, hang a 1, cut 1 (b over TCP) and restart b (in
#    text) with --volume: nothing lost, verify equal, volume writes
#    acknowledged during the fault, every byte checked through both nodes,
#    the streams' failed writes rewritten; [nbd] socket preferred to
#    [nbd] listen;
#  - what the drill wrote is there for an NBD client of its own (qemu-io)
#    through either node: the drill's checks do not only agree with
#    themselves;
#  - refused, before anything is written: an unknown volume, and a node
#    whose config has no [nbd].
. "$(dirname "$0")/lib.sh"
need_tools qemu-io python3

write_nbd_pair_configs
# b also listens on TCP: the drill prefers the socket, and goes over TCP
# with a config of b's that names only the port.
NBD_PORT=$(free_port)
printf 'listen = 127.0.0.1:%s\n' "$NBD_PORT" >>"$WORK/b.conf"
start_node a
start_node b
wait_for 5000 "pair linked" pair_up
uri() { echo "nbd+unix:///$2?socket=$WORK/$1.nbd"; }

ctl a volume create disk --size 8M >/dev/null || fail "volume create disk"

# The drill starts the nodes it kills again itself; the cleanup must find them.
adopt_pids() {
	local id
	for id in a b; do
		PIDS[$id]=$(status_field "$id" pid)
	done
}

# drill_volume ARGS...: runs the drill with --json --volume disk, checks the
# common promises, and leaves the object in $J.
drill_volume() {
	local rc=0
	J=$(ctl a --json drill "$@" --volume disk --timeout 20 2>"$WORK/drill.err") || rc=$?
	adopt_pids
	[ "$rc" -eq 0 ] || fail "drill $* --volume disk exited $rc: $J $(cat "$WORK/drill.err")"
	jq -e '.lost == 0 and .equal == true' <<<"$J" >/dev/null ||
		fail "drill $* --volume: lost writes or unequal: $J"
	jq -e '.volume.name == "disk" and .volume.mismatches == 0 and .volume.flushed == true' \
		<<<"$J" >/dev/null || fail "drill $* --volume: the volume's figures: $J"
	jq -e '.volume.writes > .volume.slots and .volume.acked_during > 0 and .volume.unaligned > 0' \
		<<<"$J" >/dev/null || fail "drill $* --volume: no volume writes through the fault: $J"
	# Every slot read through both nodes, 4096 bytes each.
	jq -e '.volume.bytes_checked == 2 * .volume.slots * .volume.write_size' <<<"$J" >/dev/null ||
		fail "drill $* --volume: not every write checked on both nodes: $J"
	# A failed write is rewritten until acknowledged: none left unknown.
	jq -e '.volume.retried == .volume.failed' <<<"$J" >/dev/null ||
		fail "drill $* --volume: failed writes not all rewritten: $J"
	jq -e --arg a "unix:$WORK/a.nbd" --arg b "${B_ENDPOINT:-unix:$WORK/b.nbd}" \
		'.volume.endpoints == {a: $a, b: $b}' <<<"$J" >/dev/null ||
		fail "drill $* --volume: endpoints: $J"
	wait_for 5000 "pair whole after drill $*" pair_up
}

drill_volume kill b
[ "$(jq -r .takeover_ms <<<"$J")" -gt 0 ] || fail "no takeover in drill kill b: $J"
# b died under its stream: that stream's write failed and went to a.
jq -e '.volume.failed >= 1 and .volume.reconnects >= 1' <<<"$J" >/dev/null ||
	fail "drill kill b --volume: b's stream never failed over to a: $J"
ok "drill kill b --volume disk: $J"

drill_volume cut 2
[ "$(jq -r .node <<<"$J")" = b ] || fail "drill cut: b (the larger id) must yield: $J"
ok "drill cut 2 --volume disk: $J"

# a, the node the drill is asked of, stops answering: its stream's write
# gets no answer within dead_after_ms and goes to b, while the drill
# resumes a on time.
drill_volume hang a 1
[ "$(jq -r .survivor <<<"$J")" = b ] || fail "drill hang a: survivor $(jq -r .survivor <<<"$J")"
jq -e '.volume.failed >= 1 and .volume.reconnects >= 1' <<<"$J" >/dev/null ||
	fail "drill hang a --volume: a's stream never failed over to b: $J"
ok "drill hang a 1 --volume disk: $J"
# b's NBD over TCP: its config without the socket, for the drill only.
sed '/^socket = b.nbd$/d' "$WORK/b.conf" >"$WORK/b-tcp.conf"
B_ENDPOINT="tcp:127.0.0.1:$NBD_PORT" drill_volume cut 1 --partner-config "$WORK/b-tcp.conf"
ok "drill cut 1 --volume disk, b over TCP: $J"

# The text report names the volume's figures.
out=$(ctl a drill restart b --volume disk --timeout 20 2>&1) || fail "drill restart b --volume in text: $out"
adopt_pids
grep -q "volume disk: .* slots of 4096 bytes" <<<"$out" && grep -q "0 mismatched" <<<"$out" &&
	grep -q "verify: equal" <<<"$out" || fail "text report: $out"
ok "drill restart b --volume disk, text report: $(tr '\n' ' ' <<<"$out")"
wait_for 5000 "pair whole" pair_up

# An NBD client of its own reads the same bytes through both nodes: the
# first slot (offset 0) holds the same 4096 bytes on a and on b, and they
# are not zeroes (the drill wrote them).
for id in a b; do
	qemu-io -f raw -c 'read -v 0 4096' "$(uri "$id" disk)" >"$WORK/slot.$id" ||
		fail "qemu-io read through $id: $(cat "$WORK/slot.$id")"
	sed -i '/^read /d; /ops\/sec/d' "$WORK/slot.$id"
done
cmp -s "$WORK/slot.a" "$WORK/slot.b" || fail "the first slot differs between a and b"
qemu-io -f raw -c 'read -P 0 0 4096' "$(uri a disk)" >/dev/null 2>&1 &&
	fail "the first slot is zeroes: the drill wrote nothing there"
ok "the drill's bytes read the same through a and b with qemu-io"

epoch=$(status_field a epoch)
expect_refused() {
	local pattern=$1 rc=0 out
	shift
	out=$("$@" 2>&1) || rc=$?
	[ "$rc" -eq 1 ] || fail "$* exited $rc, wanted 1: $out"
	grep -q -- "$pattern" <<<"$out" || fail "$* said '$out', wanted '$pattern'"
}
expect_refused "no volume 'nosuch' in this pair (it has: disk)" ctl a drill kill b --volume nosuch
# b without [nbd]: its config for the drill only (b runs on with its own).
sed '/^\[nbd\]/,$d' "$WORK/b.conf" >"$WORK/b-nonbd.conf"
expect_refused "b serves no NBD: its config .*b-nonbd.conf sets neither \[nbd\] socket nor \[nbd\] listen" \
	ctl a drill kill b --volume disk --partner-config "$WORK/b-nonbd.conf"
[ "$(status_field a epoch)" = "$epoch" ] || fail "a refused drill changed the epoch"
# The volume is the only allocation: no drill left its workload's behind.
[ "$(ctl a --json list | jq length)" = 1 ] || fail "drills left allocations behind: $(ctl a --json list)"
ok "refused: an unknown volume, a node without [nbd]; nothing changed"
