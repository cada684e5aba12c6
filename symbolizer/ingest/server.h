/* server.h: the symbolizer's request handling, transport-free: one
 * message in, one reply out.  Every problem with a message becomes a
 * REJECTED reply and a counter; nothing a peer sends can stop the server.
 *
 * The first stages of the pipeline (pipeline.h): a message is decoded
 * (wire.h) and applied to its session (session.h), whose profile is
 * resolved (resolver.h) and handed to the pipeline's sinks.
 *
 * It accepts only what it asked for: new sessions at a bounded rate and
 * only into free slots or those idle for FP_SERVER_IDLE_S (a session in
 * use is never evicted), a session id for one host only, no interval
 * from the future, kallsyms only for build-IDs asked of that session,
 * device fetches within devfetch.h's bounds.  The host name is the
 * hello's (fh_host); when the connection has a verified identity (the
 * client certificate's name, fp_server_handle's peer), a hello for any
 * other host is refused, and so is any message for a session of another
 * host.
 *
 * Threads.  fp_server_handle, fp_server_hello and fp_server_batch may be
 * called from any number of threads (listen.h calls them from its
 * workers): one lock, sv_lock, guards the session table, the device
 * fetches, kallsyms assembly and the counters, and is held only to apply
 * a decoded message (messages are decoded and replies encoded outside
 * it), for work that needs no file.  A batch's definitions are taken and
 * its profile built outside it too: its session is marked busy
 * meanwhile, and a message for a busy session gets no reply (sv_busy);
 * an agent sends one message at a time, so only a resend meets it.
 * Under sv_lock, in any case, nothing waits for a file: once the resolver has workers
 * (fp_resolver_start) and the pipeline its thread (fp_server_start),
 * nothing under it parses a file, asks the network or writes a profile. */
#ifndef FP_SERVER_H
#define FP_SERVER_H

#include <stddef.h>
#include <stdint.h>
#include "batch.h"
#include "pipeline.h"
#include "profile.h"
#include "resolver.h"

#define FP_SERVER_MAX_SESSIONS 16384
/* New sessions a second, by default and at most (--new-sessions). */
#define FP_SERVER_NEW_SESSIONS_DEFAULT 1000
#define FP_SERVER_NEW_SESSIONS_MAX 1000000
/* A session unused this long may make room for a new one. */
#define FP_SERVER_IDLE_S 300
/* Unwind table bytes sent to agents a second, in MiB, by default and at
 * most (--table-rate): a bound on what tables take from other replies. */
#define FP_SERVER_TABLE_MB_S_DEFAULT 256
#define FP_SERVER_TABLE_MB_S_MAX 100000
/* How far in the future an interval may start (the device's clock). */
#define FP_SERVER_CLOCK_AHEAD_S 3600

/* What the server admits; fp_server_set_limits. */
struct fp_server_limits {
	uint32_t sl_max_sessions;       /* 1-FP_SERVER_MAX_SESSIONS */
	uint32_t sl_new_sessions_per_s; /* 1-FP_SERVER_NEW_SESSIONS_MAX, also the burst */
	uint32_t sl_max_queued;         /* profiles queued for the sinks before batches are
					 * answered busy: 1-FP_PIPELINE_BUSY; 0: that */
	uint32_t sl_max_queued_mb;      /* MiB they hold, the same way: 1 to
					 * FP_PIPELINE_BUSY_BYTES_MAX >> 20; 0: the
					 * default, FP_PIPELINE_BUSY_BYTES_DEFAULT */
	uint32_t sl_table_mb_s;         /* unwind table MiB a second, at most a
					 * second's worth at once: 1 to
					 * FP_SERVER_TABLE_MB_S_MAX; 0: the default */
};

