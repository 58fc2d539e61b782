#!/usr/bin/env bash
# Builds, once, the Debian 12 guest image tests/vm/run.sh boots (see
# ../shared/RDMA.md): debootstrap minbase with the kernel, systemd as PID 1,
# rdma-core and perftest for Soft-RoCE, the libraries ftvmd and ftvmctl link,
# and the job runner (guest/ftvm-job, guest/ftvm-job.service); then the root
# tree goes into a raw ext4 image with `mkfs.ext4 -d` (no loop mount).
#
# The image is cached outside the tree, in
#   ${FTVM_VM_CACHE:-${XDG_CACHE_HOME:-$HOME/.cache}/ftvm-vm}/<hash>/
# (image.raw, vmlinuz, initrd.img), the hash taken over this script and the
# guest files, so changing any of them builds a new one and older ones are
# removed. Prints that folder on stdout; progress goes to stderr.
#
# Exit status: 0 the image is there; 77 it cannot be had here (no
# debootstrap, no root, no mirror, the build failed), with the reason.
#
# Environment: FTVM_VM_CACHE (the cache folder), FTVM_VM_MIRROR (a Debian
# mirror URL; default: the one apt uses, from /etc/apt/sources.list.d/ or
# /etc/apt/sources.list), FTVM_VM_BUILD_TIMEOUT (seconds for debootstrap,
# default 1200).
set -euo pipefail

HERE=$(cd "$(dirname "$0")" && pwd)
SUITE=bookworm
IMAGE_SIZE=4G
# Soft-RoCE and the tools that check it (RDMA.md), the runtime libraries of
# ftvmd and ftvmctl (ldd on them; librdmacm1 and libibverbs1 for the RDMA
# transport, libnbd0 for ftvmctl drill --volume), jq for the jobs'
# `ftvmctl --json`, python3 for the e2e tests the RDMA jobs run inside
# (tests/e2e/), nbd-client (the kernel's NBD client's configurator) and
# e2fsprogs (minbase has it; named for mkfs.ext4 and e2fsck on a volume)
# for jobs/nbd_kernel.sh; a one-node Pacemaker cluster for
# jobs/pacemaker_ocf.sh: pacemaker, corosync, pacemaker-cli-utils (crm_mon,
# cibadmin, crm_resource; pacemaker only recommends it) and resource-agents
# (the agent's ocf-shellfuncs).
PACKAGES=(
	linux-image-amd64 systemd-sysv systemd udev kmod iproute2 procps iputils-ping
	rdma-core ibverbs-providers ibverbs-utils rdmacm-utils perftest libibverbs1 librdmacm1
	libevent-2.1-7 libprotobuf-c1 libsqlite3-0 libsystemd0 libinih1 libjson-c5 libssl3
	libisal2 libnbd0 jq python3 nbd-client e2fsprogs
	pacemaker pacemaker-cli-utils corosync resource-agents
)

skip() {
	echo "vm image: cannot be built here: $*" >&2
	exit 77
}

say() {
	echo "vm image: $*" >&2
}

cache_root=${FTVM_VM_CACHE:-${XDG_CACHE_HOME:-$HOME/.cache}/ftvm-vm}
hash=$({
	cat "$0" "$HERE/guest/ftvm-job" "$HERE/guest/ftvm-job.service"
	printf '%s\n' "$SUITE" "$IMAGE_SIZE" "${PACKAGES[@]}"
} | sha256sum | cut -c1-16)
dir=$cache_root/$hash

ready() {
	[ -f "$dir/ready" ] && [ -f "$dir/image.raw" ] && [ -f "$dir/vmlinuz" ] &&
		[ -f "$dir/initrd.img" ]
}

if ready; then
	echo "$dir"
	exit 0
fi

PATH=$PATH:/usr/sbin:/sbin
for tool in debootstrap mkfs.ext4 flock timeout; do
	command -v "$tool" >/dev/null || skip "no $tool (tools/install-deps.sh installs it)"
done

as_root=()
if [ "$(id -u)" -ne 0 ]; then
	sudo -n true 2>/dev/null || skip "debootstrap needs root, and sudo asks for a password"
	as_root=(sudo -n)
fi

# The mirror apt already uses: never a host name written here.
mirror_from_apt() {
	local f=/etc/apt/sources.list.d/debian.sources
	if [ -r "$f" ]; then
		# deb822: the first stanza whose Suites: has $SUITE itself.
		awk -v suite="$SUITE" '
			function flush() {
				if (!done && uri != "" && ok) { print uri; done = 1 }
				uri = ""; ok = 0
			}
			/^[[:space:]]*#/ { next }
			/^[[:space:]]*$/ { flush(); next }
			tolower($1) == "uris:" { uri = $2 }
			tolower($1) == "suites:" { for (i = 2; i <= NF; i++) if ($i == suite) ok = 1 }
			END { flush() }
		' "$f"
		return
	fi
	if [ -r /etc/apt/sources.list ]; then
		awk -v suite="$SUITE" '
			$1 == "deb" {
				i = 2
				if ($i ~ /^\[/) while ($i !~ /\]$/) i++
				if ($i ~ /^\[/ || $i ~ /\]$/) i++
				if ($(i + 1) == suite) { print $i; exit }
			}
		' /etc/apt/sources.list
	fi
}

