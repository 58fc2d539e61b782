#!/usr/bin/env bash
# A batch applied part-way is not noted as applied (node/vmm/VMM.md, "Batches"):
# a's whole-page write of a page b owns, refused at b's WritePage for want of
# frames after its LockRequest and AllocateWrite went through, must leave b's
# partner-applied LSN at a's last write b applied, in every answer to the
# refused batch (b's trace shows them) and in b's pagetable.db after a clean
# stop. And a journalled the page's expected state as the request left
# (vmm/VMM.md, "The whole-page write of a page owned by the partner"): its
# pagetable.db after a clean stop has that row under the write's LSN, and a
# later one that puts the page back, journalled as a change (op "undo", not
# a destage's "clean") so that it is a's last own LSN.
. "$(dirname "$0")/lib.sh"

FTVM_HOLD=${FTVM_HOLD:?FTVM_HOLD must name the ftvm-hold binary}
FRAMES=256

write_pair_configs
sed -i '/^\[memory\]/,/^\[/ s/^size = .*/size = 1M/' "$WORK/b.conf"
printf '[trace]\npath = b.trace\nchannels = partner\n' >>"$WORK/b.conf"
start_node a
start_node b
wait_for 5000 "pair linked" pair_up

g=$(ctl b alloc --size $(((FRAMES + 2) * 4))K)
echo "applied whole" | ctl a write "$g" $((FRAMES + 1)) >/dev/null
ok "a wrote page $((FRAMES + 1)) of $g (homed on b)"

# Write pointers on every frame of b: nothing there can be evicted. The page
# a wrote holds one until it is destaged.
wait_for 10000 "b destaged the page" frames_settled b
hold_write_pointers b "$g" $FRAMES

expect_fail a "no space.*partner: no frame free on b" write "$g" $FRAMES --file /etc/hostname

release_write_pointers
kill -TERM "${PIDS[b]}"
wait "${PIDS[b]}" || fail "b did not stop cleanly"
unset 'PIDS[b]'

# The two batches a sent b: the write applied (its LSN ok_lsn) and the one
# refused (bad_lsn), with b's answers to the latter.
dump=$("$FTVMCTL" trace dump "$WORK/b.trace")
lsn_of() { # the lsn of a's WritePage of page $1
	sed -n "s/.* lsn=\([0-9]*\) WritePage guid=$g page=$1 .*/\1/p" <<<"$dump" | head -n 1
}
ok_lsn=$(lsn_of $((FRAMES + 1)))
bad_lsn=$(lsn_of $FRAMES)
[ -n "$ok_lsn" ] && [ -n "$bad_lsn" ] && [ "$bad_lsn" -gt "$ok_lsn" ] ||
	fail "b's trace lacks a's two WritePages with LSNs (applied '$ok_lsn', refused '$bad_lsn')"
claimed=$(grep "sender=b .*CommandComplete" <<<"$dump" | grep -o "applied_lsn=[0-9]*" |
	cut -d= -f2 | sort -n | tail -n 1)
[ "${claimed:-0}" -lt "$bad_lsn" ] ||
	fail "b answered applied_lsn=$claimed, though a's LSN $bad_lsn was refused at its WritePage"
ok "b's answers claim a's LSNs up to $claimed: the refused write's $bad_lsn never"

mark=$("$POKE" sql "$WORK/b/pagetable.db" "SELECT value FROM meta WHERE key = 'partner_applied_lsn'")
[ "$mark" = "$ok_lsn" ] ||
	fail "b's pagetable.db notes a's LSN $mark applied; a's last applied write was $ok_lsn, the refused one $bad_lsn"
ok "b's pagetable.db after a clean stop: a's LSN $mark applied, the refused write's $bad_lsn not"

kill -TERM "${PIDS[a]}"
wait "${PIDS[a]}" || fail "a did not stop cleanly"
unset 'PIDS[a]'
# rows_of OP: the version and op of a's journal rows of the page whose LSN
# is OP the refused write's, one a line.
rows_of() {
	"$POKE" sql "$WORK/a/pagetable.db" "SELECT version, op FROM journal WHERE guid = ?1 AND page = ?2
		AND lsn $1 ?3 ORDER BY seq" "$g" $FRAMES "$bad_lsn"
}
page=$("$POKE" sql "$WORK/a/pagetable.db" "SELECT version, dirty FROM pages WHERE guid = ? AND page = ?" \
	"$g" $FRAMES)
early=$(rows_of '=')
after=$(rows_of '>')
got="page version ${page% *} dirty ${page#* }; the early row's version [${early//$'\n'/, }],"
got+=" later rows' [${after//$'\n'/, }]"
[ "$page" = "0 0" ] && [ "$early" = "1 page" ] && [ "$after" = "0 undo" ] ||
	fail "a's pagetable.db after the refused write and a clean stop: $got"
ok "a's pagetable.db after a clean stop: $got"
