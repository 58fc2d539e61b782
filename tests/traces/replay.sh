#!/usr/bin/env bash
# Replays one path of the trace library (tests/traces/README.md): each of
# its traces (both nodes', a's alone where b restarted), made binary from
# its text form and replayed against a fresh node with ftvmctl trace replay.
# Exit 0 only when every answer of each matched.
#
#   FTVMCTL=... tests/traces/replay.sh NAME
set -euo pipefail

FTVMCTL=${FTVMCTL:?FTVMCTL must name the ftvmctl binary}
HERE=$(cd "$(dirname "$0")" && pwd)
NAME=${1:?which path? (tests/traces/paths.sh)}
WORK=$(mktemp -d "${TMPDIR:-/tmp}/ftvm-traces.XXXXXX")
trap 'rm -rf "$WORK"' EXIT

for id in a b; do
	text=$HERE/$NAME.$id.txt
	# b's is missing where b restarted during the path (record.sh).
	[ "$id" = a ] || [ -e "$text" ] || continue
	"$FTVMCTL" trace binary "$text" "$WORK/$NAME.$id.trace"
	# And back: the same data lines (the comments name the file).
	"$FTVMCTL" trace text "$WORK/$NAME.$id.trace" | grep -v '^#' >"$WORK/back.txt"
	grep -v '^#' "$text" | cmp -s - "$WORK/back.txt" ||
		{ echo "replay.sh: $text does not convert back to itself" >&2; exit 1; }
	"$FTVMCTL" trace replay "$WORK/$NAME.$id.trace"
done
