/* tablestore.h: the unwind tables the symbolizer sends to agents, kept in
 * memory once and shared by every session.
 *
 * A reply used to copy each table it carried a part of out of the LMDB
 * cache, check it, then copy the part again, for every session.  Here a
 * table is read from the resolver (fp_resolver_unwind: its cache, or a
 * search it queues) once, checked by the cache's read, hashed once (its
 * id, fp_unwind_table_id, which agents name in their hello), and the
 * replies that carry its parts point into it (struct fp_table_part's
 * tp_release) until they are encoded.
 *
 * Bounded: at most FP_TABLESTORE_MAX_BYTES of tables no reply points
 * into; past that the least recently asked for go first.  A table read
 * more than FP_TABLESTORE_RECHECK_S ago is read again at the next ask, so
 * that one compiled again (from a better source of CFI) replaces it; one
 * replaced stays alive until its last reply is encoded.
 *
 * Threads: any; one mutex guards the index and the references, and no
 * table is read under it.
 */
#ifndef FP_TABLESTORE_H
#define FP_TABLESTORE_H

#include <stddef.h>
#include <stdint.h>
#include "batch.h"
#include "resolver.h"

#define FP_TABLESTORE_MAX_BYTES (256u << 20)
#define FP_TABLESTORE_RECHECK_S 60

/* One table.  The fields are read-only to users; the rest is the store's. */
struct fp_stored_table {
	struct fp_build_id st_build_id;
	const uint8_t *st_blob; /* bpf/unwind.h format, checked */
	size_t st_len;
	uint64_t st_id;      /* fp_unwind_table_id */
	int st_needed;       /* fp_unwind_table_needed: worth sending */
	uint32_t st_refs;    /* the store's: under its lock */
	uint64_t st_used;    /* the store's: its tick at the last ask */
	uint64_t st_read_ms; /* the store's: when it was read (fp_mono_ms) */
	int st_replaced;     /* the store's: no longer in the index */
	struct fp_tablestore *st_store;
};

struct fp_tablestore_stats {
	uint64_t ts_reads;    /* tables read from the resolver */
	uint64_t ts_hits;     /* asks answered from memory */
	uint64_t ts_replaced; /* tables read again and found changed */
	uint64_t ts_evicted;  /* dropped for the bound */
	uint64_t ts_bytes;    /* held now */
	uint64_t ts_tables;   /* held now */
};

struct fp_tablestore;

/* fp_tablestore_alloc: a store of r's tables, of at most max_bytes (0:
 * FP_TABLESTORE_MAX_BYTES) not referenced.  0 or -ENOMEM. */
int fp_tablestore_alloc(struct fp_tablestore **ts, struct fp_resolver *r, size_t max_bytes);
/* fp_tablestore_free: after every reference was released. */
void fp_tablestore_free(struct fp_tablestore *ts);

/* fp_tablestore_get: a reference to the table of id in *t, read from the
 * resolver at the first ask (and again after FP_TABLESTORE_RECHECK_S).
 * The caller releases it with fp_tablestore_put.  0, or what
 * fp_resolver_unwind returns: -ENOENT (no table, and no source has CFI),
 * -ENODATA (no file of this host has its CFI: only a device may), -EAGAIN
 * (a search is queued or running), -ENOMEM or a negative errno. */
int fp_tablestore_get(struct fp_tablestore *ts, const struct fp_build_id *id,
		      struct fp_stored_table **t);

/* fp_tablestore_ref: one more reference to t (a reply part). */
void fp_tablestore_ref(struct fp_stored_table *t);

/* fp_tablestore_put: release one reference; a table replaced or over the
 * bound is freed with its last. */
void fp_tablestore_put(struct fp_stored_table *t);

/* fp_tablestore_release: fp_tablestore_put as a table part's tp_release. */
void fp_tablestore_release(void *t);

void fp_tablestore_stats(struct fp_tablestore *ts, struct fp_tablestore_stats *st);

#endif
