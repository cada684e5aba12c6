/* unwind_table.h: checking an unwind table blob (bpf/unwind.h) before it is
 * stored, sent or installed.  Tables cross trust boundaries twice: the
 * symbolizer compiles them from files that devices and uploaders supply,
 * and the agent receives them from the network. */
#ifndef FP_UNWIND_TABLE_H
#define FP_UNWIND_TABLE_H

#include <stddef.h>
#include "unwind.h"

/* fp_unwind_table_check: 0 when blob is a well-formed table of this
 * format version (header, row count matching len, at most
 * FP_UNWIND_MAX_ROWS rows, pcs strictly increasing, known rules), else
 * -EINVAL. */
int fp_unwind_table_check(const void *blob, size_t len);

/* fp_unwind_table_needed: whether a checked table is worth sending and
 * installing: it has rows, and its code does not keep frame pointers
 * (where the frame-pointer walk works, a table only costs memory). */
int fp_unwind_table_needed(const void *blob, size_t len);

#endif
