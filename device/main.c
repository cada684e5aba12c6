/* main.c: fleetprof-agent, the device daemon.  Samples with BPF, ships
 * (build-ID, offset) stacks to the symbolizer once per interval, buffers
 * while the symbolizer is away. */
#include "cli.h"
#include "collector.h"
#include "kernel.h"
#include "log.h"
#include "sampler.h"
#include "unwind_maps.h"
#include "cpython.h"
#include "uplink.h"
#include "wire.h"

#include <errno.h>
#include <fcntl.h>
#include <getopt.h>
#include <inttypes.h>
#include <limits.h>
#include <malloc.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/random.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#define KSYMS_PART 4000 /* symbols per message: bounds the agent's memory */
#define MAX_MEM_DEFAULT_MB 32 /* the agent's heap; README, "Memory" */

static volatile sig_atomic_t exiting;

struct agent_opts {
	const char *ao_server;
	uint32_t ao_frequency;
	uint32_t ao_interval_s;
	uint32_t ao_pid;
	uint32_t ao_buffer;      /* intervals kept while the server is away */
	uint32_t ao_timeout_ms;  /* for one reply */
	uint32_t ao_unwind_mb;   /* unwind table rows in BPF maps */
	int ao_no_python;        /* leave CPython's eval loop as native frames */
	uint32_t ao_max_mem_mb;  /* heap above which the agent starts over */
	size_t ao_nlabels;
	char *ao_label_keys[64];
	char *ao_label_values[64];
};

struct agent {
	struct agent_opts ag_o;
	struct fp_kernel ag_kernel;
	struct fp_collector *ag_collector;
	struct fp_sampler *ag_sampler;
	struct fp_uplink *ag_uplink;
	struct fp_unwind *ag_unwind; /* NULL with --unwind-mem 0 */
	struct fp_python *ag_python; /* CPython frames; NULL without ag_unwind */
	struct fp_hello ag_hello;
	int ag_hello_ok;
	uint64_t ag_session;
	uint64_t ag_seq;
	uint64_t ag_next_cut_ns;
	struct fp_interval *ag_buf; /* ring of ag_o.ao_buffer intervals */
	size_t ag_buf_head, ag_buf_len;
	struct fp_lost ag_lost;     /* agent-side totals */
	uint64_t ag_sampled, ag_acked_samples;
	uint64_t ag_batch_bytes, ag_ksyms_bytes; /* acknowledged, on the wire */
	uint64_t ag_file_bytes;     /* file bytes the symbolizer asked for */
	uint64_t ag_table_bytes;    /* unwind table bytes received */
	uint64_t ag_resets;         /* times the memory budget made us start over */
};

static void on_signal(int sig)
{
	exiting = 1;
}

static void on_known(uint32_t pid, int known, void *arg)
{
	struct agent *a = arg;

	if (pid)
		fp_sampler_mark_pid(a->ag_sampler, pid, known);
	else
		fp_sampler_forget_pids(a->ag_sampler);
}

static void on_sample(const struct fp_bpf_sample *s, const void *u, const void *k, void *arg)
{
	struct agent *a = arg;

	fp_collector_add(a->ag_collector, s, u, k);
}

/* heap_bytes: the agent's private memory (RssAnon), or 0 if unknown. */
static uint64_t heap_bytes(void)
{
	unsigned long long kb = 0;
	char line[128];
	FILE *f = fopen("/proc/self/status", "re");

	while (f && fgets(line, sizeof(line), f))
		if (sscanf(line, "RssAnon: %llu kB", &kb) == 1)
			break;
	if (f)
		fclose(f);
	return (uint64_t)kb << 10;
}

static int collector_open(struct agent *a)
{
	int err = fp_collector_alloc(&a->ag_collector, "/proc", "/var/lib/docker", &a->ag_kernel);

	if (err)
		return err;
	fp_collector_set_known_fn(a->ag_collector, on_known, a);
	if (a->ag_python) {
		fp_collector_set_maps_fn(a->ag_collector, fp_python_on_maps, a->ag_python);
		fp_collector_set_pycode_fn(a->ag_collector, fp_python_read_code, a->ag_python);
	} else if (a->ag_unwind) {
		fp_collector_set_maps_fn(a->ag_collector, fp_unwind_on_maps, a->ag_unwind);
	}
	return 0;
}

