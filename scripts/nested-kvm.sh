#!/usr/bin/env bash
# nested-kvm.sh -- run a command on a machine that has a working /dev/kvm,
# even when the host has none: boots a Debian kernel under QEMU's software
# emulator (TCG) with an emulated AMD-SVM CPU, loads kvm + kvm_amd there,
# shares the host's / read-write over virtio-9p, chroots into it, and runs
# COMMAND in the caller's working directory. See scripts/nested-kvm.md.
#
# Usage: scripts/nested-kvm.sh [--probe] [--] COMMAND [ARGS...]
#        scripts/nested-kvm.sh --probe          # is /dev/kvm usable in there?
#        scripts/nested-kvm.sh --prepare        # just build the cached kernel/initramfs
#
# Exit status: COMMAND's exit status; 125 if the VM could not run it (QEMU
# failed, kvm could not be loaded, timeout) with a one-line reason on stderr.
# COMMAND runs as root in the caller's directory, with stdin = /dev/null and a
# fresh tmpfs on /tmp (the host's /tmp is not visible, unless the work tree
# itself is under /tmp: then the host's /tmp is used), and only PATH, HOME,
# BRISK_* and a few more variables (see below) from the caller's environment.
#
# Environment knobs:
#   NESTED_KVM_TIMEOUT  seconds before QEMU is killed (default 1800)
#   NESTED_KVM_IDLE     seconds without a byte from COMMAND (stdout or stderr) before QEMU is killed
#                       as wedged (default 0: no such limit); give it more than COMMAND's longest silence
#   NESTED_KVM_ALIVE    seconds without the VM kernel's heartbeat (a byte every 5 s from its init, on a
#                       serial port of its own) before QEMU is killed as wedged (default 0: no such limit):
#                       a wedge stops the whole VM, a test that is merely long does not
#   NESTED_KVM_MEM      guest memory (default 4G)
#   NESTED_KVM_SMP      guest vCPUs (default: host CPUs, at most 4, at least 2)
#   NESTED_KVM_CPU      QEMU -cpu model (default qemu64,+svm,+npt,...)
#   NESTED_KVM_KVM_AMD  kvm_amd module parameters (default "nested=0 avic=0 sev=0 sev_es=0")
#   NESTED_KVM_ENV      extra space-separated variable names to pass through
#   NESTED_KVM_VERBOSE  1 = print the guest console log (kernel + init) to stderr
#   NESTED_KVM_LOGLEVEL guest console loglevel (default 4; the console goes to a
#                       log file, never into COMMAND's output)
#   NESTED_KVM_APPEND   extra guest kernel command line
#   NESTED_KVM_9P_CACHE 9p cache mode (default loose; mmap = coherent with host-side changes, slower)
#   NESTED_KVM_HOLD     0 = do not start scripts/kvm-hold.c in the VM (to show the wedge it prevents)
#   NESTED_KVM_BPF_JIT  1 = leave the VM kernel's BPF JIT on (default 0: off, see nested-kvm.md "Known problems")
#   NESTED_KVM_TCG_THREAD  multi (default: one host thread per vCPU) or single (all vCPUs on one thread)
#   NESTED_KVM_QEMU     the emulator to run (default qemu-system-x86_64 on PATH: Debian 12's QEMU 7.2)
#   NESTED_KVM_QEMU_DATA its firmware directory (qemu -L), for an emulator unpacked outside /usr
set -euo pipefail

die() { echo "nested-kvm: $*" >&2; exit 125; }

SELF=$(readlink -f "${BASH_SOURCE[0]}")
ROOT=$(cd "$(dirname "$SELF")/.." && pwd -P)
NESTED=$ROOT/build/nested

probe=0 prepare_only=0
while [[ $# -gt 0 ]]; do
	case $1 in
	--probe) probe=1; shift ;;
	--prepare) prepare_only=1; shift ;;
	-h|--help) sed -n '2,/^set -euo/p' "$SELF" | sed '$d; s/^# \{0,1\}//'; exit 0 ;;
	--) shift; break ;;
	-*) die "unknown option $1" ;;
	*) break ;;
	esac
