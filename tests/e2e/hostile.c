/* hostile.c: a hostile agent, for hostile_test.sh.  It speaks the wire
 * protocol (wire.h encoders) to a symbolizer and runs one attack of
 * issue 10 at a time, while a well-behaved device says hello every 20 ms
 * on a connection of its own and times the replies.  It prints what it
 * saw as KEY=VALUE lines; the script asserts on them, on the server's
 * files and on /metrics.
 *
 *   hostile ADDR PID ATTACK [N]
 *
 * ADDR is the symbolizer's agent address (tcp://127.0.0.1:PORT), PID its
 * process (for its resident memory and open descriptors).  Attacks:
 *
 *   device     a real device: hello, then batch 1 of host "real-device"
 *              (session 1000), whose profile the others try to replace
 *   fakehosts  N hellos, each of a new host and session, each followed by
 *              one batch: hellos_ok, hellos_refused, batches_ok
 *   hijack     a hello reusing the real device's session id from another
 *              host, then batch 2 of the real device: hijack_status,
 *              real_status (0: its session survived everything)
 *   overwrite  a new session claiming host "real-device" sends batch 1
 *              with the real device's start time (999 samples, not 10);
 *              then one starting a day in the future: same_status,
 *              future_status
 *   ksyms      kallsyms for a build-ID nobody asked for: ksyms_status
 *   fetch      N sessions, each with two batches naming 200 user mappings
 *              of unknown build-IDs, never answering: fetch_replies_ok,
 *              ranges (asked for in all), max_ranges (in one reply),
 *              fds_before, fds_after
 *   limits     a batch of 70,000 mappings, then batches of 30,000 threads
 *              until the session is started over: mappings_status,
 *              threads_batches (accepted before the restart)
 *   bigbatch   one batch of 150,000 thread definitions, 8 times in
 *              sessions of their own, while another connection sends
 *              small batches of the same session (answered REJECTED, or
 *              not at all while the session is busy): bigbatch_status
 *              (of the last), bigbatch_ms (the longest reply),
 *              bigbatch_unanswered (small batches with no reply in 50 ms)
 *   collide    one batch of 32,768 stack nodes whose ids collide under a
 *              guessed hash key: collide_ms (its reply time)
 *   partial    N raw connections each declaring an 8 MiB message and
 *              sending all of it but 1 KiB, held for 6 s:
 *              partial_sent (connections that took all the bytes),
 *              rss_before_kb, rss_max_kb, partial_closed (by the server)
 *
 * Every attack ends with max_hello_ms and hellos_unanswered, the
 * well-behaved device's view. */
#include "fileid.h"
#include "wire.h"

#include <arpa/inet.h>
#include <dirent.h>
#include <endian.h>
#include <errno.h>
#include <inttypes.h>
#include <netinet/in.h>
#include <poll.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>
#include <nng/nng.h>
#include <nng/protocol/reqrep0/req.h>
#include <nng/supplemental/util/platform.h>

#define REAL_SESSION 1000
#define REAL_START_NS 1700000000000000000ull

static const char *addr;
static int server_pid;

static double now_ms(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (double)ts.tv_sec * 1e3 + (double)ts.tv_nsec / 1e6;
}

static nng_socket dial(void)
{
	nng_socket s;

	if (nng_req0_open(&s) || nng_dial(s, addr, NULL, 0)) {
		fprintf(stderr, "hostile: cannot connect to %s\n", addr);
		exit(1);
	}
	nng_socket_set_ms(s, NNG_OPT_RECVTIMEO, 10000);
	nng_socket_set_ms(s, NNG_OPT_REQ_RESENDTIME, 60000);
	return s;
}

/* call: send buf (freed), the reply's status (its error in *why if asked),
 * or -1 for no reply. */
static int call(nng_socket s, char *buf, size_t len, struct fp_reply *out)
{
	struct fp_reply r;
	size_t rlen;
	char *rbuf;
	int rv = nng_send(s, buf, len, 0);

	free(buf);
	if (rv || nng_recv(s, &rbuf, &rlen, NNG_FLAG_ALLOC))
		return -1;
	rv = fp_wire_decode_reply(rbuf, rlen, &r);
	nng_free(rbuf, rlen);
	if (rv)
		return -1;
	rv = r.fr_status;
	if (out)
		*out = r;
	else
		fp_reply_fini(&r);
	return rv;
}

