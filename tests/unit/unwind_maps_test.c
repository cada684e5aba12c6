/* unwind_maps_test.c: installing unwind tables in the real BPF maps
 * within a budget: placement, chunks of rows created as tables arrive and
 * freed as they go, least-recently-used eviction, tables too large, parts
 * from the wire, per-process lists and their walker, and where a row
 * starts (for folding frames under Python).  What the BPF program would
 * read is read back through the kernel (the chunk a row's number names,
 * found by its map id).  Loads the real BPF program, so it needs root
 * (skips without, fails in CI). */
#include "check.h"
#include "procmaps.h"
#include "sampler.h"
#include "unwind_maps.h"
#include "unwind_table.h"

#include <bpf/bpf.h>
#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#define CHUNK FP_UNWIND_CHUNK_ROWS
#define BUDGET_ROWS (3 * CHUNK) /* 192 KiB */

#if defined(__aarch64__)
#define ARCH FP_UNWIND_ARCH_ARM64
#define ENTRY 0 /* CFA = SP at a function's entry */
#else
#define ARCH FP_UNWIND_ARCH_X86_64
#define ENTRY 1 /* CFA = SP + 8 */
#endif

static struct fp_sampler *smp;
static struct fp_sampler_unwind maps;

static void no_samples(const struct fp_bpf_sample *s, const void *u, const void *k, void *arg)
{
}

/* table: a blob of n rows whose pcs start at base; the caller frees it. */
static void *table(uint32_t n, uint32_t base, size_t *len)
{
	struct fp_unwind_header *h;
	struct fp_unwind_row *r;
	uint32_t i;

	*len = sizeof(*h) + (size_t)n * sizeof(*r);
	h = calloc(1, *len);
	memcpy(h->uh_magic, FP_UNWIND_MAGIC, 4);
	h->uh_version = FP_UNWIND_VERSION;
	h->uh_arch = ARCH;
	h->uh_nrows = n;
	r = (struct fp_unwind_row *)(h + 1);
	for (i = 0; i < n; i++)
		r[i] = (struct fp_unwind_row){ base + 16 * i, 1 + i % 7, FP_UNWIND_SP, -2 };
	return h;
}

static struct fp_build_id bid(uint8_t seed)
{
	struct fp_build_id id = { .fb_len = 20 };

	memset(id.fb_data, seed, sizeof(id.fb_data));
	return id;
}

/* bpf_row: row i as the BPF program finds it: in the chunk the chunks
 * array names.  0, or -1 when no chunk holds it. */
static int bpf_row(uint32_t i, struct fp_unwind_row *r)
{
	uint32_t c = i / CHUNK, k = i % CHUNK, id;
	int fd, err;

	if (bpf_map_lookup_elem(maps.su_chunks_fd, &c, &id) || (fd = bpf_map_get_fd_by_id(id)) < 0)
		return -1;
	err = bpf_map_lookup_elem(fd, &k, r);
	close(fd);
	return err ? -1 : 0;
}

/* chunks: how many chunks the BPF program can reach. */
static uint32_t chunks(void)
{
	uint32_t c, id, n = 0;

	for (c = 0; c < maps.su_nchunks; c++)
		n += bpf_map_lookup_elem(maps.su_chunks_fd, &c, &id) == 0;
	return n;
}

/* installed: the rows the BPF program sees for slot t, compared with blob. */
static int installed_as(uint32_t t, const void *blob)
{
	const struct fp_unwind_header *h = blob;
	const struct fp_unwind_row *want = (const void *)(h + 1);
	struct fp_unwind_table where;
	struct fp_unwind_row r;
	uint32_t i;

	if (bpf_map_lookup_elem(maps.su_tables_fd, &t, &where) || where.ut_nrows != h->uh_nrows ||
	    (size_t)where.ut_first + where.ut_nrows > maps.su_nrows)
		return 0;
	for (i = 0; i < where.ut_nrows; i++)
		if (bpf_row(where.ut_first + i, &r) || memcmp(&r, &want[i], sizeof(r)))
			return 0;
	return 1;
}

/* slot_of: the tables-map slot whose rows equal blob's, or -1. */
static int slot_of(const void *blob)
{
	const struct fp_unwind_header *h = blob;
	struct fp_unwind_table where;
	uint32_t t;

	for (t = 0; t < FP_UNWIND_TABLES; t++)
		if (!bpf_map_lookup_elem(maps.su_tables_fd, &t, &where) &&
		    where.ut_nrows == h->uh_nrows && installed_as(t, blob))
			return (int)t;
	return -1;
}

/* bpf_list: pid's list as the BPF program reads it: its entry, and its
 * mappings in out (room for FP_UNWIND_MAPS).  The count, or -1. */
