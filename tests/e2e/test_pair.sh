#!/usr/bin/env bash
# Two real daemons find each other, handshake, keep the link with heartbeats,
# and `ftvmctl status` on either shows the partner; SIGTERM stops them cleanly.
. "$(dirname "$0")/lib.sh"

write_pair_configs
start_node a
start_node b
wait_for 5000 "both nodes active with the link up" pair_up
ok "pair linked"
wait_for 2000 "each node sees the other active" \
	eval 'field_is a partner.state active && field_is b partner.state active'

[ "$(status_field a partner.id)" = b ] || fail "a's partner is not b"
[ "$(status_field b partner.id)" = a ] || fail "b's partner is not a"
for id in a b; do
	[ "$(status_field "$id" transport)" = "$E2E_TRANSPORT" ] ||
		fail "$id: transport is $(status_field "$id" transport), not $E2E_TRANSPORT"
done
ok "transport $E2E_TRANSPORT on both ($(status_field a transport_reason))"
[ "$(status_field a frames.total)" = 4096 ] || fail "16M of 4K pages is not 4096 frames"
ctl a status | grep -q "partner b: link up" || fail "text status lacks the partner line"
ok "status shows the partner on both nodes"

# Heartbeats keep an idle link up far past dead_after_ms (300 ms): checked
# over and over for 1.5 s, the time being what is tested.
changes=$(status_field a partner.link_changes)
t0=$(now_ms)
while [ $(($(now_ms) - t0)) -lt 1500 ]; do
	[ "$(status_field a partner.link_changes)" = "$changes" ] || fail "idle link flapped"
	field_is a partner.link up || fail "idle link went down"
done
ok "idle link held by heartbeats for 1.5 s (${changes} link change)"

kill -TERM "${PIDS[a]}"
wait "${PIDS[a]}" || fail "ftvmd a exited with $? on SIGTERM"
unset 'PIDS[a]'
grep -q "stopped" "$WORK/a.log" || fail "a did not log a clean stop"
[ ! -e "$WORK/a.sock" ] || fail "a left its client socket behind"
wait_for 2000 "b sees a gone" field_is b partner.link down
ok "SIGTERM: clean exit 0, socket removed, partner notices"
