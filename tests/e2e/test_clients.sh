#!/usr/bin/env bash
# Seed 003's server memory allocate table (Fig. 13) on a real pair: each
# allocation keeps the name its client gave (ftvm_connect_named, `alloc
# --name`) on both nodes, through a takeover, a resync and a restart, and
# `ftvmctl clients` counts what each uid and name holds; a name that is not
# one is refused; a free of what is not allocated is a memory violation
# (Fig. 17 step S164) that changes nothing.
. "$(dirname "$0")/lib.sh"

start_pair
uid=$(id -u)

table() { ctl "$1" --json clients | jq -c '[.[] | [.uid, .name, .media, .allocations, .bytes]]'; }

g1=$(ctl a alloc --size 64K --name app-1)
ctl a alloc --size 64K --name app-1 >/dev/null
ctl b alloc --size 128K --name app-1 >/dev/null
ctl a alloc --size 4K >/dev/null
gd=$(ctl b alloc --size 8K --name db.main_2)
want="[[$uid,\"\",\"store\",1,4096],[$uid,\"app-1\",\"store\",3,262144],[$uid,\"db.main_2\",\"store\",1,8192]]"
for id in a b; do
	[ "$(table "$id")" = "$want" ] || fail "clients on $id: $(table "$id"), wanted $want"
done
ctl a clients | grep -q "^$uid  *app-1  *store  *3  *262144$" ||
	fail "clients text: $(ctl a clients)"
ok "both nodes count what each client holds: $want"

rc=0
out=$(ctl a alloc --size 4K --name 'no spaces' 2>&1) || rc=$?
[ "$rc" = 2 ] && grep -q "is not one" <<<"$out" || fail "a bad name: exit $rc: $out"
out=$(ctl a alloc --size 4K --name "$(printf 'x%.0s' $(seq 65))" 2>&1) || rc=$?
grep -q "is not one" <<<"$out" || fail "a 65-character name: $out"
[ "$(table a)" = "$want" ] || fail "a refused name changed the table: $(table a)"
ok "names that are not ones are refused, nothing allocated"

expect_fail a "memory violation: no allocation nosuch-9 to free" free nosuch-9
ctl a free "$gd" >/dev/null
expect_fail b "memory violation: no allocation $gd to free" free "$gd"
want="[[$uid,\"\",\"store\",1,4096],[$uid,\"app-1\",\"store\",3,262144]]"
[ "$(table b)" = "$want" ] || fail "after the frees: $(table b)"
ok "a free of what is not allocated is a memory violation; the table follows frees"

# Through a takeover, a resync and a restart: the names are in the page
# table and in every AllocateMemory.
kill -9 "${PIDS[b]}"
wait "${PIDS[b]}" 2>/dev/null || true
unset 'PIDS[b]'
wait_for $((DEAD_AFTER_MS + 2000)) "a takes over" field_is a state solo
ctl a alloc --size 4K --name solo-app >/dev/null
want="[[$uid,\"\",\"store\",1,4096],[$uid,\"app-1\",\"store\",3,262144],[$uid,\"solo-app\",\"store\",1,4096]]"
[ "$(table a)" = "$want" ] || fail "on the survivor: $(table a)"
start_node b
wait_for 10000 "b resynced and the pair active" pair_up
[ "$(table b)" = "$want" ] || fail "on b after its resync: $(table b)"
kill -TERM "${PIDS[a]}"
wait "${PIDS[a]}" || fail "a exited $? on SIGTERM"
unset 'PIDS[a]'
start_node a
wait_for 10000 "the pair active again" pair_up
[ "$(table a)" = "$want" ] || fail "on a after its restart: $(table a)"
ctl a free "$g1" >/dev/null
ok "names kept through a takeover, a resync and a restart: $(table a)"
