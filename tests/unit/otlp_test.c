/* otlp_test.c: the OTLP Profiles encoder (symbolizer/profile/otlp.c), decoded back with
 * the protobuf-c code generated from proto/otlp_*.proto: table rules (zero
 * entries, no duplicates, indexes in range), resources per service, sample
 * attributes and values, frame types, build-IDs. */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "check.h"
#include "otlp.h"
#include "otlp_profiles_service.pb-c.h"
#include "profile.h"

#define PERIOD 10101010ULL
#define START 1700000000123456789ULL
#define DURATION 10000000000ULL

typedef Opentelemetry__Proto__Collector__Profiles__V1development__ExportProfilesServiceRequest
	pb_request;
typedef Opentelemetry__Proto__Profiles__V1development__ProfilesDictionary pb_dictionary;
typedef Opentelemetry__Proto__Profiles__V1development__ResourceProfiles pb_resource_profiles;
typedef Opentelemetry__Proto__Profiles__V1development__Profile pb_profile;
typedef Opentelemetry__Proto__Profiles__V1development__Sample pb_sample;
typedef Opentelemetry__Proto__Profiles__V1development__Mapping pb_mapping;
typedef Opentelemetry__Proto__Profiles__V1development__Location pb_location;
typedef Opentelemetry__Proto__Profiles__V1development__Function pb_function;
typedef Opentelemetry__Proto__Profiles__V1development__Stack pb_stack;
typedef Opentelemetry__Proto__Profiles__V1development__KeyValueAndUnit pb_kvu;
typedef Opentelemetry__Proto__Common__V1__AnyValue pb_any;
typedef Opentelemetry__Proto__Common__V1__KeyValue pb_kv;

#define ANY_STRING OPENTELEMETRY__PROTO__COMMON__V1__ANY_VALUE__VALUE_STRING_VALUE
#define ANY_INT OPENTELEMETRY__PROTO__COMMON__V1__ANY_VALUE__VALUE_INT_VALUE

static pb_request *unpack(const uint8_t *buf, size_t len)
{
	return opentelemetry__proto__collector__profiles__v1development__export_profiles_service_request__unpack(
		NULL, len, buf);
}

static void unpack_free(pb_request *r)
{
	if (r)
		opentelemetry__proto__collector__profiles__v1development__export_profiles_service_request__free_unpacked(
			r, NULL);
}

static const struct fp_build_id app_id = { 4, { 0x01, 0x02, 0xab, 0xcd } };
static const struct fp_build_id libc_id = { 4, { 0xde, 0xad, 0xbe, 0xef } };
static const struct fp_build_id kernel_id = { 3, { 0x0f, 0xf0, 0x11 } };

enum { F_MAIN, F_WORK, F_PUSH, F_LIBC, F_SCHED, F_KUNRES, F_NOMAP, F_USCHED, F_NOBID, F_N };

/* The small profile (services after the arrow):
 *   app   pid 100 tid 100 app     main;work                               5 -> app
 *   app   pid 100 tid 101 worker  main;work                               3 -> app
 *   app   pid 100 tid 101 worker  main;work;push_back;libc+0x2a2b0;schedule[k]  1 -> app
 *   nginx pid 200 tid 200 nginx   main;work;schedule (user) (container web-1)   2 -> web-1
 *   nginx pid 201 tid 202 nginx   main;work (container web-1)            1 -> web-1
 *   redis pid 300 tid 300 redis   [raw 0x7f0000001234];vmlinux+0xabc[k] (cache-7) 4 -> cache-7
 *   bash  pid 400 tid 400 bash    (no frames)                             2 -> bash
 *   bash  pid 400 tid 400 bash    libnobid.so+0x10 (unresolved)          6 -> bash
 */
static struct fp_profile *small_profile(uint32_t *fr)
{
	struct fp_profile *p = NULL;
	uint32_t app, libc, kernel, nobid;
	int err = 0;

	if (fp_profile_alloc(&p, "host-1", START, DURATION, PERIOD))
		return NULL;
	err |= fp_profile_add_mapping(p, FP_MAP_USER, &app_id, "/usr/bin/app", &app);
	err |= fp_profile_add_mapping(p, FP_MAP_USER, &libc_id, "/lib/x86_64-linux-gnu/libc.so.6",
				      &libc);
	err |= fp_profile_add_mapping(p, FP_MAP_KERNEL, &kernel_id, "vmlinux", &kernel);
	err |= fp_profile_add_mapping(p, FP_MAP_USER, NULL, "/usr/lib/libnobid.so", &nobid);
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
	err |= fp_profile_add_frame(p, app, 0x1300, FP_FRAME_USER, "schedule", NULL, &fr[F_USCHED]);
	err |= fp_profile_add_frame(p, nobid, 0x10, FP_FRAME_USER, NULL, NULL, &fr[F_NOBID]);

