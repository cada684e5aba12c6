/* profile.c: the resolved-profile model and its interning tables.
 *
 * Mappings, frames and samples live in plain arrays the writers read
 * directly; struct fp_profile_index adds one index set (indexset.h) per
 * array so that interning costs O(1) however many stacks an interval holds.
 * Container names are interned too: a device has a handful of containers but
 * tens of thousands of samples, and interned pointers compare in one step.
 */
#include <errno.h>
#include <inttypes.h>
#include <malloc.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "indexset.h"
#include "intern.h"
#include "profile.h"
#include "vec.h"

struct fp_profile_index {
	struct fp_indexset pi_mappings, pi_frames, pi_samples, pi_strings;
	size_t pi_mappings_cap, pi_frames_cap, pi_samples_cap;
	char **pi_strings_v; /* interned container names */
	size_t pi_nstrings, pi_strings_cap;
};

/* grow_array: ensure *v has room for n + 1 elements of size sz.  Indexes
 * are uint32_t with FP_INDEX_NONE reserved, which bounds every array. */
static int grow_array(void *v, size_t *cap, size_t n, size_t sz)
{
	if (n >= FP_INDEX_NONE - 1)
		return -ENOMEM;
	return fp_vec_reserve(v, cap, n + 1, sz);
}

int fp_profile_alloc(struct fp_profile **p, const char *host, uint64_t start_ns,
		     uint64_t duration_ns, uint64_t period_ns)
{
	struct fp_profile *pr = calloc(1, sizeof(*pr));
	if (!pr)
		return -ENOMEM;
	pr->pr_index = calloc(1, sizeof(*pr->pr_index));
	pr->pr_host = strdup(host ? host : "");
	if (!pr->pr_index || !pr->pr_host)
		goto nomem;
	pr->pr_start_ns = start_ns;
	pr->pr_duration_ns = duration_ns;
	pr->pr_period_ns = period_ns;
	*p = pr;
	return 0;

nomem:
	fp_profile_free(pr);
	return -ENOMEM;
}

void fp_profile_free(struct fp_profile *p)
{
	if (!p)
		return;
	for (size_t i = 0; i < p->pr_nmappings; i++)
		free(p->pr_mappings[i].pm_path);
	for (size_t i = 0; i < p->pr_nframes; i++) {
		free(p->pr_frames[i].pf_function);
		free(p->pr_frames[i].pf_system_name);
		free(p->pr_frames[i].pf_file);
		for (uint32_t k = 0; k < p->pr_frames[i].pf_ninline; k++) {
			free(p->pr_frames[i].pf_inline[k].pi_function);
			free(p->pr_frames[i].pf_inline[k].pi_system_name);
			free(p->pr_frames[i].pf_inline[k].pi_file);
		}
		free(p->pr_frames[i].pf_inline);
	}
	/* ps_container points into the index's string pool. */
	for (size_t i = 0; i < p->pr_nsamples; i++)
		free(p->pr_samples[i].ps_frames);
	struct fp_profile_index *ix = p->pr_index;
	if (ix) {
		for (size_t i = 0; i < ix->pi_nstrings; i++)
			free(ix->pi_strings_v[i]);
		free(ix->pi_strings_v);
		fp_indexset_free(&ix->pi_mappings);
		fp_indexset_free(&ix->pi_frames);
		fp_indexset_free(&ix->pi_samples);
		fp_indexset_free(&ix->pi_strings);
		free(ix);
	}
	free(p->pr_mappings);
	free(p->pr_frames);
	free(p->pr_samples);
	free(p->pr_host);
	fp_profile_free(p->pr_offcpu);
	free(p);
}

