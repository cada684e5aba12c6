/* profile_test.c: interning, merging, frame labels and growth of the
 * profile model (symbolizer/profile/profile.c), and the index set it interns with
 * (symbolizer/profile/indexset.c). */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "check.h"
#include "indexset.h"
#include "profile.h"

static const struct fp_build_id libc_id = { 4, { 0xde, 0xad, 0xbe, 0xef } };
static const struct fp_build_id other_id = { 4, { 0xde, 0xad, 0xbe, 0xee } };

static struct fp_profile *new_profile(void)
{
	struct fp_profile *p = NULL;

	CHECK_EQ_INT(fp_profile_alloc(&p, "host-1", 1000, 10000000000ULL, 10000000), 0);
	return p;
}

static void test_alloc(void)
{
	struct fp_profile *p = new_profile();

	if (!p)
		return;
	CHECK(!strcmp(p->pr_host, "host-1"));
	CHECK_EQ_INT(p->pr_start_ns, 1000);
	CHECK_EQ_INT(p->pr_duration_ns, 10000000000LL);
	CHECK_EQ_INT(p->pr_period_ns, 10000000);
	CHECK_EQ_INT(p->pr_nmappings + p->pr_nframes + p->pr_nsamples, 0);
	CHECK_EQ_INT(fp_profile_total(p), 0);
	fp_profile_free(p);
	fp_profile_free(NULL);
}

static void test_mapping_interning(void)
{
	struct fp_profile *p = new_profile();
	char path[] = "/usr/lib/libc.so.6";
	uint32_t a = 99, b = 99, c = 99, d = 99, e = 99, f = 99;

	if (!p)
		return;
	CHECK_EQ_INT(fp_profile_add_mapping(p, FP_MAP_USER, &libc_id, path, &a), 0);
	CHECK_EQ_INT(a, 0);
	/* The path is copied: changing the caller's buffer changes nothing. */
	path[1] = 'X';
	CHECK(!strcmp(p->pr_mappings[0].pm_path, "/usr/lib/libc.so.6"));
	CHECK_EQ_INT(fp_profile_add_mapping(p, FP_MAP_USER, &libc_id, "/usr/lib/libc.so.6", &b), 0);
	CHECK_EQ_INT(b, a);
	/* Each part of the key makes a mapping distinct. */
	CHECK_EQ_INT(fp_profile_add_mapping(p, FP_MAP_USER, &other_id, "/usr/lib/libc.so.6", &c),
		     0);
	CHECK_EQ_INT(fp_profile_add_mapping(p, FP_MAP_KMODULE, &libc_id, "/usr/lib/libc.so.6", &d),
		     0);
	CHECK_EQ_INT(fp_profile_add_mapping(p, FP_MAP_USER, &libc_id, "/lib/libc.so.6", &e), 0);
	CHECK_EQ_INT(fp_profile_add_mapping(p, FP_MAP_USER, NULL, "/usr/lib/libc.so.6", &f), 0);
	CHECK_EQ_INT(c, 1);
	CHECK_EQ_INT(d, 2);
	CHECK_EQ_INT(e, 3);
	CHECK_EQ_INT(f, 4);
	CHECK_EQ_INT(p->pr_nmappings, 5);
	CHECK_EQ_INT(p->pr_mappings[1].pm_build_id.fb_data[3], 0xee);
	CHECK_EQ_INT(p->pr_mappings[2].pm_kind, FP_MAP_KMODULE);
	CHECK_EQ_INT(p->pr_mappings[4].pm_build_id.fb_len, 0);
	/* A NULL build-ID is the unknown (empty) one. */
	struct fp_build_id none = { 0 };
	CHECK_EQ_INT(fp_profile_add_mapping(p, FP_MAP_USER, &none, "/usr/lib/libc.so.6", &a), 0);
	CHECK_EQ_INT(a, 4);

	struct fp_build_id bad = { FP_BUILD_ID_MAX + 1, { 0 } };
	a = 77;
	CHECK_EQ_INT(fp_profile_add_mapping(p, FP_MAP_USER, &bad, "/x", &a), -EINVAL);
	CHECK_EQ_INT(fp_profile_add_mapping(p, FP_MAP_USER, &libc_id, NULL, &a), -EINVAL);
	CHECK_EQ_INT(a, 77);
	fp_profile_free(p);
}

