/* session.c: definitions by id, validation, resolution into a profile. */
#include "session.h"
#include "intern.h"
#include "pyline.h"
#include "unwind_table.h"
#include "vec.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>

struct sess_mapping {
	uint8_t sm_kind;
	uint8_t sm_asked;
	struct fp_build_id sm_build_id;
	char *sm_path;
	struct fp_pycode *sm_py; /* FP_MAP_PYTHON: the code object (owned) */
	uint32_t sm_py_bytes;    /* its cost, counted in se_py_bytes */
};

/* py_bytes: what a Python mapping definition costs the session. */
static uint64_t py_bytes(const struct fp_mapping *m)
{
	if (m->fm_kind != FP_MAP_PYTHON || !m->fm_py)
		return 0;
	return (m->fm_path ? strlen(m->fm_path) : 0) +
	       (m->fm_py->pc_qualname ? strlen(m->fm_py->pc_qualname) : 0) +
	       m->fm_py->pc_linetable_len + sizeof(struct fp_pycode);
}

/* An unwind table the agent may need, by distinct user build-ID. */
enum { TABLE_PENDING, TABLE_SENDING, TABLE_DONE };

struct sess_table {
	uint8_t tb_state;
	uint8_t tb_noted;    /* its path was given to the resolver */
	uint8_t tb_cfi;      /* its CFI is wanted from the device (fp_session_cfi_wanted) */
	uint32_t tb_sent;    /* bytes sent (TABLE_SENDING) */
	uint32_t tb_mapping; /* the first mapping with the build-ID */
	uint64_t tb_id;      /* the version being sent (TABLE_SENDING) */
};

struct sess_thread {
	uint32_t st_pid, st_tid;
	char st_comm[FP_COMM_LEN];
	char st_process[FP_COMM_LEN];
	char *st_container;
};

struct sess_node {
	uint32_t sn_parent;  /* index into se_nodes, or FP_NODE_NONE */
	uint32_t sn_mapping; /* index into se_mappings, or FP_MAPPING_NONE */
	uint64_t sn_offset;
	uint32_t sn_depth; /* frames from here to the outermost */
};

/* Resolved profile frames of nodes, valid for one profile (generation). */
struct node_memo {
	uint32_t nm_gen[2]; /* [0] as a caller, [1] as a leaf */
	uint32_t nm_frame[2];
};

/* One table per kind of definition: agent id -> dense index. */
struct defs {
	struct fp_intern *d_ids;
	void *d_items;
	size_t d_cap, d_elem;
};

struct fp_session {
	struct fp_hello se_hello;
	struct defs se_mappings, se_threads, se_nodes;
	struct node_memo *se_memo;
	size_t se_memo_cap;
	uint32_t se_gen;
	uint64_t se_last_seq;
	uint64_t se_py_bytes; /* held by Python mappings (sm_py_bytes) */
	uint8_t se_kernel_asked;
	uint8_t se_kfuncs_done;         /* the kernel's function starts were sent (or cannot be) */
	struct fp_intern *se_asked;     /* build-IDs whose kallsyms were asked for */
	struct fp_intern *se_table_ids; /* build-ID -> index into se_tables */
	struct fp_intern *se_held_ids;  /* build-ID -> index into se_held */
	uint64_t *se_held;              /* the hello's table ids (HELLO key 11) */
	struct sess_table *se_tables;
	size_t se_tables_cap;
	size_t se_tables_scanned; /* mappings looked at for tables */
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
	/* On failure the id stays interned with a zeroed item. */
	if (fp_vec_reserve_zeroed(&d->d_items, &d->d_cap, (size_t)idx + 1, d->d_elem))
		return NULL;
	return defs_at(d, idx);
}

static char *dup_or_empty(const char *s)
{
	return strdup(s ? s : "");
}