static int hello(nng_socket s, uint64_t session, const char *host)
{
	struct fp_hello h = { .fh_session = session,
			      .fh_host = (char *)host,
			      .fh_boot_id = "b",
			      .fh_kernel_release = "6.1.0",
			      .fh_agent_version = "hostile",
			      .fh_frequency = 99,
			      .fh_ncpus = 1 };
	size_t len;
	char *buf;

	if (fp_wire_encode_hello(&h, &buf, &len))
		return -1;
	return call(s, buf, len, NULL);
}

/* small_batch: batch seq of session: count samples of a two-frame stack of
 * an unresolvable user mapping; seq 1 defines them. */
static int small_batch(nng_socket s, uint64_t session, uint64_t seq, uint64_t start_ns,
		       uint32_t count)
{
	static const struct fp_build_id id = { .fb_len = 20, .fb_data = { 0xfe, 0xed, 0x01 } };
	struct fp_node nodes[2] = { { 20, FP_NODE_NONE, { 7, 0x1004 } },
				    { 21, 20, { 7, 0x1010 } } };
	struct fp_mapping m = { .fm_id = 7,
				.fm_kind = FP_MAP_USER,
				.fm_build_id = id,
				.fm_path = "/nonexistent/app" };
	struct fp_thread t = { .ft_id = 3,
			       .ft_pid = 100,
			       .ft_tid = 101,
			       .ft_comm = "worker",
			       .ft_process = "app" };
	struct fp_count c = { 3, 21, count };
	struct fp_batch b = { .fb_session = session,
			      .fb_seq = seq,
			      .fb_start_ns = start_ns,
			      .fb_end_ns = start_ns + 1000000000ull,
			      .fb_period_ns = 10101010,
			      .fb_ncounts = 1,
			      .fb_counts = &c };
	size_t len;
	char *buf;

	if (seq == 1) {
		b.fb_nmappings = 1, b.fb_mappings = &m;
		b.fb_nthreads = 1, b.fb_threads = &t;
		b.fb_nnodes = 2, b.fb_nodes = nodes;
	}
	if (fp_wire_encode_batch(&b, &buf, &len))
		return -1;
	return call(s, buf, len, NULL);
}

/* ---- the well-behaved device, timing its hellos ---- */

static volatile int probe_stop;
static double probe_max_ms;
static unsigned probe_unanswered;

static void *probe(void *arg)
{
	nng_socket s = dial();

	(void)arg;
	while (!probe_stop) {
		double t0 = now_ms(), dt;

		if (hello(s, 7777, "probe-device") != FP_REPLY_OK)
			probe_unanswered++;
		dt = now_ms() - t0;
		if (dt > probe_max_ms)
			probe_max_ms = dt;
		nng_msleep(20);
	}
	nng_close(s);
	return NULL;
}

/* ---- the server's resources ---- */

static long rss_kb(void)
{
	char path[64], line[256];
	long kb = -1;
	FILE *f;

	snprintf(path, sizeof(path), "/proc/%d/status", server_pid);
	if (!(f = fopen(path, "r")))
		return -1;
	while (fgets(line, sizeof(line), f))
		if (sscanf(line, "VmRSS: %ld kB", &kb) == 1)
			break;
	fclose(f);
	return kb;
}

static int open_fds(void)
{
	char path[64];
	struct dirent *e;
	int n = 0;
	DIR *d;

	snprintf(path, sizeof(path), "/proc/%d/fd", server_pid);
	if (!(d = opendir(path)))
		return -1;
	while ((e = readdir(d)))
		n += e->d_name[0] != '.';
	closedir(d);
	return n;
}

/* ---- attacks ---- */

static void attack_device(void)
{
	nng_socket s = dial();

	printf("device_hello=%d\n", hello(s, REAL_SESSION, "real-device"));
	printf("device_batch=%d\n", small_batch(s, REAL_SESSION, 1, REAL_START_NS, 10));
	nng_close(s);
}