/* Over the memory budget: forget every process, thread, stack and path,
 * and the intervals that refer to them (counted as dropped), and start a
 * new session, rather than grow until the switch's OOM policy reboots it.
 * Unwind tables stay: they have their own fixed budget. */
static void agent_start_over(struct agent *a, uint64_t heap)
{
	size_t i;

	fp_warnx("memory %" PRIu64 " MB over --max-mem %u MB: forgetting all processes and "
		 "stacks, new session", heap >> 20, a->ag_o.ao_max_mem_mb);
	for (i = 0; i < a->ag_buf_len; i++) {
		struct fp_interval *iv = &a->ag_buf[(a->ag_buf_head + i) % a->ag_o.ao_buffer];
		a->ag_lost.fl_batches++;
		a->ag_lost.fl_samples_dropped += iv->fi_samples;
		fp_interval_fini(iv);
	}
	a->ag_buf_head = a->ag_buf_len = 0;
	fp_collector_free(a->ag_collector);
	a->ag_collector = NULL;
	fp_sampler_forget_pids(a->ag_sampler);
	if (collector_open(a)) {
		fp_warnx("out of memory starting over: exiting");
		exiting = 1;
		return;
	}
	a->ag_session++;
	a->ag_hello.fh_session = a->ag_session;
	a->ag_hello_ok = 0;
	a->ag_resets++;
	malloc_trim(0);
}

/* Close the current interval into the buffer, dropping the oldest when full. */
static void agent_cut(struct agent *a)
{
	uint64_t bpf[FP_CNT_MAX];
	struct fp_interval iv;

	if (fp_collector_cut(a->ag_collector, ++a->ag_seq, fp_now_ns(CLOCK_REALTIME), &iv)) {
		fp_warnx("out of memory closing interval %" PRIu64, a->ag_seq);
		return;
	}
	a->ag_sampled += iv.fi_samples;
	a->ag_lost.fl_samples += iv.fi_lost.fl_samples; /* collector: out of memory */
	iv.fi_lost = a->ag_lost;
	if (fp_sampler_counters(a->ag_sampler, bpf) == 0) {
		iv.fi_lost.fl_samples += bpf[FP_CNT_LOST];
		iv.fi_lost.fl_stack_errors = bpf[FP_CNT_USTACK_ERR] + bpf[FP_CNT_KSTACK_ERR];
	}
	if (a->ag_buf_len == a->ag_o.ao_buffer) {
		struct fp_interval *old = &a->ag_buf[a->ag_buf_head];
		a->ag_lost.fl_batches++;
		a->ag_lost.fl_samples_dropped += old->fi_samples;
		fp_warnx("buffer full: dropping interval %" PRIu64 " (%" PRIu64 " samples)",
			 old->fi_seq, old->fi_samples);
		fp_interval_fini(old);
		a->ag_buf_head = (a->ag_buf_head + 1) % a->ag_o.ao_buffer;
		a->ag_buf_len--;
	}
	a->ag_buf[(a->ag_buf_head + a->ag_buf_len) % a->ag_o.ao_buffer] = iv;
	a->ag_buf_len++;
	fp_debug("interval %" PRIu64 ": %" PRIu64 " samples, %zu stacks, %zu buffered",
		 iv.fi_seq, iv.fi_samples, iv.fi_ncounts, a->ag_buf_len);
}

/* Sample for up to timeout_ms; close the interval when it is due. */
static void agent_pump(struct agent *a, int timeout_ms)
{
	int n = fp_sampler_poll(a->ag_sampler, timeout_ms);

	if (n < 0 && n != -EINTR)
		fp_warnx("ring buffer: %s", strerror(-n));
	if (fp_now_ns(CLOCK_MONOTONIC) >= a->ag_next_cut_ns) {
		agent_cut(a);
		a->ag_next_cut_ns += (uint64_t)a->ag_o.ao_interval_s * 1000000000ull;
	}
}

