/* otlp.c: a profile as an OTLP Profiles ExportProfilesServiceRequest
 * (otlp.h; proto/otlp_profiles_service.proto), encoded with protobuf-c.
 *
 * Two passes.  The first walks mappings, frames and samples once and fills
 * the dictionary tables as compact keys, each deduplicated through a hash
 * set seeded with the table's zero entry (so an entry equal to the zero entry
 * becomes index 0, and none is added twice); a sample's attributes and
 * service are worked out once per distinct thread; then the samples are
 * sorted by service.  The second lays the protobuf-c messages over those keys, in
 * arrays allocated per kind, once nothing can move any more (interned
 * strings and table arrays are final), and packs the request.
 *
 * Representation choices:
 * - Frames map to Locations one to one unless two frames end up identical
 *   (same mapping, address, function and frame type; and line, for Python
 *   frames, whose address is 0).  A resolved frame has
 *   one Line; an unresolved one none, keeping its mapping and address, so a
 *   backend can symbolize it from the build-ID.
 * - Function names are the demangled names, system names the mangled ones
 *   (the demangled name again when there is none, as in the pprof output).
 *   Kernel functions carry no "_[k]" suffix: the location attribute
 *   profile.frame.type says which frames are the kernel's.
 * - profile.frame.type (semantic conventions' values): "kernel", "native",
 *   and "cpython" for Python frames.  Python frames have no Mapping (index
 *   0, the zero entry) and address 0; their one Line names a Function with
 *   the qualified name, the .py file and the code's first line
 *   (start_line), and carries the line.
 * - Attribute values are plain AnyValue strings and integers, each distinct
 *   (key, value) once in the attribute table; string values are not in the
 *   string table, which holds only what a *_strindex refers to.
 * - profile_id is derived from host, interval and service, so that encoding
 *   the same interval twice gives the same id (receivers may deduplicate).
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "intern.h"
#include "otlp.h"
#include "output.h"
#include "indexset.h"
#include "otlp_profiles_service.pb-c.h"
#include "vec.h"

#ifndef FP_VERSION
#define FP_VERSION "0"
#endif

typedef Opentelemetry__Proto__Collector__Profiles__V1development__ExportProfilesServiceRequest
	pb_request;
typedef Opentelemetry__Proto__Profiles__V1development__ProfilesDictionary pb_dictionary;
typedef Opentelemetry__Proto__Profiles__V1development__ResourceProfiles pb_resource_profiles;
typedef Opentelemetry__Proto__Profiles__V1development__ScopeProfiles pb_scope_profiles;
typedef Opentelemetry__Proto__Profiles__V1development__Profile pb_profile;
typedef Opentelemetry__Proto__Profiles__V1development__ValueType pb_value_type;
typedef Opentelemetry__Proto__Profiles__V1development__Sample pb_sample;
typedef Opentelemetry__Proto__Profiles__V1development__Mapping pb_mapping;
typedef Opentelemetry__Proto__Profiles__V1development__Location pb_location;
typedef Opentelemetry__Proto__Profiles__V1development__Line pb_line;
typedef Opentelemetry__Proto__Profiles__V1development__Function pb_function;
typedef Opentelemetry__Proto__Profiles__V1development__Stack pb_stack;
typedef Opentelemetry__Proto__Profiles__V1development__Link pb_link;
typedef Opentelemetry__Proto__Profiles__V1development__KeyValueAndUnit pb_kvu;
typedef Opentelemetry__Proto__Resource__V1__Resource pb_resource;
typedef Opentelemetry__Proto__Common__V1__InstrumentationScope pb_scope;
typedef Opentelemetry__Proto__Common__V1__KeyValue pb_kv;
typedef Opentelemetry__Proto__Common__V1__AnyValue pb_any;

#define ANY_STRING OPENTELEMETRY__PROTO__COMMON__V1__ANY_VALUE__VALUE_STRING_VALUE
#define ANY_INT OPENTELEMETRY__PROTO__COMMON__V1__ANY_VALUE__VALUE_INT_VALUE

/* Attribute names (OpenTelemetry semantic conventions). */
#define K_SERVICE "service.name"
#define K_HOST "host.name"
#define K_PID "process.pid"
#define K_EXE "process.executable.name"
#define K_TID "thread.id"
#define K_THREAD "thread.name"
#define K_CONTAINER "container.id"
#define K_BUILD_ID "process.executable.build_id.gnu"
#define K_FRAME_TYPE "profile.frame.type"

#define ATTRS_PER_SAMPLE 5
#define TABLE_MAX INT32_MAX /* indexes are int32 on the wire */

/* ---- the dictionary as keys ---- */

enum { ATTR_NONE, ATTR_STRING, ATTR_INT };

struct attr_key {
	int32_t key; /* string table index */
	uint8_t kind;
	int64_t value; /* the integer, or the id in en_values */
};

struct mapping_key {
	int32_t filename, build_id; /* string index, attribute index */
};

struct function_key {
	int32_t name, system_name, filename;
	int64_t start_line;
};

struct location_key {
	int32_t mapping, function, type; /* mapping, function, attribute index */
	uint64_t address;
	uint32_t py_line;            /* Python frames (address 0): the line */
	uint32_t first_line, nlines; /* in en->lines, not part of the identity */
};

struct line_entry {
	int32_t function;
	int64_t line;
};

struct stack_key {
	size_t offset; /* into en_stack_locs */
	uint32_t len;
};

struct group {
	uint32_t value; /* service name: id in en_values */
	const char *name;
	size_t first, n; /* its samples: en_order[first .. first + n) */
};

struct encoder {
	const struct fp_profile *p;
	struct fp_intern *strings; /* the string table */
	struct fp_intern *values;  /* distinct attribute string values */

	struct attr_key *attrs;
	size_t nattrs, cap_attrs;
	struct fp_indexset attr_set;

