/* demo.c: the native half of the workload `make run` profiles, so that a
 * newcomer's first flame graph shows what fleetprof sees: code built as
 * distributions build it (gcc -O2, no frame pointers: unwound with the
 * tables fleetprof compiles from its CFI), calls into libc, and kernel
 * work (a pipe written and read back).  Runs for SECONDS (default 12). */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

static volatile uint64_t sink;

static int demo_compare(const void *a, const void *b)
{
	uint32_t x = *(const uint32_t *)a, y = *(const uint32_t *)b;

	return (x > y) - (x < y);
}

/* demo_sort_records: libc's qsort calling back into our comparison (and
 * not as a tail call, so that this function stays on the stack). */
__attribute__((noinline, noclone)) static uint32_t demo_sort_records(uint32_t *v, size_t n,
								     uint32_t seed)
{
	for (size_t i = 0; i < n; i++) {
		seed = seed * 1664525u + 1013904223u;
		v[i] = seed;
	}
	qsort(v, n, sizeof(*v), demo_compare);
	return v[n / 2];
}

/* demo_checksum: plain CPU work in our own code. */
__attribute__((noinline, noclone)) static uint64_t demo_checksum(const uint32_t *v, size_t n)
{
	uint64_t h = 1469598103934665603ull;

	for (int round = 0; round < 8; round++)
		for (size_t i = 0; i < n; i++)
			h = (h ^ v[i]) * 1099511628211ull;
	return h;
}

/* demo_pipe_roundtrip: bytes through the kernel and back. */
__attribute__((noinline, noclone)) static void demo_pipe_roundtrip(int fd[2], char *buf, size_t len)
{
	for (int i = 0; i < 16; i++) {
		if (write(fd[1], buf, len) != (ssize_t)len || read(fd[0], buf, len) != (ssize_t)len)
			exit(1);
	}
}

int main(int argc, char **argv)
{
	int seconds = argc > 1 ? atoi(argv[1]) : 12, fd[2];
	size_t n = 1 << 15;
	uint32_t *v = malloc(n * sizeof(*v));
	static char buf[32768];
	time_t end = time(NULL) + (seconds > 0 ? seconds : 12);

	if (!v || pipe(fd))
		return 1;
	memset(buf, 'x', sizeof(buf));
	while (time(NULL) < end) {
		sink += demo_sort_records(v, n, (uint32_t)sink);
		sink += demo_checksum(v, n);
		demo_pipe_roundtrip(fd, buf, sizeof(buf));
	}
	free(v);
	return 0;
}
