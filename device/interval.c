/* interval.c: the agent's intervals and sessions: sampling until an
 * interval is due (or an early cut is), closing it into the buffer, and
 * starting a new session.  main.c, tables.c and exchange.c all stand on
 * it; it calls none of them. */
#include "agent.h"
#include "cli.h"
#include "log.h"

#include <errno.h>
#include <inttypes.h>
#include <string.h>
#include <time.h>

volatile sig_atomic_t agent_exiting;

void agent_want_cut(struct agent *a, uint32_t delay_ms)
{
	uint64_t when = fp_now_ns(CLOCK_MONOTONIC) + delay_ms * 1000000ull,
		 soonest = a->ag_last_cut_ns + EARLY_GAP_MS * 1000000ull;

	if (when < soonest)
		when = soonest;
	if (when >= a->ag_next_cut_ns)
		return; /* the regular cut comes first */
	if (!a->ag_early_ns || when < a->ag_early_ns)
		a->ag_early_ns = when;
}

void agent_new_session(struct agent *a)
{
	a->ag_session++;
	a->ag_hello.fh_session = a->ag_session;
	a->ag_hello_ok = 0;
	if (a->ag_tables_asked)
		fp_intern_clear(a->ag_tables_asked); /* each file is named again */
}

void agent_budget(struct agent *a)
{
	a->ag_fetch_left = (uint64_t)a->ag_o.ao_fetch_kb << 10;
	a->ag_ksyms_left = KSYMS_PER_INTERVAL;
}

void agent_cut(struct agent *a)
{
	uint64_t bpf[FP_CNT_MAX];
	struct fp_interval iv, old;

	a->ag_last_cut_ns = fp_now_ns(CLOCK_MONOTONIC);
	a->ag_early_ns = 0;
	if (fp_collector_cut(a->ag_collector, ++a->ag_seq, fp_now_ns(CLOCK_REALTIME), &iv)) {
		fp_warnx("out of memory closing interval %" PRIu64, a->ag_seq);
		return;
	}
	a->ag_sampled += iv.fi_samples;
	a->ag_lost.fl_samples += iv.fi_lost.fl_samples; /* collector: out of memory */
	iv.fi_lost = a->ag_lost;
	if (fp_sampler_counters(a->ag_sampler, bpf) == 0) {
		iv.fi_lost.fl_samples += bpf[FP_CNT_LOST];
		iv.fi_lost.fl_stack_errors = bpf[FP_CNT_USTACK_ERR] + bpf[FP_CNT_KSTACK_ERR];
	}
	if (fp_ring_push(&a->ag_ring, &iv, &old)) {
		a->ag_lost.fl_batches++;
		a->ag_lost.fl_samples_dropped += old.fi_samples;
		fp_warnx("buffer full: dropping interval %" PRIu64 " (%" PRIu64 " samples)",
			 old.fi_seq, old.fi_samples);
	}
	fp_debug("interval %" PRIu64 ": %" PRIu64 " samples, %zu stacks, %zu buffered", iv.fi_seq,
		 iv.fi_samples, iv.fi_ncounts, fp_ring_len(&a->ag_ring));
}

void agent_pump(struct agent *a, int timeout_ms)
{
	uint64_t now = fp_now_ns(CLOCK_MONOTONIC);
	int n;

	/* Not past an early cut that is due. */
	if (a->ag_early_ns && a->ag_early_ns < now + (uint64_t)timeout_ms * 1000000ull)
		timeout_ms = a->ag_early_ns > now ? (int)((a->ag_early_ns - now) / 1000000) : 0;
	if ((n = fp_sampler_poll(a->ag_sampler, timeout_ms)) < 0 && n != -EINTR)
		fp_warnx("ring buffer: %s", strerror(-n));
	now = fp_now_ns(CLOCK_MONOTONIC);
	if (now >= a->ag_next_cut_ns) {
		agent_budget(a); /* per --interval: early cuts do not refill it */
		agent_cut(a);
		a->ag_next_cut_ns += (uint64_t)a->ag_o.ao_interval_s * 1000000000ull;
	} else if (a->ag_early_ns && now >= a->ag_early_ns) {
		agent_cut(a);
		a->ag_early_cuts++;
	}
}