size_t fp_profile_bytes(const struct fp_profile *p)
{
	const struct fp_profile_index *ix = p->pr_index;
	size_t n = malloc_usable_size((void *)p), i;

	for (i = 0; i < p->pr_nmappings; i++)
		n += malloc_usable_size(p->pr_mappings[i].pm_path);
	for (i = 0; i < p->pr_nframes; i++) {
		const struct fp_pframe *f = &p->pr_frames[i];

		n += malloc_usable_size(f->pf_function) + malloc_usable_size(f->pf_system_name) +
		     malloc_usable_size(f->pf_file) + malloc_usable_size(f->pf_inline);
		for (uint32_t k = 0; k < f->pf_ninline; k++)
			n += malloc_usable_size(f->pf_inline[k].pi_function) +
			     malloc_usable_size(f->pf_inline[k].pi_system_name) +
			     malloc_usable_size(f->pf_inline[k].pi_file);
	}
	for (i = 0; i < p->pr_nsamples; i++)
		n += malloc_usable_size(p->pr_samples[i].ps_frames);
	if (ix) {
		n += malloc_usable_size((void *)ix) + malloc_usable_size(ix->pi_strings_v) +
		     malloc_usable_size(ix->pi_mappings.is_slots) +
		     malloc_usable_size(ix->pi_frames.is_slots) +
		     malloc_usable_size(ix->pi_samples.is_slots) +
		     malloc_usable_size(ix->pi_strings.is_slots);
		for (i = 0; i < ix->pi_nstrings; i++)
			n += malloc_usable_size(ix->pi_strings_v[i]);
	}
	return n + malloc_usable_size(p->pr_mappings) + malloc_usable_size(p->pr_frames) +
	       malloc_usable_size(p->pr_samples) + malloc_usable_size(p->pr_host) +
	       (p->pr_offcpu ? fp_profile_bytes(p->pr_offcpu) : 0);
}

/* Mappings */

struct mapping_key {
	uint8_t kind;
	const struct fp_build_id *id;
	const char *path;
};

static int mapping_eq(const void *ctx, uint32_t index, const void *key)
{
	const struct fp_profile *p = ctx;
	const struct mapping_key *k = key;
	const struct fp_pmapping *m = &p->pr_mappings[index];

	return m->pm_kind == k->kind && m->pm_build_id.fb_len == k->id->fb_len &&
	       !memcmp(m->pm_build_id.fb_data, k->id->fb_data, k->id->fb_len) &&
	       !strcmp(m->pm_path, k->path);
}

int fp_profile_add_mapping(struct fp_profile *p, uint8_t kind, const struct fp_build_id *id,
			   const char *path, uint32_t *idx)
{
	static const struct fp_build_id unknown;
	struct fp_profile_index *ix = p->pr_index;

	if (!path)
		return -EINVAL;
	if (!id)
		id = &unknown;
	if (id->fb_len > FP_BUILD_ID_MAX)
		return -EINVAL;

	struct mapping_key key = { kind, id, path };
	const void *parts[] = { &kind, &id->fb_len, id->fb_data, path };
	size_t lens[] = { sizeof(kind), sizeof(id->fb_len), id->fb_len, strlen(path) };
	uint32_t hash = (uint32_t)fp_hash_parts(parts, lens, 4);
	size_t slot;
	uint32_t found = fp_indexset_find(&ix->pi_mappings, hash, mapping_eq, p, &key, &slot);
	if (found != FP_INDEXSET_NONE) {
		*idx = found;
		return 0;
	}

	if (grow_array(&p->pr_mappings, &ix->pi_mappings_cap, p->pr_nmappings,
		       sizeof(*p->pr_mappings)) ||
	    fp_indexset_make_room(&ix->pi_mappings, hash, &slot))
		return -ENOMEM;
	char *copy = strdup(path);
	if (!copy)
		return -ENOMEM;

	uint32_t n = (uint32_t)p->pr_nmappings;
	struct fp_pmapping *m = &p->pr_mappings[n];
	memset(m, 0, sizeof(*m));
	m->pm_path = copy;
	m->pm_build_id.fb_len = id->fb_len;
	memcpy(m->pm_build_id.fb_data, id->fb_data, id->fb_len);
	m->pm_kind = kind;
	fp_indexset_insert(&ix->pi_mappings, slot, hash, n);
	p->pr_nmappings++;
	*idx = n;
	return 0;
}

/* Frames */

/* Native frames are keyed by (mapping, address, kind), Python frames by
 * (qualname, file, line): one table, the kind tells which key applies. */