int fp_session_alloc(struct fp_session **out, const struct fp_hello *h)
{
	struct fp_session *s = calloc(1, sizeof(*s));

	if (!s)
		return -ENOMEM;
	if (fp_hello_copy(&s->se_hello, h))
		goto fail;
	if (defs_init(&s->se_mappings, sizeof(struct sess_mapping)) ||
	    defs_init(&s->se_threads, sizeof(struct sess_thread)) ||
	    defs_init(&s->se_nodes, sizeof(struct sess_node)) ||
	    fp_intern_alloc(&s->se_table_ids) || fp_intern_alloc(&s->se_asked) ||
	    fp_intern_alloc(&s->se_held_ids))
		goto fail;
	/* The tables the agent holds: the first entry of a build-ID counts. */
	if (!(s->se_held = calloc(h->fh_nheld + 1, sizeof(*s->se_held))))
		goto fail;
	for (size_t i = 0; i < h->fh_nheld; i++) {
		const struct fp_build_id *id = &h->fh_held[i].ht_build_id;
		uint32_t idx;
		int added;

		if (fp_intern_get(s->se_held_ids, id->fb_data, id->fb_len, &idx, &added))
			goto fail;
		if (added)
			s->se_held[idx] = h->fh_held[i].ht_id;
	}
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
	for (i = 0;
	     s->se_mappings.d_ids && i < defs_count(&s->se_mappings) && i < s->se_mappings.d_cap;
	     i++) {
		struct sess_mapping *m = defs_at(&s->se_mappings, i);
		free(m->sm_path);
		fp_pycode_free(m->sm_py);
	}
	for (i = 0;
	     s->se_threads.d_ids && i < defs_count(&s->se_threads) && i < s->se_threads.d_cap; i++)
		free(((struct sess_thread *)defs_at(&s->se_threads, i))->st_container);
	fp_intern_free(s->se_mappings.d_ids);
	fp_intern_free(s->se_threads.d_ids);
	fp_intern_free(s->se_nodes.d_ids);
	fp_intern_free(s->se_table_ids);
	fp_intern_free(s->se_held_ids);
	free(s->se_held);
	fp_intern_free(s->se_asked);
	free(s->se_tables);
	free(s->se_mappings.d_items);
	free(s->se_threads.d_items);
	free(s->se_nodes.d_items);
	free(s->se_memo);
	fp_hello_fini(&s->se_hello);
	free(s);
}

const struct fp_hello *fp_session_hello(const struct fp_session *s)
{
	return &s->se_hello;
}

/* The ids a batch defines, hashed: a hostile batch must not make the
 * checks quadratic. */
struct batch_ids {
	struct fp_intern *bi_mappings, *bi_threads, *bi_nodes;
	uint32_t *bi_depth; /* by position in fb_nodes */
};

static void batch_ids_fini(struct batch_ids *bi)
{
	fp_intern_free(bi->bi_mappings);
	fp_intern_free(bi->bi_threads);
	fp_intern_free(bi->bi_nodes);
	free(bi->bi_depth);
}

static int defined(const struct defs *d, const struct fp_intern *batch, uint32_t id)
{
	uint32_t idx;

	return defs_find(d, id, &idx) == 0 || fp_intern_find(batch, &id, sizeof(id), &idx) == 0;
}

/* defined_after: whether node id is defined in b after its i-th node (a
 * child sent before its parent).  Only asked on the way to a refusal. */
static int defined_after(const struct fp_batch *b, size_t i, uint32_t id)
{
	for (size_t k = i + 1; k < b->fb_nnodes; k++)
		if (b->fb_nodes[k].fn_id == id)
			return 1;
	return 0;
}

/* check_batch: every reference resolves, every node's parent comes before
 * it (so no cycles), no path is deeper than FP_MAX_FRAMES, and no node is
 * redefined (that would change the stacks of all its descendants). */