static void attack_fakehosts(unsigned n)
{
	unsigned ok = 0, refused = 0, batches = 0;
	nng_socket s = dial();
	char host[64];

	for (unsigned i = 0; i < n; i++) {
		uint64_t session = 0x5000000000ull + i;
		int st;

		snprintf(host, sizeof(host), "fake-%u", i);
		st = hello(s, session, host);
		if (st == FP_REPLY_OK) {
			ok++;
			batches += small_batch(s, session, 1, REAL_START_NS, 10) == FP_REPLY_OK;
		} else if (st == FP_REPLY_REJECTED) {
			refused++;
		}
	}
	printf("hellos_ok=%u\nhellos_refused=%u\nbatches_ok=%u\n", ok, refused, batches);
	nng_close(s);
}

static void attack_hijack(void)
{
	nng_socket s = dial();

	printf("hijack_status=%d\n", hello(s, REAL_SESSION, "attacker"));
	printf("real_status=%d\n",
	       small_batch(s, REAL_SESSION, 2, REAL_START_NS + 1000000000ull, 10));
	nng_close(s);
}

static void attack_overwrite(void)
{
	uint64_t future = ((uint64_t)time(NULL) + 86400) * 1000000000ull;
	nng_socket s = dial();

	hello(s, 0x6000, "real-device");
	printf("same_status=%d\n", small_batch(s, 0x6000, 1, REAL_START_NS, 999));
	printf("future_status=%d\n", small_batch(s, 0x6000, 2, future, 999));
	nng_close(s);
}

static void attack_ksyms(void)
{
	struct fp_ksym sym = { 0x100, "attacker_was_here" };
	struct fp_ksyms k = { .fs_session = 0x7000,
			      .fs_kind = FP_MAP_KMODULE,
			      .fs_build_id = { .fb_len = 20, .fb_data = { 0xba, 0xd0 } },
			      .fs_name = "evil",
			      .fs_last = 1,
			      .fs_nsyms = 1,
			      .fs_syms = &sym };
	nng_socket s = dial();
	size_t len;
	char *buf;

	hello(s, 0x7000, "ksyms-host");
	if (fp_wire_encode_ksyms(&k, &buf, &len))
		exit(1);
	printf("ksyms_status=%d\n", call(s, buf, len, NULL));
	nng_close(s);
}

/* fetch_batch: batch seq of session naming 200 user mappings of build-IDs
 * no source has, one sample in each; batch 1 defines them. */
static int fetch_batch(nng_socket s, uint64_t session, uint64_t seq, struct fp_reply *r)
{
	enum { M = 200 };
	static struct fp_mapping m[M];
	static struct fp_node nd[M];
	static struct fp_count c[M];
	struct fp_thread t = { .ft_id = 1,
			       .ft_pid = 1,
			       .ft_tid = 1,
			       .ft_comm = "x",
			       .ft_process = "x" };
	struct fp_batch b = { .fb_session = session,
			      .fb_seq = seq,
			      .fb_start_ns = REAL_START_NS + seq * 1000000000ull,
			      .fb_end_ns = REAL_START_NS + seq * 1000000000ull + 1,
			      .fb_nmappings = M,
			      .fb_mappings = m,
			      .fb_nthreads = 1,
			      .fb_threads = &t,
			      .fb_nnodes = M,
			      .fb_nodes = nd,
			      .fb_ncounts = M,
			      .fb_counts = c };
	size_t len;
	char *buf;

	for (uint32_t i = 0; i < M; i++) {
		m[i] = (struct fp_mapping){ .fm_id = i,
					    .fm_kind = FP_MAP_USER,
					    .fm_path = "/nonexistent/lib" };
		m[i].fm_build_id.fb_len = 20;
		memcpy(m[i].fm_build_id.fb_data, &session, sizeof(session));
		memcpy(m[i].fm_build_id.fb_data + 8, &i, sizeof(i));
		nd[i] = (struct fp_node){ i, FP_NODE_NONE, { i, 0x1000 } };
		c[i] = (struct fp_count){ 1, i, 1 };
	}
	if (seq > 1)
		b.fb_nmappings = b.fb_nthreads = b.fb_nnodes = 0;
	if (fp_wire_encode_batch(&b, &buf, &len))
		return -1;
	return call(s, buf, len, r);
}

