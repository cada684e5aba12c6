/* listen.c: nng REP contexts, one receive-handle-send loop each; the
 * connection table and its sweeper. */
#include "listen.h"
#include "cli.h"
#include "intern.h"
#include "log.h"
#include "nngerr.h"
#include "tls.h"
#include "vec.h"
#include "wire.h"

#include <arpa/inet.h>
#include <dirent.h>
#include <errno.h>
#include <inttypes.h>
#include <netinet/in.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <time.h>
#include <nng/nng.h>
#include <nng/protocol/reqrep0/rep.h>
#include <nng/supplemental/util/platform.h>

enum worker_step { STEP_RECV, STEP_SEND };

struct listen_worker {
	struct fp_listener *lw_listener;
	nng_aio *lw_aio;
	nng_ctx lw_ctx;
	enum worker_step lw_step;
};

/* A connection: when it last completed a message. */
struct listen_conn {
	nng_pipe lc_pipe;
	time_t lc_last;
	uint8_t lc_open;    /* counted in ls_connections */
	uint8_t lc_closing; /* closed by the sweeper */
};

struct fp_listener {
	struct fp_server *ls_server;
	nng_socket ls_sock;
	nng_listener ls_nng;
	struct listen_worker *ls_workers;
	unsigned ls_nworkers;
	/* Hosts are their client certificates': 0 no (no TLS, or no CA),
	 * 1 when a client presents one (optional), 2 always (required). */
	int ls_identity;
	/* Under ls_lock: */
	pthread_mutex_t ls_lock;
	pthread_cond_t ls_cond; /* wakes the sweeper to stop */
	int ls_stopping;
	uint32_t ls_max_connections, ls_idle_s;
	/* Pipe id -> index into ls_conns; entries of closed connections
	 * stay until the table is compacted. */
	struct fp_intern *ls_ids;
	struct listen_conn *ls_conns;
	size_t ls_conns_cap;
	struct fp_listen_stats ls_stats;
	pthread_t ls_sweeper;
	int ls_sweeper_started;
};

/* conn_compact: rebuild the table from the open connections, when the
 * closed ones outnumber them. */
static void conn_compact(struct fp_listener *l)
{
	size_t i, n = fp_intern_count(l->ls_ids);
	uint32_t id, idx;

	if (n < 2 * l->ls_stats.ls_connections + 1024)
		return;
	fp_intern_clear(l->ls_ids);
	for (i = 0; i < n; i++) {
		if (!l->ls_conns[i].lc_open)
			continue;
		id = nng_pipe_id(l->ls_conns[i].lc_pipe);
		if (fp_intern_get(l->ls_ids, &id, sizeof(id), &idx, NULL))
			continue; /* no memory: forgotten, so never closed as idle */
		l->ls_conns[idx] = l->ls_conns[i]; /* idx <= i: in order */
	}
}

/* pipe_cb: count connections, refuse those over the bound. */
static void pipe_cb(nng_pipe p, nng_pipe_ev ev, void *arg)
{
	struct fp_listener *l = arg;
	uint32_t id = nng_pipe_id(p), idx;
	int added, refuse = 0;

	pthread_mutex_lock(&l->ls_lock);
	if (ev == NNG_PIPE_EV_ADD_PRE) {
		conn_compact(l);
		if (l->ls_stats.ls_connections >= l->ls_max_connections) {
			l->ls_stats.ls_refused++;
			refuse = 1;
		} else if (fp_intern_get(l->ls_ids, &id, sizeof(id), &idx, &added) == 0) {
			if (!fp_vec_reserve(&l->ls_conns, &l->ls_conns_cap, (size_t)idx + 1,
					    sizeof(*l->ls_conns)))
				l->ls_conns[idx] = (struct listen_conn){ p, time(NULL), 1, 0 };
			l->ls_stats.ls_connections++;
		} else {
			refuse = 1; /* no memory to track it */
			l->ls_stats.ls_refused++;
		}
	} else if (ev == NNG_PIPE_EV_REM_POST) {
		/* nng 1.x reports the removal of a pipe closed at ADD_PRE
		 * too: only those counted are uncounted. */
		if (fp_intern_find(l->ls_ids, &id, sizeof(id), &idx) == 0 &&
		    idx < l->ls_conns_cap && l->ls_conns[idx].lc_open) {
			l->ls_conns[idx].lc_open = 0;
			l->ls_stats.ls_connections--;
		}
	}
	pthread_mutex_unlock(&l->ls_lock);
	/* No further event for a pipe closed before it was added. */
	if (refuse)
		nng_pipe_close(p);
}

