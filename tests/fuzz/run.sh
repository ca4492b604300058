#!/bin/sh
# run.sh - builds the libFuzzer harnesses with clang and runs each for a bounded time.
#
#   FUZZ_SECONDS=60 (per target)   FUZZ_TARGETS="elf bzimage symbols virtq blk net vsock snapshot api_link config api mmio serial i8042 cmos rng vconsole restore cpu_template fc_template pvh http mmds kallsyms clone_req"   CLANG=clang   BUILD=build
#
# Each target gets build/fuzz/fuzz_<t>, a corpus build/fuzz/corpus-<t>/ (seeded
# on every run, kept between runs) and crash artifacts in build/fuzz/artifacts-<t>/.
# Exits non-zero when a target crashes (or fails to build). To add a target,
# give it a line in sources() and, optionally, seeds in seed(); library sources
# come from the Makefile's LIB_SRCS (make print-lib-srcs).
set -eu
cd "$(dirname "$0")/../.."

FUZZ_SECONDS=${FUZZ_SECONDS:-60}
FUZZ_TARGETS=${FUZZ_TARGETS:-elf bzimage symbols virtq blk net vsock snapshot api_link config api mmio serial i8042 cmos rng vconsole restore cpu_template fc_template pvh http mmds kallsyms clone_req}
CLANG=${CLANG:-clang}
OUT=${BUILD:-build}/fuzz
CFLAGS="-fsanitize=fuzzer,address,undefined -fno-sanitize-recover=all -g -O1 -std=gnu11 -Iinclude -D_GNU_SOURCE
	-Wall -Wextra -Werror"
# the seed generators that call library code: its instrumented objects, no libFuzzer main
GEN_CFLAGS="-fsanitize=fuzzer-no-link,address,undefined -g -O1 -std=gnu11 -Iinclude -D_GNU_SOURCE -Wall -Wextra -Werror
	-Wno-missing-field-initializers"

