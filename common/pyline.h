/* pyline.h: the source line of a CPython instruction, and the run of
 * instructions on the same line, from its code object's line table (the
 * bytes CPython keeps, as the agent sends them).
 *
 * Two formats (enum fp_py_lines in batch.h):
 * - FP_PY_LNOTAB, 3.9's co_lnotab: pairs of an unsigned byte-offset
 *   increment and a signed line increment;
 * - FP_PY_LOCATIONS, 3.11's and later co_linetable: location entries, each
 *   a header byte (bit 7 set, a code in bits 3-6, the entry's length in
 *   code units minus 1 in bits 0-2) and the code's payload.
 *
 * One decoder serves both sides: the symbolizer names the line of a
 * frame's offset (fp_pyline), and the agent sends, for each Python frame,
 * the first offset of the run of instructions on the frame's line
 * (fp_pyline_iter_next, once per code object), so that its stack trie
 * holds a node per line rather than per instruction.  A run's start is
 * where a table entry starts, so it is an instruction's offset, and its
 * line is the line of every offset in the run.
 *
 * The table is untrusted: nothing is read past its length, and any table,
 * however damaged, is decoded in time linear in its length.  Callers own
 * the table; it must outlive an iterator over it.  No state is shared:
 * any thread may call these on its own iterator.
 */
#ifndef FP_PYLINE_H
#define FP_PYLINE_H

#include <stddef.h>
#include <stdint.h>

/* The offset the agent sends when it could not read a frame's instruction. */
#define FP_PY_OFFSET_UNKNOWN 0x3fffffffu

/* A run of instructions on one line: byte offsets [pr_start, pr_end) of
 * the bytecode, on line pr_line (0: no line, as for fp_pyline).  3.9's
 * table does not record the code's length: its last run ends at
 * UINT64_MAX. */
struct fp_pyline_run {
	uint64_t pr_start, pr_end;
	uint32_t pr_line;
};

/* The decoder's position in a table; fields are private to pyline.c. */
struct fp_pyline_iter {
	const uint8_t *pi_table;
	size_t pi_len, pi_pos;
	uint8_t pi_format;
	uint8_t pi_done;  /* no entry after pi_pending */
	uint8_t pi_have;  /* pi_pending is an entry not yet returned */
	uint64_t pi_addr; /* lnotab: bytes; locations: code units; decoded so far */
	int64_t pi_line;
	struct fp_pyline_run pi_pending;
};

/* fp_pyline_iter_init: an iterator over the runs of a table of `len`
 * bytes in `format`, for the code's co_firstlineno.  An unknown format has
 * no runs. */
void fp_pyline_iter_init(struct fp_pyline_iter *it, uint8_t format, const uint8_t *table,
			 size_t len, uint32_t firstlineno);

/* fp_pyline_iter_next: the next run, in offset order; each starts where
 * the one before ended, and two in a row never have the same line.
 * 1 with *run written, or 0 when there is none: the table ended (3.11+,
 * whose entries cover the code exactly), or its next entry is malformed
 * (its offsets, and all after them, are in no run). */
int fp_pyline_iter_next(struct fp_pyline_iter *it, struct fp_pyline_run *run);

/* fp_pyline_run: the run that holds byte offset `offset`.  0 with *run
 * written, or -ENOENT when no run holds it (an unknown format, an offset
 * past a 3.11+ table's end, or at or after a malformed entry). */
int fp_pyline_run(uint8_t format, const uint8_t *table, size_t len, uint32_t firstlineno,
		  uint64_t offset, struct fp_pyline_run *run);

/* fp_pyline: the line of the instruction at byte offset `offset` of the
 * bytecode, for a table of `len` bytes in `format` and the code's
 * co_firstlineno.  0 when unknown: an unknown format, an offset past the
 * table's end, an instruction without a line (3.11+ "no location"
 * entries), a malformed entry, or a line outside 1..INT32_MAX. */
uint32_t fp_pyline(uint8_t format, const uint8_t *table, size_t len, uint32_t firstlineno,
		   uint64_t offset);

#endif
