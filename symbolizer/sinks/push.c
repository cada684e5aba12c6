/* push.c: the pusher of push.h: a thread per destination that sends the
 * spool's records (pusher.h) oldest first.  It peeks the oldest record,
 * sends it with the HTTP client of httpc.h on a connection of its own (a
 * response body is read only when its Content-Length is within
 * FP_PUSH_RESPONSE_MAX) and deletes it unless the failure is worth a retry; a
 * record that keeps failing is dropped after pu_max_attempts answered
 * attempts or once older than pu_max_age, so one request the destination
 * always refuses cannot hold up the queue. */
#include "cli.h"
#include "httpc.h"
#include "log.h"
#include "otlp_profiles_service.pb-c.h"
#include "pusher.h"
#include "spool.h"

#include <errno.h>
#include <inttypes.h>
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <time.h>
#include <unistd.h>
#include <nng/nng.h>
#include <nng/supplemental/http/http.h>

#define EXCERPT_MAX 400
#define STATS_EVERY_MS 60000

typedef Opentelemetry__Proto__Collector__Profiles__V1development__ExportProfilesServiceResponse
	pb_response;

enum outcome { SENT, RETRY, PERMANENT };

/* wait_until: on pu_cv, held pu_mu, until the monotonic time `ms`. */
static void wait_until(struct fp_push *p, uint64_t ms)
{
	struct timespec ts = { (time_t)(ms / 1000), (long)(ms % 1000) * 1000000 };

	pthread_cond_timedwait(&p->pu_cv, &p->pu_mu, &ts);
}

/* ---- sending ---- */

/* status_message: google.rpc.Status.message (field 2) of an OTLP error
 * body, or NULL. */
static const char *status_message(const uint8_t *b, size_t len, size_t *mlen)
{
	size_t i = 0;

	while (i < len) {
		uint64_t tag = 0, v = 0;
		int shift = 0;
		while (i < len && shift < 64) {
			tag |= (uint64_t)(b[i] & 0x7f) << shift;
			shift += 7;
			if (!(b[i++] & 0x80))
				break;
		}
		switch (tag & 7) {
		case 0:
			while (i < len && (b[i++] & 0x80))
				;
			break;
		case 1:
			i += 8;
			break;
		case 5:
			i += 4;
			break;
		case 2:
			shift = 0;
			while (i < len && shift < 64) {
				v |= (uint64_t)(b[i] & 0x7f) << shift;
				shift += 7;
				if (!(b[i++] & 0x80))
					break;
			}
			if (v > len - i)
				return NULL;
			if (tag >> 3 == 2) {
				*mlen = (size_t)v;
				return (const char *)b + i;
			}
			i += (size_t)v;
			break;
		default:
			return NULL;
		}
	}
	return NULL;
}

/* excerpt: the response body, printable, for a log line. */
static void excerpt(nng_http_res *res, char *out, size_t olen)
{
	const char *ct = nng_http_res_get_header(res, "Content-Type");
	void *data;
	size_t len, o = 0, mlen = 0;
	const uint8_t *b;

	nng_http_res_get_data(res, &data, &len);
	b = data;
	if (len && ct && strstr(ct, "protobuf")) {
		const char *m = status_message(b, len, &mlen);
		if (m) {
			b = (const uint8_t *)m;
			len = mlen;
		}
	}
	for (size_t i = 0; i < len && o + 4 < olen && i < EXCERPT_MAX; i++)
		out[o++] = b[i] >= 0x20 && b[i] < 0x7f ? (char)b[i] : b[i] == '\n' ? ' ' : '.';
	if (len > EXCERPT_MAX && o + 4 < olen) {
		memcpy(out + o, "...", 3);
		o += 3;
	}
	out[o] = '\0';
	if (!o)
		snprintf(out, olen, "(no body)");
}

