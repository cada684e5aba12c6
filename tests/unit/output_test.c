/* output_test.c: the folded, pprof and SVG encoders (symbolizer/profile/folded.c,
 * pprof.c, svg.c) on a small profile whose every line is known. */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "check.h"
#include "output.h"
#include "pprof.pb-c.h"
#include "profile.h"

#define PERIOD 10000000ULL

typedef Perftools__Profiles__Profile pb_profile;

static const struct fp_build_id app_id = { 4, { 0x01, 0x02, 0xab, 0xcd } };
static const struct fp_build_id libc_id = { 4, { 0xde, 0xad, 0xbe, 0xef } };
static const struct fp_build_id kernel_id = { 2, { 0x0f, 0xf0 } };

enum { F_MAIN, F_WORK, F_PUSH, F_LIBC, F_SCHED, F_KUNRES, F_NOMAP, F_OP, F_WEIRD, F_N };

/* The small profile:
 *   app/app    pid 100  main;work                                   5
 *   app/worker pid 100  main;work                                   3
 *   app/app    pid 200  main;work (container c1)                    2
 *   app/worker pid 100  main;work;push_back;libc+0x2a2b0;schedule   1
 *   bash/bash  pid 300  [unknown]+0x7f0000001234;vmlinux+0xabc      4
 *   app/worker pid 100  main;operator< <"x"&'y'>;weird;name\nx      1
 */
static struct fp_profile *small_profile(uint32_t *fr)
{
	struct fp_profile *p = NULL;
	uint32_t app, libc, kernel;
	int err = 0;

	if (fp_profile_alloc(&p, "host-1", 1700000000000000000ULL, 10000000000ULL, PERIOD))
		return NULL;
	err |= fp_profile_add_mapping(p, FP_MAP_USER, &app_id, "/usr/bin/app", &app);
	err |= fp_profile_add_mapping(p, FP_MAP_USER, &libc_id, "/lib/x86_64-linux-gnu/libc.so.6",
				      &libc);
	err |= fp_profile_add_mapping(p, FP_MAP_KERNEL, &kernel_id, "vmlinux", &kernel);
	err |= fp_profile_add_frame(p, app, 0x1000, FP_FRAME_USER, "main", NULL, &fr[F_MAIN]);
	err |= fp_profile_add_frame(p, app, 0x1100, FP_FRAME_USER, "work", NULL, &fr[F_WORK]);
	err |= fp_profile_add_frame(p, app, 0x1200, FP_FRAME_USER, "std::vector<int>::push_back",
				    "_ZNSt6vectorIiSaIiEE9push_backERKi", &fr[F_PUSH]);
	err |= fp_profile_add_frame(p, libc, 0x2a2b0, FP_FRAME_USER, NULL, NULL, &fr[F_LIBC]);
	err |= fp_profile_add_frame(p, kernel, 0x123, FP_FRAME_KERNEL, "schedule", NULL,
				    &fr[F_SCHED]);
	err |= fp_profile_add_frame(p, kernel, 0xabc, FP_FRAME_KERNEL, NULL, NULL, &fr[F_KUNRES]);
	err |= fp_profile_add_frame(p, FP_INDEX_NONE, 0x7f0000001234, FP_FRAME_USER, NULL, NULL,
				    &fr[F_NOMAP]);
	err |= fp_profile_add_frame(p, app, 0x1300, FP_FRAME_USER, "operator< <\"x\"&'y'>", NULL,
				    &fr[F_OP]);
	err |= fp_profile_add_frame(p, app, 0x1400, FP_FRAME_USER, "weird;name\nx", NULL,
				    &fr[F_WEIRD]);

	uint32_t s1[] = { fr[F_WORK], fr[F_MAIN] };
	uint32_t s4[] = { fr[F_SCHED], fr[F_LIBC], fr[F_PUSH], fr[F_WORK], fr[F_MAIN] };
	uint32_t s5[] = { fr[F_KUNRES], fr[F_NOMAP] };
	uint32_t s6[] = { fr[F_WEIRD], fr[F_OP], fr[F_MAIN] };
	err |= fp_profile_add_sample(p, s1, 2, 100, 100, "app", "app", "", 5);
	err |= fp_profile_add_sample(p, s1, 2, 100, 101, "worker", "app", "", 3);
	err |= fp_profile_add_sample(p, s1, 2, 200, 200, "app", "app", "c1", 2);
	err |= fp_profile_add_sample(p, s4, 5, 100, 101, "worker", "app", "", 1);
	err |= fp_profile_add_sample(p, s5, 2, 300, 300, "bash", "bash", "", 4);
	err |= fp_profile_add_sample(p, s6, 3, 100, 101, "worker", "app", "", 1);
	if (err) {
		fp_profile_free(p);
		return NULL;
	}
	return p;
}

/* folded_text: what fp_folded_encode makes, malloc'd; its length is
 * the string's. */
