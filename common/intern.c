/* intern.c: open addressing over an array of (hash, id); keys live in one
 * growing arena so that a table is a handful of allocations. */
#include "intern.h"
#include "fileid.h"
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
	uint64_t ik_hash;
};

struct fp_intern {
	uint32_t *it_slots;     /* id + 1; 0 = empty */
	size_t it_nslots;       /* power of two */
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

uint64_t fp_hash(const void *data, size_t len)
{
	uint8_t out[8];
	uint64_t h;

	pthread_once(&hash_key_once, hash_key_init);
	fp_siphash(hash_key, &data, &len, 1, out, sizeof(out));
	memcpy(&h, out, sizeof(h));
	return le64toh(h);
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
	free(t->it_slots);
	free(t->it_keys);
	free(t->it_arena);
	free(t);
}

static int intern_grow_slots(struct fp_intern *t)
{
	size_t n = t->it_nslots ? t->it_nslots * 2 : 64, i;
	uint32_t *slots = calloc(n, sizeof(*slots));

	if (!slots)
		return -ENOMEM;
	for (i = 0; i < t->it_nkeys; i++) {
		size_t s = t->it_keys[i].ik_hash & (n - 1);
		while (slots[s])
			s = (s + 1) & (n - 1);
		slots[s] = (uint32_t)i + 1;
	}
	free(t->it_slots);
	t->it_slots = slots;
	t->it_nslots = n;
	return 0;
}

static int intern_find_hashed(const struct fp_intern *t, const void *key, size_t len, uint64_t h,
			      uint32_t *id)
{
	size_t s;

	if (!t->it_nslots)
		return -ENOENT;
	for (s = h & (t->it_nslots - 1); t->it_slots[s]; s = (s + 1) & (t->it_nslots - 1)) {
		const struct intern_key *k = &t->it_keys[t->it_slots[s] - 1];
		if (k->ik_hash == h && k->ik_len == len &&
		    memcmp(t->it_arena + k->ik_offset, key, len) == 0) {
			*id = t->it_slots[s] - 1;
			return 0;
		}
	}
	return -ENOENT;
}

int fp_intern_find(const struct fp_intern *t, const void *key, size_t len, uint32_t *id)
{
	return intern_find_hashed(t, key, len, fp_hash(key, len), id);
}

int fp_intern_get(struct fp_intern *t, const void *key, size_t len, uint32_t *id, int *added)
{
	uint64_t h = fp_hash(key, len);
	size_t s;

	if (intern_find_hashed(t, key, len, h, id) == 0) {
		if (added)
			*added = 0;
		return 0;
	}
	if (t->it_nkeys >= UINT32_MAX - 1)
		return -ENOMEM;
	/* Keep the load factor under 1/2. */
	if ((t->it_nkeys + 1) * 2 > t->it_nslots && intern_grow_slots(t))
		return -ENOMEM;
	if (fp_vec_reserve(&t->it_keys, &t->it_keys_cap, t->it_nkeys + 1,
			   sizeof(*t->it_keys)) ||
	    fp_vec_reserve(&t->it_arena, &t->it_arena_cap, t->it_arena_len + len + 8, 1))
		return -ENOMEM;
	memcpy(t->it_arena + t->it_arena_len, key, len);
	t->it_keys[t->it_nkeys] = (struct intern_key){ t->it_arena_len, len, h };
	t->it_arena_len += (len + 7) & ~(size_t)7; /* keys stay 8-byte aligned */
	for (s = h & (t->it_nslots - 1); t->it_slots[s]; s = (s + 1) & (t->it_nslots - 1))
		;
	t->it_slots[s] = (uint32_t)t->it_nkeys + 1;
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
	return t->it_nslots * sizeof(*t->it_slots) + t->it_keys_cap * sizeof(*t->it_keys) +
	       t->it_arena_cap;
}

void fp_intern_clear(struct fp_intern *t)
{
	if (t->it_nslots)
		memset(t->it_slots, 0, t->it_nslots * sizeof(*t->it_slots));
	t->it_nkeys = 0;
	t->it_arena_len = 0;
}