struct frame_key {
	uint32_t mapping;
	uint64_t address;
	uint8_t kind;
	const char *py_name, *py_file; /* FP_FRAME_PYTHON */
	uint32_t py_line;
};

static int frame_eq(const void *ctx, uint32_t index, const void *key)
{
	const struct fp_profile *p = ctx;
	const struct frame_key *k = key;
	const struct fp_pframe *f = &p->pr_frames[index];

	if (f->pf_kind != k->kind)
		return 0;
	if (k->kind == FP_FRAME_PYTHON)
		return f->pf_line == k->py_line && !strcmp(f->pf_function, k->py_name) &&
		       !strcmp(f->pf_file, k->py_file);
	return f->pf_mapping == k->mapping && f->pf_address == k->address;
}

/* frame_names: the copies a frame stores.  A lone system_name is promoted to
 * the function name; a system_name equal to the function is not kept. */
static int frame_names(const char *function, const char *system_name, char **fn, char **sn)
{
	if (!function) {
		function = system_name;
		system_name = NULL;
	}
	if (system_name && function && !strcmp(system_name, function))
		system_name = NULL;
	*fn = function ? strdup(function) : NULL;
	*sn = system_name ? strdup(system_name) : NULL;
	if ((function && !*fn) || (system_name && !*sn)) {
		free(*fn);
		free(*sn);
		return -ENOMEM;
	}
	return 0;
}

int fp_profile_add_frame(struct fp_profile *p, uint32_t mapping, uint64_t address, uint8_t kind,
			 const char *function, const char *system_name, uint32_t *idx)
{
	struct fp_profile_index *ix = p->pr_index;
	char *fn, *sn;

	/* The writers index pr_mappings with pf_mapping: never store a bad one.
	 * Python frames have their own key (fp_profile_add_python_frame). */
	if ((mapping != FP_INDEX_NONE && mapping >= p->pr_nmappings) || kind == FP_FRAME_PYTHON)
		return -EINVAL;

	struct frame_key key = { mapping, address, kind, NULL, NULL, 0 };
	/* Keyed, as every key here: agents choose the addresses. */
	struct {
		uint64_t address;
		uint32_t mapping, kind;
	} hkey = { address, mapping, kind };
	uint32_t hash = (uint32_t)fp_hash(&hkey, sizeof(hkey));
	size_t slot;
	uint32_t found = fp_indexset_find(&ix->pi_frames, hash, frame_eq, p, &key, &slot);
	if (found != FP_INDEXSET_NONE) {
		struct fp_pframe *f = &p->pr_frames[found];

		/* A frame first seen unresolved may be resolved later (e.g. once
		 * a kallsyms snapshot arrives): take the name then. */
		if (!f->pf_function && (function || system_name)) {
			if (frame_names(function, system_name, &fn, &sn))
				return -ENOMEM;
			f->pf_function = fn;
			f->pf_system_name = sn;
		}
		*idx = found;
		return 0;
	}

	if (grow_array(&p->pr_frames, &ix->pi_frames_cap, p->pr_nframes, sizeof(*p->pr_frames)) ||
	    fp_indexset_make_room(&ix->pi_frames, hash, &slot) ||
	    frame_names(function, system_name, &fn, &sn))
		return -ENOMEM;

	uint32_t n = (uint32_t)p->pr_nframes;
	struct fp_pframe *f = &p->pr_frames[n];
	f->pf_mapping = mapping;
	f->pf_address = address;
	f->pf_function = fn;
	f->pf_system_name = sn;
	f->pf_kind = kind;
	f->pf_file = NULL;
	f->pf_line = 0;
	f->pf_start_line = 0;
	f->pf_ninline = 0;
	f->pf_inline = NULL;
	fp_indexset_insert(&ix->pi_frames, slot, hash, n);
	p->pr_nframes++;
	*idx = n;
	return 0;
}

