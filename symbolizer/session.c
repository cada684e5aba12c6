/* session.c: definitions by id, validation, resolution into a profile. */
#include "session.h"
#include "intern.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>

struct sess_mapping {
	uint8_t sm_kind;
	uint8_t sm_asked;
	struct fp_build_id sm_build_id;
	char *sm_path;
};

struct sess_thread {
	uint32_t st_pid, st_tid;
	char st_comm[FP_COMM_LEN];
	char st_process[FP_COMM_LEN];
	char *st_container;
};

struct sess_stack {
	uint32_t ss_thread;             /* index into se_threads */
	uint32_t ss_nframes;
	struct fp_frame *ss_frames;     /* ff_mapping: index into se_mappings */
};

/* One table per kind of definition: agent id -> dense index. */
struct defs {
	struct fp_intern *d_ids;
	void *d_items;
	size_t d_cap, d_elem;
};

struct fp_session {
	struct fp_hello se_hello;
	struct defs se_mappings, se_threads, se_stacks;
	uint64_t se_last_seq;
	uint8_t se_kernel_asked;
};

static int defs_init(struct defs *d, size_t elem)
{
	d->d_elem = elem;
	return fp_intern_alloc(&d->d_ids);
}

static void *defs_at(const struct defs *d, uint32_t idx)
{
	return (char *)d->d_items + (size_t)idx * d->d_elem;
}

static size_t defs_count(const struct defs *d)
{
	return fp_intern_count(d->d_ids);
}

/* defs_find: the dense index of agent id, or -ENOENT. */
static int defs_find(const struct defs *d, uint32_t id, uint32_t *idx)
{
	return fp_intern_find(d->d_ids, &id, sizeof(id), idx);
}

/* defs_slot: the item for agent id, new (zeroed) or to be overwritten. */
static void *defs_slot(struct defs *d, uint32_t id, int *added)
{
	uint32_t idx;

	if (fp_intern_get(d->d_ids, &id, sizeof(id), &idx, added))
		return NULL;
	if (idx >= d->d_cap) {
		size_t n = d->d_cap ? d->d_cap * 2 : 64;
		void *p = realloc(d->d_items, n * d->d_elem);
		if (!p)
			return NULL; /* the id stays interned with a zeroed item */
		memset((char *)p + d->d_cap * d->d_elem, 0, (n - d->d_cap) * d->d_elem);
		d->d_items = p, d->d_cap = n;
	}
	return defs_at(d, idx);
}

static char *dup_or_empty(const char *s)
{
	return strdup(s ? s : "");
}

int fp_session_alloc(struct fp_session **out, const struct fp_hello *h)
{
	struct fp_session *s = calloc(1, sizeof(*s));
	size_t i;

	if (!s)
		return -ENOMEM;
	s->se_hello = *h;
	s->se_hello.fh_host = dup_or_empty(h->fh_host);
	s->se_hello.fh_boot_id = dup_or_empty(h->fh_boot_id);
	s->se_hello.fh_kernel_release = dup_or_empty(h->fh_kernel_release);
	s->se_hello.fh_agent_version = dup_or_empty(h->fh_agent_version);
	s->se_hello.fh_label_keys = calloc(h->fh_nlabels + 1, sizeof(char *));
	s->se_hello.fh_label_values = calloc(h->fh_nlabels + 1, sizeof(char *));
	if (!s->se_hello.fh_host || !s->se_hello.fh_boot_id || !s->se_hello.fh_kernel_release ||
	    !s->se_hello.fh_agent_version || !s->se_hello.fh_label_keys ||
	    !s->se_hello.fh_label_values)
		goto fail;
	for (i = 0; i < h->fh_nlabels; i++) {
		s->se_hello.fh_label_keys[i] = dup_or_empty(h->fh_label_keys[i]);
		s->se_hello.fh_label_values[i] = dup_or_empty(h->fh_label_values[i]);
		if (!s->se_hello.fh_label_keys[i] || !s->se_hello.fh_label_values[i])
			goto fail;
	}
	if (defs_init(&s->se_mappings, sizeof(struct sess_mapping)) ||
	    defs_init(&s->se_threads, sizeof(struct sess_thread)) ||
	    defs_init(&s->se_stacks, sizeof(struct sess_stack)))
		goto fail;
	*out = s;
	return 0;
fail:
	fp_session_free(s);
	return -ENOMEM;
}

