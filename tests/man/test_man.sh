#!/usr/bin/env bash
# The man pages against what they document, so that they cannot drift:
#  - ftvmctl(8): every option of `ftvmctl --help` in OPTIONS; every command
#    of its list with a subsection of its own under COMMANDS, holding every
#    option and verb (create, list...) its `ftvmctl COMMAND --help` names;
#  - ftvmd(8): every option of `ftvmd --help` in OPTIONS;
#  - ftvm.conf(5): every key the parser knows (ftvm-config-keys, from
#    common/config.c's table) as an entry "KEY = ..." under its [SECTION];
#  - libftvm(3): every FTVM_EXPORT function of ftvm.h (the same set as the
#    library's dynamic symbols) as an entry under FUNCTIONS, and the inline
#    wrappers and macros named there;
#  - each page: no warning from `groff -ww -z -man`, rendered by `man -l`
#    with its NAME line, and the other three in its SEE ALSO.
# The checks read the pages as man renders them: sections at column 0,
# subsections at 3, entries at 7.
set -euo pipefail

FTVMD=${FTVMD:?FTVMD must name the ftvmd binary}
FTVMCTL=${FTVMCTL:?FTVMCTL must name the ftvmctl binary}
FTVM_CONFIG_KEYS=${FTVM_CONFIG_KEYS:?FTVM_CONFIG_KEYS must name ftvm-config-keys}
FTVM_LIBFTVM=${FTVM_LIBFTVM:?FTVM_LIBFTVM must name libftvm.so}
FTVM_HEADER=${FTVM_HEADER:?FTVM_HEADER must name ftvm.h}

if [ -z "${FTVM_MANDIR:-}" ]; then
	echo "SKIP: the man pages are not built (no scdoc: tools/install-deps.sh; or -Dman=disabled)"
	exit 77
fi
for tool in groff man nm; do
	command -v "$tool" >/dev/null || {
		echo "SKIP: $tool is not installed (tools/install-deps.sh)"
		exit 77
	}
done

WORK=$(mktemp -d "${TMPDIR:-/tmp}/ftvm-man.XXXXXX")
trap 'rm -rf "$WORK"' EXIT
FAILURES=0
CHECKS=0

bad() {
	echo "FAIL: $*" >&2
	FAILURES=$((FAILURES + 1))
}

# check WHAT COMMAND...: counts a check, and a failure saying WHAT.
check() {
	local what=$1
	shift
	CHECKS=$((CHECKS + 1))
	"$@" || bad "$what"
}

export LC_ALL=C.UTF-8 MANWIDTH=200

# ---- the pages, linted and rendered ----
declare -A TITLE=([ftvmd.8]=ftvmd [ftvmctl.8]=ftvmctl [ftvm.conf.5]=ftvm.conf [libftvm.3]=libftvm)
for page in "${!TITLE[@]}"; do
	path=$FTVM_MANDIR/$page
	[ -s "$path" ] || {
		bad "$path was not built"
		continue
	}
	groff -ww -z -man "$path" >"$WORK/$page.lint" 2>&1 || true
	check "groff -ww -z -man $page: $(cat "$WORK/$page.lint")" test ! -s "$WORK/$page.lint"
	man -P cat -l "$path" >"$WORK/$page.txt" 2>"$WORK/$page.err" || bad "man -l $page: $(cat "$WORK/$page.err")"
	check "man -l $page has no NAME line '${TITLE[$page]} - ...'" \
		grep -q "^       ${TITLE[$page]} - " "$WORK/$page.txt"
	for other in "${!TITLE[@]}"; do
		[ "$other" != "$page" ] || continue
		ref="${TITLE[$other]}(${other##*.})"
		check "$page: SEE ALSO lacks $ref" \
			grep -qF "$ref" <(awk '/^SEE ALSO$/ { on = 1; next } /^[A-Z]/ { on = 0 } on' "$WORK/$page.txt")
	done
done
MANWIDTH=80 man -P cat -l "$FTVM_MANDIR/ftvmctl.8" >"$WORK/narrow.txt" 2>/dev/null || true
check "man -l ftvmctl.8 at 80 columns: no COMMANDS" grep -q "^COMMANDS$" "$WORK/narrow.txt"
echo "ok: ${#TITLE[@]} pages lint clean with groff -ww and render with man -l"