	struct mapping_key *mappings;
	size_t nmappings, cap_mappings;
	struct fp_indexset mapping_set;
	int32_t *mapping_of; /* per profile mapping */

	struct function_key *functions;
	size_t nfunctions, cap_functions;
	struct fp_indexset function_set;

	struct location_key *locations;
	size_t nlocations, cap_locations;
	struct line_entry *lines; /* per location, innermost function first */
	size_t nlines, cap_lines;
	struct fp_indexset location_set;
	int32_t *location_of; /* per profile frame */

	struct stack_key *stacks;
	size_t nstacks, cap_stacks;
	struct fp_indexset stack_set;
	int32_t *stack_locs; /* every stack's location indexes, concatenated */
	size_t nstack_locs, cap_stack_locs;

	struct fp_indexset thread_set; /* samples with distinct thread attributes */
	uint32_t *threads;             /* the first sample of each */
	size_t nthreads, cap_threads;

	int32_t *sample_stack; /* per profile sample */
	int32_t *sample_attrs; /* per profile sample, ATTRS_PER_SAMPLE each */
	uint8_t *sample_nattrs;
	uint32_t *sample_service; /* id in en_values */

	struct group *groups;
	size_t ngroups;
	size_t *order; /* sample indexes grouped by service */

	/* strings and attributes every encoding uses */
	int32_t s_samples, s_count, s_cpu, s_ns;
	int32_t k_pid, k_exe, k_tid, k_thread, k_container, k_build_id, k_frame_type;
	int32_t a_kernel, a_native, a_cpython;
};

/* str: the string table index of s.  0 or -ENOMEM / -EINVAL. */
static int str(struct encoder *en, const char *s, int32_t *index)
{
	uint32_t id;

	/* The key includes the NUL, so that keys are the strings themselves. */
	if (fp_intern_get(en->strings, s, strlen(s) + 1, &id, NULL))
		return -ENOMEM;
	if (id >= TABLE_MAX)
		return -EINVAL;
	*index = (int32_t)id;
	return 0;
}

static int attr_eq(const void *ctx, uint32_t i, const void *key)
{
	const struct attr_key *a = &((const struct encoder *)ctx)->attrs[i], *k = key;

	return a->key == k->key && a->kind == k->kind && a->value == k->value;
}

/* attr: the attribute table index of (key, value).  0 or a negative errno. */
static int attr(struct encoder *en, const struct attr_key *k, int32_t *index)
{
	uint32_t hash = fp_hash_finish(
		fp_hash_word(fp_hash_word(fp_hash_word(0, (uint64_t)k->key), k->kind),
			     (uint64_t)k->value));
	size_t slot;
	uint32_t found = fp_indexset_find(&en->attr_set, hash, attr_eq, en, k, &slot);

	if (found != UINT32_MAX) {
		*index = (int32_t)found;
		return 0;
	}
	if (en->nattrs >= TABLE_MAX)
		return -EINVAL;
	if (fp_vec_reserve(&en->attrs, &en->cap_attrs, en->nattrs + 1, sizeof(*en->attrs)))
		return -ENOMEM;
	if (fp_indexset_make_room(&en->attr_set, hash, &slot))
		return -ENOMEM;
	en->attrs[en->nattrs] = *k;
	fp_indexset_insert(&en->attr_set, slot, hash, (uint32_t)en->nattrs);
	*index = (int32_t)en->nattrs++;
	return 0;
}

static int attr_int(struct encoder *en, int32_t key, int64_t value, int32_t *index)
{
	struct attr_key k = { key, ATTR_INT, value };

	return attr(en, &k, index);
}

/* value_id: the id of s in en_values (attribute and resource strings). */
static int value_id(struct encoder *en, const char *s, size_t len, uint32_t *id)
{
	char buf[256];

	/* Keys end in a NUL, so that they can be used as C strings. */
	if (len < sizeof(buf)) {
		memcpy(buf, s, len);
		buf[len] = '\0';
		return fp_intern_get(en->values, buf, len + 1, id, NULL) ? -ENOMEM : 0;
	}
	char *copy = strndup(s, len);
	if (!copy)
		return -ENOMEM;
	int err = fp_intern_get(en->values, copy, len + 1, id, NULL) ? -ENOMEM : 0;
	free(copy);
	return err;
}

/* attr_value: the attribute table index of (key, the string of id). */
static int attr_value(struct encoder *en, int32_t key, uint32_t id, int32_t *index)
{
	struct attr_key k = { key, ATTR_STRING, id };

	return attr(en, &k, index);
}

static int attr_string(struct encoder *en, int32_t key, const char *s, size_t len, int32_t *index)
{
	uint32_t id;
	int err = value_id(en, s, len, &id);

	return err ? err : attr_value(en, key, id, index);
}

static int mapping_eq(const void *ctx, uint32_t i, const void *key)
{
	const struct mapping_key *m = &((const struct encoder *)ctx)->mappings[i], *k = key;

	return m->filename == k->filename && m->build_id == k->build_id;
}

static int mapping(struct encoder *en, const struct mapping_key *k, int32_t *index)
{
	uint32_t hash = fp_hash_finish(
		fp_hash_word(fp_hash_word(1, (uint64_t)k->filename), (uint64_t)k->build_id));
	size_t slot;
	uint32_t found = fp_indexset_find(&en->mapping_set, hash, mapping_eq, en, k, &slot);

	if (found == UINT32_MAX) {
		if (en->nmappings >= TABLE_MAX)
			return -EINVAL;
		if (fp_vec_reserve(&en->mappings, &en->cap_mappings, en->nmappings + 1,
				   sizeof(*en->mappings)) ||
		    fp_indexset_make_room(&en->mapping_set, hash, &slot))
			return -ENOMEM;
		en->mappings[en->nmappings] = *k;
		fp_indexset_insert(&en->mapping_set, slot, hash, (uint32_t)en->nmappings);
		found = (uint32_t)en->nmappings++;
	}
	*index = (int32_t)found;
	return 0;
}

