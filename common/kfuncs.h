/* kfuncs.h: kernel frames at their function's start.
 *
 * The symbolizer names a kernel frame after its kallsyms function only
 * (no kernel DWARF), so a frame's exact address tells it nothing the
 * function's start does not, and costs the agent's stack trie a node per
 * address.  The symbolizer sends the starts it resolves with (struct
 * fp_kfuncs, REPLY keys 9 and 10); the agent folds each kernel frame with
 * them.  The agent owns its list; it is read from the agent's one thread.
 */
#ifndef FP_KFUNCS_H
#define FP_KFUNCS_H

#include "batch.h"

#include <stddef.h>
#include <stdint.h>

/* fp_kfuncs_fold: the offset to send for a kernel frame at offset (from
 * _text) so that the symbolizer names the same function: for the
 * stack's innermost frame (leaf), the start of the function containing
 * offset; for a return address (not leaf), which the symbolizer looks up
 * at offset - 1, the start of the function containing offset - 1, plus
 * one.  0 and *out, or -ENOENT: before the first start, in a gap, or
 * past 32 bits (send offset as it is). */
int fp_kfuncs_fold(const struct fp_kfuncs *k, uint64_t offset, int leaf, uint64_t *out);

/* fp_kfuncs_bytes: the memory k's arrays take. */
size_t fp_kfuncs_bytes(const struct fp_kfuncs *k);

#endif
