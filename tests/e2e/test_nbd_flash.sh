#!/usr/bin/env bash
# Fast destage of volumes through flash (node/vmm/VMM.md, "Volumes"; seed
# 002 [0039]) on a real pair: both nodes with [memory] cache = 25% (4M) and
# a flash file of 48M with [flash] cache = 50% (24M).
#  - a 16M volume rests on flash's storage cache on both nodes (header
#    media flash; a partitions row under flash's storage cache), a 32M one,
#    too large for it, in the store alone;
#  - 16M written through a (four times the DRAM cache) go to flash as they
#    are written, and read back unchanged through b, partly from flash;
#  - after a restart of both nodes, and after a kill -9 of both following
#    a flush, the volume reads back unchanged.
. "$(dirname "$0")/lib.sh"
need_tools nbdcopy qemu-io

write_nbd_pair_configs
sed -i '/^\[store\]/a size = 131136K' "$WORK/a.conf" "$WORK/b.conf"
for id in a b; do
	printf '[flash]\npath = %s/flash\nsize = 49216K\ncache = 50%%\n' "$id" >>"$WORK/$id.conf"
done
start_node a
start_node b
wait_for 5000 "pair linked" pair_up
M=$((1 << 20))
uri() { echo "nbd+unix:///$2?socket=$WORK/$1.nbd"; }

G=$(ctl a --json volume create fast --size 16M | jq -r .guid) || fail "volume create fast"
GB=$(ctl a --json volume create big --size 32M | jq -r .guid) || fail "volume create big"
for id in a b; do
	[ "$(ctl "$id" --json header "$G" | jq -r .media)" = flash ] ||
		fail "fast on $id: $(ctl "$id" --json header "$G")"
	[ "$(ctl "$id" --json header "$GB" | jq -r .media)" = store ] ||
		fail "big on $id: $(ctl "$id" --json header "$GB")"
	row=$(ctl "$id" --json partitions | jq -c ".[] | select(.guid == \"$G\")")
	[ "$(jq -r '"\(.media) \(.type)"' <<<"$row")" = "flash storage-cache" ] ||
		fail "$id's partitions: no flash storage-cache row for fast: $(ctl "$id" --json partitions)"
done
S=$(ctl a --json sense)
[ "$(jq -r '.cache | map(.type) | join(",")' <<<"$S")" = dram,flash ] &&
	[ "$(jq -r '.cache[0].capacity' <<<"$S")" = $((4 * M)) ] &&
	[ "$(jq -r '.cache[1].free' <<<"$S")" -lt "$(jq -r '.cache[1].capacity' <<<"$S")" ] ||
	fail "a's sense: $S"
ok "fast (16M) rests on flash's storage cache on both nodes, big (32M) in the store; sense: $(jq -c .cache <<<"$S")"

head -c $((16 * M)) /dev/urandom >"$WORK/data"
nbdcopy "$WORK/data" "$(uri a fast)" || fail "nbdcopy into fast through a"
for id in a b; do
	[ "$(status_field "$id" flash.writes)" -gt 0 ] || fail "$id wrote nothing to flash"
	[ "$(status_field "$id" replacement.evictions)" -gt 0 ] || fail "$id evicted nothing"
done
nbdcopy "$(uri b fast)" "$WORK/back" || fail "nbdcopy out of fast through b"
cmp "$WORK/data" "$WORK/back" || fail "fast read back through b differs"
[ "$(status_field b flash.page_ins)" -gt 0 ] || fail "b read nothing back from flash"
ok "16M through a 4M DRAM cache: $(status_field a flash.writes) pages written to flash on a ($(status_field a replacement.dirty_evictions) dirty pages evicted), $(status_field b flash.page_ins) page-ins from flash on b, read back unchanged"

kill "${PIDS[a]}" "${PIDS[b]}"
wait "${PIDS[a]}" "${PIDS[b]}" 2>/dev/null || true
start_node a
start_node b
wait_for 5000 "pair linked after a restart" pair_up
nbdcopy "$(uri a fast)" "$WORK/back" || fail "nbdcopy out of fast after a restart"
cmp "$WORK/data" "$WORK/back" || fail "fast after a restart of both differs"
ok "fast reads back unchanged after a restart of both nodes"

qemu-io -f raw -c 'write -P 0x61 1048576 1048576' -c flush "$(uri b fast)" >/dev/null || fail "write and flush through b"
kill -9 "${PIDS[a]}" "${PIDS[b]}"
wait "${PIDS[a]}" "${PIDS[b]}" 2>/dev/null || true
start_node a
start_node b
wait_for 10000 "pair linked after a kill -9 of both" pair_up
qemu-io -f raw -c 'read -P 0x61 1048576 1048576' "$(uri a fast)" >/dev/null ||
	fail "a flushed write lost with both nodes: $(ctl a recovery)"
ok "a flushed write survives a kill -9 of both nodes"

for id in a b; do
	V=$(ctl "$id" --json verify) && [ "$(jq -r .equal <<<"$V")" = true ] || fail "verify on $id: $V"
done
ok "verify equal"

# Flash's cache may not shrink from under a volume resting there.
kill "${PIDS[a]}"
wait "${PIDS[a]}" 2>/dev/null || true
unset "PIDS[a]"
sed -i 's/^cache = 50%/cache = 10%/' "$WORK/a.conf"
rc=0
"$FTVMD" --config "$WORK/a.conf" >>"$WORK/a.log" 2>&1 || rc=$?
[ "$rc" -ne 0 ] || fail "a started with its flash cache shrunk from under fast"
grep -q "flash's storage cache cannot shrink.*$G" "$WORK/a.log" || fail "a's refusal does not name $G: $(tail -3 "$WORK/a.log")"
sed -i 's/^cache = 10%/cache = 50%/' "$WORK/a.conf"
start_node a
wait_for 10000 "pair linked with a's cache back" pair_up
ok "a start that would shrink flash's cache from under fast is refused, naming it"
