/* tls_test.c: common/tls.h's configurations, used for real: certificates
 * made by openssl here, an nng REP server on tls+tcp:// with the server
 * configuration and REQ clients with client configurations, one with a
 * certificate (answered) and one without (refused during the handshake,
 * never answered); files that are missing or not PEM are refused.  And
 * the symbol service's loopback rule (fp_http_addr_loopback), which
 * decides whether uploads need a token. */
#include <errno.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <nng/nng.h>
#include <nng/protocol/reqrep0/rep.h>
#include <nng/protocol/reqrep0/req.h>

#include "check.h"
#include "http.h"
#include "log.h"
#include "tls.h"

static char dir[64];
static char path_buf[8][128];

static const char *path(int slot, const char *name)
{
	snprintf(path_buf[slot], sizeof(path_buf[slot]), "%s/%s", dir, name);
	return path_buf[slot];
}

static int make_certs(void)
{
	char cmd[2048];

	snprintf(cmd, sizeof(cmd),
		 "(cd %s && key() { openssl genpkey -algorithm EC -pkeyopt ec_paramgen_curve:P-256 -out $1; } && "
		 "key ca.key && openssl req -x509 -new -key ca.key -subj /CN=ca -days 2 -out ca.crt && "
		 "for n in server client other; do key $n.key && "
		 "openssl req -new -key $n.key -subj /CN=127.0.0.1 -out $n.csr && "
		 "printf 'subjectAltName=DNS:127.0.0.1\\n' > $n.ext && "
		 "openssl x509 -req -in $n.csr -CA ca.crt -CAkey ca.key -CAcreateserial -days 1 "
		 "-extfile $n.ext -out $n.crt || exit 1; done && echo 'not PEM' > junk.pem) "
		 "> /dev/null 2>&1",
		 dir);
	return system(cmd);
}

static void test_check_opts(void)
{
	static const struct {
		struct fp_tls_opts o;
		int err, enabled;
	} v[] = {
		{ { 0 }, 0, 0 },
		{ { .to_ca = "ca" }, 0, 1 },
		{ { .to_cert = "c", .to_key = "k" }, 0, 1 },
		{ { .to_cert = "c" }, -EINVAL, 1 },
		{ { .to_key = "k" }, -EINVAL, 1 },
	};
	const char *why = NULL;

	for (size_t i = 0; i < sizeof(v) / sizeof(v[0]); i++) {
		CHECK_EQ_INT(fp_tls_check_opts(&v[i].o, &why), v[i].err);
		CHECK_EQ_INT(fp_tls_enabled(&v[i].o), v[i].enabled);
	}
	CHECK(why && strstr(why, "--tls-"));
}

static void test_bad_files(void)
{
	struct fp_tls_opts missing_ca = { .to_ca = path(0, "nonexistent") };
	struct fp_tls_opts junk_ca = { .to_ca = path(1, "junk.pem") };
	struct fp_tls_opts junk_key = { .to_cert = path(2, "server.crt"),
					.to_key = path(3, "junk.pem") };
	struct fp_tls_opts no_ca = { .to_cert = path(4, "server.crt"),
				     .to_key = path(5, "server.key"),
				     .to_require_client = 1 };
	struct fp_tls_opts no_cert = { .to_ca = path(6, "ca.crt") };
	nng_tls_config *cfg = NULL;

	CHECK_EQ_INT(fp_tls_client_config(&cfg, &missing_ca, "h", "test"), -EINVAL);
	CHECK_EQ_INT(fp_tls_client_config(&cfg, &junk_ca, "h", "test"), -EINVAL);
	CHECK_EQ_INT(fp_tls_server_config(&cfg, &junk_key, "test"), -EINVAL);
	CHECK_EQ_INT(fp_tls_server_config(&cfg, &no_ca, "test"), -EINVAL);
	CHECK_EQ_INT(fp_tls_server_config(&cfg, &no_cert, "test"), -EINVAL);
	CHECK(cfg == NULL); /* written only on success */
}

/* ask: one request from a REQ socket dialled with cfg; 0 when "ping" came
 * back as "pong" within a second. */
