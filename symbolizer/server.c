/* server.c: decode, dispatch, reply; sessions; output files. */
#include "server.h"
#include "devfetch.h"
#include "files.h"
#include "log.h"
#include "output.h"
#include "session.h"
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
};

struct fp_server {
	struct fp_resolver *sv_resolver;
	struct fp_devfetch *sv_devfetch;
	char *sv_out_dir;
	struct server_session sv_sessions[FP_SERVER_MAX_SESSIONS];
	size_t sv_nsessions;
	struct fp_server_stats sv_stats;  /* the handling thread's own */
	pthread_mutex_t sv_shown_lock;
	struct fp_server_stats sv_shown;  /* sv_stats as of the last reply, for any thread */
	fp_server_sink_fn sv_sink;
	void *sv_sink_arg;
};

int fp_server_alloc(struct fp_server **out, struct fp_resolver *r, const char *out_dir,
		    const char *tmp_dir)
{
	struct fp_server *s = calloc(1, sizeof(*s));

	if (!s)
		return -ENOMEM;
	s->sv_resolver = r;
	pthread_mutex_init(&s->sv_shown_lock, NULL);
	if ((out_dir && !(s->sv_out_dir = strdup(out_dir))) ||
	    fp_devfetch_alloc(&s->sv_devfetch, r, tmp_dir)) {
		free(s->sv_out_dir);
		pthread_mutex_destroy(&s->sv_shown_lock);
		free(s);
		return -ENOMEM;
	}
	*out = s;
	return 0;
}

void fp_server_free(struct fp_server *s)
{
	size_t i;

	if (!s)
		return;
	for (i = 0; i < s->sv_nsessions; i++)
		fp_session_free(s->sv_sessions[i].ss_session);
	fp_devfetch_free(s->sv_devfetch);
	free(s->sv_out_dir);
	pthread_mutex_destroy(&s->sv_shown_lock);
	free(s);
}

void fp_server_set_sink(struct fp_server *s, fp_server_sink_fn fn, void *arg)
{
	s->sv_sink = fn;
	s->sv_sink_arg = arg;
}

void fp_server_stats(const struct fp_server *s, struct fp_server_stats *st)
{
	pthread_mutex_lock((pthread_mutex_t *)&s->sv_shown_lock);
	*st = s->sv_shown;
	pthread_mutex_unlock((pthread_mutex_t *)&s->sv_shown_lock);
}

void fp_server_log_stats(const struct fp_server *s)
{
	struct fp_server_stats st, *t = &st;
	struct fp_resolver_stats rs;
	struct fp_devfetch_stats ds;

	fp_server_stats(s, &st);
	fp_info("messages %" PRIu64 " (%" PRIu64 " bytes): hello %" PRIu64 ", batches %" PRIu64
		", kallsyms %" PRIu64 ", samples %" PRIu64 ", profiles %" PRIu64
		", duplicates %" PRIu64 ", unknown sessions %" PRIu64 "; rejected: malformed %" PRIu64
		", version %" PRIu64 ", type %" PRIu64 ", content %" PRIu64
		"; write errors %" PRIu64 "; agents lost %" PRIu64 " samples; file parts %" PRIu64
		"; unwind table bytes sent %" PRIu64,
		t->sv_messages, t->sv_bytes, t->sv_hellos, t->sv_batches, t->sv_ksyms,
		t->sv_samples, t->sv_profiles, t->sv_duplicates, t->sv_need_hello,
		t->sv_rejected_malformed, t->sv_rejected_version, t->sv_rejected_type,
		t->sv_rejected_content, t->sv_write_errors, t->sv_agent_lost_samples,
		t->sv_file_parts, t->sv_table_bytes);
	fp_resolver_stats(s->sv_resolver, &rs);
	fp_devfetch_stats(s->sv_devfetch, &ds);
	fp_info("symbols: tables built %" PRIu64 ", no source %" PRIu64 ", kallsyms stored %" PRIu64
		"; from devices: started %" PRIu64 ", done %" PRIu64 ", failed %" PRIu64 " (%" PRIu64
		" bytes)",
		rs.rs_ingested, rs.rs_ingest_failed, rs.rs_ksyms_stored, ds.dv_started, ds.dv_done,
		ds.dv_failed, ds.dv_bytes);
}

static void seq_load(const struct fp_server *s, struct fp_session *se);

