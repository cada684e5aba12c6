/* http.c: the symbol service's HTTP API on nng's HTTP server.
 *
 * nng calls a handler on one of its own threads with an aio that the
 * handler must finish.  Ours only queue the aio; worker threads take it,
 * read the body straight from the connection (bodies are not collected by
 * nng, so an upload of a gigabyte goes to disk in pieces instead of
 * memory, and its size is judged before it is read), answer, and finish
 * the aio.  A file served to a debuginfod client is written the same way,
 * in pieces, after its header. */
#include "http.h"
#include "elfnote.h"
#include "log.h"
#include "nngerr.h"
#include "tls.h"

#include <arpa/inet.h>
#include <errno.h>
#include <inttypes.h>
#include <pthread.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <time.h>
#include <unistd.h>
#include <nng/nng.h>
#include <nng/supplemental/http/http.h>

#define NWORKERS 16
#define IO_CHUNK (256 * 1024)
#define IO_TIMEOUT_MS 30000 /* a peer silent this long is dropped */
/* A body must arrive at MIN_RATE bytes per RATE_WINDOW seconds at least,
 * so that a client trickling bytes cannot hold a worker for ever. */
#define RATE_WINDOW 30
#define MIN_RATE (64 * 1024)
/* A body we will not use (a refused upload) is still read and dropped up
 * to this size, so that the client, still sending, sees our answer instead
 * of a reset connection; a larger one closes the connection. */
#define DRAIN_MAX ((uint64_t)64 << 20)
#define MISSING_MAX_BYTES ((uint64_t)8 << 20) /* 100,000 lines of 64 digits and CRLF */

enum route { ROUTE_UPLOAD, ROUTE_MISSING, ROUTE_BUILDID, ROUTE_METRICS };

struct job {
	struct job *jb_next;
	nng_aio *jb_aio;
	enum route jb_route;
};

struct worker {
	struct fp_http *wk_http;
	pthread_t wk_thread;
	int wk_started;
	nng_aio *wk_aio; /* this worker's own reads and writes on connections */
	char *wk_buf;
};

struct fp_http {
	struct fp_http_opts ht_o;
	char *ht_token;
	nng_http_server *ht_server;
	int ht_started;
	struct worker ht_workers[NWORKERS];
	pthread_mutex_t ht_lock; /* the queue and the counters */
	pthread_cond_t ht_cond;
	struct job *ht_head, **ht_tail;
	int ht_stopping;
	struct fp_http_stats ht_stats;
};

/* One request on a worker. */
struct request {
	struct fp_http *rq_http;
	struct worker *rq_worker;
	nng_http_req *rq_req;
	nng_http_conn *rq_conn;
	uint64_t rq_body; /* its Content-Length */
	int rq_body_done; /* the body was read (or there is none) */
	int rq_expect;    /* Expect: 100-continue: the client waits before sending */
};

#define COUNT(h, field) \
	do { \
		pthread_mutex_lock(&(h)->ht_lock); \
		(h)->ht_stats.field++; \
		pthread_mutex_unlock(&(h)->ht_lock); \
	} while (0)

int fp_http_token_eq(const char *header, const char *token)
{
	size_t tl = strlen(token), gl, i;
	unsigned char diff;

	/* The scheme is case-insensitive (RFC 7235); its length is public. */
	if (!header || strncasecmp(header, "Bearer ", 7) != 0)
		return 0;
	header += 7;
	gl = strlen(header);
	/* Every byte of the token is compared, whatever differs first. */
	diff = gl != tl;
	for (i = 0; i < tl; i++)
		diff |= (unsigned char)token[i] ^ (unsigned char)(i < gl ? header[i] : 0);
	return diff == 0;
}

/* json_escape: s as the inside of a JSON string; bytes outside printable
 * ASCII become \u00XX so that any input makes valid JSON. */
static void json_escape(const char *s, char *out, size_t len)
{
	size_t o = 0;

	for (; *s && o + 7 < len; s++) {
		unsigned char c = (unsigned char)*s;
		if (c == '"' || c == '\\') {
			out[o++] = '\\';
			out[o++] = (char)c;
		} else if (c < 0x20 || c >= 0x7f) {
			o += (size_t)snprintf(out + o, len - o, "\\u%04x", c);
		} else {
			out[o++] = (char)c;
		}
	}
	out[o] = '\0';
}

static int conn_read(struct request *rq, void *buf, size_t len, size_t *got)
{
	nng_aio *aio = rq->rq_worker->wk_aio;
	nng_iov iov = { .iov_buf = buf, .iov_len = len };
	int rv;

	nng_aio_set_iov(aio, 1, &iov);
	nng_aio_set_timeout(aio, IO_TIMEOUT_MS);
	nng_http_conn_read(rq->rq_conn, aio);
	nng_aio_wait(aio);
	if ((rv = nng_aio_result(aio)))
		return rv;
	*got = nng_aio_count(aio);
	return 0;
}

