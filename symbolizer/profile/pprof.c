/* pprof.c: a profile as perftools.profiles.Profile (proto/pprof.proto),
 * uncompressed: the sinks gzip it, as `go tool pprof` and Pyroscope expect.
 *
 * Representation choices:
 * - One Location per profile frame (id = frame index + 1), one Mapping per
 *   profile mapping (id = index + 1), so ids can be computed, not looked up.
 * - Every Location gets one Line.  Unresolved frames get a Function named
 *   by fp_profile_frame_label ("libc.so.6+0x1a2b"): a Location without Line
 *   is shown as a bare hexadecimal address by pprof and as "unknown" by
 *   other viewers, losing the module.  Their mapping keeps has_functions
 *   false when none of its frames resolved, so `go tool pprof` can still
 *   symbolize them from a local copy of the binary (matched by build-ID).
 * - Kernel functions carry the "_[k]" suffix, as in the folded and SVG
 *   outputs: pprof has no notion of kernel frames and the suffix keeps a
 *   kernel and a user function of the same name apart.
 * - Python frames (FP_FRAME_PYTHON) are Locations without a Mapping
 *   (mapping_id 0) and address 0: a code object is no file, and the frame
 *   is already resolved.  Their one Line names a Function with the
 *   qualified name as name and system name (no suffix: the .py filename
 *   tells them apart), the .py path as filename, the code's first line as
 *   start_line, and the line in Line.line.
 * - Samples are not merged further than the profile merged them: each keeps
 *   its pid, tid, thread, process and container as labels.
 */
#include <errno.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "indexset.h"
#include "intern.h"
#include "output.h"
#include "pprof.pb-c.h"
#include "vec.h"

typedef Perftools__Profiles__Profile pb_profile;
typedef Perftools__Profiles__ValueType pb_value_type;
typedef Perftools__Profiles__Sample pb_sample;
typedef Perftools__Profiles__Label pb_label;
typedef Perftools__Profiles__Mapping pb_mapping;
typedef Perftools__Profiles__Location pb_location;
typedef Perftools__Profiles__Line pb_line;
typedef Perftools__Profiles__Function pb_function;

#define LABELS_PER_SAMPLE 5

/* Strings we generate (labels, hex) live in blocks freed all at once. */
struct arena_block {
	struct arena_block *ab_next;
	size_t ab_used, ab_cap;
	char ab_data[];
};

struct encoder {
	const struct fp_profile *en_p;
	/* string table */
	char **en_strings;
	size_t en_nstrings, en_strings_cap;
	struct fp_indexset en_string_set;
	struct arena_block *en_arena;
	char *en_label; /* fp_profile_frame_label_buf's buffer */
	size_t en_label_cap;
	/* functions, deduplicated by (name, system_name) */
	pb_function *en_functions;
	pb_function **en_function_ptrs;
	size_t en_nfunctions;
	struct fp_indexset en_function_set;
};

static char *arena_copy(struct encoder *en, const char *s)
{
	size_t len = strlen(s) + 1;
	struct arena_block *b = en->en_arena;

	if (!b || b->ab_cap - b->ab_used < len) {
		size_t cap = len > 65536 ? len : 65536;

		b = malloc(sizeof(*b) + cap);
		if (!b)
			return NULL;
		b->ab_next = en->en_arena;
		b->ab_used = 0;
		b->ab_cap = cap;
		en->en_arena = b;
	}
	char *dst = b->ab_data + b->ab_used;
	memcpy(dst, s, len);
	b->ab_used += len;
	return dst;
}

static int string_eq(const void *ctx, uint32_t index, const void *key)
{
	return !strcmp(((const struct encoder *)ctx)->en_strings[index], key);
}

/* intern: the string table index of s.  Strings of the profile outlive the
 * encoder and are referenced in place; transient ones (copy set) are copied
 * into the arena.  0 or -ENOMEM. */