static struct server_session *session_find(struct fp_server *s, uint64_t id)
{
	size_t i;

	for (i = 0; i < s->sv_nsessions; i++)
		if (s->sv_sessions[i].ss_id == id) {
			s->sv_sessions[i].ss_last_used = time(NULL);
			return &s->sv_sessions[i];
		}
	return NULL;
}

/* session_add: replaces the same id, else the least recently used one
 * when the table is full. */
static int session_add(struct fp_server *s, const struct fp_hello *h)
{
	struct server_session *slot = session_find(s, h->fh_session);
	struct fp_session *n;
	size_t i;
	int err;

	if ((err = fp_session_alloc(&n, h)))
		return err;
	if (!slot && s->sv_nsessions < FP_SERVER_MAX_SESSIONS)
		slot = &s->sv_sessions[s->sv_nsessions++];
	if (!slot) {
		slot = &s->sv_sessions[0];
		for (i = 1; i < s->sv_nsessions; i++)
			if (s->sv_sessions[i].ss_last_used < slot->ss_last_used)
				slot = &s->sv_sessions[i];
		fp_session_free(slot->ss_session);
		slot->ss_session = NULL;
	}
	if (slot->ss_session)
		fp_session_free(slot->ss_session);
	*slot = (struct server_session){ h->fh_session, time(NULL), n };
	seq_load(s, n);
	return 0;
}

static int reply_encode(struct fp_reply *r, char **buf, size_t *len)
{
	int err = fp_wire_encode_reply(r, buf, len);

	fp_reply_fini(r);
	return err;
}

static int reject(struct fp_server *s, uint64_t *counter, const char *why, char **buf,
		  size_t *len)
{
	struct fp_reply r = { .fr_status = FP_REPLY_REJECTED, .fr_error = (char *)why };

	(*counter)++;
	fp_warnx("rejected a message: %s", why);
	return fp_wire_encode_reply(&r, buf, len);
}

/* The last interval written for a session survives restarts next to its
 * profiles, so that an interval re-sent after a lost reply is recognised
 * even by a new symbolizer process. */
static void seq_path(const struct fp_server *s, const struct fp_hello *h, char *buf, size_t len)
{
	char host[256];

	fp_safe_name(h->fh_host, host, sizeof(host));
	snprintf(buf, len, "%s/%s/.session-%016" PRIx64, s->sv_out_dir, host, h->fh_session);
}

static void seq_load(const struct fp_server *s, struct fp_session *se)
{
	char path[4400];
	unsigned long long seq;
	FILE *f;

	if (!s->sv_out_dir)
		return;
	seq_path(s, fp_session_hello(se), path, sizeof(path));
	f = fopen(path, "re");
	if (!f)
		return;
	if (fscanf(f, "%llu", &seq) == 1)
		fp_session_done(se, seq);
	fclose(f);
}

static int seq_store(const struct fp_server *s, const struct fp_session *se, uint64_t seq)
{
	char path[4400], tmp[4500];
	FILE *f;
	int err = 0;

	seq_path(s, fp_session_hello(se), path, sizeof(path));
	snprintf(tmp, sizeof(tmp), "%s.tmp", path);
	f = fopen(tmp, "we");
	if (!f)
		return -errno;
	fprintf(f, "%" PRIu64 "\n", seq);
	if (fclose(f) || rename(tmp, path))
		err = -errno;
	return err;
}

static void write_profile(struct fp_server *s, struct fp_session *se,
			  const struct fp_batch *b, const struct fp_profile *p)
{
	char host[256], dir[4096], path[4300], stamp[32];
	time_t secs = (time_t)(b->fb_start_ns / 1000000000ull);
	struct tm tm;
	int err;

	if (!s->sv_out_dir)
		return;
	fp_safe_name(fp_session_hello(se)->fh_host, host, sizeof(host));
	gmtime_r(&secs, &tm);
	strftime(stamp, sizeof(stamp), "%Y%m%dT%H%M%SZ", &tm);
	snprintf(dir, sizeof(dir), "%s/%s", s->sv_out_dir, host);
	err = fp_mkdirs(dir);
	if (!err) {
		snprintf(path, sizeof(path), "%s/%s-%" PRIu64 ".folded", dir, stamp, b->fb_seq);
		err = fp_write_folded(p, path, 0);
	}
	if (!err) {
		snprintf(path, sizeof(path), "%s/%s-%" PRIu64 ".pb.gz", dir, stamp, b->fb_seq);
		err = fp_pprof_write(p, path);
	}
	if (!err)
		err = seq_store(s, se, b->fb_seq);
	if (err) {
		s->sv_stats.sv_write_errors++;
		fp_warnx("cannot write the profile of %s to %s: %s", host, dir, strerror(-err));
		return;
	}
	s->sv_stats.sv_profiles++;
}