static void test_frame_interning(void)
{
	struct fp_profile *p = new_profile();
	uint32_t m, a, b, c, d, e, f, g;

	if (!p)
		return;
	CHECK_EQ_INT(fp_profile_add_mapping(p, FP_MAP_USER, &libc_id, "/bin/app", &m), 0);
	CHECK_EQ_INT(fp_profile_add_frame(p, m, 0x1000, FP_FRAME_USER, "main", NULL, &a), 0);
	CHECK_EQ_INT(fp_profile_add_frame(p, m, 0x1000, FP_FRAME_USER, "main", NULL, &b), 0);
	CHECK_EQ_INT(a, b);
	CHECK_EQ_INT(fp_profile_add_frame(p, m, 0x1001, FP_FRAME_USER, "main", NULL, &c), 0);
	CHECK_EQ_INT(fp_profile_add_frame(p, m, 0x1000, FP_FRAME_KERNEL, "main", NULL, &d), 0);
	CHECK_EQ_INT(fp_profile_add_frame(p, FP_INDEX_NONE, 0x1000, FP_FRAME_USER, NULL, NULL, &e),
		     0);
	CHECK(a != c && a != d && a != e && c != d && d != e);
	CHECK_EQ_INT(p->pr_nframes, 4);
	CHECK_EQ_INT(p->pr_frames[e].pf_mapping, FP_INDEX_NONE);
	CHECK(p->pr_frames[e].pf_function == NULL);

	/* A system name equal to the function is not stored; a different one is. */
	CHECK_EQ_INT(fp_profile_add_frame(p, m, 0x2000, FP_FRAME_USER, "f", "f", &f), 0);
	CHECK(p->pr_frames[f].pf_system_name == NULL);
	CHECK_EQ_INT(fp_profile_add_frame(p, m, 0x3000, FP_FRAME_USER, "ns::g()", "_ZN2ns1gEv", &g),
		     0);
	CHECK(!strcmp(p->pr_frames[g].pf_function, "ns::g()"));
	CHECK(!strcmp(p->pr_frames[g].pf_system_name, "_ZN2ns1gEv"));
	/* A lone mangled name becomes the function name. */
	CHECK_EQ_INT(fp_profile_add_frame(p, m, 0x4000, FP_FRAME_USER, NULL, "_Z1hv", &g), 0);
	CHECK(!strcmp(p->pr_frames[g].pf_function, "_Z1hv"));
	CHECK(p->pr_frames[g].pf_system_name == NULL);

	/* A frame first added unresolved takes a name given later; an existing
	 * name is kept. */
	CHECK_EQ_INT(fp_profile_add_frame(p, m, 0x5000, FP_FRAME_USER, NULL, NULL, &g), 0);
	CHECK_EQ_INT(fp_profile_add_frame(p, m, 0x5000, FP_FRAME_USER, "late", NULL, &f), 0);
	CHECK_EQ_INT(f, g);
	CHECK(!strcmp(p->pr_frames[g].pf_function, "late"));
	CHECK_EQ_INT(fp_profile_add_frame(p, m, 0x5000, FP_FRAME_USER, "other", NULL, &f), 0);
	CHECK(!strcmp(p->pr_frames[g].pf_function, "late"));

	/* Mapping indexes must exist. */
	f = 1234;
	CHECK_EQ_INT(fp_profile_add_frame(p, m + 1, 0x1000, FP_FRAME_USER, "x", NULL, &f), -EINVAL);
	CHECK_EQ_INT(f, 1234);
	fp_profile_free(p);
}