/* One request and its reply; sampling goes on while we wait. */
static int agent_call(struct agent *a, char *buf, size_t len, struct fp_reply *reply)
{
	uint64_t deadline = fp_now_ns(CLOCK_MONOTONIC) + a->ag_o.ao_timeout_ms * 1000000ull;
	int err;

	/* No connection yet (the dialer is still retrying): keep sampling and
	 * try again until the deadline. */
	while ((err = fp_uplink_send(a->ag_uplink, buf, len)) == -ETIMEDOUT &&
	       fp_now_ns(CLOCK_MONOTONIC) < deadline)
		agent_pump(a, 20);
	free(buf);
	if (err)
		return err;
	for (;;) {
		err = fp_uplink_poll(a->ag_uplink, reply);
		if (err != -EAGAIN)
			return err;
		if (fp_now_ns(CLOCK_MONOTONIC) >= deadline)
			return -ETIMEDOUT;
		agent_pump(a, 5);
	}
}

static int send_ksyms_part(const struct fp_ksyms *part, void *arg)
{
	struct agent *a = arg;
	struct fp_reply r = { 0 };
	size_t len;
	char *buf;
	int err;

	if ((err = fp_wire_encode_ksyms(part, &buf, &len)))
		return err;
	err = agent_call(a, buf, len, &r);
	if (!err && r.fr_status != FP_REPLY_OK)
		err = -EPROTO;
	if (!err)
		a->ag_ksyms_bytes += len;
	fp_reply_fini(&r);
	return err;
}

/* The symbolizer asked for kallsyms snapshots it does not have yet. */
static void agent_answer_wants(struct agent *a, struct fp_reply *r)
{
	char hex[2 * FP_BUILD_ID_MAX + 1];
	size_t i;

	for (i = 0; i < r->fr_nwant; i++) {
		int err = fp_kernel_ksyms(&a->ag_kernel, "/proc", &r->fr_want[i], a->ag_session,
					  KSYMS_PART, send_ksyms_part, a);
		fp_build_id_hex(&r->fr_want[i], hex);
		if (err)
			fp_warnx("kallsyms for %s not sent: %s", hex, strerror(-err));
		else
			fp_info("sent kallsyms for %s", hex);
	}
}

#define MAX_FILE_MESSAGES 1024 /* per request chain: the symbolizer drives, we bound it */

/* send_file_part: one range of the file open at fd (or -errno: why it
 * cannot be read). */
static int send_file_part(struct agent *a, const struct fp_range *g, int fd,
			  struct fp_reply *reply)
{
	struct fp_file_data d = { .fd_session = a->ag_session, .fd_build_id = g->fg_build_id,
				  .fd_offset = g->fg_offset };
	struct stat st;
	ssize_t n = 0;
	size_t len;
	char *buf;
	int err;

	if (fd < 0 || fstat(fd, &st)) {
		d.fd_error = fd < 0 ? (uint32_t)-fd : (uint32_t)errno;
	} else {
		d.fd_file_size = (uint64_t)st.st_size;
		if (g->fg_offset < d.fd_file_size) {
			d.fd_data = malloc(g->fg_length ? g->fg_length : 1);
			n = d.fd_data ? pread(fd, d.fd_data, g->fg_length, (off_t)g->fg_offset) : -1;
			if (n < 0)
				d.fd_error = d.fd_data ? (uint32_t)errno : ENOMEM;
			else
				d.fd_len = (size_t)n;
		}
	}
	if (d.fd_error)
		d.fd_len = 0;
	err = fp_wire_encode_file(&d, &buf, &len);
	free(d.fd_data);
	if (err)
		return err;
	if ((err = agent_call(a, buf, len, reply)))
		return err;
	a->ag_file_bytes += d.fd_len;
	return reply->fr_status == FP_REPLY_OK ? 0 : -EPROTO;
}

/* The symbolizer has no symbols for some of our files and asks for parts
 * of them; each answer may bring the next question.  The file is opened
 * (and its build-ID checked) once per run of ranges of the same file. */
