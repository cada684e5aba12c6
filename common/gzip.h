/* gzip.h: bytes in memory as one gzip member (RFC 1952), for the files
 * the symbolizer writes and the bodies it pushes.  Stateless; any thread. */
#ifndef FP_GZIP_H
#define FP_GZIP_H

#include <stddef.h>
#include <stdint.h>

/* Where fp_gzip puts its output: len bytes at buf (len > 0); 0 or a
 * negative errno, which stops fp_gzip. */
typedef int (*fp_gzip_write_fn)(void *arg, const void *buf, size_t len);

/* fp_gzip: compress len bytes at in with zlib level (Z_BEST_SPEED,
 * Z_DEFAULT_COMPRESSION, ...), passing the output to write in pieces of
 * at most 64 KiB.  0, -ENOMEM (zlib could not start), -EIO (zlib failed)
 * or what write returned. */
int fp_gzip(const void *in, size_t len, int level, fp_gzip_write_fn write, void *arg);

/* fp_gzip_buf: fp_gzip into a new buffer, *out (the caller frees it) of
 * *olen bytes, both written only on success.  0, -ENOMEM or -EIO. */
int fp_gzip_buf(const void *in, size_t len, int level, uint8_t **out, size_t *olen);

/* fp_gunzip_buf: the bytes of the gzip member (or members, one after the
 * other, as gzip writes them) at in, len bytes, into a new buffer *out
 * (the caller frees it) of *olen bytes, both written only on success.
 * Untrusted input: at most max bytes come out.  0, -EINVAL (not gzip, or
 * corrupt, or cut short), -EFBIG (more than max bytes) or -ENOMEM. */
int fp_gunzip_buf(const void *in, size_t len, size_t max, uint8_t **out, size_t *olen);

#endif
