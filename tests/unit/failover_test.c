/* failover_test.c: the agent's choice of symbolizer (device/failover.c):
 * retries with a doubling wait, the move to the next server after N
 * failures, the wrap-around, and the way back to an earlier one. */
#include "check.h"
#include "failover.h"

#define S 1000000000ull /* one second in ns */

static void one_server_never_moves(void)
{
	struct fp_failover f;
	int i;

	fp_failover_init(&f, 1, 2, 60);
	for (i = 0; i < 10; i++)
		CHECK_EQ_INT(fp_failover_failed(&f, 100 * S), 0);
	CHECK_EQ_INT(f.fo_current, 0);
	CHECK_EQ_INT(f.fo_failovers, 0);
	CHECK(!fp_failover_probe_due(&f, 1000 * S));
}

static void backoff_doubles_to_a_minute_and_resets(void)
{
	static const uint64_t waits_ms[] = { 1000, 2000, 4000, 8000, 16000, 32000, 60000, 60000 };
	struct fp_failover f;
	size_t i;

	fp_failover_init(&f, 1, 3, 0);
	for (i = 0; i < sizeof(waits_ms) / sizeof(waits_ms[0]); i++) {
		CHECK_EQ_INT(fp_failover_failed(&f, 10 * S), 0);
		CHECK_EQ_INT(f.fo_next_try, 10 * S + waits_ms[i] * 1000000ull);
	}
	fp_failover_ok(&f);
	fp_failover_failed(&f, 20 * S);
	CHECK_EQ_INT(f.fo_next_try, 21 * S);
}

static void moves_on_after_n_failures_and_wraps(void)
{
	struct fp_failover f;

	fp_failover_init(&f, 3, 2, 0);
	CHECK_EQ_INT(fp_failover_failed(&f, 5 * S), 0);
	CHECK_EQ_INT(f.fo_current, 0);
	CHECK_EQ_INT(fp_failover_failed(&f, 7 * S), 1);
	CHECK_EQ_INT(f.fo_current, 1);
	CHECK_EQ_INT(f.fo_next_try, 7 * S); /* the next server is tried at once */
	/* A success in between starts the count again. */
	CHECK_EQ_INT(fp_failover_failed(&f, 8 * S), 0);
	fp_failover_ok(&f);
	CHECK_EQ_INT(fp_failover_failed(&f, 9 * S), 0);
	CHECK_EQ_INT(fp_failover_failed(&f, 10 * S), 1);
	CHECK_EQ_INT(f.fo_current, 2);
	CHECK_EQ_INT(fp_failover_failed(&f, 11 * S), 0);
	CHECK_EQ_INT(fp_failover_failed(&f, 12 * S), 1);
	CHECK_EQ_INT(f.fo_current, 0); /* after the last: the first */
	CHECK_EQ_INT(f.fo_failovers, 3);
}

static void wait_keeps_growing_when_all_are_down(void)
{
	struct fp_failover f;

	fp_failover_init(&f, 2, 1, 0);
	CHECK_EQ_INT(fp_failover_failed(&f, 0), 1); /* wait 1 s used up by the move */
	CHECK_EQ_INT(fp_failover_failed(&f, S), 1); /* 2 s */
	CHECK_EQ_INT(f.fo_backoff_ms, 4000);
	fp_failover_init(&f, 2, 2, 0);
	fp_failover_failed(&f, 0);
	fp_failover_failed(&f, S); /* moved to 1 */
	CHECK_EQ_INT(fp_failover_failed(&f, 2 * S), 0);
	CHECK_EQ_INT(f.fo_next_try, 2 * S + 4000 * 1000000ull);
}

static void failback_probes_earlier_servers(void)
{
	struct fp_failover f;

	fp_failover_init(&f, 3, 2, 30);
	CHECK(!fp_failover_probe_due(&f, 1000 * S)); /* on the first: nothing earlier */
	fp_failover_failed(&f, 100 * S);
	fp_failover_failed(&f, 100 * S);
	fp_failover_failed(&f, 101 * S);
	fp_failover_failed(&f, 101 * S);
	CHECK_EQ_INT(f.fo_current, 2);
	CHECK(!fp_failover_probe_due(&f, 130 * S));
	CHECK(fp_failover_probe_due(&f, 131 * S));
	/* None answered: stay, and try again a period later. */
	fp_failover_probed(&f, 2, 131 * S);
	CHECK_EQ_INT(f.fo_current, 2);
	CHECK(!fp_failover_probe_due(&f, 160 * S));
	CHECK(fp_failover_probe_due(&f, 161 * S));
	/* The second answered: current, tried at once, and the first is
	 * probed again later. */
	CHECK_EQ_INT(fp_failover_failed(&f, 161 * S), 0); /* a failure on 2 in between */
	fp_failover_probed(&f, 1, 161 * S);
	CHECK_EQ_INT(f.fo_current, 1);
	CHECK_EQ_INT(f.fo_failures, 0);
	CHECK_EQ_INT(f.fo_next_try, 161 * S);
	CHECK_EQ_INT(f.fo_backoff_ms, FP_FAILOVER_BACKOFF_MIN_MS);
	CHECK_EQ_INT(f.fo_failbacks, 1);
	CHECK(fp_failover_probe_due(&f, 191 * S));
	fp_failover_probed(&f, 0, 191 * S);
	CHECK_EQ_INT(f.fo_current, 0);
	CHECK(!fp_failover_probe_due(&f, 10000 * S));
}

static void failback_zero_stays(void)
{
	struct fp_failover f;

	fp_failover_init(&f, 2, 1, 0);
	fp_failover_failed(&f, 0);
	CHECK_EQ_INT(f.fo_current, 1);
	CHECK(!fp_failover_probe_due(&f, 1000000 * S));
}

static void next_moves_regardless(void)
{
	struct fp_failover f;

	fp_failover_init(&f, 2, 5, 10);
	fp_failover_next(&f, 3 * S);
	CHECK_EQ_INT(f.fo_current, 1);
	CHECK_EQ_INT(f.fo_next_try, 3 * S);
	fp_failover_next(&f, 4 * S);
	CHECK_EQ_INT(f.fo_current, 0);
	CHECK_EQ_INT(f.fo_failovers, 0); /* not a failover by the rule */
}

int main(void)
{
	RUN(one_server_never_moves);
	RUN(backoff_doubles_to_a_minute_and_resets);
	RUN(moves_on_after_n_failures_and_wraps);
	RUN(wait_keeps_growing_when_all_are_down);
	RUN(failback_probes_earlier_servers);
	RUN(failback_zero_stays);
	RUN(next_moves_regardless);
	return CHECK_DONE();
}
