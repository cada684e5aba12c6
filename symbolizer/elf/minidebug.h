/* minidebug.h: MiniDebugInfo (.gnu_debugdata): an xz-compressed ELF file
 * holding the .symtab that stripping removed, as Fedora ships it. */
#ifndef FP_MINIDEBUG_H
#define FP_MINIDEBUG_H

#include <stddef.h>

/* fp_xz_decompress: the contents of the .xz stream in[0..len), into a
 * malloc'd buffer of at most max_out bytes (*out, *out_len).  The
 * decoder's memory is bounded too.  0, -EINVAL (not xz, corrupt,
 * truncated, or larger than max_out) or -ENOMEM. */
int fp_xz_decompress(const void *in, size_t len, size_t max_out, void **out, size_t *out_len);

#endif