static int bpf_list(uint32_t pid, struct fp_unwind_proc *p, struct fp_unwind_map *out)
{
	uint32_t i, k;

	if (bpf_map_lookup_elem(maps.su_procs_fd, &pid, p) || p->up_nmaps > FP_UNWIND_MAPS)
		return -1;
	for (i = 0; i < p->up_nmaps; i++) {
		k = p->up_first + i;
		if (bpf_map_lookup_elem(maps.su_mapv_fd, &k, &out[i]))
			return -1;
	}
	return p->up_nmaps;
}

static void test_budget_and_eviction(void)
{
	struct fp_unwind *u;
	struct fp_unwind_stats st;
	struct fp_build_id a = bid(1), b = bid(2), c = bid(3), d = bid(4);
	size_t la, lb, lc, ld;
	void *ta = table(10000, 0x1000, &la), *tb = table(10000, 0x90000, &lb);
	void *tc = table(10000, 0x200000, &lc), *td = table(BUDGET_ROWS + 1, 0, &ld);

	CHECK_EQ_INT(fp_unwind_alloc(&u, smp), 0);
	CHECK_EQ_INT(fp_unwind_add(u, &a, ta, la), 0);
	CHECK_EQ_INT(fp_unwind_add(u, &b, tb, lb), 0);
	CHECK(fp_unwind_has(u, &a) && fp_unwind_has(u, &b));
	CHECK(slot_of(ta) >= 0 && slot_of(tb) >= 0); /* across chunk boundaries */

	/* a used more recently than b: c evicts b, the least recently used */
	{
		struct fp_procmaps pm = { 0 };
		struct fp_vma v = { .fv_start = 0x400000,
				    .fv_end = 0x500000,
				    .fv_pgoff = 0,
				    .fv_build_id_state = 1,
				    .fv_build_id = a };
		pm.pm_vmas = &v, pm.pm_nvmas = 1;
		CHECK_EQ_INT(fp_unwind_set_proc(u, 4242, &pm), 0);
	}
	CHECK_EQ_INT(fp_unwind_add(u, &c, tc, lc), 0);
	CHECK(fp_unwind_has(u, &a) && !fp_unwind_has(u, &b) && fp_unwind_has(u, &c));
	CHECK(slot_of(ta) >= 0 && slot_of(tc) >= 0 && slot_of(tb) < 0);
	fp_unwind_stats(u, &st);
	CHECK_EQ_INT(st.us_evicted, 1);
	CHECK_EQ_INT(st.us_tables, 2);
	CHECK_EQ_INT(st.us_rows_used, 20000);
	CHECK_EQ_INT(st.us_rows_total, BUDGET_ROWS);
	CHECK_EQ_INT(st.us_chunks, 3); /* rows 0 to 19999 */

	/* Larger than the whole budget: refused and counted, nothing evicted */
	CHECK_EQ_INT(fp_unwind_add(u, &d, td, ld), -EFBIG);
	fp_unwind_stats(u, &st);
	CHECK_EQ_INT(st.us_too_big, 1);
	CHECK_EQ_INT(st.us_tables, 2);

	/* Malformed: refused and counted */
	((struct fp_unwind_row *)((struct fp_unwind_header *)tb + 1))[5].ur_pc = 0;
	CHECK_EQ_INT(fp_unwind_add(u, &b, tb, lb), -EINVAL);
	CHECK_EQ_INT(fp_unwind_add(u, &b, tb, lb - 1), -EINVAL);
	fp_unwind_stats(u, &st);
	CHECK_EQ_INT(st.us_rejected, 2);
	CHECK(fp_unwind_has(u, &a) && fp_unwind_has(u, &c));

	fp_unwind_forget_proc(u, 4242);
	fp_unwind_free(u);
	free(ta), free(tb), free(tc), free(td);
}

/* Memory by need: no chunk before the first table, a chunk for each
 * CHUNK rows in use as tables arrive (small ones share), chunks freed
 * when the tables in them are evicted or replaced, and none left once the
 * tables are freed.  Failed before: the whole budget was one array. */
