#include "unwind_table.h"
#include "fileid.h"

#include <errno.h>
#include <stdint.h>
#include <string.h>

/* expected_len: the bytes a table with h's row count and flags takes:
 * header, rows and, with FP_UNWIND_F_CPYTHON, the trailer. */
static size_t expected_len(const struct fp_unwind_header *h)
{
	return sizeof(*h) + (size_t)h->uh_nrows * sizeof(struct fp_unwind_row) +
	       (h->uh_flags & FP_UNWIND_F_CPYTHON ? sizeof(struct fp_unwind_cpython) : 0);
}

int fp_unwind_table_check(const void *blob, size_t len)
{
	const struct fp_unwind_header *h = blob;
	const struct fp_unwind_cpython *py;
	const struct fp_unwind_row *r;
	uint32_t i;

	if (!blob || len < sizeof(*h) || memcmp(h->uh_magic, FP_UNWIND_MAGIC, 4) ||
	    h->uh_version != FP_UNWIND_VERSION ||
	    (h->uh_arch != FP_UNWIND_ARCH_X86_64 && h->uh_arch != FP_UNWIND_ARCH_ARM64) ||
	    (h->uh_flags & ~(FP_UNWIND_F_FRAME_POINTERS | FP_UNWIND_F_CPYTHON)) ||
	    h->uh_nrows > FP_UNWIND_MAX_ROWS || len != expected_len(h))
		return -EINVAL;
	r = (const struct fp_unwind_row *)(h + 1);
	for (i = 0; i < h->uh_nrows; i++) {
		if (FP_UNWIND_RULE(&r[i]) > FP_UNWIND_INVALID)
			return -EINVAL;
		if (i && r[i].ur_pc <= r[i - 1].ur_pc)
			return -EINVAL;
	}
	if ((py = fp_unwind_table_cpython(blob, len))) {
		if (py->uc_pad)
			return -EINVAL;
		for (i = 0; i < FP_UNWIND_CPYTHON_RANGES; i++)
			if (py->uc_eval[i].start > py->uc_eval[i].end)
				return -EINVAL;
		/* Without the eval loop the walker has nothing to replace. */
		if (py->uc_eval[0].start == py->uc_eval[0].end)
			return -EINVAL;
	}
	return 0;
}

int fp_unwind_table_needed(const void *blob, size_t len)
{
	const struct fp_unwind_header *h = blob;

	if (len < sizeof(*h))
		return 0;
	if (fp_unwind_table_cpython(blob, len))
		return 1; /* the walker must run for the interpreter's processes */
	return h->uh_nrows && !(h->uh_flags & FP_UNWIND_F_FRAME_POINTERS);
}

const struct fp_unwind_cpython *fp_unwind_table_cpython(const void *blob, size_t len)
{
	const struct fp_unwind_header *h = blob;

	if (!blob || len < sizeof(*h) || !(h->uh_flags & FP_UNWIND_F_CPYTHON) ||
	    h->uh_nrows > FP_UNWIND_MAX_ROWS || len != expected_len(h))
		return NULL;
	return (const struct fp_unwind_cpython *)((const char *)(h + 1) +
						  (size_t)h->uh_nrows *
							  sizeof(struct fp_unwind_row));
}

uint64_t fp_unwind_table_id(const struct fp_build_id *id, const void *blob, size_t len)
{
	/* Public: ids name versions of a table, they do not guard anything. */
	static const uint8_t key[16] = "fleetprof-table";
	const void *bufs[2] = { id->fb_data, blob };
	size_t lens[2] = { id->fb_len, len };
	uint8_t out[8];
	uint64_t v = 0;
	int i;

	fp_siphash(key, bufs, lens, 2, out, sizeof(out));
	for (i = 7; i >= 0; i--)
		v = v << 8 | out[i];
	return v;
}
