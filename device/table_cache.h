/* table_cache.h: the unwind tables this device holds, so that a restarted
 * agent has whole stacks before it has talked to a symbolizer, and its
 * hello names what it holds (HELLO key 11) so that none is sent again.
 *
 * On disk, one file per build-ID, DIR/HEX.table: a 48-byte header (magic
 * "FPTC", version 1, the table's id, its length, the build-ID and flags,
 * in the host's byte order) and the table (bpf/unwind.h).  A file is written
 * whole under a temporary name, then renamed over the old one: a reader
 * finds the old table or the new, never part of one.  Past max_bytes, the
 * least recently used files go first; a file's modification time is its
 * last use, so the order outlives the agent.
 *
 * The files are untrusted (a crash or a full disk mid-write, a disk that
 * flips bits, anyone who can write the directory).  The directory must be
 * the agent's own (owned by its user, writable by no one else), or the
 * cache stays off.  A table is used only once its file's size, header,
 * build-ID (the name's, and the one asked for), id (fp_unwind_table_id of
 * its bytes) and rows (fp_unwind_table_check) are checked; a file that
 * fails is removed, counted and logged, and its table comes from the
 * symbolizer again.
 *
 * In memory, the ids of the tables held, by build-ID: those on disk, and
 * those only the BPF maps hold (installed from a symbolizer while the
 * directory is off, or could not be written).
 *
 * Single-threaded: the agent's main loop owns it.
 */
#ifndef FP_TABLE_CACHE_H
#define FP_TABLE_CACHE_H

#include <stddef.h>
#include <stdint.h>
#include "batch.h"

#define FP_TABLE_CACHE_DIR_DEFAULT "/var/cache/fleetprof-agent"
#define FP_TABLE_CACHE_MB_DEFAULT 64u
#define FP_TABLE_CACHE_MB_MAX 65536u
/* What a file says of its table, besides its bytes. */
#define FP_TABLE_CACHE_FUNCTION_ROWS 1 /* compiled with a row at each function's start */

struct fp_table_cache;

struct fp_table_cache_stats {
	uint64_t tc_loaded;  /* tables read from disk and found good */
	uint64_t tc_stored;  /* tables written */
	uint64_t tc_bad;     /* files that failed a check: removed */
	uint64_t tc_evicted; /* files removed past the bound */
	uint64_t tc_errors;  /* files that could not be written or removed */
	uint64_t tc_files;   /* on disk now */
	uint64_t tc_bytes;   /* ... and their bytes */
};

/* fp_table_cache_open: the tables in dir (created, mode 0700, when
 * missing; NULL: none, memory only), at most max_bytes of files.  Files
 * whose name or header is wrong, and temporary files a crash left, are
 * removed.  0, -EPERM (dir is another user's, or others may write it),
 * -ENOTDIR, -ENOMEM or the errno of mkdir or open (the caller goes on with
 * a cache in memory only, fp_table_cache_open(c, NULL, 0), and says why). */
int fp_table_cache_open(struct fp_table_cache **c, const char *dir, uint64_t max_bytes);
void fp_table_cache_close(struct fp_table_cache *c);

/* fp_table_cache_dir: the directory, or NULL when memory only. */
const char *fp_table_cache_dir(const struct fp_table_cache *c);

/* fp_table_cache_load: the table of id from disk, checked, in *blob
 * (malloc'd: the caller frees it) of *len bytes, its FP_TABLE_CACHE_*
 * flags in *flags; the file becomes the most recently used.  0, -ENOENT
 * (none on disk), -EINVAL (a check failed: the file was removed), -ENOMEM
 * or the errno of a read. */
int fp_table_cache_load(struct fp_table_cache *c, const struct fp_build_id *id, void **blob,
			size_t *len, uint32_t *flags);

/* fp_table_cache_store: id's table (blob, len bytes, checked by the
 * caller: installed; with FP_TABLE_CACHE_* flags) is held; written to disk, replacing an older
 * version, when there is a directory, and files removed past the bound.
 * 0, -E2BIG (larger than the bound: held in memory only), -ENOMEM or the
 * errno of a write (counted in tc_errors; still held in memory). */
int fp_table_cache_store(struct fp_table_cache *c, const struct fp_build_id *id, const void *blob,
			 size_t len, uint32_t flags);

/* fp_table_cache_drop: forget id's table, and remove its file (the BPF
 * maps refused it, say). */
void fp_table_cache_drop(struct fp_table_cache *c, const struct fp_build_id *id);

/* fp_table_cache_has: whether id's table is held on disk. */
int fp_table_cache_has(const struct fp_table_cache *c, const struct fp_build_id *id);

/* A table held in memory only counts while installed(id, arg) says so. */
typedef int (*fp_table_installed_fn)(const struct fp_build_id *id, void *arg);

/* fp_table_cache_held: the tables held (on disk, or in memory and
 * installed), most recently used first, at most max, into out: what a
 * hello lists.  The number written. */
size_t fp_table_cache_held(const struct fp_table_cache *c, fp_table_installed_fn installed,
			   void *arg, struct fp_held_table *out, size_t max);

void fp_table_cache_stats(const struct fp_table_cache *c, struct fp_table_cache_stats *st);

#endif