static void test_chunks(void)
{
	struct fp_unwind *u;
	struct fp_unwind_stats st;
	struct fp_build_id a = bid(31), b = bid(32), c = bid(33), d = bid(34);
	size_t la, lb, lc, ld;
	void *ta = table(100, 0x1000, &la), *tb = table(CHUNK, 0x10000, &lb);
	void *tc = table(BUDGET_ROWS, 0, &lc), *td = table(50, 0x1000, &ld);

	CHECK_EQ_INT(fp_unwind_alloc(&u, smp), 0);
	CHECK_EQ_INT(chunks(), 0);
	CHECK_EQ_INT(fp_unwind_add(u, &a, ta, la), 0);
	fp_unwind_stats(u, &st);
	CHECK_EQ_INT(chunks(), 1);
	CHECK_EQ_INT(st.us_chunks, 1);
	CHECK(st.us_chunk_bytes >= CHUNK * 8 && st.us_chunk_bytes <= CHUNK * 8 + 8192);
	/* b's rows follow a's: into the next chunk */
	CHECK_EQ_INT(fp_unwind_add(u, &b, tb, lb), 0);
	CHECK_EQ_INT(chunks(), 2);
	CHECK(slot_of(ta) >= 0 && slot_of(tb) >= 0);
	/* a replaced by itself: the chunk b still uses stays */
	CHECK_EQ_INT(fp_unwind_add(u, &a, ta, la), 0);
	CHECK_EQ_INT(chunks(), 2);
	CHECK(slot_of(ta) >= 0 && slot_of(tb) >= 0);
	/* the whole budget: every other table goes, three chunks */
	CHECK_EQ_INT(fp_unwind_add(u, &c, tc, lc), 0);
	fp_unwind_stats(u, &st);
	CHECK_EQ_INT(chunks(), 3);
	CHECK_EQ_INT(st.us_chunks, 3);
	CHECK_EQ_INT(st.us_tables, 1);
	CHECK(slot_of(tc) >= 0);
	/* a small table evicts it: two of the three chunks are given back */
	CHECK_EQ_INT(fp_unwind_add(u, &d, td, ld), 0);
	fp_unwind_stats(u, &st);
	CHECK_EQ_INT(chunks(), 1);
	CHECK_EQ_INT(st.us_chunks, 1);
	CHECK_EQ_INT(st.us_rows_used, 50);
	CHECK(slot_of(td) >= 0 && slot_of(tc) < 0);
	fp_unwind_free(u);
	CHECK_EQ_INT(chunks(), 0);
	free(ta), free(tb), free(tc), free(td);
}

/* The per-process list names the slots of the mappings' tables, with the
 * bias that turns an address into a file offset; eviction scrubs it. */
static void test_process_lists(void)
{
	struct fp_unwind *u;
	struct fp_build_id a = bid(5), b = bid(6), none = bid(7);
	struct fp_vma v[3] = {
		{ .fv_start = 0x400000,
		  .fv_end = 0x420000,
		  .fv_pgoff = 0x1000,
		  .fv_build_id_state = 1,
		  .fv_build_id = a },
		{ .fv_start = 0x7f0000000000,
		  .fv_end = 0x7f0000100000,
		  .fv_pgoff = 0x28000,
		  .fv_build_id_state = 1,
		  .fv_build_id = b },
		{ .fv_start = 0x7f1000000000,
		  .fv_end = 0x7f1000001000,
		  .fv_pgoff = 0,
		  .fv_build_id_state = 1,
		  .fv_build_id = none },
	};
	struct fp_procmaps pm = { .pm_vmas = v, .pm_nvmas = 3 };
	struct fp_unwind_map m[FP_UNWIND_MAPS];
	struct fp_unwind_proc p;
	uint32_t pid = 4343;
	size_t la, lb, lbig;
	void *ta = table(100, 0x1000, &la), *tb = table(200, 0x28000, &lb);
	void *big = table(BUDGET_ROWS - 150, 0, &lbig);

	CHECK_EQ_INT(fp_unwind_alloc(&u, smp), 0);
	CHECK_EQ_INT(fp_unwind_add(u, &a, ta, la), 0);
	CHECK_EQ_INT(fp_unwind_add(u, &b, tb, lb), 0);
	CHECK_EQ_INT(fp_unwind_set_proc(u, pid, &pm), 0);
	CHECK_EQ_INT(bpf_list(pid, &p, m), 2); /* the mapping without a table is left out */
	CHECK_EQ_INT(p.up_walker, FP_WALKER_NATIVE);
	CHECK(m[0].um_start == 0x400000 && m[0].um_len == 0x20000 &&
	      m[0].um_bias == 0x400000 - 0x1000);
	CHECK(m[1].um_start == 0x7f0000000000 && m[1].um_bias == 0x7f0000000000 - 0x28000);
	CHECK(installed_as(m[0].um_table, ta) && installed_as(m[1].um_table, tb));

	/* Another process uses only a: b is now the least recently used, and
	 * a table that needs its room evicts it; the list keeps b's mapping,
	 * marked as without a table (walked by frame pointer). */
	pm.pm_nvmas = 1;
	CHECK_EQ_INT(fp_unwind_set_proc(u, pid + 1, &pm), 0);
	pm.pm_nvmas = 3;
	CHECK_EQ_INT(fp_unwind_add(u, &none, big, lbig), 0);
	CHECK(fp_unwind_has(u, &a) && !fp_unwind_has(u, &b) && fp_unwind_has(u, &none));
	CHECK_EQ_INT(bpf_list(pid, &p, m), 2);
	CHECK(m[0].um_start == 0x400000 && installed_as(m[0].um_table, ta));
	CHECK(m[1].um_start == 0x7f0000000000 && m[1].um_table == FP_UNWIND_NO_TABLE);
	/* written again (the collector's remap): now with none's mapping */
	CHECK_EQ_INT(fp_unwind_set_proc(u, pid, &pm), 0);
	CHECK_EQ_INT(bpf_list(pid, &p, m), 2);
	CHECK(installed_as(m[0].um_table, ta) && installed_as(m[1].um_table, big));
	CHECK(m[1].um_start == 0x7f1000000000);
	fp_unwind_forget_proc(u, pid + 1);

	/* Gone: no list */
	fp_unwind_forget_proc(u, pid);
	CHECK(bpf_map_lookup_elem(maps.su_procs_fd, &pid, &p) != 0);
	fp_unwind_free(u);
	free(ta), free(tb), free(big);
}

