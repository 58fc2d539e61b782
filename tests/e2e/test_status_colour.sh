#!/usr/bin/env bash
# ftvmctl status colours the node's and the partner's state and the link on
# a terminal (script(1) gives it one): green when active and up, red when
# the link is down; never in a pipe, nor with NO_COLOR set.
. "$(dirname "$0")/lib.sh"
need_tools script

start_pair
on_tty() { script -qec "$*" /dev/null; }
esc=$'\033'

out=$(on_tty "$FTVMCTL --config $WORK/a.conf status")
grep -q "node a: ${esc}\[1;32mactive${esc}\[0m" <<<"$out" || fail "no green active on a terminal: $(cat -v <<<"$out" | head -3)"
grep -q "link ${esc}\[1;32mup${esc}\[0m" <<<"$out" || fail "no green link on a terminal: $(cat -v <<<"$out" | head -4)"
ok "a terminal: $(cat -v <<<"$out" | head -1)"

out=$(NO_COLOR=1 on_tty "$FTVMCTL --config $WORK/a.conf status")
! grep -q "$esc" <<<"$out" || fail "colour with NO_COLOR: $(cat -v <<<"$out" | head -3)"
out=$(ctl a status)
! grep -q "$esc" <<<"$out" || fail "colour in a pipe: $(cat -v <<<"$out" | head -3)"
out=$(ctl a --json status)
! grep -q "$esc" <<<"$out" || fail "colour in JSON"
ok "no colour with NO_COLOR, in a pipe, or in JSON"

kill -TERM "${PIDS[b]}"
wait "${PIDS[b]}" || true
unset "PIDS[b]"
wait_for 10000 "a alone" field_is a state solo
out=$(on_tty "$FTVMCTL --config $WORK/a.conf status")
grep -q "node a: ${esc}\[1;33msolo" <<<"$out" && grep -q "link ${esc}\[1;31mdown" <<<"$out" ||
	fail "solo and the link down: $(cat -v <<<"$out" | head -4)"
ok "solo in yellow, the link down in red"
