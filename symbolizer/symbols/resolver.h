/* resolver.h: finds the symbol table of a build-ID and resolves frames.
 *
 * Tables live in the LMDB cache (symcache.h).  On a miss, user-space
 * build-IDs are looked for, in order, in the debug directory
 * (DEBUG_DIR/.build-id/xx/rest.debug) and at the mapping's own path when
 * the symbolizer runs on the device's host (the file's build-ID must match),
 * seen from the process's own mount namespace when that is allowed.
 * Kernel and module tables come from kallsyms snapshots the agents upload.
 *
 * Unwind tables (cfi.h) of the same files are compiled whenever a file
 * with CFI is ingested, and stored beside the symbols (symcache.h).
 * Symbols and CFI are found independently: a detached debug file (the
 * debug directory, debuginfod's debuginfo, an uploaded .debug) has the
 * most symbols and no CFI (its .eh_frame is NOBITS), so the table of such
 * a build-ID comes from another file: an executable (the store's,
 * debuginfod's executable, the mapping's path with local files), or, when
 * the host has none, a device's copy of its CFI sections
 * (fp_resolver_unwind says -ENODATA; devfetch.h fetches it).  Why a
 * build-ID with symbols has no table is kept per build-ID, counted
 * (rs_no_table) and logged once per build-ID and reason.
 *
 * Threads.  Until fp_resolver_start, symbol work (parsing a file in the
 * isolated child, isolate.h; upstream look-ups through the fetch
 * function; compiling unwind tables) runs in the caller's thread, as
 * fleetprof record and the tests want.  After it, that work runs in a
 * few background workers, fed by a bounded queue: fp_resolver_frame and
 * fp_resolver_unwind only read the cache and queue what is missing, so a
 * server thread that calls them never waits for a file.  Jobs run first
 * in, first out, but the searches for symbols (whose DWARF can take
 * seconds) after the others (searches for CFI, devices' copies).  A full queue
 * drops the job and counts it (rs_queue_full); the next look-up of that
 * build-ID queues it again.  rv_lock guards everything the workers share
 * with callers: the queue, the failure memo, the path hints, the
 * statistics.  kallsyms assembly (fp_resolver_ksyms) is not locked: one
 * thread at a time calls it (the server, under its own lock).  The LMDB
 * cache is safe from any thread (symcache.h).
 */
#ifndef FP_RESOLVER_H
#define FP_RESOLVER_H

#include <stdint.h>
#include "batch.h"
#include "symcache.h"

struct fp_resolver;

/* What a fetch function is asked for: symbols (the file with the most,
 * a debug file first) or CFI (a file with code: an executable or shared
 * object; a debug file has none). */
enum fp_fetch_what { FP_FETCH_SYMBOLS, FP_FETCH_CFI };

/* A further source of files, tried after the debug directory and local
 * files: an fd open on a file for what (enum fp_fetch_what) that should
 * have build-ID id (it is checked), or a negative errno. */
typedef int (*fp_fetch_fn)(const struct fp_build_id *id, int what, void *arg);

struct fp_resolver_opts {
	const char *ro_cache_dir; /* LMDB directory (created if missing) */
	const char *ro_debug_dir; /* "/usr/lib/debug"; NULL: none */
	int ro_local_files;       /* try the mapping's path on this host */
	int ro_proc_root;         /* also /proc/PID/root/PATH: the agent's pids
				     * are this host's (fleetprof record) */
	fp_fetch_fn ro_fetch;     /* NULL: none (e.g. upstream debuginfod) */
	void *ro_fetch_arg;
	int ro_fetch_remote; /* ro_fetch asks other hosts (takes time) */
};

/* fp_resolver_open: 0 or a negative errno (cache cannot be opened). */
int fp_resolver_open(struct fp_resolver **r, const struct fp_resolver_opts *o);
void fp_resolver_close(struct fp_resolver *r);

