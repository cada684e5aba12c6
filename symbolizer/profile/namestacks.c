/* namestacks.c: profile files read back as stacks of names (namestacks.h).
 *
 * Names are interned with a kind byte in front ('f' function, 'p'
 * process), so that a process and a function of the same name stay
 * apart, and a function's key is "f NAME \0 FILE \0": the printable name
 * is the key from its second byte.
 */
#include "namestacks.h"
#include "gzip.h"
#include "intern.h"
#include "pprof.pb-c.h"
#include "vec.h"

#include <errno.h>
#include <inttypes.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define MAX_DEPTH (1u << 16) /* frames of one stack */
/* Frames in all, per byte of the file: a real profile has a few; a
 * hostile one could name a location of many lines many times. */
#define FRAMES_PER_BYTE 32
#define MAX_NAME 4096

int fp_namestacks_alloc(struct fp_namestacks **out)
{
	struct fp_namestacks *nk = calloc(1, sizeof(*nk));

	if (!nk || fp_intern_alloc(&nk->nk_names)) {
		free(nk);
		return -ENOMEM;
	}
	*out = nk;
	return 0;
}

static void clear(struct fp_namestacks *nk)
{
	fp_intern_clear(nk->nk_names);
	nk->nk_nframes = nk->nk_nstacks = 0;
	nk->nk_type[0] = nk->nk_unit[0] = '\0';
	nk->nk_format = NULL;
}

void fp_namestacks_free(struct fp_namestacks *nk)
{
	if (!nk)
		return;
	fp_intern_free(nk->nk_names);
	free(nk->nk_frames);
	free(nk->nk_stacks);
	free(nk);
}

const char *fp_namestacks_name(const struct fp_namestacks *nk, uint32_t id)
{
	size_t len;
	const char *key = fp_intern_key(nk->nk_names, id, &len);

	return key && len > 1 ? key + 1 : "";
}

/* intern: the id of name (len bytes) of kind, in file (NULL: none). */
static int intern(struct fp_namestacks *nk, char kind, const char *name, size_t len,
		  const char *file, uint32_t *id)
{
	char key[2 * MAX_NAME + 3];
	size_t flen = file ? strlen(file) : 0, n = 0;
	int added;

	if (len > MAX_NAME)
		len = MAX_NAME;
	if (flen > MAX_NAME)
		flen = MAX_NAME;
	key[n++] = kind;
	memcpy(key + n, name, len);
	n += len;
	key[n++] = '\0';
	if (flen) {
		memcpy(key + n, file, flen);
		n += flen;
		key[n++] = '\0';
	}
	return fp_intern_get(nk->nk_names, key, n, id, &added);
}

uint32_t fp_namestacks_find_process(const struct fp_namestacks *nk, const char *name)
{
	char key[MAX_NAME + 2];
	size_t len = strlen(name);
	uint32_t id;

	if (len > MAX_NAME)
		return FP_NAME_NONE;
	key[0] = 'p';
	memcpy(key + 1, name, len + 1);
	return fp_intern_find(nk->nk_names, key, len + 2, &id) ? FP_NAME_NONE : id;
}

static int push_frame(struct fp_namestacks *nk, uint32_t name, size_t max_frames)
{
	if (nk->nk_nframes >= max_frames)
		return -E2BIG;
	if (fp_vec_reserve(&nk->nk_frames, &nk->nk_frames_cap, nk->nk_nframes + 1,
			   sizeof(*nk->nk_frames)))
		return -ENOMEM;
	nk->nk_frames[nk->nk_nframes++] = name;
	return 0;
}

/* push_stack: the frames from first to the last pushed are one stack. */
static int push_stack(struct fp_namestacks *nk, size_t first, uint32_t process, int64_t value)
{
	if (fp_vec_reserve(&nk->nk_stacks, &nk->nk_stacks_cap, nk->nk_nstacks + 1,
			   sizeof(*nk->nk_stacks)))
		return -ENOMEM;
	nk->nk_stacks[nk->nk_nstacks++] = (struct fp_namestack){
		.ns_first = (uint32_t)first,
		.ns_depth = (uint32_t)(nk->nk_nframes - first),
		.ns_process = process,
		.ns_value = value,
	};
	return 0;
}