static int handle_hello(struct fp_server *s, const void *req, size_t len, char **buf,
			size_t *rlen)
{
	struct fp_reply r = { .fr_status = FP_REPLY_OK };
	struct server_session *ss;
	struct fp_hello h;
	int err = fp_wire_decode_hello(req, len, &h);

	if (err)
		return reject(s, &s->sv_stats.sv_rejected_content, fp_wire_strerror(err), buf, rlen);
	s->sv_stats.sv_hellos++;
	err = session_add(s, &h);
	if (!err) {
		fp_info("session %016" PRIx64 " from %s (kernel %s, agent %s, %u Hz, %u CPUs)",
			h.fh_session, h.fh_host, h.fh_kernel_release, h.fh_agent_version,
			h.fh_frequency, h.fh_ncpus);
		ss = session_find(s, h.fh_session);
		err = fp_session_wants(ss->ss_session, s->sv_resolver, &r.fr_want, &r.fr_nwant);
	}
	fp_hello_fini(&h);
	if (err)
		return err;
	return reply_encode(&r, buf, rlen);
}

static int handle_batch(struct fp_server *s, const void *req, size_t len, char **buf,
			size_t *rlen)
{
	struct fp_reply r = { .fr_status = FP_REPLY_OK };
	struct fp_profile *p = NULL;
	struct server_session *ss;
	struct fp_batch b;
	size_t i;
	int err = fp_wire_decode_batch(req, len, &b);

	if (err)
		return reject(s, &s->sv_stats.sv_rejected_content, fp_wire_strerror(err), buf, rlen);
	r.fr_seq = b.fb_seq;
	ss = session_find(s, b.fb_session);
	if (!ss) {
		s->sv_stats.sv_need_hello++;
		r.fr_status = FP_REPLY_NEED_HELLO;
		goto reply;
	}
	if (fp_session_seen(ss->ss_session, b.fb_seq)) {
		s->sv_stats.sv_duplicates++;
		goto reply;
	}
	err = fp_session_apply(ss->ss_session, &b);
	if (err == -ESTALE || err == -E2BIG) {
		/* Start the session over: the agent re-sends every definition. */
		s->sv_stats.sv_need_hello++;
		r.fr_status = FP_REPLY_NEED_HELLO;
		err = 0;
		goto reply;
	}
	if (err == -EINVAL) {
		fp_batch_fini(&b);
		return reject(s, &s->sv_stats.sv_rejected_content,
			      "batch refers to inconsistent definitions", buf, rlen);
	}
	if (err)
		goto out;
	s->sv_stats.sv_batches++;
	s->sv_stats.sv_agent_lost_samples = b.fb_lost.fl_samples + b.fb_lost.fl_samples_dropped;
	for (i = 0; i < b.fb_ncounts; i++)
		s->sv_stats.sv_samples += b.fb_counts[i].fc_count;
	if ((err = fp_session_profile(ss->ss_session, s->sv_resolver, &b, &p)))
		goto out;
	write_profile(s, ss->ss_session, &b, p);
	if (s->sv_sink)
		s->sv_sink(s->sv_sink_arg, p, fp_session_hello(ss->ss_session));
	fp_session_done(ss->ss_session, b.fb_seq);
	if ((err = fp_session_wants(ss->ss_session, s->sv_resolver, &r.fr_want, &r.fr_nwant)))
		goto out;
	/* User mappings no source could resolve: ask their device. */
	for (i = 0; i < b.fb_nmappings && !err; i++) {
		const struct fp_mapping *m = &b.fb_mappings[i];
		if (m->fm_kind == FP_MAP_USER && m->fm_build_id.fb_len &&
		    fp_resolver_missing(s->sv_resolver, &m->fm_build_id))
			err = fp_devfetch_want(s->sv_devfetch, b.fb_session, &m->fm_build_id,
					       &r.fr_ranges, &r.fr_nranges);
	}
	if (!err)
		err = fp_session_tables(ss->ss_session, s->sv_resolver, &r.fr_tables, &r.fr_ntables);
	if (err)
		goto out;
	for (i = 0; i < r.fr_ntables; i++)
		s->sv_stats.sv_table_bytes += r.fr_tables[i].tp_len;
reply:
	err = reply_encode(&r, buf, rlen);
out:
	fp_profile_free(p);
	fp_batch_fini(&b);
	fp_reply_fini(&r);
	return err;
}