static int check_batch(struct fp_session *s, const struct fp_batch *b, struct batch_ids *bi)
{
	uint64_t py = 0;
	uint32_t idx;
	size_t i;
	int added;

	/* Counted as if every definition were new: a bound, not an account. */
	if (defs_count(&s->se_nodes) + b->fb_nnodes > FP_SESSION_MAX_NODES ||
	    defs_count(&s->se_mappings) + b->fb_nmappings > FP_SESSION_MAX_MAPPINGS ||
	    defs_count(&s->se_threads) + b->fb_nthreads > FP_SESSION_MAX_THREADS)
		return -E2BIG;
	for (i = 0; i < b->fb_nmappings; i++)
		py += py_bytes(&b->fb_mappings[i]);
	if (s->se_py_bytes + py > FP_SESSION_MAX_PY_BYTES)
		return -E2BIG;
	if (fp_intern_alloc(&bi->bi_mappings) || fp_intern_alloc(&bi->bi_threads) ||
	    fp_intern_alloc(&bi->bi_nodes) ||
	    !(bi->bi_depth = malloc((b->fb_nnodes + 1) * sizeof(*bi->bi_depth))))
		return -ENOMEM;
	for (i = 0; i < b->fb_nmappings; i++)
		if (fp_intern_get(bi->bi_mappings, &b->fb_mappings[i].fm_id, sizeof(uint32_t), &idx,
				  NULL))
			return -ENOMEM;
	for (i = 0; i < b->fb_nthreads; i++)
		if (fp_intern_get(bi->bi_threads, &b->fb_threads[i].ft_id, sizeof(uint32_t), &idx,
				  NULL))
			return -ENOMEM;
	for (i = 0; i < b->fb_nnodes; i++) {
		const struct fp_node *nd = &b->fb_nodes[i];
		uint32_t m = nd->fn_frame.ff_mapping, depth = 1;

		if (defs_find(&s->se_nodes, nd->fn_id, &idx) == 0)
			return -EINVAL;
		if (m != FP_MAPPING_NONE && !defined(&s->se_mappings, bi->bi_mappings, m))
			return -ESTALE;
		if (nd->fn_parent != FP_NODE_NONE) {
			if (fp_intern_find(bi->bi_nodes, &nd->fn_parent, sizeof(uint32_t), &idx) ==
			    0)
				depth = bi->bi_depth[idx] + 1;
			else if (defs_find(&s->se_nodes, nd->fn_parent, &idx) == 0)
				depth = ((struct sess_node *)defs_at(&s->se_nodes, idx))->sn_depth +
					1;
			else
				return defined_after(b, i, nd->fn_parent) ? -EINVAL : -ESTALE;
		}
		if (depth > FP_MAX_FRAMES)
			return -EINVAL;
		if (fp_intern_get(bi->bi_nodes, &nd->fn_id, sizeof(uint32_t), &idx, &added))
			return -ENOMEM;
		if (!added)
			return -EINVAL; /* defined twice in one batch */
		bi->bi_depth[idx] = depth;
	}
	for (i = 0; i < b->fb_ncounts; i++) {
		const struct fp_count *c = &b->fb_counts[i];
		if (!defined(&s->se_threads, bi->bi_threads, c->fc_thread) ||
		    (c->fc_node != FP_NODE_NONE &&
		     !defined(&s->se_nodes, bi->bi_nodes, c->fc_node)))
			return -ESTALE;
	}
	return 0;
}

/* pycode_dup: a copy of c.  NULL on ENOMEM. */
static struct fp_pycode *pycode_dup(const struct fp_pycode *c)
{
	struct fp_pycode *d = calloc(1, sizeof(*d));

	if (!d)
		return NULL;
	*d = *c;
	d->pc_qualname = strdup(c->pc_qualname ? c->pc_qualname : "");
	d->pc_linetable = NULL;
	if (c->pc_linetable_len && c->pc_linetable &&
	    (d->pc_linetable = malloc(c->pc_linetable_len)))
		memcpy(d->pc_linetable, c->pc_linetable, c->pc_linetable_len);
	if (!d->pc_linetable)
		d->pc_linetable_len = 0;
	if (!d->pc_qualname || (c->pc_linetable_len && c->pc_linetable && !d->pc_linetable)) {
		fp_pycode_free(d);
		return NULL;
	}
	return d;
}

int fp_session_apply(struct fp_session *s, const struct fp_batch *b)
{
	struct batch_ids bi = { 0 };
	uint32_t idx;
	size_t i;
	int added, err;

	if ((err = check_batch(s, b, &bi)))
		goto out;
	err = -ENOMEM;
	for (i = 0; i < b->fb_nmappings; i++) {
		const struct fp_mapping *m = &b->fb_mappings[i];
		struct sess_mapping *sm = defs_slot(&s->se_mappings, m->fm_id, &added);
		char *path = strdup(m->fm_path ? m->fm_path : "");
		struct fp_pycode *py = NULL;
		if (!sm || !path ||
		    (m->fm_kind == FP_MAP_PYTHON && m->fm_py && !(py = pycode_dup(m->fm_py)))) {
			free(path);
			goto out;
		}
		free(sm->sm_path);
		fp_pycode_free(sm->sm_py);
		s->se_py_bytes -= sm->sm_py_bytes;
		*sm = (struct sess_mapping){ m->fm_kind, 0,  m->fm_build_id,
					     path,       py, (uint32_t)py_bytes(m) };
		s->se_py_bytes += sm->sm_py_bytes;
	}
	for (i = 0; i < b->fb_nthreads; i++) {
		const struct fp_thread *t = &b->fb_threads[i];
		struct sess_thread *st = defs_slot(&s->se_threads, t->ft_id, &added);
		char *container = dup_or_empty(t->ft_container);
		if (!st || !container) {
			free(container);
			goto out;
		}
		free(st->st_container);
		st->st_pid = t->ft_pid;
		st->st_tid = t->ft_tid;
		memcpy(st->st_comm, t->ft_comm, FP_COMM_LEN);
		memcpy(st->st_process, t->ft_process, FP_COMM_LEN);
		st->st_comm[FP_COMM_LEN - 1] = st->st_process[FP_COMM_LEN - 1] = '\0';
		st->st_container = container;
	}
	/* In batch order, so that each parent is stored before its children;
	 * references become dense indexes, so profiles need no id look-ups. */
	for (i = 0; i < b->fb_nnodes; i++) {
		const struct fp_node *in = &b->fb_nodes[i];
		struct sess_node n = { FP_NODE_NONE, FP_MAPPING_NONE, in->fn_frame.ff_offset,
				       bi.bi_depth[i] },
				 *slot;

		if (in->fn_parent != FP_NODE_NONE &&
		    defs_find(&s->se_nodes, in->fn_parent, &idx) == 0)
			n.sn_parent = idx;
		if (in->fn_frame.ff_mapping != FP_MAPPING_NONE &&
		    defs_find(&s->se_mappings, in->fn_frame.ff_mapping, &idx) == 0)
			n.sn_mapping = idx;
		if (!(slot = defs_slot(&s->se_nodes, in->fn_id, &added)))
			goto out;
		*slot = n;
	}
	err = 0;
out:
	batch_ids_fini(&bi);
	return err;
}