static void say(char *err, size_t errlen, const char *fmt, ...)
{
	va_list ap;

	if (!errlen)
		return;
	va_start(ap, fmt);
	vsnprintf(err, errlen, fmt, ap);
	va_end(ap);
}

/* Folded stacks */

/* looks_folded: whether the bytes are text whose first line ends in a
 * space and a count, as a folded line does.  A pprof file starts with a
 * protobuf field tag, which is never a printable character followed by
 * such a line. */
static int looks_folded(const char *s, size_t len)
{
	size_t i, end;

	for (end = 0; end < len && s[end] != '\n'; end++)
		if ((unsigned char)s[end] < 0x20 && s[end] != '\t' && s[end] != '\r')
			return 0;
	i = end;
	if (i && s[i - 1] == '\r')
		i--;
	if (!i || s[i - 1] < '0' || s[i - 1] > '9')
		return 0;
	while (i && s[i - 1] >= '0' && s[i - 1] <= '9')
		i--;
	return i > 0 && s[i - 1] == ' ';
}

static int read_folded(struct fp_namestacks *nk, const char *s, size_t len, char *err,
		       size_t errlen)
{
	size_t pos = 0, lineno = 0, max_frames = len + 1;
	int e;

	snprintf(nk->nk_type, sizeof(nk->nk_type), "samples");
	snprintf(nk->nk_unit, sizeof(nk->nk_unit), "count");
	while (pos < len) {
		const char *line = s + pos, *nl = memchr(line, '\n', len - pos), *sp, *p;
		size_t n = nl ? (size_t)(nl - line) : len - pos, first = nk->nk_nframes, k;
		uint32_t process, name;
		uint64_t count = 0;

		pos += n + (nl != NULL);
		lineno++;
		if (n && line[n - 1] == '\r')
			n--;
		if (!n)
			continue;
		for (sp = line + n; sp > line && sp[-1] != ' '; sp--)
			;
		if (sp == line || sp == line + n) {
			say(err, errlen, "line %zu: no count after the stack", lineno);
			return -EINVAL;
		}
		for (p = sp; p < line + n; p++) {
			if (*p < '0' || *p > '9' || count > (UINT64_MAX - 9) / 10) {
				say(err, errlen, "line %zu: the count is not a number", lineno);
				return -EINVAL;
			}
			count = count * 10 + (uint64_t)(*p - '0');
		}
		if (count > INT64_MAX) {
			say(err, errlen, "line %zu: the count is too large", lineno);
			return -EINVAL;
		}
		n = (size_t)(sp - 1 - line); /* the stack, before the space */
		/* process;root;...;leaf: the first name is the process */
		for (k = 0; k < n && line[k] != ';'; k++)
			;
		if ((e = intern(nk, 'p', line, k, NULL, &process)))
			return e;
		/* frames leaf first: walk the names from the end */
		for (size_t end = n; end > k;) {
			size_t start = end;
			while (start > k + 1 && line[start - 1] != ';')
				start--;
			if (start == end) {
				say(err, errlen, "line %zu: an empty name in the stack", lineno);
				return -EINVAL;
			}
			if (nk->nk_nframes - first >= MAX_DEPTH) {
				say(err, errlen, "line %zu: more than %u frames", lineno,
				    MAX_DEPTH);
				return -EINVAL;
			}
			/* fleetprof's mark of an inlined function goes: inlined
			 * or not, it is one function, as in pprof */
			size_t nlen = end - start;
			if (nlen > 4 && !memcmp(line + end - 4, "_[i]", 4))
				nlen -= 4;
			if ((e = intern(nk, 'f', line + start, nlen, NULL, &name)) ||
			    (e = push_frame(nk, name, max_frames)))
				return e;
			end = start - 1;
		}
		if ((e = push_stack(nk, first, process, (int64_t)count)))
			return e;
	}
	nk->nk_format = "folded";
	return 0;
}

