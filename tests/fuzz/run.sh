#!/bin/sh
# run.sh - builds the libFuzzer harnesses with clang and runs each for a bounded time.
#
#   FUZZ_SECONDS=60 (per target)   FUZZ_TARGETS="elf bzimage symbols virtq blk net vsock snapshot api_link config api mmio serial i8042 cmos rng vconsole restore cpu_template pvh"   CLANG=clang   BUILD=build
#
# Each target gets build/fuzz/fuzz_<t>, a corpus build/fuzz/corpus-<t>/ (seeded
# on every run, kept between runs) and crash artifacts in build/fuzz/artifacts-<t>/.
# Exits non-zero when a target crashes (or fails to build). To add a target,
# give it a line in sources() and, optionally, seeds in seed().
set -eu
cd "$(dirname "$0")/../.."

FUZZ_SECONDS=${FUZZ_SECONDS:-60}
FUZZ_TARGETS=${FUZZ_TARGETS:-elf bzimage symbols virtq blk net vsock snapshot api_link config api mmio serial i8042 cmos rng vconsole restore cpu_template pvh}
CLANG=${CLANG:-clang}
OUT=${BUILD:-build}/fuzz
CFLAGS="-fsanitize=fuzzer,address,undefined -fno-sanitize-recover=all -g -O1 -std=gnu11 -Iinclude -D_GNU_SOURCE
	-Wall -Wextra -Werror"

# The virtio-mmio transport and what every device harness links; fuzz_restore's devices.
# (console_io.c and the device threads call seccomp_enter: the filters come along; libseccomp's SCMP_A0_64
# macros leave fields to their zero default, which clang flags)
VIRTIO_SRCS="src/virtio/mmio.c src/virtio/mmio_snap.c src/virtio/queue.c src/vmm/bus.c src/vmm/mem.c src/util/log.c src/snapshot/snapfile.c src/snapshot/snap_fields.c
	src/seccomp/seccomp.c src/seccomp/seccomp_lists.c -lseccomp -Wno-missing-field-initializers"
RESTORE_SRCS="src/devices/serial8250.c src/devices/console_io.c src/profile/timeline.c src/devices/i8042.c src/devices/cmos.c
	src/devices/debugexit.c src/devices/bootmark.c src/devices/acpi_pm.c src/virtio/rng.c src/virtio/console.c
	$VIRTIO_SRCS"

