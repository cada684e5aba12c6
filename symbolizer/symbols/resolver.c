/* resolver.c: symbol sources, the cache, kallsyms assembly, frame look-up. */
#include "resolver.h"
#include "cfi.h"
#include "cli.h"
#include "elfnote.h"
#include "elfsyms.h"
#include "intern.h"
#include "isolate.h"
#include "log.h"
#include "openroot.h"
#include "symtab.h"
#include "unwind_table.h"
#include "vec.h"

#include <errno.h>
#include <fcntl.h>
#include <gelf.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#define MAX_PENDING_KSYMS 64
#define MAX_WORKERS 64
#define MAX_QUEUE 65536

/* A unit of symbol work for the background workers (fp_resolver_start). */
enum job_kind {
	JOB_SYMBOLS, /* a build-ID's table from its sources */
	JOB_UNWIND,  /* a build-ID's unwind table search */
	JOB_FILE,    /* fp_resolver_add_file_async */
	JOB_CFI,     /* fp_resolver_add_cfi_async */
};

enum job_state { JOB_FREE, JOB_QUEUED, JOB_RUNNING };

struct resolver_job {
	uint8_t jb_state;  /* enum job_state */
	uint8_t jb_kind;   /* enum job_kind */
	uint64_t jb_order; /* first queued, first run */
	struct fp_build_id jb_id;
	char *jb_path; /* JOB_SYMBOLS, JOB_UNWIND: NULL if unknown */
	uint32_t jb_pid;
	int jb_fd; /* JOB_FILE, JOB_CFI: owned */
};

struct pending_ksyms {
	struct fp_build_id pk_id;
	uint64_t pk_session;
	uint32_t pk_next_part;
	struct fp_symtab_builder *pk_builder;
};

/* How a build-ID's unwind table search went (fp_resolver_unwind). */
enum unwind_state {
	UNWIND_UNSEARCHED, /* not yet, or a new place to look was noted */
	UNWIND_NOT_HERE,   /* no source of this host has CFI: a device's copy is wanted */
	UNWIND_DEVICE,     /* a device is being asked for it */
	UNWIND_NO_CFI,     /* no source has CFI, a device's copy included */
	UNWIND_FAILED,     /* CFI found, but its table could not be compiled */
};

/* Where a build-ID's file was seen, how its unwind table's search went,
 * and why it has no table (the counts in rs_no_table). */
struct unwind_hint {
	char *uh_path; /* NULL: none known */
	uint32_t uh_pid;
	uint8_t uh_state;   /* enum unwind_state */
	uint8_t uh_why;     /* enum fp_unwind_why */
	uint8_t uh_symbols; /* its symbols are stored (as last seen) */
	uint8_t uh_logged;  /* the reasons logged, bits 1 << why */
	uint8_t uh_nofile;  /* this host has no file for it (host_may_have_cfi) */
	uint8_t uh_seen;    /* a file's CFI (or its lack) was looked at (job_ready) */
};

struct fp_resolver {
	struct fp_symcache *rv_cache;
	char *rv_debug_dir;
	int rv_local_files;
	int rv_proc_root;
	fp_fetch_fn rv_fetch;
	void *rv_fetch_arg;
	int rv_fetch_remote;
	pthread_mutex_t rv_lock;     /* rv_failed, rv_stats: uploads come from other threads */
	struct fp_intern *rv_failed; /* build-IDs no source could provide */
	struct pending_ksyms rv_pending[MAX_PENDING_KSYMS];
	struct fp_resolver_stats rv_stats;
	struct fp_intern *rv_hint_ids; /* build-ID -> rv_hints index; under rv_lock */
	struct unwind_hint *rv_hints;
	size_t rv_hints_cap;
	/* The workers' queue, all under rv_lock (fp_resolver_start). */
	pthread_t *rv_workers;
	unsigned rv_nworkers;         /* 0: symbol work in the caller's thread */
	struct resolver_job *rv_jobs; /* rv_njobs slots: queued and running */
	size_t rv_njobs, rv_queue_max, rv_nqueued;
	uint64_t rv_order;
	int rv_stop;
	pthread_cond_t rv_work; /* a job was queued, or stop */
	pthread_cond_t rv_done; /* a job ended (CLOCK_MONOTONIC) */
};

struct lookup_table {
	int lt_ok;
	struct fp_symtab lt_table;
	void *lt_blob; /* ingested during this look-up, owned */
};

struct fp_lookup {
	struct fp_resolver *lk_resolver;
	struct fp_symcache_txn *lk_txn;
	struct fp_intern *lk_seen; /* build-ID -> lk_tables index */
	struct lookup_table *lk_tables;
	size_t lk_tables_cap;
};

static void workers_stop(struct fp_resolver *r);

int fp_resolver_open(struct fp_resolver **out, const struct fp_resolver_opts *o)
{
	struct fp_resolver *r = calloc(1, sizeof(*r));
	int err;

	if (!r)
		return -ENOMEM;
	r->rv_local_files = o->ro_local_files;
	r->rv_proc_root = o->ro_proc_root;
	r->rv_fetch = o->ro_fetch;
	r->rv_fetch_arg = o->ro_fetch_arg;
	r->rv_fetch_remote = o->ro_fetch_remote;
	pthread_mutex_init(&r->rv_lock, NULL);
	{
		pthread_condattr_t ca;

		pthread_condattr_init(&ca);
		pthread_condattr_setclock(&ca, CLOCK_MONOTONIC);
		pthread_cond_init(&r->rv_done, &ca);
		pthread_condattr_destroy(&ca);
		pthread_cond_init(&r->rv_work, NULL);
	}
	if ((o->ro_debug_dir && !(r->rv_debug_dir = strdup(o->ro_debug_dir))) ||
	    fp_intern_alloc(&r->rv_failed) || fp_intern_alloc(&r->rv_hint_ids)) {
		err = -ENOMEM;
		goto fail;
	}
	if ((err = fp_symcache_open(&r->rv_cache, o->ro_cache_dir))) {
		fp_warnx("cannot open the symbol cache in %s: %s", o->ro_cache_dir, strerror(-err));
		goto fail;
	}
	*out = r;
	return 0;
fail:
	fp_resolver_close(r);
	return err;
}

void fp_resolver_close(struct fp_resolver *r)
{
	int i;

	if (!r)
		return;
	workers_stop(r);
	for (i = 0; i < MAX_PENDING_KSYMS; i++)
		fp_symtab_builder_free(r->rv_pending[i].pk_builder);
	fp_symcache_close(r->rv_cache);
	fp_intern_free(r->rv_failed);
	for (i = 0; r->rv_hint_ids && i < (int)fp_intern_count(r->rv_hint_ids); i++)
		free(r->rv_hints[i].uh_path);
	fp_intern_free(r->rv_hint_ids);
	free(r->rv_hints);
	free(r->rv_debug_dir);
	pthread_cond_destroy(&r->rv_work);
	pthread_cond_destroy(&r->rv_done);
	pthread_mutex_destroy(&r->rv_lock);
	free(r);
}

const char *fp_symbol_source_name(int source)
{
	static const char *const names[FP_SOURCE_COUNT] = {
		[FP_SOURCE_CACHE] = "cache", [FP_SOURCE_DEBUG_DIR] = "debug_dir",
		[FP_SOURCE_LOCAL] = "local", [FP_SOURCE_CONTAINER] = "container",
		[FP_SOURCE_FETCH] = "fetch",
	};

	return source >= 0 && source < FP_SOURCE_COUNT ? names[source] : NULL;
}

void fp_resolver_stats(const struct fp_resolver *r, struct fp_resolver_stats *st)
{
	pthread_mutex_lock((pthread_mutex_t *)&r->rv_lock);
	*st = r->rv_stats;
	st->rs_queue_depth = r->rv_nqueued;
	pthread_mutex_unlock((pthread_mutex_t *)&r->rv_lock);
}

