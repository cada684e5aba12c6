/* tables.c: the agent's unwind tables: from its table cache when it reads
 * a process's mappings, kept there when the symbolizer sends them, and
 * asked for at once (an early interval) for the files it has none of.
 * Called from main.c's hooks and loop, in its one thread; the replies'
 * tables are taken in exchange.c. */
#include "agent.h"
#include "cli.h"
#include "log.h"
#include "unwind_table.h"
#include "vec.h"

#include <errno.h>
#include <inttypes.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

void agent_first_tables(struct agent *a, const char *from)
{
	if (a->ag_first_table_logged)
		return;
	a->ag_first_table_logged = 1;
	fp_info("first unwind tables installed %" PRIu64
		" ms after the BPF programs were loaded, from %s",
		(fp_now_ns(CLOCK_MONOTONIC) - a->ag_loaded_ns) / 1000000, from);
}

#define CACHE_REREAD_NS (60 * 1000000000ull)

/* Tables of libraries larger than this (and without a CPython
 * interpreter's part) are kept in the table cache and installed once a
 * walk stops in their file: a process maps libraries its samples rarely
 * or never walk through (redis-server: libcrypto's 86,000 rows,
 * libstdc++'s 35,000), whose rows would hold device memory for nothing.
 * The price: the first walks through such a file, until the next poll,
 * stop in it.  A process's executable, which nearly every walk crosses,
 * is installed at once. */
#define TABLE_DEFER_BYTES (256u << 10)

enum table_deferral { TABLE_NOT_DEFERRED, TABLE_DEFERRED, TABLE_NEEDED };

/* deferral: id's entry (enum table_deferral), added if absent; NULL when
 * out of memory. */
static uint8_t *deferral(struct agent *a, const struct fp_build_id *id)
{
	uint32_t idx;
	int added;

	if (fp_intern_get(a->ag_deferred, id->fb_data, id->fb_len, &idx, &added) ||
	    fp_vec_reserve_zeroed(&a->ag_deferred_state, &a->ag_deferred_cap, (size_t)idx + 1,
				  sizeof(*a->ag_deferred_state)))
		return NULL;
	return &a->ag_deferred_state[idx];
}

/* undefer: id's table, if deferred before it was known as an
 * executable's, is installed as any other from now on (from the table
 * cache, the maps hook's next step). */
static void undefer(struct agent *a, const struct fp_build_id *id)
{
	uint32_t idx;

	if (fp_intern_find(a->ag_deferred, id->fb_data, id->fb_len, &idx) == 0 &&
	    a->ag_deferred_state[idx] == TABLE_DEFERRED)
		a->ag_deferred_state[idx] = TABLE_NOT_DEFERRED;
}

static int is_deferred(const struct agent *a, const struct fp_build_id *id)
{
	uint32_t idx;

	return fp_intern_find(a->ag_deferred, id->fb_data, id->fb_len, &idx) == 0 &&
	       a->ag_deferred_state[idx] != TABLE_NOT_DEFERRED;
}

/* may_defer: whether id's table blob may wait for a walk to need it (as
 * the unwind maps' defer hook, fp_unwind_set_defer_fn, too). */
static int may_defer(const struct fp_build_id *id, const void *blob, size_t len, void *arg)
{
	struct agent *a = arg;
	uint32_t idx;

	return len > TABLE_DEFER_BYTES &&
	       fp_intern_find(a->ag_executables, id->fb_data, id->fb_len, &idx) != 0 &&
	       !fp_unwind_table_cpython(blob, len);
}

/* defer: id's table waits in the table cache for a walk to need it; 0, or
 * -ENOMEM (then it is to be installed now). */
static int defer(struct agent *a, const struct fp_build_id *id)
{
	uint8_t *st = deferral(a, id);

	if (!st)
		return -ENOMEM;
	if (*st == TABLE_NOT_DEFERRED)
		*st = TABLE_DEFERRED;
	return 0;
}

/* cache_install: install id's table from the table cache, or when
 * deferrable and may_defer says so, defer it.  0 (installed), 1 (deferred),
 * -EINVAL (the file, or the table for the BPF maps, was bad: dropped), or
 * another negative errno. */
static int cache_install(struct agent *a, const struct fp_build_id *id, int deferrable)
{
	uint32_t flags = 0;
	size_t len;
	void *blob;
	int rows = fp_unwind_function_rows(a->ag_unwind), err;

	if ((err = fp_table_cache_load(a->ag_tables, id, &blob, &len, &flags)))
		return err;
	if (deferrable && fp_unwind_table_check(blob, len) == 0 && may_defer(id, blob, len, a) &&
	    !defer(a, id)) {
		free(blob);
		return 1;
	}
	/* As the session it came from said (fp_unwind_set_function_rows). */
	fp_unwind_set_function_rows(a->ag_unwind, flags & FP_TABLE_CACHE_FUNCTION_ROWS);
	err = fp_unwind_add(a->ag_unwind, id, blob, len);
	fp_unwind_set_function_rows(a->ag_unwind, rows);
	free(blob);
	if (err == -EINVAL) /* for another architecture: never of use here */
		fp_table_cache_drop(a->ag_tables, id);
	return err;
}

