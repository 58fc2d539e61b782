#!/usr/bin/env bash
# tests/vm/run.sh [--build DIR] JOB: boots the cached guest image
# (tests/vm/image.sh builds it the first time) under qemu's software
# emulation (TCG: no usable KVM here, ../shared/RDMA.md), runs
# tests/vm/jobs/JOB.sh inside as root once systemd has booted, prints its log
# and exits with its status. A job with the line "# vm: guests=2" runs in two
# guests joined by a network link (see boot() below).
#
# The guest sees the source tree and the build tree (DIR; default
# $FTVM_BUILDDIR, else build-gcc) read-only over 9p, as FTVM_SRC and
# FTVM_BUILD; the image is booted with snapshot=on, so it never changes.
#
# Exit status: the job's (0 passed, 1 failed, 77 skipped); 77 when qemu or the
# image cannot be had here, with the reason; 1 when the guest did not finish.
#
# Environment: FTVM_VM_TIMEOUT (seconds for everything, image build included;
# default 1500), FTVM_VM_JOB_TIMEOUT (seconds for the job inside; default
# 900), FTVM_VM_SMP, FTVM_VM_MEM (default 2 vCPUs, 2048 MiB), and image.sh's.
set -euo pipefail

HERE=$(cd "$(dirname "$0")" && pwd)
SRC=$(cd "$HERE/../.." && pwd)
build=${FTVM_BUILDDIR:-$SRC/build-gcc}
budget=${FTVM_VM_TIMEOUT:-1500}
job_budget=${FTVM_VM_JOB_TIMEOUT:-900}
# Boot to systemd "running" takes 20-30 s under TCG on an idle machine,
# power-off a few more; a loaded machine is several times slower.
BOOT_MARGIN=240

out=
qemu_pids=()
# shellcheck disable=SC2317 # run by the EXIT trap (shellcheck 0.9 misses it when the script ends in exit)
cleanup() {
	local pid
	for pid in "${qemu_pids[@]}"; do
		kill "$pid" 2>/dev/null || true
		wait "$pid" 2>/dev/null || true
	done
	if [ -n "$out" ]; then
		rm -rf "$out"
	fi
}
trap cleanup EXIT
trap 'echo "vm: interrupted"; exit 1' INT TERM
# One stream, in order (meson keeps stdout and stderr apart).
exec 2>&1

usage() {
	echo "usage: tests/vm/run.sh [--build DIR] JOB   (JOB: one of tests/vm/jobs/*.sh)" >&2
	exit 2
}

skip() {
	echo "vm: skipped: $*"
	exit 77
}

say() {
	echo "vm: [$SECONDS s] $*"
}

while [ $# -gt 0 ]; do
	case $1 in
	--build)
		[ $# -ge 2 ] || usage
		build=$2
		shift 2
		;;
	-h | --help) usage ;;
	-*) usage ;;
	*) break ;;
	esac
done
[ $# -eq 1 ] || usage
job=$1
if ! [[ $job =~ ^[A-Za-z0-9_-]+$ ]] || [ ! -f "$HERE/jobs/$job.sh" ]; then
	echo "vm: no job $job (tests/vm/jobs/$job.sh)" >&2
	exit 2
fi
if [ ! -d "$build" ]; then
	echo "vm: no build tree $build (give --build DIR)" >&2
	exit 2
fi
build=$(cd "$build" && pwd)

qemu=$(command -v qemu-system-x86_64 || true)
[ -n "$qemu" ] || skip "no qemu-system-x86_64 (tools/install-deps.sh installs qemu-system-x86)"

left() {
	echo $((budget - SECONDS))
}

say "image: tests/vm/image.sh"
t=$SECONDS
rc=0
out=$(mktemp -d)
# image.sh's progress (stderr) shows as it goes, and is kept for the reason
# of a skip; its stdout (the image's folder) is captured.
exec 4>&1
image=$({ timeout "$(left)" bash "$HERE/image.sh" 2>&1 >&3 3>&- | tee "$out/image.log" >&4; } 3>&1) ||
	rc=$?
exec 4>&-
case $rc in
0) ;;
124) skip "the image was not built within ${budget} s" ;;
*)
	reason=$(sed -n 's/^vm image: cannot be built here: //p' "$out/image.log" | tail -n 1)
	skip "no guest image: ${reason:-tests/vm/image.sh exited $rc (see above)}"
	;;
esac
say "image ready in $((SECONDS - t)) s: $image ($(head -n 1 "$image/ready"))"

# One guest at a time on this machine: they share its cores.
exec 8>"$(dirname "$image")/.guest.lock"
if ! flock -n 8; then
	say "another guest is running: waiting for it"
	flock -w "$(left)" 8 || {
		echo "vm: FAIL: another guest held the lock until the deadline"
		exit 1
	}
fi

guest_budget=$(left)
if [ "$guest_budget" -lt $((BOOT_MARGIN + 60)) ]; then
	echo "vm: FAIL: only ${guest_budget} s left of FTVM_VM_TIMEOUT=${budget} s for the guest"
	exit 1
fi
job_timeout=$job_budget
[ "$job_timeout" -le $((guest_budget - BOOT_MARGIN)) ] || job_timeout=$((guest_budget - BOOT_MARGIN))
guest_timeout=$((job_timeout + BOOT_MARGIN))

