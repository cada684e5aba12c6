/* openroot.h: opening a path as a process sees it, from outside its mount
 * namespace: through its /proc/PID/root, with every component resolved
 * inside that root.  The agent opens the files a process maps this way
 * when /proc/PID/map_files/ is refused; the symbolizer (fleetprof record)
 * its container source.  No state; any thread. */
#ifndef FP_OPENROOT_H
#define FP_OPENROOT_H

/* fp_open_in_root: the absolute path as seen by a process whose root
 * directory is root (e.g. "/proc/42/root"), opened read-only,
 * non-blocking (a FIFO never blocks the open) and without a controlling
 * terminal; "/" and ".." stay inside root, and no symbolic link is
 * followed on the way (openat2: RESOLVE_IN_ROOT, RESOLVE_NO_SYMLINKS,
 * RESOLVE_NO_MAGICLINKS).  The caller checks what it opened (fstat).  fd,
 * -ENOENT (path not absolute), -ELOOP (a symbolic link on the way) or
 * another errno of open or openat2 (-ENOSYS: kernels before 5.6). */
int fp_open_in_root(const char *root, const char *path);

#endif