static int conn_write_all(struct request *rq, const void *buf, size_t len)
{
	nng_aio *aio = rq->rq_worker->wk_aio;
	nng_iov iov = { .iov_buf = (void *)buf, .iov_len = len };

	nng_aio_set_iov(aio, 1, &iov);
	nng_aio_set_timeout(aio, IO_TIMEOUT_MS);
	nng_http_conn_write_all(rq->rq_conn, aio);
	nng_aio_wait(aio);
	return nng_aio_result(aio);
}

/* continue_body: the interim answer a client sent Expect: 100-continue
 * waits for before sending the body. */
static int continue_body(struct request *rq)
{
	static const char msg[] = "HTTP/1.1 100 Continue\r\n\r\n";

	if (!rq->rq_expect)
		return 0;
	rq->rq_expect = 0;
	return conn_write_all(rq, msg, sizeof(msg) - 1);
}

/* read_body: the body in pieces to fn (NULL: dropped).  An nng error
 * (the connection failed) or fn's negative errno. */
static int read_body(struct request *rq, int (*fn)(void *arg, const char *buf, size_t len),
		     void *arg)
{
	uint64_t left = rq->rq_body, window_bytes = 0;
	char *buf = rq->rq_worker->wk_buf;
	time_t window = time(NULL);
	int rv;

	if ((rv = continue_body(rq)))
		return rv;
	while (left > 0) {
		size_t got = 0;
		/* Never past the body: the next request may follow it. */
		if ((rv = conn_read(rq, buf, left < IO_CHUNK ? (size_t)left : IO_CHUNK, &got)))
			return rv;
		left -= got;
		if (fn && (rv = fn(arg, buf, got)))
			return rv;
		window_bytes += got;
		if (left > 0 && time(NULL) - window >= RATE_WINDOW) {
			if (window_bytes < MIN_RATE)
				return NNG_ETIMEDOUT;
			window = time(NULL);
			window_bytes = 0;
		}
	}
	rq->rq_body_done = 1;
	return 0;
}

/* respond: a complete answer.  A body still unread is dropped, or the
 * connection is closed after the answer. */
static nng_http_res *respond(struct request *rq, uint16_t status, const char *type,
			     const void *body, size_t len)
{
	nng_http_res *res;

	if (nng_http_res_alloc(&res))
		return NULL;
	/* nng cannot copy an empty body (its zero-byte allocation fails). */
	if (nng_http_res_set_status(res, status) ||
	    nng_http_res_set_header(res, "Content-Type", type) ||
	    (len ? nng_http_res_copy_data(res, body, len)
		 : nng_http_res_set_header(res, "Content-Length", "0"))) {
		nng_http_res_free(res);
		return NULL;
	}
	if (!rq->rq_body_done) {
		/* A client waiting for 100 Continue has sent nothing: it gives
		 * up the request, and the connection, on a final answer.  A
		 * body of unknown length cannot be skipped. */
		if (rq->rq_expect || rq->rq_body == 0 || rq->rq_body > DRAIN_MAX ||
		    read_body(rq, NULL, NULL))
			nng_http_res_set_header(res, "Connection", "close");
	}
	return res;
}

static nng_http_res *json_error(struct request *rq, uint16_t status, const char *fmt, ...)
	__attribute__((format(printf, 3, 4)));

static nng_http_res *json_error(struct request *rq, uint16_t status, const char *fmt, ...)
{
	char msg[512], esc[1024], body[1100];
	va_list ap;
	int n;

	va_start(ap, fmt);
	vsnprintf(msg, sizeof(msg), fmt, ap);
	va_end(ap);
	json_escape(msg, esc, sizeof(esc));
	n = snprintf(body, sizeof(body), "{\"error\": \"%s\"}\n", esc);
	return respond(rq, status, "application/json", body, (size_t)n);
}

/* body_length: Content-Length into rq_body.  0, or an HTTP status. */
static uint16_t body_length(struct request *rq)
{
	const char *cl = nng_http_req_get_header(rq->rq_req, "Content-Length");
	const char *te = nng_http_req_get_header(rq->rq_req, "Transfer-Encoding");
	const char *ex = nng_http_req_get_header(rq->rq_req, "Expect");
	uint64_t v = 0;
	size_t i;

	rq->rq_expect = ex && !strcasecmp(ex, "100-continue");
	if (te)
		return 411; /* chunked bodies: a length is required */
	if (!cl) {
		rq->rq_body_done = 1;
		return 0;
	}
	for (i = 0; cl[i]; i++) {
		if (cl[i] < '0' || cl[i] > '9' || v > (UINT64_MAX - 9) / 10)
			return 400;
		v = v * 10 + (uint64_t)(cl[i] - '0');
	}
	if (i == 0)
		return 400;
	rq->rq_body = v;
	rq->rq_body_done = v == 0;
	return 0;
}

/* length_error: the answer when body_length failed; the body is unknown,
 * so the connection cannot be kept. */
