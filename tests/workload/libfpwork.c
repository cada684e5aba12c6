/* libfpwork.c: the shared-library half of the test workload. */
#include <stddef.h>
#include <stdint.h>

/* fpwork_mix: CPU-bound integer mixing; the leaf the tests look for in
 * libfpwork.so. */
__attribute__((noinline)) uint64_t fpwork_mix(uint64_t seed, int rounds)
{
	uint64_t h = seed;
	int i;

	for (i = 0; i < rounds; i++) {
		h ^= h >> 33;
		h *= 0xff51afd7ed558ccdull;
		h ^= h >> 29;
		__asm__ volatile("" : "+r"(h));
	}
	return h;
}
