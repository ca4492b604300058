/*
 * floor.c - the start-up floor: the least a KVM program must do to boot a
 * PVH ELF guest to its first serial line. One VM, one memory slot, one vCPU,
 * no irqchip, no PIT, no threads. Only the ioctls KVM requires:
 *   KVM_CREATE_VM, KVM_GET_VCPU_MMAP_SIZE, KVM_SET_USER_MEMORY_REGION,
 *   KVM_CREATE_VCPU, KVM_GET_SUPPORTED_CPUID + KVM_SET_CPUID2 (KVM refuses
 *   EFER.LME without CPUID.80000001h:EDX.LM), KVM_SET_SREGS, KVM_SET_REGS,
 *   KVM_RUN.
 *
 * Usage: floor GUEST.elf
 * COM1 output goes to stdout (flushed at each '\n'); a boot marker (32-bit
 * write to port 0x440) prints "boot marker 0xV US" to stderr, US = us since
 * exec, estimated as brisk's --timeline does (monotonic now minus CPU time
 * consumed at main()). Exits 0 on the i8042 reset (0xfe to port 0x64), any
 * write to the debug-exit port 0xf4, or HLT; 1 on any error.
 */
#include <elf.h>
#include <errno.h>
#include <fcntl.h>
#include <linux/kvm.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#define MEM_SIZE		 (128ul << 20)
#define GDT_ADDR		 0x500
#define START_INFO_ADDR		 0x6000
#define MEMMAP_ADDR		 0x6040
#define CMDLINE_ADDR		 0x6080
#define XEN_ELFNOTE_PHYS32_ENTRY 18
#define PVH_MAGIC		 0x336ec578

#define COM1		0x3f8
#define BOOTMARK_PORT	0x440
#define DEBUG_EXIT_PORT 0xf4
#define I8042_CMD_PORT	0x64

static uint64_t t_exec_ns;

