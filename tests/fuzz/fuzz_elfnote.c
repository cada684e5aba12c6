/* fuzz_elfnote.c: libFuzzer target for the agent's build-ID reader, which
 * reads files mapped by other (possibly hostile) processes: as a raw note
 * buffer and as a whole file. */
#include "elfnote.h"

#include <stdint.h>
#include <stdlib.h>
#include <sys/mman.h>
#include <unistd.h>

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	struct fp_build_id id;
	int fd;

	if (fp_elfnote_find(data, size, &id) == 0 && (id.fb_len == 0 || id.fb_len > FP_BUILD_ID_MAX))
		abort();
	fd = memfd_create("fuzz", MFD_CLOEXEC);
	if (fd < 0)
		return 0;
	if (write(fd, data, size) == (ssize_t)size && fp_elfnote_build_id(fd, &id) == 0 &&
	    (id.fb_len == 0 || id.fb_len > FP_BUILD_ID_MAX))
		abort();
	close(fd);
	return 0;
}
