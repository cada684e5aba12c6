/* debuginfod.h: upstream debuginfod servers as a source of ELF files for
 * the resolver (its ro_fetch hook), through libdebuginfod.  A build-ID
 * that the debug directory and the local files lack is asked for as
 * debuginfo, then as an executable; its CFI, as an executable.  libdebuginfod keeps what it fetched
 * (and which build-IDs the servers did not have, for ten minutes) in its
 * own cache directory. */
#ifndef FP_DEBUGINFOD_H
#define FP_DEBUGINFOD_H

#include <stddef.h>
#include "batch.h"
#include "resolver.h" /* enum fp_fetch_what */

struct fp_debuginfod;

struct fp_debuginfod_stats {
	uint64_t ds_fetched; /* files received */
	uint64_t ds_missed;  /* build-IDs no server had */
	uint64_t ds_failed;  /* other errors (unreachable server...) */
};

/* fp_debuginfod_open: a client of the servers at urls (n of them,
 * http:// or https://), caching under cache_dir (created if missing; it
 * must be a directory of its own: libdebuginfod removes old files from
 * it).  libdebuginfod takes its settings from the environment, so this
 * sets DEBUGINFOD_URLS and DEBUGINFOD_CACHE_PATH (and DEBUGINFOD_TIMEOUT,
 * 10 s, unless already set) for the whole process: call it before any
 * thread starts.  0, -EINVAL (no or bad URL), -ENOSYS (libdebuginfod
 * unusable) or a negative errno. */
int fp_debuginfod_open(struct fp_debuginfod **d, const char *const *urls, size_t n,
		       const char *cache_dir);
void fp_debuginfod_close(struct fp_debuginfod *d);

/* fp_debuginfod_fetch: an fp_fetch_fn (resolver.h) whose arg is a struct
 * fp_debuginfod: an fd open on the file for id, for symbols
 * (FP_FETCH_SYMBOLS) debuginfo first, then the executable; for CFI
 * (FP_FETCH_CFI) the executable only (a debuginfo file has no CFI); or a
 * negative errno (-ENOENT: no server has it).  Safe from any thread (one
 * query at a time). */
int fp_debuginfod_fetch(const struct fp_build_id *id, int what, void *arg);

void fp_debuginfod_stats(struct fp_debuginfod *d, struct fp_debuginfod_stats *st);

#endif
