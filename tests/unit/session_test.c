/* session_test.c: a session's definitions (session.h): batches that refer
 * to what earlier ones defined, every way a reference can fail, a batch
 * taken whole or not at all, and the profile made from the trie; unwind
 * tables sent one at a time, and those waiting for a device's CFI. */
#include <errno.h>
#include <fcntl.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "check.h"
#include "elfnote.h"
#include "session.h"
#include "symcache.h"
#include "unwind.h"
#include "unwind_table.h"

static char tmpdir[64];
static struct fp_resolver *resolver;
static struct fp_tablestore *store;

static const struct fp_hello hello = { .fh_session = 42,
				       .fh_host = "host-1",
				       .fh_boot_id = "b",
				       .fh_kernel_release = "r",
				       .fh_agent_version = "t",
				       .fh_frequency = 99,
				       .fh_ncpus = 1 };

/* The definitions of the first batch: mapping 7, threads 3 and 4, and the
 * trie 20 <- 21 <- 22 (22 the leaf, 20 the outermost frame). */
static struct fp_mapping mapping = { .fm_id = 7,
				     .fm_kind = FP_MAP_USER,
				     .fm_build_id = { .fb_len = 4, .fb_data = { 9, 8, 7, 6 } },
				     .fm_path = "/usr/bin/daemon" };
static struct fp_thread threads[2] = {
	{ .ft_id = 3,
	  .ft_pid = 100,
	  .ft_tid = 101,
	  .ft_comm = "worker",
	  .ft_process = "daemon",
	  .ft_container = "swss" },
	{ .ft_id = 4,
	  .ft_pid = 100,
	  .ft_tid = 100,
	  .ft_comm = "daemon",
	  .ft_process = "daemon",
	  .ft_container = "swss" },
};
static struct fp_node nodes[3] = {
	{ 20, FP_NODE_NONE, { 7, 0x1000 } },
	{ 21, 20, { 7, 0x2000 } },
	{ 22, 21, { 7, 0x3000 } },
};

static struct fp_batch batch_of(uint64_t seq, struct fp_count *c, size_t nc)
{
	return (struct fp_batch){ .fb_session = 42,
				  .fb_seq = seq,
				  .fb_start_ns = 1700000000000000000ull,
				  .fb_end_ns = 1700000010000000000ull,
				  .fb_period_ns = 10101010,
				  .fb_ncounts = nc,
				  .fb_counts = c };
}

/* first_batch: a session that took the definitions (NULL on failure). */
static struct fp_session *first_batch(void)
{
	struct fp_count c = { 3, 22, 1 };
	struct fp_batch b = batch_of(1, &c, 1);
	struct fp_session *s = NULL;

	b.fb_nmappings = 1, b.fb_mappings = &mapping;
	b.fb_nthreads = 2, b.fb_threads = threads;
	b.fb_nnodes = 3, b.fb_nodes = nodes;
	if (fp_session_alloc(&s, &hello))
		return NULL;
	if (fp_session_apply(s, &b)) {
		fp_session_free(s);
		return NULL;
	}
	return s;
}

/* find_sample: the sample of thread tid with nframes frames, or NULL. */
static const struct fp_psample *find_sample(const struct fp_profile *p, uint32_t tid,
					    uint32_t nframes)
{
	for (size_t i = 0; i < p->pr_nsamples; i++)
		if (p->pr_samples[i].ps_tid == tid && p->pr_samples[i].ps_nframes == nframes)
			return &p->pr_samples[i];
	return NULL;
}

/* Counts of a later batch name the first batch's definitions; the profile
 * has each stack leaf first, with its thread's names. */