/* pprof */

struct byid {
	uint64_t bi_id;
	size_t bi_index;
};

static int byid_cmp(const void *a, const void *b)
{
	const struct byid *x = a, *y = b;

	return x->bi_id < y->bi_id ? -1 : x->bi_id > y->bi_id;
}

/* index_ids: n (id, index) pairs sorted by id; -EINVAL on an id of 0 or
 * twice. */
static int index_ids(struct byid **out, size_t n, uint64_t (*id_of)(const void *, size_t),
		     const void *arr)
{
	struct byid *ix = malloc((n ? n : 1) * sizeof(*ix));
	size_t i;

	if (!ix)
		return -ENOMEM;
	for (i = 0; i < n; i++)
		ix[i] = (struct byid){ id_of(arr, i), i };
	qsort(ix, n, sizeof(*ix), byid_cmp);
	for (i = 0; i < n; i++)
		if (!ix[i].bi_id || (i && ix[i].bi_id == ix[i - 1].bi_id)) {
			free(ix);
			return -EINVAL;
		}
	*out = ix;
	return 0;
}

static long find_id(const struct byid *ix, size_t n, uint64_t id)
{
	struct byid key = { id, 0 }, *hit = bsearch(&key, ix, n, sizeof(*ix), byid_cmp);

	return hit ? (long)hit->bi_index : -1;
}

static uint64_t location_id(const void *arr, size_t i)
{
	return ((Perftools__Profiles__Location *const *)arr)[i]->id;
}

static uint64_t function_id(const void *arr, size_t i)
{
	return ((Perftools__Profiles__Function *const *)arr)[i]->id;
}

static uint64_t mapping_id(const void *arr, size_t i)
{
	return ((Perftools__Profiles__Mapping *const *)arr)[i]->id;
}

struct pprof_read {
	const Perftools__Profiles__Profile *pr;
	struct byid *locs, *funcs, *maps;
	uint32_t *loc_first, *loc_count; /* a location's names, innermost first */
	uint32_t *names;                 /* ... one after the other */
	size_t nnames;
};

static const char *pstr(const Perftools__Profiles__Profile *pr, int64_t i)
{
	return i >= 0 && (uint64_t)i < pr->n_string_table ? pr->string_table[i] : NULL;
}

static const char *base_name(const char *path)
{
	const char *slash = strrchr(path, '/');

	return slash ? slash + 1 : path;
}

/* location_names: intern the names of every location, innermost first:
 * its lines' functions, or, for a location without lines, its module and
 * address ("libc.so.6+0x1a2b", as fleetprof names unresolved frames). */
static int location_names(struct fp_namestacks *nk, struct pprof_read *r, char *err, size_t errlen)
{
	const Perftools__Profiles__Profile *pr = r->pr;
	size_t i, j, total = 0;
	int e;

	for (i = 0; i < pr->n_location; i++)
		total += pr->location[i]->n_line ? pr->location[i]->n_line : 1;
	r->loc_first = calloc(pr->n_location + 1, sizeof(*r->loc_first));
	r->loc_count = calloc(pr->n_location + 1, sizeof(*r->loc_count));
	r->names = calloc(total + 1, sizeof(*r->names));
	if (!r->loc_first || !r->loc_count || !r->names)
		return -ENOMEM;
	for (i = 0; i < pr->n_location; i++) {
		const Perftools__Profiles__Location *loc = pr->location[i];
		uint32_t id;

		r->loc_first[i] = (uint32_t)r->nnames;
		r->loc_count[i] = loc->n_line ? (uint32_t)loc->n_line : 1;
		if (!loc->n_line) {
			char buf[MAX_NAME + 32];
			const char *module = "[unknown]";
			long m = find_id(r->maps, pr->n_mapping, loc->mapping_id);
			if (m >= 0 && pstr(pr, pr->mapping[m]->filename) &&
			    *pstr(pr, pr->mapping[m]->filename))
				module = base_name(pstr(pr, pr->mapping[m]->filename));
			int n = snprintf(buf, sizeof(buf), "%.*s+0x%" PRIx64, MAX_NAME, module,
					 loc->address);
			if ((e = intern(nk, 'f', buf, (size_t)n, NULL, &id)))
				return e;
			r->names[r->nnames++] = id;
			continue;
		}
		for (j = 0; j < loc->n_line; j++) {
			long f = find_id(r->funcs, pr->n_function, loc->line[j]->function_id);
			const char *name, *file;
			if (f < 0) {
				say(err, errlen,
				    "location %" PRIu64 " names function %" PRIu64
				    ", which the profile does not define",
				    loc->id, loc->line[j]->function_id);
				return -EINVAL;
			}
			name = pstr(pr, pr->function[f]->name);
			file = pstr(pr, pr->function[f]->filename);
			if (!name || !file) {
				say(err, errlen,
				    "function %" PRIu64 ": a string index out of range",
				    pr->function[f]->id);
				return -EINVAL;
			}
			if (!*name)
				name = pstr(pr, pr->function[f]->system_name);
			if (!name || !*name)
				name = "[unknown]";
			if ((e = intern(nk, 'f', name, strlen(name), file, &id)))
				return e;
			r->names[r->nnames++] = id;
		}
	}
	return 0;
}