/* The walker a list names: native at first, Python once set, kept when
 * the list is written again; a new list replaces the old one's run,
 * which is given back.  Failed before: no walker field. */
static void test_walker(void)
{
	struct fp_unwind *u;
	struct fp_unwind_stats st;
	struct fp_build_id a = bid(41), b = bid(42);
	struct fp_vma v[2] = {
		{ .fv_start = 0x400000,
		  .fv_end = 0x420000,
		  .fv_build_id_state = 1,
		  .fv_build_id = a },
		{ .fv_start = 0x500000,
		  .fv_end = 0x520000,
		  .fv_build_id_state = 1,
		  .fv_build_id = b },
	};
	struct fp_procmaps pm = { .pm_vmas = v, .pm_nvmas = 1 };
	struct fp_unwind_map m[FP_UNWIND_MAPS];
	struct fp_unwind_proc p;
	uint32_t pid = 4545;
	size_t la, lb;
	void *ta = table(10, 0, &la), *tb = table(10, 0, &lb);

	CHECK_EQ_INT(fp_unwind_alloc(&u, smp), 0);
	CHECK_EQ_INT(fp_unwind_add(u, &a, ta, la), 0);
	CHECK_EQ_INT(fp_unwind_add(u, &b, tb, lb), 0);
	CHECK_EQ_INT(fp_unwind_set_walker(u, pid, FP_WALKER_PYTHON), -ENOENT);
	CHECK_EQ_INT(fp_unwind_set_proc(u, pid, &pm), 0);
	CHECK_EQ_INT(fp_unwind_set_walker(u, pid, FP_WALKER_PYTHON), 0);
	CHECK_EQ_INT(fp_unwind_set_walker(u, pid, FP_WALKERS), -EINVAL);
	pm.pm_nvmas = 2;
	CHECK_EQ_INT(fp_unwind_set_proc(u, pid, &pm), 0);
	CHECK_EQ_INT(bpf_list(pid, &p, m), 2);
	CHECK_EQ_INT(p.up_walker, FP_WALKER_PYTHON);
	fp_unwind_stats(u, &st);
	CHECK_EQ_INT(st.us_procs_now, 1);
	CHECK_EQ_INT(st.us_mapv_used, 2);
	CHECK_EQ_INT(fp_unwind_set_walker(u, pid, FP_WALKER_NATIVE), 0);
	CHECK_EQ_INT(bpf_list(pid, &p, m), 2);
	CHECK_EQ_INT(p.up_walker, FP_WALKER_NATIVE);
	fp_unwind_forget_proc(u, pid);
	fp_unwind_stats(u, &st);
	CHECK_EQ_INT(st.us_procs_now, 0);
	CHECK_EQ_INT(st.us_mapv_used, 0);
	fp_unwind_free(u);
	free(ta), free(tb);
}

/* The mappings array full of the lists of processes gone (pids above any
 * pid_max): a living process's list makes them go. */
