/* push_test.c: the pusher (push.h) against a real HTTP server on
 * 127.0.0.1, a small one of this test's own (a thread answering each
 * request with the next status of a script, then closing the connection):
 * what is retried and what is not, Retry-After, the spool across a restart,
 * the request's path, headers and body; a response declaring 440 MB (not
 * read, memory flat), a request always answered 500 (dropped after the
 * bound, the next one goes through), the age bound, and --push-header-file. */
#include <arpa/inet.h>
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <poll.h>
#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "check.h"
#include "cli.h"
#include "push.h"

#define MAX_REQUESTS 16

struct request {
	char rq_line[512]; /* "POST /path HTTP/1.1" */
	char rq_headers[4096];
	uint8_t *rq_body;
	size_t rq_len;
	uint64_t rq_at_ms; /* monotonic */
};

struct httpd {
	int hd_fd, hd_port;
	pthread_t hd_thread;
	pthread_mutex_t hd_mu;
	int hd_stop;
	int hd_statuses[MAX_REQUESTS]; /* answer i; 200 past the script */
	int hd_nstatuses;
	const char *hd_retry_after; /* sent with 429 and 503 when set */
	int hd_nrequests;
	struct request hd_requests[MAX_REQUESTS];
	int64_t hd_declare; /* > 0: answers declare this Content-Length... */
	size_t hd_streamed; /* ...and send up to STREAM_MAX of it: bytes sent */
};

#define STREAM_MAX (64u << 20)

static char tmpdir[64];

static uint64_t ms_now(void)
{
	return fp_now_ns(CLOCK_MONOTONIC) / 1000000;
}

/* header: the value of header name in rq (one line), or NULL. */
static const char *header(const struct request *rq, const char *name)
{
	static char value[256];
	const char *line = rq->rq_headers;
	size_t n = strlen(name);

	for (; *line; line += strcspn(line, "\n") + (line[strcspn(line, "\n")] != '\0')) {
		if (strncasecmp(line, name, n) || line[n] != ':')
			continue;
		line += n + 1 + strspn(line + n + 1, " ");
		snprintf(value, sizeof(value), "%.*s", (int)strcspn(line, "\r\n"), line);
		return value;
	}
	return NULL;
}

/* read_request: headers, then Content-Length bytes of body.  0 or -1. */
static int read_request(int fd, struct request *rq)
{
	char buf[8192], *end;
	const char *cl;
	size_t len = 0, body;
	ssize_t n;

	while (!(end = memmem(buf, len, "\r\n\r\n", 4))) {
		if (len == sizeof(buf) || (n = read(fd, buf + len, sizeof(buf) - len)) <= 0)
			return -1;
		len += (size_t)n;
	}
	*end = '\0';
	snprintf(rq->rq_line, sizeof(rq->rq_line), "%.*s", (int)strcspn(buf, "\r"), buf);
	snprintf(rq->rq_headers, sizeof(rq->rq_headers), "%s\r\n", buf + strcspn(buf, "\r") + 2);
	cl = header(rq, "Content-Length");
	body = cl ? strtoul(cl, NULL, 10) : 0;
	if (body > (64u << 20) || !(rq->rq_body = malloc(body + 1)))
		return -1;
	rq->rq_len = len - (size_t)(end + 4 - buf);
	memcpy(rq->rq_body, end + 4, rq->rq_len);
	while (rq->rq_len < body) {
		if ((n = read(fd, rq->rq_body + rq->rq_len, body - rq->rq_len)) <= 0)
			return -1;
		rq->rq_len += (size_t)n;
	}
	return 0;
}