/* is_user_node: a frame of user code: an ELF file's or Python's. */
static int is_user_node(const struct fp_session *s, const struct sess_node *n)
{
	uint8_t kind;

	if (n->sn_mapping == FP_MAPPING_NONE)
		return n->sn_offset < (1ull << 63);
	kind = ((const struct sess_mapping *)defs_at(&s->se_mappings, n->sn_mapping))->sm_kind;
	return kind == FP_MAP_USER || kind == FP_MAP_PYTHON;
}

struct profile_ctx {
	struct fp_session *pc_session;
	struct fp_lookup *pc_lookup;
	struct fp_profile *pc_profile;
	uint32_t *pc_pmap; /* session mapping -> profile mapping */
};

/* add_source: file:line and inlined functions of a resolved frame. */
static int add_source(struct fp_profile *p, uint32_t frame, const struct fp_resolved *res)
{
	struct fp_pinline inl[FP_RESOLVED_MAX_INLINE];
	int k;

	for (k = 0; k < res->rs_ninline; k++)
		inl[k] = (struct fp_pinline){ (char *)res->rs_inline[k].sf_function,
					      (char *)res->rs_inline[k].sf_system_name,
					      (char *)res->rs_inline[k].sf_file,
					      res->rs_inline[k].sf_line };
	return fp_profile_set_source(p, frame, res->rs_file, res->rs_line, inl,
				     (uint32_t)res->rs_ninline);
}

/* python_frame: the frame of a node of a Python code object: its qualified
 * name, file and the line of the instruction at offset, the code's first
 * line when the offset is unknown or has no line.  Every frame of a Python
 * function is at an instruction (a call, for callers), so no "- 1". */
static int python_frame(struct fp_profile *p, const struct sess_mapping *m, uint64_t offset,
			uint32_t *out)
{
	const struct fp_pycode *c = m->sm_py;
	const char *name = c && c->pc_qualname && c->pc_qualname[0] ? c->pc_qualname : "[unknown]";
	uint32_t first = c ? c->pc_firstlineno : 0, line = 0;

	if (c && offset != FP_PY_OFFSET_UNKNOWN)
		line = fp_pyline(c->pc_lines, c->pc_linetable, c->pc_linetable_len, first, offset);
	if (!line)
		line = first;
	return fp_profile_add_python_frame(p, name, m->sm_path ? m->sm_path : "", line, first, out);
}

/* profile_frame: the profile's frame for a node, resolved once per profile
 * and role: a leaf is looked up at its address, a caller at its return
 * address - 1, since the call may be the last instruction of a function. */
