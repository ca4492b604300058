# guests.mk - builds the freestanding test guests to $(BUILD)/guests/NAME.elf (included by the top Makefile).
#   make -f guests/guests.mk guests      works standalone as well, from the repository root

BUILD    ?= build
GUEST_CC ?= gcc

GUEST_NAMES := demo hello ioapic echo reset exitcode triple unhandled smp flood markers int3probe serialirq smpboot conf-pvh cpuid cpuid-storm cpuid-helper msr-storm virtio-rng virtio-blk virtio-net virtio-console virtio-vsock virtio-balloon virtio-hostile-ring virtio-hostile-mmio virtio-hostile-storm acpi vmgenid wset counter blk-counter blk-limit kbd internal-error boot-timer mmds
GUEST_LIB   := entry lib idt ap mp conf virtio acpi

GUEST_DIR := $(BUILD)/guests
GUEST_OBJ := $(GUEST_DIR)/obj

# Freestanding, no red zone (interrupts arrive on the same stack at CPL 0),
# no SSE (-mgeneral-regs-only: xsave/SSE state is not ours to touch and some
# hosts cannot emulate it), absolute addresses below 2 GiB (-mcmodel=small at 1 MiB).
GUEST_CFLAGS := -std=gnu11 -O2 -m64 -Wall -Wextra -Werror -Wshadow -Wstrict-prototypes -Wmissing-prototypes \
	-ffreestanding -fno-builtin -nostdlib -mno-red-zone -mgeneral-regs-only -mcmodel=small \
	-fno-pic -fno-pie -fno-stack-protector -fno-asynchronous-unwind-tables -fcf-protection=none \
	-fno-tree-loop-distribute-patterns -ffunction-sections -fdata-sections \
	-Iinclude -Iguests/lib -MMD -MP
GUEST_LDFLAGS := -m64 -nostdlib -static -no-pie -Wl,--gc-sections -Wl,-z,max-page-size=4096 \
	-Wl,-z,noexecstack -Wl,--build-id=none -Wl,-T,$(GUEST_DIR)/guest.ld

GUEST_LIB_OBJS := $(GUEST_LIB:%=$(GUEST_OBJ)/lib/%.o)
GUEST_ELFS     := $(GUEST_NAMES:%=$(GUEST_DIR)/%.elf)
GUEST_CONF64   := $(GUEST_DIR)/conf-elf64.elf $(GUEST_DIR)/conf-bzimage.img

.PHONY: guests
guests: $(GUEST_ELFS) $(GUEST_CONF64)

$(GUEST_DIR)/guest.ld: guests/guest.ld.S include/brisk/abi.h
	@mkdir -p $(dir $@)
	$(GUEST_CC) -E -P -undef -x c -Iinclude $< -o $@

$(GUEST_OBJ)/lib/%.o: guests/lib/%.S
	@mkdir -p $(dir $@)
	$(GUEST_CC) $(GUEST_CFLAGS) -c $< -o $@

$(GUEST_OBJ)/lib/%.o: guests/lib/%.c
	@mkdir -p $(dir $@)
	$(GUEST_CC) $(GUEST_CFLAGS) -c $< -o $@

$(GUEST_NAMES:%=$(GUEST_OBJ)/%.o): $(GUEST_OBJ)/%.o: guests/%.c
	@mkdir -p $(dir $@)
	$(GUEST_CC) $(GUEST_CFLAGS) -c $< -o $@

$(GUEST_ELFS): $(GUEST_DIR)/%.elf: $(GUEST_OBJ)/%.o $(GUEST_LIB_OBJS) $(GUEST_DIR)/guest.ld
	$(GUEST_CC) $(GUEST_LDFLAGS) -o $@ $(filter %.o,$^)

# ---- 64-bit boot protocol guests: conf-elf64 (ELF64 without the PVH note) and conf-bzimage ----
# conf64.c built twice; conf-bzimage's payload is compiled -fpie so that it runs where the loader puts it
# (relocatable_kernel), and the build refuses any absolute relocation in it.
GUEST64_LIB	:= entry64 lib mp conf acpi
GUEST64_LDFLAGS := -m64 -nostdlib -static -no-pie -Wl,--gc-sections -Wl,-z,max-page-size=4096 \
	-Wl,-z,noexecstack -Wl,--build-id=none
GUEST_PIE_CFLAGS := $(filter-out -fno-pic -fno-pie,$(GUEST_CFLAGS)) -fpie
GUEST_PIE_OBJS	:= $(GUEST_OBJ)/pie/conf-bzimage.o $(GUEST64_LIB:%=$(GUEST_OBJ)/pie/%.o)

$(GUEST_DIR)/guest64.ld: guests/guest64.ld.S include/brisk/abi.h guests/lib/bzimage.h
	@mkdir -p $(dir $@)
	$(GUEST_CC) -E -P -undef -x c -Iinclude -Iguests/lib $< -o $@

$(GUEST_DIR)/bzimage.ld: guests/guest64.ld.S include/brisk/abi.h guests/lib/bzimage.h
	@mkdir -p $(dir $@)
	$(GUEST_CC) -E -P -undef -x c -DBZIMAGE -Iinclude -Iguests/lib $< -o $@

$(GUEST_OBJ)/conf-elf64.o: guests/conf64.c
	@mkdir -p $(dir $@)
	$(GUEST_CC) $(GUEST_CFLAGS) -DCONF_BZIMAGE=0 -c $< -o $@

$(GUEST_DIR)/conf-elf64.elf: $(GUEST_OBJ)/conf-elf64.o $(GUEST64_LIB:%=$(GUEST_OBJ)/lib/%.o) $(GUEST_DIR)/guest64.ld
	$(GUEST_CC) $(GUEST64_LDFLAGS) -Wl,-T,$(GUEST_DIR)/guest64.ld -o $@ $(filter %.o,$^)

$(GUEST_OBJ)/pie/conf-bzimage.o: guests/conf64.c
	@mkdir -p $(dir $@)
	$(GUEST_CC) $(GUEST_PIE_CFLAGS) -DCONF_BZIMAGE=1 -c $< -o $@

$(GUEST_OBJ)/pie/%.o: guests/lib/%.c
	@mkdir -p $(dir $@)
	$(GUEST_CC) $(GUEST_PIE_CFLAGS) -c $< -o $@

$(GUEST_OBJ)/pie/%.o: guests/lib/%.S
	@mkdir -p $(dir $@)
	$(GUEST_CC) $(GUEST_PIE_CFLAGS) -c $< -o $@

$(GUEST_DIR)/conf-bzimage.elf: $(GUEST_PIE_OBJS) $(GUEST_OBJ)/pie/bzsetup.o $(GUEST_DIR)/bzimage.ld
	@if readelf -rW $(GUEST_PIE_OBJS) | grep -E 'R_X86_64_(64|32|32S|GOT64|GOTPCREL|GOTPCRELX|REX_GOTPCRELX) '; then \
		echo "conf-bzimage: absolute or GOT relocation in the position-independent payload" >&2; exit 1; fi
	$(GUEST_CC) $(GUEST64_LDFLAGS) -Wl,-T,$(GUEST_DIR)/bzimage.ld -o $@ $(filter %.o,$^)
	@if readelf -SW $@ | grep -q '\.got'; then echo "conf-bzimage: GOT in the payload" >&2; exit 1; fi

$(GUEST_DIR)/conf-bzimage.img: $(GUEST_DIR)/conf-bzimage.elf
	objcopy -O binary $< $@

-include $(wildcard $(GUEST_OBJ)/*.d $(GUEST_OBJ)/lib/*.d $(GUEST_OBJ)/pie/*.d)