static int intern(struct encoder *en, const char *s, int copy, int64_t *index)
{
	struct fp_indexset *set = &en->en_string_set;
	uint32_t hash = (uint32_t)fp_hash(s, strlen(s));
	size_t slot;
	uint32_t found = fp_indexset_find(set, hash, string_eq, en, s, &slot);

	if (found != FP_INDEXSET_NONE) {
		*index = found;
		return 0;
	}
	if (fp_indexset_make_room(set, hash, &slot))
		return -ENOMEM;
	if (fp_vec_reserve(&en->en_strings, &en->en_strings_cap, en->en_nstrings + 1,
			   sizeof(*en->en_strings)))
		return -ENOMEM;
	if (en->en_nstrings >= FP_INDEXSET_NONE - 1)
		return -ENOMEM;
	char *stored = copy ? arena_copy(en, s) : (char *)s;
	if (!stored)
		return -ENOMEM;
	en->en_strings[en->en_nstrings] = stored;
	fp_indexset_insert(set, slot, hash, (uint32_t)en->en_nstrings);
	*index = (int64_t)en->en_nstrings++;
	return 0;
}

struct function_key {
	int64_t name, system_name, filename, start_line;
};

static int function_eq(const void *ctx, uint32_t index, const void *key)
{
	const pb_function *f = &((const struct encoder *)ctx)->en_functions[index];
	const struct function_key *k = key;

	return f->name == k->name && f->system_name == k->system_name &&
	       f->filename == k->filename && f->start_line == k->start_line;
}

/* function_id: the id of the Function (name, system_name, filename,
 * start_line), added if new.  en_functions has room for one per Line, the
 * most there can be. */
static int function_id(struct encoder *en, int64_t name, int64_t system_name, int64_t filename,
		       int64_t start_line, uint64_t *id)
{
	struct fp_indexset *set = &en->en_function_set;
	struct function_key key = { name, system_name, filename, start_line };
	uint32_t hash = fp_hash_finish(
		((uint64_t)name << 32) ^ (uint64_t)system_name ^ ((uint64_t)system_name >> 32) ^
		((uint64_t)filename * 0x9e3779b97f4a7c15ull) ^ ((uint64_t)start_line << 17));
	size_t slot;
	uint32_t found = fp_indexset_find(set, hash, function_eq, en, &key, &slot);

	if (found != FP_INDEXSET_NONE) {
		*id = en->en_functions[found].id;
		return 0;
	}
	if (fp_indexset_make_room(set, hash, &slot))
		return -ENOMEM;
	pb_function *f = &en->en_functions[en->en_nfunctions];
	perftools__profiles__function__init(f);
	f->id = en->en_nfunctions + 1;
	f->name = name;
	f->system_name = system_name;
	f->filename = filename;
	f->start_line = start_line;
	en->en_function_ptrs[en->en_nfunctions] = f;
	fp_indexset_insert(set, slot, hash, (uint32_t)en->en_nfunctions++);
	*id = f->id;
	return 0;
}

/* frame_function: intern the names of frame i and return its Function id. */
static int frame_function(struct encoder *en, uint32_t i, uint64_t *id)
{
	const struct fp_pframe *f = &en->en_p->pr_frames[i];
	int64_t name, system_name, filename = 0;
	int err;

	if (f->pf_file && (err = intern(en, f->pf_file, 0, &filename)))
		return err;
	if (f->pf_function && f->pf_kind != FP_FRAME_KERNEL) {
		err = intern(en, f->pf_function, 0, &name);
		system_name = name;
		if (!err && f->pf_system_name)
			err = intern(en, f->pf_system_name, 0, &system_name);
	} else {
		int n = fp_profile_frame_label_buf(en->en_p, i, &en->en_label, &en->en_label_cap);

		if (n < 0)
			return n;
		err = intern(en, en->en_label, 1, &name);
		system_name = name;
	}
	if (err)
		return err;
	return function_id(en, name, system_name, filename, f->pf_start_line, id);
}

/* inline_function: the Function of function k inlined at frame i. */
static int inline_function(struct encoder *en, uint32_t i, uint32_t k, uint64_t *id)
{
	const struct fp_pinline *in = &en->en_p->pr_frames[i].pf_inline[k];
	int64_t name, system_name, filename = 0;
	int err;

	if ((err = intern(en, in->pi_function, 0, &name)))
		return err;
	system_name = name;
	if ((in->pi_system_name && (err = intern(en, in->pi_system_name, 0, &system_name))) ||
	    (in->pi_file && (err = intern(en, in->pi_file, 0, &filename))))
		return err;
	return function_id(en, name, system_name, filename, 0, id);
}