static void attack_fetch(unsigned n)
{
	size_t ranges = 0, max_ranges = 0;
	int fds_before = open_fds(), statuses = 0;
	nng_socket s = dial();

	/* Batch 2, a second later, when no source has been found for any
	 * of the build-IDs: all of them are to be fetched now. */
	for (uint64_t seq = 1; seq <= 2; seq++) {
		for (unsigned i = 0; i < n; i++) {
			struct fp_reply r = { 0 };
			uint64_t session = 0x8000 + i;

			if (seq == 1)
				hello(s, session, "fetch-host");
			statuses += fetch_batch(s, session, seq, &r) == FP_REPLY_OK;
			ranges += r.fr_nranges;
			if (r.fr_nranges > max_ranges)
				max_ranges = r.fr_nranges;
			fp_reply_fini(&r);
		}
		nng_msleep(1000);
	}
	printf("fetch_replies_ok=%d\nranges=%zu\nmax_ranges=%zu\nfds_before=%d\nfds_after=%d\n",
	       statuses, ranges, max_ranges, fds_before, open_fds());
	nng_close(s);
}

static void attack_limits(void)
{
	enum { MAPPINGS = 70000, THREADS = 30000 };
	struct fp_mapping *m = calloc(MAPPINGS, sizeof(*m));
	struct fp_thread *t = calloc(THREADS, sizeof(*t));
	struct fp_batch b = { .fb_session = 0x9000,
			      .fb_seq = 1,
			      .fb_start_ns = REAL_START_NS,
			      .fb_end_ns = REAL_START_NS + 1 };
	nng_socket s = dial();
	int st, accepted = 0;
	size_t len;
	char *buf;

	for (uint32_t i = 0; i < MAPPINGS; i++)
		m[i] = (struct fp_mapping){ .fm_id = i, .fm_kind = FP_MAP_USER, .fm_path = "/x" };
	hello(s, 0x9000, "limits-host");
	b.fb_nmappings = MAPPINGS, b.fb_mappings = m;
	if (fp_wire_encode_batch(&b, &buf, &len))
		exit(1);
	printf("mappings_status=%d\n", call(s, buf, len, NULL));
	/* Threads: over several batches, as an agent defines them.  The
	 * server holds its lock while it applies a batch (about 1 us a
	 * definition), so one batch of all of them would hold other devices'
	 * replies for that long. */
	hello(s, 0x9000, "limits-host");
	b.fb_nmappings = 0, b.fb_mappings = NULL;
	for (uint64_t seq = 1; seq <= 10; seq++) {
		for (uint32_t i = 0; i < THREADS; i++)
			t[i] = (struct fp_thread){ .ft_id = (uint32_t)(seq * THREADS + i),
						   .ft_pid = i,
						   .ft_tid = i,
						   .ft_comm = "t",
						   .ft_process = "p" };
		b.fb_seq = seq, b.fb_nthreads = THREADS, b.fb_threads = t;
		if (fp_wire_encode_batch(&b, &buf, &len))
			exit(1);
		if ((st = call(s, buf, len, NULL)) != FP_REPLY_OK)
			break;
		accepted++;
	}
	printf("threads_batches=%d\nthreads_status=%d\n", accepted, st);
	free(m);
	free(t);
	nng_close(s);
}

static volatile uint64_t bigbatch_session;
static volatile int bigbatch_stop;

/* resend: small batches for the big batch's session, as an agent's resend
 * would come; the number with no reply in 50 ms. */
static void *resend(void *arg)
{
	nng_socket s = dial();
	uint64_t seq = 1000;
	uintptr_t unanswered = 0;

	(void)arg;
	nng_socket_set_ms(s, NNG_OPT_RECVTIMEO, 50);
	while (!bigbatch_stop) {
		if (bigbatch_session &&
		    small_batch(s, bigbatch_session, seq++, REAL_START_NS, 1) == -1)
			unanswered++;
		nng_msleep(2);
	}
	nng_close(s);
	return (void *)unanswered;
}

/* attack_bigbatch: as many definitions in one batch as a session may
 * hold, while the prober says hello: what the server's lock costs other
 * devices; and what a message for the session gets meanwhile. */
