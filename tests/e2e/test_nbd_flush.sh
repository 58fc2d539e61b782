#!/usr/bin/env bash
# FLUSH and FUA through NBD (node/NBD.md, "The write-back cache's
# contract"; node/vmm/VMM.md, "Flush") on a real pair: a volume homed on a,
# both nodes serving it. Each case writes, makes it durable in one of the
# ways below, and at once kills both nodes (-9): what the store has is all
# that is left, so the data must read back after a restart of both, and
# `ftvmctl recovery` must name no page of the volume. (A write the store
# did not have would come back as the store's older version: the destage
# of an unflushed write takes 50 ms, the kill a few.)
#  - a write through b, then FLUSH on another connection, to a: multi-conn
#    across the pair;
#  - a write through a, then FLUSH on a connection to b: b waits for a's
#    Destaged;
#  - a FUA write through b (b does not own the pages).
# libnbd's python module comes with Debian's python3, whichever python3
# the PATH finds first.
PY=/usr/bin/python3
"$PY" -c 'import nbd' 2>/dev/null || {
	echo "SKIP: libnbd's python module is not installed (python3-libnbd; tools/install-deps.sh)"
	exit 77
}
. "$(dirname "$0")/lib.sh"

write_nbd_pair_configs
start_node a
start_node b
wait_for 5000 "pair linked" pair_up
ctl a volume create vol --size 8M >/dev/null || fail "volume create"
uri() { echo "nbd+unix:///vol?socket=$WORK/$1.nbd"; }

# durable CASE WRITE_NODE FLUSH_NODE OFFSET BYTE FUA: one python process
# writes 64K of BYTE at OFFSET through WRITE_NODE (with FUA when FUA is 1)
# and then, unless FUA, flushes through a connection to FLUSH_NODE; both
# nodes are killed (-9) the moment it says so.
durable() {
	local what=$1 wnode=$2 fnode=$3 offset=$4 byte=$5 fua=$6
	"$PY" -c "
import nbd, sys
w = nbd.NBD(); w.connect_uri('$(uri "$wnode")')
f = nbd.NBD(); f.connect_uri('$(uri "$fnode")')
w.pwrite(bytes([$byte]) * 65536, $offset, nbd.CMD_FLAG_FUA if $fua else 0)
if not $fua:
    f.flush()
print('durable', flush=True)
" >"$WORK/durable.out" 2>&1 || fail "$what: the writer: $(cat "$WORK/durable.out")"
	kill -9 "${PIDS[a]}" "${PIDS[b]}"
	wait "${PIDS[a]}" "${PIDS[b]}" 2>/dev/null || true
	grep -q durable "$WORK/durable.out" || fail "$what: $(cat "$WORK/durable.out")"
	start_node a
	start_node b
	wait_for 10000 "pair linked after $what" pair_up
	"$PY" -c "
import nbd, sys
h = nbd.NBD(); h.connect_uri('$(uri a)')
got = h.pread(65536, $offset)
sys.exit(0 if got == bytes([$byte]) * 65536 else 1)
" || fail "$what: the write did not survive both nodes' kill -9: recovery says $(ctl a recovery)"
	[ "$(ctl a --json recovery)" = "[]" ] || fail "$what: pages went back to older versions: $(ctl a recovery)"
	ok "$what: durable across a kill -9 of both nodes"
}

durable "a write through b, FLUSH through a" b a 0 0x41 0
durable "a write through a, FLUSH through b" a b 65536 0x42 0
durable "a FUA write through b" b b 131072 0x43 1