	uint32_t s1[] = { fr[F_WORK], fr[F_MAIN] };
	uint32_t s4[] = { fr[F_SCHED], fr[F_LIBC], fr[F_PUSH], fr[F_WORK], fr[F_MAIN] };
	uint32_t s5[] = { fr[F_KUNRES], fr[F_NOMAP] };
	uint32_t s6[] = { fr[F_USCHED], fr[F_WORK], fr[F_MAIN] };
	uint32_t s7[] = { fr[F_NOBID] };
	err |= fp_profile_add_sample(p, s1, 2, 100, 100, "app", "app", "", 5);
	err |= fp_profile_add_sample(p, s1, 2, 100, 101, "worker", "app", "", 3);
	err |= fp_profile_add_sample(p, s4, 5, 100, 101, "worker", "app", "", 1);
	err |= fp_profile_add_sample(p, s6, 3, 200, 200, "nginx", "nginx", "web-1", 2);
	err |= fp_profile_add_sample(p, s1, 2, 201, 202, "nginx", "nginx", "web-1", 1);
	err |= fp_profile_add_sample(p, s5, 2, 300, 300, "redis", "redis", "cache-7", 4);
	err |= fp_profile_add_sample(p, NULL, 0, 400, 400, "bash", "bash", "", 2);
	err |= fp_profile_add_sample(p, s7, 1, 400, 400, "bash", "bash", "", 6);
	if (err) {
		fp_profile_free(p);
		return NULL;
	}
	return p;
}

static char *label_keys[] = { "env", "", "host.name", "region", "env", "service.name" };
static char *label_values[] = { "prod", "x", "bogus", "eu-west", "other", "bogus" };

static const struct fp_otlp_resource resource = {
	.or_host = NULL, /* the profile's */
	.or_nlabels = 6,
	.or_label_keys = label_keys,
	.or_label_values = label_values,
};

/* ---- reading the decoded request ---- */

static const char *s_at(const pb_dictionary *d, int32_t i)
{
	return i >= 0 && (size_t)i < d->n_string_table ? d->string_table[i] : "(bad)";
}

/* attr_value: the value of key among the attribute indexes, or NULL. */
static const pb_any *attr_value(const pb_dictionary *d, const int32_t *idx, size_t n,
				const char *key)
{
	for (size_t i = 0; i < n; i++) {
		if (idx[i] < 0 || (size_t)idx[i] >= d->n_attribute_table)
			continue;
		const pb_kvu *a = d->attribute_table[idx[i]];
		if (!strcmp(s_at(d, a->key_strindex), key))
			return a->value;
	}
	return NULL;
}

static int is_string(const pb_any *v, const char *s)
{
	return v && v->value_case == ANY_STRING && !strcmp(v->string_value, s);
}

static int is_int(const pb_any *v, int64_t n)
{
	return v && v->value_case == ANY_INT && v->int_value == n;
}

static const char *resource_attr(const pb_resource_profiles *rp, const char *key)
{
	if (!rp->resource)
		return NULL;
	for (size_t i = 0; i < rp->resource->n_attributes; i++) {
		const pb_kv *kv = rp->resource->attributes[i];
		if (!strcmp(kv->key, key))
			return kv->value && kv->value->value_case == ANY_STRING
				       ? kv->value->string_value
				       : "(not a string)";
	}
	return NULL;
}

static const pb_profile *only_profile(const pb_resource_profiles *rp)
{
	if (rp->n_scope_profiles != 1 || rp->scope_profiles[0]->n_profiles != 1)
		return NULL;
	return rp->scope_profiles[0]->profiles[0];
}

static int any_eq(const pb_any *a, const pb_any *b)
{
	if (!a || !b)
		return a == b;
	if (a->value_case != b->value_case)
		return 0;
	if (a->value_case == ANY_STRING)
		return !strcmp(a->string_value, b->string_value);
	if (a->value_case == ANY_INT)
		return a->int_value == b->int_value;
	return 1;
}

static int ints_eq(const int32_t *a, size_t na, const int32_t *b, size_t nb)
{
	return na == nb && (!na || !memcmp(a, b, na * sizeof(*a)));
}

static int location_eq(const pb_location *a, const pb_location *b)
{
	if (a->mapping_index != b->mapping_index || a->address != b->address ||
	    a->n_lines != b->n_lines ||
	    !ints_eq(a->attribute_indices, a->n_attribute_indices, b->attribute_indices,
		     b->n_attribute_indices))
		return 0;
	for (size_t i = 0; i < a->n_lines; i++)
		if (a->lines[i]->function_index != b->lines[i]->function_index ||
		    a->lines[i]->line != b->lines[i]->line)
			return 0;
	return 1;
}

