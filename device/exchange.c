/* exchange.c: the agent's exchanges with its symbolizer: the hello,
 * intervals out and replies in (acknowledged, written, or not taken by a
 * busy symbolizer), what the symbolizer asks of the agent (kallsyms and
 * file bytes, within the interval's budget), the unwind tables it sends,
 * and the moves to another symbolizer and back (failover.h has the
 * rule).  Called from main.c's loop, in its one thread. */
#include "agent.h"
#include "cli.h"
#include "kfuncs.h"
#include "log.h"
#include "vec.h"

#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

/* One request and its reply; sampling goes on while we wait. */
static int agent_call(struct agent *a, char *buf, size_t len, struct fp_reply *reply)
{
	uint64_t deadline = fp_now_ns(CLOCK_MONOTONIC) + a->ag_o.ao_timeout_ms * 1000000ull;
	int err, wait = 1;

	/* No connection yet (the dialer is still retrying): keep sampling and
	 * try again until the deadline, after 1 ms, then 2, 4 ... 20: a
	 * connection being made (at start) is used as soon as it is up, one
	 * that does not come costs 50 wake-ups a second. */
	while ((err = fp_uplink_send(a->ag_uplink, buf, len)) == -ETIMEDOUT &&
	       fp_now_ns(CLOCK_MONOTONIC) < deadline) {
		agent_pump(a, wait);
		wait = wait < 10 ? 2 * wait : 20;
	}
	free(buf);
	if (err)
		return err;
	/* A reply usually comes within a millisecond or two: polled each
	 * millisecond, not each 5, it is taken when it comes (an agent just
	 * started waits for its first tables so). */
	for (;;) {
		err = fp_uplink_poll(a->ag_uplink, reply);
		if (err != -EAGAIN)
			return err;
		if (fp_now_ns(CLOCK_MONOTONIC) >= deadline)
			return -ETIMEDOUT;
		agent_pump(a, 1);
	}
}

static int send_ksyms_part(const struct fp_ksyms *part, void *arg)
{
	struct agent *a = arg;
	struct fp_reply r = { 0 };
	size_t len;
	char *buf;
	int err;

	if ((err = fp_wire_encode_ksyms(part, &buf, &len)))
		return err;
	err = agent_call(a, buf, len, &r);
	if (!err && r.fr_status != FP_REPLY_OK)
		err = -EPROTO;
	if (!err)
		a->ag_ksyms_bytes += len;
	fp_reply_fini(&r);
	return err;
}

/* The symbolizer asked for kallsyms snapshots it does not have yet: each
 * build-ID once, as many a interval as the budget allows. */
static void agent_queue_wants(struct agent *a, const struct fp_reply *r)
{
	for (size_t i = 0; i < r->fr_nwant; i++) {
		size_t j;

		for (j = 0; j < a->ag_ksyms_len; j++)
			if (fp_build_id_eq(&a->ag_ksyms_q[j], &r->fr_want[i]))
				break;
		if (j < a->ag_ksyms_len)
			continue;
		if (a->ag_ksyms_len == KSYMS_QUEUE) {
			a->ag_asks_dropped++;
			continue;
		}
		a->ag_ksyms_q[a->ag_ksyms_len++] = r->fr_want[i];
	}
}

static void agent_send_ksyms(struct agent *a)
{
	char hex[2 * FP_BUILD_ID_MAX + 1];

	while (a->ag_ksyms_len && a->ag_ksyms_left) {
		const struct fp_build_id *id = &a->ag_ksyms_q[0];
		int err = fp_kernel_ksyms(&a->ag_kernel, "/proc", id, a->ag_session, KSYMS_PART,
					  send_ksyms_part, a);

		a->ag_ksyms_left--;
		fp_build_id_hex(id, hex);
		if (err)
			fp_warnx("kallsyms for %s not sent: %s", hex, strerror(-err));
		else
			fp_info("sent kallsyms for %s", hex);
		memmove(&a->ag_ksyms_q[0], &a->ag_ksyms_q[1],
			--a->ag_ksyms_len * sizeof(a->ag_ksyms_q[0]));
	}
	if (a->ag_ksyms_len)
		a->ag_ksyms_deferred++;
}