static void test_mapv_full_swept(void)
{
	static struct fp_vma v[FP_UNWIND_MAPS];
	struct fp_unwind *u;
	struct fp_unwind_stats st;
	struct fp_build_id a = bid(51);
	struct fp_procmaps pm = { .pm_vmas = v, .pm_nvmas = FP_UNWIND_MAPS };
	struct fp_unwind_map m[FP_UNWIND_MAPS];
	struct fp_unwind_proc p;
	uint32_t self = (uint32_t)getpid(), i;
	size_t la;
	void *ta = table(10, 0, &la);

	for (i = 0; i < FP_UNWIND_MAPS; i++)
		v[i] = (struct fp_vma){ .fv_start = 0x400000 + 0x10000 * (uint64_t)i,
					.fv_end = 0x408000 + 0x10000 * (uint64_t)i,
					.fv_build_id_state = 1,
					.fv_build_id = a };
	CHECK_EQ_INT(fp_unwind_alloc(&u, smp), 0);
	CHECK_EQ_INT(fp_unwind_add(u, &a, ta, la), 0);
	for (i = 0; i < FP_UNWIND_MAPV / FP_UNWIND_MAPS; i++)
		CHECK_EQ_INT(fp_unwind_set_proc(u, (1u << 23) + i, &pm), 0);
	fp_unwind_stats(u, &st);
	CHECK_EQ_INT(st.us_mapv_used, FP_UNWIND_MAPV);
	CHECK_EQ_INT(fp_unwind_set_proc(u, self, &pm), 0);
	fp_unwind_stats(u, &st);
	CHECK_EQ_INT(st.us_procs_full, 0);
	CHECK_EQ_INT(st.us_procs_swept, FP_UNWIND_MAPV / FP_UNWIND_MAPS);
	CHECK_EQ_INT(st.us_procs_now, 1);
	CHECK_EQ_INT(bpf_list(self, &p, m), FP_UNWIND_MAPS);
	CHECK(m[FP_UNWIND_MAPS - 1].um_start == v[FP_UNWIND_MAPS - 1].fv_start);
	fp_unwind_forget_proc(u, self);
	fp_unwind_free(u);
	free(ta);
}

/* A full map of process lists: those of processes gone (pids above any
 * pid_max, which never exist) make room for a new one; a living
 * process's list stays.  Failed before: the list did not fit. */
static void test_full_map_swept(void)
{
	struct fp_unwind *u;
	struct fp_unwind_stats st;
	struct fp_build_id a = bid(11);
	struct fp_vma v = { .fv_start = 0x400000,
			    .fv_end = 0x420000,
			    .fv_build_id_state = 1,
			    .fv_build_id = a };
	struct fp_procmaps pm = { .pm_vmas = &v, .pm_nvmas = 1 };
	struct fp_unwind_proc p;
	uint32_t self = (uint32_t)getpid(), parent = (uint32_t)getppid(), i, key, next;
	size_t la, left = 0;
	void *ta = table(100, 0, &la);

	CHECK_EQ_INT(fp_unwind_alloc(&u, smp), 0);
	CHECK_EQ_INT(fp_unwind_add(u, &a, ta, la), 0);
	CHECK_EQ_INT(fp_unwind_set_proc(u, self, &pm), 0);
	for (i = 0; i < FP_UNWIND_PROCS - 1; i++)
		CHECK_EQ_INT(fp_unwind_set_proc(u, (1u << 23) + i, &pm), 0);
	CHECK_EQ_INT(fp_unwind_set_proc(u, parent, &pm), 0);
	fp_unwind_stats(u, &st);
	CHECK_EQ_INT(st.us_procs_full, 0);
	CHECK_EQ_INT(st.us_procs_swept, FP_UNWIND_PROCS - 1);
	CHECK_EQ_INT(bpf_map_lookup_elem(maps.su_procs_fd, &self, &p), 0);
	CHECK_EQ_INT(bpf_map_lookup_elem(maps.su_procs_fd, &parent, &p), 0);
	for (uint32_t *prev = NULL; bpf_map_get_next_key(maps.su_procs_fd, prev, &next) == 0;
	     prev = &key, key = next)
		left++;
	CHECK_EQ_INT(left, 2);
	fp_unwind_forget_proc(u, self);
	fp_unwind_forget_proc(u, parent);
	fp_unwind_free(u);
	free(ta);
}

/* Tables from the wire: parts in order install; anything else is dropped
 * and counted, never installed half. */