static nng_http_res *length_error(struct request *rq, uint16_t status)
{
	nng_http_res *res;

	rq->rq_body_done = 1;
	res = status == 411 ? json_error(rq, 411,
					 "send the body with a Content-Length "
					 "(chunked transfer encoding is not supported)")
			    : json_error(rq, 400, "invalid Content-Length");
	if (res)
		nng_http_res_set_header(res, "Connection", "close");
	return res;
}

/* parse_query: ?build_id=HEX&kind=auto|debuginfo|executable.  0, or -1
 * with a message. */
static int parse_query(const char *uri, char *want, size_t wantlen, int *kind, char *msg,
		       size_t msglen)
{
	const char *p = strchr(uri, '?');

	*kind = 0;
	want[0] = '\0';
	if (!p)
		return 0;
	for (p++; *p;) {
		size_t n = strcspn(p, "&"), klen = strcspn(p, "=&");
		char val[80] = "";

		if (klen < n) { /* key=value */
			size_t vlen = n - klen - 1;
			if (vlen >= sizeof(val)) {
				snprintf(msg, msglen, "query parameter '%.*s' is too long",
					 (int)klen, p);
				return -1;
			}
			memcpy(val, p + klen + 1, vlen);
			val[vlen] = '\0';
		}
		if (klen == 8 && !strncmp(p, "build_id", 8)) {
			if (!fp_store_hex_valid(val) || strlen(val) >= wantlen) {
				snprintf(msg, msglen,
					 "invalid build_id '%s' (expected 2 to 64 lowercase hex digits)",
					 val);
				return -1;
			}
			strcpy(want, val);
		} else if (klen == 4 && !strncmp(p, "kind", 4)) {
			if (strcmp(val, "auto") && (*kind = fp_store_kind_parse(val)) < 0) {
				snprintf(msg, msglen,
					 "invalid kind '%s' (expected auto, debuginfo or executable)",
					 val);
				return -1;
			}
			if (!strcmp(val, "auto"))
				*kind = 0;
		} else if (n > 0) {
			snprintf(msg, msglen, "unknown query parameter '%.*s'",
				 (int)(klen < 40 ? klen : 40), p);
			return -1;
		}
		p += n;
		if (*p == '&')
			p++;
	}
	return 0;
}

static void kinds_json(int kinds, char *buf, size_t len)
{
	snprintf(buf, len, "[%s%s%s]", kinds & FP_STORE_DEBUGINFO ? "\"debuginfo\"" : "",
		 kinds == FP_STORE_ANY ? ", " : "",
		 kinds & FP_STORE_EXECUTABLE ? "\"executable\"" : "");
}

static nng_http_res *upload_ok(struct request *rq, const char *hex, int kinds, int created)
{
	char body[256], kj[64];
	int n;

	kinds_json(kinds, kj, sizeof(kj));
	n = snprintf(body, sizeof(body),
		     "{\"build_id\": \"%s\", \"status\": \"%s\", \"kinds\": %s}\n", hex,
		     created ? "stored" : "exists", kj);
	return respond(rq, 200, "application/json", body, (size_t)n);
}

struct spool {
	int sp_fd;
	int sp_err; /* first write error: the rest of the body is still read */
};

static int spool_write(void *arg, const char *buf, size_t len)
{
	struct spool *sp = arg;

	while (len > 0 && !sp->sp_err) {
		ssize_t n = write(sp->sp_fd, buf, len);
		if (n < 0 && errno == EINTR)
			continue;
		if (n < 0) {
			sp->sp_err = errno;
			break;
		}
		buf += n;
		len -= (size_t)n;
	}
	return 0;
}

/* reject: count and log a refused upload, and answer it. */
static nng_http_res *reject(struct request *rq, uint16_t status, const char *msg)
{
	struct fp_http *h = rq->rq_http;

	pthread_mutex_lock(&h->ht_lock);
	if (status == 401)
		h->ht_stats.hs_unauthorized++;
	else if (status == 413)
		h->ht_stats.hs_too_large++;
	else if (status >= 500)
		h->ht_stats.hs_errors++;
	else
		h->ht_stats.hs_bad++;
	pthread_mutex_unlock(&h->ht_lock);
	fp_info("upload refused (%u): %s", status, msg);
	return json_error(rq, status, "%s", msg);
}

/* inspect: the spooled file's build-ID and kinds; 0, or an HTTP status
 * with a message. */
static uint16_t inspect(int fd, char *hex, int *kinds, char *msg, size_t msglen)
{
	struct fp_build_id id;
	unsigned char magic[4];
	int err;

	if (pread(fd, magic, 4, 0) != 4 || memcmp(magic, "\177ELF", 4)) {
		snprintf(msg, msglen, "not an ELF file");
		return 400;
	}
	err = fp_elfnote_build_id(fd, &id);
	if (err == -ENOENT) {
		snprintf(msg, msglen,
			 "the ELF file has no GNU build-ID note (link with --build-id)");
		return 400;
	}
	if (err == -EINVAL) {
		snprintf(msg, msglen, "malformed ELF file");
		return 400;
	}
	if (err) {
		snprintf(msg, msglen, "cannot read the build-ID: %s", strerror(-err));
		return 500;
	}
	fp_build_id_hex(&id, hex);
	if (strlen(hex) < 4) {
		snprintf(msg, msglen, "build-ID %s is too short to be stored", hex);
		return 400;
	}
	if ((err = fp_store_classify_isolated(fd, kinds))) {
		snprintf(msg, msglen, "malformed ELF file");
		return err == -EINVAL ? 400 : 500;
	}
	if (!*kinds) {
		snprintf(msg, msglen, "the ELF file has neither debug information nor code");
		return 400;
	}
	return 0;
}