static char *folded_text(const struct fp_profile *p, int by_thread)
{
	char *text = NULL;
	size_t len = 0;

	CHECK_EQ_INT(fp_folded_encode(p, by_thread, &text, &len), 0);
	CHECK(text && strlen(text) == len);
	return text;
}

static void check_text(const char *got, const char *want)
{
	if (!got || strcmp(got, want)) {
		fprintf(stderr, "  got:\n%s  expected:\n%s", got ? got : "(null)\n", want);
		CHECK(0);
	}
}

static void test_folded(void)
{
	uint32_t fr[F_N];
	struct fp_profile *p = small_profile(fr);

	CHECK(p != NULL);
	if (!p)
		return;
	char *text = folded_text(p, 0);
	check_text(text,
		   "app;main;operator< <\"x\"&'y'>;weird:name?x 1\n"
		   "app;main;work 10\n"
		   "app;main;work;std::vector<int>::push_back;libc.so.6+0x2a2b0;schedule_[k] 1\n"
		   "bash;[unknown]+0x7f0000001234;vmlinux+0xabc_[k] 4\n");
	free(text);
	text = folded_text(p, 1);
	check_text(text,
		   "app;app;main;work 7\n"
		   "app;worker;main;operator< <\"x\"&'y'>;weird:name?x 1\n"
		   "app;worker;main;work 3\n"
		   "app;worker;main;work;std::vector<int>::push_back;libc.so.6+0x2a2b0;schedule_[k] 1\n"
		   "bash;bash;[unknown]+0x7f0000001234;vmlinux+0xabc_[k] 4\n");
	free(text);
	fp_profile_free(p);
}

static void test_folded_names(void)
{
	struct fp_profile *p = NULL;

	CHECK_EQ_INT(fp_profile_alloc(&p, "h", 0, 0, PERIOD), 0);
	if (!p)
		return;
	/* Separators in comm names, empty names, empty stacks. */
	CHECK_EQ_INT(fp_profile_add_sample(p, NULL, 0, 1, 2, "t;1", "p\n;", "", 2), 0);
	CHECK_EQ_INT(fp_profile_add_sample(p, NULL, 0, 3, 4, "", "", "", 1), 0);
	char *text = folded_text(p, 1);
	check_text(text, "[unknown];[unknown] 1\n"
			 "p?:;t:1 2\n");
	free(text);

	/* Nothing to write is not an error. */
	struct fp_profile *empty = NULL;
	CHECK_EQ_INT(fp_profile_alloc(&empty, "h", 0, 0, PERIOD), 0);
	if (empty) {
		text = folded_text(empty, 0);
		check_text(text, "");
		free(text);
	}
	fp_profile_free(empty);
	fp_profile_free(p);
}

static const char *str(const pb_profile *pp, int64_t i)
{
	if (i < 0 || (size_t)i >= pp->n_string_table)
		return "<out of range>";
	return pp->string_table[i];
}

static const Perftools__Profiles__Label *label(const pb_profile *pp,
					       const Perftools__Profiles__Sample *s,
					       const char *key)
{
	for (size_t i = 0; i < s->n_label; i++)
		if (!strcmp(str(pp, s->label[i]->key), key))
			return s->label[i];
	return NULL;
}

static const Perftools__Profiles__Function *function_of(const pb_profile *pp, uint64_t loc_id)
{
	if (loc_id < 1 || loc_id > pp->n_location)
		return NULL;
	const Perftools__Profiles__Location *l = pp->location[loc_id - 1];
	if (l->n_line != 1 || l->line[0]->function_id < 1 ||
	    l->line[0]->function_id > pp->n_function)
		return NULL;
	return pp->function[l->line[0]->function_id - 1];
}

