/* metrics.c: Prometheus' text format from the modules' stats structs.
 *
 * Each metric family is a HELP and a TYPE line, then its samples; a family
 * with labels has one sample per label value.  Counters end in _total.
 * The values are copied from each module's stats call first, so that the
 * text is one consistent view of each module. */
#include "metrics.h"

#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>

#define PREFIX "fleetprof_"

static void family(FILE *f, const char *name, const char *type, const char *help)
{
	fprintf(f, "# HELP " PREFIX "%s %s\n# TYPE " PREFIX "%s %s\n", name, help, name, type);
}

static void sample(FILE *f, const char *name, const char *labels, uint64_t v)
{
	fprintf(f, PREFIX "%s%s%s%s %" PRIu64 "\n", name, labels ? "{" : "", labels ? labels : "",
		labels ? "}" : "", v);
}

/* label: key="value", with \, " and newline escaped as the format asks. */
static void label(char *out, size_t len, const char *key, const char *value)
{
	size_t o = (size_t)snprintf(out, len, "%s=\"", key);

	for (; *value && o + 4 < len; value++) {
		if (*value == '\\' || *value == '"')
			out[o++] = '\\';
		if (*value == '\n') {
			out[o++] = '\\';
			out[o++] = 'n';
		} else {
			out[o++] = *value;
		}
	}
	out[o++] = '"';
	out[o] = '\0';
}

/* one: a family of one sample without labels. */
static void one(FILE *f, const char *name, const char *type, const char *help, uint64_t v)
{
	family(f, name, type, help);
	sample(f, name, NULL, v);
}

