/* symbolize.c: `fleetprof symbolize`, addresses to names for people and
 * benchmarks.  Reads addresses (hex, file-relative virtual addresses, as
 * addr2line and llvm-symbolizer take them) on stdin and prints, like
 * llvm-symbolizer, for each address one FUNCTION line and one
 * FILE:LINE:COLUMN line per frame, inlined frames first, then a blank line.
 * With --unwind-table it writes a file's unwind table instead (tests
 * compare the cache's with one compiled from the file). */
#include "commands.h"
#include "cfi.h"
#include "debuginfod.h"
#include "elfnote.h"
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

/* The symbolizer's cache, which --build-id reads by default. */
#define DEFAULT_CACHE "/var/cache/fleetprof"

static void symbolize_usage(FILE *f)
{
	fprintf(f,
		"usage: fleetprof symbolize (-e FILE | --build-id HEX) [--cache DIR | --server URL]\n"
		"                           [--debug-dir DIR]\n"
		"\n"
		"Reads addresses (hex, file-relative virtual addresses) on stdin and\n"
		"prints for each one FUNCTION and FILE:LINE:COLUMN per frame, inlined\n"
		"frames first, then a blank line (as llvm-symbolizer does, but with\n"
		"names without ELF symbol versions); ?? where unknown.\n"
		"\n"
		"  -e, --obj FILE       symbols of this ELF file (its detached debug file\n"
		"                       in the debug directory is used when present)\n"
		"  -b, --build-id HEX   symbols for this build-ID, from the cache or a server\n"
		"  -c, --cache DIR      the symbol cache: with -e, the table of FILE is\n"
		"                       kept there by build-ID and reused by later runs\n"
		"                       (default: none); with -b, where the table is\n"
		"                       looked up (default " DEFAULT_CACHE ")\n"
		"  -s, --server URL     a fleetprof symbol service or any debuginfod server\n"
		"  -d, --debug-dir DIR  detached debug files (default /usr/lib/debug)\n"
		"  -u, --unwind-table   write the unwind table (compiled from FILE, or the\n"
		"                       cache's for HEX) to -o FILE instead\n"
		"  -o, --output FILE    where --unwind-table writes\n"
		"  -h, --help           this help\n");
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

/* debug_path: where the debug directory keeps the debug file of id.  0
 * or what fp_build_id_path returns. */
static int debug_path(const char *debug_dir, const struct fp_build_id *id, char *path, size_t size)
{
	char hex[FP_BUILD_ID_HEX_SIZE];

	fp_build_id_hex(id, hex);
	return fp_build_id_path(path, size, debug_dir, hex, ".debug");
}

/* open_debug: the detached debug file of id from the debug directory,
 * open, when there is one with the same build-ID; else -1. */
static int open_debug(const char *debug_dir, const struct fp_build_id *id)
{
	struct fp_build_id dbg_id;
	char dbg[4200];
	int dfd;

	if (debug_path(debug_dir, id, dbg, sizeof(dbg)))
		return -1;
	dfd = open(dbg, O_RDONLY | O_CLOEXEC);
	if (dfd >= 0 && (fp_elfnote_build_id(dfd, &dbg_id) || !fp_build_id_eq(id, &dbg_id))) {
		close(dfd);
		dfd = -1;
	}
	return dfd;
}

/* fetch: the file for id from a symbol service (debuginfod protocol). */
static int fetch(const char *url, const char *cache, const struct fp_build_id *id)
{
	const char *urls[1] = { url };
	struct fp_debuginfod *d;
	char dir[4200];
	int fd;

	snprintf(dir, sizeof(dir), "%s/debuginfod-client", cache);
	if ((fd = fp_debuginfod_open(&d, urls, 1, dir)) < 0)
		return fd;
	fd = fp_debuginfod_fetch(id, FP_FETCH_SYMBOLS, d);
	fp_debuginfod_close(d);
	return fd;
}

/* table_from_fd: build and open the table of the ELF file at fd. */
static int table_from_fd(int fd, struct fp_symtab *t, void **blob, size_t *len)
{
	int err = fp_elf_symtab(fd, blob, len);

	if (!err && (err = fp_symtab_open(t, *blob, *len))) {
		free(*blob);
		*blob = NULL;
	}
	return err;
}

/* A table being used, and what holds it. */
struct table {
	struct fp_symtab tb_table;
	void *tb_blob;                  /* built here (owned), or NULL */
	struct fp_symcache *tb_cache;   /* NULL without --cache */
	struct fp_symcache_txn *tb_txn; /* the read transaction holding a cached table */
};

static void table_fini(struct table *tb)
{
	fp_symcache_end(tb->tb_txn);
	fp_symcache_close(tb->tb_cache);
	free(tb->tb_blob);
}

/* cached_table: id's table in the cache, unless it has no line table and
 * the debug directory now has id's debug file (a table once built from a
 * stripped file gives way to the richer one).  0 or -ENOENT. */
static int cached_table(struct table *tb, const struct fp_build_id *id, const char *debug_dir)
{
	char dbg[4200];

	if (fp_symcache_begin(tb->tb_cache, &tb->tb_txn))
		return -ENOENT;
	if (fp_symcache_get(tb->tb_txn, id, &tb->tb_table) == 0) {
		if (tb->tb_table.st_nblocks || !debug_dir)
			return 0;
		if (debug_path(debug_dir, id, dbg, sizeof(dbg)) || access(dbg, R_OK) != 0)
			return 0;
	}
	fp_symcache_end(tb->tb_txn);
	tb->tb_txn = NULL;
	return -ENOENT;
}

/* file_table: the table of the ELF file at path, built from its debug
 * file in debug_dir when there is one, else from the file.  With a cache,
 * by the file's build-ID: taken from it when there, else built and stored
 * in it, so that the next run reads neither the file's symbols nor its
 * debug file.  0, or 1 (a message was printed). */
static int file_table(struct table *tb, const char *path, const char *debug_dir, const char *cache)
{
	struct fp_build_id id;
	int fd, dfd = -1, have_id, err;
	size_t len;

	if ((fd = open(path, O_RDONLY | O_CLOEXEC)) < 0) {
		fp_warn("%s", path);
		return 1;
	}
	/* Without a build-ID note, a hash of the contents: still the file's. */
	have_id = fp_elfnote_build_id(fd, &id) == 0;
	if (cache && have_id) {
		if ((err = fp_symcache_open(&tb->tb_cache, cache))) {
			fp_warnx("cannot open the symbol cache %s: %s", cache, strerror(-err));
			close(fd);
			return 1;
		}
		if (cached_table(tb, &id, debug_dir) == 0) {
			close(fd);
			return 0;
		}
	}
	if (have_id && debug_dir)
		dfd = open_debug(debug_dir, &id);
	err = table_from_fd(dfd >= 0 ? dfd : fd, &tb->tb_table, &tb->tb_blob, &len);
	if (dfd >= 0)
		close(dfd);
	close(fd);
	if (err) {
		fp_warnx("%s: no symbols: %s", path, strerror(-err));
		return 1;
	}
	if (tb->tb_cache && (err = fp_symcache_put(tb->tb_cache, &id, tb->tb_blob, len)))
		fp_warnx("cannot store the symbols of %s in %s: %s", path, cache, strerror(-err));
	return 0;
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
	/* Interactive callers wait for each answer.  Asked once: two
	 * ioctls per address were a quarter of a warm run. */
	int interactive = isatty(fileno(out)) || isatty(fileno(in));
	char line[256];
	uint64_t addr;

	while (fgets(line, sizeof(line), in)) {
		if (parse_address(line, &addr)) {
			fputs("??\n??:0:0\n\n", out);
			continue;
		}
		print_frames(out, t, addr);
		if (interactive)
			fflush(out);
	}
}

/* unwind_table: --unwind-table, the table of file (compiled here) or of
 * id (from the cache) written to out.  0 or 1 (a message was printed). */
static int unwind_table(const char *file, const struct fp_build_id *id, const char *cache,
			const char *out)
{
	struct fp_symcache *sc = NULL;
	void *blob = NULL;
	size_t len = 0;
	int fd, err;
	FILE *f;

	if (file) {
		if ((fd = open(file, O_RDONLY | O_CLOEXEC)) < 0) {
			fp_warn("%s", file);
			return 1;
		}
		err = fp_cfi_compile(fd, &blob, &len);
		close(fd);
	} else if (!(err = fp_symcache_open(&sc, cache))) {
		err = fp_symcache_get_unwind(sc, id, &blob, &len);
		fp_symcache_close(sc);
	}
	if (err) {
		fp_warnx("no unwind table: %s", strerror(-err));
		return 1;
	}
	f = fopen(out, "wb");
	err = !f || fwrite(blob, 1, len, f) != len;
	if (f && fclose(f))
		err = 1;
	if (err)
		fp_warn("%s", out);
	free(blob);
	return err;
}

int fp_cmd_symbolize(int argc, char **argv)
{
	static const struct option longopts[] = {
		{ "obj", required_argument, NULL, 'e' },
		{ "build-id", required_argument, NULL, 'b' },
		{ "cache", required_argument, NULL, 'c' },
		{ "server", required_argument, NULL, 's' },
		{ "debug-dir", required_argument, NULL, 'd' },
		{ "unwind-table", no_argument, NULL, 'u' },
		{ "output", required_argument, NULL, 'o' },
		{ "help", no_argument, NULL, 'h' },
		{ 0 },
	};
	const char *file = NULL, *hex = NULL, *cache = NULL, *server = NULL;
	const char *debug_dir = "/usr/lib/debug", *output = NULL;
	struct table tb = { 0 };
	struct fp_build_id id;
	size_t len;
	int c, fd, err, unwind = 0;

	optind = 1;
	while ((c = getopt_long(argc, argv, "e:b:c:s:d:uo:h", longopts, NULL)) != -1) {
		switch (c) {
		case 'e':
			file = optarg;
			break;
		case 'b':
			hex = optarg;
			break;
		case 'c':
			cache = optarg;
			break;
		case 's':
			server = optarg;
			break;
		case 'd':
			debug_dir = optarg;
			break;
		case 'u':
			unwind = 1;
			break;
		case 'o':
			output = optarg;
			break;
		case 'h':
			symbolize_usage(stdout);
			return 0;
		default:
			symbolize_usage(stderr);
			return 2;
		}
	}
	if (optind != argc || !file == !hex || (file && server)) {
		fprintf(stderr,
			"fleetprof symbolize: give exactly one of -e FILE and --build-id HEX"
			" (--server goes with --build-id)\n");
		symbolize_usage(stderr);
		return 2;
	}
	if (hex && fp_build_id_parse(hex, &id)) {
		fprintf(stderr, "fleetprof symbolize: invalid build-ID '%s'\n", hex);
		return 2;
	}
	fp_log_init("fleetprof symbolize", 0, 0);
	/* -e writes into a cache only when given one; --build-id reads the
	 * symbolizer's. */
	if (hex && !cache)
		cache = DEFAULT_CACHE;
	if (unwind || output) {
		if (!unwind || !output || server) {
			fprintf(stderr, "fleetprof symbolize: --unwind-table goes with -o FILE, "
					"not --server\n");
			return 2;
		}
		return unwind_table(file, &id, cache, output);
	}
	if (file) {
		if (file_table(&tb, file, debug_dir, cache)) {
			table_fini(&tb);
			return 1;
		}
	} else if (server) {
		if ((fd = fetch(server, cache, &id)) < 0) {
			fp_warnx("%s: %s", hex, strerror(-fd));
			return 1;
		}
		err = table_from_fd(fd, &tb.tb_table, &tb.tb_blob, &len);
		close(fd);
		if (err) {
			fp_warnx("%s: no symbols: %s", hex, strerror(-err));
			return 1;
		}
	} else if ((err = fp_symcache_open(&tb.tb_cache, cache)) ||
		   (err = fp_symcache_begin(tb.tb_cache, &tb.tb_txn)) ||
		   (err = fp_symcache_get(tb.tb_txn, &id, &tb.tb_table))) {
		fp_warnx("build-ID %s not in the cache %s: %s", hex, cache, strerror(-err));
		table_fini(&tb);
		return 1;
	}
	symbolize_stream(stdin, stdout, &tb.tb_table);
	table_fini(&tb);
	return 0;
}
