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
head -c 40 /dev/zero | tr '\0' '\377' | "$POKE" send --frame "$PORT_A"
wait_for 3000 "a logs the undecodable envelope" grep -q "envelope does not parse" "$WORK/a.log"
ok "framed garbage dropped: $(grep -m1 'does not parse' "$WORK/a.log")"

# Garbage on the client socket.
head -c 4096 /dev/urandom | "$POKE" send "$WORK/a.sock"
ctl a status >/dev/null || fail "a stopped serving clients after garbage"
ok "garbage on the client socket: a still serves"

field_is a partner.link up || fail "the partner link dropped"
[ "$(status_field a partner.link_changes)" = "$changes" ] || fail "the partner link flapped"
kill -0 "${PIDS[a]}" || fail "a died"
ok "a kept its link to b throughout ($changes link change)"
