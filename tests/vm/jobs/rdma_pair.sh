#!/usr/bin/env bash
# The RDMA transport on a real verbs stack (issue 5), inside the guest as
# root: Soft-RoCE on a dummy NIC holding ADDR (joblib.sh's softroce_up), both
# nodes in this one guest. Then:
# the transport's channel test over verbs (tests/rdma/test_rdma_channel.c);
# the session's one-sided page data (tests/rdma/test_rdma_session.c);
# the e2e tests with transport = rdma, both nodes on ADDR (`ftvmctl status`
# says rdma: test_pair checks it; dead_after_ms widened for the emulation),
# test_partner_auth among them: strangers refused over RDMA;
# auto picking rdma on ADDR and tcp on loopback; transport = rdma on
# loopback refused at start.
# shellcheck source=tests/vm/joblib.sh
. "$FTVM_SRC/tests/vm/joblib.sh"

ADDR=10.0.3.1
E2E_TESTS=(pair data pointers paths partner_loss failover landing pool resync_order memlock pointer_rejoin
	partner_auth)
# Under TCG a step takes 10-100x longer: tests that act "well inside
# dead_after_ms" (a SIGSTOP of 0.1 s, refusals before a takeover) lose that
# race at 300 ms over TCP as over RDMA, and a grant queued behind a holder
# (test_paths) can take longer than its 2 s request timeout: the failure
# detector is widened and the tests' deadlines stretched.
export FTVM_E2E_DEAD_AFTER_MS=3000 FTVM_E2E_TIME_SCALE=3
chan=$FTVM_BUILD/tests/test_rdma_channel
if [ ! -x "$chan" ]; then
	echo "skipped: no $chan: this build has no RDMA transport (rdma-core not found)"
	exit 77
fi

step "Soft-RoCE: rdma_rxe on dummy0 ($ADDR)"
softroce_up "$ADDR"
ok "rxe0 on dummy0: $(ibv_devinfo -d rxe0 | grep -E -o 'active_mtu:[^(]*' | tr -s ' ')"

# verbs_test NAME WHAT: tests/rdma's test_NAME against the device at ADDR.
verbs_test() {
	local name=$1 what=$2 rc=0 out
	step "$what: test_$name $ADDR"
	out=$(timeout 600 "$FTVM_BUILD/tests/test_$name" "$ADDR" 2>&1) || rc=$?
	indent "  " <<<"$out"
	[ "$rc" -eq 0 ] || fail "test_$name exited $rc"
	ok "test_$name passed"
}
verbs_test rdma_channel "the transport over verbs"
verbs_test rdma_session "one-sided page data through the session"

export FTVMD=$FTVM_BUILD/node/ftvmd FTVMCTL=$FTVM_BUILD/tools/ftvmctl FTVM_SRCDIR=$FTVM_SRC
export FTVM_HOLD=$FTVM_BUILD/tests/race/ftvm-hold FTVM_RACE=$FTVM_BUILD/tests/race/ftvm-race
export FTVM_EXAMPLE=$FTVM_BUILD/tests/example/ftvm-example
export FTVM_FAILOVER_CLIENT=$FTVM_BUILD/tests/failover_client/ftvm-failover-client
export FTVM_FAKE_ORIGINATOR=$FTVM_BUILD/tests/landing/ftvm-fake-originator
export FTVM_STRANGER=$FTVM_BUILD/tests/stranger/ftvm-stranger
export FTVM_FREE_PORT=$FTVM_BUILD/tests/support/ftvm-free-port

# e2e NAME [VAR=VALUE...]: tests/e2e/test_NAME.sh with that environment; its
# ok lines on success, its whole output on failure, which is counted and the
# job goes on (one boot shows every test).
failed=()
e2e() {
	local name=$1 t out rc=0
	shift
	t=$(now_ms)
	out=$(env "$@" timeout 600 bash "$FTVM_SRC/tests/e2e/test_$name.sh" 2>&1) || rc=$?
	if [ "$rc" -ne 0 ]; then
		indent "  " <<<"$out"
		echo "FAIL [$(elapsed) s]: test_$name ($*) exited $rc"
		failed+=("test_$name ($*)")
		return 0
	fi
	grep '^ok' <<<"$out" | indent "  "
	ok "test_$name ($*) passed in $(($(now_ms) - t)) ms"
}

for name in "${E2E_TESTS[@]}"; do
	step "e2e $name over rdma"
	e2e "$name" FTVM_TRANSPORT=rdma FTVM_E2E_ADDR="$ADDR"
done

step "auto: rdma on $ADDR (on rxe0), tcp on loopback"
e2e pair FTVM_TRANSPORT=auto FTVM_E2E_ADDR="$ADDR" FTVM_E2E_EXPECT_TRANSPORT=rdma
e2e pair FTVM_TRANSPORT=auto FTVM_E2E_EXPECT_TRANSPORT=tcp

step "transport = rdma on loopback: refused at start"
scratch=$(mktemp -d)
printf '[node]\nid = a\nlisten = 127.0.0.1:7301\npartner = 127.0.0.1:7302\ntransport = rdma\n' \
	>"$scratch/a.conf"
rc=0
out=$(timeout 60 "$FTVMD" --config "$scratch/a.conf" 2>&1) || rc=$?
[ "$rc" -ne 0 ] || fail "ftvmd started with transport = rdma on loopback"
grep -q "transport = rdma, but listen address 127.0.0.1 is loopback" <<<"$out" ||
	fail "ftvmd did not say why it refused: $out"
ok "exit $rc: $(grep -o 'transport = rdma, but.*' <<<"$out")"
rm -rf "$scratch"

if [ ${#failed[@]} -gt 0 ]; then
	printf '  %s\n' "${failed[@]}"
	fail "${#failed[@]} e2e run(s) failed (above)"
fi
echo "rdma_pair: all checks passed in $(elapsed) s"
