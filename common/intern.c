/* intern.c: the ids in a set of indexes (indexset.h) over the array of
 * keys; the keys' bytes live in one growing arena so that a table is a
 * handful of allocations. */
#include "intern.h"
#include "fileid.h"
#include "indexset.h"
#include "vec.h"

#include <endian.h>
#include <errno.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>
#include <sys/random.h>
#include <time.h>
#include <unistd.h>

struct intern_key {
	size_t ik_offset; /* into it_arena */
	size_t ik_len;
};

struct fp_intern {
	struct fp_indexset it_set; /* ids, by their keys' fp_hash */
	struct intern_key *it_keys;
	size_t it_nkeys, it_keys_cap;
	unsigned char *it_arena;
	size_t it_arena_len, it_arena_cap;
};

/* The hash is SipHash-2-4 (fileid.h), keyed, so that a peer that chooses
 * keys (agents choose the ids the symbolizer interns) cannot choose keys
 * that collide in the table.  The key is drawn once per process from
 * getrandom(). */
static uint8_t hash_key[16];
static pthread_once_t hash_key_once = PTHREAD_ONCE_INIT;

/* hash_key_init: 16 random bytes.  Without them (no getrandom: a kernel
 * before 3.17) the key is the clock's and the address space's, which a
 * remote peer cannot read either. */
static void hash_key_init(void)
{
	struct timespec ts;
	uint64_t k[2];

	if (getrandom(hash_key, sizeof(hash_key), 0) == (ssize_t)sizeof(hash_key))
		return;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	k[0] = (uint64_t)ts.tv_nsec * 0x9e3779b97f4a7c15ull ^ (uintptr_t)&ts;
	k[1] = (uint64_t)ts.tv_sec ^ (uintptr_t)&hash_key_once ^ (uint64_t)getpid();
	memcpy(hash_key, k, sizeof(hash_key));
}

uint64_t fp_hash_parts(const void *const *bufs, const size_t *lens, size_t n)
{
	uint8_t out[8];
	uint64_t h;

	pthread_once(&hash_key_once, hash_key_init);
	fp_siphash(hash_key, bufs, lens, n, out, sizeof(out));
	memcpy(&h, out, sizeof(h));
	return le64toh(h);
}

uint64_t fp_hash(const void *data, size_t len)
{
	return fp_hash_parts(&data, &len, 1);
}

int fp_intern_alloc(struct fp_intern **t)
{
	struct fp_intern *n = calloc(1, sizeof(*n));

	if (!n)
		return -ENOMEM;
	*t = n;
	return 0;
}

void fp_intern_free(struct fp_intern *t)
{
	if (!t)
		return;
	fp_indexset_free(&t->it_set);
	free(t->it_keys);
	free(t->it_arena);
	free(t);
}

/* A key being looked up, and the equality test of the set. */
struct intern_probe {
	const void *ip_key;
	size_t ip_len;
};

static int intern_eq(const void *ctx, uint32_t id, const void *key)
{
	const struct fp_intern *t = ctx;
	const struct intern_probe *p = key;
	const struct intern_key *k = &t->it_keys[id];

	return k->ik_len == p->ip_len &&
	       memcmp(t->it_arena + k->ik_offset, p->ip_key, p->ip_len) == 0;
}

int fp_intern_find(const struct fp_intern *t, const void *key, size_t len, uint32_t *id)
{
	struct intern_probe p = { key, len };
	size_t slot;
	uint32_t found = fp_indexset_find(&t->it_set, (uint32_t)fp_hash(key, len), intern_eq, t, &p,
					  &slot);

	if (found == FP_INDEXSET_NONE)
		return -ENOENT;
	*id = found;
	return 0;
}

int fp_intern_get(struct fp_intern *t, const void *key, size_t len, uint32_t *id, int *added)
{
	struct intern_probe p = { key, len };
	uint32_t h = (uint32_t)fp_hash(key, len), found;
	size_t slot;

	found = fp_indexset_find(&t->it_set, h, intern_eq, t, &p, &slot);
	if (found != FP_INDEXSET_NONE) {
		*id = found;
		if (added)
			*added = 0;
		return 0;
	}
	if (t->it_nkeys >= FP_INDEXSET_NONE - 1)
		return -ENOMEM;
	if (fp_vec_reserve(&t->it_keys, &t->it_keys_cap, t->it_nkeys + 1, sizeof(*t->it_keys)) ||
	    fp_vec_reserve(&t->it_arena, &t->it_arena_cap, t->it_arena_len + len + 8, 1) ||
	    fp_indexset_make_room(&t->it_set, h, &slot))
		return -ENOMEM;
	memcpy(t->it_arena + t->it_arena_len, key, len);
	t->it_keys[t->it_nkeys] = (struct intern_key){ t->it_arena_len, len };
	t->it_arena_len += (len + 7) & ~(size_t)7; /* keys stay 8-byte aligned */
	fp_indexset_insert(&t->it_set, slot, h, (uint32_t)t->it_nkeys);
	*id = (uint32_t)t->it_nkeys++;
	if (added)
		*added = 1;
	return 0;
}

const void *fp_intern_key(const struct fp_intern *t, uint32_t id, size_t *len)
{
	if (id >= t->it_nkeys)
		return NULL;
	*len = t->it_keys[id].ik_len;
	return t->it_arena + t->it_keys[id].ik_offset;
}

size_t fp_intern_count(const struct fp_intern *t)
{
	return t->it_nkeys;
}

size_t fp_intern_bytes(const struct fp_intern *t)
{
	return fp_indexset_bytes(&t->it_set) + t->it_keys_cap * sizeof(*t->it_keys) +
	       t->it_arena_cap;
}

void fp_intern_clear(struct fp_intern *t)
{
	fp_indexset_clear(&t->it_set);
	t->it_nkeys = 0;
	t->it_arena_len = 0;
}
