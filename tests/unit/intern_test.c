/* intern_test.c: byte-string interning (common/intern.c): ids, lookups,
 * key storage, growth, clearing, memory accounting and the hash. */
#include <endian.h>
#include <errno.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "check.h"
#include "fileid.h"
#include "intern.h"

static struct fp_intern *new_table(void)
{
	struct fp_intern *t = NULL;

	CHECK_EQ_INT(fp_intern_alloc(&t), 0);
	CHECK(t != NULL);
	return t;
}

/* check_key: id's stored key is 8-byte aligned and byte-identical to key. */
static void check_key(const struct fp_intern *t, uint32_t id, const void *key, size_t len)
{
	size_t got_len = (size_t)-1;
	const void *got = fp_intern_key(t, id, &got_len);

	CHECK(got != NULL);
	if (!got)
		return;
	CHECK_EQ_INT((uintptr_t)got % 8, 0);
	CHECK_EQ_INT(got_len, len);
	if (got_len == len)
		CHECK(len == 0 || memcmp(got, key, len) == 0);
}

static void test_get_find_added(void)
{
	static const struct {
		const char *key;
		size_t len;
	} cases[] = {
		{ "main", 4 },
		{ "libc.so.6", 9 },
		{ "/usr/lib/x86_64-linux-gnu/libstdc++.so.6.0.30", 45 },
		{ "a", 1 },
		{ "abcdefgh", 8 }, /* exactly one 8-byte word */
		{ "abcdefghi", 9 },
		{ "with\0nul", 8 }, /* keys are bytes, not strings */
	};
	const size_t n = sizeof(cases) / sizeof(cases[0]);
	struct fp_intern *t = new_table();
	uint32_t id, id2;
	int added;
	size_t i;

	if (!t)
		return;
	CHECK_EQ_INT(fp_intern_count(t), 0);
	CHECK_EQ_INT(fp_intern_find(t, "main", 4, &id), -ENOENT);
	for (i = 0; i < n; i++) {
		id = 999;
		added = -1;
		CHECK_EQ_INT(fp_intern_get(t, cases[i].key, cases[i].len, &id, &added), 0);
		CHECK_EQ_INT(added, 1);
		CHECK_EQ_INT(id, i); /* dense ids in insertion order */
		CHECK_EQ_INT(fp_intern_count(t), i + 1);
	}
	for (i = 0; i < n; i++) {
		added = -1;
		CHECK_EQ_INT(fp_intern_get(t, cases[i].key, cases[i].len, &id, &added), 0);
		CHECK_EQ_INT(added, 0);
		CHECK_EQ_INT(id, i);
		id2 = 999;
		CHECK_EQ_INT(fp_intern_find(t, cases[i].key, cases[i].len, &id2), 0);
		CHECK_EQ_INT(id2, i);
		check_key(t, (uint32_t)i, cases[i].key, cases[i].len);
	}
	CHECK_EQ_INT(fp_intern_count(t), n);

	/* A key equal to a copy in another buffer finds the same id. */
	char copy[16];
	memcpy(copy, "libc.so.6", 9);
	CHECK_EQ_INT(fp_intern_find(t, copy, 9, &id), 0);
	CHECK_EQ_INT(id, 1);

	/* Not present: unknown bytes, and a present key with one byte changed. */
	id = 777;
	CHECK_EQ_INT(fp_intern_find(t, "main!", 5, &id), -ENOENT);
	CHECK_EQ_INT(fp_intern_find(t, "maim", 4, &id), -ENOENT);
	CHECK_EQ_INT(id, 777); /* untouched on failure */

	/* added may be NULL. */
	CHECK_EQ_INT(fp_intern_get(t, "main", 4, &id, NULL), 0);
	CHECK_EQ_INT(id, 0);
	CHECK_EQ_INT(fp_intern_get(t, "new", 3, &id, NULL), 0);
	CHECK_EQ_INT(id, n);

	/* Ids past the end have no key. */
	size_t len = 12345;
	CHECK(fp_intern_key(t, (uint32_t)n + 1, &len) == NULL);
	CHECK(fp_intern_key(t, UINT32_MAX, &len) == NULL);
	fp_intern_free(t);
	fp_intern_free(NULL);
}