/* agent_queue_ranges: byte ranges asked for, after those still queued. */
static void agent_queue_ranges(struct agent *a, const struct fp_range *g, size_t n)
{
	size_t room;

	if (a->ag_fetch_head == a->ag_fetch_len)
		a->ag_fetch_head = a->ag_fetch_len = 0;
	room = FETCH_QUEUE - a->ag_fetch_len;
	if (n > room) {
		a->ag_asks_dropped += n - room;
		n = room;
	}
	if (!n || fp_vec_reserve(&a->ag_fetch_q, &a->ag_fetch_cap, a->ag_fetch_len + n,
				 sizeof(*a->ag_fetch_q)))
		return;
	memcpy(&a->ag_fetch_q[a->ag_fetch_len], g, n * sizeof(*g));
	a->ag_fetch_len += n;
}

void agent_session_asks_fini(struct agent *a)
{
	free(a->ag_fetch_q);
	a->ag_fetch_q = NULL;
	a->ag_fetch_head = a->ag_fetch_len = a->ag_fetch_cap = 0;
	a->ag_ksyms_len = 0;
}

#define MAX_FILE_MESSAGES 1024 /* per request chain: the symbolizer drives, we bound it */

/* send_file_part: one range of the file open at fd (or -errno: why it
 * cannot be read). */
static int send_file_part(struct agent *a, const struct fp_range *g, int fd, struct fp_reply *reply)
{
	struct fp_file_data d = { .fd_session = a->ag_session,
				  .fd_build_id = g->fg_build_id,
				  .fd_offset = g->fg_offset };
	struct stat st;
	ssize_t n = 0;
	size_t len;
	char *buf;
	int err;

	if (fd < 0 || fstat(fd, &st)) {
		d.fd_error = fd < 0 ? (uint32_t)-fd : (uint32_t)errno;
	} else {
		d.fd_file_size = (uint64_t)st.st_size;
		if (g->fg_offset < d.fd_file_size) {
			d.fd_data = malloc(g->fg_length ? g->fg_length : 1);
			n = d.fd_data ? pread(fd, d.fd_data, g->fg_length, (off_t)g->fg_offset)
				      : -1;
			if (n < 0)
				d.fd_error = d.fd_data ? (uint32_t)errno : ENOMEM;
			else
				d.fd_len = (size_t)n;
		}
	}
	if (d.fd_error)
		d.fd_len = 0;
	err = fp_wire_encode_file(&d, &buf, &len);
	free(d.fd_data);
	if (err)
		return err;
	if ((err = agent_call(a, buf, len, reply)))
		return err;
	a->ag_file_bytes += d.fd_len;
	return reply->fr_status == FP_REPLY_OK ? 0 : -EPROTO;
}

/* The symbolizer has no symbols for some of our files and asks for parts
 * of them; each answer may bring the next question.  The file is opened
 * (and its build-ID checked) once per run of ranges of the same file.
 * With --no-fetch every range is answered "not permitted" at once.  When
 * tables are still to come (some may be compiled from these bytes), the
 * next interval is asked for soon again, not after the grown wait. */
static void agent_answer_ranges(struct agent *a)
{
	struct fp_build_id open_id = { 0 };
	size_t sent = 0, answered = 0;
	int fd = -ENOENT;

	while (a->ag_fetch_head < a->ag_fetch_len && sent++ < MAX_FILE_MESSAGES) {
		struct fp_range g = a->ag_fetch_q[a->ag_fetch_head];
		struct fp_reply r = { 0 };

		if (!a->ag_o.ao_fetch_kb) {
			fd = -EPERM;
		} else if (!a->ag_fetch_left) {
			a->ag_fetch_deferred++;
			break;
		} else if (!open_id.fb_len || !fp_build_id_eq(&open_id, &g.fg_build_id)) {
			if (fd >= 0)
				close(fd);
			fd = fp_collector_open_file(a->ag_collector, &g.fg_build_id);
			open_id = g.fg_build_id;
		}
		if (send_file_part(a, &g, fd, &r)) {
			fp_reply_fini(&r);
			break;
		}
		a->ag_fetch_head++;
		answered++;
		/* the last range of an interval may overrun it, by at most
		 * FP_RANGE_MAX: a range larger than the budget still goes */
		a->ag_fetch_left -= g.fg_length < a->ag_fetch_left ? g.fg_length : a->ag_fetch_left;
		agent_queue_ranges(a, r.fr_ranges, r.fr_nranges);
		fp_reply_fini(&r);
	}
	if (fd >= 0)
		close(fd);
	if (answered && a->ag_retry_ms) {
		a->ag_retry_ms = 0;
		agent_want_cut(a, EARLY_RETRY_MS);
	}
}

