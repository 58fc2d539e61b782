#!/usr/bin/env bash
# The kill, hang and cut drills at [node] ack = mirror and durable (commit,
# the default, is test_drill.sh's): each reports a takeover, nothing
# acknowledged lost, and verify equal once the pair is whole again
# (node/vmm/VMM.md, "Acknowledgement levels").
. "$(dirname "$0")/lib.sh"

adopt_pids() {
	local id
	for id in a b; do
		PIDS[$id]=$(status_field "$id" pid)
	done
}

# drill LEVEL ARGS...: the drill with --json; nothing lost, verify equal.
drill() {
	local level=$1 rc=0 J
	shift
	J=$(ctl a --json drill "$@" --timeout 20 2>"$WORK/drill.err") || rc=$?
	adopt_pids
	[ "$rc" -eq 0 ] || fail "$level: drill $* exited $rc: $J $(cat "$WORK/drill.err")"
	[ "$(jq -r .lost <<<"$J")" = 0 ] || fail "$level: drill $* lost writes: $J"
	[ "$(jq -r .equal <<<"$J")" = true ] || fail "$level: drill $* left the mirror unequal: $J"
	[ "$(jq -r .checked <<<"$J")" -gt 0 ] || fail "$level: drill $* checked nothing: $J"
	[ "$(jq -r .takeover_ms <<<"$J")" -gt 0 ] || fail "$level: no takeover in drill $*: $J"
	wait_for 5000 "pair whole after drill $*" pair_up
	ok "$level: drill $*: $(jq -c '{checked, lost, equal, takeover_ms, resync_ms}' <<<"$J")"
}

for level in mirror durable; do
	rm -rf "$WORK/a" "$WORK/b" "$WORK/shared"
	write_pair_configs
	sed -i "/^\[node\]/a ack = $level" "$WORK/a.conf" "$WORK/b.conf"
	start_node a
	start_node b
	wait_for 5000 "pair linked" pair_up
	[ "$(status_field a ack)" = $level ] || fail "a acknowledges at $(status_field a ack)"
	drill $level kill b
	drill $level hang a 1
	drill $level cut 1
	ctl a --json verify | jq -e .equal >/dev/null || fail "$level: verify: $(ctl a verify 2>&1)"
	kill -TERM "${PIDS[a]}" "${PIDS[b]}"
	wait "${PIDS[a]}" "${PIDS[b]}" || true
	unset "PIDS[a]" "PIDS[b]"
done
