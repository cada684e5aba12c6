/* table_cache_test.c: the agent's unwind tables on disk (table_cache.h):
 * what is stored comes back only whole and checked, across a restart;
 * the least recently used go past the bound; corrupt, truncated,
 * misnamed and foreign files are counted and removed, never used; a
 * directory others may write is refused. */
#include <errno.h>
#include <fcntl.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "check.h"
#include "table_cache.h"
#include "unwind.h"
#include "unwind_table.h"

#define HDR 48 /* the file header */

static char tmpdir[64];
static uint32_t flags; /* what the last load said of its table */

static struct fp_build_id bid(uint8_t b)
{
	struct fp_build_id id = { .fb_len = 20 };

	memset(id.fb_data, b, 20);
	return id;
}

/* table: a well-formed table of rows rows (pcs from first, 16 apart). */
static void *table(uint32_t rows, uint32_t first, size_t *len)
{
	struct fp_unwind_header *h;
	struct fp_unwind_row *r;
	uint32_t i;

	*len = sizeof(*h) + rows * sizeof(*r);
	if (!(h = calloc(1, *len)))
		return NULL;
	r = (struct fp_unwind_row *)(h + 1);
	memcpy(h->uh_magic, FP_UNWIND_MAGIC, 4);
	h->uh_version = FP_UNWIND_VERSION;
	h->uh_arch = FP_UNWIND_ARCH_X86_64;
	h->uh_nrows = rows;
	for (i = 0; i < rows; i++)
		r[i] = (struct fp_unwind_row){ .ur_pc = first + i * 16, .ur_cfa = 8 };
	return h;
}

/* fresh_dir: an empty directory NAME under tmpdir, its path in buf. */
static const char *fresh_dir(const char *name, char *buf, size_t len)
{
	snprintf(buf, len, "%s/%s", tmpdir, name);
	mkdir(buf, 0700);
	return buf;
}

static void path_of(const char *dir, const struct fp_build_id *id, char *buf, size_t len)
{
	char hex[FP_BUILD_ID_HEX_SIZE];

	fp_build_id_hex(id, hex);
	snprintf(buf, len, "%s/%s.table", dir, hex);
}

static long file_size(const char *path)
{
	struct stat st;

	return stat(path, &st) ? -1 : (long)st.st_size;
}

/* Stored, found again by a new agent (a reopened cache): the same bytes,
 * its id in the held list. */
static void test_roundtrip(void)
{
	struct fp_table_cache *c = NULL;
	struct fp_table_cache_stats st;
	struct fp_build_id a = bid(0xa1);
	struct fp_held_table held[4];
	char dir[128], path[256];
	size_t len, got_len = 0;
	void *t = table(100, 0, &len), *got = NULL;

	fresh_dir("roundtrip", dir, sizeof(dir));
	CHECK_EQ_INT(fp_table_cache_open(&c, dir, 1 << 20), 0);
	if (!c || !t)
		return;
	CHECK_EQ_INT(fp_table_cache_load(c, &a, &got, &got_len, &flags), -ENOENT);
	CHECK_EQ_INT(fp_table_cache_store(c, &a, t, len, FP_TABLE_CACHE_FUNCTION_ROWS), 0);
	path_of(dir, &a, path, sizeof(path));
	CHECK_EQ_INT(file_size(path), HDR + (long)len);
	fp_table_cache_close(c);

	CHECK_EQ_INT(fp_table_cache_open(&c, dir, 1 << 20), 0);
	if (!c)
		return;
	CHECK(fp_table_cache_has(c, &a));
	CHECK_EQ_INT(fp_table_cache_held(c, NULL, NULL, held, 4), 1);
	CHECK(fp_build_id_eq(&held[0].ht_build_id, &a));
	CHECK(held[0].ht_id == fp_unwind_table_id(&a, t, len));
	CHECK_EQ_INT(fp_table_cache_load(c, &a, &got, &got_len, &flags), 0);
	CHECK_EQ_INT(got_len, len);
	CHECK(got && !memcmp(got, t, len));
	CHECK_EQ_INT(flags, FP_TABLE_CACHE_FUNCTION_ROWS);
	fp_table_cache_stats(c, &st);
	CHECK_EQ_INT(st.tc_loaded, 1);
	CHECK_EQ_INT(st.tc_files, 1);
	CHECK_EQ_INT(st.tc_bytes, HDR + len);
	CHECK_EQ_INT(st.tc_bad, 0);
	fp_table_cache_close(c);
	free(got);
	free(t);
}

/* Past the bound the least recently used file goes: loading a table is a
 * use, and so is storing it. */