static void test_profile_from_earlier_definitions(void)
{
	struct fp_session *s = first_batch();
	struct fp_count c[] = { { 3, 22, 5 }, { 3, 21, 2 }, { 4, 20, 1 }, { 4, FP_NODE_NONE, 4 } };
	struct fp_batch b = batch_of(2, c, 4);
	const struct fp_psample *ps;
	struct fp_profile *p = NULL;

	CHECK(s != NULL);
	if (!s)
		return;
	CHECK(!strcmp(fp_session_hello(s)->fh_host, "host-1"));
	CHECK_EQ_INT(fp_session_apply(s, &b), 0);
	CHECK_EQ_INT(fp_session_profile(s, resolver, &b, &p), 0);
	if (!p) {
		fp_session_free(s);
		return;
	}
	CHECK(!strcmp(p->pr_host, "host-1"));
	CHECK_EQ_INT(p->pr_start_ns, 1700000000000000000ull);
	CHECK_EQ_INT(p->pr_duration_ns, 10000000000ull);
	CHECK_EQ_INT(p->pr_period_ns, 10101010);
	CHECK_EQ_INT(p->pr_nsamples, 4);
	CHECK_EQ_INT(p->pr_nmappings, 1);
	CHECK_EQ_INT(p->pr_nframes, 3);
	if (p->pr_nmappings == 1) {
		CHECK(!strcmp(p->pr_mappings[0].pm_path, "/usr/bin/daemon"));
		CHECK(!memcmp(&p->pr_mappings[0].pm_build_id, &mapping.fm_build_id,
			      sizeof(mapping.fm_build_id)));
	}
	ps = find_sample(p, 101, 3);
	CHECK(ps != NULL);
	if (ps) {
		CHECK_EQ_INT(ps->ps_count, 5);
		CHECK_EQ_INT(ps->ps_pid, 100);
		CHECK(!strcmp(ps->ps_thread, "worker") && !strcmp(ps->ps_process, "daemon"));
		CHECK(!strcmp(ps->ps_container, "swss"));
		CHECK_EQ_INT(p->pr_frames[ps->ps_frames[0]].pf_address, 0x3000);
		CHECK_EQ_INT(p->pr_frames[ps->ps_frames[1]].pf_address, 0x2000);
		CHECK_EQ_INT(p->pr_frames[ps->ps_frames[2]].pf_address, 0x1000);
		CHECK_EQ_INT(p->pr_frames[ps->ps_frames[0]].pf_mapping, 0);
		/* no source has build-ID 09080706: unresolved, the address kept */
		CHECK(p->pr_frames[ps->ps_frames[0]].pf_function == NULL);
	}
	ps = find_sample(p, 101, 2);
	CHECK(ps && ps->ps_count == 2 && p->pr_frames[ps->ps_frames[0]].pf_address == 0x2000);
	ps = find_sample(p, 100, 1);
	CHECK(ps && ps->ps_count == 1 && !strcmp(ps->ps_thread, "daemon"));
	ps = find_sample(p, 100, 0);
	CHECK(ps && ps->ps_count == 4);
	fp_profile_free(p);
	fp_session_free(s);
}

/* Each kind of reference to something never defined is -ESTALE. */
static void test_undefined_references(void)
{
	static const struct {
		const char *name;
		struct fp_count count;
		struct fp_node node; /* fn_id 0: none */
	} cases[] = {
		{ "count of an unknown thread", { 99, 22, 1 }, { 0 } },
		{ "count of an unknown node", { 3, 99, 1 }, { 0 } },
		{ "node of an unknown parent", { 3, 30, 1 }, { 30, 99, { 7, 0x10 } } },
		{ "node of an unknown mapping", { 3, 30, 1 }, { 30, 22, { 99, 0x10 } } },
	};
	struct fp_session *s = first_batch();

	CHECK(s != NULL);
	for (size_t i = 0; s && i < sizeof(cases) / sizeof(cases[0]); i++) {
		struct fp_count c = cases[i].count;
		struct fp_node n = cases[i].node;
		struct fp_batch b = batch_of(2 + i, &c, 1);
		int err;

		if (n.fn_id)
			b.fb_nnodes = 1, b.fb_nodes = &n;
		err = fp_session_apply(s, &b);
		if (err != -ESTALE)
			fprintf(stderr, "  case %s: %d\n", cases[i].name, err);
		CHECK_EQ_INT(err, -ESTALE);
	}
	fp_session_free(s);
}

/* A node defined twice, a child before its parent, a chain deeper than
 * FP_MAX_FRAMES: -EINVAL. */