/* table_from_cache: install id's table from the table cache.  0 when it
 * is installed now.  A file found bad was named in this session's hello
 * as held: the symbolizer would not send its table, so a new session
 * says hello without it. */
static int table_from_cache(struct agent *a, const struct fp_build_id *id)
{
	uint64_t now = fp_now_ns(CLOCK_MONOTONIC);
	uint32_t idx;
	int err, added;

	if (!fp_table_cache_has(a->ag_tables, id))
		return -ENOENT;
	/* Once a minute per table at most: when the processes' tables do not
	 * fit --unwind-mem, each installed from the cache evicts another, and
	 * every remap would read them all again. */
	if (fp_intern_get(a->ag_cache_reads, id->fb_data, id->fb_len, &idx, &added) ||
	    fp_vec_reserve_zeroed(&a->ag_cache_read_ns, &a->ag_cache_read_cap, (size_t)idx + 1,
				  sizeof(*a->ag_cache_read_ns)))
		return -ENOMEM;
	if (!added && now - a->ag_cache_read_ns[idx] < CACHE_REREAD_NS)
		return -EAGAIN;
	a->ag_cache_read_ns[idx] = now;
	if ((err = cache_install(a, id, 1)) == 1)
		return 0; /* installed when a walk needs it */
	if (err == -EINVAL && a->ag_hello_ok && !fp_table_cache_has(a->ag_tables, id)) {
		fp_warnx("a table this session's hello named as held was bad: new session");
		agent_new_session(a);
	}
	if (!err) {
		a->ag_cache_installed++;
		agent_first_tables(a, "the table cache");
	}
	return err;
}

/* agent_tables_on_maps: a process's mappings were read.  Tables the agent
 * lacks come from its table cache; for files it has none of, the symbolizer is
 * told at once (an early interval, once a session per file), so that
 * their tables come in its reply, not one interval later.  Then the BPF
 * program learns which of the process's mappings have tables. */
void agent_tables_on_maps(uint32_t pid, const struct fp_procmaps *pm, void *arg)
{
	struct agent *a = arg;
	int want = 0, seen_file = 0, added;
	uint32_t idx;

	for (size_t i = 0; i < pm->pm_nvmas; i++) {
		const struct fp_vma *v = &pm->pm_vmas[i];

		/* The executable's code is mapped first, below its libraries
		 * (PIE or not); its table is never deferred. */
		if (v->fv_path[0] == '/' && !seen_file++ && v->fv_build_id_state == 1 &&
		    fp_intern_get(a->ag_executables, v->fv_build_id.fb_data, v->fv_build_id.fb_len,
				  &idx, &added) == 0 &&
		    added)
			undefer(a, &v->fv_build_id);
		if (v->fv_build_id_state != 1 || v->fv_path[0] != '/' ||
		    fp_unwind_has(a->ag_unwind, &v->fv_build_id) ||
		    is_deferred(a, &v->fv_build_id) || !table_from_cache(a, &v->fv_build_id))
			continue;
		if (!fp_intern_get(a->ag_tables_asked, v->fv_build_id.fb_data,
				   v->fv_build_id.fb_len, &idx, &added) &&
		    added)
			want = 1;
	}
	if (want) /* at start, -p processes are read at once: no need to wait */
		agent_want_cut(a, a->ag_seq ? EARLY_DELAY_MS : 0);
	if (a->ag_python)
		fp_python_on_maps(pid, pm, a->ag_python);
	else
		fp_unwind_on_maps(pid, pm, a->ag_unwind);
}

/* agent_table_installed: a table from the symbolizer was installed: to be
 * kept on disk for the next agent, and named in the next hellos.  Written
 * by agent_tables_write, once the BPF program walks with it, so that
 * hashing and writing them (2 MB for redis-server's) does not delay that. */
static void agent_table_installed(const struct fp_build_id *id, void *blob, size_t len,
				  int function_rows, int installed, void *arg)
{
	struct agent *a = arg;
	struct unwritten_table *t;

	if (!installed && defer(a, id)) {
		free(blob); /* comes again from the symbolizer */
		return;
	}

	if (fp_vec_reserve(&a->ag_unwritten, &a->ag_unwritten_cap, a->ag_nunwritten + 1,
			   sizeof(*a->ag_unwritten))) {
		free(blob); /* not kept: it comes from the symbolizer again */
		return;
	}
	t = &a->ag_unwritten[a->ag_nunwritten];
	t->ut_blob = blob;
	t->ut_id = *id;
	t->ut_len = len;
	t->ut_flags = function_rows ? FP_TABLE_CACHE_FUNCTION_ROWS : 0;
	a->ag_nunwritten++;
}