/* conn_seen: a message came in on p. */
static void conn_seen(struct fp_listener *l, nng_pipe p)
{
	uint32_t id = nng_pipe_id(p), idx;

	pthread_mutex_lock(&l->ls_lock);
	if (fp_intern_find(l->ls_ids, &id, sizeof(id), &idx) == 0 && idx < l->ls_conns_cap)
		l->ls_conns[idx].lc_last = time(NULL);
	pthread_mutex_unlock(&l->ls_lock);
}

/* sweeper: once a second, close the connections idle for ls_idle_s.
 * Closed outside the lock: nng calls pipe_cb as it closes them. */
static void *sweeper(void *arg)
{
	struct fp_listener *l = arg;
	nng_pipe idle[256];
	struct timespec until;
	size_t i, n;

	pthread_mutex_lock(&l->ls_lock);
	while (!l->ls_stopping) {
		clock_gettime(CLOCK_REALTIME, &until);
		until.tv_sec++;
		pthread_cond_timedwait(&l->ls_cond, &l->ls_lock, &until);
		if (l->ls_stopping)
			break;
		time_t now = time(NULL);
		for (i = n = 0; i < fp_intern_count(l->ls_ids) && i < l->ls_conns_cap &&
				n < sizeof(idle) / sizeof(idle[0]);
		     i++) {
			struct listen_conn *c = &l->ls_conns[i];
			if (c->lc_open && !c->lc_closing &&
			    now - c->lc_last >= (time_t)l->ls_idle_s) {
				c->lc_closing = 1;
				idle[n++] = c->lc_pipe;
			}
		}
		l->ls_stats.ls_idle_closed += n;
		pthread_mutex_unlock(&l->ls_lock);
		for (i = 0; i < n; i++)
			nng_pipe_close(idle[i]);
		pthread_mutex_lock(&l->ls_lock);
	}
	pthread_mutex_unlock(&l->ls_lock);
	return NULL;
}

int fp_listen_limits(struct fp_listener *l, uint32_t max_connections, uint32_t idle_s)
{
	if (!max_connections || max_connections > FP_LISTEN_CONNECTIONS_MAX || !idle_s ||
	    idle_s > FP_LISTEN_IDLE_MAX_S)
		return -EINVAL;
	pthread_mutex_lock(&l->ls_lock);
	l->ls_max_connections = max_connections;
	l->ls_idle_s = idle_s;
	pthread_mutex_unlock(&l->ls_lock);
	return 0;
}


/* peer_name: the host name p's verified client certificate proves: its
 * first DNS name, else its common name; NULL when it names neither or
 * there is none (client certificates optional, or no TLS).  The caller
 * frees it with nng_strfree. */
static char *peer_name(nng_pipe p)
{
	char *name = NULL;

	if (nng_pipe_get_string(p, NNG_OPT_TLS_PEER_DNS_NAME, &name) &&
	    nng_pipe_get_string(p, NNG_OPT_TLS_PEER_CN, &name))
		return NULL;
	return name;
}

/* reply_to: the reply to req (freed), or NULL when the server could build
 * none (the agent's request times out and is sent again). */