static void *httpd_main(void *arg)
{
	struct httpd *hd = arg;

	for (;;) {
		struct pollfd pfd = { .fd = hd->hd_fd, .events = POLLIN };
		struct request rq = { 0 };
		char answer[256];
		int fd, status, i;

		pthread_mutex_lock(&hd->hd_mu);
		if (hd->hd_stop) {
			pthread_mutex_unlock(&hd->hd_mu);
			return NULL;
		}
		pthread_mutex_unlock(&hd->hd_mu);
		if (poll(&pfd, 1, 50) <= 0 || (fd = accept(hd->hd_fd, NULL, NULL)) < 0)
			continue;
		if (read_request(fd, &rq)) {
			free(rq.rq_body);
			close(fd);
			continue;
		}
		rq.rq_at_ms = ms_now();
		pthread_mutex_lock(&hd->hd_mu);
		i = hd->hd_nrequests;
		status = i < hd->hd_nstatuses ? hd->hd_statuses[i] : 200;
		if (i < MAX_REQUESTS) {
			hd->hd_requests[i] = rq;
			hd->hd_nrequests++;
		} else {
			free(rq.rq_body);
		}
		snprintf(answer, sizeof(answer),
			 "HTTP/1.1 %d Scripted\r\nContent-Length: %lld\r\nConnection: close\r\n%s%s%s\r\n",
			 status, (long long)hd->hd_declare,
			 hd->hd_retry_after && (status == 429 || status == 503) ? "Retry-After: "
										: "",
			 hd->hd_retry_after && (status == 429 || status == 503) ? hd->hd_retry_after
										: "",
			 hd->hd_retry_after && (status == 429 || status == 503) ? "\r\n" : "");
		pthread_mutex_unlock(&hd->hd_mu);
		if (write(fd, answer, strlen(answer)) < 0)
			fprintf(stderr, "  httpd: write: %s\n", strerror(errno));
		if (hd->hd_declare > 0) {
			/* Body bytes until the client hangs up (or STREAM_MAX). */
			static char chunk[65536];
			size_t sent = 0;
			ssize_t n;

			memset(chunk, 'x', sizeof(chunk));
			while (sent < STREAM_MAX &&
			       (n = send(fd, chunk, sizeof(chunk), MSG_NOSIGNAL)) > 0)
				sent += (size_t)n;
			pthread_mutex_lock(&hd->hd_mu);
			hd->hd_streamed += sent;
			pthread_mutex_unlock(&hd->hd_mu);
		}
		close(fd);
	}
}

/* httpd_start: listen on 127.0.0.1, an unused port.  0 or -1. */
static int httpd_start(struct httpd *hd, const int *statuses, int n)
{
	struct sockaddr_in a = { .sin_family = AF_INET, .sin_addr.s_addr = htonl(INADDR_LOOPBACK) };
	socklen_t alen = sizeof(a);

	memset(hd, 0, sizeof(*hd));
	if (n)
		memcpy(hd->hd_statuses, statuses, (size_t)n * sizeof(*statuses));
	hd->hd_nstatuses = n;
	pthread_mutex_init(&hd->hd_mu, NULL);
	if ((hd->hd_fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0)) < 0 ||
	    bind(hd->hd_fd, (struct sockaddr *)&a, sizeof(a)) || listen(hd->hd_fd, 16) ||
	    getsockname(hd->hd_fd, (struct sockaddr *)&a, &alen))
		return -1;
	hd->hd_port = ntohs(a.sin_port);
	return pthread_create(&hd->hd_thread, NULL, httpd_main, hd) ? -1 : 0;
}

static void httpd_stop(struct httpd *hd)
{
	pthread_mutex_lock(&hd->hd_mu);
	hd->hd_stop = 1;
	pthread_mutex_unlock(&hd->hd_mu);
	pthread_join(hd->hd_thread, NULL);
	close(hd->hd_fd);
	for (int i = 0; i < hd->hd_nrequests; i++)
		free(hd->hd_requests[i].rq_body);
	pthread_mutex_destroy(&hd->hd_mu);
}

static int httpd_count(struct httpd *hd)
{
	int n;

	pthread_mutex_lock(&hd->hd_mu);
	n = hd->hd_nrequests;
	pthread_mutex_unlock(&hd->hd_mu);
	return n;
}

/* A profile of one sample; host tells profiles apart in the bodies. */
static struct fp_profile *profile_of(const char *host)
{
	static const struct fp_build_id id = { .fb_len = 4, .fb_data = { 1, 2, 3, 4 } };
	struct fp_profile *p = NULL;
	uint32_t m, f;

