#!/usr/bin/env bash
# Installs the Debian 12 packages that building, testing, fuzzing and the
# README demo need. Idempotent: when everything is already installed it does
# not touch apt at all. Uses sudo when not run as root.
set -euo pipefail

packages=(
	# build: meson.build, proto/meson.build
	meson ninja-build pkg-config gcc protobuf-c-compiler
	libevent-dev libprotobuf-c-dev libsqlite3-dev libsystemd-dev libinih-dev libjson-c-dev
	# the partner channel's authentication (HMAC-SHA256, nonces): OpenSSL's libcrypto
	libssl-dev
	# CRC-32C of page blocks (common/crc32c.c): Intel's ISA-L
	libisal-dev
	# the RDMA transport (meson option rdma=auto builds it when these are found)
	libibverbs-dev librdmacm-dev
	# the ASan+UBSan build and the libFuzzer targets
	clang libclang-rt-14-dev
	# the style check in `tools/dev.sh test` (.clang-format)
	clang-format
	# the man pages (man/): scdoc turns their source into roff (small, no
	# dependencies); tests/man/test_man.sh lints the roff with groff and
	# renders it with man (both on a standard Debian, listed for minimal ones)
	scdoc groff-base man-db
	# bash completion for ftvmctl (tools/completion/): meson asks its
	# pkg-config file where completions go, interactive shells load it
	bash-completion
	# tests/e2e and the demo: raw sockets and page tables (python3: tests/poke.py),
	# `ftvmctl --json` (jq), processes
	python3 jq procps iproute2
	# tests/e2e/test_ack_levels.sh: the order of a node's commit and its answer
	strace
	# tests/e2e/test_metrics.sh: `promtool check metrics` on ftvmctl metrics and
	# GET /metrics (promtool comes with Debian's prometheus package alone: about
	# 19 MB to fetch, 96 MB installed; its server is not started, nor used), and
	# curl for the scrapes
	prometheus curl
	# NBD clients against the NBD codec and server (tests/e2e/test_nbd*.sh:
	# nbdinfo and nbdcopy from libnbd-bin, libnbd's python module for writes
	# and flushes on connections of the test's choosing, qemu-io from
	# qemu-utils); fio (its nbd engine) and nbdkit (memory, the reference)
	# for the block path's benchmark, tools/bench_nbd.sh
	libnbd-bin python3-libnbd nbdkit fio
	# ftvmctl drill --volume: its NBD client (libnbd)
	libnbd-dev
	# for the benchmark's Redis reference (ftvm-bench-vmm); its system service is not used
	redis-server
	# `tools/dev.sh bench --plot` (tools/bench_plot.sh): the benchmarks' figures as
	# PNG files; the -nox build has the png and pngcairo terminals and no X11
	gnuplot-nox
	# the Pacemaker resource agent (ocf/ftvmd.in): its ocf-shellfuncs, and
	# ocf-tester with the meta-data's DTD for tests/e2e/test_ocf.sh (xmllint:
	# libxml2-utils, which resource-agents only recommends)
	resource-agents libxml2-utils
	# the qemu harness (tests/vm/, suite vm): a Debian guest image built with
	# debootstrap and mkfs.ext4 -d, booted under qemu's TCG
	qemu-system-x86 qemu-utils debootstrap e2fsprogs
)

missing=()
for p in "${packages[@]}"; do
	status=$(dpkg-query -W -f='${db:Status-Abbrev}' "$p" 2>/dev/null || true)
	[ "${status:0:2}" = "ii" ] || missing+=("$p")
done

if [ ${#missing[@]} -eq 0 ]; then
	echo "install-deps: all ${#packages[@]} packages already installed"
	exit 0
fi

sudo=()
if [ "$(id -u)" -ne 0 ]; then
	if ! command -v sudo >/dev/null; then
		echo "install-deps: not root and no sudo; as root, run:" >&2
		echo "  apt-get install -y --no-install-recommends ${missing[*]}" >&2
		exit 1
	fi
	sudo=(sudo)
fi

echo "install-deps: installing ${#missing[@]} package(s): ${missing[*]}"
export DEBIAN_FRONTEND=noninteractive
"${sudo[@]}" env DEBIAN_FRONTEND=noninteractive apt-get update
"${sudo[@]}" env DEBIAN_FRONTEND=noninteractive \
	apt-get install -y --no-install-recommends "${missing[@]}"
echo "install-deps: done"