static void agent_answer_ranges(struct agent *a, const struct fp_reply *first)
{
	struct fp_range *queue = NULL;
	struct fp_build_id open_id = { 0 };
	size_t head = 0, len = 0, sent = 0, i;
	int fd = -ENOENT;

	if (!first->fr_nranges || !(queue = malloc(first->fr_nranges * sizeof(*queue))))
		return;
	memcpy(queue, first->fr_ranges, first->fr_nranges * sizeof(*queue));
	len = first->fr_nranges;
	while (head < len && sent++ < MAX_FILE_MESSAGES) {
		const struct fp_range *g = &queue[head++];
		struct fp_reply r = { 0 };
		struct fp_range *more;

		if (!open_id.fb_len || !fp_build_id_eq(&open_id, &g->fg_build_id)) {
			if (fd >= 0)
				close(fd);
			fd = fp_collector_open_file(a->ag_collector, &g->fg_build_id);
			open_id = g->fg_build_id;
		}
		if (send_file_part(a, g, fd, &r)) {
			fp_reply_fini(&r);
			break;
		}
		if (r.fr_nranges) {
			more = realloc(queue, (len + r.fr_nranges) * sizeof(*queue));
			if (!more) {
				fp_reply_fini(&r);
				break;
			}
			queue = more;
			for (i = 0; i < r.fr_nranges; i++)
				queue[len++] = r.fr_ranges[i];
		}
		fp_reply_fini(&r);
	}
	if (fd >= 0)
		close(fd);
	free(queue);
}

static int agent_hello(struct agent *a)
{
	struct fp_reply r = { 0 };
	size_t len;
	char *buf;
	int err;

	if ((err = fp_wire_encode_hello(&a->ag_hello, &buf, &len)))
		return err;
	if ((err = agent_call(a, buf, len, &r)))
		return err;
	if (r.fr_status != FP_REPLY_OK) {
		fp_warnx("symbolizer refused hello: %s", r.fr_error ? r.fr_error : "no reason given");
		fp_reply_fini(&r);
		return -EPROTO;
	}
	fp_collector_forget(a->ag_collector); /* a new session knows nothing */
	a->ag_hello_ok = 1;
	fp_info("connected to %s", a->ag_o.ao_server);
	agent_answer_wants(a, &r);
	fp_reply_fini(&r);
	return 0;
}

/* Unwind tables the symbolizer sent: install them, then tell the BPF
 * program which processes they serve. */
static void agent_take_tables(struct agent *a, const struct fp_reply *r)
{
	size_t i;
	int added = 0, err;

	for (i = 0; a->ag_unwind && i < r->fr_ntables; i++) {
		a->ag_table_bytes += r->fr_tables[i].tp_len;
		err = fp_unwind_take_part(a->ag_unwind, &r->fr_tables[i]);
		if (err < 0)
			fp_debug("unwind table not installed: %s", strerror(-err));
		added |= err > 0;
	}
	if (added)
		fp_collector_remap(a->ag_collector);
}

/* Send every buffered interval, oldest first.  0 when the buffer is empty. */
static int agent_flush(struct agent *a)
{
	while (a->ag_buf_len) {
		struct fp_interval *iv = &a->ag_buf[a->ag_buf_head];
		struct fp_reply r = { 0 };
		struct fp_batch b;
		uint64_t seq = iv->fi_seq;
		size_t len;
		char *buf;
		int err;

		if (!a->ag_hello_ok && (err = agent_hello(a)))
			return err;
		if ((err = fp_collector_batch(a->ag_collector, iv, a->ag_session,
					      a->ag_hello.fh_frequency ?
						      1000000000ull / a->ag_hello.fh_frequency : 0,
					      &b)))
			return err;
		err = fp_wire_encode_batch(&b, &buf, &len);
		if (!err)
			err = agent_call(a, buf, len, &r);
		if (err) {
			fp_collector_batch_release(a->ag_collector, &b);
			return err;
		}
		/* The buffer may have moved while we waited (a cut, a drop). */
		iv = a->ag_buf_len ? &a->ag_buf[a->ag_buf_head] : NULL;
		switch (r.fr_status) {
		case FP_REPLY_OK:
			fp_collector_sent(a->ag_collector, &b);
			if (iv && iv->fi_seq == seq) {
				fp_debug("interval %" PRIu64 " acknowledged: %" PRIu64 " samples in %zu "
					 "bytes", seq, iv->fi_samples, len);
				a->ag_acked_samples += iv->fi_samples;
				a->ag_batch_bytes += len;
				fp_interval_fini(iv);
				a->ag_buf_head = (a->ag_buf_head + 1) % a->ag_o.ao_buffer;
				a->ag_buf_len--;
			}
			agent_take_tables(a, &r);
			agent_answer_wants(a, &r);
			agent_answer_ranges(a, &r);
			break;
		case FP_REPLY_NEED_HELLO:
			fp_info("symbolizer lost our session (restarted?): saying hello again");
			a->ag_hello_ok = 0;
			break;
		default:
			fp_warnx("symbolizer rejected interval %" PRIu64 ": %s; dropping it", seq,
				 r.fr_error ? r.fr_error : "no reason given");
			if (iv && iv->fi_seq == seq) {
				a->ag_lost.fl_batches++;
				a->ag_lost.fl_samples_dropped += iv->fi_samples;
				fp_interval_fini(iv);
				a->ag_buf_head = (a->ag_buf_head + 1) % a->ag_o.ao_buffer;
				a->ag_buf_len--;
			}
			break;
		}
		fp_collector_batch_release(a->ag_collector, &b);
		fp_reply_fini(&r);
	}
	return 0;
}

