/* fuzz_gopclntab.c: libFuzzer target for symbolizer/elf/gopclntab.c, Go's
 * pc-line table as found in an untrusted binary's .gopclntab.
 *
 * The input is the section's contents, and also the whole image: one
 * writable segment at 0x500000, the table's address, where moduledata and
 * inline trees are looked for.  Text is fixed at 0x401000, where the
 * seeds (small tables of the 1.16, 1.18 and 1.20 layouts, both byte
 * orders, 4- and 8-byte pointers, pc quantum 1 and 4, and one with a
 * moduledata and an inline tree) put their functions.  Whatever the input, ingestion ends with 0, -EINVAL or
 * -E2BIG, the table builds and opens, and look-ups at every function give
 * well-formed frames; anything else calls abort() so libFuzzer records it.
 */
#include "gopclntab.h"
#include "symtab.h"

#include <errno.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static void fail(const char *what, int err)
{
	fprintf(stderr, "fuzz_gopclntab: %s (err %d)\n", what, err);
	abort();
}

static void check_frames(const struct fp_symtab *t, uint64_t addr)
{
	struct fp_symframe fr[8];
	int n = fp_symtab_lookup_frames(t, addr, fr, 8);

	if (n < 0 || n > 8)
		fail("frame count out of range", n);
	for (int k = 0; k < n; k++) {
		if ((fr[k].sf_function && !fr[k].sf_function[0]) ||
		    (fr[k].sf_file && !fr[k].sf_file[0]))
			fail("empty name in a frame", k);
		if (!fr[k].sf_inlined && k + 1 < n)
			fail("a real function inside the chain", k);
	}
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	struct fp_gopclntab_segment seg = { 0x500000, data, size, 1 };
	struct fp_gopclntab_image image = { 0x500000, &seg, 1 };
	struct fp_symtab_builder *b;
	struct fp_gopclntab_stats st;
	struct fp_symtab t;
	void *blob;
	size_t len;
	int err;

	if (fp_symtab_builder_alloc(&b))
		fail("builder", -ENOMEM);
	err = fp_gopclntab_ingest(data, size, 0x401000,
				  FP_GOPCLNTAB_FUNCTIONS | FP_GOPCLNTAB_LINES |
					  FP_GOPCLNTAB_INLINES,
				  &image, b, &st);
	if (err && err != -EINVAL && err != -E2BIG)
		fail("unexpected error", err);
	if (st.gs_functions > size / 8 || st.gs_sequences > st.gs_functions)
		fail("more functions than the table can hold", (int)st.gs_functions);
	err = fp_symtab_builder_finish(b, &blob, &len);
	fp_symtab_builder_free(b);
	if (err)
		fail("table does not build", err);
	if ((err = fp_symtab_open(&t, blob, len)))
		fail("built table does not open", err);
	for (uint32_t i = 0; i < t.st_nsymbols && i < 256; i++) {
		struct fp_symbol s;
		uint64_t addr = 0x401000 + (uint64_t)i * 0x10;

		err = fp_symtab_lookup(&t, addr, &s);
		if (err && err != -ENOENT)
			fail("lookup error", err);
		if (!err && (addr < s.sy_addr || addr - s.sy_addr >= s.sy_size || !s.sy_name[0]))
			fail("lookup returned a symbol not containing the address", 0);
		check_frames(&t, addr);
		check_frames(&t, addr + 7);
	}
	free(blob);
	return 0;
}
