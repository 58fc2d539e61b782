#!/usr/bin/env bash
# The page table's WAL is checkpointed off the request path (node/vmm/VMM.md,
# "WAL checkpoints"), as `ftvmctl status --json` shows in its pagetable
# object: after a few hundred page writes both nodes, once idle, checkpoint
# the WAL, which then holds fewer frames than the idle trigger, with no
# commit having checkpointed; a
# node kept busy with writes back to back checkpoints at its bound
# ([node] wal_checkpoint_frames), so its WAL never holds much more.
. "$(dirname "$0")/lib.sh"

FTVM_FAILOVER_CLIENT=${FTVM_FAILOVER_CLIENT:?FTVM_FAILOVER_CLIENT must name the ftvm-failover-client binary}
IDLE_FRAMES=256 # node/vmm/vmm.c, IDLE_CHECKPOINT_FRAMES
BOUND=300

pagetable() {
	ctl "$1" --json status | jq -c .pagetable
}

# writes COUNT: page writes back to back from one client, each acknowledged.
writes() {
	"$FTVM_FAILOVER_CLIENT" "$WORK/a.sock" "$WORK/b.sock" "$1" >"$WORK/client.out" 2>&1 ||
		fail "the client's $1 writes: $(tail -n 3 "$WORK/client.out")"
}

start_pair

writes 400
# The checkpoint leaves the WAL empty, but destage goes on after it and its
# clean rows are committed and folded into the WAL again: tens of frames, over
# a hundred where destage is slow (ASan). Once destage is done and the node
# idle, fewer than IDLE_FRAMES are left, or it would checkpoint again.
checkpointed_when_idle() {
	local pt
	pt=$(pagetable "$1")
	[ "$(ctl "$1" --json sense | jq .queues.destage)" = 0 ] &&
		[ "$(jq .checkpoints_idle <<<"$pt")" -ge 1 ] && [ "$(jq .fold_waiting <<<"$pt")" = 0 ] &&
		[ "$(jq .wal_frames <<<"$pt")" -lt "$IDLE_FRAMES" ]
}
for id in a b; do
	wait_for 5000 "$id checkpoints its WAL when idle: $(pagetable $id)" checkpointed_when_idle "$id"
	pt=$(pagetable "$id")
	[ "$(jq .checkpoints_backstop <<<"$pt")" = 0 ] && [ "$(jq .wal_frames_peak <<<"$pt")" -ge "$IDLE_FRAMES" ] &&
		[ "$(jq .wal_checkpoint_frames <<<"$pt")" = 4096 ] ||
		fail "$id: idle checkpoints only, after a WAL of $IDLE_FRAMES frames or more, bound 4096: $pt"
	grep -q "idle: .* WAL frames checkpointed" "$WORK/$id.log" || fail "$id logged no idle checkpoint"
	ok "$id checkpointed when idle: $pt"
done

# A clean stop leaves no WAL (close checkpoints), as before.
for id in a b; do
	kill -TERM "${PIDS[$id]}"
	wait "${PIDS[$id]}" || fail "$id exited $? on SIGTERM"
	unset "PIDS[$id]"
	[ ! -e "$WORK/$id/pagetable.db-wal" ] || fail "$id left its WAL after a clean stop"
done
ok "a clean stop left no WAL"

for id in a b; do
	sed -i "s/^\[memory\]$/wal_checkpoint_frames = $BOUND\n[memory]/" "$WORK/$id.conf"
done
start_node a
start_node b
wait_for 5000 "pair linked again" pair_up
writes 2000
for id in a b; do
	pt=$(pagetable "$id")
	# A commit may cross the bound by what it writes: a fold of 1024 page
	# rows on distinct pages, tens of frames.
	[ "$(jq .wal_checkpoint_frames <<<"$pt")" = "$BOUND" ] &&
		[ "$(jq .checkpoints_backstop <<<"$pt")" -ge 1 ] &&
		[ "$(jq .wal_frames_peak <<<"$pt")" -lt $((BOUND + 200)) ] ||
		fail "$id, busy for 2000 writes: checkpoints at the bound of $BOUND frames: $pt"
	ok "$id checkpointed at the bound while busy: $pt"
done
