/* churn.c: days of a switch's process and stack churn in minutes, for the
 * agent's memory budget test.  The parent keeps starting short-lived
 * children (fork + exec of itself); each child burns CPU in a random walk
 * through 64 functions, so nearly every sample is a stack never seen
 * before, from a process never seen before.  Built with frame pointers:
 * this is about the agent's tables, not about unwinding.
 * Usage: churn SECONDS [CHILDREN_PER_SECOND]. */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#define NFUNCS 64
#define DEPTH 24

typedef uint64_t (*step_fn)(uint64_t state, int depth);
static step_fn steps[NFUNCS];
static volatile uint64_t sink;

static uint64_t next(uint64_t state, int depth)
{
	state = state * 6364136223846793005ull + 1442695040888963407ull;
	if (depth == DEPTH) {
		uint64_t x = state;
		for (int i = 0; i < 20000; i++)
			x = x * 2862933555777941757ull + 3037000493ull;
		return x;
	}
	return steps[(state >> 33) % NFUNCS](state, depth + 1);
}

/* A table of functions, one generated per line. */
/* clang-format off */
#define STEP(n) \
	__attribute__((noinline)) static uint64_t step##n(uint64_t s, int d) \
	{ uint64_t r = next(s ^ n, d); sink += r; return r + 1; }
#define STEP8(n) STEP(n##0) STEP(n##1) STEP(n##2) STEP(n##3) STEP(n##4) STEP(n##5) STEP(n##6) STEP(n##7)
STEP8(1) STEP8(2) STEP8(3) STEP8(4) STEP8(5) STEP8(6) STEP8(7) STEP8(8)
#define REF8(n) step##n##0, step##n##1, step##n##2, step##n##3, step##n##4, step##n##5, step##n##6, step##n##7
static step_fn all[NFUNCS] = { REF8(1), REF8(2), REF8(3), REF8(4), REF8(5), REF8(6), REF8(7), REF8(8) };
/* clang-format on */

static double now(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return ts.tv_sec + ts.tv_nsec / 1e9;
}

static int child(uint64_t seed)
{
	double end = now() + 0.05;

	memcpy(steps, all, sizeof(steps));
	while (now() < end)
		seed = next(seed, 0);
	return 0;
}

int main(int argc, char **argv)
{
	double seconds, rate, end, t;
	uint64_t n = 0;
	char self[4096], arg[32];
	ssize_t len;

	if (argc == 3 && !strcmp(argv[1], "child"))
		return child(strtoull(argv[2], NULL, 10));
	if (argc < 2 || argc > 3) {
		fprintf(stderr, "usage: churn SECONDS [CHILDREN_PER_SECOND]\n");
		return 2;
	}
	seconds = atof(argv[1]);
	rate = argc == 3 ? atof(argv[2]) : 40;
	len = readlink("/proc/self/exe", self, sizeof(self) - 1);
	if (len <= 0)
		return 1;
	self[len] = '\0';
	end = now() + seconds;
	for (t = now(); t < end; t = now()) {
		pid_t pid = fork();
		if (pid == 0) {
			snprintf(arg, sizeof(arg), "%llu",
				 (unsigned long long)(n * 2654435761u + 1));
			execl(self, self, "child", arg, (char *)NULL);
			_exit(127);
		}
		n++;
		while (waitpid(-1, NULL, WNOHANG) > 0)
			;
		usleep((useconds_t)(1e6 / rate));
	}
	while (wait(NULL) > 0)
		;
	printf("%llu children\n", (unsigned long long)n);
	return 0;
}
