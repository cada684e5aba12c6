/* pipeline.h: the symbolizer's pipeline: decode -> session -> resolve ->
 * sinks.
 *
 * server.c decodes a message (wire.h) and applies it to its session
 * (session.h), which resolves the interval's frames from the symbol cache
 * (resolver.h) into a profile; fp_pipeline_submit takes that profile.  A
 * profile whose frames name a build-ID that a resolver worker is still
 * ingesting waits for it, at most the symbol wait after it was submitted;
 * its frames are then resolved again (fp_session_resolve_again).  Then
 * every sink runs (the files of files.h, the pushers of push.h), and the
 * interval's sequence number is stored with the session under the state
 * directory, STATE/sessions/HOST/SESSION, so that an interval re-sent
 * after a lost reply is recognised even by a new symbolizer process
 * (fp_pipeline_last_seq).  fleetprof record and the server share it.
 * The pipeline also remembers, in memory, the last interval of each
 * recent session that went through the sinks (fp_pipeline_written): the
 * server tells the agent, which keeps an acknowledged interval until then,
 * so that a symbolizer killed with intervals queued loses none of them.
 *
 * Threads.  Until fp_pipeline_start, fp_pipeline_submit does all of that
 * in the caller's thread (fleetprof record, tests, fuzzing).  After it,
 * FP_PIPELINE_WORKERS sink workers do: submit only queues the profile on
 * the worker that owns its host (at most FP_PIPELINE_QUEUE profiles wait
 * in all, the others are dropped and counted) and returns, so a reply
 * never waits for a sink or for symbols.  Each host belongs to one worker
 * (by a hash of its name), so a host's intervals reach the sinks in order
 * and one thread writes its files and sequence numbers.  A profile
 * waiting for its symbols is set aside by its worker, not waited on: the
 * profiles of other devices go on meanwhile, those of its own session
 * wait behind it.  pl_lock guards the queues, the statistics and the
 * written seqs; the profiles a worker set aside are its own.  Sinks are
 * called by several workers at once, never two for the same host: what
 * a sink shares between hosts it locks itself (push.h, spool.h),
 * what it keeps per host (files.h) needs no lock.  Workers write in
 * parallel because the time of a sink goes to fsync, waiting for the
 * disk, which serves several at once (docs/performance.md).  They run
 * 10 nicer than the process and as SCHED_BATCH, so that on a loaded
 * machine the listener's threads, which take no lock a worker holds for
 * long (pl_lock only around the queues and counters), get the CPU first.
 */
#ifndef FP_PIPELINE_H
#define FP_PIPELINE_H

#include <stdint.h>
#include "batch.h"
#include "profile.h"
#include "resolver.h"

#define FP_PIPELINE_QUEUE 4096 /* profiles waiting for the workers */
#define FP_PIPELINE_WORKERS 8  /* sink workers */
/* Busy from this many on, so that the batches being handled when it
 * became busy (at most one per listener worker: 256) still find room. */
#define FP_PIPELINE_BUSY (FP_PIPELINE_QUEUE - 256)
/* Busy from this many bytes queued on, by default and at most
 * (--max-queued-mb): see docs/symbolizer.md, "Sinks behind", for why. */
#define FP_PIPELINE_BUSY_BYTES_DEFAULT ((size_t)256 << 20)
#define FP_PIPELINE_BUSY_BYTES_MAX ((size_t)64 << 30)
#define FP_PIPELINE_MAX_SINKS 4
#define FP_SYMBOL_WAIT_DEFAULT_MS 5000
#define FP_SYMBOL_WAIT_MAX_MS 3600000
#define FP_PIPELINE_WRITTEN_SLOTS 65536 /* sessions whose last written seq is known */

/* A sink: takes each finished profile with the hello of its session and
 * its interval's sequence number, from any worker (see Threads).  Returns
 * 0 or a negative errno (counted in pp_sink_errors). */
typedef int (*fp_sink_fn)(void *arg, const struct fp_profile *p, const struct fp_hello *hello,
			  uint64_t seq);

struct fp_pipeline_opts {
	struct fp_resolver *po_resolver;
	const char *po_state_dir;   /* sequence numbers; NULL: none kept */
	uint32_t po_symbol_wait_ms; /* 0: sinks never wait for symbols */
};

