# brisk - build recipe. Explicit source lists; no generated rules beyond pattern compiles.
#   make          build/brisk (and the test guests it embeds)
#   make demo     build, then boot the built-in demo guest with --timeline
#   make check    every test tier this machine can run, plain and under ASan+UBSan
#   make check-linux  the real-kernel tier: Debian's kernel booted to a test init (tests/linux/)
#   make demo-linux   boot Debian's kernel to a busybox shell (where KVM can run Linux)
#   make bench    start-up benchmark (bench/README.md)
#   make bench-order  which order of the VM set-up ioctls is cheapest on this host (bench/setup_order.c)
#   make bench-acpi   what ACPI costs start-up: acpi_build alone, and boots with --acpi off vs on (bench/acpi.sh)
#   make fuzz     bounded libFuzzer run of every untrusted-input parser (tests/fuzz/run.sh)
#   make format   apply .clang-format
#   make lint     check it, and commit subjects <= 72 characters (scripts/lint.sh; make check runs it)

CC      ?= gcc
BUILD   ?= build
PYTHON  ?= /usr/bin/python3
VERSION := 0.1.0

WARN    := -Wall -Wextra -Werror -Wshadow -Wstrict-prototypes -Wmissing-prototypes -Wformat=2
CFLAGS  ?= -O2 -g
# llhttp, the API helper's HTTP/1.1 parser: Node.js's, compiled from the C sources Debian's node-llhttp ships
# (docs/api.md "Why a helper process serves HTTP"); its generated code gets the compiler's defaults, not WARN.
LLHTTP_DIR  ?= /usr/share/llhttp
LLHTTP_INC  ?= /usr/share/include/llhttp
LLHTTP_SRCS := llhttp.c api.c http.c
ALL_CFLAGS := -std=gnu11 $(WARN) $(CFLAGS) -Iinclude -I$(LLHTTP_INC) -D_GNU_SOURCE -DBRISK_VERSION='"$(VERSION)"' -pthread -MMD -MP
LDLIBS  := -pthread -ljson-c -lm

# The plain brisk binary is linked statically (STATIC=0: dynamically): no dynamic loader work at exec,
# measured 0.2 ms of a ~3 ms start (docs/performance.md, "Start-up at the floor"). ASan needs dynamic linking.
STATIC  ?= 1
STATIC_LDFLAGS := $(if $(filter 1,$(STATIC)),-static)
# The start path in one place (docs/performance.md): brisk's functions and variables each in a section of
# their own, and a linker script (scripts/start-layout.sh) that puts those a boot or a restore uses
# (scripts/start-path.syms), the C library's among them, before everything else, so that exec and start-up
# touch a few pages of the binary rather than most of them. Plain build only.
START_CFLAGS  := -ffunction-sections -fdata-sections
START_LDFLAGS := -Wl,-T,$(BUILD)/gen/start.ld

ASAN_FLAGS := -O1 -g -fno-omit-frame-pointer -fsanitize=address,undefined -fno-sanitize-recover=all

