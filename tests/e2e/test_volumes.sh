#!/usr/bin/env bash
# Block volumes (node/vmm/VMM.md, "Volumes") on a real pair, both nodes with
# [memory] cache = 25% (4M of 16M):
#  - `volume create` makes one on the node asked, mirrored: both nodes list
#    it with its home and owner; its header says storage-cache;
#  - --home b through a makes it on b (MakeVolume): homed and owned by b,
#    its extent in b's store partition, listed on both nodes; --home naming
#    no node of the pair is refused;
#  - a name taken (on either node), a bad name, a size of 0 and a volume
#    too large for its home's store partition are refused, changing
#    nothing;
#  - its pages take the storage cache's frames on both nodes, never server
#    memory's, and server memory's allocations never the cache's;
#  - volumes are kept across a restart of both nodes, with their data;
#  - a node without a storage cache refuses its copy: the volume is denied
#    naming it, and nothing is kept on either node;
#  - `volume delete` frees it on both nodes; deleting it again is refused.
. "$(dirname "$0")/lib.sh"

write_pair_configs
sed -i '/^\[memory\]/a cache = 25%' "$WORK/a.conf" "$WORK/b.conf"
start_node a
start_node b
wait_for 5000 "pair linked" pair_up

J=$(ctl a --json volume create vol1 --size 1M) || fail "volume create: $J"
[ "$(jq -r '"\(.name) \(.size) \(.home) \(.owner) \(.block_size)"' <<<"$J")" = "vol1 1048576 a a 4096" ] ||
	fail "volume create said $J"
G=$(jq -r .guid <<<"$J")
ok "made vol1 on a: $J"
for id in a b; do
	L=$(ctl "$id" --json volume list)
	[ "$(jq -r 'map("\(.name) \(.home) \(.owner) \(.guid)") | join(",")' <<<"$L")" = "vol1 a a $G" ] ||
		fail "volume list on $id: $L"
	[ "$(ctl "$id" --json header "$G" | jq -r .partition)" = storage-cache ] ||
		fail "header of $G on $id: $(ctl "$id" --json header "$G")"
done
ctl b volume list | grep -q "^vol1 .* 1048576 a  *a  *$G" || fail "volume list text on b: $(ctl b volume list)"
ok "both nodes list vol1, its copy in the storage cache"

expect_fail b "volume vol1 exists" volume create vol1 --size 4K
expect_fail a "volume vol1 exists" volume create vol1 --size 4K
expect_fail a "volume name '-x'" volume create --size 4K -- -x
expect_fail a "volume name 'a b'" volume create "a b" --size 4K
# usage ARGS...: ftvmctl on a exits 2 (a usage error), saying why.
usage() {
	local out rc=0
	out=$(ctl a "$@" 2>&1) || rc=$?
	[ "$rc" -eq 2 ] || fail "ftvmctl $* exited $rc, wanted 2: $out"
	ok "usage error: ftvmctl $*: $out"
}
usage volume create vol2 --size 0
usage volume resize vol1
usage volume list --size 4K
JB=$(ctl a --json volume create volb --size 64K --home b) || fail "volume create --home b through a: $JB"
[ "$(jq -r '"\(.name) \(.home) \(.owner)"' <<<"$JB")" = "volb b b" ] || fail "volume create --home b said $JB"
for id in a b; do
	[ "$(ctl "$id" --json volume list | jq -r '.[] | select(.name == "volb") | "\(.home) \(.owner)"')" = "b b" ] ||
		fail "volb on $id: $(ctl "$id" --json volume list)"
done
[ "$(status_field b allocations.own)" -ge 1 ] || fail "b does not own volb: $(ctl b --json status | jq -c .allocations)"
expect_fail a "volume volb exists" volume create volb --size 4K --home b
expect_fail a "no node 'c' in this pair" volume create volc --size 4K --home c
ok "volume create --home b through a made volb on b: $JB"
ctl a volume delete volb || fail "volume delete volb (homed on b) through a"
# A volume never waits for room: denied at once (request_timeout_ms is 5 s).
t0=$(now_ms)
expect_fail a "do not fit in a's partition of the store" volume create huge --size 32M
[ $(($(now_ms) - t0)) -lt 3000 ] || fail "a volume with no room waited $(($(now_ms) - t0)) ms"
[ "$(ctl b --json volume list | jq length)" = 1 ] || fail "a refusal changed the list: $(ctl b --json volume list)"

