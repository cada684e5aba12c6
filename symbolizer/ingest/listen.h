/* listen.h: the agents' socket.  An nng REP socket served through a few
 * asynchronous contexts (nng_ctx and nng_aio, one pair per worker): each
 * receives a request, has fp_server_handle build its reply, sends it and
 * receives the next, so that several requests are handled at once and
 * none waits behind another's symbol work (there is none on this path:
 * see server.h).
 *
 * Connections are bounded (fp_listen_limits): at most max_connections at
 * once (a further one is closed as soon as it is made), and one that
 * completed no message for idle_s seconds is closed, so that a peer sending a
 * message slowly, or part of one, pins its buffer (up to
 * FP_WIRE_MAX_MESSAGE) for that long at most.  An agent whose connection
 * was closed dials again when it next sends.
 *
 * Identity.  On tls+tcp:// with a CA, a client's verified certificate
 * names its host: the first DNS name among its subject alternative names,
 * else its common name; each request goes to fp_server_handle with that
 * name as its peer, so that a hello for another host is refused.  With
 * client certificates required, one that names no host proves no host.
 *
 * Threads.  The callbacks run on nng's own threads.  A worker's state is
 * its own (one aio runs one step at a time); the workers, nng's pipe
 * callbacks and the sweeper thread (which closes idle connections once
 * a second) share the connection table under ls_lock; the server locks
 * itself (server.h).
 */
#ifndef FP_LISTEN_H
#define FP_LISTEN_H

#include <stdint.h>
#include "server.h"
#include "tls.h"

#define FP_LISTEN_WORKERS_DEFAULT 8
#define FP_LISTEN_WORKERS_MAX 256
#define FP_LISTEN_CONNECTIONS_DEFAULT 20000
#define FP_LISTEN_CONNECTIONS_MAX 1000000
#define FP_LISTEN_IDLE_DEFAULT_S 120
#define FP_LISTEN_IDLE_MAX_S 86400
/* Connections made and not yet accepted (listen(2)'s backlog; the kernel
 * caps it at net.core.somaxconn): a fleet that reconnects at once. */
#define FP_LISTEN_BACKLOG 4096

/* Connections.  Ours: open now, and closed for a bound.  nng's: with
 * TLS, a handshake that fails (no client certificate when one is
 * required, one signed by another CA, expired, not yet valid) is refused
 * before any message: "auth". */
struct fp_listen_stats {
	uint64_t ls_connections;   /* open now */
	uint64_t ls_refused;       /* closed at once: too many */
	uint64_t ls_idle_closed;   /* closed: no message for idle_s */
	uint64_t ls_accepted;      /* connections that became agents' pipes */
	uint64_t ls_refused_auth;  /* peer authentication failed (TLS) */
	uint64_t ls_refused_proto; /* not the SP protocol, or not TLS */
	uint64_t ls_slowest_us;    /* longest fp_server_handle of a request */
	uint64_t ls_slow;          /* requests that took it over 1 s */
};

struct fp_listener;

/* fp_listen_open: listen on addr (tcp://HOST:PORT, ipc:///PATH, or
 * tls+tcp://HOST:PORT with tls, see tls.h; tls NULL or without a
 * certificate for the others) with nworkers (1-FP_LISTEN_WORKERS_MAX)
 * contexts, serving s, with the default bounds
 * (FP_LISTEN_CONNECTIONS_DEFAULT, FP_LISTEN_IDLE_DEFAULT_S).  0, -EINVAL
 * (bad nworkers or address), -EADDRINUSE, -ENOMEM or -EIO (nng refused
 * otherwise, or a TLS file or option is wrong: logged with its reason);
 * nng's codes as fp_nng_errno maps them. */
int fp_listen_open(struct fp_listener **l, struct fp_server *s, const char *addr, unsigned nworkers,
		   const struct fp_tls_opts *tls);

/* fp_listen_limits: at most max_connections (1-FP_LISTEN_CONNECTIONS_MAX)
 * at once from now on, each closed after idle_s (1-FP_LISTEN_IDLE_MAX_S)
 * seconds without a message.  Connections open stay.  0 or -EINVAL. */
int fp_listen_limits(struct fp_listener *l, uint32_t max_connections, uint32_t idle_s);

/* fp_listen_stats: the connection counters, ours and nng's.  Any thread. */
void fp_listen_stats(struct fp_listener *l, struct fp_listen_stats *st);
/* fp_listen_log_stats: one log line with them. */
void fp_listen_log_stats(struct fp_listener *l);

/* fp_listen_close: stop every worker (a request being handled ends
 * first), give the last replies 200 ms to leave, then close the socket.
 * NULL: nothing. */
void fp_listen_close(struct fp_listener *l);

#endif