/* failed_find / failed_mark / failed_clear: the negative memo, locked. */
static int failed_find(struct fp_resolver *r, const struct fp_build_id *id)
{
	uint32_t idx;
	int found;

	pthread_mutex_lock(&r->rv_lock);
	found = fp_intern_find(r->rv_failed, id->fb_data, id->fb_len, &idx) == 0;
	pthread_mutex_unlock(&r->rv_lock);
	return found;
}

static void failed_mark(struct fp_resolver *r, const struct fp_build_id *id)
{
	uint32_t idx;

	pthread_mutex_lock(&r->rv_lock);
	fp_intern_get(r->rv_failed, id->fb_data, id->fb_len, &idx, NULL);
	r->rv_stats.rs_ingest_failed++;
	pthread_mutex_unlock(&r->rv_lock);
}

/* The memo cannot delete one key; rebuilding it without that key is fine
 * for something that happens once per upload. */
static int failed_clear(struct fp_resolver *r, const struct fp_build_id *id)
{
	struct fp_intern *rebuilt;
	uint32_t skip, i, unused;
	int err = 0;

	pthread_mutex_lock(&r->rv_lock);
	if (fp_intern_find(r->rv_failed, id->fb_data, id->fb_len, &skip) != 0)
		goto out;
	if (fp_intern_alloc(&rebuilt)) {
		err = -ENOMEM;
		goto out;
	}
	for (i = 0; i < fp_intern_count(r->rv_failed) && !err; i++) {
		size_t len;
		const void *key = fp_intern_key(r->rv_failed, i, &len);

		if (i != skip && fp_intern_get(rebuilt, key, len, &unused, NULL))
			err = -ENOMEM;
	}
	if (err) {
		fp_intern_free(rebuilt);
	} else {
		fp_intern_free(r->rv_failed);
		r->rv_failed = rebuilt;
	}
out:
	pthread_mutex_unlock(&r->rv_lock);
	return err;
}

/* hint_find: id's hint, or NULL.  Called with rv_lock held. */
static struct unwind_hint *hint_find(struct fp_resolver *r, const struct fp_build_id *id)
{
	uint32_t idx;

	return fp_intern_find(r->rv_hint_ids, id->fb_data, id->fb_len, &idx) == 0
		       ? &r->rv_hints[idx]
		       : NULL;
}

/* hint_for: id's hint, added when new (NULL when full or out of memory).
 * Called with rv_lock held. */
static struct unwind_hint *hint_for(struct fp_resolver *r, const struct fp_build_id *id)
{
	struct unwind_hint *h = hint_find(r, id);
	uint32_t idx;
	int added;

	if (h)
		return h;
	if (fp_intern_count(r->rv_hint_ids) >= FP_RESOLVER_MAX_PATHS)
		return NULL;
	if (fp_vec_reserve(&r->rv_hints, &r->rv_hints_cap, fp_intern_count(r->rv_hint_ids) + 1,
			   sizeof(*r->rv_hints)) ||
	    fp_intern_get(r->rv_hint_ids, id->fb_data, id->fb_len, &idx, &added))
		return NULL;
	memset(&r->rv_hints[idx], 0, sizeof(r->rv_hints[idx]));
	return &r->rv_hints[idx];
}

const char *fp_unwind_why_name(int why)
{
	static const char *const names[FP_UNWIND_WHY_COUNT] = {
		[FP_UNWIND_SEARCHING] = "searching",
		[FP_UNWIND_DEVICE] = "device",
		[FP_UNWIND_NO_CFI] = "no_cfi",
		[FP_UNWIND_COMPILE_FAILED] = "compile_failed",
		[FP_UNWIND_FRAME_POINTERS] = "frame_pointers",
	};

	return why > 0 && why < FP_UNWIND_WHY_COUNT ? names[why] : NULL;
}

/* state_why: why a build-ID whose search is in state has no table. */
static int state_why(int state)
{
	switch (state) {
	case UNWIND_UNSEARCHED:
		return FP_UNWIND_SEARCHING;
	case UNWIND_NOT_HERE:
	case UNWIND_DEVICE:
		return FP_UNWIND_DEVICE;
	case UNWIND_NO_CFI:
		return FP_UNWIND_NO_CFI;
	default:
		return FP_UNWIND_COMPILE_FAILED;
	}
}

/* why_set: the reason h (id's) has no table is why (FP_UNWIND_WHY_NONE: it
 * has one), and whether its symbols are stored is symbols (< 0: as it
 * was).  Build-IDs with symbols are counted by reason, and each reason is
 * logged once per build-ID.  Called with rv_lock held. */
static void why_set(struct fp_resolver *r, const struct fp_build_id *id, struct unwind_hint *h,
		    int why, int symbols)
{
	static const char *const text[FP_UNWIND_WHY_COUNT] = {
		[FP_UNWIND_SEARCHING] = "searching this host's sources for its CFI",
		[FP_UNWIND_DEVICE] = "no source of this host has CFI: asking a device for it",
		[FP_UNWIND_NO_CFI] = "no source has CFI, a device's copy included: its stacks stop "
				     "there",
		[FP_UNWIND_COMPILE_FAILED] = "its CFI could not be compiled: its stacks stop there",
		[FP_UNWIND_FRAME_POINTERS] = "its code keeps frame pointers: no table needed",
	};
	char hex[2 * FP_BUILD_ID_MAX + 1];
	int was = h->uh_symbols ? h->uh_why : FP_UNWIND_WHY_NONE;

	if (was)
		r->rv_stats.rs_no_table[was]--;
	h->uh_why = (uint8_t)why;
	if (symbols >= 0)
		h->uh_symbols = symbols != 0;
	if (!h->uh_symbols || !why)
		return;
	r->rv_stats.rs_no_table[why]++;
	if (why != was)
		r->rv_stats.rs_no_table_total[why]++;
	if (h->uh_logged & (1u << why))
		return;
	h->uh_logged |= (uint8_t)(1u << why);
	fp_build_id_hex(id, hex);
	if (why == FP_UNWIND_SEARCHING)
		fp_debug("unwind table of %s (%s): %s", hex, h->uh_path ?: "path unknown",
			 text[why]);
	else if (why == FP_UNWIND_NO_CFI || why == FP_UNWIND_COMPILE_FAILED)
		fp_warnx("unwind table of %s (%s): %s", hex, h->uh_path ?: "path unknown",
			 text[why]);
	else
		fp_info("unwind table of %s (%s): %s", hex, h->uh_path ?: "path unknown",
			text[why]);
}

/* state_set: id's search is in state now. */
static void state_set(struct fp_resolver *r, const struct fp_build_id *id, int state)
{
	struct unwind_hint *h;

	pthread_mutex_lock(&r->rv_lock);
	if ((h = hint_for(r, id))) {
		h->uh_state = (uint8_t)state;
		why_set(r, id, h, state_why(state), -1);
	}
	pthread_mutex_unlock(&r->rv_lock);
}

/* table_found: id has the (checked) table blob: no reason to count, or,
 * when the code keeps frame pointers, that one.  ask_symbols: whether its
 * symbols may be looked up (not while this thread holds a read
 * transaction of the cache). */
static void table_found(struct fp_resolver *r, const struct fp_build_id *id, const void *blob,
			size_t len, int ask_symbols)
{
	int needed = fp_unwind_table_needed(blob, len);
	int symbols = !needed && ask_symbols ? fp_resolver_has(r, id) : -1;
	struct unwind_hint *h;

	pthread_mutex_lock(&r->rv_lock);
	h = needed ? hint_find(r, id) : hint_for(r, id);
	if (h)
		why_set(r, id, h, needed ? FP_UNWIND_WHY_NONE : FP_UNWIND_FRAME_POINTERS, symbols);
	pthread_mutex_unlock(&r->rv_lock);
}