static void test_bound_lru(void)
{
	struct fp_table_cache *c = NULL;
	struct fp_table_cache_stats st;
	struct fp_build_id a = bid(0xa1), b = bid(0xb2), d = bid(0xd4);
	char dir[128], path[256];
	size_t len, l2;
	void *t = table(1000, 0, &len), *got = NULL;

	fresh_dir("lru", dir, sizeof(dir));
	/* room for two files, not three */
	CHECK_EQ_INT(fp_table_cache_open(&c, dir, 2 * (HDR + len) + 10), 0);
	if (!c || !t)
		return;
	CHECK_EQ_INT(fp_table_cache_store(c, &a, t, len, 0), 0);
	usleep(2000);
	CHECK_EQ_INT(fp_table_cache_store(c, &b, t, len, 0), 0);
	usleep(2000);
	CHECK_EQ_INT(fp_table_cache_load(c, &a, &got, &l2, &flags), 0); /* a is used again */
	free(got);
	usleep(2000);
	CHECK_EQ_INT(fp_table_cache_store(c, &d, t, len, 0), 0);
	CHECK(fp_table_cache_has(c, &a));
	CHECK(!fp_table_cache_has(c, &b));
	CHECK(fp_table_cache_has(c, &d));
	path_of(dir, &b, path, sizeof(path));
	CHECK_EQ_INT(file_size(path), -1);
	fp_table_cache_stats(c, &st);
	CHECK_EQ_INT(st.tc_evicted, 1);
	CHECK_EQ_INT(st.tc_files, 2);
	CHECK(st.tc_bytes <= 2 * (HDR + len) + 10);
	/* A table larger than the whole bound is held in memory only. */
	fp_table_cache_close(c);
	CHECK_EQ_INT(fp_table_cache_open(&c, dir, HDR + len - 1), 0);
	if (c) {
		/* reopened under a bound smaller than one file: none stays */
		fp_table_cache_stats(c, &st);
		CHECK_EQ_INT(st.tc_files, 0);
		CHECK_EQ_INT(fp_table_cache_store(c, &a, t, len, 0), -E2BIG);
		fp_table_cache_close(c);
	}
	free(t);
}

/* write_raw: a file of the given bytes in dir, named after id. */
static void write_raw(const char *dir, const struct fp_build_id *id, const void *buf, size_t len)
{
	char path[256];
	FILE *f;

	path_of(dir, id, path, sizeof(path));
	if ((f = fopen(path, "w"))) {
		fwrite(buf, 1, len, f);
		fclose(f);
	}
}

static void *read_raw(const char *dir, const struct fp_build_id *id, size_t *len)
{
	char path[256];
	long n;
	void *buf;
	FILE *f;

	path_of(dir, id, path, sizeof(path));
	n = file_size(path);
	if (n < 0 || !(buf = malloc((size_t)n + 1)) || !(f = fopen(path, "r")))
		return NULL;
	*len = fread(buf, 1, (size_t)n, f);
	fclose(f);
	return buf;
}

/* Every way a file goes bad is caught before its table is used: the
 * file is removed and counted, and load says -EINVAL (or the scan at open
 * drops it).  A wrong answer here installs wrong unwind rules. */