static void test_invalid_tries(void)
{
	struct fp_session *s = first_batch();
	struct fp_node again = { 21, 20, { 7, 0x2000 } };
	struct fp_node backwards[2] = { { 31, 30, { 7, 0x10 } }, { 30, 22, { 7, 0x20 } } };
	struct fp_node *deep = calloc(FP_MAX_FRAMES + 1, sizeof(*deep));
	struct fp_count c = { 3, 22, 1 };
	struct fp_batch b = batch_of(2, &c, 1);

	CHECK(s != NULL && deep != NULL);
	if (!s || !deep) {
		fp_session_free(s);
		free(deep);
		return;
	}
	b.fb_nnodes = 1, b.fb_nodes = &again;
	CHECK_EQ_INT(fp_session_apply(s, &b), -EINVAL);
	b.fb_nnodes = 2, b.fb_nodes = backwards;
	CHECK_EQ_INT(fp_session_apply(s, &b), -EINVAL);
	/* 22 is 3 deep: a chain of FP_MAX_FRAMES - 3 more is the deepest. */
	for (uint32_t i = 0; i <= FP_MAX_FRAMES - 3; i++)
		deep[i] = (struct fp_node){ 1000 + i, i ? 1000 + i - 1 : 22, { 7, 0x100 + i } };
	c.fc_node = 1000 + FP_MAX_FRAMES - 4;
	b.fb_nnodes = FP_MAX_FRAMES - 3, b.fb_nodes = deep;
	CHECK_EQ_INT(fp_session_apply(s, &b), 0);
	/* One more frame below that leaf. */
	c.fc_node = 1000 + FP_MAX_FRAMES - 3;
	b.fb_seq = 3;
	b.fb_nnodes = 1, b.fb_nodes = &deep[FP_MAX_FRAMES - 3];
	CHECK_EQ_INT(fp_session_apply(s, &b), -EINVAL);
	free(deep);
	fp_session_free(s);
}

/* A refused batch leaves nothing behind: its valid definitions are not
 * kept either. */
static void test_all_or_nothing(void)
{
	struct fp_session *s = first_batch();
	struct fp_node n = { 30, 22, { 7, 0x10 } };
	struct fp_thread t = { .ft_id = 5,
			       .ft_pid = 200,
			       .ft_tid = 200,
			       .ft_comm = "other",
			       .ft_process = "other",
			       .ft_container = "" };
	struct fp_count bad[] = { { 5, 30, 1 }, { 99, 30, 1 } };
	struct fp_count good = { 5, 30, 1 };
	struct fp_batch b = batch_of(2, bad, 2);

	CHECK(s != NULL);
	if (!s)
		return;
	b.fb_nnodes = 1, b.fb_nodes = &n;
	b.fb_nthreads = 1, b.fb_threads = &t;
	CHECK_EQ_INT(fp_session_apply(s, &b), -ESTALE);
	/* Node 30 and thread 5 were not kept... */
	b = batch_of(3, &good, 1);
	CHECK_EQ_INT(fp_session_apply(s, &b), -ESTALE);
	/* ...so they can be defined now. */
	b.fb_nnodes = 1, b.fb_nodes = &n;
	b.fb_nthreads = 1, b.fb_threads = &t;
	CHECK_EQ_INT(fp_session_apply(s, &b), 0);
	fp_session_free(s);
}

/* Mappings and threads per session are bounded, over batches too: one
 * that would pass a bound is refused whole (the agent starts over). */
static void test_limits(void)
{
	const uint32_t nm = FP_SESSION_MAX_MAPPINGS / 2 + 1, nt = FP_SESSION_MAX_THREADS / 2 + 1;
	struct fp_mapping *m = calloc(nm, sizeof(*m));
	struct fp_thread *t = calloc(nt, sizeof(*t));
	struct fp_session *s = NULL;
	struct fp_batch b = batch_of(1, NULL, 0);

	CHECK(m && t);
	CHECK_EQ_INT(fp_session_alloc(&s, &hello), 0);
	if (!m || !t || !s)
		goto out;
	for (uint32_t i = 0; i < nm; i++)
		m[i] = (struct fp_mapping){ .fm_id = i, .fm_kind = FP_MAP_USER, .fm_path = "/x" };
	b.fb_nmappings = nm, b.fb_mappings = m;
	CHECK_EQ_INT(fp_session_apply(s, &b), 0);
	for (uint32_t i = 0; i < nm; i++)
		m[i].fm_id += nm;
	CHECK_EQ_INT(fp_session_apply(s, &b), -E2BIG);
	b.fb_nmappings = 0;
	for (uint32_t i = 0; i < nt; i++)
		t[i] = (struct fp_thread){ .ft_id = i, .ft_comm = "t", .ft_process = "p" };
	b.fb_nthreads = nt, b.fb_threads = t;
	CHECK_EQ_INT(fp_session_apply(s, &b), 0);
	for (uint32_t i = 0; i < nt; i++)
		t[i].ft_id += nt;
	CHECK_EQ_INT(fp_session_apply(s, &b), -E2BIG);
	/* Within the bounds, the session goes on. */
	b.fb_nthreads = 1;
	CHECK_EQ_INT(fp_session_apply(s, &b), 0);
out:
	fp_session_free(s);
	free(m);
	free(t);
}

