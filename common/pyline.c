/* pyline.c: line numbers and same-line runs from CPython line tables
 * (pyline.h).
 *
 * Written from the format descriptions (CPython's Objects/lnotab_notes.txt
 * for 3.9 and Objects/locations.md for 3.11+); the expected values of the
 * unit test come from CPython itself.
 *
 * Two steps: entry_next decodes the table's next entry (an offset range
 * and its line), and fp_pyline_iter_next joins entries in a row that have
 * the same line into a run.  Both look up and folding use the runs, so
 * that the symbolizer's line for a run's start is, by construction, its
 * line for every offset of the run.
 */
#include "pyline.h"
#include "batch.h"

#include <errno.h>
#include <limits.h>

/* The line as fp_pyline reports it: 0 outside 1..INT32_MAX. */
static uint32_t line_of(int64_t line)
{
	return line >= 1 && line <= INT32_MAX ? (uint32_t)line : 0;
}

/* 3.9: the line of an offset is co_firstlineno plus the line increments
 * of every pair whose cumulated byte offset is at or below it.  An entry
 * runs from one cumulated offset to the next larger one; the pairs with a
 * zero byte increment (a line step over 127, split) take effect at once.
 * The table does not record the code's length: instructions past its
 * last pair are on its last line.  A trailing odd byte is half a pair:
 * ignored. */
static int lnotab_next(struct fp_pyline_iter *it, struct fp_pyline_run *e)
{
	const uint8_t *t = it->pi_table;

	if (it->pi_done)
		return 0;
	while (it->pi_pos + 1 < it->pi_len && t[it->pi_pos] == 0) {
		it->pi_line += (int8_t)t[it->pi_pos + 1];
		it->pi_pos += 2;
	}
	e->pr_start = it->pi_addr;
	e->pr_line = line_of(it->pi_line);
	if (it->pi_pos + 1 < it->pi_len) {
		it->pi_addr += t[it->pi_pos];
		it->pi_line += (int8_t)t[it->pi_pos + 1];
		it->pi_pos += 2;
		e->pr_end = it->pi_addr;
	} else {
		e->pr_end = UINT64_MAX;
		it->pi_done = 1;
	}
	return 1;
}

/* Location entry codes (bits 3-6 of the header byte). */
enum {
	LOC_SHORT_MAX = 9,  /* 0-9: same line, column in the code and one byte */
	LOC_ONE_LINE0 = 10, /* 10-12: line + 0, 1 or 2; two column bytes */
	LOC_ONE_LINE2 = 12,
	LOC_NO_COLUMNS = 13, /* svarint line delta */
	LOC_LONG = 14,       /* svarint line delta, then end line and columns */
	LOC_NONE = 15,       /* no location */
};

/* varint: 6-bit chunks, least significant first, bit 6 meaning "more".
 * -1 when the table ends inside it, a chunk has bit 7 set (that is the
 * next entry's header) or the value would not fit in 32 bits. */
static int read_varint(const uint8_t *t, size_t len, size_t *pos, uint32_t *out)
{
	uint32_t val = 0;
	unsigned shift = 0;
	uint8_t b;

	do {
		if (*pos >= len || shift > 30)
			return -1;
		b = t[(*pos)++];
		if (b & 0x80)
			return -1;
		if (shift == 30 && (b & 0x3c))
			return -1;
		val |= (uint32_t)(b & 0x3f) << shift;
		shift += 6;
	} while (b & 0x40);
	*out = val;
	return 0;
}

/* svarint: a varint of the magnitude shifted left once, bit 0 the sign. */
static int read_svarint(const uint8_t *t, size_t len, size_t *pos, int64_t *out)
{
	uint32_t u;

	if (read_varint(t, len, pos, &u))
		return -1;
	*out = u & 1 ? -(int64_t)(u >> 1) : (int64_t)(u >> 1);
	return 0;
}

/* 3.11+: each entry covers the next (header & 7) + 1 code units (2 bytes
 * each) and moves the current line by its delta; a "no location" entry
 * moves it by 0 and has no line itself.  A malformed entry ends the
 * table. */
static int locations_next(struct fp_pyline_iter *it, struct fp_pyline_run *e)
{
	const uint8_t *t = it->pi_table;
	int64_t delta = 0;
	unsigned code;
	uint8_t h;

	if (it->pi_done || it->pi_pos >= it->pi_len)
		return 0;
	h = t[it->pi_pos];
	code = (h >> 3) & 15;
	if (!(h & 0x80)) {
		it->pi_done = 1; /* payload where a header belongs */
		return 0;
	}
	it->pi_pos++;
	if (code == LOC_NO_COLUMNS || code == LOC_LONG) {
		if (read_svarint(t, it->pi_len, &it->pi_pos, &delta)) {
			it->pi_done = 1;
			return 0;
		}
	} else if (code >= LOC_ONE_LINE0 && code <= LOC_ONE_LINE2) {
		delta = code - LOC_ONE_LINE0;
	}
	it->pi_line += delta;
	e->pr_start = it->pi_addr * 2;
	it->pi_addr += (h & 7) + 1;
	e->pr_end = it->pi_addr * 2;
	e->pr_line = code == LOC_NONE ? 0 : line_of(it->pi_line);
	/* The rest of the payload (columns, end line): bytes without bit 7,
	 * up to the next header. */
	while (it->pi_pos < it->pi_len && !(t[it->pi_pos] & 0x80))
		it->pi_pos++;
	return 1;
}

static int entry_next(struct fp_pyline_iter *it, struct fp_pyline_run *e)
{
	switch (it->pi_format) {
	case FP_PY_LNOTAB:
		return lnotab_next(it, e);
	case FP_PY_LOCATIONS:
		return locations_next(it, e);
	default:
		return 0;
	}
}

void fp_pyline_iter_init(struct fp_pyline_iter *it, uint8_t format, const uint8_t *table,
			 size_t len, uint32_t firstlineno)
{
	*it = (struct fp_pyline_iter){ .pi_table = table,
				       .pi_len = table ? len : 0,
				       .pi_format = format,
				       .pi_line = firstlineno };
}

int fp_pyline_iter_next(struct fp_pyline_iter *it, struct fp_pyline_run *run)
{
	struct fp_pyline_run r, e;

	if (it->pi_have)
		r = it->pi_pending;
	else if (!entry_next(it, &r))
		return 0;
	it->pi_have = 0;
	while (entry_next(it, &e)) {
		if (e.pr_line != r.pr_line) {
			it->pi_pending = e;
			it->pi_have = 1;
			break;
		}
		r.pr_end = e.pr_end;
	}
	*run = r;
	return 1;
}

int fp_pyline_run(uint8_t format, const uint8_t *table, size_t len, uint32_t firstlineno,
		  uint64_t offset, struct fp_pyline_run *run)
{
	struct fp_pyline_iter it;
	struct fp_pyline_run r;

	fp_pyline_iter_init(&it, format, table, len, firstlineno);
	while (fp_pyline_iter_next(&it, &r)) {
		if (offset < r.pr_end) {
			*run = r;
			return 0;
		}
	}
	return -ENOENT;
}

uint32_t fp_pyline(uint8_t format, const uint8_t *table, size_t len, uint32_t firstlineno,
		   uint64_t offset)
{
	struct fp_pyline_run r;

	return fp_pyline_run(format, table, len, firstlineno, offset, &r) ? 0 : r.pr_line;
}