static int64_t saturating_mul(uint64_t a, uint64_t b)
{
	if (a && b > (uint64_t)INT64_MAX / a)
		return INT64_MAX;
	return (int64_t)(a * b);
}

static int64_t clamp64(uint64_t v)
{
	return v > (uint64_t)INT64_MAX ? INT64_MAX : (int64_t)v;
}

/* Everything the Profile message points to, allocated per kind in bulk. */
struct tree {
	pb_value_type types[2], period_type;
	pb_value_type *type_ptrs[2];
	pb_mapping *mappings;
	pb_mapping **mapping_ptrs;
	pb_location *locations;
	pb_location **location_ptrs;
	pb_line *lines;
	pb_line **line_ptrs;
	pb_sample *samples;
	pb_sample **sample_ptrs;
	uint64_t *location_ids;
	int64_t *values;
	pb_label *labels;
	pb_label **label_ptrs;
	int64_t comment;
};

static void tree_free(struct tree *t)
{
	free(t->mappings);
	free(t->mapping_ptrs);
	free(t->locations);
	free(t->location_ptrs);
	free(t->lines);
	free(t->line_ptrs);
	free(t->samples);
	free(t->sample_ptrs);
	free(t->location_ids);
	free(t->values);
	free(t->labels);
	free(t->label_ptrs);
}

static void encoder_free(struct encoder *en)
{
	while (en->en_arena) {
		struct arena_block *next = en->en_arena->ab_next;

		free(en->en_arena);
		en->en_arena = next;
	}
	free(en->en_strings);
	fp_indexset_free(&en->en_string_set);
	free(en->en_label);
	free(en->en_functions);
	free(en->en_function_ptrs);
	fp_indexset_free(&en->en_function_set);
}

/* calloc of n elements, never NULL for n == 0 so that failure is obvious. */
static void *alloc_n(size_t n, size_t size)
{
	return calloc(n ? n : 1, size);
}

static int build_mappings(struct encoder *en, struct tree *t)
{
	const struct fp_profile *p = en->en_p;
	char buf[2 * FP_BUILD_ID_MAX + 1];
	int err;

	t->mappings = alloc_n(p->pr_nmappings, sizeof(*t->mappings));
	t->mapping_ptrs = alloc_n(p->pr_nmappings, sizeof(*t->mapping_ptrs));
	if (!t->mappings || !t->mapping_ptrs)
		return -ENOMEM;
	for (size_t i = 0; i < p->pr_nmappings; i++) {
		const struct fp_pmapping *m = &p->pr_mappings[i];
		pb_mapping *pm = &t->mappings[i];

		perftools__profiles__mapping__init(pm);
		pm->id = i + 1;
		err = intern(en, m->pm_path, 0, &pm->filename);
		if (err)
			return err;
		if (m->pm_build_id.fb_len) {
			fp_build_id_hex(&m->pm_build_id, buf);
			err = intern(en, buf, 1, &pm->build_id);
			if (err)
				return err;
		}
		t->mapping_ptrs[i] = pm;
	}
	for (size_t i = 0; i < p->pr_nframes; i++) {
		const struct fp_pframe *f = &p->pr_frames[i];

		if (f->pf_function && f->pf_mapping < p->pr_nmappings) {
			pb_mapping *pm = &t->mappings[f->pf_mapping];

			pm->has_functions = 1;
			pm->has_filenames |= f->pf_file != NULL;
			pm->has_line_numbers |= f->pf_line != 0;
			pm->has_inline_frames |= f->pf_ninline != 0;
		}
	}
	return 0;
}