/* token_missing: whether a token is configured and the request does not
 * carry it; then *res is the 401 answer, counted and logged.  status is
 * body_length's: a body of unknown length closes the connection. */
static int token_missing(struct request *rq, uint16_t status, const char *what, nng_http_res **res)
{
	struct fp_http *h = rq->rq_http;
	const char *auth = nng_http_req_get_header(rq->rq_req, "Authorization");
	const char *why = auth ? "wrong token"
			       : "a token is required (Authorization: Bearer TOKEN)";

	if (!h->ht_token || fp_http_token_eq(auth, h->ht_token))
		return 0;
	if (status)
		rq->rq_body_done = 0;
	COUNT(h, hs_unauthorized);
	fp_info("%s refused (401): %s", what, why);
	*res = json_error(rq, 401, "%s", why);
	if (*res)
		nng_http_res_set_header(*res, "WWW-Authenticate", "Bearer");
	return 1;
}

static int handle_upload(struct request *rq, nng_http_res **res)
{
	struct fp_http *h = rq->rq_http;
	char want[FP_STORE_HEX_MAX + 1], hex[2 * FP_BUILD_ID_MAX + 1], tmp[4200], msg[512];
	struct spool sp = { .sp_fd = -1 };
	int kind, kinds, created = 0, err;
	uint16_t status;

	/* The length first: even a refusal must know what to skip. */
	status = body_length(rq);
	if (token_missing(rq, status, "upload", res))
		return 0;
	if (status) {
		*res = length_error(rq, status);
		COUNT(h, hs_bad);
		return 0;
	}
	if (parse_query(nng_http_req_get_uri(rq->rq_req), want, sizeof(want), &kind, msg,
			sizeof(msg))) {
		*res = reject(rq, 400, msg);
		return 0;
	}
	if (rq->rq_body > h->ht_o.ho_max_upload) {
		snprintf(msg, sizeof(msg),
			 "upload of %" PRIu64 " bytes is over this server's limit of %" PRIu64
			 " MB",
			 rq->rq_body, h->ht_o.ho_max_upload >> 20);
		*res = reject(rq, 413, msg);
		return 0;
	}
	if (rq->rq_body == 0) {
		*res = reject(rq, 400, "empty body: send the ELF file as the request body");
		return 0;
	}
	/* Already stored in every kind asked for: answered before the body is
	 * sent (with Expect: 100-continue) or read. */
	if (want[0]) {
		int mask = kind ? kind : FP_STORE_ANY;
		if (fp_store_has(h->ht_o.ho_store, want, mask) == mask) {
			COUNT(h, hs_exists);
			fp_info("upload %s: already stored", want);
			*res = upload_ok(rq, want, mask, 0);
			return 0;
		}
	}

	sp.sp_fd = fp_store_tmpfile(h->ht_o.ho_store, tmp, sizeof(tmp));
	if (sp.sp_fd < 0) {
		snprintf(msg, sizeof(msg), "cannot create a file in the store: %s",
			 strerror(-sp.sp_fd));
		fp_warnx("%s", msg);
		*res = reject(rq, 500, msg);
		return 0;
	}
	if ((err = read_body(rq, spool_write, &sp))) {
		/* The client went away or stalled (or we are stopping): nobody
		 * to answer. */
		fp_info("upload cut off before the end of its body: %s", nng_strerror(err));
		close(sp.sp_fd);
		fp_store_discard(tmp);
		return -1;
	}
	if (sp.sp_err) {
		snprintf(msg, sizeof(msg), "cannot write to the store: %s", strerror(sp.sp_err));
		fp_warnx("%s", msg);
		*res = reject(rq, 500, msg);
		goto out;
	}
	if ((status = inspect(sp.sp_fd, hex, &kinds, msg, sizeof(msg)))) {
		*res = reject(rq, status, msg);
		goto out;
	}
	if (want[0] && strcmp(want, hex)) {
		snprintf(msg, sizeof(msg), "build-ID mismatch: the file's build-ID is %s, not %s",
			 hex, want);
		*res = reject(rq, 400, msg);
		goto out;
	}
	if (kind && !(kinds & kind)) {
		snprintf(msg, sizeof(msg), "kind=%s, but the file %s", fp_store_kind_name(kind),
			 kind == FP_STORE_DEBUGINFO ? "has no debug information"
						    : "has no code (a detached debug file?)");
		*res = reject(rq, 400, msg);
		goto out;
	}
	if (kind)
		kinds = kind;
	if (fp_store_has(h->ht_o.ho_store, hex, kinds) != kinds) {
		err = fp_store_commit(h->ht_o.ho_store, tmp, hex, kinds, &created);
		tmp[0] = '\0'; /* commit removed it */
		if (err) {
			snprintf(msg, sizeof(msg), "cannot store %s: %s", hex, strerror(-err));
			fp_warnx("%s", msg);
			*res = reject(rq, 500, msg);
			goto out;
		}
	}
	if (created) {
		struct fp_build_id added;
		/* The renamed file is still open: its symbols go to the cache
		 * now, so frames of this build-ID resolve from the next batch. */
		err = fp_resolver_add_file(h->ht_o.ho_resolver, sp.sp_fd, &added);
		if (err) {
			COUNT(h, hs_ingest_failed);
			fp_info("upload %s: stored, but no symbols taken: %s", hex, strerror(-err));
		}
		COUNT(h, hs_stored);
	} else {
		COUNT(h, hs_exists);
	}
	fp_info("upload %s: %s as %s%s%s, %" PRIu64 " bytes", hex,
		created ? "stored" : "already stored",
		kinds & FP_STORE_DEBUGINFO ? "debuginfo" : "", kinds == FP_STORE_ANY ? " and " : "",
		kinds & FP_STORE_EXECUTABLE ? "executable" : "", rq->rq_body);
	*res = upload_ok(rq, hex, kinds, created);
out:
	close(sp.sp_fd);
	fp_store_discard(tmp);
	return 0;
}