static void test_sample_merging(void)
{
	struct fp_profile *p = new_profile();
	uint32_t m, fr[3], other[3];

	if (!p)
		return;
	CHECK_EQ_INT(fp_profile_add_mapping(p, FP_MAP_USER, &libc_id, "/bin/app", &m), 0);
	for (uint32_t i = 0; i < 3; i++)
		CHECK_EQ_INT(fp_profile_add_frame(p, m, 0x100 * (i + 1), FP_FRAME_USER, "f", NULL,
						  &fr[i]),
			     0);
	other[0] = fr[1];
	other[1] = fr[0];
	other[2] = fr[2];

	CHECK_EQ_INT(fp_profile_add_sample(p, fr, 3, 10, 11, "worker", "app", "", 2), 0);
	CHECK_EQ_INT(fp_profile_add_sample(p, fr, 3, 10, 11, "worker", "app", "", 3), 0);
	CHECK_EQ_INT(fp_profile_add_sample(p, fr, 3, 10, 11, "worker", "app", NULL, 1), 0);
	CHECK_EQ_INT(p->pr_nsamples, 1);
	CHECK_EQ_INT(p->pr_samples[0].ps_count, 6);
	/* Any difference keeps samples apart. */
	CHECK_EQ_INT(fp_profile_add_sample(p, other, 3, 10, 11, "worker", "app", "", 1), 0);
	CHECK_EQ_INT(fp_profile_add_sample(p, fr, 2, 10, 11, "worker", "app", "", 1), 0);
	CHECK_EQ_INT(fp_profile_add_sample(p, fr, 3, 12, 11, "worker", "app", "", 1), 0);
	CHECK_EQ_INT(fp_profile_add_sample(p, fr, 3, 10, 12, "worker", "app", "", 1), 0);
	CHECK_EQ_INT(fp_profile_add_sample(p, fr, 3, 10, 11, "worker2", "app", "", 1), 0);
	CHECK_EQ_INT(fp_profile_add_sample(p, fr, 3, 10, 11, "worker", "app2", "", 1), 0);
	CHECK_EQ_INT(fp_profile_add_sample(p, fr, 3, 10, 11, "worker", "app", "c1", 1), 0);
	CHECK_EQ_INT(fp_profile_add_sample(p, fr, 3, 10, 11, "worker", "app", "c1", 4), 0);
	CHECK_EQ_INT(p->pr_nsamples, 8);
	CHECK_EQ_INT(p->pr_samples[7].ps_count, 5);
	CHECK(!strcmp(p->pr_samples[7].ps_container, "c1"));
	CHECK(!strcmp(p->pr_samples[0].ps_container, ""));
	CHECK_EQ_INT(fp_profile_total(p), 17);

	/* The frames are copied. */
	fr[0] = fr[2];
	CHECK(p->pr_samples[0].ps_frames[0] != p->pr_samples[0].ps_frames[2]);

	/* Names longer than a comm are cut like the kernel cuts them, and
	 * merge with their cut form. */
	CHECK_EQ_INT(fp_profile_add_sample(p, NULL, 0, 1, 1, "a-very-long-thread-name",
					   "a-very-long-process-name", "", 1),
		     0);
	CHECK_EQ_INT(fp_profile_add_sample(p, NULL, 0, 1, 1, "a-very-long-thr", "a-very-long-pro",
					   "", 1),
		     0);
	CHECK_EQ_INT(p->pr_nsamples, 9);
	CHECK(!strcmp(p->pr_samples[8].ps_thread, "a-very-long-thr"));
	CHECK(!strcmp(p->pr_samples[8].ps_process, "a-very-long-pro"));
	CHECK_EQ_INT(p->pr_samples[8].ps_count, 2);

	/* Bad frame indexes are refused; a zero count adds nothing. */
	uint32_t bad = (uint32_t)p->pr_nframes;
	CHECK_EQ_INT(fp_profile_add_sample(p, &bad, 1, 1, 1, "t", "p", "", 1), -EINVAL);
	CHECK_EQ_INT(fp_profile_add_sample(p, NULL, 1, 1, 1, "t", "p", "", 1), -EINVAL);
	CHECK_EQ_INT(fp_profile_add_sample(p, fr, 3, 99, 99, "t", "p", "", 0), 0);
	CHECK_EQ_INT(p->pr_nsamples, 9);
	CHECK_EQ_INT(fp_profile_total(p), 19);
	fp_profile_free(p);
}

