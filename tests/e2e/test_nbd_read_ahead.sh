#!/usr/bin/env bash
# Read-ahead of a volume's pages (node/NBD.md, "Read-ahead") on a real pair
# with [memory] cache = 25% (4M): a 4M volume written whole, then both
# nodes restarted so that nothing of it is resident.
#  - sequential 64K READs through a stage the pages ahead of them: status
#    counts pages staged and hits, and most of the READs' pages come from
#    read-ahead; the bytes read back are the bytes written;
#  - random 4K READs at scattered offsets stage nothing more.
PY=/usr/bin/python3
"$PY" -c 'import nbd' 2>/dev/null || {
	echo "SKIP: libnbd's python module is not installed (python3-libnbd; tools/install-deps.sh)"
	exit 77
}
. "$(dirname "$0")/lib.sh"
need_tools nbdcopy

write_nbd_pair_configs
start_node a
start_node b
wait_for 5000 "pair linked" pair_up
M=$((1 << 20))
ctl a volume create vol --size 4M >/dev/null || fail "volume create"
uri() { echo "nbd+unix:///vol?socket=$WORK/$1.nbd"; }
head -c $((4 * M)) /dev/urandom >"$WORK/data"
nbdcopy "$WORK/data" "$(uri a)" || fail "nbdcopy into vol"
kill "${PIDS[a]}" "${PIDS[b]}"
wait "${PIDS[a]}" "${PIDS[b]}" 2>/dev/null || true
start_node a
start_node b
wait_for 5000 "pair linked after a restart" pair_up

ra() { ctl a --json status | jq -r ".readahead.$1"; }
[ "$(ra pages)" = 0 ] || fail "read-ahead before any READ: $(ctl a --json status | jq -c .readahead)"
"$PY" -c "
import nbd, sys
h = nbd.NBD(); h.connect_uri('$(uri a)')
want = open('$WORK/data', 'rb').read()
for off in range(0, 2 << 20, 65536):
    if h.pread(65536, off) != want[off:off + 65536]:
        sys.exit('bytes differ at %d' % off)
" || fail "sequential READs through a"
pages=$(ra pages) hits=$(ra hits)
# 2M of 64K READs: 512 pages; all but the first READ's ahead of them.
[ "$pages" -ge 256 ] && [ "$hits" -ge 256 ] ||
	fail "sequential READs: read-ahead staged $pages pages, $hits hits"
ok "sequential READs: $pages pages staged ahead, $hits hits, $(ra wasted) wasted"

"$PY" -c "
import nbd, random, sys
h = nbd.NBD(); h.connect_uri('$(uri a)')
want = open('$WORK/data', 'rb').read()
rnd = random.Random(7)
for i in range(100):
    off = (2 << 20) + rnd.randrange(0, 512) * 4096
    if h.pread(4096, off) != want[off:off + 4096]:
        sys.exit('bytes differ at %d' % off)
" || fail "random READs through a"
[ "$(ra pages)" = "$pages" ] || fail "random READs staged $(($(ra pages) - pages)) pages ahead"
ok "random READs staged nothing ahead"