static void test_parts(void)
{
	struct fp_unwind *u;
	struct fp_unwind_stats st;
	struct fp_build_id a = bid(8), b = bid(9);
	size_t la, lb;
	uint8_t *ta = table(1000, 0x1000, &la), *tb = table(500, 0x2000, &lb);
	struct fp_table_part p1 = { a, 0, (uint32_t)la, 4000, ta };
	struct fp_table_part p2 = { a, 4000, (uint32_t)la, (uint32_t)la - 4000, ta + 4000 };
	struct fp_table_part q1 = { b, 0, (uint32_t)lb, 100, tb };
	struct fp_table_part q2 = { b, 100, (uint32_t)lb, (uint32_t)lb - 100, tb + 100 };

	CHECK_EQ_INT(fp_unwind_alloc(&u, smp), 0);
	CHECK_EQ_INT(fp_unwind_take_part(u, &p1), 0);
	CHECK(!fp_unwind_has(u, &a));
	CHECK_EQ_INT(fp_unwind_take_part(u, &p2), 1);
	CHECK(fp_unwind_has(u, &a) && slot_of(ta) >= 0);
	/* sent again (a new session): skipped, counted apart */
	CHECK_EQ_INT(fp_unwind_take_part(u, &p1), 0);
	CHECK_EQ_INT(fp_unwind_take_part(u, &p2), 0);
	fp_unwind_stats(u, &st);
	CHECK_EQ_INT(st.us_parts_again, 2);
	CHECK_EQ_INT(st.us_parts_dropped, 0);
	/* a lost part: the rest is dropped */
	CHECK_EQ_INT(fp_unwind_take_part(u, &q2), 0);
	CHECK(!fp_unwind_has(u, &b));
	/* a new table before the last finished: the old one is dropped */
	CHECK_EQ_INT(fp_unwind_take_part(u, &q1), 0);
	CHECK_EQ_INT(fp_unwind_take_part(u, &q1), 0);
	CHECK_EQ_INT(fp_unwind_take_part(u, &q2), 1);
	CHECK(fp_unwind_has(u, &b) && slot_of(tb) >= 0);
	fp_unwind_stats(u, &st);
	CHECK_EQ_INT(st.us_parts_dropped, 2);
	CHECK_EQ_INT(st.us_parts_again, 2);
	CHECK_EQ_INT(st.us_installed, 2);
	/* a table larger than the budget is refused at its first part */
	q1.tp_build_id = bid(10);
	q1.tp_total = 16 + 8 * (BUDGET_ROWS + 5); /* beyond a trailer too */
	CHECK_EQ_INT(fp_unwind_take_part(u, &q1), 0);
	fp_unwind_stats(u, &st);
	CHECK_EQ_INT(st.us_too_big, 1);
	CHECK(fp_unwind_bytes(u) < 64 * 1024);
	fp_unwind_free(u);
	free(ta), free(tb);
}

static int installed_calls, installed_flag;
static size_t installed_len;
static void on_installed(const struct fp_build_id *id, void *blob, size_t len, int function_rows,
			 int installed, void *arg)
{
	installed_calls++;
	installed_len = len;
	installed_flag = installed;
	CHECK(fp_unwind_table_check(blob, len) == 0);
	CHECK_EQ_INT(function_rows, 1);
	free(blob); /* the hook's */
}

/* From a symbolizer that sends only what the agent lacks (feature 16), a
 * table of a build-ID installed already is a new version: it replaces the
 * old one (an older symbolizer's resend is skipped, test_parts).  The
 * installed hook sees each table assembled from parts, whole, not those
 * added otherwise (fp_unwind_add: from the agent's table cache). */
static void test_resent_replaces(void)
{
	struct fp_unwind *u;
	struct fp_unwind_stats st;
	struct fp_build_id a = bid(11);
	size_t la, lb;
	uint8_t *ta = table(1000, 0x1000, &la), *tb = table(800, 0x3000, &lb);
	struct fp_table_part pa = { a, 0, (uint32_t)la, (uint32_t)la, ta };
	struct fp_table_part pb = { a, 0, (uint32_t)lb, (uint32_t)lb, tb };
	uint64_t start;

	installed_calls = 0;
	CHECK_EQ_INT(fp_unwind_alloc(&u, smp), 0);
	fp_unwind_set_installed_fn(u, on_installed, NULL);
	fp_unwind_set_function_rows(u, 1);
	CHECK_EQ_INT(fp_unwind_add(u, &a, ta, la), 0);
	CHECK_EQ_INT(installed_calls, 0);
	fp_unwind_set_resent_replaces(u, 1);
	CHECK_EQ_INT(fp_unwind_take_part(u, &pb), 1);
	CHECK_EQ_INT(installed_calls, 1);
	CHECK_EQ_INT(installed_len, lb);
	/* the new rows are the ones walked: B's first row is at 0x3000 */
	CHECK_EQ_INT(fp_unwind_row_start(u, &a, 0x3008, &start), 0);
	CHECK_EQ_INT(start, 0x3000);
	CHECK_EQ_INT(fp_unwind_row_start(u, &a, 0x1008, &start), -ENOENT);
	fp_unwind_stats(u, &st);
	CHECK_EQ_INT(st.us_parts_again, 0);
	CHECK_EQ_INT(st.us_installed, 2);
	CHECK_EQ_INT(st.us_tables, 1);
	/* off again: skipped */
	fp_unwind_set_resent_replaces(u, 0);
	CHECK_EQ_INT(fp_unwind_take_part(u, &pa), 0);
	fp_unwind_stats(u, &st);
	CHECK_EQ_INT(st.us_parts_again, 1);
	CHECK_EQ_INT(installed_calls, 1);
	fp_unwind_free(u);
	free(ta), free(tb);
}

static int defer_larger(const struct fp_build_id *id, const void *blob, size_t len, void *arg)
{
	return len > *(const size_t *)arg;
}

/* A table the defer hook defers goes to the installed hook (installed 0)
 * and is not installed; another is installed as before; fp_unwind_add
 * installs either. */