static void test_labels(void)
{
	struct fp_profile *p = new_profile();
	uint32_t app, kernel, mod, dir, fr[7];
	char buf[64];

	if (!p)
		return;
	CHECK_EQ_INT(fp_profile_add_mapping(p, FP_MAP_USER, &libc_id, "/usr/lib/libc.so.6", &app),
		     0);
	CHECK_EQ_INT(fp_profile_add_mapping(p, FP_MAP_KERNEL, &other_id, "vmlinux", &kernel), 0);
	CHECK_EQ_INT(fp_profile_add_mapping(p, FP_MAP_KMODULE, NULL, "ext4", &mod), 0);
	CHECK_EQ_INT(fp_profile_add_mapping(p, FP_MAP_USER, NULL, "/odd/dir/", &dir), 0);
	CHECK_EQ_INT(fp_profile_add_frame(p, app, 0x10, FP_FRAME_USER, "malloc", NULL, &fr[0]), 0);
	CHECK_EQ_INT(fp_profile_add_frame(p, app, 0x1A2B, FP_FRAME_USER, NULL, NULL, &fr[1]), 0);
	CHECK_EQ_INT(fp_profile_add_frame(p, kernel, 0x20, FP_FRAME_KERNEL, "schedule", NULL,
					  &fr[2]),
		     0);
	CHECK_EQ_INT(fp_profile_add_frame(p, kernel, 0xFF, FP_FRAME_KERNEL, NULL, NULL, &fr[3]), 0);
	CHECK_EQ_INT(fp_profile_add_frame(p, mod, 0x30, FP_FRAME_KERNEL, NULL, NULL, &fr[4]), 0);
	CHECK_EQ_INT(fp_profile_add_frame(p, FP_INDEX_NONE, 0x7fffDEAD, FP_FRAME_USER, NULL, NULL,
					  &fr[5]),
		     0);
	CHECK_EQ_INT(fp_profile_add_frame(p, dir, 0x40, FP_FRAME_USER, NULL, NULL, &fr[6]), 0);

	static const char *const want[] = {
		"malloc",        "libc.so.6+0x1a2b",     "schedule_[k]",   "vmlinux+0xff_[k]",
		"ext4+0x30_[k]", "[unknown]+0x7fffdead", "/odd/dir/+0x40",
	};
	for (size_t i = 0; i < sizeof(want) / sizeof(want[0]); i++) {
		int n = fp_profile_frame_label(p, fr[i], buf, sizeof(buf));

		CHECK_EQ_INT(n, strlen(want[i]));
		if (strcmp(buf, want[i])) {
			fprintf(stderr, "  label %zu: \"%s\", expected \"%s\"\n", i, buf, want[i]);
			CHECK(0);
		}
	}
	/* Like snprintf: truncated but terminated, the wanted length returned,
	 * and a zero-sized buffer only measures. */
	CHECK_EQ_INT(fp_profile_frame_label(p, fr[2], buf, 5), strlen("schedule_[k]"));
	CHECK(!strcmp(buf, "sche"));
	CHECK_EQ_INT(fp_profile_frame_label(p, fr[1], NULL, 0), strlen("libc.so.6+0x1a2b"));
	CHECK(fp_profile_frame_label(p, (uint32_t)p->pr_nframes, buf, sizeof(buf)) < 0);
	CHECK_EQ_INT(buf[0], '\0');
	fp_profile_free(p);
}