# section PAGE NAME: the lines of section NAME of a rendered page.
section() {
	awk -v name="$2" '$0 == name { on = 1; next } /^[A-Z]/ { on = 0 } on' "$WORK/$1.txt"
}

# subsection PAGE SECTION NAME: the lines of subsection NAME of SECTION.
subsection() {
	section "$1" "$2" | awk -v name="   $3" '$0 == name { on = 1; next } /^   [^ ]/ { on = 0 } on'
}

# has_entry TEXT_FILE ENTRY: a line of TEXT_FILE starts, at column 7, with
# ENTRY followed by a blank or the line's end.
has_entry() {
	awk -v e="       $2" 'BEGIN { n = length(e) }
		substr($0, 1, n) == e && (length($0) == n || substr($0, n + 1, 1) == " ") { found = 1 }
		END { exit !found }' "$1"
}

# has_word TEXT_FILE WORD: WORD (an option, a verb, "name()") stands alone
# in it: no letter, digit, '_' or '-' right before or after it.
has_word() {
	awk -v w="$2" 'function part(c) { return c ~ /[A-Za-z0-9_-]/ }
		{
			line = $0; at = 0
			while ((i = index(line, w)) > 0) {
				before = at + i - 1 > 0 ? substr($0, at + i - 1, 1) : ""
				after = substr($0, at + i + length(w), 1)
				if (!part(before) && !part(after)) found = 1
				at += i; line = substr(line, i + 1)
			}
		}
		END { exit !found }' "$1"
}

# options HELP_FILE: the option lines of a --help, as their man entries
# read: "-c, --config" or "--check".
options() {
	sed -nE 's/^  +(-[A-Za-z], )?(--[a-z][a-z-]*).*/\1\2/p' "$1"
}

# ---- ftvmctl(8) ----
"$FTVMCTL" --help >"$WORK/ftvmctl.help"
section ftvmctl.8 OPTIONS >"$WORK/ftvmctl.options"
n=0
while read -r entry; do
	check "ftvmctl(8) OPTIONS lacks '$entry' (ftvmctl --help)" has_entry "$WORK/ftvmctl.options" "$entry"
	n=$((n + 1))
done < <(options "$WORK/ftvmctl.help")
[ "$n" -ge 5 ] || bad "ftvmctl --help: only $n options read"
# Options every command's --help repeats from the global usage line.
grep -oE -- '--[a-z][a-z-]*' "$WORK/ftvmctl.help" | sort -u >"$WORK/global.options"
mapfile -t commands < <(sed -n '/^Commands:$/,/^$/ s/^  \([a-z][a-z-]*\)  .*/\1/p' "$WORK/ftvmctl.help")
[ "${#commands[@]}" -ge 15 ] || bad "ftvmctl --help: only ${#commands[@]} commands read"
opts=0
words=0
for cmd in "${commands[@]}"; do
	subsection ftvmctl.8 COMMANDS "$cmd" >"$WORK/cmd.$cmd"
	check "ftvmctl(8) has no subsection '$cmd' under COMMANDS" test -s "$WORK/cmd.$cmd"
	"$FTVMCTL" "$cmd" --help >"$WORK/help.$cmd"
	# The command's arguments, from its usage line: "create NAME --size N
	# [--home NODE] | list | delete NAME".
	args=$(sed -n '1s/^Usage: ftvmctl \[[^]]*\] \[--json\] [a-z-]* *//p' "$WORK/help.$cmd")
	grep -oE -- '--[a-z][a-z-]*' <<<"$args" | sort -u >"$WORK/usage.$cmd" || true
	# Its options, each an entry of its own; other options its help
	# mentions (clients: "alloc --name") named at least.
	while read -r opt; do
		if grep -qxF -- "$opt" "$WORK/usage.$cmd"; then
			check "ftvmctl(8), $cmd: no entry for its option $opt (ftvmctl $cmd --help)" \
				has_entry "$WORK/cmd.$cmd" "$opt"
		else
			check "ftvmctl(8), $cmd: lacks $opt (ftvmctl $cmd --help)" has_word "$WORK/cmd.$cmd" "$opt"
		fi
		opts=$((opts + 1))
	done < <(grep -oE -- '--[a-z][a-z-]*' "$WORK/help.$cmd" | sort -u | comm -23 - "$WORK/global.options")
	# The verbs: the first word of each alternative of the arguments.
	while read -r verb; do
		check "ftvmctl(8), $cmd: lacks its verb '$verb'" has_word "$WORK/cmd.$cmd" "$verb"
		words=$((words + 1))
	done < <(awk '$1 ~ /^[a-z]+$/ { print $1 }' <<<"${args// | /$'\n'}")
