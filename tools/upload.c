/* upload.c: `fleetprof upload`, for build pipelines: finds the ELF files
 * among FILEs and under DIRs, asks the symbol service which build-IDs it
 * lacks (one POST /v1/missing), and uploads only those files (POST
 * /v1/upload), debug files first. */
#include "batch.h"
#include "commands.h"
#include "elfnote.h"
#include "elfsyms.h"
#include "http.h"
#include "httpc.h"
#include "intern.h"
#include "store.h"
#include "tls.h"
#include "vec.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <getopt.h>
#include <inttypes.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/stat.h>
#include <unistd.h>
#include <nng/nng.h>
#include <nng/supplemental/http/http.h>

#define PROG "fleetprof upload"
#define TIMEOUT_MS 120000
#define CHUNK (256 * 1024)
#define MAX_REPLY (64 * 1024)

struct file {
	char *fl_path;
	char fl_hex[2 * FP_BUILD_ID_MAX + 1];
	int fl_kinds;
};

struct upload {
	/* options */
	const char *up_server, *up_token;
	const char *up_ca; /* https: CA file; NULL: the system's */
	int up_kind;       /* 0: auto */
	int up_tty;
	/* what was found */
	struct file *up_files;
	size_t up_nfiles, up_cap;
	uint64_t up_scanned, up_no_build_id, up_other_kind, up_unreadable;
	/* (dev, ino) of every directory and file seen: no loops, no doubles */
	struct fp_intern *up_seen;
	/* the server */
	struct fp_httpc *up_http;
	nng_aio *up_aio; /* the streamed upload's steps */
	char *up_base;   /* the server URL without a trailing '/' */
};

static void upload_usage(FILE *f)
{
	fprintf(f,
		"usage: fleetprof upload --server URL [--token TOKEN] [--ca FILE]\n"
		"                        [--kind auto|debuginfo|executable] [-v] FILE|DIR...\n"
		"\n"
		"Uploads ELF files (executables, shared objects, debug files) to the symbol\n"
		"service of a fleetprof-symbolizer started with --http.  Directories are\n"
		"searched recursively; files that are not ELF, or have no build-ID, are\n"
		"skipped.  Only the build-IDs the server lacks are uploaded, debug files first.\n"
		"\n"
		"  -s, --server URL     the symbolizer's HTTP address, http://HOST:PORT or\n"
		"                       https://HOST:PORT\n"
		"      --ca FILE        CA certificates (PEM) that verify an https:// server\n"
		"                       (default: the system's)\n"
		"  -t, --token TOKEN    upload token (default: $FLEETPROF_UPLOAD_TOKEN)\n"
		"  -k, --kind KIND      auto (default): what each file is; debuginfo or\n"
		"                       executable: only files of that kind, stored as that\n"
		"  -v, --verbose        list every file uploaded or already present\n"
		"  -h, --help           this help\n"
		"\n"
		"Exit status: 0 when every file needed was uploaded, 1 on any failure, 2 on\n"
		"bad arguments.\n");
}

static void clear_progress(struct upload *u)
{
	if (u->up_tty)
		fputs("\r\033[K", stderr);
}

static void errmsg(struct upload *u, const char *fmt, ...) __attribute__((format(printf, 2, 3)));

static void errmsg(struct upload *u, const char *fmt, ...)
{
	va_list ap;

	clear_progress(u);
	fprintf(stderr, "%s: ", PROG);
	va_start(ap, fmt);
	vfprintf(stderr, fmt, ap);
	va_end(ap);
	fputc('\n', stderr);
}

/* progress: "[n/m] path", on one line rewritten in place on a terminal. */
static void progress(struct upload *u, size_t n, size_t m, const char *path)
{
	struct winsize ws;
	int width = 80, room;
	size_t len = strlen(path);

	if (!u->up_tty) {
		fprintf(stderr, "[%zu/%zu] %s\n", n, m, path);
		return;
	}
	if (ioctl(STDERR_FILENO, TIOCGWINSZ, &ws) == 0 && ws.ws_col > 20)
		width = ws.ws_col;
	room = width - 24; /* "[n/m] " and a margin */
	if (room < 10)
		room = 10;
	if (len > (size_t)room)
		fprintf(stderr, "\r\033[K[%zu/%zu] ...%s", n, m, path + len - (size_t)(room - 3));
	else
		fprintf(stderr, "\r\033[K[%zu/%zu] %s", n, m, path);
	fflush(stderr);
}

