/* symcache_test.c: the LMDB cache of symbol tables. */
#include <errno.h>
#include <lmdb.h>
#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "check.h"
#include "symcache.h"
#include "symtab.h"
#include "unwind_table.h"

static char tmpdir[64];
static char cachedir[128];

static struct fp_build_id make_id(uint8_t seed, uint8_t len)
{
	struct fp_build_id id = { .fb_len = len };

	for (int i = 0; i < len; i++)
		id.fb_data[i] = (uint8_t)(seed * 31 + i);
	return id;
}

/* make_blob: a table with one function "name" at addr. */
static void *make_blob(const char *name, uint64_t addr, size_t *len)
{
	struct fp_symtab_builder *b = NULL;
	void *blob = NULL;

	if (fp_symtab_builder_alloc(&b) != 0)
		return NULL;
	if (fp_symtab_builder_add_segment(b, 0x1000, addr & ~0xfffull, 0x10000) != 0 ||
	    fp_symtab_builder_add_symbol(b, addr, 0x100, name, NULL) != 0 ||
	    fp_symtab_builder_finish(b, &blob, len) != 0)
		blob = NULL;
	fp_symtab_builder_free(b);
	return blob;
}

/* name_at: the name found at addr in id's table, or an errno text. */
static int lookup_in(struct fp_symcache *c, const struct fp_build_id *id, uint64_t addr, char *name,
		     size_t namelen)
{
	struct fp_symcache_txn *txn = NULL;
	struct fp_symtab t;
	struct fp_symbol s;
	int err;

	err = fp_symcache_begin(c, &txn);
	if (err)
		return err;
	err = fp_symcache_get(txn, id, &t);
	if (!err)
		err = fp_symtab_lookup(&t, addr, &s);
	if (!err)
		snprintf(name, namelen, "%s", s.sy_name);
	fp_symcache_end(txn);
	return err;
}

/* setup: the scratch directory, and a cache path under parents that do
 * not exist yet (open creates them).  0 or -1. */
static int setup(void)
{
	if (check_tmpdir(tmpdir, sizeof(tmpdir), "symcache_test"))
		return -1;
	snprintf(cachedir, sizeof(cachedir), "%s/var/cache/symbols", tmpdir);
	return 0;
}

static void test_put_get(void)
{
	struct fp_symcache *c = NULL;
	struct fp_symcache_txn *txn = NULL;
	struct fp_build_id id1 = make_id(1, 20), id2 = make_id(2, 20), shortid = make_id(1, 8);
	struct fp_symtab t;
	struct fp_symbol s;
	struct stat st;
	size_t len = 0;
	void *blob = make_blob("alpha", 0x401000, &len);
	uint64_t a = 0;

	CHECK(blob != NULL);
	CHECK_EQ_INT(fp_symcache_open(&c, cachedir), 0);
	if (!c)
		return;
	CHECK(stat(cachedir, &st) == 0 && S_ISDIR(st.st_mode));
	CHECK_EQ_INT(fp_symcache_put(c, &id1, blob, len), 0);

	CHECK_EQ_INT(fp_symcache_begin(c, &txn), 0);
	CHECK_EQ_INT(fp_symcache_get(txn, &id1, &t), 0);
	/* zero copy: the table lives in the map, not in our buffer */
	CHECK(t.st_base != blob);
	CHECK_EQ_INT(t.st_len, len);
	CHECK_EQ_INT(fp_symtab_lookup(&t, 0x401080, &s), 0);
	CHECK(strcmp(s.sy_name, "alpha") == 0);
	CHECK_EQ_INT(fp_symtab_addr(&t, 0x1080, &a), 0);
	CHECK_EQ_INT(a, 0x401080);
	/* Many look-ups through one transaction. */
	for (uint64_t x = 0x401000; x < 0x401100; x++)
		CHECK_EQ_INT(fp_symtab_lookup(&t, x, &s), 0);
	CHECK_EQ_INT(fp_symtab_lookup(&t, 0x401100, &s), -ENOENT);
	/* Missing, and a prefix of a stored key, are both missing. */
	CHECK_EQ_INT(fp_symcache_get(txn, &id2, &t), -ENOENT);
	CHECK_EQ_INT(fp_symcache_get(txn, &shortid, &t), -ENOENT);
	fp_symcache_end(txn);
	fp_symcache_end(NULL);

	/* Survives close and reopen. */
	fp_symcache_close(c);
	c = NULL;
	CHECK_EQ_INT(fp_symcache_open(&c, cachedir), 0);
	if (c) {
		char name[64] = "";

		CHECK_EQ_INT(lookup_in(c, &id1, 0x4010ff, name, sizeof(name)), 0);
		CHECK(strcmp(name, "alpha") == 0);
		CHECK_EQ_INT(lookup_in(c, &id2, 0x4010ff, name, sizeof(name)), -ENOENT);
	}
	fp_symcache_close(c);
	fp_symcache_close(NULL);
	free(blob);
}