static void test_pprof_encode(void)
{
	uint32_t fr[F_N];
	struct fp_profile *p = small_profile(fr);
	uint8_t *buf = NULL;
	size_t len = 0;

	CHECK(p != NULL);
	if (!p)
		return;
	CHECK_EQ_INT(fp_pprof_encode(p, &buf, &len), 0);
	pb_profile *pp = perftools__profiles__profile__unpack(NULL, len, buf);
	CHECK(pp != NULL);
	if (!pp)
		goto out;

	CHECK(pp->n_string_table > 0 && !strcmp(pp->string_table[0], ""));
	CHECK_EQ_INT(pp->n_sample_type, 2);
	if (pp->n_sample_type == 2) {
		CHECK(!strcmp(str(pp, pp->sample_type[0]->type), "samples"));
		CHECK(!strcmp(str(pp, pp->sample_type[0]->unit), "count"));
		CHECK(!strcmp(str(pp, pp->sample_type[1]->type), "cpu"));
		CHECK(!strcmp(str(pp, pp->sample_type[1]->unit), "nanoseconds"));
	}
	CHECK(pp->period_type && !strcmp(str(pp, pp->period_type->type), "cpu") &&
	      !strcmp(str(pp, pp->period_type->unit), "nanoseconds"));
	CHECK_EQ_INT(pp->period, PERIOD);
	CHECK_EQ_INT(pp->time_nanos, 1700000000000000000LL);
	CHECK_EQ_INT(pp->duration_nanos, 10000000000LL);
	CHECK(!strcmp(str(pp, pp->default_sample_type), "cpu"));
	CHECK(pp->n_comment == 1 && !strcmp(str(pp, pp->comment[0]), "host=host-1"));

	/* Mappings: ids, file names, build-IDs in hex, has_functions only where
	 * something resolved. */
	CHECK_EQ_INT(pp->n_mapping, 3);
	for (size_t i = 0; i < pp->n_mapping; i++)
		CHECK_EQ_INT(pp->mapping[i]->id, i + 1);
	if (pp->n_mapping == 3) {
		CHECK(!strcmp(str(pp, pp->mapping[0]->filename), "/usr/bin/app"));
		CHECK(!strcmp(str(pp, pp->mapping[0]->build_id), "0102abcd"));
		CHECK(pp->mapping[0]->has_functions);
		CHECK(!strcmp(str(pp, pp->mapping[1]->filename),
			      "/lib/x86_64-linux-gnu/libc.so.6"));
		CHECK(!strcmp(str(pp, pp->mapping[1]->build_id), "deadbeef"));
		CHECK(!pp->mapping[1]->has_functions);
		CHECK(!strcmp(str(pp, pp->mapping[2]->build_id), "0ff0"));
		CHECK(pp->mapping[2]->has_functions);
	}

	/* Locations: one per frame, ids and mapping ids in range, one line. */
	CHECK_EQ_INT(pp->n_location, F_N);
	for (size_t i = 0; i < pp->n_location; i++) {
		const Perftools__Profiles__Location *l = pp->location[i];

		CHECK_EQ_INT(l->id, i + 1);
		CHECK(l->mapping_id <= pp->n_mapping);
		CHECK(function_of(pp, l->id) != NULL);
		CHECK_EQ_INT(l->address, p->pr_frames[i].pf_address);
	}
	for (size_t i = 0; i < pp->n_function; i++)
		CHECK_EQ_INT(pp->function[i]->id, i + 1);
	if (pp->n_location == F_N) {
		CHECK_EQ_INT(pp->location[fr[F_NOMAP]]->mapping_id, 0);
		CHECK_EQ_INT(pp->location[fr[F_LIBC]]->mapping_id, 2);
		CHECK_EQ_INT(pp->location[fr[F_SCHED]]->mapping_id, 3);
		static const struct {
			int frame;
			const char *name, *system_name;
		} want[] = {
			{ F_MAIN, "main", "main" },
			{ F_PUSH, "std::vector<int>::push_back",
			  "_ZNSt6vectorIiSaIiEE9push_backERKi" },
			{ F_LIBC, "libc.so.6+0x2a2b0", "libc.so.6+0x2a2b0" },
			{ F_SCHED, "schedule_[k]", "schedule_[k]" },
			{ F_KUNRES, "vmlinux+0xabc_[k]", "vmlinux+0xabc_[k]" },
			{ F_NOMAP, "[unknown]+0x7f0000001234", "[unknown]+0x7f0000001234" },
			{ F_WEIRD, "weird;name\nx", "weird;name\nx" },
		};
		for (size_t i = 0; i < sizeof(want) / sizeof(want[0]); i++) {
			const Perftools__Profiles__Function *fn = function_of(pp,
									      fr[want[i].frame] +
										      1);

			CHECK(fn && !strcmp(str(pp, fn->name), want[i].name));
			CHECK(fn && !strcmp(str(pp, fn->system_name), want[i].system_name));
		}
	}
	CHECK_EQ_INT(pp->n_function, F_N);

	/* Samples: as many as the profile has, leaf first, both values, labels. */
	CHECK_EQ_INT(pp->n_sample, p->pr_nsamples);
	for (size_t i = 0; i < pp->n_sample && i < p->pr_nsamples; i++) {
		const Perftools__Profiles__Sample *s = pp->sample[i];
		const struct fp_psample *ps = &p->pr_samples[i];
		const Perftools__Profiles__Label *l;

		CHECK_EQ_INT(s->n_location_id, ps->ps_nframes);
		for (size_t j = 0; j < s->n_location_id && j < ps->ps_nframes; j++)
			CHECK_EQ_INT(s->location_id[j], ps->ps_frames[j] + 1);
		CHECK_EQ_INT(s->n_value, 2);
		if (s->n_value == 2) {
			CHECK_EQ_INT(s->value[0], ps->ps_count);
			CHECK_EQ_INT(s->value[1], ps->ps_count * PERIOD);
		}
		l = label(pp, s, "pid");
		CHECK(l && l->num == ps->ps_pid && l->str == 0);
		l = label(pp, s, "tid");
		CHECK(l && l->num == ps->ps_tid);
		l = label(pp, s, "thread_name");
		CHECK(l && !strcmp(str(pp, l->str), ps->ps_thread));
		l = label(pp, s, "process_name");
		CHECK(l && !strcmp(str(pp, l->str), ps->ps_process));
		l = label(pp, s, "container");
		if (ps->ps_container[0])
			CHECK(l && !strcmp(str(pp, l->str), ps->ps_container));
		else
			CHECK(l == NULL);
	}
	if (pp->n_sample == 6) {
		CHECK(!strcmp(str(pp, label(pp, pp->sample[2], "container")->str), "c1"));
		CHECK(!strcmp(str(pp, function_of(pp, pp->sample[3]->location_id[0])->name),
			      "schedule_[k]"));
	}
	perftools__profiles__profile__free_unpacked(pp, NULL);
out:
	free(buf);
	fp_profile_free(p);
}