/* partial_success: look at a 2xx OTLP answer. */
static void partial_success(struct fp_push *p, nng_http_res *res, const char *desc)
{
	void *data;
	size_t len;
	pb_response *r;

	nng_http_res_get_data(res, &data, &len);
	if (!len)
		return;
	r = opentelemetry__proto__collector__profiles__v1development__export_profiles_service_response__unpack(
		NULL, len, data);
	if (!r) {
		fp_debug("push %s: %s: the answer is no ExportProfilesServiceResponse", p->pu_name,
			 desc);
		return;
	}
	if (r->partial_success &&
	    (r->partial_success->rejected_profiles ||
	     (r->partial_success->error_message && r->partial_success->error_message[0]))) {
		int64_t n = r->partial_success->rejected_profiles;
		const char *msg = r->partial_success->error_message;
		fp_warnx("push %s: %s: partial success, %" PRId64 " profiles rejected: %s",
			 p->pu_name, desc, n, msg ? msg : "");
		pthread_mutex_lock(&p->pu_mu);
		p->pu_stats.ps_partial++;
		p->pu_stats.ps_rejected += n > 0 ? (uint64_t)n : 0;
		pthread_mutex_unlock(&p->pu_mu);
	}
	opentelemetry__proto__collector__profiles__v1development__export_profiles_service_response__free_unpacked(
		r, NULL);
}

/* split_record: the fields of a spool record, in place. */
static int split_record(char *rec, size_t len, char **f, uint8_t **body, size_t *blen)
{
	char *p = rec, *end = rec + len;

	for (int i = 0; i < 5; i++) {
		char *nl = memchr(p, '\n', (size_t)(end - p));
		if (!nl)
			return -EBADMSG;
		*nl = '\0';
		f[i] = p;
		p = nl + 1;
	}
	if (strcmp(f[0], FP_PUSH_RECORD_MAGIC) || f[1][0] != '/')
		return -EBADMSG;
	*body = (uint8_t *)p;
	*blen = (size_t)(end - p);
	return 0;
}

/* send_record: one attempt at the request of a spool record.  *reached:
 * whether the destination was reached (see transact); desc gets the
 * record's description for the logs. */
