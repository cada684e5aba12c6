/* server.c: decode, dispatch, reply; sessions.  Profiles go on to the
 * pipeline (pipeline.h); sv_lock serialises everything else. */
#include "server.h"
#include "cli.h"
#include "devfetch.h"
#include "files.h"
#include "intern.h"
#include "log.h"
#include "pipeline.h"
#include "session.h"
#include "tablestore.h"
#include "vec.h"
#include "wire.h"

#include <errno.h>
#include <inttypes.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

struct server_session {
	uint64_t ss_id;
	time_t ss_last_used;
	struct fp_session *ss_session;
	/* A batch is being applied to ss_session outside sv_lock: the
	 * session is that thread's, and is neither freed, replaced nor read
	 * by any other until it is done. */
	int ss_busy;
};

struct fp_server {
	struct fp_server_limits sv_limits;
	struct fp_resolver *sv_resolver;
	struct fp_pipeline *sv_pipeline;
	struct fp_tablestore *sv_tables; /* the unwind tables sessions send, shared */
	struct fp_files_sink sv_files;   /* read by the sink workers only */
	char *sv_out_dir;
	/* Under sv_lock: */
	pthread_mutex_t sv_lock;
	struct fp_devfetch *sv_devfetch;
	struct server_session sv_sessions[FP_SERVER_MAX_SESSIONS];
	size_t sv_nsessions;
	/* Session id -> slot: sv_index[fp_intern id] is a slot of
	 * sv_sessions, current when that slot still holds the id.  Ids of
	 * sessions gone stay interned until the index is rebuilt. */
	struct fp_intern *sv_ids;
	uint32_t *sv_index;
	size_t sv_index_cap;
	double sv_tokens;      /* new sessions allowed now */
	uint64_t sv_tokens_at; /* fp_mono_ms when sv_tokens was last filled */
	/* Unwind table bytes replies may carry now: sl_table_mb_s a second,
	 * at most a second's worth at once (table_budget). */
	double sv_table_tokens;
	uint64_t sv_table_tokens_at;
	struct fp_server_stats sv_stats;
};

int fp_server_alloc(struct fp_server **out, struct fp_resolver *r, const char *out_dir,
		    const char *tmp_dir)
{
	struct fp_pipeline_opts po = { .po_resolver = r,
				       .po_state_dir = tmp_dir,
				       .po_symbol_wait_ms = FP_SYMBOL_WAIT_DEFAULT_MS };
	struct fp_server *s = calloc(1, sizeof(*s));

	if (!s)
		return -ENOMEM;
	s->sv_resolver = r;
	s->sv_limits = (struct fp_server_limits){
		.sl_max_sessions = FP_SERVER_MAX_SESSIONS,
		.sl_new_sessions_per_s = FP_SERVER_NEW_SESSIONS_DEFAULT,
		.sl_table_mb_s = FP_SERVER_TABLE_MB_S_DEFAULT
	};
	s->sv_tokens = FP_SERVER_NEW_SESSIONS_DEFAULT;
	s->sv_tokens_at = s->sv_table_tokens_at = fp_mono_ms();
	s->sv_table_tokens = (double)FP_SERVER_TABLE_MB_S_DEFAULT * (1 << 20);
	pthread_mutex_init(&s->sv_lock, NULL);
	if ((out_dir && !(s->sv_out_dir = strdup(out_dir))) || fp_intern_alloc(&s->sv_ids) ||
	    fp_devfetch_alloc(&s->sv_devfetch, r, tmp_dir, FP_DEVFETCH_TIMEOUT,
			      FP_DEVFETCH_RETRY_S) ||
	    fp_tablestore_alloc(&s->sv_tables, r, 0) || fp_pipeline_alloc(&s->sv_pipeline, &po)) {
		fp_server_free(s);
		return -ENOMEM;
	}
	if (out_dir) {
		s->sv_files = (struct fp_files_sink){ .fs_dir = s->sv_out_dir,
						      .fs_layout = FP_FILES_INTERVALS };
		fp_pipeline_add_sink(s->sv_pipeline, fp_files_sink, &s->sv_files);
		fp_pipeline_migrate(s->sv_pipeline, out_dir); /* logs what it could not */
	}
	*out = s;
	return 0;
}

void fp_server_free(struct fp_server *s)
{
	size_t i;

	if (!s)
		return;
	fp_pipeline_free(s->sv_pipeline); /* its last sinks run first */
	for (i = 0; i < s->sv_nsessions; i++)
		fp_session_free(s->sv_sessions[i].ss_session);
	fp_devfetch_free(s->sv_devfetch);
	fp_tablestore_free(s->sv_tables);
	fp_intern_free(s->sv_ids);
	free(s->sv_index);
	pthread_mutex_destroy(&s->sv_lock);
	free(s->sv_out_dir);
	free(s);
}

int fp_server_add_sink(struct fp_server *s, fp_sink_fn fn, void *arg)
{
	return fp_pipeline_add_sink(s->sv_pipeline, fn, arg);
}