	if (fp_profile_alloc(&p, host, 1700000000000000000ull, 10000000000ull, 10101010))
		return NULL;
	if (fp_profile_add_mapping(p, FP_MAP_USER, &id, "/usr/bin/app", &m) ||
	    fp_profile_add_frame(p, m, 0x1000, FP_FRAME_USER, "main", NULL, &f) ||
	    fp_profile_add_sample(p, &f, 1, 100, 100, "app", "app", "", 7)) {
		fp_profile_free(p);
		return NULL;
	}
	return p;
}

static int push_one(struct fp_push *pu, const char *host)
{
	struct fp_hello hello = { .fh_host = (char *)host };
	struct fp_profile *p = profile_of(host);
	int err = p ? fp_push_profile(pu, p, &hello) : -ENOMEM;

	fp_profile_free(p);
	return err;
}

/* wait_stats: until done(stats) or 5 s; the last stats in *st. */
static int wait_stats(struct fp_push *pu, struct fp_push_stats *st,
		      int (*done)(const struct fp_push_stats *, uint64_t), uint64_t n)
{
	uint64_t deadline = ms_now() + 5000;

	do {
		fp_push_stats(pu, st);
		if (done(st, n))
			return 1;
		usleep(10000);
	} while (ms_now() < deadline);
	return 0;
}

static int pushed(const struct fp_push_stats *st, uint64_t n)
{
	return st->ps_pushed >= n;
}

static int permanent(const struct fp_push_stats *st, uint64_t n)
{
	return st->ps_permanent >= n;
}

static int retried(const struct fp_push_stats *st, uint64_t n)
{
	return st->ps_retried >= n;
}

static int gave_up(const struct fp_push_stats *st, uint64_t n)
{
	return st->ps_gave_up >= n;
}

/* rss_kb: this process's resident set, kB (VmRSS), or -1. */
static long rss_kb(void)
{
	char line[256];
	long kb = -1;
	FILE *f = fopen("/proc/self/status", "r");

	while (f && fgets(line, sizeof(line), f))
		if (sscanf(line, "VmRSS: %ld kB", &kb) == 1)
			break;
	if (f)
		fclose(f);
	return kb;
}

/* capture: stderr into file path from now (fd: what to restore), or back. */
static int capture_start(const char *path)
{
	int saved = dup(2), fd = open(path, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0600);

	fflush(stderr);
	if (fd >= 0) {
		dup2(fd, 2);
		close(fd);
	}
	return saved;
}

static void capture_end(int saved)
{
	fflush(stderr);
	dup2(saved, 2);
	close(saved);
}

/* slurp: file path into buf (terminated).  Bytes read. */
static size_t slurp(const char *path, char *buf, size_t len)
{
	int fd = open(path, O_RDONLY | O_CLOEXEC);
	ssize_t n = fd >= 0 ? read(fd, buf, len - 1) : -1;

	if (fd >= 0)
		close(fd);
	buf[n > 0 ? n : 0] = '\0';
	return n > 0 ? (size_t)n : 0;
}

static struct fp_push_opts opts(const char *name, char *url, size_t urllen, int port)
{
	struct fp_push_opts o = { .po_name = name,
				  .po_url = url,
				  .po_format = FP_PUSH_OTLP,
				  .po_spool_dir = tmpdir,
				  .po_spool_max = 1 << 20,
				  .po_backoff_min_ms = 20,
				  .po_backoff_max_ms = 100,
				  .po_timeout_ms = 2000 };

	snprintf(url, urllen, "http://127.0.0.1:%d/prefix/", port);
	return o;
}