static nng_msg *reply_to(struct fp_listener *l, nng_msg *req)
{
	char *peer = l->ls_identity ? peer_name(nng_msg_get_pipe(req)) : NULL;
	uint64_t start = fp_now_ns(CLOCK_MONOTONIC), us;
	nng_msg *rep = NULL;
	char *buf = NULL;
	size_t len = 0;
	int err;

	/* With client certificates required, one that names no host proves
	 * none ("" matches no hello). */
	err = fp_server_handle(l->ls_server,
			       peer                  ? peer
			       : l->ls_identity == 2 ? ""
						     : NULL,
			       nng_msg_body(req), nng_msg_len(req), &buf, &len);
	/* How long the server took: a reply should never wait for symbol
	 * work, and the minute's log line says if one did. */
	us = (fp_now_ns(CLOCK_MONOTONIC) - start) / 1000;
	pthread_mutex_lock(&l->ls_lock);
	if (us > l->ls_stats.ls_slowest_us)
		l->ls_stats.ls_slowest_us = us;
	if (us > 1000000)
		l->ls_stats.ls_slow++;
	pthread_mutex_unlock(&l->ls_lock);
	if (err == 0 && nng_msg_alloc(&rep, 0) == 0 && nng_msg_append(rep, buf, len) != 0) {
		nng_msg_free(rep);
		rep = NULL;
	}
	free(buf);
	nng_strfree(peer);
	nng_msg_free(req);
	return rep;
}

/* worker_cb: one step done; start the next.  nng runs one callback of an
 * aio at a time, so the worker needs no lock. */
static void worker_cb(void *arg)
{
	struct listen_worker *w = arg;
	int rv = nng_aio_result(w->lw_aio);
	nng_msg *rep;

	if (w->lw_step == STEP_SEND && rv != 0)
		nng_msg_free(nng_aio_get_msg(w->lw_aio)); /* not sent: still ours */
	if (rv == NNG_ECLOSED || rv == NNG_ECANCELED)
		return; /* closing */
	if (w->lw_step == STEP_RECV && rv == 0) {
		conn_seen(w->lw_listener, nng_msg_get_pipe(nng_aio_get_msg(w->lw_aio)));
		rep = reply_to(w->lw_listener, nng_aio_get_msg(w->lw_aio));
		if (rep) {
			nng_aio_set_msg(w->lw_aio, rep);
			w->lw_step = STEP_SEND;
			nng_ctx_send(w->lw_ctx, w->lw_aio);
			return;
		}
	} else if (w->lw_step == STEP_RECV && rv != NNG_ETIMEDOUT) {
		fp_warnx("receive: %s", nng_strerror(rv));
	}
	w->lw_step = STEP_RECV;
	nng_ctx_recv(w->lw_ctx, w->lw_aio);
}

/* same_tcp_address: whether the bound socket address ss is nng's sa. */
static int same_tcp_address(const struct sockaddr_storage *ss, const nng_sockaddr *sa)
{
	if (ss->ss_family == AF_INET && sa->s_family == NNG_AF_INET) {
		const struct sockaddr_in *in = (const struct sockaddr_in *)ss;
		return in->sin_port == sa->s_in.sa_port && in->sin_addr.s_addr == sa->s_in.sa_addr;
	}
	if (ss->ss_family == AF_INET6 && sa->s_family == NNG_AF_INET6) {
		const struct sockaddr_in6 *in6 = (const struct sockaddr_in6 *)ss;
		return in6->sin6_port == sa->s_in6.sa_port &&
		       !memcmp(&in6->sin6_addr, sa->s_in6.sa_addr, 16);
	}
	return 0;
}

/* listen_backlog: nng 1.5.2 listens with a backlog of 128 connections
 * not yet accepted, which a fleet reconnecting at once (a symbolizer
 * restart, agents started together) overflows: the kernel then drops
 * the connections' handshakes, and each waits for its SYN to be sent
 * again, 1 s later, then 3 s.  Linux lets listen() on a listening socket
 * change its backlog; nng does not hand out the socket, so it is found
 * by its address among ours.  The kernel caps it at net.core.somaxconn.
 * 0, or -ENOENT (not TCP, or not found). */
static int listen_backlog(struct fp_listener *l, int backlog)
{
	struct sockaddr_storage ss;
	struct dirent *e;
	nng_sockaddr sa;
	socklen_t len;
	int fd, on, err = -ENOENT;
	DIR *d;

	if (nng_listener_get_addr(l->ls_nng, NNG_OPT_LOCADDR, &sa) ||
	    (sa.s_family != NNG_AF_INET && sa.s_family != NNG_AF_INET6) ||
	    !(d = opendir("/proc/self/fd")))
		return -ENOENT;
	while (err && (e = readdir(d))) {
		if (sscanf(e->d_name, "%d", &fd) != 1 || fd == dirfd(d))
			continue;
		len = sizeof(on);
		if (getsockopt(fd, SOL_SOCKET, SO_ACCEPTCONN, &on, &len) || !on)
			continue;
		len = sizeof(ss);
		if (getsockname(fd, (struct sockaddr *)&ss, &len) || !same_tcp_address(&ss, &sa))
			continue;
		err = listen(fd, backlog) ? -errno : 0;
	}
	closedir(d);
	return err;
}

