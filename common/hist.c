/* hist.c: a log-linear histogram for latency percentiles. */
#include "hist.h"

size_t fp_hist_bucket(uint64_t v)
{
	int msb;

	if (v < FP_HIST_SUB)
		return (size_t)v;
	msb = 63 - __builtin_clzll(v);
	if (msb > 40)
		return FP_HIST_BUCKETS - 1;
	return FP_HIST_SUB + (size_t)(msb - 5) * FP_HIST_SUB +
	       (size_t)((v >> (msb - 5)) - FP_HIST_SUB);
}

uint64_t fp_hist_value(size_t b)
{
	size_t e;

	if (b < FP_HIST_SUB)
		return b;
	e = (b - FP_HIST_SUB) / FP_HIST_SUB;
	return ((FP_HIST_SUB + (b - FP_HIST_SUB) % FP_HIST_SUB + 1ull) << e) - 1;
}

uint64_t fp_hist_percentile(const uint64_t *h, double p)
{
	uint64_t total = 0, seen = 0, want;
	size_t b;

	for (b = 0; b < FP_HIST_BUCKETS; b++)
		total += h[b];
	if (!total)
		return 0;
	want = (uint64_t)(p * (double)total);
	if (want >= total)
		want = total - 1;
	for (b = 0; b < FP_HIST_BUCKETS; b++) {
		seen += h[b];
		if (seen > want)
			break;
	}
	return fp_hist_value(b);
}