static void attack_bigbatch(void)
{
	pthread_t resender;
	void *unanswered;
	enum { THREADS = 150000, ROUNDS = 8 };
	struct fp_thread *t = calloc(THREADS, sizeof(*t));
	struct fp_batch b = { .fb_seq = 1,
			      .fb_start_ns = REAL_START_NS,
			      .fb_end_ns = REAL_START_NS + 1 };
	nng_socket s = dial();
	double t0, ms, max_ms = 0;
	int st = -1;
	size_t len;
	char *buf;

	if (!t)
		exit(1);
	for (uint32_t i = 0; i < THREADS; i++)
		t[i] = (struct fp_thread){ .ft_id = i,
					   .ft_pid = i,
					   .ft_tid = i,
					   .ft_comm = "t",
					   .ft_process = "p" };
	b.fb_nthreads = THREADS, b.fb_threads = t;
	pthread_create(&resender, NULL, resend, NULL);
	for (uint64_t r = 0; r < ROUNDS; r++) {
		b.fb_session = 0xb000 + r;
		hello(s, b.fb_session, "bigbatch-host");
		bigbatch_session = b.fb_session;
		if (fp_wire_encode_batch(&b, &buf, &len))
			exit(1);
		t0 = now_ms();
		st = call(s, buf, len, NULL);
		ms = now_ms() - t0;
		max_ms = ms > max_ms ? ms : max_ms;
	}
	bigbatch_stop = 1;
	pthread_join(resender, &unanswered);
	printf("bigbatch_status=%d\nbigbatch_ms=%.1f\nbigbatch_unanswered=%lu\n", st, max_ms,
	       (unsigned long)(uintptr_t)unanswered);
	free(t);
	nng_close(s);
}

static uint64_t guessed_hash(uint32_t id)
{
	static const uint8_t key[16] = { 0 };
	const void *buf = &id;
	size_t len = sizeof(id);
	uint64_t h;

	fp_siphash(key, &buf, &len, 1, (uint8_t *)&h, sizeof(h));
	return le64toh(h);
}

static void attack_collide(void)
{
	enum { N = 32768 };
	struct fp_node *nd = calloc(N, sizeof(*nd));
	struct fp_thread t = { .ft_id = 1,
			       .ft_pid = 1,
			       .ft_tid = 1,
			       .ft_comm = "x",
			       .ft_process = "x" };
	struct fp_count c = { 1, 0, 1 };
	struct fp_batch b = { .fb_session = 0xa000,
			      .fb_seq = 1,
			      .fb_start_ns = REAL_START_NS,
			      .fb_end_ns = REAL_START_NS + 1,
			      .fb_nthreads = 1,
			      .fb_threads = &t,
			      .fb_nnodes = N,
			      .fb_nodes = nd,
			      .fb_ncounts = 1,
			      .fb_counts = &c };
	nng_socket s = dial();
	uint32_t n = 0;
	double t0;
	size_t len;
	char *buf;
	int st;

	for (uint32_t k = 1; n < N; k++)
		if ((guessed_hash(k) & 0x1ffff) < 128)
			nd[n++] = (struct fp_node){ k, FP_NODE_NONE, { FP_MAPPING_NONE, 0x1000 } };
	c.fc_node = nd[0].fn_id;
	hello(s, 0xa000, "collide-host");
	if (fp_wire_encode_batch(&b, &buf, &len))
		exit(1);
	t0 = now_ms();
	st = call(s, buf, len, NULL);
	printf("collide_status=%d\ncollide_ms=%.1f\n", st, now_ms() - t0);
	free(nd);
	nng_close(s);
}

/* sp_connect: a TCP connection that has said the SP header of a REQ
 * socket (nng's TCP transport), or -1. */
static int sp_connect(void)
{
	static const unsigned char header[8] = { 0, 'S', 'P', 0, 0, 0x30, 0, 0 };
	struct sockaddr_in sa = { .sin_family = AF_INET };
	const char *port = strrchr(addr, ':');
	int fd = socket(AF_INET, SOCK_STREAM, 0);

	sa.sin_port = htons((uint16_t)atoi(port + 1));
	inet_pton(AF_INET, "127.0.0.1", &sa.sin_addr);
	if (fd < 0 || connect(fd, (struct sockaddr *)&sa, sizeof(sa)) ||
	    write(fd, header, sizeof(header)) != sizeof(header)) {
		if (fd >= 0)
			close(fd);
		return -1;
	}
	return fd;
}