static void test_label_buf(void)
{
	struct fp_profile *p = new_profile();
	uint32_t m, small, big, unres;
	char name[600], *buf = NULL;
	size_t cap = 0;

	if (!p)
		return;
	memset(name, 'x', sizeof(name) - 1);
	name[sizeof(name) - 1] = '\0';
	CHECK_EQ_INT(fp_profile_add_mapping(p, FP_MAP_KERNEL, NULL, "vmlinux", &m), 0);
	CHECK_EQ_INT(fp_profile_add_frame(p, m, 1, FP_FRAME_USER, "malloc", NULL, &small), 0);
	CHECK_EQ_INT(fp_profile_add_frame(p, m, 2, FP_FRAME_KERNEL, name, NULL, &big), 0);
	CHECK_EQ_INT(fp_profile_add_frame(p, m, 0xabc, FP_FRAME_KERNEL, NULL, NULL, &unres), 0);

	/* From nothing, then grown past any fixed stack buffer, then reused. */
	CHECK_EQ_INT(fp_profile_frame_label_buf(p, small, &buf, &cap), strlen("malloc"));
	CHECK(buf && !strcmp(buf, "malloc") && cap > strlen("malloc"));
	CHECK_EQ_INT(fp_profile_frame_label_buf(p, big, &buf, &cap), sizeof(name) - 1 + 4);
	CHECK(buf && cap >= sizeof(name) + 4 && !strncmp(buf, name, sizeof(name) - 1) &&
	      !strcmp(buf + sizeof(name) - 1, "_[k]"));
	size_t grown = cap;
	CHECK_EQ_INT(fp_profile_frame_label_buf(p, unres, &buf, &cap), strlen("vmlinux+0xabc_[k]"));
	CHECK(buf && !strcmp(buf, "vmlinux+0xabc_[k]"));
	CHECK_EQ_INT(cap, grown);
	/* A bad frame is an error and leaves the buffer usable. */
	CHECK_EQ_INT(fp_profile_frame_label_buf(p, (uint32_t)p->pr_nframes, &buf, &cap), -EINVAL);
	CHECK_EQ_INT(fp_profile_frame_label_buf(p, small, &buf, &cap), strlen("malloc"));
	CHECK(buf && !strcmp(buf, "malloc"));
	free(buf);
	fp_profile_free(p);
}

static int u32_eq(const void *ctx, uint32_t index, const void *key)
{
	return ((const uint32_t *)ctx)[index] == *(const uint32_t *)key;
}

static uint32_t u32_hash(uint32_t k)
{
	/* Every third key collides: probing and the equality test must cope. */
	return k % 3 ? fp_hash_finish(fp_hash_word(FP_HASH_SEED, k)) : 12345;
}

static void test_indexset(void)
{
	enum { N = 3000 };
	struct fp_indexset set = { 0 };
	uint32_t *keys = malloc(N * sizeof(*keys)), k = 1;
	size_t slot;
	int ok = 1;

	if (!keys) {
		CHECK(0);
		return;
	}
	/* A zeroed set is empty. */
	CHECK_EQ_INT(fp_indexset_find(&set, u32_hash(k), u32_eq, keys, &k, &slot),
		     FP_INDEXSET_NONE);
	for (uint32_t i = 0; i < N && ok; i++) {
		keys[i] = i * 7 + 1;
		uint32_t hash = u32_hash(keys[i]);

		/* make_room moves the slot along when the set grows. */
		ok = fp_indexset_find(&set, hash, u32_eq, keys, &keys[i], &slot) ==
			     FP_INDEXSET_NONE &&
		     fp_indexset_make_room(&set, hash, &slot) == 0;
		if (ok)
			fp_indexset_insert(&set, slot, hash, i);
	}
	CHECK(ok);
	CHECK_EQ_INT(set.is_used, N);
	CHECK(set.is_used * 4 <= (set.is_mask + 1) * 3);
	/* Everything is found after the growth, and nothing else. */
	for (uint32_t i = 0; i < N && ok; i++)
		ok = fp_indexset_find(&set, u32_hash(keys[i]), u32_eq, keys, &keys[i], &slot) == i;
	CHECK(ok);
	k = 2; /* not 1 mod 7 */
	CHECK_EQ_INT(fp_indexset_find(&set, u32_hash(k), u32_eq, keys, &k, &slot),
		     FP_INDEXSET_NONE);
	k = 3; /* collides with every third key */
	CHECK_EQ_INT(fp_indexset_find(&set, u32_hash(k), u32_eq, keys, &k, &slot),
		     FP_INDEXSET_NONE);
	fp_indexset_free(&set);
	CHECK(set.is_slots == NULL && set.is_used == 0);

	/* Reserving ahead sizes the set once for the load factor. */
	CHECK_EQ_INT(fp_indexset_reserve(&set, 1000), 0);
	size_t slots = set.is_mask + 1;
	CHECK(slots >= 1334 && (slots & (slots - 1)) == 0);
	CHECK_EQ_INT(fp_indexset_reserve(&set, 1000), 0);
	CHECK_EQ_INT(set.is_mask + 1, slots);
	fp_indexset_free(&set);
	free(keys);
}