/* 503 and 429 are retried, the same request each time, then 200 ends it. */
static void test_retry_then_success(void)
{
	static const int script[] = { 503, 429 };
	static const char *const headers[] = { "X-Scope-OrgID: tenant-1" };
	struct fp_push_stats st;
	struct fp_push *pu = NULL;
	struct httpd hd;
	char url[128];
	struct fp_push_opts o;

	CHECK_EQ_INT(httpd_start(&hd, script, 2), 0);
	o = opts("retry", url, sizeof(url), hd.hd_port);
	o.po_headers = headers;
	o.po_nheaders = 1;
	CHECK_EQ_INT(fp_push_start(&pu, &o), 0);
	if (!pu) {
		httpd_stop(&hd);
		return;
	}
	CHECK_EQ_INT(push_one(pu, "host-a"), 0);
	CHECK(wait_stats(pu, &st, pushed, 1));
	CHECK_EQ_INT(st.ps_queued, 1);
	CHECK_EQ_INT(st.ps_pushed, 1);
	CHECK_EQ_INT(st.ps_retried, 2);
	CHECK_EQ_INT(st.ps_permanent, 0);
	CHECK_EQ_INT(st.ps_spool_files, 0);
	fp_push_stop(pu, 0);
	CHECK_EQ_INT(httpd_count(&hd), 3);
	for (int i = 0; i < hd.hd_nrequests && i < 3; i++) {
		const struct request *rq = &hd.hd_requests[i];
		const char *v;

		CHECK(!strcmp(rq->rq_line, "POST /prefix/v1development/profiles HTTP/1.1"));
		CHECK((v = header(rq, "Content-Type")) && !strcmp(v, "application/x-protobuf"));
		CHECK((v = header(rq, "X-Scope-OrgID")) && !strcmp(v, "tenant-1"));
		CHECK(rq->rq_len > 0 && memmem(rq->rq_body, rq->rq_len, "host-a", 6));
		CHECK(rq->rq_len == hd.hd_requests[0].rq_len &&
		      !memcmp(rq->rq_body, hd.hd_requests[0].rq_body, rq->rq_len));
	}
	httpd_stop(&hd);
}

/* A 4xx other than 408 and 429 is final: one request, the file deleted. */
static void test_permanent_failure(void)
{
	static const int script[] = { 400, 200 };
	struct fp_push_stats st;
	struct fp_push *pu = NULL;
	struct httpd hd;
	char url[128];
	struct fp_push_opts o;

	CHECK_EQ_INT(httpd_start(&hd, script, 2), 0);
	o = opts("permanent", url, sizeof(url), hd.hd_port);
	CHECK_EQ_INT(fp_push_start(&pu, &o), 0);
	if (!pu) {
		httpd_stop(&hd);
		return;
	}
	CHECK_EQ_INT(push_one(pu, "host-a"), 0);
	CHECK(wait_stats(pu, &st, permanent, 1));
	usleep(300 * 1000); /* several backoffs: a retry would have come */
	fp_push_stats(pu, &st);
	CHECK_EQ_INT(st.ps_permanent, 1);
	CHECK_EQ_INT(st.ps_pushed, 0);
	CHECK_EQ_INT(st.ps_retried, 0);
	CHECK_EQ_INT(st.ps_spool_files, 0);
	CHECK_EQ_INT(httpd_count(&hd), 1);
	fp_push_stop(pu, 0);
	httpd_stop(&hd);
}

/* Retry-After, longer than the backoff, sets the wait (up to the maximum). */
static void test_retry_after(void)
{
	static const int script[] = { 503 };
	struct fp_push_stats st;
	struct fp_push *pu = NULL;
	struct httpd hd;
	char url[128];
	struct fp_push_opts o;
	uint64_t gap;

	CHECK_EQ_INT(httpd_start(&hd, script, 1), 0);
	hd.hd_retry_after = "1";
	o = opts("retryafter", url, sizeof(url), hd.hd_port);
	o.po_backoff_max_ms = 5000;
	CHECK_EQ_INT(fp_push_start(&pu, &o), 0);
	if (!pu) {
		httpd_stop(&hd);
		return;
	}
	CHECK_EQ_INT(push_one(pu, "host-a"), 0);
	CHECK(wait_stats(pu, &st, pushed, 1));
	fp_push_stop(pu, 0);
	CHECK_EQ_INT(httpd_count(&hd), 2);
	gap = hd.hd_requests[1].rq_at_ms - hd.hd_requests[0].rq_at_ms;
	if (gap < 950 || gap > 3000)
		fprintf(stderr, "  %llu ms between the attempts, expected 1 s\n",
			(unsigned long long)gap);
	CHECK(gap >= 950 && gap <= 3000);
	httpd_stop(&hd);
}

/* Nothing listening: the requests stay spooled across a stop; the next
 * start sends them, oldest first. */
