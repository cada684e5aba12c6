/* symcache.h: the LMDB cache of symbol tables, keyed by build-ID.
 *
 * Survives restarts; readers never block the writer.  Values are symtab.h
 * blobs, looked up in place inside a read transaction.  The same
 * environment holds the unwind tables (bpf/unwind.h) of the same files,
 * in a named database of their own, FP_SYMCACHE_UNWIND_DB, also keyed by
 * build-ID.
 */
#ifndef FP_SYMCACHE_H
#define FP_SYMCACHE_H

#include <stddef.h>
#include "batch.h"

/* The unwind tables' database: its name carries the revision of what
 * the compiler (symbolizer/elf/cfi.c) puts in a table, which may change
 * within one format (FP_UNWIND_VERSION): tables compiled before cfi.c
 * kept a row at every function's start are of the same format, and lack
 * the rows that fold a frame to its own function.  A new name makes the
 * cache compile every table again; fp_symcache_open drops the databases
 * of earlier revisions.  Bump it whenever cfi.c's output changes. */
#define FP_SYMCACHE_UNWIND_DB "unwind.2"
#include "symtab.h"

struct fp_symcache;
struct fp_symcache_txn;

/* fp_symcache_open: open (creating) the cache in directory dir, which is
 * created if missing, and drop the unwind tables of earlier revisions
 * (FP_SYMCACHE_UNWIND_DB).  0, -EINVAL (dir holds something that is not
 * an LMDB environment) or a negative errno. */
int fp_symcache_open(struct fp_symcache **c, const char *dir);
void fp_symcache_close(struct fp_symcache *c);

/* fp_symcache_put: store blob under id, replacing any earlier value.
 * 0, -EINVAL (bad id, or blob that fp_symtab_open refuses), -ENOSPC (map
 * full) or a negative errno. */
int fp_symcache_put(struct fp_symcache *c, const struct fp_build_id *id, const void *blob,
		    size_t len);

/* fp_symcache_begin: a read transaction; every fp_symtab obtained through
 * it stays valid until fp_symcache_end.  0, -EAGAIN (reader table full) or
 * a negative errno. */
int fp_symcache_begin(struct fp_symcache *c, struct fp_symcache_txn **txn);
void fp_symcache_end(struct fp_symcache_txn *txn);

/* fp_symcache_get: the table of id.  0, -ENOENT (none stored, or one of
 * another FP_SYMTAB_VERSION: it reads as absent so that the caller builds
 * and stores it again), or -EINVAL (stored value is corrupt). */
int fp_symcache_get(struct fp_symcache_txn *txn, const struct fp_build_id *id, struct fp_symtab *t);

/* fp_symcache_put_unwind: store the unwind table blob under id,
 * replacing any earlier one.  0, -EINVAL (bad id, or a blob that
 * fp_unwind_table_check refuses), -ENOSPC (map full) or a negative
 * errno. */
int fp_symcache_put_unwind(struct fp_symcache *c, const struct fp_build_id *id, const void *blob,
			   size_t len);

/* fp_symcache_get_unwind: a copy of id's unwind table in *blob (malloc'd,
 * the caller frees it), *len bytes.  A copy, not a pointer into the map:
 * tables leave for the wire and the BPF maps long after any read
 * transaction should have ended, and a long reader would pin old pages.
 * 0, -ENOENT (none stored, or one of another FP_UNWIND_VERSION: it reads
 * as absent so that a new compiler replaces it), -EINVAL (stored value is
 * corrupt), -ENOMEM, -EAGAIN (reader table full) or a negative errno. */
int fp_symcache_get_unwind(struct fp_symcache *c, const struct fp_build_id *id, void **blob,
			   size_t *len);

#endif