static int installed(const struct fp_build_id *id, void *arg)
{
	return fp_unwind_has(arg, id);
}

/* hello_encode: the hello, naming the tables the agent holds now. */
static int hello_encode(struct agent *a, char **buf, size_t *len)
{
	struct fp_held_table *held = NULL;
	int err;

	if (a->ag_tables && (held = malloc(FP_HELD_TABLES_MAX * sizeof(*held))))
		a->ag_hello.fh_nheld = fp_table_cache_held(a->ag_tables, installed, a->ag_unwind,
							   held, FP_HELD_TABLES_MAX);
	a->ag_hello.fh_held = held;
	err = fp_wire_encode_hello(&a->ag_hello, buf, len);
	if (!err && a->ag_hello.fh_nheld)
		fp_debug("hello: %zu unwind tables held", a->ag_hello.fh_nheld);
	a->ag_hello.fh_held = NULL;
	a->ag_hello.fh_nheld = 0;
	free(held);
	return err;
}

static int agent_hello(struct agent *a)
{
	struct fp_reply r = { 0 };
	size_t len;
	char *buf;
	int err;

	if ((err = hello_encode(a, &buf, &len)))
		return err;
	if ((err = agent_call(a, buf, len, &r)))
		return err;
	if (r.fr_status != FP_REPLY_OK) {
		fp_warnx("symbolizer refused hello: %s",
			 r.fr_error ? r.fr_error : "no reason given");
		fp_reply_fini(&r);
		return -EPROTO;
	}
	fp_collector_forget(a->ag_collector); /* a new session knows nothing */
	agent_session_asks_fini(a);
	a->ag_hello_ok = 1;
	a->ag_features = r.fr_features & FP_FEATURES_KNOWN;
	if (a->ag_unwind) {
		fp_unwind_set_function_rows(a->ag_unwind,
					    a->ag_features & FP_FEATURE_FUNCTION_ROWS);
		/* Sent a table it holds: a new version of it. */
		fp_unwind_set_resent_replaces(a->ag_unwind,
					      a->ag_features & FP_FEATURE_HELD_TABLES);
	}
	fp_info("connected to %s (session %016" PRIx64 ")", a->ag_addr, a->ag_session);
	agent_queue_wants(a, &r);
	agent_send_ksyms(a);
	fp_reply_fini(&r);
	return 0;
}

/* Unwind tables the symbolizer sent: install them, then tell the BPF
 * program which processes they serve.  More to come: asked for at once
 * when this reply brought some, else (being compiled) after a wait that
 * doubles up to the interval. */
static void agent_take_tables(struct agent *a, const struct fp_reply *r)
{
	size_t i;
	int added = 0, err;

	for (i = 0; a->ag_unwind && i < r->fr_ntables; i++) {
		a->ag_table_bytes += r->fr_tables[i].tp_len;
		err = fp_unwind_take_part(a->ag_unwind, &r->fr_tables[i]);
		if (err < 0)
			fp_debug("unwind table not installed: %s", strerror(-err));
		added |= err > 0;
	}
	if (added) {
		fp_collector_remap(a->ag_collector);
		agent_first_tables(a, "the symbolizer");
	}
	agent_tables_write(a);
	if (r->fr_ntables || r->fr_tables_pending)
		fp_debug("unwind tables: %zu parts received, %" PRIu32 " tables to come",
			 r->fr_ntables, r->fr_tables_pending);
	if (!a->ag_unwind || !r->fr_tables_pending) {
		a->ag_retry_ms = 0;
	} else if (r->fr_ntables) {
		a->ag_retry_ms = 0;
		agent_want_cut(a, 0);
	} else {
		a->ag_retry_ms = a->ag_retry_ms ? 2 * a->ag_retry_ms : EARLY_RETRY_MS;
		if (a->ag_retry_ms > a->ag_o.ao_interval_s * 1000)
			a->ag_retry_ms = a->ag_o.ao_interval_s * 1000;
		agent_want_cut(a, a->ag_retry_ms);
	}
}

