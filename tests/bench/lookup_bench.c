/* lookup_bench.c: symbolizer figures for `make bench`.
 *
 *   lookup_bench FILE ADDRFILE
 *
 * Builds FILE's table (timed: the ingest), then looks up the addresses of
 * ADDRFILE (hex, one per line) over and over for a second (timed: warm
 * look-ups, frames per second on one core).  Prints key=value lines. */
#include "elfsyms.h"
#include "symtab.h"
#include "cli.h"

#include <fcntl.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

int main(int argc, char **argv)
{
	struct fp_symframe frames[64];
	struct fp_symtab t;
	uint64_t *addrs = NULL, t0, t1, frames_done = 0, rounds = 0;
	size_t n = 0, cap = 0, len, i;
	char line[128];
	void *blob;
	FILE *f;
	int fd;

	if (argc != 3 || (fd = open(argv[1], O_RDONLY)) < 0 || !(f = fopen(argv[2], "r")))
		return 2;
	while (fgets(line, sizeof(line), f)) {
		if (n == cap && !(addrs = realloc(addrs, (cap = cap ? cap * 2 : 1024) * 8)))
			return 1;
		addrs[n++] = strtoull(line, NULL, 16);
	}
	fclose(f);
	t0 = fp_now_ns(CLOCK_MONOTONIC);
	if (fp_elf_symtab(fd, &blob, &len) || fp_symtab_open(&t, blob, len))
		return 1;
	t1 = fp_now_ns(CLOCK_MONOTONIC);
	printf("ingest_ms=%.2f\ntable_bytes=%zu\n", (t1 - t0) / 1e6, len);
	t0 = fp_now_ns(CLOCK_PROCESS_CPUTIME_ID);
	do {
		for (i = 0; i < n; i++) {
			int k = fp_symtab_lookup_frames(&t, addrs[i], frames, 64);
			frames_done += k > 0 ? (uint64_t)k : 1;
		}
		rounds++;
		t1 = fp_now_ns(CLOCK_PROCESS_CPUTIME_ID);
	} while (t1 - t0 < 1000000000ull);
	printf("lookups_per_s=%.0f\nframes_per_s=%.0f\n", rounds * n * 1e9 / (t1 - t0),
	       frames_done * 1e9 / (t1 - t0));
	free(blob);
	close(fd);
	return 0;
}