struct fp_pipeline_stats {
	uint64_t pp_profiles;      /* through every sink */
	uint64_t pp_sink_errors;   /* sink calls that failed */
	uint64_t pp_dropped;       /* queue full */
	uint64_t pp_trims;         /* backlogs drained, memory given back */
	uint64_t pp_waited;        /* profiles that waited for symbols */
	uint64_t pp_wait_timeouts; /* ... and whose symbols were still not there */
	uint64_t pp_queue_depth;   /* profiles queued or waiting now */
	uint64_t pp_queued_bytes;  /* the heap they hold (fp_profile_bytes) */
	uint64_t pp_state_errors;  /* sequence numbers that could not be stored */
};

struct fp_pipeline;

/* fp_pipeline_alloc: 0 or -ENOMEM. */
int fp_pipeline_alloc(struct fp_pipeline **pl, const struct fp_pipeline_opts *o);

/* fp_pipeline_free: stops the workers after they have run the sinks of
 * every profile still queued (without waiting for symbols any longer). */
void fp_pipeline_free(struct fp_pipeline *pl);

/* fp_pipeline_add_sink: fn(arg, ...) for every profile, in the order
 * added.  Before fp_pipeline_start.  0 or -ENOSPC (FP_PIPELINE_MAX_SINKS). */
int fp_pipeline_add_sink(struct fp_pipeline *pl, fp_sink_fn fn, void *arg);

/* fp_pipeline_start: from now on, the workers run the sinks, and a
 * profile waits at most symbol_wait_ms for its symbols (replacing
 * po_symbol_wait_ms).  0, -EINVAL (started already) or a negative errno. */
int fp_pipeline_start(struct fp_pipeline *pl, uint32_t symbol_wait_ms);

/* fp_pipeline_submit: take p (freed by the pipeline, also on error) of
 * interval seq of the session of hello (copied).  Any thread.  0,
 * -EAGAIN (queue full, dropped) or -ENOMEM. */
int fp_pipeline_submit(struct fp_pipeline *pl, struct fp_profile *p, const struct fp_hello *hello,
		       uint64_t seq);

/* fp_pipeline_busy: whether the busy bound of profiles
 * (FP_PIPELINE_BUSY, or what fp_pipeline_set_busy set) or of bytes
 * (FP_PIPELINE_BUSY_BYTES_DEFAULT, or set) or more wait for the sinks:
 * the server then takes no batch (the agent sends it again).  The bytes
 * are each queued profile's heap (fp_profile_bytes) and its job's,
 * counted when it is submitted: the batches being handled when the bound
 * was reached still come, so the bytes may pass it by their profiles.
 * Any thread. */
int fp_pipeline_busy(struct fp_pipeline *pl);
/* fp_pipeline_set_busy: the busy bounds, n profiles (1-FP_PIPELINE_BUSY)
 * and bytes (1-FP_PIPELINE_BUSY_BYTES_MAX).  Any thread. */
void fp_pipeline_set_busy(struct fp_pipeline *pl, size_t n, size_t bytes);

/* fp_pipeline_last_seq: the sequence number last stored for the session
 * of hello, which fp_pipeline_written then knows too.  0 or -ENOENT
 * (none). */
int fp_pipeline_last_seq(struct fp_pipeline *pl, const struct fp_hello *hello, uint64_t *seq);

/* fp_pipeline_migrate: before the pipeline kept sequence numbers under
 * the state directory, the server kept them in the output tree, as
 * OUT/HOST/.session-SESSION.  Moves each such file's number to where
 * fp_pipeline_last_seq finds it (the larger one if both have one) and
 * removes the file; a file that is not a regular one of 1 to 20 digits
 * and a newline (read as untrusted: at most 21 bytes, no symbolic link
 * followed, of files or of host directories) is left, counted and
 * logged.  Logs how many were moved.  Done once: a marker,
 * STATE/sessions/.moved-from-out, says so to later calls.  Before
 * fp_pipeline_start.  0 (also without a state directory or output tree)
 * or a negative errno from making the marker. */
int fp_pipeline_migrate(struct fp_pipeline *pl, const char *out_dir);

/* fp_pipeline_written: the seq of the last interval of hello's session
 * whose sinks have run (each earlier one has run or was dropped); 0 when
 * unknown: none yet, or forgotten for another session hashed to its slot
 * (FP_PIPELINE_WRITTEN_SLOTS), until its next interval is written.  Any
 * thread. */
uint64_t fp_pipeline_written(struct fp_pipeline *pl, const struct fp_hello *hello);

void fp_pipeline_stats(struct fp_pipeline *pl, struct fp_pipeline_stats *st);

#endif