static int profile_frame(struct profile_ctx *pc, uint32_t node, int leaf, uint32_t pid,
			 uint32_t *out)
{
	struct fp_session *s = pc->pc_session;
	const struct sess_node *n = defs_at(&s->se_nodes, node);
	struct node_memo *memo = &s->se_memo[node];
	const struct sess_mapping *m = NULL;
	struct fp_resolved res = { 0 };
	uint32_t pm = FP_INDEX_NONE;
	uint8_t kind = is_user_node(s, n) ? FP_FRAME_USER : FP_FRAME_KERNEL;
	uint64_t at = leaf || !n->sn_offset ? n->sn_offset : n->sn_offset - 1;
	int err;

	if (memo->nm_gen[leaf] == s->se_gen) {
		*out = memo->nm_frame[leaf];
		return 0;
	}
	if (n->sn_mapping != FP_MAPPING_NONE &&
	    ((const struct sess_mapping *)defs_at(&s->se_mappings, n->sn_mapping))->sm_kind ==
		    FP_MAP_PYTHON) {
		if ((err = python_frame(pc->pc_profile, defs_at(&s->se_mappings, n->sn_mapping),
					n->sn_offset, out)))
			return err;
		memo->nm_gen[leaf] = s->se_gen;
		memo->nm_frame[leaf] = *out;
		return 0;
	}
	if (n->sn_mapping != FP_MAPPING_NONE) {
		m = defs_at(&s->se_mappings, n->sn_mapping);
		if (pc->pc_pmap[n->sn_mapping] == FP_INDEX_NONE &&
		    (err = fp_profile_add_mapping(pc->pc_profile, m->sm_kind, &m->sm_build_id,
						  m->sm_path, &pc->pc_pmap[n->sn_mapping])))
			return err;
		pm = pc->pc_pmap[n->sn_mapping];
		fp_resolver_frame(pc->pc_lookup, m->sm_kind, &m->sm_build_id, m->sm_path, pid, at,
				  &res);
	}
	if ((err = fp_profile_add_frame(pc->pc_profile, pm, n->sn_offset, kind, res.rs_function,
					res.rs_system_name, out)) ||
	    (res.rs_function && (err = add_source(pc->pc_profile, *out, &res))))
		return err;
	memo->nm_gen[leaf] = s->se_gen;
	memo->nm_frame[leaf] = *out;
	return 0;
}

/* offcpu_leaf: where a wait's stack starts, leaf first: at __schedule,
 * the frames above it being the tracepoint's and the BPF program's own
 * (which differ from kernel to kernel); 0 when it is not there. */
static uint32_t offcpu_leaf(const struct fp_profile *p, const uint32_t *frames, uint32_t n)
{
	for (uint32_t i = 0; i < n && p->pr_frames[frames[i]].pf_kind == FP_FRAME_KERNEL; i++)
		if (p->pr_frames[frames[i]].pf_function &&
		    !strcmp(p->pr_frames[frames[i]].pf_function, "__schedule"))
			return i;
	return 0;
}

/* profile_count: one count's stack, leaf first, into the profile. */
static int profile_count(struct profile_ctx *pc, const struct fp_count *c)
{
	struct fp_session *s = pc->pc_session;
	uint32_t frames[FP_MAX_FRAMES], n = 0, node = FP_NODE_NONE, thread;
	const struct sess_thread *th;
	int leaf = 1, prev_kernel = 0, err;

	if (defs_find(&s->se_threads, c->fc_thread, &thread) ||
	    (c->fc_node != FP_NODE_NONE && defs_find(&s->se_nodes, c->fc_node, &node)))
		return 0; /* fp_session_apply checked: cannot happen */
	th = defs_at(&s->se_threads, thread);
	for (; node != FP_NODE_NONE && n < FP_MAX_FRAMES; n++) {
		const struct sess_node *nd = defs_at(&s->se_nodes, node);
		int user = is_user_node(s, nd);

		/* The first user frame after kernel frames is where user code
		 * was interrupted (the system call), not a return address. */
		if ((err = profile_frame(pc, node, leaf || (user && prev_kernel), th->st_pid,
					 &frames[n])))
			return err;
		leaf = 0;
		prev_kernel = !user;
		node = nd->sn_parent;
	}
	if (c->fc_off_ns) {
		uint32_t from = offcpu_leaf(pc->pc_profile, frames, n);
		return fp_profile_add_block(pc->pc_profile, frames + from, n - from, th->st_pid,
					    th->st_tid, th->st_comm, th->st_process,
					    th->st_container, c->fc_off_ns, c->fc_count);
	}
	return fp_profile_add_sample(pc->pc_profile, frames, n, th->st_pid, th->st_tid, th->st_comm,
				     th->st_process, th->st_container, c->fc_count);
}

