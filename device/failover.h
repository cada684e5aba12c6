/* failover.h: which symbolizer the agent talks to, and when it tries again.
 *
 * The agent is given one or more symbolizers (--server, in order of
 * preference) and talks to one at a time, the current one.  The rule:
 *
 *  - An exchange fails when no connection or no reply comes within
 *    --timeout, when the reply cannot be decoded, or when a hello is
 *    refused.  After a failure the agent waits, 1 s and doubling up to
 *    60 s, and tries again.
 *  - After --failover-after consecutive failures on the current server,
 *    the next one in the list (after the last: the first) becomes current
 *    and is tried at once, in a new session.  The wait keeps doubling
 *    until an exchange succeeds, so that agents whose symbolizers are all
 *    down do not hammer them.
 *  - While the current server is not the first, every --failback seconds
 *    the agent says hello to the earlier ones, in order; the first that
 *    answers becomes current (a new session).  If none does, it stays.
 *    With --failback 0 it stays on a server that answers until it fails.
 *
 * Bookkeeping only, no I/O: the agent's main loop owns it and does the
 * exchanges (single-threaded).  Times are CLOCK_MONOTONIC nanoseconds.
 */
#ifndef FP_FAILOVER_H
#define FP_FAILOVER_H

#include <stddef.h>
#include <stdint.h>

#define FP_FAILOVER_BACKOFF_MIN_MS 1000
#define FP_FAILOVER_BACKOFF_MAX_MS 60000

struct fp_failover {
	size_t fo_nservers;
	size_t fo_current;       /* index of the server we talk to */
	uint32_t fo_after;       /* consecutive failures that move us on */
	uint32_t fo_failures;    /* consecutive failures on the current one */
	uint64_t fo_failback_ns; /* 0: never go back by ourselves */
	uint64_t fo_backoff_ms;  /* the next wait after a failure */
	uint64_t fo_next_try;    /* no exchange before this */
	uint64_t fo_probe_at;    /* when to try the earlier servers; 0: not due */
	uint64_t fo_failovers;   /* times we moved on after failures */
	uint64_t fo_failbacks;   /* times we went back to an earlier server */
};

/* fp_failover_init: nservers >= 1 servers, the first current; after >= 1
 * failures move on; failback_s seconds between tries of the earlier ones
 * (0: never). */
void fp_failover_init(struct fp_failover *f, size_t nservers, uint32_t after, uint32_t failback_s);

/* fp_failover_ok: an exchange with the current server succeeded. */
void fp_failover_ok(struct fp_failover *f);

/* fp_failover_failed: an exchange with the current server failed at now.
 * 1 when the agent must move to the next server (fo_current is it now,
 * and fo_next_try is now), 0 when it retries the same one at fo_next_try. */
int fp_failover_failed(struct fp_failover *f, uint64_t now);

/* fp_failover_next: move to the next server at once, whatever the count
 * of failures (the agent is exiting and tries each server once). */
void fp_failover_next(struct fp_failover *f, uint64_t now);

/* fp_failover_probe_due: whether to say hello to the servers before the
 * current one now. */
int fp_failover_probe_due(const struct fp_failover *f, uint64_t now);

/* fp_failover_probed: the earlier servers were tried at now; idx is the
 * one that answered (then current, tried at once), or fo_current when
 * none did (tried again fo_failback_ns later). */
void fp_failover_probed(struct fp_failover *f, size_t idx, uint64_t now);

#endif