/* check_tables: zero entries first, no duplicates, every index in range. */
static void check_tables(const pb_request *r)
{
	const pb_dictionary *d = r->dictionary;

	CHECK(d != NULL);
	if (!d)
		return;
	size_t ns = d->n_string_table, na = d->n_attribute_table, nm = d->n_mapping_table;
	size_t nl = d->n_location_table, nf = d->n_function_table, nst = d->n_stack_table;
	size_t nk = d->n_link_table;
#define IN(i, n) ((i) >= 0 && (size_t)(i) < (n))

	/* Zero entries. */
	CHECK(ns >= 1 && !strcmp(d->string_table[0], ""));
	CHECK(na >= 1 && d->attribute_table[0]->key_strindex == 0 &&
	      d->attribute_table[0]->value == NULL && d->attribute_table[0]->unit_strindex == 0);
	CHECK(nm >= 1 && d->mapping_table[0]->filename_strindex == 0 &&
	      d->mapping_table[0]->n_attribute_indices == 0 &&
	      d->mapping_table[0]->memory_start == 0 && d->mapping_table[0]->memory_limit == 0 &&
	      d->mapping_table[0]->file_offset == 0);
	CHECK(nl >= 1 && d->location_table[0]->mapping_index == 0 &&
	      d->location_table[0]->address == 0 && d->location_table[0]->n_lines == 0 &&
	      d->location_table[0]->n_attribute_indices == 0);
	CHECK(nf >= 1 && d->function_table[0]->name_strindex == 0 &&
	      d->function_table[0]->system_name_strindex == 0 &&
	      d->function_table[0]->filename_strindex == 0 &&
	      d->function_table[0]->start_line == 0);
	CHECK(nk >= 1 && d->link_table[0]->trace_id.len == 0 && d->link_table[0]->span_id.len == 0);
	CHECK(nst >= 1 && d->stack_table[0]->n_location_indices == 0);

	/* No duplicates (the tables are small: pairwise). */
	int dups = 0;
	for (size_t i = 0; i < ns; i++)
		for (size_t j = i + 1; j < ns; j++)
			dups += !strcmp(d->string_table[i], d->string_table[j]);
	for (size_t i = 0; i < na; i++)
		for (size_t j = i + 1; j < na; j++)
			dups += d->attribute_table[i]->key_strindex ==
					d->attribute_table[j]->key_strindex &&
				any_eq(d->attribute_table[i]->value, d->attribute_table[j]->value);
	for (size_t i = 0; i < nm; i++)
		for (size_t j = i + 1; j < nm; j++) {
			const pb_mapping *a = d->mapping_table[i], *b = d->mapping_table[j];
			dups += a->filename_strindex == b->filename_strindex &&
				a->memory_start == b->memory_start &&
				a->file_offset == b->file_offset &&
				ints_eq(a->attribute_indices, a->n_attribute_indices,
					b->attribute_indices, b->n_attribute_indices);
		}
	for (size_t i = 0; i < nl; i++)
		for (size_t j = i + 1; j < nl; j++)
			dups += location_eq(d->location_table[i], d->location_table[j]);
	for (size_t i = 0; i < nf; i++)
		for (size_t j = i + 1; j < nf; j++) {
			const pb_function *a = d->function_table[i], *b = d->function_table[j];
			dups += a->name_strindex == b->name_strindex &&
				a->system_name_strindex == b->system_name_strindex &&
				a->filename_strindex == b->filename_strindex;
		}
	for (size_t i = 0; i < nst; i++)
		for (size_t j = i + 1; j < nst; j++)
			dups += ints_eq(d->stack_table[i]->location_indices,
					d->stack_table[i]->n_location_indices,
					d->stack_table[j]->location_indices,
					d->stack_table[j]->n_location_indices);
	CHECK_EQ_INT(dups, 0);

	/* Every reference in range. */
	int bad = 0;
	for (size_t i = 0; i < na; i++)
		bad += !IN(d->attribute_table[i]->key_strindex, ns) ||
		       !IN(d->attribute_table[i]->unit_strindex, ns);
	for (size_t i = 0; i < nm; i++) {
		bad += !IN(d->mapping_table[i]->filename_strindex, ns);
		for (size_t j = 0; j < d->mapping_table[i]->n_attribute_indices; j++)
			bad += !IN(d->mapping_table[i]->attribute_indices[j], na);
	}
	for (size_t i = 0; i < nl; i++) {
		const pb_location *l = d->location_table[i];
		bad += !IN(l->mapping_index, nm);
		for (size_t j = 0; j < l->n_lines; j++)
			bad += !IN(l->lines[j]->function_index, nf);
		for (size_t j = 0; j < l->n_attribute_indices; j++)
			bad += !IN(l->attribute_indices[j], na);
	}
	for (size_t i = 0; i < nf; i++)
		bad += !IN(d->function_table[i]->name_strindex, ns) ||
		       !IN(d->function_table[i]->system_name_strindex, ns) ||
		       !IN(d->function_table[i]->filename_strindex, ns);
	for (size_t i = 0; i < nst; i++)
		for (size_t j = 0; j < d->stack_table[i]->n_location_indices; j++)
			bad += !IN(d->stack_table[i]->location_indices[j], nl);
	for (size_t i = 0; i < r->n_resource_profiles; i++) {
		const pb_profile *p = only_profile(r->resource_profiles[i]);
		if (!p) {
			bad++;
			continue;
		}
		bad += !p->sample_type || !IN(p->sample_type->type_strindex, ns) ||
		       !IN(p->sample_type->unit_strindex, ns);
		bad += !p->period_type || !IN(p->period_type->type_strindex, ns) ||
		       !IN(p->period_type->unit_strindex, ns);
		for (size_t j = 0; j < p->n_attribute_indices; j++)
			bad += !IN(p->attribute_indices[j], na);
		for (size_t j = 0; j < p->n_samples; j++) {
			const pb_sample *s = p->samples[j];
			bad += !IN(s->stack_index, nst) || !IN(s->link_index, nk);
			for (size_t k = 0; k < s->n_attribute_indices; k++)
				bad += !IN(s->attribute_indices[k], na);
		}
	}
	CHECK_EQ_INT(bad, 0);
#undef IN
}

