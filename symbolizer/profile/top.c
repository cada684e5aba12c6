/* top.c: functions by self and total value, and the call tree (top.h). */
#include "top.h"
#include "intern.h"
#include "vec.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>

static uint64_t magnitude(int64_t v)
{
	return v < 0 ? -(uint64_t)v : (uint64_t)v;
}

static int in_view(const struct fp_namestack *s, uint32_t process)
{
	return process == FP_NAME_NONE || s->ns_process == process;
}

struct sort_ctx {
	const struct fp_namestacks *nk;
	enum fp_top_sort by;
};

static int cmp_magnitude(int64_t a, int64_t b)
{
	uint64_t x = magnitude(a), y = magnitude(b);

	return x > y ? -1 : x < y; /* larger first */
}

/* qsort_r: the comparison needs the names and the sort key. */
static int row_cmp(const void *a, const void *b, void *arg)
{
	const struct fp_top_row *x = a, *y = b;
	const struct sort_ctx *c = arg;
	int r = c->by == FP_TOP_BY_TOTAL ? cmp_magnitude(x->tr_total, y->tr_total)
					 : cmp_magnitude(x->tr_self, y->tr_self);

	if (!r)
		r = strcmp(fp_namestacks_name(c->nk, x->tr_name),
			   fp_namestacks_name(c->nk, y->tr_name));
	return r ? r : (x->tr_name > y->tr_name) - (x->tr_name < y->tr_name);
}

int fp_top_functions(const struct fp_namestacks *nk, uint32_t process, enum fp_top_sort sort,
		     struct fp_top_row **rows, size_t *n, uint64_t *sum)
{
	size_t names = fp_intern_count(nk->nk_names), i, j, nrows = 0;
	int64_t *self = calloc(names + 1, sizeof(*self)),
		*total = calloc(names + 1, sizeof(*total));
	size_t *seen = calloc(names + 1, sizeof(*seen)); /* the last stack, plus one */
	struct fp_top_row *out = NULL;
	struct sort_ctx ctx = { nk, sort };
	uint64_t all = 0;
	int err = -ENOMEM;

	if (!self || !total || !seen)
		goto out;
	for (i = 0; i < nk->nk_nstacks; i++) {
		const struct fp_namestack *s = &nk->nk_stacks[i];
		if (!in_view(s, process))
			continue;
		all += magnitude(s->ns_value);
		if (!s->ns_depth)
			continue;
		self[nk->nk_frames[s->ns_first]] += s->ns_value;
		for (j = 0; j < s->ns_depth; j++) {
			uint32_t f = nk->nk_frames[s->ns_first + j];
			if (seen[f] != i + 1) { /* once per stack, recursion or not */
				seen[f] = i + 1;
				total[f] += s->ns_value;
			}
		}
	}
	if (!(out = malloc((names ? names : 1) * sizeof(*out))))
		goto out;
	for (i = 0; i < names; i++)
		if (self[i] || total[i] || seen[i])
			out[nrows++] = (struct fp_top_row){ (uint32_t)i, self[i], total[i] };
	qsort_r(out, nrows, sizeof(*out), row_cmp, &ctx);
	*rows = out;
	*n = nrows;
	*sum = all;
	out = NULL;
	err = 0;
out:
	free(out);
	free(self);
	free(total);
	free(seen);
	return err;
}

struct tree {
	struct fp_tree_node *t_nodes;
	size_t t_n, t_cap;
	struct fp_intern *t_index; /* (parent, name, process flag) -> node - 1 */
};

/* tree_child: the child of parent for name, added if new. */
static int tree_child(struct tree *t, uint32_t parent, uint32_t name, int process, uint32_t *out)
{
	uint32_t key[3] = { parent, name, (uint32_t)process }, id;
	int added;

	if (t->t_n >= (1u << 31))
		return -E2BIG;
	if (fp_intern_get(t->t_index, key, sizeof(key), &id, &added))
		return -ENOMEM;
	if (added) {
		if (fp_vec_reserve(&t->t_nodes, &t->t_cap, t->t_n + 1, sizeof(*t->t_nodes)))
			return -ENOMEM; /* the index now names a node never made: */
		/* the caller gives up on the whole tree, so that is harmless */
		t->t_nodes[t->t_n] = (struct fp_tree_node){
			.tn_name = name,
			.tn_depth = t->t_nodes[parent].tn_depth + (parent != 0),
			.tn_process = process,
		};
		t->t_n++;
	}
	*out = id + 1;
	return 0;
}

