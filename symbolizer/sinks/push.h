/* push.h: sending every profile the symbolizer writes to a profiling
 * backend over HTTP, through an on-disk spool (spool.h), one pusher thread
 * per destination.
 *
 * Formats:
 * - FP_PUSH_OTLP: POST BASE/v1development/profiles, Content-Type
 *   application/x-protobuf, the ExportProfilesServiceRequest of otlp.h (host
 *   and static labels of the agent's hello as resource attributes).  An
 *   OpenTelemetry Collector, Grafana Pyroscope, or any OTLP/HTTP receiver.
 * - FP_PUSH_PPROF: Pyroscope's POST BASE/ingest?name=SERVICE{host_name=HOST,
 *   LABEL=VALUE,...}&from=S&until=S&format=pprof&sampleRate=HZ&spyName=fleetprof,
 *   body the pprof of output.h.  pprof has no resource, so a profile becomes
 *   one request per service (container, else process: otlp.h's service.name),
 *   each with that service's samples.  Names and labels are reduced to the
 *   characters Pyroscope's parser takes.
 * gzip (zlib) when asked: Content-Encoding: gzip for OTLP, a gzip'd pprof
 * body for /ingest.
 *
 * Delivery: fp_push_profile encodes in the caller's thread and writes one
 * spool file per request; the pusher sends them oldest first.  A connection
 * error, a timeout, 408, 429 or 5xx is retried, the file kept, after 1 s,
 * then doubling up to 60 s, with jitter (Retry-After, when longer, is
 * honoured up to the maximum).  A request is dropped and counted
 * (ps_gave_up) when it fails after po_max_attempts attempts the
 * destination answered (failures to connect do not count: that outage is
 * what the spool is for), or when it fails and was spooled more than
 * po_max_age_s ago.  Any other answer outside 2xx is a permanent
 * failure: logged with the response body, counted, the file deleted.
 * A response body is read only when its Content-Length is at most
 * FP_PUSH_RESPONSE_MAX (a longer one is counted, ps_too_large, and its status
 * still decides; a chunked one is not read).  An
 * OTLP partial success (ExportProfilesServiceResponse.partial_success) is
 * logged and its rejected profiles counted, never retried.  Headers given
 * with --push-header are added at send time and never written to the spool.
 */
#ifndef FP_PUSH_H
#define FP_PUSH_H

#include <stddef.h>
#include <stdint.h>
#include "batch.h"
#include "profile.h"

enum fp_push_format {
	FP_PUSH_OTLP = 0,
	FP_PUSH_PPROF = 1,
};

#define FP_PUSH_MAX_HEADERS 32
#define FP_PUSH_MAX_ATTEMPTS 10         /* default of po_max_attempts */
#define FP_PUSH_MAX_AGE_S (24 * 3600)   /* default of po_max_age_s */
#define FP_PUSH_RESPONSE_MAX (1u << 20) /* bytes of a response body read, at most */

struct fp_push_opts {
	const char *po_name; /* for logs: "otlp", "pyroscope" */
	const char *po_url;  /* base URL, http://HOST[:PORT][/PREFIX] or https:// */
	int po_format;       /* enum fp_push_format */
	int po_gzip;
	const char *const *po_headers; /* "Name: value", valid by fp_push_header_check */
	size_t po_nheaders;
	const char *po_spool_dir;   /* the spool root: this destination uses ROOT/NAME */
	uint64_t po_spool_max;      /* bytes */
	uint32_t po_backoff_min_ms; /* 0: 1000 */
	uint32_t po_backoff_max_ms; /* 0: 60000 */
	uint32_t po_timeout_ms;     /* per request; 0: 20000 */
	uint32_t po_max_attempts;   /* 0: FP_PUSH_MAX_ATTEMPTS */
	uint32_t po_max_age_s;      /* 0: FP_PUSH_MAX_AGE_S */
};

struct fp_push_stats {
	uint64_t ps_queued;    /* requests spooled */
	uint64_t ps_pushed;    /* answered 2xx */
	uint64_t ps_retried;   /* failed attempts, kept for a retry */
	uint64_t ps_dropped;   /* oldest dropped from a full spool, or not spooled */
	uint64_t ps_damaged;   /* spool files found damaged, deleted */
	uint64_t ps_permanent; /* refused for good (4xx but 408/429), deleted */
	uint64_t ps_gave_up;   /* dropped after the attempt or age bound */
	uint64_t ps_too_large; /* responses whose body was over the cap, not read */
	uint64_t ps_partial;   /* OTLP partial successes */
	uint64_t ps_rejected;  /* profiles those rejected */
	uint64_t ps_encode_errors;
	uint64_t ps_spool_files, ps_spool_bytes; /* now */
};

struct fp_push;

/* fp_push_url_check: whether url is an http:// or https:// URL nng can
 * use.  0 or -EINVAL. */
int fp_push_url_check(const char *url);

/* fp_push_header_check: whether h is "Name: value" with a token as name,
 * no CR, LF or other control character in the value, and a name fleetprof
 * does not set itself (Host, Content-Length, Content-Type, Content-Encoding,
 * Transfer-Encoding, Connection).  0, or -EINVAL with *why set. */
int fp_push_header_check(const char *h, const char **why);

/* fp_push_start: open the spool (what an earlier run left is sent first)
 * and start the pusher thread.  0 or a negative errno (logged). */
