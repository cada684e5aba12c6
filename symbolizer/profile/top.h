/* top.h: the views of a profile a terminal shows (`fleetprof report`):
 * functions by their self and total value, and the call tree.
 *
 * A function's self value is that of the stacks it is the leaf of; its
 * total that of the stacks it is in, each stack counted once however many
 * times the function recurs in it, as `go tool pprof -top` counts flat and
 * cum.  Values keep their sign (a pprof diff may hold negative ones).
 */
#ifndef FP_TOP_H
#define FP_TOP_H

#include <stddef.h>
#include <stdint.h>
#include "namestacks.h"

struct fp_top_row {
	uint32_t tr_name; /* name id (fp_namestacks_name) */
	int64_t tr_self, tr_total;
};

enum fp_top_sort { FP_TOP_BY_SELF, FP_TOP_BY_TOTAL };

/* fp_top_functions: one row per function of the stacks of process (a
 * name id; FP_NAME_NONE: every stack), sorted by the magnitude of self
 * or total value, larger first, then by name, as `go tool pprof -top`
 * and `-top -cum` order them.  *rows (the caller frees it) has *n rows.  *sum is the sum of
 * the magnitudes of those stacks' values (the 100% of the shares).  0 or
 * -ENOMEM. */
int fp_top_functions(const struct fp_namestacks *nk, uint32_t process, enum fp_top_sort sort,
		     struct fp_top_row **rows, size_t *n, uint64_t *sum);

/* The call tree: a node per distinct path from a root, the root being the
 * stack's process when it has one, else its outermost function. */
struct fp_tree_node {
	uint32_t tn_name;  /* name id */
	uint32_t tn_depth; /* 0 for a root */
	int tn_process;    /* a process, not a function */
	int64_t tn_self, tn_total;
	uint32_t tn_child; /* first child, larger totals first; 0: none */
	uint32_t tn_next;  /* next sibling; 0: none */
};

/* fp_top_tree: the call tree of the stacks of process (FP_NAME_NONE:
 * every stack).  (*nodes)[0] is a hidden root whose children (tn_child,
 * then tn_next) are the tree's roots; its tn_total is the sum of the
 * magnitudes of the stacks' values (the 100% of the shares).  The caller
 * frees *nodes.  0, -E2BIG (more than 2^31 nodes) or -ENOMEM. */
int fp_top_tree(const struct fp_namestacks *nk, uint32_t process, struct fp_tree_node **nodes,
		size_t *n);

#endif
