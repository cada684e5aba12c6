/* unwind_maps.c: installing unwind tables in the BPF maps within a budget
 * of rows, in chunks created as tables need them, and the per-process
 * lists of mappings that use them.
 *
 * A table's slot index is what the per-process lists name, so a slot is
 * reused only after every list that names it was scrubbed: eviction first
 * empties the slot (the walker then falls back to the frame pointer), then
 * marks the lists' entries as without a table, then frees the rows, and
 * the chunks no table uses any more.
 *
 * Rows are numbered in the whole budget and placed first fit from row 0,
 * so that tables share chunks; a chunk exists while a table has rows in
 * it.  A process's list is a run of entries in the mappings array, which
 * the agent maps and writes in place: a new list goes to a new run, the
 * process's entry is pointed at it, then the old run is freed. */
#include "unwind_maps.h"
#include "log.h"
#include "unwind_table.h"

#include <bpf/bpf.h>
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

#if defined(__aarch64__)
#define HOST_ARCH FP_UNWIND_ARCH_ARM64
#define ENTRY_CFA 0 /* CFA = SP at a function's first instruction */
#else
#define HOST_ARCH FP_UNWIND_ARCH_X86_64
#define ENTRY_CFA 1 /* CFA = SP + 8: the return address just pushed */
#endif

#define CHUNK_BYTES ((size_t)FP_UNWIND_CHUNK_ROWS * sizeof(struct fp_unwind_row))

struct table {
	struct fp_build_id t_id;
	uint32_t t_first, t_nrows;
	uint64_t t_used; /* u_tick at the last use */
	int t_live;
	int t_function_rows; /* a row at each function's start (fp_unwind_set_function_rows) */
	struct fp_unwind_cpython *t_py; /* owned; the file's CPython interpreter */
};

struct chunk {
	struct fp_unwind_row *c_rows; /* its array, mapped; NULL: none */
	uint32_t c_tables;            /* live tables with rows in it */
};

/* A process's list: unwind_mapv[r_first, r_first + r_n). */
struct run {
	uint32_t r_pid, r_first, r_n;
};

struct fp_unwind {
	struct fp_sampler_unwind u_maps;
	struct fp_unwind_map *u_mapv; /* unwind_mapv, mapped */
	struct chunk *u_chunks;       /* u_maps.su_nchunks */
	uint64_t u_chunk_kbytes;      /* kernel memory of one chunk (fdinfo) */
	struct run u_runs[FP_UNWIND_PROCS];
	uint32_t u_nruns;
	struct table u_tables[FP_UNWIND_TABLES];
	uint64_t u_tick;
	int u_function_rows; /* for the tables installed from now on */
	struct fp_unwind_stats u_stats;
	/* The table being received, part by part. */
	struct fp_build_id u_part_id;
	uint8_t *u_part_buf;
	uint32_t u_part_total, u_part_have;
	/* A table installed already, sent again: its later parts are skipped. */
	struct fp_build_id u_again_id;
	fp_unwind_installed_fn u_installed_fn;
	void *u_installed_arg;
	fp_unwind_defer_fn u_defer_fn; /* fp_unwind_set_defer_fn */
	void *u_defer_arg;
	int u_resent_replaces; /* fp_unwind_set_resent_replaces */
};

static void chunk_free(struct fp_unwind *u, uint32_t c);

int fp_unwind_alloc(struct fp_unwind **out, struct fp_sampler *s)
{
	struct fp_unwind *u = calloc(1, sizeof(*u));
	void *mapv;
	int err;

	if (!u)
		return -ENOMEM;
	err = fp_sampler_unwind_maps(s, &u->u_maps);
	if (err)
		goto fail;
	mapv = mmap(NULL, FP_UNWIND_MAPV * sizeof(struct fp_unwind_map), PROT_READ | PROT_WRITE,
		    MAP_SHARED, u->u_maps.su_mapv_fd, 0);
	if (mapv == MAP_FAILED) {
		err = -errno;
		fp_warnx("cannot map the unwind process lists: %s", strerror(-err));
		goto fail;
	}
	u->u_mapv = mapv;
	u->u_chunks = calloc(u->u_maps.su_nchunks, sizeof(*u->u_chunks));
	if (!u->u_chunks) {
		err = -ENOMEM;
		goto fail;
	}
	u->u_stats.us_rows_total = u->u_maps.su_nrows;
	*out = u;
	return 0;
fail:
	fp_unwind_free(u);
	return err;
}