/* frame_names: the frames of a stack as "name" (resolved), "?file+0xaddr"
 * (unresolved), with "[k]" for kernel frames, joined by ';' leaf first. */
static void frame_names(const pb_dictionary *d, int32_t stack, char *buf, size_t len)
{
	const pb_stack *s = d->stack_table[stack];
	size_t off = 0;

	buf[0] = '\0';
	for (size_t i = 0; i < s->n_location_indices && off < len; i++) {
		const pb_location *l = d->location_table[s->location_indices[i]];
		const pb_any *type = attr_value(d, l->attribute_indices, l->n_attribute_indices,
						"profile.frame.type");
		const char *kind = is_string(type, "kernel")    ? "[k]"
				   : is_string(type, "native")  ? ""
				   : is_string(type, "cpython") ? "[py]"
								: "[?]";

		if (l->n_lines)
			off += snprintf(buf + off, len - off, "%s%s%s", i ? ";" : "",
					s_at(d, d->function_table[l->lines[0]->function_index]
							->name_strindex),
					kind);
		else
			off += snprintf(buf + off, len - off, "%s?%s+0x%llx%s", i ? ";" : "",
					s_at(d,
					     d->mapping_table[l->mapping_index]->filename_strindex),
					(unsigned long long)l->address, kind);
	}
}