/* fp_resolver_start: from now on, run symbol work in nworkers (1-64)
 * background threads with at most queue_max (1-65536) jobs waiting (see
 * the top of this file).  fp_resolver_close stops them: running jobs end
 * first (at worst FP_ISOLATE_SECONDS of CPU), queued ones are dropped.
 * 0, -EINVAL (already started, bad numbers) or a negative errno. */
int fp_resolver_start(struct fp_resolver *r, unsigned nworkers, unsigned queue_max);

/* fp_resolver_busy: whether a job for id is queued or running. */
int fp_resolver_busy(struct fp_resolver *r, const struct fp_build_id *id);

/* fp_resolver_wait: wait until no job for id is queued or running, or
 * until deadline (CLOCK_MONOTONIC nanoseconds).  0 or -ETIMEDOUT. */
int fp_resolver_wait(struct fp_resolver *r, const struct fp_build_id *id, uint64_t deadline_ns);

/* fp_resolver_ksyms: take one part of a kallsyms snapshot.  Parts of one
 * target must come in order from one session; the table is stored when
 * the last arrives.  0, -EINVAL (out of order or bad content) or a
 * negative errno. */
int fp_resolver_ksyms(struct fp_resolver *r, const struct fp_ksyms *part);

/* fp_resolver_add_file: ingest the ELF file open at fd (an upload, a file
 * from a store) into the cache, under the build-ID read from the file
 * itself, which is written to *id.  When the build-ID is cached already,
 * the richer table stays (a debug file after a stripped binary replaces
 * its table; the other way round changes nothing).  Its unwind table is
 * compiled and stored too when the file has CFI and the table says more
 * than a stored one: more of a CPython interpreter (the trailer at all,
 * then a known version, then the eval loop's .cold part), then, all that
 * equal, more FDEs (a debug file, whose .eh_frame is NOBITS, never
 * replaces a stored table).  Clears the "no source had it" mark, so frames
 * of that build-ID resolve from the next look-up on.  A file with CFI and
 * no symbols (a stripped program) gives its table only.  Safe to call
 * from any thread.  0, -ENOENT (no build-ID, or neither symbols nor a new
 * table), -EINVAL (not ELF or malformed) or a negative errno. */
int fp_resolver_add_file(struct fp_resolver *r, int fd, struct fp_build_id *id);

/* fp_resolver_add_file_async: fp_resolver_add_file of the file at fd
 * (the resolver takes fd and closes it) whose build-ID should be id; a
 * file with another build-ID is refused.  Before fp_resolver_start, in the
 * caller's thread; after it, in a worker.  0 (done, or queued), -ESTALE
 * (another build-ID), -EAGAIN (queue full: nothing done, fd closed), or
 * the errors of fp_resolver_add_file. */
int fp_resolver_add_file_async(struct fp_resolver *r, int fd, const struct fp_build_id *id);

/* fp_resolver_unwind: a copy of the unwind table (bpf/unwind.h) of id in
 * *blob (malloc'd, the caller frees it), *len bytes.  When none is stored
 * yet, looks for a file with id's CFI once: at the paths noted for id
 * (fp_resolver_note_path, and the mappings fp_resolver_frame resolved)
 * when local files are allowed, in the debug directory
 * (DEBUG_DIR/.build-id/xx/rest.debug, and rest: Fedora's link to the
 * binary), and through the fetch function (FP_FETCH_CFI).  Safe to call
 * from any thread; the search forks a child per file (isolate.h).  After
 * fp_resolver_start the search is queued instead and -EAGAIN returned
 * while it is queued or running; when the only sources are local files
 * the operator keeps (the debug directory, a local fetch function: the
 * store) and none has CFI (their section headers are read), the answer
 * is given at once.  When no source of this host has CFI,
 * -ENODATA says that only a device's copy can give the table: the caller
 * asks a device (devfetch.h), which tells what came of it
 * (fp_resolver_cfi_device, fp_resolver_add_cfi_async); meanwhile
 * -EAGAIN.  0, -EAGAIN (being searched or fetched: ask again), -ENODATA
 * (ask a device), -ENOENT (none will come: no source has CFI, a device's
 * copy included, or its table could not be compiled; until a new path is
 * noted or a file is added), -ENOMEM or a negative errno. */
