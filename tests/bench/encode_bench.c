/* encode_bench.c: output figures for `make bench`: the time to build the
 * profile of one interval of 10,000 distinct stacks, and the encoding time
 * and size of its OTLP and pprof. */
#include "cli.h"
#include "otlp.h"
#include "output.h"
#include "profile.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define STACKS 10000
#define DEPTH 20

static uint64_t rnd(uint64_t *s)
{
	*s = *s * 6364136223846793005ull + 1442695040888963407ull;
	return *s >> 33;
}

/* build: the interval's profile, from the same stacks every time. */
static int build(struct fp_profile **out, uint64_t *samples)
{
	struct fp_build_id bid = { .fb_len = 20 };
	struct fp_profile *p;
	uint32_t maps[4], frames[DEPTH];
	uint64_t seed = 1;
	char name[64], path[32];
	size_t i, j;

	if (fp_profile_alloc(&p, "bench-host", 1700000000000000000ull, 10000000000ull, 10101010))
		return -1;
	*samples = 0;
	for (i = 0; i < 4; i++) {
		bid.fb_data[0] = (uint8_t)i;
		snprintf(path, sizeof(path), "/usr/lib/lib%zu.so", i);
		if (fp_profile_add_mapping(p, FP_MAP_USER, &bid, path, &maps[i]))
			goto fail;
	}
	/* Stacks share their outer frames, as real ones do: a few thousand
	 * functions, deeper frames more varied. */
	for (i = 0; i < STACKS; i++) {
		uint32_t n = DEPTH - (uint32_t)(rnd(&seed) % 6), count = 1 + rnd(&seed) % 20;
		for (j = 0; j < n; j++) {
			uint64_t fn = j < 4 ? j : rnd(&seed) % (j * 300);
			snprintf(name, sizeof(name), "ns::Service%u::handler_%llu(int)",
				 (unsigned)j, (unsigned long long)fn);
			if (fp_profile_add_frame(p, maps[fn % 4], 0x1000 + fn * 64 + j,
						 FP_FRAME_USER, name, NULL, &frames[n - 1 - j]))
				goto fail;
		}
		if (fp_profile_add_sample(p, frames, n, 100 + (uint32_t)(i % 50),
					  100 + (uint32_t)(i % 50), "worker", "daemon",
					  i % 3 ? "" : "swss", count))
			goto fail;
		*samples += count;
	}
	*out = p;
	return 0;
fail:
	fp_profile_free(p);
	return -1;
}

int main(void)
{
	struct fp_otlp_resource res = { .or_host = "bench-host" };
	struct fp_profile *p = NULL, *q;
	uint64_t samples = 0, t0, best_build = UINT64_MAX, best_otlp = UINT64_MAX,
		 best_pprof = UINT64_MAX;
	size_t otlp_len = 0, pprof_len = 0;
	uint8_t *buf;
	int round;

	for (round = 0; round < 5; round++) {
		t0 = fp_now_ns(CLOCK_PROCESS_CPUTIME_ID);
		if (build(&q, &samples))
			return 1;
		if (fp_now_ns(CLOCK_PROCESS_CPUTIME_ID) - t0 < best_build)
			best_build = fp_now_ns(CLOCK_PROCESS_CPUTIME_ID) - t0;
		fp_profile_free(p);
		p = q;
	}
	for (round = 0; round < 5; round++) {
		t0 = fp_now_ns(CLOCK_PROCESS_CPUTIME_ID);
		if (fp_otlp_encode(p, &res, &buf, &otlp_len))
			return 1;
		if (fp_now_ns(CLOCK_PROCESS_CPUTIME_ID) - t0 < best_otlp)
			best_otlp = fp_now_ns(CLOCK_PROCESS_CPUTIME_ID) - t0;
		free(buf);
		t0 = fp_now_ns(CLOCK_PROCESS_CPUTIME_ID);
		if (fp_pprof_encode(p, &buf, &pprof_len))
			return 1;
		if (fp_now_ns(CLOCK_PROCESS_CPUTIME_ID) - t0 < best_pprof)
			best_pprof = fp_now_ns(CLOCK_PROCESS_CPUTIME_ID) - t0;
		free(buf);
	}
	printf("stacks=%d\nsamples=%llu\nframes=%zu\n", STACKS, (unsigned long long)samples,
	       p->pr_nframes);
	printf("build_ms=%.2f\n", best_build / 1e6);
	printf("otlp_ms=%.2f\notlp_bytes=%zu\npprof_ms=%.2f\npprof_bytes=%zu\n", best_otlp / 1e6,
	       otlp_len, best_pprof / 1e6, pprof_len);
	printf("otlp_bytes_per_sample=%.2f\npprof_bytes_per_sample=%.2f\n",
	       (double)otlp_len / samples, (double)pprof_len / samples);
	fp_profile_free(p);
	return 0;
}