static void server_metrics(FILE *f, const struct fp_server *s)
{
	struct fp_server_stats st;

	fp_server_stats(s, &st);
	one(f, "sessions", "gauge", "Agent sessions held.", st.sv_sessions);
	one(f, "messages_total", "counter", "Messages received from agents.", st.sv_messages);
	one(f, "received_bytes_total", "counter", "Bytes of messages received from agents.",
	    st.sv_bytes);
	one(f, "hellos_total", "counter", "Hellos accepted (sessions opened).", st.sv_hellos);
	one(f, "batches_total", "counter", "Batches accepted (one per interval).", st.sv_batches);
	one(f, "kallsyms_messages_total", "counter", "Kernel symbol messages accepted.",
	    st.sv_ksyms);
	one(f, "kallsyms_dropped_total", "counter",
	    "Kernel symbol messages asked of several agents, taken after one was stored.",
	    st.sv_ksyms_dropped);
	one(f, "samples_total", "counter", "Samples in accepted batches.", st.sv_samples);
	one(f, "duplicate_batches_total", "counter",
	    "Batches sent again after a lost reply, accepted once.", st.sv_duplicates);
	one(f, "unknown_session_batches_total", "counter",
	    "Batches of sessions this symbolizer does not hold; the agent is asked for a hello.",
	    st.sv_need_hello);
	family(f, "rejected_total", "counter", "Messages rejected, by reason.");
	sample(f, "rejected_total", "reason=\"malformed\"", st.sv_rejected_malformed);
	sample(f, "rejected_total", "reason=\"version\"", st.sv_rejected_version);
	sample(f, "rejected_total", "reason=\"type\"", st.sv_rejected_type);
	sample(f, "rejected_total", "reason=\"content\"", st.sv_rejected_content);
	sample(f, "rejected_total", "reason=\"new_session_rate\"", st.sv_rejected_new_sessions);
	sample(f, "rejected_total", "reason=\"sessions_full\"", st.sv_rejected_sessions_full);
	sample(f, "rejected_total", "reason=\"kallsyms_unasked\"", st.sv_rejected_unasked);
	sample(f, "rejected_total", "reason=\"future_interval\"", st.sv_rejected_clock);
	sample(f, "rejected_total", "reason=\"host_mismatch\"", st.sv_rejected_host);
	one(f, "session_busy_total", "counter",
	    "Messages not answered: their session was busy with another batch (a resend).",
	    st.sv_busy);
	one(f, "session_limit_restarts_total", "counter",
	    "Sessions started over for a per-session limit (mappings, threads, nodes, bytes).",
	    st.sv_session_limits);
	one(f, "device_fetches", "gauge", "Symbol fetches from devices running now.",
	    st.sv_fetch_active);
	family(f, "device_fetches_started_total", "counter",
	       "Fetches from devices started, by what they ask for: a file's symbols (and "
	       "CFI), or only its CFI.");
	sample(f, "device_fetches_started_total", "what=\"symbols\"",
	       st.sv_fetch_started - st.sv_fetch_cfi_started);
	sample(f, "device_fetches_started_total", "what=\"cfi\"", st.sv_fetch_cfi_started);
	one(f, "device_fetches_expired_total", "counter",
	    "Symbol fetches from devices ended for want of an answer.", st.sv_fetch_expired);
	one(f, "device_fetches_deferred_total", "counter",
	    "Symbol fetches from devices put off for a bound (at once, per session, per reply).",
	    st.sv_fetch_deferred);
	one(f, "device_fetches_retried_total", "counter",
	    "Symbol fetches from devices started again after another device's failure.",
	    st.sv_fetch_retried);
	one(f, "device_fetches_given_up_total", "counter",
	    "Build-IDs no device is asked for any more: failed too often, or on too many hosts.",
	    st.sv_fetch_given_up);
	one(f, "agent_lost_samples", "gauge",
	    "Samples the agents report lost, the sum of their latest totals.",
	    st.sv_agent_lost_samples);
	one(f, "profiles_total", "counter", "Interval profiles made.", st.sv_profiles);
	one(f, "write_errors_total", "counter", "Profiles that could not be written to files.",
	    st.sv_write_errors);
	one(f, "device_file_parts_total", "counter", "File parts received from devices.",
	    st.sv_file_parts);
	one(f, "unwind_table_sent_bytes_total", "counter", "Unwind table bytes sent to agents.",
	    st.sv_table_bytes);
	one(f, "unwind_tables_held_total", "counter",
	    "Unwind tables not sent: the agent's hello said it held them.", st.sv_tables_held);
	one(f, "unwind_table_held_bytes_total", "counter",
	    "Bytes of the unwind tables not sent: the agent's hello said it held them.",
	    st.sv_table_held_bytes);
	one(f, "unwind_table_memory_bytes", "gauge",
	    "Bytes of unwind tables kept in memory, shared by the sessions that send them.",
	    st.sv_table_mem_bytes);
	one(f, "pipeline_queue", "gauge", "Interval profiles waiting for their sinks.",
	    st.sv_pipeline_queue);
	one(f, "pipeline_queued_bytes", "gauge",
	    "Bytes of heap the interval profiles waiting for their sinks hold.",
	    st.sv_pipeline_bytes);
	one(f, "pipeline_busy_total", "counter",
	    "Batches not taken because the pipeline was busy (agents send them again).",
	    st.sv_pipeline_busy);
	one(f, "pipeline_trims_total", "counter",
	    "Backlogs of the pipeline drained, their memory given back.", st.sv_pipeline_trims);
	one(f, "pipeline_dropped_total", "counter",
	    "Interval profiles dropped because the pipeline's queue was full.",
	    st.sv_pipeline_dropped);
	one(f, "symbol_waits_total", "counter",
	    "Interval profiles held back for symbols of a new build-ID.", st.sv_symbol_waits);
	one(f, "symbol_wait_timeouts_total", "counter",
	    "Interval profiles whose symbols did not come within --symbol-wait.",
	    st.sv_symbol_wait_timeouts);
	one(f, "symbol_jobs_queue", "gauge",
	    "Symbol jobs (ingest, look-ups, fetched files) waiting.", st.sv_ingest_queue);
	one(f, "symbol_jobs_running", "gauge", "Symbol jobs running in the workers.",
	    st.sv_ingest_running);
	one(f, "symbol_jobs_queue_full_total", "counter",
	    "Symbol jobs dropped because the queue was full (asked again later).",
	    st.sv_ingest_queue_full);
	one(f, "symbol_jobs_total", "counter", "Symbol jobs done.", st.sv_ingest_jobs);
	one(f, "symbol_jobs_seconds_total", "counter", "Wall time of the symbol jobs done.",
	    st.sv_ingest_ms / 1000);
}

static void upstream_metrics(FILE *f, struct fp_debuginfod *d)
{
	struct fp_debuginfod_stats st;

	fp_debuginfod_stats(d, &st);
	family(f, "debuginfod_fetches_total", "counter",
	       "Build-IDs asked of the --debuginfod servers, by result.");
	sample(f, "debuginfod_fetches_total", "result=\"fetched\"", st.ds_fetched);
	sample(f, "debuginfod_fetches_total", "result=\"missing\"", st.ds_missed);
	sample(f, "debuginfod_fetches_total", "result=\"failed\"", st.ds_failed);
}

