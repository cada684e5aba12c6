/* listen.c: nng REP contexts, one receive-handle-send loop each. */
#include "listen.h"
#include "log.h"
#include "tls.h"
#include "wire.h"

#include <errno.h>
#include <inttypes.h>
#include <stdlib.h>
#include <string.h>
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

struct fp_listener {
	struct fp_server *ls_server;
	nng_socket ls_sock;
	nng_listener ls_nng;
	struct listen_worker *ls_workers;
	unsigned ls_nworkers;
};

/* reply_to: the reply to req (freed), or NULL when the server could build
 * none (the agent's request times out and is sent again). */
static nng_msg *reply_to(struct fp_server *s, nng_msg *req)
{
	nng_msg *rep = NULL;
	char *buf = NULL;
	size_t len = 0;

	if (fp_server_handle(s, nng_msg_body(req), nng_msg_len(req), &buf, &len) == 0 &&
	    nng_msg_alloc(&rep, 0) == 0 && nng_msg_append(rep, buf, len) != 0) {
		nng_msg_free(rep);
		rep = NULL;
	}
	free(buf);
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
		rep = reply_to(w->lw_listener->ls_server, nng_aio_get_msg(w->lw_aio));
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
	}
	if (rv || (rv = nng_listener_start(l->ls_nng, 0)))
		fp_warnx("cannot listen on %s: %s", addr, nng_strerror(rv));
	return rv;
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
	    !(l->ls_workers = calloc(nworkers, sizeof(*l->ls_workers)))) {
		free(l);
		return -ENOMEM;
	}
	l->ls_server = s;
	if ((rv = nng_rep0_open(&l->ls_sock)) != 0) {
		fp_warnx("nng: %s", nng_strerror(rv));
		free(l->ls_workers);
		free(l);
		return -EIO;
	}
	nng_socket_set_size(l->ls_sock, NNG_OPT_RECVMAXSZ, FP_WIRE_MAX_MESSAGE);
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
	return rv == NNG_ENOMEM ? -ENOMEM : -EIO;
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

	*st = (struct fp_listen_stats){ 0 };
	if (nng_stats_get(&all))
		return;
	ls = nng_stat_find_listener(all, l->ls_nng);
	st->ls_accepted = listener_stat(ls, "accept");
	st->ls_refused_auth = listener_stat(ls, "auth");
	st->ls_refused_proto = listener_stat(ls, "proto");
	st->ls_refused_other = listener_stat(ls, "other");
	nng_stats_free(all);
}

void fp_listen_log_stats(struct fp_listener *l)
{
	struct fp_listen_stats st;

	fp_listen_stats(l, &st);
	fp_info("connections: accepted %" PRIu64 "; refused: TLS authentication %" PRIu64
		", protocol %" PRIu64 ", other %" PRIu64, st.ls_accepted, st.ls_refused_auth,
		st.ls_refused_proto, st.ls_refused_other);
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
	nng_msleep(200); /* the last replies leave before the socket closes */
	for (i = 0; i < l->ls_nworkers; i++) {
		nng_ctx_close(l->ls_workers[i].lw_ctx);
		nng_aio_free(l->ls_workers[i].lw_aio);
	}
	nng_close(l->ls_sock);
	free(l->ls_workers);
	free(l);
}