/* What the benchmark reads: wire bytes, BPF cost and memory. */
static void log_footprint(struct agent *a)
{
	struct fp_sampler_stats st = { 0 };
	struct fp_collector_nodes nodes;
	char line[256] = "";
	FILE *f;

	fp_sampler_stats(a->ag_sampler, &st);
	f = fopen("/proc/self/status", "re");
	while (f && fgets(line, sizeof(line), f) && strncmp(line, "VmHWM:", 6))
		;
	if (f)
		fclose(f);
	line[strcspn(line, "\n")] = '\0';
	fp_info("wire: %" PRIu64 " bytes of batches (%.2f bytes/sample), %" PRIu64
		" bytes of kallsyms, %" PRIu64 " bytes of files, %" PRIu64 " bytes of unwind tables; "
		"bpf: %" PRIu64 " runs, %" PRIu64 " ns/run, maps %" PRIu64
		" bytes; collector %zu bytes; memory resets %" PRIu64 "; %s",
		a->ag_batch_bytes,
		a->ag_acked_samples ? (double)a->ag_batch_bytes / a->ag_acked_samples : 0.0,
		a->ag_ksyms_bytes, a->ag_file_bytes, a->ag_table_bytes, st.ss_run_count,
		st.ss_run_count ? st.ss_run_ns / st.ss_run_count : 0, st.ss_map_bytes,
		fp_collector_bytes(a->ag_collector), a->ag_resets, line);
	fp_collector_nodes(a->ag_collector, &nodes);
	fp_info("stack trie: %" PRIu64 " nodes: %" PRIu64 " native user frames, %" PRIu64
		" kernel, %" PRIu64 " Python, %" PRIu64 " unmapped",
		nodes.cn_user + nodes.cn_kernel + nodes.cn_python + nodes.cn_unmapped,
		nodes.cn_user, nodes.cn_kernel, nodes.cn_python, nodes.cn_unmapped);
	if (a->ag_unwind) {
		uint64_t c[FP_CNT_MAX] = { 0 };
		struct fp_unwind_stats us;
		fp_sampler_counters(a->ag_sampler, c);
		fp_info("stack walks: %" PRIu64 ", %" PRIu64 " to the root; %" PRIu64
			" with no user registers found (leaf only); steps by table %" PRIu64
			", by frame pointer %" PRIu64,
			c[FP_CNT_WALKS], c[FP_CNT_WALK_ROOT], c[FP_CNT_WALK_LOST], c[FP_CNT_WALK_TABLE],
			c[FP_CNT_WALK_FP]);
		fp_unwind_stats(a->ag_unwind, &us);
		fp_info("unwind tables: %u installed now (%" PRIu64 " of %" PRIu64 " rows), %" PRIu64
			" installed in all, %" PRIu64 " evicted, %" PRIu64 " too big, %" PRIu64
			" rejected, %" PRIu64 " parts dropped; process lists %" PRIu64 " (%" PRIu64
			" did not fit)",
			us.us_tables, us.us_rows_used, us.us_rows_total, us.us_installed,
			us.us_evicted, us.us_too_big, us.us_rejected, us.us_parts_dropped,
			us.us_procs, us.us_procs_full);
		if (a->ag_python)
			fp_python_log(a->ag_python, c);
	}
}