static void test_pprof_empty(void)
{
	struct fp_profile *p = NULL;
	uint8_t *buf = NULL;
	size_t len = 0;

	CHECK_EQ_INT(fp_profile_alloc(&p, "", 0, 0, PERIOD), 0);
	if (!p)
		return;
	CHECK_EQ_INT(fp_pprof_encode(p, &buf, &len), 0);
	pb_profile *pp = perftools__profiles__profile__unpack(NULL, len, buf);
	CHECK(pp != NULL);
	if (pp) {
		CHECK_EQ_INT(pp->n_sample + pp->n_location + pp->n_function + pp->n_mapping, 0);
		CHECK_EQ_INT(pp->n_sample_type, 2);
		CHECK_EQ_INT(pp->n_comment, 0);
		CHECK(!strcmp(pp->string_table[0], ""));
		perftools__profiles__profile__free_unpacked(pp, NULL);
	}
	free(buf);
	fp_profile_free(p);
}

/* svg_text: what fp_svg_encode makes, malloc'd; its length is the
 * string's. */
static char *svg_text(const struct fp_profile *p, const char *title, int by_thread)
{
	char *text = NULL;
	size_t len = 0;

	CHECK_EQ_INT(fp_svg_encode(p, title, by_thread, &text, &len), 0);
	CHECK(text && strlen(text) == len);
	return text;
}

static void check_contains(const char *text, const char *want)
{
	if (!text || !strstr(text, want)) {
		fprintf(stderr, "  missing in SVG: %s\n", want);
		CHECK(0);
	}
}

static void test_svg(void)
{
	uint32_t fr[F_N];
	struct fp_profile *p = small_profile(fr);

	CHECK(p != NULL);
	if (!p)
		return;
	char *svg = svg_text(p, "CPU <host-1> & \"friends\"", 0);
	CHECK(svg && !strncmp(svg, "<?xml", 5));
	check_contains(svg, "CPU &lt;host-1&gt; &amp; &quot;friends&quot;");
	/* Shares add up: the root has everything, its children split it. */
	check_contains(svg, "<title>all (16 samples, 100.00%)</title>");
	check_contains(svg, "<title>app (12 samples, 75.00%)</title>");
	check_contains(svg, "<title>bash (4 samples, 25.00%)</title>");
	check_contains(svg, "<title>work (11 samples, 68.75%)</title>");
	check_contains(svg, "<title>std::vector&lt;int&gt;::push_back (1 sample, 6.25%)</title>");
	check_contains(svg, "<title>operator&lt; &lt;&quot;x&quot;&amp;&#39;y&#39;&gt; (1 sample");
	check_contains(svg, "<title>weird;name?x (1 sample, 6.25%)</title>");
	check_contains(svg, "<title>schedule_[k] (1 sample, 6.25%)</title>");
	check_contains(svg, "<title>libc.so.6+0x2a2b0 (1 sample");
	check_contains(svg, "<title>vmlinux+0xabc_[k] (4 samples, 25.00%)</title>");
	check_contains(svg, "<script type=\"text/ecmascript\"><![CDATA[");
	CHECK(svg && !strstr(svg, "<title>worker"));
	/* Nothing unescaped from a name reaches the document. */
	CHECK(svg && !strstr(svg, "<int>") && !strstr(svg, "\"x\"&"));
	/* The root box spans the width between the margins. */
	check_contains(svg, "data-s=\"0\" data-n=\"16\" data-d=\"0\"><title>all");
	check_contains(svg, "x=\"10.00\" y=\"");
	check_contains(svg, "width=\"1180.00\"");
	free(svg);

	svg = svg_text(p, NULL, 1);
	check_contains(svg, "<title>worker (5 samples, 31.25%)</title>");
	check_contains(svg, "<title>app (7 samples, 43.75%)</title>");
	check_contains(svg, "data-d=\"2\"><title>worker");
	check_contains(svg, "data-d=\"3\"><title>main (5 samples");
	free(svg);
	fp_profile_free(p);
}

