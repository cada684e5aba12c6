/* listen.h: the agents' socket.  An nng REP socket served through a few
 * asynchronous contexts (nng_ctx and nng_aio, one pair per worker): each
 * receives a request, has fp_server_handle build its reply, sends it and
 * receives the next, so that several requests are handled at once and
 * none waits behind another's symbol work (there is none on this path:
 * see server.h).
 *
 * Threads.  The callbacks run on nng's own threads.  A worker's state is
 * its own (one aio runs one step at a time); the only state they share is
 * the server, which locks itself (server.h).
 */
#ifndef FP_LISTEN_H
#define FP_LISTEN_H

#include "server.h"
#include "tls.h"

#define FP_LISTEN_WORKERS_DEFAULT 8
#define FP_LISTEN_WORKERS_MAX 256

struct fp_listener;

/* Connections as nng counts them.  With TLS, a handshake that fails
 * (no client certificate when one is required, one signed by another CA,
 * expired, not yet valid) is refused before any message: "auth". */
struct fp_listen_stats {
	uint64_t ls_accepted;       /* connections that became agents' pipes */
	uint64_t ls_refused_auth;   /* peer authentication failed (TLS) */
	uint64_t ls_refused_proto;  /* not the SP protocol, or not TLS */
	uint64_t ls_refused_other;  /* any other failure of a new connection */
};

/* fp_listen_open: listen on addr (tcp://HOST:PORT, ipc:///PATH, or
 * tls+tcp://HOST:PORT with tls, see tls.h; tls NULL or without a
 * certificate for the others) with nworkers (1-FP_LISTEN_WORKERS_MAX)
 * contexts, serving s.  0, -EINVAL (bad nworkers), -ENOMEM or -EIO (nng
 * refused, or a TLS file or option is wrong: logged with its reason). */
int fp_listen_open(struct fp_listener **l, struct fp_server *s, const char *addr,
		   unsigned nworkers, const struct fp_tls_opts *tls);

/* fp_listen_stats: nng's counters of the listener, any thread. */
void fp_listen_stats(struct fp_listener *l, struct fp_listen_stats *st);
/* fp_listen_log_stats: one log line with them. */
void fp_listen_log_stats(struct fp_listener *l);

/* fp_listen_close: stop every worker (a request being handled ends
 * first), give the last replies 200 ms to leave, then close the socket.
 * NULL: nothing. */
void fp_listen_close(struct fp_listener *l);

#endif
