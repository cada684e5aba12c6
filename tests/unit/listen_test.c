/* listen_test.c: replies never wait for symbol work.  The real server
 * (listen.h, server.h, pipeline.h, the resolver's workers) on an ipc://
 * socket; one device's batch names a large ELF file with full DWARF that
 * is not cached (a copy of libc's debug file), while 50 other devices
 * send hellos and batches.
 * Every request must be answered, with p99 under 50 ms, and the large
 * file's frames must be resolved in the files of the interval that named
 * it (the symbol wait) and of the next.
 *
 * With --external ADDR it only plays the devices against a symbolizer
 * running elsewhere for SECONDS (default 10) and prints the latencies: the
 * figures before and after a change. */
#include "check.h"
#include "cli.h"
#include "elfnote.h"
#include "elfsyms.h"
#include "files.h"
#include "listen.h"
#include "resolver.h"
#include "server.h"
#include "wire.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <gelf.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>
#include <nng/nng.h>
#include <nng/supplemental/util/platform.h>
#include <nng/protocol/reqrep0/req.h>

#define DEVICES 50
#define PAUSE_MS 100 /* between a device's requests */
#ifdef __SANITIZE_ADDRESS__
/* Under ASan, fork (the isolated parse, isolate.h) copies the page tables
 * of the shadow memory too, and stalls every thread of the process for
 * about 120 ms here: the bound checks that nothing waits for the parse
 * itself (1 s and more under ASan). */
#define P99_MAX_MS 250.0
#else
#define P99_MAX_MS 50.0
#endif
#define NFUNCS 3

static char tmpdir[64], addr[160], big_path[256], code_path[256];
static struct fp_build_id big_id;
static uint64_t big_offsets[NFUNCS];
static char big_names[NFUNCS][128];
static volatile int stop_clients;
static uint64_t window_start_ns, window_end_ns; /* the big file's ingest */

struct client {
	int cl_index;
	pthread_t cl_thread;
	double *cl_ms;        /* each request's latency */
	uint64_t *cl_done_ns; /* and when it was answered */
	size_t cl_n, cl_cap;
	int cl_failures;
};

/* rpc: one request, its reply decoded; the latency appended to c. */
static int rpc(nng_socket s, struct client *c, const char *buf, size_t len, struct fp_reply *r)
{
	uint64_t t0 = fp_now_ns(CLOCK_MONOTONIC), t1;
	char *rep = NULL;
	size_t rlen = 0;
	int rv;

	if ((rv = nng_send(s, (void *)buf, len, 0)) != 0 ||
	    (rv = nng_recv(s, &rep, &rlen, NNG_FLAG_ALLOC)) != 0)
		return -EIO;
	t1 = fp_now_ns(CLOCK_MONOTONIC);
	rv = fp_wire_decode_reply(rep, rlen, r);
	nng_free(rep, rlen);
	if (rv)
		return -EPROTO;
	if (c->cl_n == c->cl_cap) {
		c->cl_cap = c->cl_cap ? c->cl_cap * 2 : 64;
		c->cl_ms = realloc(c->cl_ms, c->cl_cap * sizeof(double));
		c->cl_done_ns = realloc(c->cl_done_ns, c->cl_cap * sizeof(uint64_t));
	}
	c->cl_ms[c->cl_n] = (double)(t1 - t0) / 1e6;
	c->cl_done_ns[c->cl_n++] = t1;
	return 0;
}

static int send_hello(nng_socket s, struct client *c, uint64_t session, const char *host)
{
	struct fp_hello h = { .fh_session = session,
			      .fh_host = (char *)host,
			      .fh_boot_id = "boot",
			      .fh_kernel_release = "6.1.0",
			      .fh_agent_version = "test",
			      .fh_frequency = 99,
			      .fh_ncpus = 4 };
	struct fp_reply r;
	char *buf;
	size_t len;
	int err;

	if ((err = fp_wire_encode_hello(&h, &buf, &len)))
		return err;
	err = rpc(s, c, buf, len, &r);
	free(buf);
	if (!err && r.fr_status != FP_REPLY_OK)
		err = -EPROTO;
	if (!err)
		fp_reply_fini(&r);
	return err;
}

/* send_batch: interval seq of session; the first defines a mapping of
 * path (build-ID id), a thread and a stack of the offsets, leaf first. */