static void test_defer(void)
{
	struct fp_unwind *u;
	struct fp_unwind_stats st;
	struct fp_build_id big = bid(21), small = bid(22);
	size_t lbig, lsmall;
	uint8_t *tbig = table(4000, 0x1000, &lbig), *tsmall = table(100, 0x1000, &lsmall);
	struct fp_table_part pbig = { big, 0, (uint32_t)lbig, (uint32_t)lbig, tbig };
	struct fp_table_part psmall = { small, 0, (uint32_t)lsmall, (uint32_t)lsmall, tsmall };

	installed_calls = 0;
	CHECK_EQ_INT(fp_unwind_alloc(&u, smp), 0);
	fp_unwind_set_installed_fn(u, on_installed, NULL);
	fp_unwind_set_function_rows(u, 1);
	fp_unwind_set_defer_fn(u, defer_larger, &lsmall);
	CHECK_EQ_INT(fp_unwind_take_part(u, &pbig), 0);
	CHECK_EQ_INT(installed_calls, 1);
	CHECK_EQ_INT(installed_flag, 0);
	CHECK_EQ_INT(installed_len, lbig);
	CHECK(!fp_unwind_has(u, &big));
	CHECK_EQ_INT(fp_unwind_take_part(u, &psmall), 1);
	CHECK_EQ_INT(installed_calls, 2);
	CHECK_EQ_INT(installed_flag, 1);
	CHECK(fp_unwind_has(u, &small));
	fp_unwind_stats(u, &st);
	CHECK_EQ_INT(st.us_deferred, 1);
	CHECK_EQ_INT(st.us_installed, 1);
	/* when a walk needs it, the agent installs it from its cache */
	CHECK_EQ_INT(fp_unwind_add(u, &big, tbig, lbig), 0);
	CHECK(fp_unwind_has(u, &big));
	fp_unwind_free(u);
	free(tbig), free(tsmall);
}

/* table_of: a table blob of the n rows (malloc'd), its length in *len. */
static struct fp_unwind_header *table_of(const struct fp_unwind_row *rows, size_t n, size_t *len)
{
	struct fp_unwind_header *h;

	*len = sizeof(*h) + n * sizeof(*rows);
	h = calloc(1, *len);
	memcpy(h->uh_magic, FP_UNWIND_MAGIC, 4);
	h->uh_version = FP_UNWIND_VERSION;
	h->uh_arch = ARCH;
	h->uh_nrows = (uint32_t)n;
	memcpy(h + 1, rows, n * sizeof(*rows));
	return h;
}

/* Two functions as the compiler writes them: f at 0x1000 (entry; push,
 * CFA + 16 from 0x1001; body from 0x1008 at CFA + 48; epilogue back to the
 * entry state from 0x1080), g right after it at 0x1090 with no push of
 * its own (its entry row merged into f's last), then a frame-pointer body
 * at 0x2004 and a gap. */
static void test_row_start(void)
{
	static const struct fp_unwind_row rows[] = {
		{ 0x1000, ENTRY, FP_UNWIND_SP, 0 }, { 0x1001, 2, FP_UNWIND_SP, -2 },
		{ 0x1008, 6, FP_UNWIND_SP, -2 },    { 0x1080, ENTRY, FP_UNWIND_SP, 0 },
		{ 0x2000, ENTRY, FP_UNWIND_SP, 0 }, { 0x2004, 2, FP_UNWIND_FP, -2 },
		{ 0x2100, 0, FP_UNWIND_NONE, 0 },
	};
	static const struct {
		uint64_t offset;
		int err;
		uint64_t start;
	} cases[] = {
		{ 0xfff, -ENOENT, 0 },  /* before the table */
		{ 0x1000, -ENOENT, 0 }, /* f's entry: the state of every entry */
		{ 0x1001, 0, 0x1001 },  /* its own row's start */
		{ 0x1004, 0, 0x1001 },           { 0x1008, 0, 0x1008 },
		{ 0x107f, 0, 0x1008 },  /* f's body, to the end of its row */
		{ 0x1080, -ENOENT, 0 }, /* f's epilogue ... */
		{ 0x1095, -ENOENT, 0 }, /* ... and g, in the same row: never folded */
		{ 0x2005, 0, 0x2004 },  /* frame-pointer rule */
		{ 0x2100, -ENOENT, 0 }, /* no CFI */
		{ 0xffffffffffull, -ENOENT, 0 },
	};
	struct fp_build_id id = bid(11), other = bid(12);
	struct fp_unwind_header *h;
	struct fp_unwind *u;
	uint64_t start;
	size_t len, i;

	h = table_of(rows, sizeof(rows) / sizeof(rows[0]), &len);
	CHECK_EQ_INT(fp_unwind_alloc(&u, smp), 0);
	CHECK_EQ_INT(fp_unwind_row_start(u, &id, 0x1004, &start), -ENOENT); /* no table yet */
	CHECK_EQ_INT(fp_unwind_add(u, &id, h, len), 0);
	for (i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
		start = 7;
		CHECK_EQ_INT(fp_unwind_row_start(u, &id, cases[i].offset, &start), cases[i].err);
		CHECK(start == (cases[i].err ? 7 : cases[i].start));
	}
	CHECK_EQ_INT(fp_unwind_row_start(u, &other, 0x1004, &start), -ENOENT);
	fp_unwind_free(u);
	free(h);
}