static void test_svg_names(void)
{
	struct fp_profile *p = NULL;
	uint32_t m, big, tiny, bytes;

	CHECK_EQ_INT(fp_profile_alloc(&p, "h", 0, 0, PERIOD), 0);
	if (!p)
		return;
	CHECK_EQ_INT(fp_profile_add_mapping(p, FP_MAP_USER, NULL, "/bin/x", &m), 0);
	CHECK_EQ_INT(fp_profile_add_frame(p, m, 1, FP_FRAME_USER, "big", NULL, &big), 0);
	CHECK_EQ_INT(fp_profile_add_frame(p, m, 2, FP_FRAME_USER, "tiny", NULL, &tiny), 0);
	/* Invalid UTF-8 and control characters, then valid multi-byte text. */
	CHECK_EQ_INT(fp_profile_add_frame(p, m, 3, FP_FRAME_USER,
					  "b\xff\xc0\x80\x01z \xc3\xa9\xe2\x82\xac", NULL, &bytes),
		     0);
	CHECK_EQ_INT(fp_profile_add_sample(p, &big, 1, 1, 1, "t", "p\xfe", "", 9000), 0);
	CHECK_EQ_INT(fp_profile_add_sample(p, &bytes, 1, 1, 1, "t", "p\xfe", "", 991), 0);
	/* Under 0.1% of the total: left out. */
	CHECK_EQ_INT(fp_profile_add_sample(p, &tiny, 1, 1, 1, "t", "p\xfe", "", 9), 0);
	char *svg = svg_text(p, "t", 0);
	check_contains(svg, "<title>all (10000 samples, 100.00%)</title>");
	check_contains(svg, "<title>p? (10000 samples");
	check_contains(svg, "<title>big (9000 samples, 90.00%)</title>");
	check_contains(svg, "<title>b????z \xc3\xa9\xe2\x82\xac (991 samples, 9.91%)</title>");
	CHECK(svg && !strstr(svg, "tiny"));
	free(svg);
	fp_profile_free(p);
}

/* Labels longer than any fixed buffer: a long C++ name (with a ';'), a long
 * kernel name, and an unresolved frame in a file with a long name. */
static void test_long_names(void)
{
	struct fp_profile *p = NULL;
	uint32_t m, k, fr[3];
	char user[400], kern[700], path[600], want[2400];
	uint8_t *buf = NULL;
	size_t len = 0;

	CHECK_EQ_INT(fp_profile_alloc(&p, "h", 0, 0, PERIOD), 0);
	if (!p)
		return;
	memset(user, 'u', sizeof(user) - 1);
	user[sizeof(user) - 1] = '\0';
	user[200] = ';';
	memset(kern, 'k', sizeof(kern) - 1);
	kern[sizeof(kern) - 1] = '\0';
	memset(path, 'f', sizeof(path) - 1);
	path[0] = '/';
	path[sizeof(path) - 1] = '\0';
	CHECK_EQ_INT(fp_profile_add_mapping(p, FP_MAP_USER, NULL, path, &m), 0);
	CHECK_EQ_INT(fp_profile_add_mapping(p, FP_MAP_KERNEL, NULL, "vmlinux", &k), 0);
	CHECK_EQ_INT(fp_profile_add_frame(p, k, 1, FP_FRAME_KERNEL, kern, NULL, &fr[0]), 0);
	CHECK_EQ_INT(fp_profile_add_frame(p, m, 2, FP_FRAME_USER, user, NULL, &fr[1]), 0);
	CHECK_EQ_INT(fp_profile_add_frame(p, m, 0x3c, FP_FRAME_USER, NULL, NULL, &fr[2]), 0);
	CHECK_EQ_INT(fp_profile_add_sample(p, fr, 3, 1, 1, "t", "p", "", 1), 0);

	/* Folded: root first, ';' in the name made ':'. */
	char *text = folded_text(p, 0);
	user[200] = ':';
	snprintf(want, sizeof(want), "p;%s+0x3c;%s;%s_[k] 1\n", path + 1, user, kern);
	user[200] = ';';
	check_text(text, want);
	free(text);

	/* SVG: every label whole in the box's title. */
	text = svg_text(p, "t", 0);
	snprintf(want, sizeof(want), "<title>%s+0x3c (1 sample, 100.00%%)</title>", path + 1);
	check_contains(text, want);
	snprintf(want, sizeof(want), "<title>%s (1 sample, 100.00%%)</title>", user);
	check_contains(text, want);
	snprintf(want, sizeof(want), "<title>%s_[k] (1 sample, 100.00%%)</title>", kern);
	check_contains(text, want);
	free(text);

	/* pprof: kernel and unresolved frames are named by their labels. */
	CHECK_EQ_INT(fp_pprof_encode(p, &buf, &len), 0);
	pb_profile *pp = perftools__profiles__profile__unpack(NULL, len, buf);
	CHECK(pp && pp->n_location == 3 && pp->n_function == 3);
	if (pp && pp->n_location == 3) {
		const Perftools__Profiles__Function *fn;

		snprintf(want, sizeof(want), "%s_[k]", kern);
		fn = function_of(pp, fr[0] + 1);
		CHECK(fn && !strcmp(str(pp, fn->name), want) && fn->system_name == fn->name);
		fn = function_of(pp, fr[1] + 1);
		CHECK(fn && !strcmp(str(pp, fn->name), user));
		snprintf(want, sizeof(want), "%s+0x3c", path + 1);
		fn = function_of(pp, fr[2] + 1);
		CHECK(fn && !strcmp(str(pp, fn->name), want));
	}
	if (pp)
		perftools__profiles__profile__free_unpacked(pp, NULL);
	free(buf);
	fp_profile_free(p);
}

