/* fuzz_elf.c: libFuzzer target for symbolizer/elf/elfsyms.c (and symtab.c,
 * dwarf.c, minidebug.c).
 *
 * Each input becomes the contents of a memfd, read as an uploaded ELF file
 * would be: build-ID, debuglink, then symbol table with DWARF line tables
 * and inline scopes (the seeds carry DWARF 4 and 5 from gcc and clang,
 * compressed sections, a debuglink and MiniDebugInfo).  A table that
 * builds must open and answer look-ups consistently; anything else calls
 * abort() so libFuzzer records the input.
 */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE /* memfd_create, memmem */
#endif
#include "elfnote.h"
#include "elfsyms.h"
#include "symtab.h"

#include <errno.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

static void fail(const char *what, int err)
{
	fprintf(stderr, "fuzz_elf: %s (err %d)\n", what, err);
	abort();
}

/* check_frames: frames are well formed: at most max, names and files
 * non-empty when present, and only the last of a complete chain is not
 * inlined. */
static void check_frames(const struct fp_symtab *t, uint64_t addr)
{
	struct fp_symframe fr[8];
	int n = fp_symtab_lookup_frames(t, addr, fr, 8);

	if (n < 0 || n > 8)
		fail("frame count out of range", n);
	for (int k = 0; k < n; k++) {
		if ((fr[k].sf_function && !fr[k].sf_function[0]) ||
		    (fr[k].sf_system_name && !fr[k].sf_system_name[0]) ||
		    (fr[k].sf_file && !fr[k].sf_file[0]))
			fail("empty name in a frame", k);
		if (!fr[k].sf_inlined && k + 1 < n)
			fail("a real function inside the chain", k);
	}
	if (n && n < 8 && fr[n - 1].sf_inlined && fp_symtab_lookup_frames(t, addr, fr, 1) != 1)
		fail("frames depend on max", n);
}

static void check_table(const void *blob, size_t len, const uint8_t *data, size_t size)
{
	struct fp_symtab t;
	struct fp_symbol s;
	uint64_t addr;
	int err;

	err = fp_symtab_open(&t, blob, len);
	if (err)
		fail("built table does not open", err);
	for (size_t i = 0; i < 64; i++) {
		uint64_t probe = 0;

		/* addresses from the input itself are likely symbol values */
		if (size >= 8)
			memcpy(&probe, data + (i * 8) % (size - 7), 8);
		probe += i;
		err = fp_symtab_lookup(&t, probe, &s);
		if (err && err != -ENOENT)
			fail("lookup error", err);
		if (!err && (probe < s.sy_addr || probe - s.sy_addr >= s.sy_size || !s.sy_name[0] ||
			     !s.sy_system_name[0]))
			fail("lookup returned a symbol not containing the address", 0);
		err = fp_symtab_addr(&t, probe, &addr);
		if (err && err != -ENOENT)
			fail("addr error", err);
		check_frames(&t, probe);
	}
	/* and across the ranges and line rows of the table */
	for (uint32_t i = 0; i < t.st_nranges && i < 64; i++) {
		uint64_t lo;

		memcpy(&lo, t.st_ranges + (size_t)i * 20, 8);
		check_frames(&t, lo);
		check_frames(&t, lo + 1);
	}
	for (uint32_t i = 0; i < t.st_nblocks && i < 64; i++) {
		uint64_t lo;

		memcpy(&lo, t.st_blocks + (size_t)i * 12, 8);
		check_frames(&t, lo);
		check_frames(&t, lo + 3);
	}
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	static int fd = -1;
	struct fp_build_id id;
	void *blob = NULL;
	size_t len = 0;
	int err;

	if (fd < 0) {
		fd = memfd_create("fuzz_elf", MFD_CLOEXEC);
		if (fd < 0)
			fail("memfd_create", -1);
	}
	if (ftruncate(fd, 0) != 0 || (size && pwrite(fd, data, size, 0) != (ssize_t)size))
		fail("writing the memfd", -1);

	err = fp_elfnote_build_id(fd, &id);
	if (err && err != -ENOENT && err != -EINVAL)
		fail("unexpected build-ID error", err);
	if (!err && (id.fb_len == 0 || id.fb_len > FP_BUILD_ID_MAX))
		fail("bad build-ID length", id.fb_len);

	{
		char name[256];
		uint32_t crc;

		err = fp_elfnote_debuglink(fd, name, sizeof(name), &crc);
		if (err && err != -ENOENT && err != -EINVAL && err != -ENAMETOOLONG)
			fail("unexpected debuglink error", err);
		if (!err && (!name[0] || strchr(name, '/')))
			fail("debuglink is not a file name", 0);
	}

	err = fp_elf_symtab(fd, &blob, &len);
	if (err && err != -ENOENT && err != -EINVAL)
		fail("unexpected symtab error", err);
	if (!err) {
		check_table(blob, len, data, size);
		free(blob);
	}
	return 0;
}
