#!/usr/bin/env bash
# Calls through the failover window (node/ha/HA.md): between a partner's death
# and the survivor's takeover, what needs the partner waits for the pair's
# decision instead of failing.
#  - writers on both nodes (plain `ftvmctl write`, no --wait), two of them
#    on the survivor writing pages homed on each node; b is killed: not one
#    of the survivor's writes fails, and every acknowledged page reads back;
#  - a pointer grant and a whole-page write in flight when the link goes
#    are asked again once the survivor took over, and served;
#  - writes of one page parked in the window go on, each with its own bytes;
#  - `ftvmctl drill kill b` under a writer: failed_during 0;
#  - a request that waits longer than request_timeout_ms is refused then,
#    saying so, and the node serves on.
. "$(dirname "$0")/lib.sh"

# A window of 2 s: wide enough that "during it" is certain on a loaded host.
DEAD_AFTER_MS=$((2000 * E2E_TIME_SCALE))
start_pair
ga=$(ctl a alloc --size 32K)
gb=$(ctl b alloc --size 32K)
gb2=$(ctl b alloc --size 32K) # b's own writer's: no two writers share a page

# writer NAME ID GUID: writes pages 0..7 of GUID through ID until told to
# stop ($WORK/stop); one line per call: "ok START_MS END_MS PAGE SEED" or
# "err START_MS END_MS PAGE: WHY".
writer() {
	local name=$1 id=$2 g=$3 n=0 p t0 out
	while [ ! -e "$WORK/stop" ]; do
		p=$((n % 8))
		n=$((n + 1))
		head -c 4096 < <(yes "$name $n") >"$WORK/data.$name"
		t0=$(now_ms)
		if out=$(ctl "$id" write "$g" "$p" --file "$WORK/data.$name" 2>&1); then
			echo "ok $t0 $(now_ms) $p $n" >>"$WORK/w.$name"
		else
			echo "err $t0 $(now_ms) $p: $out" >>"$WORK/w.$name"
		fi
	done
}
oks() { grep -c '^ok' "$WORK/w.$1" 2>/dev/null || true; }

rm -f "$WORK/stop"
writer a_own a "$ga" &
w1=$!
writer a_partners a "$gb" &
w2=$!
writer b_own b "$gb2" &
w3=$!
started() { [ "$(oks a_own)" -ge 10 ] && [ "$(oks a_partners)" -ge 10 ]; }
wait_for 30000 "writers under way" started
before_a_own=$(oks a_own)
before_a_partners=$(oks a_partners)
kill_ms=$(now_ms)
kill -9 "${PIDS[b]}"
wait "${PIDS[b]}" 2>/dev/null || true
unset "PIDS[b]"
wait_for $((DEAD_AFTER_MS * 5)) "a solo" field_is a state solo
# Some writes after the takeover too.
after_takeover=$(($(oks a_own) + 10))
more() { [ "$(oks a_own)" -ge "$after_takeover" ]; }
wait_for 30000 "writes after the takeover" more
touch "$WORK/stop"
wait "$w1" "$w2" "$w3" 2>/dev/null || true

for w in a_own a_partners; do
	if grep -q '^err' "$WORK/w.$w"; then
		fail "writer $w on the survivor saw $(grep -c '^err' "$WORK/w.$w") failed calls, the first: $(grep -m1 '^err' "$WORK/w.$w")"
	fi
done
during=$(($(oks a_own) - before_a_own + $(oks a_partners) - before_a_partners))
longest=$(awk -v k="$kill_ms" '$1 == "ok" && $2 >= k - 100 { d = $3 - $2; if (d > m) m = d } END { print m + 0 }' "$WORK/w.a_own" "$WORK/w.a_partners")
ok "b killed under writers: the survivor's $during writes since all acknowledged, none failed (the longest waited $longest ms, dead_after_ms $DEAD_AFTER_MS); b's writer saw $(grep -c '^err' "$WORK/w.b_own" || true) failures"

# Every acknowledged page reads back from the survivor as last acknowledged.
for w in a_own a_partners; do
	g=$([ "$w" = a_own ] && echo "$ga" || echo "$gb")
	for p in 0 1 2 3 4 5 6 7; do
		seed=$(awk -v p="$p" '$1 == "ok" && $4 == p { s = $5 } END { print s }' "$WORK/w.$w")
		[ -n "$seed" ] || continue
		head -c 4096 < <(yes "$w $seed") >"$WORK/want"
		ctl a read "$g" "$p" | cmp -s - "$WORK/want" || fail "$g page $p does not hold $w's last acknowledged write ($seed)"
	done
done
ok "every page holds its last acknowledged write"

start_node b
wait_for 15000 "b resynced" pair_up
ctl a --json verify | jq -e .equal >/dev/null || fail "verify: $(ctl a verify 2>&1)"
ok "b back and resynced, verify equal"