/* build_profile: the profile of b's CPU counts, or of its off-CPU ones. */
static int build_profile(struct fp_session *s, struct fp_resolver *r, const struct fp_batch *b,
			 int offcpu, struct fp_profile **out)
{
	struct profile_ctx pc = { .pc_session = s };
	size_t i, nmap = defs_count(&s->se_mappings), nnodes = defs_count(&s->se_nodes);
	int err;

	if ((err = fp_profile_alloc(&pc.pc_profile, s->se_hello.fh_host, b->fb_start_ns,
				    b->fb_end_ns > b->fb_start_ns ? b->fb_end_ns - b->fb_start_ns
								  : 0,
				    b->fb_period_ns)))
		return err;
	err = -ENOMEM;
	if (!(pc.pc_pmap = malloc((nmap + 1) * sizeof(*pc.pc_pmap))))
		goto out;
	for (i = 0; i < nmap; i++)
		pc.pc_pmap[i] = FP_INDEX_NONE;
	if (fp_vec_reserve_zeroed(&s->se_memo, &s->se_memo_cap, nnodes, sizeof(*s->se_memo)))
		goto out;
	if (++s->se_gen == 0) { /* wrapped: old stamps could look current */
		memset(s->se_memo, 0, s->se_memo_cap * sizeof(*s->se_memo));
		s->se_gen = 1;
	}
	if ((err = fp_resolver_begin(r, &pc.pc_lookup)))
		goto out;
	pc.pc_profile->pr_is_offcpu = offcpu;
	for (i = 0; i < b->fb_ncounts && !err; i++)
		if ((b->fb_counts[i].fc_off_ns != 0) == offcpu)
			err = profile_count(&pc, &b->fb_counts[i]);
out:
	fp_resolver_end(pc.pc_lookup);
	free(pc.pc_pmap);
	if (err) {
		fp_profile_free(pc.pc_profile);
		return err;
	}
	*out = pc.pc_profile;
	return 0;
}

int fp_session_profile(struct fp_session *s, struct fp_resolver *r, const struct fp_batch *b,
		       struct fp_profile **out)
{
	int err = build_profile(s, r, b, 0, out);
	size_t i;

	for (i = 0; i < b->fb_ncounts && !err; i++)
		if (b->fb_counts[i].fc_off_ns) {
			if ((err = build_profile(s, r, b, 1, &(*out)->pr_offcpu))) {
				fp_profile_free(*out);
				*out = NULL;
			}
			break;
		}
	return err;
}

int fp_session_wants(struct fp_session *s, struct fp_resolver *r, struct fp_build_id **ids,
		     size_t *n)
{
	struct fp_build_id *out = NULL;
	size_t i, count = 0, cap = 0;
	uint32_t idx;

	for (i = 0; i <= defs_count(&s->se_mappings); i++) {
		const struct fp_build_id *id;
		uint8_t *asked;

		if (i == defs_count(&s->se_mappings)) { /* the kernel itself, from hello */
			id = &s->se_hello.fh_kernel_build_id;
			asked = &s->se_kernel_asked;
		} else {
			struct sess_mapping *m = defs_at(&s->se_mappings, i);
			if (m->sm_kind != FP_MAP_KERNEL && m->sm_kind != FP_MAP_KMODULE)
				continue;
			id = &m->sm_build_id;
			asked = &m->sm_asked;
		}
		if (*asked || !id->fb_len)
			continue;
		*asked = 1;
		if (fp_resolver_has(r, id))
			continue;
		if (fp_intern_get(s->se_asked, id->fb_data, id->fb_len, &idx, NULL)) {
			free(out);
			return -ENOMEM;
		}
		if (fp_vec_reserve(&out, &cap, count + 1, sizeof(*out))) {
			free(out);
			return -ENOMEM;
		}
		out[count++] = *id;
	}
	*ids = out;
	*n = count;
	return 0;
}

int fp_session_asked(const struct fp_session *s, const struct fp_build_id *id)
{
	uint32_t idx;

	return fp_intern_find(s->se_asked, id->fb_data, id->fb_len, &idx) == 0;
}

/* tables_scan: note the build-IDs of user mappings defined since the last
 * call. */
static int tables_scan(struct fp_session *s)
{
	size_t n = defs_count(&s->se_mappings);
	uint32_t idx;
	int added;

	for (; s->se_tables_scanned < n; s->se_tables_scanned++) {
		const struct sess_mapping *m = defs_at(&s->se_mappings, s->se_tables_scanned);
		if (m->sm_kind != FP_MAP_USER || !m->sm_build_id.fb_len)
			continue;
		if (fp_intern_get(s->se_table_ids, m->sm_build_id.fb_data, m->sm_build_id.fb_len,
				  &idx, &added))
			return -ENOMEM;
		if (fp_vec_reserve(&s->se_tables, &s->se_tables_cap, (size_t)idx + 1,
				   sizeof(*s->se_tables)))
			return -ENOMEM; /* retried: the build-ID stays interned */
		if (added)
			s->se_tables[idx] = (struct sess_table){
				.tb_state = TABLE_PENDING,
				.tb_mapping = (uint32_t)s->se_tables_scanned
			};
	}
	return 0;
}

/* held: whether the hello said the agent holds table t of id. */
static int held(const struct fp_session *s, const struct fp_build_id *id,
		const struct fp_stored_table *t)
{
	uint32_t idx;

	return fp_intern_find(s->se_held_ids, id->fb_data, id->fb_len, &idx) == 0 &&
	       s->se_held[idx] == t->st_id;
}

