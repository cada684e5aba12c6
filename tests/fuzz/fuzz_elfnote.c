/* fuzz_elfnote.c: libFuzzer target for the bounded ELF reader (elfnote.h),
 * which the agent runs on files mapped by other (possibly hostile)
 * processes and the symbolizer on files from outside before its isolated
 * child: as a raw note buffer and as a whole file (build-ID, a section by
 * name, the debuglink). */
#include "elfnote.h"

#include <elf.h>
#include <errno.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	struct fp_elfnote_section s;
	struct fp_build_id id;
	char name[256];
	uint32_t crc;
	int fd, err;

	if (fp_elfnote_find(data, size, &id) == 0 &&
	    (id.fb_len == 0 || id.fb_len > FP_BUILD_ID_MAX))
		abort();
	fd = memfd_create("fuzz", MFD_CLOEXEC);
	if (fd < 0)
		return 0;
	if (write(fd, data, size) != (ssize_t)size)
		goto out;
	if (fp_elfnote_build_id(fd, &id) == 0 && (id.fb_len == 0 || id.fb_len > FP_BUILD_ID_MAX))
		abort();
	err = fp_elfnote_section(fd, ".eh_frame", &s);
	if (err && err != -ENOENT && err != -EINVAL)
		abort();
	err = fp_elfnote_debuglink(fd, name, sizeof(name), &crc);
	if (err && err != -ENOENT && err != -EINVAL && err != -ENAMETOOLONG)
		abort();
	if (!err && (!name[0] || strchr(name, '/') || strlen(name) >= sizeof(name)))
		abort();
out:
	close(fd);
	return 0;
}
