/* fuzz_cfi.c: libFuzzer target for symbolizer/elf/cfi.c.
 *
 * Each input becomes the contents of a memfd and is compiled as an
 * uploaded or device-fetched file would be.  The seeds are small x86-64
 * shared objects (.eh_frame from GCC, .debug_frame, frame pointers) and
 * hand-built AArch64 files (frame records, remember/restore_state, an 'S'
 * CIE, an outermost frame), a small CPython-like shared object
 * (symbols of an interpreter, Py_Version, a .cold part), and the sparse
 * copy a CFI fetch from a device leaves of it (every section but the
 * notes, the section names and the CFI marked NOBITS, their bytes zero).  A table that
 * compiles must pass fp_unwind_table_check, answer look-ups with a row at
 * or before the offset, and carry the CPython trailer exactly when
 * fp_pyinterp_find says the file holds an interpreter, with its answer.
 * The same bytes, behind a valid header, are also given to
 * fp_unwind_table_check as rows and a trailer, whose verdict must agree
 * with what the table says.  Any other outcome than a table or a
 * documented error calls abort() so libFuzzer records the input.
 */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE /* memfd_create */
#endif
#include "cfi.h"
#include "pyinterp.h"
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
			const uint8_t *data, size_t size, int fd)
{
	const struct fp_unwind_header *h = blob;
	const struct fp_unwind_row *rows = (const void *)(h + 1);
	const struct fp_unwind_cpython *py = fp_unwind_table_cpython(blob, len);
	struct fp_unwind_cpython direct;
	int found;
	uint32_t i;

	if (fp_unwind_table_check(blob, len))
		fail("compiled table does not pass the check", 0);
	found = fp_pyinterp_find_fd(fd, &direct);
	if (found < 0 || found != (py != NULL) || (int)st->cs_cpython != found ||
	    !!(h->uh_flags & FP_UNWIND_F_CPYTHON) != found)
		fail("the trailer and the interpreter look-up disagree", found);
	if (py && memcmp(py, &direct, sizeof(direct))) /* little-endian hosts */
		fail("the trailer is not the look-up's answer", 0);
	if (!py && len != sizeof(*h) + (size_t)h->uh_nrows * sizeof(*rows))
		fail("bytes after the rows without the trailer", (int)len);
	if (fp_unwind_table_needed(blob, len) !=
	    (py || !(h->uh_flags & FP_UNWIND_F_FRAME_POINTERS)))
		fail("needed says otherwise", 0);
	if (h->uh_nrows != st->cs_rows || h->uh_fdes != st->cs_fdes || !h->uh_nrows)
		fail("header and statistics disagree", (int)h->uh_nrows);
	if (FP_UNWIND_RULE(&rows[h->uh_nrows - 1]) != FP_UNWIND_NONE)
		fail("the table does not end in a NONE row", 0);
	/* Equal consecutive rows are no defect: one is kept wherever a
	 * function starts (cfi.c, append), so that no row spans two. */
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

/* check_blob: data as the rows and trailer of a table: flags from the
 * first byte, the row count from the size (as if the trailer were there
 * when the second byte's low bit is set). */
static void check_blob(const uint8_t *data, size_t size)
{
	static uint8_t buf[sizeof(struct fp_unwind_header) + 4096];
	struct fp_unwind_header *h = (struct fp_unwind_header *)buf;
	const struct fp_unwind_cpython *py;
	size_t n, len, i;
	int ok;

	if (size < 2)
		return;
	n = size - 2 < sizeof(buf) - sizeof(*h) ? size - 2 : sizeof(buf) - sizeof(*h);
	memset(h, 0, sizeof(*h));
	memcpy(h->uh_magic, FP_UNWIND_MAGIC, 4);
	h->uh_version = FP_UNWIND_VERSION;
	h->uh_arch = FP_UNWIND_ARCH_X86_64;
	h->uh_flags = data[0];
	i = data[1] & 1 ? sizeof(struct fp_unwind_cpython) : 0;
	h->uh_nrows = (uint32_t)((n >= i ? n - i : 0) / sizeof(struct fp_unwind_row));
	memcpy(h + 1, data + 2, n);
	len = sizeof(*h) + n;
	ok = fp_unwind_table_check(buf, len) == 0;
	py = fp_unwind_table_cpython(buf, len);
	if (py && ((const uint8_t *)py < buf + sizeof(*h) ||
		   (const uint8_t *)(py + 1) != buf + len || !(h->uh_flags & FP_UNWIND_F_CPYTHON)))
		fail("the trailer is not at the end", 0);
	if (!ok)
		return;
	if (!!py != !!(h->uh_flags & FP_UNWIND_F_CPYTHON))
		fail("a checked table's flag and trailer disagree", 0);
	if (py) {
		for (i = 0; i < FP_UNWIND_CPYTHON_RANGES; i++)
			if (py->uc_eval[i].start > py->uc_eval[i].end)
				fail("a checked trailer with a reversed range", (int)i);
		if (py->uc_eval[0].start == py->uc_eval[0].end)
			fail("a checked trailer without the eval loop", 0);
		if (!fp_unwind_table_needed(buf, len))
			fail("a CPython table not needed", 0);
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
	check_blob(data, size);
	err = fp_cfi_compile_stats(fd, &blob, &len, &st);
	if (err && err != -ENOENT && err != -EINVAL && err != -E2BIG)
		fail("unexpected error", err);
	if (!err) {
		if (!fp_cfi_has_cfi(fd))
			fail("a table from a file without CFI", 0);
		check_table(blob, len, &st, data, size, fd);
		free(blob);
	}
	return 0;
}
