/* nofp.c: a CPU-bound call chain main -> chain_a -> chain_b -> chain_c,
 * built with gcc -O2 and its defaults, so without frame pointers: the
 * kernel's frame-pointer walk cannot get from chain_c back to main, only
 * an unwinder that reads the CFI can.  Usage: nofp SECONDS. */
#include <stdlib.h>
#include <time.h>

#define CHAIN __attribute__((noinline, noclone))

static volatile unsigned long sink;

static double now(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return ts.tv_sec + ts.tv_nsec / 1e9;
}

/* The leaf: all the time is spent here. */
CHAIN unsigned long chain_c(unsigned long seed)
{
	unsigned long x = seed;
	int i;

	for (i = 0; i < 1000000; i++)
		x = x * 6364136223846793005ul + 1442695040888963407ul;
	return x;
}

/* Each caller does work after the call, so none of the calls is a tail
 * call (a jmp would leave no return address to unwind through). */
CHAIN unsigned long chain_b(unsigned long seed)
{
	unsigned long r = chain_c(seed ^ 0x5bd1e995);

	sink += r;
	return r ^ (r >> 7);
}

CHAIN unsigned long chain_a(unsigned long seed)
{
	unsigned long r = chain_b(seed + 3);

	sink ^= r;
	return r + (r << 3);
}

int main(int argc, char **argv)
{
	double seconds = argc > 1 ? atof(argv[1]) : 10, end = now() + seconds;
	unsigned long seed = 1;

	while (now() < end)
		seed = chain_a(seed) | 1;
	sink += seed;
	return 0;
}
