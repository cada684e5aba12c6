/* threadwork.c: a threaded program without frame pointers whose CPU time
 * goes through libc: each thread sorts with qsort, copies with memcpy and
 * parses numbers with strtod, so that its stacks run clone3 ->
 * start_thread -> worker -> libc -> (qsort's callback) -> back here, and
 * the main thread's run _start -> __libc_start_main -> main -> the same.
 * Whole stacks need the unwind tables of this program and of libc, whose
 * symbols may come from a detached debug file without CFI.
 * Built by tests/e2e/fleetpath_test.sh with gcc -O2 -fomit-frame-pointer.
 * usage: threadwork [SECONDS [THREADS]] */
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#define N 2048

static volatile double sink;
static double deadline;

static double now(void)
{
	struct timespec t;

	clock_gettime(CLOCK_MONOTONIC, &t);
	return t.tv_sec + t.tv_nsec / 1e9;
}

__attribute__((noinline)) static int compare_numbers(const void *a, const void *b)
{
	double x = *(const double *)a, y = *(const double *)b;

	return x < y ? -1 : x > y;
}

__attribute__((noinline)) static double parse_round(unsigned seed)
{
	char text[64];
	double sum = 0;

	for (int i = 0; i < 256; i++) {
		seed = seed * 1103515245u + 12345u;
		snprintf(text, sizeof(text), "%u.%u", seed >> 16, seed & 0xffff);
		sum += strtod(text, NULL);
	}
	return sum;
}

__attribute__((noinline)) static void sort_round(double *v, double *copy, unsigned seed)
{
	for (int i = 0; i < N; i++) {
		seed = seed * 1103515245u + 12345u;
		v[i] = (double)(seed >> 8);
	}
	memcpy(copy, v, sizeof(*v) * N);
	qsort(copy, N, sizeof(*copy), compare_numbers);
	sink = copy[N / 2];
}

__attribute__((noinline)) static void *worker(void *arg)
{
	double *v = malloc(sizeof(*v) * N), *copy = malloc(sizeof(*copy) * N);
	unsigned seed = (unsigned)(size_t)arg;

	while (v && copy && now() < deadline) {
		sort_round(v, copy, ++seed);
		sink += parse_round(seed);
	}
	free(v);
	free(copy);
	return NULL;
}

int main(int argc, char **argv)
{
	int threads = argc > 2 ? atoi(argv[2]) : 3;
	pthread_t tid[16];

	deadline = now() + (argc > 1 ? atof(argv[1]) : 10);
	if (threads < 1 || threads > 16)
		threads = 3;
	for (int i = 0; i < threads; i++)
		if (pthread_create(&tid[i], NULL, worker, (void *)(size_t)(i + 1))) {
			perror("pthread_create");
			return 1;
		}
	worker((void *)(size_t)100);
	for (int i = 0; i < threads; i++)
		pthread_join(tid[i], NULL);
	return 0;
}
