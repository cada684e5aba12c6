/* qsortwork.c: a frame-pointer program whose CPU time is spent in a qsort
 * comparison callback, so samples show main -> sort_round -> libc's qsort
 * internals (no frame pointers in Debian's libc) -> compare_slow -> burn.
 * Built by tests/e2e/unwind_test.sh with clang -O2 -fno-omit-frame-pointer
 * -mno-omit-leaf-frame-pointer.  usage: qsortwork [SECONDS] */
#include <stdio.h>
#include <stdlib.h>
#include <time.h>

#define N 4096

static volatile unsigned sink;

__attribute__((noinline)) static unsigned burn(unsigned v)
{
	for (int i = 0; i < 64; i++)
		v = v * 2654435761u + (v >> 13);
	return v;
}

__attribute__((noinline)) static int compare_slow(const void *a, const void *b)
{
	unsigned x = *(const unsigned *)a, y = *(const unsigned *)b;
	sink = burn(x ^ y);
	return x < y ? -1 : x > y;
}

__attribute__((noinline)) static void sort_round(unsigned *v, unsigned seed)
{
	for (int i = 0; i < N; i++) {
		seed = seed * 1103515245u + 12345u;
		v[i] = seed >> 4;
	}
	qsort(v, N, sizeof v[0], compare_slow);
}

static double now(void)
{
	struct timespec t;
	clock_gettime(CLOCK_MONOTONIC, &t);
	return t.tv_sec + t.tv_nsec / 1e9;
}

int main(int argc, char **argv)
{
	double end = now() + (argc > 1 ? atof(argv[1]) : 10);
	static unsigned v[N];
	unsigned rounds = 0;
	while (now() < end)
		sort_round(v, ++rounds);
	printf("%u rounds\n", rounds);
	return 0;
}