int fp_server_set_limits(struct fp_server *s, const struct fp_server_limits *l)
{
	if (!l->sl_max_sessions || l->sl_max_sessions > FP_SERVER_MAX_SESSIONS ||
	    !l->sl_new_sessions_per_s || l->sl_new_sessions_per_s > FP_SERVER_NEW_SESSIONS_MAX ||
	    l->sl_max_queued > FP_PIPELINE_BUSY ||
	    l->sl_max_queued_mb > FP_PIPELINE_BUSY_BYTES_MAX >> 20 ||
	    l->sl_table_mb_s > FP_SERVER_TABLE_MB_S_MAX)
		return -EINVAL;
	fp_pipeline_set_busy(s->sv_pipeline, l->sl_max_queued ? l->sl_max_queued : FP_PIPELINE_BUSY,
			     l->sl_max_queued_mb ? (size_t)l->sl_max_queued_mb << 20
						 : FP_PIPELINE_BUSY_BYTES_DEFAULT);
	pthread_mutex_lock(&s->sv_lock);
	s->sv_limits = *l;
	if (!s->sv_limits.sl_table_mb_s)
		s->sv_limits.sl_table_mb_s = FP_SERVER_TABLE_MB_S_DEFAULT;
	s->sv_tokens = l->sl_new_sessions_per_s;
	s->sv_table_tokens = (double)s->sv_limits.sl_table_mb_s * (1 << 20);
	pthread_mutex_unlock(&s->sv_lock);
	return 0;
}

int fp_server_start(struct fp_server *s, uint32_t symbol_wait_ms)
{
	return fp_pipeline_start(s->sv_pipeline, symbol_wait_ms);
}

void fp_server_stats(const struct fp_server *s, struct fp_server_stats *st)
{
	struct fp_tablestore_stats ts;
	struct fp_pipeline_stats ps;
	struct fp_resolver_stats rs;
	struct fp_devfetch_stats ds;

	fp_tablestore_stats(s->sv_tables, &ts);
	pthread_mutex_lock((pthread_mutex_t *)&s->sv_lock);
	*st = s->sv_stats;
	st->sv_table_mem_bytes = ts.ts_bytes;
	st->sv_table_mem_reads = ts.ts_reads;
	st->sv_sessions = s->sv_nsessions;
	fp_devfetch_stats(s->sv_devfetch, &ds);
	pthread_mutex_unlock((pthread_mutex_t *)&s->sv_lock);
	st->sv_fetch_active = ds.dv_active;
	st->sv_fetch_expired = ds.dv_expired;
	st->sv_fetch_deferred = ds.dv_deferred;
	st->sv_fetch_retried = ds.dv_retried;
	st->sv_fetch_given_up = ds.dv_given_up;
	st->sv_fetch_started = ds.dv_started;
	st->sv_fetch_cfi_started = ds.dv_cfi_started;
	fp_pipeline_stats(s->sv_pipeline, &ps);
	fp_resolver_stats(s->sv_resolver, &rs);
	st->sv_profiles = ps.pp_profiles;
	st->sv_write_errors = ps.pp_sink_errors + ps.pp_state_errors;
	st->sv_pipeline_queue = ps.pp_queue_depth;
	st->sv_pipeline_bytes = ps.pp_queued_bytes;
	st->sv_pipeline_dropped = ps.pp_dropped;
	st->sv_pipeline_trims = ps.pp_trims;
	st->sv_symbol_waits = ps.pp_waited;
	st->sv_symbol_wait_timeouts = ps.pp_wait_timeouts;
	st->sv_ingest_queue = rs.rs_queue_depth;
	st->sv_ingest_running = rs.rs_running;
	st->sv_ingest_queue_full = rs.rs_queue_full;
	st->sv_ingest_jobs = rs.rs_jobs_done;
	st->sv_ingest_ms = rs.rs_job_ms;
	st->sv_ingest_max_ms = rs.rs_job_max_ms;
}