/* A table from a compiler that keeps a row at every function's start
 * (FP_FEATURE_FUNCTION_ROWS): f at 0x1000 as above, g at 0x1090 with a
 * row of its own equal to f's last, a PLT at 0x3000.  Entry-state rows
 * fold too once the table is installed so marked; a table installed
 * before, or after the mark is taken back, does not. */
static void test_row_start_function_rows(void)
{
	static const struct fp_unwind_row rows[] = {
		{ 0x1000, ENTRY, FP_UNWIND_SP, 0 }, { 0x1001, 2, FP_UNWIND_SP, -2 },
		{ 0x1008, 6, FP_UNWIND_SP, -2 },    { 0x1080, ENTRY, FP_UNWIND_SP, 0 },
		{ 0x1090, ENTRY, FP_UNWIND_SP, 0 }, { 0x2004, 2, FP_UNWIND_FP, -2 },
		{ 0x2100, 0, FP_UNWIND_NONE, 0 },   { 0x3000, 0, FP_UNWIND_PLT, 0 },
		{ 0x3100, 0, FP_UNWIND_NONE, 0 },
	};
	static const struct {
		uint64_t offset;
		int err;
		uint64_t start;
	} cases[] = {
		{ 0x1000, 0, 0x1000 },                          /* f's entry */
		{ 0x1004, 0, 0x1001 },                          /* as before */
		{ 0x1085, 0, 0x1080 },                          /* f's epilogue */
		{ 0x1095, 0, 0x1090 },                          /* g: its own row, never f's */
		{ 0x2005, 0, 0x2004 },  { 0x2100, -ENOENT, 0 }, /* no CFI */
		{ 0x3004, -ENOENT, 0 }, /* a PLT entry: each stub is named apart */
	};
	struct fp_build_id before = bid(21), marked = bid(22), after = bid(23);
	struct fp_unwind_header *h;
	struct fp_unwind *u;
	uint64_t start;
	size_t len, i;

	h = table_of(rows, sizeof(rows) / sizeof(rows[0]), &len);
	CHECK_EQ_INT(fp_unwind_alloc(&u, smp), 0);
	CHECK_EQ_INT(fp_unwind_add(u, &before, h, len), 0);
	fp_unwind_set_function_rows(u, 1);
	CHECK_EQ_INT(fp_unwind_add(u, &marked, h, len), 0);
	fp_unwind_set_function_rows(u, 0);
	CHECK_EQ_INT(fp_unwind_add(u, &after, h, len), 0);
	for (i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
		start = 7;
		CHECK_EQ_INT(fp_unwind_row_start(u, &marked, cases[i].offset, &start),
			     cases[i].err);
		CHECK(start == (cases[i].err ? 7 : cases[i].start));
	}
	CHECK_EQ_INT(fp_unwind_row_start(u, &before, 0x1095, &start), -ENOENT);
	CHECK_EQ_INT(fp_unwind_row_start(u, &after, 0x1000, &start), -ENOENT);
	CHECK_EQ_INT(fp_unwind_row_start(u, &after, 0x1004, &start), 0);
	CHECK(start == 0x1001);
	fp_unwind_free(u);
	free(h);
}

int main(void)
{
	struct fp_sampler_opts so = { .so_frequency = 1,
				      .so_pids = { (uint32_t)getpid() },
				      .so_npids = 1,
				      .so_unwind_bytes = BUDGET_ROWS * 8,
				      .so_fn = no_samples };

	if (geteuid() != 0) {
		printf(getenv("CI") ? "FAIL: %s: needs root (CI is set)\n"
				    : "SKIP: %s (needs root)\n",
		       __FILE__);
		return 0;
	}
	if (fp_sampler_open(&smp, &so) || fp_sampler_unwind_maps(smp, &maps)) {
		printf("FAIL: %s: cannot load the BPF program\n", __FILE__);
		return 1;
	}
	CHECK_EQ_INT(maps.su_nrows, BUDGET_ROWS);
	RUN(test_budget_and_eviction);
	RUN(test_chunks);
	RUN(test_process_lists);
	RUN(test_walker);
	RUN(test_mapv_full_swept);
	RUN(test_parts);
	RUN(test_resent_replaces);
	RUN(test_defer);
	RUN(test_full_map_swept);
	RUN(test_row_start);
	RUN(test_row_start_function_rows);
	fp_sampler_close(smp);
	return CHECK_DONE();
}