/* listener_create: nng's listener on addr, with TLS from tls for
 * tls+tcp:// (and only then). */
static int listener_create(struct fp_listener *l, const char *addr, const struct fp_tls_opts *tls)
{
	int is_tls = !strncmp(addr, "tls+", 4);
	nng_tls_config *cfg = NULL;
	int rv;

	if (is_tls != (tls && fp_tls_enabled(tls))) {
		fp_warnx("cannot listen on %s: %s", addr,
			 is_tls ? "a tls+tcp:// address needs --tls-cert and --tls-key"
				: "the --tls-* options need a tls+tcp:// address");
		return NNG_EINVAL;
	}
	if ((rv = nng_listener_create(&l->ls_nng, l->ls_sock, addr))) {
		fp_warnx("cannot listen on %s: %s", addr, nng_strerror(rv));
		return rv;
	}
	if (is_tls) {
		if (fp_tls_server_config(&cfg, tls, addr))
			return NNG_EINVAL;
		rv = nng_listener_set_ptr(l->ls_nng, NNG_OPT_TLS_CONFIG, cfg);
		nng_tls_config_free(cfg);
		l->ls_identity = !tls->to_ca ? 0 : tls->to_require_client ? 2 : 1;
	}
	if (rv || (rv = nng_listener_start(l->ls_nng, 0))) {
		fp_warnx("cannot listen on %s: %s", addr, nng_strerror(rv));
		return rv;
	}
	if (listen_backlog(l, FP_LISTEN_BACKLOG) == -ENOENT && strncmp(addr, "ipc://", 6))
		fp_warnx("%s: could not raise the listen backlog to %d: connections made at "
			 "once beyond 128 wait for their handshake again",
			 addr, FP_LISTEN_BACKLOG);
	return 0;
}

int fp_listen_open(struct fp_listener **out, struct fp_server *s, const char *addr,
		   unsigned nworkers, const struct fp_tls_opts *tls)
{
	struct fp_listener *l;
	unsigned i;
	int rv;

	if (!nworkers || nworkers > FP_LISTEN_WORKERS_MAX)
		return -EINVAL;
	if (!(l = calloc(1, sizeof(*l))) ||
	    !(l->ls_workers = calloc(nworkers, sizeof(*l->ls_workers))) ||
	    fp_intern_alloc(&l->ls_ids)) {
		if (l)
			free(l->ls_workers);
		free(l);
		return -ENOMEM;
	}
	l->ls_server = s;
	l->ls_max_connections = FP_LISTEN_CONNECTIONS_DEFAULT;
	l->ls_idle_s = FP_LISTEN_IDLE_DEFAULT_S;
	pthread_mutex_init(&l->ls_lock, NULL);
	pthread_cond_init(&l->ls_cond, NULL);
	if ((rv = nng_rep0_open(&l->ls_sock)) != 0) {
		fp_warnx("nng: %s", nng_strerror(rv));
		fp_intern_free(l->ls_ids);
		free(l->ls_workers);
		free(l);
		return -EIO;
	}
	nng_socket_set_size(l->ls_sock, NNG_OPT_RECVMAXSZ, FP_WIRE_MAX_MESSAGE);
	if ((rv = nng_pipe_notify(l->ls_sock, NNG_PIPE_EV_ADD_PRE, pipe_cb, l)) != 0 ||
	    (rv = nng_pipe_notify(l->ls_sock, NNG_PIPE_EV_REM_POST, pipe_cb, l)) != 0)
		goto fail;
	if (pthread_create(&l->ls_sweeper, NULL, sweeper, l)) {
		rv = NNG_ENOMEM;
		goto fail;
	}
	l->ls_sweeper_started = 1;
	for (i = 0; i < nworkers; i++) {
		struct listen_worker *w = &l->ls_workers[i];

		w->lw_listener = l;
		if ((rv = nng_aio_alloc(&w->lw_aio, worker_cb, w)) != 0)
			goto fail;
		if ((rv = nng_ctx_open(&w->lw_ctx, l->ls_sock)) != 0) {
			nng_aio_free(w->lw_aio);
			w->lw_aio = NULL;
			goto fail;
		}
		l->ls_nworkers++;
	}
	if ((rv = listener_create(l, addr, tls)) != 0)
		goto fail_logged;
	for (i = 0; i < l->ls_nworkers; i++) {
		l->ls_workers[i].lw_step = STEP_RECV;
		nng_ctx_recv(l->ls_workers[i].lw_ctx, l->ls_workers[i].lw_aio);
	}
	*out = l;
	return 0;
fail:
	fp_warnx("nng: %s", nng_strerror(rv));
fail_logged:
	fp_listen_close(l);
	return fp_nng_errno(rv);
}

