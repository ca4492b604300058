/*
 * vm_snapshot.c - a paused VM into a snapshot (state file + memory file), and the restore of one into
 * a VM built by vm_restore (vm_build.c).
 *
 * Create, with every vCPU parked (vm_pause): the devices finish in-flight I/O (bus_quiesce: a disk's
 * requests complete and are on the used ring), the I/O event loop stops (no device callback runs, no
 * frame lands in guest memory), then the state file is built in memory — configuration, the VM-wide
 * KVM state, each vCPU, each device — guest memory is written (sparse) and the state file last, so a
 * state file never names memory that was not fully written. The event loop then runs again; the VM
 * stays paused until resumed.
 */
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "brisk/errmsg.h"
#include "brisk/exitcode.h"
#include "brisk/file.h"
#include "brisk/kvm_state.h"
#include "brisk/log.h"
#include "brisk/snap_config.h"
#include "brisk/snapshot.h"
#include "vm_impl.h"

/* Opens a snapshot output: a regular file, never one of the VM's disk images. */
static int open_snapshot_output(const struct vm *vm, const char *path, const char *what, char *err, size_t errlen)
{
	struct stat st[VM_MAX_DISKS];
	struct file_avoid avoid[VM_MAX_DISKS];
	struct stat got;
	int fd;

	for (unsigned i = 0; i < vm->cfg.nr_disks; i++)
		avoid[i] = (struct file_avoid){stat(vm->cfg.disk[i].path, &st[i]) == 0 ? &st[i] : NULL, "a disk image"};
	fd = file_open_output(path, what, avoid, vm->cfg.nr_disks, 0, err, errlen);
	if (fd < 0)
		return fd;
	if (fstat(fd, &got) < 0 || !S_ISREG(got.st_mode)) {
		snprintf(err, errlen, "%s %s: not a regular file", what, path);
		close(fd);
		return -EINVAL;
	}
	return fd;
}

/* The state file's sections, built in memory: nothing is written until all of it is known. */
static int build_state(struct vm *vm, struct snap_writer *w, char *err, size_t errlen)
{
	const char *dev = "?";
	int ret = snap_config_save(&vm->cfg, w);

	if (ret) {
		snprintf(err, errlen, "saving the configuration: %s", strerror(-ret));
		return ret;
	}
	if ((ret = snap_section_begin(w, SNAP_TAG_VM, 0, "kvm-vm")) || (ret = kvm_vm_save(vm->fd, w, err, errlen)) ||
	    (ret = snap_section_end(w)))
		return ret;
	for (unsigned i = 0; i < vm->nr_vcpus; i++) {
		if ((ret = snap_section_begin(w, SNAP_TAG_VCPU, i, "vcpu")))
			return ret;
		if ((ret = kvm_vcpu_save(vm->vcpus[i].fd, w, err, errlen))) {
			size_t n = strlen(err);

			snprintf(err + n, errlen - n, " (vCPU %u)", i);
			return ret;
		}
		if ((ret = snap_section_end(w)))
			return ret;
	}
	ret = bus_save(&vm->bus, w, &dev);
	if (ret)
		snprintf(err, errlen, "saving device %s: %s", dev, strerror(-ret));
	return ret;
}

/* Quiesced and with the event loop stopped: state and memory to their files. */
static int write_snapshot(struct vm *vm, int state_fd, int mem_fd, char *err, size_t errlen)
{
	struct snap_writer *w = snap_writer_new();
	int ret;

	if (!w) {
		snprintf(err, errlen, "out of memory for the state file");
		return -ENOMEM;
	}
	ret = build_state(vm, w, err, errlen);
	if (!ret && (ret = gmem_save(&vm->mem, mem_fd)))
		snprintf(err, errlen, "writing guest memory: %s", strerror(-ret));
	if (!ret)
		ret = snap_writer_finish(w, state_fd, false, err, errlen);
	snap_writer_free(w);
	return ret;
}

int vm_snapshot_create(struct vm *vm, const char *state_path, const char *mem_path, char *err, size_t errlen)
{
	const char *dev = "?";
	int state_fd, mem_fd, ret;

	if (!vm_paused(vm)) {
		snprintf(err, errlen, "the VM must be paused first");
		return -EBUSY;
	}
	state_fd = open_snapshot_output(vm, state_path, "snapshot_path", err, errlen);
	if (state_fd < 0)
		return state_fd;
	mem_fd = open_snapshot_output(vm, mem_path, "mem_file_path", err, errlen);
	if (mem_fd < 0) {
		close(state_fd);
		return mem_fd;
	}
	ret = bus_quiesce(&vm->bus, &dev);
	if (ret)
		snprintf(err, errlen, "device %s did not finish its in-flight I/O: %s", dev, strerror(-ret));
	evloop_stop(vm->loop);
	if (!ret)
		ret = write_snapshot(vm, state_fd, mem_fd, err, errlen);
	if (vm->loop) {
		int lret = evloop_start(vm->loop);

		if (lret) {
			log_error("restarting the I/O event loop after the snapshot failed: %s", strerror(-lret));
			vm_request_exit(vm, EXIT_HOST, "I/O event loop restart failed");
		}
	}
	close(mem_fd);
	close(state_fd);
	return ret;
}

int vm_restore_vcpus(struct vm *vm, struct snap_reader *r, char *err, size_t errlen)
{
	for (unsigned i = 0; i < vm->nr_vcpus; i++) {
		struct snap_reader *sec;
		size_t n;
		int ret = snap_section(r, SNAP_TAG_VCPU, i, "vcpu", &sec);

		if (ret) {
			snprintf(err, errlen, "the state file has no state for vCPU %u", i);
			return -EINVAL;
		}
		ret = kvm_vcpu_restore(vm->vcpus[i].fd, sec, err, errlen);
		if (!ret && (snap_remaining(sec) || snap_reader_error(sec))) {
			snprintf(err, errlen, "malformed state");
			ret = -EINVAL;
		}
		if (ret) {
			n = strlen(err);
			snprintf(err + n, errlen - n, " (vCPU %u)", i);
			return ret;
		}
	}
	return 0;
}
