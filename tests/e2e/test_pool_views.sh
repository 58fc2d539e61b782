#!/usr/bin/env bash
# libftvm maps a node's frame pool twice, writable for write pointers and
# read-only for read pointers (ftvm.h, ftvm_get_read_pointer()). A pool that
# is not a whole number of the machine's pages (33 frames of 512 bytes) must
# map too: pointers of both kinds work on it and see the same bytes.
. "$(dirname "$0")/lib.sh"

write_pair_configs
for id in a b; do
	sed -i 's/^size = 16M$/size = 16896\npage_size = 512/' "$WORK/$id.conf"
done
start_node a
start_node b
wait_for 5000 "pair linked" pair_up
[ "$(ctl a --json status | jq .frames.total)" = 33 ] || fail "a's pool is not 33 frames"

g=$(ctl a alloc --size 1024)
for n in a b; do
	byte=$([ "$n" = a ] && echo 7 || echo 8)
	out=$("$FTVM_HOLD" "$WORK/$n.sock" "$g" 1 write --modify "$byte" 2>&1) ||
		fail "write pointer on $n's pool of 16896 bytes: $out"
	crc=$(grep -o 'released crc32c 0x[0-9a-f]*' <<<"$out" | grep -o '0x.*')
	for m in a b; do
		out=$("$FTVM_HOLD" "$WORK/$m.sock" "$g" 1 read 2>&1) ||
			fail "read pointer on $m's pool of 16896 bytes: $out"
		grep -q "held read $g page 1: 512 bytes, crc32c $crc" <<<"$out" ||
			fail "a read pointer on $m does not see what $n wrote (crc32c $crc): $out"
	done
done
ctl a verify >/dev/null || fail "verify: $(ctl a verify 2>&1)"
ok "pools of 33 frames of 512 bytes: write and read pointers on both nodes, the same bytes"