/* seen: whether (dev, ino) was met before; remembers it. */
static int seen(struct upload *u, dev_t dev, ino_t ino)
{
	struct devino {
		uint64_t di_dev, di_ino;
	} key = { (uint64_t)dev, (uint64_t)ino };
	uint32_t id;
	int added;

	/* No memory: at worst a file is looked at twice. */
	if ((!u->up_seen && fp_intern_alloc(&u->up_seen)) ||
	    fp_intern_get(u->up_seen, &key, sizeof(key), &id, &added))
		return 0;
	return !added;
}

static int add_file(struct upload *u, const char *path)
{
	unsigned char magic[4];
	struct fp_build_id id;
	struct file *f;
	int fd, kinds, err;

	u->up_scanned++;
	fd = open(path, O_RDONLY | O_CLOEXEC | O_NOCTTY | O_NONBLOCK);
	if (fd < 0) {
		errmsg(u, "skipping %s: %s", path, strerror(errno));
		u->up_unreadable++;
		return 0;
	}
	if (pread(fd, magic, 4, 0) != 4 || memcmp(magic, "\177ELF", 4)) {
		close(fd);
		return 0; /* not ELF: not ours */
	}
	err = fp_elfnote_build_id(fd, &id);
	if (!err)
		err = fp_store_classify(fd, &kinds);
	close(fd);
	if (err || id.fb_len < 2) {
		u->up_no_build_id++;
		return 0;
	}
	if (!kinds || (u->up_kind && !(kinds & u->up_kind))) {
		u->up_other_kind++;
		return 0;
	}
	if (fp_vec_reserve(&u->up_files, &u->up_cap, u->up_nfiles + 1, sizeof(*u->up_files)))
		return -ENOMEM;
	f = &u->up_files[u->up_nfiles];
	if (!(f->fl_path = strdup(path)))
		return -ENOMEM;
	fp_build_id_hex(&id, f->fl_hex);
	f->fl_kinds = u->up_kind ? u->up_kind : kinds;
	u->up_nfiles++;
	return 0;
}

/* walk: path, and under it if it is a directory.  Symbolic links are
 * followed; a directory or file already met (a link loop, a hard link)
 * is skipped. */
static int walk(struct upload *u, const char *path, int top)
{
	struct stat st;
	struct dirent *de;
	DIR *d;
	int err = 0;

	if (stat(path, &st)) {
		if (top) {
			errmsg(u, "cannot access %s: %s", path, strerror(errno));
			return -errno;
		}
		return 0; /* a dangling link, or gone meanwhile */
	}
	if (!S_ISDIR(st.st_mode) && !S_ISREG(st.st_mode))
		return 0;
	if (seen(u, st.st_dev, st.st_ino))
		return 0;
	if (S_ISREG(st.st_mode))
		return add_file(u, path);
	if (!(d = opendir(path))) {
		errmsg(u, "skipping %s: %s", path, strerror(errno));
		u->up_unreadable++;
		return 0;
	}
	while (!err && (de = readdir(d))) {
		char *child;
		if (!strcmp(de->d_name, ".") || !strcmp(de->d_name, ".."))
			continue;
		if (asprintf(&child, "%s%s%s", path, path[strlen(path) - 1] == '/' ? "" : "/",
			     de->d_name) < 0) {
			err = -ENOMEM;
			break;
		}
		err = walk(u, child, 0);
		free(child);
	}
	closedir(d);
	return err;
}

/* client_open: the client for the server and the aio of the streamed
 * upload.  0, or -1 (reported). */
static int client_open(struct upload *u)
{
	struct fp_tls_opts tls = { .to_ca = u->up_ca };
	int rv;

	/* For https the server's certificate is checked, its host name too. */
	if ((rv = fp_httpc_open(&u->up_http, u->up_base, &tls, PROG)) ||
	    (rv = nng_aio_alloc(&u->up_aio, NULL, NULL))) {
		/* A TLS failure has said which file it could not use. */
		errmsg(u, "cannot use the server %s: %s", u->up_server, nng_strerror(rv));
		return -1;
	}
	return 0;
}

static void client_close(struct upload *u)
{
	if (u->up_aio)
		nng_aio_free(u->up_aio);
	fp_httpc_close(u->up_http);
}