static int function_eq(const void *ctx, uint32_t i, const void *key)
{
	const struct function_key *f = &((const struct encoder *)ctx)->functions[i], *k = key;

	return f->name == k->name && f->system_name == k->system_name &&
	       f->filename == k->filename && f->start_line == k->start_line;
}

static int function(struct encoder *en, const struct function_key *k, int32_t *index)
{
	uint32_t hash = fp_hash_finish(
		fp_hash_word(fp_hash_word(fp_hash_word(fp_hash_word(2, (uint64_t)k->name),
						       (uint64_t)k->system_name),
					  (uint64_t)k->filename),
			     (uint64_t)k->start_line));
	size_t slot;
	uint32_t found = fp_indexset_find(&en->function_set, hash, function_eq, en, k, &slot);

	if (found == UINT32_MAX) {
		if (en->nfunctions >= TABLE_MAX)
			return -EINVAL;
		if (fp_vec_reserve(&en->functions, &en->cap_functions, en->nfunctions + 1,
				   sizeof(*en->functions)) ||
		    fp_indexset_make_room(&en->function_set, hash, &slot))
			return -ENOMEM;
		en->functions[en->nfunctions] = *k;
		fp_indexset_insert(&en->function_set, slot, hash, (uint32_t)en->nfunctions);
		found = (uint32_t)en->nfunctions++;
	}
	*index = (int32_t)found;
	return 0;
}

static int location_eq(const void *ctx, uint32_t i, const void *key)
{
	const struct location_key *l = &((const struct encoder *)ctx)->locations[i], *k = key;

	return l->mapping == k->mapping && l->function == k->function && l->type == k->type &&
	       l->address == k->address && l->py_line == k->py_line;
}

static int location(struct encoder *en, const struct location_key *k, int32_t *index)
{
	/* Keyed: agents choose the addresses. */
	struct {
		uint64_t address;
		int32_t mapping, function, type;
		uint32_t py_line;
	} hkey = { k->address, k->mapping, k->function, k->type, k->py_line };
	uint32_t hash = (uint32_t)fp_hash(&hkey, sizeof(hkey));
	size_t slot;
	uint32_t found = fp_indexset_find(&en->location_set, hash, location_eq, en, k, &slot);

	if (found == UINT32_MAX) {
		if (en->nlocations >= TABLE_MAX)
			return -EINVAL;
		if (fp_vec_reserve(&en->locations, &en->cap_locations, en->nlocations + 1,
				   sizeof(*en->locations)) ||
		    fp_indexset_make_room(&en->location_set, hash, &slot))
			return -ENOMEM;
		en->locations[en->nlocations] = *k;
		fp_indexset_insert(&en->location_set, slot, hash, (uint32_t)en->nlocations);
		found = (uint32_t)en->nlocations++;
	}
	*index = (int32_t)found;
	return 0;
}

static int stack_eq(const void *ctx, uint32_t i, const void *key)
{
	const struct encoder *en = ctx;
	const struct stack_key *s = &en->stacks[i], *k = key;

	if (s->len != k->len)
		return 0;
	return !k->len || !memcmp(&en->stack_locs[s->offset], &en->stack_locs[k->offset],
				  k->len * sizeof(*en->stack_locs));
}

/* stack: the stack table index of the len location indexes just appended at
 * en_stack_locs[offset]; they are taken back off if the stack exists. */
static int stack(struct encoder *en, size_t offset, uint32_t len, int32_t *index)
{
	struct stack_key k = { offset, len };
	uint64_t h = 4;
	size_t slot;

	for (uint32_t i = 0; i < len; i++)
		h = fp_hash_word(h, (uint64_t)en->stack_locs[offset + i]);
	uint32_t hash = fp_hash_finish(fp_hash_word(h, len));
	uint32_t found = fp_indexset_find(&en->stack_set, hash, stack_eq, en, &k, &slot);

	if (found != UINT32_MAX) {
		en->nstack_locs = offset;
		*index = (int32_t)found;
		return 0;
	}
	if (en->nstacks >= TABLE_MAX)
		return -EINVAL;
	if (fp_vec_reserve(&en->stacks, &en->cap_stacks, en->nstacks + 1, sizeof(*en->stacks)) ||
	    fp_indexset_make_room(&en->stack_set, hash, &slot))
		return -ENOMEM;
	en->stacks[en->nstacks] = k;
	fp_indexset_insert(&en->stack_set, slot, hash, (uint32_t)en->nstacks);
	*index = (int32_t)en->nstacks++;
	return 0;
}

/* ---- pass 1: the dictionary and the samples' references into it ---- */

static int add_zero_entries(struct encoder *en)
{
	struct attr_key a = { 0 };
	struct mapping_key m = { 0 };
	struct function_key f = { 0 };
	struct location_key l = { 0 };
	int32_t i, empty;
	int err;

	if ((err = str(en, "", &empty)) || (err = attr(en, &a, &i)) ||
	    (err = mapping(en, &m, &i)) || (err = function(en, &f, &i)) ||
	    (err = location(en, &l, &i)) || (err = stack(en, 0, 0, &i)))
		return err;
	return 0;
}

static int add_common(struct encoder *en)
{
	int err;

	/* an off-CPU profile: its samples' values are time away, ns */
	int off = en->p->pr_is_offcpu;

	if ((err = str(en, off ? "off_cpu" : "samples", &en->s_samples)) ||
	    (err = str(en, off ? "nanoseconds" : "count", &en->s_count)) ||
	    (err = str(en, off ? "off_cpu" : "cpu", &en->s_cpu)) ||
	    (err = str(en, "nanoseconds", &en->s_ns)) || (err = str(en, K_PID, &en->k_pid)) ||
	    (err = str(en, K_EXE, &en->k_exe)) || (err = str(en, K_TID, &en->k_tid)) ||
	    (err = str(en, K_THREAD, &en->k_thread)) ||
	    (err = str(en, K_CONTAINER, &en->k_container)) ||
	    (err = str(en, K_BUILD_ID, &en->k_build_id)) ||
	    (err = str(en, K_FRAME_TYPE, &en->k_frame_type)))
		return err;
	if ((err = attr_string(en, en->k_frame_type, "kernel", 6, &en->a_kernel)) ||
	    (err = attr_string(en, en->k_frame_type, "native", 6, &en->a_native)) ||
	    (err = attr_string(en, en->k_frame_type, "cpython", 7, &en->a_cpython)))
		return err;
	return 0;
}