static void test_growth(void)
{
	struct fp_profile *p = new_profile();
	enum { NFRAMES = 100000 };
	uint32_t m, idx, *frames = malloc(NFRAMES * sizeof(*frames));
	char name[32];
	int ok = 1;

	if (!p || !frames) {
		CHECK(0);
		goto out;
	}
	CHECK_EQ_INT(fp_profile_add_mapping(p, FP_MAP_USER, &libc_id, "/bin/big", &m), 0);
	for (uint32_t i = 0; i < NFRAMES && ok; i++) {
		snprintf(name, sizeof(name), "fn%u", i);
		ok = fp_profile_add_frame(p, m, 0x1000 + 16ULL * i, FP_FRAME_USER, name, NULL,
					  &frames[i]) == 0 &&
		     frames[i] == i;
	}
	CHECK(ok);
	CHECK_EQ_INT(p->pr_nframes, NFRAMES);
	/* Everything is still found after all the rehashing. */
	for (uint32_t i = 0; i < NFRAMES && ok; i++)
		ok = fp_profile_add_frame(p, m, 0x1000 + 16ULL * i, FP_FRAME_USER, NULL, NULL,
					  &idx) == 0 &&
		     idx == i;
	CHECK(ok);
	CHECK_EQ_INT(p->pr_nframes, NFRAMES);
	CHECK(!strcmp(p->pr_frames[NFRAMES - 1].pf_function, "fn99999"));

	/* 50,000 distinct stacks of 20 frames, each added twice. */
	for (int round = 0; round < 2 && ok; round++)
		for (uint32_t i = 0; i < 50000 && ok; i++)
			ok = fp_profile_add_sample(p, frames + i, 20, 1, 1 + i % 7, "t", "p", "",
						   1) == 0;
	CHECK(ok);
	CHECK_EQ_INT(p->pr_nsamples, 50000);
	CHECK_EQ_INT(fp_profile_total(p), 100000);
	CHECK_EQ_INT(p->pr_samples[49999].ps_count, 2);
out:
	free(frames);
	fp_profile_free(p);
}

/* Python frames are interned by (qualname, file, line): not by address,
 * and never mixed up with a native frame of the same name. */