/* fp_session_asked: the kernel build-ID of the hello, once asked for. */
static void test_asked(void)
{
	struct fp_hello h = hello;
	struct fp_build_id kernel = { .fb_len = 20, .fb_data = { 0x4b } }, other = { .fb_len = 3 };
	struct fp_build_id *ids = NULL;
	struct fp_session *s = NULL;
	size_t n = 0;

	h.fh_kernel_build_id = kernel;
	CHECK_EQ_INT(fp_session_alloc(&s, &h), 0);
	if (!s)
		return;
	CHECK(!fp_session_asked(s, &kernel));
	CHECK_EQ_INT(fp_session_wants(s, resolver, &ids, &n), 0);
	CHECK_EQ_INT(n, 1);
	CHECK(fp_session_asked(s, &kernel));
	CHECK(!fp_session_asked(s, &other));
	free(ids);
	fp_session_free(s);
}

/* fp_session_kfuncs: the kernel's function starts, once per session, to
 * an agent whose hello takes them, once the kallsyms are here; none to an
 * older agent. */
static void test_kfuncs_once(void)
{
	struct fp_ksym syms[] = { { 0x100, "a" }, { 0x180, "b" }, { 0x400, "c" } };
	struct fp_ksyms k = { .fs_session = 9,
			      .fs_kind = FP_MAP_KERNEL,
			      .fs_build_id = { .fb_len = 20, .fb_data = { 0x4c } },
			      .fs_name = "vmlinux",
			      .fs_last = 1,
			      .fs_nsyms = 3,
			      .fs_syms = syms };
	struct fp_hello h = hello, old = hello;
	struct fp_session *s = NULL, *o = NULL;
	struct fp_kfuncs out = { 0 };

	h.fh_kernel_build_id = old.fh_kernel_build_id = k.fs_build_id;
	h.fh_features = FP_FEATURE_KFUNCS;
	CHECK_EQ_INT(fp_session_alloc(&s, &h), 0);
	CHECK_EQ_INT(fp_session_alloc(&o, &old), 0);
	if (!s || !o)
		goto out;
	CHECK_EQ_INT(fp_session_kfuncs(s, resolver, &out), 0); /* no kallsyms yet */
	CHECK_EQ_INT(out.kf_n, 0);
	CHECK_EQ_INT(fp_resolver_ksyms(resolver, &k), 0);
	CHECK_EQ_INT(fp_session_kfuncs(o, resolver, &out), 0); /* an older agent */
	CHECK_EQ_INT(out.kf_n, 0);
	CHECK_EQ_INT(fp_session_kfuncs(s, resolver, &out), 0);
	CHECK(out.kf_n >= 3 && out.kf_offsets[0] == 0x100 && out.kf_offsets[1] == 0x180);
	CHECK(fp_build_id_eq(&out.kf_build_id, &k.fs_build_id));
	fp_kfuncs_fini(&out);
	CHECK_EQ_INT(fp_session_kfuncs(s, resolver, &out), 0); /* once */
	CHECK_EQ_INT(out.kf_n, 0);
out:
	fp_session_free(s);
	fp_session_free(o);
}

static void test_seen(void)
{
	struct fp_session *s = first_batch();

	CHECK(s != NULL);
	if (!s)
		return;
	CHECK(!fp_session_seen(s, 1));
	fp_session_done(s, 1);
	CHECK(fp_session_seen(s, 1));
	CHECK(!fp_session_seen(s, 2));
	fp_session_done(s, 2);
	CHECK(fp_session_seen(s, 2));
	fp_session_free(s);
}

