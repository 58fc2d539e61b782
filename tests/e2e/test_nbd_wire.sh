#!/usr/bin/env bash
# common/nbd_wire against real NBD clients, through ftvm-nbd-memserver
# (tests/nbd/): nbdinfo sees the export's size, block sizes and flags and
# lists the exports; qemu-io writes and reads back aligned and unaligned
# data, flushes, writes zeroes with and without FUA and discards; nbdcopy
# copies a file in and out unchanged; an unknown export is refused; and
# garbage, before and after the handshake, costs only its own connection.
for tool in nbdinfo qemu-io nbdcopy python3; do
	command -v "$tool" >/dev/null || {
		echo "SKIP: $tool is not installed (tools/install-deps.sh)"
		exit 77
	}
done
. "$(dirname "$0")/lib.sh"

FTVM_NBD_MEMSERVER=${FTVM_NBD_MEMSERVER:?FTVM_NBD_MEMSERVER must name the ftvm-nbd-memserver binary}
SOCK=$WORK/nbd.sock
LOG=$WORK/memserver.log
uri() { echo "nbd+unix:///$1?socket=$SOCK"; }

"$FTVM_NBD_MEMSERVER" "$SOCK" --export "disk:64M:rw:the test disk" --export ro:1M:ro \
	--export "empty:0" --export copy:16M >>"$LOG" 2>&1 &
PIDS[memserver]=$!
answers() { nbdinfo --size "$(uri disk)" >/dev/null 2>&1; }
wait_for 5000 "the memserver answering" answers

