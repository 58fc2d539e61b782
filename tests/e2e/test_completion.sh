#!/usr/bin/env bash
# ftvmctl's bash completion (tools/completion/ftvmctl) against a real pair
# with volumes, as bash drives it: each line is completed in a fresh bash
# that sources the script, sets COMP_WORDS and COMP_CWORD and calls the
# function `complete -F` names; COMPREPLY is what the user is offered.
#  - commands, verbs and options, read from the ftvmctl completed;
#  - the values of an option: choices (--channels), files;
#  - GUIDs from the node named by the --config given earlier on the line
#    (also as --config=FILE, or by $FTVM_SOCKET), and none without a node;
#  - volume names for `volume delete` and `drill --volume`, node ids for
#    `drill kill`.
. "$(dirname "$0")/lib.sh"

COMPLETION=$FTVM_SRCDIR/tools/completion/ftvmctl

# offered WORD...: what completing the last WORD ("" for a new one) of the
# line "ftvmctl WORD..." offers, one a line, sorted. The ftvmctl is the
# build's, as the first word typed.
offered() {
	# shellcheck disable=SC2016 # the script is the inner bash's
	env -u FTVM_SOCKET ${SOCKET:+FTVM_SOCKET=$SOCKET} bash --norc --noprofile -c '
		source "$1"
		shift
		func=$(complete -p ftvmctl | sed -n "s/.* -F \([^ ]*\) .*/\1/p")
		COMP_WORDS=("$@")
		COMP_CWORD=$(($# - 1))
		COMP_LINE="$*"
		COMP_POINT=${#COMP_LINE}
		"$func" ftvmctl "${COMP_WORDS[COMP_CWORD]}" "${COMP_WORDS[COMP_CWORD - 1]}"
		printf "%s\n" "${COMPREPLY[@]}"' completion "$COMPLETION" "$FTVMCTL" "$@" | sed '/^$/d' | sort
}

# flat LINES: the lines on one line.
flat() { tr '\n' ' ' <<<"$1" | sed 's/ *$//'; }

# expect WANT WORD...: completing "ftvmctl WORD..." offers exactly WANT
# (words separated by blanks).
expect() {
	local want got
	want=$(tr ' ' '\n' <<<"$1" | sed '/^$/d' | sort)
	shift
	got=$(offered "$@")
	[ "$got" = "$want" ] ||
		fail "${SOCKET:+FTVM_SOCKET=$SOCKET }ftvmctl $*<TAB>: offered '$(flat "$got")', wanted '$(flat "$want")'"
	ok "${SOCKET:+FTVM_SOCKET=$SOCKET }ftvmctl $*<TAB>: $(flat "$got")"
}

# offers WANT WORD...: what it offers includes each of WANT.
offers() {
	local want=$1 got w
	shift
	got=$(offered "$@")
	for w in $want; do
		grep -qxF -- "$w" <<<"$got" || fail "ftvmctl $*<TAB>: offered '$(flat "$got")', without '$w'"
	done
	ok "ftvmctl $*<TAB>: $(wc -l <<<"$got") words, $want among them"
}

write_nbd_pair_configs
start_node a
start_node b
wait_for 5000 "pair linked" pair_up
A=$WORK/a.conf
B=$WORK/b.conf
ga=$(ctl a alloc --size 4K)
gb=$(ctl b alloc --size 8K)
ctl a volume create disk --size 1M >/dev/null
ctl b volume create data --size 1M >/dev/null
# Every allocation the nodes know: these two and the volumes'.
guids=$(ctl a --json list | jq -r '.[].guid')
if ! grep -qx "$ga" <<<"$guids" || ! grep -qx "$gb" <<<"$guids"; then
	fail "list: $(flat "$guids"), without $ga or $gb"
fi

# Commands, from ftvmctl --help: every one, and a prefix.
commands=$("$FTVMCTL" --help | sed -n '/^Commands:$/,/^$/ s/^  \([a-z][a-z-]*\)  .*/\1/p')
expect "$commands" ""
expect "volume" --config "$A" vol
expect "status store" --config "$A" st
# Global options; a command's own (and --json, --help); an option's choices.
offers "--config --socket --json --help --version" --
expect "--session --size" --config "$A" alloc --s
offers "--size --policy --immediate --header-file --name --session --json --help" --config "$A" alloc -
expect "partner" --config "$A" trace start t.trace --channels p
expect "all client partner" trace start t.trace --channels ""
# Verbs, from the usage line.
expect "create delete list" --config "$A" volume ""
expect "kill hang cut restart" --config "$A" drill ""
expect "init show" store ""
# Files: --config's value, and a FILE argument.
expect "$A" --config "$WORK/a.co"
expect "$A" --config = "$WORK/a.co"
expect "$WORK/b.conf" keygen "$WORK/b.co"
# GUIDs: the node's own and its partner's, through the --config given.
expect "$guids" --config "$A" write ""
expect "$guids" --json --config "$B" header ""
# A prefix; an option before the GUID; --config=FILE (bash splits it at '=').
expect "$(grep "^a-" <<<"$guids")" --config "$A" read --wait a-
expect "$(grep "^b-" <<<"$guids")" --config = "$B" free b-
SOCKET=$WORK/b.sock expect "$guids" read ""
expect "" write ""
# The option that takes a GUID's place is skipped: PAGE comes after GUID.
expect "" --config "$A" write --file "$WORK/x" "$ga" ""
# Volumes and node ids.
expect "data disk" --config "$A" volume delete ""
expect "disk" --config "$B" drill kill b --volume di
expect "" --config "$A" volume create ""
expect "a b" --config "$A" drill kill ""
expect "a b" --config "$B" drill hang ""