# Every harness links the library itself: the Makefile's LIB_SRCS compiled once with clang and the
# sanitizers into $OUT/lib/libbrisk.a, from which the linker takes only the objects a harness needs (no hand
# list of sources to keep in step). A harness that stubs or includes library code (fuzz_api.c's VM stubs,
# fuzz_pio.c including console_io.c) defines those symbols first, so their objects are never taken.
# (libseccomp's SCMP_A0_64 macros leave fields to their zero default, which clang flags; msr.c's kvm_msrs
# wrapper is a GNU extension clang flags)
LIB_CFLAGS="-Wno-missing-field-initializers -Wno-gnu-variable-sized-type-not-at-end -DBRISK_VERSION=\"fuzz\" -Isrc/seccomp"
LIB=$OUT/lib/libbrisk.a
LIBS="$LIB -ljson-c -lm -pthread"
build_lib() {
	srcs=$(make -s --no-print-directory print-lib-srcs)
	# llhttp (the API helper's parser, src/api/api_http.c): its include directory, then its generated sources,
	# built with the sanitizers but without -Werror (not our code)
	set -- $(make -s --no-print-directory print-llhttp)
	llinc=$1
	shift
	rm -rf "$OUT/lib"
	mkdir -p "$OUT/lib"
	# shellcheck disable=SC2016,SC2086 # $1.. are the inner shell's; the flag lists split into words
	printf '%s\n' $srcs | xargs -P "$(nproc)" -n 1 sh -c \
		'$1 $2 -c "$4" -o "$3/$(echo "$4" | tr / _ | sed "s/\.c\$/.o/")"' sh "$CLANG" "$CFLAGS $LIB_CFLAGS -I$llinc" "$OUT/lib"
	for f in "$@"; do
		$CLANG -fsanitize=fuzzer-no-link,address,undefined -g -O1 -I"$llinc" -c "$f" -o "$OUT/lib/llhttp_$(basename "$f" .c).o"
	done
	ar rcs "$LIB" "$OUT"/lib/*.o
}

# The harness, its own flags, and what it wraps.
sources() {
	case $1 in
	elf | bzimage | symbols | virtq | blk | net | vsock | snapshot | api_link | mmio | restore | cpu_template | fc_template | pvh | mmds | kallsyms | clone_req)
		echo "tests/fuzz/fuzz_$1.c" ;;
	config) echo -Wno-gnu-variable-sized-type-not-at-end tests/fuzz/fuzz_config.c ;;
	# the API helper's HTTP side (fuzz_http.c includes api_http.c): llhttp's header from the Makefile
	http) echo "-I$(make -s --no-print-directory print-llhttp | cut -d' ' -f1)" tests/fuzz/fuzz_http.c ;;
	api)
		# the router with dry_run; fuzz_api.c stubs the VM (aborting if reached) and wraps file_open_output
		echo -DBRISK_VERSION=\"fuzz\" -Wl,--wrap=file_open_output -Wno-gnu-variable-sized-type-not-at-end \
			tests/fuzz/fuzz_api.c
		;;
	# the device harnesses (fuzz_vdev.h): a fake context and a hand-run event loop, no KVM, no threads
	serial)
		# fuzz_pio.c includes console_io.c (its input path without the thread) and wraps console_io_create
		echo -DFUZZ_PIO_SERIAL -Wl,--wrap=console_io_create tests/fuzz/fuzz_pio.c
		;;
	i8042) echo -DFUZZ_PIO_I8042 tests/fuzz/fuzz_pio.c ;;
	cmos) echo -DFUZZ_PIO_CMOS tests/fuzz/fuzz_pio.c ;;
	rng) echo -DFUZZ_DEV_RNG tests/fuzz/fuzz_vdevice.c ;;
	vconsole) echo -DFUZZ_DEV_CONSOLE -Wl,--wrap=console_io_create tests/fuzz/fuzz_vdevice.c ;;
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
	kallsyms)
		$CLANG -std=gnu11 -Iinclude -Wall -Wextra -Werror -O1 -o "$OUT/gen_kallsyms_seeds" tests/fuzz/gen_kallsyms_seeds.c
		"$OUT/gen_kallsyms_seeds" "$corpus"
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
		$CLANG $GEN_CFLAGS -o "$OUT/gen_snapshot_seeds" tests/fuzz/gen_snapshot_seeds.c $LIBS
		"$OUT/gen_snapshot_seeds" "$corpus"
		;;
	api_link)
		$CLANG $GEN_CFLAGS -o "$OUT/gen_api_link_seeds" tests/fuzz/gen_api_link_seeds.c $LIBS
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
	fc_template)
		$CLANG -std=gnu11 -Iinclude -Wall -Wextra -Werror -O1 -o "$OUT/gen_fc_template_seeds" \
			tests/fuzz/gen_fc_template_seeds.c
		"$OUT/gen_fc_template_seeds" "$corpus"
		;;
	pvh)
		$CLANG -std=gnu11 -Iinclude -Wall -Wextra -Werror -O1 -o "$OUT/gen_pvh_seeds" tests/fuzz/gen_pvh_seeds.c
		"$OUT/gen_pvh_seeds" "$corpus"
		;;
	api)
		$CLANG -std=gnu11 -Iinclude -Wall -Wextra -Werror -O1 -o "$OUT/gen_api_seeds" tests/fuzz/gen_api_seeds.c
		"$OUT/gen_api_seeds" "$corpus"
		;;
	http)
		# a limit byte (0: the default), then pieces: a size byte and that many bytes of the stream
		http_seed() { printf '\000\377%s' "$2" >"$corpus/$1"; }
		http_seed get 'GET /machine-config HTTP/1.1\r\nHost: x\r\n\r\n'
		http_seed put 'PUT /drives/d HTTP/1.1\r\nContent-Length: 2\r\nExpect: 100-continue\r\n\r\n{}'
		http_seed chunked 'PUT /x HTTP/1.1\r\nTransfer-Encoding: chunked\r\n\r\n3\r\nabc\r\n0\r\n\r\n'
		http_seed pipelined 'GET /a HTTP/1.1\r\n\r\nGET /b HTTP/1.0\r\nConnection: keep-alive\r\n\r\n'
		http_seed ambiguous 'PUT /x HTTP/1.1\r\nContent-Length: 2\r\nContent-Length: 3\r\n\r\n{}'
		;;
	mmio | serial | i8042 | cmos | rng | vconsole)
		$CLANG -std=gnu11 -Iinclude -Wall -Wextra -Werror -O1 -o "$OUT/gen_dev_seeds" tests/fuzz/gen_dev_seeds.c
		"$OUT/gen_dev_seeds" "$1" "$corpus"
		;;
	restore)
		$CLANG $GEN_CFLAGS -o "$OUT/gen_restore_seeds" tests/fuzz/gen_restore_seeds.c $LIBS
		"$OUT/gen_restore_seeds" "$corpus"
		;;
	clone_req) # byte 0: the descriptor count; then a request or a reply
		printf '\003{}' >"$corpus/empty"
		printf '\003{"report_json": "/tmp/r.json"}' >"$corpus/report"
		printf '\000{"pid": 42}' >"$corpus/pid"
		printf '\000{"exit_code": 16}' >"$corpus/exit"
		printf '\000{"error": "x", "exit_code": 2}' >"$corpus/error"
		;;
	esac
}

if ! command -v "$CLANG" >/dev/null 2>&1; then
	echo "run.sh: $CLANG not found; fuzzing needs clang with libFuzzer (apt-get install clang)" >&2
	exit 1
fi
mkdir -p "$OUT"
build_lib
status=0
for t in $FUZZ_TARGETS; do
	src=$(sources "$t")
	# shellcheck disable=SC2086 # word splitting of the flag and source lists is intended
	$CLANG $CFLAGS -o "$OUT/fuzz_$t" $src $LIBS
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