static int send_batch(nng_socket s, struct client *c, uint64_t session, uint64_t seq,
		      const struct fp_build_id *id, const char *path, const uint64_t *offsets,
		      int noffsets)
{
	struct fp_mapping m = { .fm_id = 0,
				.fm_kind = FP_MAP_USER,
				.fm_build_id = *id,
				.fm_path = (char *)path };
	struct fp_thread t = { .ft_id = 0,
			       .ft_pid = 100,
			       .ft_tid = 100,
			       .ft_comm = "worker",
			       .ft_process = "app",
			       .ft_container = "" };
	struct fp_node nodes[NFUNCS];
	struct fp_count count = { .fc_thread = 0, .fc_node = 0, .fc_count = 7 };
	uint64_t start = 1700000000ull * 1000000000ull + seq * 10000000000ull;
	struct fp_batch b = { .fb_session = session,
			      .fb_seq = seq,
			      .fb_start_ns = start,
			      .fb_end_ns = start + 10000000000ull,
			      .fb_period_ns = 10101010,
			      .fb_ncounts = 1,
			      .fb_counts = &count };
	struct fp_reply r;
	char *buf;
	size_t len;
	int i, err;

	/* Nodes: 0 is the leaf, each the child of the next. */
	for (i = 0; i < noffsets; i++)
		nodes[i] = (struct fp_node){ .fn_id = (uint32_t)i,
					     .fn_parent = i + 1 < noffsets ? (uint32_t)i + 1
									   : FP_NODE_NONE,
					     .fn_frame = { 0, offsets[i] } };
	if (seq == 1) {
		/* Parents before children: the outermost first. */
		struct fp_node rev[NFUNCS];
		for (i = 0; i < noffsets; i++)
			rev[i] = nodes[noffsets - 1 - i];
		memcpy(nodes, rev, sizeof(rev[0]) * (size_t)noffsets);
		b.fb_nmappings = 1, b.fb_mappings = &m;
		b.fb_nthreads = 1, b.fb_threads = &t;
		b.fb_nnodes = (size_t)noffsets, b.fb_nodes = nodes;
	}
	if ((err = fp_wire_encode_batch(&b, &buf, &len)))
		return err;
	err = rpc(s, c, buf, len, &r);
	free(buf);
	if (!err && r.fr_status != FP_REPLY_OK)
		err = -EPROTO;
	if (!err)
		fp_reply_fini(&r);
	return err;
}

static int dial(nng_socket *s)
{
	if (nng_req0_open(s) != 0)
		return -EIO;
	nng_socket_set_ms(*s, NNG_OPT_RECVTIMEO, 5000);
	nng_socket_set_ms(*s, NNG_OPT_REQ_RESENDTIME, 60000); /* one try: a resend hides a stall */
	if (nng_dial(*s, addr, NULL, 0) != 0) {
		nng_close(*s);
		return -EIO;
	}
	return 0;
}

/* A small device: a binary no source has (its look-up fails at once). */
static void *client_main(void *arg)
{
	struct client *c = arg;
	struct fp_build_id id = { .fb_len = 20 };
	uint64_t session = 0x5000 + (uint64_t)c->cl_index, seq, offs[2] = { 0x1100, 0x1200 };
	char host[32], path[64];
	nng_socket s;

	memset(id.fb_data, 0x30 + c->cl_index, 20);
	snprintf(host, sizeof(host), "device-%d", c->cl_index);
	snprintf(path, sizeof(path), "/nonexistent/app-%d", c->cl_index);
	if (dial(&s)) {
		c->cl_failures++;
		return NULL;
	}
	if (send_hello(s, c, session, host))
		c->cl_failures++;
	for (seq = 1; !stop_clients || seq <= 3; seq++) {
		if (send_batch(s, c, session, seq, &id, path, offs, 2))
			c->cl_failures++;
		nng_msleep(PAUSE_MS);
		if (seq == 20) {
			/* An agent that restarted: a new session, a hello. */
			session += 0x10000;
			seq = 0;
			if (send_hello(s, c, session, host))
				c->cl_failures++;
		}
	}
	nng_close(s);
	return NULL;
}

static int cmp_double(const void *a, const void *b)
{
	double x = *(const double *)a, y = *(const double *)b;
	return x < y ? -1 : x > y;
}

/* ---- the large file ---- */

/* find_big: the debug file of this machine's libc (libc6-dbg): 4 MB of
 * DWARF, whose ingest keeps a worker busy for a good part of a second. */
