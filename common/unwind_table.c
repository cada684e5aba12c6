#include "unwind_table.h"

#include <errno.h>
#include <stdint.h>
#include <string.h>

int fp_unwind_table_check(const void *blob, size_t len)
{
	const struct fp_unwind_header *h = blob;
	const struct fp_unwind_row *r;
	uint32_t i;

	if (!blob || len < sizeof(*h) || memcmp(h->uh_magic, FP_UNWIND_MAGIC, 4) ||
	    h->uh_version != FP_UNWIND_VERSION ||
	    (h->uh_arch != FP_UNWIND_ARCH_X86_64 && h->uh_arch != FP_UNWIND_ARCH_ARM64) ||
	    h->uh_nrows > FP_UNWIND_MAX_ROWS ||
	    len != sizeof(*h) + (size_t)h->uh_nrows * sizeof(*r))
		return -EINVAL;
	r = (const struct fp_unwind_row *)(h + 1);
	for (i = 0; i < h->uh_nrows; i++) {
		if (FP_UNWIND_RULE(&r[i]) > FP_UNWIND_INVALID)
			return -EINVAL;
		if (i && r[i].ur_pc <= r[i - 1].ur_pc)
			return -EINVAL;
	}
	return 0;
}

int fp_unwind_table_needed(const void *blob, size_t len)
{
	const struct fp_unwind_header *h = blob;

	return len >= sizeof(*h) && h->uh_nrows && !(h->uh_flags & FP_UNWIND_F_FRAME_POINTERS);
}
