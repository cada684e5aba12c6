/* pyline.c: line numbers from CPython line tables (pyline.h).
 *
 * Written from the format descriptions (CPython's Objects/lnotab_notes.txt
 * for 3.9 and Objects/locations.md for 3.11+); the expected values of the
 * unit test come from CPython itself.
 */
#include "pyline.h"
#include "batch.h"

#include <limits.h>

/* 3.9: the line of the last pair whose cumulated byte offset is at or below
 * the instruction's, starting from co_firstlineno.  The table does not
 * record the code's length: instructions past its last pair are on its
 * last line. */
static int64_t lnotab_line(const uint8_t *t, size_t len, uint32_t firstlineno, uint64_t offset)
{
	int64_t line = firstlineno;
	uint64_t addr = 0;

	for (size_t i = 0; i + 1 < len; i += 2) {
		addr += t[i];
		if (addr > offset)
			break;
		line += (int8_t)t[i + 1];
	}
	return line;
}

/* Location entry codes (bits 3-6 of the header byte). */
enum {
	LOC_SHORT_MAX = 9,      /* 0-9: same line, column in the code and one byte */
	LOC_ONE_LINE0 = 10,     /* 10-12: line + 0, 1 or 2; two column bytes */
	LOC_ONE_LINE2 = 12,
	LOC_NO_COLUMNS = 13,    /* svarint line delta */
	LOC_LONG = 14,          /* svarint line delta, then end line and columns */
	LOC_NONE = 15,          /* no location */
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

/* 3.11+: walk the entries, each covering the next (header & 7) + 1 code
 * units (2 bytes each) and moving the current line by its delta, until the
 * one that covers the offset.  -1 for no line. */
static int64_t locations_line(const uint8_t *t, size_t len, uint32_t firstlineno,
			      uint64_t offset)
{
	uint64_t unit = offset / 2, end = 0;
	int64_t line = firstlineno, delta;
	size_t pos = 0;

	while (pos < len) {
		uint8_t h = t[pos];
		unsigned code = (h >> 3) & 15;

		if (!(h & 0x80))
			return -1; /* payload where a header belongs */
		pos++;
		delta = 0;
		if (code == LOC_NO_COLUMNS || code == LOC_LONG) {
			if (read_svarint(t, len, &pos, &delta))
				return -1;
		} else if (code >= LOC_ONE_LINE0 && code <= LOC_ONE_LINE2) {
			delta = code - LOC_ONE_LINE0;
		}
		line += delta;
		end += (h & 7) + 1;
		if (unit < end)
			return code == LOC_NONE ? -1 : line;
		/* The rest of the payload (columns, end line): bytes without
		 * bit 7, up to the next header. */
		while (pos < len && !(t[pos] & 0x80))
			pos++;
	}
	return -1;
}

uint32_t fp_pyline(uint8_t format, const uint8_t *table, size_t len, uint32_t firstlineno,
		   uint64_t offset)
{
	int64_t line;

	if (!table)
		len = 0;
	switch (format) {
	case FP_PY_LNOTAB:
		line = lnotab_line(table, len, firstlineno, offset);
		break;
	case FP_PY_LOCATIONS:
		line = locations_line(table, len, firstlineno, offset);
		break;
	default:
		return 0;
	}
	return line >= 1 && line <= INT32_MAX ? (uint32_t)line : 0;
}
