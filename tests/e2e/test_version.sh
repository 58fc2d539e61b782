#!/usr/bin/env bash
# `ftvmd --version` and `ftvmctl --version` (and -V) print one line: the
# program, meson's project version and the build's features, exit 0, and
# need no node. FTVM_VERSION and FTVM_FEATURES come from tests/meson.build,
# which reads them from the build: whether rdma-core was found, b_sanitize.
. "$(dirname "$0")/lib.sh"

FTVM_VERSION=${FTVM_VERSION:?FTVM_VERSION must be the project version}
FTVM_FEATURES=${FTVM_FEATURES:?FTVM_FEATURES must be the features this build has}

# version_is PROGRAM ARG...: PROGRAM ARG... exits 0 saying the one line.
version_is() {
	local name=$1 out rc=0
	shift
	out=$(FTVM_SOCKET='' "$@" 2>&1) || rc=$?
	[ "$rc" -eq 0 ] || fail "$name $*: exit $rc, said: $out"
	[ "$out" = "$name $FTVM_VERSION ($FTVM_FEATURES)" ] ||
		fail "$name: said '$out', wanted '$name $FTVM_VERSION ($FTVM_FEATURES)'"
	ok "$name ${*:2}: $out"
}

version_is ftvmd "$FTVMD" --version
version_is ftvmctl "$FTVMCTL" --version
version_is ftvmctl "$FTVMCTL" -V
# Before any config is needed: a --config that does not exist is not read.
version_is ftvmd "$FTVMD" --version --config "$WORK/none.conf"