void fp_session_free(struct fp_session *s)
{
	size_t i;

	if (!s)
		return;
	for (i = 0; s->se_mappings.d_ids && i < defs_count(&s->se_mappings) &&
		    i < s->se_mappings.d_cap; i++)
		free(((struct sess_mapping *)defs_at(&s->se_mappings, i))->sm_path);
	for (i = 0; s->se_threads.d_ids && i < defs_count(&s->se_threads) &&
		    i < s->se_threads.d_cap; i++)
		free(((struct sess_thread *)defs_at(&s->se_threads, i))->st_container);
	for (i = 0; s->se_stacks.d_ids && i < defs_count(&s->se_stacks) &&
		    i < s->se_stacks.d_cap; i++)
		free(((struct sess_stack *)defs_at(&s->se_stacks, i))->ss_frames);
	fp_intern_free(s->se_mappings.d_ids);
	fp_intern_free(s->se_threads.d_ids);
	fp_intern_free(s->se_stacks.d_ids);
	free(s->se_mappings.d_items);
	free(s->se_threads.d_items);
	free(s->se_stacks.d_items);
	fp_hello_fini(&s->se_hello);
	free(s);
}

const struct fp_hello *fp_session_hello(const struct fp_session *s)
{
	return &s->se_hello;
}

/* A reference is valid if it is defined earlier in the session or in b. */
static int batch_defines(const uint32_t *ids, size_t n, uint32_t id)
{
	size_t i;

	for (i = 0; i < n; i++)
		if (ids[i] == id)
			return 1;
	return 0;
}

static int check_batch(struct fp_session *s, const struct fp_batch *b)
{
	uint32_t idx, *mids = NULL, *tids = NULL, *sids = NULL;
	size_t i, j;
	int err = 0;

	if (defs_count(&s->se_stacks) + b->fb_nstacks > FP_SESSION_MAX_STACKS)
		return -E2BIG;
	mids = malloc((b->fb_nmappings + 1) * sizeof(*mids));
	tids = malloc((b->fb_nthreads + 1) * sizeof(*tids));
	sids = malloc((b->fb_nstacks + 1) * sizeof(*sids));
	if (!mids || !tids || !sids) {
		err = -ENOMEM;
		goto out;
	}
	for (i = 0; i < b->fb_nmappings; i++)
		mids[i] = b->fb_mappings[i].fm_id;
	for (i = 0; i < b->fb_nthreads; i++)
		tids[i] = b->fb_threads[i].ft_id;
	for (i = 0; i < b->fb_nstacks; i++)
		sids[i] = b->fb_stacks[i].fs_id;
	/* Linear scans of the batch are fine for the usual few hundred new
	 * definitions; the session side is hashed. */
	for (i = 0; i < b->fb_nstacks && !err; i++) {
		const struct fp_stack *st = &b->fb_stacks[i];
		if (defs_find(&s->se_threads, st->fs_thread, &idx) &&
		    !batch_defines(tids, b->fb_nthreads, st->fs_thread))
			err = -ESTALE;
		for (j = 0; j < st->fs_nframes && !err; j++) {
			uint32_t m = st->fs_frames[j].ff_mapping;
			if (m != FP_MAPPING_NONE && defs_find(&s->se_mappings, m, &idx) &&
			    !batch_defines(mids, b->fb_nmappings, m))
				err = -ESTALE;
		}
	}
	for (i = 0; i < b->fb_ncounts && !err; i++)
		if (defs_find(&s->se_stacks, b->fb_counts[i].fc_stack, &idx) &&
		    !batch_defines(sids, b->fb_nstacks, b->fb_counts[i].fc_stack))
			err = -ESTALE;
out:
	free(mids);
	free(tids);
	free(sids);
	return err;
}