/* Two unwind tables larger than a part (FP_TABLE_PART_MAX), in the cache
 * before the resolver opens. */
#define BIG_ROWS 200000 /* 1.6 MB each: two parts */
static const struct fp_mapping big_maps[2] = {
	{ .fm_id = 1,
	  .fm_kind = FP_MAP_USER,
	  .fm_build_id = { .fb_len = 20, .fb_data = { 0xa1 } },
	  .fm_path = "/usr/lib/liba.so" },
	{ .fm_id = 2,
	  .fm_kind = FP_MAP_USER,
	  .fm_build_id = { .fb_len = 20, .fb_data = { 0xb2 } },
	  .fm_path = "/usr/lib/libb.so" },
};

/* big_table: the table both build-IDs have (malloc'd), of *len bytes. */
static struct fp_unwind_header *big_table(size_t *len)
{
	struct fp_unwind_header *h;
	struct fp_unwind_row *rows;
	int i;

	*len = sizeof(struct fp_unwind_header) + BIG_ROWS * sizeof(struct fp_unwind_row);
	if (!(h = calloc(1, *len)))
		return NULL;
	rows = (struct fp_unwind_row *)(h + 1);
	memcpy(h->uh_magic, FP_UNWIND_MAGIC, 4);
	h->uh_version = FP_UNWIND_VERSION;
	h->uh_arch = FP_UNWIND_ARCH_X86_64;
	h->uh_nrows = BIG_ROWS;
	for (i = 0; i < BIG_ROWS; i++)
		rows[i] = (struct fp_unwind_row){ .ur_pc = (uint32_t)i * 16, .ur_cfa = 8 };
	return h;
}

/* Six files with small tables (one row each), build-IDs 0xc0 to 0xc5. */
#define SMALL_TABLES 6
static struct fp_mapping small_maps[SMALL_TABLES];

static int put_big_tables(void)
{
	size_t len;
	struct fp_unwind_header *h = big_table(&len);
	struct {
		struct fp_unwind_header h;
		struct fp_unwind_row r;
	} small = { .h = { .uh_magic = FP_UNWIND_MAGIC,
			   .uh_version = FP_UNWIND_VERSION,
			   .uh_arch = FP_UNWIND_ARCH_X86_64,
			   .uh_nrows = 1 },
		    .r = { .ur_pc = 0, .ur_cfa = 8 } };
	struct fp_symcache *c = NULL;
	int err = -ENOMEM, i;

	if (!h)
		return err;
	for (i = 0; i < SMALL_TABLES; i++)
		small_maps[i] = (struct fp_mapping){
			.fm_id = 10 + (uint32_t)i,
			.fm_kind = FP_MAP_USER,
			.fm_build_id = { .fb_len = 20, .fb_data = { (uint8_t)(0xc0 + i) } },
			.fm_path = "/usr/lib/libsmall.so"
		};
	if (!(err = fp_symcache_open(&c, tmpdir))) {
		for (i = 0; i < 2 && !err; i++)
			err = fp_symcache_put_unwind(c, &big_maps[i].fm_build_id, h, len);
		for (i = 0; i < SMALL_TABLES && !err; i++)
			err = fp_symcache_put_unwind(c, &small_maps[i].fm_build_id, &small,
						     sizeof(small));
		fp_symcache_close(c);
	}
	free(h);
	return err;
}

/* Tables go out one at a time, each part continuing the one before: a
 * table larger than a part is sent whole before the next begins, even
 * when the reply has room for more (the agent takes one table at a time
 * and drops a part that does not continue it). */
