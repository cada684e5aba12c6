/* kfuncs.c: kernel frames at their function's start (kfuncs.h). */
#include "kfuncs.h"

#include <errno.h>

int fp_kfuncs_fold(const struct fp_kfuncs *k, uint64_t offset, int leaf, uint64_t *out)
{
	uint64_t at = leaf ? offset : offset - 1;
	uint32_t lo = 0, hi = k->kf_n;

	if (!k->kf_n || (!leaf && !offset) || at > UINT32_MAX || at < k->kf_offsets[0])
		return -ENOENT;
	while (hi - lo > 1) { /* kf_offsets[lo] <= at < kf_offsets[hi] */
		uint32_t mid = lo + (hi - lo) / 2;
		if (k->kf_offsets[mid] <= at)
			lo = mid;
		else
			hi = mid;
	}
	if ((k->kf_gaps[lo / 8] >> (lo % 8)) & 1)
		return -ENOENT;
	*out = (uint64_t)k->kf_offsets[lo] + !leaf;
	return 0;
}

size_t fp_kfuncs_bytes(const struct fp_kfuncs *k)
{
	return (size_t)k->kf_n * sizeof(*k->kf_offsets) + (k->kf_n + 7) / 8;
}