# The library: everything but main(), so unit tests link the same objects.
LIB_SRCS := \
	src/vmm/bus.c \
	src/vmm/mem.c \
	src/vmm/mem_uffd.c \
	src/vmm/wset.c \
	src/vmm/vm_wset.c \
	src/vmm/kvm.c \
	src/vmm/vm.c \
	src/vmm/vm_build.c \
	src/vmm/vm_prewarm.c \
	src/vmm/evloop.c \
	src/vmm/devmgr.c \
	src/vmm/devkinds.c \
	src/virtio/mmio.c \
	src/virtio/mmio_snap.c \
	src/virtio/rng.c \
	src/virtio/balloon.c \
	src/virtio/blk/blk.c \
	src/virtio/blk/blk_req.c \
	src/virtio/blk/blk_io.c \
	src/virtio/console.c \
	src/virtio/net/net.c \
	src/virtio/net/net_frame.c \
	src/virtio/net/net_tap.c \
	src/virtio/net/net_user.c \
	src/virtio/net/net_mmds.c \
	src/mmds/mmds.c \
	src/mmds/mmds_http.c \
	src/virtio/vsock/vsock.c \
	src/virtio/vsock/vsock_conn.c \
	src/virtio/vsock/vsock_pkt.c \
	src/vmm/vcpu.c \
	src/profile/timeline.c \
	src/profile/timeline_json.c \
	src/profile/stats.c \
	src/profile/bench_runs.c \
	src/config/config.c \
	src/config/config_net.c \
	src/config/config_vsock.c \
	src/config/run_opts.c \
	src/config/fc_args.c \
	src/api/fc_config.c \
	src/api/fc_config_dev.c \
	src/api/fc_config_balloon.c \
	src/api/fc_config_file.c \
	src/api/fc_config_get.c \
	src/api/fc_config_json.c \
	src/cli/clone_req.c \
	src/api/fc_config_mmds.c \
	src/util/log.c \
	src/util/fc_metrics.c \
	src/util/fc_logger.c \
	src/util/size.c \
	src/util/file.c \
	src/util/errmsg.c \
	src/util/helper.c \
	src/util/opts.c \
	src/util/rate_limiter.c \
	src/util/thread.c \
	src/util/unix_listen.c \
	src/util/fdpass.c \
	src/jail/jail_args.c \
	src/jail/jail_libs.c \
	src/jail/fcj_args.c \
	src/api/api_wire.c \
	src/api/api_link.c \
	src/api/api_http.c \
	src/api/api.c \
	src/api/api_names.c \
	src/api/api_vm.c \
	src/api/api_balloon.c \
	src/api/api_patch.c \
	src/api/api_metrics.c \
	src/api/api_mmds.c \
	src/api/api_serve.c \
	src/snapshot/snapfile.c \
	src/snapshot/snap_config.c \
	src/snapshot/snap_memfile.c \
	src/snapshot/memlayer.c \
	src/snapshot/snap_fields.c \
	src/vmm/vm_snapshot.c \
	src/vmm/vm_dirty.c \
	src/seccomp/seccomp.c \
	src/seccomp/seccomp_lists.c \
	src/arch/x86/kvm_state.c \
	src/devices/serial8250.c \
	src/devices/console_io.c \
	src/devices/i8042.c \
	src/devices/debugexit.c \
	src/devices/bootmark.c \
	src/devices/boot_timer.c \
	src/devices/cmos.c \
	src/devices/acpi_pm.c \
	src/devices/vmgenid.c \
	src/devices/vmclock.c \
	src/devices/ioapic.c \
	src/devices/legacy_absent.c \
	src/virtio/queue.c \
	src/arch/x86/image.c \
	src/arch/x86/elf.c \
	src/arch/x86/memmap.c \
	src/arch/x86/pvh.c \
	src/arch/x86/zeropage.c \
	src/arch/x86/initrd.c \
	src/arch/x86/bzimage.c \
	src/arch/x86/kernel.c \
	src/arch/x86/entry.c \
	src/arch/x86/mptable.c \
	src/arch/x86/aml.c \
	src/arch/x86/acpi.c \
	src/arch/x86/cpuid.c \
	src/arch/x86/cpuid_template.c \
	src/arch/x86/cpuid_topology.c \
	src/arch/x86/cpuid_json.c \
	src/arch/x86/cpuid_fc.c \
	src/arch/x86/cpuid_fc_static.c \
	src/profile/report_input.c \
	src/profile/report_perfetto.c \
	src/profile/report_svg.c \
	src/arch/x86/msr.c \
	src/profile/exits.c \
	src/profile/kvmstats.c \
	src/profile/symbols.c \
	src/profile/guestmem.c \
	src/profile/kallsyms.c \
	src/profile/procmem.c \
	src/profile/probe.c \
	src/profile/trace_parse.c \
	src/profile/trace_agg.c \
	src/profile/tracefs.c \
	src/profile/redundant.c \
	src/profile/report_json.c \
	src/profile/report_sites.c \
	src/profile/report_findings.c \
	src/profile/report_text.c \
	src/profile/report_out.c

# the per-thread seccomp filters; brisk-slirp links them too. Their BPF programs are generated when brisk is
# built (seccomp-gen: the rules through libseccomp, into gen/seccomp_bpf.c): no process generates one at start.
SECCOMP_SRCS := src/seccomp/seccomp.c src/seccomp/seccomp_lists.c
SECCOMP_GEN_SRCS := src/seccomp/seccomp_gen.c src/seccomp/seccomp_rules.c src/seccomp/seccomp_lists.c

MAIN_SRCS := \
	src/main.c \
	src/cli/run.c \
	src/cli/clone_server.c \
	src/cli/clone.c \
	src/cli/fc_cli.c \
	src/cli/help.c \
	src/cli/cpuid.c \
	src/cli/profile.c \
	src/cli/trace.c \
	src/cli/bench.c \
	src/cli/compare.c \
	src/cli/acpi.c \
	src/cli/snapedit.c \
	src/cli/jail.c \
	src/jail/jail_fs.c \
	src/jail/jail_cgroup.c \
	src/jail/jail_exec.c \
	src/cli/jailer.c \
	src/jail/fcj_run.c \
	src/demo_guest.S