static void listen_metrics(FILE *f, struct fp_listener *l)
{
	struct fp_listen_stats st;

	fp_listen_stats(l, &st);
	one(f, "connections", "gauge", "Agents' connections open.", st.ls_connections);
	one(f, "connections_total", "counter", "Agents' connections accepted.", st.ls_accepted);
	family(f, "connections_refused_total", "counter",
	       "Agents' connections refused before any message, by reason.");
	sample(f, "connections_refused_total", "reason=\"tls_auth\"", st.ls_refused_auth);
	sample(f, "connections_refused_total", "reason=\"protocol\"", st.ls_refused_proto);
	sample(f, "connections_refused_total", "reason=\"too_many\"", st.ls_refused);
	one(f, "connections_idle_closed_total", "counter",
	    "Connections closed after --idle-timeout without a complete message.",
	    st.ls_idle_closed);
	one(f, "requests_slow_total", "counter",
	    "Agents' requests whose reply took the server over 1 s to build.", st.ls_slow);
	family(f, "request_slowest_seconds", "gauge",
	       "The longest time the server took to build a reply, since it started.");
	fprintf(f, PREFIX "request_slowest_seconds %.6f\n", (double)st.ls_slowest_us / 1e6);
}

static void resolver_metrics(FILE *f, const struct fp_resolver *r)
{
	struct fp_resolver_stats st;
	char source[64];
	int i;

	fp_resolver_stats(r, &st);
	family(f, "symbol_hits_total", "counter",
	       "Symbol tables found, by source (a look-up's first use of a build-ID).");
	for (i = 0; i < FP_SOURCE_COUNT; i++) {
		label(source, sizeof(source), "source", fp_symbol_source_name(i));
		sample(f, "symbol_hits_total", source, st.rs_hits[i]);
	}
	family(f, "symbol_misses_total", "counter",
	       "Symbol tables looked for and not found, by source.");
	for (i = 0; i < FP_SOURCE_COUNT; i++) {
		label(source, sizeof(source), "source", fp_symbol_source_name(i));
		sample(f, "symbol_misses_total", source, st.rs_misses[i]);
	}
	one(f, "symbol_known_missing_total", "counter",
	    "Look-ups of build-IDs no source had before, not searched again.", st.rs_known_missing);
	family(f, "symbol_ingest_seconds", "summary",
	       "Time searching the sources past the cache and building tables.");
	fprintf(f, PREFIX "symbol_ingest_seconds_sum %.6f\n", (double)st.rs_search_ns / 1e9);
	sample(f, "symbol_ingest_seconds_count", NULL, st.rs_searches);
	one(f, "symbol_tables_built_total", "counter", "Symbol tables built from ELF files.",
	    st.rs_ingested);
	one(f, "symbol_ingest_failed_total", "counter",
	    "Build-IDs whose symbols no source could provide.", st.rs_ingest_failed);
	one(f, "kallsyms_stored_total", "counter", "Kernel and module symbol tables stored.",
	    st.rs_ksyms_stored);
	one(f, "unwind_tables_compiled_total", "counter", "Unwind tables compiled and stored.",
	    st.rs_unwind_compiled);
	one(f, "unwind_tables_failed_total", "counter",
	    "Files with call frame information whose unwind table could not be compiled.",
	    st.rs_unwind_failed);
	one(f, "unwind_table_bytes_total", "counter", "Bytes of the unwind tables stored.",
	    st.rs_unwind_bytes);
	family(f, "unwind_tables_missing", "gauge",
	       "Build-IDs with symbols and no unwind table to send, by reason.");
	for (i = FP_UNWIND_WHY_NONE + 1; i < FP_UNWIND_WHY_COUNT; i++) {
		label(source, sizeof(source), "reason", fp_unwind_why_name(i));
		sample(f, "unwind_tables_missing", source, st.rs_no_table[i]);
	}
	family(f, "unwind_tables_missing_total", "counter",
	       "Times a build-ID with symbols came to lack an unwind table, by reason.");
	for (i = FP_UNWIND_WHY_NONE + 1; i < FP_UNWIND_WHY_COUNT; i++) {
		label(source, sizeof(source), "reason", fp_unwind_why_name(i));
		sample(f, "unwind_tables_missing_total", source, st.rs_no_table_total[i]);
	}
	one(f, "symbol_paths_refused_total", "counter",
	    "Reported mapping paths not opened: not a regular file (FIFO, device, symbolic link).",
	    st.rs_paths_refused);
}

static void http_metrics(FILE *f, struct fp_http *h)
{
	struct fp_http_stats st;

	fp_http_stats(h, &st);
	family(f, "http_uploads_total", "counter", "Uploads accepted, by result.");
	sample(f, "http_uploads_total", "result=\"stored\"", st.hs_stored);
	sample(f, "http_uploads_total", "result=\"exists\"", st.hs_exists);
	family(f, "http_rejected_total", "counter", "HTTP requests rejected, by reason.");
	sample(f, "http_rejected_total", "reason=\"unauthorized\"", st.hs_unauthorized);
	sample(f, "http_rejected_total", "reason=\"too_large\"", st.hs_too_large);
	sample(f, "http_rejected_total", "reason=\"bad\"", st.hs_bad);
	one(f, "http_errors_total", "counter", "HTTP requests failed by the server's fault (500).",
	    st.hs_errors);
	one(f, "http_upload_ingest_failed_total", "counter",
	    "Uploads stored whose symbols could not be read.", st.hs_ingest_failed);
	one(f, "http_missing_queries_total", "counter", "/v1/missing requests answered.",
	    st.hs_missing_queries);
	one(f, "http_files_served_total", "counter", "Files sent to debuginfod clients.",
	    st.hs_served);
	one(f, "http_files_not_found_total", "counter", "debuginfod requests for files not stored.",
	    st.hs_not_found);
	one(f, "http_queue_length", "gauge", "HTTP requests waiting for a worker.", st.hs_queued);
}