/* send_all: 0 when all of buf went out within 2 s. */
static int send_all(int fd, const char *buf, size_t len)
{
	double deadline = now_ms() + 2000;

	while (len && now_ms() < deadline) {
		struct pollfd p = { fd, POLLOUT, 0 };
		ssize_t n;

		if (poll(&p, 1, 100) <= 0)
			continue;
		if ((n = send(fd, buf, len, MSG_NOSIGNAL | MSG_DONTWAIT)) < 0) {
			if (errno == EAGAIN)
				continue;
			return -1;
		}
		buf += n, len -= (size_t)n;
	}
	return len ? -1 : 0;
}

static void attack_partial(unsigned n)
{
	const size_t size = FP_WIRE_MAX_MESSAGE, sent_len = size - 1024;
	char *body = calloc(1, sent_len);
	long before = rss_kb(), max = before, kb;
	int *fds = calloc(n, sizeof(*fds)), sent = 0, closed = 0;
	uint64_t len_be = htobe64(size);
	double until;

	for (unsigned i = 0; i < n; i++) {
		fds[i] = sp_connect();
		if (fds[i] >= 0 && send_all(fds[i], (const char *)&len_be, 8) == 0 &&
		    send_all(fds[i], body, sent_len) == 0)
			sent++;
		if ((kb = rss_kb()) > max)
			max = kb;
	}
	/* Held: the server's idle timeout closes them. */
	for (until = now_ms() + 6000; now_ms() < until;) {
		if ((kb = rss_kb()) > max)
			max = kb;
		nng_msleep(100);
	}
	for (unsigned i = 0; i < n; i++) {
		char junk[64];
		ssize_t got;

		/* Closed: end of stream (or reset) after the server's SP header. */
		while (fds[i] >= 0 && (got = recv(fds[i], junk, sizeof(junk), MSG_DONTWAIT)) > 0)
			;
		if (fds[i] < 0 || got == 0 || (got < 0 && errno != EAGAIN))
			closed++;
		if (fds[i] >= 0)
			close(fds[i]);
	}
	printf("partial_sent=%d\nrss_before_kb=%ld\nrss_max_kb=%ld\npartial_closed=%d\n", sent,
	       before, max, closed);
	free(fds);
	free(body);
}

int main(int argc, char **argv)
{
	unsigned n = argc > 4 ? (unsigned)strtoul(argv[4], NULL, 10) : 1;
	const char *attack;
	pthread_t prober;

	if (argc < 4) {
		fprintf(stderr, "usage: hostile ADDR PID ATTACK [N]\n");
		return 2;
	}
	addr = argv[1];
	server_pid = atoi(argv[2]);
	attack = argv[3];
	pthread_create(&prober, NULL, probe, NULL);
	nng_msleep(100);
	if (!strcmp(attack, "device"))
		attack_device();
	else if (!strcmp(attack, "fakehosts"))
		attack_fakehosts(n);
	else if (!strcmp(attack, "hijack"))
		attack_hijack();
	else if (!strcmp(attack, "overwrite"))
		attack_overwrite();
	else if (!strcmp(attack, "ksyms"))
		attack_ksyms();
	else if (!strcmp(attack, "fetch"))
		attack_fetch(n);
	else if (!strcmp(attack, "limits"))
		attack_limits();
	else if (!strcmp(attack, "bigbatch"))
		attack_bigbatch();
	else if (!strcmp(attack, "collide"))
		attack_collide();
	else if (!strcmp(attack, "partial"))
		attack_partial(n);
	else {
		fprintf(stderr, "hostile: unknown attack %s\n", attack);
		return 2;
	}
	probe_stop = 1;
	pthread_join(prober, NULL);
	printf("max_hello_ms=%.1f\nhellos_unanswered=%u\n", probe_max_ms, probe_unanswered);
	return 0;
}