mirror=${FTVM_VM_MIRROR:-$(mirror_from_apt | head -n 1)}
[ -n "$mirror" ] || skip "no Debian mirror for $SUITE in apt's sources (set FTVM_VM_MIRROR)"

mkdir -p "$cache_root"
exec 9>"$cache_root/.lock"
say "waiting for the cache lock ($cache_root/.lock)"
flock -w 3600 9 || skip "the cache lock is held by another build for an hour"
if ready; then # another run built it meanwhile
	echo "$dir"
	exit 0
fi

# Under the lock no other build runs: a tmp.* left here is an interrupted one.
"${as_root[@]}" rm -rf "$cache_root"/tmp.*
work=$(mktemp -d -p "$cache_root")
root=$work/root
cleanup() {
	"${as_root[@]}" rm -rf "$work"
}
trap cleanup EXIT

start=$SECONDS
say "debootstrap $SUITE from $mirror into $root (a few minutes)"
include=$(
	IFS=,
	echo "${PACKAGES[*]}"
)
if ! "${as_root[@]}" timeout "${FTVM_VM_BUILD_TIMEOUT:-1200}" \
	debootstrap --variant=minbase --include="$include" "$SUITE" "$root" "$mirror" \
	>"$work/debootstrap.log" 2>&1; then
	tail -n 30 "$work/debootstrap.log" >&2
	skip "debootstrap failed (its log's end is above)"
fi
say "debootstrap took $((SECONDS - start)) s"

# The guest's configuration, written into the tree (no chroot needed).
configure() {
	local r=$1 here=$2
	echo ftvm-guest >"$r/etc/hostname"
	printf '127.0.0.1\tlocalhost\n127.0.1.1\tftvm-guest\n' >"$r/etc/hosts"
	echo '/dev/vda / ext4 rw,errors=remount-ro 0 1' >"$r/etc/fstab"
	# root logs in on the serial console without a password: a throwaway
	# guest, booted with snapshot=on, on no network.
	sed -i 's/^root:[^:]*:/root::/' "$r/etc/shadow"
	install -D -m 0755 "$here/guest/ftvm-job" "$r/usr/local/sbin/ftvm-job"
	install -D -m 0644 "$here/guest/ftvm-job.service" "$r/etc/systemd/system/ftvm-job.service"
	mkdir -p "$r/etc/systemd/system/multi-user.target.wants"
	ln -sf /etc/systemd/system/ftvm-job.service \
		"$r/etc/systemd/system/multi-user.target.wants/ftvm-job.service"
	# corosync and pacemaker come enabled (Debian's corosync.conf is a
	# one-node cluster), and cluster-glue's logd with them: they would start
	# in every job's guest. jobs/pacemaker_ocf.sh starts the first two itself.
	rm -f "$r"/etc/systemd/system/*.target.wants/corosync.service \
		"$r"/etc/systemd/system/*.target.wants/pacemaker.service \
		"$r"/etc/systemd/system/*.target.wants/logd.service
	# The journal stays in memory: every boot is thrown away.
	mkdir -p "$r/etc/systemd/journald.conf.d"
	printf '[Journal]\nStorage=volatile\n' >"$r/etc/systemd/journald.conf.d/ftvm.conf"
	rm -rf "$r"/var/cache/apt/archives/*.deb "$r"/var/lib/apt/lists/*
}
"${as_root[@]}" bash -c "set -e; $(declare -f configure); configure \"\$@\"" configure "$root" "$HERE"

kernel=$(find "$root/boot" -maxdepth 1 -name 'vmlinuz-*' | sort | tail -n 1)
initrd=$(find "$root/boot" -maxdepth 1 -name 'initrd.img-*' | sort | tail -n 1)
if [ -z "$kernel" ] || [ -z "$initrd" ]; then
	skip "no kernel or initrd in $root/boot"
fi

say "mkfs.ext4 -d: the root tree into a $IMAGE_SIZE raw image"
t=$SECONDS
if ! "${as_root[@]}" mkfs.ext4 -q -F -L ftvm-root -d "$root" "$work/image.raw" "$IMAGE_SIZE" \
	>"$work/mkfs.log" 2>&1; then
	cat "$work/mkfs.log" >&2
	skip "mkfs.ext4 -d failed"
fi
say "mkfs.ext4 took $((SECONDS - t)) s"

mkdir -p "$dir"
"${as_root[@]}" install -m 0644 "$kernel" "$dir/vmlinuz"
"${as_root[@]}" install -m 0644 "$initrd" "$dir/initrd.img"
"${as_root[@]}" mv "$work/image.raw" "$dir/image.raw"
if [ ${#as_root[@]} -gt 0 ]; then
	"${as_root[@]}" chown "$(id -u):$(id -g)" "$dir/vmlinuz" "$dir/initrd.img" "$dir/image.raw"
fi
printf '%s\n' "built $(date -u +%FT%TZ) from $mirror in $((SECONDS - start)) s" \
	"kernel $(basename "$kernel")" >"$dir/ready"

# Older images (other hashes) are of no more use.
for old in "$cache_root"/*/; do
	old=${old%/}
	if [[ ${old##*/} =~ ^[0-9a-f]{16}$ ]] && [ "$old" != "$dir" ]; then
		"${as_root[@]}" rm -rf "$old"
	fi
done
say "image ready in $dir after $((SECONDS - start)) s"
echo "$dir"