/* The kernel's function starts the symbolizer sent (once per session):
 * kept, for this kernel only, and used from the next sample on. */
static void agent_take_kfuncs(struct agent *a, struct fp_reply *r)
{
	if (!r->fr_kfuncs.kf_n)
		return;
	if (!fp_build_id_eq(&r->fr_kfuncs.kf_build_id, &a->ag_kernel.kn_build_id)) {
		a->ag_kfuncs_refused++;
		fp_warnx("kernel function starts for another kernel's build-ID: refused");
		return;
	}
	fp_collector_set_kfuncs(a->ag_collector, NULL);
	fp_kfuncs_fini(&a->ag_kfuncs);
	a->ag_kfuncs = r->fr_kfuncs; /* ours now */
	memset(&r->fr_kfuncs, 0, sizeof(r->fr_kfuncs));
	fp_collector_set_kfuncs(a->ag_collector, &a->ag_kfuncs);
	fp_info("kernel function starts: %" PRIu32 " (%zu bytes); kernel frames go at them",
		a->ag_kfuncs.kf_n, fp_kfuncs_bytes(&a->ag_kfuncs));
}

/* Send every unsent interval, oldest first.  0 when none is left. */
static int agent_flush(struct agent *a)
{
	struct fp_interval *iv;

	while ((iv = fp_ring_next(&a->ag_ring))) {
		struct fp_reply r = { 0 };
		struct fp_wire_batch_parts parts;
		struct fp_batch b;
		uint64_t seq = iv->fi_seq;
		size_t len;
		char *buf;
		int err;

		if (!a->ag_hello_ok && (err = agent_hello(a)))
			return err;
		if ((err = fp_collector_batch(a->ag_collector, iv, a->ag_session,
					      a->ag_hello.fh_frequency
						      ? 1000000000ull / a->ag_hello.fh_frequency
						      : 0,
					      &b)))
			return err;
		err = fp_wire_encode_batch_parts(&b, a->ag_features, &buf, &len, &parts);
		if (!err)
			err = agent_call(a, buf, len, &r);
		if (err) {
			fp_collector_batch_release(a->ag_collector, &b);
			return err;
		}
		/* The buffer may have moved while we waited (a cut, a drop). */
		iv = fp_ring_next(&a->ag_ring);
		if (r.fr_status == FP_REPLY_OK && r.fr_seq != seq) {
			/* Not taken: the symbolizer is busy (its sinks are
			 * behind) and applied nothing.  Keep the interval and
			 * its definitions unsent, and try again at the next
			 * flush. */
			a->ag_busy++;
			fp_debug("symbolizer busy: interval %" PRIu64
				 " not taken, sent again later",
				 seq);
			fp_collector_batch_release(a->ag_collector, &b);
			fp_reply_fini(&r);
			return 0;
		}
		switch (r.fr_status) {
		case FP_REPLY_OK:
			fp_collector_sent(a->ag_collector, &b);
			if (iv && iv->fi_seq == seq) {
				fp_debug("interval %" PRIu64 " acknowledged: %" PRIu64
					 " samples in %zu "
					 "bytes (%zu nodes in %zu, %zu counts in %zu, mappings %zu, "
					 "threads %zu, header %zu)",
					 seq, iv->fi_samples, len, b.fb_nnodes, parts.wp_nodes,
					 b.fb_ncounts, parts.wp_counts, parts.wp_mappings,
					 parts.wp_threads, parts.wp_other);
				if (fp_ring_ack(&a->ag_ring)) { /* not again when sent again */
					a->ag_acked_samples += iv->fi_samples;
					a->ag_batch_bytes += len;
					a->ag_batch_parts.wp_mappings += parts.wp_mappings;
					a->ag_batch_parts.wp_threads += parts.wp_threads;
					a->ag_batch_parts.wp_nodes += parts.wp_nodes;
					a->ag_batch_parts.wp_counts += parts.wp_counts;
					a->ag_batch_parts.wp_other += parts.wp_other;
				}
			}
			fp_ring_written(&a->ag_ring, r.fr_has_written, r.fr_written);
			agent_take_tables(a, &r);
			agent_take_kfuncs(a, &r);
			agent_queue_wants(a, &r);
			agent_send_ksyms(a);
			agent_queue_ranges(a, r.fr_ranges, r.fr_nranges);
			agent_answer_ranges(a);
			break;
		case FP_REPLY_NEED_HELLO:
			fp_info("symbolizer lost our session (restarted?): saying hello again");
			a->ag_hello_ok = 0;
			/* What it acknowledged may have died with it: send again (it
			 * knows, if it stored them, and takes them once). */
			fp_ring_resend(&a->ag_ring);
			break;
		default:
			fp_warnx("symbolizer rejected interval %" PRIu64 ": %s; dropping it", seq,
				 r.fr_error ? r.fr_error : "no reason given");
			if (iv && iv->fi_seq == seq) {
				a->ag_lost.fl_batches++;
				a->ag_lost.fl_samples_dropped += iv->fi_samples;
				fp_ring_drop_unsent(&a->ag_ring);
			}
			break;
		}
		fp_collector_batch_release(a->ag_collector, &b);
		fp_reply_fini(&r);
	}
	if (a->ag_hello_ok) { /* what earlier intervals could not afford */
		agent_send_ksyms(a);
		agent_answer_ranges(a);
	}
	return 0;
}