static void test_overwrite_and_snapshots(void)
{
	struct fp_symcache *c = NULL;
	struct fp_symcache_txn *old = NULL;
	struct fp_build_id id = make_id(7, 16);
	struct fp_symtab t;
	struct fp_symbol s;
	size_t l1 = 0, l2 = 0;
	void *b1 = make_blob("before", 0x2000, &l1), *b2 = make_blob("after", 0x2000, &l2);
	char name[64] = "";

	CHECK_EQ_INT(fp_symcache_open(&c, cachedir), 0);
	if (!c)
		return;
	CHECK_EQ_INT(fp_symcache_put(c, &id, b1, l1), 0);
	CHECK_EQ_INT(fp_symcache_begin(c, &old), 0);
	CHECK_EQ_INT(fp_symcache_put(c, &id, b2, l2), 0);

	/* A transaction begun before the write still sees its snapshot. */
	CHECK_EQ_INT(fp_symcache_get(old, &id, &t), 0);
	CHECK_EQ_INT(fp_symtab_lookup(&t, 0x2010, &s), 0);
	CHECK(strcmp(s.sy_name, "before") == 0);
	CHECK_EQ_INT(lookup_in(c, &id, 0x2010, name, sizeof(name)), 0);
	CHECK(strcmp(name, "after") == 0);
	fp_symcache_end(old);
	fp_symcache_close(c);
	free(b1);
	free(b2);
}

static void test_bad_input(void)
{
	struct fp_symcache *c = NULL;
	struct fp_symcache_txn *txn = NULL;
	struct fp_build_id none = { 0 }, id = make_id(3, 20), toolong = make_id(3, 20);
	struct fp_symtab t;
	size_t len = 0;
	void *blob = make_blob("x", 0x1000, &len);
	char path[160];
	FILE *f;

	toolong.fb_len = FP_BUILD_ID_MAX + 1;
	CHECK_EQ_INT(fp_symcache_open(&c, cachedir), 0);
	if (!c)
		return;
	CHECK_EQ_INT(fp_symcache_put(c, &none, blob, len), -EINVAL);
	CHECK_EQ_INT(fp_symcache_put(c, &toolong, blob, len), -EINVAL);
	/* Not a table: refused before it reaches the disk. */
	CHECK_EQ_INT(fp_symcache_put(c, &id, "garbage", 7), -EINVAL);
	CHECK_EQ_INT(fp_symcache_put(c, &id, blob, len - 1), -EINVAL);
	CHECK_EQ_INT(fp_symcache_begin(c, &txn), 0);
	CHECK_EQ_INT(fp_symcache_get(txn, &none, &t), -EINVAL);
	CHECK_EQ_INT(fp_symcache_get(txn, &id, &t), -ENOENT);
	fp_symcache_end(txn);
	fp_symcache_close(c);

	/* A regular file where the directory should be. */
	snprintf(path, sizeof(path), "%s/afile", tmpdir);
	f = fopen(path, "w");
	if (f)
		fclose(f);
	c = NULL;
	CHECK(fp_symcache_open(&c, path) < 0);
	CHECK(c == NULL);
	snprintf(path, sizeof(path), "%s/afile/sub", tmpdir);
	CHECK(fp_symcache_open(&c, path) < 0);
	free(blob);
}

/* Values damaged behind the cache's back (disk corruption) are reported
 * as -EINVAL, never trusted; a table of another format version (an older
 * fleetprof's) reads as absent, and storing the table again replaces it. */
