/* indexset.h: a hash set of indexes into an array the caller owns: the
 * one hash table of the tree.
 *
 * Modules keep records in plain arrays (interned keys, intern.h; the
 * profile model's mappings, frames and samples; the encoders' tables; the
 * symbol table builder's strings and files) and look them up by key.  The
 * set stores only an element's index and hash; the caller hashes the key
 * and says whether a key equals an element.  Keys a peer or a file
 * chooses are hashed with the keyed fp_hash (intern.h), so that no one can
 * make them collide.  Open addressing with linear probing, load factor at
 * most 3/4.  A zeroed struct fp_indexset is an empty set.  Not
 * thread-safe: the owner of the array serialises the calls.
 *
 * Lookup, adding the key when it is missing:
 *	found = fp_indexset_find(&set, hash, eq, ctx, key, &slot);
 *	if (found == FP_INDEXSET_NONE) {
 *		if (fp_indexset_make_room(&set, hash, &slot))
 *			return -ENOMEM;
 *		... append the element at index n ...
 *		fp_indexset_insert(&set, slot, hash, n);
 *	}
 */
#ifndef FP_INDEXSET_H
#define FP_INDEXSET_H

#include <stddef.h>
#include <stdint.h>

#define FP_INDEXSET_NONE UINT32_MAX

struct fp_indexset_slot {
	uint32_t sl_index1; /* index + 1; 0: empty */
	uint32_t sl_hash;   /* kept so that growing never rehashes keys */
};

struct fp_indexset {
	struct fp_indexset_slot *is_slots;
	size_t is_mask; /* slots - 1; slots is a power of two */
	size_t is_used;
};

/* An equality test: does the element at index (of the array ctx leads to)
 * have key? */
typedef int (*fp_indexset_eq_fn)(const void *ctx, uint32_t index, const void *key);

/* fp_indexset_find: the index of the element equal to key, whose hash is
 * hash; FP_INDEXSET_NONE if there is none, with *slot set to where the key
 * would go.  Inline, so that a constant eq is inlined into the probe loop. */
static inline uint32_t fp_indexset_find(const struct fp_indexset *s, uint32_t hash,
					fp_indexset_eq_fn eq, const void *ctx, const void *key,
					size_t *slot)
{
	size_t i = 0;

	if (s->is_slots) {
		for (i = hash & s->is_mask; s->is_slots[i].sl_index1; i = (i + 1) & s->is_mask) {
			const struct fp_indexset_slot *sl = &s->is_slots[i];

			if (sl->sl_hash == hash && eq(ctx, sl->sl_index1 - 1, key))
				return sl->sl_index1 - 1;
		}
	}
	*slot = i;
	return FP_INDEXSET_NONE;
}

/* fp_indexset_reserve: room for n more entries (to size a set ahead).
 * 0 or -ENOMEM (the set is unchanged). */
int fp_indexset_reserve(struct fp_indexset *s, size_t n);

/* fp_indexset_grow_slot: the slow path of fp_indexset_make_room. */
int fp_indexset_grow_slot(struct fp_indexset *s, uint32_t hash, size_t *slot);

/* fp_indexset_make_room: room for the key fp_indexset_find just missed,
 * keeping the load factor at or below 3/4; *slot (from that find) follows
 * the key when the set grows.  0 or -ENOMEM (the set is unchanged). */
static inline int fp_indexset_make_room(struct fp_indexset *s, uint32_t hash, size_t *slot)
{
	if (s->is_slots && (s->is_used + 1) * 4 <= (s->is_mask + 1) * 3)
		return 0;
	return fp_indexset_grow_slot(s, hash, slot);
}

/* fp_indexset_insert: add index (below FP_INDEXSET_NONE) with hash at the
 * slot that fp_indexset_find and fp_indexset_make_room gave for its key.
 * Never fails. */
static inline void fp_indexset_insert(struct fp_indexset *s, size_t slot, uint32_t hash,
				      uint32_t index)
{
	s->is_slots[slot].sl_index1 = index + 1;
	s->is_slots[slot].sl_hash = hash;
	s->is_used++;
}

/* fp_indexset_free: release the slots; the set is empty again. */
void fp_indexset_free(struct fp_indexset *s);

/* fp_indexset_clear: forget every index, keeping the slots for reuse. */
void fp_indexset_clear(struct fp_indexset *s);

/* fp_indexset_bytes: memory held by the slots. */
static inline size_t fp_indexset_bytes(const struct fp_indexset *s)
{
	return s->is_slots ? (s->is_mask + 1) * sizeof(*s->is_slots) : 0;
}

/* Hashing for keys the process makes itself (indexes it assigned, counts):
 * a multiply-xorshift step for words and a final avalanche, so that the
 * low bits that pick the slot are well mixed.  Keys from outside (names,
 * paths, addresses) take the keyed fp_hash (intern.h) instead: these
 * steps are public, and chosen inputs collide them. */
#define FP_HASH_SEED 0xcbf29ce484222325ULL

/* fp_hash_string: FNV-1a over the NUL-terminated s.  Unkeyed, so the same
 * in every process: for values that must stay stable from one run to the
 * next (a flame graph's colours), never for a table's keys. */
static inline uint64_t fp_hash_string(uint64_t h, const char *s)
{
	for (; *s; s++) {
		h ^= (unsigned char)*s;
		h *= 0x100000001b3ULL;
	}
	return h;
}

static inline uint64_t fp_hash_word(uint64_t h, uint64_t v)
{
	h ^= v;
	h *= 0x9e3779b97f4a7c15ULL;
	return h ^ (h >> 29);
}

static inline uint32_t fp_hash_finish(uint64_t h)
{
	h ^= h >> 33;
	h *= 0xff51afd7ed558ccdULL;
	h ^= h >> 33;
	h *= 0xc4ceb9fe1a85ec53ULL;
	h ^= h >> 33;
	return (uint32_t)h;
}

#endif
