/* sigwork.c: most CPU time is spent inside a SIGALRM handler, so samples
 * show handler <- __restore_rt <- the interrupted code. Built by
 * tests/e2e/unwind_test.sh with gcc -O2 (no frame pointers). */
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/time.h>
#include <time.h>

static volatile double acc;
static volatile sig_atomic_t stop;

__attribute__((noinline)) static double handler_inner(double x)
{
	for (int i = 0; i < 4000; i++)
		x = x * 1.0000001 + 0.5 / (x + 1.0);
	return x;
}

__attribute__((noinline)) static void handler_work(void)
{
	/* about 3/4 of the 4 ms timer period */
	struct timespec t0, t;
	clock_gettime(CLOCK_MONOTONIC, &t0);
	do {
		acc = handler_inner(acc);
		clock_gettime(CLOCK_MONOTONIC, &t);
	} while ((t.tv_sec - t0.tv_sec) * 1000000000L + (t.tv_nsec - t0.tv_nsec) < 3000000L);
}

static void on_alarm(int sig)
{
	(void)sig;
	handler_work();
}

__attribute__((noinline)) static double main_inner(double x)
{
	for (int i = 0; i < 1000; i++)
		x = x * 0.9999999 + 1.0 / (x + 2.0);
	return x;
}

static double now(void)
{
	struct timespec t;
	clock_gettime(CLOCK_MONOTONIC, &t);
	return t.tv_sec + t.tv_nsec / 1e9;
}

__attribute__((noinline)) static void main_loop(double end)
{
	double x = 1.0;
	while (!stop && now() < end)
		x = main_inner(x);
	acc += x;
}

static void on_term(int sig)
{
	(void)sig;
	stop = 1;
}

/* usage: sigwork [SECONDS]: a 4 ms SIGALRM timer whose handler works for
 * about 3 ms, so about 3/4 of the samples are on the signal stack frame. */
int main(int argc, char **argv)
{
	double seconds = argc > 1 ? atof(argv[1]) : 10;
	struct sigaction sa;
	memset(&sa, 0, sizeof sa);
	sa.sa_handler = on_alarm;
	sa.sa_flags = SA_RESTART;
	sigaction(SIGALRM, &sa, NULL);
	sa.sa_handler = on_term;
	sigaction(SIGTERM, &sa, NULL);
	struct itimerval it = { { 0, 4000 }, { 0, 4000 } };
	setitimer(ITIMER_REAL, &it, NULL);
	main_loop(now() + seconds);
	printf("%f\n", acc);
	return 0;
}