/* table_parts: the parts of table i that fit in what is left of a reply
 * (out->stb_parts, of max, and *budget bytes), from where it was left
 * off; one table is sent at a time, so that a table larger than a part
 * goes out whole before the next begins.  0 or -ENOMEM. */
static int table_parts(struct fp_session *s, struct fp_resolver *r, struct fp_tablestore *ts,
		       uint32_t i, struct fp_session_tables *out, size_t max, size_t *budget)
{
	struct sess_table *t = &s->se_tables[i];
	const struct sess_mapping *m;
	struct fp_stored_table *st;
	struct fp_build_id id = { 0 };
	const void *key;
	size_t klen, part;
	int err;

	if (t->tb_state == TABLE_DONE)
		return 0;
	key = fp_intern_key(s->se_table_ids, i, &klen);
	id.fb_len = (uint8_t)klen;
	memcpy(id.fb_data, key, klen);
	/* A mapping no frame named yet: where its file may be found (once:
	 * noting a path again restarts the search). */
	m = defs_at(&s->se_mappings, t->tb_mapping);
	if (!t->tb_noted && m->sm_path && m->sm_path[0] == '/')
		fp_resolver_note_path(r, &id, m->sm_path, 0);
	t->tb_noted = 1;
	t->tb_cfi = 0;
	if ((err = fp_tablestore_get(ts, &id, &st))) {
		/* None will come (-ENOENT): done.  Not yet (-EAGAIN: being
		 * searched or fetched; -ENODATA: no file of this host has
		 * the CFI, ask the device): still to come, and the next call
		 * asks again, as it does after another error. */
		t->tb_cfi = err == -ENODATA;
		if (err == -ENOENT)
			t->tb_state = TABLE_DONE;
		else if (err == -EAGAIN || err == -ENODATA)
			out->stb_pending++;
		return err == -ENOMEM ? err : 0;
	}
	if (!st->st_needed || st->st_len > FP_TABLE_MAX) {
		t->tb_state = TABLE_DONE;
		fp_tablestore_put(st);
		return 0;
	}
	if (t->tb_sent == 0 && held(s, &id, st)) {
		t->tb_state = TABLE_DONE;
		out->stb_held++;
		out->stb_held_bytes += st->st_len;
		fp_tablestore_put(st);
		return 0;
	}
	if (t->tb_state == TABLE_SENDING && t->tb_id != st->st_id)
		t->tb_sent = 0; /* a new version: from its start (the agent drops the rest) */
	t->tb_id = st->st_id;
	while (t->tb_sent < st->st_len && out->stb_nparts < max && *budget) {
		part = st->st_len - t->tb_sent;
		if (part > FP_TABLE_PART_MAX)
			part = FP_TABLE_PART_MAX;
		if (part > *budget)
			part = *budget;
		fp_tablestore_ref(st);
		out->stb_parts[out->stb_nparts++] = (struct fp_table_part){
			.tp_build_id = id,
			.tp_offset = t->tb_sent,
			.tp_total = (uint32_t)st->st_len,
			.tp_len = (uint32_t)part,
			.tp_data = (uint8_t *)st->st_blob + t->tb_sent,
			.tp_release = fp_tablestore_release,
			.tp_release_arg = st,
		};
		*budget -= part;
		t->tb_sent += (uint32_t)part;
	}
	/* Left off, or not begun for want of room: the next reply goes on. */
	t->tb_state = t->tb_sent == st->st_len ? TABLE_DONE : TABLE_SENDING;
	if (t->tb_state == TABLE_SENDING)
		out->stb_pending++;
	fp_tablestore_put(st);
	return 0;
}

int fp_session_kfuncs(struct fp_session *s, struct fp_resolver *r, struct fp_kfuncs *out)
{
	int err;

	if (s->se_kfuncs_done || !(s->se_hello.fh_features & FP_FEATURE_KFUNCS) ||
	    !s->se_hello.fh_kernel_build_id.fb_len)
		return 0;
	err = fp_resolver_kfuncs(r, &s->se_hello.fh_kernel_build_id, out);
	if (err == -ENOENT) /* the kallsyms are not here yet */
		return 0;
	if (err == -ENOMEM)
		return err;
	s->se_kfuncs_done = 1;
	return 0; /* sent, or a table that gives none (-EINVAL, -E2BIG): never */
}