struct membuf {
	char *mb_data;
	size_t mb_len;
};

static int membuf_write(void *arg, const char *buf, size_t len)
{
	struct membuf *mb = arg;

	memcpy(mb->mb_data + mb->mb_len, buf, len);
	mb->mb_len += len;
	return 0;
}

/* is_missing: neither the cache nor the store has hex. */
static int is_missing(struct fp_http *h, const char *hex)
{
	struct fp_build_id id;

	if (fp_build_id_parse(hex, &id) == 0 && id.fb_len &&
	    fp_resolver_has(h->ht_o.ho_resolver, &id))
		return 0;
	return !fp_store_has(h->ht_o.ho_store, hex, FP_STORE_ANY);
}

static int handle_missing(struct request *rq, nng_http_res **res)
{
	struct fp_http *h = rq->rq_http;
	struct membuf in = { 0 }, out = { 0 };
	size_t count = 0, nmissing = 0, line = 0;
	uint16_t status;
	char *p, *end;
	int err;

	status = body_length(rq);
	if (h->ht_o.ho_token_reads && token_missing(rq, status, "/v1/missing", res))
		return 0;
	if (status) {
		*res = length_error(rq, status);
		return 0;
	}
	if (rq->rq_body > MISSING_MAX_BYTES) {
		*res = json_error(rq, 413, "at most %d build-IDs (%" PRIu64 " bytes) per request",
				  FP_HTTP_MAX_MISSING, MISSING_MAX_BYTES);
		return 0;
	}
	/* The answer is never longer than the question. */
	if (!(in.mb_data = malloc(rq->rq_body + 1)) || !(out.mb_data = malloc(rq->rq_body + 1))) {
		*res = json_error(rq, 500, "out of memory");
		goto out;
	}
	if ((err = read_body(rq, membuf_write, &in))) {
		free(in.mb_data);
		free(out.mb_data);
		return -1;
	}
	in.mb_data[in.mb_len] = '\0';
	for (p = in.mb_data; *p; p = end) {
		size_t n;
		end = p + strcspn(p, "\n");
		if (*end)
			*end++ = '\0';
		line++;
		n = strlen(p);
		while (n > 0 && (p[n - 1] == '\r' || p[n - 1] == ' ' || p[n - 1] == '\t'))
			p[--n] = '\0';
		if (n == 0)
			continue;
		if (!fp_store_hex_valid(p)) {
			*res = json_error(rq, 400,
					  "line %zu: '%.80s' is not a build-ID (2 to 64 lowercase hex digits)",
					  line, p);
			goto out;
		}
		if (++count > FP_HTTP_MAX_MISSING) {
			*res = json_error(rq, 413, "at most %d build-IDs per request",
					  FP_HTTP_MAX_MISSING);
			goto out;
		}
		if (is_missing(h, p)) {
			nmissing++;
			memcpy(out.mb_data + out.mb_len, p, n);
			out.mb_len += n;
			out.mb_data[out.mb_len++] = '\n';
		}
	}
	COUNT(h, hs_missing_queries);
	fp_debug("missing: %zu asked, %zu missing", count, nmissing);
	*res = respond(rq, 200, "text/plain; charset=utf-8", out.mb_data, out.mb_len);
out:
	free(in.mb_data);
	free(out.mb_data);
	return 0;
}

/* send_file: the header, then the file in pieces (the handler's aio is
 * then finished with no response, since this one is written).  0, or -1:
 * the connection must be closed. */