static int find_big(char *path, size_t len)
{
	static const char *libcs[] = { "/lib/x86_64-linux-gnu/libc.so.6",
				       "/lib/aarch64-linux-gnu/libc.so.6" };
	char hex[2 * FP_BUILD_ID_MAX + 1];
	struct fp_build_id id;
	size_t i;
	int fd, err = -ENOENT;

	elf_version(EV_CURRENT);
	for (i = 0; i < sizeof(libcs) / sizeof(libcs[0]) && err; i++) {
		if ((fd = open(libcs[i], O_RDONLY | O_CLOEXEC)) < 0)
			continue;
		err = fp_elfnote_build_id(fd, &id);
		close(fd);
		snprintf(code_path, sizeof(code_path), "%s", libcs[i]);
	}
	if (err)
		return err;
	fp_build_id_hex(&id, hex);
	snprintf(path, len, "/usr/lib/debug/.build-id/%.2s/%s.debug", hex, hex + 2);
	if (access(path, R_OK)) {
		fprintf(stderr, "  %s: %s (install libc6-dbg)\n", path, strerror(errno));
		return -ENOENT;
	}
	return 0;
}

/* pick_functions: NFUNCS functions of the debug file at fd whose address
 * no other symbol shares (so that their name is certain), as offsets in
 * the file of their code at fd_code (through its PT_LOAD that holds them:
 * a debug file's own program headers have other offsets). */
static int pick_functions(int fd, int fd_code)
{
	Elf *elf = elf_begin(fd, ELF_C_READ, NULL), *code = elf_begin(fd_code, ELF_C_READ, NULL);
	Elf_Scn *scn = NULL;
	GElf_Shdr sh;
	int found = 0;

	if (!elf || !code) {
		elf_end(elf);
		elf_end(code);
		return -EINVAL;
	}
	while (found < NFUNCS && (scn = elf_nextscn(elf, scn))) {
		Elf_Data *data;
		size_t i, j, n;

		if (!gelf_getshdr(scn, &sh) || sh.sh_type != SHT_SYMTAB || !sh.sh_entsize ||
		    !(data = elf_getdata(scn, NULL)))
			continue;
		n = sh.sh_size / sh.sh_entsize;
		for (i = 1; i < n && found < NFUNCS; i += n / 200 + 1) {
			GElf_Sym sym, other;
			const char *name;
			int unique = 1;
			size_t k, nph;

			if (!gelf_getsym(data, (int)i, &sym) ||
			    GELF_ST_TYPE(sym.st_info) != STT_FUNC || sym.st_size < 32 ||
			    !sym.st_value || !(name = elf_strptr(elf, sh.sh_link, sym.st_name)) ||
			    name[0] == '_' || strlen(name) >= sizeof(big_names[0]) ||
			    strchr(name, '@'))
				continue;
			for (j = 1; j < n && unique; j++)
				unique = j == i || !gelf_getsym(data, (int)j, &other) ||
					 other.st_value != sym.st_value;
			if (!unique || elf_getphdrnum(code, &nph))
				continue;
			for (k = 0; k < nph; k++) {
				GElf_Phdr ph;
				if (gelf_getphdr(code, (int)k, &ph) && ph.p_type == PT_LOAD &&
				    sym.st_value >= ph.p_vaddr &&
				    sym.st_value < ph.p_vaddr + ph.p_memsz) {
					big_offsets[found] = sym.st_value - ph.p_vaddr +
							     ph.p_offset + 8;
					snprintf(big_names[found], sizeof(big_names[0]), "%s",
						 name);
					found++;
					break;
				}
			}
		}
	}
	elf_end(elf);
	elf_end(code);
	return found == NFUNCS ? 0 : -ENOENT;
}

static int copy_file(const char *from, const char *to)
{
	int in = open(from, O_RDONLY | O_CLOEXEC), err;
	char buf[1 << 16];
	ssize_t n;
	FILE *out;

	if (in < 0)
		return -errno;
	if (!(out = fopen(to, "we"))) {
		close(in);
		return -errno;
	}
	while ((n = read(in, buf, sizeof(buf))) > 0)
		fwrite(buf, 1, (size_t)n, out);
	err = n < 0 ? -errno : 0;
	if (fclose(out) && !err)
		err = -EIO;
	close(in);
	return err;
}

/* folded_of: the folded file of interval seq of host, read whole (NULL if
 * none yet). */
static char *folded_of(const char *out_dir, const char *host, uint64_t seq)
{
	char dir[256], suffix[32], path[700];
	struct dirent *e;
	char *text = NULL;
	DIR *d;

	snprintf(dir, sizeof(dir), "%s/%s", out_dir, host);
	snprintf(suffix, sizeof(suffix), "-%llu.folded", (unsigned long long)seq);
	if (!(d = opendir(dir)))
		return NULL;
	while (!text && (e = readdir(d))) {
		size_t n = strlen(e->d_name), k = strlen(suffix);
		FILE *f;
		if (n <= k || strcmp(e->d_name + n - k, suffix))
			continue;
		snprintf(path, sizeof(path), "%s/%s", dir, e->d_name);
		if ((f = fopen(path, "re"))) {
			text = calloc(1, 1 << 16);
			if (text && fread(text, 1, (1 << 16) - 1, f) == 0) {
				free(text);
				text = NULL;
			}
			fclose(f);
		}
	}
	closedir(d);
	return text;
}