void fp_server_log_stats(const struct fp_server *s)
{
	struct fp_server_stats st;
	const struct fp_server_stats *t = &st;
	struct fp_resolver_stats rs;
	struct fp_devfetch_stats ds;

	fp_server_stats(s, &st);

	fp_info("messages %" PRIu64 " (%" PRIu64 " bytes): hello %" PRIu64 ", batches %" PRIu64
		", kallsyms %" PRIu64 ", samples %" PRIu64 ", profiles %" PRIu64
		", duplicates %" PRIu64 ", unknown sessions %" PRIu64
		"; rejected: malformed %" PRIu64 ", version %" PRIu64 ", type %" PRIu64
		", content %" PRIu64 ", host %" PRIu64 "; write errors %" PRIu64
		"; agents lost %" PRIu64 " samples; file parts %" PRIu64
		"; unwind table bytes sent %" PRIu64,
		t->sv_messages, t->sv_bytes, t->sv_hellos, t->sv_batches, t->sv_ksyms,
		t->sv_samples, t->sv_profiles, t->sv_duplicates, t->sv_need_hello,
		t->sv_rejected_malformed, t->sv_rejected_version, t->sv_rejected_type,
		t->sv_rejected_content, t->sv_rejected_host, t->sv_write_errors,
		t->sv_agent_lost_samples, t->sv_file_parts, t->sv_table_bytes);
	fp_info("unwind tables to agents: %" PRIu64
		" bytes sent; not sent, the agent held them: %" PRIu64 " tables, %" PRIu64
		" bytes; kept in memory %" PRIu64 " bytes, read %" PRIu64 " times",
		t->sv_table_bytes, t->sv_tables_held, t->sv_table_held_bytes, t->sv_table_mem_bytes,
		t->sv_table_mem_reads);
	fp_info("pipeline: queued %" PRIu64 ", batches not taken (busy) %" PRIu64
		", dropped %" PRIu64 ", backlogs drained %" PRIu64 ", waited for symbols %" PRIu64
		" (%" PRIu64 " in vain); symbol workers: queued %" PRIu64 ", running %" PRIu64
		", dropped %" PRIu64 ", jobs %" PRIu64 " (%" PRIu64 " ms, longest %" PRIu64 " ms)",
		t->sv_pipeline_queue, t->sv_pipeline_busy, t->sv_pipeline_dropped,
		t->sv_pipeline_trims, t->sv_symbol_waits, t->sv_symbol_wait_timeouts,
		t->sv_ingest_queue, t->sv_ingest_running, t->sv_ingest_queue_full,
		t->sv_ingest_jobs, t->sv_ingest_ms, t->sv_ingest_max_ms);
	fp_resolver_stats(s->sv_resolver, &rs);
	pthread_mutex_lock((pthread_mutex_t *)&s->sv_lock);
	fp_devfetch_stats(s->sv_devfetch, &ds);
	pthread_mutex_unlock((pthread_mutex_t *)&s->sv_lock);
	fp_info("symbols: tables built %" PRIu64 ", no source %" PRIu64 ", kallsyms stored %" PRIu64
		"; from devices: started %" PRIu64 " (%" PRIu64 " of CFI alone), done %" PRIu64
		", failed %" PRIu64 " (%" PRIu64 " bytes)",
		rs.rs_ingested, rs.rs_ingest_failed, rs.rs_ksyms_stored, ds.dv_started,
		ds.dv_cfi_started, ds.dv_done, ds.dv_failed, ds.dv_bytes);
	fp_info("unwind tables: compiled %" PRIu64 ", failed %" PRIu64
		"; build-IDs with symbols and none now: searching %" PRIu64 ", device %" PRIu64
		", no CFI %" PRIu64 ", compile failed %" PRIu64 ", frame pointers %" PRIu64,
		rs.rs_unwind_compiled, rs.rs_unwind_failed, rs.rs_no_table[FP_UNWIND_SEARCHING],
		rs.rs_no_table[FP_UNWIND_DEVICE], rs.rs_no_table[FP_UNWIND_NO_CFI],
		rs.rs_no_table[FP_UNWIND_COMPILE_FAILED], rs.rs_no_table[FP_UNWIND_FRAME_POINTERS]);
	fp_info("limits: refused hellos: new-session rate %" PRIu64 ", table full %" PRIu64
		"; kallsyms nobody asked for %" PRIu64 " (stored already, dropped %" PRIu64
		"); intervals from the future %" PRIu64 "; sessions over a limit %" PRIu64
		"; device fetches expired %" PRIu64 ", deferred %" PRIu64,
		t->sv_rejected_new_sessions, t->sv_rejected_sessions_full, t->sv_rejected_unasked,
		t->sv_ksyms_dropped, t->sv_rejected_clock, t->sv_session_limits,
		t->sv_fetch_expired, t->sv_fetch_deferred);
}

/* session_lookup: the slot of session id, or NULL. */
static struct server_session *session_lookup(struct fp_server *s, uint64_t id)
{
	uint32_t idx, slot;

	if (fp_intern_find(s->sv_ids, &id, sizeof(id), &idx))
		return NULL;
	slot = s->sv_index[idx];
	return slot < s->sv_nsessions && s->sv_sessions[slot].ss_id == id &&
			       s->sv_sessions[slot].ss_session
		       ? &s->sv_sessions[slot]
		       : NULL;
}

static struct server_session *session_find(struct fp_server *s, uint64_t id)
{
	struct server_session *ss = session_lookup(s, id);

	if (ss)
		ss->ss_last_used = time(NULL);
	return ss;
}

/* index_set: session id is in slot from now on.  The index is rebuilt
 * from the live sessions when the ids of sessions gone outnumber them.
 * 0 or -ENOMEM. */
static int index_set(struct fp_server *s, uint64_t id, uint32_t slot)
{
	uint32_t idx;
	size_t i;

	if (fp_intern_count(s->sv_ids) >= 2 * (size_t)FP_SERVER_MAX_SESSIONS) {
		fp_intern_clear(s->sv_ids);
		for (i = 0; i < s->sv_nsessions; i++)
			if (s->sv_sessions[i].ss_session &&
			    fp_intern_get(s->sv_ids, &s->sv_sessions[i].ss_id, sizeof(id), &idx,
					  NULL) == 0)
				s->sv_index[idx] = (uint32_t)i; /* fits: fewer than before */
	}
	if (fp_intern_get(s->sv_ids, &id, sizeof(id), &idx, NULL))
		return -ENOMEM;
	if (fp_vec_reserve(&s->sv_index, &s->sv_index_cap, (size_t)idx + 1, sizeof(*s->sv_index)))
		return -ENOMEM; /* interned, but no slot: found nowhere */
	s->sv_index[idx] = slot;
	return 0;
}

