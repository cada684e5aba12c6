/* symtab_test.c: the symbol table builder, blob validation and look-ups. */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE /* memfd_create, memmem */
#endif
#include <errno.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "check.h"
#include "symtab.h"

/* Field offsets of the documented blob layout (symtab.c), for corrupting
 * specific fields on purpose. */
#define HDR_NSEGS 8
#define HDR_NSYMS 12
#define HDR_SEGOFF 16
#define HDR_SYMOFF 20
#define HDR_STROFF 24
#define HDR_STRLEN 28
#define HDR_NFILES 32
#define HDR_FILEOFF 36
#define HDR_NBLOCKS 40
#define HDR_BLKOFF 44
#define HDR_LDOFF 48
#define HDR_LDLEN 52
#define HDR_NRANGES 56
#define HDR_RNGOFF 60
#define HDR_NSCOPES 64
#define HDR_SCPOFF 68
#define HDR_SIZE 72
#define REC_SIZE 32
#define BLOCK_REC 12
#define RANGE_REC 20
#define SCOPE_REC 24
#define NONE FP_SYMTAB_NONE

struct sym_spec {
	uint64_t addr, size;
	const char *name, *sysname;
};

struct seg_spec {
	uint64_t off, vaddr, filesz;
};

static uint64_t rng_state = 0x9e3779b97f4a7c15ull;

static uint64_t rng(void)
{
	/* xorshift64*: fixed seed, so failures reproduce */
	rng_state ^= rng_state >> 12;
	rng_state ^= rng_state << 25;
	rng_state ^= rng_state >> 27;
	return rng_state * 0x2545f4914f6cdd1dull;
}