static void test_corrupt_value(void)
{
	struct fp_build_id garbage_id = make_id(10, 20), cut_id = make_id(11, 20),
			   flip_id = make_id(12, 20), stale_id = make_id(13, 20);
	struct fp_symcache *c = NULL;
	struct fp_symcache_txn *txn = NULL;
	struct fp_symtab t;
	MDB_env *env = NULL;
	MDB_txn *wtxn = NULL;
	MDB_dbi dbi;
	MDB_val k, v;
	size_t len = 0;
	uint8_t *blob = make_blob("victim", 0x1000, &len);

	CHECK(blob != NULL);
	if (!blob)
		return;
	/* Write with LMDB directly: the cache itself refuses bad values. */
	CHECK_EQ_INT(mdb_env_create(&env), 0);
	CHECK_EQ_INT(mdb_env_set_mapsize(env, 64ull << 30), 0);
	CHECK_EQ_INT(mdb_env_open(env, cachedir, MDB_NOTLS, 0644), 0);
	CHECK_EQ_INT(mdb_txn_begin(env, NULL, 0, &wtxn), 0);
	CHECK_EQ_INT(mdb_dbi_open(wtxn, NULL, 0, &dbi), 0);
	k.mv_size = garbage_id.fb_len;
	k.mv_data = garbage_id.fb_data;
	v.mv_size = 11;
	v.mv_data = "not a blob";
	CHECK_EQ_INT(mdb_put(wtxn, dbi, &k, &v, 0), 0);
	k.mv_data = cut_id.fb_data;
	v.mv_size = len / 2;
	v.mv_data = blob;
	CHECK_EQ_INT(mdb_put(wtxn, dbi, &k, &v, 0), 0);
	blob[4] = 2; /* format 2, whose frame names kept symbol versions */
	k.mv_data = stale_id.fb_data;
	v.mv_size = len;
	CHECK_EQ_INT(mdb_put(wtxn, dbi, &k, &v, 0), 0);
	blob[4] = FP_SYMTAB_VERSION;
	blob[0] ^= 0x20; /* magic */
	k.mv_data = flip_id.fb_data;
	CHECK_EQ_INT(mdb_put(wtxn, dbi, &k, &v, 0), 0);
	CHECK_EQ_INT(mdb_txn_commit(wtxn), 0);
	mdb_env_close(env);

	CHECK_EQ_INT(fp_symcache_open(&c, cachedir), 0);
	if (!c)
		return;
	CHECK_EQ_INT(fp_symcache_begin(c, &txn), 0);
	t.st_nsymbols = 12345;
	CHECK_EQ_INT(fp_symcache_get(txn, &garbage_id, &t), -EINVAL);
	CHECK_EQ_INT(fp_symcache_get(txn, &cut_id, &t), -EINVAL);
	CHECK_EQ_INT(fp_symcache_get(txn, &flip_id, &t), -EINVAL);
	CHECK_EQ_INT(fp_symcache_get(txn, &stale_id, &t), -ENOENT);
	CHECK_EQ_INT(t.st_nsymbols, 12345); /* untouched on failure */
	fp_symcache_end(txn);
	blob[0] ^= 0x20;
	CHECK_EQ_INT(fp_symcache_put(c, &stale_id, blob, len), 0);
	CHECK_EQ_INT(fp_symcache_begin(c, &txn), 0);
	CHECK_EQ_INT(fp_symcache_get(txn, &stale_id, &t), 0);
	CHECK_EQ_INT(t.st_nsymbols, 1);
	fp_symcache_end(txn);
	fp_symcache_close(c);
	free(blob);
}

struct writer_arg {
	struct fp_symcache *c;
	int first;
	int err;
};

enum { NWRITERS = 4, PER_WRITER = 25 };

static void *writer(void *p)
{
	struct writer_arg *w = p;

	for (int i = w->first; i < w->first + PER_WRITER && !w->err; i++) {
		struct fp_build_id id = make_id((uint8_t)(100 + i), 20);
		char name[32];
		size_t len = 0;
		void *blob;

		snprintf(name, sizeof(name), "fn_%d", i);
		blob = make_blob(name, 0x1000 + (uint64_t)i * 0x1000, &len);
		w->err = blob ? fp_symcache_put(w->c, &id, blob, len) : -ENOMEM;
		free(blob);
	}
	return NULL;
}

struct reader_arg {
	struct fp_symcache_txn *txn;
	int err;
};

static void *reader(void *p)
{
	struct reader_arg *r = p;
	struct fp_build_id id = make_id(100, 20);
	struct fp_symtab t;
	struct fp_symbol s;

	r->err = fp_symcache_get(r->txn, &id, &t);
	if (!r->err)
		r->err = fp_symtab_lookup(&t, 0x1000, &s);
	if (!r->err && strcmp(s.sy_name, "fn_0") != 0)
		r->err = -EINVAL;
	return NULL;
}

/* Concurrent writers are serialised; a read transaction can move between
 * threads (MDB_NOTLS). */