static void usage(FILE *f)
{
	fprintf(f,
		"usage: fleetprof-agent --server ADDR [-F HZ] [--interval SECONDS]\n"
		"                       [--label KEY=VALUE]... [-p PID] [--buffer N]\n"
		"                       [--timeout SECONDS] [--unwind-mem MB] [--max-mem MB]\n"
		"                       [--no-python] [-v] [--syslog]\n"
		"\n"
		"Samples user and kernel stacks on every CPU with eBPF and sends them,\n"
		"as build-IDs and file offsets, to a fleetprof-symbolizer.\n"
		"\n"
		"  -s, --server ADDR       symbolizer address: tcp://HOST:PORT or ipc:///PATH\n"
		"  -F, --frequency HZ      samples per second per CPU (default 99, 1-10000)\n"
		"  -i, --interval SECONDS  send a batch every SECONDS (default 10, 1-3600)\n"
		"  -l, --label KEY=VALUE   static label sent with every profile (up to 64)\n"
		"  -p, --pid PID           profile one process only (default: all)\n"
		"  -b, --buffer N          intervals kept while the symbolizer is away\n"
		"                          (default 60; the oldest is dropped first)\n"
		"  -t, --timeout SECONDS   wait for a reply this long (default 5)\n"
		"      --unwind-mem MB     BPF map memory for the unwind tables of code built\n"
		"                          without frame pointers (default %u; 0: frame\n"
		"                          pointers only); least recently used tables go first\n"
		"      --no-python         show CPython processes as the interpreter's native\n"
		"                          frames, not as Python functions (Python frames\n"
		"                          need unwind memory: --unwind-mem 0 turns them off)\n"
		"      --max-mem MB        the agent's own memory (heap); above it the agent\n"
		"                          forgets every process and stack and starts a new\n"
		"                          session (default %u, 8-4096)\n"
		"  -v, --verbose           log debug messages\n"
		"      --syslog            log to syslog instead of stderr\n"
		"  -h, --help              this help\n"
		"  -V, --version           print the version\n",
		FP_UNWIND_MEM_DEFAULT_MB, MAX_MEM_DEFAULT_MB);
}