static int wait_aio(struct upload *u)
{
	nng_aio_set_timeout(u->up_aio, TIMEOUT_MS);
	nng_aio_wait(u->up_aio);
	return nng_aio_result(u->up_aio);
}

static int http_request(struct upload *u, const char *path_query, nng_http_req **req)
{
	char *full;
	nng_url *url;
	int rv;

	if (asprintf(&full, "%s%s", u->up_base, path_query) < 0)
		return NNG_ENOMEM;
	rv = nng_url_parse(&url, full);
	free(full);
	if (rv)
		return rv;
	rv = nng_http_req_alloc(req, url);
	nng_url_free(url);
	if (rv)
		return rv;
	if (u->up_token && u->up_token[0]) {
		char *auth;
		if (asprintf(&auth, "Bearer %s", u->up_token) < 0)
			return NNG_ENOMEM;
		rv = nng_http_req_set_header(*req, "Authorization", auth);
		free(auth);
	}
	if (!rv)
		rv = nng_http_req_set_method(*req, "POST");
	return rv;
}

/* json_field: the string value of "key" in a flat JSON object, or "". */
static void json_field(const char *json, const char *key, char *out, size_t len)
{
	char pat[64];
	const char *p;
	size_t o = 0;

	out[0] = '\0';
	snprintf(pat, sizeof(pat), "\"%s\": \"", key);
	if (!json || !(p = strstr(json, pat)))
		return;
	for (p += strlen(pat); *p && *p != '"' && o + 1 < len; p++) {
		if (*p == '\\' && p[1])
			p++;
		out[o++] = *p;
	}
	out[o] = '\0';
}

/* read_reply_body: the response's body (at most MAX_REPLY bytes kept),
 * NUL-terminated, malloc'd. */
static char *read_reply_body(struct upload *u, nng_http_conn *conn, nng_http_res *res)
{
	const char *cl = nng_http_res_get_header(res, "Content-Length");
	size_t len = cl ? strtoul(cl, NULL, 10) : 0;
	char *buf;

	if (len > MAX_REPLY)
		len = MAX_REPLY;
	if (!(buf = calloc(1, len + 1)))
		return NULL;
	if (len) {
		nng_iov iov = { .iov_buf = buf, .iov_len = len };
		nng_aio_set_iov(u->up_aio, 1, &iov);
		nng_http_conn_read_all(conn, u->up_aio);
		if (wait_aio(u))
			buf[0] = '\0';
	}
	return buf;
}

static int cmp_str(const void *a, const void *b)
{
	return strcmp(*(char *const *)a, *(char *const *)b);
}

/* unique_ids: the distinct build-IDs of the files, sorted (a binary and
 * its debug file share one). */
static char **unique_ids(struct upload *u, size_t *n)
{
	char **ids = malloc((u->up_nfiles + 1) * sizeof(*ids));
	size_t i, k = 0;

	if (!ids)
		return NULL;
	for (i = 0; i < u->up_nfiles; i++)
		ids[i] = u->up_files[i].fl_hex;
	qsort(ids, u->up_nfiles, sizeof(*ids), cmp_str);
	for (i = 0; i < u->up_nfiles; i++)
		if (!k || strcmp(ids[k - 1], ids[i]))
			ids[k++] = ids[i];
	*n = k;
	return ids;
}

/* missing_chunk: POST /v1/missing with ids[0, n); the answer's lines,
 * which are among them, set missing[].  0, or -1 (reported). */