static void test_spool_across_restart(void)
{
	struct fp_push_stats st;
	struct fp_push *pu = NULL;
	struct httpd hd, dead;
	char url[128];
	struct fp_push_opts o;
	int port;

	/* A port that refuses connections: bound, then closed. */
	CHECK_EQ_INT(httpd_start(&dead, NULL, 0), 0);
	port = dead.hd_port;
	httpd_stop(&dead);
	o = opts("restart", url, sizeof(url), port);
	CHECK_EQ_INT(fp_push_start(&pu, &o), 0);
	if (!pu)
		return;
	CHECK_EQ_INT(push_one(pu, "host-first"), 0);
	CHECK_EQ_INT(push_one(pu, "host-second"), 0);
	CHECK(wait_stats(pu, &st, retried, 2));
	CHECK_EQ_INT(st.ps_spool_files, 2);
	CHECK_EQ_INT(st.ps_pushed, 0);
	fp_push_stop(pu, 0);
	pu = NULL;

	CHECK_EQ_INT(httpd_start(&hd, NULL, 0), 0);
	o = opts("restart", url, sizeof(url), hd.hd_port);
	CHECK_EQ_INT(fp_push_start(&pu, &o), 0);
	if (!pu) {
		httpd_stop(&hd);
		return;
	}
	CHECK(wait_stats(pu, &st, pushed, 2));
	CHECK_EQ_INT(st.ps_pushed, 2);
	CHECK_EQ_INT(st.ps_spool_files, 0);
	fp_push_stop(pu, 0);
	CHECK_EQ_INT(httpd_count(&hd), 2);
	if (hd.hd_nrequests == 2) {
		CHECK(memmem(hd.hd_requests[0].rq_body, hd.hd_requests[0].rq_len, "host-first",
			     10));
		CHECK(memmem(hd.hd_requests[1].rq_body, hd.hd_requests[1].rq_len, "host-second",
			     11));
	}
	httpd_stop(&hd);
}

/* pprof to Pyroscope's /ingest, gzip'd: the query names the service and
 * host, the body is a gzip stream. */
static void test_pprof_gzip(void)
{
	struct fp_push_stats st;
	struct fp_push *pu = NULL;
	struct httpd hd;
	char url[128];
	struct fp_push_opts o;

	CHECK_EQ_INT(httpd_start(&hd, NULL, 0), 0);
	o = opts("pprof", url, sizeof(url), hd.hd_port);
	o.po_format = FP_PUSH_PPROF;
	o.po_gzip = 1;
	CHECK_EQ_INT(fp_push_start(&pu, &o), 0);
	if (!pu) {
		httpd_stop(&hd);
		return;
	}
	CHECK_EQ_INT(push_one(pu, "host-a"), 0);
	CHECK(wait_stats(pu, &st, pushed, 1));
	fp_push_stop(pu, 0);
	CHECK_EQ_INT(httpd_count(&hd), 1);
	if (hd.hd_nrequests == 1) {
		const struct request *rq = &hd.hd_requests[0];

		CHECK(!strncmp(rq->rq_line, "POST /prefix/ingest?name=app", 28));
		/* name=app{host_name=host-a}, escaped */
		CHECK(!strncmp(rq->rq_line + 28,
			       "%7Bhost_name%3Dhost-a%7D&from=1700000000&"
			       "until=1700000010&format=pprof&",
			       71));
		CHECK(rq->rq_len > 2 && rq->rq_body[0] == 0x1f && rq->rq_body[1] == 0x8b);
	}
	httpd_stop(&hd);
}

/* A 200 that declares a 440 MB body and streams 64 MiB of it: the body is
 * not read (the connection is closed, the server cannot send much), memory
 * does not grow, the request counts as sent and the answer as too large. */
