/* hist.h: a latency histogram of fixed size for percentiles: exact below
 * 32, then 32 buckets per power of two (a bucket's upper bound is within
 * 1/32, 3.2%, of any value in it), up to 2^41 - 1; larger values fall in
 * the last bucket.  The caller owns the array of FP_HIST_BUCKETS counters
 * and decides how it is shared (`fleetprof loadgen` adds to it atomically
 * from nng's threads). */
#ifndef FP_HIST_H
#define FP_HIST_H

#include <stddef.h>
#include <stdint.h>

#define FP_HIST_SUB 32
#define FP_HIST_BUCKETS (FP_HIST_SUB + 36 * FP_HIST_SUB)

/* fp_hist_bucket: the bucket of value v. */
size_t fp_hist_bucket(uint64_t v);

/* fp_hist_value: the largest value bucket b holds. */
uint64_t fp_hist_value(size_t b);

/* fp_hist_percentile: the upper bound of the bucket that holds the
 * p-quantile (0 <= p <= 1) of the counts in h; 0 when h is empty. */
uint64_t fp_hist_percentile(const uint64_t *h, double p);

#endif