static int add_mappings(struct encoder *en)
{
	const struct fp_profile *p = en->p;
	char buf[2 * FP_BUILD_ID_MAX + 1];
	int err;

	for (size_t i = 0; i < p->pr_nmappings; i++) {
		const struct fp_pmapping *pm = &p->pr_mappings[i];
		struct mapping_key k = { 0 };

		if ((err = str(en, pm->pm_path ? pm->pm_path : "", &k.filename)))
			return err;
		if (pm->pm_build_id.fb_len) {
			fp_build_id_hex(&pm->pm_build_id, buf);
			if ((err = attr_string(en, en->k_build_id, buf, strlen(buf), &k.build_id)))
				return err;
		}
		if ((err = mapping(en, &k, &en->mapping_of[i])))
			return err;
	}
	return 0;
}

/* add_line: one Line of the location being built: a function and its line. */
static int add_line(struct encoder *en, const char *name, const char *system_name, const char *file,
		    uint32_t line, uint32_t start_line, int32_t *function_index)
{
	struct function_key fk = { 0 };

	fk.start_line = start_line;
	int err;

	if ((err = str(en, name, &fk.name)))
		return err;
	fk.system_name = fk.name;
	if ((system_name && system_name[0] && (err = str(en, system_name, &fk.system_name))) ||
	    (file && (err = str(en, file, &fk.filename))) ||
	    (err = function(en, &fk, function_index)))
		return err;
	if (fp_vec_reserve(&en->lines, &en->cap_lines, en->nlines + 1, sizeof(*en->lines)))
		return -ENOMEM;
	en->lines[en->nlines++] = (struct line_entry){ *function_index, line };
	return 0;
}

static int add_frames(struct encoder *en)
{
	const struct fp_profile *p = en->p;
	int err;

	for (size_t i = 0; i < p->pr_nframes; i++) {
		const struct fp_pframe *f = &p->pr_frames[i];
		struct location_key k = { 0 };
		int32_t fn;

		k.mapping = f->pf_mapping < p->pr_nmappings ? en->mapping_of[f->pf_mapping] : 0;
		k.address = f->pf_address;
		/* Python frames differ by line, not by address. */
		k.py_line = f->pf_kind == FP_FRAME_PYTHON ? f->pf_line : 0;
		k.type = f->pf_kind == FP_FRAME_KERNEL   ? en->a_kernel
			 : f->pf_kind == FP_FRAME_PYTHON ? en->a_cpython
							 : en->a_native;
		k.first_line = (uint32_t)en->nlines;
		if (f->pf_function && f->pf_function[0]) {
			/* Lines: the functions inlined here, innermost first, then
			 * the function the code belongs to. */
			for (uint32_t j = 0; j < f->pf_ninline; j++) {
				const struct fp_pinline *in = &f->pf_inline[j];
				if ((err = add_line(en, in->pi_function, in->pi_system_name,
						    in->pi_file, in->pi_line, 0, &fn)))
					return err;
			}
			if ((err = add_line(en, f->pf_function, f->pf_system_name, f->pf_file,
					    f->pf_line, f->pf_start_line, &k.function)))
				return err;
		}
		k.nlines = (uint32_t)en->nlines - k.first_line;
		if ((err = location(en, &k, &en->location_of[i])))
			return err;
	}
	return 0;
}

static const char *container_of(const struct fp_psample *s)
{
	return s->ps_container ? s->ps_container : "";
}

/* same_thread: do samples a and b have the same attributes and service? */
static int same_thread(const struct fp_psample *a, const struct fp_psample *b)
{
	return a->ps_pid == b->ps_pid && a->ps_tid == b->ps_tid &&
	       !strncmp(a->ps_process, b->ps_process, FP_COMM_LEN) &&
	       !strncmp(a->ps_thread, b->ps_thread, FP_COMM_LEN) &&
	       !strcmp(container_of(a), container_of(b));
}

static int thread_eq(const void *ctx, uint32_t i, const void *key)
{
	const struct encoder *en = ctx;

	return same_thread(&en->p->pr_samples[en->threads[i]], key);
}

/* sample_thread: the attributes and service of sample i, worked out once
 * per distinct thread (pid, tid, names, container) and copied after that. */