static void test_corrupt_files(void)
{
	struct fp_build_id a = bid(0xa1), b = bid(0xb2), e = bid(0xe5), f = bid(0xf6),
			   g = bid(0x77), h = bid(0x88);
	struct fp_table_cache *c = NULL;
	struct fp_table_cache_stats st;
	char dir[128], path[256];
	size_t len, flen = 0, glen;
	void *t = table(100, 0, &len), *file, *got = NULL, *bad;

	fresh_dir("corrupt", dir, sizeof(dir));
	CHECK_EQ_INT(fp_table_cache_open(&c, dir, 1 << 20), 0);
	if (!c || !t)
		return;
	CHECK_EQ_INT(fp_table_cache_store(c, &a, t, len, 0), 0);
	fp_table_cache_close(c);
	file = read_raw(dir, &a, &flen);
	CHECK(file && flen == HDR + len);
	if (!file)
		return;
	/* b: a's file under b's name (the build-ID inside is a's) */
	write_raw(dir, &b, file, flen);
	/* e: truncated by a crash mid-write */
	write_raw(dir, &e, file, flen - 8);
	/* a: one bit of a row flipped: the id no longer matches */
	((uint8_t *)file)[HDR + len - 3] ^= 0x10;
	write_raw(dir, &a, file, flen);
	/* f: a table that is not well-formed (rows out of order), with a
	 * header and id that match it */
	bad = table(100, 0, &len);
	if (bad) {
		struct fp_unwind_row *r = (struct fp_unwind_row *)((char *)bad + 16);
		uint64_t id;
		r[5].ur_pc = 0;
		id = fp_unwind_table_id(&f, bad, len);
		memcpy((uint8_t *)file + 8, &id, 8);
		memset((uint8_t *)file + 21, 0xf6, 20); /* the build-ID inside */
		memcpy((uint8_t *)file + HDR, bad, len);
		write_raw(dir, &f, file, flen);
		free(bad);
	}
	/* g: garbage of a plausible size; h: empty */
	memset(file, 0x5a, flen);
	write_raw(dir, &g, file, flen);
	write_raw(dir, &h, file, 0);
	/* a temporary file a crash left, and a file that is not ours */
	snprintf(path, sizeof(path), "%s/.tmp-0011.table", dir);
	fclose(fopen(path, "w"));
	snprintf(path, sizeof(path), "%s/README", dir);
	fclose(fopen(path, "w"));
	free(file);

	CHECK_EQ_INT(fp_table_cache_open(&c, dir, 1 << 20), 0);
	if (!c)
		return;
	fp_table_cache_stats(c, &st);
	CHECK_EQ_INT(st.tc_bad, 4); /* b, e, g, h: at the scan */
	CHECK(!fp_table_cache_has(c, &b) && !fp_table_cache_has(c, &e) &&
	      !fp_table_cache_has(c, &g) && !fp_table_cache_has(c, &h));
	CHECK_EQ_INT(fp_table_cache_load(c, &a, &got, &glen, &flags),
		     -EINVAL); /* the flipped bit */
	CHECK_EQ_INT(fp_table_cache_load(c, &f, &got, &glen, &flags),
		     -EINVAL); /* not well-formed */
	CHECK_EQ_INT(fp_table_cache_load(c, &a, &got, &glen, &flags), -ENOENT); /* gone */
	CHECK(got == NULL);
	fp_table_cache_stats(c, &st);
	CHECK_EQ_INT(st.tc_bad, 6);
	CHECK_EQ_INT(st.tc_files, 0);
	CHECK_EQ_INT(st.tc_bytes, 0);
	fp_table_cache_close(c);
	path_of(dir, &a, path, sizeof(path));
	CHECK_EQ_INT(file_size(path), -1);
	snprintf(path, sizeof(path), "%s/.tmp-0011.table", dir);
	CHECK_EQ_INT(file_size(path), -1);
	snprintf(path, sizeof(path), "%s/README", dir);
	CHECK_EQ_INT(file_size(path), 0); /* left alone */
	free(t);
}

/* Random bytes under table names never crash the cache, and none is
 * ever loaded. */
static void test_random_files(void)
{
	struct fp_table_cache *c = NULL;
	struct fp_table_cache_stats st;
	uint8_t buf[HDR + 256];
	uint64_t rng = 0x9e3779b97f4a7c15ull;
	char dir[128];
	size_t i, k, glen;
	void *got;

	fresh_dir("random", dir, sizeof(dir));
	for (i = 0; i < 64; i++) {
		struct fp_build_id id = bid((uint8_t)(i + 1));
		size_t n = rng % sizeof(buf);
		for (k = 0; k < sizeof(buf); k++) {
			rng ^= rng << 13, rng ^= rng >> 7, rng ^= rng << 17;
			buf[k] = (uint8_t)rng;
		}
		if (i % 2) { /* half with a right-looking header */
			memcpy(buf, "FPTC", 4);
			buf[4] = 1, buf[5] = buf[6] = buf[7] = 0;
			memset(buf + 16, 0, 4);
			buf[16] = (uint8_t)(n > HDR ? n - HDR : 0);
			buf[17] = (uint8_t)((n > HDR ? n - HDR : 0) >> 8);
			buf[20] = 20;
			memcpy(buf + 21, id.fb_data, 20);
		}
		write_raw(dir, &id, buf, n);
	}
	CHECK_EQ_INT(fp_table_cache_open(&c, dir, 1 << 20), 0);
	if (!c)
		return;
	for (i = 0; i < 64; i++) {
		struct fp_build_id id = bid((uint8_t)(i + 1));
		got = NULL;
		CHECK(fp_table_cache_load(c, &id, &got, &glen, &flags) != 0);
		CHECK(got == NULL);
	}
	fp_table_cache_stats(c, &st);
	CHECK_EQ_INT(st.tc_loaded, 0);
	CHECK_EQ_INT(st.tc_bad, 64);
	CHECK_EQ_INT(st.tc_files, 0);
	fp_table_cache_close(c);
}

