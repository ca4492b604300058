/*
 * vm_snapshot.c - a paused VM into a snapshot (state file + memory file), and the restore of one into
 * a VM built by vm_restore (vm_build.c).
 *
 * Create, with every vCPU parked (vm_pause): the I/O event loop stops (no device callback runs, no frame
 * lands in guest memory), the devices finish in-flight I/O (bus_quiesce: a disk's requests complete and
 * are on the used ring), then the state file is built in memory — configuration, the VM-wide
 * KVM state, each vCPU, each device — guest memory is written (sparse) and synced and the state file
 * last, so a state file never names memory that was not fully written. Both go to temporary files beside
 * their targets and are renamed into place only once complete (the state first: see commit()), so a
 * failure, a full disk or a crash at any moment leaves the previous snapshot loadable, or the new one.
 * The event loop then runs again; the VM stays paused until resumed.
 *
 * A VM that tracks dirty pages (vm_dirty.c) takes them at every snapshot, with the I/O loop stopped: a Diff
 * writes them (and only them) and records samples of the pages it left to its base; a Full one only clears
 * them, so that the next Diff holds what was written since this snapshot (Firecracker 1.8's #4536; 1.7.0 kept
 * them until the next Diff: a larger Diff, the same merge). A snapshot that fails gives them back.
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
#include "brisk/memlayer.h"
#include "brisk/snap_config.h"
#include "brisk/snap_memfile.h"
#include "brisk/snapshot.h"
#include "vm_impl.h"

/* The state file's sections, built in memory: nothing is written until all of it is known. */
static int build_state(struct vm *vm, struct snap_writer *w, char *err, size_t errlen)
{
	const char *dev = "?";
	int ret = snap_config_save(&vm->cfg, w);

	if (ret) {
		snprintf(err, errlen, "saving the configuration: %s", strerror(-ret));
		return ret;
	}
	if ((ret = snap_section_begin(w, SNAP_TAG_VM, 0, "kvm-vm")) ||
	    (ret = x86_vm_save(vm->fd, vm->cfg.irqchip == IRQCHIP_KERNEL, w, err, errlen)) ||
	    (ret = snap_section_end(w)))
		return ret;
	for (unsigned i = 0; i < vm->nr_vcpus; i++) {
		if ((ret = snap_section_begin(w, SNAP_TAG_VCPU, i, "vcpu")))
			return ret;
		if ((ret = x86_vcpu_save(vm->vcpus[i].fd, w, err, errlen))) {
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

/* One create: Full or Diff, the dirty pages it took (when the VM tracks them), its memory file's record. */
struct job {
	bool diff;
	struct vm_dirty dirty;
	struct snap_memfile m; /* kind and samples; the identity is filled by build_links */
	uint64_t pages;	       /* a Diff's pages written */
};

/* The sections that tie the state to its memory file and carry the API's description of the VM. */
static int build_links(struct vm *vm, struct snap_writer *w, const struct file_replace *mem, struct job *job,
		       const char *api_desc)
{
	struct snap_memfile *m = &job->m;
	int ret;

	m->dev = (uint64_t)mem->st.st_dev;
	m->ino = (uint64_t)mem->st.st_ino;
	m->size = vm->mem.size;
	m->ctime_ns = (int64_t)mem->st.st_ctim.tv_sec * 1000000000 + mem->st.st_ctim.tv_nsec;
	snprintf(m->tmp, sizeof(m->tmp), "%s", mem->tmp);
	ret = snap_memfile_save(w, m);
	if (ret || !api_desc)
		return ret;
	if ((ret = snap_section_begin(w, SNAP_TAG_API, 0, "api-config")) ||
	    (ret = snap_put(w, api_desc, strlen(api_desc))))
		return ret;
	return snap_section_end(w);
}

/*
 * The existing memory file at the target, when it has the guest's size: a Diff merges onto a copy of it
 * (Firecracker's snapshot_memory_to_file). Its fd (read-only), or -1: none, another size, or a VM with no base
 * (booted and never snapshotted: its Diff is complete alone, and merging it onto whatever file is there would
 * mix another memory in; Firecracker merges then too).
 */
static int existing_base(const struct vm *vm, const struct file_replace *mem)
{
	struct stat st;
	int fd;

	if (!vm->has_base || !mem->target_exists || !S_ISREG(mem->target_st.st_mode) ||
	    (uint64_t)mem->target_st.st_size != vm->mem.size)
		return -1;
	fd = openat(mem->dirfd, mem->name, O_RDONLY | O_CLOEXEC | O_NOFOLLOW | O_NONBLOCK);
	if (fd >= 0 &&
	    (fstat(fd, &st) != 0 || st.st_dev != mem->target_st.st_dev || st.st_ino != mem->target_st.st_ino)) {
		close(fd); /* replaced since the checks: the layer alone */
		fd = -1;
	}
	return fd;
}

/*
 * A Diff's memory: the guest's size, sparse; a copy of the existing base first when there is one (checked
 * against the Diff's samples: a file of another VM or another snapshot is refused, not merged into), then
 * every page the snapshot took, at its offset.
 */
static int write_diff(struct vm *vm, struct file_replace *mem, struct job *job, int base, const char *path, char *err,
		      size_t errlen)
{
	char why[512];
	int ret;

	if (ftruncate(mem->fd, 0) < 0 || ftruncate(mem->fd, (off_t)vm->mem.size) < 0) {
		ret = -errno;
		snprintf(err, errlen, "sizing the memory file: %s", strerror(-ret));
	} else if (base >= 0 && (ret = snap_memfile_check_samples(&job->m, base, path, why, sizeof(why)))) {
		snprintf(
		    err, errlen,
		    "mem_file_path %s exists with the guest's size but is not this VM's previous snapshot's memory, "
		    "which a Diff merges onto (%s); give the layer a path of its own",
		    path, why);
	} else if (base >= 0 && (ret = memlayer_apply(mem->fd, base, vm->mem.size, NULL, why, sizeof(why)))) {
		snprintf(err, errlen, "copying the memory file at mem_file_path %s to merge the Diff onto it: %s", path,
			 why);
	} else if ((ret = vm_dirty_write(vm, &job->dirty, mem->fd, &job->pages))) {
		snprintf(err, errlen, "writing the dirty pages: %s", strerror(-ret));
	}
	return ret;
}

/*
 * Quiesced and with the event loop stopped: the dirty pages taken (a VM that tracks them), memory to its
 * temporary file, synced, then the state (which names that file) to its own, synced. Nothing is renamed here.
 */
static int write_snapshot(struct vm *vm, struct file_replace *state, struct file_replace *mem, const char *mem_path,
			  struct job *job, const char *api_desc, char *err, size_t errlen)
{
	struct snap_writer *w = snap_writer_new();
	int ret, base = -1;

	if (!w) {
		snprintf(err, errlen, "out of memory for the state file");
		return -ENOMEM;
	}
	ret = build_state(vm, w, err, errlen);
	if (!ret && vm->cfg.track_dirty)
		ret = vm_dirty_take(vm, &job->dirty, err, errlen);
	/* a Diff's record (its kind, its samples) goes into the state file, so it is known before it is built */
	if (!ret && job->diff) {
		vm_dirty_samples(vm, &job->dirty, &job->m);
		base = existing_base(vm, mem);
		job->m.kind = base >= 0 ? SNAP_MEM_MERGED : SNAP_MEM_DIFF;
	}
	if (!ret && (ret = build_links(vm, w, mem, job, api_desc)))
		snprintf(err, errlen, "building the state file: %s", strerror(-ret));
	if (!ret && job->diff)
		ret = write_diff(vm, mem, job, base, mem_path, err, errlen);
	else if (!ret && (ret = gmem_save(&vm->mem, mem->fd, vm->mem_file_fd)))
		snprintf(err, errlen, "writing guest memory: %s", strerror(-ret));
	/* The memory durable before a state file that names it can be. */
	if (!ret && (ret = file_replace_sync(mem)))
		snprintf(err, errlen, "fsync of the memory file: %s", strerror(-ret));
	if (!ret)
		ret = snap_writer_finish(w, state->fd, false, err, errlen);
	snap_writer_free(w);
	if (base >= 0)
		close(base);
	return ret;
}

/* Both outputs: checked (the guard, locks, kinds) and their temporary files created; not the same file. */
static int open_outputs(const char *state_path, const char *mem_path, struct file_replace *state,
			struct file_replace *mem, char *err, size_t errlen)
{
	const unsigned flags = FILE_REPLACE_REGULAR | FILE_REPLACE_SNAPSHOT;
	int ret = file_replace_open(state, state_path, "snapshot_path", flags, err, errlen);

	if (ret)
		return ret;
	ret = file_replace_open(mem, mem_path, "mem_file_path", flags, err, errlen);
	if (ret) {
		file_replace_abort(state);
		return ret;
	}
	if (file_replace_same_target(state, mem)) {
		file_replace_abort(mem);
		file_replace_abort(state);
		return err_set(err, errlen, -EINVAL, "snapshot_path and mem_file_path name the same file (%s)",
			       state_path);
	}
	return 0;
}

/*
 * The commit: the state file renamed into place first (the point after which this snapshot is the one
 * at these paths: it names the memory's temporary file, which a load finds if the next step never
 * happens, snap_memfile.h), then the memory file. A failure before the first rename leaves the old
 * snapshot whole; after it, the new one is loadable.
 */
static int commit(struct file_replace *state, struct file_replace *mem, char *err, size_t errlen)
{
	int ret = file_replace_commit(state, true, err, errlen);

	if (ret && state->tmp[0]) {
		file_replace_abort(state);
		file_replace_abort(mem);
		return ret;
	}
	if (file_replace_commit(mem, true, err, errlen) && mem->tmp[0]) {
		size_t n = strlen(err);

		snprintf(err + n, errlen - n,
			 " (the state file is in place; its memory is in %s, which the next load "
			 "renames into place)",
			 mem->tmp);
		file_replace_keep(mem);
		return -EIO;
	}
	return ret;
}

static int create(struct vm *vm, const char *state_path, const char *mem_path, const char *api_desc, struct job *job,
		  char *err, size_t errlen)
{
	struct file_replace state, mem;
	const char *dev = "?";
	int ret;

	if (!vm_paused(vm)) {
		snprintf(err, errlen, "the VM must be paused first");
		return -EBUSY;
	}
	/* Memory a page-fault handler serves: all of it here first, waited for off this thread (mem_uffd.h). */
	if ((ret = gmem_uffd_fetch_all(&vm->mem, &vm->uffd_fetch, UFFD_FETCH_STALL_MS, err, errlen)))
		return ret;
	if ((ret = open_outputs(state_path, mem_path, &state, &mem, err, errlen)))
		return ret;
	/*
	 * The loop first: a callback run after a device's quiesce (a rate limiter's timer, a completion) could
	 * start I/O again, and the device's save would then find it in flight (EBUSY; seen with a limited disk).
	 */
	evloop_stop(vm->loop);
	ret = bus_quiesce(&vm->bus, &dev);
	if (ret)
		snprintf(err, errlen, "device %s did not finish its in-flight I/O: %s", dev, strerror(-ret));
	if (!ret)
		ret = write_snapshot(vm, &state, &mem, mem_path, job, api_desc, err, errlen);
	if (vm->loop) {
		int lret = evloop_start(vm->loop);

		if (lret) {
			log_error("restarting the I/O event loop after the snapshot failed: %s", strerror(-lret));
			vm_request_exit(vm, EXIT_HOST, "I/O event loop restart failed");
		}
	}
	if (ret) {
		file_replace_abort(&mem);
		file_replace_abort(&state);
		return ret;
	}
	return commit(&state, &mem, err, errlen);
}

/* A create, and the dirty pages it took given back if it failed (they are in no snapshot then). */
static int create_and_settle(struct vm *vm, const char *state_path, const char *mem_path, const char *api_desc,
			     struct job *job, char *err, size_t errlen)
{
	int ret = create(vm, state_path, mem_path, api_desc, job, err, errlen);

	if (ret && job->dirty.taken)
		vm_dirty_giveback(vm, &job->dirty);
	if (!ret)
		vm->has_base = true; /* the next Diff is relative to this snapshot */
	vm_dirty_free(&job->dirty);
	return ret;
}

int vm_snapshot_create(struct vm *vm, const char *state_path, const char *mem_path, const char *api_desc, char *err,
		       size_t errlen)
{
	struct job job = {.diff = false};

	return create_and_settle(vm, state_path, mem_path, api_desc, &job, err, errlen);
}

int vm_snapshot_create_diff(struct vm *vm, const char *state_path, const char *mem_path, const char *api_desc,
			    uint64_t *dirty_pages, char *err, size_t errlen)
{
	struct job job = {.diff = true};
	int ret;

	if (!vm->cfg.track_dirty)
		return err_set(err, errlen, -EOPNOTSUPP,
			       "Diff snapshots are not allowed on uVMs with dirty page tracking disabled.");
	ret = create_and_settle(vm, state_path, mem_path, api_desc, &job, err, errlen);
	if (!ret && dirty_pages)
		*dirty_pages = job.pages;
	if (!ret)
		log_info("Diff snapshot: %llu pages (%llu KiB) of %llu MiB written to %s (%s)",
			 (unsigned long long)job.pages, (unsigned long long)job.pages * 4,
			 (unsigned long long)(vm->mem.size >> 20), mem_path,
			 job.m.kind == SNAP_MEM_MERGED ? "merged onto the memory file that was there" : "a layer");
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
		ret = x86_vcpu_restore(vm->vcpus[i].fd, sec, err, errlen);
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