/* symbols_stored: id's symbols are in the cache now. */
static void symbols_stored(struct fp_resolver *r, const struct fp_build_id *id)
{
	struct unwind_hint *h;

	pthread_mutex_lock(&r->rv_lock);
	if ((h = hint_find(r, id)) && !h->uh_symbols) {
		h->uh_nofile = 0;
		why_set(r, id, h, h->uh_why, 1);
	}
	pthread_mutex_unlock(&r->rv_lock);
}

/* compile_failed: whether err, of ingest_unwind, says that a file's CFI
 * could not be compiled (not that there was none, nor no file). */
static int compile_failed(int err)
{
	return err == -ENOEXEC;
}

int fp_resolver_kfuncs(struct fp_resolver *r, const struct fp_build_id *id, struct fp_kfuncs *out)
{
	struct fp_symcache_txn *txn;
	struct fp_symtab t;
	int err;

	if ((err = fp_symcache_begin(r->rv_cache, &txn)))
		return err;
	/* Built inside the transaction: the table is the cache's memory. */
	if (!(err = fp_symcache_get(txn, id, &t)) && !(err = fp_symtab_kfuncs(&t, out)))
		out->kf_build_id = *id;
	fp_symcache_end(txn);
	return err;
}

int fp_resolver_has(struct fp_resolver *r, const struct fp_build_id *id)
{
	struct fp_symcache_txn *txn;
	struct fp_symtab t;
	int found;

	if (fp_symcache_begin(r->rv_cache, &txn))
		return 0;
	found = fp_symcache_get(txn, id, &t) == 0;
	fp_symcache_end(txn);
	return found;
}

static struct pending_ksyms *pending_for(struct fp_resolver *r, const struct fp_ksyms *part)
{
	struct pending_ksyms *free_slot = NULL;
	int i;

	for (i = 0; i < MAX_PENDING_KSYMS; i++) {
		struct pending_ksyms *p = &r->rv_pending[i];
		if (p->pk_builder && fp_build_id_eq(&p->pk_id, &part->fs_build_id))
			return p;
		if (!p->pk_builder && !free_slot)
			free_slot = p;
	}
	if (!free_slot) /* reuse the first: an abandoned upload */
		free_slot = &r->rv_pending[0];
	fp_symtab_builder_free(free_slot->pk_builder);
	memset(free_slot, 0, sizeof(*free_slot));
	return free_slot;
}

int fp_resolver_ksyms(struct fp_resolver *r, const struct fp_ksyms *part)
{
	struct pending_ksyms *p;
	size_t i, len;
	void *blob;
	int err;

	if (!part->fs_build_id.fb_len)
		return -EINVAL;
	p = pending_for(r, part);
	if (part->fs_part == 0) {
		/* A restart of this target's upload replaces what came before. */
		fp_symtab_builder_free(p->pk_builder);
		memset(p, 0, sizeof(*p));
		if ((err = fp_symtab_builder_alloc(&p->pk_builder)))
			return err;
		p->pk_id = part->fs_build_id;
		p->pk_session = part->fs_session;
	} else if (!p->pk_builder || p->pk_session != part->fs_session ||
		   p->pk_next_part != part->fs_part) {
		return -EINVAL;
	}
	for (i = 0; i < part->fs_nsyms; i++) {
		err = fp_symtab_builder_add_symbol(p->pk_builder, part->fs_syms[i].fk_offset, 0,
						   part->fs_syms[i].fk_name, NULL);
		if (err && err != -EINVAL)
			goto drop;
	}
	p->pk_next_part++;
	if (!part->fs_last)
		return 0;
	err = fp_symtab_builder_finish(p->pk_builder, &blob, &len);
	if (!err) {
		err = fp_symcache_put(r->rv_cache, &p->pk_id, blob, len);
		free(blob);
	}
	if (!err) {
		pthread_mutex_lock(&r->rv_lock);
		r->rv_stats.rs_ksyms_stored++;
		pthread_mutex_unlock(&r->rv_lock);
	}
drop:
	fp_symtab_builder_free(p->pk_builder);
	memset(p, 0, sizeof(*p));
	return err;
}

int fp_resolver_begin(struct fp_resolver *r, struct fp_lookup **out)
{
	struct fp_lookup *l = calloc(1, sizeof(*l));
	int err;

	if (!l)
		return -ENOMEM;
	l->lk_resolver = r;
	if ((err = fp_intern_alloc(&l->lk_seen)) ||
	    (err = fp_symcache_begin(r->rv_cache, &l->lk_txn))) {
		fp_resolver_end(l);
		return err;
	}
	*out = l;
	return 0;
}

void fp_resolver_end(struct fp_lookup *l)
{
	size_t i;

	if (!l)
		return;
	for (i = 0; l->lk_seen && i < fp_intern_count(l->lk_seen); i++)
		free(l->lk_tables[i].lt_blob);
	if (l->lk_txn)
		fp_symcache_end(l->lk_txn);
	fp_intern_free(l->lk_seen);
	free(l->lk_tables);
	free(l);
}

/* How much an unwind table says of its file, compared field by field:
 * first what it knows of the file's CPython interpreter (the trailer at
 * all, then its version, then the eval loop's .cold part), then its FDEs.
 * A stripped interpreter and its unstripped copy (or a sparse copy
 * fetched before the version could be read) share a build-ID: the table
 * with more of the interpreter wins even with fewer FDEs. */
struct table_rank {
	uint32_t rk_cpython, rk_version, rk_cold, rk_fdes;
};

/* table_rank: the rank of a table that passed fp_unwind_table_check. */
static struct table_rank table_rank(const void *blob, size_t len)
{
	const struct fp_unwind_cpython *py = fp_unwind_table_cpython(blob, len);
	const struct fp_unwind_header *h = blob;
	struct table_rank rk = { 0 };

	if (len >= sizeof(*h))
		rk.rk_fdes = h->uh_fdes;
	if (py) {
		rk.rk_cpython = 1;
		rk.rk_version = py->uc_version != 0;
		rk.rk_cold = py->uc_eval[1].end > py->uc_eval[1].start;
	}
	return rk;
}

/* rank_above: whether a says more than b. */
static int rank_above(const struct table_rank *a, const struct table_rank *b)
{
	if (a->rk_cpython != b->rk_cpython)
		return a->rk_cpython > b->rk_cpython;
	if (a->rk_version != b->rk_version)
		return a->rk_version > b->rk_version;
	if (a->rk_cold != b->rk_cold)
		return a->rk_cold > b->rk_cold;
	return a->rk_fdes > b->rk_fdes;
}

/* stored_rank: the rank of id's stored unwind table; 0, or -ENOENT when
 * none can be read (any table replaces it). */
static int stored_rank(struct fp_resolver *r, const struct fp_build_id *id, struct table_rank *rk)
{
	void *blob;
	size_t len;

	if (fp_symcache_get_unwind(r->rv_cache, id, &blob, &len))
		return -ENOENT;
	*rk = table_rank(blob, len);
	free(blob);
	return 0;
}

/* eh_frame_nobits: whether the ELF file at fd has an .eh_frame section
 * without bytes (NOBITS): a detached debug file, whose table (from a
 * .debug_frame at most) never replaces the binary's. */
static int eh_frame_nobits(int fd)
{
	struct fp_elfnote_section s;

	return fp_elfnote_section(fd, ".eh_frame", &s) == 0 && s.es_type == SHT_NOBITS;
}

/* ingest_unwind: compile and store the unwind table of the ELF file at fd
 * (whose build-ID is id) when it has CFI and says more than the stored
 * table (table_rank); a file whose .eh_frame is NOBITS (a debug file)
 * only fills the place of a missing table.  0, -ENOENT (no CFI, none in
 * its code, or nothing more than stored), -ENOEXEC (the compile failed:
 * malformed, too many rows...) or the error of the store. */
