/* httpc.c: see httpc.h. */
#include "httpc.h"
#include "cli.h"

#include <stdlib.h>
#include <string.h>
#include <time.h>

struct fp_httpc {
	nng_url *hc_url;
	nng_http_client *hc_client;
	nng_aio *hc_aio; /* every operation of the client, one at a time */
};

static int set_tls(struct fp_httpc *c, const struct fp_tls_opts *tls, const char *who)
{
	static const struct fp_tls_opts system_ca = { 0 };
	nng_tls_config *cfg;
	int rv;

	/* The server's certificate is checked, for its host name too. */
	if (fp_tls_client_config(&cfg, tls ? tls : &system_ca, c->hc_url->u_hostname, who))
		return NNG_EINVAL;
	rv = nng_http_client_set_tls(c->hc_client, cfg);
	nng_tls_config_free(cfg);
	return rv;
}

int fp_httpc_open(struct fp_httpc **out, const char *url, const struct fp_tls_opts *tls,
		  const char *who)
{
	struct fp_httpc *c = calloc(1, sizeof(*c));
	int rv;

	if (!c)
		return NNG_ENOMEM;
	if ((rv = nng_url_parse(&c->hc_url, url)) ||
	    (rv = nng_http_client_alloc(&c->hc_client, c->hc_url)) ||
	    (!strcmp(c->hc_url->u_scheme, "https") && (rv = set_tls(c, tls, who))) ||
	    (rv = nng_aio_alloc(&c->hc_aio, NULL, NULL))) {
		fp_httpc_close(c);
		return rv;
	}
	*out = c;
	return 0;
}

void fp_httpc_close(struct fp_httpc *c)
{
	if (!c)
		return;
	if (c->hc_aio)
		nng_aio_free(c->hc_aio);
	if (c->hc_client)
		nng_http_client_free(c->hc_client);
	if (c->hc_url)
		nng_url_free(c->hc_url);
	free(c);
}

const nng_url *fp_httpc_url(const struct fp_httpc *c)
{
	return c->hc_url;
}

void fp_httpc_cancel(struct fp_httpc *c)
{
	nng_aio_cancel(c->hc_aio);
}

/* arm: the aio's timeout for the next operation, what is left until the
 * monotonic deadline (at least 1 ms). */
static void arm(struct fp_httpc *c, uint64_t deadline)
{
	uint64_t now = fp_mono_ms();

	nng_aio_set_timeout(c->hc_aio, (nng_duration)(deadline > now ? deadline - now : 1));
}

static int finish(struct fp_httpc *c)
{
	nng_aio_wait(c->hc_aio);
	return nng_aio_result(c->hc_aio);
}

static int connect_by(struct fp_httpc *c, uint64_t deadline, nng_http_conn **conn)
{
	int rv;

	arm(c, deadline);
	nng_http_client_connect(c->hc_client, c->hc_aio);
	if ((rv = finish(c)))
		return rv;
	*conn = nng_aio_get_output(c->hc_aio, 0);
	return 0;
}

int fp_httpc_connect(struct fp_httpc *c, uint64_t timeout_ms, nng_http_conn **conn)
{
	return connect_by(c, fp_mono_ms() + timeout_ms, conn);
}

/* content_length: the Content-Length of res; 0 when absent, -1 when not
 * a plain decimal. */
static int64_t content_length(nng_http_res *res)
{
	const char *cl = nng_http_res_get_header(res, "Content-Length");
	int64_t n = 0;

	if (!cl)
		return 0;
	if (!*cl)
		return -1;
	for (; *cl; cl++) {
		if (*cl < '0' || *cl > '9' || n > (INT64_MAX - 9) / 10)
			return -1;
		n = n * 10 + (*cl - '0');
	}
	return n;
}

int fp_httpc_transact(struct fp_httpc *c, nng_http_req *req, nng_http_res *res, uint64_t timeout_ms,
		      size_t body_max, int *reached, int64_t *too_large)
{
	uint64_t deadline = fp_mono_ms() + timeout_ms;
	nng_http_conn *conn;
	const char *te;
	nng_iov iov;
	int64_t len;
	void *body = NULL;
	int rv;

	if ((rv = connect_by(c, deadline, &conn)))
		return rv;
	if (reached)
		*reached = 1;
	arm(c, deadline);
	nng_http_conn_write_req(conn, req, c->hc_aio);
	if ((rv = finish(c)))
		goto out;
	arm(c, deadline);
	nng_http_conn_read_res(conn, res, c->hc_aio);
	if ((rv = finish(c)))
		goto out;
	te = nng_http_res_get_header(res, "Transfer-Encoding");
	if (te && strcasestr(te, "chunked"))
		goto out; /* not read: the status is what matters */
	if ((len = content_length(res)) < 0) {
		rv = NNG_EPROTO;
		goto out;
	}
	if ((uint64_t)len > body_max) {
		if (too_large)
			*too_large = len;
		goto out;
	}
	if (!len)
		goto out;
	if (!(body = malloc((size_t)len))) {
		rv = NNG_ENOMEM;
		goto out;
	}
	iov = (nng_iov){ .iov_buf = body, .iov_len = (size_t)len };
	arm(c, deadline);
	if (!(rv = nng_aio_set_iov(c->hc_aio, 1, &iov))) {
		nng_http_conn_read_all(conn, c->hc_aio);
		rv = finish(c);
	}
	if (!rv)
		rv = nng_http_res_copy_data(res, body, (size_t)len);
out:
	free(body);
	nng_http_conn_close(conn);
	return rv;
}