static int sample_thread(struct encoder *en, size_t i, size_t *last)
{
	const struct fp_psample *s = &en->p->pr_samples[i];
	int32_t *a = &en->sample_attrs[i * ATTRS_PER_SAMPLE];
	const char *ctr = container_of(s);
	size_t plen = strnlen(s->ps_process, FP_COMM_LEN);
	size_t tlen = strnlen(s->ps_thread, FP_COMM_LEN), na = 0, from = SIZE_MAX, slot;
	uint32_t process = 0, container = 0, thread;
	int err;

	/* The previous sample's thread (the common case), or an earlier one. */
	if (*last != SIZE_MAX && same_thread(&en->p->pr_samples[*last], s)) {
		from = *last;
	} else {
		uint64_t h = fp_hash_word(fp_hash_word(5, s->ps_pid), s->ps_tid);

		h = fp_hash_word(h, fp_hash(s->ps_process, plen));
		h = fp_hash_word(h, fp_hash(s->ps_thread, tlen));
		uint32_t hash = fp_hash_finish(fp_hash_word(h, fp_hash(ctr, strlen(ctr))));
		uint32_t found = fp_indexset_find(&en->thread_set, hash, thread_eq, en, s, &slot);

		if (found != UINT32_MAX) {
			from = en->threads[found];
		} else {
			if (fp_vec_reserve(&en->threads, &en->cap_threads, en->nthreads + 1,
					   sizeof(*en->threads)) ||
			    fp_indexset_make_room(&en->thread_set, hash, &slot))
				return -ENOMEM;
			en->threads[en->nthreads] = (uint32_t)i;
			fp_indexset_insert(&en->thread_set, slot, hash, (uint32_t)en->nthreads++);
		}
	}
	*last = i;
	if (from != SIZE_MAX) {
		memcpy(a, &en->sample_attrs[from * ATTRS_PER_SAMPLE],
		       ATTRS_PER_SAMPLE * sizeof(*a));
		en->sample_nattrs[i] = en->sample_nattrs[from];
		en->sample_service[i] = en->sample_service[from];
		return 0;
	}

	if ((err = attr_int(en, en->k_pid, s->ps_pid, &a[na++])))
		return err;
	if (plen && ((err = value_id(en, s->ps_process, plen, &process)) ||
		     (err = attr_value(en, en->k_exe, process, &a[na++]))))
		return err;
	if ((err = attr_int(en, en->k_tid, s->ps_tid, &a[na++])))
		return err;
	if (tlen && ((err = value_id(en, s->ps_thread, tlen, &thread)) ||
		     (err = attr_value(en, en->k_thread, thread, &a[na++]))))
		return err;
	if (ctr[0] && ((err = value_id(en, ctr, strlen(ctr), &container)) ||
		       (err = attr_value(en, en->k_container, container, &a[na++]))))
		return err;
	en->sample_nattrs[i] = (uint8_t)na;

	/* service.name: the container, else the process. */
	if (ctr[0])
		en->sample_service[i] = container;
	else if (plen)
		en->sample_service[i] = process;
	else if ((err = value_id(en, "unknown_service", 15, &en->sample_service[i])))
		return err;
	return 0;
}

static int add_samples(struct encoder *en)
{
	const struct fp_profile *p = en->p;
	size_t last = SIZE_MAX;
	int err;

	for (size_t i = 0; i < p->pr_nsamples; i++) {
		const struct fp_psample *s = &p->pr_samples[i];
		size_t offset = en->nstack_locs;

		/* The stack: its location indexes appended, then interned. */
		if (fp_vec_reserve(&en->stack_locs, &en->cap_stack_locs,
				   en->nstack_locs + s->ps_nframes, sizeof(*en->stack_locs)))
			return -ENOMEM;
		for (uint32_t j = 0; j < s->ps_nframes; j++) {
			uint32_t fr = s->ps_frames[j];

			if (fr >= p->pr_nframes)
				return -EINVAL;
			en->stack_locs[en->nstack_locs++] = en->location_of[fr];
		}
		if ((err = stack(en, offset, s->ps_nframes, &en->sample_stack[i])) ||
		    (err = sample_thread(en, i, &last)))
			return err;
	}
	return 0;
}

static int group_cmp(const void *a, const void *b)
{
	return strcmp(((const struct group *)a)->name, ((const struct group *)b)->name);
}

/* group_samples: one group per service, sorted by name; en_order lists the
 * samples group after group. */
static int group_samples(struct encoder *en)
{
	size_t n = en->p->pr_nsamples, nvalues = fp_intern_count(en->values), len;
	uint32_t *group_of = malloc((nvalues ? nvalues : 1) * sizeof(*group_of));
	size_t *next = NULL;
	int err = -ENOMEM;

	en->groups = calloc(n ? n : 1, sizeof(*en->groups));
	en->order = malloc((n ? n : 1) * sizeof(*en->order));
	if (!group_of || !en->groups || !en->order)
		goto out;
	memset(group_of, 0xff, (nvalues ? nvalues : 1) * sizeof(*group_of));
	for (size_t i = 0; i < n; i++) {
		uint32_t v = en->sample_service[i];

		if (group_of[v] == UINT32_MAX) {
			struct group *g = &en->groups[en->ngroups];

			g->value = v;
			g->name = fp_intern_key(en->values, v, &len);
			group_of[v] = (uint32_t)en->ngroups++;
		}
		en->groups[group_of[v]].n++;
	}
	qsort(en->groups, en->ngroups, sizeof(*en->groups), group_cmp);
	next = malloc((en->ngroups ? en->ngroups : 1) * sizeof(*next));
	if (!next)
		goto out;
	for (size_t g = 0, first = 0; g < en->ngroups; g++) {
		group_of[en->groups[g].value] = (uint32_t)g;
		en->groups[g].first = next[g] = first;
		first += en->groups[g].n;
	}
	for (size_t i = 0; i < n; i++)
		en->order[next[group_of[en->sample_service[i]]]++] = i;
	err = 0;
out:
	free(next);
	free(group_of);
	return err;
}

/* ---- pass 2: the messages ---- */

/* Everything the request points to, allocated per kind. */
struct tree {
	char **strings;
	pb_kvu *attrs, **attr_ptrs;
	pb_any *attr_values;
	pb_mapping *mappings, **mapping_ptrs;
	int32_t *mapping_attrs;
	pb_function *functions, **function_ptrs;
	pb_location *locations, **location_ptrs;
	pb_line *lines, **line_ptrs;
	int32_t *location_attrs;
	pb_stack *stacks, **stack_ptrs;
	pb_link link, *link_ptr;
	pb_sample *samples, **sample_ptrs;
	int64_t *values;
	pb_value_type sample_type, period_type;
	pb_scope scope;
	pb_profile *profiles, **profile_ptrs;
	uint8_t *profile_ids;
	pb_scope_profiles *scopes, **scope_ptrs;
	pb_resource_profiles *rps, **rp_ptrs;
	pb_resource *resources;
	pb_kv *kvs, **kv_ptrs;
	pb_any *kv_values;
	pb_dictionary dict;
	pb_request req;
};