static void test_python_frames(void)
{
	struct fp_profile *p = new_profile();
	uint32_t m, a, b, c, d, e, f, nat;
	char label[64];

	if (!p)
		return;
	CHECK_EQ_INT(fp_profile_add_python_frame(p, "Worker.run", "/srv/w.py", 5, 3, &a), 0);
	CHECK_EQ_INT(fp_profile_add_python_frame(p, "Worker.run", "/srv/w.py", 5, 3, &b), 0);
	CHECK_EQ_INT(a, b);
	CHECK_EQ_INT(fp_profile_add_python_frame(p, "Worker.run", "/srv/w.py", 6, 3, &c), 0);
	CHECK_EQ_INT(fp_profile_add_python_frame(p, "Worker.run", "/srv/x.py", 5, 3, &d), 0);
	CHECK_EQ_INT(fp_profile_add_python_frame(p, "Worker.stop", "/srv/w.py", 5, 3, &e), 0);
	/* The first line is not part of the key: the first add's stays. */
	CHECK_EQ_INT(fp_profile_add_python_frame(p, "Worker.run", "/srv/w.py", 5, 99, &f), 0);
	CHECK_EQ_INT(f, a);
	CHECK_EQ_INT(p->pr_frames[a].pf_start_line, 3);
	CHECK(a != c && a != d && a != e && c != d && d != e);
	CHECK_EQ_INT(p->pr_nframes, 4);
	CHECK_EQ_INT(p->pr_frames[c].pf_kind, FP_FRAME_PYTHON);
	CHECK_EQ_INT(p->pr_frames[c].pf_mapping, FP_INDEX_NONE);
	CHECK_EQ_INT(p->pr_frames[c].pf_address, 0);
	CHECK(!strcmp(p->pr_frames[c].pf_function, "Worker.run"));
	CHECK(!strcmp(p->pr_frames[c].pf_file, "/srv/w.py"));
	CHECK_EQ_INT(p->pr_frames[c].pf_line, 6);
	/* A native frame with the same name and line is another frame. */
	CHECK_EQ_INT(fp_profile_add_mapping(p, FP_MAP_USER, &libc_id, "/bin/app", &m), 0);
	CHECK_EQ_INT(fp_profile_add_frame(p, m, 0, FP_FRAME_USER, "Worker.run", NULL, &nat), 0);
	CHECK(nat != a && nat != c);
	CHECK_EQ_INT(fp_profile_set_source(p, nat, "/srv/w.py", 5, NULL, 0), 0);
	CHECK_EQ_INT(fp_profile_add_python_frame(p, "Worker.run", "/srv/w.py", 5, 3, &f), 0);
	CHECK_EQ_INT(f, a);
	/* Python frames only through their own function. */
	CHECK_EQ_INT(fp_profile_add_frame(p, FP_INDEX_NONE, 0, FP_FRAME_PYTHON, "x", NULL, &f),
		     -EINVAL);
	CHECK_EQ_INT(fp_profile_add_python_frame(p, NULL, "/srv/w.py", 1, 1, &f), -EINVAL);
	CHECK_EQ_INT(fp_profile_add_python_frame(p, "x", NULL, 1, 1, &f), -EINVAL);
	/* Labels: "_[py]". */
	CHECK_EQ_INT(fp_profile_frame_label(p, c, label, sizeof(label)), 15);
	CHECK(!strcmp(label, "Worker.run_[py]"));
	CHECK_EQ_INT(fp_profile_frame_label(p, nat, label, sizeof(label)), 10);
	CHECK(!strcmp(label, "Worker.run"));
	/* Many lines of many functions: the index keeps them apart. */
	for (uint32_t i = 0; i < 2000; i++) {
		char name[32];

		snprintf(name, sizeof(name), "f%u", i % 50);
		CHECK_EQ_INT(fp_profile_add_python_frame(p, name, "/srv/many.py", i / 50, 1, &f),
			     0);
	}
	CHECK_EQ_INT(p->pr_nframes, 5 + 2000);
	CHECK_EQ_INT(fp_profile_add_python_frame(p, "f7", "/srv/many.py", 3, 1, &f), 0);
	CHECK(!strcmp(p->pr_frames[f].pf_function, "f7") && p->pr_frames[f].pf_line == 3);
	fp_profile_free(p);
}

int main(void)
{
	RUN(test_alloc);
	RUN(test_mapping_interning);
	RUN(test_frame_interning);
	RUN(test_python_frames);
	RUN(test_sample_merging);
	RUN(test_labels);
	RUN(test_label_buf);
	RUN(test_indexset);
	RUN(test_growth);
	return CHECK_DONE();
}
