/* namestacks_test.c: profile files read back as stacks of names, and the
 * views of top.h over them: folded and pprof (plain and gzip'd) give the
 * same stacks; inline lines, recursion, process labels and sample types
 * are read as `go tool pprof` reads them; malformed files are refused
 * whole with a reason, never half read. */
#include "check.h"
#include "gzip.h"
#include "namestacks.h"
#include "pprof.pb-c.h"
#include "top.h"

#include <errno.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <zlib.h>

/* A small pprof profile, built field by field. */
struct pb {
	Perftools__Profiles__Profile p;
	char *strings[32];
	Perftools__Profiles__ValueType vt[2], *vtp[2];
	Perftools__Profiles__Function fn[8], *fnp[8];
	Perftools__Profiles__Line line[8], *linep[8];
	Perftools__Profiles__Location loc[8], *locp[8];
	Perftools__Profiles__Sample s[8], *sp[8];
	uint64_t ids[8][8];
	int64_t values[8][2];
	Perftools__Profiles__Label lab[8], *labp[8];
};

static int64_t str(struct pb *b, const char *s)
{
	size_t i;

	for (i = 0; i < b->p.n_string_table; i++)
		if (!strcmp(b->strings[i], s))
			return (int64_t)i;
	b->strings[b->p.n_string_table] = (char *)s;
	return (int64_t)b->p.n_string_table++;
}

/* Functions: 1 main, 2 work, 3 leaf (inlined into work at location 2),
 * 4 fib (recursive).  Locations: 1 main, 2 leaf+work (inline), 3 fib, 4 an
 * address without lines in libx.so (mapping 1).  Samples, leaf first, two
 * values (samples, cpu ns), process labels:
 *   A: 2 main            (3, 30)  "p1"
 *   B: 3 3 3 1 main      (5, 50)  "p1"   fib recursing
 *   C: 4 2 1             (2, 20)  "p2"   an address, then leaf<-work<-main */
static void build(struct pb *b)
{
	static Perftools__Profiles__Mapping map, *mapp[1];
	const char *names[4] = { "main", "work", "leaf", "fib" };
	int i;

	memset(b, 0, sizeof(*b));
	perftools__profiles__profile__init(&b->p);
	b->p.string_table = b->strings;
	str(b, "");
	for (i = 0; i < 2; i++) {
		perftools__profiles__value_type__init(&b->vt[i]);
		b->vt[i].type = str(b, i ? "cpu" : "samples");
		b->vt[i].unit = str(b, i ? "nanoseconds" : "count");
		b->vtp[i] = &b->vt[i];
	}
	b->p.sample_type = b->vtp;
	b->p.n_sample_type = 2;
	for (i = 0; i < 4; i++) {
		perftools__profiles__function__init(&b->fn[i]);
		b->fn[i].id = (uint64_t)i + 1;
		b->fn[i].name = str(b, names[i]);
		b->fn[i].filename = str(b, "x.c");
		b->fnp[i] = &b->fn[i];
	}
	b->p.function = b->fnp;
	b->p.n_function = 4;
	perftools__profiles__mapping__init(&map);
	map.id = 1;
	map.filename = str(b, "/usr/lib/libx.so");
	mapp[0] = &map;
	b->p.mapping = mapp;
	b->p.n_mapping = 1;
	/* lines: loc 1 -> main; loc 2 -> leaf, work; loc 3 -> fib */
	uint64_t line_fn[4] = { 1, 3, 2, 4 };
	for (i = 0; i < 4; i++) {
		perftools__profiles__line__init(&b->line[i]);
		b->line[i].function_id = line_fn[i];
		b->linep[i] = &b->line[i];
	}
	for (i = 0; i < 4; i++) {
		perftools__profiles__location__init(&b->loc[i]);
		b->loc[i].id = (uint64_t)i + 1;
		b->locp[i] = &b->loc[i];
	}
	b->loc[0].line = &b->linep[0], b->loc[0].n_line = 1;
	b->loc[1].line = &b->linep[1], b->loc[1].n_line = 2;
	b->loc[2].line = &b->linep[3], b->loc[2].n_line = 1;
	b->loc[3].mapping_id = 1, b->loc[3].address = 0x1a2b;
	b->p.location = b->locp;
	b->p.n_location = 4;
	uint64_t stacks[3][5] = { { 2, 1 }, { 3, 3, 3, 1 }, { 4, 2, 1 } };
	size_t depth[3] = { 2, 4, 3 };
	int64_t counts[3] = { 3, 5, 2 };
	const char *procs[3] = { "p1", "p1", "p2" };
	for (i = 0; i < 3; i++) {
		perftools__profiles__sample__init(&b->s[i]);
		memcpy(b->ids[i], stacks[i], sizeof(stacks[i]));
		b->s[i].location_id = b->ids[i];
		b->s[i].n_location_id = depth[i];
		b->values[i][0] = counts[i], b->values[i][1] = counts[i] * 10;
		b->s[i].value = b->values[i];
		b->s[i].n_value = 2;
		perftools__profiles__label__init(&b->lab[i]);
		b->lab[i].key = str(b, "process_name");
		b->lab[i].str = str(b, procs[i]);
		b->labp[i] = &b->lab[i];
		b->s[i].label = &b->labp[i];
		b->s[i].n_label = 1;
		b->sp[i] = &b->s[i];
	}
	b->p.sample = b->sp;
	b->p.n_sample = 3;
}

