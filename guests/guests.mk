# guests.mk - builds the freestanding test guests to $(BUILD)/guests/NAME.elf (included by the top Makefile).
#   make -f guests/guests.mk guests      works standalone as well, from the repository root

BUILD    ?= build
GUEST_CC ?= gcc

GUEST_NAMES := demo hello echo reset exitcode triple unhandled smp flood markers int3probe serialirq
GUEST_LIB   := entry lib idt

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

.PHONY: guests
guests: $(GUEST_ELFS)

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

-include $(wildcard $(GUEST_OBJ)/*.d $(GUEST_OBJ)/lib/*.d)
