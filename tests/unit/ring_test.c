/* ring_test.c: the agent's buffer of intervals (device/ring.c): kept after
 * the acknowledgement until written, sent again after a lost session,
 * what a full buffer drops and counts, and a rejected interval taken out
 * from behind the kept ones. */
#include "check.h"
#include "ring.h"

#include <stdlib.h>

/* push: interval seq with samples samples and one count that owns memory
 * (ASan sees a leak or a double free). */
static int push(struct fp_ring *r, uint64_t seq, uint64_t samples, struct fp_interval *lost)
{
	struct fp_interval iv = { .fi_seq = seq, .fi_samples = samples, .fi_ncounts = 1 };

	iv.fi_counts = calloc(1, sizeof(*iv.fi_counts));
	return fp_ring_push(r, &iv, lost);
}

/* seqs: the ring's seqs, oldest first, as one number in base 100. */
static uint64_t seqs(struct fp_ring *r)
{
	uint64_t v = 0;

	for (size_t i = 0; i < fp_ring_len(r); i++)
		v = v * 100 + fp_ring_at(r, i)->fi_seq;
	return v;
}

static void kept_until_written(void)
{
	struct fp_ring r;
	struct fp_interval lost;

	CHECK_EQ_INT(fp_ring_init(&r, 8), 0);
	for (uint64_t s = 1; s <= 4; s++)
		CHECK_EQ_INT(push(&r, s, 10 * s, &lost), 0);
	CHECK_EQ_INT(fp_ring_next(&r)->fi_seq, 1);
	CHECK_EQ_INT(fp_ring_ack(&r), 1);
	CHECK_EQ_INT(fp_ring_ack(&r), 1);
	/* Two acknowledged, nothing written yet: both kept, 3 is next. */
	fp_ring_written(&r, 1, 0);
	CHECK_EQ_INT(fp_ring_len(&r), 4);
	CHECK_EQ_INT(fp_ring_unsent(&r), 2);
	CHECK_EQ_INT(fp_ring_next(&r)->fi_seq, 3);
	/* 1 written: 2 stays kept. */
	fp_ring_written(&r, 1, 1);
	CHECK_EQ_INT(seqs(&r), 20304);
	CHECK_EQ_INT(fp_ring_unsent(&r), 2);
	/* Written beyond what was acknowledged frees only acknowledged ones. */
	fp_ring_written(&r, 1, 9);
	CHECK_EQ_INT(seqs(&r), 304);
	CHECK_EQ_INT(fp_ring_unsent(&r), 2);
	/* A server that does not say: acknowledged means done. */
	CHECK_EQ_INT(fp_ring_ack(&r), 1);
	fp_ring_written(&r, 0, 0);
	CHECK_EQ_INT(seqs(&r), 4);
	fp_ring_fini(&r);
}

static void sent_again_counted_once(void)
{
	struct fp_ring r;
	struct fp_interval lost;

	CHECK_EQ_INT(fp_ring_init(&r, 8), 0);
	push(&r, 1, 5, &lost);
	push(&r, 2, 5, &lost);
	CHECK_EQ_INT(fp_ring_ack(&r), 1);
	CHECK_EQ_INT(fp_ring_ack(&r), 1);
	CHECK(fp_ring_next(&r) == NULL);
	/* The symbolizer lost our session: both go again, from the oldest,
	 * and their acknowledgements are not counted twice. */
	fp_ring_resend(&r);
	CHECK_EQ_INT(fp_ring_unsent(&r), 2);
	CHECK_EQ_INT(fp_ring_next(&r)->fi_seq, 1);
	CHECK_EQ_INT(fp_ring_ack(&r), 0);
	CHECK_EQ_INT(fp_ring_ack(&r), 0);
	/* Failing back: the one left writes them. */
	fp_ring_forget_acked(&r);
	CHECK_EQ_INT(fp_ring_len(&r), 0);
	fp_ring_fini(&r);
}

static void full_drops_oldest(void)
{
	struct fp_ring r;
	struct fp_interval lost = { 0 };
	uint64_t batches = 0, samples = 0;

	CHECK_EQ_INT(fp_ring_init(&r, 3), 0);
	push(&r, 1, 11, &lost);
	push(&r, 2, 12, &lost);
	push(&r, 3, 13, &lost);
	/* Full, the oldest unsent: a loss, reported. */
	CHECK_EQ_INT(push(&r, 4, 14, &lost), 1);
	CHECK_EQ_INT(lost.fi_seq, 1);
	CHECK_EQ_INT(lost.fi_samples, 11);
	CHECK_EQ_INT(seqs(&r), 20304);
	/* Full, the oldest acknowledged (kept): no loss. */
	CHECK_EQ_INT(fp_ring_ack(&r), 1);
	CHECK_EQ_INT(push(&r, 5, 15, &lost), 0);
	CHECK_EQ_INT(seqs(&r), 30405);
	CHECK_EQ_INT(fp_ring_unsent(&r), 3);
	/* Starting over: the unsent ones are the losses. */
	CHECK_EQ_INT(fp_ring_ack(&r), 1);
	fp_ring_clear(&r, &batches, &samples);
	CHECK_EQ_INT(batches, 2);
	CHECK_EQ_INT(samples, 14 + 15);
	CHECK_EQ_INT(fp_ring_len(&r), 0);
	fp_ring_fini(&r);
}

static void rejected_behind_kept(void)
{
	struct fp_ring r;
	struct fp_interval lost;

	CHECK_EQ_INT(fp_ring_init(&r, 4), 0);
	/* Wrapped around the end of the array, to move across it. */
	for (uint64_t s = 1; s <= 6; s++)
		push(&r, s, 1, &lost);
	CHECK_EQ_INT(seqs(&r), 3040506);
	CHECK_EQ_INT(fp_ring_ack(&r), 1);
	CHECK_EQ_INT(fp_ring_ack(&r), 1);
	/* 5 is rejected: 3 and 4 stay kept, in order, and 6 is next. */
	fp_ring_drop_unsent(&r);
	CHECK_EQ_INT(seqs(&r), 30406);
	CHECK_EQ_INT(fp_ring_unsent(&r), 1);
	CHECK_EQ_INT(fp_ring_next(&r)->fi_seq, 6);
	fp_ring_written(&r, 1, 4);
	CHECK_EQ_INT(seqs(&r), 6);
	fp_ring_drop_unsent(&r);
	CHECK_EQ_INT(fp_ring_len(&r), 0);
	fp_ring_drop_unsent(&r); /* nothing unsent: nothing happens */
	CHECK_EQ_INT(fp_ring_len(&r), 0);
	fp_ring_fini(&r);
}

int main(void)
{
	RUN(kept_until_written);
	RUN(sent_again_counted_once);
	RUN(full_drops_oldest);
	RUN(rejected_behind_kept);
	return CHECK_DONE();
}
