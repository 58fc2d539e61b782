#!/usr/bin/env bash
# The kernel's own NBD client on a volume of the pair (issue 23), inside the
# guest as root: Linux's nbd driver, configured by Debian's nbd-client 3.24,
# with ext4 on top, and the node serving it killed under it.
#   - a pair on loopback in this guest, each node with [nbd] listen (TCP,
#     what the kernel's client speaks) and an [nbd] socket, [memory] cache =
#     50% (32M of 64M); a volume of 64M, twice the cache;
#   - nbd-client -l lists it; an unknown export is refused with the server's
#     own message (an NBD_OPT_GO error reply: a client that sent
#     NBD_OPT_EXPORT_NAME would only see the connection closed);
#   - /dev/nbd0 on node a over TCP, mkfs.ext4, mounted; files of random
#     sizes (4K to 256K) written with dd conv=fsync, each one's sha256 kept
#     once its write and fsync returned; the last ones are still being
#     written when a is killed (kill -9);
#   - b takes over (solo); the dead device is unmounted and disconnected,
#     and /dev/nbd0 connects to b's port; the journal is replayed (what a
#     mount would do), then e2fsck -fn is clean, and every file whose fsync
#     returned reads back with its sha256;
#   - a starts again, is resynced (both active), verify is equal; /dev/nbd0
#     connects to a again, over its unix socket this time (nbd-client
#     -unix), fsck clean and every file there; both stop cleanly.
# One guest, both nodes in it: the fault is a node's process killed, which
# one kernel shows as well as two, and two guests would halve the vCPUs of
# each (TCG) for no other gain here. The client's kernel is the one both
# nodes run on: what the test kills is ftvmd, never the client.
# shellcheck source=tests/vm/joblib.sh
. "$FTVM_SRC/tests/vm/joblib.sh"

ctl=$FTVM_BUILD/tools/ftvmctl
ftvmd=$FTVM_BUILD/node/ftvmd
etc=/etc/ftvm-nbd
var=/var/lib/ftvm-nbd
run=/run/ftvm-nbd
mnt=/mnt/vol
scratch=$(mktemp -d)
volume=vol
dev=/dev/nbd0
declare -A pids nbd_port partner_port
partner_port=([a]=7101 [b]=7102)
nbd_port=([a]=10809 [b]=10810)
FILES=200
# Files 1..FIRST are written with the pair whole; the rest while a is killed.
FIRST=120
KILL_AFTER=$((FIRST + 8))

# On the way out: no ftvmd or writer left behind, the device let go, and
# the nodes' logs when something failed.
on_exit() {
	local rc=$? id
	[ -z "${writer:-}" ] || kill "$writer" 2>/dev/null || true
	# The device first: its requests failed, nothing waits on a dead one.
	timeout 30 nbd-client -d "$dev" >/dev/null 2>&1 || true
	timeout 30 umount -l "$mnt" 2>/dev/null || true
	for id in a b; do
		[ -z "${pids[$id]:-}" ] || kill -9 "${pids[$id]}" 2>/dev/null || true
	done
	if [ "$rc" -ne 0 ]; then
		for id in a b; do
			if [ -f "$FTVM_OUT/ftvmd-$id.log" ]; then
				echo "---- ftvmd $id (last 60 lines)"
				tail -n 60 "$FTVM_OUT/ftvmd-$id.log"
			fi
		done
		echo "---- dmesg (nbd, ext4; last 40 lines)"
		dmesg | grep -E 'nbd|EXT4|ext4|blk_update' | tail -n 40 || true
	fi
	rm -rf "$scratch"
}
trap on_exit EXIT

command -v nbd-client >/dev/null || fail "no nbd-client in the image (tests/vm/image.sh installs it)"

step "the pair: a and b on loopback, each with [nbd] listen and socket, cache 50% of 64M"
mkdir -p "$etc" "$var" "$run" "$mnt"
# dead_after_ms 20 s: under TCG a full resync of the volume's 32M held the
# receiving node's event loop 3 to 8 s at a time, past 5 s, and the
# survivor took it for silent again and again (seen: the pair never whole).
"$ctl" keygen "$etc/pair.key" >/dev/null || fail "ftvmctl keygen"
for id in a b; do
	other=b
	[ "$id" = a ] || other=a
	cat >"$etc/$id.conf" <<-CONF
		[node]
		id = $id
		listen = 127.0.0.1:${partner_port[$id]}
		partner = 127.0.0.1:${partner_port[$other]}
		key_file = $etc/pair.key
		socket = $run/$id.sock
		state_dir = $var/$id
		[memory]
		size = 64M
		cache = 50%
		[store]
		path = $var/store
		[failover]
		heartbeat_ms = 200
		dead_after_ms = 20000
		[nbd]
		listen = 127.0.0.1:${nbd_port[$id]}
		socket = $run/$id.nbd
	CONF