int fp_session_tables(struct fp_session *s, struct fp_resolver *r, struct fp_tablestore *ts,
		      struct fp_session_tables *out)
{
	size_t budget = out->stb_budget, k,
	       max = s->se_hello.fh_features & FP_FEATURE_HELD_TABLES ? FP_TABLE_REPLY_PARTS
								      : FP_TABLE_REPLY_PARTS_OLD;
	uint32_t i, count, sending;
	int err = tables_scan(s);

	out->stb_parts = NULL;
	out->stb_nparts = 0;
	out->stb_pending = out->stb_held = 0;
	out->stb_held_bytes = 0;
	if (budget > FP_TABLE_REPLY_MAX)
		budget = FP_TABLE_REPLY_MAX;
	if (err)
		return err;
	if (!(out->stb_parts = calloc(max, sizeof(*out->stb_parts))))
		return -ENOMEM;
	count = (uint32_t)fp_intern_count(s->se_table_ids);
	if (count > s->se_tables_cap)
		count = (uint32_t)s->se_tables_cap;
	/* The table left off in an earlier reply goes on first: the agent
	 * takes the parts of one table at a time, in order.  (Others may be
	 * SENDING with nothing sent yet, for want of room.) */
	for (sending = 0; sending < count; sending++)
		if (s->se_tables[sending].tb_state == TABLE_SENDING &&
		    s->se_tables[sending].tb_sent)
			break;
	if (sending < count) {
		err = table_parts(s, r, ts, sending, out, max, &budget);
		if (s->se_tables[sending].tb_state == TABLE_SENDING)
			budget = 0; /* not through: no other table may begin */
	}
	/* Those without room in this reply are looked at all the same: one
	 * the agent holds, or that needs none, is done with now. */
	for (i = 0; !err && i < count; i++)
		if (i != sending)
			err = table_parts(s, r, ts, i, out, max, &budget);
	if (err || !out->stb_nparts) {
		for (k = 0; k < out->stb_nparts; k++)
			fp_tablestore_put(out->stb_parts[k].tp_release_arg);
		free(out->stb_parts);
		out->stb_parts = NULL;
		out->stb_nparts = 0;
	}
	return err;
}

size_t fp_session_cfi_wanted(const struct fp_session *s, struct fp_build_id *ids, size_t max)
{
	size_t i, n = 0, count = fp_intern_count(s->se_table_ids);

	for (i = 0; i < count && i < s->se_tables_cap && n < max; i++) {
		const void *key;
		size_t klen;

		if (s->se_tables[i].tb_state != TABLE_PENDING || !s->se_tables[i].tb_cfi)
			continue;
		key = fp_intern_key(s->se_table_ids, (uint32_t)i, &klen);
		ids[n] = (struct fp_build_id){ .fb_len = (uint8_t)klen };
		memcpy(ids[n++].fb_data, key, klen);
	}
	return n;
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

int fp_session_resolve_again(struct fp_profile *p, struct fp_resolver *r)
{
	struct fp_lookup *l = NULL;
	uint8_t *done = NULL;
	size_t i, j;
	int err = 0;

	if (!p->pr_nframes)
		return 0;
	if (!(done = calloc(p->pr_nframes, 1)) || (err = fp_resolver_begin(r, &l))) {
		free(done);
		return err ? err : -ENOMEM;
	}
	/* Each frame once, in the role of its first sample, as
	 * profile_frame did. */
	for (i = 0; i < p->pr_nsamples && !err; i++) {
		const struct fp_psample *s = &p->pr_samples[i];

		for (j = 0; j < s->ps_nframes && !err; j++) {
			uint32_t f = s->ps_frames[j], again;
			const struct fp_pframe *pf = &p->pr_frames[f];
			const struct fp_pmapping *m;
			struct fp_resolved res = { 0 };
			uint64_t at;

			if (done[f] || pf->pf_function || pf->pf_kind != FP_FRAME_USER ||
			    pf->pf_mapping == FP_INDEX_NONE)
				continue;
			done[f] = 1;
			m = &p->pr_mappings[pf->pf_mapping];
			if (m->pm_kind != FP_MAP_USER || !m->pm_build_id.fb_len)
				continue;
			at = j == 0 || !pf->pf_address ? pf->pf_address : pf->pf_address - 1;
			fp_resolver_frame(l, m->pm_kind, &m->pm_build_id, m->pm_path, s->ps_pid, at,
					  &res);
			if (!res.rs_function)
				continue;
			err = fp_profile_add_frame(p, pf->pf_mapping, pf->pf_address, FP_FRAME_USER,
						   res.rs_function, res.rs_system_name, &again);
			if (!err)
				err = add_source(p, again, &res);
		}
	}
	fp_resolver_end(l);
	free(done);
	return err;
}
