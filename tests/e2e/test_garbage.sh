#!/usr/bin/env bash
# Garbage on the partner port or the client socket is dropped with a logged
# reason; the daemon goes on serving and its partner link is untouched.
. "$(dirname "$0")/lib.sh"

start_pair
changes=$(status_field a partner.link_changes)

# Random bytes on the partner port, several times.
for i in 1 2 3; do
	head -c 65536 /dev/urandom >"/dev/tcp/127.0.0.1/$PORT_A" 2>/dev/null || true
done
wait_for 3000 "a logs the bad frame" grep -q "dropped connection from .*bad frame" "$WORK/a.log"
ok "garbage on the partner port dropped: $(grep -m1 'bad frame' "$WORK/a.log")"

# A well-framed message that is not an envelope: valid header, bad payload.
python3 - "$PORT_A" <<'PY'
import socket, struct, sys
payload = b"\xff" * 40
crc_poly = 0x82F63B78
def crc32c(data):
    crc = 0xFFFFFFFF
    for b in data:
        crc ^= b
        for _ in range(8):
            crc = (crc >> 1) ^ crc_poly if crc & 1 else crc >> 1
    return crc ^ 0xFFFFFFFF
head = b"FV\x01\x00" + struct.pack(">I", len(payload))
c = crc32c(head + payload)  # over the 8 header bytes, then the payload
s = socket.create_connection(("127.0.0.1", int(sys.argv[1])))
s.sendall(head + struct.pack(">I", c) + payload)
s.settimeout(2)
try:
    s.recv(100)
except Exception:
    pass
PY
wait_for 3000 "a logs the undecodable envelope" grep -q "envelope does not parse" "$WORK/a.log"
ok "framed garbage dropped: $(grep -m1 'does not parse' "$WORK/a.log")"

# Garbage on the client socket.
python3 - "$WORK/a.sock" <<'PY'
import os, socket, sys
s = socket.socket(socket.AF_UNIX)
s.connect(sys.argv[1])
s.sendall(os.urandom(4096))
s.settimeout(2)
try:
    s.recv(100)
except Exception:
    pass
PY
ctl a status >/dev/null || fail "a stopped serving clients after garbage"
ok "garbage on the client socket: a still serves"

field_is a partner.link up || fail "the partner link dropped"
[ "$(status_field a partner.link_changes)" = "$changes" ] || fail "the partner link flapped"
kill -0 "${PIDS[a]}" || fail "a died"
ok "a kept its link to b throughout ($changes link change)"