/* cfi_seen: a file of id was looked at for CFI, and its table stored if
 * it had one: a search held back behind the symbols' search of id need
 * not wait for their DWARF (job_ready).  Returns err. */
static int cfi_seen(struct fp_resolver *r, const struct fp_build_id *id, int err)
{
	struct unwind_hint *h;

	pthread_mutex_lock(&r->rv_lock);
	if ((h = hint_find(r, id)) && !h->uh_seen) {
		h->uh_seen = 1;
		pthread_cond_broadcast(&r->rv_work);
	}
	pthread_mutex_unlock(&r->rv_lock);
	return err;
}

static int ingest_unwind(struct fp_resolver *r, int fd, const struct fp_build_id *id)
{
	struct table_rank new_rank, old_rank;
	void *blob;
	size_t len;
	int err, have_old;

	if (!fp_cfi_has_cfi(fd))
		return cfi_seen(r, id, -ENOENT);
	err = fp_cfi_compile_isolated(fd, &blob, &len);
	if (err) {
		pthread_mutex_lock(&r->rv_lock);
		r->rv_stats.rs_unwind_failed++;
		pthread_mutex_unlock(&r->rv_lock);
		return cfi_seen(r, id, err == -ENOENT ? err : -ENOEXEC);
	}
	new_rank = table_rank(blob, len);
	have_old = stored_rank(r, id, &old_rank) == 0;
	if (have_old && (eh_frame_nobits(fd) || !rank_above(&new_rank, &old_rank)))
		err = -ENOENT;
	else if ((err = fp_symcache_put_unwind(r->rv_cache, id, blob, len)))
		fp_warnx("cannot store an unwind table in the cache: %s", strerror(-err));
	if (!err) {
		pthread_mutex_lock(&r->rv_lock);
		r->rv_stats.rs_unwind_compiled++;
		r->rv_stats.rs_unwind_bytes += len;
		pthread_mutex_unlock(&r->rv_lock);
		table_found(r, id, blob, len, 0);
	}
	free(blob);
	return cfi_seen(r, id, err);
}

/* same_build: whether the ELF file at fd has build-ID id.  0 or -ESTALE
 * (a different build of the same path) or the error reading it. */
static int same_build(int fd, const struct fp_build_id *id)
{
	struct fp_build_id file_id;
	int err = fp_elfnote_build_id(fd, &file_id);

	if (!err && !fp_build_id_match(&file_id, id))
		err = -ESTALE;
	return err;
}

/* ingest_fd: a table from the ELF file open at fd if its build-ID is id;
 * its unwind table too, on the way. */
static int ingest_fd(struct fp_resolver *r, int fd, const struct fp_build_id *id, void **blob,
		     size_t *len)
{
	int err = same_build(fd, id);

	if (err)
		return err;
	ingest_unwind(r, fd, id);
	return fp_elf_symtab_isolated(fd, blob, len);
}

/* Whether a path may be a link: files of the debug directory, which the
 * operator installs (Fedora's .build-id entries are links), may; paths an
 * agent reported, and those derived from them, may not. */
enum { PATH_REPORTED, PATH_OPERATOR };

/* open_regular: path opened for reading if it is a regular file: never a
 * FIFO or device, whose open or read would block this worker (and every
 * agent waiting on it), and, for a reported path, never a symbolic link.
 * A pid (not 0) names the process whose root the path is resolved in,
 * every component inside it and none a link (openroot.h).  fd, -ENOENT or
 * another errno of open, or -EINVAL (refused: counted in
 * rs_paths_refused). */
static int open_regular(struct fp_resolver *r, uint32_t pid, const char *path, int trust)
{
	int nofollow = trust == PATH_REPORTED ? O_NOFOLLOW : 0, fd, err;
	char root[32];
	struct stat st;

	if (pid) {
		snprintf(root, sizeof(root), "/proc/%u/root", pid);
		fd = fp_open_in_root(root, path);
		if (fd == -ELOOP)
			goto refused;
		if (fd < 0)
			return fd;
		goto opened;
	}
	/* Checked before the open, for the devices whose open does something;
	 * O_NONBLOCK covers one swapped in between. */
	err = nofollow ? lstat(path, &st) : stat(path, &st);
	if (err)
		return -errno;
	if (!S_ISREG(st.st_mode))
		goto refused;
	fd = open(path, O_RDONLY | O_CLOEXEC | O_NONBLOCK | O_NOCTTY | nofollow);
	if (fd < 0) {
		if (errno != ELOOP) /* ELOOP: a link swapped in */
			return -errno;
		goto refused;
	}
opened:
	if (fstat(fd, &st) || !S_ISREG(st.st_mode)) {
		close(fd);
		goto refused;
	}
	return fd;
refused:
	pthread_mutex_lock(&r->rv_lock);
	r->rv_stats.rs_paths_refused++;
	pthread_mutex_unlock(&r->rv_lock);
	return -EINVAL;
}

static int ingest_file(struct fp_resolver *r, uint32_t pid, const char *path, int trust,
		       const struct fp_build_id *id, void **blob, size_t *len)
{
	int fd = open_regular(r, pid, path, trust), err;

	if (fd < 0)
		return fd;
	err = ingest_fd(r, fd, id, blob, len);
	close(fd);
	return err;
}

/* A table without DWARF from a file that has a debuglink is worth
 * replacing by the debug file's; anything else ends the search. */
static int err_is_final(int err)
{
	return err != 0 && err != -ENOENT;
}

/* ingest_debuglink: the debug file that the ELF file at path names in its
 * .gnu_debuglink, looked for beside it, in its .debug/ subdirectory and
 * under DEBUG_DIR/<its directory>/, checked by CRC and build-ID.  Returns
 * prev (the result so far) when there is none. */
static int ingest_debuglink(struct fp_resolver *r, const char *path, const struct fp_build_id *id,
			    void **blob, size_t *len, int prev)
{
	char name[256], dir[4096], cand[3][4500];
	uint32_t want, crc;
	const char *slash = strrchr(path, '/');
	int fd = open_regular(r, 0, path, PATH_REPORTED), i, err;

	if (fd < 0)
		return prev;
	err = fp_elfnote_debuglink(fd, name, sizeof(name), &want);
	close(fd);
	if (err || !slash || (size_t)(slash - path) >= sizeof(dir))
		return prev;
	memcpy(dir, path, (size_t)(slash - path));
	dir[slash - path] = '\0';
	snprintf(cand[0], sizeof(cand[0]), "%s/%s", dir, name);
	snprintf(cand[1], sizeof(cand[1]), "%s/.debug/%s", dir, name);
	snprintf(cand[2], sizeof(cand[2]), "%s%s/%s", r->rv_debug_dir ? r->rv_debug_dir : "", dir,
		 name);
	for (i = 0; i < 3; i++) {
		void *b;
		size_t l;

		if (strcmp(cand[i], path) == 0 || (i == 2 && !r->rv_debug_dir))
			continue;
		fd = open_regular(r, 0, cand[i], PATH_REPORTED);
		if (fd < 0)
			continue;
		err = fp_elf_debuglink_crc(fd, &crc);
		if (!err && crc == want && ingest_fd(r, fd, id, &b, &l) == 0) {
			close(fd);
			if (!prev)
				free(*blob);
			*blob = b, *len = l;
			return 0;
		}
		close(fd);
	}
	return prev;
}

/* ingest: ask each source in turn.  *asked gets a bit (1 << source) for
 * each source asked, *hit the one that had the table (FP_SOURCE_COUNT:
 * none). */