static void test_tables_one_at_a_time(void)
{
	struct fp_batch b = batch_of(1, NULL, 0);
	size_t total = sizeof(struct fp_unwind_header) + BIG_ROWS * sizeof(struct fp_unwind_row);
	struct fp_session *s = NULL;
	struct fp_build_id cur = { 0 };
	size_t i, done = 0, expect = 0, parts = 0;
	int call, ordered = 1;

	b.fb_nmappings = 2, b.fb_mappings = (struct fp_mapping *)big_maps;
	b.fb_nthreads = 2, b.fb_threads = threads;
	CHECK_EQ_INT(fp_session_alloc(&s, &hello), 0);
	if (!s)
		return;
	CHECK_EQ_INT(fp_session_apply(s, &b), 0);
	for (call = 0; call < 8; call++) {
		struct fp_session_tables t = { .stb_budget = FP_TABLE_REPLY_MAX };
		struct fp_table_part *tp;

		CHECK_EQ_INT(fp_session_tables(s, resolver, store, &t), 0);
		tp = t.stb_parts;
		CHECK_EQ_INT(t.stb_pending, 0); /* both fit the first reply */
		for (i = 0; i < t.stb_nparts; i++, parts++) {
			if (tp[i].tp_offset == 0) { /* a table begins: the last one ended */
				ordered &= expect == 0;
				cur = tp[i].tp_build_id;
			} else {
				ordered &= fp_build_id_eq(&cur, &tp[i].tp_build_id) &&
					   tp[i].tp_offset == expect;
			}
			ordered &= tp[i].tp_total == total;
			expect = tp[i].tp_offset + tp[i].tp_len;
			done += tp[i].tp_len;
			if (expect == tp[i].tp_total)
				expect = 0;
		}
		/* a reply's parts point into the store's copy, and let go of it */
		fp_reply_fini(&(struct fp_reply){ .fr_tables = tp, .fr_ntables = t.stb_nparts });
	}
	CHECK(ordered);
	CHECK_EQ_INT(done, 2 * total);
	CHECK_EQ_INT(parts, 4);
	fp_session_free(s);
}

/* A table whose CFI no file here has waits for the device: listed by
 * fp_session_cfi_wanted (until a device is asked), sent once a device's
 * copy gives it; one whose device has no CFI is never listed again nor
 * sent. */
static void test_tables_wait_for_cfi(void)
{
	const char *libc = "/usr/lib/x86_64-linux-gnu/libc.so.6";
	struct fp_mapping maps[2] = {
		{ .fm_id = 1,
		  .fm_kind = FP_MAP_USER,
		  .fm_path = "/usr/lib/x86_64-linux-gnu/libc.so.6" },
		{ .fm_id = 2,
		  .fm_kind = FP_MAP_USER,
		  .fm_build_id = { .fb_len = 20, .fb_data = { 0xc3, 0xf1 } },
		  .fm_path = "/usr/lib/libnocfi.so" },
	};
	struct fp_batch b = batch_of(1, NULL, 0);
	struct fp_build_id ids[4];
	struct fp_session *s = NULL;
	struct fp_session_tables t;
	size_t i, sent = 0;
	int fd = open(libc, O_RDONLY);

	if (fd < 0 || fp_elfnote_build_id(fd, &maps[0].fm_build_id)) {
		printf("  no %s: skipped\n", libc);
		if (fd >= 0)
			close(fd);
		return;
	}
	b.fb_nmappings = 2, b.fb_mappings = maps;
	CHECK_EQ_INT(fp_session_alloc(&s, &hello), 0);
	if (!s || fp_session_apply(s, &b)) {
		CHECK(!"session");
		goto out;
	}
	/* No debug directory, no local files: only the device has CFI. */
	t = (struct fp_session_tables){ .stb_budget = FP_TABLE_REPLY_MAX };
	CHECK_EQ_INT(fp_session_tables(s, resolver, store, &t), 0);
	CHECK_EQ_INT(t.stb_nparts, 0);
	CHECK_EQ_INT(t.stb_pending, 2); /* both still to come */
	CHECK_EQ_INT(fp_session_cfi_wanted(s, ids, 4), 2);
	CHECK(fp_build_id_eq(&ids[0], &maps[0].fm_build_id));
	CHECK(fp_build_id_eq(&ids[1], &maps[1].fm_build_id));
	CHECK_EQ_INT(fp_session_cfi_wanted(s, ids, 1), 1); /* at most max */
	/* Asked; the other's device file has none. */
	fp_resolver_cfi_device(resolver, &maps[0].fm_build_id, FP_CFI_DEVICE_ASKED);
	fp_resolver_cfi_device(resolver, &maps[1].fm_build_id, FP_CFI_DEVICE_NONE);
	t = (struct fp_session_tables){ .stb_budget = FP_TABLE_REPLY_MAX };
	CHECK_EQ_INT(fp_session_tables(s, resolver, store, &t), 0);
	CHECK_EQ_INT(t.stb_nparts, 0);
	CHECK_EQ_INT(fp_session_cfi_wanted(s, ids, 4), 0);
	/* The device's copy (here, the file itself) gives the table. */
	CHECK_EQ_INT(fp_resolver_add_cfi_async(resolver, fd, &maps[0].fm_build_id), 0);
	fd = -1;
	for (int call = 0; call < 4; call++) {
		struct fp_table_part *tp;
		t = (struct fp_session_tables){ .stb_budget = FP_TABLE_REPLY_MAX };
		CHECK_EQ_INT(fp_session_tables(s, resolver, store, &t), 0);
		tp = t.stb_parts;
		for (i = 0; i < t.stb_nparts; i++) {
			CHECK(fp_build_id_eq(&tp[i].tp_build_id, &maps[0].fm_build_id));
			sent += tp[i].tp_len;
			CHECK_EQ_INT(tp[i].tp_total, tp[0].tp_total);
			if (sent == tp[i].tp_total)
				sent = (size_t)-1; /* whole */
		}
		fp_reply_fini(&(struct fp_reply){ .fr_tables = tp, .fr_ntables = t.stb_nparts });
	}
	CHECK(sent == (size_t)-1);
	CHECK_EQ_INT(fp_session_cfi_wanted(s, ids, 4), 0);
out:
	if (fd >= 0)
		close(fd);
	fp_session_free(s);
}

