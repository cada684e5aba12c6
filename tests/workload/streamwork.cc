// streamwork.cc: formats numbers with std::ostringstream for SECONDS
// seconds: its time is spent in libstdc++ (num_put, the stream buffers),
// a library of more rows than the agent installs before a walk needs
// them (device/tables.c), built without frame pointers as distros build
// it.  Built by the tests with g++ -O2 -fomit-frame-pointer.
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <sstream>
#include <string>

static size_t format_round(int i)
{
	std::ostringstream o;
	o << 3.14159 * i << ' ' << i << ' ' << 1e-7 * i;
	return o.str().size();
}

int main(int argc, char **argv)
{
	int seconds = argc > 1 ? atoi(argv[1]) : 10;
	auto end = std::chrono::steady_clock::now() + std::chrono::seconds(seconds);
	size_t n = 0;

	for (int i = 0; std::chrono::steady_clock::now() < end; i++)
		for (int j = 0; j < 1000; j++)
			n += format_round(i * 1000 + j);
	printf("%zu\n", n);
	return 0;
}
