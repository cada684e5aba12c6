/* elfnote.h: the one thing the agent reads from ELF files, the GNU
 * build-ID note (or, without one, the Go build ID note or a few pages for
 * the synthetic id of fileid.h).  No libelf, no symbol tables: a few
 * preads, every size checked (the files belong to other, possibly
 * hostile, processes). */
#ifndef FP_ELFNOTE_H
#define FP_ELFNOTE_H

#include "batch.h"

/* fp_elfnote_build_id: the build-ID of the ELF file open at fd, from its
 * PT_NOTE segments; when they hold no GNU build-ID, the file's synthetic
 * id (fp_fileid: from its Go build ID note, else from its contents).
 * 0, -EINVAL (not ELF or malformed), -EAGAIN (no GNU build-ID and the
 * file changed while it was hashed), -EIO or a negative errno from
 * pread/fstat. */
int fp_elfnote_build_id(int fd, struct fp_build_id *id);

/* fp_elfnote_find: the build-ID in a buffer of raw notes (as in
 * /sys/kernel/notes).  0 or -ENOENT. */
int fp_elfnote_find(const void *notes, size_t len, struct fp_build_id *id);

#endif