# ---- nbdinfo: what the handshake says ----
nbdinfo --json "$(uri disk)" >"$WORK/info.json" || fail "nbdinfo --json failed"
for check in "export-size=67108864" "block_size_minimum=1" "block_size_preferred=4096" \
	"block_size_maximum=33554432" "can_flush=true" "can_fua=true" "can_trim=true" \
	"can_zero=true" "can_multi_conn=true" "is_read_only=false" "description=the test disk" \
	"export-name=disk"; do
	key=${check%%=*} want=${check#*=}
	got=$(jq -r ".exports[0][\"$key\"]" "$WORK/info.json")
	[ "$got" = "$want" ] || fail "nbdinfo --json: $key is $got, expected $want"
done
[ "$(jq -r .protocol "$WORK/info.json")" = newstyle-fixed ] || fail "not fixed newstyle"
ok "nbdinfo: 64M, block sizes 1/4096/32M, flush fua trim zero multi-conn, description"

nbdinfo --json "$(uri ro)" >"$WORK/ro.json" || fail "nbdinfo --json ro failed"
[ "$(jq -r '.exports[0].is_read_only' "$WORK/ro.json")" = true ] || fail "ro is not read-only"
[ "$(jq -r '.exports[0].description' "$WORK/ro.json")" = null ] ||
	fail "ro has a description: $(jq -c . "$WORK/ro.json")"
ok "nbdinfo: ro is read-only, without a description"

nbdinfo --list --json "$(uri "")" >"$WORK/list.json" || fail "nbdinfo --list failed"
names=$(jq -r '[.exports[]["export-name"]] | join(",")' "$WORK/list.json")
[ "$names" = "disk,ro,empty,copy" ] || fail "nbdinfo --list: exports $names, expected disk,ro,empty,copy"
ok "nbdinfo --list: $names"

# An unknown export: refused at GO, and the server still serves.
if nbdinfo "$(uri nope)" >"$WORK/nope.out" 2>&1; then
	fail "nbdinfo of an unknown export succeeded"
fi
grep -q "No such file" "$WORK/nope.out" || fail "unknown export: $(cat "$WORK/nope.out")"
ok "an unknown export refused: $(head -n1 "$WORK/nope.out")"

# ---- qemu-io: data ----
# qio ARGS...: qemu-io on a raw image, failing the test when it fails (a
# pattern that does not verify among them); its output in $WORK/qio.out.
qio() {
	qemu-io -f raw "$@" >"$WORK/qio.out" 2>&1 || fail "qemu-io $*: $(cat "$WORK/qio.out")"
}
qio -c 'write -P 0xab 0 64k' -c 'read -P 0xab 0 64k' "$(uri disk)"
out=$(cat "$WORK/qio.out")
echo "$out" | grep -q "read 65536/65536" || fail "qemu-io 64k: $out"
! echo "$out" | grep -qi "pattern verification failed\|error" || fail "qemu-io 64k: $out"
ok "qemu-io: 64 KiB written and read back"

# Unaligned 512-byte writes between aligned data, FUA, flush.
qio -c 'write -P 0x11 512 512' -c 'write -P 0x22 1536 512' -c 'write -f -P 0x33 3000 100' \
	-c 'read -P 0xab 0 512' -c 'read -P 0x11 512 512' -c 'read -P 0xab 1024 512' \
	-c 'read -P 0x22 1536 512' -c 'read -P 0x33 3000 100' -c 'read -P 0xab 3100 1000' \
	-c flush "$(uri disk)"
out=$(cat "$WORK/qio.out")
[ "$(echo "$out" | grep -c '^read ')" = 6 ] || fail "qemu-io unaligned: $out"
! echo "$out" | grep -qi "verification failed\|error" || fail "qemu-io unaligned: $out"
ok "qemu-io: unaligned 512-byte and 100-byte (FUA) writes, neighbours intact, flush"

# Write zeroes (NBD_CMD_WRITE_ZEROES), with FUA, and discard (NBD_CMD_TRIM).
qio -c 'write -z 8k 8k' -c 'read -P 0 8k 8k' -c 'write -z -f 20k 4k' -c 'read -P 0 20k 4k' \
	-c 'read -P 0xab 16k 4k' -c 'discard 32k 16k' -c 'read -P 0xab 48k 16k' "$(uri disk)"
out=$(cat "$WORK/qio.out")
echo "$out" | grep -q "discard 16384/16384" || fail "qemu-io discard: $out"
[ "$(echo "$out" | grep -c '^read ')" = 4 ] || fail "qemu-io zeroes: $out"
! echo "$out" | grep -qi "verification failed\|error" || fail "qemu-io zeroes: $out"
ok "qemu-io: write -z (with and without FUA) reads as zeroes, discard"

# Past the end of the export: refused by qemu before the wire, so read the
# last bytes instead; and the read-only export reads.
qio -c 'read -P 0 67108352 512' "$(uri disk)"
out=$(cat "$WORK/qio.out")
echo "$out" | grep -q "^read 512/512" || fail "qemu-io last sector: $out"
qio -r -c 'read -P 0 0 1M' "$(uri ro)"
out=$(cat "$WORK/qio.out")
echo "$out" | grep -q "^read 1048576/1048576" || fail "qemu-io read-only: $out"
ok "qemu-io: the last sector, and the read-only export read"

# ---- nbdcopy: a file in and out ----
head -c $((5 << 20)) /dev/urandom >"$WORK/in"
head -c 12345 /dev/urandom >>"$WORK/in"
nbdcopy "$WORK/in" "$(uri copy)" || fail "nbdcopy in failed"
nbdcopy "$(uri copy)" "$WORK/out" || fail "nbdcopy out failed"
cmp -n "$(stat -c %s "$WORK/in")" "$WORK/in" "$WORK/out" || fail "nbdcopy: what came out differs"
[ "$(stat -c %s "$WORK/out")" = $((16 << 20)) ] || fail "nbdcopy: $(stat -c %s "$WORK/out") bytes out"
ok "nbdcopy: $(stat -c %s "$WORK/in") bytes in and out unchanged (multi-conn)"

# ---- garbage ----
# raw PYTHON: a python3 script with a socket s connected to the server, the
# greeting read, and helpers; it prints what it saw.
raw() {
	python3 - "$SOCK" <<-PY
	import socket, struct, sys
	s = socket.socket(socket.AF_UNIX)
	s.connect(sys.argv[1])
	s.settimeout(5)
	def recvn(n):
	    b = b""
	    while len(b) < n:
	        c = s.recv(n - len(b))
	        if not c:
	            break
	        b += c
	    return b
	def closed():
	    try:
	        return s.recv(1) == b""
	    except ConnectionResetError:
	        return True
	greeting = recvn(18)
	assert greeting[:16] == b"NBDMAGICIHAVEOPT", greeting
	def option(opt, data=b""):
	    s.sendall(b"IHAVEOPT" + struct.pack(">II", opt, len(data)) + data)
	$1
	PY
}

# Random bytes as client flags and options.
closes() { grep -c "handshake closed: " "$LOG" || true; }
before=$(closes)
head -c 65536 /dev/urandom | "$POKE" send "$SOCK"
closed_more() { [ "$(closes)" -gt "$before" ]; }
wait_for 3000 "the memserver to close on garbage" closed_more
ok "garbage in the handshake: $(grep "handshake closed: " "$LOG" | tail -n1)"

# A client that is not fixed newstyle.
raw 's.sendall(struct.pack(">I", 0)); assert closed(); print("closed")' >/dev/null ||
	fail "a plain newstyle client was not closed"
grep -q "does not speak fixed newstyle" "$LOG" || fail "no reason logged for plain newstyle"
# An option with more than 8 KiB of data.
raw 's.sendall(struct.pack(">I", 1)); option(99, bytes(9000)); assert closed()' ||
	fail "an oversized option did not close"
grep -q "more than 8192" "$LOG" || fail "no reason logged for the oversized option"
# Too many options.
raw 's.sendall(struct.pack(">I", 1))
for i in range(65):
    try:
        option(8)
    except OSError:
        break
assert closed()' 2>/dev/null || true
wait_for 3000 "the memserver to close on the 65th option" grep -q "more than 64 options" "$LOG"
ok "plain newstyle, an option over 8 KiB and a 65th option: each closed with its reason"

# After the handshake: a good READ, then a request with a bad magic.
raw 's.sendall(struct.pack(">I", 3))
option(1, b"disk")
hdr = recvn(10)
assert struct.unpack(">QH", hdr) == (64 << 20, 0x16d), hdr
s.sendall(struct.pack(">IHHQQI", 0x25609513, 0, 0, 7, 0, 512))
rep = recvn(16 + 512)
assert rep[:16] == struct.pack(">IIQ", 0x67446698, 0, 7), rep[:16]
s.sendall(struct.pack(">IHHQQI", 0x25609513, 0, 9, 8, 0, 512))
rep = recvn(16)
assert rep == struct.pack(">IIQ", 0x67446698, 22, 8), rep
s.sendall(struct.pack(">IHHQQI", 0x25609513, 0, 1, 9, (64 << 20) - 4, 8) + bytes(8))
rep = recvn(16)
assert rep == struct.pack(">IIQ", 0x67446698, 28, 9), rep
s.sendall(b"\xde\xad\xbe\xef" + bytes(24))
assert closed()' || fail "the transmission-phase exchange went wrong"
grep -q "not a request (bad magic) after 3 requests" "$LOG" || fail "no bad magic logged"
ok "transmission: READ answered, an unknown command EINVAL, a write past the end ENOSPC, bad magic closed"

# GO on the read-only export: writes and trims refused with EPERM, then DISC.
raw 's.sendall(struct.pack(">I", 1))
option(7, struct.pack(">I", 2) + b"ro" + struct.pack(">HH", 1, 3))
infos = {}
while True:
    magic, opt, typ, n = struct.unpack(">QIII", recvn(20))
    assert magic == 0x3e889045565a9 and opt == 7, (magic, opt)
    data = recvn(n)
    if typ == 1:
        break
    assert typ == 3, typ
    infos[struct.unpack(">H", data[:2])[0]] = data[2:]
assert infos[0] == struct.pack(">QH", 1 << 20, 0x16f), infos[0]
assert infos[3] == struct.pack(">III", 1, 4096, 32 << 20), infos[3]
s.sendall(struct.pack(">IHHQQI", 0x25609513, 0, 1, 1, 0, 4096) + bytes(4096))
assert recvn(16) == struct.pack(">IIQ", 0x67446698, 1, 1)
s.sendall(struct.pack(">IHHQQI", 0x25609513, 0, 4, 2, 0, 4096))
assert recvn(16) == struct.pack(">IIQ", 0x67446698, 1, 2)
s.sendall(struct.pack(">IHHQQI", 0x25609513, 0, 2, 3, 0, 0))
assert closed()' || fail "the read-only exchange went wrong"
tail -n 1 "$LOG" | grep -q "disconnected after 3 requests" || fail "no DISC logged"
ok "GO on the read-only export: WRITE and TRIM refused with EPERM, DISC closes"

# The server still answers, and kept the data.
qio -r -c 'read -P 0xab 16k 4k' "$(uri disk)"
out=$(cat "$WORK/qio.out")
echo "$out" | grep -q "^read 4096/4096" || fail "after garbage: $out"
kill -0 "${PIDS[memserver]}" || fail "the memserver died"
ok "after the garbage the memserver still serves its data"