static int ingest(struct fp_resolver *r, const struct fp_build_id *id, const char *path,
		  uint32_t pid, void **blob, size_t *len, unsigned *asked, int *hit)
{
	char hex[2 * FP_BUILD_ID_MAX + 1], file[4200];
	struct fp_build_id trimmed = fp_build_id_trim(id);
	int err = -ENOENT;

	*asked = 0;
	*hit = FP_SOURCE_COUNT;
	/* The kernel pads short build-IDs with zeros; debug files are named by
	 * the real one: try both. */
	if (r->rv_debug_dir) {
		const struct fp_build_id *cand[2] = { id, &trimmed };
		int i;
		*asked |= 1u << (*hit = FP_SOURCE_DEBUG_DIR);
		for (i = 0; i < 2 && err; i++) {
			fp_build_id_hex(cand[i], hex);
			/* No such path (a one-byte id, too long a name): no file. */
			err = fp_build_id_path(file, sizeof(file), r->rv_debug_dir, hex, ".debug")
				      ? -ENOENT
				      : ingest_file(r, 0, file, PATH_OPERATOR, id, blob, len);
		}
	}
	if (err && r->rv_local_files && path && path[0] == '/') {
		*asked |= 1u << (*hit = FP_SOURCE_LOCAL);
		err = ingest_file(r, 0, path, PATH_REPORTED, id, blob, len);
		/* A stripped binary names its detached debug file. */
		if (!err_is_final(err))
			err = ingest_debuglink(r, path, id, blob, len, err);
	}
	/* A container's files: its mount namespace, seen through procfs. */
	if (err && r->rv_proc_root && pid && path && path[0] == '/') {
		*asked |= 1u << (*hit = FP_SOURCE_CONTAINER);
		err = ingest_file(r, pid, path, PATH_REPORTED, id, blob, len);
	}
	if (err && r->rv_fetch) {
		int fd = r->rv_fetch(id, FP_FETCH_SYMBOLS, r->rv_fetch_arg);
		*asked |= 1u << (*hit = FP_SOURCE_FETCH);
		if (fd >= 0) {
			err = ingest_fd(r, fd, id, blob, len);
			close(fd);
		}
	}
	if (err)
		*hit = FP_SOURCE_COUNT;
	return err;
}

/* count_search: one ingest's sources (see ingest), and its time. */
static void count_search(struct fp_resolver *r, unsigned asked, int hit, uint64_t ns)
{
	int i;

	pthread_mutex_lock(&r->rv_lock);
	for (i = 0; i < FP_SOURCE_COUNT; i++)
		if (asked & (1u << i)) {
			if (i == hit)
				r->rv_stats.rs_hits[i]++;
			else
				r->rv_stats.rs_misses[i]++;
		}
	r->rv_stats.rs_searches++;
	r->rv_stats.rs_search_ns += ns;
	pthread_mutex_unlock(&r->rv_lock);
}

/* ingest_store: id's table from its sources into the cache, and in
 * *blob; a failure is remembered (failed_mark). */
static int ingest_store(struct fp_resolver *r, const struct fp_build_id *id, const char *path,
			uint32_t pid, void **blob, size_t *len)
{
	uint64_t start = fp_now_ns(CLOCK_MONOTONIC);
	unsigned asked = 0;
	int hit = -1, err;

	err = ingest(r, id, path, pid, blob, len, &asked, &hit);
	count_search(r, asked, hit, fp_now_ns(CLOCK_MONOTONIC) - start);

	if (err) {
		char hex[2 * FP_BUILD_ID_MAX + 1];
		fp_build_id_hex(id, hex);
		fp_debug("no symbols for %s (%s): %s", hex, path ? path : "", strerror(-err));
		failed_mark(r, id);
		return err;
	}
	pthread_mutex_lock(&r->rv_lock);
	r->rv_stats.rs_ingested++;
	pthread_mutex_unlock(&r->rv_lock);
	/* Stored for every later look-up; the caller keeps using its copy. */
	if ((err = fp_symcache_put(r->rv_cache, id, *blob, *len)))
		fp_warnx("cannot store symbols in the cache: %s", strerror(-err));
	else
		symbols_stored(r, id);
	return 0;
}

static int queue_job(struct fp_resolver *r, enum job_kind kind, const struct fp_build_id *id,
		     const char *path, uint32_t pid, int fd);

static struct lookup_table *table_for(struct fp_lookup *l, uint8_t kind,
				      const struct fp_build_id *id, const char *path, uint32_t pid)
{
	struct fp_resolver *r = l->lk_resolver;
	struct lookup_table *t;
	uint32_t idx;
	size_t len;
	int added, err;

	if (fp_intern_get(l->lk_seen, id->fb_data, id->fb_len, &idx, &added))
		return NULL;
	if (fp_vec_reserve_zeroed(&l->lk_tables, &l->lk_tables_cap, (size_t)idx + 1,
				  sizeof(*l->lk_tables)))
		return NULL;
	t = &l->lk_tables[idx];
	if (!added)
		return t->lt_ok ? t : NULL;

	err = fp_symcache_get(l->lk_txn, id, &t->lt_table);
	pthread_mutex_lock(&r->rv_lock);
	if (err == 0)
		r->rv_stats.rs_hits[FP_SOURCE_CACHE]++;
	else
		r->rv_stats.rs_misses[FP_SOURCE_CACHE]++;
	pthread_mutex_unlock(&r->rv_lock);
	if (err == 0) {
		t->lt_ok = 1;
		return t;
	}
	if (kind != FP_MAP_USER)
		return NULL; /* kernel tables only come from kallsyms uploads */
	/* Remember failures for the life of the process, so that a missing
	 * debug file costs one attempt, not one per frame per interval. */
	if (failed_find(r, id)) {
		pthread_mutex_lock(&r->rv_lock);
		r->rv_stats.rs_known_missing++;
		pthread_mutex_unlock(&r->rv_lock);
		return NULL;
	}
	if (path && path[0] == '/')
		fp_resolver_note_path(r, id, path, pid);
	if (r->rv_nworkers) {
		/* Resolved from a later look-up, once a worker has it. */
		queue_job(r, JOB_SYMBOLS, id, path, pid, -1);
		return NULL;
	}
	if (ingest_store(r, id, path, pid, &t->lt_blob, &len) ||
	    fp_symtab_open(&t->lt_table, t->lt_blob, len)) {
		free(t->lt_blob);
		t->lt_blob = NULL;
		return NULL;
	}
	t->lt_ok = 1;
	return t;
}

int fp_resolver_missing(struct fp_resolver *r, const struct fp_build_id *id)
{
	struct unwind_hint *h;
	int nofile;

	if (failed_find(r, id))
		return 1;
	pthread_mutex_lock(&r->rv_lock);
	nofile = (h = hint_find(r, id)) && h->uh_nofile;
	pthread_mutex_unlock(&r->rv_lock);
	return nofile;
}

/* cached_size: the size of id's stored table, 0 if none. */
static size_t cached_size(struct fp_resolver *r, const struct fp_build_id *id)
{
	struct fp_symcache_txn *txn;
	struct fp_symtab t;
	size_t len = 0;

	if (fp_symcache_begin(r->rv_cache, &txn))
		return 0;
	if (fp_symcache_get(txn, id, &t) == 0)
		len = t.st_len;
	fp_symcache_end(txn);
	return len;
}

int fp_resolver_note_path(struct fp_resolver *r, const struct fp_build_id *id, const char *path,
			  uint32_t pid)
{
	struct unwind_hint *h;
	int err = 0;

	if (!id->fb_len || !path || path[0] != '/')
		return 0;
	pthread_mutex_lock(&r->rv_lock);
	h = hint_for(r, id);
	if (!h) {
		err = fp_intern_count(r->rv_hint_ids) >= FP_RESOLVER_MAX_PATHS ? 0 : -ENOMEM;
	} else if (!h->uh_path || strcmp(h->uh_path, path) || h->uh_pid != pid) {
		char *copy = strdup(path);
		if (copy) {
			free(h->uh_path);
			h->uh_path = copy;
			h->uh_pid = pid;
			/* A new place to look, where this host's files are
			 * a source: search again (not while a device is
			 * asked, nor after a compile failed). */
			if ((r->rv_local_files || (r->rv_proc_root && pid)) &&
			    (h->uh_state == UNWIND_NOT_HERE || h->uh_state == UNWIND_NO_CFI))
				h->uh_state = UNWIND_UNSEARCHED;
		} else {
			err = -ENOMEM;
		}
	}
	pthread_mutex_unlock(&r->rv_lock);
	return err;
}

