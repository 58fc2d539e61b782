#!/usr/bin/env bash
# The shared store made by `ftvmctl store init` (seed 004's management
# interface; node/storage/STORAGE.md) under a real pair: settings that make
# no store are refused and write nothing; the nodes take the partitions
# named for them; a store is not made again without --force, nor under a
# running node; a read-only partition is never written; each node writes
# only its own partition until it took its partner over, and stops writing
# the partner's once the failback handed everything back.
. "$(dirname "$0")/lib.sh"

write_pair_configs
mkdir -p "$WORK/shared"
S=$WORK/shared/store
MB=1048576

# ---- settings ----
expect_refused "two writable partitions" "store init with one node partition" \
	"$FTVMCTL" store init "$S" --size 64M --partition a=50%
expect_refused "is not a size" "store init with a bad size" \
	"$FTVMCTL" store init "$S" --size 64M --partition a=50% --partition b=120%
[ ! -e "$S" ] || fail "a refused init left $S"
rc=0
"$FTVMCTL" store init "$S" >/dev/null 2>&1 || rc=$?
[ "$rc" = 2 ] || fail "store init of a new file without --size exited $rc, not 2"
ok "settings that make no store are refused, naming the problem, and nothing is written"

"$FTVMCTL" store init "$S" --size 64M --partition gold=4M --partition b=30% \
	--partition a=30% --access gold=ro >/dev/null || fail "store init"
show=$("$FTVMCTL" --json store show "$S")
[ "$(jq -r '[.partitions[] | .id + ":" + .access] | join(",")' <<<"$show")" = "gold:ro,b:rw,a:rw" ] ||
	fail "store show: $show"
[ "$(jq '.page_size, .size, .partitions[0].offset, .partitions[0].size' <<<"$show" | tr '\n' ' ')" = \
	"4096 67108864 65536 4194304 " ] || fail "store show: $show"
A_AT=$(jq '.partitions[2].offset' <<<"$show")
ok "store init: gold (4M, read-only), then b's and a's partitions (30% each)"

# The read-only partition holds a pattern nobody may change.
head -c $((4 * MB)) /dev/zero | tr '\0' 'Z' >"$WORK/gold"
dd if="$WORK/gold" of="$S" bs=65536 seek=1 conv=notrunc status=none
expect_refused "initialised already" "store init again" \
	"$FTVMCTL" store init "$S" --size 64M

start_node a
start_node b
wait_for 5000 "pair linked" pair_up
grep -q "partition of [0-9]* bytes at $A_AT\$" "$WORK/a.log" ||
	fail "a does not use the partition named a (at $A_AT): $(grep 'partition of' "$WORK/a.log")"
expect_refused "in use" "store init --force under running nodes" \
	"$FTVMCTL" store init "$S" --force
[ "$(jq .id <<<"$("$FTVMCTL" --json store show "$S")")" = "$(jq .id <<<"$show")" ] ||
	fail "the refused init changed the store"
ok "the nodes took their named partitions; init --force under them is refused"

# ---- a workload, a takeover, a failback ----
write_pages() { # ID GUID FIRST LAST
	local p
	for p in $(seq "$3" "$4"); do
		head -c 4096 /dev/urandom >"$WORK/want.$2.$p"
		ctl "$1" write "$2" "$p" --file "$WORK/want.$2.$p" >/dev/null ||
			fail "write $2 page $p on $1"
	done
}
destaged() { [ "$(ctl "$1" --json sense | jq .queues.destage)" = 0 ]; }
ga=$(ctl a alloc --size 64K)
gb=$(ctl b alloc --size 64K)
write_pages a "$ga" 0 7
write_pages b "$gb" 0 7
wait_for 5000 "a's pages destaged" destaged a
wait_for 5000 "b's pages destaged" destaged b

kill -9 "${PIDS[b]}"
wait "${PIDS[b]}" 2>/dev/null || true
unset 'PIDS[b]'
wait_for $((DEAD_AFTER_MS + 2000)) "a takes over" field_is a state solo
grep -q "the partner's partition is writable here" "$WORK/a.log" ||
	fail "a did not open b's partition for writing at the takeover"
write_pages a "$gb" 8 15
wait_for 5000 "a destaged b's allocation into b's partition" destaged a
ok "after the takeover a writes b's allocation into b's partition"

start_node b
wait_for 10000 "b resynced and the pair active" pair_up
ctl b failback >/dev/null || fail "failback"
grep -q "the partner's partition is read-only here again" "$WORK/a.log" ||
	fail "a can still write b's partition after the failback"
write_pages b "$gb" 3 3
wait_for 5000 "b destaged" destaged b
ok "after the failback b's partition is b's alone again"

for f in "$WORK"/want.*; do
	g=${f#"$WORK"/want.}
	ctl a read "${g%.*}" "${g##*.}" | cmp -s - "$f" || fail "lost: ${g%.*} page ${g##*.}"
done
ctl a verify >/dev/null || fail "not equal: $(ctl a verify 2>&1)"
dd if="$S" bs=65536 skip=1 count=64 status=none | cmp -s - "$WORK/gold" ||
	fail "the read-only partition was written"
! grep -q "refused a write" "$WORK/a.log" "$WORK/b.log" ||
	fail "a node tried to write where it may not: $(grep -h 'refused a write' "$WORK"/*.log)"
ok "every write reads back, verify equal, gold untouched, no write refused"
