/* tablestore_test.c: the symbolizer's unwind tables in memory
 * (tablestore.h): read from the cache once for every session, named by
 * their id, dropped past the bound only when no reply points into them. */
#include <errno.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "check.h"
#include "symcache.h"
#include "tablestore.h"
#include "unwind.h"
#include "unwind_table.h"

static char tmpdir[64];
static struct fp_resolver *resolver;

#define ROWS 1000
static const struct fp_build_id id_a = { .fb_len = 20, .fb_data = { 0xa1 } };
static const struct fp_build_id id_b = { .fb_len = 20, .fb_data = { 0xb2 } };
static const struct fp_build_id id_none = { .fb_len = 20, .fb_data = { 0xc3 } };

/* table: a table of ROWS rows, walked by table (no frame pointers); the
 * first row's pc is first, so that A's and B's bytes differ. */
static struct fp_unwind_header *table(uint32_t first, size_t *len)
{
	struct fp_unwind_header *h;
	struct fp_unwind_row *rows;
	int i;

	*len = sizeof(*h) + ROWS * sizeof(struct fp_unwind_row);
	if (!(h = calloc(1, *len)))
		return NULL;
	rows = (struct fp_unwind_row *)(h + 1);
	memcpy(h->uh_magic, FP_UNWIND_MAGIC, 4);
	h->uh_version = FP_UNWIND_VERSION;
	h->uh_arch = FP_UNWIND_ARCH_X86_64;
	h->uh_nrows = ROWS;
	for (i = 0; i < ROWS; i++)
		rows[i] = (struct fp_unwind_row){ .ur_pc = first + (uint32_t)i * 16, .ur_cfa = 8 };
	return h;
}

static int put_tables(void)
{
	struct fp_symcache *c = NULL;
	struct fp_unwind_header *a, *b;
	size_t la, lb;
	int err = -ENOMEM;

	a = table(0, &la);
	b = table(8, &lb);
	if (a && b && !(err = fp_symcache_open(&c, tmpdir))) {
		err = fp_symcache_put_unwind(c, &id_a, a, la)
			      ?: fp_symcache_put_unwind(c, &id_b, b, lb);
		fp_symcache_close(c);
	}
	free(a);
	free(b);
	return err;
}

/* Asked twice, read once: the second ask is the same copy. */
static void test_read_once(void)
{
	struct fp_stored_table *t1 = NULL, *t2 = NULL;
	struct fp_tablestore_stats st;
	struct fp_tablestore *ts;
	size_t len;
	struct fp_unwind_header *a = table(0, &len);

	CHECK_EQ_INT(fp_tablestore_alloc(&ts, resolver, 0), 0);
	CHECK_EQ_INT(fp_tablestore_get(ts, &id_a, &t1), 0);
	CHECK_EQ_INT(fp_tablestore_get(ts, &id_a, &t2), 0);
	CHECK(t1 && t1 == t2);
	if (t1 && a) {
		CHECK_EQ_INT(t1->st_len, len);
		CHECK(!memcmp(t1->st_blob, a, len));
		CHECK(t1->st_id == fp_unwind_table_id(&id_a, a, len));
		CHECK(t1->st_needed);
	}
	fp_tablestore_stats(ts, &st);
	CHECK_EQ_INT(st.ts_reads, 1);
	CHECK_EQ_INT(st.ts_hits, 1);
	CHECK_EQ_INT(st.ts_tables, 1);
	CHECK_EQ_INT(st.ts_bytes, len);
	/* No table on this host: the resolver's answer (only a device may
	 * have its CFI), and nothing kept. */
	CHECK_EQ_INT(fp_tablestore_get(ts, &id_none, &t2), -ENODATA);
	fp_tablestore_put(t1);
	fp_tablestore_put(t1);
	fp_tablestore_free(ts);
	free(a);
}

/* Two tables of the same bytes under two build-IDs have two ids. */
static void test_ids_differ(void)
{
	struct fp_stored_table *ta = NULL, *tb = NULL;
	struct fp_tablestore *ts;

	CHECK_EQ_INT(fp_tablestore_alloc(&ts, resolver, 0), 0);
	CHECK_EQ_INT(fp_tablestore_get(ts, &id_a, &ta), 0);
	CHECK_EQ_INT(fp_tablestore_get(ts, &id_b, &tb), 0);
	CHECK(ta && tb && ta->st_id != tb->st_id);
	fp_tablestore_put(ta);
	fp_tablestore_put(tb);
	fp_tablestore_free(ts);
}

/* Over the bound, a table goes when its last reference does, not before:
 * a reply being encoded still points into it. */
static void test_bound(void)
{
	struct fp_stored_table *ta = NULL, *tb = NULL;
	struct fp_tablestore_stats st;
	struct fp_tablestore *ts;

	CHECK_EQ_INT(fp_tablestore_alloc(&ts, resolver, 1), 0);
	CHECK_EQ_INT(fp_tablestore_get(ts, &id_a, &ta), 0);
	CHECK_EQ_INT(fp_tablestore_get(ts, &id_b, &tb), 0);
	if (ta)
		fp_tablestore_ref(ta); /* a second part of A in a reply */
	fp_tablestore_stats(ts, &st);
	CHECK_EQ_INT(st.ts_tables, 2);
	CHECK_EQ_INT(st.ts_evicted, 0);
	fp_tablestore_put(tb);
	fp_tablestore_stats(ts, &st);
	CHECK_EQ_INT(st.ts_tables, 1); /* B went, A is referenced */
	CHECK_EQ_INT(st.ts_evicted, 1);
	fp_tablestore_put(ta);
	fp_tablestore_stats(ts, &st);
	CHECK_EQ_INT(st.ts_tables, 1); /* one reference left */
	fp_tablestore_release(ta);
	fp_tablestore_stats(ts, &st);
	CHECK_EQ_INT(st.ts_tables, 0);
	CHECK_EQ_INT(st.ts_bytes, 0);
	CHECK_EQ_INT(st.ts_evicted, 2);
	/* Asked again: read again. */
	CHECK_EQ_INT(fp_tablestore_get(ts, &id_a, &ta), 0);
	fp_tablestore_stats(ts, &st);
	CHECK_EQ_INT(st.ts_reads, 3);
	fp_tablestore_put(ta);
	fp_tablestore_free(ts);
}

int main(void)
{
	struct fp_resolver_opts ro = { .ro_cache_dir = tmpdir };

	if (check_tmpdir(tmpdir, sizeof(tmpdir), "tablestore_test") || put_tables() ||
	    fp_resolver_open(&resolver, &ro)) {
		fprintf(stderr, "tablestore_test: cannot open a resolver in %s\n", tmpdir);
		return 1;
	}
	RUN(test_read_once);
	RUN(test_ids_differ);
	RUN(test_bound);
	fp_resolver_close(resolver);
	if (check_rmtree(tmpdir))
		fprintf(stderr, "tablestore_test: cannot remove %s\n", tmpdir);
	return CHECK_DONE();
}