static void tree_free(struct tree *t)
{
	free(t->strings);
	free(t->attrs);
	free(t->attr_ptrs);
	free(t->attr_values);
	free(t->mappings);
	free(t->mapping_ptrs);
	free(t->mapping_attrs);
	free(t->functions);
	free(t->function_ptrs);
	free(t->locations);
	free(t->location_ptrs);
	free(t->lines);
	free(t->line_ptrs);
	free(t->location_attrs);
	free(t->stacks);
	free(t->stack_ptrs);
	free(t->samples);
	free(t->sample_ptrs);
	free(t->values);
	free(t->profiles);
	free(t->profile_ptrs);
	free(t->profile_ids);
	free(t->scopes);
	free(t->scope_ptrs);
	free(t->rps);
	free(t->rp_ptrs);
	free(t->resources);
	free(t->kvs);
	free(t->kv_ptrs);
	free(t->kv_values);
}

/* calloc of n elements, never NULL for n == 0 so that failure is obvious. */
static void *alloc_n(size_t n, size_t size)
{
	return calloc(n ? n : 1, size);
}

static int build_dictionary(struct encoder *en, struct tree *t)
{
	size_t nstrings = fp_intern_count(en->strings), len;

	if (nstrings > TABLE_MAX)
		return -EINVAL;
	t->strings = alloc_n(nstrings, sizeof(*t->strings));
	t->attrs = alloc_n(en->nattrs, sizeof(*t->attrs));
	t->attr_ptrs = alloc_n(en->nattrs, sizeof(*t->attr_ptrs));
	t->attr_values = alloc_n(en->nattrs, sizeof(*t->attr_values));
	t->mappings = alloc_n(en->nmappings, sizeof(*t->mappings));
	t->mapping_ptrs = alloc_n(en->nmappings, sizeof(*t->mapping_ptrs));
	t->mapping_attrs = alloc_n(en->nmappings, sizeof(*t->mapping_attrs));
	t->functions = alloc_n(en->nfunctions, sizeof(*t->functions));
	t->function_ptrs = alloc_n(en->nfunctions, sizeof(*t->function_ptrs));
	t->locations = alloc_n(en->nlocations, sizeof(*t->locations));
	t->location_ptrs = alloc_n(en->nlocations, sizeof(*t->location_ptrs));
	t->lines = alloc_n(en->nlines, sizeof(*t->lines));
	t->line_ptrs = alloc_n(en->nlines, sizeof(*t->line_ptrs));
	t->location_attrs = alloc_n(en->nlocations, sizeof(*t->location_attrs));
	t->stacks = alloc_n(en->nstacks, sizeof(*t->stacks));
	t->stack_ptrs = alloc_n(en->nstacks, sizeof(*t->stack_ptrs));
	if (!t->strings || !t->attrs || !t->attr_ptrs || !t->attr_values || !t->mappings ||
	    !t->mapping_ptrs || !t->mapping_attrs || !t->functions || !t->function_ptrs ||
	    !t->locations || !t->location_ptrs || !t->lines || !t->line_ptrs ||
	    !t->location_attrs || !t->stacks || !t->stack_ptrs)
		return -ENOMEM;

	for (size_t i = 0; i < nstrings; i++)
		t->strings[i] = (char *)fp_intern_key(en->strings, (uint32_t)i, &len);

	for (size_t i = 0; i < en->nattrs; i++) {
		const struct attr_key *k = &en->attrs[i];
		pb_kvu *a = &t->attrs[i];
		pb_any *v = &t->attr_values[i];

		opentelemetry__proto__profiles__v1development__key_value_and_unit__init(a);
		opentelemetry__proto__common__v1__any_value__init(v);
		a->key_strindex = k->key;
		if (k->kind == ATTR_STRING) {
			v->value_case = ANY_STRING;
			v->string_value = (char *)fp_intern_key(en->values, (uint32_t)k->value,
								&len);
			a->value = v;
		} else if (k->kind == ATTR_INT) {
			v->value_case = ANY_INT;
			v->int_value = k->value;
			a->value = v;
		}
		t->attr_ptrs[i] = a;
	}

	for (size_t i = 0; i < en->nmappings; i++) {
		const struct mapping_key *k = &en->mappings[i];
		pb_mapping *m = &t->mappings[i];

		opentelemetry__proto__profiles__v1development__mapping__init(m);
		m->filename_strindex = k->filename;
		if (k->build_id) {
			t->mapping_attrs[i] = k->build_id;
			m->n_attribute_indices = 1;
			m->attribute_indices = &t->mapping_attrs[i];
		}
		t->mapping_ptrs[i] = m;
	}

	for (size_t i = 0; i < en->nfunctions; i++) {
		pb_function *f = &t->functions[i];

		opentelemetry__proto__profiles__v1development__function__init(f);
		f->name_strindex = en->functions[i].name;
		f->system_name_strindex = en->functions[i].system_name;
		f->filename_strindex = en->functions[i].filename;
		f->start_line = en->functions[i].start_line;
		t->function_ptrs[i] = f;
	}

	for (size_t i = 0; i < en->nlocations; i++) {
		const struct location_key *k = &en->locations[i];
		pb_location *l = &t->locations[i];

		opentelemetry__proto__profiles__v1development__location__init(l);
		l->mapping_index = k->mapping;
		l->address = k->address;
		for (uint32_t j = 0; j < k->nlines; j++) {
			const struct line_entry *e = &en->lines[k->first_line + j];
			pb_line *line = &t->lines[k->first_line + j];

			opentelemetry__proto__profiles__v1development__line__init(line);
			line->function_index = e->function;
			line->line = e->line;
			t->line_ptrs[k->first_line + j] = line;
		}
		if (k->nlines) {
			l->n_lines = k->nlines;
			l->lines = &t->line_ptrs[k->first_line];
		}
		if (k->type) {
			t->location_attrs[i] = k->type;
			l->n_attribute_indices = 1;
			l->attribute_indices = &t->location_attrs[i];
		}
		t->location_ptrs[i] = l;
	}

	for (size_t i = 0; i < en->nstacks; i++) {
		pb_stack *s = &t->stacks[i];

		opentelemetry__proto__profiles__v1development__stack__init(s);
		s->n_location_indices = en->stacks[i].len;
		s->location_indices = en->stacks[i].len ? &en->stack_locs[en->stacks[i].offset]
							: NULL;
		t->stack_ptrs[i] = s;
	}

	opentelemetry__proto__profiles__v1development__link__init(&t->link);
	t->link_ptr = &t->link;

	pb_dictionary *d = &t->dict;
	opentelemetry__proto__profiles__v1development__profiles_dictionary__init(d);
	d->n_mapping_table = en->nmappings;
	d->mapping_table = t->mapping_ptrs;
	d->n_location_table = en->nlocations;
	d->location_table = t->location_ptrs;
	d->n_function_table = en->nfunctions;
	d->function_table = t->function_ptrs;
	d->n_link_table = 1;
	d->link_table = &t->link_ptr;
	d->n_string_table = nstrings;
	d->string_table = t->strings;
	d->n_attribute_table = en->nattrs;
	d->attribute_table = t->attr_ptrs;
	d->n_stack_table = en->nstacks;
	d->stack_table = t->stack_ptrs;
	return 0;
}

