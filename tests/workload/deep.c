/* deep.c: a 30-frame stack in code without frame pointers (gcc -O2, the
 * distribution default), for the unwinding benchmark: main -> down x 28
 * -> spin.  Usage: deep SECONDS. */
#include <stdlib.h>
#include <time.h>

static volatile unsigned long sink;

__attribute__((noinline)) static unsigned long spin(unsigned long x)
{
	for (int i = 0; i < 200000; i++)
		x = x * 6364136223846793005ul + 1442695040888963407ul;
	return x;
}

/* Not a tail call: the result is used after the call returns. */
__attribute__((noinline)) static unsigned long down(int depth, unsigned long x)
{
	unsigned long r;

	if (depth == 0)
		return spin(x);
	r = down(depth - 1, x * 3 + 1);
	sink += r;
	return r ^ (unsigned long)depth;
}

int main(int argc, char **argv)
{
	struct timespec t0, t;
	double seconds = argc > 1 ? atof(argv[1]) : 10;

	clock_gettime(CLOCK_MONOTONIC, &t0);
	do {
		sink += down(28, sink);
		clock_gettime(CLOCK_MONOTONIC, &t);
	} while (t.tv_sec - t0.tv_sec + (t.tv_nsec - t0.tv_nsec) / 1e9 < seconds);
	return 0;
}
