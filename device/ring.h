/* ring.h: the agent's buffer of closed intervals, oldest first, until the
 * symbolizer has them safely.
 *
 * The first fp_ring_acked() intervals were acknowledged in this session
 * but are not through the symbolizer's sinks yet: they are kept, to be
 * sent again should it die first.  The others are unsent.  So an interval
 * is in one of three states, and leaves the ring when the symbolizer
 * says it is written (fp_ring_written), when the symbolizer rejects it
 * (fp_ring_drop_unsent), or, the oldest, when the ring is full.
 *
 * Threads.  The agent's main thread owns the ring; nothing is locked.
 */
#ifndef FP_RING_H
#define FP_RING_H

#include <stddef.h>
#include <stdint.h>
#include "collector.h"

struct fp_ring {
	struct fp_interval *rg_buf;
	size_t rg_cap, rg_head, rg_len, rg_acked;
};

/* fp_ring_init: room for cap (>= 1) intervals.  0 or -ENOMEM. */
int fp_ring_init(struct fp_ring *r, size_t cap);
/* fp_ring_fini: frees every interval held. */
void fp_ring_fini(struct fp_ring *r);

static inline size_t fp_ring_len(const struct fp_ring *r)
{
	return r->rg_len;
}

static inline size_t fp_ring_unsent(const struct fp_ring *r)
{
	return r->rg_len - r->rg_acked;
}

/* fp_ring_at: the i-th interval, 0 the oldest (i < fp_ring_len). */
struct fp_interval *fp_ring_at(struct fp_ring *r, size_t i);

/* fp_ring_next: the oldest unsent interval, NULL when none. */
struct fp_interval *fp_ring_next(struct fp_ring *r);

/* fp_ring_push: take iv (its counts now belong to the ring).  When full,
 * the oldest interval goes first: returns 1 when it was unsent (a loss:
 * its seq and samples in *lost), 0 otherwise. */
int fp_ring_push(struct fp_ring *r, const struct fp_interval *iv, struct fp_interval *lost);

/* fp_ring_ack: the oldest unsent interval was acknowledged.  Returns 1
 * the first time this interval is (count its samples then), 0 when it
 * was acknowledged before, in an earlier session. */
int fp_ring_ack(struct fp_ring *r);

/* fp_ring_written: the symbolizer's sinks have this session's intervals
 * up to seq: free the acknowledged ones among them.  has 0 (a symbolizer
 * that does not say): free every acknowledged one. */
void fp_ring_written(struct fp_ring *r, int has, uint64_t seq);

/* fp_ring_drop_unsent: free the oldest unsent interval (rejected). */
void fp_ring_drop_unsent(struct fp_ring *r);

/* fp_ring_resend: every acknowledged interval counts as unsent again (a
 * new session, or a symbolizer that lost ours). */
void fp_ring_resend(struct fp_ring *r);

/* fp_ring_forget_acked: free the acknowledged intervals (the symbolizer
 * we leave is up and writes them). */
void fp_ring_forget_acked(struct fp_ring *r);

/* fp_ring_clear: free every interval; the unsent ones are added to
 * *batches and *samples (losses). */
void fp_ring_clear(struct fp_ring *r, uint64_t *batches, uint64_t *samples);

#endif