static int missing_chunk(struct upload *u, char **ids, size_t n, char *missing)
{
	nng_http_req *req = NULL;
	nng_http_res *res = NULL;
	char *body = malloc(n * (2 * FP_BUILD_ID_MAX + 1) + 1);
	size_t blen = 0, i, dlen;
	uint16_t status;
	void *data;
	int64_t too_large = -1;
	int rv = NNG_ENOMEM, ret = -1;

	for (i = 0; body && i < n; i++)
		blen += (size_t)sprintf(body + blen, "%s\n", ids[i]);
	if (body)
		rv = http_request(u, "/v1/missing", &req);
	if (!rv)
		rv = nng_http_req_copy_data(req, body, blen);
	if (!rv)
		rv = nng_http_res_alloc(&res);
	if (!rv)
		rv = fp_httpc_transact(u->up_http, req, res, TIMEOUT_MS, MAX_REPLY, NULL,
				       &too_large);
	if (rv) {
		errmsg(u, "cannot reach %s: %s", u->up_server, nng_strerror(rv));
		goto out;
	}
	if (too_large >= 0) {
		errmsg(u, "%s/v1/missing: an answer of %" PRId64 " bytes, over %d: not read",
		       u->up_server, too_large, MAX_REPLY);
		goto out;
	}
	status = nng_http_res_get_status(res);
	nng_http_res_get_data(res, &data, &dlen);
	if (status != 200) {
		char *copy = strndup(data ? data : "", dlen), err[256];
		json_field(copy, "error", err, sizeof(err));
		errmsg(u, "%s/v1/missing: %u %s%s%s", u->up_server, status,
		       nng_http_res_get_reason(res), err[0] ? ": " : "", err);
		free(copy);
		goto out;
	}
	for (const char *p = data, *end = p + dlen; p < end;) {
		const char *nl = memchr(p, '\n', (size_t)(end - p));
		char line[FP_STORE_HEX_MAX + 1], *key = line, **hit;
		size_t len = (size_t)((nl ? nl : end) - p);
		if (len < sizeof(line)) {
			memcpy(line, p, len);
			line[len] = '\0';
			hit = bsearch(&key, ids, n, sizeof(*ids), cmp_str);
			if (hit)
				missing[hit - ids] = 1;
		}
		p += len + 1;
	}
	ret = 0;
out:
	free(body);
	if (req)
		nng_http_req_free(req);
	if (res)
		nng_http_res_free(res);
	return ret;
}

/* ask_missing: which files the server lacks (want[]), asking about each
 * build-ID once, in requests under the server's limit.  0 or -1. */
static int ask_missing(struct upload *u, char **ids, size_t nids, char *want)
{
	char *missing = calloc(nids + 1, 1);
	size_t i;
	int err = 0;

	if (!missing)
		return -1;
	for (i = 0; i < nids && !err; i += FP_HTTP_MAX_MISSING)
		err = missing_chunk(u, ids + i,
				    nids - i < FP_HTTP_MAX_MISSING ? nids - i : FP_HTTP_MAX_MISSING,
				    missing + i);
	for (i = 0; i < u->up_nfiles && !err; i++) {
		const char *key = u->up_files[i].fl_hex;
		char **hit = bsearch(&key, ids, nids, sizeof(*ids), cmp_str);
		want[i] = hit && missing[hit - ids];
	}
	free(missing);
	return err;
}

enum outcome { UP_STORED, UP_EXISTS, UP_FAILED, UP_FATAL };

/* send_body: the file, in pieces, after the header. */
static int send_body(struct upload *u, nng_http_conn *conn, int fd, uint64_t size)
{
	static char buf[CHUNK];
	uint64_t off = 0;
	int rv = 0;

	while (!rv && off < size) {
		ssize_t n = pread(fd, buf, sizeof(buf), (off_t)off);
		nng_iov iov;
		if (n <= 0)
			return NNG_EINTERNAL; /* shrank while we read it */
		if ((uint64_t)n > size - off)
			n = (ssize_t)(size - off);
		iov.iov_buf = buf;
		iov.iov_len = (size_t)n;
		nng_aio_set_iov(u->up_aio, 1, &iov);
		nng_http_conn_write_all(conn, u->up_aio);
		rv = wait_aio(u);
		off += (uint64_t)n;
	}
	return rv;
}

/* upload_one: POST /v1/upload with Expect: 100-continue, so that a
 * refusal (token, size, already stored) comes before the file is sent. */
static enum outcome upload_one(struct upload *u, const struct file *f)
{
	nng_http_conn *conn = NULL;
	nng_http_req *req = NULL;
	nng_http_res *res = NULL;
	char query[256], len[32], err[512] = "", st[32] = "", *body = NULL;
	enum outcome out = UP_FAILED;
	struct stat sb;
	uint16_t status = 0;
	int fd, rv;

