/* elfnote.h: the small, bounded ELF reader for files from outside.
 *
 * The agent reads the build-ID of files that belong to other, possibly
 * hostile, processes; the symbolizer reads the build-ID and
 * .gnu_debuglink of uploads, device-sent copies and files at paths agents
 * report, before it hands them to the isolated child (isolate.h) that
 * runs libelf and libdwarf.  Neither may run a general ELF library on
 * such bytes in a privileged process, so this reader does a few preads
 * of fixed-size headers and bounded buffers, checks every size, and keeps
 * no state: any thread may call it, on any fd.
 *
 * Only the host's byte order is read: the agent reads files of its own
 * machine, and the symbolizer serves little-endian fleets (x86-64,
 * arm64); other files are -EINVAL. */
#ifndef FP_ELFNOTE_H
#define FP_ELFNOTE_H

#include "batch.h"

#include <stddef.h>
#include <stdint.h>

/* fp_elfnote_build_id: the build-ID of the ELF file open at fd, from its
 * PT_NOTE segments, else its SHT_NOTE sections (a detached debug file's
 * segments may point at nothing); when neither holds a GNU build-ID, the
 * file's synthetic id (fp_fileid: from its Go build ID note, else from
 * its contents).  0, -EINVAL (not ELF or malformed), -EAGAIN (no GNU
 * build-ID and the file changed while it was hashed), -EIO or a negative
 * errno from pread/fstat. */
int fp_elfnote_build_id(int fd, struct fp_build_id *id);

/* fp_elfnote_find: the build-ID in a buffer of raw notes (as in
 * /sys/kernel/notes).  0 or -ENOENT. */
int fp_elfnote_find(const void *notes, size_t len, struct fp_build_id *id);

/* A section header, both classes. */
struct fp_elfnote_section {
	uint32_t es_type;   /* SHT_* */
	uint64_t es_flags;  /* SHF_* */
	uint64_t es_offset; /* in the file */
	uint64_t es_size;
};

/* fp_elfnote_section: the header of the first section named name (at most
 * 63 bytes) in the ELF file open at fd that has bytes in the file (not
 * SHT_NOBITS, not empty), else of the first so named; names past the first 64 KiB of
 * the section name table match nothing.  0, -ENOENT (none), -EINVAL (not
 * ELF, or malformed section headers), -ENOMEM or a negative errno from
 * pread. */
int fp_elfnote_section(int fd, const char *name, struct fp_elfnote_section *out);

/* fp_elfnote_debuglink: the .gnu_debuglink of the ELF file at fd: the
 * name of its detached debug file (a file name, never a path: no '/', not
 * "." or "..") into name (name_size bytes with the NUL), and that file's
 * CRC-32 into *crc.  0, -ENOENT (no debuglink), -EINVAL (malformed),
 * -ENAMETOOLONG (name_size too small), -ENOMEM or a negative errno from
 * pread. */
int fp_elfnote_debuglink(int fd, char *name, size_t name_size, uint32_t *crc);

#endif
