#!/usr/bin/env bash
# Who may do what on the client socket (node/vmm/VMM.md, "Who may do what"), with
# clients of another uid run through setpriv as nobody (65534):
#  - allocations belong to the uid that made it, on both nodes, through a
#    takeover and a rejoin; header and list are for everyone;
#  - nobody cannot read, write, free or take pointers on root's allocation,
#    cannot cut the link, fail back, force a takeover or start a trace; in
#    admin_group it may;
#  - nobody gets no memfd, and cannot truncate the pool; in pointer_group it
#    gets one, sealed, as root does, and the node keeps serving.
. "$(dirname "$0")/lib.sh"

FTVM_HOLD=${FTVM_HOLD:?FTVM_HOLD must name the ftvm-hold binary}
FTVM_RAW_CLIENT=${FTVM_RAW_CLIENT:?FTVM_RAW_CLIENT must name the ftvm-raw-client binary}
[ "$(id -u)" = 0 ] || {
	echo "SKIP: needs root to run clients as another uid (setpriv)"
	exit 77
}
ADMIN_GID=$(getent group adm | cut -d: -f3)
POINTER_GID=$(getent group staff | cut -d: -f3)
[ -n "$ADMIN_GID" ] && [ -n "$POINTER_GID" ] || {
	echo "SKIP: needs the groups adm and staff"
	exit 77
}

write_pair_configs
for id in a b; do
	printf '[client]\nsocket_mode = 0666\nsocket_group = staff\nadmin_group = adm\npointer_group = staff\n' \
		>>"$WORK/$id.conf"
done
chmod 0711 "$WORK" # nobody reaches the sockets, and nothing else in it
start_node a
start_node b
wait_for 5000 "pair linked" pair_up
mode=$(stat -c %a:%G "$WORK/a.sock")
[ "$mode" = 666:staff ] || fail "a.sock has mode:group $mode, wanted 666:staff ([client] socket_mode, socket_group)"
ok "a.sock has mode and group $mode"

# as GROUPS COMMAND...: COMMAND as nobody, in the supplementary groups GROUPS
# ("-": none).
as() {
	local groups=$1
	shift
	if [ "$groups" = - ]; then
		setpriv --reuid=65534 --regid=65534 --clear-groups "$@"
	else
		setpriv --reuid=65534 --regid=65534 --groups="$groups" "$@"
	fi
}
nctl() {
	local id=$1
	shift
	as - "$FTVMCTL" --socket "$WORK/$id.sock" "$@"
}
# nobody_refused ID PATTERN ARGS...: nobody's ftvmctl ARGS on ID exits 1
# saying PATTERN.
nobody_refused() {
	local id=$1 pattern=$2
	shift 2
	expect_refused "$pattern" "nobody's ftvmctl $* on $id" nctl "$id" "$@"
}

# ---- root's allocation: nobody may look, not touch ----
guid=$(ctl a alloc --size 8K)
ctl a write "$guid" 0 --file "$(fill 7)" >/dev/null
ctl a write "$guid" 1 --file "$(fill 8)" >/dev/null
[ "$(ctl b --json header "$guid" | jq .uid)" = 0 ] || fail "root's allocation is not uid 0's on b"
[ "$(nctl a --json header "$guid" | jq .uid)" = 0 ] || fail "nobody cannot read root's header"
nctl a --json list | jq -e --arg g "$guid" '.[] | select(.guid == $g) | .uid == 0' >/dev/null ||
	fail "nobody's list does not show root's allocation as uid 0's"
ok "header and list, for nobody too, say $guid is uid 0's"
owner="allocation $guid belongs to uid 0; uid 65534 may not"
nobody_refused a "$owner read it" read "$guid" 0
nobody_refused a "$owner write it" write "$guid" 0 --file "$(fill 9)"
nobody_refused a "$owner free it" free "$guid"
for mode in read write; do
	expect_refused "may not map the frame pool: .*pointer_group (staff)" \
		"nobody's $mode pointer" as - "$FTVM_HOLD" "$WORK/a.sock" "$guid" 0 "$mode"
done
# In pointer_group it maps the pool, and the allocation is still not its.
expect_refused "$owner take a write pointer into it" \
	"nobody in pointer_group, write pointer on root's" \
	as "$POINTER_GID" "$FTVM_HOLD" "$WORK/a.sock" "$guid" 0 write
ctl a read "$guid" 0 | cmp -s - "$(fill 7)" || fail "root's page 0 changed"
ctl a read "$guid" 1 | cmp -s - "$(fill 8)" || fail "root's page 1 changed"
ok "root's pages as root wrote them"

# ---- pair operations: admin_group only ----
expect_refused "uid 65534 may not cut the partner link: only root, ftvmd's uid 0 and \[client\] admin_group (adm) may" \
	"nobody's drill cut" as - "$FTVMCTL" --config "$WORK/a.conf" drill cut 1
field_is a partner.link up || fail "the link went down after nobody's cut"
nobody_refused a "may not fail back" failback
nobody_refused a "uid 65534 may not force a takeover" takeover --force --yes
nobody_refused a "may not start a trace" trace start "$WORK/nobody.trace"
nobody_refused a "may not stop a trace" trace stop
[ ! -e "$WORK/nobody.trace" ] || fail "nobody's trace was started"