void agent_tables_write(struct agent *a)
{
	size_t i;
	int err;

	for (i = 0; i < a->ag_nunwritten; i++) {
		struct unwritten_table *t = &a->ag_unwritten[i];

		err = fp_table_cache_store(a->ag_tables, &t->ut_id, t->ut_blob, t->ut_len,
					   t->ut_flags);
		if (err && err != -E2BIG)
			fp_debug("unwind table not kept on disk: %s", strerror(-err));
		free(t->ut_blob);
	}
	a->ag_nunwritten = 0;
}

void agent_walk_cut(const struct fp_build_id *id, void *arg)
{
	struct agent *a = arg;
	uint32_t idx;

	if (fp_intern_find(a->ag_deferred, id->fb_data, id->fb_len, &idx) ||
	    a->ag_deferred_state[idx] != TABLE_DEFERRED ||
	    fp_vec_reserve(&a->ag_needed, &a->ag_needed_cap, a->ag_nneeded + 1,
			   sizeof(*a->ag_needed)))
		return;
	a->ag_deferred_state[idx] = TABLE_NEEDED;
	a->ag_needed[a->ag_nneeded++] = *id;
}

void agent_tables_needed(struct agent *a)
{
	size_t i;
	int added = 0, err;

	agent_tables_write(a); /* a table that just came: on disk first */
	for (i = 0; i < a->ag_nneeded; i++) {
		const struct fp_build_id *id = &a->ag_needed[i];
		uint8_t *st = deferral(a, id);

		if (st)
			*st = TABLE_NOT_DEFERRED; /* failed: asked for as any other */
		if ((err = cache_install(a, id, 0))) {
			fp_debug("a deferred unwind table could not be installed: %s",
				 strerror(-err));
			continue;
		}
		a->ag_deferred_installed++;
		added = 1;
	}
	a->ag_nneeded = 0;
	if (added)
		fp_collector_remap(a->ag_collector);
}

/* agent_tables_open: the table cache: --table-cache, unless off or unusable
 * (then in memory only, which a hello still lists). */
int agent_tables_open(struct agent *a)
{
	const char *dir = a->ag_o.ao_table_cache_mb ? a->ag_o.ao_table_cache : NULL;
	int err = dir ? fp_table_cache_open(&a->ag_tables, dir,
					    (uint64_t)a->ag_o.ao_table_cache_mb << 20)
		      : -ENOENT;

	if (dir && err)
		fp_warnx("table cache off: %s: %s (unwind tables come from the symbolizer after "
			 "each start)",
			 dir,
			 err == -EPERM ? "not the agent's own directory (its owner must be the "
					 "agent's user, and no one else may write it)"
				       : strerror(-err));
	if (err && (err = fp_table_cache_open(&a->ag_tables, NULL, 0)))
		return err;
	if (!err && dir && fp_table_cache_dir(a->ag_tables)) {
		struct fp_table_cache_stats st;
		fp_table_cache_stats(a->ag_tables, &st);
		fp_info("table cache %s: %" PRIu64 " tables (%" PRIu64 " bytes, at most %u MB)",
			dir, st.tc_files, st.tc_bytes, a->ag_o.ao_table_cache_mb);
	}
	if ((err = fp_intern_alloc(&a->ag_tables_asked)) ||
	    (err = fp_intern_alloc(&a->ag_cache_reads)) ||
	    (err = fp_intern_alloc(&a->ag_deferred)) || (err = fp_intern_alloc(&a->ag_executables)))
		return err;
	fp_unwind_set_installed_fn(a->ag_unwind, agent_table_installed, a);
	/* Deferred tables wait on disk (a cache in memory only loads none);
	 * in memory they would save nothing. */
	if (fp_table_cache_dir(a->ag_tables))
		fp_unwind_set_defer_fn(a->ag_unwind, may_defer, a);
	return 0;
}

void agent_tables_close(struct agent *a)
{
	agent_tables_write(a);
	free(a->ag_unwritten);
	free(a->ag_needed);
	free(a->ag_deferred_state);
	fp_intern_free(a->ag_deferred);
	fp_intern_free(a->ag_executables);
	fp_intern_free(a->ag_cache_reads);
	free(a->ag_cache_read_ns);
	fp_table_cache_close(a->ag_tables);
	fp_intern_free(a->ag_tables_asked);
}

void agent_tables_log(struct agent *a)
{
	struct fp_table_cache_stats st;
	const char *dir = fp_table_cache_dir(a->ag_tables);

	fp_table_cache_stats(a->ag_tables, &st);
	fp_info("table cache %s: %" PRIu64 " tables installed from it; %" PRIu64 " files (%" PRIu64
		" bytes), %" PRIu64 " read, %" PRIu64 " written, %" PRIu64
		" bad (removed), %" PRIu64 " removed past the bound, %" PRIu64 " errors; %" PRIu64
		" intervals closed early",
		dir ? dir : "off", a->ag_cache_installed, st.tc_files, st.tc_bytes, st.tc_loaded,
		st.tc_stored, st.tc_bad, st.tc_evicted, st.tc_errors, a->ag_early_cuts);
}
