#!/usr/bin/env bash
# ftvmctl events (node/EVENTS.md): a follower with --now first gets the
# node's state as it is, then each change as it happens. A drill is
# followed through a's stream: b killed, a takes over (link down, takeover,
# state solo), b comes back and is resynced (link up, authenticated, resync
# start and end, state active); a volume created and deleted; a warning of
# the log. Then the bounds: a 17th follower is refused, a follower that does
# not read is dropped while the node goes on, and a bad --count is a usage
# error.
. "$(dirname "$0")/lib.sh"

write_nbd_pair_configs
start_node a
start_node b
wait_for 5000 "pair linked" pair_up

adopt_pids() {
	local id
	for id in a b; do
		PIDS[$id]=$(status_field "$id" pid)
	done
}

# follow ID NAME: `ftvmctl events --json --now` on ID into $WORK/NAME.
follow() {
	"$FTVMCTL" --config "$WORK/$1.conf" --json events --now >"$WORK/$2" 2>"$WORK/$2.err" &
	FOLLOWER=$!
	wait_for 5000 "$2 following" grep -q '"current":true' "$WORK/$2"
}

# seen FILE JQ-FILTER: some event in FILE matches.
seen() { jq -e -s "any(.[]; $2)" "$1" >/dev/null 2>&1; }

follow a events.a
fa=$FOLLOWER
seen "$WORK/events.a" '.current and .type == "state" and .what == "active" and .ack == "commit"' ||
	fail "--now did not start with the state: $(head -3 "$WORK/events.a")"
seen "$WORK/events.a" '.current and .type == "link" and .what == "up" and .partner == "b"' ||
	fail "--now did not say the link: $(head -3 "$WORK/events.a")"
ok "--now: $(jq -c -s 'map(select(.current) | [.type, .what])' "$WORK/events.a")"

ctl a volume create vol1 --size 1M >/dev/null
ctl a volume delete vol1 >/dev/null
wait_for 5000 "volume events" seen "$WORK/events.a" '.type == "volume" and .what == "deleted" and .name == "vol1"'
seen "$WORK/events.a" '.type == "volume" and .what == "created" and .name == "vol1" and .size == 1048576' ||
	fail "no volume created event: $(cat "$WORK/events.a")"
ok "a volume created and deleted, in the stream"

J=$(ctl a --json drill kill b --timeout 20) || fail "drill kill b: $J"
adopt_pids
wait_for 5000 "pair whole" pair_up
want=(
	'.type == "link" and .what == "down" and .partner == "b"'
	'.type == "takeover" and .what == "done"'
	'.type == "state" and .what == "solo" and .step == "took over"'
	'.type == "auth" and .what == "authenticated" and .partner == "b"'
	'.type == "link" and .what == "up"'
	'.type == "resync" and .what == "start" and .role == "sender"'
	'.type == "resync" and .what == "end" and .pages_sent >= 0'
	'.type == "state" and .what == "active" and .step == "sent"'
	'.type == "warning"'
)
for w in "${want[@]}"; do
	wait_for 5000 "event $w" seen "$WORK/events.a" "$w"
done
# In order: each wanted event after the one before, seq rising.
prev=0
for w in "${want[@]:0:8}"; do
	seq=$(jq -s "map(select((.current | not) and $w)) | .[0].seq" "$WORK/events.a")
	[ "$seq" -gt "$prev" ] || fail "event $w (seq $seq) came before the one wanted before it (seq $prev): $(jq -c '[.seq, .type, .what]' "$WORK/events.a" | tr '\n' ' ')"
	prev=$seq
done
jq -s -e '[.[] | select(.current | not) | .seq] as $s | $s == ($s | sort) and ($s | unique | length) == ($s | length)' "$WORK/events.a" >/dev/null ||
	fail "seq not rising: $(jq -c .seq "$WORK/events.a" | tr '\n' ' ')"
ok "the drill through a's stream: $(jq -r -s 'map(select(.current | not) | "\(.type) \(.what)") | join(", ")' "$WORK/events.a" | cut -c1-400)"

# A stranger with the wrong key at a's partner port.
"$FTVMCTL" keygen "$WORK/wrong.key" >/dev/null
"$FTVM_STRANGER" "$E2E_ADDR:$PORT_A" --key "$WORK/wrong.key" >"$WORK/stranger.out" 2>&1 ||
	fail "ftvm-stranger: $(cat "$WORK/stranger.out")"
wait_for 5000 "auth refused" seen "$WORK/events.a" '.type == "auth" and .what == "refused" and (.peer | length > 0)'
ok "a stranger with the wrong key: $(jq -c -s 'map(select(.type == "auth" and .what == "refused")) | .[0] | {reason, peer}' "$WORK/events.a")"

# The text form.
out=$(ctl a events --now --count 2) || fail "events --now --count 2 exited $?"
[ "$(wc -l <<<"$out")" = 2 ] && grep -q "now state active (epoch=" <<<"$out" ||
	fail "text events: $out"
ok "text: $(head -1 <<<"$out")"

# Bounds.
pids=()
for ((i = 1; i < 16; i++)); do
	"$FTVMCTL" --config "$WORK/a.conf" events >/dev/null 2>&1 &
	pids+=($!)
done
followers() { [ "$(status_field a events.followers)" = "$1" ]; }
wait_for 10000 "16 followers (a's own the 16th)" followers 16
rc=0
out=$(ctl a events 2>&1) || rc=$?
[ "$rc" = 1 ] && grep -q "16 clients follow" <<<"$out" || fail "a 17th follower: rc $rc, $out"
kill "${pids[@]}" 2>/dev/null || true
wait "${pids[@]}" 2>/dev/null || true
wait_for 5000 "the 15 gone" followers 1
ok "a 17th follower refused: $out; the others' going ended their streams"

rc=0
out=$(ctl a events --count 0 2>&1) || rc=$?
[ "$rc" = 2 ] || fail "--count 0: rc $rc, $out"
kill "$fa" 2>/dev/null || true
wait "$fa" 2>/dev/null || true
ctl_ok a || fail "a stopped serving"
ok "bad --count refused (2); a serves"