static enum outcome send_record(struct fp_push *p, char *rec, size_t len, uint64_t *retry_after,
				int *reached, char *desc, size_t dlen, char *why, size_t wlen)
{
	char *f[5], *uri = NULL, body_text[EXCERPT_MAX + 64];
	uint8_t *body;
	size_t blen;
	nng_http_req *req = NULL;
	nng_http_res *res = NULL;
	enum outcome out = RETRY;
	uint64_t timeout = p->pu_timeout;
	int64_t too_large = -1;
	uint16_t status;
	int rv;

	*retry_after = 0;
	*reached = 0;
	snprintf(desc, dlen, "a request");
	if (split_record(rec, len, f, &body, &blen)) {
		fp_warnx("push %s: deleting an unreadable spool record", p->pu_name);
		pthread_mutex_lock(&p->pu_mu);
		p->pu_stats.ps_damaged++;
		pthread_mutex_unlock(&p->pu_mu);
		return PERMANENT;
	}
	snprintf(desc, dlen, "%s", f[4]);
	if (asprintf(&uri, "%s%s", p->pu_path, f[1]) < 0) {
		snprintf(why, wlen, "out of memory");
		return RETRY;
	}
	if ((rv = nng_http_req_alloc(&req, fp_httpc_url(p->pu_http))) ||
	    (rv = nng_http_req_set_uri(req, uri)) || (rv = nng_http_req_set_method(req, "POST")) ||
	    (rv = nng_http_req_set_header(req, "Content-Type", f[2])) ||
	    (rv = nng_http_req_set_header(req, "User-Agent", "fleetprof/" FP_VERSION)) ||
	    (rv = nng_http_req_set_header(req, "Connection", "close")) ||
	    (f[3][0] && (rv = nng_http_req_set_header(req, "Content-Encoding", f[3]))))
		goto nng_fail;
	for (size_t i = 0; i < p->pu_nheaders; i++) {
		/* A User-Agent given replaces ours; other names may repeat. */
		rv = strcasecmp(p->pu_hname[i], "User-Agent")
			     ? nng_http_req_add_header(req, p->pu_hname[i], p->pu_hvalue[i])
			     : nng_http_req_set_header(req, p->pu_hname[i], p->pu_hvalue[i]);
		if (rv)
			goto nng_fail;
	}
	if ((rv = nng_http_req_set_data(req, body, blen)) || (rv = nng_http_res_alloc(&res)))
		goto nng_fail;

	pthread_mutex_lock(&p->pu_mu);
	if (p->pu_stop) { /* flushing: no request outlives the deadline */
		uint64_t now = fp_mono_ms();
		timeout = p->pu_deadline > now ? p->pu_deadline - now : 1;
		if (timeout > p->pu_timeout)
			timeout = p->pu_timeout;
	}
	pthread_mutex_unlock(&p->pu_mu);
	if ((rv = fp_httpc_transact(p->pu_http, req, res, timeout, FP_PUSH_RESPONSE_MAX, reached,
				    &too_large))) {
		snprintf(why, wlen, "%s: %s", p->pu_base,
			 rv == NNG_ETIMEDOUT ? "timed out"
			 : rv == NNG_EPROTO  ? "invalid response"
					     : nng_strerror(rv));
		goto out;
	}
	if (too_large >= 0) {
		fp_warnx("push %s: %s answered %s with a body of %" PRId64
			 " bytes, over the %zu-byte cap: not read",
			 p->pu_name, p->pu_base, desc, too_large, (size_t)FP_PUSH_RESPONSE_MAX);
		pthread_mutex_lock(&p->pu_mu);
		p->pu_stats.ps_too_large++;
		pthread_mutex_unlock(&p->pu_mu);
	}
	status = nng_http_res_get_status(res);
	if (status >= 200 && status < 300) {
		if (!strncmp(f[1], FP_PUSH_OTLP_PATH, strlen(FP_PUSH_OTLP_PATH)))
			partial_success(p, res, f[4]);
		fp_debug("push %s: %s: %u", p->pu_name, f[4], status);
		pthread_mutex_lock(&p->pu_mu);
		p->pu_stats.ps_pushed++;
		pthread_mutex_unlock(&p->pu_mu);
		out = SENT;
		goto out;
	}
	if (too_large >= 0)
		snprintf(body_text, sizeof(body_text), "(a body of %" PRId64 " bytes, not read)",
			 too_large);
	else
		excerpt(res, body_text, sizeof(body_text));
	if (status == 408 || status == 429 || status >= 500) {
		const char *ra = nng_http_res_get_header(res, "Retry-After");
		char *endp;
		unsigned long secs = ra ? strtoul(ra, &endp, 10) : 0;
		if (ra && endp != ra && !*endp)
			*retry_after = (uint64_t)secs * 1000;
		snprintf(why, wlen, "%s answered %u %s: %s", p->pu_base, status,
			 nng_http_res_get_reason(res), body_text);
		goto out;
	}
	fp_warnx("push %s: %s refused %s for good: %u %s: %s", p->pu_name, p->pu_base, f[4], status,
		 nng_http_res_get_reason(res), body_text);
	pthread_mutex_lock(&p->pu_mu);
	p->pu_stats.ps_permanent++;
	pthread_mutex_unlock(&p->pu_mu);
	out = PERMANENT;
	goto out;
nng_fail:
	snprintf(why, wlen, "cannot build the request: %s", nng_strerror(rv));
out:
	if (req)
		nng_http_req_free(req);
	if (res)
		nng_http_res_free(res);
	free(uri);
	return out;
}

/* ---- the pusher thread ---- */

static void collect(struct fp_push *p, struct fp_push_stats *st)
{
	struct fp_spool_stats ss;

	fp_spool_stats(p->pu_spool, &ss);
	pthread_mutex_lock(&p->pu_mu);
	*st = p->pu_stats;
	pthread_mutex_unlock(&p->pu_mu);
	st->ps_queued = ss.ss_added;
	st->ps_dropped = ss.ss_dropped + ss.ss_refused;
	st->ps_damaged += ss.ss_corrupt;
	st->ps_spool_files = ss.ss_files;
	st->ps_spool_bytes = ss.ss_bytes;
}