/* admit: whether a new session may open now: the rate of new sessions
 * (a token bucket of sl_new_sessions_per_s tokens, refilled at that
 * rate) and a slot, free or of a session idle for FP_SERVER_IDLE_S (the
 * least recently used one), which *slot receives.  Sessions in use are
 * never evicted, so no peer can push the fleet's sessions out.  0,
 * -EAGAIN (too many new sessions this second) or -ENOSPC (table full). */
static int admit(struct fp_server *s, struct server_session **slot, struct fp_session **old)
{
	uint32_t rate = s->sv_limits.sl_new_sessions_per_s;
	struct server_session *lru = NULL;
	uint64_t now = fp_mono_ms();
	size_t i;

	s->sv_tokens += (double)(now - s->sv_tokens_at) / 1000 * rate;
	if (s->sv_tokens > rate)
		s->sv_tokens = rate;
	s->sv_tokens_at = now;
	if (s->sv_tokens < 1)
		return -EAGAIN;
	if (s->sv_nsessions < s->sv_limits.sl_max_sessions) {
		*slot = &s->sv_sessions[s->sv_nsessions++];
	} else {
		for (i = 0; i < s->sv_nsessions; i++)
			if (!s->sv_sessions[i].ss_busy &&
			    (!lru || s->sv_sessions[i].ss_last_used < lru->ss_last_used))
				lru = &s->sv_sessions[i];
		if (!lru || time(NULL) - lru->ss_last_used < FP_SERVER_IDLE_S)
			return -ENOSPC;
		*old = lru->ss_session; /* freed without sv_lock */
		lru->ss_session = NULL;
		*slot = lru;
	}
	s->sv_tokens -= 1;
	return 0;
}

/* session_add: a new session for h, or the same id's again (an agent that
 * says hello again starts over).  0, -EAGAIN or -ENOSPC (admit), -EPERM
 * (the id is another host's session), -EBUSY (a batch of that session is
 * being applied) or -ENOMEM.  The session it replaces or evicts goes to
 * *old, for the caller to free once it has let go of sv_lock (freeing
 * 150,000 definitions takes a while). */
static int session_add(struct fp_server *s, const struct fp_hello *h, struct fp_session **old)
{
	struct server_session *slot = session_find(s, h->fh_session);
	struct fp_session *n;
	uint64_t seq;
	int err;

	if (slot && strcmp(fp_session_hello(slot->ss_session)->fh_host ?: "", h->fh_host ?: ""))
		return -EPERM;
	if (slot && slot->ss_busy)
		return -EBUSY;
	if ((err = fp_session_alloc(&n, h)))
		return err;
	if (!slot && (err = admit(s, &slot, old))) {
		fp_session_free(n);
		return err;
	}
	if (slot->ss_session)
		*old = slot->ss_session;
	*slot = (struct server_session){ h->fh_session, time(NULL), n, 0 };
	if ((err = index_set(s, h->fh_session, (uint32_t)(slot - s->sv_sessions)))) {
		/* Unreachable by id: the slot goes to the next new session. */
		slot->ss_last_used = 0;
		return err;
	}
	/* The last interval done survives restarts with the session's state,
	 * so that an interval re-sent after a lost reply is recognised even
	 * by a new symbolizer process. */
	if (fp_pipeline_last_seq(s->sv_pipeline, h, &seq) == 0)
		fp_session_done(n, seq);
	return 0;
}

static int reply_encode(struct fp_reply *r, char **buf, size_t *len)
{
	int err = fp_wire_encode_reply(r, buf, len);

	fp_reply_fini(r);
	return err;
}

/* reject: encode a REJECTED reply saying why, and count it (counter is
 * one of sv_stats; sv_lock is taken here). */
static int reject(struct fp_server *s, uint64_t *counter, const char *why, char **buf, size_t *len)
{
	struct fp_reply r = { .fr_status = FP_REPLY_REJECTED, .fr_error = (char *)why };

	pthread_mutex_lock(&s->sv_lock);
	(*counter)++;
	pthread_mutex_unlock(&s->sv_lock);
	fp_warnx("rejected a message: %s", why);
	return fp_wire_encode_reply(&r, buf, len);
}

/* refuse: make r a REJECTED reply saying why, and count it.  Logged at
 * debug level: a peer can send these as fast as it likes.  0 or -ENOMEM. */
static int refuse(struct fp_server *s, struct fp_reply *r, uint64_t *counter, const char *why)
{
	(*counter)++;
	fp_debug("refused a message: %s", why);
	r->fr_status = FP_REPLY_REJECTED;
	return (r->fr_error = strdup(why)) ? 0 : -ENOMEM;
}

/* peer_owns: whether the connection's identity (fp_server_handle's peer)
 * may use session ss: no identity, or the host ss said hello as. */
static int peer_owns(const char *peer, const struct server_session *ss)
{
	return !peer || !strcmp(fp_session_hello(ss->ss_session)->fh_host ?: "", peer);
}

/* server_hello: called with sv_lock held; fills r, and *old with a
 * session replaced or evicted, to be freed without sv_lock. */
static int server_hello(struct fp_server *s, const struct fp_hello *h, struct fp_reply *r,
			struct fp_session **old)
{
	struct server_session *ss;
	int err;