# The harness and exactly the library sources it needs (no KVM, no libbrisk.a).
sources() {
	case $1 in
	elf) echo tests/fuzz/fuzz_elf.c src/arch/x86/elf.c src/arch/x86/image.c src/vmm/mem.c src/util/log.c src/util/errmsg.c src/util/file.c ;;
	bzimage)
		echo tests/fuzz/fuzz_bzimage.c src/arch/x86/bzimage.c src/arch/x86/kernel.c src/arch/x86/initrd.c \
			src/arch/x86/zeropage.c src/arch/x86/pvh.c src/arch/x86/elf.c src/arch/x86/image.c \
			src/arch/x86/memmap.c src/arch/x86/entry.c src/vmm/kvm.c src/profile/timeline.c src/vmm/mem.c src/util/log.c \
			src/util/errmsg.c src/util/file.c
		;;
	symbols) echo tests/fuzz/fuzz_symbols.c src/profile/symbols.c src/util/file.c src/util/errmsg.c ;;
	virtq) echo tests/fuzz/fuzz_virtq.c src/virtio/queue.c src/vmm/mem.c src/util/log.c src/snapshot/snapfile.c src/snapshot/snap_fields.c ;;
	blk)
		echo tests/fuzz/fuzz_blk.c src/virtio/blk/blk_req.c src/virtio/queue.c src/vmm/mem.c src/util/log.c \
			src/snapshot/snapfile.c src/snapshot/snap_fields.c
		;;
	net)
		echo tests/fuzz/fuzz_net.c src/virtio/net/net_frame.c src/virtio/queue.c src/vmm/mem.c src/util/log.c \
			src/snapshot/snapfile.c src/snapshot/snap_fields.c
		;;
	vsock)
		echo tests/fuzz/fuzz_vsock.c src/virtio/vsock/vsock_pkt.c src/virtio/queue.c src/vmm/mem.c src/util/log.c \
			src/snapshot/snapfile.c src/snapshot/snap_fields.c
		;;
	snapshot) echo tests/fuzz/fuzz_snapshot.c src/snapshot/snapfile.c src/snapshot/snap_memfile.c src/util/file.c src/util/errmsg.c src/util/log.c ;;
	api_link) echo tests/fuzz/fuzz_api_link.c src/api/api_wire.c src/util/errmsg.c ;;
	api)
		# the router with dry_run; fuzz_api.c stubs the VM (aborting if reached) and wraps file_open_output
		echo -DBRISK_VERSION=\"fuzz\" -Wl,--wrap=file_open_output -Wno-gnu-variable-sized-type-not-at-end \
			tests/fuzz/fuzz_api.c src/api/api.c src/api/api_names.c src/api/api_vm.c src/api/api_metrics.c src/api/api_serve.c \
			src/api/api_wire.c src/api/fc_config.c src/api/fc_config_dev.c src/api/fc_config_file.c \
			src/api/fc_config_get.c src/api/fc_config_json.c src/config/config.c src/config/config_net.c src/config/config_vsock.c \
			src/util/log.c src/util/file.c src/util/errmsg.c src/util/size.c src/arch/x86/cpuid.c \
			src/arch/x86/msr.c src/arch/x86/cpuid_template.c src/arch/x86/cpuid_topology.c \
			src/arch/x86/cpuid_json.c src/vmm/kvm.c src/profile/timeline.c src/vmm/mem.c -ljson-c
		;;
	config)
		# config.c's validation pulls in the CPU template code; msr.c's kvm_msrs wrapper is a GNU extension clang flags
		echo -Wno-gnu-variable-sized-type-not-at-end tests/fuzz/fuzz_config.c src/api/fc_config.c \
			src/api/fc_config_dev.c src/api/fc_config_file.c src/api/fc_config_get.c src/api/fc_config_json.c \
			src/config/config.c src/config/config_net.c src/config/config_vsock.c src/util/log.c src/util/file.c src/util/errmsg.c \
			src/util/size.c src/arch/x86/cpuid.c src/arch/x86/msr.c src/arch/x86/cpuid_template.c \
			src/arch/x86/cpuid_topology.c src/arch/x86/cpuid_json.c src/vmm/kvm.c src/profile/timeline.c src/vmm/mem.c -ljson-c
		;;
	cpu_template)
		# the template file and its application, on the unit tests' recorded KVM tables (read from the repository root)
		echo -Wno-gnu-variable-sized-type-not-at-end tests/fuzz/fuzz_cpu_template.c src/arch/x86/cpuid.c \
			src/arch/x86/msr.c src/arch/x86/cpuid_template.c src/arch/x86/cpuid_topology.c \
			src/arch/x86/cpuid_json.c src/api/fc_config_json.c src/vmm/kvm.c src/profile/timeline.c src/vmm/mem.c src/util/log.c src/util/file.c \
			src/util/errmsg.c -ljson-c
		;;
	pvh)
		echo tests/fuzz/fuzz_pvh.c src/arch/x86/kernel.c src/arch/x86/initrd.c src/arch/x86/pvh.c \
			src/arch/x86/bzimage.c src/arch/x86/zeropage.c src/arch/x86/elf.c src/arch/x86/image.c \
			src/arch/x86/memmap.c src/arch/x86/entry.c src/vmm/kvm.c src/profile/timeline.c src/vmm/mem.c src/util/log.c \
			src/util/errmsg.c src/util/file.c
		;;
	# the device harnesses (fuzz_vdev.h): a fake context and a hand-run event loop, no KVM, no threads
	mmio) echo tests/fuzz/fuzz_mmio.c $VIRTIO_SRCS ;;
	serial)
		# fuzz_pio.c includes console_io.c (its input path without the thread) and wraps console_io_create
		echo -DFUZZ_PIO_SERIAL -Wl,--wrap=console_io_create tests/fuzz/fuzz_pio.c src/devices/serial8250.c \
			src/profile/timeline.c $VIRTIO_SRCS
		;;
	i8042) echo -DFUZZ_PIO_I8042 tests/fuzz/fuzz_pio.c src/devices/i8042.c $VIRTIO_SRCS ;;
	cmos) echo -DFUZZ_PIO_CMOS tests/fuzz/fuzz_pio.c src/devices/cmos.c $VIRTIO_SRCS ;;
	rng) echo -DFUZZ_DEV_RNG tests/fuzz/fuzz_vdevice.c src/virtio/rng.c $VIRTIO_SRCS ;;
	vconsole)
		echo -DFUZZ_DEV_CONSOLE -Wl,--wrap=console_io_create tests/fuzz/fuzz_vdevice.c src/virtio/console.c \
			$VIRTIO_SRCS
		;;
	restore) echo tests/fuzz/fuzz_restore.c $RESTORE_SRCS ;;
	*) echo "run.sh: unknown fuzz target '$1'" >&2; return 1 ;;
	esac
}

