#!/usr/bin/env bash
# A node the RDMA device will not pin the frame pool for (replica/RDMA.md,
# "Registration"): node a runs with RLIMIT_MEMLOCK room for its message
# buffers (4 MiB a connection) but not for its pool's one 16 MiB block, and
# without CAP_IPC_LOCK, which would lift the limit. A page block a would send
# from its pool, or receive into it, then goes inline instead of one-sided:
# every write succeeds, both nodes read the same bytes, verify finds the
# mirror equal, `ftvmctl status` counts the refused registrations and a's log
# warns of them once, not at each write. Over TCP nothing is pinned: the same
# writes, nothing refused, no warning.
. "$(dirname "$0")/lib.sh"

LIMIT=$((12 << 20))
PAGES=8

# Raising the hard limit takes CAP_SYS_RESOURCE: over TCP, where the limit
# changes nothing, a lower one does as well.
if ! prlimit --memlock=$LIMIT:$LIMIT true 2>/dev/null; then
	if [ "$E2E_TRANSPORT" = rdma ]; then
		echo "skipped: cannot set RLIMIT_MEMLOCK to $LIMIT bytes here (hard limit $(ulimit -H -l) KiB)"
		exit 77
	fi
	LIMIT=$(($(ulimit -H -l) * 1024))
fi

# a's ftvmd, through prlimit and (as root) setpriv dropping CAP_IPC_LOCK.
drop=
[ "$(id -u)" = 0 ] && drop="setpriv --inh-caps=-ipc_lock --bounding-set=-ipc_lock --"
cat >"$WORK/ftvmd-memlock" <<EOF
#!/bin/sh
exec prlimit --memlock=$LIMIT:$LIMIT $drop "$FTVMD" "\$@"
EOF
chmod +x "$WORK/ftvmd-memlock"

write_pair_configs
real_ftvmd=$FTVMD
FTVMD=$WORK/ftvmd-memlock start_node a
FTVMD=$real_ftvmd start_node b
wait_for 10000 "pair linked" pair_up
grep -q "^Max locked memory *$LIMIT " "/proc/${PIDS[a]}/limits" ||
	fail "a's memlock limit is not $LIMIT: $(grep 'locked memory' "/proc/${PIDS[a]}/limits")"
cap_eff=$(awk '/^CapEff/ { print $2 }' "/proc/${PIDS[a]}/status")
(((0x$cap_eff >> 14) & 1)) && fail "a kept CAP_IPC_LOCK (CapEff $cap_eff)"
ok "a runs with memlock $LIMIT bytes, without CAP_IPC_LOCK; link $(status_field a transport)"

# Pages 0 to PAGES-1 written on a (the owner: its pool is the source), the
# rest on b (a would have to give b landings in its pool).
guid=$(ctl a alloc --size $((2 * PAGES * 4096)))
for ((p = 0; p < 2 * PAGES; p++)); do
	head -c 4096 /dev/urandom >"$WORK/p$p"
	writer=a
	[ "$p" -ge "$PAGES" ] && writer=b
	out=$(ctl "$writer" write "$guid" "$p" --file "$WORK/p$p" 2>&1) ||
		fail "write of page $p on $writer: $out"
done
for ((p = 0; p < 2 * PAGES; p++)); do
	for id in a b; do
		ctl "$id" read "$guid" "$p" | cmp -s - "$WORK/p$p" || fail "page $p read on $id differs"
	done
done
ctl a verify >/dev/null || fail "verify: $(ctl a verify 2>&1)"
ok "$((2 * PAGES)) pages written ($PAGES on a, $PAGES on b): the same bytes on both, verify equal"

failed_a=$(status_field a registrations.failed)
one_sided_a=$(status_field a page_writes.one_sided)
inline_a=$(status_field a page_writes.inline)
inline_b=$(status_field b page_writes.inline)
warnings=$(grep -c "page data goes inline, not one-sided" "$WORK/a.log" || true)
if [ "$E2E_TRANSPORT" = rdma ]; then
	[ "$failed_a" -ge 1 ] || fail "a counts $failed_a failed registrations"
	[ "$one_sided_a" = 0 ] && [ "$inline_a" -ge "$PAGES" ] && [ "$inline_b" -ge "$PAGES" ] ||
		fail "page blocks: a $one_sided_a one-sided and $inline_a inline, b $inline_b inline"
	[ "$warnings" = 1 ] || fail "a warned $warnings times of refused registrations, wanted once"
	[ "$(status_field b registrations.failed)" = 0 ] || fail "b, not limited, counts failures"
	ok "a: $failed_a registration(s) refused, its blocks inline ($inline_a; b $inline_b), one warning: $(grep -m1 -o 'page data goes inline.*' "$WORK/a.log")"
else
	[ "$failed_a" = 0 ] && [ "$warnings" = 0 ] ||
		fail "over TCP a counts $failed_a failed registrations and warned $warnings times"
	ok "over TCP nothing registered: $inline_a blocks inline on a, $inline_b on b, no warning"
fi
