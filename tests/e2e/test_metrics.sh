#!/usr/bin/env bash
# Prometheus metrics (issue 25): on a pair with [metrics] listen on both
# nodes, `ftvmctl metrics` and GET /metrics pass `promtool check metrics`
# and carry the same series; a scraper polling a's endpoint through `drill
# kill b` is answered every time and sees ftvm_takeovers_total move from 0
# to 1; POST, an unknown path, a header past the bound and a silent
# connection are answered or closed while the node keeps serving; a bad
# [metrics] listen stops ftvmd naming the key.
. "$(dirname "$0")/lib.sh"
need_tools promtool curl python3

# ---- configuration refused ----
write_pair_configs
cp "$WORK/a.conf" "$WORK/bad.conf"
printf '[metrics]\nlisten = nonsense\n' >>"$WORK/bad.conf"
line=$(wc -l <"$WORK/bad.conf")
rc=0
out=$("$FTVMD" --config "$WORK/bad.conf" --check 2>&1) || rc=$?
[ "$rc" -eq 1 ] || fail "ftvmd --check with listen = nonsense exited $rc: $out"
grep -q "bad.conf:$line: \[metrics\] listen: 'nonsense' is not an endpoint" <<<"$out" ||
	fail "ftvmd --check said '$out'"
ok "refused: $out"

# ---- the pair ----
MPORT_A=$(free_port)
MPORT_B=$(free_port)
printf '[metrics]\nlisten = 127.0.0.1:%s\n' "$MPORT_A" >>"$WORK/a.conf"
printf '[metrics]\nlisten = 127.0.0.1:%s\n' "$MPORT_B" >>"$WORK/b.conf"
start_node a
start_node b
wait_for 5000 "pair linked" pair_up
grep -q "serving http://127.0.0.1:$MPORT_A/metrics" "$WORK/a.log" || fail "a did not log its endpoint"

# A port taken (a's metrics port) stops a node at start, saying where.
# (Its own state_dir and store, so that it touches nothing of the pair's.)
sed -e "s/^listen = .*:$PORT_A$/listen = $E2E_ADDR:1/" -e 's/^socket = a.sock$/socket = a2.sock/' \
	-e 's/^state_dir = a$/state_dir = a2/' -e 's|^path = shared/store$|path = shared/store-a2|' \
	"$WORK/a.conf" >"$WORK/a2.conf"
rc=0
out=$(timeout 10 "$FTVMD" --config "$WORK/a2.conf" 2>&1) || rc=$?
[ "$rc" -eq 1 ] && grep -q "\[metrics\] listen: cannot serve on 127.0.0.1:$MPORT_A" <<<"$out" ||
	fail "a second node on a's metrics port exited $rc saying: $out"
ok "a taken metrics port: $(grep -m1 '\[metrics\]' <<<"$out")"

port_of() { if [ "$1" = a ]; then echo "$MPORT_A"; else echo "$MPORT_B"; fi; }

# scrape ID FILE [CURL ARGS...]: GET http://.../metrics into FILE; prints the
# HTTP status.
scrape() {
	local id=$1 file=$2
	shift 2
	curl -sS --max-time 5 -o "$file" -w '%{http_code}' "$@" "http://127.0.0.1:$(port_of "$id")/metrics"
}

# promtool_ok FILE WHAT: promtool check metrics has nothing to say of FILE.
promtool_ok() {
	local out rc=0
	out=$(promtool check metrics <"$1" 2>&1) || rc=$?
	[ "$rc" -eq 0 ] && [ -z "$out" ] || fail "promtool check metrics on $2 (exit $rc): $out"
}

# series FILE: the sample lines' names and labels, sorted (values change).
series() { grep -v '^#' "$1" | sed 's/ [^ ]*$//' | sort; }

# value FILE SERIES: the value of one series, e.g. 'ftvm_takeovers_total{node="a"}'.
value() { awk -v s="$2" '$1 == s { print $2 }' "$1"; }

