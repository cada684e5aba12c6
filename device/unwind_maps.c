/* unwind_maps.c: installing unwind tables in the BPF maps within a fixed
 * budget of rows, and the per-process lists of mappings that use them.
 *
 * A table's slot index is what the per-process lists name, so a slot is
 * reused only after every list that names it was rewritten: eviction first
 * empties the slot (the walker then falls back to the frame pointer), then
 * scrubs the lists, then frees the rows. */
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
#include <unistd.h>

#if defined(__aarch64__)
#define HOST_ARCH FP_UNWIND_ARCH_ARM64
#define ENTRY_CFA 0 /* CFA = SP at a function's first instruction */
#else
#define HOST_ARCH FP_UNWIND_ARCH_X86_64
#define ENTRY_CFA 1 /* CFA = SP + 8: the return address just pushed */
#endif

struct table {
	struct fp_build_id t_id;
	uint32_t t_first, t_nrows;
	uint64_t t_used; /* u_tick at the last use */
	int t_live;
	int t_function_rows; /* a row at each function's start (fp_unwind_set_function_rows) */
	struct fp_unwind_cpython *t_py; /* owned; the file's CPython interpreter */
};

struct fp_unwind {
	struct fp_sampler_unwind u_maps;
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
	int u_resent_replaces; /* fp_unwind_set_resent_replaces */
};

int fp_unwind_alloc(struct fp_unwind **out, struct fp_sampler *s)
{
	struct fp_unwind *u = calloc(1, sizeof(*u));
	int err;

	if (!u)
		return -ENOMEM;
	err = fp_sampler_unwind_maps(s, &u->u_maps);
	if (err) {
		free(u);
		return err;
	}
	u->u_stats.us_rows_total = u->u_maps.su_nrows;
	*out = u;
	return 0;
}