static void test_lengths(void)
{
	/* Keys that share bytes but differ in length are different keys,
	 * including trailing NULs (the hash must not just pad with zeros). */
	static const unsigned char bytes[40] = { 0 };
	struct fp_intern *t = new_table();
	uint32_t id;
	size_t len;
	int added;

	if (!t)
		return;
	for (len = 0; len <= sizeof(bytes); len++) {
		CHECK_EQ_INT(fp_intern_get(t, bytes, len, &id, &added), 0);
		CHECK_EQ_INT(added, 1);
		CHECK_EQ_INT(id, len);
	}
	for (len = 0; len <= sizeof(bytes); len++) {
		CHECK_EQ_INT(fp_intern_find(t, bytes, len, &id), 0);
		CHECK_EQ_INT(id, len);
		check_key(t, (uint32_t)len, bytes, len);
	}
	/* Prefixes of a string are distinct too. */
	const char *s = "/usr/lib/libc.so.6";
	uint32_t ids[19];
	for (len = 1; len <= strlen(s); len++)
		CHECK_EQ_INT(fp_intern_get(t, s, len, &ids[len], NULL), 0);
	for (len = 1; len <= strlen(s); len++) {
		CHECK_EQ_INT(fp_intern_find(t, s, len, &id), 0);
		CHECK_EQ_INT(id, ids[len]);
		if (len > 1)
			CHECK(ids[len] != ids[len - 1]);
		check_key(t, ids[len], s, len);
	}
	CHECK_EQ_INT(fp_intern_count(t), sizeof(bytes) + 1 + strlen(s));
	fp_intern_free(t);
}

static void test_empty_key(void)
{
	struct fp_intern *t = new_table();
	uint32_t id = 99, id2 = 99;
	int added = -1;
	size_t len = 99;

	if (!t)
		return;
	CHECK_EQ_INT(fp_intern_find(t, "", 0, &id), -ENOENT);
	CHECK_EQ_INT(fp_intern_get(t, "x", 1, &id, &added), 0);
	CHECK_EQ_INT(fp_intern_get(t, "", 0, &id, &added), 0);
	CHECK_EQ_INT(added, 1);
	CHECK_EQ_INT(id, 1);
	CHECK_EQ_INT(fp_intern_get(t, "", 0, &id2, &added), 0);
	CHECK_EQ_INT(added, 0);
	CHECK_EQ_INT(id2, 1);
	CHECK_EQ_INT(fp_intern_find(t, "", 0, &id2), 0);
	CHECK_EQ_INT(id2, 1);
	/* The empty key has a (aligned) place of its own. */
	const void *k = fp_intern_key(t, 1, &len);
	CHECK(k != NULL);
	CHECK_EQ_INT(len, 0);
	CHECK_EQ_INT((uintptr_t)k % 8, 0);
	check_key(t, 0, "x", 1);
	/* The empty key after it does not disturb later keys. */
	CHECK_EQ_INT(fp_intern_get(t, "after", 5, &id, &added), 0);
	CHECK_EQ_INT(id, 2);
	check_key(t, 2, "after", 5);
	fp_intern_free(t);
}

static void test_alignment_and_bytes_identical(void)
{
	struct fp_intern *t = new_table();
	unsigned char src[68], *key = src + 1;
	uint32_t ids[67];
	size_t len, i;

	if (!t)
		return;
	/* Every length from 1 to 66, each from a misaligned source. */
	for (len = 1; len < 67; len++) {
		for (i = 0; i < len; i++)
			key[i] = (unsigned char)(len * 31 + i * 7);
		CHECK_EQ_INT(fp_intern_get(t, key, len, &ids[len], NULL), 0);
	}
	for (len = 1; len < 67; len++) {
		unsigned char want[67];
		for (i = 0; i < len; i++)
			want[i] = (unsigned char)(len * 31 + i * 7);
		check_key(t, ids[len], want, len);
		/* Lookup from an odd address. */
		unsigned char odd[68];
		memcpy(odd + 1, want, len);
		uint32_t id;
		CHECK_EQ_INT(fp_intern_find(t, odd + 1, len, &id), 0);
		CHECK_EQ_INT(id, ids[len]);
	}
	/* A stored key is usable as the struct it was (the agent interns
	 * structs with 64-bit fields). */
	struct {
		uint64_t a;
		uint32_t b, c;
	} s = { 0x0123456789abcdefull, 7, 9 }, *sp;
	uint32_t sid;
	CHECK_EQ_INT(fp_intern_get(t, &s, sizeof(s), &sid, NULL), 0);
	sp = (void *)fp_intern_key(t, sid, &len);
	CHECK(sp != NULL);
	if (sp)
		CHECK(sp->a == 0x0123456789abcdefull && sp->b == 7 && sp->c == 9);
	fp_intern_free(t);
}