	fd = open(f->fl_path, O_RDONLY | O_CLOEXEC);
	if (fd < 0 || fstat(fd, &sb)) {
		errmsg(u, "%s: %s", f->fl_path, strerror(errno));
		if (fd >= 0)
			close(fd);
		return UP_FAILED;
	}
	snprintf(query, sizeof(query), "/v1/upload?build_id=%s&kind=%s", f->fl_hex,
		 f->fl_kinds == FP_STORE_ANY ? "auto" : fp_store_kind_name(f->fl_kinds));
	snprintf(len, sizeof(len), "%" PRIu64, (uint64_t)sb.st_size);
	rv = http_request(u, query, &req);
	if (!rv)
		rv = nng_http_req_set_header(req, "Content-Type", "application/octet-stream");
	/* The length is declared; the body is written after the header. */
	if (!rv)
		rv = nng_http_req_set_header(req, "Content-Length", len);
	if (!rv)
		rv = nng_http_req_set_header(req, "Expect", "100-continue");
	if (!rv)
		rv = nng_http_res_alloc(&res);
	if (rv) {
		errmsg(u, "%s: %s", f->fl_path, nng_strerror(rv));
		goto out;
	}
	if ((rv = fp_httpc_connect(u->up_http, TIMEOUT_MS, &conn))) {
		errmsg(u, "cannot connect to %s: %s", u->up_server, nng_strerror(rv));
		out = UP_FATAL;
		goto out;
	}
	nng_http_conn_write_req(conn, req, u->up_aio);
	if (!(rv = wait_aio(u))) {
		nng_http_conn_read_res(conn, res, u->up_aio);
		rv = wait_aio(u);
	}
	if (!rv && nng_http_res_get_status(res) == 100) {
		nng_http_res_reset(res);
		if (!(rv = send_body(u, conn, fd, (uint64_t)sb.st_size))) {
			nng_http_conn_read_res(conn, res, u->up_aio);
			rv = wait_aio(u);
		}
	}
	if (rv) {
		errmsg(u, "%s: upload failed: %s", f->fl_path, nng_strerror(rv));
		out = rv == NNG_ECONNREFUSED ? UP_FATAL : UP_FAILED;
		goto out;
	}
	status = nng_http_res_get_status(res);
	body = read_reply_body(u, conn, res);
	json_field(body, "error", err, sizeof(err));
	json_field(body, "status", st, sizeof(st));
	if (status == 200) {
		out = strcmp(st, "exists") ? UP_STORED : UP_EXISTS;
	} else if (status == 401 || status == 403) {
		errmsg(u, "the server refused the upload token (%u %s%s%s): check --token", status,
		       nng_http_res_get_reason(res), err[0] ? ": " : "", err);
		out = UP_FATAL;
	} else if (status == 413) {
		errmsg(u, "%s: too large for the server (%u: %s)", f->fl_path, status,
		       err[0] ? err : nng_http_res_get_reason(res));
	} else {
		errmsg(u, "%s: refused (%u: %s)", f->fl_path, status,
		       err[0] ? err : nng_http_res_get_reason(res));
		/* Not a fleetprof symbol service: no point going on. */
		if (status == 404 || status == 405)
			out = UP_FATAL;
	}
out:
	free(body);
	if (conn)
		nng_http_conn_close(conn);
	if (req)
		nng_http_req_free(req);
	if (res)
		nng_http_res_free(res);
	close(fd);
	return out;
}

/* Debug files first: the cache keeps the first table of a build-ID, and a
 * stripped executable's would have only its dynamic symbols. */
static int by_kind(const void *a, const void *b)
{
	const struct file *x = a, *y = b;
	int dx = !(x->fl_kinds & FP_STORE_DEBUGINFO), dy = !(y->fl_kinds & FP_STORE_DEBUGINFO);

	if (dx != dy)
		return dx - dy;
	return strcmp(x->fl_path, y->fl_path);
}