static int build_locations(struct encoder *en, struct tree *t)
{
	const struct fp_profile *p = en->en_p;
	size_t n = p->pr_nframes, nlines = 0, li = 0;
	int err;

	/* One Line per function at a location: the inlined ones, then its own. */
	for (size_t i = 0; i < n; i++)
		nlines += 1 + (size_t)p->pr_frames[i].pf_ninline;
	t->locations = alloc_n(n, sizeof(*t->locations));
	t->location_ptrs = alloc_n(n, sizeof(*t->location_ptrs));
	t->lines = alloc_n(nlines, sizeof(*t->lines));
	t->line_ptrs = alloc_n(nlines, sizeof(*t->line_ptrs));
	en->en_functions = alloc_n(nlines, sizeof(*en->en_functions));
	en->en_function_ptrs = alloc_n(nlines, sizeof(*en->en_function_ptrs));
	if (!t->locations || !t->location_ptrs || !t->lines || !t->line_ptrs || !en->en_functions ||
	    !en->en_function_ptrs)
		return -ENOMEM;
	err = fp_indexset_reserve(&en->en_function_set, nlines);
	if (err)
		return err;
	for (size_t i = 0; i < n; i++) {
		const struct fp_pframe *f = &p->pr_frames[i];
		pb_location *l = &t->locations[i];

		perftools__profiles__location__init(l);
		l->id = i + 1;
		l->mapping_id = f->pf_mapping < p->pr_nmappings ? (uint64_t)f->pf_mapping + 1 : 0;
		l->address = f->pf_address;
		l->n_line = 1 + f->pf_ninline;
		l->line = &t->line_ptrs[li];
		/* pprof order: the innermost inlined function first. */
		for (uint32_t k = 0; k <= f->pf_ninline; k++, li++) {
			pb_line *line = &t->lines[li];

			perftools__profiles__line__init(line);
			if (k < f->pf_ninline) {
				err = inline_function(en, (uint32_t)i, k, &line->function_id);
				line->line = f->pf_inline[k].pi_line;
			} else {
				err = frame_function(en, (uint32_t)i, &line->function_id);
				line->line = f->pf_line;
			}
			if (err)
				return err;
			t->line_ptrs[li] = line;
		}
		t->location_ptrs[i] = l;
	}
	return 0;
}

static int build_samples(struct encoder *en, struct tree *t)
{
	const struct fp_profile *p = en->en_p;
	size_t n = p->pr_nsamples, nids = 0;
	int64_t k_pid, k_tid, k_thread, k_process, k_container;
	int err;

	if ((err = intern(en, "pid", 0, &k_pid)) || (err = intern(en, "tid", 0, &k_tid)) ||
	    (err = intern(en, "thread_name", 0, &k_thread)) ||
	    (err = intern(en, "process_name", 0, &k_process)) ||
	    (err = intern(en, "container", 0, &k_container)))
		return err;
	for (size_t i = 0; i < n; i++)
		nids += p->pr_samples[i].ps_nframes;
	if (n > SIZE_MAX / LABELS_PER_SAMPLE / sizeof(pb_label))
		return -ENOMEM;
	t->samples = alloc_n(n, sizeof(*t->samples));
	t->sample_ptrs = alloc_n(n, sizeof(*t->sample_ptrs));
	t->location_ids = alloc_n(nids, sizeof(*t->location_ids));
	t->values = alloc_n(n * 2, sizeof(*t->values));
	t->labels = alloc_n(n * LABELS_PER_SAMPLE, sizeof(*t->labels));
	t->label_ptrs = alloc_n(n * LABELS_PER_SAMPLE, sizeof(*t->label_ptrs));
	if (!t->samples || !t->sample_ptrs || !t->location_ids || !t->values || !t->labels ||
	    !t->label_ptrs)
		return -ENOMEM;

	uint64_t *ids = t->location_ids;
	for (size_t i = 0; i < n; i++) {
		const struct fp_psample *s = &p->pr_samples[i];
		pb_sample *ps = &t->samples[i];
		pb_label *lab = &t->labels[i * LABELS_PER_SAMPLE];
		pb_label **labp = &t->label_ptrs[i * LABELS_PER_SAMPLE];
		size_t nlab = 0;

		perftools__profiles__sample__init(ps);
		ps->n_location_id = s->ps_nframes;
		ps->location_id = ids;
		for (uint32_t j = 0; j < s->ps_nframes; j++)
			*ids++ = (uint64_t)s->ps_frames[j] + 1;
		ps->n_value = 2;
		ps->value = &t->values[i * 2];
		/* off-CPU: [waits, nanoseconds]; CPU: [samples, nanoseconds] */
		ps->value[0] = clamp64(p->pr_is_offcpu ? s->ps_blocks : s->ps_count);
		ps->value[1] = p->pr_is_offcpu ? clamp64(s->ps_count)
					       : saturating_mul(s->ps_count, p->pr_period_ns);

		for (size_t j = 0; j < LABELS_PER_SAMPLE; j++) {
			perftools__profiles__label__init(&lab[j]);
			labp[j] = &lab[j];
		}
		lab[nlab].key = k_pid;
		lab[nlab++].num = s->ps_pid;
		lab[nlab].key = k_tid;
		lab[nlab++].num = s->ps_tid;
		lab[nlab].key = k_thread;
		err = intern(en, s->ps_thread, 0, &lab[nlab++].str);
		if (err)
			return err;
		lab[nlab].key = k_process;
		err = intern(en, s->ps_process, 0, &lab[nlab++].str);
		if (err)
			return err;
		if (s->ps_container && s->ps_container[0]) {
			lab[nlab].key = k_container;
			err = intern(en, s->ps_container, 0, &lab[nlab++].str);
			if (err)
				return err;
		}
		ps->n_label = nlab;
		ps->label = labp;
		t->sample_ptrs[i] = ps;
	}
	return 0;
}