static void test_growth_200k(void)
{
	enum { N = 200000 };
	struct fp_intern *t = new_table();
	size_t i, prev_bytes = 0, len;
	char key[48];
	uint32_t id;
	int added;

	if (!t)
		return;
	for (i = 0; i < N; i++) {
		/* Variable lengths: 8 to 30 bytes. */
		int n = snprintf(key, sizeof(key), "k%zu/%.*s", i, (int)(i % 17),
				 "................");
		CHECK_EQ_INT(fp_intern_get(t, key, (size_t)n, &id, &added), 0);
		if (id != i || added != 1) {
			CHECK_EQ_INT(id, i);
			CHECK_EQ_INT(added, 1);
			break;
		}
		size_t bytes = fp_intern_bytes(t);
		if (bytes < prev_bytes) {
			CHECK(bytes >= prev_bytes); /* never shrinks while growing */
			break;
		}
		prev_bytes = bytes;
	}
	CHECK_EQ_INT(fp_intern_count(t), N);
	/* Every key still maps to its id, and its stored bytes are intact
	 * after all the reallocations. */
	int bad = 0;
	for (i = 0; i < N && bad < 5; i++) {
		int n = snprintf(key, sizeof(key), "k%zu/%.*s", i, (int)(i % 17),
				 "................");
		const void *k;
		if (fp_intern_find(t, key, (size_t)n, &id) != 0 || id != i) {
			bad++;
			CHECK_EQ_INT(id, i);
			continue;
		}
		k = fp_intern_key(t, (uint32_t)i, &len);
		if (!k || len != (size_t)n || memcmp(k, key, len) != 0 || (uintptr_t)k % 8) {
			bad++;
			CHECK(!"stored key differs");
		}
		/* Second get: same id, not added. */
		if (i % 1000 == 0) {
			CHECK_EQ_INT(fp_intern_get(t, key, (size_t)n, &id, &added), 0);
			CHECK_EQ_INT(added, 0);
			CHECK_EQ_INT(id, i);
		}
	}
	CHECK_EQ_INT(bad, 0);
	CHECK_EQ_INT(fp_intern_find(t, "k200000/", 8, &id), -ENOENT);
	/* The budget figure covers at least the key bytes and one slot each. */
	CHECK(fp_intern_bytes(t) >= (size_t)N * (8 + sizeof(uint32_t)));
	CHECK_EQ_INT(fp_intern_count(t), N);
	fp_intern_free(t);
}

static void test_clear_then_reuse(void)
{
	struct fp_intern *t = new_table();
	uint32_t id;
	size_t i, len;
	int added;
	char key[32];

	if (!t)
		return;
	fp_intern_clear(t); /* clearing a table that never held anything */
	CHECK_EQ_INT(fp_intern_count(t), 0);
	CHECK_EQ_INT(fp_intern_find(t, "a", 1, &id), -ENOENT);

	for (i = 0; i < 1000; i++) {
		snprintf(key, sizeof(key), "before-%zu", i);
		CHECK_EQ_INT(fp_intern_get(t, key, strlen(key), &id, NULL), 0);
	}
	size_t bytes = fp_intern_bytes(t);
	fp_intern_clear(t);
	CHECK_EQ_INT(fp_intern_count(t), 0);
	CHECK(fp_intern_key(t, 0, &len) == NULL);
	for (i = 0; i < 1000; i += 97) {
		snprintf(key, sizeof(key), "before-%zu", i);
		CHECK_EQ_INT(fp_intern_find(t, key, strlen(key), &id), -ENOENT);
	}
	/* Memory is kept for reuse. */
	CHECK_EQ_INT(fp_intern_bytes(t), bytes);

	/* Ids start again from 0, old and new keys alike. */
	CHECK_EQ_INT(fp_intern_get(t, "before-500", 10, &id, &added), 0);
	CHECK_EQ_INT(added, 1);
	CHECK_EQ_INT(id, 0);
	CHECK_EQ_INT(fp_intern_get(t, "after", 5, &id, &added), 0);
	CHECK_EQ_INT(added, 1);
	CHECK_EQ_INT(id, 1);
	check_key(t, 0, "before-500", 10);
	check_key(t, 1, "after", 5);
	for (i = 0; i < 2000; i++) {
		snprintf(key, sizeof(key), "again-%zu", i);
		CHECK_EQ_INT(fp_intern_get(t, key, strlen(key), &id, &added), 0);
		CHECK_EQ_INT(id, i + 2);
	}
	for (i = 0; i < 2000; i += 13) {
		snprintf(key, sizeof(key), "again-%zu", i);
		CHECK_EQ_INT(fp_intern_find(t, key, strlen(key), &id), 0);
		CHECK_EQ_INT(id, i + 2);
		check_key(t, (uint32_t)i + 2, key, strlen(key));
	}
	CHECK_EQ_INT(fp_intern_find(t, "before-1", 8, &id), -ENOENT);
	CHECK_EQ_INT(fp_intern_count(t), 2002);
	fp_intern_free(t);
}

