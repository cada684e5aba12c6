/* httpc.h: the HTTP client of the pushers (symbolizer/sinks/push.c) and
 * of `fleetprof upload`: nng's HTTP client for one base URL, with TLS
 * that checks the server's certificate and host name for https://, and
 * a request/response exchange that reads a response body only up to a
 * bound the caller sets (nng's own transact reads whatever length the
 * server declares).
 *
 * A client is used by one thread at a time (it has one aio); only
 * fp_httpc_cancel may be called from another.  Functions return 0 or an
 * nng error (for nng_strerror), as the callers report nng's words. */
#ifndef FP_HTTPC_H
#define FP_HTTPC_H

#include "tls.h"

#include <stddef.h>
#include <stdint.h>
#include <nng/nng.h>
#include <nng/supplemental/http/http.h>

struct fp_httpc;

/* fp_httpc_open: a client for url (http:// or https://).  For https the
 * server's certificate is checked against tls->to_ca (the system's CAs
 * when NULL) and the URL's host name; who names the caller in the
 * messages about TLS files.  0, NNG_EINVAL (TLS set-up, logged) or
 * another nng error (bad URL, out of memory). */
int fp_httpc_open(struct fp_httpc **out, const char *url, const struct fp_tls_opts *tls,
		  const char *who);
/* fp_httpc_close: NULL is fine. */
void fp_httpc_close(struct fp_httpc *c);

/* fp_httpc_url: the parsed base URL (valid until fp_httpc_close). */
const nng_url *fp_httpc_url(const struct fp_httpc *c);

/* fp_httpc_connect: a new connection, within timeout_ms; the caller
 * closes it (nng_http_conn_close). */
int fp_httpc_connect(struct fp_httpc *c, uint64_t timeout_ms, nng_http_conn **conn);

/* fp_httpc_transact: req on a connection of its own, closed after, all
 * within timeout_ms.  The response's head goes into res, and its body
 * too when it has a Content-Length of at most body_max; a longer one is
 * left unread (*too_large, when not NULL, set to its length; else it is
 * left alone), and so is a chunked one.  *reached (may be NULL) is set once connected: a
 * failure after that reached the server.  NNG_EPROTO: a Content-Length
 * that is not a plain decimal. */
int fp_httpc_transact(struct fp_httpc *c, nng_http_req *req, nng_http_res *res, uint64_t timeout_ms,
		      size_t body_max, int *reached, int64_t *too_large);

/* fp_httpc_cancel: end the operation in progress (any thread). */
void fp_httpc_cancel(struct fp_httpc *c);

#endif
