/* symbolize.c: `fleetprof symbolize`, addresses to names for people and
 * benchmarks.  Reads addresses (hex, file-relative virtual addresses, as
 * addr2line and llvm-symbolizer take them) on stdin and prints, like
 * llvm-symbolizer, for each address one FUNCTION line and one
 * FILE:LINE:COLUMN line per frame, inlined frames first, then a blank line. */
#include "commands.h"
#include "elfsyms.h"
#include "log.h"
#include "symcache.h"
#include "symtab.h"

#include <errno.h>
#include <fcntl.h>
#include <getopt.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#define MAX_FRAMES 64

static void symbolize_usage(FILE *f)
{
	fprintf(f,
		"usage: fleetprof symbolize (-e FILE | --build-id HEX) [--cache DIR]\n"
		"\n"
		"Reads addresses (hex, file-relative virtual addresses) on stdin and\n"
		"prints for each one FUNCTION and FILE:LINE:COLUMN per frame, inlined\n"
		"frames first, then a blank line (as llvm-symbolizer does); ?? where\n"
		"unknown.\n"
		"\n"
		"  -e, --obj FILE       symbols from this ELF or debug file\n"
		"  -b, --build-id HEX   symbols stored for this build-ID in the cache\n"
		"  -c, --cache DIR      the symbol cache (default /var/cache/fleetprof)\n");
}

/* A line of input: an address, optionally 0x-prefixed.  0 or -EINVAL. */
static int parse_address(const char *line, uint64_t *addr)
{
	char *end;

	while (*line == ' ' || *line == '\t')
		line++;
	errno = 0;
	*addr = strtoull(line, &end, 16);
	if (errno || end == line)
		return -EINVAL;
	while (*end == ' ' || *end == '\t' || *end == '\n' || *end == '\r')
		end++;
	return *end ? -EINVAL : 0;
}

static void print_frames(FILE *out, const struct fp_symtab *t, uint64_t addr)
{
	struct fp_symframe frames[MAX_FRAMES];
	int n = fp_symtab_lookup_frames(t, addr, frames, MAX_FRAMES), i;

	if (n <= 0)
		fputs("??\n??:0:0\n", out);
	for (i = 0; i < n; i++)
		fprintf(out, "%s\n%s:%" PRIu32 ":%" PRIu32 "\n",
			frames[i].sf_function ? frames[i].sf_function : "??",
			frames[i].sf_file ? frames[i].sf_file : "??", frames[i].sf_line,
			frames[i].sf_column);
	fputc('\n', out);
}

static void symbolize_stream(FILE *in, FILE *out, const struct fp_symtab *t)
{
	char line[256];
	uint64_t addr;

	while (fgets(line, sizeof(line), in)) {
		if (parse_address(line, &addr)) {
			fputs("??\n??:0:0\n\n", out);
			continue;
		}
		print_frames(out, t, addr);
		/* Interactive callers wait for each answer. */
		if (isatty(fileno(out)) || isatty(fileno(in)))
			fflush(out);
	}
}

int fp_cmd_symbolize(int argc, char **argv)
{
	static const struct option longopts[] = {
		{ "obj", required_argument, NULL, 'e' },
		{ "build-id", required_argument, NULL, 'b' },
		{ "cache", required_argument, NULL, 'c' },
		{ "help", no_argument, NULL, 'h' },
		{ 0 },
	};
	const char *file = NULL, *hex = NULL, *cache = "/var/cache/fleetprof";
	struct fp_symcache *sc = NULL;
	struct fp_symcache_txn *txn = NULL;
	struct fp_build_id id;
	struct fp_symtab t;
	void *blob = NULL;
	size_t len;
	int c, fd, err;

	optind = 1;
	while ((c = getopt_long(argc, argv, "e:b:c:h", longopts, NULL)) != -1) {
		switch (c) {
		case 'e': file = optarg; break;
		case 'b': hex = optarg; break;
		case 'c': cache = optarg; break;
		case 'h': symbolize_usage(stdout); return 0;
		default: symbolize_usage(stderr); return 2;
		}
	}
	if (optind != argc || !file == !hex) {
		fprintf(stderr, "fleetprof symbolize: give exactly one of -e FILE and --build-id HEX\n");
		symbolize_usage(stderr);
		return 2;
	}
	fp_log_init("fleetprof symbolize", 0, 0);
	if (file) {
		fd = open(file, O_RDONLY | O_CLOEXEC);
		if (fd < 0) {
			fp_warn("%s", file);
			return 1;
		}
		err = fp_elf_symtab(fd, &blob, &len);
		close(fd);
		if (!err)
			err = fp_symtab_open(&t, blob, len);
		if (err) {
			fp_warnx("%s: no symbols: %s", file, strerror(-err));
			free(blob);
			return 1;
		}
	} else {
		if (fp_build_id_parse(hex, &id)) {
			fprintf(stderr, "fleetprof symbolize: invalid build-ID '%s'\n", hex);
			return 2;
		}
		if ((err = fp_symcache_open(&sc, cache)) || (err = fp_symcache_begin(sc, &txn)) ||
		    (err = fp_symcache_get(txn, &id, &t))) {
			fp_warnx("build-ID %s not in the cache %s: %s", hex, cache, strerror(-err));
			fp_symcache_end(txn);
			fp_symcache_close(sc);
			return 1;
		}
	}
	symbolize_stream(stdin, stdout, &t);
	if (txn)
		fp_symcache_end(txn);
	fp_symcache_close(sc);
	free(blob);
	return 0;
}