static uint8_t *pack(struct pb *b, size_t *len)
{
	uint8_t *out = malloc(perftools__profiles__profile__get_packed_size(&b->p));

	*len = perftools__profiles__profile__pack(&b->p, out);
	return out;
}

/* read_bytes: a fresh set read from data; NULL (and the error in err)
 * when refused. */
static struct fp_namestacks *read_bytes(const void *data, size_t len, const char *type, int *e,
					char *err, size_t errlen)
{
	struct fp_namestacks *nk = NULL;

	if (fp_namestacks_alloc(&nk))
		return NULL;
	*e = fp_namestacks_read(nk, data, len, type, err, errlen);
	if (*e) {
		CHECK_EQ_INT(nk->nk_nstacks, 0); /* nothing half read */
		fp_namestacks_free(nk);
		return NULL;
	}
	return nk;
}

static const struct fp_top_row *row(const struct fp_namestacks *nk, const struct fp_top_row *rows,
				    size_t n, const char *name)
{
	for (size_t i = 0; i < n; i++)
		if (!strcmp(fp_namestacks_name(nk, rows[i].tr_name), name))
			return &rows[i];
	return NULL;
}

/* check_top: the self and total of the example, in samples (scale 1) or
 * nanoseconds (scale 10), for every process or only p1. */
static void check_top(const struct fp_namestacks *nk, int64_t scale, int p1_only)
{
	uint32_t p = p1_only ? fp_namestacks_find_process(nk, "p1") : FP_NAME_NONE;
	struct fp_top_row *rows = NULL;
	const struct fp_top_row *r;
	size_t n = 0;
	uint64_t sum = 0;

	CHECK(!p1_only || p != FP_NAME_NONE);
	CHECK_EQ_INT(fp_top_functions(nk, p, FP_TOP_BY_SELF, &rows, &n, &sum), 0);
	CHECK_EQ_INT(sum, (p1_only ? 8 : 10) * scale);
	CHECK_EQ_INT(n, p1_only ? 4 : 5 + (nk->nk_nstacks == 4)); /* main work leaf fib
								 * (libx.so+0x1a2b, read_[k]) */
	/* fib recurses three deep in B: its total counts B once */
	CHECK((r = row(nk, rows, n, "fib")) && r->tr_self == 5 * scale && r->tr_total == 5 * scale);
	CHECK((r = row(nk, rows, n, "main")) && r->tr_self == 0 &&
	      r->tr_total == (p1_only ? 8 : 10) * scale);
	CHECK((r = row(nk, rows, n, "work")) && r->tr_self == 0 &&
	      r->tr_total == (p1_only ? 3 : 5) * scale);
	/* leaf was inlined into work: the innermost line is the sample's leaf */
	CHECK((r = row(nk, rows, n, "leaf")) && r->tr_self == 3 * scale &&
	      r->tr_total == (p1_only ? 3 : 5) * scale);
	if (!p1_only)
		CHECK((r = row(nk, rows, n, "libx.so+0x1a2b")) && r->tr_self == 2 * scale);
	/* by self: fib (5), leaf (3), then the rest by name */
	CHECK(n >= 2 && !strcmp(fp_namestacks_name(nk, rows[0].tr_name), "fib") &&
	      !strcmp(fp_namestacks_name(nk, rows[1].tr_name), "leaf"));
	free(rows);
	CHECK_EQ_INT(fp_top_functions(nk, p, FP_TOP_BY_TOTAL, &rows, &n, &sum), 0);
	CHECK(n && !strcmp(fp_namestacks_name(nk, rows[0].tr_name), "main"));
	free(rows);
}

/* values_sum: the sum of the stacks' values. */
static int64_t values_sum(const struct fp_namestacks *nk)
{
	int64_t sum = 0;

	for (size_t i = 0; i < nk->nk_nstacks; i++)
		sum += nk->nk_stacks[i].ns_value;
	return sum;
}

