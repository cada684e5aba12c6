/* pyline.h: the source line of a CPython instruction, from its code
 * object's line table (the bytes CPython keeps, as the agent sends them).
 *
 * Two formats (enum fp_py_lines in batch.h):
 * - FP_PY_LNOTAB, 3.9's co_lnotab: pairs of an unsigned byte-offset
 *   increment and a signed line increment;
 * - FP_PY_LOCATIONS, 3.11's and later co_linetable: location entries, each
 *   a header byte (bit 7 set, a code in bits 3-6, the entry's length in
 *   code units minus 1 in bits 0-2) and the code's payload.
 *
 * The table is untrusted: nothing is read past its length, and any table,
 * however damaged, gives an answer in time linear in its length.
 */
#ifndef FP_PYLINE_H
#define FP_PYLINE_H

#include <stddef.h>
#include <stdint.h>

/* The offset the agent sends when it could not read a frame's instruction. */
#define FP_PY_OFFSET_UNKNOWN 0x3fffffffu

/* fp_pyline: the line of the instruction at byte offset `offset` of the
 * bytecode, for a table of `len` bytes in `format` and the code's
 * co_firstlineno.  0 when unknown: an unknown format, an offset past the
 * table's end, an instruction without a line (3.11+ "no location"
 * entries), a malformed entry, or a line outside 1..INT32_MAX. */
uint32_t fp_pyline(uint8_t format, const uint8_t *table, size_t len, uint32_t firstlineno,
		   uint64_t offset);

#endif