static void test_bytes_grows(void)
{
	struct fp_intern *t = new_table();
	size_t empty, one, many, i;
	char key[600];
	uint32_t id;

	if (!t)
		return;
	empty = fp_intern_bytes(t);
	CHECK_EQ_INT(fp_intern_get(t, "k", 1, &id, NULL), 0);
	one = fp_intern_bytes(t);
	CHECK(one > empty);
	/* A repeated key costs nothing. */
	CHECK_EQ_INT(fp_intern_get(t, "k", 1, &id, NULL), 0);
	CHECK_EQ_INT(fp_intern_bytes(t), one);
	/* 100 keys of 500 bytes: at least their bytes are accounted. */
	memset(key, 'x', sizeof(key));
	for (i = 0; i < 100; i++) {
		snprintf(key, 16, "%zu", i);
		key[strlen(key)] = '-';
		CHECK_EQ_INT(fp_intern_get(t, key, 500, &id, NULL), 0);
	}
	CHECK_EQ_INT(fp_intern_count(t), 101);
	many = fp_intern_bytes(t);
	CHECK(many > one);
	CHECK(many >= 100 * 500);
	fp_intern_free(t);
}

static void test_hash(void)
{
	unsigned char a[72], b[72], buf[80];
	size_t len, bit;
	int collisions = 0;

	for (size_t i = 0; i < sizeof(a); i++)
		a[i] = (unsigned char)(i * 37 + 11);
	for (len = 1; len <= sizeof(a); len++) {
		uint64_t h = fp_hash(a, len);

		/* Stable: same bytes, same hash, at any alignment and on every call. */
		CHECK(fp_hash(a, len) == h);
		memcpy(buf + 3, a, len);
		CHECK(fp_hash(buf + 3, len) == h);
		/* Different: every single-bit change of a same-length input. */
		for (bit = 0; bit < len * 8; bit++) {
			memcpy(b, a, len);
			b[bit / 8] ^= (unsigned char)(1u << (bit % 8));
			if (fp_hash(b, len) == h)
				collisions++;
		}
	}
	CHECK_EQ_INT(collisions, 0);

	/* Same-length pairs that a weak hash would confuse. */
	static const struct {
		const char *x, *y;
		size_t len;
	} pairs[] = {
		{ "ab", "ba", 2 },
		{ "abcdefgh12345678", "12345678abcdefgh", 16 }, /* swapped words */
		{ "\0\0\0\0\0\0\0\1", "\1\0\0\0\0\0\0\0", 8 },
		{ "\0\0\0\0\0\0\0\0\0", "\0\0\0\0\0\0\0\0\1", 9 }, /* tail byte */
		{ "libc.so.6", "libm.so.6", 9 },
	};
	for (size_t i = 0; i < sizeof(pairs) / sizeof(pairs[0]); i++) {
		if (fp_hash(pairs[i].x, pairs[i].len) == fp_hash(pairs[i].y, pairs[i].len)) {
			fprintf(stderr, "  pair %zu collides\n", i);
			CHECK(!"same-length inputs hash alike");
		}
	}
	/* Zero bytes of different lengths differ (length is part of the hash). */
	static const unsigned char zeros[16] = { 0 };
	for (len = 0; len < sizeof(zeros); len++)
		CHECK(fp_hash(zeros, len) != fp_hash(zeros, len + 1));
	CHECK(fp_hash("", 0) == fp_hash(zeros, 0));

	/* The low bits (slot index) spread: 4096 sequential keys fill most of
	 * 4096 buckets. */
	static unsigned char seen[4096];
	size_t used = 0;
	memset(seen, 0, sizeof(seen));
	for (uint32_t i = 0; i < 4096; i++) {
		uint64_t h = fp_hash(&i, sizeof(i));
		used += !seen[h & 4095];
		seen[h & 4095] = 1;
	}
	/* A random function fills 1 - 1/e (63%) of them. */
	CHECK(used > 4096 / 2);
}