# A job whose file has the line "# vm: guests=2" runs in two guests, a and b,
# one vCPU each (two cores here: ../shared/RDMA.md), each with a second NIC
# joined to the other's by a qemu UDP socket link, a writable share of their
# own (ftvmout: $out/a, $out/b) and one they both write (ftvmshared:
# $out/shared); the job reads its role from ftvm.role= on the kernel command
# line. The run's status is the worse of the two.
guests=(solo)
if grep -qx '# vm: guests=2' "$HERE/jobs/$job.sh"; then
	guests=(a b)
	mkdir -p "$out/a" "$out/b" "$out/shared"
	port_a=$((20000 + RANDOM % 20000))
	port_b=$((port_a + 1))
fi

# boot ROLE: starts qemu for one guest in the background; its pid is added to
# qemu_pids and its folder is guest_dir ROLE.
qemu_pids=()
guest_dir() {
	if [ "$1" = solo ]; then echo "$out"; else echo "$out/$1"; fi
}
boot() {
	local role=$1 dir smp=${FTVM_VM_SMP:-2} append extra=()
	dir=$(guest_dir "$role")
	append="root=/dev/vda rw console=ttyS0 panic=-1 ftvm.job=$job ftvm.timeout=$job_timeout"
	if [ "$role" = solo ]; then
		extra=(-nic none)
	else
		smp=1
		append+=" ftvm.role=$role"
		local mine=$port_a theirs=$port_b mac=52:54:00:00:03:01
		if [ "$role" = b ]; then
			mine=$port_b theirs=$port_a mac=52:54:00:00:03:02
		fi
		extra=(-netdev "socket,id=link,udp=127.0.0.1:$theirs,localaddr=127.0.0.1:$mine"
			-device "virtio-net-pci,netdev=link,mac=$mac"
			-virtfs "local,path=$out/shared,mount_tag=ftvmshared,security_model=none")
	fi
	timeout --kill-after=10 "$guest_timeout" "$qemu" \
		-accel tcg,thread=multi -cpu max -smp "$smp" -m "${FTVM_VM_MEM:-2048}" \
		-nodefaults -display none -monitor none -no-reboot \
		-serial "file:$dir/console.log" \
		-kernel "$image/vmlinuz" -initrd "$image/initrd.img" \
		-append "$append" \
		-drive "file=$image/image.raw,format=raw,if=virtio,snapshot=on" \
		"${extra[@]}" \
		-virtfs "local,path=$SRC,mount_tag=ftvmsrc,security_model=none,readonly=on" \
		-virtfs "local,path=$build,mount_tag=ftvmbuild,security_model=none,readonly=on" \
		-virtfs "local,path=$dir,mount_tag=ftvmout,security_model=none" \
		>"$dir/qemu.log" 2>&1 &
	qemu_pids+=($!)
}

# result ROLE QEMU_STATUS: prints what the guest left and echoes its status
# as the last line.
result() {
	local role=$1 qrc=$2 dir rc boot name=$job guest=guest
	dir=$(guest_dir "$role")
	if [ "$role" != solo ]; then
		name="$job ($role)"
		guest="guest $role"
	fi
	if [ ! -f "$dir/rc" ]; then
		if [ "$qrc" -eq 124 ] || [ "$qrc" -eq 137 ]; then
			echo "vm: FAIL: the $guest did not finish within ${guest_timeout} s"
		else
			echo "vm: FAIL: qemu exited $qrc after ${guest_s} s without the job's result ($guest)"
		fi
		echo "---- qemu ($guest)"
		cat "$dir/qemu.log"
		echo "---- $guest console (last 80 lines)"
		tail -n 80 "$dir/console.log" 2>/dev/null || true
		echo 1
		return
	fi
	rc=$(cat "$dir/rc")
	[[ $rc =~ ^[0-9]+$ ]] || rc=1
	boot=$(grep -m1 -o 'ftvm-job: system [a-z]* after [0-9.]* s' "$dir/console.log" || true)
	say "$guest done in ${guest_s} s (${boot#ftvm-job: }); job $name exited $rc"
	cat "$dir/boot.log" 2>/dev/null || true
	echo "---- job $name"
	cat "$dir/job.log"
	echo "----"
	echo "$rc"
}

say "booting ${#guests[@]} guest(s) (TCG, ${#guests[@]} x $([ ${#guests[@]} -eq 1 ] && echo "${FTVM_VM_SMP:-2}" || echo 1) vCPUs, ${FTVM_VM_MEM:-2048} MiB each) for job $job, deadline ${job_timeout} s for the job, ${guest_timeout} s for the guest"
t=$SECONDS
for role in "${guests[@]}"; do
	boot "$role"
done
qrcs=()
for pid in "${qemu_pids[@]}"; do
	qrc=0
	wait "$pid" || qrc=$?
	qrcs+=("$qrc")
done
qemu_pids=()
guest_s=$((SECONDS - t))

# The worse status wins: 1 over 77 over 0.
status=0
for i in "${!guests[@]}"; do
	res=$(result "${guests[$i]}" "${qrcs[$i]}")
	sed '$d' <<<"$res"
	rc=$(tail -n 1 <<<"$res")
	if [ "$rc" -ne 0 ] && [ "$rc" -ne 77 ]; then
		status=1
	elif [ "$rc" -eq 77 ] && [ "$status" -eq 0 ]; then
		status=77
	fi
done
say "total ${SECONDS} s"
exit "$status"