/* A directory others may write, or a file where the directory should be:
 * refused, so that the agent runs without (and says so). */
static void test_refused_dirs(void)
{
	struct fp_table_cache *c = NULL;
	char dir[128], path[256];
	FILE *f;

	fresh_dir("open", dir, sizeof(dir));
	chmod(dir, 0777);
	CHECK_EQ_INT(fp_table_cache_open(&c, dir, 1 << 20), -EPERM);
	snprintf(path, sizeof(path), "%s/afile", tmpdir);
	if ((f = fopen(path, "w")))
		fclose(f);
	CHECK_EQ_INT(fp_table_cache_open(&c, path, 1 << 20), -ENOTDIR);
	snprintf(path, sizeof(path), "%s/no/such/dir", tmpdir);
	CHECK_EQ_INT(fp_table_cache_open(&c, path, 1 << 20), -ENOENT);
	/* made when missing, 0700 */
	snprintf(path, sizeof(path), "%s/made", tmpdir);
	CHECK_EQ_INT(fp_table_cache_open(&c, path, 1 << 20), 0);
	fp_table_cache_close(c);
	{
		struct stat st;
		CHECK(stat(path, &st) == 0 && S_ISDIR(st.st_mode) && (st.st_mode & 0777) == 0700);
	}
}

static int installed_a(const struct fp_build_id *id, void *arg)
{
	return id->fb_data[0] == 0xa1;
}

/* Without a directory, the tables installed are held all the same (a
 * symbolizer restart sends none again), while they are installed; the
 * list is most recently used first, and cut at max. */
static void test_memory_only(void)
{
	struct fp_table_cache *c = NULL;
	struct fp_build_id a = bid(0xa1), b = bid(0xb2);
	struct fp_held_table held[2];
	size_t len, glen;
	void *t = table(10, 0, &len), *got = NULL;

	CHECK_EQ_INT(fp_table_cache_open(&c, NULL, 0), 0);
	if (!c || !t)
		return;
	CHECK(fp_table_cache_dir(c) == NULL);
	CHECK_EQ_INT(fp_table_cache_store(c, &a, t, len, 0), 0);
	CHECK_EQ_INT(fp_table_cache_store(c, &b, t, len, 0), 0);
	CHECK_EQ_INT(fp_table_cache_load(c, &a, &got, &glen, &flags), -ENOENT);
	CHECK(!fp_table_cache_has(c, &a));
	CHECK_EQ_INT(fp_table_cache_held(c, NULL, NULL, held, 2), 0);
	CHECK_EQ_INT(fp_table_cache_held(c, installed_a, NULL, held, 2), 1);
	CHECK(fp_build_id_eq(&held[0].ht_build_id, &a));
	CHECK(held[0].ht_id == fp_unwind_table_id(&a, t, len));
	fp_table_cache_drop(c, &a);
	CHECK_EQ_INT(fp_table_cache_held(c, installed_a, NULL, held, 2), 0);
	fp_table_cache_close(c);
	free(t);
}

/* The held list: most recently used first, at most max. */
static void test_held_order(void)
{
	struct fp_table_cache *c = NULL;
	struct fp_held_table held[3];
	char dir[128];
	size_t len;
	void *t = table(10, 0, &len);
	int i;

	fresh_dir("order", dir, sizeof(dir));
	CHECK_EQ_INT(fp_table_cache_open(&c, dir, 1 << 20), 0);
	if (!c || !t)
		return;
	for (i = 1; i <= 3; i++) {
		struct fp_build_id id = bid((uint8_t)i);
		CHECK_EQ_INT(fp_table_cache_store(c, &id, t, len, 0), 0);
		usleep(1000);
	}
	CHECK_EQ_INT(fp_table_cache_held(c, NULL, NULL, held, 2), 2);
	CHECK_EQ_INT(held[0].ht_build_id.fb_data[0], 3);
	CHECK_EQ_INT(held[1].ht_build_id.fb_data[0], 2);
	fp_table_cache_close(c);
	free(t);
}

int main(void)
{
	if (check_tmpdir(tmpdir, sizeof(tmpdir), "table_cache_test"))
		return 1;
	RUN(test_roundtrip);
	RUN(test_bound_lru);
	RUN(test_corrupt_files);
	RUN(test_random_files);
	RUN(test_refused_dirs);
	RUN(test_memory_only);
	RUN(test_held_order);
	if (check_rmtree(tmpdir))
		fprintf(stderr, "table_cache_test: cannot remove %s\n", tmpdir);
	return CHECK_DONE();
}