static void test_large(void)
{
	struct fp_profile *p = NULL;
	uint32_t m, frames[20];
	uint8_t *buf = NULL;
	size_t len = 0;
	char name[32];
	int err = 0;

	CHECK_EQ_INT(fp_profile_alloc(&p, "h", 0, 0, PERIOD), 0);
	if (!p)
		return;
	err |= fp_profile_add_mapping(p, FP_MAP_USER, &app_id, "/bin/big", &m);
	for (uint32_t s = 0; s < 10000 && !err; s++) {
		for (uint32_t j = 0; j < 20 && !err; j++) {
			/* Shared roots, distinct leaves: like real profiles. */
			uint32_t fn = j < 10 ? j * 7 + s % 7 : 1000 + s * 20 + j;

			snprintf(name, sizeof(name), "function_%u", fn);
			err |= fp_profile_add_frame(p, m, fn * 16ULL, FP_FRAME_USER, name, NULL,
						    &frames[19 - j]);
		}
		err |= fp_profile_add_sample(p, frames, 20, 1, 1, "t", "p", "", 1 + s % 5);
	}
	CHECK_EQ_INT(err, 0);
	CHECK_EQ_INT(p->pr_nsamples, 10000);
	CHECK_EQ_INT(p->pr_nframes, 70 + 10000 * 10);
	CHECK_EQ_INT(fp_pprof_encode(p, &buf, &len), 0);
	pb_profile *pp = perftools__profiles__profile__unpack(NULL, len, buf);
	CHECK(pp && pp->n_sample == 10000 && pp->n_location == p->pr_nframes &&
	      pp->n_function == p->pr_nframes);
	if (pp)
		perftools__profiles__profile__free_unpacked(pp, NULL);
	free(buf);

	char *folded = folded_text(p, 0);
	size_t lines = 0;
	for (const char *c = folded; c && *c; c++)
		lines += *c == '\n';
	CHECK_EQ_INT(lines, 10000);
	free(folded);
	char *svg = svg_text(p, "large", 1);
	CHECK(svg != NULL);
	free(svg);
	fp_profile_free(p);
}

/* A Python program: python3's native frames, then Python frames on top.
 *   py/py  pid 400  python3+main;run (Worker.run:5);work (w.py:21)         6
 *   py/py  pid 400  python3+main;run (Worker.run:5);work (w.py:22);read_[k] 2
 *   py/py  pid 400  python3+main;run (Worker.run:4)                        1
 * The two lines of work are two frames, one Function. */
static struct fp_profile *python_profile(uint32_t *fr)
{
	struct fp_profile *p = NULL;
	uint32_t py, kernel;
	int err = 0;

	if (fp_profile_alloc(&p, "host-py", 1700000000000000000ULL, 10000000000ULL, PERIOD))
		return NULL;
	err |= fp_profile_add_mapping(p, FP_MAP_USER, &app_id, "/usr/bin/python3.11", &py);
	err |= fp_profile_add_mapping(p, FP_MAP_KERNEL, &kernel_id, "vmlinux", &kernel);
	err |= fp_profile_add_frame(p, py, 0x1000, FP_FRAME_USER, "main", NULL, &fr[0]);
	err |= fp_profile_add_python_frame(p, "Worker.run", "/srv/app/w.py", 5, 3, &fr[1]);
	err |= fp_profile_add_python_frame(p, "work", "/srv/app/w.py", 21, 20, &fr[2]);
	err |= fp_profile_add_python_frame(p, "work", "/srv/app/w.py", 22, 20, &fr[3]);
	err |= fp_profile_add_frame(p, kernel, 0x40, FP_FRAME_KERNEL, "read", NULL, &fr[4]);
	err |= fp_profile_add_python_frame(p, "Worker.run", "/srv/app/w.py", 4, 3, &fr[5]);