/* unwind_try: compile and store the table of the file at path if it is
 * id's and has CFI.  As ingest_unwind, and the errors of open_regular. */
static int unwind_try(struct fp_resolver *r, uint32_t pid, const char *path, int trust,
		      const struct fp_build_id *id)
{
	int fd = open_regular(r, pid, path, trust), err;

	if (fd < 0)
		return fd;
	err = same_build(fd, id);
	if (!err)
		err = ingest_unwind(r, fd, id);
	close(fd);
	return err;
}

/* The debug directory's names for a build-ID's files: its debug file, and
 * (Fedora's layout) a link to the binary itself. */
static const char *const debug_dir_suffixes[] = { ".debug", "" };

/* unwind_search: every source of this host, in the order of the symbols'
 * search, but the mapped file first (a debug file rarely holds CFI), and
 * of the fetch function only files with code (FP_FETCH_CFI).  0 (a table
 * is stored), -ENOEXEC (CFI was found but its table could not be
 * compiled) or -ENOENT (no source has CFI). */
static int unwind_search(struct fp_resolver *r, const struct fp_build_id *id, const char *path,
			 uint32_t pid)
{
	char hex[2 * FP_BUILD_ID_MAX + 1], file[4200];
	int err = -ENOENT, failed = 0;
	size_t i, len;
	void *blob;

	/* The symbols' search (run first) took the table from its file. */
	if (fp_symcache_get_unwind(r->rv_cache, id, &blob, &len) == 0) {
		free(blob);
		return 0;
	}
	if (r->rv_local_files && path)
		err = unwind_try(r, 0, path, PATH_REPORTED, id);
	failed |= compile_failed(err);
	if (err && r->rv_proc_root && pid && path)
		err = unwind_try(r, pid, path, PATH_REPORTED, id);
	failed |= compile_failed(err);
	fp_build_id_hex(id, hex);
	for (i = 0; err && r->rv_debug_dir && i < 2; i++) {
		err = fp_build_id_path(file, sizeof(file), r->rv_debug_dir, hex,
				       debug_dir_suffixes[i])
			      ? -ENOENT
			      : unwind_try(r, 0, file, PATH_OPERATOR, id);
		failed |= compile_failed(err);
	}
	if (err && r->rv_fetch) {
		int fd = r->rv_fetch(id, FP_FETCH_CFI, r->rv_fetch_arg);
		if (fd >= 0) {
			err = same_build(fd, id);
			if (!err)
				err = ingest_unwind(r, fd, id);
			failed |= compile_failed(err);
			close(fd);
		}
	}
	if (!err)
		return 0;
	return failed ? -ENOEXEC : -ENOENT;
}

/* fd_has_cfi: whether the file at fd (closed here; a negative errno: no
 * file) is id's and has CFI bytes. */
static int fd_has_cfi(int fd, const struct fp_build_id *id)
{
	int has;

	if (fd < 0)
		return 0;
	has = same_build(fd, id) == 0 && fp_cfi_has_cfi(fd);
	close(fd);
	return has;
}

/* host_may_have_cfi: whether a search of this host's sources may find
 * id's CFI.  Always when they include the mapped file (local files, a
 * container's) or other hosts (a remote fetch function), whose answers
 * take time (the search is queued); when they are only files the
 * operator keeps (the debug directory, the store), whether those have
 * CFI bytes: only their section headers are read (elfnote.h's bounded
 * reader), so the common case, a Debian debug file whose .eh_frame is
 * NOBITS, is answered without a wait and the device is asked in the same
 * reply.  *no_files: those sources have no file at all for id, so its
 * symbols cannot come from them either (fp_resolver_missing). */
static int host_may_have_cfi(struct fp_resolver *r, const struct fp_build_id *id, const char *path,
			     uint32_t pid, int *no_files)
{
	char hex[2 * FP_BUILD_ID_MAX + 1], file[4200];
	struct fp_build_id trimmed = fp_build_id_trim(id);
	int has = 0, files = 0, fd;
	size_t i;

	*no_files = 0;
	if ((r->rv_local_files && path) || (r->rv_proc_root && pid && path) ||
	    (r->rv_fetch && r->rv_fetch_remote))
		return 1;
	/* The debug file, Fedora's link to the binary, and the debug file
	 * of the build-ID without the kernel's zero padding. */
	for (i = 0; r->rv_debug_dir && i < 3 && !has; i++) {
		if (i == 2 && fp_build_id_eq(&trimmed, id))
			break;
		fp_build_id_hex(i == 2 ? &trimmed : id, hex);
		if (fp_build_id_path(file, sizeof(file), r->rv_debug_dir, hex,
				     debug_dir_suffixes[i == 1]) ||
		    (fd = open_regular(r, 0, file, PATH_OPERATOR)) < 0)
			continue;
		files++;
		has = fd_has_cfi(fd, id);
	}
	if (!has && r->rv_fetch) {
		fd = r->rv_fetch(id, FP_FETCH_CFI, r->rv_fetch_arg);
		files += fd >= 0;
		has = fd_has_cfi(fd, id);
		if (!files && (fd = r->rv_fetch(id, FP_FETCH_SYMBOLS, r->rv_fetch_arg)) >= 0) {
			files++;
			close(fd);
		}
	}
	*no_files = !files;
	return has;
}

/* search_done: what id's search of this host's sources (unwind_search)
 * found. */
static void search_done(struct fp_resolver *r, const struct fp_build_id *id, int err)
{
	if (err) /* else stored: table_found did the rest */
		state_set(r, id, err == -ENOEXEC ? UNWIND_FAILED : UNWIND_NOT_HERE);
}

static struct resolver_job *job_find(struct fp_resolver *r, const struct fp_build_id *id, int kind);

int fp_resolver_unwind(struct fp_resolver *r, const struct fp_build_id *id, void **blob,
		       size_t *len)
{
	struct unwind_hint *h;
	char *path = NULL;
	uint32_t pid = 0;
	int err, symbols, no_files = 0;

	err = fp_symcache_get_unwind(r->rv_cache, id, blob, len);
	if (!err) {
		table_found(r, id, *blob, *len, 1);
		return 0;
	}
	if (err != -ENOENT && err != -EINVAL)
		return err;
	symbols = fp_resolver_has(r, id);
	pthread_mutex_lock(&r->rv_lock);
	h = hint_for(r, id);
	if (!h) { /* too many build-IDs to remember a search for */
		pthread_mutex_unlock(&r->rv_lock);
		return -ENOENT;
	}
	why_set(r, id, h, state_why(h->uh_state), symbols);
	/* A symbols job is waited for only when it reads the mapped file
	 * (local files, a container's), which has CFI as often as not;
	 * else the search for CFI runs beside it (ingest_fd leaves the CFI
	 * to it), so that a device is asked as soon as this host is known
	 * to have none. */
	if (job_find(r, id, JOB_UNWIND) || job_find(r, id, JOB_FILE) || job_find(r, id, JOB_CFI) ||
	    (job_find(r, id, JOB_SYMBOLS) && h->uh_path &&
	     (r->rv_local_files || (r->rv_proc_root && h->uh_pid))))
		err = -EAGAIN;
	else if (h->uh_state == UNWIND_NOT_HERE)
		err = -ENODATA;
	else if (h->uh_state == UNWIND_DEVICE)
		err = -EAGAIN;
	else if (h->uh_state != UNWIND_UNSEARCHED)
		err = -ENOENT;
	else if (h->uh_path && !(path = strdup(h->uh_path)))
		err = -ENOMEM;
	else
		err = 0; /* search */
	pid = h->uh_pid;
	pthread_mutex_unlock(&r->rv_lock);
	if (err)
		return err;
	/* Searched once per source: the state remembers how it went. */
	if (r->rv_nworkers && host_may_have_cfi(r, id, path, pid, &no_files)) {
		/* Other hosts: their symbols' file first (job_ready), queued
		 * here if no frame asked for it yet: one download may hold
		 * the CFI too.  Not queued (full): the next call tries
		 * again. */
		if (r->rv_fetch_remote && !symbols && !failed_find(r, id))
			queue_job(r, JOB_SYMBOLS, id, path, pid, -1);
		err = queue_job(r, JOB_UNWIND, id, path, pid, -1);
		free(path);
		return err == -ENOMEM ? err : -EAGAIN;
	}
	err = r->rv_nworkers ? -ENOENT : unwind_search(r, id, path, pid);
	free(path);
	if (no_files) {
		pthread_mutex_lock(&r->rv_lock);
		if ((h = hint_find(r, id)) && !h->uh_symbols)
			h->uh_nofile = 1;
		pthread_mutex_unlock(&r->rv_lock);
	}
	search_done(r, id, err);
	if (err)
		return err == -ENOEXEC ? -ENOENT : -ENODATA;
	return fp_resolver_unwind(r, id, blob, len);
}

