/* unwind_maps.h: the agent's unwind tables.
 *
 * The symbolizer compiles a table per build-ID from the file's CFI and
 * sends it down once per session (bpf/unwind.h has the format); the agent
 * never parses CFI.  Table rows live in chunks of BPF memory (bpf/unwind.h)
 * created as tables arrive and freed when the last table in them goes,
 * within a budget set at start (--unwind-mem): a table that does not fit
 * evicts the least recently used ones, and one larger than the whole
 * budget is refused and counted.  Per process, the BPF program gets the
 * list of the mappings that have a table; the rest of its code is walked
 * by frame pointer.
 *
 * Single-threaded: the agent's main loop owns it.
 */
#ifndef FP_UNWIND_H
#define FP_UNWIND_H

#include <stddef.h>
#include <stdint.h>
#include "batch.h"
#include "procmaps.h"
#include "sampler.h"

struct fp_unwind;

/* The budget for table rows (--unwind-mem): the default holds the tables
 * of the test host's programs and libraries several times over
 * (docs/agent.md, docs/performance.md). */
#define FP_UNWIND_MEM_DEFAULT_MB 8
#define FP_UNWIND_MEM_MAX_MB 1024

struct fp_unwind_stats {
	uint64_t us_installed;     /* tables installed */
	uint64_t us_evicted;       /* tables evicted to make room */
	uint64_t us_too_big;       /* tables larger than the whole budget */
	uint64_t us_rejected;      /* malformed, or for another architecture */
	uint64_t us_procs;         /* process mapping lists written */
	uint64_t us_procs_full;    /* ... that did not fit (walked by frame pointer) */
	uint64_t us_procs_swept;   /* lists of processes gone, dropped to make room */
	uint64_t us_parts_dropped; /* table parts out of order (a reply was lost) */
	uint64_t us_parts_again;   /* parts of tables installed already (a new
				   * session's symbolizer sends them again) */
	uint64_t us_deferred;      /* tables kept, not installed (fp_unwind_set_defer_fn) */
	uint64_t us_rows_used;     /* rows in use now */
	uint64_t us_rows_total;    /* the budget, in rows */
	uint32_t us_tables;        /* tables installed now */
	uint32_t us_chunks;        /* chunks of rows held now */
	uint64_t us_chunk_bytes;   /* their kernel memory (mapped by the agent too) */
	uint64_t us_chunks_failed; /* chunks the kernel refused (table not installed) */
	uint32_t us_procs_now;     /* process lists held now */
	uint32_t us_mapv_used;     /* mappings in them */
};

/* fp_unwind_alloc: manage the unwind maps of sampler s.  0, -ENOENT (the
 * sampler has no unwind memory) or -ENOMEM. */
int fp_unwind_alloc(struct fp_unwind **u, struct fp_sampler *s);
void fp_unwind_free(struct fp_unwind *u);

/* fp_unwind_add: install the table blob (bpf/unwind.h; untrusted: it is
 * checked) for build-ID id, replacing any table of id.  Processes already
 * known get it at their next fp_unwind_set_proc.  0, -EINVAL (malformed or
 * another architecture), -EFBIG (larger than the whole budget), -ENOSPC (no
 * table slot could be freed) or a negative errno. */
int fp_unwind_add(struct fp_unwind *u, const struct fp_build_id *id, const void *blob, size_t len);

/* fp_unwind_take_part: a part of a table from the symbolizer (untrusted).
 * A table's parts come in order, one table at a time; the table is
 * installed (fp_unwind_add) when its last part arrives.  The parts of a
 * table already installed are skipped and counted (us_parts_again); one
 * larger than the whole budget, and a part that does not follow the
 * previous one are dropped and counted (unless
 * fp_unwind_set_resent_replaces).  1 when a table was
 * installed, 0 when none was, or a negative errno from fp_unwind_add. */
int fp_unwind_take_part(struct fp_unwind *u, const struct fp_table_part *p);

/* A table assembled from a symbolizer's parts (fp_unwind_take_part) was
 * installed (installed 1), or deferred (0: fp_unwind_set_defer_fn): blob (len
 * bytes, malloc'd) is the whole table, from a compiler with function rows
 * or not (fp_unwind_set_function_rows).  The hook owns blob (frees it):
 * the table is not copied again to be kept. */
typedef void (*fp_unwind_installed_fn)(const struct fp_build_id *id, void *blob, size_t len,
				       int function_rows, int installed, void *arg);

/* fp_unwind_set_installed_fn: install that hook (default: none; the agent
 * keeps the tables on disk with it). */
void fp_unwind_set_installed_fn(struct fp_unwind *u, fp_unwind_installed_fn fn, void *arg);

/* Whether the table blob of id, assembled from a symbolizer's parts,
 * waits for a walk to need it rather than being installed now. */