/* agent_use: talk to server idx from now on, in a new session; the
 * buffered intervals go to it at the next flush. */
static int agent_use(struct agent *a, size_t idx)
{
	struct fp_uplink *u;
	int err = fp_uplink_open(&u, a->ag_o.ao_servers[idx], &a->ag_o.ao_tls);

	if (err)
		return err;
	fp_uplink_close(a->ag_uplink);
	a->ag_uplink = u;
	a->ag_addr = a->ag_o.ao_servers[idx];
	agent_new_session(a);
	fp_ring_resend(&a->ag_ring); /* the old one may not have written them */
	return 0;
}

int agent_send(struct agent *a)
{
	size_t idx = a->ag_fo.fo_current;
	int err;

	if (a->ag_addr != a->ag_o.ao_servers[idx] && (err = agent_use(a, idx)))
		return err;
	return agent_flush(a);
}

void agent_failback(struct agent *a)
{
	struct fp_uplink *cur = a->ag_uplink, *u;
	const char *cur_addr = a->ag_addr;
	uint64_t session = a->ag_session;
	int hello_ok = a->ag_hello_ok, err;
	size_t i;

	for (i = 0; i < a->ag_fo.fo_current && !agent_exiting; i++) {
		if (fp_uplink_open(&u, a->ag_o.ao_servers[i], &a->ag_o.ao_tls))
			continue;
		a->ag_uplink = u;
		a->ag_addr = a->ag_o.ao_servers[i];
		agent_new_session(a);
		err = agent_hello(a);
		if (!err) {
			/* The one we leave is up: it writes what it acknowledged. */
			fp_ring_forget_acked(&a->ag_ring);
			fp_info("back on %s from %s, with %zu intervals buffered", a->ag_addr,
				cur_addr, fp_ring_unsent(&a->ag_ring));
			fp_uplink_close(cur);
			fp_failover_probed(&a->ag_fo, i, fp_now_ns(CLOCK_MONOTONIC));
			return;
		}
		fp_info("symbolizer %s still unavailable: %s", a->ag_addr, strerror(-err));
		fp_uplink_close(u);
	}
	a->ag_uplink = cur;
	a->ag_addr = cur_addr;
	a->ag_session = session;
	a->ag_hello.fh_session = session;
	a->ag_hello_ok = hello_ok;
	fp_failover_probed(&a->ag_fo, a->ag_fo.fo_current, fp_now_ns(CLOCK_MONOTONIC));
	fp_info("staying on %s", cur_addr);
}