int fp_cmd_upload(int argc, char **argv)
{
	static const struct option longopts[] = {
		{ "server", required_argument, NULL, 's' },
		{ "token", required_argument, NULL, 't' },
		{ "kind", required_argument, NULL, 'k' },
		{ "ca", required_argument, NULL, 'C' },
		{ "verbose", no_argument, NULL, 'v' },
		{ "help", no_argument, NULL, 'h' },
		{ 0 },
	};
	struct upload u = { .up_token = getenv("FLEETPROF_UPLOAD_TOKEN") };
	size_t i, n = 0, nwant = 0, stored = 0, exists = 0, failed = 0, present = 0, bids = 0;
	int verbose = 0, c, fatal = 0, rc = 1;
	char *want = NULL, **ids = NULL;

	optind = 1;
	while ((c = getopt_long(argc, argv, "s:t:k:vh", longopts, NULL)) != -1) {
		switch (c) {
		case 's':
			u.up_server = optarg;
			break;
		case 't':
			u.up_token = optarg;
			break;
		case 'C':
			u.up_ca = optarg;
			break;
		case 'k':
			if (!strcmp(optarg, "auto")) {
				u.up_kind = 0;
			} else if ((u.up_kind = fp_store_kind_parse(optarg)) < 0) {
				fprintf(stderr,
					"%s: invalid --kind '%s' (expected auto, debuginfo or executable)\n",
					PROG, optarg);
				return 2;
			}
			break;
		case 'v':
			verbose++;
			break;
		case 'h':
			upload_usage(stdout);
			return 0;
		default:
			upload_usage(stderr);
			return 2;
		}
	}
	if (!u.up_server) {
		fprintf(stderr, "%s: --server is required\n", PROG);
		upload_usage(stderr);
		return 2;
	}
	if (strncmp(u.up_server, "http://", 7) && strncmp(u.up_server, "https://", 8)) {
		fprintf(stderr,
			"%s: invalid --server '%s' (expected http:// or https://HOST:PORT)\n", PROG,
			u.up_server);
		return 2;
	}
	if (optind == argc) {
		fprintf(stderr, "%s: no FILE or DIR to upload\n", PROG);
		upload_usage(stderr);
		return 2;
	}
	u.up_tty = isatty(STDERR_FILENO);
	if (!(u.up_base = strdup(u.up_server)))
		return 1;
	for (size_t l = strlen(u.up_base); l > 0 && u.up_base[l - 1] == '/'; l--)
		u.up_base[l - 1] = '\0';

	for (i = (size_t)optind; i < (size_t)argc; i++)
		if (walk(&u, argv[i], 1))
			goto out;
	qsort(u.up_files, u.up_nfiles, sizeof(*u.up_files), by_kind);
	if (!(ids = unique_ids(&u, &bids)))
		goto out;
	printf("%zu ELF files with %zu build-IDs among %" PRIu64 " files", u.up_nfiles, bids,
	       u.up_scanned);
	if (u.up_no_build_id)
		printf(", %" PRIu64 " ELF files without build-ID skipped", u.up_no_build_id);
	if (u.up_other_kind)
		printf(", %" PRIu64 " %s skipped", u.up_other_kind,
		       u.up_kind ? "of another kind" : "with neither code nor debug info");
	if (u.up_unreadable)
		printf(", %" PRIu64 " unreadable", u.up_unreadable);
	printf("\n");
	fflush(stdout);
	if (!u.up_nfiles) {
		rc = u.up_unreadable ? 1 : 0;
		goto out;
	}
	if (client_open(&u) || !(want = calloc(u.up_nfiles, 1)) || ask_missing(&u, ids, bids, want))
		goto out;
	for (i = 0; i < u.up_nfiles; i++)
		nwant += want[i];
	for (i = 0; i < u.up_nfiles; i++) {
		enum outcome o;
		if (!want[i]) {
			present++;
			if (verbose)
				printf("present  %s %s\n", u.up_files[i].fl_hex,
				       u.up_files[i].fl_path);
			continue;
		}
		if (fatal) {
			failed++;
			continue;
		}
		progress(&u, ++n, nwant, u.up_files[i].fl_path);
		o = upload_one(&u, &u.up_files[i]);
		if (o == UP_STORED || o == UP_EXISTS) {
			if (verbose) {
				clear_progress(&u);
				printf("%s %s %s\n", o == UP_STORED ? "uploaded" : "present ",
				       u.up_files[i].fl_hex, u.up_files[i].fl_path);
				fflush(stdout);
			}
			*(o == UP_STORED ? &stored : &exists) += 1;
		} else {
			failed++;
			fatal = o == UP_FATAL;
		}
	}
	clear_progress(&u);
	/* Stored by someone else meanwhile counts as present. */
	printf("found %zu, already present %zu, uploaded %zu, failed %zu\n", u.up_nfiles,
	       present + exists, stored, failed);
	if (failed)
		fprintf(stderr, "%s: %zu of %zu uploads failed%s\n", PROG, failed, nwant,
			fatal ? " (stopped at the first error that would repeat)" : "");
	rc = failed ? 1 : 0;
out:
	client_close(&u);
	for (i = 0; i < u.up_nfiles; i++)
		free(u.up_files[i].fl_path);
	free(u.up_files);
	fp_intern_free(u.up_seen);
	free(u.up_base);
	free(want);
	free(ids);
	return rc;
}