static int64_t clamp64(uint64_t v)
{
	return v > (uint64_t)INT64_MAX ? INT64_MAX : (int64_t)v;
}

/* profile_id: 16 bytes from host, interval and service; never all zero. */
static void profile_id(const struct fp_profile *p, const char *host, const char *service,
		       uint8_t *id)
{
	uint64_t h[2] = { 0x6f746c7066706964ULL, 0x9ae16a3b2f90404fULL };

	for (int k = 0; k < 2; k++) {
		const char *parts[2] = { host, service };

		for (int j = 0; j < 2; j++)
			for (const unsigned char *c = (const unsigned char *)parts[j]; *c; c++)
				h[k] = fp_hash_word(h[k], *c);
		h[k] = fp_hash_word(fp_hash_word(fp_hash_word(h[k], 0xff), p->pr_start_ns),
				    p->pr_duration_ns);
		h[k] ^= h[k] >> 31;
	}
	if (!h[0] && !h[1])
		h[0] = 1;
	for (int i = 0; i < 8; i++) {
		id[i] = (uint8_t)(h[0] >> (8 * i));
		id[8 + i] = (uint8_t)(h[1] >> (8 * i));
	}
}

static void set_string(pb_kv *kv, pb_any *v, const char *key, const char *value)
{
	opentelemetry__proto__common__v1__key_value__init(kv);
	opentelemetry__proto__common__v1__any_value__init(v);
	kv->key = (char *)key;
	v->value_case = ANY_STRING;
	v->string_value = (char *)value;
	kv->value = v;
}