static int child_cmp(const void *a, const void *b, void *arg)
{
	const struct fp_tree_node *nodes = arg;
	const struct fp_tree_node *x = &nodes[*(const uint32_t *)a],
				  *y = &nodes[*(const uint32_t *)b];
	int r = cmp_magnitude(x->tn_total, y->tn_total);

	return r ? r
		 : (*(const uint32_t *)a > *(const uint32_t *)b) -
			       (*(const uint32_t *)a < *(const uint32_t *)b);
}

/* link_children: tn_child and tn_next, children in order of total. */
static int link_children(struct tree *t)
{
	uint32_t *order = malloc((t->t_n ? t->t_n : 1) * sizeof(*order));
	size_t *first = calloc(t->t_n + 1, sizeof(*first)), i;
	uint32_t *parent = malloc((t->t_n ? t->t_n : 1) * sizeof(*parent));
	int err = -ENOMEM;

	if (!order || !first || !parent)
		goto out;
	/* parents from the index's keys */
	for (i = 1; i < t->t_n; i++) {
		size_t len;
		const uint32_t *key = fp_intern_key(t->t_index, (uint32_t)(i - 1), &len);
		parent[i] = key[0];
	}
	/* counting sort by parent, then each family by total */
	for (i = 1; i < t->t_n; i++)
		first[parent[i] + 1]++;
	for (i = 1; i <= t->t_n; i++)
		first[i] += first[i - 1];
	{
		size_t *fill = calloc(t->t_n + 1, sizeof(*fill));
		if (!fill)
			goto out;
		memcpy(fill, first, (t->t_n + 1) * sizeof(*fill));
		for (i = 1; i < t->t_n; i++)
			order[fill[parent[i]]++] = (uint32_t)i;
		free(fill);
	}
	for (i = 0; i < t->t_n; i++) {
		size_t lo = first[i], hi = first[i + 1], k;
		qsort_r(order + lo, hi - lo, sizeof(*order), child_cmp, t->t_nodes);
		t->t_nodes[i].tn_child = lo < hi ? order[lo] : 0;
		for (k = lo; k < hi; k++)
			t->t_nodes[order[k]].tn_next = k + 1 < hi ? order[k + 1] : 0;
	}
	err = 0;
out:
	free(order);
	free(first);
	free(parent);
	return err;
}

int fp_top_tree(const struct fp_namestacks *nk, uint32_t process, struct fp_tree_node **nodes,
		size_t *n)
{
	struct tree t = { 0 };
	size_t i;
	int err = -ENOMEM;

	if (fp_intern_alloc(&t.t_index) ||
	    fp_vec_reserve(&t.t_nodes, &t.t_cap, 1, sizeof(*t.t_nodes)))
		goto fail;
	t.t_nodes[0] = (struct fp_tree_node){ .tn_name = FP_NAME_NONE };
	t.t_n = 1;
	for (i = 0; i < nk->nk_nstacks; i++) {
		const struct fp_namestack *s = &nk->nk_stacks[i];
		uint32_t at = 0, j;
		if (!in_view(s, process))
			continue;
		t.t_nodes[0].tn_total += (int64_t)magnitude(s->ns_value);
		if (s->ns_process != FP_NAME_NONE) {
			if ((err = tree_child(&t, at, s->ns_process, 1, &at)))
				goto fail;
			t.t_nodes[at].tn_total += s->ns_value;
		}
		for (j = s->ns_depth; j-- > 0;) { /* root first */
			if ((err = tree_child(&t, at, nk->nk_frames[s->ns_first + j], 0, &at)))
				goto fail;
			t.t_nodes[at].tn_total += s->ns_value;
		}
		t.t_nodes[at].tn_self += s->ns_value;
	}
	if ((err = link_children(&t)))
		goto fail;
	fp_intern_free(t.t_index);
	*nodes = t.t_nodes;
	*n = t.t_n;
	return 0;
fail:
	fp_intern_free(t.t_index);
	free(t.t_nodes);
	return err;
}