void fp_push_stats(struct fp_push *p, struct fp_push_stats *st)
{
	collect(p, st);
}

const char *fp_push_name(const struct fp_push *p)
{
	return p->pu_name;
}

static void log_stats(struct fp_push *p, const struct fp_push_stats *t)
{
	fp_info("push %s %s: queued %" PRIu64 ", pushed %" PRIu64 ", retried %" PRIu64
		", dropped %" PRIu64 ", permanent failures %" PRIu64 ", gave up %" PRIu64
		", partial successes %" PRIu64 " (%" PRIu64 " profiles rejected), damaged %" PRIu64
		", encode errors %" PRIu64 ", responses too large %" PRIu64 "; spool %" PRIu64
		" requests, %" PRIu64 " bytes",
		p->pu_name, p->pu_base, t->ps_queued, t->ps_pushed, t->ps_retried, t->ps_dropped,
		t->ps_permanent, t->ps_gave_up, t->ps_partial, t->ps_rejected, t->ps_damaged,
		t->ps_encode_errors, t->ps_too_large, t->ps_spool_files, t->ps_spool_bytes);
}

void fp_push_log_stats(struct fp_push *p)
{
	struct fp_push_stats st;

	collect(p, &st);
	log_stats(p, &st);
	pthread_mutex_lock(&p->pu_mu);
	p->pu_logged = st;
	pthread_mutex_unlock(&p->pu_mu);
}

/* maybe_log: the stats line, every minute when something changed (the
 * cadence of the server's line). */
static void maybe_log(struct fp_push *p, uint64_t *last)
{
	struct fp_push_stats st, logged;
	uint64_t now = fp_mono_ms();

	if (now - *last < STATS_EVERY_MS)
		return;
	*last = now;
	collect(p, &st);
	pthread_mutex_lock(&p->pu_mu);
	logged = p->pu_logged;
	pthread_mutex_unlock(&p->pu_mu);
	if (memcmp(&st, &logged, sizeof(st)))
		fp_push_log_stats(p);
}

static uint64_t jitter(struct fp_push *p, uint64_t ms)
{
	/* Between half and all of ms: agents restarted together do not
	 * come back together. */
	return ms / 2 + (uint64_t)rand_r(&p->pu_seed) % (ms / 2 + 1);
}