static int send_file(struct request *rq, int fd, uint64_t size, int head)
{
	char *buf = rq->rq_worker->wk_buf, len[32];
	nng_aio *aio = rq->rq_worker->wk_aio;
	nng_http_res *res;
	uint64_t off = 0;
	int rv;

	if (nng_http_res_alloc(&res))
		return -1;
	snprintf(len, sizeof(len), "%" PRIu64, size);
	rv = nng_http_res_set_status(res, 200);
	if (!rv)
		rv = nng_http_res_set_header(res, "Content-Type", "application/octet-stream");
	if (!rv)
		rv = nng_http_res_set_header(res, "Content-Length", len);
	if (!rv)
		rv = nng_http_res_set_header(res, "X-Debuginfod-Size", len);
	if (!rv && !rq->rq_body_done)
		rv = nng_http_res_set_header(res, "Connection", "close");
	if (!rv) {
		nng_aio_set_timeout(aio, IO_TIMEOUT_MS);
		nng_http_conn_write_res(rq->rq_conn, res, aio);
		nng_aio_wait(aio);
		rv = nng_aio_result(aio);
	}
	nng_http_res_free(res);
	while (!rv && !head && off < size) {
		ssize_t n = pread(fd, buf, IO_CHUNK, (off_t)off);
		if (n <= 0) /* truncated under us: the client sees a short body */
			return -1;
		rv = conn_write_all(rq, buf, (size_t)n);
		off += (uint64_t)n;
	}
	if (rv)
		return -1;
	return rq->rq_body_done ? 0 : -1;
}

static int handle_buildid(struct request *rq, nng_http_res **res)
{
	struct fp_http *h = rq->rq_http;
	const char *uri = nng_http_req_get_uri(rq->rq_req);
	char path[256], *hex, *what;
	uint64_t size;
	int kind, fd, err;
	size_t n;

	if (body_length(rq))
		rq->rq_body_done = 0; /* unknown: close after the answer */
	if (h->ht_o.ho_token_reads && token_missing(rq, 0, "download", res))
		return 0;
	n = strcspn(uri, "?");
	if (n >= sizeof(path) || strncmp(uri, "/buildid/", 9)) {
		*res = json_error(rq, 404, "no such resource");
		return 0;
	}
	memcpy(path, uri, n);
	path[n] = '\0';
	hex = path + 9;
	if (!(what = strchr(hex, '/'))) {
		*res = json_error(rq, 404, "use /buildid/HEX/debuginfo or /buildid/HEX/executable");
		return 0;
	}
	*what++ = '\0';
	/* Strictly hex, before anything touches the file system. */
	if (!fp_store_hex_valid(hex)) {
		*res = json_error(rq, 400,
				  "invalid build-ID (expected 2 to 64 lowercase hex digits)");
		return 0;
	}
	if (!strcmp(what, "debuginfo")) {
		kind = FP_STORE_DEBUGINFO;
	} else if (!strcmp(what, "executable")) {
		kind = FP_STORE_EXECUTABLE;
	} else {
		*res = json_error(rq, 404, "only debuginfo and executable are served");
		return 0;
	}
	fd = fp_store_open_file(h->ht_o.ho_store, hex, kind, &size);
	if (fd < 0) {
		COUNT(h, hs_not_found);
		fp_debug("debuginfod: %s %s not stored", hex, what);
		*res = json_error(rq, 404, "%s of %s is not stored", what, hex);
		return 0;
	}
	err = send_file(rq, fd, size, !strcmp(nng_http_req_get_method(rq->rq_req), "HEAD"));
	close(fd);
	if (err)
		return -1;
	COUNT(h, hs_served);
	fp_debug("debuginfod: sent %s %s (%" PRIu64 " bytes)", hex, what, size);
	*res = NULL;
	return 1;
}

static int handle_metrics(struct request *rq, nng_http_res **res)
{
	struct fp_http *h = rq->rq_http;
	char *text = NULL;
	size_t len = 0;
	int err;

	if (body_length(rq))
		rq->rq_body_done = 0; /* unknown: close after the answer */
	err = h->ht_o.ho_metrics(h->ht_o.ho_metrics_arg, h, &text, &len);
	if (err) {
		COUNT(h, hs_errors);
		*res = json_error(rq, 500, "cannot render the metrics: %s", strerror(-err));
		return 0;
	}
	*res = respond(rq, 200, "text/plain; version=0.0.4; charset=utf-8", text, len);
	free(text);
	return 0;
}

static void handle(struct fp_http *h, struct worker *w, struct job *j)
{
	struct request rq = { .rq_http = h, .rq_worker = w, .rq_body_done = 1 };
	nng_http_res *res = NULL;
	int err;

	rq.rq_req = nng_aio_get_input(j->jb_aio, 0);
	rq.rq_conn = nng_aio_get_input(j->jb_aio, 2);
	switch (j->jb_route) {
	case ROUTE_UPLOAD:
		err = handle_upload(&rq, &res);
		break;
	case ROUTE_MISSING:
		err = handle_missing(&rq, &res);
		break;
	case ROUTE_METRICS:
		err = handle_metrics(&rq, &res);
		break;
	default:
		err = handle_buildid(&rq, &res);
		break;
	}
	if (err == 1) { /* the answer is written: nng reads the next request */
		nng_aio_set_output(j->jb_aio, 0, NULL);
		nng_aio_finish(j->jb_aio, 0);
		return;
	}
	if (err || !res) {
		/* Nothing sensible to send: nng closes the connection. */
		if (res)
			nng_http_res_free(res);
		nng_aio_finish(j->jb_aio, NNG_ECLOSED);
		return;
	}
	nng_aio_set_output(j->jb_aio, 0, res);
	nng_aio_finish(j->jb_aio, 0);
}

