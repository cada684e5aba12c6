/* push.c: the pushers of push.h.
 *
 * A spool record is one HTTP request, written by fp_push_profile:
 *
 *     FPPUSH1\n
 *     PATH?QUERY\n          relative to the base URL's path
 *     CONTENT-TYPE\n
 *     CONTENT-ENCODING\n    empty for none
 *     DESCRIPTION\n         host, interval (and service) for the logs
 *     BODY
 *
 * so a record says all about its request but the base URL and the
 * --push-header values (credentials stay out of the spool).  The pusher
 * thread peeks the oldest record, sends it with the HTTP client of
 * httpc.h on a connection of its own (a response body is read only when
 * its Content-Length is within pu_response_max) and deletes it unless the
 * failure is worth a retry; a record that keeps failing is dropped after
 * pu_max_attempts answered attempts or once older than pu_max_age, so one
 * request the destination always refuses cannot hold up the queue. */
#include "push.h"
#include "cli.h"
#include "gzip.h"
#include "httpc.h"
#include "log.h"
#include "otlp.h"
#include "otlp_profiles_service.pb-c.h"
#include "output.h"
#include "spool.h"
#include "tls.h"
#include "vec.h"

#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <pthread.h>
#include <signal.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>
#include <zlib.h>
#include <nng/nng.h>
#include <nng/supplemental/http/http.h>

#define RECORD_MAGIC "FPPUSH1"
#define OTLP_PATH "/v1development/profiles"
#define EXCERPT_MAX 400
#define STATS_EVERY_MS 60000

typedef Opentelemetry__Proto__Collector__Profiles__V1development__ExportProfilesServiceResponse
	pb_response;

enum outcome { SENT, RETRY, PERMANENT };

struct fp_push {
	char *pu_name;
	char *pu_base; /* the URL as given, for logs */
	char *pu_path; /* its path without a trailing '/' */
	int pu_format, pu_gzip;
	size_t pu_nheaders;
	char *pu_hname[FP_PUSH_MAX_HEADERS], *pu_hvalue[FP_PUSH_MAX_HEADERS];
	uint32_t pu_backoff_min, pu_backoff_max, pu_timeout;
	uint32_t pu_max_attempts; /* answered failures before a record is dropped */
	int64_t pu_max_age;       /* seconds: a record failing when older is dropped */
	size_t pu_response_max;   /* response bodies read, bytes */
	struct fp_httpc *pu_http;
	struct fp_spool *pu_spool;

	pthread_t pu_thread;
	int pu_started;
	pthread_mutex_t pu_mu; /* guards what follows */
	pthread_cond_t pu_cv;
	int pu_stop, pu_pending;
	uint64_t pu_deadline;           /* monotonic ms: end of the flush */
	struct fp_push_stats pu_stats;  /* the counters push.c keeps itself */
	struct fp_push_stats pu_logged; /* as of the last stats line */
	unsigned pu_seed;
};

/* wait_until: on pu_cv, held pu_mu, until the monotonic time `ms`. */
static void wait_until(struct fp_push *p, uint64_t ms)
{
	struct timespec ts = { (time_t)(ms / 1000), (long)(ms % 1000) * 1000000 };

	pthread_cond_timedwait(&p->pu_cv, &p->pu_mu, &ts);
}

/* ---- checks ---- */

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

/* ---- a growing string ---- */

struct sbuf {
	char *s;
	size_t len, cap;
	int err;
};

static void sb_add(struct sbuf *b, const void *data, size_t n)
{
	if (b->err)
		return;
	if (fp_vec_reserve(&b->s, &b->cap, b->len + n + 1, 1)) {
		b->err = -ENOMEM;
		return;
	}
	memcpy(b->s + b->len, data, n);
	b->len += n;
	b->s[b->len] = '\0';
}

static void sb_str(struct sbuf *b, const char *s)
{
	sb_add(b, s, strlen(s));
}

