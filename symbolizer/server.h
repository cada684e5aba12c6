/* server.h: the symbolizer's request handling, transport-free: one
 * message in, one reply out.  Every problem with a message becomes a
 * REJECTED reply and a counter; nothing a peer sends can stop the server. */
#ifndef FP_SERVER_H
#define FP_SERVER_H

#include <stddef.h>
#include <stdint.h>
#include "batch.h"
#include "profile.h"
#include "resolver.h"

#define FP_SERVER_MAX_SESSIONS 4096

struct fp_server_stats {
	uint64_t sv_sessions;           /* held now */
	uint64_t sv_messages, sv_bytes;
	uint64_t sv_hellos, sv_batches, sv_ksyms;
	uint64_t sv_samples;            /* in accepted batches */
	uint64_t sv_duplicates;         /* batches resent after a lost reply */
	uint64_t sv_need_hello;         /* batches of unknown sessions */
	uint64_t sv_rejected_malformed, sv_rejected_version, sv_rejected_type;
	uint64_t sv_rejected_content;   /* decodable but inconsistent */
	uint64_t sv_agent_lost_samples; /* as reported by agents (latest totals) */
	uint64_t sv_write_errors;
	uint64_t sv_profiles;
	uint64_t sv_file_parts;         /* file bytes fetched from devices */
	uint64_t sv_table_bytes;        /* unwind table bytes sent to agents */
};

struct fp_server;

/* fp_server_alloc: out_dir receives OUT/HOST/STAMP.{folded,pb.gz}; NULL
 * writes nothing (fuzzing).  tmp_dir holds files being fetched from
 * devices.  0 or -ENOMEM. */
int fp_server_alloc(struct fp_server **s, struct fp_resolver *r, const char *out_dir,
		    const char *tmp_dir);
void fp_server_free(struct fp_server *s);

/* fp_server_handle: process one request and encode the reply (malloc'd).
 * 0, or -ENOMEM when not even a reply could be built. */
int fp_server_handle(struct fp_server *s, const void *req, size_t len, char **reply,
		     size_t *reply_len);

/* fp_server_set_sink: fn(arg, profile, hello) is called with the profile
 * of every accepted interval (after its files are written, whether or not
 * that worked; an interval re-sent after a lost reply is not passed twice)
 * and the hello of its session, in the thread that calls fp_server_handle.
 * The pushers of push.h take them this way.  fn NULL: none (the default). */
typedef void (*fp_server_sink_fn)(void *arg, const struct fp_profile *p,
				  const struct fp_hello *hello);
void fp_server_set_sink(struct fp_server *s, fp_server_sink_fn fn, void *arg);

/* fp_server_stats: the counters as of the last fp_server_handle's return;
 * any thread. */
void fp_server_stats(const struct fp_server *s, struct fp_server_stats *st);
/* fp_server_log_stats: one log line with every counter. */
void fp_server_log_stats(const struct fp_server *s);

#endif