static void test_encode(void)
{
	uint32_t fr[F_N];
	struct fp_profile *p = small_profile(fr);
	uint8_t *buf = NULL, *buf2 = NULL;
	size_t len = 0, len2 = 0;

	CHECK(p != NULL);
	if (!p)
		return;
	CHECK_EQ_INT(fp_otlp_encode(p, &resource, &buf, &len), 0);
	pb_request *r = unpack(buf, len);
	CHECK(r != NULL);
	if (!r)
		goto out;
	check_tables(r);
	const pb_dictionary *d = r->dictionary;

	/* Encoding is deterministic. */
	CHECK_EQ_INT(fp_otlp_encode(p, &resource, &buf2, &len2), 0);
	CHECK(len2 == len && buf2 && !memcmp(buf, buf2, len));

	/* One resource per service, sorted by name, each with its own profile. */
	static const char *services[] = { "app", "bash", "cache-7", "web-1" };
	static const int64_t totals[] = { 9, 8, 4, 3 };
	static const size_t nsamples[] = { 3, 2, 1, 2 };
	CHECK_EQ_INT(r->n_resource_profiles, 4);
	for (size_t i = 0; i < r->n_resource_profiles && i < 4; i++) {
		const pb_resource_profiles *rp = r->resource_profiles[i];
		const char *v;

		CHECK((v = resource_attr(rp, "service.name")) && !strcmp(v, services[i]));
		CHECK((v = resource_attr(rp, "host.name")) && !strcmp(v, "host-1"));
		CHECK((v = resource_attr(rp, "env")) && !strcmp(v, "prod"));
		CHECK((v = resource_attr(rp, "region")) && !strcmp(v, "eu-west"));
		/* Duplicate and empty label keys are left out. */
		CHECK_EQ_INT(rp->resource->n_attributes, 4);
		CHECK(rp->scope_profiles[0]->scope &&
		      !strcmp(rp->scope_profiles[0]->scope->name, "fleetprof"));

		const pb_profile *pr = only_profile(rp);
		CHECK(pr != NULL);
		if (!pr)
			continue;
		CHECK(!strcmp(s_at(d, pr->sample_type->type_strindex), "samples"));
		CHECK(!strcmp(s_at(d, pr->sample_type->unit_strindex), "count"));
		CHECK(!strcmp(s_at(d, pr->period_type->type_strindex), "cpu"));
		CHECK(!strcmp(s_at(d, pr->period_type->unit_strindex), "nanoseconds"));
		CHECK_EQ_INT(pr->period, PERIOD);
		CHECK(pr->time_unix_nano == START);
		CHECK(pr->duration_nano == DURATION);
		CHECK_EQ_INT(pr->profile_id.len, 16);
		if (i > 0)
			CHECK(memcmp(pr->profile_id.data,
				     only_profile(r->resource_profiles[i - 1])->profile_id.data,
				     16) != 0);
		CHECK_EQ_INT(pr->n_samples, nsamples[i]);

		int64_t total = 0;
		for (size_t j = 0; j < pr->n_samples; j++) {
			const pb_sample *s = pr->samples[j];
			const int32_t *ai = s->attribute_indices;
			size_t na = s->n_attribute_indices;
			const pb_any *ctr = attr_value(d, ai, na, "container.id");

			CHECK_EQ_INT(s->n_values, 1);
			if (s->n_values == 1)
				total += s->values[0];
			CHECK_EQ_INT(s->link_index, 0);
			/* Types: pid and tid integers, names strings. */
			const pb_any *pid = attr_value(d, ai, na, "process.pid");
			const pb_any *tid = attr_value(d, ai, na, "thread.id");
			CHECK(pid && pid->value_case == ANY_INT);
			CHECK(tid && tid->value_case == ANY_INT);
			CHECK(attr_value(d, ai, na, "process.executable.name") &&
			      attr_value(d, ai, na, "process.executable.name")->value_case ==
				      ANY_STRING);
			CHECK(attr_value(d, ai, na, "thread.name") &&
			      attr_value(d, ai, na, "thread.name")->value_case == ANY_STRING);
			if (i == 0 || i == 1)
				CHECK(ctr == NULL && na == 4);
			else
				CHECK(is_string(ctr, services[i]) && na == 5);
		}
		CHECK_EQ_INT(total, totals[i]);
	}

	/* The app worker's deep stack: frame types, unresolved libc frame. */
	const pb_profile *app = only_profile(r->resource_profiles[0]);
	int seen_deep = 0, seen_worker = 0;
	for (size_t j = 0; app && j < app->n_samples; j++) {
		const pb_sample *s = app->samples[j];
		const int32_t *ai = s->attribute_indices;
		size_t na = s->n_attribute_indices;
		char names[512];

		frame_names(d, s->stack_index, names, sizeof(names));
		if (is_int(attr_value(d, ai, na, "thread.id"), 101)) {
			seen_worker++;
			CHECK(is_int(attr_value(d, ai, na, "process.pid"), 100));
			CHECK(is_string(attr_value(d, ai, na, "thread.name"), "worker"));
			CHECK(is_string(attr_value(d, ai, na, "process.executable.name"), "app"));
		}
		if (s->values[0] == 1) {
			seen_deep++;
			if (strcmp(names, "schedule[k];?/lib/x86_64-linux-gnu/libc.so.6+0x2a2b0;"
					  "std::vector<int>::push_back;work;main")) {
				fprintf(stderr, "  got %s\n", names);
				CHECK(0);
			}
			const pb_location *push = d->location_table[d->stack_table[s->stack_index]
									    ->location_indices[2]];
			const pb_function *f = d->function_table[push->lines[0]->function_index];
			CHECK(!strcmp(s_at(d, f->system_name_strindex),
				      "_ZNSt6vectorIiSaIiEE9push_backERKi"));
			CHECK_EQ_INT(push->address, 0x1200);
		} else {
			CHECK(!strcmp(names, "work;main"));
		}
	}
	CHECK_EQ_INT(seen_deep, 1);
	CHECK_EQ_INT(seen_worker, 2);

	/* redis: a frame without mapping keeps its raw address; kernel unresolved. */
	const pb_profile *redis = only_profile(r->resource_profiles[2]);
	if (redis && redis->n_samples == 1) {
		char names[256];
		const pb_stack *st = d->stack_table[redis->samples[0]->stack_index];

		frame_names(d, redis->samples[0]->stack_index, names, sizeof(names));
		CHECK(!strcmp(names, "?vmlinux+0xabc[k];?+0x7f0000001234"));
		CHECK(st->n_location_indices == 2 &&
		      d->location_table[st->location_indices[1]]->mapping_index == 0);
	}

	/* bash: the empty stack is stack 0; the unresolved libnobid frame. */
	const pb_profile *bash = only_profile(r->resource_profiles[1]);
	int empty = 0;
	for (size_t j = 0; bash && j < bash->n_samples; j++) {
		char names[256];

		frame_names(d, bash->samples[j]->stack_index, names, sizeof(names));
		if (bash->samples[j]->stack_index == 0)
			empty += bash->samples[j]->values[0] == 2;
		else
			CHECK(!strcmp(names, "?/usr/lib/libnobid.so+0x10"));
	}
	CHECK_EQ_INT(empty, 1);

	/* nginx: user "schedule" and kernel "schedule" are distinct locations
	 * with one Function; frame types tell them apart. */
	const pb_profile *web = only_profile(r->resource_profiles[3]);
	int user_sched = 0;
	for (size_t j = 0; web && j < web->n_samples; j++) {
		char names[256];

		frame_names(d, web->samples[j]->stack_index, names, sizeof(names));
		user_sched += !strcmp(names, "schedule;work;main");
	}
	CHECK_EQ_INT(user_sched, 1);
	int sched_functions = 0;
	for (size_t i = 0; i < d->n_function_table; i++)
		sched_functions += !strcmp(s_at(d, d->function_table[i]->name_strindex),
					   "schedule");
	CHECK_EQ_INT(sched_functions, 1);

	/* Mappings: one per profile mapping (+ the zero one), with build-IDs. */
	CHECK_EQ_INT(d->n_mapping_table, 5);
	int with_id = 0;
	for (size_t i = 1; i < d->n_mapping_table; i++) {
		const pb_mapping *m = d->mapping_table[i];
		const char *file = s_at(d, m->filename_strindex);
		const pb_any *bid = attr_value(d, m->attribute_indices, m->n_attribute_indices,
					       "process.executable.build_id.gnu");

		if (!strcmp(file, "/usr/bin/app"))
			with_id += is_string(bid, "0102abcd");
		else if (!strcmp(file, "/lib/x86_64-linux-gnu/libc.so.6"))
			with_id += is_string(bid, "deadbeef");
		else if (!strcmp(file, "vmlinux"))
			with_id += is_string(bid, "0ff011");
		else
			CHECK(!strcmp(file, "/usr/lib/libnobid.so") && m->n_attribute_indices == 0);
	}
	CHECK_EQ_INT(with_id, 3);
	/* Every frame its own location (+ the zero one). */
	CHECK_EQ_INT(d->n_location_table, F_N + 1);
	/* Resolved frames: main, work, push_back, schedule (+ the zero one). */
	CHECK_EQ_INT(d->n_function_table, 5);
out:
	unpack_free(r);
	free(buf);
	free(buf2);
	fp_profile_free(p);
}