done

c() { # c ID ARGS...: ftvmctl against node ID
	local id=$1
	shift
	"$ctl" --config "$etc/$id.conf" "$@"
}
field() { # field ID PATH: of ftvmctl status --json
	c "$1" --json status 2>/dev/null | jq -r ".$2"
}
is() { # is ID PATH VALUE
	[ "$(field "$1" "$2")" = "$3" ]
}
serving() {
	c "$1" status >/dev/null 2>&1
}
start() {
	"$ftvmd" --config "$etc/$1.conf" >>"$FTVM_OUT/ftvmd-$1.log" 2>&1 &
	pids[$1]=$!
	wait_for 60 "ftvmd $1 serving" serving "$1"
}
start a
start b
wait_for 120 "a active" is a state active
wait_for 120 "b active" is b state active
c a volume create "$volume" --size 64M >/dev/null || fail "volume create $volume --size 64M"
ok "pair active, volume $volume (64M) made on a; NBD on 127.0.0.1:${nbd_port[a]} (a), 127.0.0.1:${nbd_port[b]} (b)"

step "modprobe nbd; what nbd-client negotiates"
modprobe nbd || fail "modprobe nbd: the guest kernel has no nbd module ($(uname -r))"
[ -b "$dev" ] || wait_for 10 "$dev" test -b "$dev"
list=$(timeout 60 nbd-client -l 127.0.0.1 "${nbd_port[b]}" 2>&1) ||
	fail "nbd-client -l 127.0.0.1 ${nbd_port[b]}: $list"
grep -qx "$volume" <<<"$list" || fail "nbd-client -l on b does not list $volume: $list"
out=$(timeout 60 nbd-client 127.0.0.1 "${nbd_port[a]}" /dev/nbd1 -N nosuch -b 4096 2>&1) &&
	fail "nbd-client connected an unknown export: $out"
grep -q "Server said: no such export" <<<"$out" ||
	fail "an unknown export: expected the server's reply to NBD_OPT_GO, got: $out"
ok "nbd-client -l lists $volume; -N nosuch refused by the server's NBD_OPT_GO reply: $(grep Error <<<"$out")"

sized() {
	[ "$(blockdev --getsize64 "$dev" 2>/dev/null)" = $((64 << 20)) ]
}
# connect ARGS...: nbd-client's way to a node, then the device's size.
connect() {
	local out
	out=$(timeout 120 nbd-client "$@" "$dev" -N "$volume" -b 4096 2>&1) ||
		fail "nbd-client $* $dev -N $volume -b 4096: $out"
	wait_for 30 "$dev sized 64M" sized
	echo "$out" | tr '\n' ' '
}
# dev_free: no connection on $dev left (nbd-client -c: 1 not connected).
dev_free() {
	local rc=0
	nbd-client -c "$dev" >/dev/null 2>&1 || rc=$?
	[ "$rc" -eq 1 ]
}

step "/dev/nbd0 on a over TCP, mkfs.ext4, mounted"
t=$(now_ms)
out=$(connect 127.0.0.1 "${nbd_port[a]}")
ok "nbd-client 127.0.0.1 ${nbd_port[a]} $dev -N $volume -b 4096 in $(($(now_ms) - t)) ms: $out"
grep -q "serving export '$volume'" "$FTVM_OUT/ftvmd-a.log" || fail "a's log says no \"serving export '$volume'\""
t=$(now_ms)
mkfs.ext4 -q -F -L ftvm-vol "$dev" || fail "mkfs.ext4 $dev"
mount "$dev" "$mnt" || fail "mount $dev $mnt"
ok "mkfs.ext4 and mount in $(($(now_ms) - t)) ms: $(df -h "$mnt" | tail -n 1)"

# The files' contents, made here first: a file's sha256 is its source's.
mkdir -p "$scratch/src"
for i in $(seq 1 "$FILES"); do
	head -c $((4096 + RANDOM * 8 % (256 * 1024 - 4096 + 1))) /dev/urandom >"$scratch/src/f$i"
