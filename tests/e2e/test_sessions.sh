#!/usr/bin/env bash
# Session allocations (seed 003 Fig. 15 step S143; node/vmm/VMM.md,
# "Session allocations") on a real pair: one whose client is gone is freed on
# both nodes [client] session_grace_ms later, and other allocations stay; one
# whose client holds its connection stays; its client follows its node to the
# survivor and the allocation stays there; a node that restarts asks its
# partner before freeing, and keeps what the client holds there; when the
# client ends, both nodes drop it.
. "$(dirname "$0")/lib.sh"

FTVM_SESSION_CLIENT=${FTVM_SESSION_CLIENT:?FTVM_SESSION_CLIENT must name the ftvm-session-client binary}
GRACE=$((500 * E2E_TIME_SCALE))

write_pair_configs
for id in a b; do
	printf '[client]\nsession_grace_ms = %d\n' "$GRACE" >>"$WORK/$id.conf"
done
start_node a
start_node b
wait_for 5000 "pair linked" pair_up

has() { ctl "$1" --json list | jq -e --arg g "$2" 'any(.[]; .guid == $g)' >/dev/null; }
gone_from() { ! has "$1" "$2"; }
gone_both() { ! has a "$1" && ! has b "$1"; }
# grace_passed ID: a session allocation made now on ID by ftvmctl (whose
# connection ends at once) is freed: at least a grace went by since.
grace_passed() {
	local g
	g=$(ctl "$1" alloc --size 4K --session)
	wait_for $((GRACE + 5000)) "a grace on $1 (clock $g freed)" gone_from "$1" "$g"
}

# ---- a client gone: its session allocation goes, the others stay ----
g=$(ctl a alloc --size 4K --session --name gone-app)
keep=$(ctl a alloc --size 4K --name gone-app)
wait_for $((GRACE + 5000)) "$g freed on both nodes" gone_both "$g"
has a "$keep" && has b "$keep" || fail "the allocation that is no session's went too"
grep -q "(client 'gone-app', uid [0-9]*) is gone from both nodes: freeing its 1 allocations" \
	"$WORK/a.log" || fail "a did not say why it freed $g"
ok "a session allocation is freed on both nodes once its client is gone; $keep stays"

# ---- a client that holds its connection keeps it, and follows its node ----
mkfifo "$WORK/client.in"
"$FTVM_SESSION_CLIENT" "$WORK/a.sock" "$WORK/b.sock" <"$WORK/client.in" >"$WORK/client.out" 2>&1 &
PIDS[client]=$!
exec {client_in}>"$WORK/client.in"
wait_for 5000 "the client's session allocation" grep -q "^alloc .* on .*/a.sock" "$WORK/client.out"
gs=$(awk '/^alloc /{print $2}' "$WORK/client.out")
grace_passed a
has a "$gs" && has b "$gs" || fail "$gs went while its client held its connection"
ok "$gs stays while its client is connected"

kill -9 "${PIDS[a]}"
wait "${PIDS[a]}" 2>/dev/null || true
unset 'PIDS[a]'
wait_for $((DEAD_AFTER_MS + 2000)) "b takes over" field_is b state solo
echo check >&"$client_in"
wait_for 15000 "the client on b" grep -q "^ok on .*/b.sock" "$WORK/client.out"
grace_passed b
has b "$gs" || fail "$gs went on the survivor although its client followed"
grep -q "is back: its allocations stay" "$WORK/b.log" ||
	fail "b did not see the session come back"
ok "kill -9 a: the client followed to b, which kept $gs"

# ---- a restarted node asks its partner first ----
start_node a {client_in}>&- # or a would hold the client's input open
wait_for 15000 "a resynced and the pair active" pair_up
wait_for $((GRACE + 10000)) "a asked b about the session" \
	grep -q "is live on the partner: its allocations stay" "$WORK/a.log"
has a "$gs" && has b "$gs" || fail "$gs went although its client is on b"
ok "a restarted, asked b, and kept $gs: its client is on b"

# ---- the client ends ----
exec {client_in}>&-
wait "${PIDS[client]}" || fail "the session client exited $?"
unset 'PIDS[client]'
wait_for $((GRACE + 5000)) "$gs freed on both once its client ended" gone_both "$gs"
ctl a verify >/dev/null || fail "not equal: $(ctl a verify 2>&1)"
ok "the client ended: $gs freed on both nodes; verify equal"