static void test_host_and_no_labels(void)
{
	uint32_t fr[F_N];
	struct fp_profile *p = small_profile(fr);
	struct fp_otlp_resource res = { .or_host = "override-host" };
	uint8_t *buf = NULL;
	size_t len = 0;

	CHECK(p != NULL);
	if (!p)
		return;
	CHECK_EQ_INT(fp_otlp_encode(p, &res, &buf, &len), 0);
	pb_request *r = unpack(buf, len);
	CHECK(r && r->n_resource_profiles == 4);
	for (size_t i = 0; r && i < r->n_resource_profiles; i++) {
		const char *h = resource_attr(r->resource_profiles[i], "host.name");
		CHECK(h && !strcmp(h, "override-host"));
		CHECK_EQ_INT(r->resource_profiles[i]->resource->n_attributes, 2);
	}
	unpack_free(r);
	free(buf);

	/* No resource description at all: the profile's host. */
	CHECK_EQ_INT(fp_otlp_encode(p, NULL, &buf, &len), 0);
	r = unpack(buf, len);
	CHECK(r && r->n_resource_profiles == 4);
	if (r && r->n_resource_profiles) {
		const char *h = resource_attr(r->resource_profiles[0], "host.name");
		CHECK(h && !strcmp(h, "host-1"));
		check_tables(r);
	}
	unpack_free(r);
	free(buf);
	fp_profile_free(p);
}