/* value_index: the sample type to read (see namestacks.h). */
static int value_index(const Perftools__Profiles__Profile *pr, const char *want, size_t *out)
{
	size_t i;

	if (!want) {
		*out = pr->n_sample_type - 1;
		for (i = 0; pr->default_sample_type && i < pr->n_sample_type; i++)
			if (pr->sample_type[i]->type == pr->default_sample_type)
				*out = i;
		return 0;
	}
	for (i = 0; i < pr->n_sample_type; i++) {
		const char *t = pstr(pr, pr->sample_type[i]->type);
		if (t && !strcmp(t, want)) {
			*out = i;
			return 0;
		}
	}
	return -ENOENT;
}

static int read_pprof(struct fp_namestacks *nk, const uint8_t *data, size_t len,
		      const char *sample_type, char *err, size_t errlen)
{
	Perftools__Profiles__Profile *pr = perftools__profiles__profile__unpack(NULL, len, data);
	struct pprof_read r = { .pr = pr };
	size_t i, j, k, vi, max_frames = (size_t)FRAMES_PER_BYTE * len + 1;
	uint32_t process_keys[3] = { FP_NAME_NONE, FP_NAME_NONE, FP_NAME_NONE };
	static const char *const process_labels[3] = { "process_name", "process", "comm" };
	int e = 0;

	if (!pr) {
		say(err, errlen, "neither a pprof profile nor folded stacks");
		return -EINVAL;
	}
	if (!pr->n_string_table || pr->string_table[0][0] || !pr->n_sample_type) {
		say(err, errlen, "not a pprof profile: %s",
		    !pr->n_sample_type ? "no sample type"
				       : "its string table does not start empty");
		e = -EINVAL;
		goto out;
	}
	if ((e = value_index(pr, sample_type, &vi))) {
		say(err, errlen, "no sample type '%s' in this profile", sample_type);
		goto out;
	}
	for (i = 0; i < pr->n_sample_type; i++)
		if (!pstr(pr, pr->sample_type[i]->type) || !pstr(pr, pr->sample_type[i]->unit)) {
			say(err, errlen, "sample type %zu: a string index out of range", i);
			e = -EINVAL;
			goto out;
		}
	snprintf(nk->nk_type, sizeof(nk->nk_type), "%s", pstr(pr, pr->sample_type[vi]->type));
	snprintf(nk->nk_unit, sizeof(nk->nk_unit), "%s", pstr(pr, pr->sample_type[vi]->unit));
	if ((e = index_ids(&r.funcs, pr->n_function, function_id, pr->function)) ||
	    (e = index_ids(&r.locs, pr->n_location, location_id, pr->location)) ||
	    (e = index_ids(&r.maps, pr->n_mapping, mapping_id, pr->mapping))) {
		if (e == -EINVAL)
			say(err, errlen,
			    "a function, location or mapping id that is 0 or used twice");
		goto out;
	}
	if ((e = location_names(nk, &r, err, errlen)))
		goto out;
	for (i = 0; i < pr->n_string_table; i++)
		for (j = 0; j < 3; j++)
			if (process_keys[j] == FP_NAME_NONE &&
			    !strcmp(pr->string_table[i], process_labels[j]))
				process_keys[j] = (uint32_t)i;
	for (i = 0; i < pr->n_sample; i++) {
		const Perftools__Profiles__Sample *s = pr->sample[i];
		size_t first = nk->nk_nframes;
		uint32_t process = FP_NAME_NONE;

		if (s->n_value != pr->n_sample_type) {
			say(err, errlen, "sample %zu has %zu values for %zu sample types", i,
			    s->n_value, pr->n_sample_type);
			e = -EINVAL;
			goto out;
		}
		for (j = 0; j < s->n_location_id; j++) {
			long l = find_id(r.locs, pr->n_location, s->location_id[j]);
			if (l < 0) {
				say(err, errlen,
				    "sample %zu names location %" PRIu64
				    ", which the profile does not define",
				    i, s->location_id[j]);
				e = -EINVAL;
				goto out;
			}
			if (nk->nk_nframes - first + r.loc_count[l] > MAX_DEPTH) {
				say(err, errlen, "sample %zu: more than %u frames", i, MAX_DEPTH);
				e = -EINVAL;
				goto out;
			}
			for (k = 0; k < r.loc_count[l]; k++)
				if ((e = push_frame(nk, r.names[r.loc_first[l] + k], max_frames)))
					goto too_many;
		}
		/* the first of the process labels the sample has */
		for (k = 0; k < 3 && process == FP_NAME_NONE; k++)
			for (j = 0; j < s->n_label; j++) {
				const char *v = pstr(pr, s->label[j]->str);
				if (s->label[j]->key == (int64_t)process_keys[k] && v && *v) {
					if ((e = intern(nk, 'p', v, strlen(v), NULL, &process)))
						goto out;
					break;
				}
			}
		if ((e = push_stack(nk, first, process, s->value[vi])))
			goto out;
	}
	nk->nk_format = "pprof";
	goto out;
too_many:
	if (e == -E2BIG) {
		say(err, errlen, "more frames than %d a byte of the file", FRAMES_PER_BYTE);
		e = -EINVAL;
	}
out:
	free(r.locs);
	free(r.funcs);
	free(r.maps);
	free(r.loc_first);
	free(r.loc_count);
	free(r.names);
	perftools__profiles__profile__free_unpacked(pr, NULL);
	return e;
}