static void test_huge_response(void)
{
	struct fp_push_stats st;
	struct fp_push *pu = NULL;
	struct httpd hd;
	char url[128];
	struct fp_push_opts o;
	long before, after;

	CHECK_EQ_INT(httpd_start(&hd, NULL, 0), 0);
	hd.hd_declare = 440000000;
	o = opts("huge", url, sizeof(url), hd.hd_port);
	CHECK_EQ_INT(fp_push_start(&pu, &o), 0);
	if (!pu) {
		httpd_stop(&hd);
		return;
	}
	before = rss_kb();
	CHECK_EQ_INT(push_one(pu, "host-a"), 0);
	CHECK(wait_stats(pu, &st, pushed, 1));
	after = rss_kb();
	CHECK_EQ_INT(st.ps_pushed, 1);
	CHECK_EQ_INT(st.ps_too_large, 1);
	CHECK_EQ_INT(st.ps_retried, 0);
	CHECK_EQ_INT(st.ps_spool_files, 0);
	fp_push_stop(pu, 0);
	httpd_stop(&hd);
	fprintf(stderr, "  RSS %ld kB before, %ld kB after; the server sent %zu bytes of body\n",
		before, after, hd.hd_streamed);
	CHECK(before > 0 && after - before < 16 * 1024);
	CHECK(hd.hd_streamed < STREAM_MAX / 2);
}

/* A request always answered 500 is dropped after po_max_attempts (counted),
 * and the next one, queued behind it, then goes through. */
static void test_always_500(void)
{
	static const int script[] = { 500, 500, 500 };
	struct fp_push_stats st;
	struct fp_push *pu = NULL;
	struct httpd hd;
	char url[128];
	struct fp_push_opts o;

	CHECK_EQ_INT(httpd_start(&hd, script, 3), 0);
	o = opts("always500", url, sizeof(url), hd.hd_port);
	o.po_max_attempts = 3;
	CHECK_EQ_INT(fp_push_start(&pu, &o), 0);
	if (!pu) {
		httpd_stop(&hd);
		return;
	}
	CHECK_EQ_INT(push_one(pu, "host-first"), 0);
	CHECK_EQ_INT(push_one(pu, "host-second"), 0);
	CHECK(wait_stats(pu, &st, pushed, 1));
	CHECK_EQ_INT(st.ps_gave_up, 1);
	CHECK_EQ_INT(st.ps_retried, 2);
	CHECK_EQ_INT(st.ps_pushed, 1);
	CHECK_EQ_INT(st.ps_permanent, 0);
	CHECK_EQ_INT(st.ps_spool_files, 0);
	fp_push_stop(pu, 0);
	CHECK_EQ_INT(httpd_count(&hd), 4);
	for (int i = 0; i < hd.hd_nrequests && i < 4; i++) {
		const struct request *rq = &hd.hd_requests[i];
		const char *want = i < 3 ? "host-first" : "host-second";
		CHECK(memmem(rq->rq_body, rq->rq_len, want, strlen(want)) != NULL);
	}
	httpd_stop(&hd);
}

/* Failing to connect is not an answered attempt: the request stays however
 * often it is tried; once it fails older than po_max_age_s (its file's
 * mtime, so across a restart) it is dropped. */
static void test_dead_destination(void)
{
	struct fp_push_stats st;
	struct fp_push *pu = NULL;
	struct httpd dead;
	char url[128], path[256];
	struct fp_push_opts o;
	struct dirent *de;
	DIR *d;
	int port, backdated = 0;

	CHECK_EQ_INT(httpd_start(&dead, NULL, 0), 0);
	port = dead.hd_port;
	httpd_stop(&dead);
	o = opts("deadage", url, sizeof(url), port);
	o.po_max_attempts = 1;
	o.po_max_age_s = 60;
	CHECK_EQ_INT(fp_push_start(&pu, &o), 0);
	if (!pu)
		return;
	CHECK_EQ_INT(push_one(pu, "host-a"), 0);
	CHECK(wait_stats(pu, &st, retried, 3));
	CHECK_EQ_INT(st.ps_gave_up, 0);
	CHECK_EQ_INT(st.ps_spool_files, 1);
	fp_push_stop(pu, 0);
	pu = NULL;

	/* Spooled two minutes ago, as far as the pusher can tell. */
	snprintf(path, sizeof(path), "%s/deadage", tmpdir);
	if ((d = opendir(path))) {
		while ((de = readdir(d))) {
			struct timespec t[2] = { { time(NULL) - 120, 0 }, { time(NULL) - 120, 0 } };
			if (strstr(de->d_name, ".req"))
				backdated += !utimensat(dirfd(d), de->d_name, t, 0);
		}
		closedir(d);
	}
	CHECK_EQ_INT(backdated, 1);
	CHECK_EQ_INT(fp_push_start(&pu, &o), 0);
	if (!pu)
		return;
	CHECK(wait_stats(pu, &st, gave_up, 1));
	CHECK_EQ_INT(st.ps_gave_up, 1);
	CHECK_EQ_INT(st.ps_pushed, 0);
	CHECK_EQ_INT(st.ps_spool_files, 0);
	fp_push_stop(pu, 0);
}