int fp_session_apply(struct fp_session *s, const struct fp_batch *b)
{
	size_t i, j;
	uint32_t idx;
	int added, err;

	if ((err = check_batch(s, b)))
		return err;
	for (i = 0; i < b->fb_nmappings; i++) {
		const struct fp_mapping *m = &b->fb_mappings[i];
		struct sess_mapping *sm = defs_slot(&s->se_mappings, m->fm_id, &added);
		char *path = strdup(m->fm_path ? m->fm_path : "");
		if (!sm || !path) {
			free(path);
			return -ENOMEM;
		}
		free(sm->sm_path);
		*sm = (struct sess_mapping){ m->fm_kind, 0, m->fm_build_id, path };
	}
	for (i = 0; i < b->fb_nthreads; i++) {
		const struct fp_thread *t = &b->fb_threads[i];
		struct sess_thread *st = defs_slot(&s->se_threads, t->ft_id, &added);
		char *container = dup_or_empty(t->ft_container);
		if (!st || !container) {
			free(container);
			return -ENOMEM;
		}
		free(st->st_container);
		st->st_pid = t->ft_pid;
		st->st_tid = t->ft_tid;
		memcpy(st->st_comm, t->ft_comm, FP_COMM_LEN);
		memcpy(st->st_process, t->ft_process, FP_COMM_LEN);
		st->st_comm[FP_COMM_LEN - 1] = st->st_process[FP_COMM_LEN - 1] = '\0';
		st->st_container = container;
	}
	for (i = 0; i < b->fb_nstacks; i++) {
		const struct fp_stack *in = &b->fb_stacks[i];
		struct sess_stack *ss = defs_slot(&s->se_stacks, in->fs_id, &added);
		struct fp_frame *frames = malloc((in->fs_nframes + 1) * sizeof(*frames));
		if (!ss || !frames) {
			free(frames);
			return -ENOMEM;
		}
		/* Store dense indexes, so that profiles need no id look-ups. */
		for (j = 0; j < in->fs_nframes; j++) {
			frames[j] = in->fs_frames[j];
			if (frames[j].ff_mapping != FP_MAPPING_NONE) {
				defs_find(&s->se_mappings, frames[j].ff_mapping, &idx);
				frames[j].ff_mapping = idx;
			}
		}
		defs_find(&s->se_threads, in->fs_thread, &idx);
		free(ss->ss_frames);
		*ss = (struct sess_stack){ idx, in->fs_nframes, frames };
	}
	return 0;
}

static int is_user_frame(const struct fp_session *s, const struct fp_frame *f)
{
	if (f->ff_mapping == FP_MAPPING_NONE)
		return f->ff_offset < (1ull << 63);
	return ((const struct sess_mapping *)defs_at(&s->se_mappings, f->ff_mapping))->sm_kind ==
	       FP_MAP_USER;
}

int fp_session_profile(struct fp_session *s, struct fp_resolver *r, const struct fp_batch *b,
		       struct fp_profile **out)
{
	uint32_t *pmap = NULL, frames[FP_MAX_FRAMES];
	struct fp_profile *p = NULL;
	struct fp_lookup *l = NULL;
	size_t i, j, nmap = defs_count(&s->se_mappings);
	int err;

