/* fuzz_report.c: libFuzzer target for what `fleetprof report` reads
 * (symbolizer/profile/namestacks.c: pprof, gzip'd or not, and folded
 * stacks) and the views it prints (top.c).
 *
 * Input: one byte that picks the sample type asked for (odd: "cpu"), then
 * the file, copied to a buffer of exactly its size so that ASan catches
 * any read past it.  Invariants (abort() on violation): a refused file
 * leaves nothing behind and says why; over every process, the shares'
 * 100% and the tree's total are the stacks' total, and the functions'
 * self values add up to those of the stacks that have frames. */
#include "namestacks.h"
#include "top.h"

#include <stdint.h>
#include <stdlib.h>
#include <string.h>

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	struct fp_namestacks *nk;
	struct fp_top_row *rows = NULL;
	struct fp_tree_node *tree = NULL;
	size_t n = 0, ntree = 0, i;
	uint64_t sum = 0, total = 0;
	int64_t selfs = 0;
	char err[256];
	uint8_t *copy;

	if (!size)
		return 0;
	copy = malloc(size - 1 ? size - 1 : 1);
	if (!copy)
		return 0;
	memcpy(copy, data + 1, size - 1);
	if (fp_namestacks_alloc(&nk)) {
		free(copy);
		return 0;
	}
	if (fp_namestacks_read(nk, copy, size - 1, data[0] & 1 ? "cpu" : NULL, err, sizeof(err))) {
		if (nk->nk_nstacks || nk->nk_nframes || !err[0])
			abort();
		goto out;
	}
	/* The stacks' total: the sum of the values' magnitudes. */
	for (i = 0; i < nk->nk_nstacks; i++) {
		int64_t v = nk->nk_stacks[i].ns_value;

		total += v < 0 ? -(uint64_t)v : (uint64_t)v;
	}
	if (fp_top_functions(nk, FP_NAME_NONE, data[0] & 2 ? FP_TOP_BY_TOTAL : FP_TOP_BY_SELF,
			     &rows, &n, &sum) == 0) {
		if (sum != total)
			abort();
		for (i = 0; i < n; i++)
			selfs += rows[i].tr_self;
		for (i = 0; i < nk->nk_nstacks; i++)
			if (nk->nk_stacks[i].ns_depth)
				selfs -= nk->nk_stacks[i].ns_value;
		if (selfs)
			abort();
	}
	if (fp_top_tree(nk, FP_NAME_NONE, &tree, &ntree) == 0 &&
	    (uint64_t)tree[0].tn_total != total)
		abort();
out:
	free(rows);
	free(tree);
	fp_namestacks_free(nk);
	free(copy);
	return 0;
}