static int parse_args(int argc, char **argv, struct agent_opts *o, int *verbose, int *use_syslog)
{
	static const struct option longopts[] = {
		{ "server", required_argument, NULL, 's' },
		{ "frequency", required_argument, NULL, 'F' },
		{ "interval", required_argument, NULL, 'i' },
		{ "label", required_argument, NULL, 'l' },
		{ "pid", required_argument, NULL, 'p' },
		{ "buffer", required_argument, NULL, 'b' },
		{ "timeout", required_argument, NULL, 't' },
		{ "unwind-mem", required_argument, NULL, 'U' },
		{ "no-python", no_argument, NULL, 'P' },
		{ "max-mem", required_argument, NULL, 'M' },
		{ "verbose", no_argument, NULL, 'v' },
		{ "syslog", no_argument, NULL, 'S' },
		{ "help", no_argument, NULL, 'h' },
		{ "version", no_argument, NULL, 'V' },
		{ 0 },
	};
	uint32_t timeout_s = 5;
	int c;

	while ((c = getopt_long(argc, argv, "s:F:i:l:p:b:t:vhV", longopts, NULL)) != -1) {
		switch (c) {
		case 's': o->ao_server = optarg; break;
		case 'F': if (fp_parse_u32("fleetprof-agent", "frequency", optarg, 1, 10000, &o->ao_frequency)) return 2; break;
		case 'i': if (fp_parse_u32("fleetprof-agent", "interval", optarg, 1, 3600, &o->ao_interval_s)) return 2; break;
		case 'p': if (fp_parse_u32("fleetprof-agent", "pid", optarg, 1, INT_MAX, &o->ao_pid)) return 2; break;
		case 'b': if (fp_parse_u32("fleetprof-agent", "buffer", optarg, 1, 100000, &o->ao_buffer)) return 2; break;
		case 't': if (fp_parse_u32("fleetprof-agent", "timeout", optarg, 1, 600, &timeout_s)) return 2; break;
		case 'P': o->ao_no_python = 1; break;
		case 'U': if (fp_parse_u32("fleetprof-agent", "unwind-mem", optarg, 0, FP_UNWIND_MEM_MAX_MB, &o->ao_unwind_mb)) return 2; break;
		case 'M': if (fp_parse_u32("fleetprof-agent", "max-mem", optarg, 8, 4096, &o->ao_max_mem_mb)) return 2; break;
		case 'l': {
			char *eq = strchr(optarg, '=');
			if (!eq || eq == optarg || o->ao_nlabels == 64 || strlen(optarg) > 512) {
				fprintf(stderr, "fleetprof-agent: invalid label '%s' (expected KEY=VALUE, "
					"at most 64 labels)\n", optarg);
				return 2;
			}
			o->ao_label_keys[o->ao_nlabels] = strndup(optarg, eq - optarg);
			o->ao_label_values[o->ao_nlabels++] = strdup(eq + 1);
			break;
		}
		case 'v': (*verbose)++; break;
		case 'S': *use_syslog = 1; break;
		case 'h': usage(stdout); exit(0);
		case 'V': printf("fleetprof-agent %s\n", FP_VERSION); exit(0);
		default: usage(stderr); return 2;
		}
	}
	if (optind != argc) {
		fprintf(stderr, "fleetprof-agent: unexpected argument '%s'\n", argv[optind]);
		return 2;
	}
	if (!o->ao_server) {
		fprintf(stderr, "fleetprof-agent: --server is required\n");
		usage(stderr);
		return 2;
	}
	o->ao_timeout_ms = timeout_s * 1000;
	return 0;
}

