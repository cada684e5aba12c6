/* symcache.h: the LMDB cache of symbol tables, keyed by build-ID.
 *
 * Survives restarts; readers never block the writer.  Values are symtab.h
 * blobs, looked up in place inside a read transaction.  The same
 * environment holds the unwind tables (bpf/unwind.h) of the same files,
 * in a named database of their own, "unwind.fnrows", also keyed by
 * build-ID; fp_symcache_open drops the "unwind" database of earlier
 * versions, whose tables may lack a row at some function's start.
 */
#ifndef FP_SYMCACHE_H
#define FP_SYMCACHE_H

#include <stddef.h>
#include "batch.h"
#include "symtab.h"

struct fp_symcache;
struct fp_symcache_txn;

/* fp_symcache_open: open (creating) the cache in directory dir, which is
 * created if missing.  0, -EINVAL (dir holds something that is not an
 * LMDB environment) or a negative errno. */
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
int fp_symcache_get(struct fp_symcache_txn *txn, const struct fp_build_id *id,
		    struct fp_symtab *t);

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
