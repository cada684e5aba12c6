/* httpc_test.c: fp_httpc against a canned HTTP server on a socket of its
 * own: a body within the bound is read, a longer one is not, a malformed
 * Content-Length is an error, and an absent server is not "reached". */
#include "check.h"
#include "httpc.h"

#include <arpa/inet.h>
#include <netinet/in.h>
#include <pthread.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

struct canned {
	int cn_fd;            /* listening */
	const char *cn_reply; /* what the one connection is answered */
	char cn_request[2048];
};

static void *serve_one(void *arg)
{
	struct canned *c = arg;
	size_t got = 0;
	ssize_t n;
	int fd = accept(c->cn_fd, NULL, NULL);

	if (fd < 0)
		return NULL;
	/* The request's head (the test requests have no body). */
	while (got < sizeof(c->cn_request) - 1 &&
	       (n = read(fd, c->cn_request + got, sizeof(c->cn_request) - 1 - got)) > 0) {
		got += (size_t)n;
		c->cn_request[got] = '\0';
		if (strstr(c->cn_request, "\r\n\r\n"))
			break;
	}
	if (write(fd, c->cn_reply, strlen(c->cn_reply)) < 0)
		perror("write");
	close(fd);
	return NULL;
}

/* exchange: one request to a server answering reply; the client's result. */
static int exchange(const char *reply, size_t body_max, uint16_t *status, char *body, size_t blen,
		    int64_t *too_large, int *reached)
{
	struct canned c = { .cn_reply = reply };
	struct sockaddr_in sa = { .sin_family = AF_INET,
				  .sin_addr.s_addr = htonl(INADDR_LOOPBACK) };
	socklen_t slen = sizeof(sa);
	struct fp_httpc *h = NULL;
	nng_http_req *req = NULL;
	nng_http_res *res = NULL;
	pthread_t th;
	char url[64];
	int rv;

	c.cn_fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
	if (c.cn_fd < 0 || bind(c.cn_fd, (struct sockaddr *)&sa, sizeof(sa)) ||
	    listen(c.cn_fd, 1) || getsockname(c.cn_fd, (struct sockaddr *)&sa, &slen) ||
	    pthread_create(&th, NULL, serve_one, &c)) {
		CHECK(!"a listening socket");
		return -1;
	}
	snprintf(url, sizeof(url), "http://127.0.0.1:%u/base", ntohs(sa.sin_port));
	CHECK_EQ_INT(fp_httpc_open(&h, url, NULL, "httpc_test"), 0);
	CHECK_EQ_INT(nng_http_req_alloc(&req, fp_httpc_url(h)), 0);
	CHECK_EQ_INT(nng_http_res_alloc(&res), 0);
	rv = fp_httpc_transact(h, req, res, 5000, body_max, reached, too_large);
	*status = nng_http_res_get_status(res);
	if (body) {
		void *data;
		size_t len;

		nng_http_res_get_data(res, &data, &len);
		snprintf(body, blen, "%.*s", (int)len, data ? (char *)data : "");
	}
	pthread_join(th, NULL);
	CHECK(strncmp(c.cn_request, "GET /base HTTP/1.1\r\n", 20) == 0);
	nng_http_req_free(req);
	nng_http_res_free(res);
	fp_httpc_close(h);
	close(c.cn_fd);
	return rv;
}

static void test_body_within_bound(void)
{
	int64_t too_large = -1;
	uint16_t status = 0;
	char body[64];
	int reached = 0;

	CHECK_EQ_INT(exchange("HTTP/1.1 200 OK\r\nContent-Length: 5\r\n\r\nhello", 5, &status, body,
			      sizeof(body), &too_large, &reached),
		     0);
	CHECK_EQ_INT(status, 200);
	CHECK(strcmp(body, "hello") == 0);
	CHECK_EQ_INT(too_large, -1);
	CHECK_EQ_INT(reached, 1);
}

static void test_body_over_bound_unread(void)
{
	int64_t too_large = -1;
	uint16_t status = 0;
	char body[64];
	int reached = 0;

	CHECK_EQ_INT(exchange("HTTP/1.1 503 Busy\r\nContent-Length: 6\r\n\r\nhello!", 5, &status,
			      body, sizeof(body), &too_large, &reached),
		     0);
	CHECK_EQ_INT(status, 503);
	CHECK_EQ_INT(too_large, 6);
	CHECK(strcmp(body, "") == 0);
}

static void test_bad_content_length(void)
{
	int64_t too_large = -1;
	uint16_t status = 0;
	int reached = 0;

	CHECK_EQ_INT(exchange("HTTP/1.1 200 OK\r\nContent-Length: 5x\r\n\r\nhello", 64, &status,
			      NULL, 0, &too_large, &reached),
		     NNG_EPROTO);
	CHECK_EQ_INT(reached, 1);
}

static void test_nobody_listening(void)
{
	struct sockaddr_in sa = { .sin_family = AF_INET,
				  .sin_addr.s_addr = htonl(INADDR_LOOPBACK) };
	socklen_t slen = sizeof(sa);
	struct fp_httpc *h = NULL;
	nng_http_req *req = NULL;
	nng_http_res *res = NULL;
	int64_t too_large = -1;
	int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0), reached = 0;
	char url[64];

	/* A port that was free a moment ago: bound, never listened on. */
	CHECK(fd >= 0 && bind(fd, (struct sockaddr *)&sa, sizeof(sa)) == 0 &&
	      getsockname(fd, (struct sockaddr *)&sa, &slen) == 0);
	snprintf(url, sizeof(url), "http://127.0.0.1:%u/", ntohs(sa.sin_port));
	CHECK_EQ_INT(fp_httpc_open(&h, url, NULL, "httpc_test"), 0);
	CHECK_EQ_INT(nng_http_req_alloc(&req, fp_httpc_url(h)), 0);
	CHECK_EQ_INT(nng_http_res_alloc(&res), 0);
	CHECK_EQ_INT(fp_httpc_transact(h, req, res, 5000, 64, &reached, &too_large),
		     NNG_ECONNREFUSED);
	CHECK_EQ_INT(reached, 0);
	nng_http_req_free(req);
	nng_http_res_free(res);
	fp_httpc_close(h);
	close(fd);
}

static void test_open_rejects(void)
{
	struct fp_httpc *h = NULL;
	struct fp_tls_opts tls = { .to_ca = "/nonexistent/ca.pem" };

	CHECK(fp_httpc_open(&h, "not a url", NULL, "httpc_test") != 0);
	CHECK(h == NULL);
	/* https with a CA file that cannot be read: no client without the
	 * means to check the server's certificate. */
	CHECK_EQ_INT(fp_httpc_open(&h, "https://127.0.0.1:1/", &tls, "httpc_test"), NNG_EINVAL);
	CHECK(h == NULL);
	fp_httpc_close(NULL);
}

int main(void)
{
	RUN(test_body_within_bound);
	RUN(test_body_over_bound_unread);
	RUN(test_bad_content_length);
	RUN(test_nobody_listening);
	RUN(test_open_rejects);
	return CHECK_DONE();
}
