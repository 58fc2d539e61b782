#!/usr/bin/env bash
# Under systemd (Type=notify, WatchdogSec=): ftvmd sends READY=1 once serving,
# STATUS= with the partner state, WATCHDOG=1 at half of WATCHDOG_USEC, and
# STOPPING=1 on SIGTERM. tests/poke.py plays systemd's notify socket.
. "$(dirname "$0")/lib.sh"

write_pair_configs
NOTIFY="$WORK/notify.sock"
"$POKE" notify-listen "$NOTIFY" "$WORK/notify.txt" &
listener=$!
wait_for 5000 "notify listener bound" test -S "$NOTIFY"

# WATCHDOG_USEC=200000: pings expected every 100 ms.
NOTIFY_SOCKET=$NOTIFY WATCHDOG_USEC=200000 "$FTVMD" --config "$WORK/a.conf" >>"$WORK/a.log" 2>&1 &
PIDS[a]=$!
wait_for 5000 "READY=1" grep -q "^READY=1$" "$WORK/notify.txt"
grep -q "^STATUS=starting" "$WORK/notify.txt" || fail "no STATUS=starting with READY"
ok "READY=1 with $(grep -m1 '^STATUS=' "$WORK/notify.txt")"

start_node b
wait_for 5000 "STATUS says active" grep -q "^STATUS=active, epoch 1: partner b linked" \
	"$WORK/notify.txt"
ok "STATUS follows the partner: $(grep -m1 '^STATUS=active' "$WORK/notify.txt")"

pings() {
	grep -c '^WATCHDOG=1$' "$WORK/notify.txt" || true
}
five_more_pings() {
	[ "$(pings)" -ge $((before + 5)) ]
}
before=$(pings)
t0=$(now_ms)
wait_for 3000 "five more watchdog pings" five_more_pings
ok "watchdog: 5 more pings in $(($(now_ms) - t0)) ms (WATCHDOG_USEC 200 ms: one per 100 ms)"

kill -TERM "${PIDS[a]}"
wait "${PIDS[a]}" || fail "ftvmd exited with $? on SIGTERM"
unset 'PIDS[a]'
wait "$listener" || true
grep -q "^STOPPING=1$" "$WORK/notify.txt" || fail "no STOPPING=1 on SIGTERM"
ok "STOPPING=1 on SIGTERM"