	*r = (struct fp_reply){ .fr_status = FP_REPLY_OK, .fr_features = FP_FEATURES_KNOWN };
	switch ((err = session_add(s, h, old))) {
	case 0:
		break;
	case -EAGAIN:
		return refuse(s, r, &s->sv_stats.sv_rejected_new_sessions,
			      "too many new sessions: say hello again later");
	case -ENOSPC:
		return refuse(s, r, &s->sv_stats.sv_rejected_sessions_full,
			      "session table full: say hello again later");
	case -EPERM:
		return refuse(s, r, &s->sv_stats.sv_rejected_content,
			      "session id in use by another host");
	case -EBUSY:
		s->sv_stats.sv_busy++;
		return err;
	default:
		return err;
	}
	s->sv_stats.sv_hellos++;
	fp_info("session %016" PRIx64 " from %s (kernel %s, agent %s, %u Hz, %u CPUs)",
		h->fh_session, h->fh_host, h->fh_kernel_release, h->fh_agent_version,
		h->fh_frequency, h->fh_ncpus);
	ss = session_find(s, h->fh_session);
	return fp_session_wants(ss->ss_session, s->sv_resolver, &r->fr_want, &r->fr_nwant);
}

/* reply_written: tell the agent what of its session is through the sinks
 * (it keeps the rest, to send again should this process die first). */
static void reply_written(struct fp_server *s, struct server_session *ss, struct fp_reply *r)
{
	r->fr_has_written = 1;
	r->fr_written = fp_pipeline_written(s->sv_pipeline, fp_session_hello(ss->ss_session));
}

/* A batch is applied in three steps, so that sv_lock is not held while
 * its definitions are taken and its profile built (150,000 definitions
 * took it for over 100 ms): batch_begin finds the session and marks it
 * busy, under sv_lock; batch_apply works on the session alone, without
 * it; batch_end, under sv_lock again, counts, asks devices for files,
 * hands the profile to the pipeline and marks the session free. */

/* batch_begin: with sv_lock held.  1 and *out the session, now busy, to
 * apply b to; 0 when r is the whole reply; -EBUSY (a batch of the same
 * session is being applied: no reply, the agent sends it again) or
 * -ENOMEM. */
/* table_budget: the table bytes a reply may carry now, what the token
 * bucket holds (with sv_lock held).  Not taken yet: batch_end takes what
 * the reply used (the bucket may go below 0 by what the replies being
 * built at once used, and refills from there), so that the many batches
 * that carry no table hold nothing back from those that do.  Less than a
 * tenth of a part is not worth a reply's while. */
static size_t table_budget(struct fp_server *s)
{
	double rate = (double)s->sv_limits.sl_table_mb_s * (1 << 20);
	uint64_t now = fp_mono_ms();

	s->sv_table_tokens += (double)(now - s->sv_table_tokens_at) / 1000 * rate;
	if (s->sv_table_tokens > rate)
		s->sv_table_tokens = rate;
	s->sv_table_tokens_at = now;
	if (s->sv_table_tokens < FP_TABLE_PART_MAX / 10)
		return 0;
	return s->sv_table_tokens >= FP_TABLE_REPLY_MAX ? FP_TABLE_REPLY_MAX
							: (size_t)s->sv_table_tokens;
}

static int batch_begin(struct fp_server *s, const char *peer, const struct fp_batch *b,
		       struct fp_reply *r, struct server_session **out, size_t *budget)
{
	struct server_session *ss;

	*r = (struct fp_reply){ .fr_status = FP_REPLY_OK, .fr_seq = b->fb_seq };
	ss = session_find(s, b->fb_session);
	if (ss && !peer_owns(peer, ss))
		return refuse(s, r, &s->sv_stats.sv_rejected_host,
			      "session of another host than the client certificate's");
	if (!ss) {
		s->sv_stats.sv_need_hello++;
		r->fr_status = FP_REPLY_NEED_HELLO;
		return 0;
	}
	if (ss->ss_busy) {
		s->sv_stats.sv_busy++;
		return -EBUSY;
	}
	if (fp_session_seen(ss->ss_session, b->fb_seq)) {
		s->sv_stats.sv_duplicates++;
		reply_written(s, ss, r);
		return 0;
	}
	/* Profiles are named by host and start time: an interval from the
	 * future could take the name of one to come. */
	if (b->fb_start_ns / 1000000000ull > (uint64_t)time(NULL) + FP_SERVER_CLOCK_AHEAD_S)
		return refuse(s, r, &s->sv_stats.sv_rejected_clock,
			      "interval starts in the future: check the device's clock");
	/* The sinks are behind: take nothing, and tell the agent to send the
	 * batch again later (OK with seq 0, PROTOCOL.md section 7), so that
	 * the queue bounds memory and no interval is dropped. */
	if (fp_pipeline_busy(s->sv_pipeline)) {
		s->sv_stats.sv_pipeline_busy++;
		r->fr_seq = 0;
		return 0;
	}
	ss->ss_busy = 1;
	*out = ss;
	*budget = table_budget(s);
	return 1;
}

/* batch_apply: without sv_lock, on the busy session ss: take b's
 * definitions and build its profile *p, what the agent is asked for
 * (r's wants and tables).  0, -ESTALE or -E2BIG (start the session
 * over), -EINVAL (inconsistent definitions) or -ENOMEM. */