	if ((err = fp_profile_alloc(&p, s->se_hello.fh_host, b->fb_start_ns,
				    b->fb_end_ns > b->fb_start_ns ? b->fb_end_ns - b->fb_start_ns : 0,
				    b->fb_period_ns)))
		return err;
	pmap = malloc((nmap + 1) * sizeof(*pmap));
	if (!pmap) {
		err = -ENOMEM;
		goto out;
	}
	for (i = 0; i < nmap; i++)
		pmap[i] = FP_INDEX_NONE;
	if ((err = fp_resolver_begin(r, &l)))
		goto out;
	for (i = 0; i < b->fb_ncounts; i++) {
		const struct sess_stack *ss;
		const struct sess_thread *th;
		uint32_t idx;

		if (defs_find(&s->se_stacks, b->fb_counts[i].fc_stack, &idx))
			continue; /* fp_session_apply checked: cannot happen */
		ss = defs_at(&s->se_stacks, idx);
		th = defs_at(&s->se_threads, ss->ss_thread);
		int leaf = 1; /* the interrupted instruction of kernel, then of user */

		for (j = 0; j < ss->ss_nframes; j++) {
			const struct fp_frame *f = &ss->ss_frames[j];
			const struct sess_mapping *m = NULL;
			struct fp_resolved res = { 0 };
			uint32_t pm = FP_INDEX_NONE;
			uint8_t kind = FP_FRAME_USER;
			uint64_t at;

			if (f->ff_mapping != FP_MAPPING_NONE) {
				m = defs_at(&s->se_mappings, f->ff_mapping);
				if (pmap[f->ff_mapping] == FP_INDEX_NONE &&
				    (err = fp_profile_add_mapping(p, m->sm_kind, &m->sm_build_id,
								  m->sm_path, &pmap[f->ff_mapping])))
					goto out;
				pm = pmap[f->ff_mapping];
				kind = m->sm_kind == FP_MAP_USER ? FP_FRAME_USER : FP_FRAME_KERNEL;
			} else if (f->ff_offset >= (1ull << 63)) {
				kind = FP_FRAME_KERNEL; /* outside vmlinux and modules: BPF, trampolines */
			}
			if (kind == FP_FRAME_USER && j > 0 &&
			    !is_user_frame(s, &ss->ss_frames[j - 1]))
				leaf = 1; /* first user frame: where user code was interrupted */
			/* Callers' addresses are return addresses: the call is the
			 * instruction before, possibly the last of its function. */
			at = leaf || !f->ff_offset ? f->ff_offset : f->ff_offset - 1;
			leaf = 0;
			if (m)
				fp_resolver_frame(l, m->sm_kind, &m->sm_build_id, m->sm_path,
						  th->st_pid, at, &res);
			if ((err = fp_profile_add_frame(p, pm, f->ff_offset, kind, res.rs_function,
							res.rs_system_name, &frames[j])))
				goto out;
		}
		if ((err = fp_profile_add_sample(p, frames, ss->ss_nframes, th->st_pid, th->st_tid,
						 th->st_comm, th->st_process, th->st_container,
						 b->fb_counts[i].fc_count)))
			goto out;
	}
out:
	fp_resolver_end(l);
	free(pmap);
	if (err) {
		fp_profile_free(p);
		return err;
	}
	*out = p;
	return 0;
}

int fp_session_wants(struct fp_session *s, struct fp_resolver *r, struct fp_build_id **ids,
		     size_t *n)
{
	struct fp_build_id *out = NULL;
	size_t i, count = 0, cap = 0;

	for (i = 0; i <= defs_count(&s->se_mappings); i++) {
		const struct fp_build_id *id;
		uint8_t *asked;

		if (i == defs_count(&s->se_mappings)) { /* the kernel itself, from hello */
			id = &s->se_hello.fh_kernel_build_id;
			asked = &s->se_kernel_asked;
		} else {
			struct sess_mapping *m = defs_at(&s->se_mappings, i);
			if (m->sm_kind == FP_MAP_USER)
				continue;
			id = &m->sm_build_id;
			asked = &m->sm_asked;
		}
		if (*asked || !id->fb_len)
			continue;
		*asked = 1;
		if (fp_resolver_has(r, id))
			continue;
		if (count == cap) {
			size_t nc = cap ? cap * 2 : 4;
			struct fp_build_id *p = realloc(out, nc * sizeof(*p));
			if (!p) {
				free(out);
				return -ENOMEM;
			}
			out = p, cap = nc;
		}
		out[count++] = *id;
	}
	*ids = out;
	*n = count;
	return 0;
}

int fp_session_seen(const struct fp_session *s, uint64_t seq)
{
	return seq <= s->se_last_seq;
}

void fp_session_done(struct fp_session *s, uint64_t seq)
{
	if (seq > s->se_last_seq)
		s->se_last_seq = seq;
}