static uint64_t clock_ns(clockid_t id)
{
	struct timespec ts;

	clock_gettime(id, &ts);
	return (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
}

static void die(const char *what)
{
	fprintf(stderr, "floor: %s: %s\n", what, strerror(errno));
	exit(1);
}

static void fail(const char *what)
{
	fprintf(stderr, "floor: %s\n", what);
	exit(1);
}

/* Copy the PT_LOAD segments into guest memory; return the PVH entry. */
static uint32_t load_elf(const char *path, uint8_t *mem)
{
	struct stat st;
	int fd = open(path, O_RDONLY | O_CLOEXEC);
	uint32_t entry = 0;

	if (fd < 0 || fstat(fd, &st) < 0)
		die(path);
	if ((size_t)st.st_size < sizeof(Elf64_Ehdr))
		fail("guest image too small");
	const uint8_t *img = mmap(NULL, (size_t)st.st_size, PROT_READ, MAP_PRIVATE, fd, 0);
	if (img == MAP_FAILED)
		die("mmap guest image");
	close(fd);

	const Elf64_Ehdr *eh = (const void *)img;
	if (memcmp(eh->e_ident, ELFMAG, SELFMAG) || eh->e_ident[EI_CLASS] != ELFCLASS64 ||
	    eh->e_phentsize != sizeof(Elf64_Phdr) ||
	    eh->e_phoff + (uint64_t)eh->e_phnum * sizeof(Elf64_Phdr) > (uint64_t)st.st_size)
		fail("not an ELF64 image");

	for (unsigned i = 0; i < eh->e_phnum; i++) {
		const Elf64_Phdr *ph = (const void *)(img + eh->e_phoff + i * sizeof(*ph));

		if (ph->p_offset + ph->p_filesz > (uint64_t)st.st_size)
			fail("segment beyond end of file");
		if (ph->p_type == PT_LOAD) {
			if (ph->p_filesz > ph->p_memsz || ph->p_paddr + ph->p_memsz > MEM_SIZE)
				fail("PT_LOAD outside guest memory");
			/* Fresh anonymous memory is already zero beyond p_filesz. */
			memcpy(mem + ph->p_paddr, img + ph->p_offset, ph->p_filesz);
		} else if (ph->p_type == PT_NOTE) {
			uint64_t off = ph->p_offset, end = ph->p_offset + ph->p_filesz;

			while (off + sizeof(Elf64_Nhdr) <= end) {
				const Elf64_Nhdr *n = (const void *)(img + off);
				uint64_t desc = off + sizeof(*n) + ((n->n_namesz + 3) & ~3u);

				if (desc + n->n_descsz > end)
					break;
				if (n->n_type == XEN_ELFNOTE_PHYS32_ENTRY && n->n_namesz == 4 &&
				    !memcmp(img + off + sizeof(*n), "Xen", 4) && (n->n_descsz == 4 || n->n_descsz == 8))
					memcpy(&entry, img + desc, 4); /* little-endian: low half */
				off = desc + ((n->n_descsz + 3) & ~3u);
			}
		}
	}
	if (!entry)
		fail("no XEN_ELFNOTE_PHYS32_ENTRY note");
	munmap((void *)img, (size_t)st.st_size);
	return entry;
}

/* hvm_start_info, memory map and empty command line (xen/.../hvm/start_info.h). */
static void write_start_info(uint8_t *mem)
{
	uint32_t si[14] = {0};
	uint64_t memmap[2][2] = {{0, 0x9fc00}, {0x100000, MEM_SIZE - 0x100000}};

	si[0] = PVH_MAGIC;
	si[1] = 1;	      /* version: has memmap */
	si[6] = CMDLINE_ADDR; /* cmdline_paddr (low half) */
	si[10] = MEMMAP_ADDR; /* memmap_paddr (low half) */
	si[12] = 2;	      /* memmap_entries */
	memcpy(mem + START_INFO_ADDR, si, sizeof(si));
	for (int i = 0; i < 2; i++) {
		uint32_t type_rsvd[2] = {1, 0}; /* RAM */

		memcpy(mem + MEMMAP_ADDR + i * 24, memmap[i], 16);
		memcpy(mem + MEMMAP_ADDR + i * 24 + 16, type_rsvd, 8);
	}
	mem[CMDLINE_ADDR] = 0;
}

static void setup_vcpu(int vcpu, uint8_t *mem, uint32_t entry)
{
	/* GDT: null, null, 0x10 flat 32-bit code, 0x18 flat data. */
	const uint64_t gdt[4] = {0, 0, 0x00cf9b000000ffffull, 0x00cf93000000ffffull};
	struct kvm_segment code = {
	    .base = 0, .limit = 0xffffffff, .selector = 0x10, .type = 11, .present = 1, .s = 1, .db = 1, .g = 1};
	struct kvm_segment data = code;
	struct kvm_sregs sregs = {0};
	struct kvm_regs regs = {0};

	memcpy(mem + GDT_ADDR, gdt, sizeof(gdt));
	data.selector = 0x18;
	data.type = 3;
	sregs.cs = code;
	sregs.ds = sregs.es = sregs.fs = sregs.gs = sregs.ss = data;
	sregs.tr = (struct kvm_segment){.limit = 0x67, .type = 11, .present = 1};
	sregs.ldt = (struct kvm_segment){.type = 2, .unusable = 1};
	sregs.gdt.base = GDT_ADDR;
	sregs.gdt.limit = sizeof(gdt) - 1;
	sregs.cr0 = 0x11; /* PE | ET */
	if (ioctl(vcpu, KVM_SET_SREGS, &sregs) < 0)
		die("KVM_SET_SREGS");
	regs.rip = entry;
	regs.rbx = START_INFO_ADDR;
	regs.rflags = 2;
	if (ioctl(vcpu, KVM_SET_REGS, &regs) < 0)
		die("KVM_SET_REGS");
}

static void set_cpuid(int kvm, int vcpu)
{
	enum { MAX_ENTRIES = 256 };
	struct kvm_cpuid2 *c = calloc(1, sizeof(*c) + MAX_ENTRIES * sizeof(c->entries[0]));

	if (!c)
		die("calloc");
	c->nent = MAX_ENTRIES;
	if (ioctl(kvm, KVM_GET_SUPPORTED_CPUID, c) < 0)
		die("KVM_GET_SUPPORTED_CPUID");
	if (ioctl(vcpu, KVM_SET_CPUID2, c) < 0)
		die("KVM_SET_CPUID2");
	free(c);
}

int main(int argc, char **argv)
{
	uint64_t now = clock_ns(CLOCK_MONOTONIC), cpu = clock_ns(CLOCK_PROCESS_CPUTIME_ID);
	char line[256];
	size_t len = 0;
	uint8_t lcr = 0;

	t_exec_ns = now - (cpu < now ? cpu : 0);
	if (argc != 2) {
		fprintf(stderr, "usage: %s GUEST.elf\n", argv[0]);
		return 2;
	}

	int kvm = open("/dev/kvm", O_RDWR | O_CLOEXEC);
	if (kvm < 0)
		die("/dev/kvm");
	int vm = ioctl(kvm, KVM_CREATE_VM, 0);
	if (vm < 0)
		die("KVM_CREATE_VM");
	uint8_t *mem = mmap(NULL, MEM_SIZE, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
	if (mem == MAP_FAILED)
		die("mmap guest memory");
	struct kvm_userspace_memory_region region = {
	    .slot = 0, .guest_phys_addr = 0, .memory_size = MEM_SIZE, .userspace_addr = (uintptr_t)mem};
	if (ioctl(vm, KVM_SET_USER_MEMORY_REGION, &region) < 0)
		die("KVM_SET_USER_MEMORY_REGION");

	uint32_t entry = load_elf(argv[1], mem);
	write_start_info(mem);

	int vcpu = ioctl(vm, KVM_CREATE_VCPU, 0);
	if (vcpu < 0)
		die("KVM_CREATE_VCPU");
	int run_size = ioctl(kvm, KVM_GET_VCPU_MMAP_SIZE, 0);
	if (run_size < (int)sizeof(struct kvm_run))
		die("KVM_GET_VCPU_MMAP_SIZE");
	struct kvm_run *run = mmap(NULL, (size_t)run_size, PROT_READ | PROT_WRITE, MAP_SHARED, vcpu, 0);
	if (run == MAP_FAILED)
		die("mmap kvm_run");
	set_cpuid(kvm, vcpu);
	setup_vcpu(vcpu, mem, entry);

	for (;;) {
		if (ioctl(vcpu, KVM_RUN, 0) < 0) {
			if (errno == EINTR || errno == EAGAIN)
				continue;
			die("KVM_RUN");
		}
		switch (run->exit_reason) {
		case KVM_EXIT_IO: {
			uint8_t *data = (uint8_t *)run + run->io.data_offset;
			uint16_t port = run->io.port;

			for (uint32_t i = 0; i < run->io.count; i++, data += run->io.size) {
				uint32_t v = 0;

				if (run->io.direction == KVM_EXIT_IO_IN) {
					memset(data, port == COM1 + 5 ? 0x60 : 0xff, run->io.size);
					continue;
				}
				memcpy(&v, data, run->io.size);
				if (port == COM1 && !(lcr & 0x80)) { /* THR, not the divisor latch */
					line[len++] = (char)v;
					if (v == '\n' || len == sizeof(line)) {
						if (write(1, line, len) < 0)
							die("write stdout");
						len = 0;
					}
				} else if (port == COM1 + 3) {
					lcr = (uint8_t)v;
				} else if (port == BOOTMARK_PORT && run->io.size == 4) {
					uint64_t t = clock_ns(CLOCK_MONOTONIC) - t_exec_ns;

					fprintf(stderr, "boot marker 0x%x %.1f\n", v, (double)t / 1e3);
				} else if ((port == I8042_CMD_PORT && v == 0xfe) || port == DEBUG_EXIT_PORT) {
					goto out;
				}
			}
			break;
		}
		case KVM_EXIT_MMIO:
			if (!run->mmio.is_write)
				memset(run->mmio.data, 0xff, sizeof(run->mmio.data));
			break;
		case KVM_EXIT_HLT:
			goto out;
		default:
			fprintf(stderr, "floor: unexpected exit reason %u\n", run->exit_reason);
			return 1;
		}
	}
out:
	if (len && write(1, line, len) < 0)
		die("write stdout");
	return 0;
}
