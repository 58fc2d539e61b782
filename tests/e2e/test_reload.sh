#!/usr/bin/env bash
# SIGHUP reloads the configuration (systemd/OPERATIONS.md, "Reloading the
# configuration"): log_level takes effect at once, every other key changed
# is named as waiting for a restart, a file that does not load is named and
# changes nothing, and the node serves throughout, its partner linked.
. "$(dirname "$0")/lib.sh"

start_pair
PID_A=$(status_field a pid)

# reload: SIGHUP to a, then the log line it must print (a grep -F pattern).
reload() {
	local want=$1 before
	before=$(wc -l <"$WORK/a.log")
	kill -HUP "$PID_A"
	wait_for 5000 "a logs '$want'" eval "tail -n +$((before + 1)) '$WORK/a.log' | grep -qF -- '$want'"
}
debug_lines() { grep -c '^<7>' "$WORK/a.log"; }

reload "reload: $WORK/a.conf: nothing changed"
ok "unchanged: said so"

sed -i 's/^log_level = debug/log_level = info/; s/^size = 16M/size = 32M/' "$WORK/a.conf"
reload "reload: [memory] size changed (was 16M, now 32M): it takes effect when the node restarts"
grep -qF "reload: log_level info, was debug" "$WORK/a.log" || fail "log_level change not said"
n=$(debug_lines)
ctl_ok a
[ "$(debug_lines)" -eq "$n" ] || fail "debug lines after log_level = info"
[ "$(status_field a frames.total)" = "$(status_field b frames.total)" ] ||
	fail "the pool changed size without a restart"
ok "log_level info at once, [memory] size named for the restart"

printf 'bogus = 1\n' >>"$WORK/a.conf"
reload "reload: $WORK/a.conf:"
grep -F "reload: " "$WORK/a.log" | tail -1 | grep -qF "unknown key; the node goes on as it is" ||
	fail "the bad file's reason: $(grep -F 'reload: ' "$WORK/a.log" | tail -1)"
ok "a file that does not load: $(grep -F 'reload: ' "$WORK/a.log" | tail -1 | cut -c1-120)"

sed -i '/^bogus/d; s/^log_level = info/log_level = debug/' "$WORK/a.conf"
reload "reload: log_level debug, was info"
n=$(debug_lines)
ctl_ok a
[ "$(debug_lines)" -gt "$n" ] || fail "no debug lines after log_level = debug"
ok "log_level debug again at once"

[ "$(status_field a pid)" = "$PID_A" ] || fail "node a restarted"
pair_up || fail "the pair is not whole after the reloads"
ok "four reloads: the same process, serving, the pair whole"
