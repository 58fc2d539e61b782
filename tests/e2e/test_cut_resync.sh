#!/usr/bin/env bash
# A resync that ended on the rejoiner but not on the survivor (node/ha/HA.md,
# "Solo and rejoin"): b applied ResyncEnd and took a's epoch, and the link
# went before its answer reached a. a stays solo; b comes back at a's own
# epoch without what a served alone since. Catching the real race needs the
# link cut within microseconds, so the test builds the state it leaves: a
# takes over from a killed b and serves writes alone, and b's page table is
# given a's epoch while b is down. a must then resync b from a new epoch
# (before the fix both waited for ever, each sure the other was not behind)
# and b must end with a's newest bytes.
. "$(dirname "$0")/lib.sh"

start_pair

guid=$(ctl a alloc --size 8192)
echo before | ctl a write "$guid" 0 >/dev/null

kill -9 "${PIDS[b]}"
wait "${PIDS[b]}" 2>/dev/null || true
unset 'PIDS[b]'
wait_for 5000 "a takes over" field_is a state solo
epoch=$(status_field a epoch)
echo "written while alone" | ctl a write "$guid" 0 >/dev/null
echo "page 1 alone" | ctl a write "$guid" 1 >/dev/null
ok "a took over at epoch $epoch and wrote alone"

# What b's ResyncEnd would have left: a's epoch in b's page table.
"$POKE" sql "$WORK/b/pagetable.db" "INSERT OR REPLACE INTO meta(key, value) VALUES ('epoch', ?)" "$epoch"
start_node b
grep -q "allocations loaded, epoch $epoch\$" "$WORK/b.log" || fail "b did not come back at epoch $epoch"
wait_for 10000 "a resyncs b, both active" pair_up
new_epoch=$(status_field a epoch)
[ "$new_epoch" = $((epoch + 1)) ] || fail "a is at epoch $new_epoch, not $((epoch + 1))"
[ "$(status_field b epoch)" = "$new_epoch" ] || fail "b is at epoch $(status_field b epoch)"
grep -q "is at our epoch $epoch but starting" "$WORK/a.log" ||
	fail "a's log does not say why it moved to a new epoch"
ok "b at a's epoch $epoch, starting: a moved to epoch $new_epoch and resynced it"

[ "$(ctl b read "$guid" 0 | tr -d '\0')" = "written while alone" ] ||
	fail "b's page 0 is not what a wrote alone"
[ "$(ctl b read "$guid" 1 | tr -d '\0')" = "page 1 alone" ] ||
	fail "b's page 1 is not what a wrote alone"
ctl a verify >/dev/null || fail "verify: the mirror is not equal after the resync"
ok "b reads what a wrote alone; verify says the mirror is equal"