static void *pusher(void *arg)
{
	struct fp_push *p = arg;
	uint64_t backoff = p->pu_backoff_min, last_log = fp_mono_ms(), head = 0;
	uint32_t attempts = 0; /* answered failures of the record `head` */
	char why[1024], desc[512];

	for (;;) {
		uint64_t id, retry_after, delay, until;
		int64_t written, age;
		void *rec;
		size_t len;
		enum outcome o;
		int rv, reached;

		maybe_log(p, &last_log);
		pthread_mutex_lock(&p->pu_mu);
		if (p->pu_stop && fp_mono_ms() >= p->pu_deadline) {
			pthread_mutex_unlock(&p->pu_mu);
			break;
		}
		pthread_mutex_unlock(&p->pu_mu);

		rv = fp_spool_peek(p->pu_spool, &id, &rec, &len, &written);
		if (rv) {
			pthread_mutex_lock(&p->pu_mu);
			if (p->pu_stop && rv == -ENOENT) {
				pthread_mutex_unlock(&p->pu_mu);
				break;
			}
			if (!p->pu_pending && !p->pu_stop)
				wait_until(p, fp_mono_ms() + 1000);
			p->pu_pending = 0;
			pthread_mutex_unlock(&p->pu_mu);
			continue;
		}
		if (id != head) {
			head = id;
			attempts = 0;
		}
		o = send_record(p, rec, len, &retry_after, &reached, desc, sizeof(desc), why,
				sizeof(why));
		free(rec);
		/* The bounds: attempts the destination answered (an outage
		 * of its own is what the spool is for), and age. */
		attempts += o == RETRY && reached;
		age = (int64_t)time(NULL) - written;
		if (o == RETRY && (attempts >= p->pu_max_attempts || age > p->pu_max_age)) {
			fp_warnx("push %s: %s; giving up on %s after %u answered attempts, "
				 "%" PRId64 " s old: dropped",
				 p->pu_name, why, desc, attempts, age);
			pthread_mutex_lock(&p->pu_mu);
			p->pu_stats.ps_gave_up++;
			pthread_mutex_unlock(&p->pu_mu);
			o = PERMANENT;
		}
		fp_spool_release(p->pu_spool, id, o != RETRY);
		if (o != RETRY) {
			backoff = p->pu_backoff_min;
			continue;
		}

		delay = jitter(p, backoff);
		if (retry_after > delay)
			delay = retry_after < p->pu_backoff_max ? retry_after : p->pu_backoff_max;
		pthread_mutex_lock(&p->pu_mu);
		p->pu_stats.ps_retried++;
		if (p->pu_stop) {
			/* Flushing into a failing destination: keep the rest. */
			pthread_mutex_unlock(&p->pu_mu);
			fp_warnx("push %s: %s; %zu requests stay spooled", p->pu_name, why,
				 fp_spool_count(p->pu_spool));
			break;
		}
		pthread_mutex_unlock(&p->pu_mu);
		fp_warnx("push %s: %s; %zu requests spooled, retrying in %.1f s", p->pu_name, why,
			 fp_spool_count(p->pu_spool), (double)delay / 1000);
		until = fp_mono_ms() + delay;
		pthread_mutex_lock(&p->pu_mu);
		while (!p->pu_stop && fp_mono_ms() < until)
			wait_until(p, until);
		pthread_mutex_unlock(&p->pu_mu);
		backoff = backoff * 2 > p->pu_backoff_max ? p->pu_backoff_max : backoff * 2;
	}
	return NULL;
}

/* ---- life cycle ---- */

static void push_free(struct fp_push *p)
{
	fp_httpc_close(p->pu_http);
	fp_spool_close(p->pu_spool);
	for (size_t i = 0; i < p->pu_nheaders; i++) {
		free(p->pu_hname[i]);
		free(p->pu_hvalue[i]);
	}
	pthread_cond_destroy(&p->pu_cv);
	pthread_mutex_destroy(&p->pu_mu);
	free(p->pu_name);
	free(p->pu_base);
	free(p->pu_path);
	free(p);
}

/* The destinations and headers fp_push_start takes (push_cli.c checks
 * the flags with them too). */
int fp_push_url_check(const char *url)
{
	nng_url *u;
	int ok;

	if (strncmp(url, "http://", 7) && strncmp(url, "https://", 8))
		return -EINVAL;
	if (nng_url_parse(&u, url))
		return -EINVAL;
	ok = u->u_hostname && u->u_hostname[0] && !(u->u_query && u->u_query[0]) &&
	     !(u->u_fragment && u->u_fragment[0]);
	nng_url_free(u);
	return ok ? 0 : -EINVAL;
}

static int is_tchar(char c)
{
	return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') ||
	       (c && strchr("!#$%&'*+-.^_`|~", c));
}