static void test_empty(void)
{
	struct fp_profile *p = NULL;
	uint8_t *buf = NULL;
	size_t len = 0;

	CHECK_EQ_INT(fp_profile_alloc(&p, "h", 0, 0, PERIOD), 0);
	if (!p)
		return;
	CHECK_EQ_INT(fp_otlp_encode(p, NULL, &buf, &len), 0);
	pb_request *r = unpack(buf, len);
	CHECK(r != NULL);
	if (r) {
		CHECK_EQ_INT(r->n_resource_profiles, 0);
		check_tables(r);
		/* Only the zero entries (and the fixed strings and frame types). */
		CHECK_EQ_INT(r->dictionary->n_mapping_table, 1);
		CHECK_EQ_INT(r->dictionary->n_location_table, 1);
		CHECK_EQ_INT(r->dictionary->n_function_table, 1);
		CHECK_EQ_INT(r->dictionary->n_stack_table, 1);
		CHECK_EQ_INT(r->dictionary->n_link_table, 1);
	}
	unpack_free(r);
	free(buf);
	CHECK_EQ_INT(fp_otlp_encode(NULL, NULL, &buf, &len), -EINVAL);
	fp_profile_free(p);
}

/* A larger profile: many samples sharing stacks and threads, so that every
 * table grows past its first allocation and deduplication does the work. */
static void test_large(void)
{
	struct fp_profile *p = NULL;
	uint32_t m, frames[64];
	uint8_t *buf = NULL;
	size_t len = 0;
	int err = 0;

	CHECK_EQ_INT(fp_profile_alloc(&p, "big", START, DURATION, PERIOD), 0);
	if (!p)
		return;
	err |= fp_profile_add_mapping(p, FP_MAP_USER, &app_id, "/usr/bin/big", &m);
	for (uint32_t i = 0; i < 64; i++) {
		char name[32];

		snprintf(name, sizeof(name), "fn_%u", i);
		err |= fp_profile_add_frame(p, m, 0x1000 + 16 * i, FP_FRAME_USER,
					    i % 8 ? name : NULL, NULL, &frames[i]);
	}
	for (uint32_t i = 0; i < 20000; i++) {
		uint32_t stack[8];
		char ctr[16], thread[16];

		for (int j = 0; j < 8; j++)
			stack[j] = frames[(i * 7 + (uint32_t)j * 13) % 64];
		ctr[0] = '\0';
		if (i % 3)
			snprintf(ctr, sizeof(ctr), "c%u", i % 5);
		snprintf(thread, sizeof(thread), "t%u", i % 11);
		err |= fp_profile_add_sample(p, stack, 1 + i % 8, 1000 + i % 50, 2000 + i % 97,
					     thread, "proc", ctr, 1 + i % 3);
	}
	CHECK_EQ_INT(err, 0);
	CHECK_EQ_INT(fp_otlp_encode(p, &resource, &buf, &len), 0);
	pb_request *r = unpack(buf, len);
	CHECK(r != NULL);
	if (r) {
		uint64_t total = 0, want = fp_profile_total(p);
		size_t nsamples = 0;

		CHECK_EQ_INT(r->n_resource_profiles, 6); /* c0..c4 and proc */
		for (size_t i = 0; i < r->n_resource_profiles; i++) {
			const pb_profile *pr = only_profile(r->resource_profiles[i]);
			for (size_t j = 0; pr && j < pr->n_samples; j++)
				total += (uint64_t)pr->samples[j]->values[0];
			nsamples += pr ? pr->n_samples : 0;
		}
		CHECK(total == want);
		CHECK_EQ_INT(nsamples, p->pr_nsamples);
		CHECK_EQ_INT(r->dictionary->n_location_table, 65);
		/* The pairwise duplicate check is quadratic but fine at this size. */
		check_tables(r);
	}
	unpack_free(r);
	free(buf);
	fp_profile_free(p);
}

/* Python frames: frame type "cpython", no mapping, address 0, one Line
 * with the line; the Function has the qualified name, the .py file and
 * the first line.  Two lines of one function share the Function. */
