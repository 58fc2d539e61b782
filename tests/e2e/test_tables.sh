#!/usr/bin/env bash
# Seed 003's tables in one view (`ftvmctl tables`; node/vmm/MEDIA.md, "Views"
# and "Device discovery: the message flow") on a real pair, node a with a
# flash file and b without:
#  - device discovery from either node: both nodes' rows, the node asked
#    first, each active, serving and reachable, with its own media (flash on
#    a alone) and the capacities its own `sense` reports;
#  - an allocation made on a shows in the address mapping from both nodes,
#    each giving where its own copy rests (flash on a, the store on b), and
#    in the server memory allocate table under its client's name;
#  - the text has a headed section per table, the JSON one key per table and
#    parses whole, the memory partition table as `ftvmctl partitions` gives
#    it (its own test: e2e-partitions);
#  - after kill -9 of b, tables on a still succeeds, b's row says it is not
#    reachable and why, before a's takeover and after it (a solo, serving).
. "$(dirname "$0")/lib.sh"

write_pair_configs
# a's flash holds 32M after the header's 64K (at least [memory] size).
printf '[flash]\npath = a/flash\nsize = 32832K\n' >>"$WORK/a.conf"
start_node a
start_node b
wait_for 5000 "pair linked" pair_up
uid=$(id -u)

tables() { ctl "$1" --json tables; }
# media_of ID ROW: a row's media as "type:capacity ..." in the node's order.
media_of() { tables "$1" | jq -r ".discovery[$2].media | map(\"\(.type):\(.capacity)\") | join(\" \")"; }
sense_media() { ctl "$1" --json sense | jq -r '.media | map("\(.type):\(.capacity)") | join(" ")'; }

for pair in "a b" "b a"; do
	read -r me them <<<"$pair"
	t=$(tables "$me") || fail "tables on $me failed"
	jq -e --arg me "$me" --arg them "$them" '
		(.discovery | length) == 2 and
		.discovery[0].node == $me and .discovery[0].self and .discovery[0].reachable and
		.discovery[0].serving and .discovery[0].state == "active" and .discovery[0].reason == "" and
		.discovery[1].node == $them and (.discovery[1].self | not) and .discovery[1].reachable and
		.discovery[1].serving and .discovery[1].state == "active" and .discovery[1].reason == ""' \
		<<<"$t" >/dev/null || fail "discovery on $me: $(jq -c .discovery <<<"$t")"
	[ "$(media_of "$me" 0)" = "$(sense_media "$me")" ] ||
		fail "$me's own row on $me: $(media_of "$me" 0), its sense: $(sense_media "$me")"
	[ "$(media_of "$me" 1)" = "$(sense_media "$them")" ] ||
		fail "$them's row on $me: $(media_of "$me" 1), $them's sense: $(sense_media "$them")"
	jq -e ".discovery[0].endpoint != \"\" and .discovery[1].endpoint != \"\" and
		.discovery[0].endpoint != .discovery[1].endpoint" <<<"$t" >/dev/null ||
		fail "endpoints on $me: $(jq -c '[.discovery[].endpoint]' <<<"$t")"
done
has_flash() { tables "$1" | jq -e ".discovery[] | select(.node == \"$2\") | any(.media[]; .type == \"flash\" and .capacity > 0)" >/dev/null; }
has_flash a a && has_flash b a || fail "a's flash is missing from a row of a: $(tables b | jq -c .discovery)"
! has_flash a b && ! has_flash b b || fail "b has no flash, but a row says so: $(tables a | jq -c .discovery)"
ok "device discovery on both nodes: the node asked, then its partner, media as each one's sense: a $(sense_media a); b $(sense_media b)"

g=$(ctl a alloc --size 64K --name tables-app)
for pair in "a flash" "b store"; do
	read -r me media <<<"$pair"
	row=$(tables "$me" | jq -c ".mapping[] | select(.guid == \"$g\") |
		[.node, .home, .owner, .media, .pages, .block_size, .bytes]")
	[ "$row" = "[\"$me\",\"a\",\"a\",\"$media\",16,4096,65536]" ] ||
		fail "mapping of $g on $me: '$row'"
	row=$(tables "$me" | jq -c '[.clients[] | [.uid, .name, .media, .allocations, .bytes]]')
	[ "$row" = "[[$uid,\"tables-app\",\"$media\",1,65536]]" ] ||
		fail "allocate table on $me: $row"
done
ok "$g in the address mapping and the allocate table of both nodes: on flash on a, in the store on b"

t=$(tables a)
python3 -c 'import json, sys; d = json.load(sys.stdin); assert sorted(d) == ["clients", "discovery", "mapping", "partitions"], sorted(d)' <<<"$t" ||
	fail "tables --json is not one object of the four tables: $t"
[ "$(jq -c .partitions <<<"$t")" = "$(ctl a --json partitions | jq -c .)" ] ||
	fail "tables' partitions: $(jq -c .partitions <<<"$t"), partitions: $(ctl a --json partitions)"
text=$(ctl a tables)
for head in "device discovery (seed 003 Fig. 10):" "address mapping (seed 003 Fig. 11), the copies on node a:" \
	"memory partition (seed 003 Fig. 12), node a:" "server memory allocate (seed 003 Fig. 13):"; do
	grep -qF "$head" <<<"$text" || fail "no section '$head' in: $text"
done
grep -q "^  $g  *a  *a  *flash  *16  *4096  *65536$" <<<"$text" || fail "no mapping row of $g in: $text"
grep -q "^  b  *partner  *active  *yes " <<<"$text" || fail "no row of b in: $text"
ctl a tables --help | grep -q "memory partition (Fig. 12)" || fail "tables --help"
"$FTVMCTL" --help | grep -q "^  tables " || fail "tables missing from ftvmctl --help"
ok "text in headed sections, JSON one object with a key per table"

# b dies: a's link drops at once, its takeover comes dead_after_ms later.
kill -9 "${PIDS[b]}"
wait "${PIDS[b]}" 2>/dev/null || true
unset 'PIDS[b]'
# partner_row_is WHAT JQ: tables on a succeeds and b's row satisfies JQ.
partner_row() {
	local t
	t=$(tables a) || fail "tables on a failed with b dead (exit $?)"
	jq -e ".discovery[1] | $1" <<<"$t" >/dev/null
}
down='.node == "b" and (.reachable | not) and (.serving | not) and .state == "unknown" and
	.reason != "" and (.media | length) == 0'
wait_for 5000 "b's row unreachable on a" partner_row "$down"
ok "b killed: tables on a succeeds, b's row: $(tables a | jq -c '.discovery[1] | [.reachable, .state, .reason]')"
wait_for $((DEAD_AFTER_MS + 5000)) "a takes over" field_is a state solo
partner_row "$down" || fail "b's row once a serves alone: $(tables a | jq -c '.discovery[1]')"
tables a | jq -e '.discovery[0] | .state == "solo" and .serving and .reachable' >/dev/null ||
	fail "a's row once it serves alone: $(tables a | jq -c '.discovery[0]')"
tables a | jq -e ".mapping[0].guid == \"$g\" and .clients[0].name == \"tables-app\"" >/dev/null ||
	fail "the survivor's mapping and allocate table: $(tables a | jq -c '[.mapping, .clients]')"
ctl a tables | grep -q "^  b  *partner  *unknown  *no  .*not reachable: " ||
	fail "text with b dead: $(ctl a tables)"
ok "a serves alone: its own row solo and serving, b's not reachable ($(tables a | jq -r '.discovery[1].reason'))"