	uint32_t s1[] = { fr[2], fr[1], fr[0] };
	uint32_t s2[] = { fr[4], fr[3], fr[1], fr[0] };
	uint32_t s3[] = { fr[5], fr[0] };
	err |= fp_profile_add_sample(p, s1, 3, 400, 400, "py", "py", "", 6);
	err |= fp_profile_add_sample(p, s2, 4, 400, 400, "py", "py", "", 2);
	err |= fp_profile_add_sample(p, s3, 2, 400, 400, "py", "py", "", 1);
	if (err) {
		fp_profile_free(p);
		return NULL;
	}
	return p;
}

static void test_python_folded(void)
{
	uint32_t fr[6];
	struct fp_profile *p = python_profile(fr);

	CHECK(p != NULL);
	if (!p)
		return;
	char *text = folded_text(p, 0);
	check_text(text, "py;main;Worker.run_[py] 1\n"
			 "py;main;Worker.run_[py];work_[py] 6\n"
			 "py;main;Worker.run_[py];work_[py];read_[k] 2\n");
	free(text);
	fp_profile_free(p);
}

/* pprof: a Python frame is a Location without Mapping whose Line names the
 * qualified name, the .py file, the first line, and carries its line. */
static void test_python_pprof(void)
{
	uint32_t fr[6];
	struct fp_profile *p = python_profile(fr);
	uint8_t *buf = NULL;
	size_t len = 0;

	CHECK(p != NULL);
	if (!p)
		return;
	CHECK_EQ_INT(fp_pprof_encode(p, &buf, &len), 0);
	pb_profile *pp = perftools__profiles__profile__unpack(NULL, len, buf);
	CHECK(pp != NULL);
	if (!pp)
		goto out;
	CHECK_EQ_INT(pp->n_mapping, 2);
	CHECK_EQ_INT(pp->n_location, 6);
	if (pp->n_location != 6)
		goto unpack;
	static const struct {
		int frame;
		const char *name, *file;
		int64_t start, line;
	} want[] = {
		{ 1, "Worker.run", "/srv/app/w.py", 3, 5 },
		{ 2, "work", "/srv/app/w.py", 20, 21 },
		{ 3, "work", "/srv/app/w.py", 20, 22 },
		{ 5, "Worker.run", "/srv/app/w.py", 3, 4 },
	};
	for (size_t i = 0; i < sizeof(want) / sizeof(want[0]); i++) {
		const Perftools__Profiles__Location *l = pp->location[fr[want[i].frame]];
		const Perftools__Profiles__Function *f = function_of(pp, l->id);

		CHECK_EQ_INT(l->mapping_id, 0);
		CHECK_EQ_INT(l->address, 0);
		CHECK(f != NULL);
		if (!f)
			continue;
		CHECK(!strcmp(str(pp, f->name), want[i].name));
		CHECK(!strcmp(str(pp, f->system_name), want[i].name));
		CHECK(!strcmp(str(pp, f->filename), want[i].file));
		CHECK_EQ_INT(f->start_line, want[i].start);
		CHECK_EQ_INT(l->line[0]->line, want[i].line);
	}
	/* One Function per Python function, whatever its lines. */
	CHECK(function_of(pp, fr[2] + 1) == function_of(pp, fr[3] + 1));
	CHECK(function_of(pp, fr[1] + 1) == function_of(pp, fr[5] + 1));
	CHECK(function_of(pp, fr[1] + 1) != function_of(pp, fr[2] + 1));
	/* The native and kernel frames keep their mappings and names. */
	CHECK_EQ_INT(pp->location[fr[0]]->mapping_id, 1);
	CHECK(!strcmp(str(pp, function_of(pp, fr[4] + 1)->name), "read_[k]"));
	CHECK_EQ_INT(function_of(pp, fr[0] + 1)->start_line, 0);
	/* The stack of 2 samples: read, work:22, Worker.run:5, main. */
	int found = 0;
	for (size_t i = 0; i < pp->n_sample; i++) {
		const Perftools__Profiles__Sample *sm = pp->sample[i];
		if (sm->value[0] != 2)
			continue;
		found = 1;
		CHECK_EQ_INT(sm->n_location_id, 4);
		if (sm->n_location_id == 4) {
			CHECK_EQ_INT(sm->location_id[1], fr[3] + 1);
			CHECK_EQ_INT(sm->location_id[2], fr[1] + 1);
		}
	}
	CHECK(found);
unpack:
	perftools__profiles__profile__free_unpacked(pp, NULL);
out:
	free(buf);
	fp_profile_free(p);
}

/* SVG: Python boxes are green, native ones warm, kernel ones cool. */
static void box_rgb(const char *svg, const char *name, int rgb[3])
{
	char title[128];
	const char *at;

	rgb[0] = rgb[1] = rgb[2] = -1;
	snprintf(title, sizeof(title), "<title>%s (", name);
	at = svg ? strstr(svg, title) : NULL;
	if (at && (at = strstr(at, "fill=\"rgb(")))
		CHECK_EQ_INT(sscanf(at, "fill=\"rgb(%d,%d,%d)", &rgb[0], &rgb[1], &rgb[2]), 3);
}

