/* cfi.h: compiling a file's call frame information into an unwind table.
 *
 * Devices cannot parse DWARF CFI in BPF, and should not parse it at all:
 * the files are the fleet's, so the table is compiled once here, from
 * .eh_frame and .debug_frame, into the row format of bpf/unwind.h, and
 * shipped.  Our own parser, not libdwarf's frame API: the input is
 * untrusted (uploads, sparse copies fetched from devices), and every
 * loop, offset and count in it is bounded by the section it reads.
 *
 * Rows carry FILE OFFSETS: CFI speaks in virtual addresses, which are
 * turned into offsets through the executable PT_LOAD segment that holds
 * them; code outside every such segment (or beyond 4 GiB) is dropped.
 */
#ifndef FP_CFI_H
#define FP_CFI_H

#include <stddef.h>
#include <stdint.h>
#include "unwind.h"

struct fp_cfi_stats {
	uint32_t cs_fdes;      /* FDEs that produced rows */
	uint32_t cs_rows;      /* rows in the table */
	uint32_t cs_invalid;   /* of them FP_UNWIND_INVALID */
	uint64_t cs_cfi_bytes; /* bytes of .eh_frame and .debug_frame read */
	uint32_t cs_cpython;   /* 1: the table has the CPython trailer */
};

/* fp_cfi_compile: the unwind table (bpf/unwind.h: header, then rows sorted
 * by pc, no two equal, consecutive equal rows merged) of the ELF file open
 * at fd, from its .eh_frame and, for code .eh_frame does not cover, its
 * .debug_frame.  Code between FDEs, and after the last, gets an
 * FP_UNWIND_NONE row.  uh_flags has FP_UNWIND_F_FRAME_POINTERS when the
 * code keeps frame pointers: a Go binary, or one where nearly all FDEs
 * that set up a frame use the frame pointer (the heuristic is spelled out
 * in cfi.c).  When the file holds a CPython interpreter (pyinterp.h), the
 * table has FP_UNWIND_F_CPYTHON and the trailer after its rows, whatever
 * its other flags; a CPython file without CFI still gets no table
 * (-ENOENT): the interpreters we know all have .eh_frame.
 * The caller frees *blob; it passes fp_unwind_table_check.
 * Same signature as fp_build_fn (isolate.h).
 * 0, -ENOENT (no CFI section with content, or no FDE in executable code),
 * -EINVAL (not ELF, not 64-bit little-endian, not x86-64 or arm64),
 * -E2BIG (more than FP_UNWIND_MAX_ROWS rows), -ENOMEM. */
int fp_cfi_compile(int fd, void **blob, size_t *len);

/* fp_cfi_compile_stats: fp_cfi_compile, also telling what it found (st may
 * be NULL; it is filled in on success only). */
int fp_cfi_compile_stats(int fd, void **blob, size_t *len, struct fp_cfi_stats *st);

/* fp_cfi_has_cfi: 1 when the ELF file at fd holds CFI bytes (an .eh_frame
 * or .debug_frame that is not NOBITS and not empty), else 0.  A detached
 * debug file keeps .eh_frame only as a NOBITS header: its table would be
 * empty and must not replace the binary's. */
int fp_cfi_has_cfi(int fd);

/* fp_cfi_row: the row of a checked table that applies at file offset off
 * (the last row at or before it), as the BPF walker finds it; NULL before
 * the first row. */
const struct fp_unwind_row *fp_cfi_row(const void *blob, size_t len, uint64_t off);

#endif
