#!/usr/bin/env bash
# ocf:ftvm:ftvmd, the Pacemaker resource agent (ocf/ftvmd.in), on real
# daemons. Node b runs as usual while ocf-tester (Debian's resource-agents)
# runs every action of the agent on node a: start, monitor and probes,
# stop, start twice, stop twice, the optional actions refused. Then by hand,
# as Pacemaker calls it: monitor while a serves; kill -9 is OCF_NOT_RUNNING
# and stop after it succeeds, twice; a hung node is OCF_ERR_GENERIC and stop
# SIGKILLs it at its timeout; both nodes under the agent, a link cut fences
# b and its monitor fails until a resyncs it; bad parameters and configs
# get their codes and reasons; as root, a node run as nobody with
# CAP_IPC_LOCK alone, its socket's folder made for it.
. "$(dirname "$0")/lib.sh"

AGENT=${FTVM_OCF_AGENT:?FTVM_OCF_AGENT must name the configured ocf/ftvmd}
need_tools ocf-tester xmllint jq setsid timeout
OCF_ROOT=${OCF_ROOT:-/usr/lib/ocf}
[ -f "$OCF_ROOT/lib/heartbeat/ocf-shellfuncs" ] || {
	echo "SKIP: no $OCF_ROOT/lib/heartbeat/ocf-shellfuncs (resource-agents, tools/install-deps.sh)"
	exit 77
}
export OCF_ROOT

