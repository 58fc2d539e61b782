#!/usr/bin/env bash
# A page-table commit that fails (node/vmm/VMM.md, "A page-table commit that
# fails"): node a's state_dir is a small tmpfs, filled by allocations with
# large headers. The commit that finds it full stops a at once, as a crash
# would, answering nothing of that transaction; b takes over with every
# allocation a acknowledged; a, restarted once there is room, is resynced
# from b, and the pair is equal again.
# The tmpfs is mounted in a mount namespace of the test's own (lib.sh's
# cleanup unmounts it): without one (not root), the test is skipped.
if [ -z "${FTVM_E2E_MOUNT_NS:-}" ]; then
	if ! unshare --mount --propagation private true 2>/dev/null; then
		echo "skip: no mount namespace of our own here (unshare --mount needs root)"
		exit 77
	fi
	FTVM_E2E_MOUNT_NS=1 exec unshare --mount --propagation private bash "$0" "$@"
fi
. "$(dirname "$0")/lib.sh"

write_pair_configs
mkdir "$WORK/a"
mount -t tmpfs -o size=512k tmpfs "$WORK/a" || fail "cannot mount a tmpfs for a's state_dir"
start_node a
start_node b
wait_for 5000 "pair linked" pair_up

head -c 4096 /dev/urandom >"$WORK/header"
want_hex=$(od -An -tx1 -v "$WORK/header" | tr -d ' \n')
acked=()
for ((i = 0; i < 400; i++)); do
	if ! g=$(ctl a alloc --size 4096 --header-file "$WORK/header" 2>"$WORK/alloc.err"); then
		break
	fi
	acked+=("$g")
done
[ "$i" -lt 400 ] || fail "400 allocations with 4 KiB headers and a's 512 KiB state_dir never filled"
ok "a's state_dir full after ${#acked[@]} allocations; the next: $(cat "$WORK/alloc.err")"

wait_for 5000 "a stopped" pid_gone "${PIDS[a]}"
rc=0
wait "${PIDS[a]}" || rc=$?
unset 'PIDS[a]'
[ "$rc" = 1 ] || fail "a exited $rc after its failed commit, not 1"
grep -q "page table commit failed: .*stopping now" "$WORK/a.log" ||
	fail "a did not log why it stopped: $(tail -n 3 "$WORK/a.log")"
ok "a stopped at its failed commit: $(grep -o 'page table commit failed: [^;]*' "$WORK/a.log")"

wait_for 5000 "b serving alone" field_is b state solo
for g in "${acked[@]}"; do
	[ "$(ctl b --json header "$g" | jq -r .header_hex)" = "$want_hex" ] ||
		fail "b lost allocation $g, acknowledged by a: $(ctl b header "$g" 2>&1)"
done
ctl b write "${acked[-1]}" 0 --file "$(fill 7)" >/dev/null || fail "b cannot write ${acked[-1]} alone"
ok "b took over: all ${#acked[@]} acknowledged allocations there, headers equal; it writes alone"

mount -o remount,size=16m "$WORK/a"
start_node a
wait_for 5000 "a resynced and the pair active" pair_up
out=$(ctl a verify) || fail "not equal after a's resync: $out"
for g in "${acked[@]}"; do
	[ "$(ctl a --json header "$g" | jq -r .header_hex)" = "$want_hex" ] ||
		fail "a, resynced, lacks allocation $g: $(ctl a header "$g" 2>&1)"
done
cmp <(ctl a read "${acked[-1]}" 0) "$(fill 7)" || fail "a reads b's write alone differently"
grep -q "a resynced (full)" "$WORK/b.log" ||
	fail "b did not resync a in full (a's own last LSN is below what b applied of it)"
ok "a restarted with room: resynced by b ($(grep -o 'resynced by b[^;]*' "$WORK/a.log" | tail -n 1)), $out"

for id in a b; do
	kill -TERM "${PIDS[$id]}"
	wait "${PIDS[$id]}" || fail "$id exited $? on SIGTERM"
	unset "PIDS[$id]"
done