done
if [[ $probe = 0 && $prepare_only = 0 && $# -eq 0 ]]; then
	die "usage: $0 [--probe] -- COMMAND [ARGS...]"
fi

TIMEOUT=${NESTED_KVM_TIMEOUT:-1800}
IDLE=${NESTED_KVM_IDLE:-0}
[[ $IDLE =~ ^[0-9]+$ ]] || die "NESTED_KVM_IDLE must be a number of seconds"
ALIVE=${NESTED_KVM_ALIVE:-0}
[[ $ALIVE =~ ^[0-9]+$ ]] || die "NESTED_KVM_ALIVE must be a number of seconds"
MEM=${NESTED_KVM_MEM:-4G}
ncpu=$(nproc 2>/dev/null || echo 2)
SMP=${NESTED_KVM_SMP:-$(( ncpu < 2 ? 2 : (ncpu > 4 ? 4 : ncpu) ))}
# svm: the whole point. npt: TCG emulates nested paging (saves kvm_amd from
# shadow paging, which is much slower under TCG). vgif and
# svme-addr-chk are emulated by TCG too; nrip-save, decode-assists, etc. are not (QEMU 7.2).
CPU=${NESTED_KVM_CPU:-qemu64,+svm,+npt,+vgif,+svme-addr-chk,+lahf-lm,+popcnt,+sse4.1,+sse4.2,+ssse3,+cx16}
KVM_AMD_PARAMS=${NESTED_KVM_KVM_AMD:-nested=0 avic=0 sev=0 sev_es=0}
CACHE9P=${NESTED_KVM_9P_CACHE:-loose}
TCG_THREAD=${NESTED_KVM_TCG_THREAD:-multi}
[[ $TCG_THREAD = single || $TCG_THREAD = multi ]] || die "NESTED_KVM_TCG_THREAD must be single or multi"

# Modules needed in the initramfs, in load order (dependencies are resolved
# with modinfo and loaded first; built-in ones are simply skipped).
WANT_MODULES="virtio_ring virtio virtio_pci_modern_dev virtio_pci_legacy_dev virtio_pci
netfs fscache 9pnet 9pnet_virtio 9p irqbypass kvm ccp kvm-amd tun vhost_vsock
unix_diag inet_diag tcp_diag"

need_pkgs() { # pkg ...
	local missing=() p
	declare -A ok=()
	while read -r p st; do [[ $st = installed ]] && ok[$p]=1; done < \
		<(dpkg-query -W -f='${Package} ${db:Status-Status}\n' "$@" 2>/dev/null || true)
	for p in "$@"; do [[ -n ${ok[$p]:-} ]] || missing+=("$p"); done
	[[ ${#missing[@]} -eq 0 ]] && return 0
	echo "nested-kvm: installing ${missing[*]}" >&2
	[[ $(id -u) = 0 ]] || die "need root to apt-get install ${missing[*]}"
	{ DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends "${missing[@]}" ||
	  { apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends "${missing[@]}"; }
	} >&2 || die "apt-get install ${missing[*]} failed"
}

# The init script that runs as PID 1 in the guest (busybox sh).
init_script() {
	cat <<'EOF'
#!/bin/busybox sh
/bin/busybox --install -s /bin
export PATH=/bin
mkdir -p /proc /sys /dev /mnt/host
mount -t proc proc /proc
mount -t sysfs sysfs /sys
mount -t devtmpfs devtmpfs /dev
log() { echo "init: $*" > /dev/console; }
halt_vm() { sync; echo o > /proc/sysrq-trigger; poweroff -f; sleep 5; reboot -f; }
# The loopback interface starts down in a fresh kernel: nothing but init brings it up, and COMMAND (a
# hostfwd test, brisk-slirp's forwards on 127.0.0.1) needs it as on any host.
ip link set lo up 2>/dev/console || log "cannot bring the loopback interface up"
RUN= KVM_AMD=
for a in $(cat /proc/cmdline); do
	case $a in
	nkvm.run=*) RUN=${a#nkvm.run=} ;;
	nkvm.amd=*) KVM_AMD=$(echo "${a#nkvm.amd=}" | tr , ' ') ;;
	nkvm.cache=*) CACHE=${a#nkvm.cache=} ;;
	nkvm.tty=*) TTYS=${a#nkvm.tty=} ;;
	nkvm.winsz=*) WINSZ=${a#nkvm.winsz=} ;;
	nkvm.hold=*) HOLD=${a#nkvm.hold=} ;;
	nkvm.bpfjit=*) BPFJIT=${a#nkvm.bpfjit=} ;;
	esac
done
modfail=
for m in $(cat /lib/modules/order); do
	p=
	[ "$m" = kvm-amd ] && p=$KVM_AMD
	insmod /lib/modules/$m.ko $p 2>/dev/console || modfail="$modfail $m"
done
if ! mount -t 9p -o trans=virtio,version=9p2000.L,msize=262144,cache=${CACHE:-loose},access=client hostroot /mnt/host 2>/dev/console; then
	log "cannot mount the 9p host root:$modfail"; dmesg > /dev/console; halt_vm
fi
H=/mnt/host
err() { log "$*"; echo "$*" > "$H$RUN/error"; dmesg > "$H$RUN/dmesg"; sync; halt_vm; }
[ -n "$RUN" ] && [ -d "$H$RUN" ] || { log "run dir '$RUN' missing"; halt_vm; }
why() { dmesg | grep -v -i 'command line' | grep -i -E 'kvm|svm' | tail -n 3 | tr '\n' ' '; }
[ -z "$modfail" ] || err "insmod failed:$modfail ($(why))"
[ -c /dev/kvm ] || err "/dev/kvm did not appear ($(why))"
# One idle VM held for the VM's life: no kernel text patching per test VM (scripts/kvm-hold.c).
[ "$HOLD" = 0 ] || /bin/kvm-hold 2>/dev/console &
# The same for tracepoints (`brisk profile`, scripts/kvm-diag.sh): a tracepoint's first probe flips a static
# key and its second a static call, both by text_poke_bp(). Two idle trace instances, tracing off, each with
# the kvm and sched events on and a pid filter (its sched probes), keep every such tracepoint at two probes
# or more, so a profile's own instance adds and removes probes without patching kernel text.
if [ "$HOLD" != 0 ] && mount -t tracefs nodev /sys/kernel/tracing 2>/dev/null; then
	for i in 0 1; do
		I=/sys/kernel/tracing/instances/nkvm-hold$i
		mkdir $I 2>/dev/null || continue
		echo 0 > $I/tracing_on
		echo 4 > $I/buffer_size_kb
		echo 1 > $I/events/kvm/enable
		for e in sched_switch sched_wakeup sched_wakeup_new sched_process_fork sched_process_exit; do
			echo 1 > $I/events/sched/$e/enable 2>/dev/null
		done
		echo 1 > $I/set_event_pid
	done
fi
# BPF programs (every brisk thread's seccomp filter) run in the interpreter, as a precaution: the JIT writes them
# into executable pages other CPUs are running, and QEMU 7.2's TCG can keep running a stale translation of such a
# page (the int3 wedge of scripts/nested-kvm.md, "Known problems", where the measurements are).
[ "$BPFJIT" = 1 ] || echo 0 > /proc/sys/net/core/bpf_jit_enable
mount -t proc proc $H/proc
mount -t sysfs sysfs $H/sys
# The host's cgroup file systems, mounted as the host has them ($RUN/cgroups: "TYPE DIR OPTIONS" lines that
# nested-kvm.sh took from the host's /proc/mounts): the jail and the jailer's tests find the hierarchies
# they would find on the host.
if [ -f "$H$RUN/cgroups" ]; then
	while read -r t d o; do
		mkdir -p "$H$d" 2>/dev/null
		mount -t "$t" -o "$o" "$t" "$H$d" 2>/dev/console || log "cgroup: $t on $d not mounted"
	done < "$H$RUN/cgroups"
fi
mount -t devtmpfs devtmpfs $H/dev
mkdir -p $H/dev/pts $H/dev/shm
ln -sf /proc/self/fd $H/dev/fd
ln -sf /proc/self/fd/0 $H/dev/stdin
ln -sf /proc/self/fd/1 $H/dev/stdout
ln -sf /proc/self/fd/2 $H/dev/stderr
mount -t devpts -o newinstance,ptmxmode=0666,gid=5,mode=0620 devpts $H/dev/pts
mount -t tmpfs tmpfs $H/dev/shm
mount -t tmpfs tmpfs $H/run
# A fresh /tmp, unless the work (and this run's directory) lives under the host's /tmp;
# then TMPDIR points at a tmpfs all the same (9p cannot truncate an unlinked file, as pytest's capture does).
TMPV=
case $RUN in /tmp/*) mkdir -m 1777 $H/run/tmp; TMPV=TMPDIR=/run/tmp ;; *) mount -t tmpfs -o mode=1777 tmpfs $H/tmp ;; esac
# ttyS1 = COMMAND's stdout, ttyS2 = its stderr: raw, so bytes pass unchanged.
# Where the caller's stdout/stderr is not a terminal, COMMAND gets a pipe
# (through cat) instead of the tty, so it behaves as it would on the host.
o=/dev/ttyS1 e=/dev/ttyS2 pids=
exec 7>/dev/ttyS1 8>/dev/ttyS2 # hold them open: a tty forgets its window size on last close
for t in 1 2; do
	stty -F /dev/ttyS$t raw -echo 115200
	[ -n "$WINSZ" ] && stty -F /dev/ttyS$t rows ${WINSZ%x*} cols ${WINSZ#*x}
done
case $TTYS in 0?) mkfifo /fo; cat /fo > /dev/ttyS1 & pids="$pids $!"; o=/fo ;; esac
case $TTYS in ?0) mkfifo /fe; cat /fe > /dev/ttyS2 & pids="$pids $!"; e=/fe ;; esac
cut -d' ' -f1 /proc/uptime > "$H$RUN/booted"
sync # (cache=loose: make the marker, and its mtime, reach the host now)
# The heartbeat (NESTED_KVM_ALIVE): a byte every 5 s on ttyS3, a file on the host; a wedged VM sends none.
( while :; do printf . || exit; sleep 5; done ) >/dev/ttyS3 2>/dev/null &
env -i $TMPV /bin/chroot $H /bin/bash --noprofile --norc "$RUN/cmd.sh" </dev/null >$o 2>$e 7>&- 8>&-
rc=$?
if [ -n "$pids" ]; then
	# background children that keep the pipes open get 5 s, as on a timeout
	( sleep 5; kill $pids ) 2>/dev/null & k=$!
	wait $pids
	kill $k 2>/dev/null
fi
echo $rc > "$H$RUN/status.tmp"
mv "$H$RUN/status.tmp" "$H$RUN/status"
cut -d' ' -f1 /proc/uptime > "$H$RUN/done"
sync
umount $H/dev/pts $H/dev/shm $H/tmp $H/run $H/dev $H/sys $H/proc 2>/dev/null
sync
halt_vm
EOF
}

prepare() {
	mkdir -p "$NESTED"
	exec 9>"$NESTED/.lock"
	flock 9
	need_pkgs qemu-system-x86 busybox-static cpio xz-utils kmod coreutils util-linux gzip
	# Which kernel? The one linux-image-amd64 depends on; fall back to the cache.
	local kpkg= kver
	# re-resolve only when the apt lists changed since last time (apt-cache is slow)
	if [[ -f $NESTED/kernel.pkg && -z $(find /var/lib/apt/lists -maxdepth 1 -newer "$NESTED/kernel.pkg" -name '*Packages*' 2>/dev/null | head -n1) ]]; then
		kpkg=$(cat "$NESTED/kernel.pkg")
	fi
	[[ -n $kpkg ]] || kpkg=$(apt-cache depends linux-image-amd64 2>/dev/null | sed -n 's/^ *Depends: \(linux-image-6\.1\.[^ ]*-amd64\)$/\1/p' | head -n1 || true)
	if [[ -z $kpkg ]]; then
		kpkg=$(cat "$NESTED/kernel.pkg" 2>/dev/null || true)
		[[ -n $kpkg ]] || die "cannot determine linux-image-6.1.*-amd64 (apt-cache depends linux-image-amd64)"
	fi
	kver=${kpkg#linux-image-}
	local kdir=$NESTED/kernel-$kver
	if [[ ! -f $kdir/.done ]]; then
		echo "nested-kvm: fetching $kpkg" >&2
		rm -rf "$kdir" "$NESTED/dl"
		mkdir -p "$NESTED/dl"
		(cd "$NESTED/dl" && apt-get download "$kpkg" >/dev/null 2>&1) ||
			{ apt-get update -qq >&2 && (cd "$NESTED/dl" && apt-get download "$kpkg" >&2); } ||
			die "apt-get download $kpkg failed"
		mkdir -p "$kdir.tmp"
		dpkg-deb -x "$NESTED"/dl/"$kpkg"_*.deb "$kdir.tmp"
		mv "$kdir.tmp" "$kdir"
		rm -rf "$NESTED/dl"
		touch "$kdir/.done"
	fi
	[[ $(cat "$NESTED/kernel.pkg" 2>/dev/null) = "$kpkg" ]] || echo "$kpkg" > "$NESTED/kernel.pkg"
	KERNEL=$kdir/boot/vmlinuz-$kver
	[[ -f $KERNEL ]] || die "no $KERNEL"
	# Boot the uncompressed ELF vmlinux through its PVH entry point when we can:
	# skips the real-mode setup code and the in-guest xz decompression, which
	# cost several seconds under TCG. Falls back to the bzImage.
	if [[ ${NESTED_KVM_PVH:-1} = 1 ]] && grep -q '^CONFIG_PVH=y' "$kdir/boot/config-$kver"; then
		if [[ ! -f $kdir/vmlinux.pvh ]]; then
			local off
			off=$(LC_ALL=C grep -abo $'\xfd7zXZ\x00' "$KERNEL" | head -n1 | cut -d: -f1 || true)
			# (xz complains about the bytes that follow the stream: judge by the result)
			[[ -z $off ]] || { tail -c +"$((off + 1))" "$KERNEL" | xz -dc > "$kdir/vmlinux.tmp"; } 2>/dev/null || true
			if [[ -s $kdir/vmlinux.tmp && $(head -c4 "$kdir/vmlinux.tmp" | od -An -tx1 | tr -d ' \n') = 7f454c46 ]]; then
				mv "$kdir/vmlinux.tmp" "$kdir/vmlinux.pvh"
			else
				rm -f "$kdir/vmlinux.tmp"
				echo "nested-kvm: warning: cannot extract vmlinux from $KERNEL; booting the bzImage" >&2
			fi
		fi
		[[ -f $kdir/vmlinux.pvh ]] && KERNEL=$kdir/vmlinux.pvh
	fi
	local mdir=$kdir/lib/modules/$kver
	# initramfs: rebuilt when this script, busybox or the kernel changed
	local bb stamp
	bb=$(dpkg -L busybox-static | grep -E '/s?bin/busybox$' | head -n1)
	[[ -x $bb ]] || die "busybox-static installed but no busybox binary found"
	command -v gcc >/dev/null || die "gcc is needed to build scripts/kvm-hold.c (scripts/deps.sh installs it)"
	stamp="$({ init_script; echo "$WANT_MODULES"; cat "$ROOT/scripts/kvm-hold.c"; } | sha256sum | cut -c1-16)-$(sha256sum "$bb" | cut -c1-16)-$kver"
	INITRD=$NESTED/initramfs-$kver.cpio.gz
	if [[ ! -f $INITRD || $(cat "$INITRD.stamp" 2>/dev/null) != "$stamp" ]]; then
		echo "nested-kvm: building initramfs" >&2
		local tmp
		tmp=$(mktemp -d "$NESTED/initramfs.XXXXXX")
		mkdir -p "$tmp/bin" "$tmp/lib/modules"
		cp "$bb" "$tmp/bin/busybox"
		gcc -O2 -Wall -static -o "$tmp/bin/kvm-hold" "$ROOT/scripts/kvm-hold.c" ||
			die "cannot build scripts/kvm-hold.c (static: needs libc6-dev)"
		init_script > "$tmp/init"
		chmod 755 "$tmp/init"
		# resolve module dependencies (post-order DFS) with modinfo
		local -A seen=()
		local order=()
		add_mod() {
			local m=$1 f d
			m=${m//_/-}
			[[ -n ${seen[$m]:-} ]] && return 0
			seen[$m]=1
			f=$(find "$mdir/kernel" -name "$m.ko" -o -name "${m//-/_}.ko" | head -n1)
			if [[ -z $f ]]; then
				grep -q -E "/(${m}|${m//-/_})\.ko\$" "$mdir/modules.builtin" 2>/dev/null ||
					echo "nested-kvm: warning: module $m not found (assuming built-in)" >&2
				return 0
			fi
			for d in $(modinfo -F depends "$f" | tr , ' '); do add_mod "$d"; done
			cp "$f" "$tmp/lib/modules/$m.ko"
			order+=("$m")
		}
		local m
		for m in $WANT_MODULES; do add_mod "$m"; done
		printf '%s\n' "${order[@]}" > "$tmp/lib/modules/order"
		(cd "$tmp" && find . | cpio -o -H newc --quiet | gzip -1) > "$INITRD.tmp"
		mv "$INITRD.tmp" "$INITRD"
		echo "$stamp" > "$INITRD.stamp"
		rm -rf "$tmp"
	fi
	# run dirs left behind by killed invocations
	find "$NESTED/runs" -mindepth 1 -maxdepth 1 -name 'run.*' -mmin +1440 -exec rm -rf {} + 2>/dev/null || true
	flock -u 9
	exec 9>&-
}

prepare
[[ $prepare_only = 1 ]] && { echo "kernel: $KERNEL"; echo "initrd: $INITRD"; exit 0; }

if [[ $probe = 1 ]]; then
	# Build the smoke test on the host; run it inside.
	smoke=$NESTED/kvm-smoke
	if [[ ! -x $smoke || $ROOT/scripts/kvm-smoke.c -nt $smoke ]]; then
		command -v gcc >/dev/null || die "--probe needs gcc to build scripts/kvm-smoke.c"
		gcc -O2 -Wall -o "$smoke.$$" "$ROOT/scripts/kvm-smoke.c" && mv "$smoke.$$" "$smoke" ||
			die "cannot build scripts/kvm-smoke.c"
	fi
	set -- "$smoke"
fi

# Per-run directory (under the shared root, so the guest sees the same path).
mkdir -p "$NESTED/runs"
RUN=$(mktemp -d "$NESTED/runs/run.XXXXXX")
[[ $RUN =~ ^[A-Za-z0-9_./+-]+$ ]] || die "path $RUN contains characters the kernel command line cannot carry"
qpid= outpid= errpid= wdpid=
cleanup() {
	local p
	for p in $qpid $outpid $errpid $wdpid; do kill "$p" 2>/dev/null || true; done
	if [[ -f $RUN/console.log ]]; then cp "$RUN/console.log" "$NESTED/last-console.log" 2>/dev/null || true; fi
	if [[ -f $RUN/dmesg ]]; then cp "$RUN/dmesg" "$NESTED/last-dmesg.log" 2>/dev/null || true; fi
	rm -rf "$RUN"
}
trap cleanup EXIT
trap 'exit 130' INT
trap 'exit 143' TERM

# The command script: environment, working directory, argv.
{
	echo "# generated by nested-kvm.sh"
	vars=(PATH HOME USER LOGNAME LANG LC_ALL TERM TZ SHELL PYENV_ROOT PYENV_VERSION VIRTUAL_ENV
		CC CFLAGS LDFLAGS MAKEFLAGS PYTHONPATH PYTEST_ADDOPTS ${NESTED_KVM_ENV:-})
	while IFS='=' read -r name _; do
		[[ $name == BRISK_* ]] && vars+=("$name")
	done < <(env)
	for v in "${vars[@]}"; do
		[[ -n ${!v+x} ]] && printf 'export %s=%q\n' "$v" "${!v}"
	done
	echo "export NESTED_KVM_GUEST=1"
	printf 'cd -- %q || exit 125\n' "$PWD"
	printf 'exec'
	printf ' %q' "$@"
	printf '\n'
} > "$RUN/cmd.sh"

# the host's cgroup mounts (cgroup, cgroup2, and the tmpfs that holds v1 hierarchies), for the VM's init
awk '$2 ~ /^\/sys\/fs\/cgroup(\/|$)/ && ($3 == "cgroup" || $3 == "cgroup2" || $3 == "tmpfs") { print $3, $2, $4 }' \
	/proc/mounts >"$RUN/cgroups" 2>/dev/null || true
mkfifo "$RUN/out.in" "$RUN/out.out" "$RUN/err.in" "$RUN/err.out"
# tee, not cat: each chunk also lands in a file whose mtime the idle watchdog below reads
tee "$RUN/out.seen" <"$RUN/out.out" & outpid=$!
tee "$RUN/err.seen" <"$RUN/err.out" >&2 & errpid=$!

append="console=ttyS0 quiet loglevel=${NESTED_KVM_LOGLEVEL:-4} panic=-1 rdinit=/init tsc=reliable mitigations=off nkvm.hold=${NESTED_KVM_HOLD:-1} nkvm.bpfjit=${NESTED_KVM_BPF_JIT:-0} ${NESTED_KVM_APPEND:-}"
append+=" nkvm.run=$RUN nkvm.amd=${KVM_AMD_PARAMS// /,} nkvm.cache=$CACHE9P"
otty=0 etty=0
[[ -t 1 ]] && otty=1
[[ -t 2 ]] && etty=1
append+=" nkvm.tty=$otty$etty"
if [[ $otty$etty != 00 ]] && winsz=$(stty size 2>/dev/null </dev/tty) && [[ $winsz =~ ^([1-9][0-9]*)\ ([1-9][0-9]*)$ ]]; then
	append+=" nkvm.winsz=${BASH_REMATCH[1]}x${BASH_REMATCH[2]}"
fi
# QEMU monitor on a socket in the run dir, to look at a hung guest:
#   socat - UNIX-CONNECT:build/nested/runs/run.XXXXXX/monitor   (info registers, ...)
monitor=(-monitor none)
[[ ${#RUN} -lt 100 ]] && monitor=(-monitor "unix:$RUN/monitor,server=on,wait=off")
t0=$(date +%s.%N)
set +e
timeout -k 10 "$TIMEOUT" "${NESTED_KVM_QEMU:-qemu-system-x86_64}" ${NESTED_KVM_QEMU_DATA:+-L "$NESTED_KVM_QEMU_DATA"} \
	-accel "tcg,thread=$TCG_THREAD" -M pc -cpu "$CPU" -smp "$SMP" -m "$MEM" \
	-nographic -nodefaults -no-user-config -no-reboot \
	"${monitor[@]}" \
	-chardev file,id=con,path="$RUN/console.log" -serial chardev:con \
	-chardev pipe,id=out,path="$RUN/out" -serial chardev:out \
	-chardev pipe,id=err,path="$RUN/err" -serial chardev:err \
	-chardev file,id=alive,path="$RUN/alive" -serial chardev:alive \
	-fsdev local,id=hostroot,path=/,security_model=passthrough,multidevs=remap \
	-device virtio-9p-pci,fsdev=hostroot,mount_tag=hostroot \
	-kernel "$KERNEL" -initrd "$INITRD" -append "$append" \
	</dev/null 2>"$RUN/qemu.err" &
qpid=$!
if [[ $IDLE -gt 0 || $ALIVE -gt 0 ]]; then
	# The watchdogs: a nested VM wedged by the emulator (scripts/nested-kvm.md "Known problems") prints
	# nothing more and sends no heartbeat, and would otherwise hold its caller for the whole
	# NESTED_KVM_TIMEOUT. The heartbeat is watched once it has started (the VM has booted).
	(
		last=$(date +%s) beat=
		while kill -0 "$qpid" 2>/dev/null; do
			sleep 5
			now=$(date +%s)
			for f in "$RUN/out.seen" "$RUN/err.seen"; do
				[[ -f $f ]] && m=$(stat -c %Y "$f") && [[ $m -gt $last ]] && last=$m
			done
			[[ -s $RUN/alive ]] && beat=$(stat -c %Y "$RUN/alive")
			if [[ $IDLE -gt 0 && $((now - last)) -ge $IDLE ]]; then
				echo "$IDLE" >"$RUN/idle"
				kill "$qpid" 2>/dev/null
				break
			fi
			if [[ $ALIVE -gt 0 && -n $beat && $((now - beat)) -ge $ALIVE ]]; then
				echo "$ALIVE" >"$RUN/wedged"
				kill "$qpid" 2>/dev/null
				break
			fi
		done
	) & wdpid=$!
fi
wait "$qpid"
qrc=$?
qpid=
[[ -z $wdpid ]] || { kill "$wdpid" 2>/dev/null; wait "$wdpid" 2>/dev/null; wdpid=; }
set -e
t1=$(date +%s.%N)
# Let the readers drain, and unblock them if QEMU never opened the pipes.
for f in out.out err.out; do exec 8<>"$RUN/$f"; exec 8>&-; done
wait "$outpid" 2>/dev/null || true
wait "$errpid" 2>/dev/null || true
outpid= errpid=

if [[ ${NESTED_KVM_VERBOSE:-0} = 1 ]]; then
	echo "----- nested-kvm guest console -----" >&2
	cat "$RUN/console.log" >&2 || true
	echo "------------------------------------" >&2
fi
if [[ ($probe = 1 || ${NESTED_KVM_VERBOSE:-0} = 1) && -f $RUN/booted ]]; then
	# host-clock times: QEMU start -> command start (mtime of "booted") -> command end -> QEMU exit
	tb=$(stat -c %.Y "$RUN/booted" 2>/dev/null || echo "$t0")
	td=$(stat -c %.Y "$RUN/done" 2>/dev/null || echo "$t1")
	awk -v a="$t0" -v b="$tb" -v d="$td" -v e="$t1" -v u="$(cat "$RUN/booted" 2>/dev/null || echo '?')" 'BEGIN{
		printf "nested-kvm: boot %.1fs (guest kernel uptime %ss), command %.1fs, shutdown %.1fs, total %.1fs\n", b-a, u, d-b, e-d, e-a }' >&2
fi

if [[ -f $RUN/error ]]; then
	die "$(head -n1 "$RUN/error") [dmesg: build/nested/last-dmesg.log]"
fi
if [[ ! -f $RUN/status ]]; then
	if [[ -f $RUN/wedged ]]; then
		die "timed out: no heartbeat from the VM for ${ALIVE}s (NESTED_KVM_ALIVE: wedged) [console: build/nested/last-console.log]"
	fi
	if [[ -f $RUN/idle ]]; then
		die "timed out: no output for ${IDLE}s (NESTED_KVM_IDLE) [console: build/nested/last-console.log]"
	fi
	if [[ $qrc = 124 || $qrc = 137 ]]; then
		die "timed out after ${TIMEOUT}s (NESTED_KVM_TIMEOUT) [console: build/nested/last-console.log]"
	fi
	if [[ -f $RUN/booted ]]; then
		die "VM died while running the command (qemu status $qrc) [console: build/nested/last-console.log]"
	fi
	reason=$(tail -n1 "$RUN/qemu.err" 2>/dev/null || true)
	[[ -n $reason ]] || reason=$(grep -v '^\s*$' "$RUN/console.log" 2>/dev/null | tail -n1 || true)
	die "VM exited (qemu status $qrc) without running the command: ${reason:-no reason given} [console: build/nested/last-console.log]"
fi
rc=$(cat "$RUN/status")
[[ $rc =~ ^[0-9]+$ ]] || die "bad status '$rc'"
exit "$rc"
