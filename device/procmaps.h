/* procmaps.h: a process's executable mappings from /proc/PID/maps, used
 * for the user frames the kernel could not turn into (build-ID, offset),
 * and to open the mapped files (build-IDs, device fetch).  Files are read
 * through /proc/PID/map_files/, which reaches files in other mount
 * namespaces (containers) without setns() and follows no path. */
#ifndef FP_PROCMAPS_H
#define FP_PROCMAPS_H

#include <stddef.h>
#include <stdint.h>
#include "batch.h"

struct fp_vma {
	uint64_t fv_start, fv_end, fv_pgoff;
	uint64_t fv_inode;
	uint32_t fv_dev_major, fv_dev_minor;
	char *fv_path;         /* owned; "" for anonymous memory */
	int fv_build_id_state; /* 0 not read yet, 1 read, -1 none */
	struct fp_build_id fv_build_id;
	uint32_t fv_cookie; /* the caller's, UINT32_MAX until set */
};

struct fp_procmaps {
	uint32_t pm_pid;
	size_t pm_nvmas;
	struct fp_vma *pm_vmas; /* sorted by start */
};

/* fp_procmaps_parse_line: one line of /proc/PID/maps.  0 (then the caller
 * frees out->fv_path), -EINVAL (malformed) or -ENOMEM.  *exec tells
 * whether the mapping is executable. */
int fp_procmaps_parse_line(const char *line, struct fp_vma *out, int *exec);

/* fp_procmaps_read: the executable mappings of pid.  proc is the procfs
 * mount ("/proc").  0 or a negative errno (-ESRCH: process gone). */
int fp_procmaps_read(const char *proc, uint32_t pid, struct fp_procmaps **pm);
void fp_procmaps_free(struct fp_procmaps *pm);

/* fp_procmaps_find: the mapping containing ip, or NULL. */
struct fp_vma *fp_procmaps_find(struct fp_procmaps *pm, uint64_t ip);

/* fp_procmaps_open: the file mapped at vma in process pid, read-only.
 * Through /proc/PID/map_files/, which is the mapped file itself whatever
 * its path now names; where that fails (not permitted without
 * CAP_SYS_ADMIN or CAP_CHECKPOINT_RESTORE, or no longer mapped), through the path
 * resolved inside the process's root without following any symbolic
 * link.  Either way the file must be a regular file with the mapping's
 * device and inode, and is opened O_NONBLOCK: a FIFO or a device planted
 * at the path is never opened for reading, and no path a container
 * controls leads outside it.  An fd, or -ENOENT. */
int fp_procmaps_open(const char *proc, uint32_t pid, const struct fp_vma *vma);

/* fp_procmaps_build_id: vma's build-ID, read once through fp_procmaps_open: the
 * GNU one, else the file's synthetic id (fp_elfnote_build_id).
 * 0 or -ENOENT. */
int fp_procmaps_build_id(const char *proc, struct fp_procmaps *pm, struct fp_vma *vma);

#endif