static void test_threads(void)
{
	struct fp_symcache *c = NULL;
	struct fp_symcache_txn *txn = NULL;
	struct writer_arg w[NWRITERS];
	pthread_t th[NWRITERS];
	struct reader_arg r = { 0 };
	pthread_t rt;

	CHECK_EQ_INT(fp_symcache_open(&c, cachedir), 0);
	if (!c)
		return;
	for (int i = 0; i < NWRITERS; i++) {
		w[i] = (struct writer_arg){ .c = c, .first = i * PER_WRITER };
		CHECK_EQ_INT(pthread_create(&th[i], NULL, writer, &w[i]), 0);
	}
	for (int i = 0; i < NWRITERS; i++) {
		pthread_join(th[i], NULL);
		CHECK_EQ_INT(w[i].err, 0);
	}
	for (int i = 0; i < NWRITERS * PER_WRITER; i++) {
		struct fp_build_id id = make_id((uint8_t)(100 + i), 20);
		char name[32] = "", want[32];

		snprintf(want, sizeof(want), "fn_%d", i);
		CHECK_EQ_INT(lookup_in(c, &id, 0x1000 + (uint64_t)i * 0x1000 + 5, name,
				       sizeof(name)),
			     0);
		CHECK(strcmp(name, want) == 0);
	}

	/* Begun here, used on another thread, ended here. */
	CHECK_EQ_INT(fp_symcache_begin(c, &txn), 0);
	r.txn = txn;
	CHECK_EQ_INT(pthread_create(&rt, NULL, reader, &r), 0);
	pthread_join(rt, NULL);
	CHECK_EQ_INT(r.err, 0);
	fp_symcache_end(txn);
	fp_symcache_close(c);
}

/* raw_unwind_db: whether dir's environment holds the named database
 * name, with blob stored under id first when blob is not NULL (a cache
 * written by an older symbolizer).  1, 0, or -1 on an LMDB error. */
static int raw_unwind_db(const char *dir, const char *name, const struct fp_build_id *id,
			 const void *blob, size_t len)
{
	MDB_val k = { id->fb_len, (void *)id->fb_data }, v = { len, (void *)blob };
	MDB_env *env;
	MDB_txn *txn;
	MDB_dbi dbi;
	int rc, has = -1;

	if (mdb_env_create(&env))
		return -1;
	mdb_env_set_maxdbs(env, 4);
	mdb_env_set_mapsize(env, 64ull << 30);
	if (mdb_env_open(env, dir, MDB_NOTLS, 0644) || mdb_txn_begin(env, NULL, 0, &txn))
		goto out;
	rc = mdb_dbi_open(txn, name, blob ? MDB_CREATE : 0, &dbi);
	if (rc == 0 && blob)
		rc = mdb_put(txn, dbi, &k, &v, 0);
	has = rc == 0 ? 1 : rc == MDB_NOTFOUND ? 0 : -1;
	if (mdb_txn_commit(txn))
		has = -1;
out:
	mdb_env_close(env);
	return has;
}

/* Tables of an earlier revision of the compiler, in the same format (the
 * ones from before cfi.c kept a row at every function's start): absent,
 * so compiled again, and their database dropped; tables of this revision
 * are kept across a reopen. */
static void test_unwind_revision(void)
{
	struct fp_build_id id = make_id(20, 20);
	struct {
		struct fp_unwind_header h;
		struct fp_unwind_row r[2];
	} table = { { { 'F', 'P', 'U', 'W' }, FP_UNWIND_VERSION, FP_UNWIND_ARCH_X86_64, 0, 2, 1 },
		    { { 0x100, 1, FP_UNWIND_SP, 0 }, { 0x104, 2, FP_UNWIND_SP, 0 } } };
	struct fp_symcache *c = NULL;
	char dir[160];
	void *got = NULL;
	size_t glen = 0;

	snprintf(dir, sizeof(dir), "%s/revision", tmpdir);
	CHECK_EQ_INT(mkdir(dir, 0755), 0);
	CHECK_EQ_INT(raw_unwind_db(dir, "unwind", &id, &table, sizeof(table)), 1);
	CHECK_EQ_INT(fp_symcache_open(&c, dir), 0);
	if (!c)
		return;
	CHECK_EQ_INT(fp_symcache_get_unwind(c, &id, &got, &glen), -ENOENT);
	CHECK_EQ_INT(fp_symcache_put_unwind(c, &id, &table, sizeof(table)), 0);
	fp_symcache_close(c);
	CHECK_EQ_INT(raw_unwind_db(dir, "unwind", &id, NULL, 0), 0);
	CHECK_EQ_INT(raw_unwind_db(dir, FP_SYMCACHE_UNWIND_DB, &id, NULL, 0), 1);
	c = NULL;
	CHECK_EQ_INT(fp_symcache_open(&c, dir), 0);
	if (!c)
		return;
	CHECK_EQ_INT(fp_symcache_get_unwind(c, &id, &got, &glen), 0);
	CHECK(glen == sizeof(table) && got && !memcmp(got, &table, sizeof(table)));
	free(got);
	fp_symcache_close(c);
}

int main(void)
{
	int rc;

	if (setup())
		return 1;
	RUN(test_put_get);
	RUN(test_overwrite_and_snapshots);
	RUN(test_bad_input);
	RUN(test_corrupt_value);
	RUN(test_threads);
	RUN(test_unwind_revision);
	rc = CHECK_DONE();
	if (check_rmtree(tmpdir))
		rc = 1;
	return rc;
}
