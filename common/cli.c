/* cli.c: argument checks and clocks for the front ends. */
#include "cli.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>

int fp_parse_u32(const char *prog, const char *what, const char *s, uint32_t lo, uint32_t hi,
		 uint32_t *out)
{
	unsigned long long v;
	char *end;

	errno = 0;
	v = strtoull(s, &end, 10);
	if (errno || end == s || *end || s[0] == '-' || v < lo || v > hi) {
		fprintf(stderr, "%s: invalid %s '%s' (expected %u to %u)\n", prog, what, s, lo, hi);
		return -1;
	}
	*out = (uint32_t)v;
	return 0;
}

uint64_t fp_now_ns(clockid_t clk)
{
	struct timespec ts;

	clock_gettime(clk, &ts);
	return (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
}

uint64_t fp_mono_ms(void)
{
	return fp_now_ns(CLOCK_MONOTONIC) / 1000000;
}