int fp_pprof_encode(const struct fp_profile *p, uint8_t **buf, size_t *len)
{
	struct encoder en = { .en_p = p };
	struct tree t = { 0 };
	pb_profile prof = PERFTOOLS__PROFILES__PROFILE__INIT;
	int64_t s_samples, s_count, s_cpu, s_ns;
	int err;

	err = fp_indexset_reserve(&en.en_string_set, 64 + p->pr_nframes + p->pr_nmappings * 2);
	if (err)
		goto out;
	/* string_table[0] must be "". */
	int64_t empty;
	/* an off-CPU profile: waits and their time */
	if ((err = intern(&en, "", 0, &empty)) ||
	    (err = intern(&en, p->pr_is_offcpu ? "waits" : "samples", 0, &s_samples)) ||
	    (err = intern(&en, "count", 0, &s_count)) ||
	    (err = intern(&en, p->pr_is_offcpu ? "off_cpu" : "cpu", 0, &s_cpu)) ||
	    (err = intern(&en, "nanoseconds", 0, &s_ns)))
		goto out;

	for (int i = 0; i < 2; i++) {
		perftools__profiles__value_type__init(&t.types[i]);
		t.type_ptrs[i] = &t.types[i];
	}
	t.types[0].type = s_samples;
	t.types[0].unit = s_count;
	t.types[1].type = s_cpu;
	t.types[1].unit = s_ns;
	perftools__profiles__value_type__init(&t.period_type);
	t.period_type.type = s_cpu;
	t.period_type.unit = s_ns;

	if ((err = build_mappings(&en, &t)) || (err = build_locations(&en, &t)) ||
	    (err = build_samples(&en, &t)))
		goto out;
	if (p->pr_host && p->pr_host[0]) {
		char *c = NULL;

		if (asprintf(&c, "host=%s", p->pr_host) < 0) {
			err = -ENOMEM;
			goto out;
		}
		err = intern(&en, c, 1, &t.comment);
		free(c);
		if (err)
			goto out;
		prof.n_comment = 1;
		prof.comment = &t.comment;
	}

	prof.n_sample_type = 2;
	prof.sample_type = t.type_ptrs;
	prof.n_sample = p->pr_nsamples;
	prof.sample = t.sample_ptrs;
	prof.n_mapping = p->pr_nmappings;
	prof.mapping = t.mapping_ptrs;
	prof.n_location = p->pr_nframes;
	prof.location = t.location_ptrs;
	prof.n_function = en.en_nfunctions;
	prof.function = en.en_function_ptrs;
	prof.n_string_table = en.en_nstrings;
	prof.string_table = en.en_strings;
	prof.time_nanos = clamp64(p->pr_start_ns);
	prof.duration_nanos = clamp64(p->pr_duration_ns);
	prof.period_type = &t.period_type;
	prof.period = p->pr_is_offcpu ? 1 : clamp64(p->pr_period_ns);
	prof.default_sample_type = s_cpu;

	err = fp_protobuf_pack(&prof.base, buf, len);
out:
	tree_free(&t);
	encoder_free(&en);
	return err;
}

int fp_protobuf_pack(const ProtobufCMessage *m, uint8_t **buf, size_t *len)
{
	size_t size = protobuf_c_message_get_packed_size(m);
	uint8_t *out = malloc(size ? size : 1);

	if (!out)
		return -ENOMEM;
	if (protobuf_c_message_pack(m, out) != size) {
		free(out);
		return -EPROTO;
	}
	*buf = out;
	*len = size;
	return 0;
}