/* fp_hash_parts hashes the concatenation: every split of a key, into up to
 * three parts, some empty, hashes as the whole does. */
static void test_hash_parts(void)
{
	static const char key[] = "ns::Service::handler(int)/usr/lib/libc.so.6";
	size_t len = sizeof(key) - 1, mismatches = 0;

	for (size_t i = 0; i <= len; i++) {
		for (size_t j = i; j <= len; j++) {
			const void *bufs[3] = { key, key + i, key + j };
			size_t lens[3] = { i, j - i, len - j };

			mismatches += fp_hash_parts(bufs, lens, 3) != fp_hash(key, len);
		}
	}
	CHECK_EQ_INT(mismatches, 0);
	CHECK(fp_hash_parts(NULL, NULL, 0) == fp_hash("", 0));
	/* The parts' bytes count, not their boundaries alone. */
	const void *ab[2] = { "a", "b" }, *ba[2] = { "b", "a" };
	size_t ones[2] = { 1, 1 };
	CHECK(fp_hash_parts(ab, ones, 2) != fp_hash_parts(ba, ones, 2));
}

static double now_s(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

static uint64_t guessed_hash(const uint8_t key[16], uint32_t id)
{
	const void *buf = &id;
	size_t len = sizeof(id);
	uint64_t h;

	fp_siphash(key, &buf, &len, 1, (uint8_t *)&h, sizeof(h));
	return le64toh(h);
}

/* Ids chosen to collide: 32,768 ids whose hashes under a key the attacker
 * guessed (all zeros, as good as any guess) fall in the first 128 slots
 * of the table, which open addressing would probe end to end on every
 * insertion.  Under the process's own key they spread: interning them
 * costs about what interning sequential ids does. */
static void test_chosen_ids(void)
{
	static const uint8_t guess[16] = { 0 };
	enum { N = 32768 };
	uint32_t *ids = malloc(N * sizeof(*ids)), n = 0, id = 0, got;
	struct fp_intern *t = new_table(), *seq = new_table();
	double t0, chosen, sequential;
	int collide = 0;

	CHECK(ids != NULL);
	if (!ids)
		return;
	for (uint32_t k = 0; n < N; k++)
		if ((guessed_hash(guess, k) & 0x1ffff) < 128)
			ids[n++] = k;
	/* The guess does collide: the test would catch an unkeyed hash. */
	for (uint32_t i = 1; i < 64; i++)
		collide += ((guessed_hash(guess, ids[i]) ^ guessed_hash(guess, ids[0])) & 0xff80) ==
			   0;
	CHECK_EQ_INT(collide, 63);
	t0 = now_s();
	for (uint32_t i = 0; i < N; i++)
		CHECK_EQ_INT(fp_intern_get(t, &ids[i], sizeof(ids[i]), &got, NULL), 0);
	chosen = now_s() - t0;
	t0 = now_s();
	for (uint32_t i = 0; i < N; i++)
		CHECK_EQ_INT(fp_intern_get(seq, &i, sizeof(i), &got, NULL), 0);
	sequential = now_s() - t0;
	fprintf(stderr, "  32768 chosen ids: %.1f ms, sequential: %.1f ms\n", chosen * 1e3,
		sequential * 1e3);
	CHECK(chosen < 10 * sequential + 0.005);
	CHECK_EQ_INT(fp_intern_find(t, &ids[N - 1], sizeof(id), &got), 0);
	CHECK_EQ_INT(got, N - 1);
	fp_intern_free(t);
	fp_intern_free(seq);
	free(ids);
}

int main(void)
{
	RUN(test_get_find_added);
	RUN(test_lengths);
	RUN(test_empty_key);
	RUN(test_alignment_and_bytes_identical);
	RUN(test_growth_200k);
	RUN(test_clear_then_reuse);
	RUN(test_bytes_grows);
	RUN(test_hash);
	RUN(test_hash_parts);
	RUN(test_chosen_ids);
	return CHECK_DONE();
}