/* tables_call: one reply's worth of s's tables with budget bytes: the
 * bytes sent per build-ID (by its first byte, 0xa1 or 0xb2) into sent[],
 * checking that parts continue each other (*ordered). */
static struct fp_session_tables tables_call(struct fp_session *s, size_t budget, size_t sent[2],
					    int *ordered)
{
	struct fp_session_tables t = { .stb_budget = budget };
	size_t i;

	CHECK_EQ_INT(fp_session_tables(s, resolver, store, &t), 0);
	for (i = 0; i < t.stb_nparts; i++) {
		const struct fp_table_part *p = &t.stb_parts[i];
		size_t k = p->tp_build_id.fb_data[0] == 0xb2;
		*ordered &= p->tp_offset == sent[k];
		sent[k] += p->tp_len;
	}
	fp_reply_fini(&(struct fp_reply){ .fr_tables = t.stb_parts, .fr_ntables = t.stb_nparts });
	return t;
}

/* A reply carries what its budget allows (the server's bound on table
 * bytes), and says how many tables are still to come: a wrong count would
 * leave an agent waiting a whole interval for a table, or asking again
 * for nothing. */
static void test_tables_budget(void)
{
	struct fp_batch b = batch_of(1, NULL, 0);
	size_t total = sizeof(struct fp_unwind_header) + BIG_ROWS * sizeof(struct fp_unwind_row);
	static const uint32_t pending[] = { 2, 1, 1, 0, 0 };
	size_t sent[2] = { 0, 0 }, call;
	struct fp_session *s = NULL;
	int ordered = 1;

	b.fb_nmappings = 2, b.fb_mappings = (struct fp_mapping *)big_maps;
	b.fb_nthreads = 2, b.fb_threads = threads;
	CHECK_EQ_INT(fp_session_alloc(&s, &hello), 0);
	if (!s)
		return;
	CHECK_EQ_INT(fp_session_apply(s, &b), 0);
	/* No room at all: nothing sent, both still to come. */
	CHECK_EQ_INT(tables_call(s, 0, sent, &ordered).stb_pending, 2);
	CHECK_EQ_INT(sent[0] + sent[1], 0);
	for (call = 0; call < sizeof(pending) / sizeof(pending[0]); call++)
		CHECK_EQ_INT(tables_call(s, FP_TABLE_PART_MAX, sent, &ordered).stb_pending,
			     pending[call]);
	CHECK(ordered);
	CHECK_EQ_INT(sent[0], total);
	CHECK_EQ_INT(sent[1], total);
	fp_session_free(s);
}

/* The hello names the tables the agent holds (HELLO key 11): one with the
 * same id is not sent, one of another id (an older version) is. */
