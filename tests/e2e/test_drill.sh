#!/usr/bin/env bash
# ftvmctl drill on a pair started by hand: kill, hang, cut and restart each
# report a takeover, nothing lost and the mirror equal again, in text and in
# JSON; bad drills are refused with a reason and change nothing.
. "$(dirname "$0")/lib.sh"

start_pair

# The drill starts the nodes it kills again itself; the cleanup must find them.
adopt_pids() {
	local id
	for id in a b; do
		PIDS[$id]=$(status_field "$id" pid)
	done
}

# drill_json ARGS...: runs the drill with --json, checks the common promises,
# and leaves the object in $J.
drill_json() {
	local rc=0
	J=$(ctl a --json drill "$@" --timeout 20 2>"$WORK/drill.err") || rc=$?
	adopt_pids
	[ "$rc" -eq 0 ] || fail "drill $* exited $rc: $J $(cat "$WORK/drill.err")"
	[ "$(jq -r .lost <<<"$J")" = 0 ] || fail "drill $* lost writes: $J"
	[ "$(jq -r .equal <<<"$J")" = true ] || fail "drill $* left the mirror unequal: $J"
	[ "$(jq -r .checked <<<"$J")" -gt 0 ] || fail "drill $* checked nothing: $J"
	[ "$(jq -r .resync_pages <<<"$J")" -gt 0 ] || fail "drill $* resynced nothing: $J"
	jq -e 'has("detect_ms") and has("takeover_ms") and has("resync_ms")' <<<"$J" >/dev/null ||
		fail "drill $* JSON lacks keys: $J"
	wait_for 5000 "pair whole after drill $*" pair_up
}

drill_json kill b
[ "$(jq -r .takeover_ms <<<"$J")" -gt 0 ] || fail "no takeover in drill kill b: $J"
[ "$(jq -r .survivor <<<"$J")" = a ] || fail "drill kill b: survivor $(jq -r .survivor <<<"$J")"
ok "drill kill b: $J"

drill_json hang a 1
[ "$(jq -r .takeover_ms <<<"$J")" -gt 0 ] || fail "no takeover in drill hang a 1: $J"
grep -q "fencing this node" "$WORK/a.log" || fail "the hung a did not fence itself"
# The hang is a pause of a's event loop, which a tells once it runs again.
grep -Eq "event loop did not run for [0-9]+ ms \(dead_after_ms $DEAD_AFTER_MS\)" "$WORK/a.log" ||
	fail "a did not log its pause"
[ "$(status_field a loop_pause_max_ms)" -ge 900 ] ||
	fail "a's status shows no pause of the hang: $(ctl a --json status | jq -c '{loop_pauses, loop_pause_max_ms}')"
ok "drill hang a 1: $J"

drill_json cut 1
[ "$(jq -r .node <<<"$J")" = b ] || fail "drill cut: b (the larger id) must yield: $J"
grep -q "asked us to fence ourselves" "$WORK/b.log" || fail "b was not asked to fence itself"
ok "drill cut 1: $J"

drill_json restart b
ok "drill restart b: $J"

out=$(ctl a drill kill a --timeout 20) || fail "drill kill a in text failed: $out"
adopt_pids
grep -q "0 lost" <<<"$out" && grep -q "verify: equal" <<<"$out" || fail "text report: $out"
ok "drill kill a, text report: $(tr '\n' ' ' <<<"$out")"
wait_for 5000 "pair whole" pair_up

# On a terminal (script(1) gives it one) a line of progress, rewritten in
# place, comes before the report; piped (above) or with --json, none.
if command -v script >/dev/null; then
	script -qec "$FTVMCTL --config $WORK/a.conf drill restart b --timeout 20" /dev/null \
		>"$WORK/tty.out" 2>&1 || fail "drill on a terminal: $(cat -v "$WORK/tty.out")"
	adopt_pids
	grep -q $'\r\033\[Kdrill restart b: .*; [0-9]* writes acknowledged; [0-9.]* s' "$WORK/tty.out" ||
		fail "no progress line on a terminal: $(cat -v "$WORK/tty.out" | head -c 600)"
	grep -q "0 lost" "$WORK/tty.out" || fail "no report on a terminal: $(cat -v "$WORK/tty.out" | tail -c 600)"
	! grep -q $'\033\\[K' <<<"$out" || fail "a progress line in a pipe: $(cat -v <<<"$out")"
	wait_for 5000 "pair whole" pair_up
	ok "drill on a terminal: $(tr '\r' '\n' <"$WORK/tty.out" | grep -c "writes acknowledged") progress lines, then the report"
fi

epoch=$(status_field a epoch)

# Bad drills: usage errors (2) or refusals (1), nothing changes.
expect_exit() {
	local want=$1 pattern=$2 rc=0 out
	shift 2
	out=$(ctl a drill "$@" 2>&1) || rc=$?
	[ "$rc" -eq "$want" ] || fail "drill $* exited $rc, wanted $want: $out"
	grep -q -- "$pattern" <<<"$out" || fail "drill $* said '$out', wanted '$pattern'"
}
expect_exit 2 "want kill NODE" explode a
expect_exit 2 "takes NODE SECONDS" hang a
expect_exit 2 "SECONDS 'x'" cut x
expect_exit 2 "SECONDS '0'" hang b 0
expect_exit 1 "no node 'c'" kill c
expect_exit 2 "takes NODE" kill
[ "$(status_field a epoch)" = "$epoch" ] || fail "a refused drill changed the epoch"
[ "$(ctl a --json list | jq length)" = 0 ] || fail "drills left allocations behind"
ok "bad drills refused, nothing changed, no allocation left behind"

# A drill asked while the pair is not whole for a moment waits for it
# rather than refusing: b restarted and waiting for a, which is stopped until
# the drill has seen b starting, then goes on and resyncs b.
kill -9 "${PIDS[b]}"
wait "${PIDS[b]}" 2>/dev/null || true
wait_for 5000 "a solo" field_is a state solo
kill -STOP "${PIDS[a]}"
start_node b
field_is b state starting || fail "b is $(status_field b state), not starting"
"$FTVMCTL" --config "$WORK/b.conf" --json drill cut 1 --timeout 20 --partner-config "$WORK/a.conf" \
	>"$WORK/drill.json" 2>"$WORK/drill.err" &
drill=$!
# The drill asks b first (starting), then a, whose answer waits in its socket.
wait_for 5000 "the drill at b" connected b "$drill"
kill -CONT "${PIDS[a]}"
wait "$drill" || fail "drill cut 1 asked while b was rejoining: $(cat "$WORK/drill.json" "$WORK/drill.err")"
adopt_pids
jq -e '.lost == 0 and .equal' "$WORK/drill.json" >/dev/null || fail "drill: $(cat "$WORK/drill.json")"
ok "drill cut 1 asked while b was starting waited for the pair: $(cat "$WORK/drill.json")"