static int batch_apply(struct fp_server *s, struct server_session *ss, const struct fp_batch *b,
		       struct fp_reply *r, struct fp_profile **p, struct fp_session_tables *t)
{
	int err = fp_session_apply(ss->ss_session, b);

	if (err)
		return err;
	/* Resolved from the cache only once the resolver has workers: what is
	 * missing is queued, and the pipeline waits for it. */
	if ((err = fp_session_profile(ss->ss_session, s->sv_resolver, b, p)))
		return err;
	fp_session_done(ss->ss_session, b->fb_seq);
	if (!(err = fp_session_wants(ss->ss_session, s->sv_resolver, &r->fr_want, &r->fr_nwant)) &&
	    !(err = fp_session_tables(ss->ss_session, s->sv_resolver, s->sv_tables, t))) {
		r->fr_tables = t->stb_parts;
		r->fr_ntables = t->stb_nparts;
		if (fp_session_hello(ss->ss_session)->fh_features & FP_FEATURE_HELD_TABLES)
			r->fr_tables_pending = t->stb_pending;
	}
	if (!err)
		err = fp_session_kfuncs(ss->ss_session, s->sv_resolver, &r->fr_kfuncs);
	if (err) {
		fp_profile_free(*p);
		*p = NULL;
	}
	return err;
}

/* ask_cfi: the CFI that only the device of session ss may have for its
 * tables (fp_session_cfi_wanted), asked for in r.  First that of the
 * build-IDs whose frames p has (its stacks stop there now), but for those
 * whose symbols no source has: the fetch of their symbols brings it
 * (batch_end asks for the files p names).  Then, when no fetch of the
 * session ran before this reply (idle: its device is not busy sending
 * files), that of at most CFI_AHEAD others (a caller's file no stack
 * reaches yet: the program first, which the agent defines first), after
 * them in the reply, so that the agent, which answers in order, spends
 * its budget, and the symbolizer its workers, on what the stacks name
 * first.  With sv_lock held.  0 or -ENOMEM. */
#define CFI_AHEAD 2
static int ask_cfi(struct fp_server *s, struct server_session *ss, uint64_t host,
		   const struct fp_profile *p, int idle, struct fp_reply *r)
{
	struct fp_build_id ids[FP_WIRE_MAX_RANGES];
	uint8_t named[FP_WIRE_MAX_RANGES] = { 0 };
	size_t n = fp_session_cfi_wanted(ss->ss_session, ids, FP_WIRE_MAX_RANGES), i, k;
	int err = 0;

	for (k = 0; n && k < p->pr_nmappings; k++)
		for (i = 0; i < n; i++)
			named[i] |= fp_build_id_eq(&ids[i], &p->pr_mappings[k].pm_build_id);
	for (i = 0; i < n && !err; i++)
		if (named[i] && !fp_resolver_missing(s->sv_resolver, &ids[i]))
			err = fp_devfetch_want_cfi(s->sv_devfetch, ss->ss_id, host, &ids[i],
						   &r->fr_ranges, &r->fr_nranges);
	/* A fetch that starts asks for one range, the ELF header. */
	for (i = 0, k = r->fr_nranges; idle && i < n && !err && r->fr_nranges - k < CFI_AHEAD; i++)
		if (!named[i])
			err = fp_devfetch_want_cfi(s->sv_devfetch, ss->ss_id, host, &ids[i],
						   &r->fr_ranges, &r->fr_nranges);
	return err;
}

/* batch_end: with sv_lock held, after batch_apply's err: the rest of r,
 * the counters, the profile to the pipeline; ss is free again.  0 or a
 * negative errno (as batch_apply's). */
static int batch_end(struct fp_server *s, struct server_session *ss, const struct fp_batch *b,
		     struct fp_reply *r, struct fp_profile *p, const struct fp_session_tables *t,
		     int err)
{
	const char *host;
	uint64_t hostkey;
	size_t i, used = 0;
	int idle;

	for (i = 0; i < r->fr_ntables; i++)
		used += r->fr_tables[i].tp_len;
	s->sv_table_tokens -= (double)used;
	s->sv_stats.sv_tables_held += t->stb_held;
	s->sv_stats.sv_table_held_bytes += t->stb_held_bytes;
	ss->ss_busy = 0;
	ss->ss_last_used = time(NULL);
	if (err == -E2BIG)
		s->sv_stats.sv_session_limits++;
	if (err == -ESTALE || err == -E2BIG) {
		/* Start the session over: the agent re-sends every definition. */
		s->sv_stats.sv_need_hello++;
		r->fr_status = FP_REPLY_NEED_HELLO;
		return 0;
	}
	if (err)
		return err;
	s->sv_stats.sv_batches++;
	s->sv_stats.sv_agent_lost_samples = b->fb_lost.fl_samples + b->fb_lost.fl_samples_dropped;
	for (i = 0; i < b->fb_ncounts; i++)
		if (!b->fb_counts[i].fc_off_ns)
			s->sv_stats.sv_samples += b->fb_counts[i].fc_count;
	s->sv_stats.sv_table_bytes += used;
	/* User files the profile names that no source had: ask their device. */
	idle = !fp_devfetch_running(s->sv_devfetch, b->fb_session);
	host = fp_session_hello(ss->ss_session)->fh_host ?: "";
	hostkey = fp_hash(host, strlen(host));
	for (i = 0; i < p->pr_nmappings && !err; i++) {
		const struct fp_pmapping *m = &p->pr_mappings[i];
		if (m->pm_kind == FP_MAP_USER && m->pm_build_id.fb_len &&
		    fp_resolver_missing(s->sv_resolver, &m->pm_build_id))
			err = fp_devfetch_want(s->sv_devfetch, b->fb_session, hostkey,
					       &m->pm_build_id, &r->fr_ranges, &r->fr_nranges);
	}
	if (!err)
		err = ask_cfi(s, ss, hostkey, p, idle, r);
	if (err) {
		fp_profile_free(p);
		return err;
	}
	/* The pipeline takes it: past the busy bound, only the batches being
	 * handled when it was reached still come, and FP_PIPELINE_QUEUE
	 * leaves them room.  (Were one dropped, it is counted there.) */
	fp_pipeline_submit(s->sv_pipeline, p, fp_session_hello(ss->ss_session), b->fb_seq);
	reply_written(s, ss, r);
	return 0;
}