static void test_python(void)
{
	struct fp_profile *p = NULL;
	uint32_t py, kernel, fr[5];
	uint8_t *buf = NULL;
	size_t len = 0;
	int err = 0;

	CHECK_EQ_INT(fp_profile_alloc(&p, "host-py", 1700000000000000000ULL, 10000000000ULL,
				      PERIOD),
		     0);
	if (!p)
		return;
	err |= fp_profile_add_mapping(p, FP_MAP_USER, &app_id, "/usr/bin/python3.11", &py);
	err |= fp_profile_add_mapping(p, FP_MAP_KERNEL, &kernel_id, "vmlinux", &kernel);
	err |= fp_profile_add_frame(p, py, 0x1000, FP_FRAME_USER, "main", NULL, &fr[0]);
	err |= fp_profile_add_python_frame(p, "Worker.run", "/srv/app/w.py", 5, 3, &fr[1]);
	err |= fp_profile_add_python_frame(p, "work", "/srv/app/w.py", 21, 20, &fr[2]);
	err |= fp_profile_add_python_frame(p, "work", "/srv/app/w.py", 22, 20, &fr[3]);
	err |= fp_profile_add_frame(p, kernel, 0x40, FP_FRAME_KERNEL, "read", NULL, &fr[4]);
	uint32_t s1[] = { fr[2], fr[1], fr[0] }, s2[] = { fr[4], fr[3], fr[1], fr[0] };
	err |= fp_profile_add_sample(p, s1, 3, 400, 400, "py", "py", "", 6);
	err |= fp_profile_add_sample(p, s2, 4, 400, 400, "py", "py", "", 2);
	CHECK_EQ_INT(err, 0);
	CHECK_EQ_INT(fp_otlp_encode(p, NULL, &buf, &len), 0);
	pb_request *r = unpack(buf, len);
	CHECK(r != NULL);
	if (!r)
		goto out;
	check_tables(r);
	const pb_dictionary *d = r->dictionary;
	const pb_profile *prof = r->n_resource_profiles == 1 ? only_profile(r->resource_profiles[0])
							     : NULL;
	CHECK(prof != NULL && prof->n_samples == 2);
	int seen = 0;
	for (size_t j = 0; prof && j < prof->n_samples; j++) {
		const pb_sample *sm = prof->samples[j];
		const pb_stack *st = d->stack_table[sm->stack_index];
		char names[512];

		frame_names(d, sm->stack_index, names, sizeof(names));
		if (sm->values[0] == 6) {
			seen |= 1;
			if (strcmp(names, "work[py];Worker.run[py];main")) {
				fprintf(stderr, "  got %s\n", names);
				CHECK(0);
			}
		} else {
			seen |= 2;
			if (strcmp(names, "read[k];work[py];Worker.run[py];main")) {
				fprintf(stderr, "  got %s\n", names);
				CHECK(0);
			}
			if (st->n_location_indices != 4)
				continue;
			const pb_location *w = d->location_table[st->location_indices[1]];
			const pb_location *run = d->location_table[st->location_indices[2]];
			CHECK_EQ_INT(w->mapping_index, 0);
			CHECK_EQ_INT(w->address, 0);
			CHECK_EQ_INT(w->n_lines, 1);
			CHECK_EQ_INT(w->lines[0]->line, 22);
			CHECK_EQ_INT(run->lines[0]->line, 5);
			const pb_function *f = d->function_table[w->lines[0]->function_index];
			CHECK(!strcmp(s_at(d, f->name_strindex), "work"));
			CHECK(!strcmp(s_at(d, f->system_name_strindex), "work"));
			CHECK(!strcmp(s_at(d, f->filename_strindex), "/srv/app/w.py"));
			CHECK_EQ_INT(f->start_line, 20);
			f = d->function_table[run->lines[0]->function_index];
			CHECK(!strcmp(s_at(d, f->name_strindex), "Worker.run"));
			CHECK_EQ_INT(f->start_line, 3);
			/* work at line 21 (the other stack) is another Location of
			 * the same Function. */
			const pb_stack *other = d->stack_table[prof->samples[1 - j]->stack_index];
			const pb_location *w21 = d->location_table[other->location_indices[0]];
			CHECK(w21 != w);
			CHECK_EQ_INT(w21->lines[0]->line, 21);
			CHECK_EQ_INT(w21->lines[0]->function_index, w->lines[0]->function_index);
			/* The native frame keeps its mapping. */
			const pb_location *m = d->location_table[st->location_indices[3]];
			CHECK(m->mapping_index != 0);
			CHECK(!strcmp(s_at(d,
					   d->mapping_table[m->mapping_index]->filename_strindex),
				      "/usr/bin/python3.11"));
		}
	}
	CHECK_EQ_INT(seen, 3);
	unpack_free(r);
out:
	free(buf);
	fp_profile_free(p);
}

int main(void)
{
	RUN(test_encode);
	RUN(test_host_and_no_labels);
	RUN(test_empty);
	RUN(test_large);
	RUN(test_python);
	return CHECK_DONE();
}
