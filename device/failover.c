/* failover.c: the agent's choice of symbolizer (failover.h has the rule). */
#include "failover.h"

void fp_failover_init(struct fp_failover *f, size_t nservers, uint32_t after, uint32_t failback_s)
{
	*f = (struct fp_failover){
		.fo_nservers = nservers ? nservers : 1,
		.fo_after = after ? after : 1,
		.fo_failback_ns = (uint64_t)failback_s * 1000000000ull,
		.fo_backoff_ms = FP_FAILOVER_BACKOFF_MIN_MS,
	};
}

/* become: idx is current from now on; its earlier servers are tried
 * fo_failback_ns later. */
static void become(struct fp_failover *f, size_t idx, uint64_t now)
{
	f->fo_current = idx;
	f->fo_failures = 0;
	f->fo_next_try = now;
	f->fo_probe_at = idx && f->fo_failback_ns ? now + f->fo_failback_ns : 0;
}

void fp_failover_ok(struct fp_failover *f)
{
	f->fo_failures = 0;
	f->fo_backoff_ms = FP_FAILOVER_BACKOFF_MIN_MS;
}

int fp_failover_failed(struct fp_failover *f, uint64_t now)
{
	uint64_t wait = f->fo_backoff_ms;

	f->fo_backoff_ms = wait * 2 > FP_FAILOVER_BACKOFF_MAX_MS ? FP_FAILOVER_BACKOFF_MAX_MS
								 : wait * 2;
	if (++f->fo_failures >= f->fo_after && f->fo_nservers > 1) {
		f->fo_failovers++;
		become(f, (f->fo_current + 1) % f->fo_nservers, now);
		return 1;
	}
	f->fo_next_try = now + wait * 1000000ull;
	return 0;
}

void fp_failover_next(struct fp_failover *f, uint64_t now)
{
	become(f, (f->fo_current + 1) % f->fo_nservers, now);
}

int fp_failover_probe_due(const struct fp_failover *f, uint64_t now)
{
	return f->fo_current && f->fo_probe_at && now >= f->fo_probe_at;
}

void fp_failover_probed(struct fp_failover *f, size_t idx, uint64_t now)
{
	if (idx < f->fo_current) {
		f->fo_failbacks++;
		fp_failover_ok(f);
		become(f, idx, now);
	} else {
		f->fo_probe_at = now + f->fo_failback_ns;
	}
}