int fp_profile_add_python_frame(struct fp_profile *p, const char *qualname, const char *file,
				uint32_t line, uint32_t first_line, uint32_t *idx)
{
	struct fp_profile_index *ix = p->pr_index;

	if (!qualname || !file)
		return -EINVAL;

	struct frame_key key = { FP_INDEX_NONE, 0, FP_FRAME_PYTHON, qualname, file, line };
	const void *parts[] = { qualname, file, &line };
	size_t lens[] = { strlen(qualname) + 1, strlen(file) + 1, sizeof(line) };
	uint32_t hash = (uint32_t)fp_hash_parts(parts, lens, 3);
	size_t slot;
	uint32_t found = fp_indexset_find(&ix->pi_frames, hash, frame_eq, p, &key, &slot);
	if (found != FP_INDEXSET_NONE) {
		*idx = found;
		return 0;
	}

	if (grow_array(&p->pr_frames, &ix->pi_frames_cap, p->pr_nframes, sizeof(*p->pr_frames)) ||
	    fp_indexset_make_room(&ix->pi_frames, hash, &slot))
		return -ENOMEM;
	char *fn = strdup(qualname), *fl = strdup(file);
	if (!fn || !fl) {
		free(fn);
		free(fl);
		return -ENOMEM;
	}

	uint32_t n = (uint32_t)p->pr_nframes;
	struct fp_pframe *f = &p->pr_frames[n];
	memset(f, 0, sizeof(*f));
	f->pf_mapping = FP_INDEX_NONE;
	f->pf_function = fn;
	f->pf_kind = FP_FRAME_PYTHON;
	f->pf_file = fl;
	f->pf_line = line;
	f->pf_start_line = first_line;
	fp_indexset_insert(&ix->pi_frames, slot, hash, n);
	p->pr_nframes++;
	*idx = n;
	return 0;
}

/* Container names */

static int string_eq(const void *ctx, uint32_t index, const void *key)
{
	const struct fp_profile *p = ctx;

	return !strcmp(p->pr_index->pi_strings_v[index], key);
}

static int intern_string(struct fp_profile *p, const char *s, const char **out)
{
	struct fp_profile_index *ix = p->pr_index;
	uint32_t hash = (uint32_t)fp_hash(s, strlen(s));
	size_t slot;
	uint32_t found = fp_indexset_find(&ix->pi_strings, hash, string_eq, p, s, &slot);
	if (found != FP_INDEXSET_NONE) {
		*out = ix->pi_strings_v[found];
		return 0;
	}
	if (grow_array(&ix->pi_strings_v, &ix->pi_strings_cap, ix->pi_nstrings,
		       sizeof(*ix->pi_strings_v)) ||
	    fp_indexset_make_room(&ix->pi_strings, hash, &slot))
		return -ENOMEM;
	char *copy = strdup(s);
	if (!copy)
		return -ENOMEM;
	uint32_t n = (uint32_t)ix->pi_nstrings++;
	ix->pi_strings_v[n] = copy;
	fp_indexset_insert(&ix->pi_strings, slot, hash, n);
	*out = copy;
	return 0;
}

/* Samples */

struct sample_key {
	const uint32_t *frames;
	uint32_t nframes;
	uint32_t pid, tid;
	const char *thread, *process; /* already truncated to FP_COMM_LEN - 1 */
	const char *container;        /* interned: compared by address */
};

static int sample_eq(const void *ctx, uint32_t index, const void *key)
{
	const struct fp_profile *p = ctx;
	const struct sample_key *k = key;
	const struct fp_psample *s = &p->pr_samples[index];

	return s->ps_nframes == k->nframes && s->ps_pid == k->pid && s->ps_tid == k->tid &&
	       s->ps_container == k->container && !strcmp(s->ps_thread, k->thread) &&
	       !strcmp(s->ps_process, k->process) &&
	       (!k->nframes || !memcmp(s->ps_frames, k->frames, k->nframes * sizeof(*k->frames)));
}

static void copy_comm(char dst[FP_COMM_LEN], const char *src)
{
	size_t n = src ? strnlen(src, FP_COMM_LEN - 1) : 0;

	memcpy(dst, src ? src : "", n);
	memset(dst + n, 0, FP_COMM_LEN - n);
}