void fp_resolver_cfi_device(struct fp_resolver *r, const struct fp_build_id *id, int what)
{
	static const uint8_t state[] = { [FP_CFI_DEVICE_ASKED] = UNWIND_DEVICE,
					 [FP_CFI_DEVICE_RETRY] = UNWIND_NOT_HERE,
					 [FP_CFI_DEVICE_NONE] = UNWIND_NO_CFI };

	if (r && what >= 0 && what <= FP_CFI_DEVICE_NONE)
		state_set(r, id, state[what]);
}

/* cfi_file: compile and store the table of a device's copy of id's CFI
 * sections at fd (closed here), and what came of it.  As
 * fp_resolver_add_cfi_async. */
static int cfi_file(struct fp_resolver *r, int fd, const struct fp_build_id *id)
{
	char hex[2 * FP_BUILD_ID_MAX + 1];
	void *blob;
	size_t len;
	int err = same_build(fd, id);

	if (!err)
		err = ingest_unwind(r, fd, id);
	close(fd);
	if (err == -ESTALE)
		return err;
	/* Nothing more than a stored table: that one stays. */
	if (err == -ENOENT && fp_symcache_get_unwind(r->rv_cache, id, &blob, &len) == 0) {
		free(blob);
		err = 0;
	}
	if (err) {
		state_set(r, id, compile_failed(err) ? UNWIND_FAILED : UNWIND_NO_CFI);
	} else {
		fp_build_id_hex(id, hex);
		fp_info("unwind table of %s compiled from a device's copy of its CFI", hex);
	}
	return err;
}

int fp_resolver_add_cfi_async(struct fp_resolver *r, int fd, const struct fp_build_id *id)
{
	if (!r->rv_nworkers)
		return cfi_file(r, fd, id);
	return queue_job(r, JOB_CFI, id, NULL, 0, fd);
}

int fp_resolver_add_file(struct fp_resolver *r, int fd, struct fp_build_id *out)
{
	struct fp_build_id id;
	size_t len;
	void *blob;
	int err, table;

	if ((err = fp_elfnote_build_id(fd, &id)))
		return err;
	table = ingest_unwind(r, fd, &id) == 0;
	if ((err = fp_elf_symtab_isolated(fd, &blob, &len))) {
		if (err != -ENOENT || !table)
			return err;
		*out = id; /* a stripped program: its CFI only */
		return 0;
	}
	/* More symbols, lines and inline ranges make a larger table. */
	if (len > cached_size(r, &id)) {
		err = fp_symcache_put(r->rv_cache, &id, blob, len);
		if (!err) {
			pthread_mutex_lock(&r->rv_lock);
			r->rv_stats.rs_ingested++;
			pthread_mutex_unlock(&r->rv_lock);
		}
	}
	free(blob);
	if (!err)
		err = failed_clear(r, &id);
	if (err)
		return err;
	symbols_stored(r, &id);
	*out = id;
	return 0;
}

void fp_resolver_frame(struct fp_lookup *l, uint8_t kind, const struct fp_build_id *id,
		       const char *path, uint32_t pid, uint64_t offset, struct fp_resolved *out)
{
	struct fp_symframe frames[FP_RESOLVED_MAX_INLINE + 1];
	struct lookup_table *t;
	uint64_t addr;
	int n;

	out->rs_function = out->rs_system_name = out->rs_file = NULL;
	out->rs_line = 0;
	out->rs_ninline = 0;
	if (!id->fb_len)
		return;
	t = table_for(l, kind, id, path, pid);
	if (!t || fp_symtab_addr(&t->lt_table, offset, &addr))
		return;
	n = fp_symtab_lookup_frames(&t->lt_table, addr, frames, FP_RESOLVED_MAX_INLINE + 1);
	if (n <= 0 || !frames[n - 1].sf_function)
		return;
	/* The last frame is the function itself, the others were inlined in it. */
	out->rs_function = frames[n - 1].sf_function;
	out->rs_system_name = frames[n - 1].sf_system_name;
	out->rs_file = frames[n - 1].sf_file;
	out->rs_line = frames[n - 1].sf_line;
	out->rs_ninline = n - 1;
	memcpy(out->rs_inline, frames, (size_t)(n - 1) * sizeof(frames[0]));
}

/* add_file_checked: fp_resolver_add_file, and the build-ID it found must
 * be id; closes fd. */
static int add_file_checked(struct fp_resolver *r, int fd, const struct fp_build_id *id)
{
	struct fp_build_id got;
	int err = fp_resolver_add_file(r, fd, &got);

	close(fd);
	if (!err && !fp_build_id_match(&got, id))
		err = -ESTALE;
	return err;
}

int fp_resolver_add_file_async(struct fp_resolver *r, int fd, const struct fp_build_id *id)
{
	if (!r->rv_nworkers)
		return add_file_checked(r, fd, id);
	return queue_job(r, JOB_FILE, id, NULL, 0, fd);
}

/* ---- background workers ---- */

/* job_find: the queued or running job for id (of kind, or any kind when
 * kind < 0).  Called with rv_lock held. */
static struct resolver_job *job_find(struct fp_resolver *r, const struct fp_build_id *id, int kind)
{
	size_t i;

	for (i = 0; i < r->rv_njobs; i++) {
		struct resolver_job *j = &r->rv_jobs[i];
		if (j->jb_state != JOB_FREE && (kind < 0 || j->jb_kind == kind) &&
		    fp_build_id_eq(&j->jb_id, id))
			return j;
	}
	return NULL;
}

/* queue_job: a job for the workers, unless one of that kind and build-ID
 * is queued or running already.  Takes fd (closed on failure).  0,
 * -EAGAIN (queue full; counted) or -ENOMEM. */
static int queue_job(struct fp_resolver *r, enum job_kind kind, const struct fp_build_id *id,
		     const char *path, uint32_t pid, int fd)
{
	struct resolver_job *j = NULL;
	char *copy = NULL;
	size_t i;
	int err = 0;

	if (path && !(copy = strdup(path))) {
		if (fd >= 0)
			close(fd);
		return -ENOMEM;
	}
	pthread_mutex_lock(&r->rv_lock);
	if (job_find(r, id, (int)kind))
		goto out; /* the same work, already on its way */
	if (r->rv_nqueued >= r->rv_queue_max) {
		r->rv_stats.rs_queue_full++;
		err = -EAGAIN;
		goto out;
	}
	for (i = 0; i < r->rv_njobs && !j; i++)
		if (r->rv_jobs[i].jb_state == JOB_FREE)
			j = &r->rv_jobs[i];
	if (!j) { /* cannot happen: rv_njobs = queue_max + workers */
		err = -EAGAIN;
		goto out;
	}
	*j = (struct resolver_job){ JOB_QUEUED, (uint8_t)kind, r->rv_order++, *id, copy, pid, fd };
	copy = NULL;
	fd = -1;
	r->rv_nqueued++;
	r->rv_stats.rs_queued++;
	pthread_cond_signal(&r->rv_work);
out:
	pthread_mutex_unlock(&r->rv_lock);
	free(copy);
	if (fd >= 0)
		close(fd);
	return err;
}