int fp_namestacks_read(struct fp_namestacks *nk, const void *data, size_t len,
		       const char *sample_type, char *err, size_t errlen)
{
	const uint8_t *b = data;
	uint8_t *plain = NULL;
	int e;

	if (len > FP_NAMESTACKS_MAX_BYTES) {
		say(err, errlen, "larger than %u bytes", FP_NAMESTACKS_MAX_BYTES);
		return -EFBIG;
	}
	if (len >= 2 && b[0] == 0x1f && b[1] == 0x8b) {
		e = fp_gunzip_buf(data, len, FP_NAMESTACKS_MAX_BYTES, &plain, &len);
		if (e) {
			say(err, errlen,
			    e == -EFBIG ? "inflates to more than %u bytes"
					: "a gzip file that cannot be read",
			    FP_NAMESTACKS_MAX_BYTES);
			return e;
		}
		b = plain;
	}
	if (!len) {
		say(err, errlen, "empty");
		e = -EINVAL;
	} else if (looks_folded((const char *)b, len)) {
		e = sample_type ? -ENOENT : read_folded(nk, (const char *)b, len, err, errlen);
		if (sample_type)
			say(err, errlen, "folded stacks have no sample types");
	} else {
		e = read_pprof(nk, b, len, sample_type, err, errlen);
	}
	free(plain);
	if (e)
		clear(nk);
	return e;
}