struct fp_server_stats {
	uint64_t sv_sessions; /* held now */
	uint64_t sv_messages, sv_bytes;
	uint64_t sv_hellos, sv_batches, sv_ksyms;
	uint64_t sv_samples;    /* in accepted batches */
	uint64_t sv_duplicates; /* batches resent after a lost reply */
	uint64_t sv_need_hello; /* batches of unknown sessions */
	uint64_t sv_rejected_malformed, sv_rejected_version, sv_rejected_type;
	uint64_t sv_rejected_content;       /* decodable but inconsistent */
	uint64_t sv_rejected_new_sessions;  /* hellos over the new-session rate */
	uint64_t sv_rejected_sessions_full; /* hellos with no slot free or idle */
	uint64_t sv_rejected_unasked;       /* kallsyms nobody asked for */
	uint64_t sv_ksyms_dropped;          /* kallsyms parts of tables stored already */
	uint64_t sv_rejected_clock;         /* intervals starting in the future */
	uint64_t sv_rejected_host;          /* another host than the certificate's */
	uint64_t sv_busy;                   /* not answered: their session was busy */
	uint64_t sv_session_limits;         /* sessions started over: a per-session limit */
	uint64_t sv_agent_lost_samples;     /* as reported by agents (latest totals) */
	uint64_t sv_write_errors;
	uint64_t sv_profiles;
	uint64_t sv_file_parts;        /* file bytes fetched from devices */
	uint64_t sv_table_bytes;       /* unwind table bytes sent to agents */
	uint64_t sv_tables_held;       /* tables not sent: the agent held them (HELLO key 11) */
	uint64_t sv_table_held_bytes;  /* ... their bytes */
	uint64_t sv_table_mem_bytes;   /* tables kept in memory for sessions (tablestore.h) */
	uint64_t sv_table_mem_reads;   /* ... read from the cache into it */
	uint64_t sv_fetch_active;      /* device fetches running now (devfetch.h) */
	uint64_t sv_fetch_expired;     /* ... that had no answer in time */
	uint64_t sv_fetch_deferred;    /* ... not started for a bound */
	uint64_t sv_fetch_retried;     /* ... started again after a device's failure */
	uint64_t sv_fetch_given_up;    /* build-IDs failed too often to ask again */
	uint64_t sv_fetch_started;     /* device fetches started, of both kinds */
	uint64_t sv_fetch_cfi_started; /* of them, of CFI alone (devfetch.h) */
	/* The pipeline (pipeline.h) and the resolver's workers (resolver.h): */
	uint64_t sv_pipeline_queue;       /* profiles waiting for their sinks now */
	uint64_t sv_pipeline_bytes;       /* the heap they hold */
	uint64_t sv_pipeline_dropped;     /* profiles dropped: pipeline queue full */
	uint64_t sv_pipeline_busy;        /* batches not taken: pipeline busy */
	uint64_t sv_pipeline_trims;       /* backlogs of 64 or more drained, memory given back */
	uint64_t sv_symbol_waits;         /* profiles that waited for their symbols */
	uint64_t sv_symbol_wait_timeouts; /* ... in vain (--symbol-wait passed) */
	uint64_t sv_ingest_queue;         /* symbol jobs waiting now */
	uint64_t sv_ingest_running;       /* symbol jobs running now */
	uint64_t sv_ingest_queue_full;    /* symbol jobs dropped (queued again later) */
	uint64_t sv_ingest_jobs;          /* symbol jobs done */
	uint64_t sv_ingest_ms, sv_ingest_max_ms; /* their time, all and longest */
};

struct fp_server;

/* fp_server_alloc: out_dir receives OUT/HOST/STAMP-SEQ.{folded,pb.gz}
 * (fp_files_sink); NULL writes no files.  tmp_dir holds files being
 * fetched from devices and the sessions' state (pipeline.h); with both,
 * the sequence numbers older symbolizers left in out_dir are moved there
 * (fp_pipeline_migrate).  Sinks run in the caller's thread until
 * fp_server_start.  0 or -ENOMEM. */
int fp_server_alloc(struct fp_server **s, struct fp_resolver *r, const char *out_dir,
		    const char *tmp_dir);
/* fp_server_free: after the last call of the others; the sinks of the
 * profiles still queued run first. */
void fp_server_free(struct fp_server *s);

/* fp_server_add_sink: a further sink (after the files) for every profile,
 * e.g. fp_push_sink.  Before fp_server_start.  0 or -ENOSPC. */
int fp_server_add_sink(struct fp_server *s, fp_sink_fn fn, void *arg);

/* fp_server_set_limits: replace the defaults (FP_SERVER_MAX_SESSIONS,
 * FP_SERVER_NEW_SESSIONS_DEFAULT).  A hello beyond them gets a REJECTED
 * reply: the agent says hello again later.  0 or -EINVAL (out of range). */
int fp_server_set_limits(struct fp_server *s, const struct fp_server_limits *l);

/* fp_server_start: run the sinks in the pipeline's workers, after waiting
 * at most symbol_wait_ms for symbols being ingested (fp_pipeline_start).
 * 0 or a negative errno. */
int fp_server_start(struct fp_server *s, uint32_t symbol_wait_ms);

/* fp_server_handle: process one request and encode the reply (malloc'd).
 * peer is the host name the connection proved (listen.h: the client
 * certificate's), "" for a proof that names no host, NULL for no proof:
 * with one, a hello from another host and messages for another host's
 * session get a REJECTED reply (sv_rejected_host).  0, -EBUSY (the
 * message's session is busy with another batch: no reply, the agent
 * sends it again; sv_busy), or -ENOMEM when not even a reply could be
 * built. */
int fp_server_handle(struct fp_server *s, const char *peer, const void *req, size_t len,
		     char **reply, size_t *reply_len);

/* fp_server_hello / fp_server_batch: the same for a message decoded
 * already (fleetprof record feeds its own this way): *r is the reply (the
 * caller calls fp_reply_fini).  0, -EINVAL (a batch that refers to
 * inconsistent definitions; counted, *r empty) or -ENOMEM. */
int fp_server_hello(struct fp_server *s, const struct fp_hello *h, struct fp_reply *r);
int fp_server_batch(struct fp_server *s, const struct fp_batch *b, struct fp_reply *r);

/* fp_server_stats: the counters as of the last fp_server_handle's return;
 * any thread. */
void fp_server_stats(const struct fp_server *s, struct fp_server_stats *st);
/* fp_server_log_stats: one log line with every counter. */
void fp_server_log_stats(const struct fp_server *s);

#endif