/* server_batch: b into r; takes sv_lock itself.  As batch_end, and
 * -EBUSY (batch_begin). */
static int server_batch(struct fp_server *s, const char *peer, const struct fp_batch *b,
			struct fp_reply *r)
{
	struct fp_session_tables t = { 0 };
	struct server_session *ss = NULL;
	struct fp_profile *p = NULL;
	int err;

	pthread_mutex_lock(&s->sv_lock);
	err = batch_begin(s, peer, b, r, &ss, &t.stb_budget);
	pthread_mutex_unlock(&s->sv_lock);
	if (err <= 0)
		return err;
	err = batch_apply(s, ss, b, r, &p, &t);
	pthread_mutex_lock(&s->sv_lock);
	err = batch_end(s, ss, b, r, p, &t, err);
	pthread_mutex_unlock(&s->sv_lock);
	return err;
}

int fp_server_hello(struct fp_server *s, const struct fp_hello *h, struct fp_reply *r)
{
	struct fp_session *old = NULL;
	int err;

	pthread_mutex_lock(&s->sv_lock);
	err = server_hello(s, h, r, &old);
	pthread_mutex_unlock(&s->sv_lock);
	fp_session_free(old);
	if (err)
		fp_reply_fini(r);
	return err;
}

int fp_server_batch(struct fp_server *s, const struct fp_batch *b, struct fp_reply *r)
{
	int err = server_batch(s, NULL, b, r);

	if (err == -EINVAL) {
		pthread_mutex_lock(&s->sv_lock);
		s->sv_stats.sv_rejected_content++;
		pthread_mutex_unlock(&s->sv_lock);
	}
	if (err)
		fp_reply_fini(r);
	return err;
}

/* The handlers decode the message and encode the reply without sv_lock,
 * which is held only to apply the message: an 8 MiB batch being decoded
 * keeps no other device waiting. */
static int handle_hello(struct fp_server *s, const char *peer, const void *req, size_t len,
			char **buf, size_t *rlen)
{
	struct fp_reply r;
	struct fp_hello h;
	char why[512];
	int err = fp_wire_decode_hello(req, len, &h);

	if (err)
		return reject(s, &s->sv_stats.sv_rejected_content, fp_wire_strerror(err), buf,
			      rlen);
	if (peer && strcmp(h.fh_host ?: "", peer)) {
		if (*peer)
			snprintf(why, sizeof(why),
				 "host %.200s is not %.200s, the client certificate's",
				 h.fh_host ?: "", peer);
		else
			snprintf(why, sizeof(why),
				 "host %.200s: the client certificate names no host",
				 h.fh_host ?: "");
		fp_hello_fini(&h);
		return reject(s, &s->sv_stats.sv_rejected_host, why, buf, rlen);
	}
	err = fp_server_hello(s, &h, &r);
	fp_hello_fini(&h);
	return err ? err : reply_encode(&r, buf, rlen);
}

static int handle_batch(struct fp_server *s, const char *peer, const void *req, size_t len,
			char **buf, size_t *rlen)
{
	struct fp_reply r;
	struct fp_batch b;
	int err = fp_wire_decode_batch(req, len, &b);

	if (err)
		return reject(s, &s->sv_stats.sv_rejected_content, fp_wire_strerror(err), buf,
			      rlen);
	err = server_batch(s, peer, &b, &r);
	fp_batch_fini(&b);
	if (err) {
		fp_reply_fini(&r);
		if (err == -EINVAL)
			return reject(s, &s->sv_stats.sv_rejected_content,
				      "batch refers to inconsistent definitions", buf, rlen);
		return err;
	}
	return reply_encode(&r, buf, rlen);
}

