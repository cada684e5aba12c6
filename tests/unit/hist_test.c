/* hist_test.c: the latency histogram (common/hist.c): bucket bounds,
 * their precision, and percentiles of known distributions. */
#include <stdint.h>
#include <string.h>

#include "check.h"
#include "hist.h"

/* Every value lies in a bucket whose upper bound is at least the value
 * and within 1/32 of it, and buckets grow with the values. */
static void test_bucket_bounds(void)
{
	uint64_t v, step = 1, bad = 0;
	size_t prev = 0;

	for (v = 0; v < (1ull << 41); v += step) {
		size_t b = fp_hist_bucket(v);
		uint64_t hi = fp_hist_value(b);
		if (b < prev || b >= FP_HIST_BUCKETS || hi < v ||
		    (double)(hi - v) > (double)v / 32.0)
			bad++;
		if (b > 0 && fp_hist_value(b - 1) >= v)
			bad++; /* v belongs to an earlier bucket */
		prev = b;
		if (v > 4096)
			step = v / 997 + 1;
	}
	CHECK_EQ_INT(bad, 0);
	CHECK_EQ_INT(fp_hist_bucket(31), 31);
	CHECK_EQ_INT(fp_hist_bucket(32), 32);
	CHECK_EQ_INT(fp_hist_value(32), 32);
	CHECK_EQ_INT(fp_hist_value(FP_HIST_BUCKETS - 1), (1ull << 41) - 1);
	CHECK_EQ_INT(fp_hist_bucket(UINT64_MAX), FP_HIST_BUCKETS - 1);
	CHECK_EQ_INT(fp_hist_bucket(1ull << 41), FP_HIST_BUCKETS - 1);
}

static uint64_t hist[FP_HIST_BUCKETS];

static int within(uint64_t got, uint64_t want)
{
	return got >= want && (double)(got - want) <= (double)want / 32.0 + 1;
}

/* 1..100,000 once each: the p-quantile is about p * 100,000. */
static void test_percentiles_uniform(void)
{
	uint64_t v;

	memset(hist, 0, sizeof(hist));
	for (v = 1; v <= 100000; v++)
		hist[fp_hist_bucket(v)]++;
	CHECK(within(fp_hist_percentile(hist, 0.50), 50001));
	CHECK(within(fp_hist_percentile(hist, 0.99), 99001));
	CHECK(within(fp_hist_percentile(hist, 1.0), 100000));
	CHECK(within(fp_hist_percentile(hist, 0.0), 1));
}

/* 98 fast replies and two slow ones: p99 is the slow one, p50 fast. */
static void test_percentiles_tail(void)
{
	memset(hist, 0, sizeof(hist));
	hist[fp_hist_bucket(300)] += 98;
	hist[fp_hist_bucket(2000000)] += 2;
	CHECK(within(fp_hist_percentile(hist, 0.99), 2000000));
	CHECK(within(fp_hist_percentile(hist, 0.50), 300));
	hist[fp_hist_bucket(300)] += 200; /* 2 slow of 300: p99 is fast */
	CHECK(within(fp_hist_percentile(hist, 0.99), 300));
}

static void test_empty(void)
{
	memset(hist, 0, sizeof(hist));
	CHECK_EQ_INT(fp_hist_percentile(hist, 0.99), 0);
}

int main(void)
{
	RUN(test_bucket_bounds);
	RUN(test_percentiles_uniform);
	RUN(test_percentiles_tail);
	RUN(test_empty);
	return CHECK_DONE();
}