int fp_push_start(struct fp_push **p, const struct fp_push_opts *o);

/* fp_push_profile: encode prof for this destination and spool it.  hello
 * (may be NULL) gives the host and static labels.  0 or a negative errno;
 * failures are counted and logged. */
int fp_push_profile(struct fp_push *p, const struct fp_profile *prof, const struct fp_hello *hello);

/* fp_push_sink: a pipeline sink (pipeline.h, fp_sink_fn); arg is a
 * NULL-terminated array of struct fp_push *.  Always 0: what cannot be
 * sent is counted by each pusher. */
int fp_push_sink(void *arg, const struct fp_profile *prof, const struct fp_hello *hello,
		 uint64_t seq);

/* fp_push_stop: stop taking profiles, send what the spool holds for at most
 * flush_ms (stopping at the first failure), log the counters and free.
 * What is left stays in the spool for the next start.  NULL is a no-op. */
void fp_push_stop(struct fp_push *p, uint32_t flush_ms);
/* fp_push_stop_all: the same for a NULL-terminated array, all flushing at
 * once; the entries are set to NULL. */
void fp_push_stop_all(struct fp_push **pushers, uint32_t flush_ms);

/* fp_push_stats: a copy of the counters; any thread. */
void fp_push_stats(struct fp_push *p, struct fp_push_stats *st);
/* fp_push_name: po_name, as given to fp_push_start. */
const char *fp_push_name(const struct fp_push *p);
/* fp_push_log_stats: one line with the counters.  The pusher also logs it
 * by itself every minute when something changed. */
void fp_push_log_stats(struct fp_push *p);

/* ---- fleetprof-symbolizer's flags ---- */

enum {
	FP_PUSH_OPT_PYROSCOPE = 0x7000,
	FP_PUSH_OPT_PYROSCOPE_FORMAT,
	FP_PUSH_OPT_OTLP_ENDPOINT,
	FP_PUSH_OPT_GZIP,
	FP_PUSH_OPT_HEADER,
	FP_PUSH_OPT_SPOOL,
	FP_PUSH_OPT_SPOOL_MAX,
	FP_PUSH_OPT_HEADER_FILE,
	FP_PUSH_OPT_MAX_ATTEMPTS,
	FP_PUSH_OPT_MAX_AGE,
};

/* Entries of a struct option array (getopt.h). */
#define FP_PUSH_LONGOPTS \
	{ "pyroscope", required_argument, NULL, FP_PUSH_OPT_PYROSCOPE }, \
		{ "pyroscope-format", required_argument, NULL, FP_PUSH_OPT_PYROSCOPE_FORMAT }, \
		{ "otlp-endpoint", required_argument, NULL, FP_PUSH_OPT_OTLP_ENDPOINT }, \
		{ "push-gzip", no_argument, NULL, FP_PUSH_OPT_GZIP }, \
		{ "push-header", required_argument, NULL, FP_PUSH_OPT_HEADER }, \
		{ "spool", required_argument, NULL, FP_PUSH_OPT_SPOOL }, \
		{ "spool-max", required_argument, NULL, FP_PUSH_OPT_SPOOL_MAX }, \
		{ "push-header-file", required_argument, NULL, FP_PUSH_OPT_HEADER_FILE }, \
		{ "push-max-attempts", required_argument, NULL, FP_PUSH_OPT_MAX_ATTEMPTS }, \
	{ \
		"push-max-age", required_argument, NULL, FP_PUSH_OPT_MAX_AGE \
	}

#define FP_PUSH_FLUSH_MS 2000 /* what SIGTERM leaves to flushing */

struct fp_push_cli {
	const char *pc_pyroscope, *pc_otlp;
	int pc_pyroscope_pprof, pc_gzip;
	const char *pc_headers[FP_PUSH_MAX_HEADERS];
	size_t pc_nheaders;
	const char *pc_spool;       /* NULL: CACHE/spool */
	uint32_t pc_spool_max_mb;   /* 0: 256 */
	const char *pc_header_file; /* more headers, read at fp_push_cli_start */
	uint32_t pc_max_attempts;   /* 0: FP_PUSH_MAX_ATTEMPTS */
	uint32_t pc_max_age_s;      /* 0: FP_PUSH_MAX_AGE_S */
};

/* fp_push_cli_option: one result of getopt_long.  1: a push flag, taken;
 * 0: not one; -1: an invalid value, said on stderr (exit 2). */
int fp_push_cli_option(struct fp_push_cli *c, int opt, const char *arg);

/* fp_push_header_file: the headers of file `path`, one 'Name: value' a
 * line as fp_push_header_check takes them (blank lines and lines starting
 * with '#' skipped, a CR before the LF dropped), appended to
 * headers[*n..FP_PUSH_MAX_HEADERS) as malloc'd strings the caller frees.
 * Warns when others may read the file.  A bad line is reported by its
 * number, never its text (it may hold a credential).  0, -EINVAL (a bad
 * line, too many headers, larger than 64 KiB, not a regular file) or
 * another negative errno; all logged, nothing appended on failure. */
int fp_push_header_file(const char *path, char **headers, size_t *n);

/* fp_push_cli_start: start the pushers the flags ask for (none, one or
 * two) into pushers[0..], NULL-terminated (room for 3).  0 or a negative
 * errno (logged). */
int fp_push_cli_start(const struct fp_push_cli *c, const char *cache_dir, struct fp_push **pushers);

#endif
