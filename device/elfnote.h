/* elfnote.h: the one thing the agent reads from ELF files, the GNU
 * build-ID note.  No libelf, no symbol tables: a few preads, every size
 * checked (the files belong to other, possibly hostile, processes). */
#ifndef FP_ELFNOTE_H
#define FP_ELFNOTE_H

#include "batch.h"

/* fp_elfnote_build_id: the build-ID of the ELF file open at fd, from its
 * PT_NOTE segments.  0, -ENOENT (none), -EINVAL (not ELF or malformed) or
 * a negative errno from pread. */
int fp_elfnote_build_id(int fd, struct fp_build_id *id);

/* fp_elfnote_find: the build-ID in a buffer of raw notes (as in
 * /sys/kernel/notes).  0 or -ENOENT. */
int fp_elfnote_find(const void *notes, size_t len, struct fp_build_id *id);

#endif