int fp_resolver_unwind(struct fp_resolver *r, const struct fp_build_id *id, void **blob,
		       size_t *len);

/* What came of asking a device for id's CFI (devfetch.h). */
enum fp_cfi_device {
	FP_CFI_DEVICE_ASKED, /* a device is being asked */
	FP_CFI_DEVICE_RETRY, /* that failed, or had no answer: another may be asked */
	FP_CFI_DEVICE_NONE,  /* the device's file has no CFI, or no device will be asked */
};

/* fp_resolver_cfi_device: the device fetch of id's CFI (after -ENODATA)
 * is in state what (enum fp_cfi_device).  Any thread. */
void fp_resolver_cfi_device(struct fp_resolver *r, const struct fp_build_id *id, int what);

/* fp_resolver_add_cfi_async: a device's copy of id's CFI sections, at fd
 * (the resolver takes fd and closes it; its build-ID must be id): its
 * unwind table is compiled and stored (as fp_resolver_add_file does,
 * without its symbols, which the copy does not hold).  Before
 * fp_resolver_start, in the caller's thread; after it, in a worker.  0
 * (done, or queued), -ESTALE (another build-ID), -EAGAIN (queue full:
 * nothing done, fd closed), -ENOENT (no CFI in it) or the error of the
 * compile. */
int fp_resolver_add_cfi_async(struct fp_resolver *r, int fd, const struct fp_build_id *id);

/* fp_resolver_note_path: the file of user build-ID id was mapped at path
 * by process pid (0: unknown): where fp_resolver_unwind looks.  At most
 * FP_RESOLVER_MAX_PATHS build-IDs are remembered.  0 or -ENOMEM. */
#define FP_RESOLVER_MAX_PATHS 65536
int fp_resolver_note_path(struct fp_resolver *r, const struct fp_build_id *id, const char *path,
			  uint32_t pid);

/* fp_resolver_kfuncs: the function starts of kernel build-ID id's
 * kallsyms table (fp_symtab_kfuncs), out's build-ID set.  0, -ENOENT (no
 * table for id yet), -EINVAL, -E2BIG or -ENOMEM (fp_symtab_kfuncs). */
struct fp_kfuncs;
int fp_resolver_kfuncs(struct fp_resolver *r, const struct fp_build_id *id, struct fp_kfuncs *out);

/* fp_resolver_missing: whether every source was tried for id and none had
 * it, or, where the sources are files the operator keeps, none has a file
 * for it (fp_resolver_unwind looked); until a file for it is added. */
int fp_resolver_missing(struct fp_resolver *r, const struct fp_build_id *id);

/* fp_resolver_has: whether a table for id is stored. */
int fp_resolver_has(struct fp_resolver *r, const struct fp_build_id *id);

/* A look-up session: tables found through it stay valid until _end. */
struct fp_lookup;

int fp_resolver_begin(struct fp_resolver *r, struct fp_lookup **l);
void fp_resolver_end(struct fp_lookup *l);

#define FP_RESOLVED_MAX_INLINE 32

struct fp_resolved {
	const char *rs_function; /* the function the code belongs to; NULL if unresolved */
	const char *rs_system_name;
	const char *rs_file; /* its source file, NULL if unknown */
	uint32_t rs_line;    /* its line here (the call site when inlined) */
	int rs_ninline;      /* functions inlined here, innermost first */
	struct fp_symframe rs_inline[FP_RESOLVED_MAX_INLINE];
};

/* fp_resolver_frame: resolve (mapping, offset).  For user mappings the
 * table is fetched on first use (and cached), or, after
 * fp_resolver_start, queued for a worker (the frame stays unresolved in
 * this look-up); kernel ones only come from uploaded snapshots.  Never
 * fails: an unresolved frame has NULL names. */