/* add_sample: fp_profile_add_sample, with blocks added to ps_blocks. */
static int add_sample(struct fp_profile *p, const uint32_t *frames, uint32_t nframes, uint32_t pid,
		      uint32_t tid, const char *thread, const char *process, const char *container,
		      uint64_t count, uint64_t blocks)
{
	struct fp_profile_index *ix = p->pr_index;
	char thread_c[FP_COMM_LEN], process_c[FP_COMM_LEN];
	const char *cont;
	int err;

	if (nframes && !frames)
		return -EINVAL;
	for (uint32_t i = 0; i < nframes; i++)
		if (frames[i] >= p->pr_nframes)
			return -EINVAL;
	/* A zero count would only produce empty lines in every output. */
	if (!count)
		return 0;
	copy_comm(thread_c, thread);
	copy_comm(process_c, process);
	err = intern_string(p, container ? container : "", &cont);
	if (err)
		return err;

	struct sample_key key = { frames, nframes, pid, tid, thread_c, process_c, cont };
	uint32_t ids[3] = { nframes, pid, tid };
	const void *parts[] = { ids, frames, thread_c, process_c, cont };
	size_t lens[] = { sizeof(ids), nframes * sizeof(*frames), strlen(thread_c) + 1,
			  strlen(process_c) + 1, strlen(cont) };
	uint32_t hash = (uint32_t)fp_hash_parts(parts, lens, 5);
	size_t slot;
	uint32_t found = fp_indexset_find(&ix->pi_samples, hash, sample_eq, p, &key, &slot);
	if (found != FP_INDEXSET_NONE) {
		p->pr_samples[found].ps_count += count;
		p->pr_samples[found].ps_blocks += blocks;
		return 0;
	}

	if (grow_array(&p->pr_samples, &ix->pi_samples_cap, p->pr_nsamples,
		       sizeof(*p->pr_samples)) ||
	    fp_indexset_make_room(&ix->pi_samples, hash, &slot))
		return -ENOMEM;
	uint32_t *copy = malloc((nframes ? nframes : 1) * sizeof(*copy));
	if (!copy)
		return -ENOMEM;
	if (nframes)
		memcpy(copy, frames, nframes * sizeof(*copy));

	uint32_t n = (uint32_t)p->pr_nsamples;
	struct fp_psample *s = &p->pr_samples[n];
	s->ps_nframes = nframes;
	s->ps_frames = copy;
	s->ps_pid = pid;
	s->ps_tid = tid;
	memcpy(s->ps_thread, thread_c, FP_COMM_LEN);
	memcpy(s->ps_process, process_c, FP_COMM_LEN);
	s->ps_container = (char *)cont;
	s->ps_count = count;
	s->ps_blocks = blocks;
	fp_indexset_insert(&ix->pi_samples, slot, hash, n);
	p->pr_nsamples++;
	return 0;
}

int fp_profile_add_sample(struct fp_profile *p, const uint32_t *frames, uint32_t nframes,
			  uint32_t pid, uint32_t tid, const char *thread, const char *process,
			  const char *container, uint64_t count)
{
	return add_sample(p, frames, nframes, pid, tid, thread, process, container, count, 0);
}

int fp_profile_add_block(struct fp_profile *p, const uint32_t *frames, uint32_t nframes,
			 uint32_t pid, uint32_t tid, const char *thread, const char *process,
			 const char *container, uint64_t ns, uint64_t blocks)
{
	if (!p->pr_is_offcpu)
		return -EINVAL;
	return add_sample(p, frames, nframes, pid, tid, thread, process, container, ns, blocks);
}

static char *dup_or_null(const char *s)
{
	return s ? strdup(s) : NULL;
}

