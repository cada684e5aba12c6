/* fileid.h: an identity for ELF files that carry no GNU build-ID.
 *
 * Frames travel as (build-ID, file offset), so a file without a GNU
 * build-ID note would reach the symbolizer as "module+offset" forever.
 * Stripped Go binaries (their linker writes a Go build ID note, not a GNU
 * one) and some Python extension modules are such files.  For them the
 * agent and the symbolizer compute, from the file alone, the same
 * synthetic 20-byte id, which then stands in for the build-ID everywhere
 * (wire, cache, store, debuginfod paths):
 *
 *   bytes 0-1  0xfb 0x1d            marks the id as synthetic
 *   byte  2    FP_FILEID_GO or FP_FILEID_CONTENT: what it was derived from
 *   byte  3    1, the version of the derivation
 *   bytes 4-19 SipHash-2-4-128, fixed public key (the last bit set, so
 *              that no code trimming the kernel's zero padding cuts it), of
 *              a tag and:
 *     GO       the Go build ID string of the .note.go.buildid note (Go
 *              derives it from the build's inputs and output, so it is
 *              already a content identity; reading it costs one note);
 *     CONTENT  the file size and the whole file when it is at most
 *              FP_FILEID_WHOLE_MAX bytes; else the size and
 *              FP_FILEID_PAGES pages of 4 KiB spread evenly from the first
 *              page to the last.
 *
 * Identity, not integrity: two files that differ only between sampled
 * pages get one id (the symbolizer then uses whichever it saw first), and
 * the key is public.  Files a process maps belong to that process; a
 * hostile one can at most mislabel its own frames.
 */
#ifndef FP_FILEID_H
#define FP_FILEID_H

#include <stddef.h>
#include <stdint.h>
#include "batch.h"

#define FP_FILEID_LEN 20
#define FP_FILEID_GO 0x01
#define FP_FILEID_CONTENT 0x02
#define FP_FILEID_WHOLE_MAX (1u << 20)
#define FP_FILEID_PAGE 4096u
#define FP_FILEID_PAGES 64u
/* Longest Go build ID string taken: real ones are "actionID/contentID",
 * 83 bytes, or four parts, 167. */
#define FP_FILEID_GO_MAX 256u

/* The ELF note that carries the Go build ID: owner "Go", type 4. */
#define FP_GO_NOTE_NAME "Go\0\0"
#define FP_GO_NOTE_NAMESZ 4u
#define FP_GO_NOTE_TYPE 4u

/* fp_fileid: the synthetic id of the file open at fd, into *id.  With
 * go_build_id (go_len bytes, 1..FP_FILEID_GO_MAX) it derives the id from
 * that Go build ID and does not read fd (which may then be -1); without
 * (NULL), from the file's contents, read with pread.  The contents are
 * read between two fstat() calls: a file that changes size, inode,
 * modification or change time meanwhile gets no id.  The last 64 content
 * ids are remembered by (device, inode, size, modification and change
 * time), so a file is hashed once while it stays the same.
 * 0, -EINVAL (empty file, not a regular file, bad go_len), -EAGAIN (the
 * file changed while it was read), -EIO (short read) or a negative errno
 * from fstat/pread. */
int fp_fileid(int fd, const void *go_build_id, size_t go_len, struct fp_build_id *id);

/* fp_fileid_kind: FP_FILEID_GO or FP_FILEID_CONTENT for a synthetic id,
 * 0 for anything else (a GNU build-ID). */
int fp_fileid_kind(const struct fp_build_id *id);

/* fp_siphash: SipHash-2-4 over the concatenation of n buffers, with an
 * outlen of 8 or 16 bytes (the reference's 64- and 128-bit variants),
 * written to out as the reference writes them.  Exposed for its test
 * vectors. */
void fp_siphash(const uint8_t key[16], const void *const *bufs, const size_t *lens, size_t n,
		uint8_t *out, size_t outlen);

#endif