int fp_push_header_check(const char *h, const char **why)
{
	static const char *const reserved[] = { "Host",
						"Content-Length",
						"Content-Type",
						"Content-Encoding",
						"Transfer-Encoding",
						"Connection" };
	const char *colon = strchr(h, ':'), *v;
	size_t nlen;

	*why = NULL;
	if (!colon) {
		*why = "expected 'Name: value'";
		return -EINVAL;
	}
	nlen = (size_t)(colon - h);
	if (!nlen) {
		*why = "empty header name";
		return -EINVAL;
	}
	for (size_t i = 0; i < nlen; i++)
		if (!is_tchar(h[i])) {
			*why = "header name has a character outside A-Z a-z 0-9 !#$%&'*+-.^_`|~";
			return -EINVAL;
		}
	for (v = colon + 1; *v; v++)
		if (*v == '\r' || *v == '\n') {
			*why = "header value contains CR or LF";
			return -EINVAL;
		} else if (((unsigned char)*v < 0x20 && *v != '\t') || *v == 0x7f) {
			*why = "header value contains a control character";
			return -EINVAL;
		}
	for (size_t i = 0; i < sizeof(reserved) / sizeof(*reserved); i++)
		if (strlen(reserved[i]) == nlen && !strncasecmp(h, reserved[i], nlen)) {
			*why = "fleetprof sets this header itself";
			return -EINVAL;
		}
	return 0;
}

int fp_push_start(struct fp_push **out, const struct fp_push_opts *o)
{
	struct fp_push *p = calloc(1, sizeof(*p));
	pthread_condattr_t ca;
	sigset_t all, old;
	char dir[4200], who[128];
	const nng_url *url;
	size_t plen;
	int rv, err;

	if (!p)
		return -ENOMEM;
	pthread_mutex_init(&p->pu_mu, NULL);
	pthread_condattr_init(&ca);
	pthread_condattr_setclock(&ca, CLOCK_MONOTONIC);
	pthread_cond_init(&p->pu_cv, &ca);
	pthread_condattr_destroy(&ca);
	p->pu_format = o->po_format;
	p->pu_gzip = o->po_gzip;
	p->pu_backoff_min = o->po_backoff_min_ms ? o->po_backoff_min_ms : 1000;
	p->pu_backoff_max = o->po_backoff_max_ms ? o->po_backoff_max_ms : 60000;
	if (p->pu_backoff_max < p->pu_backoff_min)
		p->pu_backoff_max = p->pu_backoff_min;
	p->pu_timeout = o->po_timeout_ms ? o->po_timeout_ms : 20000;
	p->pu_max_attempts = o->po_max_attempts ? o->po_max_attempts : FP_PUSH_MAX_ATTEMPTS;
	p->pu_max_age = o->po_max_age_s ? o->po_max_age_s : FP_PUSH_MAX_AGE_S;
	p->pu_seed = (unsigned)time(NULL) ^ (unsigned)getpid() ^ (unsigned)(uintptr_t)p;
	if (!(p->pu_name = strdup(o->po_name)) || !(p->pu_base = strdup(o->po_url))) {
		err = -ENOMEM;
		goto fail;
	}
	if (o->po_nheaders > FP_PUSH_MAX_HEADERS) {
		err = -E2BIG;
		goto fail;
	}
	for (size_t i = 0; i < o->po_nheaders; i++) {
		const char *h = o->po_headers[i], *why, *colon = strchr(h, ':'), *v;
		if (fp_push_header_check(h, &why)) {
			fp_warnx("push %s: invalid header '%s': %s", o->po_name, h, why);
			err = -EINVAL;
			goto fail;
		}
		for (v = colon + 1; *v == ' ' || *v == '\t'; v++)
			;
		p->pu_hname[i] = strndup(h, (size_t)(colon - h));
		p->pu_hvalue[i] = strdup(v);
		p->pu_nheaders = i + 1;
		if (!p->pu_hname[i] || !p->pu_hvalue[i]) {
			err = -ENOMEM;
			goto fail;
		}
		/* Trailing blanks are not part of a field value. */
		for (plen = strlen(p->pu_hvalue[i]);
		     plen && strchr(" \t", p->pu_hvalue[i][plen - 1]);)
			p->pu_hvalue[i][--plen] = '\0';
	}
	if (fp_push_url_check(o->po_url)) {
		fp_warnx("push %s: invalid URL '%s'", o->po_name, o->po_url);
		err = -EINVAL;
		goto fail;
	}
	snprintf(who, sizeof(who), "push %s", o->po_name);
	if ((rv = fp_httpc_open(&p->pu_http, o->po_url, NULL, who))) {
		fp_warnx("push %s: %s: %s", o->po_name, o->po_url, nng_strerror(rv));
		err = -EINVAL;
		goto fail;
	}
	url = fp_httpc_url(p->pu_http);
	if (!(p->pu_path = strdup(url->u_path ? url->u_path : ""))) {
		err = -ENOMEM;
		goto fail;
	}
	for (plen = strlen(p->pu_path); plen && p->pu_path[plen - 1] == '/';)
		p->pu_path[--plen] = '\0';
	snprintf(dir, sizeof(dir), "%s/%s", o->po_spool_dir, o->po_name);
	if ((err = fp_spool_open(&p->pu_spool, dir, o->po_spool_max))) {
		fp_warnx("push %s: cannot use the spool %s: %s", o->po_name, dir,
			 err == -EBUSY ? "another process uses it" : strerror(-err));
		goto fail;
	}
	/* Signals are for the main thread. */
	sigfillset(&all);
	pthread_sigmask(SIG_SETMASK, &all, &old);
	err = -pthread_create(&p->pu_thread, NULL, pusher, p);
	pthread_sigmask(SIG_SETMASK, &old, NULL);
	if (err) {
		fp_warnx("push %s: cannot start a thread: %s", o->po_name, strerror(-err));
		goto fail;
	}
	p->pu_started = 1;
	fp_info("push %s: %s to %s%s, spool %s (at most %" PRIu64 " MB, %zu requests waiting), "
		"a request dropped after %u answered attempts or %" PRId64 " s",
		o->po_name, o->po_format == FP_PUSH_PPROF ? "pprof" : "OTLP", o->po_url,
		o->po_gzip ? ", gzip" : "", dir, o->po_spool_max >> 20, fp_spool_count(p->pu_spool),
		p->pu_max_attempts, p->pu_max_age);
	*out = p;
	return 0;
fail:
	push_free(p);
	return err;
}

