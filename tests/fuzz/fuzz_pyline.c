/* fuzz_pyline.c: libFuzzer target for common/pyline.c.
 *
 * Input: a format byte, co_firstlineno (4 bytes, little-endian), a byte
 * offset (4 bytes), then the line table, copied to a buffer of exactly its
 * size so that ASan catches any read past it.  Every offset of the first
 * 4096 bytes is looked up too.  Invariants (abort() on violation): in a
 * 3.11+ table, which counts 2-byte code units, an odd offset is in the same
 * instruction as the even one before it (3.9's byte increments may be
 * odd); an empty 3.11+ table has no lines.  Runs (what the agent folds
 * offsets to): they follow one another from offset 0, no two in a row on
 * the same line, and each offset's line is its run's, and its run start's.
 */
#include "batch.h"
#include "pyline.h"

#include <errno.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

static uint32_t le32(const uint8_t *p)
{
	return (uint32_t)p[0] | (uint32_t)p[1] << 8 | (uint32_t)p[2] << 16 | (uint32_t)p[3] << 24;
}

static void check_runs(uint8_t format, const uint8_t *table, size_t len, uint32_t first,
		       uint32_t offset)
{
	struct fp_pyline_iter it;
	struct fp_pyline_run r, prev = { 0, 0, UINT32_MAX }, got;
	uint64_t off;
	size_t n = 0;

	fp_pyline_iter_init(&it, format, table, len, first);
	while (fp_pyline_iter_next(&it, &r)) {
		if (r.pr_start != prev.pr_end || r.pr_end <= r.pr_start ||
		    r.pr_line == prev.pr_line || ++n > len + 1)
			abort();
		/* Offsets at both ends of the run, and one picked in it. */
		for (int k = 0; k < 3; k++) {
			off = k == 0   ? r.pr_start
			      : k == 1 ? r.pr_end - 1
				       : r.pr_start + offset % (r.pr_end - r.pr_start);
			if (fp_pyline_run(format, table, len, first, off, &got) ||
			    got.pr_start != r.pr_start || got.pr_end != r.pr_end ||
			    fp_pyline(format, table, len, first, off) != r.pr_line)
				abort();
		}
		prev = r;
	}
	if (prev.pr_end != UINT64_MAX &&
	    (fp_pyline_run(format, table, len, first, prev.pr_end, &got) != -ENOENT ||
	     fp_pyline(format, table, len, first, prev.pr_end) != 0))
		abort();
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	uint8_t format, *table;
	uint32_t first, offset;
	size_t len;

	if (size < 9)
		return 0;
	format = data[0] % 4; /* 0 and 3 are unknown formats */
	first = le32(data + 1);
	offset = le32(data + 5);
	len = size - 9;
	table = malloc(len ? len : 1);
	if (!table)
		return 0;
	memcpy(table, data + 9, len);
	(void)fp_pyline(format, table, len, first, offset);
	(void)fp_pyline(format, table, len, first, FP_PY_OFFSET_UNKNOWN);
	for (uint64_t off = 0; off < 4096; off += 2)
		if (fp_pyline(format, table, len, first, off) !=
			    fp_pyline(format, table, len, first, off + 1) &&
		    format == FP_PY_LOCATIONS)
			abort();
	if (fp_pyline(FP_PY_LOCATIONS, table, 0, first, 0) != 0)
		abort();
	check_runs(format, table, len, first, offset);
	free(table);
	return 0;
}