static void *worker_main(void *arg)
{
	struct worker *w = arg;
	struct fp_http *h = w->wk_http;
	struct job *j;

	for (;;) {
		pthread_mutex_lock(&h->ht_lock);
		while (!h->ht_head && !h->ht_stopping)
			pthread_cond_wait(&h->ht_cond, &h->ht_lock);
		j = h->ht_head;
		if (j) {
			h->ht_head = j->jb_next;
			if (!h->ht_head)
				h->ht_tail = &h->ht_head;
			h->ht_stats.hs_queued--;
		}
		pthread_mutex_unlock(&h->ht_lock);
		if (!j)
			return NULL; /* stopping, queue empty */
		handle(h, w, j);
		free(j);
	}
}

/* enqueue: runs on an nng thread; never blocks for long. */
static void enqueue(nng_aio *aio, enum route route)
{
	nng_http_handler *hd = nng_aio_get_input(aio, 1);
	struct fp_http *h = nng_http_handler_get_data(hd);
	struct job *j = calloc(1, sizeof(*j));

	if (!j) {
		nng_aio_finish(aio, NNG_ENOMEM);
		return;
	}
	j->jb_aio = aio;
	j->jb_route = route;
	pthread_mutex_lock(&h->ht_lock);
	*h->ht_tail = j;
	h->ht_tail = &j->jb_next;
	h->ht_stats.hs_queued++;
	pthread_cond_signal(&h->ht_cond);
	pthread_mutex_unlock(&h->ht_lock);
}

static void on_upload(nng_aio *aio)
{
	enqueue(aio, ROUTE_UPLOAD);
}

static void on_missing(nng_aio *aio)
{
	enqueue(aio, ROUTE_MISSING);
}

static void on_buildid(nng_aio *aio)
{
	enqueue(aio, ROUTE_BUILDID);
}

static void on_metrics(nng_aio *aio)
{
	enqueue(aio, ROUTE_METRICS);
}

static int add_handler(struct fp_http *h, const char *path, const char *method,
		       void (*cb)(nng_aio *), int tree)
{
	nng_http_handler *hd;
	int rv;

	if ((rv = nng_http_handler_alloc(&hd, path, cb)))
		return rv;
	if ((rv = nng_http_handler_set_method(hd, method)) ||
	    (rv = nng_http_handler_collect_body(hd, false, 0)) ||
	    (rv = nng_http_handler_set_data(hd, h, NULL)) ||
	    (tree && (rv = nng_http_handler_set_tree(hd))) ||
	    (rv = nng_http_server_add_handler(h->ht_server, hd))) {
		nng_http_handler_free(hd);
		return rv;
	}
	return 0; /* hd is the server's from here on */
}

static int set_tls(struct fp_http *h)
{
	/* Clients of the symbol service (build pipelines, debuginfod
	 * clients) show no certificate: the token is their credential. */
	struct fp_tls_opts server_only = { .to_cert = h->ht_o.ho_tls->to_cert,
					   .to_key = h->ht_o.ho_tls->to_key };
	nng_tls_config *cfg;
	int rv;

	if (fp_tls_server_config(&cfg, &server_only, "HTTPS"))
		return NNG_EINVAL;
	rv = nng_http_server_set_tls(h->ht_server, cfg);
	nng_tls_config_free(cfg);
	return rv;
}

/* host_port: addr without its http:// or https:// (the options say
 * which it is). */
static const char *host_port(const char *addr)
{
	if (!strncmp(addr, "http://", 7))
		return addr + 7;
	return strncmp(addr, "https://", 8) ? addr : addr + 8;
}

int fp_http_addr_loopback(const char *addr)
{
	char url[512], buf[16];
	nng_url *u;
	int ret;

	if (snprintf(url, sizeof(url), "http://%s", host_port(addr)) >= (int)sizeof(url) ||
	    nng_url_parse(&u, url))
		return 0;
	ret = !strcmp(u->u_hostname, "localhost") ||
	      (inet_pton(AF_INET, u->u_hostname, buf) == 1 && (unsigned char)buf[0] == 127) ||
	      !strcmp(u->u_hostname, "::1");
	nng_url_free(u);
	return ret;
}