# One name made on both nodes at once: at most one of them has it, and the
# two lists agree.
for i in 1 2 3 4 5; do
	ctl a volume create "race$i" --size 4K >/dev/null 2>&1 &
	pa=$!
	ctl b volume create "race$i" --size 4K >/dev/null 2>&1 &
	pb=$!
	ra=0 rb=0
	wait "$pa" || ra=$?
	wait "$pb" || rb=$?
	[ "$ra" -ne 0 ] || [ "$rb" -ne 0 ] || fail "race$i made on both nodes"
	la=$(ctl a --json volume list | jq -c 'map(.guid)')
	[ "$la" = "$(ctl b --json volume list | jq -c 'map(.guid)')" ] ||
		fail "race$i: the lists differ: $la / $(ctl b --json volume list)"
	ctl a volume delete "race$i" 2>/dev/null || true
done
ok "one name made on both nodes at once: never both, the lists agree"

cache_free() { ctl "$1" --json partitions | jq -r '.[] | select(.media == "dram" and .type == "'"$2"'") | .free'; }
declare -A server0 cache0
for id in a b; do
	server0[$id]=$(cache_free "$id" server-memory)
	cache0[$id]=$(cache_free "$id" storage-cache)
done
fill 7
for p in 0 1 2; do
	ctl a write "$G" "$p" --file "$WORK/fill.7" >/dev/null || fail "write vol1 page $p through a"
done
ctl b write "$G" 3 --file "$WORK/fill.7" >/dev/null || fail "write vol1 page 3 through b"
for id in a b; do
	[ "$(cache_free "$id" storage-cache)" -lt "${cache0[$id]}" ] ||
		fail "$id's storage cache did not take the volume's pages: ${cache0[$id]} -> $(cache_free "$id" storage-cache)"
	[ "$(cache_free "$id" server-memory)" = "${server0[$id]}" ] ||
		fail "$id's server memory took the volume's pages: ${server0[$id]} -> $(cache_free "$id" server-memory)"
done
ctl b read "$G" 2 | cmp -s - "$WORK/fill.7" || fail "vol1 page 2 read on b differs"
ok "vol1's pages took storage cache frames on both nodes, server memory none"

GA=$(ctl a alloc --size 64K) || fail "alloc"
c1=$(cache_free a storage-cache)
ctl a write "$GA" 0 --file "$WORK/fill.7" >/dev/null || fail "write $GA"
[ "$(cache_free a storage-cache)" = "$c1" ] || fail "an allocation's page took a's storage cache"
ok "an allocation's pages take server memory, not the cache"

for id in a b; do
	ctl "$id" --json verify >/dev/null || fail "verify on $id: $(ctl "$id" --json verify)"
done
kill "${PIDS[a]}" "${PIDS[b]}"
wait "${PIDS[a]}" "${PIDS[b]}" 2>/dev/null || true
start_node a
start_node b
wait_for 5000 "pair linked again" pair_up
[ "$(ctl b --json volume list | jq -r '.[0].name')" = vol1 ] || fail "vol1 after a restart: $(ctl b --json volume list)"
ctl a read "$G" 3 | cmp -s - "$WORK/fill.7" || fail "vol1 page 3 after a restart differs"
ok "vol1 and its data kept across a restart of both nodes"

kill "${PIDS[b]}"
wait "${PIDS[b]}" 2>/dev/null || true
sed -i '/^cache = 25%/d' "$WORK/b.conf"
start_node b
wait_for 5000 "pair linked with b's cache gone" pair_up
expect_fail a "b has no storage cache for a volume" volume create vol2 --size 4K
expect_fail b "b has no storage cache to serve volume vol2" volume create vol2 --size 4K
for id in a b; do
	[ "$(ctl "$id" --json volume list | jq -r 'map(.name) | join(",")')" = vol1 ] ||
		fail "a denied volume was kept on $id: $(ctl "$id" --json volume list)"
done
ok "a node without a storage cache refuses a volume's copy"

ctl b volume delete vol1 || fail "volume delete vol1 through b"
for id in a b; do
	[ "$(ctl "$id" --json volume list)" = "[]" ] || fail "vol1 after its delete on $id: $(ctl "$id" --json volume list)"
done
expect_fail a "no volume vol1" volume delete vol1
ctl a volume list | grep -q "^no volumes" || fail "volume list text with none: $(ctl a volume list)"
ok "vol1 deleted on both nodes"
