/* metrics.h: the symbolizer's counters in Prometheus' text exposition
 * format (version 0.0.4), served at GET /metrics by http.h.
 *
 * The text is rendered from the stats structs the modules keep anyway
 * (server.h, listen.h, resolver.h, debuginfod.h, http.h, push.h), each copied
 * through its own
 * thread-safe stats call: this module keeps no counters of its own, and
 * http.c does not depend on it (fp_metrics_http is its fp_http_metrics_fn).
 * docs/metrics.md lists every metric. */
#ifndef FP_METRICS_H
#define FP_METRICS_H

#include <stddef.h>
#include "debuginfod.h"
#include "http.h"
#include "listen.h"
#include "push.h"
#include "resolver.h"
#include "server.h"

/* What is rendered; owned by the caller, alive while the HTTP server runs.
 * NULL members are left out. */
struct fp_metrics {
	const struct fp_server *mt_server;
	struct fp_listener *mt_listener;
	const struct fp_resolver *mt_resolver;
	struct fp_debuginfod *mt_upstream; /* the --debuginfod servers' client */
	struct fp_push *const *mt_pushers; /* NULL-terminated */
};

/* fp_metrics_render: the text of every metric of m, and of h's when h is
 * not NULL, into *text (malloc'd, the caller frees it) and *len.  Any
 * thread.  0 or -ENOMEM. */
int fp_metrics_render(const struct fp_metrics *m, struct fp_http *h, char **text, size_t *len);

/* fp_metrics_http: fp_metrics_render as http.h's fp_http_metrics_fn; arg
 * is a struct fp_metrics. */
int fp_metrics_http(void *arg, struct fp_http *h, char **text, size_t *len);

#endif