int fp_http_start(struct fp_http **out, const struct fp_http_opts *o)
{
	char url[512];
	nng_url *u = NULL;
	struct fp_http *h;
	int rv, i;

	if (!o->ho_addr || !o->ho_addr[0] || !o->ho_store || !o->ho_resolver)
		return -EINVAL;
	if (snprintf(url, sizeof(url), "%s://%s", o->ho_tls ? "https" : "http",
		     host_port(o->ho_addr)) >= (int)sizeof(url))
		return -EINVAL;
	if ((rv = nng_url_parse(&u, url))) {
		fp_warnx("invalid HTTP address %s: %s", o->ho_addr, nng_strerror(rv));
		return -EINVAL;
	}
	if (strcmp(u->u_path, "") && strcmp(u->u_path, "/")) {
		fp_warnx("invalid HTTP address %s: expected HOST:PORT", o->ho_addr);
		nng_url_free(u);
		return -EINVAL;
	}
	if (!(h = calloc(1, sizeof(*h)))) {
		nng_url_free(u);
		return -ENOMEM;
	}
	h->ht_o = *o;
	h->ht_tail = &h->ht_head;
	pthread_mutex_init(&h->ht_lock, NULL);
	pthread_cond_init(&h->ht_cond, NULL);
	if (o->ho_token && o->ho_token[0] && !(h->ht_token = strdup(o->ho_token))) {
		rv = NNG_ENOMEM;
		goto fail;
	}
	for (i = 0; i < NWORKERS; i++) {
		struct worker *w = &h->ht_workers[i];
		w->wk_http = h;
		if ((rv = nng_aio_alloc(&w->wk_aio, NULL, NULL)))
			goto fail;
		if (!(w->wk_buf = malloc(IO_CHUNK))) {
			rv = NNG_ENOMEM;
			goto fail;
		}
		if (pthread_create(&w->wk_thread, NULL, worker_main, w)) {
			rv = NNG_ENOMEM;
			goto fail;
		}
		w->wk_started = 1;
	}
	if ((rv = nng_http_server_hold(&h->ht_server, u)) || (o->ho_tls && (rv = set_tls(h))) ||
	    (rv = add_handler(h, "/v1/upload", "POST", on_upload, 0)) ||
	    (rv = add_handler(h, "/v1/missing", "POST", on_missing, 0)) ||
	    (rv = add_handler(h, "/buildid", "GET", on_buildid, 1)) ||
	    (o->ho_metrics && (rv = add_handler(h, "/metrics", "GET", on_metrics, 0))))
		goto fail;
	if ((rv = nng_http_server_start(h->ht_server))) {
		fp_warnx("cannot listen on %s (HTTP): %s", o->ho_addr, nng_strerror(rv));
		goto fail;
	}
	h->ht_started = 1;
	nng_url_free(u);
	*out = h;
	return 0;
fail:
	if (rv != NNG_EADDRINUSE)
		fp_warnx("cannot serve HTTP on %s: %s", o->ho_addr, nng_strerror(rv));
	nng_url_free(u);
	fp_http_stop(h);
	return fp_nng_errno(rv);
}

void fp_http_stop(struct fp_http *h)
{
	int i;

	if (!h)
		return;
	/* First no new requests and every connection closed, so that the
	 * workers' reads and writes end; then the workers finish what is
	 * queued (nng waits for those aios) and exit. */
	if (h->ht_started)
		nng_http_server_stop(h->ht_server);
	pthread_mutex_lock(&h->ht_lock);
	h->ht_stopping = 1;
	pthread_cond_broadcast(&h->ht_cond);
	pthread_mutex_unlock(&h->ht_lock);
	for (i = 0; i < NWORKERS; i++) {
		struct worker *w = &h->ht_workers[i];
		if (w->wk_started)
			pthread_join(w->wk_thread, NULL);
		if (w->wk_aio)
			nng_aio_free(w->wk_aio);
		free(w->wk_buf);
	}
	if (h->ht_server)
		nng_http_server_release(h->ht_server);
	pthread_cond_destroy(&h->ht_cond);
	pthread_mutex_destroy(&h->ht_lock);
	free(h->ht_token);
	free(h);
}

void fp_http_stats(struct fp_http *h, struct fp_http_stats *st)
{
	pthread_mutex_lock(&h->ht_lock);
	*st = h->ht_stats;
	pthread_mutex_unlock(&h->ht_lock);
}

void fp_http_log_stats(struct fp_http *h)
{
	struct fp_http_stats s;

	fp_http_stats(h, &s);
	fp_info("uploads: accepted %" PRIu64 " (stored %" PRIu64 ", already stored %" PRIu64
		", without symbols %" PRIu64 "), rejected %" PRIu64 " (unauthorized %" PRIu64
		", too large %" PRIu64 ", bad %" PRIu64 "), errors %" PRIu64
		"; missing queries %" PRIu64 "; debuginfod: served %" PRIu64 ", not found %" PRIu64,
		s.hs_stored + s.hs_exists, s.hs_stored, s.hs_exists, s.hs_ingest_failed,
		s.hs_unauthorized + s.hs_too_large + s.hs_bad, s.hs_unauthorized, s.hs_too_large,
		s.hs_bad, s.hs_errors, s.hs_missing_queries, s.hs_served, s.hs_not_found);
}