static double now_sec(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

static int build(const struct sym_spec *syms, size_t nsyms, const struct seg_spec *segs,
		 size_t nsegs, void **blob, size_t *len)
{
	struct fp_symtab_builder *b;
	int err;

	err = fp_symtab_builder_alloc(&b);
	if (err)
		return err;
	for (size_t i = 0; i < nsegs && !err; i++)
		err = fp_symtab_builder_add_segment(b, segs[i].off, segs[i].vaddr, segs[i].filesz);
	for (size_t i = 0; i < nsyms && !err; i++)
		err = fp_symtab_builder_add_symbol(b, syms[i].addr, syms[i].size, syms[i].name,
						   syms[i].sysname);
	if (!err)
		err = fp_symtab_builder_finish(b, blob, len);
	fp_symtab_builder_free(b);
	return err;
}

/* lookup_name: the name at addr, or NULL. */
static const char *lookup_name(const struct fp_symtab *t, uint64_t addr)
{
	struct fp_symbol s;

	return fp_symtab_lookup(t, addr, &s) == 0 ? s.sy_name : NULL;
}

static int name_is(const struct fp_symtab *t, uint64_t addr, const char *want)
{
	const char *got = lookup_name(t, addr);

	if (!want)
		return got == NULL;
	if (!got || strcmp(got, want) != 0) {
		fprintf(stderr, "  at 0x%llx: got %s, want %s\n", (unsigned long long)addr,
			got ? got : "(none)", want);
		return 0;
	}
	return 1;
}

static void test_empty(void)
{
	struct fp_symtab t;
	struct fp_symbol s;
	void *blob = NULL;
	size_t len = 0;
	uint64_t a = 0;

	CHECK_EQ_INT(build(NULL, 0, NULL, 0, &blob, &len), 0);
	CHECK_EQ_INT(fp_symtab_open(&t, blob, len), 0);
	CHECK_EQ_INT(t.st_nsymbols, 0);
	CHECK_EQ_INT(fp_symtab_lookup(&t, 0, &s), -ENOENT);
	CHECK_EQ_INT(fp_symtab_lookup(&t, 1234, &s), -ENOENT);
	/* No segments: offsets are addresses (kernel tables). */
	CHECK_EQ_INT(fp_symtab_addr(&t, 0x1234, &a), 0);
	CHECK_EQ_INT(a, 0x1234);
	free(blob);
}

static void test_basic(void)
{
	/* Deliberately out of order. */
	static const struct sym_spec syms[] = {
		{ 0x2000, 0x100, "ns::c()", "_ZN2ns1cEv" },
		{ 0x1010, 0x20, "b", NULL },
		{ 0x1000, 0x10, "a", "a" },
		{ 0xffffffffffffff00ull, 0x100, "top", NULL },
	};
	struct fp_symtab t;
	struct fp_symbol s;
	void *blob = NULL;
	size_t len = 0;

	CHECK_EQ_INT(build(syms, 4, NULL, 0, &blob, &len), 0);
	CHECK_EQ_INT(fp_symtab_open(&t, blob, len), 0);
	CHECK_EQ_INT(t.st_nsymbols, 4);
	CHECK(name_is(&t, 0, NULL));
	CHECK(name_is(&t, 0xfff, NULL));
	CHECK(name_is(&t, 0x1000, "a"));
	CHECK(name_is(&t, 0x100f, "a"));
	CHECK(name_is(&t, 0x1010, "b"));
	CHECK(name_is(&t, 0x102f, "b"));
	CHECK(name_is(&t, 0x1030, NULL)); /* gap between sized symbols */
	CHECK(name_is(&t, 0x1fff, NULL));
	CHECK(name_is(&t, 0x2000, "ns::c()"));
	CHECK(name_is(&t, 0x20ff, "ns::c()"));
	CHECK(name_is(&t, 0x2100, NULL));
	CHECK(name_is(&t, 0xfffffffffffffeffull, NULL));
	CHECK(name_is(&t, 0xffffffffffffff00ull, "top"));
	CHECK(name_is(&t, UINT64_MAX, "top"));

	CHECK_EQ_INT(fp_symtab_lookup(&t, 0x2080, &s), 0);
	CHECK(strcmp(s.sy_system_name, "_ZN2ns1cEv") == 0);
	CHECK_EQ_INT(s.sy_addr, 0x2000);
	CHECK_EQ_INT(s.sy_size, 0x100);
	/* A C name is its own system name, stored once. */
	CHECK_EQ_INT(fp_symtab_lookup(&t, 0x1000, &s), 0);
	CHECK(s.sy_name == s.sy_system_name);
	CHECK_EQ_INT(fp_symtab_lookup(&t, 0x1010, &s), 0);
	CHECK(s.sy_name == s.sy_system_name);
	free(blob);
}

static void test_zero_size(void)
{
	static const struct sym_spec syms[] = {
		{ 0x1000, 0, "z1", NULL }, /* up to the next symbol */
		{ 0x1800, 0x10, "sized", NULL },
		{ 0x10000, 0, "far", NULL },   /* next is far: capped */
		{ 0x100000, 0, "last", NULL }, /* last: capped */
	};
	struct fp_symtab t;
	struct fp_symbol s;
	void *blob = NULL;
	size_t len = 0;

	CHECK_EQ_INT(build(syms, 4, NULL, 0, &blob, &len), 0);
	CHECK_EQ_INT(fp_symtab_open(&t, blob, len), 0);
	CHECK(name_is(&t, 0x1000, "z1"));
	CHECK(name_is(&t, 0x17ff, "z1"));
	CHECK(name_is(&t, 0x1800, "sized"));
	CHECK_EQ_INT(fp_symtab_lookup(&t, 0x1234, &s), 0);
	CHECK_EQ_INT(s.sy_size, 0x800);
	CHECK(name_is(&t, 0x10000 + 0xffff, "far"));
	CHECK(name_is(&t, 0x10000 + 0x10000, NULL));
	CHECK(name_is(&t, 0x100000 + 0xffff, "last"));
	CHECK(name_is(&t, 0x100000 + 0x10000, NULL));
	free(blob);
}

static void test_duplicates(void)
{
	/* Same address: the first added wins (callers add the preferred
	 * global name first); a size-less winner takes its alias's size. */
	static const struct sym_spec syms[] = {
		{ 0x3000, 0x10, "other", NULL },
		{ 0x1000, 0, "malloc", NULL },
		{ 0x1000, 0x40, "__libc_malloc", NULL },
		{ 0x1000, 0x40, "__malloc_alias", NULL },
		{ 0x2000, 0x10, "x", NULL },
		{ 0x2000, 0x10, "x", NULL },
	};
	struct fp_symtab t;
	struct fp_symbol s;
	void *blob = NULL;
	size_t len = 0;

	CHECK_EQ_INT(build(syms, 6, NULL, 0, &blob, &len), 0);
	CHECK_EQ_INT(fp_symtab_open(&t, blob, len), 0);
	CHECK_EQ_INT(t.st_nsymbols, 3);
	CHECK_EQ_INT(fp_symtab_lookup(&t, 0x103f, &s), 0);
	CHECK(strcmp(s.sy_name, "malloc") == 0);
	CHECK_EQ_INT(s.sy_size, 0x40);
	CHECK(name_is(&t, 0x1040, NULL));
	CHECK(name_is(&t, 0x2000, "x"));
	/* Dropped aliases do not take space in the string table. */
	CHECK(memmem(blob, len, "__libc_malloc", 13) == NULL);
	free(blob);
}

static void test_overlap(void)
{
	static const struct sym_spec syms[] = {
		{ 0x1000, 0x1000, "outer", NULL },
		{ 0x1100, 0x100, "middle", NULL },
		{ 0x1180, 0x20, "inner", NULL },
		/* partial overlap: A [0x10000,0x10100) B [0x10080,0x10200) */
		{ 0x10000, 0x100, "A", NULL },
		{ 0x10080, 0x180, "B", NULL },
		{ 0x10150, 0x10, "C", NULL },
	};
	struct fp_symtab t;
	void *blob = NULL;
	size_t len = 0;

	CHECK_EQ_INT(build(syms, 6, NULL, 0, &blob, &len), 0);
	CHECK_EQ_INT(fp_symtab_open(&t, blob, len), 0);
	CHECK(name_is(&t, 0x1000, "outer"));
	CHECK(name_is(&t, 0x10ff, "outer"));
	CHECK(name_is(&t, 0x1100, "middle"));
	CHECK(name_is(&t, 0x1190, "inner"));
	CHECK(name_is(&t, 0x11a0, "middle"));
	CHECK(name_is(&t, 0x1200, "outer"));
	CHECK(name_is(&t, 0x1fff, "outer"));
	CHECK(name_is(&t, 0x2000, NULL));
	CHECK(name_is(&t, 0x10050, "A"));
	CHECK(name_is(&t, 0x100a0, "B"));
	CHECK(name_is(&t, 0x10155, "C"));
	CHECK(name_is(&t, 0x10170, "B"));
	CHECK(name_is(&t, 0x10200, NULL));
	free(blob);
}

static void test_segments(void)
{
	static const struct seg_spec segs[] = {
		{ 0x3000, 0x404000, 0x500 },
		{ 0, 0x400000, 0x1000 },
		{ 0x1000, 0x401000, 0x2000 },
		{ 0x1800, 0x900000, 0x100 }, /* overlaps the previous: dropped */
	};
	static const struct sym_spec syms[] = {
		{ 0x401500, 0x100, "f", NULL },
	};
	struct fp_symtab t;
	void *blob = NULL;
	size_t len = 0;
	uint64_t a = 0;

	CHECK_EQ_INT(build(syms, 1, segs, 4, &blob, &len), 0);
	CHECK_EQ_INT(fp_symtab_open(&t, blob, len), 0);
	CHECK_EQ_INT(t.st_nsegments, 3);
	CHECK_EQ_INT(fp_symtab_addr(&t, 0x10, &a), 0);
	CHECK_EQ_INT(a, 0x400010);
	CHECK_EQ_INT(fp_symtab_addr(&t, 0x1000, &a), 0);
	CHECK_EQ_INT(a, 0x401000);
	CHECK_EQ_INT(fp_symtab_addr(&t, 0x1800, &a), 0);
	CHECK_EQ_INT(a, 0x401800);
	CHECK_EQ_INT(fp_symtab_addr(&t, 0x2fff, &a), 0);
	CHECK_EQ_INT(a, 0x402fff);
	CHECK_EQ_INT(fp_symtab_addr(&t, 0x3000, &a), 0);
	CHECK_EQ_INT(a, 0x404000);
	a = 42;
	CHECK_EQ_INT(fp_symtab_addr(&t, 0x3500, &a), -ENOENT);
	CHECK_EQ_INT(fp_symtab_addr(&t, UINT64_MAX, &a), -ENOENT);
	CHECK_EQ_INT(a, 42); /* untouched on failure */

	/* offset -> address -> function, as the symbolizer does it */
	CHECK_EQ_INT(fp_symtab_addr(&t, 0x1580, &a), 0);
	CHECK(name_is(&t, a, "f"));
	free(blob);

	/* A segment at offset 0 with size 0 maps nothing: */
	{
		static const struct seg_spec none[] = { { 0, 0, 0 } };

		CHECK_EQ_INT(build(NULL, 0, none, 1, &blob, &len), 0);
		CHECK_EQ_INT(fp_symtab_open(&t, blob, len), 0);
		CHECK_EQ_INT(fp_symtab_addr(&t, 0, &a), -ENOENT);
		free(blob);
	}
}

static void test_builder_errors(void)
{
	struct fp_symtab_builder *b = NULL;
	void *blob = NULL;
	size_t len = 0;

	CHECK_EQ_INT(fp_symtab_builder_alloc(&b), 0);
	CHECK_EQ_INT(fp_symtab_builder_add_symbol(b, 1, 1, "", NULL), -EINVAL);
	CHECK_EQ_INT(fp_symtab_builder_add_symbol(b, 1, 1, NULL, NULL), -EINVAL);
	CHECK_EQ_INT(fp_symtab_builder_add_symbol(b, 1, 1, "ok", ""), 0);
	CHECK_EQ_INT(fp_symtab_builder_finish(b, &blob, &len), 0);
	CHECK_EQ_INT(fp_symtab_builder_add_symbol(b, 2, 1, "late", NULL), -EINVAL);
	CHECK_EQ_INT(fp_symtab_builder_add_segment(b, 0, 0, 1), -EINVAL);
	fp_symtab_builder_free(b);
	fp_symtab_builder_free(NULL);
	free(blob);
}

static void test_string_dedup(void)
{
	struct fp_symtab_builder *b = NULL;
	struct fp_symtab t;
	struct fp_symbol s1, s2;
	void *blob = NULL;
	size_t len = 0;
	const char *longname = "a_rather_long_function_name_that_repeats_often";

	CHECK_EQ_INT(fp_symtab_builder_alloc(&b), 0);
	for (uint64_t i = 0; i < 1000; i++)
		CHECK_EQ_INT(fp_symtab_builder_add_symbol(b, 0x1000 + i * 16, 16, longname, NULL),
			     0);
	CHECK_EQ_INT(fp_symtab_builder_finish(b, &blob, &len), 0);
	fp_symtab_builder_free(b);
	/* header + 1000 records + the name once */
	CHECK_EQ_INT(len, HDR_SIZE + 1000 * REC_SIZE + strlen(longname) + 1);
	CHECK_EQ_INT(fp_symtab_open(&t, blob, len), 0);
	CHECK_EQ_INT(fp_symtab_lookup(&t, 0x1000, &s1), 0);
	CHECK_EQ_INT(fp_symtab_lookup(&t, 0x1000 + 999 * 16 + 15, &s2), 0);
	CHECK(s1.sy_name == s2.sy_name);
	CHECK(s1.sy_addr == 0x1000 && s2.sy_addr == 0x1000 + 999 * 16);
	free(blob);
}

/* A reference for the innermost rule: among the settled symbols (first
 * added per address, sizes extended), the latest start that contains addr. */
struct ref_sym {
	uint64_t addr, size;
	int name;
};

static int ref_cmp(const void *a, const void *b)
{
	const struct ref_sym *x = a, *y = b;

	if (x->addr != y->addr)
		return x->addr < y->addr ? -1 : 1;
	return x->name - y->name; /* name = order of addition */
}

static void test_random_against_reference(void)
{
	enum { N = 400, ROUNDS = 30 };
	static struct ref_sym ref[N];
	static char names[N][16];

	for (int round = 0; round < ROUNDS; round++) {
		struct fp_symtab_builder *b = NULL;
		struct fp_symtab t;
		void *blob = NULL;
		size_t len = 0, n = 0;

		CHECK_EQ_INT(fp_symtab_builder_alloc(&b), 0);
		for (int i = 0; i < N; i++) {
			uint64_t r = rng();

			ref[i].addr = 0x10000 + (r % 20000) * 4;
			ref[i].size = (r >> 32) % 5 == 0 ? 0 : (r >> 40) % 300;
			ref[i].name = i;
			snprintf(names[i], sizeof(names[i]), "f%d", i);
			CHECK_EQ_INT(fp_symtab_builder_add_symbol(b, ref[i].addr, ref[i].size,
								  names[i], NULL),
				     0);
		}
		CHECK_EQ_INT(fp_symtab_builder_finish(b, &blob, &len), 0);
		fp_symtab_builder_free(b);
		CHECK_EQ_INT(fp_symtab_open(&t, blob, len), 0);

		qsort(ref, N, sizeof(ref[0]), ref_cmp);
		for (int i = 0; i < N; i++) {
			if (n && ref[n - 1].addr == ref[i].addr) {
				if (!ref[n - 1].size)
					ref[n - 1].size = ref[i].size;
				continue;
			}
			ref[n++] = ref[i];
		}
		for (size_t i = 0; i < n; i++) {
			if (ref[i].size)
				continue;
			ref[i].size = i + 1 < n ? ref[i + 1].addr - ref[i].addr : 65536;
			if (ref[i].size > 65536)
				ref[i].size = 65536;
		}
		for (uint64_t a = 0xff00; a < 0x10000 + 20000 * 4 + 70000; a += 3) {
			const char *want = NULL;

			for (size_t i = n; i-- > 0;) {
				if (ref[i].addr <= a && a - ref[i].addr < ref[i].size) {
					want = names[ref[i].name];
					break;
				}
			}
			if (!name_is(&t, a, want)) {
				CHECK(0);
				break;
			}
		}
		free(blob);
	}
}

/* Open a copy of exactly len bytes, so that ASan sees any read past it,
 * then exercise every entry point when it opens. */
static int open_and_poke(const uint8_t *data, size_t len)
{
	uint8_t *copy = malloc(len ? len : 1);
	struct fp_symtab t;
	struct fp_symbol s;
	uint64_t a;
	int err;

	if (!copy)
		return -ENOMEM;
	memcpy(copy, data, len);
	err = fp_symtab_open(&t, copy, len);
	if (err == 0) {
		for (uint32_t i = 0; i < 64; i++) {
			uint64_t probe = i < 32 ? i * 0x40 + 0x1000 : rng();

			if (fp_symtab_lookup(&t, probe, &s) == 0) {
				/* names must lie inside the blob, terminated */
				CHECK((const uint8_t *)s.sy_name >= copy &&
				      (const uint8_t *)s.sy_name < copy + len);
				CHECK(strlen(s.sy_name) <
				      len - (size_t)((const uint8_t *)s.sy_name - copy));
				CHECK(strlen(s.sy_system_name) <
				      len - (size_t)((const uint8_t *)s.sy_system_name - copy));
				CHECK(s.sy_addr <= probe);
			}
			(void)fp_symtab_addr(&t, probe, &a);
			{
				struct fp_symframe fr[8];
				int n = fp_symtab_lookup_frames(&t, probe, fr, 8);

				CHECK(n >= 0 && n <= 8);
				for (int k = 0; k < n; k++) {
					const char *str[3] = { fr[k].sf_function,
							       fr[k].sf_system_name,
							       fr[k].sf_file };

					for (int m = 0; m < 3; m++) {
						if (!str[m])
							continue;
						CHECK((const uint8_t *)str[m] >= copy &&
						      (const uint8_t *)str[m] < copy + len);
						CHECK(strlen(str[m]) <
						      len - (size_t)((const uint8_t *)str[m] -
								     copy));
					}
				}
			}
		}
	}
	free(copy);
	return err;
}

/* The sample: segments, symbols, two files, a line table of two
 * sequences and an inline chain two deep. */
static int make_sample(void **blob, size_t *len)
{
	static const struct seg_spec segs[] = {
		{ 0, 0, 0x1000 },
		{ 0x1000, 0x1000, 0x800 },
	};
	static const struct sym_spec syms[] = {
		{ 0x1000, 0x100, "main", NULL }, { 0x1040, 0x20, "inner", NULL },
		{ 0x1100, 0, "zero", NULL },     { 0x1200, 0x40, "ns::f(int)", "_ZN2ns1fEi" },
		{ 0x1240, 0x40, "g", NULL },     { 0x1280, 0x80, "ns::f(int)", "_ZN2ns1fEi" },
	};
	struct fp_symtab_builder *b;
	uint32_t fa, fb, s0, s1, s2;
	int err;

	err = fp_symtab_builder_alloc(&b);
	if (err)
		return err;
	for (size_t i = 0; i < 2 && !err; i++)
		err = fp_symtab_builder_add_segment(b, segs[i].off, segs[i].vaddr, segs[i].filesz);
	for (size_t i = 0; i < 6 && !err; i++)
		err = fp_symtab_builder_add_symbol(b, syms[i].addr, syms[i].size, syms[i].name,
						   syms[i].sysname);
	if (!err)
		err = fp_symtab_builder_add_file(b, "/src/a.c", &fa);
	if (!err)
		err = fp_symtab_builder_add_file(b, "/src/inc.h", &fb);
	if (!err) {
		const struct fp_line_row seq1[] = {
			{ 0x1000, fa, 10, 1 }, { 0x1008, fa, 11, 5 }, { 0x1010, fb, 3, 2 },
			{ 0x1018, fb, 4, 2 },  { 0x1020, fa, 12, 0 }, { 0x1030, fa, 13, 7 },
			{ 0x1040, fa, 20, 1 }, { 0x1050, fa, 21, 1 }, { 0x1060, fa, 22, 1 },
			{ 0x1070, fa, 23, 1 }, { 0x1080, fa, 24, 1 }, { 0x1090, fa, 25, 1 },
			{ 0x10a0, fa, 26, 1 }, { 0x10b0, fa, 27, 1 }, { 0x10c0, fa, 28, 1 },
			{ 0x10d0, fa, 29, 1 }, { 0x10e0, fa, 30, 1 }, { 0x10f0, fa, 31, 1 },
			{ 0x1100, 0, 0, 0 },
		};
		const struct fp_line_row seq2[] = {
			{ 0x1200, fb, 100, 3 },
			{ 0x1240, fa, 50, 4 },
			{ 0x1300, 0, 0, 0 },
		};

		err = fp_symtab_builder_add_sequence(b, seq1, sizeof(seq1) / sizeof(seq1[0]));
		if (!err)
			err = fp_symtab_builder_add_sequence(b, seq2, 3);
	}
	if (!err)
		err = fp_symtab_builder_add_scope(b, NONE, "main", NULL, NONE, 0, 0, &s0);
	if (!err)
		err = fp_symtab_builder_add_scope(b, s0, "ns::inl(int)", "_ZN2ns3inlEi", fa, 11, 5,
						  &s1);
	if (!err)
		err = fp_symtab_builder_add_scope(b, s1, "leaf", NULL, fb, 3, 9, &s2);
	if (!err)
		err = fp_symtab_builder_add_range(b, s0, 0x1000, 0x1100);
	if (!err)
		err = fp_symtab_builder_add_range(b, s1, 0x1008, 0x1020);
	if (!err)
		err = fp_symtab_builder_add_range(b, s2, 0x1010, 0x1018);
	if (!err)
		err = fp_symtab_builder_finish(b, blob, len);
	fp_symtab_builder_free(b);
	return err;
}

static void test_corrupt_truncations(void)
{
	void *blob = NULL;
	size_t len = 0;

	CHECK_EQ_INT(make_sample(&blob, &len), 0);
	CHECK_EQ_INT(open_and_poke(blob, len), 0);
	/* Every proper prefix (and one byte too many) is rejected. */
	for (size_t l = 0; l < len; l++)
		CHECK_EQ_INT(open_and_poke(blob, l), -EINVAL);
	{
		uint8_t *longer = calloc(1, len + 1);

		memcpy(longer, blob, len);
		CHECK_EQ_INT(open_and_poke(longer, len + 1), -EINVAL);
		free(longer);
	}
	CHECK_EQ_INT(fp_symtab_open(&(struct fp_symtab){ 0 }, NULL, 0), -EINVAL);
	free(blob);
}

static void test_corrupt_flips(void)
{
	static const uint8_t patterns[] = { 0x01, 0x02, 0x10, 0x80, 0xff };
	uint8_t *copy;
	void *blob = NULL;
	size_t len = 0;
	int opened = 0, rejected = 0;

	CHECK_EQ_INT(make_sample(&blob, &len), 0);
	copy = malloc(len);
	/* Every byte, several flips each. */
	for (size_t i = 0; i < len; i++) {
		for (size_t p = 0; p < sizeof(patterns); p++) {
			int err;

			memcpy(copy, blob, len);
			copy[i] ^= patterns[p];
			err = open_and_poke(copy, len);
			CHECK(err == 0 || err == -EINVAL);
			err == 0 ? opened++ : rejected++;
		}
	}
	/* Random multi-byte damage, including random truncation. */
	for (int iter = 0; iter < 200000; iter++) {
		size_t l = len;
		int nflips = 1 + (int)(rng() % 4), err;

		memcpy(copy, blob, len);
		for (int f = 0; f < nflips; f++)
			copy[rng() % len] ^= (uint8_t)(1 + rng() % 255);
		if (rng() % 8 == 0)
			l = rng() % len;
		err = open_and_poke(copy, l);
		CHECK(err == 0 || err == -EINVAL);
		err == 0 ? opened++ : rejected++;
	}
	printf("  corrupted blobs: %d opened (and looked up safely), %d rejected\n", opened,
	       rejected);
	free(copy);
	free(blob);
}

static void put32(uint8_t *p, uint32_t v)
{
	for (int i = 0; i < 4; i++)
		p[i] = (uint8_t)(v >> (8 * i));
}

static uint32_t get32(const uint8_t *p)
{
	return (uint32_t)p[0] | (uint32_t)p[1] << 8 | (uint32_t)p[2] << 16 | (uint32_t)p[3] << 24;
}

static void test_corrupt_fields(void)
{
	uint8_t *c;
	void *blob = NULL;
	size_t len = 0;
	uint32_t symoff, stroff, strlen_;

	CHECK_EQ_INT(make_sample(&blob, &len), 0);
	c = malloc(len);
	symoff = get32((uint8_t *)blob + HDR_SYMOFF);
	stroff = get32((uint8_t *)blob + HDR_STROFF);
	strlen_ = get32((uint8_t *)blob + HDR_STRLEN);
	CHECK_EQ_INT(get32((uint8_t *)blob + HDR_NSYMS), 6);
	CHECK_EQ_INT(get32((uint8_t *)blob + HDR_SEGOFF), HDR_SIZE);

#define MUTATE(stmt) \
	do { \
		memcpy(c, blob, len); \
		stmt; \
		CHECK_EQ_INT(open_and_poke(c, len), -EINVAL); \
	} while (0)

	MUTATE(c[0] = 'X');                          /* magic */
	MUTATE(put32(c + 4, 1));                     /* version 1 */
	MUTATE(put32(c + 4, 2));                     /* version 2: stale */
	MUTATE(put32(c + 4, FP_SYMTAB_VERSION + 1)); /* a later one */
	MUTATE(put32(c + HDR_NSYMS, 7));             /* count too big */
	MUTATE(put32(c + HDR_NSYMS, UINT32_MAX));
	MUTATE(put32(c + HDR_NSEGS, 3));                      /* segments run into symbols */
	MUTATE(put32(c + HDR_SEGOFF, 8));                     /* inside the header */
	MUTATE(put32(c + HDR_SYMOFF, symoff - 1));            /* overlaps segments */
	MUTATE(put32(c + HDR_STROFF, stroff - 1));            /* overlaps scopes */
	MUTATE(put32(c + HDR_STRLEN, strlen_ + 1));           /* past the end */
	MUTATE(c[len - 1] = 'x');                             /* table not terminated */
	MUTATE(put32(c + symoff + 12, strlen_));              /* name offset out of range */
	MUTATE(put32(c + symoff + 16, UINT32_MAX));           /* system name out of range */
	MUTATE(put32(c + symoff + 12, 1));                    /* points into a string */
	MUTATE(put32(c + symoff + 20, 0));                    /* parent is itself */
	MUTATE(put32(c + symoff + REC_SIZE + 20, 1));         /* parent not earlier */
	MUTATE(memcpy(c + symoff, c + symoff + REC_SIZE, 8)); /* duplicate address */
	MUTATE(c[symoff + 7] = 0xff);                         /* unsorted */
	MUTATE(put32(c + HDR_SIZE + 24, 0x800));              /* segments overlap */
	MUTATE(put32(c + symoff + 24, strlen_));              /* frame name out of range */
	MUTATE(put32(c + symoff + 28, 1));                    /* frame system name */
	{
		uint32_t fileoff = get32(c + HDR_FILEOFF), blkoff = get32(c + HDR_BLKOFF);
		uint32_t rngoff = get32(c + HDR_RNGOFF), scpoff = get32(c + HDR_SCPOFF);
		uint32_t nblocks = get32(c + HDR_NBLOCKS), ldlen = get32(c + HDR_LDLEN);

		CHECK_EQ_INT(get32(c + HDR_NFILES), 2);
		CHECK(nblocks >= 2);
		CHECK_EQ_INT(get32(c + HDR_NRANGES), 3);
		CHECK_EQ_INT(get32(c + HDR_NSCOPES), 3);
		MUTATE(put32(c + HDR_NFILES, 3));                 /* files run into blocks */
		MUTATE(put32(c + HDR_FILEOFF, fileoff - 1));      /* overlaps symbols */
		MUTATE(put32(c + fileoff, strlen_));              /* file name out of range */
		MUTATE(put32(c + fileoff + 4, 1));                /* into a string */
		MUTATE(put32(c + HDR_NBLOCKS, nblocks + 1));      /* blocks run into rows */
		MUTATE(put32(c + HDR_LDLEN, ldlen + 1));          /* rows run into ranges */
		MUTATE(put32(c + HDR_LDLEN, 0));                  /* blocks without rows */
		MUTATE(put32(c + blkoff + 8, 1));                 /* first block not at 0 */
		MUTATE(put32(c + blkoff + BLOCK_REC + 8, 0));     /* block offsets not increasing */
		MUTATE(put32(c + blkoff + BLOCK_REC + 8, ldlen)); /* block past the rows */
		MUTATE(memcpy(c + blkoff + BLOCK_REC, c + blkoff, 8)); /* blocks unsorted */
		MUTATE(put32(c + HDR_NRANGES, 4));                     /* ranges run into scopes */
		MUTATE(put32(c + rngoff + 12, 0));                     /* enclosing is itself */
		MUTATE(put32(c + rngoff + RANGE_REC + 12, 1));         /* enclosing not earlier */
		MUTATE(put32(c + rngoff + 16, 3));                     /* no such scope */
		MUTATE(c[rngoff + RANGE_REC + 7] = 0xff);              /* ranges unsorted */
		MUTATE(put32(c + HDR_NSCOPES, UINT32_MAX));
		MUTATE(put32(c + scpoff, strlen_));            /* scope name out of range */
		MUTATE(put32(c + scpoff + SCOPE_REC + 4, 2));  /* system name into a string */
		MUTATE(put32(c + scpoff + 8, 0));              /* parent is itself */
		MUTATE(put32(c + scpoff + SCOPE_REC + 8, 2));  /* parent not earlier */
		MUTATE(put32(c + scpoff + SCOPE_REC + 12, 2)); /* no such call file */
	}
#undef MUTATE
	free(c);
	free(blob);
}

static int frame_is(const struct fp_symframe *f, const char *fn, const char *file, uint32_t line,
		    uint32_t col, int inlined)
{
	int ok = (fn ? f->sf_function && !strcmp(f->sf_function, fn) : !f->sf_function) &&
		 (file ? f->sf_file && !strcmp(f->sf_file, file) : !f->sf_file) &&
		 f->sf_line == line && f->sf_column == col && f->sf_inlined == inlined;

	if (!ok)
		fprintf(stderr, "  frame %s %s:%u:%u%s, want %s %s:%u:%u%s\n",
			f->sf_function ? f->sf_function : "(null)",
			f->sf_file ? f->sf_file : "(null)", f->sf_line, f->sf_column,
			f->sf_inlined ? " inlined" : "", fn ? fn : "(null)", file ? file : "(null)",
			line, col, inlined ? " inlined" : "");
	return ok;
}

/* The sample's frames: chains, call sites, the symbol's name on the
 * outermost frame, gaps. */
static void test_frames(void)
{
	struct fp_symframe fr[8];
	struct fp_symtab t;
	void *blob = NULL;
	size_t len = 0;

	CHECK_EQ_INT(make_sample(&blob, &len), 0);
	CHECK_EQ_INT(fp_symtab_open(&t, blob, len), 0);
	/* outside any scope: the symbol, with the line */
	CHECK_EQ_INT(fp_symtab_lookup_frames(&t, 0x1240, fr, 8), 1);
	CHECK(frame_is(&fr[0], "g", "/src/a.c", 50, 4, 0));
	CHECK(strcmp(fr[0].sf_system_name, "g") == 0);
	CHECK_EQ_INT(fp_symtab_lookup_frames(&t, 0x1200, fr, 8), 1);
	CHECK(frame_is(&fr[0], "ns::f(int)", "/src/inc.h", 100, 3, 0));
	CHECK(strcmp(fr[0].sf_system_name, "_ZN2ns1fEi") == 0);
	/* the function, not inlined into */
	CHECK_EQ_INT(fp_symtab_lookup_frames(&t, 0x1004, fr, 8), 1);
	CHECK(frame_is(&fr[0], "main", "/src/a.c", 10, 1, 0));
	/* one level: the callee at the address' line, main at the call */
	CHECK_EQ_INT(fp_symtab_lookup_frames(&t, 0x100c, fr, 8), 2);
	CHECK(frame_is(&fr[0], "ns::inl(int)", "/src/a.c", 11, 5, 1));
	CHECK(strcmp(fr[0].sf_system_name, "_ZN2ns3inlEi") == 0);
	CHECK(frame_is(&fr[1], "main", "/src/a.c", 11, 5, 0));
	/* two levels */
	CHECK_EQ_INT(fp_symtab_lookup_frames(&t, 0x1017, fr, 8), 3);
	CHECK(frame_is(&fr[0], "leaf", "/src/inc.h", 3, 2, 1));
	CHECK(frame_is(&fr[1], "ns::inl(int)", "/src/inc.h", 3, 9, 1));
	CHECK(frame_is(&fr[2], "main", "/src/a.c", 11, 5, 0));
	/* at most max, innermost first */
	CHECK_EQ_INT(fp_symtab_lookup_frames(&t, 0x1017, fr, 2), 2);
	CHECK(frame_is(&fr[1], "ns::inl(int)", "/src/inc.h", 3, 9, 1));
	CHECK_EQ_INT(fp_symtab_lookup_frames(&t, 0x1017, fr, 0), 0);
	/* back in ns::inl after the leaf's range, then in main */
	CHECK_EQ_INT(fp_symtab_lookup_frames(&t, 0x1018, fr, 8), 2);
	CHECK(frame_is(&fr[0], "ns::inl(int)", "/src/inc.h", 4, 2, 1));
	CHECK_EQ_INT(fp_symtab_lookup_frames(&t, 0x1020, fr, 8), 1);
	CHECK(frame_is(&fr[0], "main", "/src/a.c", 12, 0, 0));
	/* the symbol "inner" inside main: its name on the outermost frame */
	CHECK_EQ_INT(fp_symtab_lookup_frames(&t, 0x1045, fr, 8), 1);
	CHECK(frame_is(&fr[0], "inner", "/src/a.c", 20, 1, 0));
	/* rows in later blocks, the end of a sequence */
	CHECK_EQ_INT(fp_symtab_lookup_frames(&t, 0x10ff, fr, 8), 1);
	CHECK(frame_is(&fr[0], "main", "/src/a.c", 31, 1, 0));
	CHECK_EQ_INT(fp_symtab_lookup_frames(&t, 0x1100, fr, 8), 1);
	CHECK(frame_is(&fr[0], "zero", NULL, 0, 0, 0));
	/* nothing known */
	CHECK_EQ_INT(fp_symtab_lookup_frames(&t, 0x10, fr, 8), 0);
	CHECK_EQ_INT(fp_symtab_lookup_frames(&t, 0x1300 + 0x10000, fr, 8), 0);
	free(blob);
}

/* Lines without symbols, scopes without names, sequences overlapping,
 * several rows at one address, names for frames apart from the symbol's
 * preferred one. */
static void test_lines_and_scopes(void)
{
	struct fp_symtab_builder *b = NULL;
	struct fp_symframe fr[8];
	struct fp_symtab t;
	struct fp_symbol s;
	uint32_t f1, f2, again, sc, sc2;
	void *blob = NULL;
	size_t len = 0;
	const struct fp_line_row a[] = {
		{ 0x100, 0, 1, 0 }, { 0x100, 0, 2, 0 }, /* the last at 0x100 counts */
		{ 0x110, 0, 3, 0 }, { 0x108, 0, 9, 9 }, /* going back: dropped */
		{ 0x120, 0, 0, 0 },
	};
	const struct fp_line_row b2[] = {
		{ 0x118, 1, 40, 0 }, /* overlaps the end of a: clipped to 0x120 */
		{ 0x130, 1, 41, 0 },
		{ 0x140, 0, 0, 0 },
	};
	const struct fp_line_row bad[] = { { 0x200, 7, 1, 1 }, { 0x210, 0, 0, 0 } };

	CHECK_EQ_INT(fp_symtab_builder_alloc(&b), 0);
	CHECK_EQ_INT(fp_symtab_builder_add_file(b, "x.c", &f1), 0);
	CHECK_EQ_INT(fp_symtab_builder_add_file(b, "dir/y.c", &f2), 0);
	CHECK_EQ_INT(fp_symtab_builder_add_file(b, "x.c", &again), 0);
	CHECK_EQ_INT(again, f1);
	CHECK_EQ_INT(fp_symtab_builder_add_file(b, "", &again), -EINVAL);
	CHECK_EQ_INT(f1, 0);
	CHECK_EQ_INT(f2, 1);
	CHECK_EQ_INT(fp_symtab_builder_add_sequence(b, a, 5), 0);
	CHECK_EQ_INT(fp_symtab_builder_add_sequence(b, b2, 3), 0);
	CHECK_EQ_INT(fp_symtab_builder_add_sequence(b, bad, 2), -EINVAL); /* no file 7 */
	CHECK_EQ_INT(fp_symtab_builder_add_sequence(b, a, 1), -EINVAL);
	CHECK_EQ_INT(fp_symtab_builder_add_scope(b, NONE, NULL, NULL, NONE, 0, 0, &sc), 0);
	CHECK_EQ_INT(fp_symtab_builder_add_scope(b, 5, "x", NULL, NONE, 0, 0, &sc2), -EINVAL);
	CHECK_EQ_INT(fp_symtab_builder_add_scope(b, sc, "x", NULL, 9, 0, 0, &sc2), -EINVAL);
	CHECK_EQ_INT(fp_symtab_builder_add_scope(b, sc, NULL, "_Z1xv", f2, 7, 8, &sc2), 0);
	CHECK_EQ_INT(fp_symtab_builder_add_range(b, sc, 0x100, 0x140), 0);
	CHECK_EQ_INT(fp_symtab_builder_add_range(b, sc2, 0x130, 0x130), 0); /* empty */
	CHECK_EQ_INT(fp_symtab_builder_add_range(b, sc2, 0x130, 0x138), 0);
	CHECK_EQ_INT(fp_symtab_builder_add_range(b, 2, 0x130, 0x138), -EINVAL);
	CHECK_EQ_INT(fp_symtab_builder_add_symbol_ex(b, 0x400, 0x10, "pretty", "pretty", "ugly@V1",
						     NULL),
		     0);
	CHECK_EQ_INT(fp_symtab_builder_finish(b, &blob, &len), 0);
	CHECK_EQ_INT(fp_symtab_builder_add_file(b, "late.c", &again), -EINVAL);
	CHECK_EQ_INT(fp_symtab_builder_add_scope(b, NONE, "l", NULL, NONE, 0, 0, &again), -EINVAL);
	fp_symtab_builder_free(b);
	CHECK_EQ_INT(fp_symtab_open(&t, blob, len), 0);

	CHECK_EQ_INT(fp_symtab_lookup_frames(&t, 0xff, fr, 8), 0);
	CHECK_EQ_INT(fp_symtab_lookup_frames(&t, 0x100, fr, 8), 1);
	CHECK(frame_is(&fr[0], NULL, "x.c", 2, 0, 0));
	CHECK_EQ_INT(fp_symtab_lookup_frames(&t, 0x10f, fr, 8), 1);
	CHECK(frame_is(&fr[0], NULL, "x.c", 2, 0, 0));
	CHECK_EQ_INT(fp_symtab_lookup_frames(&t, 0x11f, fr, 8), 1);
	CHECK(frame_is(&fr[0], NULL, "x.c", 3, 0, 0));
	CHECK_EQ_INT(fp_symtab_lookup_frames(&t, 0x120, fr, 8), 1);
	CHECK(frame_is(&fr[0], NULL, "dir/y.c", 40, 0, 0));
	/* unnamed inlined scope: its system name only; the call site */
	CHECK_EQ_INT(fp_symtab_lookup_frames(&t, 0x134, fr, 8), 2);
	CHECK(frame_is(&fr[0], NULL, "dir/y.c", 41, 0, 1));
	CHECK(strcmp(fr[0].sf_system_name, "_Z1xv") == 0);
	CHECK(frame_is(&fr[1], NULL, "dir/y.c", 7, 8, 0));
	CHECK(fr[1].sf_system_name == NULL);
	CHECK_EQ_INT(fp_symtab_lookup_frames(&t, 0x140, fr, 8), 0);
	/* the frame name against the preferred one */
	CHECK_EQ_INT(fp_symtab_lookup(&t, 0x404, &s), 0);
	CHECK(strcmp(s.sy_name, "pretty") == 0);
	CHECK_EQ_INT(fp_symtab_lookup_frames(&t, 0x404, fr, 8), 1);
	CHECK(frame_is(&fr[0], "ugly@V1", NULL, 0, 0, 0));
	CHECK(strcmp(fr[0].sf_system_name, "ugly@V1") == 0);
	free(blob);
}

/* Random line tables against a brute-force reference: of the sequences
 * covering an address, the one starting first (then added first); in it
 * the last row at or before the address. */
static void test_lines_random(void)
{
	enum { ROUNDS = 12, NSEQ = 40, MAXROWS = 60, LO = 0xf00, HI = 0x1a000 };
	static struct fp_line_row seqs[NSEQ][MAXROWS];
	static int nrows[NSEQ];

	for (int round = 0; round < ROUNDS; round++) {
		struct fp_symtab_builder *b = NULL;
		struct fp_symframe fr[2];
		struct fp_symtab t;
		uint32_t files[5];
		void *blob = NULL;
		size_t len = 0;
		int bad = 0;

		CHECK_EQ_INT(fp_symtab_builder_alloc(&b), 0);
		for (int i = 0; i < 5; i++) {
			char name[16];

			snprintf(name, sizeof(name), "f%d.c", i);
			CHECK_EQ_INT(fp_symtab_builder_add_file(b, name, &files[i]), 0);
		}
		for (int q = 0; q < NSEQ; q++) {
			struct fp_line_row *rows = seqs[q];
			int n = 2 + (int)(rng() % (MAXROWS - 2)), m = 0;
			uint64_t addr = 0x1000 + rng() % 0x18000;

			for (int k = 0; k < n; k++) {
				rows[k] = (struct fp_line_row){
					.lr_addr = addr,
					.lr_file = files[rng() % 5],
					.lr_line = (uint32_t)(rng() % 3 ? 1 + rng() % 50 : rng()),
					.lr_column = (uint32_t)(rng() % 100),
				};
				addr += rng() % 4 ? rng() % 40 : 0;
			}
			CHECK_EQ_INT(fp_symtab_builder_add_sequence(b, rows, (size_t)n), 0);
			/* the reference keeps the last row at each address */
			for (int k = 0; k < n; k++) {
				if (m && seqs[q][m - 1].lr_addr == rows[k].lr_addr)
					m--;
				seqs[q][m++] = rows[k];
			}
			nrows[q] = m;
		}
		CHECK_EQ_INT(fp_symtab_builder_finish(b, &blob, &len), 0);
		fp_symtab_builder_free(b);
		CHECK_EQ_INT(fp_symtab_open(&t, blob, len), 0);
		for (uint64_t a = LO; a < HI && !bad; a++) {
			const struct fp_line_row *want = NULL;
			int owner = -1, n;

			for (int q = 0; q < NSEQ; q++) {
				if (nrows[q] < 2 || seqs[q][0].lr_addr > a ||
				    seqs[q][nrows[q] - 1].lr_addr <= a)
					continue;
				if (owner < 0 || seqs[q][0].lr_addr < seqs[owner][0].lr_addr)
					owner = q;
			}
			if (owner >= 0)
				for (int k = 0; k + 1 < nrows[owner]; k++)
					if (seqs[owner][k].lr_addr <= a)
						want = &seqs[owner][k];
			n = fp_symtab_lookup_frames(&t, a, fr, 2);
			if (!want)
				bad = n != 0;
			else
				bad = n != 1 || !fr[0].sf_file ||
				      strcmp(fr[0].sf_file,
					     t.st_strings +
						     get32(t.st_files + 4 * want->lr_file)) ||
				      fr[0].sf_line != want->lr_line ||
				      fr[0].sf_column != want->lr_column;
			if (bad)
				fprintf(stderr,
					"  round %d: 0x%llx: %d frames (line %u), want line %u\n",
					round, (unsigned long long)a, n, n ? fr[0].sf_line : 0,
					want ? want->lr_line : 0);
		}
		CHECK(!bad);
		free(blob);
	}
}

static void test_lookup_speed(void)
{
	enum { NSYMS = 6000, NPROBES = 1 << 20, REPS = 8 };
	struct fp_symtab_builder *b = NULL;
	struct fp_symtab t;
	struct fp_symbol s;
	uint64_t *probes, addr = 0x26000, found = 0;
	void *blob = NULL;
	size_t len = 0;
	char name[32];
	double t0, dt;

	/* libc-like: ~6000 functions of a few hundred bytes with gaps. */
	CHECK_EQ_INT(fp_symtab_builder_alloc(&b), 0);
	for (int i = 0; i < NSYMS; i++) {
		uint64_t size = 16 + rng() % 600;

		snprintf(name, sizeof(name), "function_%d", i);
		CHECK_EQ_INT(fp_symtab_builder_add_symbol(b, addr, size, name, NULL), 0);
		addr += size + rng() % 32;
	}
	CHECK_EQ_INT(fp_symtab_builder_finish(b, &blob, &len), 0);
	fp_symtab_builder_free(b);
	CHECK_EQ_INT(fp_symtab_open(&t, blob, len), 0);

	probes = malloc(NPROBES * sizeof(*probes));
	for (int i = 0; i < NPROBES; i++)
		probes[i] = 0x26000 + rng() % (addr - 0x26000);
	t0 = now_sec();
	for (int r = 0; r < REPS; r++)
		for (int i = 0; i < NPROBES; i++)
			found += fp_symtab_lookup(&t, probes[i], &s) == 0;
	dt = now_sec() - t0;
	printf("  synthetic table: %d symbols, %zu bytes; %.1f M lookups/s (%.0f%% hits)\n", NSYMS,
	       len, (double)NPROBES * REPS / dt / 1e6,
	       100.0 * (double)found / ((double)NPROBES * REPS));
	CHECK(found > 0);
	free(probes);
	free(blob);
}

int main(void)
{
	RUN(test_empty);
	RUN(test_basic);
	RUN(test_zero_size);
	RUN(test_duplicates);
	RUN(test_overlap);
	RUN(test_segments);
	RUN(test_builder_errors);
	RUN(test_string_dedup);
	RUN(test_random_against_reference);
	RUN(test_corrupt_truncations);
	RUN(test_corrupt_flips);
	RUN(test_corrupt_fields);
	RUN(test_frames);
	RUN(test_lines_and_scopes);
	RUN(test_lines_random);
	RUN(test_lookup_speed);
	return CHECK_DONE();
}