MAIN_OBJS := $(patsubst %.S,%.o,$(MAIN_SRCS:.c=.o))

UNIT_TESTS := \
	test_bus \
	test_virtio_mmio \
	test_virtio_blk \
	test_log \
	test_fc_metrics \
	test_mem \
	test_file \
	test_size \
	test_clone_req \
	test_fdpass \
	test_fc_args \
	test_config \
	test_fc_config \
	test_api_vcpu \
	test_serial8250 \
	test_console_io \
	test_virtio_console \
	test_virtio_balloon \
	test_virtio_vsock \
	test_virtio_net \
	test_mmds \
	test_cmos \
	test_i8042 \
	test_virtq \
	test_virtq_ring \
	test_virtq_iter \
	test_elf \
	test_memmap \
	test_bzimage \
	test_kernel \
	test_mptable \
	test_aml \
	test_wset \
	test_mem_uffd \
	test_vmgenid \
	test_vmclock \
	test_acpi \
	test_reports \
	test_cpuid \
	test_cpuid_fixtures \
	test_cpuid_fc \
	test_stats \
	test_tracefs \
	test_symbols \
	test_kallsyms \
	test_probe \
	test_profile_json \
	test_snapfile \
	test_snap_fields \
	test_kvm_state \
	test_api_link \
	test_jail \
	test_fc_jailer \
	test_init_modparams \
	test_rate_limiter \
	test_seccomp_bpf \
	test_ioapic \
	test_memlayer

# libraries a unit test needs beyond brisk's (by test name)
TEST_LDLIBS_test_seccomp_bpf := -lseccomp

# `make` alone builds brisk: guests.mk's first rule must not become the default goal.
.DEFAULT_GOAL := all
include guests/guests.mk

.PHONY: all demo check check-unit check-guest check-asan check-linux demo-linux deps bench bench-order bench-acpi fuzz format lint print-lib-srcs print-llhttp clean
all: $(BUILD)/brisk $(BUILD)/brisk-jailer $(BUILD)/brisk-slirp

# Before the first compile in a build directory: the headers and libraries brisk needs, or one message
# saying what is missing and to run `make deps` (scripts/build-deps.sh; ~0.1 s, once: the stamp stays).
DEPS_STAMP := $(BUILD)/.build-deps
$(DEPS_STAMP): scripts/build-deps.sh
	@scripts/build-deps.sh '$(CC)' '$(STATIC)' '$(LLHTTP_DIR)' '$(LLHTTP_INC)'
	@mkdir -p $(dir $@) && touch $@
# the test guests brisk embeds (the demo) are compiled with the same compiler: after the check too
$(GUEST_DIR)/guest.ld $(GUEST_LIB_OBJS) $(GUEST_NAMES:%=$(GUEST_OBJ)/%.o): | $(DEPS_STAMP)

# ---- plain and sanitizer builds of the same sources ------------------------
define build_variant # $(1)=dir $(2)=extra cflags $(3)=extra link flags for brisk itself
# the flags an object was compiled with: a change of them (START_CFLAGS, CFLAGS=...) recompiles everything
$(1)/.cflags: FORCE
	@mkdir -p $$(dir $$@)
	@echo '$$(CC) $$(ALL_CFLAGS) $(2)' | cmp -s - $$@ || echo '$$(CC) $$(ALL_CFLAGS) $(2)' >$$@
$(1)/obj/%.o: %.c $(1)/.cflags | $(DEPS_STAMP)
	@mkdir -p $$(dir $$@)
	$$(CC) $$(ALL_CFLAGS) $(2) -c $$< -o $$@
$(1)/obj/%.o: %.S $(BUILD)/guests/demo.elf | $(DEPS_STAMP)
	@mkdir -p $$(dir $$@)
	$$(CC) $$(ALL_CFLAGS) $(2) -DDEMO_GUEST='"$(BUILD)/guests/demo.elf"' -c $$< -o $$@
$(1)/obj/llhttp/%.o: $(LLHTTP_DIR)/%.c | $(DEPS_STAMP)
	@mkdir -p $$(dir $$@)
	$$(CC) -std=gnu11 -O2 -g $(2) -I$(LLHTTP_INC) -c $$< -o $$@
$(1)/gen/seccomp-gen: $(SECCOMP_GEN_SRCS) | $(DEPS_STAMP)
	@mkdir -p $$(dir $$@)
	$$(CC) $$(ALL_CFLAGS) $(2) -o $$@ $$(filter %.c,$$^) -lseccomp