# ---- nobody's own allocation: the copying calls work, pointers do not ----
nguid=$(nctl a alloc --size 8K)
nctl a write "$nguid" 0 --file "$(fill 5)" >/dev/null || fail "nobody cannot write its own page"
nctl a read "$nguid" 0 | cmp -s - "$(fill 5)" || fail "nobody reads back other bytes"
[ "$(ctl b --json header "$nguid" | jq .uid)" = 65534 ] || fail "b does not have $nguid as uid 65534's"
ctl a read "$nguid" 0 | cmp -s - "$(fill 5)" || fail "root cannot read nobody's page"
ok "nobody's $nguid: written and read by nobody with the copying calls, uid 65534 on b, root reads it"
expect_refused "may not map the frame pool" "nobody's pointer on its own allocation" \
	as - "$FTVM_HOLD" "$WORK/a.sock" "$nguid" 0 read
as "$POINTER_GID" "$FTVM_HOLD" "$WORK/a.sock" "$nguid" 1 write --modify 6 >"$WORK/hold.out" \
	2>"$WORK/hold.err" || fail "nobody in staff, write pointer on its own: $(cat "$WORK/hold.err")"
nctl a read "$nguid" 1 | cmp -s - "$(fill 6)" || fail "the write through the pointer is not there"
ok "nobody's pointer on its own allocation: only in pointer_group"

# ---- the pool's memfd ----
expect_refused "^refused: .*may not map the frame pool.*pointer_group (staff)" \
	"nobody's MapRequest (no memfd)" as - "$FTVM_RAW_CLIENT" "$WORK/a.sock" truncate
for who in root staff; do
	rc=0
	if [ "$who" = root ]; then
		"$FTVM_RAW_CLIENT" "$WORK/a.sock" truncate >"$WORK/raw.out" 2>&1 || rc=$?
	else
		as "$POINTER_GID" "$FTVM_RAW_CLIENT" "$WORK/a.sock" truncate >"$WORK/raw.out" 2>&1 || rc=$?
	fi
	[ "$rc" = 0 ] || fail "$who's memfd changed size (exit $rc): $(cat "$WORK/raw.out")"
	ok "$who's memfd: $(tr '\n' ' ' <"$WORK/raw.out")"
done
kill -0 "${PIDS[a]}" || fail "a died"
ctl a read "$guid" 1 | cmp -s - "$(fill 8)" || fail "a does not serve root's page after the truncates"
ctl a write "$guid" 1 --file "$(fill 10)" >/dev/null || fail "a does not take writes after the truncates"
[ "$(ctl a --json verify | jq .equal)" = true ] || fail "verify is not equal after the truncates"
ok "a serves on, and verify is equal"

# ---- admin_group: nobody in adm may ----
as "$ADMIN_GID" "$FTVMCTL" --socket "$WORK/a.sock" read "$guid" 1 | cmp -s - "$(fill 10)" ||
	fail "nobody in adm cannot read root's page"
as "$ADMIN_GID" "$FTVMCTL" --socket "$WORK/a.sock" write "$guid" 1 --file "$(fill 11)" >/dev/null ||
	fail "nobody in adm cannot write root's page"
as "$ADMIN_GID" "$FTVMCTL" --socket "$WORK/a.sock" trace start "$WORK/adm.trace" >/dev/null ||
	fail "nobody in adm cannot start a trace"
as "$ADMIN_GID" "$FTVMCTL" --socket "$WORK/a.sock" trace stop >/dev/null ||
	fail "nobody in adm cannot stop the trace"
as "$ADMIN_GID" "$FTVMCTL" --config "$WORK/a.conf" --json drill cut 1 >"$WORK/cut.json" ||
	fail "nobody in adm cannot cut the link: $(cat "$WORK/cut.json")"
wait_for 10000 "pair linked again after the cut" pair_up
ok "nobody in admin_group read and wrote root's page, traced and cut the link"

# ---- the owner survives a takeover and a rejoin ----
kill -9 "${PIDS[a]}"
wait_for 5000 "b takes over" field_is b state solo
nobody_refused b "$owner read it" read "$guid" 1
nctl b read "$nguid" 0 | cmp -s - "$(fill 5)" || fail "nobody cannot read its own page on b"
ok "after the takeover b keeps both owners"
bguid=$(nctl b alloc --size 4K) # a hears of it only in its resync
start_node a
wait_for 10000 "pair linked after a's restart" pair_up
[ "$(ctl a --json header "$nguid" | jq .uid)" = 65534 ] || fail "a lost $nguid's uid in the rejoin"
[ "$(ctl a --json header "$bguid" | jq .uid)" = 65534 ] || fail "a's resync did not carry $bguid's uid"
expect_refused "allocation $bguid belongs to uid 65534; uid 65533 may not read it" \
	"uid 65533's read of nobody's $bguid on a" \
	setpriv --reuid=65533 --regid=65533 --clear-groups "$FTVMCTL" --socket "$WORK/a.sock" read "$bguid" 0
nobody_refused a "$owner free it" free "$guid"
nctl a free "$nguid" >/dev/null || fail "nobody cannot free its own allocation"
ok "after a's rejoin the owners stand, $bguid's through the resync; nobody freed its own"