static void test_pprof(void)
{
	struct pb b;
	size_t len, zlen;
	uint8_t *data, *z;
	char err[256];
	int e;
	struct fp_namestacks *nk;

	build(&b);
	data = pack(&b, &len);
	/* default: the last sample type, nanoseconds */
	nk = read_bytes(data, len, NULL, &e, err, sizeof(err));
	CHECK(nk && !strcmp(nk->nk_format, "pprof") && !strcmp(nk->nk_unit, "nanoseconds"));
	if (nk) {
		CHECK_EQ_INT(nk->nk_nstacks, 3);
		CHECK_EQ_INT(values_sum(nk), 100);
		check_top(nk, 10, 0);
		check_top(nk, 10, 1);
		CHECK(fp_namestacks_find_process(nk, "p3") == FP_NAME_NONE);
		fp_namestacks_free(nk);
	}
	/* by name, gzip'd */
	CHECK_EQ_INT(fp_gzip_buf(data, len, Z_BEST_SPEED, &z, &zlen), 0);
	nk = read_bytes(z, zlen, "samples", &e, err, sizeof(err));
	CHECK(nk && !strcmp(nk->nk_unit, "count"));
	if (nk) {
		check_top(nk, 1, 0);
		fp_namestacks_free(nk);
	}
	CHECK(!read_bytes(z, zlen, "alloc_space", &e, err, sizeof(err)) && e == -ENOENT);
	free(z);
	free(data);
	/* default_sample_type names the first */
	b.p.default_sample_type = b.vt[0].type;
	data = pack(&b, &len);
	nk = read_bytes(data, len, NULL, &e, err, sizeof(err));
	CHECK(nk && !strcmp(nk->nk_type, "samples"));
	fp_namestacks_free(nk);
	free(data);
}

static void test_folded_matches_pprof(void)
{
	/* fleetprof marks leaf as inlined ("_[i]"): still the function leaf */
	const char *text = "p1;main;work;leaf_[i] 3\n"
			   "p1;main;fib;fib;fib 5\r\n"
			   "\n"
			   "p2;main;work;leaf;libx.so+0x1a2b 2\n"
			   "p3;main;read_[k] 0";
	char err[256];
	int e;
	struct fp_namestacks *nk = read_bytes(text, strlen(text), NULL, &e, err, sizeof(err));

	CHECK(nk && !strcmp(nk->nk_format, "folded"));
	if (!nk)
		return;
	CHECK_EQ_INT(nk->nk_nstacks, 4);
	check_top(nk, 1, 0);
	check_top(nk, 1, 1);
	/* the process is no function; a kernel function keeps its mark */
	{
		struct fp_top_row *rows;
		size_t n;
		uint64_t sum;
		CHECK_EQ_INT(fp_top_functions(nk, FP_NAME_NONE, FP_TOP_BY_SELF, &rows, &n, &sum),
			     0);
		CHECK(!row(nk, rows, n, "p1") && !row(nk, rows, n, "p2"));
		CHECK(!row(nk, rows, n, "leaf_[i]") && row(nk, rows, n, "read_[k]"));
		free(rows);
	}
	fp_namestacks_free(nk);
}

static void test_tree(void)
{
	const char *text = "p1;main;work;leaf 3\np1;main;fib;fib 5\np1;main 1\np2;main;work 2\n";
	struct fp_tree_node *t = NULL;
	char err[256];
	int e;
	size_t n = 0;
	struct fp_namestacks *nk = read_bytes(text, strlen(text), NULL, &e, err, sizeof(err));
	uint32_t a, b;

	CHECK(nk != NULL);
	if (!nk)
		return;
	CHECK_EQ_INT(fp_top_tree(nk, FP_NAME_NONE, &t, &n), 0);
	/* hidden root, p1, main, work, leaf, fib, fib, p2, main, work */
	CHECK_EQ_INT(n, 10);
	CHECK_EQ_INT(t[0].tn_total, 11);
	a = t[0].tn_child; /* p1 (9) before p2 (2) */
	CHECK(a && t[a].tn_process && !strcmp(fp_namestacks_name(nk, t[a].tn_name), "p1") &&
	      t[a].tn_total == 9 && t[a].tn_depth == 0);
	b = t[a].tn_next;
	CHECK(b && !strcmp(fp_namestacks_name(nk, t[b].tn_name), "p2") && t[b].tn_total == 2 &&
	      !t[b].tn_next);
	a = t[a].tn_child; /* p1's main: 9, self 1 */
	CHECK(a && t[a].tn_total == 9 && t[a].tn_self == 1 && t[a].tn_depth == 1);
	a = t[a].tn_child; /* fib (5) before work (3) */
	CHECK(a && !strcmp(fp_namestacks_name(nk, t[a].tn_name), "fib") && t[a].tn_total == 5 &&
	      t[a].tn_self == 0);
	CHECK(a && t[t[a].tn_child].tn_self == 5 && t[t[a].tn_child].tn_depth == 3);
	free(t);
	/* one process only */
	CHECK_EQ_INT(fp_top_tree(nk, fp_namestacks_find_process(nk, "p2"), &t, &n), 0);
	CHECK_EQ_INT(n, 4);
	CHECK_EQ_INT(t[0].tn_total, 2);
	free(t);
	fp_namestacks_free(nk);
}

