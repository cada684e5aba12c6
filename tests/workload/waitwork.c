/* waitwork.c: threads whose time off their CPU is known, for the off-CPU
 * tests.  Each thread names itself:
 *   piper   burns 3 ms, then waits on a pipe (read) until ticker's next
 *           byte: about 70% of its time off-CPU, in wait_on_pipe;
 *   ticker  writes a byte to the pipe every 10 ms, waiting in poll;
 *   napper  burns 7 ms, then sleeps 3 ms in take_a_nap: about 30%;
 *   burner  burns the CPU at nice 19, off it when the others run.
 * The main thread waits for them (pthread_join).  Built by the off-CPU
 * tests with gcc -O2 -fomit-frame-pointer: whole stacks need unwind
 * tables.  usage: waitwork SECONDS */
#define _GNU_SOURCE
#include <poll.h>
#include <pthread.h>
#include <sys/resource.h>
#include <stdlib.h>
#include <time.h>
#include <unistd.h>

static int pipefd[2];
static double deadline;
static volatile unsigned long sink;

static double now(void)
{
	struct timespec t;

	clock_gettime(CLOCK_MONOTONIC, &t);
	return t.tv_sec + t.tv_nsec / 1e9;
}

/* burn: the CPU for ms milliseconds of this thread's CPU time. */
__attribute__((noinline)) static void burn(double ms)
{
	struct timespec t;
	double end;

	clock_gettime(CLOCK_THREAD_CPUTIME_ID, &t);
	end = t.tv_sec + t.tv_nsec / 1e9 + ms / 1e3;
	do {
		for (int i = 0; i < 1000; i++)
			sink += (unsigned long)i * i;
		clock_gettime(CLOCK_THREAD_CPUTIME_ID, &t);
	} while (t.tv_sec + t.tv_nsec / 1e9 < end);
}

__attribute__((noinline)) static void wait_on_pipe(void)
{
	char c;

	if (read(pipefd[0], &c, 1) < 0)
		abort();
}

__attribute__((noinline)) static void take_a_nap(void)
{
	struct timespec t = { 0, 3000000 };

	nanosleep(&t, NULL);
}

static void *piper(void *arg)
{
	pthread_setname_np(pthread_self(), "piper");
	while (now() < deadline) {
		burn(3);
		wait_on_pipe();
	}
	return arg;
}

__attribute__((noinline)) static void tick_wait(void)
{
	if (poll(NULL, 0, 10) < 0) /* not a tail call: this frame stays */
		abort();
}

static void *ticker(void *arg)
{
	pthread_setname_np(pthread_self(), "ticker");
	while (now() < deadline + 0.1) { /* piper's last wait ends too */
		tick_wait();
		if (write(pipefd[1], "x", 1) != 1)
			abort();
	}
	return arg;
}

static void *napper(void *arg)
{
	pthread_setname_np(pthread_self(), "napper");
	while (now() < deadline) {
		burn(7);
		take_a_nap();
	}
	return arg;
}

static void *burner(void *arg)
{
	pthread_setname_np(pthread_self(), "burner");
	setpriority(PRIO_PROCESS, (id_t)gettid(), 19); /* this thread only */
	while (now() < deadline)
		burn(10);
	return arg;
}

int main(int argc, char **argv)
{
	void *(*fns[])(void *) = { piper, ticker, napper, burner };
	pthread_t t[4];

	deadline = now() + (argc > 1 ? atof(argv[1]) : 10);
	if (pipe(pipefd))
		return 1;
	for (int i = 0; i < 4; i++)
		if (pthread_create(&t[i], NULL, fns[i], NULL))
			return 1;
	for (int i = 0; i < 4; i++)
		pthread_join(t[i], NULL);
	return 0;
}