static void job_run(struct fp_resolver *r, struct resolver_job *j)
{
	char hex[2 * FP_BUILD_ID_MAX + 1];
	size_t len;
	void *blob;
	int err;

	switch (j->jb_kind) {
	case JOB_SYMBOLS:
		if (!ingest_store(r, &j->jb_id, j->jb_path, j->jb_pid, &blob, &len))
			free(blob);
		break;
	case JOB_UNWIND:
		search_done(r, &j->jb_id, unwind_search(r, &j->jb_id, j->jb_path, j->jb_pid));
		break;
	case JOB_FILE:
		err = add_file_checked(r, j->jb_fd, &j->jb_id);
		j->jb_fd = -1;
		if (err) {
			fp_build_id_hex(&j->jb_id, hex);
			fp_warnx("cannot ingest the file fetched for %s: %s", hex, strerror(-err));
		}
		break;
	case JOB_CFI:
		err = cfi_file(r, j->jb_fd, &j->jb_id);
		j->jb_fd = -1;
		if (err && err != -ENOENT) {
			fp_build_id_hex(&j->jb_id, hex);
			fp_warnx("cannot compile the CFI fetched for %s: %s", hex, strerror(-err));
		}
		break;
	}
}

/* job_before: whether job a runs before b: first in, first out, but the
 * searches of this host's symbol files last: their DWARF can take seconds
 * to read, while the other jobs (a search for CFI, a device's copy) take
 * one look-up or one compile, and bring the unwind tables that stacks
 * wait for. */
static int job_before(const struct resolver_job *a, const struct resolver_job *b)
{
	int sa = a->jb_kind == JOB_SYMBOLS, sb = b->jb_kind == JOB_SYMBOLS;

	return sa != sb ? sb : a->jb_order < b->jb_order;
}

/* job_ready: whether queued job j may run now: with a remote fetch
 * function, a search for CFI waits for the symbols' search of its
 * build-ID to have looked at its file's CFI (a download that may hold it:
 * an unstripped binary is a symbol service's debuginfo and executable
 * both, one download, not two), not for its DWARF.  Called with rv_lock
 * held. */
static int job_ready(struct fp_resolver *r, const struct resolver_job *j)
{
	const struct unwind_hint *h;

	if (j->jb_kind != JOB_UNWIND || !r->rv_fetch_remote || !job_find(r, &j->jb_id, JOB_SYMBOLS))
		return 1;
	return (h = hint_find(r, &j->jb_id)) && h->uh_seen;
}

static void *worker_main(void *arg)
{
	struct fp_resolver *r = arg;

	pthread_mutex_lock(&r->rv_lock);
	for (;;) {
		struct resolver_job *j = NULL;
		uint64_t start, ms;
		size_t i;

		for (i = 0; !r->rv_stop && r->rv_nqueued && i < r->rv_njobs; i++)
			if (r->rv_jobs[i].jb_state == JOB_QUEUED && job_ready(r, &r->rv_jobs[i]) &&
			    (!j || job_before(&r->rv_jobs[i], j)))
				j = &r->rv_jobs[i];
		if (r->rv_stop)
			break;
		if (!j) { /* none, or none ready: a job ends or comes */
			pthread_cond_wait(&r->rv_work, &r->rv_lock);
			continue;
		}
		j->jb_state = JOB_RUNNING;
		r->rv_nqueued--;
		r->rv_stats.rs_running++;
		pthread_mutex_unlock(&r->rv_lock);

		start = fp_now_ns(CLOCK_MONOTONIC);
		job_run(r, j); /* j stays ours: only its worker frees a running slot */
		ms = (fp_now_ns(CLOCK_MONOTONIC) - start) / 1000000;

		pthread_mutex_lock(&r->rv_lock);
		free(j->jb_path);
		memset(j, 0, sizeof(*j));
		r->rv_stats.rs_running--;
		r->rv_stats.rs_jobs_done++;
		r->rv_stats.rs_job_ms += ms;
		if (ms > r->rv_stats.rs_job_max_ms)
			r->rv_stats.rs_job_max_ms = ms;
		pthread_cond_broadcast(&r->rv_done);
		pthread_cond_broadcast(&r->rv_work); /* one it held back may run */
	}
	pthread_mutex_unlock(&r->rv_lock);
	return NULL;
}

int fp_resolver_start(struct fp_resolver *r, unsigned nworkers, unsigned queue_max)
{
	int err;

	if (r->rv_workers || !nworkers || nworkers > MAX_WORKERS || !queue_max ||
	    queue_max > MAX_QUEUE)
		return -EINVAL;
	r->rv_njobs = (size_t)queue_max + nworkers;
	r->rv_queue_max = queue_max;
	if (!(r->rv_jobs = calloc(r->rv_njobs, sizeof(*r->rv_jobs))) ||
	    !(r->rv_workers = calloc(nworkers, sizeof(*r->rv_workers)))) {
		free(r->rv_jobs);
		r->rv_jobs = NULL;
		r->rv_njobs = 0;
		return -ENOMEM;
	}
	/* Set before any worker runs: callers read it without the lock, and
	 * only this thread (before it hands r to others) writes it. */
	r->rv_nworkers = nworkers;
	for (unsigned i = 0; i < nworkers; i++) {
		if ((err = -pthread_create(&r->rv_workers[i], NULL, worker_main, r))) {
			r->rv_nworkers = i;
			workers_stop(r);
			return err;
		}
	}
	return 0;
}

static void workers_stop(struct fp_resolver *r)
{
	size_t i;

	if (!r->rv_workers)
		return;
	pthread_mutex_lock(&r->rv_lock);
	r->rv_stop = 1;
	pthread_cond_broadcast(&r->rv_work);
	pthread_mutex_unlock(&r->rv_lock);
	for (i = 0; i < r->rv_nworkers; i++)
		pthread_join(r->rv_workers[i], NULL);
	for (i = 0; i < r->rv_njobs; i++) {
		free(r->rv_jobs[i].jb_path);
		if (r->rv_jobs[i].jb_state != JOB_FREE &&
		    (r->rv_jobs[i].jb_kind == JOB_FILE || r->rv_jobs[i].jb_kind == JOB_CFI))
			close(r->rv_jobs[i].jb_fd);
	}
	free(r->rv_jobs);
	free(r->rv_workers);
	r->rv_jobs = NULL;
	r->rv_workers = NULL;
	r->rv_njobs = 0;
	r->rv_nworkers = 0;
}

int fp_resolver_busy(struct fp_resolver *r, const struct fp_build_id *id)
{
	int busy;

	pthread_mutex_lock(&r->rv_lock);
	busy = job_find(r, id, -1) != NULL;
	pthread_mutex_unlock(&r->rv_lock);
	return busy;
}

int fp_resolver_wait(struct fp_resolver *r, const struct fp_build_id *id, uint64_t deadline_ns)
{
	struct timespec ts = { (time_t)(deadline_ns / 1000000000ull),
			       (long)(deadline_ns % 1000000000ull) };
	int err = 0;

	pthread_mutex_lock(&r->rv_lock);
	while (!err && job_find(r, id, -1))
		if (pthread_cond_timedwait(&r->rv_done, &r->rv_lock, &ts) == ETIMEDOUT)
			err = -ETIMEDOUT;
	pthread_mutex_unlock(&r->rv_lock);
	return err;
}
