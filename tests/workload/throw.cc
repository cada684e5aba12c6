// throw.cc: a C++ workload whose hot path throws and catches, several levels
// deep, through libstdc++ and libgcc_s. Built by tests/e2e/unwind_test.sh with
// g++ -O2 (Debian's defaults: no frame pointers).
#include <cstdio>
#include <cstdlib>
#include <stdexcept>
#include <string>
#include <time.h>

namespace wl
{

struct Overflow : std::runtime_error {
	explicit Overflow(int v) : std::runtime_error("overflow"), value(v)
	{
	}
	int value;
};

volatile int sink;

[[gnu::noinline]] int level3(int x)
{
	if ((x & 3) != 0)
		throw Overflow(x);
	return x * 7;
}

[[gnu::noinline]] int level2(int x)
{
	std::string guard(24, 'g'); // a destructor to run during the unwind
	return level3(x + 1) + static_cast<int>(guard.size());
}

[[gnu::noinline]] int level1(int x)
{
	return level2(x * 3) - 1;
}

[[gnu::noinline]] long throw_loop(long rounds)
{
	long caught = 0;
	for (long i = 0; i < rounds; i++) {
		try {
			sink = level1(static_cast<int>(i));
		} catch (const Overflow &e) {
			caught += e.value & 1;
		}
	}
	return caught;
}

} // namespace wl

static double now()
{
	struct timespec t;
	clock_gettime(CLOCK_MONOTONIC, &t);
	return t.tv_sec + t.tv_nsec / 1e9;
}

// usage: throw [SECONDS]
int main(int argc, char **argv)
{
	double end = now() + (argc > 1 ? atof(argv[1]) : 10);
	long total = 0;
	while (now() < end)
		total += wl::throw_loop(2000);
	printf("%ld\n", total);
	return 0;
}
