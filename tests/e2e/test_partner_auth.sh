#!/usr/bin/env bash
# No stranger is a partner (replica/session.c, "Authentication"): on the
# partner port of a running pair, a stranger with no key, with a wrong key,
# with an ftvmd's Hello of old, or replaying a handshake the partner made, is
# refused after the node's challenge, and the right key from another address
# is refused before a byte. Each time the stranger learns nothing but one
# AuthChallenge at epoch 0, nothing changes, and the pair goes on serving;
# the refusals are counted and logged once a minute per address. A node
# running solo resyncs no stranger. Without a key ftvmd refuses to start off
# loopback, naming `ftvmctl keygen`; a key file others may read is refused.
. "$(dirname "$0")/lib.sh"
STRANGER=${FTVM_STRANGER:?FTVM_STRANGER must name ftvm-stranger}
# The test checks the link never drops while strangers knock: a failure
# detector wider than lib.sh's keeps a loaded machine's pauses out of it.
[ "$DEAD_AFTER_MS" -ge 2000 ] || DEAD_AFTER_MS=2000

# ftvm-stranger speaks TCP; over RDMA (the vm suite) the strangers are
# ftvmd processes with the same transport (stranger_node), which the TCP run
# plays too.

# stranger NODE ARGS...: ftvm-stranger on NODE's partner port; its lines.
stranger() {
	local port
	if [ "$1" = a ]; then port=$PORT_A; else port=$PORT_B; fi
	shift
	"$STRANGER" "$E2E_ADDR:$port" "$@"
}

# refused_after_challenge WHAT NODE ARGS...: the stranger got one challenge,
# at epoch 0, and then the connection closed.
refused_after_challenge() {
	local what=$1 out
	shift
	out=$(stranger "$@")
	[ "$out" = "$(printf 'got AuthChallenge epoch=0\nclosed after 1 messages')" ] ||
		fail "$what: the stranger got: $out"
	ok "$what: refused after the node's challenge, learning nothing else"
}

# stranger_node NAME KEY PARTNER: an ftvmd that says it is b, with key KEY,
# dialling PARTNER, with a store and state of its own; waits until it serves.
stranger_node() {
	local name=$1 key=$2 partner=$3
	cat >"$WORK/$name.conf" <<-CONF
	[node]
	id = b
	listen = $E2E_ADDR:$(free_port)
	partner = $partner
	key_file = $key
	${FTVM_TRANSPORT:+transport = $FTVM_TRANSPORT}
	socket = $name.sock
	state_dir = $name
	log_level = debug
	[memory]
	size = 16M
	[store]
	path = $name-store/store
	[failover]
	heartbeat_ms = 50
	dead_after_ms = $DEAD_AFTER_MS
	CONF
	start_node "$name"
}

# learned_nothing NAME: the stranger node never saw a Hello.
learned_nothing() {
	field_is "$1" partner.link down && [ -z "$(status_field "$1" partner.id)" ] ||
		fail "stranger $1 learned something: $(ctl "$1" status)"
}

# at_least ID FIELD N: status field FIELD of ID is N or more.
at_least() { [ "$(status_field "$1" "$2")" -ge "$3" ]; }

stop_node() {
	kill -9 "${PIDS[$1]}"
	wait "${PIDS[$1]}" 2>/dev/null || true
	unset "PIDS[$1]"
}

write_pair_configs
# b records its partner channel from its start: a's handshake, to replay.
# b starts first, so that a dials it (a stranger replays a dialler's).
printf '[trace]\npath = b.trace\nchannels = partner\n' >>"$WORK/b.conf"
start_node b
start_node a
wait_for 5000 "pair linked" pair_up
[ "$(status_field a partner.auth)" = key ] || fail "a's status says auth $(status_field a partner.auth)"
g=$(ctl a alloc --size 8K)
ctl a write "$g" 0 --file "$(fill 7)" >/dev/null
epoch=$(status_field a epoch)
changes_a=$(status_field a partner.link_changes)
changes_b=$(status_field b partner.link_changes)

"$FTVMCTL" keygen "$WORK/wrong.key" >/dev/null

# An ftvmd with a wrong key dials a; then one with the right key dials x,
# a node whose partner is at another address. Both are refused, learning
# nothing; a counts the failure and x the address.
stranger_node s1 wrong.key "$E2E_ADDR:$PORT_A"
wait_for 10000 "a refusing ftvmd s1's proof" at_least a partner.auth_failures 1
learned_nothing s1
stop_node s1
ok "an ftvmd with another key: refused by a, never linked"
other_addr=127.0.0.2
[ "$E2E_ADDR" = 127.0.0.1 ] || other_addr=${E2E_ADDR%.*}.254
port_x=$(free_port)
sed -e "s/^listen = .*/listen = $E2E_ADDR:$port_x/" -e "s/^partner = .*/partner = $other_addr:$PORT_B/" \
	-e 's/^socket = .*/socket = x.sock/' -e 's/^state_dir = .*/state_dir = x/' \
	-e 's|^path = .*|path = x-store/store|' -e '/^\[trace\]/,$d' "$WORK/a.conf" >"$WORK/x.conf"
