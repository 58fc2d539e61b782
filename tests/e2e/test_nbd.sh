#!/usr/bin/env bash
# Volumes over NBD (node/NBD.md) on a real pair, with real clients. Both
# nodes have [memory] cache = 25% (4M of 16M) and an NBD socket; a also
# listens on TCP. The volume is 16M, four times the cache.
#  - nbdinfo on either node: its size, block sizes 1/4096/4M, flush, FUA,
#    trim, zeroes, multi-conn; --list names every volume; an unknown
#    export is refused;
#  - nbdcopy writes 16M of random bytes through a (TCP) and reads them back
#    through b (unix) unchanged: pages evicted and staged from the store on
#    both nodes, the storage cache never past its size;
#  - qemu-io: unaligned writes through one node read back through the
#    other, with the bytes around them kept; zeroes, discard, flush, FUA;
#  - verify is equal; garbage on the NBD socket costs its own connection
#    only;
#  - kill -9 of a: b takes over and serves every acknowledged byte to a new
#    connection; after a restart of both, the store has them.
. "$(dirname "$0")/lib.sh"
need_tools nbdinfo qemu-io nbdcopy python3

write_nbd_pair_configs
export PYTHONPATH=$FTVM_SRCDIR/tests/e2e # nbd_raw.py
NBD_PORT=$(free_port)
printf 'listen = 127.0.0.1:%s\n' "$NBD_PORT" >>"$WORK/a.conf"
start_node a
start_node b
wait_for 5000 "pair linked" pair_up
uri() { echo "nbd+unix:///$2?socket=$WORK/$1.nbd"; }
M=$((1 << 20))

ctl a volume create disk --size 16M >/dev/null || fail "volume create disk"
ctl b volume create small --size 64K >/dev/null || fail "volume create small"

