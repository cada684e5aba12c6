/* unwind_table.h: checking an unwind table blob (bpf/unwind.h) before it is
 * stored, sent or installed.  Tables cross trust boundaries twice: the
 * symbolizer compiles them from files that devices and uploaders supply,
 * and the agent receives them from the network. */
#ifndef FP_UNWIND_TABLE_H
#define FP_UNWIND_TABLE_H

#include <stddef.h>
#include <stdint.h>
#include "buildid.h"
#include "unwind.h"

/* fp_unwind_table_check: 0 when blob is a well-formed table of this
 * format version, else -EINVAL.  Well-formed: the header (magic, version,
 * a known arch, no flags but FP_UNWIND_F_FRAME_POINTERS and
 * FP_UNWIND_F_CPYTHON, at most FP_UNWIND_MAX_ROWS rows); len exactly the
 * header, the rows and, with FP_UNWIND_F_CPYTHON, one struct
 * fp_unwind_cpython; pcs strictly increasing; known rules; in the
 * trailer, uc_pad 0, every range's start at or before its end, and the
 * eval loop's range (uc_eval[0]) not empty.  The version in the trailer
 * is not checked: the agent decides what it can walk. */
int fp_unwind_table_check(const void *blob, size_t len);

/* fp_unwind_table_needed: whether a checked table is worth sending and
 * installing: it has the CPython trailer (the BPF walker must run for the
 * interpreter's processes, frame pointers or not), or it has rows and its
 * code does not keep frame pointers (where the frame-pointer walk works,
 * a table only costs memory). */
int fp_unwind_table_needed(const void *blob, size_t len);

/* fp_unwind_table_cpython: the CPython trailer of a table (little-endian,
 * as stored; 8-byte aligned when blob is), or NULL when it has none: no
 * FP_UNWIND_F_CPYTHON, or len is not that of a table with the trailer.
 * It checks the length only: check the table first. */
const struct fp_unwind_cpython *fp_unwind_table_cpython(const void *blob, size_t len);

/* fp_unwind_table_id: the id of the table blob of build-ID id:
 * SipHash-2-4 with 64-bit output (fileid.h's fp_siphash) under a fixed
 * public key, of id's bytes and then the table's.  The symbolizer and the
 * agent compute it alike from the same bytes: a table's version, which the
 * agent names in its hello (HELLO key 11) and keys its table cache by. */
uint64_t fp_unwind_table_id(const struct fp_build_id *id, const void *blob, size_t len);

#endif