typedef int (*fp_unwind_defer_fn)(const struct fp_build_id *id, const void *blob, size_t len,
				  void *arg);

/* fp_unwind_set_defer_fn: install that hook (default: none, every table
 * installed as it arrives).  A table it defers is not installed but handed
 * to the installed hook (installed 0), which keeps it for when a walk
 * needs it (fp_unwind_add then).  Needs the installed hook. */
void fp_unwind_set_defer_fn(struct fp_unwind *u, fp_unwind_defer_fn fn, void *arg);

/* fp_unwind_set_resent_replaces: whether a table sent for a build-ID that
 * has one installed replaces it (on: the symbolizer sends only tables the
 * agent does not hold in that version, FP_FEATURE_HELD_TABLES), or is
 * skipped (off, the default: older symbolizers send every table again in
 * each session). */
void fp_unwind_set_resent_replaces(struct fp_unwind *u, int on);

/* fp_unwind_function_rows: what fp_unwind_set_function_rows set last. */
int fp_unwind_function_rows(const struct fp_unwind *u);

/* fp_unwind_has: whether a table for id is installed. */
int fp_unwind_has(const struct fp_unwind *u, const struct fp_build_id *id);

/* fp_unwind_cpython: what the installed table of id says of the CPython
 * interpreter in its file (bpf/unwind.h), or NULL. */
const struct fp_unwind_cpython *fp_unwind_cpython(const struct fp_unwind *u,
						  const struct fp_build_id *id);

/* fp_unwind_row_start: where the row of id's installed table that file
 * offset falls in starts, when that row lies within one function, in
 * *start.  A row lies within one function when the frame it describes is
 * not in the state of a function's entry (x86-64: CFA = SP + 8; arm64:
 * CFA = SP): a function starts in that state, so such a row began after
 * its function's start, and the next function's first row differs from
 * it.  A function's .cold part starts in its hot part's state instead;
 * the symbolizer's compiler keeps a row at every function's start for it
 * (symbolizer/elf/cfi.c, append).  With those rows, a row in the entry
 * state lies within one function too: for a table installed after
 * fp_unwind_set_function_rows(u, 1), its start is given as well.  The
 * symbolizer then resolves the row's start to the same function as
 * offset, and the agent reads no symbol table.  0, or -ENOENT (no table
 * for id, offset before its first row, a row of another rule (no CFI,
 * PLT, signal frame, outermost), or in the entry state in a table that
 * may lack those rows). */
int fp_unwind_row_start(const struct fp_unwind *u, const struct fp_build_id *id, uint64_t offset,
			uint64_t *start);

/* fp_unwind_set_function_rows: whether the tables installed from now on
 * come from a compiler that keeps a row at every function's start (the
 * symbolizer announced FP_FEATURE_FUNCTION_ROWS, or fleetprof record
 * compiled them); a table keeps what was set when it was installed.
 * Off at first. */
void fp_unwind_set_function_rows(struct fp_unwind *u, int on);

/* fp_unwind_fold: fp_unwind_row_start as the collector's fold hook
 * (fp_collector_set_fold_fn), arg the struct fp_unwind. */
int fp_unwind_fold(const struct fp_build_id *id, uint64_t offset, uint64_t *start, void *arg);

/* fp_unwind_set_proc: tell the BPF program which mappings of pid have a
 * table (pm's mappings whose build-ID was read); none: pid is walked by
 * the kernel's frame-pointer walker.  Marks those tables used.  When the
 * per-process map is full, the lists of processes no longer in /proc are
 * dropped first (us_procs_swept).  0, or a negative errno (the map is
 * still full: counted). */
int fp_unwind_set_proc(struct fp_unwind *u, uint32_t pid, const struct fp_procmaps *pm);

/* fp_unwind_set_walker: which walker (enum fp_walker) walks pid, whose
 * list fp_unwind_set_proc wrote; a list written later keeps it.  0, or
 * -ENOENT (pid has no list) or a negative errno. */
int fp_unwind_set_walker(struct fp_unwind *u, uint32_t pid, unsigned walker);

/* fp_unwind_on_maps: fp_unwind_set_proc as the collector's maps hook
 * (fp_collector_set_maps_fn), arg the struct fp_unwind. */
void fp_unwind_on_maps(uint32_t pid, const struct fp_procmaps *pm, void *arg);

/* fp_unwind_forget_proc: drop pid's list (it exited or exec'd). */
void fp_unwind_forget_proc(struct fp_unwind *u, uint32_t pid);

void fp_unwind_stats(const struct fp_unwind *u, struct fp_unwind_stats *st);

/* fp_unwind_bytes: the agent's own memory for its bookkeeping (the chunks
 * are BPF memory: us_chunk_bytes). */
size_t fp_unwind_bytes(const struct fp_unwind *u);

#endif
