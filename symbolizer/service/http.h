/* http.h: the symbol service's HTTP API (nng's HTTP server), run beside the
 * symbolizer's nng REP loop:
 *
 *   POST /v1/upload[?build_id=HEX][&kind=auto|debuginfo|executable]
 *        body: an ELF file.  Stored in the store and ingested into the
 *        resolver's cache.  Bearer token when one is configured.
 *   POST /v1/missing
 *        body: build-IDs in hex, one a line; answers those that neither the
 *        cache nor the store has, one a line.
 *   GET  /buildid/HEX/debuginfo, GET /buildid/HEX/executable
 *        debuginfod's API: the stored file, for debuginfod-find, gdb, perf.
 *   GET  /metrics
 *        the text ho_metrics renders (metrics.h: Prometheus' text format),
 *        when it is set.
 *
 * Requests are handed from nng's threads to a few worker threads of this
 * module, which do the blocking work (reading bodies to disk, parsing ELF,
 * the cache), so nng's own threads never wait on a disk. */
#ifndef FP_HTTP_H
#define FP_HTTP_H

#include <stdint.h>
#include "resolver.h"
#include "store.h"
#include "tls.h"

#define FP_HTTP_MAX_MISSING 100000 /* build-IDs in one /v1/missing request */

struct fp_http;

/* The text of GET /metrics, rendered on one of this module's worker
 * threads: *text malloc'd (the caller frees it), *len its length.  0 or a
 * negative errno (the client gets 500). */
typedef int (*fp_http_metrics_fn)(void *arg, struct fp_http *h, char **text, size_t *len);

struct fp_http_opts {
	const char *ho_addr;              /* HOST:PORT (http:// or https:// ignored) */
	const char *ho_token;             /* NULL or "": uploads need no token */
	int ho_token_reads;               /* downloads and /v1/missing need it too */
	const struct fp_tls_opts *ho_tls; /* NULL: HTTP; else HTTPS with its
					   * certificate (clients show none) */
	uint64_t ho_max_upload;           /* bytes; larger uploads get 413 */
	struct fp_store *ho_store;
	struct fp_resolver *ho_resolver; /* only its thread-safe calls are used */
	fp_http_metrics_fn ho_metrics;   /* NULL: no /metrics */
	void *ho_metrics_arg;
};

struct fp_http_stats {
	uint64_t hs_stored;          /* uploads accepted and written */
	uint64_t hs_exists;          /* uploads accepted, already stored */
	uint64_t hs_unauthorized;    /* rejected: 401 */
	uint64_t hs_too_large;       /* rejected: 413 */
	uint64_t hs_bad;             /* rejected: 400, 411 (not ELF, no build-ID...) */
	uint64_t hs_errors;          /* 500: the server's fault (disk full...) */
	uint64_t hs_ingest_failed;   /* stored, but its symbols could not be read */
	uint64_t hs_missing_queries; /* /v1/missing requests answered */
	uint64_t hs_served;          /* files sent to debuginfod clients */
	uint64_t hs_not_found;       /* debuginfod requests for files not stored */
	uint64_t hs_queued;          /* now: requests waiting for a worker */
};

/* fp_http_start: listen and serve.  0, or a negative errno (bad address:
 * -EINVAL; cannot listen: -EADDRINUSE or another), logged. */
int fp_http_start(struct fp_http **h, const struct fp_http_opts *o);

/* fp_http_stop: close the listener and every connection, finish the
 * requests in progress, free everything.  NULL is fine. */
void fp_http_stop(struct fp_http *h);

/* fp_http_stats: a copy of the counters; any thread. */
void fp_http_stats(struct fp_http *h, struct fp_http_stats *st);
void fp_http_log_stats(struct fp_http *h);

/* fp_http_addr_loopback: whether a --http address (HOST:PORT) listens on
 * loopback only: localhost, 127.0.0.0/8 or ::1.  Any other, 0.0.0.0 and
 * names included, is beyond loopback. */
int fp_http_addr_loopback(const char *addr);

/* fp_http_token_eq: whether an Authorization header value is "Bearer
 * TOKEN", compared in time that does not depend on where they differ. */
int fp_http_token_eq(const char *header, const char *token);

#endif