for id in a b; do
	ctl "$id" metrics >"$WORK/$id.ctl" || fail "ftvmctl metrics on $id"
	promtool_ok "$WORK/$id.ctl" "ftvmctl metrics on $id"
	code=$(scrape "$id" "$WORK/$id.http" -D "$WORK/$id.headers")
	[ "$code" = 200 ] || fail "GET /metrics on $id: $code"
	promtool_ok "$WORK/$id.http" "GET /metrics on $id"
	grep -qi '^content-type: text/plain; version=0.0.4; charset=utf-8' "$WORK/$id.headers" ||
		fail "$id's Content-Type: $(cat "$WORK/$id.headers")"
	[ "$(series "$WORK/$id.ctl")" = "$(series "$WORK/$id.http")" ] ||
		fail "$id: ftvmctl metrics and GET /metrics differ: $(diff <(series "$WORK/$id.ctl") <(series "$WORK/$id.http"))"
	[ "$(grep '^#' "$WORK/$id.ctl")" = "$(grep '^#' "$WORK/$id.http")" ] ||
		fail "$id: the HELP and TYPE lines differ"
	[ "$(value "$WORK/$id.http" "ftvm_state{node=\"$id\",state=\"active\"}")" = 1 ] ||
		fail "$id is not active in its metrics: $(grep '^ftvm_state' "$WORK/$id.http")"
	[ "$(value "$WORK/$id.http" "ftvm_partner_link_up{node=\"$id\"}")" = 1 ] ||
		fail "$id's link is not up in its metrics"
	[ "$(value "$WORK/$id.http" "ftvm_frames{node=\"$id\"}")" = "$(status_field "$id" frames.total)" ] ||
		fail "$id's ftvm_frames is not status's frames.total"
	grep -q "^ftvm_media_free_bytes{node=\"$id\",media=\"dram\",partition=\"server\"} [0-9]" "$WORK/$id.http" ||
		fail "$id: no DRAM free bytes from sense"
done
ok "ftvmctl metrics and GET /metrics pass promtool on a and b, $(series "$WORK/a.http" | wc -l) series each, the same"

# HEAD: the headers alone, with the length a GET has.
python3 - "$MPORT_A" >"$WORK/head" <<'PY' || fail "HEAD /metrics: $(cat "$WORK/head")"
import socket, sys
s = socket.create_connection(("127.0.0.1", int(sys.argv[1])), timeout=5)
s.sendall(b"HEAD /metrics HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n")
reply = b""
while True:
    data = s.recv(65536)
    if not data:
        break
    reply += data
head, _, body = reply.partition(b"\r\n\r\n")
print(head.decode())
assert head.startswith(b"HTTP/1.1 200"), head
assert b"\r\nContent-Length: " in head, head
assert body == b"", body[:80]
PY
ok "HEAD /metrics: 200 with its length, no body"

# ---- bad requests, answered while the node serves on ----
# A connection that sends half a request line and then nothing: closed by
# the node after [metrics]'s idle timeout (10 s), checked at the end.
python3 - "$MPORT_A" >"$WORK/silent.out" 2>&1 <<'PY' &
import socket, sys, time
s = socket.create_connection(("127.0.0.1", int(sys.argv[1])), timeout=30)
s.sendall(b"GET /metr")
t = time.monotonic()
try:
    data = s.recv(4096)
except socket.timeout:
    print("still open after 30 s")
    sys.exit(1)
print("closed after %.1f s" % (time.monotonic() - t))
PY
PIDS[silent]=$!

code=$(scrape a "$WORK/post" -X POST -D "$WORK/post.headers" --data 'x=1')
[ "$code" = 405 ] && grep -qi '^allow: GET, HEAD' "$WORK/post.headers" ||
	fail "POST /metrics: $code $(cat "$WORK/post.headers")"
code=$(curl -sS --max-time 5 -o "$WORK/nope" -w '%{http_code}' "http://127.0.0.1:$MPORT_A/nope")
[ "$code" = 404 ] || fail "GET /nope: $code"
code=$(curl -sS --max-time 5 -o "$WORK/root" -w '%{http_code}' "http://127.0.0.1:$MPORT_A/")
[ "$code" = 404 ] || fail "GET /: $code"
huge=$(head -c 20000 /dev/zero | tr '\0' x)
huge_code=$(scrape a "$WORK/huge" -H "X-Huge: $huge") || true
case "$huge_code" in
4??) ;;
*) fail "a 20000-byte header: $huge_code, wanted 4xx" ;;
esac
code=$(scrape a "$WORK/query" -G --data 'x=1')
[ "$code" = 200 ] || fail "GET /metrics?x=1: $code"
# Garbage instead of HTTP.
python3 - "$MPORT_A" <<'PY' || fail "garbage on the metrics port"
import socket, sys
s = socket.create_connection(("127.0.0.1", int(sys.argv[1])), timeout=5)
s.sendall(b"\x00\x01\x02 not http at all\r\n\r\n")
reply = s.recv(4096)
assert reply == b"" or reply.startswith(b"HTTP/1."), reply
PY
code=$(scrape a "$WORK/after")
[ "$code" = 200 ] || fail "GET /metrics after the bad requests: $code"
promtool_ok "$WORK/after" "GET /metrics after the bad requests"
ctl a status >/dev/null || fail "a stopped serving its clients"
field_is a state active || fail "a is $(status_field a state) after the bad requests"
ok "POST 405 (Allow: GET, HEAD), unknown paths 404, a huge header $huge_code, garbage dropped; a serves on"

# ---- the takeover counter through a drill ----
[ "$(value "$WORK/a.http" 'ftvm_takeovers_total{node="a"}')" = 0 ] || fail "a took over before the drill"
# The scraper: a's endpoint every 20 ms until told to stop, a line per
# scrape: HTTP status, ftvm_takeovers_total, the state that is 1.
scraper() {
	local code
	while [ ! -e "$WORK/scraper.stop" ]; do
		code=$(scrape a "$WORK/scrape.txt") || code=error
		echo "$code $(value "$WORK/scrape.txt" 'ftvm_takeovers_total{node="a"}') $(grep '^ftvm_state{' "$WORK/scrape.txt" | awk '$2 == 1 { print $1 }')"
		sleep 0.02
	done
}
scraper >"$WORK/scrapes" 2>&1 &
PIDS[scraper]=$!
wait_for 5000 "the scraper's first scrape" test -s "$WORK/scrapes"

rc=0
J=$(ctl a --json drill kill b --timeout 20 2>"$WORK/drill.err") || rc=$?
# The drill started b again itself: the cleanup must find it.
PIDS[b]=$(status_field b pid)
[ "$rc" -eq 0 ] || fail "drill kill b exited $rc: $J $(cat "$WORK/drill.err")"
wait_for 5000 "pair whole after the drill" pair_up
wait_for 5000 "the scraper to see the takeover" grep -q '^200 1 ' "$WORK/scrapes"
touch "$WORK/scraper.stop"
wait "${PIDS[scraper]}" || true
unset 'PIDS[scraper]'

n=$(wc -l <"$WORK/scrapes")
bad=$(grep -vc '^200 ' "$WORK/scrapes" || true)
[ "$bad" = 0 ] || fail "$bad of $n scrapes during the drill were not answered 200: $(grep -v '^200 ' "$WORK/scrapes" | head -3)"
[ "$(head -1 "$WORK/scrapes" | cut -d' ' -f2)" = 0 ] || fail "the first scrape: $(head -1 "$WORK/scrapes")"
# Never back: 0s, then 1s.
[ "$(cut -d' ' -f2 "$WORK/scrapes" | uniq | paste -sd ' ')" = "0 1" ] ||
	fail "ftvm_takeovers_total went $(cut -d' ' -f2 "$WORK/scrapes" | uniq | paste -sd ' ')"
states=$(awk '{ print $3 }' "$WORK/scrapes" | sed 's/.*state="\([a-z]*\)".*/\1/' | uniq | paste -sd ' ')
ok "$n scrapes of a through drill kill b, every one 200; ftvm_takeovers_total 0 then 1; a's state: $states; the drill: $J"

# b, started again by the drill, serves its metrics again.
code=$(scrape b "$WORK/b.after")
[ "$code" = 200 ] || fail "GET /metrics on the restarted b: $code"
promtool_ok "$WORK/b.after" "GET /metrics on the restarted b"
[ "$(value "$WORK/b.after" 'ftvm_resyncs_total{node="b"}')" -ge 1 ] || fail "b counts no resync after the drill"
ok "b restarted by the drill serves GET /metrics again"

# ---- the silent connection ----
wait_for 15000 "the silent connection to end" pid_gone "${PIDS[silent]}"
wait "${PIDS[silent]}" || fail "the silent connection: $(cat "$WORK/silent.out")"
unset 'PIDS[silent]'
grep -Eq '^closed after (9|1[0-2])\.' "$WORK/silent.out" ||
	fail "the silent connection: $(cat "$WORK/silent.out"), wanted closed after about 10 s"
ok "a connection silent mid-request: $(cat "$WORK/silent.out")"