static int build_resources(struct encoder *en, const struct fp_otlp_resource *res, struct tree *t)
{
	const struct fp_profile *p = en->p;
	size_t ng = en->ngroups, n = p->pr_nsamples;
	size_t nlabels = res && res->or_label_keys && res->or_label_values ? res->or_nlabels : 0;
	size_t per = 2 + nlabels;
	const char *host = res && res->or_host ? res->or_host : p->pr_host ? p->pr_host : "";

	if (nlabels > SIZE_MAX / sizeof(pb_kv) / 2 / (ng ? ng : 1))
		return -ENOMEM;
	t->samples = alloc_n(n, sizeof(*t->samples));
	t->sample_ptrs = alloc_n(n, sizeof(*t->sample_ptrs));
	t->values = alloc_n(n, sizeof(*t->values));
	t->profiles = alloc_n(ng, sizeof(*t->profiles));
	t->profile_ptrs = alloc_n(ng, sizeof(*t->profile_ptrs));
	t->profile_ids = alloc_n(ng, 16);
	t->scopes = alloc_n(ng, sizeof(*t->scopes));
	t->scope_ptrs = alloc_n(ng, sizeof(*t->scope_ptrs));
	t->rps = alloc_n(ng, sizeof(*t->rps));
	t->rp_ptrs = alloc_n(ng, sizeof(*t->rp_ptrs));
	t->resources = alloc_n(ng, sizeof(*t->resources));
	t->kvs = alloc_n(ng * per, sizeof(*t->kvs));
	t->kv_ptrs = alloc_n(ng * per, sizeof(*t->kv_ptrs));
	t->kv_values = alloc_n(ng * per, sizeof(*t->kv_values));
	if (!t->samples || !t->sample_ptrs || !t->values || !t->profiles || !t->profile_ptrs ||
	    !t->profile_ids || !t->scopes || !t->scope_ptrs || !t->rps || !t->rp_ptrs ||
	    !t->resources || !t->kvs || !t->kv_ptrs || !t->kv_values)
		return -ENOMEM;

	/* Samples, in group order so that each profile's are one slice. */
	for (size_t j = 0; j < n; j++) {
		size_t i = en->order[j];
		pb_sample *s = &t->samples[i];

		opentelemetry__proto__profiles__v1development__sample__init(s);
		s->stack_index = en->sample_stack[i];
		s->n_attribute_indices = en->sample_nattrs[i];
		s->attribute_indices = &en->sample_attrs[i * ATTRS_PER_SAMPLE];
		t->values[i] = clamp64(p->pr_samples[i].ps_count);
		s->n_values = 1;
		s->values = &t->values[i];
		t->sample_ptrs[j] = s;
	}

	opentelemetry__proto__profiles__v1development__value_type__init(&t->sample_type);
	t->sample_type.type_strindex = en->s_samples;
	t->sample_type.unit_strindex = en->s_count;
	opentelemetry__proto__profiles__v1development__value_type__init(&t->period_type);
	t->period_type.type_strindex = en->s_cpu;
	t->period_type.unit_strindex = en->s_ns;
	opentelemetry__proto__common__v1__instrumentation_scope__init(&t->scope);
	t->scope.name = "fleetprof";
	t->scope.version = FP_VERSION;

	for (size_t g = 0; g < ng; g++) {
		const struct group *gr = &en->groups[g];
		pb_profile *pr = &t->profiles[g];
		pb_scope_profiles *sp = &t->scopes[g];
		pb_resource_profiles *rp = &t->rps[g];
		pb_resource *r = &t->resources[g];
		pb_kv *kv = &t->kvs[g * per];
		pb_kv **kvp = &t->kv_ptrs[g * per];
		pb_any *v = &t->kv_values[g * per];
		size_t nkv = 0;

		opentelemetry__proto__profiles__v1development__profile__init(pr);
		pr->sample_type = &t->sample_type;
		pr->n_samples = gr->n;
		pr->samples = &t->sample_ptrs[gr->first];
		pr->time_unix_nano = p->pr_start_ns;
		pr->duration_nano = p->pr_duration_ns;
		pr->period_type = &t->period_type;
		pr->period = p->pr_is_offcpu ? 1 : clamp64(p->pr_period_ns);
		profile_id(p, host, gr->name, &t->profile_ids[16 * g]);
		pr->profile_id.len = 16;
		pr->profile_id.data = &t->profile_ids[16 * g];
		t->profile_ptrs[g] = pr;

		opentelemetry__proto__profiles__v1development__scope_profiles__init(sp);
		sp->scope = &t->scope;
		sp->n_profiles = 1;
		sp->profiles = &t->profile_ptrs[g];
		t->scope_ptrs[g] = sp;

		/* service.name, host.name, then the labels whose keys are new. */
		set_string(&kv[nkv], &v[nkv], K_SERVICE, gr->name);
		nkv++;
		if (host[0]) {
			set_string(&kv[nkv], &v[nkv], K_HOST, host);
			nkv++;
		}
		for (size_t l = 0; l < nlabels; l++) {
			const char *key = res->or_label_keys[l], *val = res->or_label_values[l];
			size_t k;

			if (!key || !key[0])
				continue;
			for (k = 0; k < nkv && strcmp(kv[k].key, key); k++)
				;
			if (k < nkv)
				continue;
			set_string(&kv[nkv], &v[nkv], key, val ? val : "");
			nkv++;
		}
		for (size_t k = 0; k < nkv; k++)
			kvp[k] = &kv[k];

		opentelemetry__proto__resource__v1__resource__init(r);
		r->n_attributes = nkv;
		r->attributes = kvp;

		opentelemetry__proto__profiles__v1development__resource_profiles__init(rp);
		rp->resource = r;
		rp->n_scope_profiles = 1;
		rp->scope_profiles = &t->scope_ptrs[g];
		t->rp_ptrs[g] = rp;
	}

	pb_request *req = &t->req;
	opentelemetry__proto__collector__profiles__v1development__export_profiles_service_request__init(
		req);
	req->n_resource_profiles = ng;
	req->resource_profiles = t->rp_ptrs;
	req->dictionary = &t->dict;
	return 0;
}

static void encoder_free(struct encoder *en)
{
	fp_intern_free(en->strings);
	fp_intern_free(en->values);
	free(en->attrs);
	fp_indexset_free(&en->attr_set);
	free(en->mappings);
	fp_indexset_free(&en->mapping_set);
	free(en->mapping_of);
	free(en->functions);
	fp_indexset_free(&en->function_set);
	free(en->locations);
	free(en->lines);
	fp_indexset_free(&en->location_set);
	free(en->location_of);
	free(en->stacks);
	fp_indexset_free(&en->stack_set);
	free(en->stack_locs);
	fp_indexset_free(&en->thread_set);
	free(en->threads);
	free(en->sample_stack);
	free(en->sample_attrs);
	free(en->sample_nattrs);
	free(en->sample_service);
	free(en->groups);
	free(en->order);
}

int fp_otlp_encode(const struct fp_profile *p, const struct fp_otlp_resource *res, uint8_t **buf,
		   size_t *len)
{
	struct encoder en = { .p = p };
	struct tree t = { 0 };
	int err;

	if (!p || !buf || !len)
		return -EINVAL;
	if (p->pr_nsamples >= UINT32_MAX)
		return -EINVAL;
	if ((err = fp_intern_alloc(&en.strings)) || (err = fp_intern_alloc(&en.values)))
		goto out;
	en.mapping_of = alloc_n(p->pr_nmappings, sizeof(*en.mapping_of));
	en.location_of = alloc_n(p->pr_nframes, sizeof(*en.location_of));
	en.sample_stack = alloc_n(p->pr_nsamples, sizeof(*en.sample_stack));
	en.sample_attrs = alloc_n(p->pr_nsamples * ATTRS_PER_SAMPLE, sizeof(*en.sample_attrs));
	en.sample_nattrs = alloc_n(p->pr_nsamples, sizeof(*en.sample_nattrs));
	en.sample_service = alloc_n(p->pr_nsamples, sizeof(*en.sample_service));
	err = -ENOMEM;
	if (!en.mapping_of || !en.location_of || !en.sample_stack || !en.sample_attrs ||
	    !en.sample_nattrs || !en.sample_service)
		goto out;

	if ((err = add_zero_entries(&en)) || (err = add_common(&en)) || (err = add_mappings(&en)) ||
	    (err = add_frames(&en)) || (err = add_samples(&en)) || (err = group_samples(&en)))
		goto out;
	if ((err = build_dictionary(&en, &t)) || (err = build_resources(&en, res, &t)))
		goto out;

	err = fp_protobuf_pack(&t.req.base, buf, len);
out:
	tree_free(&t);
	encoder_free(&en);
	return err;
}
