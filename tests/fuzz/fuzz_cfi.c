/* fuzz_cfi.c: libFuzzer target for symbolizer/cfi.c.
 *
 * Each input becomes the contents of a memfd and is compiled as an
 * uploaded or device-fetched file would be.  The seeds are small x86-64
 * shared objects (.eh_frame from GCC, .debug_frame, frame pointers) and
 * hand-built AArch64 files (frame records, remember/restore_state, an 'S'
 * CIE, an outermost frame).  A table that compiles must pass
 * fp_unwind_table_check and answer look-ups with a row at or before the
 * offset; any other outcome than a table or a documented error calls
 * abort() so libFuzzer records the input.
 */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE /* memfd_create */
#endif
#include "cfi.h"
#include "unwind_table.h"

#include <errno.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

static void fail(const char *what, int err)
{
	fprintf(stderr, "fuzz_cfi: %s (err %d)\n", what, err);
	abort();
}

static void check_table(const void *blob, size_t len, const struct fp_cfi_stats *st,
			const uint8_t *data, size_t size)
{
	const struct fp_unwind_header *h = blob;
	const struct fp_unwind_row *rows = (const void *)(h + 1);
	uint32_t i;

	if (fp_unwind_table_check(blob, len))
		fail("compiled table does not pass the check", 0);
	if (h->uh_nrows != st->cs_rows || h->uh_fdes != st->cs_fdes || !h->uh_nrows)
		fail("header and statistics disagree", (int)h->uh_nrows);
	if (FP_UNWIND_RULE(&rows[h->uh_nrows - 1]) != FP_UNWIND_NONE)
		fail("the table does not end in a NONE row", 0);
	for (i = 0; i + 1 < h->uh_nrows; i++)
		if (rows[i].ur_cfa == rows[i + 1].ur_cfa && rows[i].ur_rule == rows[i + 1].ur_rule &&
		    rows[i].ur_fp == rows[i + 1].ur_fp)
			fail("equal consecutive rows", (int)i);
	for (i = 0; i < 64; i++) {
		uint64_t off = 0;
		const struct fp_unwind_row *r;

		if (size >= 4)
			memcpy(&off, data + (i * 4) % (size - 3), 4);
		off = i < 32 ? off : rows[(off + i) % h->uh_nrows].ur_pc + (i & 3);
		r = fp_cfi_row(blob, len, off);
		if (r && r->ur_pc > off)
			fail("row after the offset", (int)i);
		if (!r && off >= rows[0].ur_pc)
			fail("no row for a covered offset", (int)i);
	}
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	static int fd = -1;
	struct fp_cfi_stats st;
	void *blob = NULL;
	size_t len = 0;
	int err;

	if (fd < 0) {
		fd = memfd_create("fuzz_cfi", MFD_CLOEXEC);
		if (fd < 0)
			fail("memfd_create", -1);
	}
	if (ftruncate(fd, 0) != 0 || (size && pwrite(fd, data, size, 0) != (ssize_t)size))
		fail("writing the memfd", -1);
	err = fp_cfi_compile_stats(fd, &blob, &len, &st);
	if (err && err != -ENOENT && err != -EINVAL && err != -E2BIG)
		fail("unexpected error", err);
	if (!err) {
		if (!fp_cfi_has_cfi(fd))
			fail("a table from a file without CFI", 0);
		check_table(blob, len, &st, data, size);
		free(blob);
	}
	return 0;
}