/* --push-header-file: lines as --push-header, comments and blank lines
 * skipped, CRLF taken; a bad line named by its number, never its text; a
 * file others may read is a warning. */
static void test_header_file(void)
{
	static const char good[] = "X-Scope-OrgID: tenant-1\n# a comment\n\n"
				   "Authorization: Bearer s3cret\r\n";
	char path[128], log[128], text[4096], *headers[FP_PUSH_MAX_HEADERS];
	size_t n = 0;
	int fd, saved;

	snprintf(path, sizeof(path), "%s/headers", tmpdir);
	snprintf(log, sizeof(log), "%s/headers.log", tmpdir);
	fd = open(path, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0600);
	CHECK(fd >= 0 && write(fd, good, sizeof(good) - 1) == (ssize_t)sizeof(good) - 1);
	close(fd);
	chmod(path, 0600);
	saved = capture_start(log);
	CHECK_EQ_INT(fp_push_header_file(path, headers, &n), 0);
	capture_end(saved);
	slurp(log, text, sizeof(text));
	CHECK_EQ_INT(n, 2);
	if (n == 2) {
		CHECK(!strcmp(headers[0], "X-Scope-OrgID: tenant-1"));
		CHECK(!strcmp(headers[1], "Authorization: Bearer s3cret"));
		free(headers[0]);
		free(headers[1]);
	}
	CHECK(!strstr(text, "readable"));

	/* Readable by everyone: taken, with a warning. */
	chmod(path, 0644);
	n = 0;
	saved = capture_start(log);
	CHECK_EQ_INT(fp_push_header_file(path, headers, &n), 0);
	capture_end(saved);
	slurp(log, text, sizeof(text));
	CHECK(strstr(text, "readable by everyone") != NULL);
	while (n)
		free(headers[--n]);

	/* A bad third line: refused, nothing kept, the secret not logged. */
	fd = open(path, O_WRONLY | O_TRUNC | O_CLOEXEC);
	CHECK(fd >= 0 && write(fd, "X-A: 1\nX-B: 2\nAuthorization Bearer s3cret\n", 42) == 42);
	close(fd);
	chmod(path, 0600);
	saved = capture_start(log);
	CHECK_EQ_INT(fp_push_header_file(path, headers, &n), -EINVAL);
	capture_end(saved);
	slurp(log, text, sizeof(text));
	CHECK_EQ_INT(n, 0);
	CHECK(strstr(text, "line 3: expected 'Name: value'") != NULL);
	CHECK(!strstr(text, "s3cret"));

	/* A header fleetprof sets itself, and a directory. */
	fd = open(path, O_WRONLY | O_TRUNC | O_CLOEXEC);
	CHECK(fd >= 0 && write(fd, "Content-Length: 5\n", 18) == 18);
	close(fd);
	saved = capture_start(log);
	CHECK_EQ_INT(fp_push_header_file(path, headers, &n), -EINVAL);
	CHECK_EQ_INT(fp_push_header_file(tmpdir, headers, &n), -EINVAL);
	capture_end(saved);
	slurp(log, text, sizeof(text));
	CHECK_EQ_INT(n, 0);
	CHECK(strstr(text, "line 1: fleetprof sets this header itself") != NULL);
	CHECK(strstr(text, "not a regular file") != NULL);
}

int main(void)
{

	if (check_tmpdir(tmpdir, sizeof(tmpdir), "push_test"))
		return 1;
	RUN(test_retry_then_success);
	RUN(test_permanent_failure);
	RUN(test_retry_after);
	RUN(test_spool_across_restart);
	RUN(test_pprof_gzip);
	RUN(test_huge_response);
	RUN(test_always_500);
	RUN(test_dead_destination);
	RUN(test_header_file);
	if (check_rmtree(tmpdir))
		fprintf(stderr, "push_test: cannot remove %s\n", tmpdir);
	return CHECK_DONE();
}