static char *wait_folded(const char *out_dir, const char *host, uint64_t seq, int seconds)
{
	char *t = NULL;

	for (int i = 0; i < seconds * 20 && !(t = folded_of(out_dir, host, seq)); i++)
		nng_msleep(50);
	return t;
}

/* run_devices: the 50 devices and the one with the large file; with a
 * resolver (in-process server), the window lasts while its ingest runs,
 * else for seconds. */
static void run_devices(struct fp_resolver *r, int seconds, double *p50, double *p99, double *pmax,
			size_t *nreq, size_t *in_window, int *failures)
{
	struct client clients[DEVICES + 1];
	double *all = NULL;
	size_t n = 0, i, j;
	nng_socket big;
	int k;

	memset(clients, 0, sizeof(clients));
	stop_clients = 0;
	for (k = 0; k < DEVICES; k++) {
		clients[k].cl_index = k;
		pthread_create(&clients[k].cl_thread, NULL, client_main, &clients[k]);
	}
	nng_msleep(500); /* the devices are talking */
	*failures = 0;
	if (dial(&big) || send_hello(big, &clients[DEVICES], 0xb16, "big-device")) {
		(*failures)++;
	} else {
		window_start_ns = fp_now_ns(CLOCK_MONOTONIC);
		if (send_batch(big, &clients[DEVICES], 0xb16, 1, &big_id, big_path, big_offsets,
			       NFUNCS))
			(*failures)++;
		if (r) {
			/* Until the workers are done with it. */
			nng_msleep(50);
			for (k = 0; k < 240 * 20 && fp_resolver_busy(r, &big_id); k++)
				nng_msleep(50);
		} else {
			nng_msleep((unsigned)seconds * 1000);
		}
		window_end_ns = fp_now_ns(CLOCK_MONOTONIC);
		nng_msleep(300);
		if (send_batch(big, &clients[DEVICES], 0xb16, 2, &big_id, big_path, big_offsets,
			       NFUNCS))
			(*failures)++;
		nng_close(big);
	}
	stop_clients = 1;
	for (k = 0; k < DEVICES; k++)
		pthread_join(clients[k].cl_thread, NULL);
	*in_window = 0;
	for (k = 0; k <= DEVICES; k++) {
		*failures += clients[k].cl_failures;
		all = realloc(all, (n + clients[k].cl_n + 1) * sizeof(double));
		for (j = 0; j < clients[k].cl_n; j++) {
			all[n++] = clients[k].cl_ms[j];
			if (k < DEVICES && clients[k].cl_done_ns[j] >= window_start_ns &&
			    clients[k].cl_done_ns[j] <= window_end_ns)
				(*in_window)++;
		}
		free(clients[k].cl_ms);
		free(clients[k].cl_done_ns);
	}
	qsort(all, n, sizeof(double), cmp_double);
	i = n ? (size_t)((double)(n - 1) * 0.99) : 0;
	*p50 = n ? all[(n - 1) / 2] : 0;
	*p99 = n ? all[i] : 0;
	*pmax = n ? all[n - 1] : 0;
	*nreq = n;
	free(all);
}

