/* storm.c: a context-switch storm for the off-CPU bench.  Pairs of
 * threads pass a byte back and forth through two pipes, so that each
 * waits for the other on every pass: every pass is a wait and a wake-up.
 * Prints the passes a second when done.
 * usage: storm SECONDS [PAIRS] */
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <time.h>
#include <unistd.h>

struct pair {
	int ping[2], pong[2];
	unsigned long passes;
};

static volatile int done;

static void *serve(void *arg)
{
	struct pair *p = arg;
	char c;

	while (read(p->ping[0], &c, 1) == 1) /* until the driver closes its end */
		if (write(p->pong[1], &c, 1) != 1)
			break;
	return NULL;
}

static void *drive(void *arg)
{
	struct pair *p = arg;
	char c = 'x';

	while (!done) {
		if (write(p->ping[1], &c, 1) != 1 || read(p->pong[0], &c, 1) != 1)
			break;
		p->passes++;
	}
	close(p->ping[1]); /* the server's read ends */
	return NULL;
}

int main(int argc, char **argv)
{
	double seconds = argc > 1 ? atof(argv[1]) : 10;
	int pairs = argc > 2 ? atoi(argv[2]) : 1;
	struct pair *p = calloc(pairs > 0 ? pairs : 1, sizeof(*p));
	pthread_t *t = calloc(2 * (pairs > 0 ? pairs : 1), sizeof(*t));
	struct timespec t0, t1;
	unsigned long total = 0;

	if (!p || !t || pairs < 1)
		return 2;
	clock_gettime(CLOCK_MONOTONIC, &t0);
	for (int i = 0; i < pairs; i++)
		if (pipe(p[i].ping) || pipe(p[i].pong) ||
		    pthread_create(&t[2 * i], NULL, serve, &p[i]) ||
		    pthread_create(&t[2 * i + 1], NULL, drive, &p[i]))
			return 1;
	usleep((useconds_t)(seconds * 1e6));
	done = 1;
	for (int i = 0; i < 2 * pairs; i++)
		pthread_join(t[i], NULL);
	clock_gettime(CLOCK_MONOTONIC, &t1);
	for (int i = 0; i < pairs; i++)
		total += p[i].passes;
	printf("passes %lu per_second %.0f\n", total,
	       total / ((t1.tv_sec - t0.tv_sec) + (t1.tv_nsec - t0.tv_nsec) / 1e9));
	return 0;
}
