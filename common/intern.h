/* intern.h: byte-string keys to dense ids 0, 1, 2, ...  The agent interns
 * stacks, threads and mappings with it, so that each is defined once and
 * afterwards referred to by its id; the symbolizer keeps the ids agents
 * chose with it, so its hash is keyed (fp_hash).  A table is not
 * thread-safe: its owner serialises the calls. */
#ifndef FP_INTERN_H
#define FP_INTERN_H

#include <stddef.h>
#include <stdint.h>

struct fp_intern;

/* fp_intern_alloc: an empty table.  0 or -ENOMEM. */
int fp_intern_alloc(struct fp_intern **t);
void fp_intern_free(struct fp_intern *t);

/* fp_intern_get: the id of key (copied in), added if new; *added tells
 * which.  0 or -ENOMEM (the table is unchanged). */
int fp_intern_get(struct fp_intern *t, const void *key, size_t len, uint32_t *id, int *added);

/* fp_intern_find: the id of key if present.  0 or -ENOENT. */
int fp_intern_find(const struct fp_intern *t, const void *key, size_t len, uint32_t *id);

/* fp_intern_key: the key of id (8-byte aligned, valid until the table
 * changes), or NULL. */
const void *fp_intern_key(const struct fp_intern *t, uint32_t id, size_t *len);

size_t fp_intern_count(const struct fp_intern *t);
/* fp_intern_bytes: memory held by the table, for the agent's budget. */
size_t fp_intern_bytes(const struct fp_intern *t);
/* fp_intern_clear: forget every key; ids start again from 0. */
void fp_intern_clear(struct fp_intern *t);

/* fp_hash: the 64-bit hash the table uses: SipHash-2-4 (fp_siphash,
 * fileid.h) under a key drawn at random once per process, so that its
 * values differ from one process to the next and no peer can choose
 * colliding keys.  Any thread. */
uint64_t fp_hash(const void *data, size_t len);

/* fp_hash_parts: fp_hash over the concatenation of n buffers, without
 * copying them together: for keys made of several fields.  Any thread. */
uint64_t fp_hash_parts(const void *const *bufs, const size_t *lens, size_t n);

#endif