void fp_resolver_frame(struct fp_lookup *l, uint8_t kind, const struct fp_build_id *id,
		       const char *path, uint32_t pid, uint64_t offset, struct fp_resolved *out);

/* Where a user-space table was looked for, in the order of the search. */
enum fp_symbol_source {
	FP_SOURCE_CACHE,     /* the LMDB cache */
	FP_SOURCE_DEBUG_DIR, /* DEBUG_DIR/.build-id/xx/rest.debug */
	FP_SOURCE_LOCAL,     /* the mapping's path on this host, or its debuglink */
	FP_SOURCE_CONTAINER, /* the path in the process's mount namespace */
	FP_SOURCE_FETCH,     /* ro_fetch: the store, upstream debuginfod servers */
	FP_SOURCE_COUNT,
};

/* fp_symbol_source_name: "cache", "debug_dir", "local", "container",
 * "fetch"; NULL out of range. */
const char *fp_symbol_source_name(int source);

/* Why a build-ID with symbols has no unwind table to send. */
enum fp_unwind_why {
	FP_UNWIND_WHY_NONE,       /* it has one (or no symbols): not counted */
	FP_UNWIND_SEARCHING,      /* the host's sources are being searched for its CFI */
	FP_UNWIND_DEVICE,         /* none has CFI: a device is (to be) asked for it */
	FP_UNWIND_NO_CFI,         /* no source has CFI, a device's copy included */
	FP_UNWIND_COMPILE_FAILED, /* CFI found, its table could not be compiled */
	FP_UNWIND_FRAME_POINTERS, /* a table, not needed: the code keeps frame pointers */
	FP_UNWIND_WHY_COUNT,
};

/* fp_unwind_why_name: "searching", "device", "no_cfi", "compile_failed",
 * "frame_pointers"; NULL for FP_UNWIND_WHY_NONE and out of range. */
const char *fp_unwind_why_name(int why);

struct fp_resolver_stats {
	uint64_t rs_ingested; /* tables built from ELF files */
	uint64_t rs_ingest_failed;
	uint64_t rs_ksyms_stored;
	uint64_t rs_unwind_compiled; /* unwind tables compiled and stored */
	uint64_t rs_unwind_failed;   /* files with CFI whose compile failed */
	uint64_t rs_unwind_bytes;    /* bytes of the tables stored */
	uint64_t rs_paths_refused;   /* not regular files (FIFO, device, link...) */
	/* Build-IDs with symbols and no table, by enum fp_unwind_why: now (of
	 * those fp_resolver_unwind was asked for), and how many times one
	 * came to lack it for that reason. */
	uint64_t rs_no_table[FP_UNWIND_WHY_COUNT];
	uint64_t rs_no_table_total[FP_UNWIND_WHY_COUNT];
	/* A look-up's first use of a build-ID asks the sources in order until
	 * one has its table: a hit there, a miss at each one before. */
	uint64_t rs_hits[FP_SOURCE_COUNT], rs_misses[FP_SOURCE_COUNT];
	uint64_t rs_known_missing; /* skipped: no source had it earlier */
	uint64_t rs_searches;      /* searches past the cache (ingests tried) */
	uint64_t rs_search_ns;     /* their time, finding and building tables */
	uint64_t rs_queued;        /* jobs given to the workers */
	uint64_t rs_queue_full;    /* jobs dropped: queue full (retried later) */
	uint64_t rs_queue_depth;   /* jobs waiting now */
	uint64_t rs_running;       /* jobs running now */
	uint64_t rs_jobs_done;
	uint64_t rs_job_ms;     /* wall time of the jobs done, milliseconds */
	uint64_t rs_job_max_ms; /* of the longest */
};

/* fp_resolver_stats: a copy of the counters; any thread. */
void fp_resolver_stats(const struct fp_resolver *r, struct fp_resolver_stats *st);

#endif