static int handle_file(struct fp_server *s, const char *peer, const void *req, size_t len,
		       char **buf, size_t *rlen)
{
	struct fp_reply r = { .fr_status = FP_REPLY_OK };
	struct server_session *ss;
	struct fp_file_data d;
	int err = fp_wire_decode_file(req, len, &d);

	if (err)
		return reject(s, &s->sv_stats.sv_rejected_content, fp_wire_strerror(err), buf,
			      rlen);
	pthread_mutex_lock(&s->sv_lock);
	ss = session_find(s, d.fd_session);
	if (ss && !peer_owns(peer, ss))
		err = -EPERM;
	else if (!(err = fp_devfetch_data(s->sv_devfetch, &d, &r.fr_ranges, &r.fr_nranges)))
		s->sv_stats.sv_file_parts++;
	pthread_mutex_unlock(&s->sv_lock);
	fp_file_data_fini(&d);
	if (err) {
		free(r.fr_ranges);
		if (err == -EPERM)
			return reject(s, &s->sv_stats.sv_rejected_host,
				      "session of another host than the client certificate's", buf,
				      rlen);
		if (err == -EINVAL)
			return reject(s, &s->sv_stats.sv_rejected_content,
				      "file data nobody asked for", buf, rlen);
		return err;
	}
	return reply_encode(&r, buf, rlen);
}

/* server_ksyms: apply k; with sv_lock held.  0, or the counter and reason
 * of a rejection in *counter and *why; -EBUSY when its session is busy
 * with a batch (no reply: the agent sends it again). */
static int server_ksyms(struct fp_server *s, const char *peer, const struct fp_ksyms *k,
			struct fp_reply *r, uint64_t **counter, const char **why)
{
	struct server_session *ss = session_find(s, k->fs_session);

	if (ss && ss->ss_busy) {
		s->sv_stats.sv_busy++;
		return -EBUSY;
	} else if (ss && !peer_owns(peer, ss)) {
		*counter = &s->sv_stats.sv_rejected_host;
		*why = "session of another host than the client certificate's";
	} else if (!ss) {
		s->sv_stats.sv_need_hello++;
		r->fr_status = FP_REPLY_NEED_HELLO;
	} else if (!fp_session_asked(ss->ss_session, &k->fs_build_id)) {
		/* Only what this session was asked for. */
		*counter = &s->sv_stats.sv_rejected_unasked;
		*why = "kallsyms nobody asked for";
	} else if (fp_resolver_has(s->sv_resolver, &k->fs_build_id)) {
		/* Asked of several agents at once, stored from the first:
		 * the others' parts are taken and dropped. */
		s->sv_stats.sv_ksyms_dropped++;
	} else if (fp_resolver_ksyms(s->sv_resolver, k)) {
		*counter = &s->sv_stats.sv_rejected_content;
		*why = "kallsyms part out of order or unusable";
	} else {
		s->sv_stats.sv_ksyms++;
		if (k->fs_last)
			fp_info("stored kallsyms of %s (%s)", k->fs_name,
				k->fs_kind == FP_MAP_KERNEL ? "kernel" : "module");
	}
	return 0;
}

static int handle_ksyms(struct fp_server *s, const char *peer, const void *req, size_t len,
			char **buf, size_t *rlen)
{
	struct fp_reply r = { .fr_status = FP_REPLY_OK };
	uint64_t *counter = NULL;
	const char *why = NULL;
	struct fp_ksyms k;
	int err = fp_wire_decode_ksyms(req, len, &k);

	if (err)
		return reject(s, &s->sv_stats.sv_rejected_content, fp_wire_strerror(err), buf,
			      rlen);
	pthread_mutex_lock(&s->sv_lock);
	err = server_ksyms(s, peer, &k, &r, &counter, &why);
	pthread_mutex_unlock(&s->sv_lock);
	fp_ksyms_fini(&k);
	if (err)
		return err;
	if (counter)
		return reject(s, counter, why, buf, rlen);
	return reply_encode(&r, buf, rlen);
}

int fp_server_handle(struct fp_server *s, const char *peer, const void *req, size_t len, char **buf,
		     size_t *rlen)
{
	int type, err;

	pthread_mutex_lock(&s->sv_lock);
	s->sv_stats.sv_messages++;
	s->sv_stats.sv_bytes += len;
	fp_devfetch_expire(s->sv_devfetch);
	pthread_mutex_unlock(&s->sv_lock);
	err = fp_wire_peek(req, len, &type);
	switch (err) {
	case 0:
		break;
	case FP_WIRE_EVERSION:
		return reject(s, &s->sv_stats.sv_rejected_version,
			      "unsupported protocol version (this symbolizer speaks version 1)",
			      buf, rlen);
	case FP_WIRE_ETYPE:
		return reject(s, &s->sv_stats.sv_rejected_type, "unknown message type", buf, rlen);
	default:
		return reject(s, &s->sv_stats.sv_rejected_malformed, fp_wire_strerror(err), buf,
			      rlen);
	}
	switch (type) {
	case FP_MSG_HELLO:
		return handle_hello(s, peer, req, len, buf, rlen);
	case FP_MSG_SAMPLES:
		return handle_batch(s, peer, req, len, buf, rlen);
	case FP_MSG_KSYMS:
		return handle_ksyms(s, peer, req, len, buf, rlen);
	case FP_MSG_FILE:
		return handle_file(s, peer, req, len, buf, rlen);
	default:
		return reject(s, &s->sv_stats.sv_rejected_type,
			      "message type not accepted by the symbolizer", buf, rlen);
	}
}