$(1)/gen/seccomp_bpf.c: $(1)/gen/seccomp-gen
	$$< $$@
$(1)/obj/gen/seccomp_bpf.o: $(1)/gen/seccomp_bpf.c
	@mkdir -p $$(dir $$@)
	$$(CC) $$(ALL_CFLAGS) $(2) -Isrc/seccomp -c $$< -o $$@
$(1)/libbrisk.a: $(LIB_SRCS:%.c=$(1)/obj/%.o) $(1)/obj/gen/seccomp_bpf.o $(LLHTTP_SRCS:%.c=$(1)/obj/llhttp/%.o)
	@rm -f $$@
	ar rcs $$@ $$^
$(1)/brisk: $(addprefix $(1)/obj/,$(MAIN_OBJS)) $(1)/libbrisk.a
	$$(CC) $(2) $(3) -o $$@ $$(filter %.o,$$^) $(1)/libbrisk.a $$(LDLIBS)
# Firecracker's jailer is the same binary under another name (src/main.c dispatches on it): a hard link
$(1)/brisk-jailer: $(1)/brisk
	ln -f $$< $$@
# --net user's helper: dynamically linked (libslirp is a shared library only), see src/virtio/net/net_user.c
$(1)/brisk-slirp: src/helpers/slirp_helper.c $(SECCOMP_SRCS) $(1)/gen/seccomp_bpf.c | $(DEPS_STAMP)
	$$(CC) $$(ALL_CFLAGS) $(2) -Isrc/seccomp -o $$@ $$(filter %.c,$$^) -lslirp
$(1)/tests/%: tests/unit/%.c $(1)/libbrisk.a
	@mkdir -p $$(dir $$@)
	$$(CC) $$(ALL_CFLAGS) $(2) -o $$@ $$< $$(filter %.o,$$^) $(1)/libbrisk.a -lcmocka $$(LDLIBS) $$(TEST_LDLIBS_$$(*F))
# the embedded programs against what libseccomp makes of the rules now
$(1)/tests/test_seccomp_bpf: $(1)/obj/src/seccomp/seccomp_rules.o
endef
FORCE:
$(eval $(call build_variant,$(BUILD),$(START_CFLAGS),$(STATIC_LDFLAGS) $(START_LDFLAGS)))
$(BUILD)/brisk: $(BUILD)/gen/start.ld
$(BUILD)/gen/start.ld: scripts/start-path.syms scripts/start-layout.sh | $(DEPS_STAMP)
	@mkdir -p $(dir $@)
	scripts/start-layout.sh '$(CC)' $< $@
$(eval $(call build_variant,$(BUILD)/asan,$(ASAN_FLAGS)))

-include $(shell find $(BUILD) -name '*.d' 2>/dev/null)

# ---- the two commands --------------------------------------------------------
deps:
	@scripts/deps.sh

demo: deps
	@$(MAKE) --no-print-directory all
	@scripts/demo.sh

check: deps
	@$(MAKE) --no-print-directory all $(BUILD)/asan/brisk $(BUILD)/asan/brisk-jailer $(BUILD)/asan/brisk-slirp \
		$(BUILD)/tests/api_echo $(BUILD)/asan/tests/api_echo guests
	@scripts/check.sh

check-unit: all $(UNIT_TESTS:%=$(BUILD)/tests/%) $(UNIT_TESTS:%=$(BUILD)/asan/tests/%)

# the real-kernel tier (tests/linux/run.sh, docs/boot.md "Booting a real Linux kernel")
check-linux: deps
	@$(MAKE) --no-print-directory all guests
	@tests/linux/run.sh

demo-linux: deps
	@$(MAKE) --no-print-directory all guests
	@tests/linux/demo.sh

bench: all guests
	@scripts/deps.sh bench
	@bench/run.sh

bench-order:
	@bench/setup-order.sh

bench-acpi: all guests
	@BUILD=$(BUILD) bench/acpi.sh

fuzz:
	@scripts/deps.sh fuzz
	@tests/fuzz/run.sh

lint:
	@scripts/lint.sh

# the library's sources, for tests/fuzz/run.sh (which compiles them with clang and the sanitizers)
print-lib-srcs: $(BUILD)/asan/gen/seccomp_bpf.c
	@echo $(LIB_SRCS) $(BUILD)/asan/gen/seccomp_bpf.c
print-llhttp:
	@echo $(LLHTTP_INC) $(LLHTTP_SRCS:%=$(LLHTTP_DIR)/%)

format:
	clang-format -i $$(git ls-files '*.c' '*.h' | grep -v '^tests/fuzz/corpus')

clean:
	rm -rf $(BUILD)