void fp_unwind_free(struct fp_unwind *u)
{
	int t;

	if (!u)
		return;
	for (t = 0; t < FP_UNWIND_TABLES; t++)
		free(u->u_tables[t].t_py);
	free(u->u_part_buf);
	free(u);
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
	const struct fp_unwind_row *rows, *r;
	uint32_t lo, hi;
	int t = find(u, id);

	if (t < 0 || !u->u_tables[t].t_nrows)
		return -ENOENT;
	rows = u->u_maps.su_rows + u->u_tables[t].t_first;
	if (offset < rows[0].ur_pc)
		return -ENOENT;
	lo = 0;
	hi = u->u_tables[t].t_nrows;
	while (hi - lo > 1) { /* rows[lo].ur_pc <= offset < rows[hi].ur_pc */
		uint32_t mid = lo + (hi - lo) / 2;
		if (rows[mid].ur_pc <= offset)
			lo = mid;
		else
			hi = mid;
	}
	r = &rows[lo];
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

int fp_unwind_fold(const struct fp_build_id *id, uint64_t offset, uint64_t *start, void *arg)
{
	return fp_unwind_row_start(arg, id, offset, start);
}

/* scrub: drop slot t from every process list that names it. */
static void scrub(struct fp_unwind *u, uint32_t t)
{
	struct fp_unwind_proc p;
	uint32_t key, next, *prev = NULL;
	uint32_t i, j;

	while (bpf_map_get_next_key(u->u_maps.su_procs_fd, prev, &next) == 0) {
		key = next;
		prev = &key;
		if (bpf_map_lookup_elem(u->u_maps.su_procs_fd, &key, &p) ||
		    p.up_nmaps > FP_UNWIND_MAPS)
			continue;
		for (i = j = 0; i < p.up_nmaps; i++)
			if (p.up_maps[i].um_table != t)
				p.up_maps[j++] = p.up_maps[i];
		if (j == p.up_nmaps)
			continue;
		p.up_nmaps = j;
		bpf_map_update_elem(u->u_maps.su_procs_fd, &key, &p, BPF_EXIST);
	}
}

static void evict(struct fp_unwind *u, uint32_t t)
{
	struct fp_unwind_table none = { 0, 0 };

	bpf_map_update_elem(u->u_maps.su_tables_fd, &t, &none, BPF_ANY);
	scrub(u, t);
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

int fp_unwind_add(struct fp_unwind *u, const struct fp_build_id *id, const void *blob, size_t len)
{
	const struct fp_unwind_header *h = blob;
	const struct fp_unwind_cpython *py;
	struct fp_unwind_table where;
	int64_t first;
	uint32_t n;
	int t, old;

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
		if (victim < 0)
			return -ENOSPC;
		evict(u, victim);
		u->u_stats.us_evicted++;
		if (t == FP_UNWIND_TABLES)
			t = victim;
	}
	memcpy(u->u_maps.su_rows + first, (const char *)blob + sizeof(*h),
	       (size_t)n * sizeof(struct fp_unwind_row));
	where = (struct fp_unwind_table){ (uint32_t)first, n };
	if (bpf_map_update_elem(u->u_maps.su_tables_fd, &(uint32_t){ t }, &where, BPF_ANY))
		return -errno;
	u->u_tables[t] = (struct table){ *id, (uint32_t)first,    n,   ++u->u_tick,
					 1,   u->u_function_rows, NULL };
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
	err = fp_unwind_add(u, &u->u_part_id, u->u_part_buf, u->u_part_total);
	if (!err && u->u_installed_fn)
		u->u_installed_fn(&u->u_part_id, u->u_part_buf, u->u_part_total, u->u_function_rows,
				  u->u_installed_arg);
	part_drop(u);
	return err ? err : 1;
}

/* sweep: drop the lists of processes that are gone, and say how many.
 * The exit hook drops a list, but one written for a process that exited
 * while the agent read its mappings comes after it, and stays: with 40
 * new processes a second such lists filled the map within a minute. */
static size_t sweep(struct fp_unwind *u)
{
	static uint32_t gone[FP_UNWIND_PROCS];
	uint32_t key, next, *prev = NULL;
	size_t n = 0, i;
	char path[32];

	while (n < FP_UNWIND_PROCS &&
	       bpf_map_get_next_key(u->u_maps.su_procs_fd, prev, &next) == 0) {
		key = next;
		prev = &key;
		snprintf(path, sizeof(path), "/proc/%" PRIu32, key);
		if (faccessat(AT_FDCWD, path, F_OK, 0) && errno == ENOENT)
			gone[n++] = key;
	}
	/* Deleting while iterating would restart the walk: afterwards. */
	for (i = 0; i < n; i++)
		bpf_map_delete_elem(u->u_maps.su_procs_fd, &gone[i]);
	u->u_stats.us_procs_swept += n;
	return n;
}

int fp_unwind_set_proc(struct fp_unwind *u, uint32_t pid, const struct fp_procmaps *pm)
{
	static struct fp_unwind_proc p; /* 1.5 KiB: not on the stack */
	size_t i;
	int t;

	memset(&p, 0, sizeof(p));
	u->u_tick++;
	for (i = 0; i < pm->pm_nvmas && p.up_nmaps < FP_UNWIND_MAPS; i++) {
		const struct fp_vma *v = &pm->pm_vmas[i];
		if (v->fv_build_id_state != 1 || (t = find(u, &v->fv_build_id)) < 0 ||
		    v->fv_end - v->fv_start > UINT32_MAX)
			continue;
		u->u_tables[t].t_used = u->u_tick;
		p.up_maps[p.up_nmaps++] = (struct fp_unwind_map){
			.um_start = v->fv_start,
			.um_bias = v->fv_start - v->fv_pgoff,
			.um_len = (uint32_t)(v->fv_end - v->fv_start),
			.um_table = (uint32_t)t,
		};
	}
	if (!p.up_nmaps) {
		fp_unwind_forget_proc(u, pid);
		return 0;
	}
	u->u_stats.us_procs++;
	if (bpf_map_update_elem(u->u_maps.su_procs_fd, &pid, &p, BPF_ANY) &&
	    (errno != E2BIG || !sweep(u) ||
	     bpf_map_update_elem(u->u_maps.su_procs_fd, &pid, &p, BPF_ANY))) {
		u->u_stats.us_procs_full++;
		return -errno;
	}
	return 0;
}

void fp_unwind_on_maps(uint32_t pid, const struct fp_procmaps *pm, void *arg)
{
	fp_unwind_set_proc(arg, pid, pm);
}

void fp_unwind_forget_proc(struct fp_unwind *u, uint32_t pid)
{
	bpf_map_delete_elem(u->u_maps.su_procs_fd, &pid);
}

void fp_unwind_stats(const struct fp_unwind *u, struct fp_unwind_stats *st)
{
	*st = u->u_stats;
}

size_t fp_unwind_bytes(const struct fp_unwind *u)
{
	return sizeof(*u) + u->u_part_total;
}
