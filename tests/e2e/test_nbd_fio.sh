#!/usr/bin/env bash
# Real clients' own checks on a volume (node/NBD.md), on a real pair with
# NBD sockets: fio's nbd engine writes 4 KiB random blocks with
# verify=crc32c at queue depths 1 and 16, four jobs (connections) at once,
# through a, and checks every block it wrote through b (verify_only); qemu-img
# reads the volume's size and copies it out, equal to what nbdcopy reads.
. "$(dirname "$0")/lib.sh"
need_tools fio qemu-img nbdcopy
fio --enghelp=nbd >/dev/null 2>&1 || {
	echo "SKIP: this fio has no nbd engine"
	exit 77
}

write_nbd_pair_configs
start_node a
start_node b
wait_for 5000 "pair linked" pair_up
ctl a volume create vol --size 16M >/dev/null || fail "volume create"
uri() { echo "nbd+unix:///vol?socket=$WORK/$1.nbd"; }

# fio_job NODE DEPTH ARGS...: the job's four connections through NODE.
fio_job() {
	local node=$1 depth=$2
	shift 2
	fio --name=vol --ioengine=nbd --uri="$(uri "$node")" --rw=randwrite --bs=4k \
		--size=4M --numjobs=4 --offset_increment=4M --iodepth="$depth" --verify=crc32c \
		--randseed=7 --group_reporting --output-format=json "$@" >"$WORK/fio.json" 2>"$WORK/fio.err"
}
for depth in 1 16; do
	fio_job a "$depth" --do_verify=1 ||
		fail "fio at depth $depth through a: $(tail -5 "$WORK/fio.err") $(jq -c '.jobs[0].error' "$WORK/fio.json" 2>/dev/null)"
	fio_job b "$depth" --verify_only ||
		fail "fio's verify through b after depth $depth: $(tail -5 "$WORK/fio.err")"
	ok "fio: 4 KiB random writes at depth $depth, four connections, verified through a and through b"
done

[ "$(qemu-img info --output=json "$(uri b)" | jq -r '."virtual-size"')" = $((16 << 20)) ] ||
	fail "qemu-img info: $(qemu-img info "$(uri b)")"
qemu-img convert -f raw -O raw "$(uri b)" "$WORK/qemu.img" || fail "qemu-img convert out of vol"
nbdcopy "$(uri a)" "$WORK/nbdcopy.img" || fail "nbdcopy out of vol"
cmp "$WORK/qemu.img" "$WORK/nbdcopy.img" || fail "qemu-img through b and nbdcopy through a read different bytes"
ok "qemu-img info and convert through b agree with nbdcopy through a"
