/* procmaps.c: /proc/PID/maps parsing, and the mapped files opened without
 * following any path a container controls. */
#include "procmaps.h"
#include "elfnote.h"
#include "openroot.h"
#include "vec.h"

#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/sysmacros.h>
#include <unistd.h>

int fp_procmaps_parse_line(const char *line, struct fp_vma *out, int *exec)
{
	unsigned long long start, end, pgoff, inode;
	unsigned major, minor;
	char perms[5];
	int pathpos = -1;
	struct fp_vma v = { 0 };
	size_t len;

	if (sscanf(line, "%llx-%llx %4s %llx %x:%x %llu %n", &start, &end, perms, &pgoff, &major,
		   &minor, &inode, &pathpos) < 7 ||
	    pathpos < 0)
		return -EINVAL;
	if (end <= start || strlen(perms) != 4)
		return -EINVAL;
	len = strcspn(line + pathpos, "\n");
	v.fv_path = strndup(line + pathpos, len);
	if (!v.fv_path)
		return -ENOMEM;
	v.fv_start = start, v.fv_end = end, v.fv_pgoff = pgoff, v.fv_inode = inode;
	v.fv_dev_major = major, v.fv_dev_minor = minor;
	v.fv_cookie = UINT32_MAX;
	*exec = perms[2] == 'x';
	*out = v;
	return 0;
}

void fp_procmaps_free(struct fp_procmaps *pm)
{
	size_t i;

	if (!pm)
		return;
	for (i = 0; i < pm->pm_nvmas; i++)
		free(pm->pm_vmas[i].fv_path);
	free(pm->pm_vmas);
	free(pm);
}

int fp_procmaps_read(const char *proc, uint32_t pid, struct fp_procmaps **out)
{
	char path[64], *line = NULL;
	size_t cap = 0, nalloc = 0;
	struct fp_procmaps *pm;
	FILE *f;
	int err = 0;

	snprintf(path, sizeof(path), "%s/%" PRIu32 "/maps", proc, pid);
	f = fopen(path, "re");
	if (!f)
		return errno == ENOENT ? -ESRCH : -errno;
	pm = calloc(1, sizeof(*pm));
	if (!pm) {
		fclose(f);
		return -ENOMEM;
	}
	pm->pm_pid = pid;
	while (getline(&line, &cap, f) > 0) {
		struct fp_vma v;
		int exec;

		if (fp_procmaps_parse_line(line, &v, &exec))
			continue;
		if (!exec) {
			free(v.fv_path);
			continue;
		}
		if (fp_vec_reserve(&pm->pm_vmas, &nalloc, pm->pm_nvmas + 1, sizeof(*pm->pm_vmas))) {
			free(v.fv_path);
			err = -ENOMEM;
			break;
		}
		pm->pm_vmas[pm->pm_nvmas++] = v;
	}
	free(line);
	fclose(f);
	if (err) {
		fp_procmaps_free(pm);
		return err;
	}
	*out = pm; /* the kernel lists mappings in address order */
	return 0;
}

struct fp_vma *fp_procmaps_find(struct fp_procmaps *pm, uint64_t ip)
{
	size_t lo = 0, hi = pm->pm_nvmas;

	while (lo < hi) {
		size_t mid = lo + (hi - lo) / 2;
		struct fp_vma *v = &pm->pm_vmas[mid];
		if (ip < v->fv_start)
			hi = mid;
		else if (ip >= v->fv_end)
			lo = mid + 1;
		else
			return v;
	}
	return NULL;
}

int fp_procmaps_open(const char *proc, uint32_t pid, const struct fp_vma *vma)
{
	char path[128];
	struct stat st;
	int fd;

	if (vma->fv_inode == 0)
		return -ENOENT;
	snprintf(path, sizeof(path), "%s/%" PRIu32 "/map_files/%" PRIx64 "-%" PRIx64, proc, pid,
		 vma->fv_start, vma->fv_end);
	fd = open(path, O_RDONLY | O_CLOEXEC | O_NONBLOCK | O_NOCTTY);
	if (fd < 0) {
		/* Not allowed: the path, resolved inside the process's root. */
		snprintf(path, sizeof(path), "%s/%" PRIu32 "/root", proc, pid);
		fd = fp_open_in_root(path, vma->fv_path);
	}
	if (fd < 0)
		return -ENOENT;
	if (fstat(fd, &st) || !S_ISREG(st.st_mode) || st.st_ino != vma->fv_inode ||
	    major(st.st_dev) != vma->fv_dev_major || minor(st.st_dev) != vma->fv_dev_minor) {
		close(fd);
		return -ENOENT;
	}
	return fd;
}

int fp_procmaps_build_id(const char *proc, struct fp_procmaps *pm, struct fp_vma *vma)
{
	int fd;

	if (vma->fv_build_id_state == 0) {
		vma->fv_build_id_state = -1;
		fd = fp_procmaps_open(proc, pm->pm_pid, vma);
		if (fd >= 0) {
			if (fp_elfnote_build_id(fd, &vma->fv_build_id) == 0)
				vma->fv_build_id_state = 1;
			close(fd);
		}
	}
	return vma->fv_build_id_state == 1 ? 0 : -ENOENT;
}