done
# write_files FROM TO: each file with dd conv=fsync; its line goes into
# the manifest only once dd returned 0 (the write and the fsync done).
write_files() {
	local i
	for i in $(seq "$1" "$2"); do
		dd if="$scratch/src/f$i" of="$mnt/f$i" bs=64K conv=fsync status=none \
			2>>"$scratch/writer.err" || {
			echo "f$i" >"$scratch/writer.failed"
			return 1
		}
		(cd "$scratch/src" && sha256sum "f$i") >>"$scratch/manifest"
	done
}
manifest_lines() {
	if [ -f "$scratch/manifest" ]; then wc -l <"$scratch/manifest"; else echo 0; fi
}

step "files 1..$FIRST with dd conv=fsync through a"
t=$(now_ms)
write_files 1 "$FIRST" || fail "writing f$(cat "$scratch/writer.failed") with the pair whole: $(cat "$scratch/writer.err")"
bytes=$(du -cb "$mnt"/f* | tail -n 1 | cut -f1)
ms=$(($(now_ms) - t))
ok "$FIRST files, $((bytes / 1024)) KiB, each fsynced, in $ms ms ($((bytes * 1000 / 1024 / (ms + 1))) KiB/s)"

step "kill -9 a while files $((FIRST + 1))..$FILES are being written"
write_files $((FIRST + 1)) "$FILES" &
writer=$!
past_kill_point() {
	[ "$(manifest_lines)" -ge "$KILL_AFTER" ] || ! kill -0 "$writer" 2>/dev/null
}
wait_for 300 "$KILL_AFTER files written" past_kill_point
before=$(manifest_lines)
t=$(now_ms)
kill -9 "${pids[a]}"
wait "${pids[a]}" 2>/dev/null || true
pids[a]=
wait_for 120 "b takes over" is b state solo
ok "a killed with $before files fsynced; b solo after $(($(now_ms) - t)) ms: $(field b reason)"

# The kernel's client keeps the requests in flight on a dead connection:
# configured through netlink with no -t timeout, it waits for a new socket
# (which nbd-client -p would give it, from the same address only), logging
# "Possible stuck request" every 30 s; a request made after the death fails
# at once. So the writer, in its fsync, either waits with them (the mount
# busy) or has ended with EIO. nbd-client -d fails what waits: the writer
# ends, and the mount can go.
step "the dead device let go (nbd-client -d, umount); /dev/nbd0 to b's port"
writer_done() {
	! kill -0 "$writer" 2>/dev/null
}
if writer_done; then
	waiting="the writer had ended by itself (EIO) before nbd-client -d"
else
	waiting="the writer still waiting $(($(now_ms) - t)) ms after the kill, until nbd-client -d"
fi
echo "  kernel: $(dmesg | grep -E 'nbd0' | tail -n 3 | tr '\n' ' ')"
t=$(now_ms)
out=$(timeout 60 nbd-client -d "$dev" 2>&1) || fail "nbd-client -d $dev: $out"
wait_for 120 "the writer to end" writer_done
wrc=0
wait "$writer" || wrc=$?
writer=
if [ "$wrc" -ne 0 ]; then
	ok "$waiting: it stopped at $(cat "$scratch/writer.failed") ($(tail -n 1 "$scratch/writer.err")); $(manifest_lines) files fsynced in all"
else
	ok "$waiting: all $FILES files fsynced before the device failed"
fi
if timeout 60 umount "$mnt"; then
	how=umount
else
	timeout 60 umount -l "$mnt" || fail "umount -l $mnt"
	how="umount -l"
fi
wait_for 60 "$dev disconnected" dev_free
ok "nbd-client -d $dev, $how, the device free in $(($(now_ms) - t)) ms"
t=$(now_ms)
out=$(connect 127.0.0.1 "${nbd_port[b]}")
ok "nbd-client 127.0.0.1 ${nbd_port[b]} $dev -N $volume -b 4096 (b, solo) in $(($(now_ms) - t)) ms: $out"

