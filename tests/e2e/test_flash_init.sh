#!/usr/bin/env bash
# A node's own flash device made by `ftvmctl flash init` and read by `flash
# show` (the store's header with kind flash; node/storage/STORAGE.md):
# settings that make no flash device are refused, naming the problem, and
# write nothing; the default is one free partition of all the space; a
# device is not made again without --force; --partition and --access are
# what show prints. Needs no node.
. "$(dirname "$0")/lib.sh"

F=$WORK/flash
SPACE=$((64 * 1048576 - 65536)) # 64M less the header's 64K

# ---- settings that make no flash device ----
rc=0
out=$("$FTVMCTL" flash init "$F" 2>&1) || rc=$?
[ "$rc" = 2 ] || fail "flash init of a new file without --size exited $rc, not 2: $out"
grep -q "flash init: .*--size says how large" <<<"$out" || fail "flash init without --size: $out"
rc=0
out=$("$FTVMCTL" flash init "$F" --size 64Q 2>&1) || rc=$?
[ "$rc" = 2 ] || fail "flash init --size 64Q exited $rc, not 2: $out"
grep -q "flash init: --size '64Q' is not a size" <<<"$out" || fail "flash init --size 64Q: $out"
expect_refused "flash init: --size 4096: too small" "flash init with a size below the header's" \
	"$FTVMCTL" flash init "$F" --size 4K
expect_refused "a flash device needs a writable partition" "flash init with read-only partitions only" \
	"$FTVMCTL" flash init "$F" --size 64M --partition a=50% --partition x=10% --access a=ro --access x=ro
[ ! -e "$F" ] || fail "a refused flash init left $F"
ok "settings that make no flash device are refused, naming the problem, and nothing is written"

# ---- the default: one free partition of all the space ----
[ "$("$FTVMCTL" --json flash init "$F" --size 64M)" = "{}" ] || fail "flash init --json"
[ "$(stat -c %s "$F")" = $((64 * 1048576)) ] || fail "$F is $(stat -c %s "$F") bytes, not 64M"
text=$("$FTVMCTL" flash show "$F")
grep -q "^flash $F: version 2, page size 4096, 67108864 bytes, id [0-9a-f]\{32\}\$" <<<"$text" ||
	fail "flash show: $text"
grep -Eq "^  \(free\) +65536 +$SPACE +rw\$" <<<"$text" || fail "flash show's partition: $text"
[ "$(grep -c '^  ' <<<"$text")" = 2 ] || fail "flash show: not one partition: $text"
show=$("$FTVMCTL" --json flash show "$F")
[ "$(jq -c '[.kind, .version, .page_size, .size, (.partitions | length)]' <<<"$show")" = \
	'["flash",2,4096,67108864,1]' ] || fail "flash show --json: $show"
[ "$(jq -c '.partitions[0]' <<<"$show")" = \
	"{\"id\":\"\",\"offset\":65536,\"size\":$SPACE,\"access\":\"rw\"}" ] ||
	fail "flash show --json's partition: $show"
ok "flash init: one free rw partition of all the space after the header, shown as text and JSON"

# ---- not again without --force ----
expect_refused "flash init: .*initialised already" "flash init again" \
	"$FTVMCTL" flash init "$F" --size 64M
[ "$(jq .id <<<"$("$FTVMCTL" --json flash show "$F")")" = "$(jq .id <<<"$show")" ] ||
	fail "the refused init changed the device"
"$FTVMCTL" flash init "$F" --force --page-size 8192 --partition a=50% --partition spare=4M \
	--access spare=ro >/dev/null || fail "flash init --force"
again=$("$FTVMCTL" --json flash show "$F")
[ "$(jq .id <<<"$again")" != "$(jq .id <<<"$show")" ] || fail "--force kept the device's id"
[ "$(jq -c '[.kind, .page_size, .size]' <<<"$again")" = '["flash",8192,67108864]' ] ||
	fail "flash show after --force: $again"
half=$((SPACE / 2 / 8192 * 8192))
[ "$(jq -c '[.partitions[] | [.id, .offset, .size, .access]]' <<<"$again")" = \
	"[[\"a\",65536,$half,\"rw\"],[\"spare\",$((65536 + half)),4194304,\"ro\"]]" ] ||
	fail "flash show of the --partition/--access settings: $again"
grep -Eq "^  spare +$((65536 + half)) +4194304 +ro\$" <<<"$("$FTVMCTL" flash show "$F")" ||
	fail "flash show (text) of spare: $("$FTVMCTL" flash show "$F")"
ok "refused again without --force; --force makes it new with the partitions and access given"

# ---- its own size by default; the kinds told apart ----
truncate -s 32M "$WORK/sized"
"$FTVMCTL" flash init "$WORK/sized" >/dev/null || fail "flash init of a 32M file"
[ "$(jq .size <<<"$("$FTVMCTL" --json flash show "$WORK/sized")")" = 33554432 ] ||
	fail "flash init without --size did not take the file's size"
"$FTVMCTL" store init "$WORK/store" --size 64M >/dev/null || fail "store init"
[ "$(jq -r .kind <<<"$("$FTVMCTL" --json flash show "$WORK/store")")" = store ] ||
	fail "flash show of a store does not say store"
[ "$(jq -r .kind <<<"$("$FTVMCTL" --json store show "$F")")" = flash ] ||
	fail "store show of a flash device does not say flash"
expect_refused "flash show: .*absent" "flash show of nothing" "$FTVMCTL" flash show "$WORK/absent"
ok "flash init takes the file's own size; show prints either kind, naming it"
