/* fuzz_pyinterp.c: libFuzzer target for symbolizer/elf/pyinterp.c.
 *
 * Each input becomes the contents of a memfd, looked at as a file that
 * may hold a CPython interpreter.  The seeds are small x86-64 shared
 * objects with an interpreter's symbols (with and without Py_Version, a
 * .cold part, a .symtab).  The answer must be one of the documented
 * ones; a found interpreter must have a non-empty eval loop range and
 * ranges in order, and a table of it must pass fp_unwind_table_check;
 * anything else calls abort() so libFuzzer records the input.
 */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE /* memfd_create */
#endif
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
	fprintf(stderr, "fuzz_pyinterp: %s (err %d)\n", what, err);
	abort();
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

/* version_site: where Py_Version's bytes are (what device fetch asks an
 * agent for) lies within the file, and is at most FP_PYINTERP_SITE_MAX. */
static void version_site(const uint8_t *data, size_t size)
{
	struct fp_pyinterp_site site;
	Elf *elf;
	int ret;

	elf_version(EV_CURRENT);
	if (!(elf = elf_memory((char *)data, size)))
		return;
	ret = fp_pyinterp_version_site(elf, &site);
	if (ret == 1 && (!site.ps_len || site.ps_len > FP_PYINTERP_SITE_MAX ||
			 site.ps_offset > size || site.ps_len > size - site.ps_offset))
		fail("a version site beyond the file", 0);
	elf_end(elf);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	static const struct fp_unwind_cpython zero;
	static int fd = -1;
	struct {
		struct fp_unwind_header h;
		struct fp_unwind_cpython py;
	} t;
	struct fp_unwind_cpython py;
	int ret, i;

	if (fd < 0) {
		fd = memfd_create("fuzz_pyinterp", MFD_CLOEXEC);
		if (fd < 0)
			fail("memfd_create", -1);
	}
	if (ftruncate(fd, 0) != 0 || (size && pwrite(fd, data, size, 0) != (ssize_t)size))
		fail("writing the memfd", -1);
	memset(&py, 0xa5, sizeof(py));
	ret = fp_pyinterp_find_fd(fd, &py);
	if (ret != 1 && ret != 0 && ret != -EINVAL)
		fail("unexpected answer", ret);
	if (ret != 1) {
		if (memcmp(&py, &zero, sizeof(py)))
			fail("no interpreter, but an answer", ret);
		return 0;
	}
	if (py.uc_pad || py.uc_eval[0].start >= py.uc_eval[0].end)
		fail("an interpreter without its eval loop", 0);
	for (i = 0; i < FP_UNWIND_CPYTHON_RANGES; i++)
		if (py.uc_eval[i].start > py.uc_eval[i].end)
			fail("a reversed range", i);
	if (py.uc_eval[0].end > size || py.uc_eval[1].end > size)
		fail("a range beyond the file", 0);
	memset(&t, 0, sizeof(t));
	memcpy(t.h.uh_magic, FP_UNWIND_MAGIC, 4);
	t.h.uh_version = FP_UNWIND_VERSION;
	t.h.uh_arch = FP_UNWIND_ARCH_X86_64;
	t.h.uh_flags = FP_UNWIND_F_CPYTHON;
	t.py = py;
	if (fp_unwind_table_check(&t, sizeof(t)) || fp_unwind_table_cpython(&t, sizeof(t)) != &t.py)
		fail("its table does not pass the check", 0);
	version_site(data, size);
	return 0;
}