void fp_unwind_free(struct fp_unwind *u)
{
	uint32_t i;

	if (!u)
		return;
	for (i = 0; i < FP_UNWIND_TABLES; i++)
		free(u->u_tables[i].t_py);
	for (i = 0; u->u_chunks && i < u->u_maps.su_nchunks; i++)
		if (u->u_chunks[i].c_rows)
			chunk_free(u, i);
	free(u->u_chunks);
	if (u->u_mapv)
		munmap(u->u_mapv, FP_UNWIND_MAPV * sizeof(struct fp_unwind_map));
	free(u->u_part_buf);
	free(u);
}

/* memlock: the kernel's count of the memory of BPF object fd, or 0. */
static uint64_t memlock(int fd)
{
	unsigned long long v = 0;
	char path[64], line[128];
	FILE *f;

	snprintf(path, sizeof(path), "/proc/self/fdinfo/%d", fd);
	if (!(f = fopen(path, "re")))
		return 0;
	while (fgets(line, sizeof(line), f) && sscanf(line, "memlock: %llu", &v) != 1)
		;
	fclose(f);
	return v;
}

/* chunk_create: create chunk c's array and map it; its fd, to publish
 * (chunks_publish), or a negative errno. */
static int chunk_create(struct fp_unwind *u, uint32_t c)
{
	LIBBPF_OPTS(bpf_map_create_opts, opts, .map_flags = BPF_F_MMAPABLE);
	void *rows;
	int fd, err;

	fd = bpf_map_create(BPF_MAP_TYPE_ARRAY, "fp_rows", sizeof(uint32_t),
			    sizeof(struct fp_unwind_row), FP_UNWIND_CHUNK_ROWS, &opts);
	if (fd < 0)
		return -errno;
	rows = mmap(NULL, CHUNK_BYTES, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
	if (rows == MAP_FAILED) {
		err = -errno;
		close(fd);
		return err;
	}
	if (!u->u_chunk_kbytes)
		u->u_chunk_kbytes = memlock(fd);
	if (!u->u_chunk_kbytes) /* no fdinfo: the rows and the header's page */
		u->u_chunk_kbytes = CHUNK_BYTES + 4096;
	u->u_chunks[c] = (struct chunk){ rows, 0 };
	u->u_stats.us_chunks++;
	u->u_stats.us_chunk_bytes += u->u_chunk_kbytes;
	return fd;
}

/* chunks_publish: put the n chunks keys[i] (fds[i]) in the chunks array.
 * Each update of an array of maps waits for an RCU grace period (15 to
 * 25 ms here) before it returns: a batch waits once.  Kernels without
 * batches for it take them one by one.  0 or a negative errno. */
static int chunks_publish(struct fp_unwind *u, uint32_t *keys, int *fds, uint32_t n)
{
	LIBBPF_OPTS(bpf_map_batch_opts, opts);
	uint32_t done = n, i;

	if (!n || !bpf_map_update_batch(u->u_maps.su_chunks_fd, keys, fds, &done, &opts))
		return 0;
	for (i = 0; i < n; i++)
		if (bpf_map_update_elem(u->u_maps.su_chunks_fd, &keys[i], &fds[i], BPF_ANY))
			return -errno;
	return 0;
}

static void chunk_free(struct fp_unwind *u, uint32_t c)
{
	bpf_map_delete_elem(u->u_maps.su_chunks_fd, &c);
	munmap(u->u_chunks[c].c_rows, CHUNK_BYTES);
	u->u_chunks[c] = (struct chunk){ NULL, 0 };
	u->u_stats.us_chunks--;
	u->u_stats.us_chunk_bytes -= u->u_chunk_kbytes;
}

/* row_at: row i of all rows; its chunk exists. */
static const struct fp_unwind_row *row_at(const struct fp_unwind *u, uint32_t i)
{
	return &u->u_chunks[i >> FP_UNWIND_CHUNK_SHIFT].c_rows[i & (FP_UNWIND_CHUNK_ROWS - 1)];
}

static int find(const struct fp_unwind *u, const struct fp_build_id *id)
{
	int i;

	for (i = 0; i < FP_UNWIND_TABLES; i++)
		if (u->u_tables[i].t_live && fp_build_id_eq(&u->u_tables[i].t_id, id))
			return i;
	return -1;
}

int fp_unwind_has(const struct fp_unwind *u, const struct fp_build_id *id)
{
	return find(u, id) >= 0;
}

const struct fp_unwind_cpython *fp_unwind_cpython(const struct fp_unwind *u,
						  const struct fp_build_id *id)
{
	int t = find(u, id);

	return t >= 0 ? u->u_tables[t].t_py : NULL;
}

int fp_unwind_row_start(const struct fp_unwind *u, const struct fp_build_id *id, uint64_t offset,
			uint64_t *start)
{
	const struct fp_unwind_row *r;
	uint32_t lo, hi;
	int t = find(u, id);

	if (t < 0 || !u->u_tables[t].t_nrows)
		return -ENOENT;
	lo = u->u_tables[t].t_first;
	hi = lo + u->u_tables[t].t_nrows;
	if (offset < row_at(u, lo)->ur_pc)
		return -ENOENT;
	while (hi - lo > 1) { /* row lo's ur_pc <= offset < row hi's */
		uint32_t mid = lo + (hi - lo) / 2;
		if (row_at(u, mid)->ur_pc <= offset)
			lo = mid;
		else
			hi = mid;
	}
	r = row_at(u, lo);
	if (FP_UNWIND_RULE(r) == FP_UNWIND_FP ||
	    (FP_UNWIND_RULE(r) == FP_UNWIND_SP &&
	     (r->ur_cfa != ENTRY_CFA || u->u_tables[t].t_function_rows))) {
		*start = r->ur_pc;
		return 0;
	}
	return -ENOENT;
}

void fp_unwind_set_function_rows(struct fp_unwind *u, int on)
{
	u->u_function_rows = !!on;
}

int fp_unwind_function_rows(const struct fp_unwind *u)
{
	return u->u_function_rows;
}

void fp_unwind_set_resent_replaces(struct fp_unwind *u, int on)
{
	u->u_resent_replaces = !!on;
}

void fp_unwind_set_installed_fn(struct fp_unwind *u, fp_unwind_installed_fn fn, void *arg)
{
	u->u_installed_fn = fn;
	u->u_installed_arg = arg;
}

void fp_unwind_set_defer_fn(struct fp_unwind *u, fp_unwind_defer_fn fn, void *arg)
{
	u->u_defer_fn = fn;
	u->u_defer_arg = arg;
}

int fp_unwind_fold(const struct fp_build_id *id, uint64_t offset, uint64_t *start, void *arg)
{
	return fp_unwind_row_start(arg, id, offset, start);
}

/* scrub: every entry of the process lists that names slot t: no table
 * (the walker follows the frame pointer there).  In place: an entry is
 * 4 bytes the walker reads at once. */
static void scrub(struct fp_unwind *u, uint32_t t)
{
	uint32_t i, j;

	for (i = 0; i < u->u_nruns; i++)
		for (j = 0; j < u->u_runs[i].r_n; j++) {
			struct fp_unwind_map *m = &u->u_mapv[u->u_runs[i].r_first + j];
			if (m->um_table == t)
				__atomic_store_n(&m->um_table, FP_UNWIND_NO_TABLE,
						 __ATOMIC_RELAXED);
		}
}

/* chunks_release: table t's rows are gone; the chunks only it used stay
 * for chunks_trim. */
static void chunks_release(struct fp_unwind *u, const struct table *t)
{
	uint32_t c;

	if (!t->t_nrows)
		return;
	for (c = t->t_first >> FP_UNWIND_CHUNK_SHIFT;
	     c <= (t->t_first + t->t_nrows - 1) >> FP_UNWIND_CHUNK_SHIFT; c++)
		u->u_chunks[c].c_tables--;
}

static void evict(struct fp_unwind *u, uint32_t t)
{
	struct fp_unwind_table none = { 0, 0 };

	bpf_map_update_elem(u->u_maps.su_tables_fd, &t, &none, BPF_ANY);
	scrub(u, t);
	chunks_release(u, &u->u_tables[t]);
	u->u_stats.us_rows_used -= u->u_tables[t].t_nrows;
	u->u_stats.us_tables--;
	free(u->u_tables[t].t_py);
	memset(&u->u_tables[t], 0, sizeof(u->u_tables[t]));
}

static int by_first(const void *a, const void *b)
{
	const struct table *x = *(const struct table *const *)a,
			   *y = *(const struct table *const *)b;

	return x->t_first < y->t_first ? -1 : x->t_first > y->t_first;
}

/* place: the first row of a free run of n rows, or -1. */
static int64_t place(struct fp_unwind *u, uint32_t n)
{
	static const struct table *live[FP_UNWIND_TABLES];
	size_t nlive = 0, i;
	uint64_t at = 0;

	for (i = 0; i < FP_UNWIND_TABLES; i++)
		if (u->u_tables[i].t_live)
			live[nlive++] = &u->u_tables[i];
	qsort(live, nlive, sizeof(live[0]), by_first);
	for (i = 0; i < nlive; i++) {
		if (live[i]->t_first - at >= n)
			return at;
		at = (uint64_t)live[i]->t_first + live[i]->t_nrows;
	}
	return u->u_maps.su_nrows - at >= n ? (int64_t)at : -1;
}

/* lru: the live table used longest ago, or -1. */
static int lru(const struct fp_unwind *u)
{
	int i, best = -1;

	for (i = 0; i < FP_UNWIND_TABLES; i++)
		if (u->u_tables[i].t_live &&
		    (best < 0 || u->u_tables[i].t_used < u->u_tables[best].t_used))
			best = i;
	return best;
}

/* rows_write: n rows at row first, in chunks created as needed (kept
 * from evicted tables when there are), which then count one more table.
 * 0 or a negative errno (nothing held). */
static int rows_write(struct fp_unwind *u, uint32_t first, const struct fp_unwind_row *rows,
		      uint32_t n)
{
	uint32_t c, c0 = first >> FP_UNWIND_CHUNK_SHIFT,
		    c1 = (first + n - 1) >> FP_UNWIND_CHUNK_SHIFT;
	uint32_t keys[FP_UNWIND_MAX_ROWS / FP_UNWIND_CHUNK_ROWS + 1], nnew = 0, i;
	int fds[FP_UNWIND_MAX_ROWS / FP_UNWIND_CHUNK_ROWS + 1], err = 0;

	if (!n)
		return 0;
	for (c = c0; c <= c1 && !err; c++) {
		if (u->u_chunks[c].c_rows)
			continue;
		if ((fds[nnew] = chunk_create(u, c)) < 0)
			err = fds[nnew];
		else
			keys[nnew++] = c;
	}
	if (!err)
		err = chunks_publish(u, keys, fds, nnew);
	for (i = 0; i < nnew; i++)
		close(fds[i]); /* the chunks array and the mapping hold them */
	if (err) {
		u->u_stats.us_chunks_failed++;
		fp_warnx("unwind tables: cannot create a chunk of rows: %s", strerror(-err));
		for (i = 0; i < nnew; i++)
			chunk_free(u, keys[i]);
		return err;
	}
	for (i = 0; i < n;) {
		uint32_t at = first + i,
			 in = FP_UNWIND_CHUNK_ROWS - (at & (FP_UNWIND_CHUNK_ROWS - 1));
		if (in > n - i)
			in = n - i;
		memcpy((void *)row_at(u, at), rows + i, (size_t)in * sizeof(*rows));
		i += in;
	}
	for (c = c0; c <= c1; c++)
		u->u_chunks[c].c_tables++;
	return 0;
}

/* chunks_trim: free the chunks no table uses any more.  After a table is
 * placed, so that the chunks its evicted predecessors held serve it
 * first: each delete waits for a grace period. */
static void chunks_trim(struct fp_unwind *u)
{
	uint32_t c;

	for (c = 0; c < u->u_maps.su_nchunks; c++)
		if (u->u_chunks[c].c_rows && !u->u_chunks[c].c_tables)
			chunk_free(u, c);
}

int fp_unwind_add(struct fp_unwind *u, const struct fp_build_id *id, const void *blob, size_t len)
{
	const struct fp_unwind_header *h = blob;
	const struct fp_unwind_cpython *py;
	struct fp_unwind_table where;
	int64_t first;
	uint32_t n;
	int t, old, err;

	if (fp_unwind_table_check(blob, len) || h->uh_arch != HOST_ARCH) {
		u->u_stats.us_rejected++;
		return -EINVAL;
	}
	n = h->uh_nrows;
	if (n > u->u_maps.su_nrows) {
		u->u_stats.us_too_big++;
		return -EFBIG;
	}
	if ((old = find(u, id)) >= 0)
		evict(u, old);
	/* A free slot, then room for the rows: evict until both. */
	for (t = 0; t < FP_UNWIND_TABLES && u->u_tables[t].t_live; t++)
		;
	while (t == FP_UNWIND_TABLES || (first = place(u, n)) < 0) {
		int victim = lru(u);
		if (victim < 0) {
			chunks_trim(u);
			return -ENOSPC;
		}
		evict(u, victim);
		u->u_stats.us_evicted++;
		if (t == FP_UNWIND_TABLES)
			t = victim;
	}
	err = rows_write(u, (uint32_t)first, (const struct fp_unwind_row *)(h + 1), n);
	if (!err) {
		u->u_tables[t] = (struct table){ *id, (uint32_t)first,    n,   ++u->u_tick,
						 1,   u->u_function_rows, NULL };
		where = (struct fp_unwind_table){ (uint32_t)first, n };
		if (bpf_map_update_elem(u->u_maps.su_tables_fd, &(uint32_t){ t }, &where,
					BPF_ANY)) {
			err = -errno;
			chunks_release(u, &u->u_tables[t]);
			memset(&u->u_tables[t], 0, sizeof(u->u_tables[t]));
		}
	}
	chunks_trim(u);
	if (err)
		return err;
	if ((py = fp_unwind_table_cpython(blob, len)) &&
	    (u->u_tables[t].t_py = malloc(sizeof(*py))))
		*u->u_tables[t].t_py = *py;
	u->u_stats.us_installed++;
	u->u_stats.us_tables++;
	u->u_stats.us_rows_used += n;
	return 0;
}

static void part_drop(struct fp_unwind *u)
{
	free(u->u_part_buf);
	u->u_part_buf = NULL;
	u->u_part_total = u->u_part_have = 0;
	memset(&u->u_part_id, 0, sizeof(u->u_part_id));
}

int fp_unwind_take_part(struct fp_unwind *u, const struct fp_table_part *p)
{
	int err;

	if (p->tp_offset == 0) {
		if (u->u_part_buf)
			u->u_stats.us_parts_dropped++; /* the last one never finished */
		part_drop(u);
		if (!u->u_resent_replaces && fp_unwind_has(u, &p->tp_build_id)) {
			/* sent again in a new session: its later parts too */
			u->u_again_id = p->tp_build_id;
			u->u_stats.us_parts_again++;
			return 0;
		}
		memset(&u->u_again_id, 0, sizeof(u->u_again_id));
		if (p->tp_total > sizeof(struct fp_unwind_header) +
					  u->u_maps.su_nrows * sizeof(struct fp_unwind_row) +
					  sizeof(struct fp_unwind_cpython)) {
			u->u_stats.us_too_big++;
			return 0;
		}
		if (!(u->u_part_buf = malloc(p->tp_total)))
			return -ENOMEM;
		u->u_part_id = p->tp_build_id;
		u->u_part_total = p->tp_total;
	} else if (!u->u_part_buf && fp_build_id_eq(&u->u_again_id, &p->tp_build_id)) {
		u->u_stats.us_parts_again++;
		return 0;
	} else if (!u->u_part_buf || !fp_build_id_eq(&u->u_part_id, &p->tp_build_id) ||
		   p->tp_offset != u->u_part_have || p->tp_total != u->u_part_total) {
		u->u_stats.us_parts_dropped++;
		part_drop(u);
		return 0;
	}
	if (p->tp_len > u->u_part_total - u->u_part_have) {
		u->u_stats.us_parts_dropped++;
		part_drop(u);
		return 0;
	}
	memcpy(u->u_part_buf + u->u_part_have, p->tp_data, p->tp_len);
	u->u_part_have += p->tp_len;
	if (u->u_part_have < u->u_part_total)
		return 0;
	if (u->u_defer_fn && u->u_installed_fn &&
	    u->u_defer_fn(&u->u_part_id, u->u_part_buf, u->u_part_total, u->u_defer_arg)) {
		/* kept by the hook, installed once a walk needs it */
		u->u_stats.us_deferred++;
		u->u_installed_fn(&u->u_part_id, u->u_part_buf, u->u_part_total, u->u_function_rows,
				  0, u->u_installed_arg);
		u->u_part_buf = NULL; /* the hook's now */
		part_drop(u);
		return 0;
	}
	err = fp_unwind_add(u, &u->u_part_id, u->u_part_buf, u->u_part_total);
	if (!err && u->u_installed_fn) {
		u->u_installed_fn(&u->u_part_id, u->u_part_buf, u->u_part_total, u->u_function_rows,
				  1, u->u_installed_arg);
		u->u_part_buf = NULL; /* the hook's now */
	}
	part_drop(u);
	return err ? err : 1;
}

static int run_find(const struct fp_unwind *u, uint32_t pid)
{
	uint32_t i;

	for (i = 0; i < u->u_nruns; i++)
		if (u->u_runs[i].r_pid == pid)
			return (int)i;
	return -1;
}

static void run_drop(struct fp_unwind *u, int i)
{
	u->u_runs[i] = u->u_runs[--u->u_nruns];
}

static int by_run_first(const void *a, const void *b)
{
	const struct run *x = *(const struct run *const *)a, *y = *(const struct run *const *)b;

	return x->r_first < y->r_first ? -1 : x->r_first > y->r_first;
}

/* run_place: the first entry of a free run of n entries of unwind_mapv,
 * or -1. */
static int64_t run_place(struct fp_unwind *u, uint32_t n)
{
	static const struct run *live[FP_UNWIND_PROCS];
	uint32_t i, at = 0;

	for (i = 0; i < u->u_nruns; i++)
		live[i] = &u->u_runs[i];
	qsort(live, u->u_nruns, sizeof(live[0]), by_run_first);
	for (i = 0; i < u->u_nruns; i++) {
		if (live[i]->r_first - at >= n)
			return at;
		at = live[i]->r_first + live[i]->r_n;
	}
	return FP_UNWIND_MAPV - at >= n ? (int64_t)at : -1;
}

/* sweep: drop the lists of processes that are gone, and say how many.
 * The exit hook drops a list, but one written for a process that exited
 * while the agent read its mappings comes after it, and stays: with 40
 * new processes a second such lists filled the map within a minute.  The
 * runs of lists the exec and exit hooks dropped are freed too. */
static size_t sweep(struct fp_unwind *u)
{
	struct fp_unwind_proc p;
	size_t n = 0;
	char path[32];
	int i;

	for (i = (int)u->u_nruns - 1; i >= 0; i--) {
		uint32_t pid = u->u_runs[i].r_pid;
		if (bpf_map_lookup_elem(u->u_maps.su_procs_fd, &pid, &p) == 0) {
			snprintf(path, sizeof(path), "/proc/%" PRIu32, pid);
			if (!faccessat(AT_FDCWD, path, F_OK, 0) || errno != ENOENT)
				continue;
			bpf_map_delete_elem(u->u_maps.su_procs_fd, &pid);
			n++;
		}
		run_drop(u, i);
	}
	u->u_stats.us_procs_swept += n;
	return n;
}

/* run_reserve: room for a list of n entries of pid's, and a run for it:
 * the first entry, or -ENOSPC. */
static int64_t run_reserve(struct fp_unwind *u, uint32_t pid, uint32_t n)
{
	int64_t first;
	int pass;

	for (pass = 0; pass < 2; pass++) {
		if ((run_find(u, pid) >= 0 || u->u_nruns < FP_UNWIND_PROCS) &&
		    (first = run_place(u, n)) >= 0)
			return first;
		if (!pass)
			sweep(u);
	}
	return -ENOSPC;
}

int fp_unwind_set_proc(struct fp_unwind *u, uint32_t pid, const struct fp_procmaps *pm)
{
	static struct fp_unwind_map list[FP_UNWIND_MAPS];
	struct fp_unwind_proc p, old;
	uint32_t n = 0;
	int64_t first;
	size_t i;
	int t, r, have, err;

	u->u_tick++;
	for (i = 0; i < pm->pm_nvmas && n < FP_UNWIND_MAPS; i++) {
		const struct fp_vma *v = &pm->pm_vmas[i];
		if (v->fv_build_id_state != 1 || (t = find(u, &v->fv_build_id)) < 0 ||
		    v->fv_end - v->fv_start > UINT32_MAX)
			continue;
		u->u_tables[t].t_used = u->u_tick;
		list[n++] = (struct fp_unwind_map){
			.um_start = v->fv_start,
			.um_bias = v->fv_start - v->fv_pgoff,
			.um_len = (uint32_t)(v->fv_end - v->fv_start),
			.um_table = (uint32_t)t,
		};
	}
	if (!n) {
		fp_unwind_forget_proc(u, pid);
		return 0;
	}
	u->u_stats.us_procs++;
	have = bpf_map_lookup_elem(u->u_maps.su_procs_fd, &pid, &old) == 0;
	r = run_find(u, pid);
	if (have && r >= 0 && u->u_runs[r].r_first == old.up_first && u->u_runs[r].r_n == n &&
	    !memcmp(u->u_mapv + old.up_first, list, n * sizeof(list[0])))
		return 0; /* as it is */
	if ((first = run_reserve(u, pid, n)) < 0) {
		u->u_stats.us_procs_full++;
		return (int)first;
	}
	memcpy(u->u_mapv + first, list, n * sizeof(list[0]));
	p = (struct fp_unwind_proc){ .up_first = (uint32_t)first,
				     .up_nmaps = (uint8_t)n,
				     .up_walker = have ? old.up_walker : FP_WALKER_NATIVE };
	if (bpf_map_update_elem(u->u_maps.su_procs_fd, &pid, &p, BPF_ANY) &&
	    (errno != E2BIG || !sweep(u) ||
	     bpf_map_update_elem(u->u_maps.su_procs_fd, &pid, &p, BPF_ANY))) {
		err = -errno;
		u->u_stats.us_procs_full++;
		return err;
	}
	/* the walker reads the new list from now on: the old run is free */
	if ((r = run_find(u, pid)) >= 0)
		u->u_runs[r] = (struct run){ pid, (uint32_t)first, n };
	else
		u->u_runs[u->u_nruns++] = (struct run){ pid, (uint32_t)first, n };
	return 0;
}

int fp_unwind_set_walker(struct fp_unwind *u, uint32_t pid, unsigned walker)
{
	struct fp_unwind_proc p;

	if (walker >= FP_WALKERS)
		return -EINVAL;
	if (bpf_map_lookup_elem(u->u_maps.su_procs_fd, &pid, &p))
		return -errno;
	if (p.up_walker == walker)
		return 0;
	p.up_walker = (uint8_t)walker;
	return bpf_map_update_elem(u->u_maps.su_procs_fd, &pid, &p, BPF_EXIST) ? -errno : 0;
}

void fp_unwind_on_maps(uint32_t pid, const struct fp_procmaps *pm, void *arg)
{
	fp_unwind_set_proc(arg, pid, pm);
}

void fp_unwind_forget_proc(struct fp_unwind *u, uint32_t pid)
{
	int r = run_find(u, pid);

	bpf_map_delete_elem(u->u_maps.su_procs_fd, &pid);
	if (r >= 0)
		run_drop(u, r);
}

void fp_unwind_stats(const struct fp_unwind *u, struct fp_unwind_stats *st)
{
	uint32_t i;

	*st = u->u_stats;
	st->us_procs_now = u->u_nruns;
	st->us_mapv_used = 0;
	for (i = 0; i < u->u_nruns; i++)
		st->us_mapv_used += u->u_runs[i].r_n;
}

size_t fp_unwind_bytes(const struct fp_unwind *u)
{
	return sizeof(*u) + u->u_part_total;
}
