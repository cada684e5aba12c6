/* uplink.c: nng REQ socket with non-blocking send and receive. */
#include "uplink.h"
#include "log.h"
#include "nngerr.h"
#include "tls.h"
#include "wire.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <nng/nng.h>
#include <nng/protocol/reqrep0/req.h>

_Static_assert(FP_TABLE_REPLY_MAX + (64u << 10) <= FP_WIRE_MAX_MESSAGE,
	       "a reply's table parts and the rest fit the largest message");

struct fp_uplink {
	nng_socket ul_sock;
	nng_dialer ul_dialer;
};

/* dialer_create: a dialer for addr, with TLS from tls for tls+tcp://. */
static int dialer_create(nng_dialer *d, nng_socket sock, const char *addr,
			 const struct fp_tls_opts *tls)
{
	int is_tls = !strncmp(addr, "tls+", 4);
	nng_tls_config *cfg = NULL;
	nng_url *url = NULL;
	int rv;

	if (!is_tls && fp_tls_enabled(tls)) {
		fp_warnx("%s: the --tls-* options need a tls+tcp:// address", addr);
		return NNG_EINVAL;
	}
	if ((rv = nng_dialer_create(d, sock, addr))) {
		fp_warnx("cannot dial %s: %s", addr, nng_strerror(rv));
		return rv;
	}
	if (!is_tls)
		return 0;
	/* The server's certificate must name the host dialled. */
	if ((rv = nng_url_parse(&url, addr)))
		fp_warnx("cannot dial %s: %s", addr, nng_strerror(rv));
	else if (fp_tls_client_config(&cfg, tls, url->u_hostname, addr))
		rv = NNG_EINVAL; /* logged */
	else if ((rv = nng_dialer_set_ptr(*d, NNG_OPT_TLS_CONFIG, cfg)))
		fp_warnx("cannot dial %s: %s", addr, nng_strerror(rv));
	if (cfg)
		nng_tls_config_free(cfg);
	nng_url_free(url);
	return rv;
}

int fp_uplink_open(struct fp_uplink **out, const char *addr, const struct fp_tls_opts *tls)
{
	struct fp_uplink *u = calloc(1, sizeof(*u));
	int rv;

	if (!u)
		return -ENOMEM;
	if ((rv = nng_req0_open(&u->ul_sock)) != 0) {
		fp_warnx("nng: %s", nng_strerror(rv));
		free(u);
		return fp_nng_errno(rv);
	}
	/* The agent decides when to resend (it has the buffer); nng must not. */
	nng_socket_set_ms(u->ul_sock, NNG_OPT_REQ_RESENDTIME, NNG_DURATION_INFINITE);
	nng_socket_set_ms(u->ul_sock, NNG_OPT_RECONNMINT, 100);
	nng_socket_set_ms(u->ul_sock, NNG_OPT_RECONNMAXT, 5000);
	nng_socket_set_ms(u->ul_sock, NNG_OPT_SENDTIMEO, 0);
	/* What the protocol allows a reply, and no more: it may carry
	 * FP_TABLE_REPLY_MAX bytes of unwind tables.  At 1 MiB, nng dropped
	 * every reply with more tables than that and its connection, so a
	 * host with several large tables to send got none of them. */
	nng_socket_set_size(u->ul_sock, NNG_OPT_RECVMAXSZ, FP_WIRE_MAX_MESSAGE);
	/* Non-blocking dial: the first connection may come later. */
	if ((rv = dialer_create(&u->ul_dialer, u->ul_sock, addr, tls)) == 0 &&
	    (rv = nng_dialer_start(u->ul_dialer, NNG_FLAG_NONBLOCK)) != 0)
		fp_warnx("cannot dial %s: %s", addr, nng_strerror(rv));
	if (rv != 0) {
		nng_close(u->ul_sock);
		free(u);
		return fp_nng_errno(rv);
	}
	*out = u;
	return 0;
}

int fp_uplink_check(const char *addr, const struct fp_tls_opts *tls)
{
	nng_socket sock;
	nng_dialer d;
	int rv;

	if ((rv = nng_req0_open(&sock)) != 0) {
		fp_warnx("nng: %s", nng_strerror(rv));
		return fp_nng_errno(rv);
	}
	/* A dialer that is never started parses the address, finds its
	 * transport and reads the TLS files, and connects to nothing. */
	rv = dialer_create(&d, sock, addr, tls);
	nng_close(sock);
	return rv ? fp_nng_errno(rv) : 0;
}

uint64_t fp_uplink_setup_failures(struct fp_uplink *u)
{
	static const char *const kinds[] = { "auth", "proto", "other" };
	nng_stat *all = NULL, *d, *st;
	uint64_t n = 0;
	size_t i;

	if (nng_stats_get(&all))
		return 0;
	/* nng files a handshake its peer refused under "other". */
	d = nng_stat_find_dialer(all, u->ul_dialer);
	for (i = 0; d && i < sizeof(kinds) / sizeof(kinds[0]); i++)
		if ((st = nng_stat_find(d, kinds[i])))
			n += nng_stat_value(st);
	nng_stats_free(all);
	return n;
}

void fp_uplink_close(struct fp_uplink *u)
{
	if (!u)
		return;
	nng_close(u->ul_sock);
	free(u);
}

int fp_uplink_send(struct fp_uplink *u, const void *buf, size_t len)
{
	nng_msg *m;
	int rv;

	if ((rv = nng_msg_alloc(&m, 0)) != 0 || (rv = nng_msg_append(m, buf, len)) != 0)
		goto fail;
	/* REQ queues the request until a connection is up. */
	if ((rv = nng_sendmsg(u->ul_sock, m, 0)) != 0) {
		nng_msg_free(m);
		goto fail;
	}
	return 0;
fail:
	return fp_nng_errno(rv);
}

int fp_uplink_poll(struct fp_uplink *u, struct fp_reply *reply)
{
	nng_msg *m;
	int rv, err;

	rv = nng_recvmsg(u->ul_sock, &m, NNG_FLAG_NONBLOCK);
	if (rv != 0)
		return fp_nng_errno(rv);
	err = fp_wire_decode_reply(nng_msg_body(m), nng_msg_len(m), reply);
	nng_msg_free(m);
	if (err) {
		fp_warnx("undecodable reply from the symbolizer: %s", fp_wire_strerror(err));
		return -EPROTO;
	}
	return 0;
}