static int handle_file(struct fp_server *s, const void *req, size_t len, char **buf,
		       size_t *rlen)
{
	struct fp_reply r = { .fr_status = FP_REPLY_OK };
	struct fp_file_data d;
	int err = fp_wire_decode_file(req, len, &d);

	if (err)
		return reject(s, &s->sv_stats.sv_rejected_content, fp_wire_strerror(err), buf, rlen);
	err = fp_devfetch_data(s->sv_devfetch, &d, &r.fr_ranges, &r.fr_nranges);
	fp_file_data_fini(&d);
	if (err == -EINVAL) {
		free(r.fr_ranges);
		return reject(s, &s->sv_stats.sv_rejected_content, "file data nobody asked for", buf,
			      rlen);
	}
	if (err) {
		free(r.fr_ranges);
		return err;
	}
	s->sv_stats.sv_file_parts++;
	return reply_encode(&r, buf, rlen);
}

static int handle_ksyms(struct fp_server *s, const void *req, size_t len, char **buf,
			size_t *rlen)
{
	struct fp_reply r = { .fr_status = FP_REPLY_OK };
	struct fp_ksyms k;
	int err = fp_wire_decode_ksyms(req, len, &k);

	if (err)
		return reject(s, &s->sv_stats.sv_rejected_content, fp_wire_strerror(err), buf, rlen);
	if (!session_find(s, k.fs_session)) {
		s->sv_stats.sv_need_hello++;
		r.fr_status = FP_REPLY_NEED_HELLO;
	} else if ((err = fp_resolver_ksyms(s->sv_resolver, &k))) {
		fp_ksyms_fini(&k);
		return reject(s, &s->sv_stats.sv_rejected_content,
			      "kallsyms part out of order or unusable", buf, rlen);
	} else {
		s->sv_stats.sv_ksyms++;
		if (k.fs_last)
			fp_info("stored kallsyms of %s (%s)", k.fs_name,
				k.fs_kind == FP_MAP_KERNEL ? "kernel" : "module");
	}
	fp_ksyms_fini(&k);
	return reply_encode(&r, buf, rlen);
}

static int handle(struct fp_server *s, const void *req, size_t len, char **buf, size_t *rlen)
{
	int type, err;

	s->sv_stats.sv_messages++;
	s->sv_stats.sv_bytes += len;
	err = fp_wire_peek(req, len, &type);
	switch (err) {
	case 0:
		break;
	case FP_WIRE_EVERSION:
		return reject(s, &s->sv_stats.sv_rejected_version,
			      "unsupported protocol version (this symbolizer speaks version 1)", buf,
			      rlen);
	case FP_WIRE_ETYPE:
		return reject(s, &s->sv_stats.sv_rejected_type, "unknown message type", buf, rlen);
	default:
		return reject(s, &s->sv_stats.sv_rejected_malformed, fp_wire_strerror(err), buf,
			      rlen);
	}
	switch (type) {
	case FP_MSG_HELLO:
		return handle_hello(s, req, len, buf, rlen);
	case FP_MSG_SAMPLES:
		return handle_batch(s, req, len, buf, rlen);
	case FP_MSG_KSYMS:
		return handle_ksyms(s, req, len, buf, rlen);
	case FP_MSG_FILE:
		return handle_file(s, req, len, buf, rlen);
	default:
		return reject(s, &s->sv_stats.sv_rejected_type,
			      "message type not accepted by the symbolizer", buf, rlen);
	}
}

int fp_server_handle(struct fp_server *s, const void *req, size_t len, char **buf,
		     size_t *rlen)
{
	int err = handle(s, req, len, buf, rlen);

	/* Shown before the reply leaves: whoever saw the reply sees its counts. */
	s->sv_stats.sv_sessions = s->sv_nsessions;
	pthread_mutex_lock(&s->sv_shown_lock);
	s->sv_shown = s->sv_stats;
	pthread_mutex_unlock(&s->sv_shown_lock);
	return err;
}