/* listener_stat: one counter of nng's statistics of a listener; 0
 * without. */
static uint64_t listener_stat(nng_stat *listener, const char *name)
{
	nng_stat *st = listener ? nng_stat_find(listener, name) : NULL;

	return st ? nng_stat_value(st) : 0;
}

void fp_listen_stats(struct fp_listener *l, struct fp_listen_stats *st)
{
	nng_stat *all = NULL, *ls;

	pthread_mutex_lock(&l->ls_lock);
	*st = l->ls_stats;
	pthread_mutex_unlock(&l->ls_lock);
	if (nng_stats_get(&all))
		return;
	ls = nng_stat_find_listener(all, l->ls_nng);
	st->ls_accepted = listener_stat(ls, "accept");
	st->ls_refused_auth = listener_stat(ls, "auth");
	st->ls_refused_proto = listener_stat(ls, "proto");
	/* Not nng's "other": it also counts every accepted connection that
	 * the peer later closes, so it is no count of refusals. */
	nng_stats_free(all);
}

void fp_listen_log_stats(struct fp_listener *l)
{
	struct fp_listen_stats st;

	fp_listen_stats(l, &st);
	fp_info("connections: open %" PRIu64 ", accepted %" PRIu64
		"; refused: TLS authentication %" PRIu64 ", protocol %" PRIu64 ", too many %" PRIu64
		"; closed idle %" PRIu64 "; slowest request %" PRIu64 ".%03" PRIu64 " ms, %" PRIu64
		" over 1 s",
		st.ls_connections, st.ls_accepted, st.ls_refused_auth, st.ls_refused_proto,
		st.ls_refused, st.ls_idle_closed, st.ls_slowest_us / 1000, st.ls_slowest_us % 1000,
		st.ls_slow);
}

void fp_listen_close(struct fp_listener *l)
{
	unsigned i;

	if (!l)
		return;
	/* Stopped first: a callback running now ends, and none starts; a
	 * request that arrives now stays unanswered, and its agent keeps the
	 * interval for the next symbolizer. */
	for (i = 0; i < l->ls_nworkers; i++)
		nng_aio_stop(l->ls_workers[i].lw_aio);
	if (l->ls_sweeper_started) {
		pthread_mutex_lock(&l->ls_lock);
		l->ls_stopping = 1;
		pthread_cond_signal(&l->ls_cond);
		pthread_mutex_unlock(&l->ls_lock);
		pthread_join(l->ls_sweeper, NULL);
	}
	nng_msleep(200); /* the last replies leave before the socket closes */
	for (i = 0; i < l->ls_nworkers; i++) {
		nng_ctx_close(l->ls_workers[i].lw_ctx);
		nng_aio_free(l->ls_workers[i].lw_aio);
	}
	nng_close(l->ls_sock); /* its pipe callbacks end here */
	fp_intern_free(l->ls_ids);
	free(l->ls_conns);
	pthread_cond_destroy(&l->ls_cond);
	pthread_mutex_destroy(&l->ls_lock);
	free(l->ls_workers);
	free(l);
}