static int ask(const char *addr, nng_tls_config *cfg)
{
	nng_socket s;
	nng_dialer d;
	char *buf = NULL;
	size_t len = 0;
	int rv;

	if (nng_req0_open(&s))
		return -1;
	/* REQ waits for a connection before it sends. */
	nng_socket_set_ms(s, NNG_OPT_SENDTIMEO, 1000);
	nng_socket_set_ms(s, NNG_OPT_RECVTIMEO, 1000);
	if (!(rv = nng_dialer_create(&d, s, addr)) &&
	    !(rv = nng_dialer_set_ptr(d, NNG_OPT_TLS_CONFIG, cfg)) &&
	    !(rv = nng_dialer_start(d, NNG_FLAG_NONBLOCK)) && !(rv = nng_send(s, "ping", 5, 0)) &&
	    !(rv = nng_recv(s, &buf, &len, NNG_FLAG_ALLOC)))
		rv = len == 5 && !memcmp(buf, "pong", 5) ? 0 : -1;
	nng_free(buf, len);
	nng_close(s);
	return rv;
}

static void *serve(void *arg)
{
	nng_socket *s = arg;
	char *buf;
	size_t len;

	while (nng_recv(*s, &buf, &len, NNG_FLAG_ALLOC) == 0) {
		nng_free(buf, len);
		nng_send(*s, "pong", 5, 0);
	}
	return NULL;
}

static void test_mutual_tls(void)
{
	struct fp_tls_opts server = { .to_cert = path(0, "server.crt"),
				      .to_key = path(1, "server.key"),
				      .to_ca = path(2, "ca.crt"),
				      .to_require_client = 1 };
	struct fp_tls_opts client = { .to_cert = path(3, "client.crt"),
				      .to_key = path(4, "client.key"),
				      .to_ca = path(5, "ca.crt") };
	struct fp_tls_opts anonymous = { .to_ca = path(6, "ca.crt") };
	nng_tls_config *scfg = NULL, *ccfg = NULL, *acfg = NULL;
	char addr[64];
	nng_listener l;
	nng_socket s;
	pthread_t t;
	int port = 0, started = 0;

	CHECK_EQ_INT(fp_tls_server_config(&scfg, &server, "test"), 0);
	CHECK_EQ_INT(fp_tls_client_config(&ccfg, &client, "127.0.0.1", "test"), 0);
	CHECK_EQ_INT(fp_tls_client_config(&acfg, &anonymous, "127.0.0.1", "test"), 0);
	if (!scfg || !ccfg || !acfg || nng_rep0_open(&s))
		goto out;
	CHECK_EQ_INT(nng_listener_create(&l, s, "tls+tcp://127.0.0.1:0"), 0);
	CHECK_EQ_INT(nng_listener_set_ptr(l, NNG_OPT_TLS_CONFIG, scfg), 0);
	CHECK_EQ_INT(nng_listener_start(l, 0), 0);
	CHECK_EQ_INT(nng_listener_get_int(l, NNG_OPT_TCP_BOUND_PORT, &port), 0);
	snprintf(addr, sizeof(addr), "tls+tcp://127.0.0.1:%d", port);
	started = pthread_create(&t, NULL, serve, &s) == 0;
	CHECK(started);
	CHECK_EQ_INT(ask(addr, ccfg), 0);
	CHECK(ask(addr, acfg) != 0); /* no client certificate: never answered */
	nng_close(s);
	if (started)
		pthread_join(t, NULL);
out:
	if (scfg)
		nng_tls_config_free(scfg);
	if (ccfg)
		nng_tls_config_free(ccfg);
	if (acfg)
		nng_tls_config_free(acfg);
}

static void test_loopback(void)
{
	static const struct {
		const char *addr;
		int loopback;
	} v[] = {
		{ "127.0.0.1:8002", 1 }, { "127.1.2.3:8002", 1 },      { "localhost:8002", 1 },
		{ "[::1]:8002", 1 },     { "http://127.0.0.1:80", 1 }, { "0.0.0.0:8002", 0 },
		{ ":8002", 0 },          { "10.0.0.1:8002", 0 },       { "symbols:8002", 0 },
		{ "[::]:8002", 0 },      { "128.0.0.1:8002", 0 },      { "localhost.evil:1", 0 },
	};

	for (size_t i = 0; i < sizeof(v) / sizeof(v[0]); i++) {
		int got = fp_http_addr_loopback(v[i].addr);
		if (got != v[i].loopback)
			fprintf(stderr, "  %s: %d\n", v[i].addr, got);
		CHECK_EQ_INT(got, v[i].loopback);
	}
}

int main(void)
{
	fp_log_init("tls_test", 0, 0);
	CHECK(!check_tmpdir(dir, sizeof(dir), "fp-tls-test"));
	CHECK_EQ_INT(make_certs(), 0);
	RUN(test_check_opts);
	RUN(test_bad_files);
	RUN(test_mutual_tls);
	RUN(test_loopback);
	CHECK_EQ_INT(check_rmtree(dir), 0);
	return CHECK_DONE();
}