static void test_replies_never_wait(void)
{
	char cache[128], out[128], src[700], sock[128];
	struct fp_resolver_opts ro = { .ro_local_files = 1 };
	struct fp_resolver *r = NULL;
	struct fp_server *s = NULL;
	struct fp_listener *l = NULL;
	struct fp_server_stats st;
	double p50, p99, pmax;
	size_t nreq, in_window;
	int failures, fd, k;
	char *text;

	snprintf(cache, sizeof(cache), "%s/cache", tmpdir);
	snprintf(out, sizeof(out), "%s/out", tmpdir);
	snprintf(sock, sizeof(sock), "%s/sock", tmpdir);
	snprintf(addr, sizeof(addr), "ipc://%s", sock);
	ro.ro_cache_dir = cache;
	ro.ro_debug_dir = NULL; /* the copy at the mapping's path is the only source */
	CHECK_EQ_INT(find_big(src, sizeof(src)), 0);
	snprintf(big_path, sizeof(big_path), "%s/big.debug", tmpdir);
	CHECK_EQ_INT(copy_file(src, big_path), 0);
	fd = open(big_path, O_RDONLY | O_CLOEXEC);
	CHECK(fd >= 0);
	if (fd < 0)
		return;
	elf_version(EV_CURRENT);
	CHECK_EQ_INT(fp_elfnote_build_id(fd, &big_id), 0);
	{
		int code = open(code_path, O_RDONLY | O_CLOEXEC);
		CHECK_EQ_INT(pick_functions(fd, code), 0);
		close(code);
	}
	close(fd);
	{
		struct stat sb = { 0 };
		stat(big_path, &sb);
		printf("  large file: %s (%lld bytes), functions %s, %s, %s\n", src,
		       (long long)sb.st_size, big_names[0], big_names[1], big_names[2]);
	}

	CHECK_EQ_INT(fp_resolver_open(&r, &ro), 0);
	CHECK_EQ_INT(fp_resolver_start(r, 2, 64), 0);
	CHECK_EQ_INT(fp_server_alloc(&s, r, out, cache), 0);
	CHECK_EQ_INT(fp_server_start(s, 60000), 0);
	CHECK_EQ_INT(fp_listen_open(&l, s, addr, 8, NULL), 0);
	if (!l)
		goto out;

	run_devices(r, 0, &p50, &p99, &pmax, &nreq, &in_window, &failures);
	printf("  %zu requests, %zu answered during the %.0f ms ingest: p50 %.2f ms, p99 %.2f "
	       "ms, max %.2f ms\n",
	       nreq, in_window, (double)(window_end_ns - window_start_ns) / 1e6, p50, p99, pmax);
	CHECK_EQ_INT(failures, 0);
	CHECK(p99 < P99_MAX_MS);
	/* The property is only shown when the ingest lasted and the devices
	 * were answered meanwhile. */
	CHECK(window_end_ns - window_start_ns >= 100000000ull);
	CHECK(in_window >= DEVICES / 2);

	/* The interval that named the file waited for its symbols; the next
	 * found them in the cache. */
	for (k = 1; k <= 2; k++) {
		text = wait_folded(out, "big-device", (uint64_t)k, 20);
		CHECK(text != NULL);
		if (!text)
			continue;
		for (int f = 0; f < NFUNCS; f++)
			if (!strstr(text, big_names[f])) {
				fprintf(stderr, "  interval %d lacks %s:\n%s", k, big_names[f],
					text);
				CHECK(strstr(text, big_names[f]) != NULL);
			}
		CHECK(strstr(text, "+0x") == NULL);
		free(text);
	}
	text = wait_folded(out, "device-0", 1, 5);
	CHECK(text != NULL && strstr(text, "app-0+0x") != NULL);
	free(text);
	fp_server_stats(s, &st);
	CHECK_EQ_INT(st.sv_symbol_wait_timeouts, 0);
	CHECK(st.sv_ingest_jobs >= 1);
	CHECK_EQ_INT(st.sv_pipeline_dropped, 0);
	/* The resent-interval numbers live with the sessions in the cache,
	 * not in the output tree. */
	snprintf(src, sizeof(src), "%s/sessions/big-device/%016llx", cache, 0xb16ull);
	CHECK(access(src, F_OK) == 0);
out:
	fp_listen_close(l);
	fp_server_free(s);
	fp_resolver_close(r);
}

int main(int argc, char **argv)
{

	if (argc >= 3 && !strcmp(argv[1], "--external")) {
		double p50, p99, pmax;
		size_t nreq, in_window;
		int failures, fd, code;

		snprintf(addr, sizeof(addr), "%s", argv[2]);
		if (find_big(big_path, sizeof(big_path)) ||
		    (fd = open(big_path, O_RDONLY | O_CLOEXEC)) < 0)
			return 2;
		elf_version(EV_CURRENT);
		code = open(code_path, O_RDONLY | O_CLOEXEC);
		if (fp_elfnote_build_id(fd, &big_id) || pick_functions(fd, code))
			return 2;
		close(fd);
		close(code);
		run_devices(NULL, argc >= 4 ? atoi(argv[3]) : 10, &p50, &p99, &pmax, &nreq,
			    &in_window, &failures);
		printf("%zu requests (%zu failed): p50 %.2f ms, p99 %.2f ms, max %.2f ms\n", nreq,
		       (size_t)failures, p50, p99, pmax);
		return 0;
	}
	if (check_tmpdir(tmpdir, sizeof(tmpdir), "fp-listen"))
		return 1;
	RUN(test_replies_never_wait);
	if (check_rmtree(tmpdir))
		fprintf(stderr, "cannot remove %s\n", tmpdir);
	return CHECK_DONE();
}