static void test_tables_held(void)
{
	struct fp_batch b = batch_of(1, NULL, 0);
	struct fp_held_table held[2];
	struct fp_hello h = hello;
	struct fp_session *s = NULL;
	size_t len, sent[2] = { 0, 0 }, call;
	struct fp_unwind_header *blob = big_table(&len);
	uint32_t nheld = 0;
	uint64_t held_bytes = 0;
	int ordered = 1;

	if (!blob)
		return;
	held[0] = (struct fp_held_table){ big_maps[0].fm_build_id,
					  fp_unwind_table_id(&big_maps[0].fm_build_id, blob, len) };
	held[1] = (struct fp_held_table){
		big_maps[1].fm_build_id, fp_unwind_table_id(&big_maps[1].fm_build_id, blob, len) ^ 1
	};
	h.fh_nheld = 2, h.fh_held = held;
	b.fb_nmappings = 2, b.fb_mappings = (struct fp_mapping *)big_maps;
	b.fb_nthreads = 2, b.fb_threads = threads;
	CHECK_EQ_INT(fp_session_alloc(&s, &h), 0);
	free(blob);
	if (!s)
		return;
	CHECK_EQ_INT(fp_session_apply(s, &b), 0);
	for (call = 0; call < 3; call++) {
		struct fp_session_tables t = tables_call(s, FP_TABLE_REPLY_MAX, sent, &ordered);
		nheld += t.stb_held;
		held_bytes += t.stb_held_bytes;
	}
	CHECK(ordered);
	CHECK_EQ_INT(sent[0], 0);   /* held, same id */
	CHECK_EQ_INT(sent[1], len); /* held in another version */
	CHECK_EQ_INT(nheld, 1);
	CHECK_EQ_INT(held_bytes, len);
	fp_session_free(s);
}

/* Parts a reply carries: at most four to an agent from before feature 16
 * (its decoder refuses more), up to 64 to one that has it, so that a
 * process's small tables come in one reply. */
static void test_parts_per_reply(void)
{
	static const uint64_t features[2] = { 0, FP_FEATURE_HELD_TABLES };
	static const size_t want[2] = { FP_TABLE_REPLY_PARTS_OLD, SMALL_TABLES };
	struct fp_batch b = batch_of(1, NULL, 0);
	int k;

	b.fb_nmappings = SMALL_TABLES, b.fb_mappings = small_maps;
	for (k = 0; k < 2; k++) {
		struct fp_session_tables t = { .stb_budget = FP_TABLE_REPLY_MAX };
		struct fp_hello h = hello;
		struct fp_session *s = NULL;

		h.fh_features = features[k];
		CHECK_EQ_INT(fp_session_alloc(&s, &h), 0);
		if (!s)
			return;
		CHECK_EQ_INT(fp_session_apply(s, &b), 0);
		CHECK_EQ_INT(fp_session_tables(s, resolver, store, &t), 0);
		CHECK_EQ_INT(t.stb_nparts, want[k]);
		CHECK_EQ_INT(t.stb_pending, SMALL_TABLES - want[k]);
		fp_reply_fini(
			&(struct fp_reply){ .fr_tables = t.stb_parts, .fr_ntables = t.stb_nparts });
		fp_session_free(s);
	}
}

int main(void)
{
	struct fp_resolver_opts ro = { .ro_cache_dir = tmpdir };

	if (check_tmpdir(tmpdir, sizeof(tmpdir), "session_test") || put_big_tables() ||
	    fp_resolver_open(&resolver, &ro) || fp_tablestore_alloc(&store, resolver, 0)) {
		fprintf(stderr, "session_test: cannot open a resolver in %s\n", tmpdir);
		return 1;
	}
	RUN(test_profile_from_earlier_definitions);
	RUN(test_undefined_references);
	RUN(test_invalid_tries);
	RUN(test_all_or_nothing);
	RUN(test_seen);
	RUN(test_limits);
	RUN(test_asked);
	RUN(test_kfuncs_once);
	RUN(test_tables_one_at_a_time);
	RUN(test_tables_wait_for_cfi);
	RUN(test_tables_budget);
	RUN(test_tables_held);
	RUN(test_parts_per_reply);
	fp_tablestore_free(store);
	fp_resolver_close(resolver);
	if (check_rmtree(tmpdir))
		fprintf(stderr, "session_test: cannot remove %s\n", tmpdir);
	return CHECK_DONE();
}