static void sb_printf(struct sbuf *b, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static void sb_printf(struct sbuf *b, const char *fmt, ...)
{
	char buf[256];
	va_list ap;
	int n;

	va_start(ap, fmt);
	n = vsnprintf(buf, sizeof(buf), fmt, ap);
	va_end(ap);
	if (n > 0)
		sb_add(b, buf, (size_t)n < sizeof(buf) ? (size_t)n : sizeof(buf) - 1);
}

/* sb_pct: s percent-encoded as a query value (RFC 3986 unreserved kept). */
static void sb_pct(struct sbuf *b, const char *s)
{
	static const char hex[] = "0123456789ABCDEF";

	for (; *s; s++) {
		unsigned char c = (unsigned char)*s;
		if ((c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') ||
		    c == '-' || c == '.' || c == '_' || c == '~') {
			sb_add(b, s, 1);
		} else {
			char e[3] = { '%', hex[c >> 4], hex[c & 15] };
			sb_add(b, e, 3);
		}
	}
}

/* ---- encoding ---- */

/* describe: "HOST STAMP+Ns" for the logs. */
static void describe(const struct fp_profile *prof, const char *host, char *buf, size_t len)
{
	time_t secs = (time_t)(prof->pr_start_ns / 1000000000ull);
	char stamp[32];
	struct tm tm;

	gmtime_r(&secs, &tm);
	strftime(stamp, sizeof(stamp), "%Y-%m-%dT%H:%M:%SZ", &tm);
	snprintf(buf, len, "%s %s+%" PRIu64 "s", host, stamp,
		 (uint64_t)((prof->pr_duration_ns + 500000000ull) / 1000000000ull));
	for (char *c = buf; *c; c++)
		if (*c == '\n' || *c == '\r')
			*c = ' ';
}

static void encode_failed(struct fp_push *p)
{
	pthread_mutex_lock(&p->pu_mu);
	p->pu_stats.ps_encode_errors++;
	pthread_mutex_unlock(&p->pu_mu);
}

/* spool_request: one record of host's (its owner in the spool) into the
 * spool; body is gzip'd first when asked and encoding is then set. */
static int spool_request(struct fp_push *p, const char *host, const char *uri, const char *ctype,
			 int gzip, const char *desc, const uint8_t *body, size_t blen)
{
	uint8_t *z = NULL;
	struct sbuf head = { 0 };
	struct iovec iov[2];
	char line[512];
	int err;

	if (gzip && (err = fp_gzip_buf(body, blen, Z_DEFAULT_COMPRESSION, &z, &blen))) {
		encode_failed(p);
		return err;
	}
	/* The description is one line whatever names it holds. */
	snprintf(line, sizeof(line), "%s", desc);
	for (char *c = line; *c; c++)
		if ((unsigned char)*c < 0x20 || *c == 0x7f)
			*c = ' ';
	sb_printf(&head, "%s\n", RECORD_MAGIC);
	sb_str(&head, uri);
	sb_printf(&head, "\n%s\n%s\n%s\n", ctype,
		  gzip && p->pu_format == FP_PUSH_OTLP ? "gzip" : "", line);
	if ((err = head.err))
		goto out;
	iov[0] = (struct iovec){ head.s, head.len };
	iov[1] = (struct iovec){ z ? z : (uint8_t *)body, blen };
	err = fp_spool_put(p->pu_spool, host, iov, 2);
out:
	free(head.s);
	free(z);
	return err;
}

static int push_otlp(struct fp_push *p, const struct fp_profile *prof, const struct fp_hello *h,
		     const char *desc)
{
	struct fp_otlp_resource res = { 0 };
	uint8_t *buf = NULL;
	size_t len;
	int err;

	if (h) {
		res.or_host = h->fh_host;
		res.or_nlabels = h->fh_nlabels;
		res.or_label_keys = h->fh_label_keys;
		res.or_label_values = h->fh_label_values;
	}
	if ((err = fp_otlp_encode(prof, &res, &buf, &len))) {
		encode_failed(p);
		return err;
	}
	err = spool_request(p, res.or_host ? res.or_host : prof->pr_host, OTLP_PATH,
			    "application/x-protobuf", p->pu_gzip, desc, buf, len);
	free(buf);
	return err;
}

/* Pyroscope's names: an application name takes [A-Za-z0-9_.-/], a label
 * key [A-Za-z0-9_.]; a value ends at ',' or '}' and is trimmed. */
static void pyro_clean(const char *s, size_t len, int key, char *out, size_t olen)
{
	size_t o = 0;

	while (len && (*s == ' ' || *s == '\t')) {
		s++;
		len--;
	}
	while (len && (s[len - 1] == ' ' || s[len - 1] == '\t'))
		len--;
	for (size_t i = 0; i < len && o + 1 < olen; i++) {
		char c = s[i];
		int ok = (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') ||
			 (c >= '0' && c <= '9') || c == '_' || c == '.';
		if (key == 0) /* application name */
			ok = ok || c == '-' || c == '/';
		else if (key == 2) /* label value */
			ok = (unsigned char)c >= 0x20 && c != 0x7f && !strchr(",{}=", c);
		out[o++] = ok ? c : '_';
	}
	out[o] = '\0';
}

/* pyro_name: SERVICE{host_name=HOST,KEY=VALUE,...} */
static void pyro_name(struct sbuf *b, const char *service, const char *host,
		      const struct fp_hello *h)
{
	char tmp[512], key[256];
	size_t i, j;

	pyro_clean(service, strlen(service), 0, tmp, sizeof(tmp));
	sb_str(b, tmp[0] ? tmp : "unknown_service");
	sb_str(b, "{");
	pyro_clean(host, strlen(host), 2, tmp, sizeof(tmp));
	sb_printf(b, "host_name=%s", tmp[0] ? tmp : "unknown");
	for (i = 0; h && i < h->fh_nlabels; i++) {
		const char *k = h->fh_label_keys[i], *v = h->fh_label_values[i];
		int dup = 0;

		pyro_clean(k, strlen(k), 1, key, sizeof(key));
		pyro_clean(v, strlen(v), 2, tmp, sizeof(tmp));
		if (!key[0] || !tmp[0] || !strncmp(key, "__", 2) || !strcmp(key, "host_name") ||
		    !strcmp(key, "service_name"))
			continue;
		for (j = 0; j < i && !dup; j++) {
			char other[256];
			pyro_clean(h->fh_label_keys[j], strlen(h->fh_label_keys[j]), 1, other,
				   sizeof(other));
			dup = !strcmp(other, key);
		}
		if (!dup)
			sb_printf(b, ",%s=%s", key, tmp);
	}
	sb_str(b, "}");
}

/* The service of a sample, as otlp.c names it: the container, else the
 * process, else "unknown_service". */
static void service_of(const struct fp_psample *s, const char **name, size_t *len)
{
	if (s->ps_container && s->ps_container[0]) {
		*name = s->ps_container;
		*len = strlen(s->ps_container);
	} else if ((*len = strnlen(s->ps_process, FP_COMM_LEN))) {
		*name = s->ps_process;
	} else {
		*name = "unknown_service";
		*len = 15;
	}
}

static int service_cmp(const void *a, const void *b, void *arg)
{
	const struct fp_profile *prof = arg;
	size_t i = *(const size_t *)a, j = *(const size_t *)b, xl, yl;
	const char *x, *y;
	int c;

	service_of(&prof->pr_samples[i], &x, &xl);
	service_of(&prof->pr_samples[j], &y, &yl);
	c = memcmp(x, y, xl < yl ? xl : yl);
	if (!c)
		c = xl < yl ? -1 : xl > yl;
	return c ? c : (i < j ? -1 : i > j);
}

/* one_service: the samples order[from, to) of prof, in a profile of their
 * own.  frame_map/mapping_map: FP_INDEX_NONE-filled maps of prof's frames
 * and mappings into the new profile, left filled again. */
static int one_service(const struct fp_profile *prof, const size_t *order, size_t from, size_t to,
		       uint32_t *frame_map, uint32_t *mapping_map, uint32_t *frames,
		       struct fp_profile **out)
{
	struct fp_profile *sub;
	size_t i;
	int err = fp_profile_alloc(&sub, prof->pr_host, prof->pr_start_ns, prof->pr_duration_ns,
				   prof->pr_period_ns);

	if (err)
		return err;
	for (i = from; i < to && !err; i++) {
		const struct fp_psample *s = &prof->pr_samples[order[i]];
		for (uint32_t j = 0; j < s->ps_nframes && !err; j++) {
			uint32_t f = s->ps_frames[j];
			if (frame_map[f] == FP_INDEX_NONE) {
				const struct fp_pframe *pf = &prof->pr_frames[f];
				uint32_t m = pf->pf_mapping, nm = FP_INDEX_NONE;
				if (m != FP_INDEX_NONE && m < prof->pr_nmappings) {
					const struct fp_pmapping *pm = &prof->pr_mappings[m];
					if (mapping_map[m] == FP_INDEX_NONE)
						err = fp_profile_add_mapping(sub, pm->pm_kind,
									     &pm->pm_build_id,
									     pm->pm_path,
									     &mapping_map[m]);
					nm = mapping_map[m];
				}
				/* Python frames: their own key, no mapping. */
				if (!err && pf->pf_kind == FP_FRAME_PYTHON)
					err = fp_profile_add_python_frame(sub, pf->pf_function,
									  pf->pf_file, pf->pf_line,
									  pf->pf_start_line,
									  &frame_map[f]);
				else if (!err)
					err = fp_profile_add_frame(sub, nm, pf->pf_address,
								   pf->pf_kind, pf->pf_function,
								   pf->pf_system_name,
								   &frame_map[f]);
				/* Source lines and inlined functions come along. */
				if (!err && pf->pf_kind != FP_FRAME_PYTHON &&
				    (pf->pf_file || pf->pf_line || pf->pf_ninline))
					err = fp_profile_set_source(sub, frame_map[f], pf->pf_file,
								    pf->pf_line, pf->pf_inline,
								    pf->pf_ninline);
			}
			frames[j] = frame_map[f];
		}
		if (!err)
			err = fp_profile_add_sample(sub, frames, s->ps_nframes, s->ps_pid,
						    s->ps_tid, s->ps_thread, s->ps_process,
						    s->ps_container, s->ps_count);
	}
	/* Reset the maps: only the entries this service touched. */
	for (i = from; i < to; i++) {
		const struct fp_psample *s = &prof->pr_samples[order[i]];
		for (uint32_t j = 0; j < s->ps_nframes; j++) {
			uint32_t f = s->ps_frames[j], m = prof->pr_frames[f].pf_mapping;
			frame_map[f] = FP_INDEX_NONE;
			if (m != FP_INDEX_NONE && m < prof->pr_nmappings)
				mapping_map[m] = FP_INDEX_NONE;
		}
	}
	if (err) {
		fp_profile_free(sub);
		return err;
	}
	*out = sub;
	return 0;
}

static int push_pprof_service(struct fp_push *p, const struct fp_profile *sub, const char *service,
			      const struct fp_hello *h, const char *desc)
{
	const char *host = h && h->fh_host ? h->fh_host : sub->pr_host ? sub->pr_host : "";
	uint64_t from = sub->pr_start_ns / 1000000000ull;
	uint64_t until = (sub->pr_start_ns + sub->pr_duration_ns + 999999999ull) / 1000000000ull;
	uint64_t period = sub->pr_period_ns ? sub->pr_period_ns : 10000000;
	uint64_t hz = (1000000000ull + period / 2) / period;
	struct sbuf name = { 0 }, uri = { 0 };
	char d[512];
	uint8_t *buf = NULL;
	size_t len;
	int err;

	if (until <= from)
		until = from + 1;
	pyro_name(&name, service, host, h);
	sb_str(&uri, "/ingest?name=");
	if (name.s)
		sb_pct(&uri, name.s);
	sb_printf(&uri,
		  "&from=%" PRIu64 "&until=%" PRIu64 "&format=pprof&sampleRate=%" PRIu64
		  "&spyName=fleetprof",
		  from, until, hz);
	snprintf(d, sizeof(d), "%.300s service %.200s", desc, service);
	err = name.err ? name.err : uri.err;
	if (!err)
		err = fp_pprof_encode(sub, &buf, &len);
	if (err)
		encode_failed(p);
	else
		err = spool_request(p, host, uri.s, "application/octet-stream", p->pu_gzip, d, buf,
				    len);
	free(buf);
	free(name.s);
	free(uri.s);
	return err;
}

static int push_pprof(struct fp_push *p, const struct fp_profile *prof, const struct fp_hello *h,
		      const char *desc)
{
	size_t n = prof->pr_nsamples, i, from, maxframes = 1;
	size_t *order = malloc((n ? n : 1) * sizeof(*order));
	uint32_t *frame_map = malloc((prof->pr_nframes ? prof->pr_nframes : 1) *
				     sizeof(*frame_map));
	uint32_t *mapping_map = malloc((prof->pr_nmappings ? prof->pr_nmappings : 1) *
				       sizeof(*mapping_map));
	uint32_t *frames = NULL;
	int err = 0, first_err = 0;

	for (i = 0; i < n; i++)
		if (prof->pr_samples[i].ps_nframes > maxframes)
			maxframes = prof->pr_samples[i].ps_nframes;
	frames = malloc(maxframes * sizeof(*frames));
	if (!order || !frame_map || !mapping_map || !frames) {
		encode_failed(p);
		err = -ENOMEM;
		goto out;
	}
	memset(frame_map, 0xff, (prof->pr_nframes ? prof->pr_nframes : 1) * sizeof(*frame_map));
	memset(mapping_map, 0xff,
	       (prof->pr_nmappings ? prof->pr_nmappings : 1) * sizeof(*mapping_map));
	for (i = 0; i < n; i++)
		order[i] = i;
	qsort_r(order, n, sizeof(*order), service_cmp, (void *)prof);

	for (from = 0; from < n; from = i) {
		const char *svc, *other;
		size_t slen, olen;
		char service[4096];
		struct fp_profile *sub;

		service_of(&prof->pr_samples[order[from]], &svc, &slen);
		for (i = from + 1; i < n; i++) {
			service_of(&prof->pr_samples[order[i]], &other, &olen);
			if (olen != slen || memcmp(svc, other, slen))
				break;
		}
		snprintf(service, sizeof(service), "%.*s", (int)slen, svc);
		err = one_service(prof, order, from, i, frame_map, mapping_map, frames, &sub);
		if (!err) {
			err = push_pprof_service(p, sub, service, h, desc);
			fp_profile_free(sub);
		} else {
			encode_failed(p);
		}
		/* One service's failure does not hold back the others. */
		if (err && !first_err)
			first_err = err;
	}
	err = first_err;
out:
	free(order);
	free(frame_map);
	free(mapping_map);
	free(frames);
	return err;
}

int fp_push_profile(struct fp_push *p, const struct fp_profile *prof, const struct fp_hello *h)
{
	char desc[384];
	int err;

	if (!prof->pr_nsamples)
		return 0; /* an idle interval: nothing to show */
	describe(prof,
		 h && h->fh_host ? h->fh_host
		 : prof->pr_host ? prof->pr_host
				 : "?",
		 desc, sizeof(desc));
	err = p->pu_format == FP_PUSH_PPROF ? push_pprof(p, prof, h, desc)
					    : push_otlp(p, prof, h, desc);
	pthread_mutex_lock(&p->pu_mu);
	p->pu_pending = 1;
	pthread_cond_signal(&p->pu_cv);
	pthread_mutex_unlock(&p->pu_mu);
	if (err)
		fp_warnx("push %s: cannot queue the profile of %s: %s", p->pu_name, desc,
			 strerror(-err));
	return err;
}

int fp_push_sink(void *arg, const struct fp_profile *prof, const struct fp_hello *hello,
		 uint64_t seq)
{
	for (struct fp_push **pp = arg; pp && *pp; pp++)
		fp_push_profile(*pp, prof, hello);
	return 0;
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
	if (strcmp(f[0], RECORD_MAGIC) || f[1][0] != '/')
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
	if ((rv = fp_httpc_transact(p->pu_http, req, res, timeout, p->pu_response_max, reached,
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
			 p->pu_name, p->pu_base, desc, too_large, p->pu_response_max);
		pthread_mutex_lock(&p->pu_mu);
		p->pu_stats.ps_too_large++;
		pthread_mutex_unlock(&p->pu_mu);
	}
	status = nng_http_res_get_status(res);
	if (status >= 200 && status < 300) {
		if (!strncmp(f[1], OTLP_PATH, strlen(OTLP_PATH)))
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
	p->pu_response_max = o->po_response_max ? o->po_response_max : FP_PUSH_RESPONSE_MAX;
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

/* ---- flags ---- */

static int cli_error(const char *flag, const char *arg, const char *why)
{
	char shown[512];

	fprintf(stderr, "fleetprof-symbolizer: invalid %s '%s'%s%s\n", flag,
		fp_log_escape(arg, strlen(arg), shown, sizeof(shown)), why ? ": " : "",
		why ? why : "");
	return -1;
}

int fp_push_cli_option(struct fp_push_cli *c, int opt, const char *arg)
{
	const char *why;
	char *end;
	unsigned long mb;

	switch (opt) {
	case FP_PUSH_OPT_PYROSCOPE:
	case FP_PUSH_OPT_OTLP_ENDPOINT:
		if (fp_push_url_check(arg))
			return cli_error(opt == FP_PUSH_OPT_PYROSCOPE ? "--pyroscope"
								      : "--otlp-endpoint",
					 arg, "expected http://HOST[:PORT][/PATH] or https://...");
		if (opt == FP_PUSH_OPT_PYROSCOPE)
			c->pc_pyroscope = arg;
		else
			c->pc_otlp = arg;
		return 1;
	case FP_PUSH_OPT_PYROSCOPE_FORMAT:
		if (strcmp(arg, "otlp") && strcmp(arg, "pprof"))
			return cli_error("--pyroscope-format", arg, "expected otlp or pprof");
		c->pc_pyroscope_pprof = !strcmp(arg, "pprof");
		return 1;
	case FP_PUSH_OPT_GZIP:
		c->pc_gzip = 1;
		return 1;
	case FP_PUSH_OPT_HEADER:
		if (fp_push_header_check(arg, &why))
			return cli_error("--push-header", arg, why);
		if (c->pc_nheaders == FP_PUSH_MAX_HEADERS)
			return cli_error("--push-header", arg, "too many headers");
		c->pc_headers[c->pc_nheaders++] = arg;
		return 1;
	case FP_PUSH_OPT_SPOOL:
		if (!arg[0])
			return cli_error("--spool", arg, "empty directory name");
		c->pc_spool = arg;
		return 1;
	case FP_PUSH_OPT_SPOOL_MAX:
		errno = 0;
		mb = strtoul(arg, &end, 10);
		if (errno || end == arg || *end || arg[0] == '-' || mb < 1 || mb > (1ul << 20))
			return cli_error("--spool-max", arg, "expected megabytes, 1 to 1048576");
		c->pc_spool_max_mb = (uint32_t)mb;
		return 1;
	case FP_PUSH_OPT_HEADER_FILE:
		if (!arg[0])
			return cli_error("--push-header-file", arg, "empty file name");
		c->pc_header_file = arg;
		return 1;
	case FP_PUSH_OPT_MAX_ATTEMPTS:
		return fp_parse_u32("fleetprof-symbolizer", "--push-max-attempts", arg, 1, 1000,
				    &c->pc_max_attempts)
			       ? -1
			       : 1;
	case FP_PUSH_OPT_MAX_AGE:
		return fp_parse_u32("fleetprof-symbolizer", "--push-max-age", arg, 60,
				    30 * 24 * 3600, &c->pc_max_age_s)
			       ? -1
			       : 1;
	default:
		return 0;
	}
}

#define HEADER_FILE_MAX (64 << 10)

int fp_push_header_file(const char *path, char **headers, size_t *n)
{
	char *buf = NULL, *line, *next;
	size_t have = *n, lineno = 0, len = 0;
	struct stat st;
	ssize_t r;
	int fd, err = 0;

	if ((fd = open(path, O_RDONLY | O_CLOEXEC | O_NOCTTY)) < 0 || fstat(fd, &st)) {
		err = -errno;
		fp_warn("--push-header-file %s", path);
		goto out;
	}
	if (!S_ISREG(st.st_mode) || st.st_size > HEADER_FILE_MAX) {
		fp_warnx("--push-header-file %s: %s", path,
			 S_ISREG(st.st_mode) ? "larger than 64 KiB" : "not a regular file");
		err = -EINVAL;
		goto out;
	}
	if (st.st_mode & (S_IRGRP | S_IROTH))
		fp_warnx("--push-header-file %s: readable by %s (mode %03o): its credentials "
			 "are not secret; chmod 600 it",
			 path, st.st_mode & S_IROTH ? "everyone" : "its group",
			 (unsigned)(st.st_mode & 0777));
	if (!(buf = malloc(HEADER_FILE_MAX + 1))) {
		err = -ENOMEM;
		goto out;
	}
	/* Read to the end, whatever stat said: the bound is ours. */
	while ((r = read(fd, buf + len, HEADER_FILE_MAX + 1 - len)) > 0 &&
	       (len += (size_t)r) <= HEADER_FILE_MAX)
		;
	if (r < 0 || len > HEADER_FILE_MAX) {
		err = r < 0 ? -errno : -EINVAL;
		fp_warnx("--push-header-file %s: %s", path,
			 r < 0 ? strerror(errno) : "larger than 64 KiB");
		goto out;
	}
	buf[len] = '\0';
	if (strlen(buf) != len) {
		fp_warnx("--push-header-file %s: contains a NUL byte", path);
		err = -EINVAL;
		goto out;
	}
	for (line = buf; line && *line; line = next) {
		const char *why;
		size_t l;

		lineno++;
		if ((next = strchr(line, '\n')))
			*next++ = '\0';
		l = strlen(line);
		if (l && line[l - 1] == '\r')
			line[--l] = '\0';
		if (!l || line[0] == '#')
			continue;
		if (fp_push_header_check(line, &why)) {
			fp_warnx("--push-header-file %s: line %zu: %s", path, lineno, why);
			err = -EINVAL;
			goto out;
		}
		if (*n == FP_PUSH_MAX_HEADERS) {
			fp_warnx("--push-header-file %s: line %zu: more than %d headers", path,
				 lineno, FP_PUSH_MAX_HEADERS);
			err = -EINVAL;
			goto out;
		}
		if (!(headers[*n] = strdup(line))) {
			err = -ENOMEM;
			goto out;
		}
		(*n)++;
	}
out:
	if (err)
		while (*n > have)
			free(headers[--*n]);
	if (buf) /* it held credentials */
		explicit_bzero(buf, HEADER_FILE_MAX + 1);
	free(buf);
	if (fd >= 0)
		close(fd);
	return err;
}

int fp_push_cli_start(const struct fp_push_cli *c, const char *cache_dir, struct fp_push **pushers)
{
	char *headers[FP_PUSH_MAX_HEADERS];
	struct fp_push_opts o = { .po_gzip = c->pc_gzip,
				  .po_headers = (const char *const *)headers,
				  .po_max_attempts = c->pc_max_attempts,
				  .po_max_age_s = c->pc_max_age_s };
	char spool[4200];
	size_t n = 0, nheaders = 0;
	int err = 0;

	pushers[0] = NULL;
	if (!c->pc_pyroscope && !c->pc_otlp) {
		if (c->pc_gzip || c->pc_nheaders || c->pc_spool || c->pc_pyroscope_pprof ||
		    c->pc_header_file || c->pc_max_attempts || c->pc_max_age_s)
			fp_warnx("push flags without --pyroscope or --otlp-endpoint: "
				 "nothing is pushed");
		return 0;
	}
	/* --push-header first, then the file's, up to the same bound. */
	for (size_t i = 0; i < c->pc_nheaders; i++)
		headers[nheaders++] = (char *)c->pc_headers[i];
	if (c->pc_header_file && (err = fp_push_header_file(c->pc_header_file, headers, &nheaders)))
		return err;
	o.po_nheaders = nheaders;
	if (c->pc_spool)
		snprintf(spool, sizeof(spool), "%s", c->pc_spool);
	else
		snprintf(spool, sizeof(spool), "%s/spool", cache_dir);
	o.po_spool_dir = spool;
	o.po_spool_max = (uint64_t)(c->pc_spool_max_mb ? c->pc_spool_max_mb : 256) << 20;
	if (c->pc_pyroscope) {
		o.po_name = "pyroscope";
		o.po_url = c->pc_pyroscope;
		o.po_format = c->pc_pyroscope_pprof ? FP_PUSH_PPROF : FP_PUSH_OTLP;
		if ((err = fp_push_start(&pushers[n], &o)))
			goto out;
		pushers[++n] = NULL;
	}
	if (c->pc_otlp) {
		o.po_name = "otlp";
		o.po_url = c->pc_otlp;
		o.po_format = FP_PUSH_OTLP;
		if ((err = fp_push_start(&pushers[n], &o))) {
			fp_push_stop_all(pushers, 0);
			goto out;
		}
		pushers[++n] = NULL;
	}
out:
	/* The pushers keep copies. */
	for (size_t i = c->pc_nheaders; i < nheaders; i++) {
		explicit_bzero(headers[i], strlen(headers[i]));
		free(headers[i]);
	}
	return err;
}