# check_fs WHAT: fsck, then mounted read-only, every manifest file by sha256.
check_fs() {
	local out rc=0 used counted inodes want
	want=$((11 + $(manifest_lines)))
	# Read-only, before anything is replayed: a filesystem mounted when its
	# server died has its journal to replay, which e2fsck -n does not do;
	# what it says then is shown, not judged.
	echo "  superblock: $(sb_summary)"
	out=$(timeout 300 e2fsck -fn "$dev" 2>&1) || rc=$?
	echo "  e2fsck -fn before the journal's replay: exit $rc; $(grep -E 'journal|clean|files' <<<"$out" | tr '\n' ' ')"
	# The journal replayed, as a mount would; then a read-only check that
	# must find nothing (exit 0), and the files in it.
	rc=0
	out=$(timeout 300 e2fsck -E journal_only -p "$dev" 2>&1) || rc=$?
	echo "  e2fsck -E journal_only -p: exit $rc; $(tr '\n' ' ' <<<"$out")"
	[ "$rc" -le 1 ] || fail "$1: e2fsck -E journal_only exited $rc: $out"
	echo "  superblock: $(sb_summary)"
	rc=0
	out=$(timeout 300 e2fsck -fn "$dev" 2>&1) || rc=$?
	[ "$rc" -eq 0 ] || fail "$1: e2fsck -fn $dev exited $rc: $out"
	# Inodes in use as e2fsck counted them: its summary line takes the
	# superblock's free count, which ext4 leaves stale until an unmount (a
	# difference that is no error: -n leaves it, exit 0), so what it
	# counted in pass 5 wins.
	used=$(sed -n 's|^[^:]*: \([0-9]*\)/[0-9]* files.*|\1|p' <<<"$out")
	counted=$(sed -n 's|^Free inodes count wrong ([0-9]*, counted=\([0-9]*\)).*|\1|p' <<<"$out")
	inodes=$(sed -n 's|^[^:]*: [0-9]*/\([0-9]*\) files.*|\1|p' <<<"$out")
	[ -z "$counted" ] || used=$((inodes - counted))
	if [ "${used:-0}" -lt "$want" ]; then
		# What the server has, past the device's page cache.
		dd if="$dev" of="$scratch/image" bs=1M iflag=direct status=none || true
		echo "  e2fsck -fn of a copy read with O_DIRECT: $(e2fsck -fn "$scratch/image" 2>&1 | tail -n 1)"
		rm -f "$scratch/image"
		fail "$1: e2fsck -fn finds $used inodes in use, fewer than the $want the fsynced files need: $out"
	fi
	ok "$1: e2fsck -fn clean after the journal replay, $used inodes in use (the $want the files need): $(tail -n 1 <<<"$out")"
	mount -o ro "$dev" "$mnt" || fail "$1: mount -o ro $dev"
	out=$(cd "$mnt" && sha256sum --quiet -c "$scratch/manifest" 2>&1) ||
		fail "$1: files whose fsync had returned differ: $out"
	ok "$1: all $(manifest_lines) files whose fsync returned read back with their sha256"
	umount "$mnt" || fail "$1: umount $mnt"
}
sb_summary() {
	dumpe2fs -h "$dev" 2>/dev/null | grep -E '^(Filesystem state|Free inodes|Free blocks):' |
		tr -s ' ' | tr '\n' ';'
	dumpe2fs -h "$dev" 2>/dev/null | grep -q '^Filesystem features:.*needs_recovery' && echo -n " needs_recovery"
	echo
}
check_fs "through b"

step "a starts again, is resynced; verify"
t=$(now_ms)
start a
wait_for 300 "a active" is a state active
wait_for 300 "b active" is b state active
V=$(c b --json verify) || fail "verify on b: $V"
[ "$(jq -r .equal <<<"$V")" = true ] || fail "verify on b: $V"
ok "a back and resynced in $(($(now_ms) - t)) ms: both active, verify equal"

step "/dev/nbd0 to a again, over its unix socket"
out=$(timeout 60 nbd-client -d "$dev" 2>&1) || fail "nbd-client -d $dev: $out"
wait_for 60 "$dev disconnected" dev_free
out=$(connect -unix "$run/a.nbd")
ok "nbd-client -unix $run/a.nbd $dev -N $volume -b 4096: $out"
check_fs "through a, resynced"
out=$(timeout 60 nbd-client -d "$dev" 2>&1) || fail "nbd-client -d $dev: $out"
wait_for 60 "$dev disconnected" dev_free

step "stop"
echo "  nbd a: $(c a --json status | jq -c .nbd)"
echo "  nbd b: $(c b --json status | jq -c .nbd)"
for id in a b; do
	kill -TERM "${pids[$id]}"
	rc=0
	wait "${pids[$id]}" || rc=$?
	pids[$id]=
	[ "$rc" -eq 0 ] || fail "ftvmd $id exited $rc on SIGTERM"
done
ok "both stopped cleanly"
echo "nbd_kernel: all checks passed in $(elapsed) s"