static void refused(const void *data, size_t len, const char *why)
{
	char err[256] = "";
	int e = 0;

	CHECK(!read_bytes(data, len, NULL, &e, err, sizeof(err)));
	CHECK(e == -EINVAL || e == -EFBIG);
	if (!strstr(err, why)) {
		fprintf(stderr, "  expected '%s' in '%s'\n", why, err);
		CHECK(0);
	}
}

static void test_bad_folded(void)
{
	refused("", 0, "empty");
	refused("main;work 3\nmain;work\n", 22, "line 2: no count");
	refused("main;work 3\nmain;;work 4\n", 25, "line 2: an empty name");
	refused("main;work 3\nmain 99999999999999999999\n", 37, "line 2: the count");
	refused("main;work 3\nmain 12x4\n", 22, "line 2: the count");
}

static void test_bad_pprof(void)
{
	struct pb b;
	size_t len;
	uint8_t *data;

	build(&b);
	b.s[1].n_value = 1; /* values do not match the sample types */
	data = pack(&b, &len);
	refused(data, len, "sample 1 has 1 values for 2");
	free(data);
	build(&b);
	b.ids[2][1] = 9; /* an undefined location */
	data = pack(&b, &len);
	refused(data, len, "names location 9");
	free(data);
	build(&b);
	b.line[2].function_id = 7; /* an undefined function */
	data = pack(&b, &len);
	refused(data, len, "names function 7");
	free(data);
	build(&b);
	b.fn[1].name = 999; /* a string out of range */
	data = pack(&b, &len);
	refused(data, len, "function 2: a string index");
	free(data);
	build(&b);
	b.loc[2].id = 2; /* an id twice */
	data = pack(&b, &len);
	refused(data, len, "used twice");
	free(data);
	build(&b);
	b.p.n_sample_type = 0;
	data = pack(&b, &len);
	refused(data, len, "no sample type");
	free(data);
	/* not protobuf, not folded */
	refused("\x01\x02\x03garbage", 10, "neither");
	/* a gzip that is cut short */
	{
		uint8_t *z;
		size_t zlen;
		build(&b);
		data = pack(&b, &len);
		CHECK_EQ_INT(fp_gzip_buf(data, len, Z_BEST_SPEED, &z, &zlen), 0);
		refused(z, zlen - 4, "gzip");
		free(z);
		free(data);
	}
}

/* A location of many lines named by a sample many times would make
 * lines x names frames from a small file: refused, not allocated. */
static void test_frame_bomb(void)
{
	struct pb b;
	Perftools__Profiles__Line **lines = malloc(1000 * sizeof(*lines));
	uint64_t ids[66];
	size_t len, i;
	uint8_t *data;
	char err[256];
	int e;
	struct fp_namestacks *nk;

	build(&b);
	for (i = 0; i < 1000; i++)
		lines[i] = &b.line[0];
	b.loc[0].line = lines, b.loc[0].n_line = 1000;
	for (i = 0; i < 66; i++)
		ids[i] = 1;
	b.s[0].location_id = ids, b.s[0].n_location_id = 65; /* 65,000 frames */
	data = pack(&b, &len);
	nk = read_bytes(data, len, NULL, &e, err, sizeof(err));
	CHECK(nk && nk->nk_nframes > 65000); /* allowed: under 65,536 */
	fp_namestacks_free(nk);
	free(data);
	b.s[0].n_location_id = 66; /* 66,000 frames in one stack */
	data = pack(&b, &len);
	refused(data, len, "more than 65536 frames");
	free(data);
	/* eight stacks of 65,000 frames from a file of a few kB */
	for (i = 0; i < 8; i++) {
		b.s[i] = b.s[0];
		b.s[i].n_location_id = 65;
		b.sp[i] = &b.s[i];
	}
	b.p.n_sample = 8;
	data = pack(&b, &len);
	CHECK(len * 32 < 8 * 65000);
	refused(data, len, "more frames than 32 a byte");
	free(data);
	free(lines);
}

int main(void)
{
	RUN(test_pprof);
	RUN(test_folded_matches_pprof);
	RUN(test_tree);
	RUN(test_bad_folded);
	RUN(test_bad_pprof);
	RUN(test_frame_bomb);
	return CHECK_DONE();
}