int fp_profile_set_source(struct fp_profile *p, uint32_t frame, const char *file, uint32_t line,
			  const struct fp_pinline *inl, uint32_t ninline)
{
	struct fp_pframe *f;
	uint32_t k;

	if (!p || frame >= p->pr_nframes || (ninline && !inl))
		return -EINVAL;
	f = &p->pr_frames[frame];
	if (f->pf_file || f->pf_ninline)
		return 0;
	if (ninline && !(f->pf_inline = calloc(ninline, sizeof(*f->pf_inline))))
		return -ENOMEM;
	for (k = 0; k < ninline; k++) {
		struct fp_pinline *d = &f->pf_inline[k];
		d->pi_function = dup_or_null(inl[k].pi_function ? inl[k].pi_function : "??");
		/* A system name equal to the name is no information. */
		if (inl[k].pi_system_name && inl[k].pi_function &&
		    strcmp(inl[k].pi_system_name, inl[k].pi_function) != 0)
			d->pi_system_name = strdup(inl[k].pi_system_name);
		d->pi_file = dup_or_null(inl[k].pi_file);
		d->pi_line = inl[k].pi_line;
		f->pf_ninline = k + 1; /* freed with the frame, even on failure */
		if (!d->pi_function || (inl[k].pi_file && !d->pi_file))
			return -ENOMEM;
	}
	if (file && !(f->pf_file = strdup(file)))
		return -ENOMEM;
	f->pf_line = line;
	return 0;
}

int fp_profile_inline_label(const struct fp_profile *p, uint32_t frame, uint32_t k, char *buf,
			    size_t len)
{
	if (len)
		buf[0] = '\0';
	if (!p || frame >= p->pr_nframes || k >= p->pr_frames[frame].pf_ninline)
		return -EINVAL;
	return snprintf(buf, len, "%s_[i]", p->pr_frames[frame].pf_inline[k].pi_function);
}

int fp_profile_frame_label(const struct fp_profile *p, uint32_t frame, char *buf, size_t len)
{
	if (len)
		buf[0] = '\0';
	if (!p || frame >= p->pr_nframes)
		return -EINVAL;

	const struct fp_pframe *f = &p->pr_frames[frame];
	const char *suffix = f->pf_kind == FP_FRAME_KERNEL   ? "_[k]"
			     : f->pf_kind == FP_FRAME_PYTHON ? "_[py]"
							     : "";
	if (f->pf_function)
		return snprintf(buf, len, "%s%s", f->pf_function, suffix);

	const char *module = "[unknown]";
	if (f->pf_mapping != FP_INDEX_NONE && f->pf_mapping < p->pr_nmappings) {
		const char *path = p->pr_mappings[f->pf_mapping].pm_path;
		const char *slash = strrchr(path, '/');

		/* "dir/" has no file name: show the whole path rather than "". */
		if (slash && slash[1])
			module = slash + 1;
		else if (path[0])
			module = path;
	}
	return snprintf(buf, len, "%s+0x%" PRIx64 "%s", module, f->pf_address, suffix);
}

/* label_room: after a label of n bytes did not fit in *buf, make room for
 * it.  1 when the caller must label again, 0 when it fitted, or n < 0. */
static int label_room(int n, char **buf, size_t *cap)
{
	if (n < 0 || (size_t)n < *cap)
		return n < 0 ? n : 0;
	return fp_vec_reserve(buf, cap, (size_t)n + 1, 1) ? -ENOMEM : 1;
}

int fp_profile_frame_label_buf(const struct fp_profile *p, uint32_t frame, char **buf, size_t *cap)
{
	int n = fp_profile_frame_label(p, frame, *buf, *cap);
	int again = label_room(n, buf, cap);

	if (again <= 0)
		return again < 0 ? again : n;
	return fp_profile_frame_label(p, frame, *buf, *cap);
}

int fp_profile_inline_label_buf(const struct fp_profile *p, uint32_t frame, uint32_t k, char **buf,
				size_t *cap)
{
	int n = fp_profile_inline_label(p, frame, k, *buf, *cap);
	int again = label_room(n, buf, cap);

	if (again <= 0)
		return again < 0 ? again : n;
	return fp_profile_inline_label(p, frame, k, *buf, *cap);
}

uint64_t fp_profile_total(const struct fp_profile *p)
{
	uint64_t total = 0;

	for (size_t i = 0; i < p->pr_nsamples; i++)
		total += p->pr_samples[i].ps_count;
	return total;
}
