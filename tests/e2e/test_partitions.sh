#!/usr/bin/env bash
# The memory partition table (node/vmm/MEDIA.md, "The memory partition
# table"; seed 003 Fig. 12) on a real pair. a: a pool of 16M with
# [memory] cache = 25%, a flash file of 32M with [flash] cache = 50%; b:
# the defaults (no cache).
#  - partitions on a: dram server memory 12M then a storage cache of 4M,
#    flash server memory 16M then a cache of 16M, each cache wholly free;
#    on b: all server memory, caches of 0; status and sense count a's
#    server memory only;
#  - a capacity allocation lands in a's flash server memory, and its row
#    names its range and client; list and header say which partition each
#    node's copy takes: server-memory on a, a's store partition on b (no
#    flash there); one that fits the flash but not its server
#    memory is denied naming a's flash; a high one that fits the pool but
#    not its server memory is denied naming DRAM;
#  - the split is kept in the page table: a restart with [flash] cache =
#    90% (server memory smaller than the extent laid there) is refused,
#    naming the allocation and its client, and a's table is left as it was;
#    a start with the cache back at 50% serves; one with [memory] cache =
#    60% under an allocation resting in DRAM is refused naming it; a
#    smaller cache (server memory grows) is taken.
. "$(dirname "$0")/lib.sh"

write_pair_configs
printf '[policy fast]\nblock_size = 4K\nperformance = high\n' >>"$WORK/a.conf"
printf '[policy fast]\nblock_size = 4K\nperformance = high\n' >>"$WORK/b.conf"
sed -i '/^\[memory\]/a cache = 25%' "$WORK/a.conf"
printf '[flash]\npath = a/flash\nsize = 32832K\ncache = 50%%\n' >>"$WORK/a.conf"
start_node a
start_node b
wait_for 5000 "pair linked" pair_up
M=$((1 << 20))

parts() { ctl "$1" --json partitions; }
# row ID MEDIA TYPE: that partition's row as "start length free".
row() { parts "$1" | jq -r ".[] | select(.media == \"$2\" and .type == \"$3\" and .guid == null) | \"\(.start) \(.length) \(.free)\""; }
[ "$(row a dram server-memory | cut -d' ' -f1,2)" = "0 $((12 * M))" ] || fail "a's dram server memory: $(row a dram server-memory)"
[ "$(row a dram storage-cache)" = "$((12 * M)) $((4 * M)) $((4 * M))" ] || fail "a's dram cache: $(row a dram storage-cache)"
[ "$(row a flash server-memory | cut -d' ' -f1,2)" = "65536 $((16 * M))" ] || fail "a's flash server memory: $(row a flash server-memory)"
[ "$(row a flash storage-cache)" = "$((65536 + 16 * M)) $((16 * M)) $((16 * M))" ] || fail "a's flash cache: $(row a flash storage-cache)"
[ "$(row b dram server-memory | cut -d' ' -f1,2)" = "0 $((16 * M))" ] || fail "b's dram server memory: $(row b dram server-memory)"
[ "$(row b dram storage-cache)" = "$((16 * M)) 0 0" ] || fail "b's dram cache: $(row b dram storage-cache)"
[ -z "$(row b flash server-memory)" ] || fail "b has no flash, its table says $(row b flash server-memory)"
parts a | jq -e 'all(.[]; has("media") and has("start") and has("length") and has("type") and has("client"))' >/dev/null ||
	fail "a row lacks a key: $(parts a)"
[ "$(ctl a --json status | jq .frames.total)" = $((12 * M / 4096)) ] || fail "a's status counts $(ctl a --json status | jq .frames.total) frames"
[ "$(ctl a --json sense | jq '.media[] | select(.type == "dram") | .capacity')" = $((12 * M)) ] ||
	fail "a's sense: $(ctl a --json sense)"
ctl a partitions | grep -q "^dram    storage-cache" || fail "a's text table: $(ctl a partitions)"
ok "a: dram 12M of server memory and a cache of 4M, flash 16M and 16M; b all server memory; status and sense count a's server memory"