int main(int argc, char **argv)
{
	struct agent a = { .ag_o = { .ao_frequency = 99, .ao_interval_s = 10, .ao_buffer = 60,
				     .ao_unwind_mb = FP_UNWIND_MEM_DEFAULT_MB,
				     .ao_max_mem_mb = MAX_MEM_DEFAULT_MB } };
	struct fp_sampler_opts so = { 0 };
	char host[256] = "";
	uint64_t next_try = 0, backoff_ms = 1000, heap;
	int verbose = 0, use_syslog = 0, err;
	size_t i;

	if ((err = parse_args(argc, argv, &a.ag_o, &verbose, &use_syslog)))
		return err;
	fp_log_init("fleetprof-agent", verbose, use_syslog);
	signal(SIGINT, on_signal);
	signal(SIGTERM, on_signal);
	signal(SIGPIPE, SIG_IGN);

	if (getrandom(&a.ag_session, sizeof(a.ag_session), 0) != sizeof(a.ag_session))
		a.ag_session = fp_now_ns(CLOCK_REALTIME) ^ ((uint64_t)getpid() << 32);
	if ((err = fp_kernel_read("/proc", "/sys", &a.ag_kernel)))
		goto cleanup;
	if (!a.ag_kernel.kn_text)
		fp_warnx("cannot read _text from /proc/kallsyms: kernel frames stay unresolved");
	gethostname(host, sizeof(host) - 1);
	a.ag_hello = (struct fp_hello){
		.fh_session = a.ag_session,
		.fh_host = host,
		.fh_boot_id = a.ag_kernel.kn_boot_id,
		.fh_kernel_release = a.ag_kernel.kn_release,
		.fh_kernel_build_id = a.ag_kernel.kn_build_id,
		.fh_agent_version = FP_VERSION,
		.fh_frequency = a.ag_o.ao_frequency,
		.fh_ncpus = (uint32_t)sysconf(_SC_NPROCESSORS_ONLN),
		.fh_nlabels = a.ag_o.ao_nlabels,
		.fh_label_keys = a.ag_o.ao_label_keys,
		.fh_label_values = a.ag_o.ao_label_values,
	};
	a.ag_buf = calloc(a.ag_o.ao_buffer, sizeof(*a.ag_buf));
	if (!a.ag_buf) {
		err = -ENOMEM;
		goto cleanup;
	}
	if ((err = fp_uplink_open(&a.ag_uplink, a.ag_o.ao_server)))
		goto cleanup;
	so = (struct fp_sampler_opts){ .so_frequency = a.ag_o.ao_frequency, .so_pid = a.ag_o.ao_pid,
				       .so_ringbuf_bytes = 0,
				       .so_unwind_bytes = (size_t)a.ag_o.ao_unwind_mb << 20,
				       .so_fn = on_sample, .so_arg = &a };
	if ((err = fp_sampler_open(&a.ag_sampler, &so)))
		goto cleanup;
	if (a.ag_o.ao_unwind_mb && (err = fp_unwind_alloc(&a.ag_unwind, a.ag_sampler)))
		goto cleanup;
	if (a.ag_unwind && !a.ag_o.ao_no_python &&
	    (err = fp_python_alloc(&a.ag_python, a.ag_sampler, a.ag_unwind, "/proc")))
		goto cleanup;
	if ((err = collector_open(&a)))
		goto cleanup;
	fp_info("sampling at %u Hz%s, sending to %s every %u s", a.ag_o.ao_frequency,
		a.ag_o.ao_pid ? " (one process)" : "", a.ag_o.ao_server, a.ag_o.ao_interval_s);
	a.ag_next_cut_ns = fp_now_ns(CLOCK_MONOTONIC) + (uint64_t)a.ag_o.ao_interval_s * 1000000000ull;

	while (!exiting) {
		/* Idle wake-ups cost more than the samples: the BPF program wakes us
		 * early when the ring buffer fills. */
		agent_pump(&a, 250);
		if (!a.ag_buf_len || fp_now_ns(CLOCK_MONOTONIC) < next_try)
			continue;
		err = agent_flush(&a);
		if (err && !exiting) {
			fp_warnx("symbolizer %s: %s; %zu intervals buffered, retrying in %" PRIu64 " ms",
				 a.ag_o.ao_server, strerror(-err), a.ag_buf_len, backoff_ms);
			next_try = fp_now_ns(CLOCK_MONOTONIC) + backoff_ms * 1000000ull;
			backoff_ms = backoff_ms * 2 > 60000 ? 60000 : backoff_ms * 2;
		} else {
			backoff_ms = 1000;
		}
		/* After a flush: when it went out, starting over loses nothing. */
		heap = heap_bytes();
		if (heap > (uint64_t)a.ag_o.ao_max_mem_mb << 20)
			agent_start_over(&a, heap);
	}

	/* Stop: the last partial interval goes out too, if the server is there. */
	agent_cut(&a);
	a.ag_o.ao_timeout_ms = a.ag_o.ao_timeout_ms < 3000 ? a.ag_o.ao_timeout_ms : 3000;
	exiting = 0;
	err = agent_flush(&a);
	if (err)
		fp_warnx("exiting with %zu intervals unsent: %s", a.ag_buf_len, strerror(-err));
	err = 0;
	fp_info("sampled %" PRIu64 " samples in %" PRIu64 " intervals; acknowledged %" PRIu64
		"; dropped %" PRIu64 " in %" PRIu64 " intervals",
		a.ag_sampled, a.ag_seq, a.ag_acked_samples, a.ag_lost.fl_samples_dropped,
		a.ag_lost.fl_batches);
	log_footprint(&a);
cleanup:
	fp_collector_free(a.ag_collector);
	fp_python_free(a.ag_python);
	fp_unwind_free(a.ag_unwind);
	fp_sampler_close(a.ag_sampler);
	fp_uplink_close(a.ag_uplink);
	for (i = 0; a.ag_buf && i < a.ag_buf_len; i++)
		fp_interval_fini(&a.ag_buf[(a.ag_buf_head + i) % a.ag_o.ao_buffer]);
	free(a.ag_buf);
	fp_kernel_fini(&a.ag_kernel);
	for (i = 0; i < a.ag_o.ao_nlabels; i++) {
		free(a.ag_o.ao_label_keys[i]);
		free(a.ag_o.ao_label_values[i]);
	}
	return err ? 1 : 0;
}
