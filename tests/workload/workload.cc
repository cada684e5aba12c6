// workload.cc: a known workload for the end-to-end tests.
//
// Thread "fp-compute" spends about 60% of its time in the C++ method
// fp::Cruncher::crunch(int) (most of it in step(), inlined into it) and 40%
// in fpwork_mix() of libfpwork.so; thread
// "fp-writer" loops on write() into a memfd, so its time goes to the
// kernel (ksys_write).  Built with clang and frame pointers.
//
// usage: workload [SECONDS]   (default: run until killed)
// After SECONDS it prints "iterations N": compute rounds done, the
// throughput the benchmark compares with and without profilers.
#include <pthread.h>
#include <signal.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/mman.h>
#include <unistd.h>

extern "C" uint64_t fpwork_mix(uint64_t seed, int rounds);

namespace fp
{
class Cruncher
{
      public:
	explicit Cruncher(double f) : factor_(f)
	{
	}
	__attribute__((noinline)) double crunch(int n);

      private:
	double factor_;
};

// Always inlined into crunch(): the tests look for it as an inline frame.
static inline __attribute__((always_inline)) double step(double x)
{
	x = x * 1.0000001 + 0.5;
	__asm__ volatile("" : "+x"(x));
	return x;
}

double Cruncher::crunch(int n)
{
	double x = factor_;
	for (int i = 0; i < n; i++)
		x = step(x);
	return x;
}
} // namespace fp

static volatile uint64_t sink;
static volatile uint64_t iterations; // compute rounds done: the throughput

extern "C" __attribute__((noinline)) void compute_loop(void)
{
	fp::Cruncher c(1.5);
	for (;;) {
		sink += (uint64_t)c.crunch(300000);
		sink += fpwork_mix(sink, 200000);
		iterations = iterations + 1;
	}
}

// libc's write() keeps no frame pointer, so a frame-pointer unwinder (ours
// or perf's) skips its direct caller: write_chunk() is that caller, so that
// writer_loop() stays visible.
extern "C" __attribute__((noinline)) void write_chunk(int fd, const char *buf, size_t len)
{
	if (write(fd, buf, len) < 0)
		abort();
	lseek(fd, 0, SEEK_SET);
}

extern "C" __attribute__((noinline)) void writer_loop(void)
{
	static char buf[65536];
	int fd = memfd_create("fp-writer", 0);
	for (;;)
		write_chunk(fd, buf, sizeof(buf));
}

static void *thread_main(void *arg)
{
	if (arg)
		writer_loop();
	else
		compute_loop();
	return nullptr;
}

int main(int argc, char **argv)
{
	pthread_t t[2];
	unsigned seconds = argc > 1 ? (unsigned)atoi(argv[1]) : 0;

	for (int i = 0; i < 2; i++) {
		pthread_create(&t[i], nullptr, thread_main, i ? (void *)1 : nullptr);
		pthread_setname_np(t[i], i ? "fp-writer" : "fp-compute");
	}
	if (seconds)
		sleep(seconds);
	else
		for (;;)
			pause();
	printf("iterations %llu\n", (unsigned long long)iterations);
	return 0;
}