static void add_ms(struct timespec *ts, uint64_t ms)
{
	ts->tv_sec += (time_t)(ms / 1000);
	ts->tv_nsec += (long)(ms % 1000) * 1000000;
	if (ts->tv_nsec >= 1000000000) {
		ts->tv_sec++;
		ts->tv_nsec -= 1000000000;
	}
}

void fp_push_stop_all(struct fp_push **pushers, uint32_t flush_ms)
{
	struct fp_push **pp, *p;
	struct timespec ts;

	/* All flush at once: the deadline is the same for every destination. */
	for (pp = pushers; pp && (p = *pp); pp++) {
		if (!p->pu_started)
			continue;
		if (fp_spool_count(p->pu_spool) && flush_ms)
			fp_info("push %s: sending what the spool holds for at most %.1f s",
				p->pu_name, (double)flush_ms / 1000);
		pthread_mutex_lock(&p->pu_mu);
		p->pu_stop = 1;
		p->pu_deadline = fp_mono_ms() + flush_ms;
		pthread_cond_broadcast(&p->pu_cv);
		pthread_mutex_unlock(&p->pu_mu);
	}
	clock_gettime(CLOCK_REALTIME, &ts);
	add_ms(&ts, flush_ms + 250ull);
	for (pp = pushers; pp && (p = *pp); pp++) {
		if (p->pu_started) {
			/* The thread ends by itself at the deadline; a request
			 * still running then is cancelled. */
			while (pthread_timedjoin_np(p->pu_thread, NULL, &ts) == ETIMEDOUT) {
				fp_httpc_cancel(p->pu_http);
				clock_gettime(CLOCK_REALTIME, &ts);
				add_ms(&ts, 100);
			}
		}
		fp_push_log_stats(p);
		push_free(p);
		*pp = NULL;
	}
}

void fp_push_stop(struct fp_push *p, uint32_t flush_ms)
{
	struct fp_push *one[2] = { p, NULL };

	fp_push_stop_all(one, flush_ms);
}