g=$(ctl a alloc --size 4M --name part-app)
ext=$(parts a | jq -r ".[] | select(.guid == \"$g\") | \"\(.media) \(.type) \(.start) \(.length) \(.uid) \(.client)\"")
read -r media type start length uid client <<<"$ext"
[ "$media $type $client $uid" = "flash server-memory part-app $(id -u)" ] || fail "$g's row on a: '$ext'"
[ "$start" -ge 65536 ] && [ $((start + length)) -le $((65536 + 16 * M)) ] || fail "$g lies at $start+$length, not in a's flash server memory"
for pair in "a server-memory" "b a"; do
	read -r n want <<<"$pair"
	[ "$(ctl "$n" --json header "$g" | jq -r .partition)" = "$want" ] ||
		fail "header $g on $n: partition $(ctl "$n" --json header "$g" | jq -r .partition), wanted $want"
	[ "$(ctl "$n" --json list | jq -r ".[] | select(.guid == \"$g\") | .partition")" = "$want" ] ||
		fail "list on $n: $(ctl "$n" --json list)"
	ctl "$n" header "$g" | grep -qx "partition: $want" || fail "header text on $n: $(ctl "$n" header "$g")"
done
ctl a list | grep -q " PARTITION$" || fail "list text: $(ctl a list)"
expect_fail a "denied.*do not fit on a's flash" alloc --size 14M --immediate
expect_fail a "denied.*a's DRAM has 3072 of its 3072 frames" alloc --size 14M --policy fast --immediate
ok "$g (4M, part-app) rests in a's flash server memory at $start; 14M denied on flash (16M of 32M serves clients) and in DRAM (12M of 16M)"

restart_a() {
	kill -TERM "${PIDS[a]}"
	wait "${PIDS[a]}" 2>/dev/null || true
	unset 'PIDS[a]'
	sed -i "$1" "$WORK/a.conf"
}
# refused_start WHAT: a does not start, saying WHAT.
refused_start() {
	local rc=0
	timeout 20 "$FTVMD" --config "$WORK/a.conf" >>"$WORK/a.log" 2>&1 || rc=$?
	[ "$rc" != 0 ] && [ "$rc" != 124 ] || fail "a started (or hung: $rc) with $(grep cache "$WORK/a.conf" | tr '\n' ' ')"
	grep -q "$1" "$WORK/a.log" || fail "a's log does not say '$1': $(tail -n 5 "$WORK/a.log")"
}
restart_a 's/^cache = 50%/cache = 90%/'
refused_start "flash server memory cannot shrink from $((16 * M)) to [0-9]* bytes (\[flash\] cache): the extents of these allocations lie past it: $g (uid $(id -u) part-app)"
ok "[flash] cache = 90% under $g's extent: a refuses to start, naming it"
sed -i 's/^cache = 90%/cache = 50%/' "$WORK/a.conf"
start_node a
wait_for 10000 "pair linked again" pair_up
[ "$(row a flash server-memory | cut -d' ' -f2)" = $((16 * M)) ] || fail "a's flash after the refused start: $(row a flash server-memory)"

h=$(ctl a alloc --size 8M --policy fast)
restart_a 's/^cache = 25%/cache = 60%/'
refused_start "dram server memory cannot shrink from $((12 * M)) to [0-9]* bytes (\[memory\] cache): the frames promised to copies resting in DRAM do not fit; they are $h"
sed -i 's/^cache = 60%/cache = 10%/' "$WORK/a.conf"
start_node a
wait_for 10000 "pair linked with a's smaller cache" pair_up
grep -q "partitions: dram server memory grows from $((12 * M)) to" "$WORK/a.log" || fail "a's log: $(grep partitions: "$WORK/a.log")"
[ "$(row a dram storage-cache | cut -d' ' -f2)" = $((16 * M / 10 / 4096 * 4096)) ] || fail "a's dram cache at 10%: $(row a dram storage-cache)"
ok "[memory] cache = 60% under $h (8M in DRAM) refused naming it; 10% taken, server memory grown"