/* The push families: one sample per destination. */
static const struct push_family {
	const char *pf_name, *pf_type, *pf_help;
	size_t pf_offset;
} push_families[] = {
	{ "push_queued_total", "counter", "Push requests spooled.",
	  offsetof(struct fp_push_stats, ps_queued) },
	{ "push_sent_total", "counter", "Push requests answered 2xx.",
	  offsetof(struct fp_push_stats, ps_pushed) },
	{ "push_retries_total", "counter", "Failed push attempts kept for a retry.",
	  offsetof(struct fp_push_stats, ps_retried) },
	{ "push_dropped_total", "counter",
	  "Push requests dropped from a full spool or not spooled.",
	  offsetof(struct fp_push_stats, ps_dropped) },
	{ "push_damaged_total", "counter", "Damaged spool files deleted.",
	  offsetof(struct fp_push_stats, ps_damaged) },
	{ "push_permanent_failures_total", "counter",
	  "Push requests refused for good (4xx but 408 and 429), deleted.",
	  offsetof(struct fp_push_stats, ps_permanent) },
	{ "push_gave_up_total", "counter",
	  "Push requests dropped after the attempt or age bound of their retries.",
	  offsetof(struct fp_push_stats, ps_gave_up) },
	{ "push_responses_too_large_total", "counter",
	  "Push responses whose body was over the cap, left unread.",
	  offsetof(struct fp_push_stats, ps_too_large) },
	{ "push_partial_successes_total", "counter", "OTLP partial successes.",
	  offsetof(struct fp_push_stats, ps_partial) },
	{ "push_rejected_profiles_total", "counter", "Profiles rejected by partial successes.",
	  offsetof(struct fp_push_stats, ps_rejected) },
	{ "push_encode_errors_total", "counter", "Profiles that could not be encoded.",
	  offsetof(struct fp_push_stats, ps_encode_errors) },
	{ "push_spool_files", "gauge", "Push requests in the spool, waiting to be sent.",
	  offsetof(struct fp_push_stats, ps_spool_files) },
	{ "push_spool_bytes", "gauge", "Bytes of the push requests in the spool.",
	  offsetof(struct fp_push_stats, ps_spool_bytes) },
};

#define MAX_PUSHERS 8

static void push_metrics(FILE *f, struct fp_push *const *pushers)
{
	struct fp_push_stats st[MAX_PUSHERS];
	char labels[MAX_PUSHERS][128];
	size_t n, i, k;

	for (n = 0; n < MAX_PUSHERS && pushers[n]; n++) {
		fp_push_stats(pushers[n], &st[n]);
		label(labels[n], sizeof(labels[n]), "destination", fp_push_name(pushers[n]));
	}
	if (!n)
		return;
	for (k = 0; k < sizeof(push_families) / sizeof(push_families[0]); k++) {
		const struct push_family *pf = &push_families[k];

		family(f, pf->pf_name, pf->pf_type, pf->pf_help);
		for (i = 0; i < n; i++)
			sample(f, pf->pf_name, labels[i],
			       *(const uint64_t *)((const char *)&st[i] + pf->pf_offset));
	}
}

int fp_metrics_render(const struct fp_metrics *m, struct fp_http *h, char **text, size_t *len)
{
	char *buf = NULL;
	size_t n = 0;
	FILE *f = open_memstream(&buf, &n);

	if (!f)
		return -ENOMEM;
	if (m->mt_server)
		server_metrics(f, m->mt_server);
	if (m->mt_listener)
		listen_metrics(f, m->mt_listener);
	if (m->mt_resolver)
		resolver_metrics(f, m->mt_resolver);
	if (m->mt_upstream)
		upstream_metrics(f, m->mt_upstream);
	if (h)
		http_metrics(f, h);
	if (m->mt_pushers)
		push_metrics(f, m->mt_pushers);
	if (ferror(f)) {
		fclose(f);
		free(buf);
		return -ENOMEM;
	}
	if (fclose(f)) {
		free(buf);
		return -ENOMEM;
	}
	*text = buf;
	*len = n;
	return 0;
}

int fp_metrics_http(void *arg, struct fp_http *h, char **text, size_t *len)
{
	return fp_metrics_render(arg, h, text, len);
}