nbdinfo --json "$(uri b disk)" >"$WORK/info.json" || fail "nbdinfo --json on b"
for check in "export-size=$((16 * M))" block_size_minimum=1 block_size_preferred=4096 \
	"block_size_maximum=$((4 * M))" can_flush=true can_fua=true can_trim=true can_zero=true \
	can_multi_conn=true is_read_only=false; do
	key=${check%%=*} want=${check#*=}
	got=$(jq -r ".exports[0][\"$key\"]" "$WORK/info.json")
	[ "$got" = "$want" ] || fail "nbdinfo --json on b: $key is $got, expected $want"
done
ok "nbdinfo on b: 16M, block sizes 1/4096/4M, flush, FUA, trim, zeroes, multi-conn"
[ "$(nbdinfo --list --json "$(uri a "")" | jq -r '[.exports[]["export-name"]] | sort | join(",")')" = disk,small ] ||
	fail "nbdinfo --list on a: $(nbdinfo --list "$(uri a "")" 2>&1)"
nbdinfo "nbd://127.0.0.1:$NBD_PORT/small" >/dev/null || fail "nbdinfo over TCP"
out=$(nbdinfo "$(uri a nosuch)" 2>&1) && fail "an unknown export was served: $out"
ok "nbdinfo --list names both volumes; TCP serves; an unknown export is refused: $out"

# 16M through a, back through b: four times the cache.
head -c $((16 * M)) /dev/urandom >"$WORK/random"
nbdcopy "$WORK/random" "nbd://127.0.0.1:$NBD_PORT/disk" || fail "nbdcopy into disk through a"
nbdcopy "$(uri b disk)" "$WORK/back" || fail "nbdcopy out of disk through b"
cmp "$WORK/random" "$WORK/back" || fail "disk read back through b differs"
for id in a b; do
	evictions=$(status_field "$id" replacement.evictions)
	[ "$evictions" -gt 0 ] || fail "$id evicted nothing for a volume four times its cache"
	free=$(ctl "$id" --json partitions | jq -r '.[] | select(.media == "dram" and .type == "storage-cache") | .free')
	[ "$free" -ge 0 ] && [ "$free" -le $((4 * M)) ] || fail "$id's storage cache: $free free"
done
ok "16M written through a (nbdcopy over TCP) read back through b unchanged, pages evicted and staged on both"

qemu-io -f raw -c 'write -P 0x5a 1000 5000' -c 'write -P 0x33 12288 4096' \
	-c 'write -z 20000 10000' -c 'discard 65536 65536' -c flush "$(uri a disk)" >"$WORK/qio.out" ||
	fail "qemu-io writes through a: $(cat "$WORK/qio.out")"
qemu-io -f raw -c 'read -P 0x5a 1000 5000' -c 'read -P 0x33 12288 4096' -c 'read -P 0 20000 10000' \
	"$(uri b disk)" >"$WORK/qio.out" || fail "qemu-io reads through b: $(cat "$WORK/qio.out")"
cmp -n 1000 "$WORK/random" <(nbdcopy "$(uri b disk)" -) || fail "the bytes before an unaligned write changed"
cmp -i 6000:6000 -n 2000 "$WORK/random" <(nbdcopy "$(uri b disk)" -) ||
	fail "the bytes after an unaligned write changed"
ok "unaligned writes, zeroes, discard, flush through a, read back through b with their neighbours kept"

for id in a b; do
	V=$(ctl "$id" --json verify) || fail "verify on $id: $V"
	[ "$(jq -r .equal <<<"$V")" = true ] || fail "verify on $id: $V"
done
ok "verify equal on both nodes"

# junk PATH BYTES...: each BYTES (python bytes literals) on a connection of its own.
junk() {
	python3 - "$@" <<'PY'
import socket, sys
for raw in sys.argv[2:]:
    s = socket.socket(socket.AF_UNIX)
    s.settimeout(2)
    s.connect(sys.argv[1])
    try:
        s.recv(18)  # the greeting
        s.sendall(eval(raw))  # the test's own bytes expressions
        s.recv(4096)
    except OSError:
        pass
    s.close()
PY
}
junk "$WORK/a.nbd" "b'garbage'" "b'IHAVEOPT' * 40" "b'\\x00\\x00\\x00\\x01' + b'\\xff' * 5000" \
	"b'\\x00\\x00\\x00\\x03IHAVEOPT\\x00\\x00\\x00\\x07\\x00\\x00\\x00\\x06\\x00\\x00\\x00\\x00\\x00\\x00'" ||
	fail "the junk client failed"
grep -q "nbd unix" "$WORK/a.log" || fail "no NBD log lines on a"

nbdinfo --size "$(uri a small)" >/dev/null || fail "a stopped serving NBD after garbage"
ctl_ok a || fail "a stopped serving its clients after garbage"
[ "$(status_field a nbd.protocol_errors)" -ge 3 ] || fail "a's status counts no protocol errors: $(ctl a --json status | jq -c .nbd)"
[ "$(status_field a nbd.requests)" -gt 0 ] && [ "$(status_field b nbd.read_bytes)" -ge $((16 * M)) ] &&
	[ "$(status_field a nbd.written_bytes)" -ge $((16 * M)) ] ||
	fail "NBD counters: a $(ctl a --json status | jq -c .nbd), b $(ctl b --json status | jq -c .nbd)"
[ "$(status_field a cache.frames_total)" = 1024 ] || fail "a's storage cache: $(ctl a --json status | jq -c .cache)"
ctl a status | grep -q "^nbd: .* protocol errors" || fail "no nbd line in a's status: $(ctl a status)"
ok "garbage on the NBD socket cost its own connections only; status counts it: $(ctl a --json status | jq -c .nbd)"

# Bounds. A client that sends READs and never reads the replies: the node
# stops reading it once 128 are in flight or 64M of replies wait, so its
# memory stays bounded, and others are served meanwhile. Then 64
# connections are open: a 65th is closed at once, and counted.
rss_kb() { awk '/^VmRSS/ {print $2}' "/proc/${PIDS[a]}/status"; }
rss0=$(rss_kb)
python3 - "$WORK/a.nbd" >"$WORK/greedy.out" 2>&1 <<'PY' &
import socket, sys, time
import nbd_raw
s = nbd_raw.go(sys.argv[1], 'disk')
s.settimeout(0.2)
sent = 0
try:
    for i in range(400):  # 400 READs of 4M, 1.6G of replies, none read
        nbd_raw.request(s, nbd_raw.CMD_READ, i, (i % 4) << 22, 4 << 20)
        sent += 1
except socket.timeout:
    pass
print('sent', sent, flush=True)
time.sleep(3)
PY
greedy=$!
wait_for 10000 "the greedy client blocked" grep -q sent "$WORK/greedy.out"
nbdinfo --size "$(uri a small)" >/dev/null || fail "a stopped serving others beside a greedy client"
rss1=$(rss_kb)
[ $((rss1 - rss0)) -lt $((300 * 1024)) ] || fail "a greedy client grew a by $(((rss1 - rss0) / 1024)) MiB"
kill "$greedy" 2>/dev/null || true
wait "$greedy" 2>/dev/null || true
ok "a client that never reads its replies: $(cat "$WORK/greedy.out") READs of 4M went, a grew $(((rss1 - rss0) / 1024)) MiB, others still served"

python3 - "$WORK/a.nbd" <<'PY' || fail "the 65th connection"
import socket, sys
socks = []
for i in range(64):
    s = socket.socket(socket.AF_UNIX)
    s.connect(sys.argv[1])
    assert s.recv(18, socket.MSG_WAITALL)[:8] == b'NBDMAGIC', 'no greeting on connection %d' % i
    socks.append(s)
s = socket.socket(socket.AF_UNIX)
s.settimeout(5)
s.connect(sys.argv[1])
assert s.recv(18) == b'', 'the 65th connection was served'
PY
[ "$(status_field a nbd.refused)" -ge 1 ] || fail "a did not count the refused connection: $(ctl a --json status | jq -c .nbd)"
nbdinfo --size "$(uri a small)" >/dev/null || fail "a serves no NBD after its connections were full"
ok "64 connections open: a 65th closed at once and counted; served again once they closed"

# kill -9 of a, after writes through a acknowledged: b serves them.
qemu-io -f raw -c 'write -P 0x77 3000000 100000' "$(uri a disk)" >/dev/null || fail "write before the kill"
kill -9 "${PIDS[a]}"
wait "${PIDS[a]}" 2>/dev/null || true
unset "PIDS[a]"
solo() { [ "$(status_field b state)" = solo ]; }
wait_for 10000 "b takes over" solo
qemu-io -f raw -c 'read -P 0x77 3000000 100000' -c 'read -P 0x5a 1000 5000' "$(uri b disk)" >"$WORK/qio.out" ||
	fail "acknowledged writes through a not on b after a's kill: $(cat "$WORK/qio.out")"
ok "a killed: b serves every acknowledged write to a new connection"

start_node a
wait_for 20000 "pair whole again" pair_up
wait_for 20000 "a resynced" field_is a state active
[ "$(status_field b last_resync_pages)" -gt 0 ] || fail "b sent a no pages in its resync: $(ctl b --json status | jq -c .)"
qemu-io -f raw -c 'read -P 0x77 3000000 100000' "$(uri a disk)" >/dev/null || fail "the write made while a was down, read through a after its resync"
V=$(ctl a --json verify) && [ "$(jq -r .equal <<<"$V")" = true ] || fail "verify after a's resync: $V"
ok "a came back: b resynced $(status_field b last_resync_pages) pages of the volume, serves what b took while it was down, verify equal"
kill "${PIDS[a]}" "${PIDS[b]}"
wait "${PIDS[a]}" "${PIDS[b]}" 2>/dev/null || true
start_node a
start_node b
wait_for 5000 "pair linked after a restart" pair_up
qemu-io -f raw -c 'read -P 0x77 3000000 100000' -c 'read -P 0x33 12288 4096' "$(uri a disk)" >"$WORK/qio.out" ||
	fail "the volume after a restart of both: $(cat "$WORK/qio.out")"
ok "after a restart of both nodes the volume reads back from the store"

# One WRITE_ZEROES of the whole volume, in one request (raw: clients split
# theirs): the node cuts it as it goes, and every byte reads back zero.
python3 - "$WORK/b.nbd" $((16 * M)) <<'PY' || fail "a WRITE_ZEROES of the whole volume"
import sys
import nbd_raw
s = nbd_raw.go(sys.argv[1], 'disk')
nbd_raw.request(s, nbd_raw.CMD_WRITE_ZEROES, 42, 0, int(sys.argv[2]))
magic, error, cookie = nbd_raw.simple_reply(s)
sys.exit(0 if (magic, error, cookie) == (nbd_raw.REPLY_MAGIC, 0, 42) else 'reply: error %d' % error)
PY
nbdcopy "$(uri a disk)" "$WORK/zeroes" || fail "nbdcopy out after the zeroes"
cmp "$WORK/zeroes" <(head -c $((16 * M)) /dev/zero) || fail "the volume is not all zeroes after WRITE_ZEROES"
ok "one WRITE_ZEROES of the whole 16M volume through b: every byte reads back zero through a"