/* An off-CPU profile: its samples are waits (ps_blocks) and their time
 * (ps_count, ns): pprof says so in its types and values, the folded text
 * gives nanoseconds, the SVG milliseconds off-CPU. */
static void test_offcpu(void)
{
	struct fp_profile *p = NULL;
	uint32_t app, sched, frames[2];
	uint8_t *buf = NULL;
	char *text = NULL, *svg = NULL;
	size_t len = 0, svglen = 0;

	if (fp_profile_alloc(&p, "host-1", 1700000000000000000ULL, 10000000000ULL, PERIOD))
		return;
	CHECK_EQ_INT(fp_profile_add_mapping(p, FP_MAP_USER, &app_id, "/usr/bin/app", &app), 0);
	CHECK_EQ_INT(fp_profile_add_frame(p, app, 0x1000, FP_FRAME_USER, "wait_here", NULL,
					  &frames[1]),
		     0);
	CHECK_EQ_INT(fp_profile_add_frame(p, FP_INDEX_NONE, 0x10, FP_FRAME_KERNEL, "schedule", NULL,
					  &sched),
		     0);
	frames[0] = sched;
	/* not into a CPU profile */
	CHECK_EQ_INT(fp_profile_add_block(p, frames, 2, 1, 2, "t", "app", "", 5, 1), -EINVAL);
	p->pr_is_offcpu = 1;
	CHECK_EQ_INT(fp_profile_add_block(p, frames, 2, 1, 2, "t", "app", "", 2500000000ull, 3), 0);
	CHECK_EQ_INT(fp_profile_add_block(p, frames, 2, 1, 2, "t", "app", "", 500000000ull, 1), 0);
	CHECK_EQ_INT(p->pr_nsamples, 1);
	CHECK(fp_profile_total(p) == 3000000000ull);

	text = folded_text(p, 0);
	check_text(text, "app;wait_here;schedule_[k] 3000000000\n");
	CHECK_EQ_INT(fp_pprof_encode(p, &buf, &len), 0);
	pb_profile *pp = perftools__profiles__profile__unpack(NULL, len, buf);
	CHECK(pp != NULL);
	if (pp) {
		CHECK_EQ_INT(pp->n_sample_type, 2);
		if (pp->n_sample_type == 2) {
			CHECK(!strcmp(str(pp, pp->sample_type[0]->type), "waits"));
			CHECK(!strcmp(str(pp, pp->sample_type[0]->unit), "count"));
			CHECK(!strcmp(str(pp, pp->sample_type[1]->type), "off_cpu"));
			CHECK(!strcmp(str(pp, pp->sample_type[1]->unit), "nanoseconds"));
		}
		CHECK(!strcmp(str(pp, pp->default_sample_type), "off_cpu"));
		CHECK_EQ_INT(pp->period, 1);
		CHECK_EQ_INT(pp->n_sample, 1);
		if (pp->n_sample == 1 && pp->sample[0]->n_value == 2) {
			CHECK_EQ_INT(pp->sample[0]->value[0], 4);
			CHECK(pp->sample[0]->value[1] == 3000000000LL);
		}
		perftools__profiles__profile__free_unpacked(pp, NULL);
	}
	CHECK_EQ_INT(fp_svg_encode(p, "Off-CPU", 0, &svg, &svglen), 0);
	CHECK(svg && strstr(svg, "wait_here (3000.000 ms off-CPU, 100.00%)"));
	CHECK(svg && !strstr(svg, "sample"));
	free(svg);
	free(buf);
	free(text);
	fp_profile_free(p);
}

static void test_python_svg(void)
{
	uint32_t fr[6];
	struct fp_profile *p = python_profile(fr);
	int py[3], native[3], kernel[3];

	CHECK(p != NULL);
	if (!p)
		return;
	char *text = svg_text(p, "py", 0);
	box_rgb(text, "work_[py]", py);
	box_rgb(text, "main", native);
	box_rgb(text, "read_[k]", kernel);
	CHECK(py[1] > py[0] && py[1] > py[2]);                 /* green */
	CHECK(native[0] > native[1] && native[0] > native[2]); /* red to yellow */
	CHECK(kernel[2] > kernel[0]);                          /* blue-green */
	box_rgb(text, "Worker.run_[py]", py);
	CHECK(py[1] > py[0] && py[1] > py[2]);
	free(text);
	fp_profile_free(p);
}

int main(void)
{
	RUN(test_folded);
	RUN(test_folded_names);
	RUN(test_pprof_encode);
	RUN(test_pprof_empty);
	RUN(test_svg);
	RUN(test_svg_names);
	RUN(test_long_names);
	RUN(test_large);
	RUN(test_python_folded);
	RUN(test_python_pprof);
	RUN(test_python_svg);
	RUN(test_offcpu);
	return CHECK_DONE();
}
