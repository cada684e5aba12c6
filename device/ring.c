/* ring.c: the agent's buffer of intervals.  See ring.h. */
#include "ring.h"

#include <errno.h>
#include <stdlib.h>

int fp_ring_init(struct fp_ring *r, size_t cap)
{
	*r = (struct fp_ring){ .rg_cap = cap };
	if (!cap || !(r->rg_buf = calloc(cap, sizeof(*r->rg_buf))))
		return -ENOMEM;
	return 0;
}

void fp_ring_fini(struct fp_ring *r)
{
	fp_ring_clear(r, &(uint64_t){ 0 }, &(uint64_t){ 0 });
	free(r->rg_buf);
	r->rg_buf = NULL;
}

struct fp_interval *fp_ring_at(struct fp_ring *r, size_t i)
{
	return &r->rg_buf[(r->rg_head + i) % r->rg_cap];
}

struct fp_interval *fp_ring_next(struct fp_ring *r)
{
	return r->rg_acked < r->rg_len ? fp_ring_at(r, r->rg_acked) : NULL;
}

/* pop: free the oldest interval. */
static void pop(struct fp_ring *r)
{
	fp_interval_fini(fp_ring_at(r, 0));
	r->rg_head = (r->rg_head + 1) % r->rg_cap;
	r->rg_len--;
	if (r->rg_acked)
		r->rg_acked--;
}

int fp_ring_push(struct fp_ring *r, const struct fp_interval *iv, struct fp_interval *lost)
{
	int loss = 0;

	if (r->rg_len == r->rg_cap) {
		loss = r->rg_acked == 0;
		if (loss) {
			*lost = *fp_ring_at(r, 0);
			lost->fi_counts = NULL, lost->fi_ncounts = 0;
		}
		pop(r);
	}
	*fp_ring_at(r, r->rg_len++) = *iv;
	return loss;
}

int fp_ring_ack(struct fp_ring *r)
{
	struct fp_interval *iv = fp_ring_next(r);
	int first;

	if (!iv)
		return 0;
	first = !iv->fi_acked;
	iv->fi_acked = 1;
	r->rg_acked++;
	return first;
}

void fp_ring_written(struct fp_ring *r, int has, uint64_t seq)
{
	while (r->rg_acked && (!has || fp_ring_at(r, 0)->fi_seq <= seq))
		pop(r);
}

void fp_ring_drop_unsent(struct fp_ring *r)
{
	size_t i;

	if (r->rg_acked == r->rg_len)
		return;
	/* The acknowledged ones before it move up one place, in order. */
	fp_interval_fini(fp_ring_at(r, r->rg_acked));
	for (i = r->rg_acked; i > 0; i--)
		*fp_ring_at(r, i) = *fp_ring_at(r, i - 1);
	r->rg_head = (r->rg_head + 1) % r->rg_cap;
	r->rg_len--;
}

void fp_ring_resend(struct fp_ring *r)
{
	r->rg_acked = 0;
}

void fp_ring_forget_acked(struct fp_ring *r)
{
	while (r->rg_acked)
		pop(r);
}

void fp_ring_clear(struct fp_ring *r, uint64_t *batches, uint64_t *samples)
{
	size_t i;

	for (i = 0; r->rg_buf && i < r->rg_len; i++) {
		struct fp_interval *iv = fp_ring_at(r, i);
		if (i >= r->rg_acked) {
			(*batches)++;
			*samples += iv->fi_samples;
		}
		fp_interval_fini(iv);
	}
	r->rg_head = r->rg_len = r->rg_acked = 0;
}