start_node x
stranger_node s2 pair.key "$E2E_ADDR:$port_x"
wait_for 10000 "x refusing s2's address" at_least x partner.address_refused 1
learned_nothing s2
stop_node s2
stop_node x
ok "the right key from $E2E_ADDR to a node whose partner is $other_addr: refused unread"

if [ "$E2E_TRANSPORT" = tcp ]; then
refused_after_challenge "a wrong key" a --key "$WORK/wrong.key"
refused_after_challenge "no key" a --no-key
refused_after_challenge "a Hello without a handshake" a --hello-first
refused_after_challenge "a's own id with the wrong key" a --id a --key "$WORK/wrong.key"
ctl b trace stop >/dev/null
refused_after_challenge "a's recorded handshake replayed" b --replay "$WORK/b.trace"

out=$(stranger a --from 127.0.0.2 --key "$WORK/pair.key")
[ "$out" = "closed after 0 messages" ] || fail "the key from 127.0.0.2: the stranger got: $out"
ok "the right key from another address: closed before a byte"

failures=$(status_field a partner.auth_failures)
[ "$failures" -ge 4 ] || fail "a counted $failures auth failures, wanted 4"
[ "$(status_field b partner.auth_failures)" -ge 1 ] || fail "b counted no auth failure"
[ "$(status_field a partner.address_refused)" = 1 ] ||
	fail "a counted $(status_field a partner.address_refused) refused addresses, wanted 1"
logged=$(grep -c "partner channel: refused 127.0.0.1:" "$WORK/a.log" || true)
[ "$logged" = 1 ] || fail "a logged $logged refusals from 127.0.0.1 within a minute, wanted 1"
grep -q "partner channel: refused 127.0.0.2:.*not the partner's address" "$WORK/a.log" ||
	fail "a did not log the refused address"
ok "a counted $failures auth failures and 1 refused address; logged once per address"
fi

# Nothing changed: same epoch, the link never dropped, both serve.
pair_up || fail "the pair is not linked and active after the strangers"
[ "$(status_field a epoch)" = "$epoch" ] || fail "a's epoch moved"
[ "$(status_field a partner.link_changes)" = "$changes_a" ] &&
	[ "$(status_field b partner.link_changes)" = "$changes_b" ] || fail "the link dropped"
ctl b write "$g" 1 --file "$(fill 8)" >/dev/null
ctl a read "$g" 1 | cmp -s - "$(fill 8)" || fail "a reads b's write differently"
ctl b read "$g" 0 | cmp -s - "$(fill 7)" || fail "b reads a's write differently"
ctl a --json verify | jq -e .equal >/dev/null || fail "verify differs after the strangers"
ok "same epoch, link never dropped, both nodes serve, verify equal"

# A node running solo resyncs no stranger.
if [ "$E2E_TRANSPORT" = tcp ]; then
stop_node b
wait_for 10000 "a solo" field_is a state solo
ctl a write "$g" 0 --file "$(fill 9)" >/dev/null
resyncs=$(status_field a resyncs)
epoch=$(status_field a epoch)
refused_after_challenge "no key, to a solo node" a --no-key
refused_after_challenge "a wrong key, to a solo node" a --key "$WORK/wrong.key"
refused_after_challenge "a Hello, to a solo node" a --hello-first
out=$(stranger a --from 127.0.0.2 --key "$WORK/pair.key")
[ "$out" = "closed after 0 messages" ] || fail "the key from 127.0.0.2 to solo a: got: $out"
field_is a state solo && [ "$(status_field a resyncs)" = "$resyncs" ] &&
	[ "$(status_field a epoch)" = "$epoch" ] || fail "a stranger changed solo a"
ok "solo a resynced no stranger and stayed solo at epoch $epoch"
start_node b
wait_for 10000 "b back and resynced" pair_up
[ "$(status_field a resyncs)" -gt "$resyncs" ] || fail "a did not resync b"
ctl b read "$g" 0 | cmp -s - "$(fill 9)" || fail "b lacks a's solo write after the resync"
ok "the real partner, with the key, rejoined and was resynced"
fi

# Start-up: no key off loopback, and a key others may read.
sed -e "s/^listen = .*/listen = 192.0.2.1:$PORT_A/" -e '/^key_file/d' "$WORK/a.conf" \
	>"$WORK/nokey.conf"
rc=0
out=$("$FTVMD" --check --config "$WORK/nokey.conf" 2>&1) || rc=$?
[ "$rc" -ne 0 ] && grep -q "key_file: missing.*ftvmctl keygen" <<<"$out" ||
	fail "ftvmd --check without a key off loopback exited $rc: $out"
ok "no key off loopback: $(grep -o 'key_file: missing[^:]*' <<<"$out")"
cp "$WORK/pair.key" "$WORK/open.key"
chmod 644 "$WORK/open.key"
sed 's/^key_file = .*/key_file = open.key/' "$WORK/a.conf" >"$WORK/openkey.conf"
rc=0
out=$("$FTVMD" --check --config "$WORK/openkey.conf" 2>&1) || rc=$?
[ "$rc" -ne 0 ] && grep -q "has mode 0644: group or others may read it" <<<"$out" ||
	fail "ftvmd --check with a key of mode 0644 exited $rc: $out"
ok "a key of mode 0644 is refused"