done
echo "ok: ftvmctl(8): $n options, ${#commands[@]} commands with $opts options and $words verbs of their own"

# ---- ftvmd(8) ----
"$FTVMD" --help >"$WORK/ftvmd.help"
section ftvmd.8 OPTIONS >"$WORK/ftvmd.options"
n=0
while read -r entry; do
	check "ftvmd(8) OPTIONS lacks '$entry' (ftvmd --help)" has_entry "$WORK/ftvmd.options" "$entry"
	n=$((n + 1))
done < <(options "$WORK/ftvmd.help")
[ "$n" -ge 4 ] || bad "ftvmd --help: only $n options read"
echo "ok: ftvmd(8): $n options"

# ---- ftvm.conf(5) ----
"$FTVM_CONFIG_KEYS" >"$WORK/keys"
section ftvm.conf.5 SECTIONS >"$WORK/sections"
n=0
while read -r sect key; do
	heading=$(grep -m1 -E "^   \[${sect}[] ]" "$WORK/sections" | sed 's/^   //') || true
	if [ -z "$heading" ]; then
		bad "ftvm.conf(5) has no subsection [$sect] under SECTIONS"
		continue
	fi
	subsection ftvm.conf.5 SECTIONS "$heading" >"$WORK/keys.$sect"
	check "ftvm.conf(5), $heading: lacks the key '$key = ...'" \
		grep -qE "^       $key = " "$WORK/keys.$sect"
	n=$((n + 1))
done <"$WORK/keys"
[ "$n" -ge 30 ] || bad "ftvm-config-keys: only $n keys"
echo "ok: ftvm.conf(5): $n keys, each under its section"

# ---- libftvm(3) ----
sed -nE 's/^FTVM_EXPORT [^(]*[ *](ftvm_[a-z0-9_]+)\(.*/\1/p' "$FTVM_HEADER" | sort >"$WORK/exported"
nm -D --defined-only "$FTVM_LIBFTVM" | awk '$2 == "T" && $3 ~ /^ftvm_/ { print $3 }' | sort >"$WORK/symbols"
check "ftvm.h's FTVM_EXPORT functions are not libftvm.so's symbols: $(diff "$WORK/exported" "$WORK/symbols" | tr '\n' ' ')" \
	cmp -s "$WORK/exported" "$WORK/symbols"
sed -nE 's/^static inline [^(]*[ *](ftvm_[a-z0-9_]+)\(.*/\1/p; s/^#define (ftvm_[a-z0-9_]+)\(.*/\1/p' \
	"$FTVM_HEADER" | sort -u >"$WORK/wrappers"
section libftvm.3 FUNCTIONS >"$WORK/functions"
while read -r fn; do
	check "libftvm(3) FUNCTIONS lacks an entry $fn(...)" grep -qE "^       (.*, )?$fn\(" "$WORK/functions"
done <"$WORK/exported"
while read -r fn; do
	check "libftvm(3) FUNCTIONS does not name $fn()" has_word "$WORK/functions" "$fn()"
done <"$WORK/wrappers"
[ "$(wc -l <"$WORK/exported")" -ge 40 ] || bad "ftvm.h: only $(wc -l <"$WORK/exported") FTVM_EXPORT functions read"
echo "ok: libftvm(3): $(wc -l <"$WORK/exported") exported functions, $(wc -l <"$WORK/wrappers") inline wrappers and macros"

if [ "$FAILURES" -ne 0 ]; then
	echo "$FAILURES of $CHECKS checks failed" >&2
	exit 1
fi
echo "ok: all $CHECKS checks"
