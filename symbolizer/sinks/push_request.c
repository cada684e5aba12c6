/* push_request.c: fp_push_profile, a profile as the spool records of its
 * HTTP requests (pusher.h): one OTLP request, or one Pyroscope /ingest
 * pprof per service.  Runs in the sink's thread. */
#include "gzip.h"
#include "log.h"
#include "otlp.h"
#include "output.h"
#include "pusher.h"
#include "spool.h"
#include "vec.h"

#include <errno.h>
#include <inttypes.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/uio.h>
#include <time.h>
#include <zlib.h>

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
	sb_printf(&head, "%s\n", FP_PUSH_RECORD_MAGIC);
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
	err = spool_request(p, res.or_host ? res.or_host : prof->pr_host, FP_PUSH_OTLP_PATH,
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
	sub->pr_is_offcpu = prof->pr_is_offcpu;
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
		if (!err && prof->pr_is_offcpu)
			err = fp_profile_add_block(sub, frames, s->ps_nframes, s->ps_pid, s->ps_tid,
						   s->ps_thread, s->ps_process, s->ps_container,
						   s->ps_count, s->ps_blocks);
		else if (!err)
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
	/* the interval's off-CPU profile: a series of its own, whose failure
	 * does not hold back the CPU profile's (logged there) */
	int off_err = prof->pr_offcpu ? fp_push_profile(p, prof->pr_offcpu, h) : 0, err;

	if (!prof->pr_nsamples)
		return off_err; /* an idle interval: nothing to show */
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
	return err ? err : off_err;
}

int fp_push_sink(void *arg, const struct fp_profile *prof, const struct fp_hello *hello,
		 uint64_t seq)
{
	for (struct fp_push **pp = arg; pp && *pp; pp++)
		fp_push_profile(*pp, prof, hello);
	return 0;
}