# Calls in flight when the link goes: b stopped, a's pointer grant and
# whole-page write to pages b owns wait for b's answer; b killed, the link
# lost fails them, and they are asked again once a took over.
FTVM_HOLD=${FTVM_HOLD:?FTVM_HOLD must name the ftvm-hold binary}
kill -STOP "${PIDS[b]}"
hold_start inflight a "$gb" 6 write
wait_for 5000 "the grant sent to b" hold_said inflight asking
"$FTVMCTL" --config "$WORK/a.conf" write "$gb" 7 --file "$(fill 7)" >"$WORK/inflight.out" 2>&1 &
inflight_write=$!
# Both clients connected to a, which sends what they ask to b at once.
wait_for 5000 "the pointer's client at a" connected a "${PIDS[inflight]}"
wait_for 5000 "the write's client at a" connected a "$inflight_write"
field_is a partner.link up || fail "the link went down before b was killed: the calls were parked, not in flight"
kill -9 "${PIDS[b]}"
kill -CONT "${PIDS[b]}" 2>/dev/null || true
wait "${PIDS[b]}" 2>/dev/null || true
unset "PIDS[b]"
wait_for $((DEAD_AFTER_MS * 5)) "the grant in flight held after the takeover" hold_said inflight held
wait "$inflight_write" || fail "the write in flight failed: $(cat "$WORK/inflight.out")"
hold_end inflight || fail "the pointer taken in flight: $(cat "$WORK/inflight.err")"
field_is a state solo || fail "a is $(status_field a state)"
ctl a read "$gb" 7 | cmp -s - "$(fill 7)" || fail "the write in flight did not land"
ok "a pointer grant and a write in flight when b died were asked again after the takeover and served"
start_node b
wait_for 15000 "b resynced" pair_up

# Writes of one page parked in the window go on in order once a took over,
# each after the one before it (they wait in the paging queue), each with
# its own bytes: a request parked is dispatched as it came, not from a copy
# freed at once, whose freed memory went into the page.
kill -9 "${PIDS[b]}"
wait "${PIDS[b]}" 2>/dev/null || true
unset "PIDS[b]"
wait_for 5000 "a saw the link go" field_is a partner.link down
parked=()
for i in 1 2 3 4 5 6; do
	"$FTVMCTL" --config "$WORK/a.conf" write "$ga" 3 --wait --file "$(fill $((20 + i)))" >"$WORK/parked.$i" 2>&1 &
	parked+=($!)
	wait_for 5000 "write $i at a" connected a "$!"
done
field_is a state active || fail "a is $(status_field a state): the writes came after the window, not in it"
for i in 1 2 3 4 5 6; do
	wait "${parked[$((i - 1))]}" || fail "parked write $i failed: $(cat "$WORK/parked.$i")"
done
field_is a state solo || fail "a is $(status_field a state)"
ctl a read "$ga" 3 >"$WORK/page3"
whole=
for i in 1 2 3 4 5 6; do cmp -s "$WORK/page3" "$(fill $((20 + i)))" && whole=$i; done
[ -n "$whole" ] || fail "page 3 holds none of the parked writes' blocks: $(od -A d -t x8 "$WORK/page3" | head -n 2)"
ok "6 writes of one page parked in the window: all acknowledged after the takeover, the page holds write $whole's block whole"
start_node b
wait_for 15000 "b resynced" pair_up

# The drill: its workload writes through the survivor during the fault.
rm -f "$WORK/stop"
writer a_own a "$ga" &
w1=$!
ctl a --json drill kill b --timeout 60 >"$WORK/drill.json" || fail "drill kill b: $(cat "$WORK/drill.json")"
touch "$WORK/stop"
wait "$w1" 2>/dev/null || true
PIDS[b]=$(status_field b pid)
jq -e '.failed_during == 0 and .acked_during > 0 and .lost == 0 and .equal' "$WORK/drill.json" >/dev/null ||
	fail "drill kill b: $(cat "$WORK/drill.json")"
ok "drill kill b: $(jq -c '{acked_during, failed_during, takeover_ms, lost, equal}' "$WORK/drill.json")"

# Past request_timeout_ms a waiting request is refused, saying why.
for id in a b; do
	kill -TERM "${PIDS[$id]}"
	wait "${PIDS[$id]}" 2>/dev/null || true
	unset "PIDS[$id]"
	echo "request_timeout_ms = 100" >>"$WORK/$id.conf" # [failover] is last
done
start_node a
start_node b
wait_for 15000 "pair back" pair_up
kill -9 "${PIDS[b]}"
expect_fail a "partner unavailable for 100 ms (request_timeout_ms): the link is down" write "$ga" 0 --file "$(fill 9)"
wait "${PIDS[b]}" 2>/dev/null || true
unset "PIDS[b]"
wait_for $((DEAD_AFTER_MS * 5)) "a solo" field_is a state solo
ctl a write "$ga" 0 --file "$(fill 9)" >/dev/null || fail "a does not serve after the takeover"
ok "a write that waited past request_timeout_ms was refused; a serves on alone"