# ftvmd started by the agent is no child of this shell: cleanup() kills what
# the pid files name, then lib.sh's own.
ocf_cleanup() {
	local f
	for f in "$WORK"/*.pid; do
		[ -f "$f" ] && kill -CONT "$(cat "$f")" 2>/dev/null && kill -9 "$(cat "$f")" 2>/dev/null
	done
	cleanup
}
trap ocf_cleanup EXIT

# ra ID ACTION [VAR=VALUE...]: the agent's ACTION on node ID's instance
# (ftvm-ID), with the environment Pacemaker gives an agent; VAR=VALUE add to
# it or override it. Its stderr (the log and the exit reason) goes to
# $WORK/ra.err.
ra() {
	local id=$1 action=$2
	shift 2
	env OCF_RA_VERSION_MAJOR=1 OCF_RA_VERSION_MINOR=0 \
		OCF_RESOURCE_INSTANCE="ftvm-$id" OCF_RESOURCE_TYPE=ftvmd \
		OCF_RESKEY_CRM_meta_timeout=20000 OCF_RESKEY_CRM_meta_interval=10000 \
		OCF_RESKEY_config="$WORK/$id.conf" OCF_RESKEY_pidfile="$WORK/$id.pid" \
		OCF_RESKEY_log="$WORK/$id.log" OCF_RESKEY_ftvmd="$FTVMD" OCF_RESKEY_ftvmctl="$FTVMCTL" \
		"$@" "$AGENT" "$action" 2>"$WORK/ra.err"
}

# ra_is RC ID ACTION [VAR=VALUE...]: ra exits RC.
ra_is() {
	local want=$1 rc=0
	shift
	ra "$@" || rc=$?
	[ "$rc" = "$want" ] || fail "agent $2 on ftvm-$1 ($*) exited $rc, wanted $want: $(cat "$WORK/ra.err")"
}

# ra_said PATTERN: the last ra's stderr says PATTERN.
ra_said() {
	grep -q -- "$1" "$WORK/ra.err" || fail "the agent did not say '$1': $(cat "$WORK/ra.err")"
}

# reason: the last ra's exit reason.
reason() {
	sed -n 's/^ocf-exit-reason://p' "$WORK/ra.err"
}

# proc_gone PID: exited. A zombie has: nothing may reap the agent's ftvmd
# here (it is no child of ours, and PID 1 may not reap orphans).
proc_gone() {
	local st
	st=$(sed 's/.*) //' "/proc/$1/stat" 2>/dev/null | cut -c1)
	[ -z "$st" ] || [ "$st" = Z ]
}

ra_pid() { cat "$WORK/$1.pid"; }

write_pair_configs
start_node b

# ---- ocf-tester: every action, in the order its checks need ----
rc=0
ocf-tester -n ftvm-a -o config="$WORK/a.conf" -o pidfile="$WORK/a.pid" -o log="$WORK/a.log" \
	-o ftvmd="$FTVMD" -o ftvmctl="$FTVMCTL" "$AGENT" >"$WORK/ocf-tester.out" 2>&1 || rc=$?
sed 's/^/  ocf-tester: /' "$WORK/ocf-tester.out"
[ "$rc" = 0 ] || fail "ocf-tester exited $rc"
grep -q "passed all tests" "$WORK/ocf-tester.out" || fail "ocf-tester did not pass all tests"
! grep -q '^\* rc=' "$WORK/ocf-tester.out" || fail "ocf-tester counted a failure"
if [ -e "$WORK/a.pid" ] || [ -e "$WORK/a.sock" ]; then
	fail "ocf-tester's last stop left a.pid or a.sock"
fi
ok "ocf-tester: passed all tests (the optional actions refused as unimplemented)"

# ---- monitor while a serves ----
ra_is 0 a start
PIDS[ocf-a]=$(ra_pid a)
wait_for 5000 "pair linked" pair_up
ra_is 0 a monitor
ra_is 0 a monitor OCF_RESKEY_CRM_meta_interval=0
[ "$(status_field a pid)" = "$(ra_pid a)" ] || fail "the pid file says $(ra_pid a), a says $(status_field a pid)"
ok "a active: monitor and probe OCF_SUCCESS, the pid file holds ftvmd's pid"

# ---- kill -9: not running, and stop cleans up, twice ----
pid=$(ra_pid a)
kill -9 "$pid"
wait_for 5000 "a's ftvmd gone" proc_gone "$pid"
ra_is 7 a monitor
ra_said "has gone without a stop"
ra_is 7 a monitor OCF_RESKEY_CRM_meta_interval=0
ra_is 0 a stop
[ ! -e "$WORK/a.pid" ] || fail "stop left the stale a.pid"
ra_is 0 a stop
ra_said "not running"
ra_is 7 a monitor
ok "kill -9: monitor and probe OCF_NOT_RUNNING; stop OCF_SUCCESS, the stale pid file gone; stop again OCF_SUCCESS"

# ---- a hung node: no answer is a failure; stop ends it with SIGKILL ----
wait_for 5000 "b serves alone" field_is b state solo
ra_is 0 a start
pid=$(ra_pid a)
PIDS[ocf-a]=$pid
kill -STOP "$pid"
t=$(now_ms)
ra_is 1 a monitor OCF_RESKEY_CRM_meta_timeout=3000
took=$(($(now_ms) - t))
[ "$took" -lt 3000 ] || fail "monitor of a hung node took $took ms, its timeout 3000"
ok "SIGSTOP: monitor OCF_ERR_GENERIC in $took ms (timeout 3000): $(reason)"
t=$(now_ms)
ra_is 0 a stop OCF_RESKEY_CRM_meta_timeout=3000
took=$(($(now_ms) - t))
ra_said "SIGKILL"
proc_gone "$pid" || fail "stop returned with ftvmd $pid still there"
[ "$took" -lt 3000 ] || fail "stop took $took ms, its timeout 3000"
unset 'PIDS[ocf-a]'
ok "stop of the hung node: SIGTERM, SIGKILL at the timeout, OCF_SUCCESS in $took ms"

# ---- parameters and configs ----
cp "$WORK/a.conf" "$WORK/broken.conf"
echo "bogus = 1" >>"$WORK/broken.conf"
ra_is 6 a validate-all OCF_RESKEY_config="$WORK/broken.conf"
reason | grep -q "broken.conf:[0-9]*: \[failover\] bogus: unknown key" ||
	fail "validate-all's reason does not name the file, line and key: $(reason)"
ok "validate-all, a config ftvmd refuses: OCF_ERR_CONFIGURED: $(reason)"
ra_is 2 a start OCF_RESKEY_config="$WORK/broken.conf"
reason | grep -q "bogus: unknown key" || fail "start's reason: $(reason)"
[ ! -e "$WORK/a.pid" ] || fail "start with a refused config left a pid file"
ok "start with it: OCF_ERR_ARGS (this host only), nothing started"
ra_is 5 a validate-all OCF_RESKEY_config="$WORK/nosuch.conf"
ok "a config file missing: OCF_ERR_INSTALLED: $(reason)"
ra_is 6 a validate-all OCF_RESKEY_config=a.conf
ok "a relative config path: OCF_ERR_CONFIGURED: $(reason)"
ra_is 6 a validate-all OCF_RESKEY_log=relative.log
ok "a bad log: OCF_ERR_CONFIGURED: $(reason)"
ra_is 5 a validate-all OCF_RESKEY_ftvmd=/nonexistent/ftvmd
ra_is 5 a start OCF_RESKEY_ftvmd=/nonexistent/ftvmd
ok "no ftvmd binary: OCF_ERR_INSTALLED: $(reason)"
ra_is 0 a stop OCF_RESKEY_config=a.conf
ok "stop with a relative config path: OCF_SUCCESS (a failed stop gets a host fenced; start refuses it)"
ra_is 5 a validate-all OCF_RESKEY_user=no-such-user-ftvm
ok "no such user: OCF_ERR_INSTALLED: $(reason)"
ra_is 3 a promote
ra_is 0 a validate-all
ok "promote: OCF_ERR_UNIMPLEMENTED; validate-all of the good config: OCF_SUCCESS"

# ---- both nodes under the agent: a cut link fences b ----
kill -TERM "${PIDS[b]}"
wait "${PIDS[b]}" || fail "ftvmd b exited $? on SIGTERM"
unset 'PIDS[b]'
ra_is 0 b start
ra_is 0 a start
PIDS[ocf-a]=$(ra_pid a)
PIDS[ocf-b]=$(ra_pid b)
wait_for 10000 "pair linked, both under the agent" pair_up
ra_is 0 b monitor
ctl a --json drill cut 6 --timeout 30 >"$WORK/drill.json" 2>"$WORK/drill.err" &
drill=$!
wait_for 10000 "b fenced" field_is b state fenced
ra_is 1 b monitor
reason | grep -q "is fenced" || fail "monitor's reason: $(reason)"
ok "b fenced by the cut: monitor OCF_ERR_GENERIC: $(reason)"
ra_is 0 a monitor
ok "a, serving alone meanwhile ($(status_field a state)): monitor OCF_SUCCESS"
rc=0
wait "$drill" || rc=$?
[ "$rc" = 0 ] || fail "drill cut 6 exited $rc: $(cat "$WORK/drill.json" "$WORK/drill.err")"
wait_for 10000 "b resynced" pair_up
ra_is 0 b monitor
ok "the cut over, b resynced: monitor OCF_SUCCESS ($(jq -c '{lost, equal}' "$WORK/drill.json"))"

# ---- as a user: nobody, with CAP_IPC_LOCK alone ----
if [ "$(id -u)" = 0 ] && id nobody >/dev/null 2>&1; then
	ra_is 0 a stop
	unset 'PIDS[ocf-a]'
	# What an operator gives the user (systemd/OPERATIONS.md, "Running under Pacemaker"):
	# its config, the key, state_dir and the store; the socket's folder
	# (missing here, as /run/ftvm/... is after a reboot) the agent makes.
	sed 's|^socket = .*|socket = run/a.sock|' "$WORK/a.conf" >"$WORK/a-nobody.conf"
	chmod 0711 "$WORK"
	chown nobody "$WORK/pair.key"
	chown -R nobody "$WORK/a" "$WORK/shared"
	ra_is 0 a start OCF_RESKEY_user=nobody OCF_RESKEY_config="$WORK/a-nobody.conf"
	pid=$(ra_pid a)
	PIDS[ocf-a]=$pid
	[ "$(stat -c %U "$WORK/run")" = nobody ] || fail "the socket's folder is $(stat -c %U:%a "$WORK/run")"
	ra_said "made $WORK/run"
	[ "$(ps -o user= -p "$pid")" = nobody ] || fail "ftvmd runs as $(ps -o user= -p "$pid")"
	grep -q "^CapEff:	0000000000004000" "/proc/$pid/status" ||
		fail "ftvmd's capabilities: $(grep ^Cap "/proc/$pid/status" | tr '\n' ' ')"
	user_pair_up() {
		[ "$("$FTVMCTL" --config "$WORK/a-nobody.conf" --json status | jq -r .state)" = active ] &&
			field_is b state active
	}
	wait_for 10000 "a (as nobody) and b active" user_pair_up
	ra_is 0 a monitor OCF_RESKEY_user=nobody OCF_RESKEY_config="$WORK/a-nobody.conf"
	ra_is 0 a stop OCF_RESKEY_user=nobody OCF_RESKEY_config="$WORK/a-nobody.conf"
	unset 'PIDS[ocf-a]'
	ok "user=nobody: ftvmd as nobody with CAP_IPC_LOCK alone, its socket's folder made for it; active, monitor, stop"
else
	echo "skipped: user=nobody (not root, or no user nobody)"
fi

# ---- both stopped ----
ra_is 0 a stop
ra_is 0 b stop
unset 'PIDS[ocf-a]' 'PIDS[ocf-b]'
ra_is 7 a monitor
ra_is 7 b monitor
grep -q "stopped" "$WORK/b.log" || fail "b did not log a clean stop"
ok "both stopped by the agent, monitors OCF_NOT_RUNNING"
