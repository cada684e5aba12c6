/* fuzz_elf.c: libFuzzer target for symbolizer/elfsyms.c (and symtab.c).
 *
 * Each input becomes the contents of a memfd, read as an uploaded ELF file
 * would be: build-ID, then symbol table.  A table that builds must open and
 * answer look-ups consistently; anything else calls abort() so libFuzzer
 * records the input.
 */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE /* memfd_create, memmem */
#endif
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
		if (!err && (probe < s.sy_addr || probe - s.sy_addr >= s.sy_size ||
			     !s.sy_name[0] || !s.sy_system_name[0]))
			fail("lookup returned a symbol not containing the address", 0);
		err = fp_symtab_addr(&t, probe, &addr);
		if (err && err != -ENOENT)
			fail("addr error", err);
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

	err = fp_elf_build_id(fd, &id);
	if (err && err != -ENOENT && err != -EINVAL)
		fail("unexpected build-ID error", err);
	if (!err && (id.fb_len == 0 || id.fb_len > FP_BUILD_ID_MAX))
		fail("bad build-ID length", id.fb_len);

	err = fp_elf_symtab(fd, &blob, &len);
	if (err && err != -ENOENT && err != -EINVAL)
		fail("unexpected symtab error", err);
	if (!err) {
		check_table(blob, len, data, size);
		free(blob);
	}
	return 0;
}