# Valid inputs to start from: generated images plus any test guests already built.
seed() {
	corpus=$OUT/corpus-$1
	mkdir -p "$corpus"
	case $1 in
	elf)
		$CLANG -std=gnu11 -Iinclude -Wall -Wextra -Werror -O1 -o "$OUT/gen_elf_seeds" tests/fuzz/gen_elf_seeds.c
		"$OUT/gen_elf_seeds" "$corpus"
		for g in "${BUILD:-build}"/guests/*.elf; do
			if [ -f "$g" ]; then cp "$g" "$corpus/guest-$(basename "$g")"; fi # no guests built: no match
		done
		;;
	bzimage)
		$CLANG -std=gnu11 -Iinclude -Wall -Wextra -Werror -O1 -o "$OUT/gen_bzimage_seeds" tests/fuzz/gen_bzimage_seeds.c
		$CLANG -std=gnu11 -Iinclude -Wall -Wextra -Werror -O1 -o "$OUT/gen_elf_seeds" tests/fuzz/gen_elf_seeds.c
		"$OUT/gen_bzimage_seeds" "$corpus"
		"$OUT/gen_elf_seeds" "$corpus" # kernel_open detects ELF too
		;;
	symbols)
		$CLANG -std=gnu11 -Iinclude -Wall -Wextra -Werror -O1 -o "$OUT/gen_symbols_seeds" tests/fuzz/gen_symbols_seeds.c
		"$OUT/gen_symbols_seeds" "$corpus"
		;;
	virtq)
		$CLANG -std=gnu11 -Iinclude -Wall -Wextra -Werror -O1 -o "$OUT/gen_virtq_seeds" tests/fuzz/gen_virtq_seeds.c
		"$OUT/gen_virtq_seeds" "$corpus"
		;;
	blk)
		$CLANG -std=gnu11 -Iinclude -Wall -Wextra -Werror -O1 -o "$OUT/gen_blk_seeds" tests/fuzz/gen_blk_seeds.c
		"$OUT/gen_blk_seeds" "$corpus"
		;;
	net)
		$CLANG -std=gnu11 -Iinclude -Wall -Wextra -Werror -O1 -o "$OUT/gen_net_seeds" tests/fuzz/gen_net_seeds.c
		"$OUT/gen_net_seeds" "$corpus"
		;;
	vsock)
		$CLANG -std=gnu11 -Iinclude -Wall -Wextra -Werror -O1 -o "$OUT/gen_vsock_seeds" tests/fuzz/gen_vsock_seeds.c
		"$OUT/gen_vsock_seeds" "$corpus"
		;;
	snapshot)
		$CLANG -std=gnu11 -Iinclude -D_GNU_SOURCE -Wall -Wextra -Werror -O1 -pthread -o "$OUT/gen_snapshot_seeds" \
			tests/fuzz/gen_snapshot_seeds.c src/snapshot/snapfile.c
		"$OUT/gen_snapshot_seeds" "$corpus"
		;;
	api_link)
		$CLANG -std=gnu11 -Iinclude -D_GNU_SOURCE -Wall -Wextra -Werror -O1 -o "$OUT/gen_api_link_seeds" \
			tests/fuzz/gen_api_link_seeds.c src/api/api_wire.c src/util/errmsg.c
		"$OUT/gen_api_link_seeds" "$corpus"
		;;
	config)
		$CLANG -std=gnu11 -Iinclude -Wall -Wextra -Werror -O1 -o "$OUT/gen_config_seeds" tests/fuzz/gen_config_seeds.c
		"$OUT/gen_config_seeds" "$corpus"
		;;
	cpu_template)
		$CLANG -std=gnu11 -Iinclude -Wall -Wextra -Werror -O1 -o "$OUT/gen_cpu_template_seeds" \
			tests/fuzz/gen_cpu_template_seeds.c
		"$OUT/gen_cpu_template_seeds" "$corpus"
		;;
	pvh)
		$CLANG -std=gnu11 -Iinclude -Wall -Wextra -Werror -O1 -o "$OUT/gen_pvh_seeds" tests/fuzz/gen_pvh_seeds.c
		"$OUT/gen_pvh_seeds" "$corpus"
		;;
	api)
		$CLANG -std=gnu11 -Iinclude -Wall -Wextra -Werror -O1 -o "$OUT/gen_api_seeds" tests/fuzz/gen_api_seeds.c
		"$OUT/gen_api_seeds" "$corpus"
		;;
	mmio | serial | i8042 | cmos | rng | vconsole)
		$CLANG -std=gnu11 -Iinclude -Wall -Wextra -Werror -O1 -o "$OUT/gen_dev_seeds" tests/fuzz/gen_dev_seeds.c
		"$OUT/gen_dev_seeds" "$1" "$corpus"
		;;
	restore)
		# shellcheck disable=SC2086
		$CLANG -std=gnu11 -Iinclude -D_GNU_SOURCE -Wall -Wextra -Werror -O1 -pthread -o "$OUT/gen_restore_seeds" \
			tests/fuzz/gen_restore_seeds.c $RESTORE_SRCS
		"$OUT/gen_restore_seeds" "$corpus"
		;;
	esac
}

if ! command -v "$CLANG" >/dev/null 2>&1; then
	echo "run.sh: $CLANG not found; fuzzing needs clang with libFuzzer (apt-get install clang)" >&2
	exit 1
fi
mkdir -p "$OUT"
status=0
for t in $FUZZ_TARGETS; do
	src=$(sources "$t")
	# shellcheck disable=SC2086 # word splitting of the flag and source lists is intended
	$CLANG $CFLAGS -o "$OUT/fuzz_$t" $src
	seed "$t"
	mkdir -p "$OUT/artifacts-$t"
	dict=
	[ -f "tests/fuzz/$t.dict" ] && dict="-dict=tests/fuzz/$t.dict"
	log=$OUT/fuzz_$t.log
	echo "fuzz_$t: running for ${FUZZ_SECONDS}s (log: $log)"
	rc=0
	# shellcheck disable=SC2086
	"$OUT/fuzz_$t" -max_total_time="$FUZZ_SECONDS" -print_final_stats=1 -artifact_prefix="$OUT/artifacts-$t/" \
		$dict "$OUT/corpus-$t" >"$log" 2>&1 || rc=$?
	execs=$(sed -n 's/^stat::number_of_executed_units: *//p' "$log" | tail -n 1)
	echo "fuzz_$t: ${execs:-?} executions, corpus $(find "$OUT/corpus-$t" -type f | wc -l) inputs, exit $rc"
	if [ "$rc" -ne 0 ]; then
		echo "fuzz_$t: FAILED; last lines of $log:" >&2
		tail -n 30 "$log" >&2
		status=1
	fi
done
exit $status
