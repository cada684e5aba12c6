/* loadgen.c: `fleetprof loadgen`, many simulated devices against one
 * symbolizer, from one process.
 *
 * Each device is what a real agent looks like on the wire (device/main.c):
 * its own REQ socket and connection, session, host name, threads and stack
 * trie; a hello, then one batch per interval carrying only the definitions
 * the session has not seen, a kallsyms snapshot when the symbolizer asks
 * for one, and "cannot read the file" answers when it asks for file bytes.
 * NEED_HELLO brings a new hello and every definition again; a rejected
 * batch is dropped; a reply that does not come within --timeout is given
 * up on and the batch sent again, as the agent does.
 *
 * Mappings mix files the symbolizer can read (the shared libraries this
 * process has loaded, with their real build-IDs and paths, and --map-file
 * on device 0) with fleet-wide build-IDs of files nobody has (a switch
 * image's daemons), and a kernel whose kallsyms the devices upload.
 *
 * Concurrency: no thread per device.  Every device has one nng aio that
 * either sleeps, sends or receives; its callback (on one of nng's task
 * threads) owns the device's state while the aio is busy, so a device is
 * never touched by two threads at once.  The counters and the latency
 * histogram are shared by all callbacks and updated with atomic adds; the
 * main thread only reads them (once a second, and at the end).
 */
#include "cli.h"
#include "commands.h"
#include "elfnote.h"
#include "elfsyms.h"
#include "hist.h"
#include "indexset.h"
#include "unwind_table.h"
#include "vec.h"
#include "wire.h"

#include <errno.h>
#include <fcntl.h>
#include <getopt.h>
#include <inttypes.h>
#include <limits.h>
#include <link.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/random.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <unistd.h>
#include <nng/nng.h>
#include <nng/protocol/reqrep0/req.h>

#define LG_MAX_DEVICES 100000
#define LG_MAX_KNOWN 8 /* shared libraries of this process used as mappings */
#define LG_PROCESSES 6
#define LG_THREADS_PER_PROC 4
#define LG_MAX_NODES (1u << 16) /* per device; past it the device starts a new session */
#define LG_MAX_DEPTH 48
#define LG_KSYMS 512           /* symbols of the simulated kernel */
#define LG_RETRY_MS 1000       /* after a refused hello */
#define LG_TABLES_RETRY_MS 250 /* more tables to come: asked again (as the agent) */
#define LG_WARM_S 60           /* the warm-up device's limit */


static volatile sig_atomic_t lg_stop;

static void lg_on_signal(int sig)
{
	lg_stop = 1;
}

struct lg_stats {
	uint64_t st_offered;  /* samples the devices generated */
	uint64_t st_accepted; /* samples in batches answered OK */
	uint64_t st_batches, st_hellos, st_ksyms, st_files;
	uint64_t st_replies; /* replies and timeouts of the devices measured */
	uint64_t st_rejected, st_need_hello, st_timeouts, st_errors;
	uint64_t st_busy;        /* batches a busy symbolizer did not take */
	uint64_t st_table_bytes; /* unwind table bytes received */
	uint64_t st_connects, st_reconnects, st_resets;
	uint64_t st_inflight;              /* requests sent and not answered */
	uint64_t st_hist[FP_HIST_BUCKETS]; /* reply latency, microseconds */
	uint64_t st_max_us;
	uint64_t st_mapfile_us; /* from sending the first batch naming --map-file
				  * to its acceptance, resends included */
};

struct lg_mapping {
	struct fp_build_id lm_id;
	char lm_path[PATH_MAX];
	uint8_t lm_kind;
	uint64_t lm_lo, lm_hi; /* offsets frames are drawn from */
};

enum { REQ_HELLO, REQ_BATCH, REQ_KSYMS, REQ_FILE };
enum { ST_SLEEP, ST_SEND, ST_RECV };

struct lg_device {
	struct loadgen *dv_lg;
	uint32_t dv_index;
	nng_socket dv_sock;
	nng_ctx dv_ctx;
	nng_aio *dv_aio;
	int dv_state, dv_req;
	int dv_pipes; /* connections seen (pipe callback thread) */
	uint64_t dv_rng;
	uint64_t dv_session, dv_seq;
	uint64_t dv_sent_ns;  /* monotonic, when the request went out */
	uint64_t dv_waiting;  /* dv_sent_ns while a request waits, else 0; the
				  * main thread cancels requests that wait too long */
	uint64_t dv_due_ns;   /* monotonic, when the next interval closes */
	uint64_t dv_early_ns; /* monotonic, an early close (tables to come); 0: none */
	uint32_t dv_retry_ms; /* the next wait for tables being compiled */
	uint64_t dv_last_ns;  /* realtime end of the last batch */
	int dv_hello_ok, dv_defs_sent, dv_want_ksyms, dv_mapfile_pending;
	uint64_t dv_mapfile_sent_ns;
	nng_msg *dv_batch; /* encoded batch not acknowledged yet */
	uint64_t dv_batch_samples, dv_batch_start, dv_batch_end;
	size_t dv_batch_nodes; /* nodes defined once that batch is accepted */
	size_t dv_nodes_sent;
	struct fp_node *dv_nodes;
	uint8_t *dv_node_proc, *dv_node_depth; /* 0xff: a kernel frame */
	size_t dv_nnodes, dv_nodes_cap, dv_proc_cap, dv_depth_cap;
	uint32_t *dv_stacks; /* leaf node of each stack */
	uint8_t *dv_stack_thread;
	double dv_churn_due;
	struct fp_range *dv_ranges;
	size_t dv_nranges, dv_ranges_cap;
	struct fp_thread dv_threads[LG_PROCESSES * LG_THREADS_PER_PROC];
	char dv_host[32];
};

struct loadgen {
	const char *lg_server;
	uint32_t lg_ndevices, lg_seconds, lg_rate, lg_nstacks, lg_churn, lg_interval_s;
	uint32_t lg_timeout_ms;
	uint32_t lg_spread_s; /* devices start spread over this (--spread) */
	int lg_early;         /* the first batch right after the hello (--early) */
	int lg_warm;          /* a device takes every table before the others start */
	int lg_hold;          /* the devices' hellos name those tables (--hold-tables) */
	struct fp_held_table lg_held[LG_MAX_KNOWN];
	size_t lg_nheld;
	uint64_t lg_held_bytes;
	struct lg_mapping lg_maps[LG_MAX_KNOWN + LG_PROCESSES + 2];
	size_t lg_nmaps, lg_nknown; /* [0, nknown): readable; then unknown; then kernel */
	size_t lg_kernel;           /* index of the kernel mapping */
	int lg_mapfile;             /* index of --map-file's mapping, or -1 */
	struct fp_ksym lg_ksyms[LG_KSYMS];
	double *lg_weights; /* of each stack, summing to 1 */
	struct lg_device *lg_devs;
	struct lg_stats lg_st;
};

static const char *const proc_names[LG_PROCESSES] = { "orchagent", "syncd",        "bgpd",
						      "zebra",     "redis-server", "portsyncd" };
static const char *const proc_containers[LG_PROCESSES] = { "swss", "syncd",    "bgp",
							   "bgp",  "database", "swss" };

static void add(uint64_t *counter, uint64_t n)
{
	__atomic_fetch_add(counter, n, __ATOMIC_RELAXED);
}

static uint64_t get(const uint64_t *counter)
{
	return __atomic_load_n(counter, __ATOMIC_RELAXED);
}

static uint64_t rng_next(uint64_t *s)
{
	/* xorshift64* */
	*s ^= *s >> 12;
	*s ^= *s << 25;
	*s ^= *s >> 27;
	return *s * 0x2545f4914f6cdd1dull;
}

static uint64_t rng_below(uint64_t *s, uint64_t n)
{
	return n ? rng_next(s) % n : 0;
}

/* lg_record_latency: a reply came, or the request was given up on (then
 * the time waited counts, so that a timeout weighs at least as much as
 * the slowest reply). */
static void lg_record_latency(struct loadgen *lg, struct lg_device *d)
{
	uint64_t now = fp_now_ns(CLOCK_MONOTONIC), us = (now - d->dv_sent_ns) / 1000, max;

	if (lg->lg_mapfile >= 0 && d->dv_index == 0)
		return; /* the device that names --map-file is measured apart */
	add(&lg->lg_st.st_replies, 1);
	add(&lg->lg_st.st_hist[fp_hist_bucket(us)], 1);
	max = get(&lg->lg_st.st_max_us);
	while (us > max && !__atomic_compare_exchange_n(&lg->lg_st.st_max_us, &max, us, 0,
							__ATOMIC_RELAXED, __ATOMIC_RELAXED))
		;
}

/* A device's stack trie: each new stack extends a random user frame of
 * the trie (or a process's root) by a few user frames, sometimes topped
 * with kernel frames, so that stacks share their callers as real ones do. */
static uint32_t node_add(struct lg_device *d, uint32_t parent, uint32_t map, uint64_t off,
			 uint8_t proc, uint8_t depth)
{
	uint32_t id = (uint32_t)d->dv_nnodes++;

	d->dv_nodes[id] = (struct fp_node){ .fn_id = id,
					    .fn_parent = parent,
					    .fn_frame = { .ff_mapping = map, .ff_offset = off } };
	d->dv_node_proc[id] = proc;
	d->dv_node_depth[id] = depth;
	return id;
}

static uint64_t frame_offset(struct lg_device *d, const struct lg_mapping *m)
{
	return m->lm_lo + rng_below(&d->dv_rng, m->lm_hi - m->lm_lo);
}

/* nodes_reserve: room for the nodes of one more stack.  0 or -ENOMEM. */
static int nodes_reserve(struct lg_device *d)
{
	size_t need = d->dv_nnodes + 2 * 4;

	if (fp_vec_reserve(&d->dv_nodes, &d->dv_nodes_cap, need, sizeof(*d->dv_nodes)) ||
	    fp_vec_reserve(&d->dv_node_proc, &d->dv_proc_cap, need, 1) ||
	    fp_vec_reserve(&d->dv_node_depth, &d->dv_depth_cap, need, 1))
		return -ENOMEM;
	return 0;
}

static int stack_new(struct loadgen *lg, struct lg_device *d, size_t slot)
{
	uint8_t thread = (uint8_t)rng_below(&d->dv_rng, LG_PROCESSES * LG_THREADS_PER_PROC);
	uint8_t proc = thread / LG_THREADS_PER_PROC;
	uint32_t at = proc, n, i, m; /* nodes 0..LG_PROCESSES-1 are the roots */
	size_t tries;

	if (nodes_reserve(d))
		return -ENOMEM;
	/* A caller of the same process, found by a few random probes. */
	for (tries = 0; tries < 8; tries++) {
		uint32_t c = (uint32_t)rng_below(&d->dv_rng, d->dv_nnodes);
		if (d->dv_node_proc[c] == proc && d->dv_node_depth[c] < LG_MAX_DEPTH - 10) {
			at = c;
			break;
		}
	}
	n = 1 + (uint32_t)rng_below(&d->dv_rng, 4);
	for (i = 0; i < n; i++) {
		uint64_t r = rng_below(&d->dv_rng, 8);
		if (lg->lg_mapfile >= 0 && d->dv_index == 0 && r < 4)
			m = (uint32_t)lg->lg_mapfile;
		else if (r < 4)
			m = (uint32_t)(lg->lg_nknown + proc); /* the process's own binary */
		else
			m = (uint32_t)rng_below(&d->dv_rng, lg->lg_nknown);
		at = node_add(d, at, m, frame_offset(d, &lg->lg_maps[m]), proc,
			      d->dv_node_depth[at] + 1);
	}
	if (rng_below(&d->dv_rng, 10) < 3) {
		n = 1 + (uint32_t)rng_below(&d->dv_rng, 4);
		for (i = 0; i < n; i++) {
			uint64_t off = lg->lg_ksyms[rng_below(&d->dv_rng, LG_KSYMS)].fk_offset + 8;
			at = node_add(d, at, (uint32_t)lg->lg_kernel, off, 0xff,
				      d->dv_node_depth[at] + 1);
		}
	}
	d->dv_stacks[slot] = at;
	d->dv_stack_thread[slot] = thread;
	return 0;
}

/* device_reset: a new session with a new trie (at start, and when the
 * trie has grown past LG_MAX_NODES through churn). */
static int device_reset(struct loadgen *lg, struct lg_device *d)
{
	size_t i;

	if (d->dv_batch) {
		nng_msg_free(d->dv_batch);
		d->dv_batch = NULL;
	}

	d->dv_session = rng_next(&d->dv_rng);
	d->dv_seq = 0;
	d->dv_hello_ok = d->dv_defs_sent = 0;
	d->dv_nodes_sent = d->dv_nnodes = 0;
	if (nodes_reserve(d))
		return -ENOMEM;
	for (i = 0; i < LG_PROCESSES; i++) {
		const struct lg_mapping *m = &lg->lg_maps[lg->lg_nknown + i];
		node_add(d, FP_NODE_NONE, (uint32_t)(lg->lg_nknown + i), m->lm_lo, (uint8_t)i, 0);
	}
	for (i = 0; i < lg->lg_nstacks; i++)
		if (stack_new(lg, d, i))
			return -ENOMEM;
	return 0;
}

static int device_alloc(struct loadgen *lg, struct lg_device *d, uint32_t index)
{
	size_t i;

	d->dv_lg = lg;
	d->dv_index = index;
	d->dv_rng = 0x9e3779b97f4a7c15ull * (index + 1);
	if (getrandom(&i, sizeof(i), 0) == sizeof(i))
		d->dv_rng ^= i;
	if (!d->dv_rng)
		d->dv_rng = 1;
	snprintf(d->dv_host, sizeof(d->dv_host), "loadgen-%05u", index);
	for (i = 0; i < LG_PROCESSES * LG_THREADS_PER_PROC; i++) {
		struct fp_thread *t = &d->dv_threads[i];
		size_t p = i / LG_THREADS_PER_PROC;
		t->ft_id = (uint32_t)i;
		t->ft_pid = 1000 + (uint32_t)p * 100;
		t->ft_tid = t->ft_pid + (uint32_t)(i % LG_THREADS_PER_PROC);
		t->ft_cgroup = 4000 + p;
		snprintf(t->ft_process, FP_COMM_LEN, "%s", proc_names[p]);
		snprintf(t->ft_comm, FP_COMM_LEN, "%.11s-%zu", proc_names[p],
			 i % LG_THREADS_PER_PROC);
		t->ft_container = (char *)proc_containers[p];
	}
	d->dv_stacks = malloc(lg->lg_nstacks * sizeof(*d->dv_stacks));
	d->dv_stack_thread = malloc(lg->lg_nstacks);
	if (!d->dv_stacks || !d->dv_stack_thread)
		return -ENOMEM;
	return device_reset(lg, d);
}

static void device_next(struct lg_device *d);

/* request: send buf (consumed) as the device's next request. */
static void request(struct lg_device *d, int kind, char *buf, size_t len)
{
	struct loadgen *lg = d->dv_lg;
	nng_msg *m;

	if (nng_msg_alloc(&m, 0) || nng_msg_append(m, buf, len)) {
		free(buf);
		add(&lg->lg_st.st_errors, 1);
		return;
	}
	free(buf);
	d->dv_req = kind;
	d->dv_state = ST_SEND;
	d->dv_sent_ns = fp_now_ns(CLOCK_MONOTONIC);
	add(&lg->lg_st.st_inflight, 1);
	__atomic_store_n(&d->dv_waiting, d->dv_sent_ns, __ATOMIC_RELAXED);
	nng_aio_set_msg(d->dv_aio, m);
	nng_ctx_send(d->dv_ctx, d->dv_aio);
}

static void sleep_until(struct lg_device *d, uint64_t when_ns)
{
	uint64_t now = fp_now_ns(CLOCK_MONOTONIC);

	d->dv_state = ST_SLEEP;
	nng_sleep_aio(when_ns > now ? (nng_duration)((when_ns - now + 999999) / 1000000) : 0,
		      d->dv_aio);
}

static int send_hello(struct loadgen *lg, struct lg_device *d)
{
	char boot[40], rack[16], *keys[1] = { "rack" }, *values[1] = { rack };
	struct fp_hello h = { .fh_session = d->dv_session,
			      .fh_host = d->dv_host,
			      .fh_boot_id = boot,
			      .fh_kernel_release = "6.1.0-loadgen-amd64",
			      .fh_kernel_build_id = lg->lg_maps[lg->lg_kernel].lm_id,
			      .fh_agent_version = "fleetprof-loadgen " FP_VERSION,
			      .fh_frequency = 99,
			      .fh_ncpus = 4,
			      .fh_features = FP_FEATURE_HELD_TABLES,
			      .fh_nlabels = 1,
			      .fh_label_keys = keys,
			      .fh_label_values = values,
			      .fh_nheld = lg->lg_hold ? lg->lg_nheld : 0,
			      .fh_held = lg->lg_hold ? lg->lg_held : NULL };
	size_t len;
	char *buf;
	int err;

	snprintf(boot, sizeof(boot), "6c6f6164-6765-6e00-0000-%012x", d->dv_index);
	snprintf(rack, sizeof(rack), "r%u", d->dv_index / 40);
	if ((err = fp_wire_encode_hello(&h, &buf, &len)))
		return err;
	request(d, REQ_HELLO, buf, len);
	return 0;
}

static int send_ksyms(struct loadgen *lg, struct lg_device *d)
{
	struct fp_ksyms k = { .fs_session = d->dv_session,
			      .fs_kind = FP_MAP_KERNEL,
			      .fs_build_id = lg->lg_maps[lg->lg_kernel].lm_id,
			      .fs_name = "vmlinux",
			      .fs_last = 1,
			      .fs_nsyms = LG_KSYMS,
			      .fs_syms = lg->lg_ksyms };
	size_t len;
	char *buf;
	int err;

	if ((err = fp_wire_encode_ksyms(&k, &buf, &len)))
		return err;
	d->dv_want_ksyms = 0;
	request(d, REQ_KSYMS, buf, len);
	return 0;
}

/* send_file: the symbolizer asked for bytes of a file; like an agent that
 * cannot open it, answer that it cannot be read. */
static int send_file(struct lg_device *d)
{
	struct fp_file_data f = { .fd_session = d->dv_session,
				  .fd_build_id = d->dv_ranges[0].fg_build_id,
				  .fd_offset = d->dv_ranges[0].fg_offset,
				  .fd_error = ENOENT };
	size_t len;
	char *buf;
	int err;

	memmove(d->dv_ranges, d->dv_ranges + 1, --d->dv_nranges * sizeof(*d->dv_ranges));
	if ((err = fp_wire_encode_file(&f, &buf, &len)))
		return err;
	request(d, REQ_FILE, buf, len);
	return 0;
}

/* encode_batch: the interval just closed, with the definitions the
 * session has not accepted yet; kept until it is acknowledged. */
static int encode_batch(struct loadgen *lg, struct lg_device *d, uint64_t start_ns, uint64_t end_ns,
			uint64_t samples)
{
	struct fp_mapping maps[LG_MAX_KNOWN + LG_PROCESSES + 2];
	struct fp_count *counts = malloc(lg->lg_nstacks * sizeof(*counts));
	struct fp_batch b = { .fb_session = d->dv_session,
			      .fb_seq = d->dv_seq,
			      .fb_start_ns = start_ns,
			      .fb_end_ns = end_ns,
			      .fb_period_ns = 1000000000ull / 99 };
	uint64_t left = samples;
	size_t i;
	char *buf;
	size_t len;
	int err;

	if (!counts)
		return -ENOMEM;
	if (!d->dv_defs_sent) {
		for (i = 0; i < lg->lg_nmaps; i++) {
			if ((int)i == lg->lg_mapfile && d->dv_index != 0)
				continue;
			maps[b.fb_nmappings++] = (struct fp_mapping){
				.fm_id = (uint32_t)i,
				.fm_kind = lg->lg_maps[i].lm_kind,
				.fm_build_id = lg->lg_maps[i].lm_id,
				.fm_path = lg->lg_maps[i].lm_path,
			};
		}
		b.fb_mappings = maps;
		b.fb_threads = d->dv_threads;
		b.fb_nthreads = LG_PROCESSES * LG_THREADS_PER_PROC;
	}
	b.fb_nodes = d->dv_nodes + d->dv_nodes_sent;
	b.fb_nnodes = d->dv_nnodes - d->dv_nodes_sent;
	/* Stacks share the samples by fixed Zipf weights; what rounding
	 * leaves goes to the hottest. */
	for (i = lg->lg_nstacks; i-- > 0;) {
		uint64_t n = i ? (uint64_t)((double)samples * lg->lg_weights[i]) : left;
		if (n > left)
			n = left;
		left -= n;
		if (n)
			counts[b.fb_ncounts++] = (struct fp_count){
				.fc_thread = d->dv_stack_thread[i],
				.fc_node = d->dv_stacks[i],
				.fc_count = (uint32_t)n,
			};
	}
	b.fb_counts = counts;
	err = fp_wire_encode_batch(&b, &buf, &len);
	free(counts);
	if (err)
		return err;
	if (d->dv_batch)
		nng_msg_free(d->dv_batch);
	d->dv_batch = NULL;
	if (nng_msg_alloc(&d->dv_batch, 0) || nng_msg_append(d->dv_batch, buf, len)) {
		free(buf);
		if (d->dv_batch)
			nng_msg_free(d->dv_batch);
		d->dv_batch = NULL;
		return -ENOMEM;
	}
	free(buf);
	d->dv_batch_nodes = d->dv_nnodes;
	return 0;
}

/* close_interval: the samples of the time since the last batch, and the
 * stacks churn brought (a trie grown too large starts a new session, as
 * the agent's --max-mem does). */
static int close_interval(struct loadgen *lg, struct lg_device *d)
{
	uint64_t now = fp_now_ns(CLOCK_REALTIME), samples;
	/* An early first batch may close before the interval's planned start. */
	uint64_t dt = now > d->dv_last_ns ? now - d->dv_last_ns : 0;
	int err;

	if (dt > 3600ull * 1000000000ull)
		dt = 3600ull * 1000000000ull;
	samples = (uint64_t)((double)lg->lg_rate * (double)dt / 1e9);
	d->dv_churn_due += (double)lg->lg_churn * (double)dt / 1e9;
	while (d->dv_churn_due >= 1.0) {
		d->dv_churn_due -= 1.0;
		if (d->dv_nnodes + 16 > LG_MAX_NODES) {
			add(&lg->lg_st.st_resets, 1);
			if ((err = device_reset(lg, d)))
				return err;
			continue;
		}
		if ((err = stack_new(lg, d, 1 + rng_below(&d->dv_rng, lg->lg_nstacks - 1))))
			return err;
	}
	d->dv_seq++;
	if ((err = encode_batch(lg, d, d->dv_last_ns, now, samples)))
		return err;
	d->dv_batch_samples = samples;
	d->dv_batch_start = d->dv_last_ns;
	d->dv_batch_end = now;
	add(&lg->lg_st.st_offered, samples);
	d->dv_last_ns = now;
	return 0;
}

/* device_next: the device's next step, in the order an agent takes them. */
static void device_next(struct lg_device *d)
{
	struct loadgen *lg = d->dv_lg;
	uint64_t now = fp_now_ns(CLOCK_MONOTONIC);
	nng_msg *m;
	int err = 0;

	if (lg_stop)
		return;
	if (!d->dv_batch && (now >= d->dv_due_ns || (d->dv_early_ns && now >= d->dv_early_ns))) {
		if ((err = close_interval(lg, d)))
			goto fail;
		if (now >= d->dv_due_ns) {
			d->dv_due_ns += (uint64_t)lg->lg_interval_s * 1000000000ull;
			if (d->dv_due_ns < now)
				d->dv_due_ns = now + (uint64_t)lg->lg_interval_s * 1000000000ull;
		}
		d->dv_early_ns = 0;
	}
	if (!d->dv_hello_ok)
		err = send_hello(lg, d);
	else if (d->dv_want_ksyms)
		err = send_ksyms(lg, d);
	else if (d->dv_nranges)
		err = send_file(d);
	else if (d->dv_batch) {
		if (nng_msg_dup(&m, d->dv_batch)) {
			err = -ENOMEM;
			goto fail;
		}
		d->dv_req = REQ_BATCH;
		d->dv_state = ST_SEND;
		d->dv_sent_ns = now;
		if (d->dv_mapfile_pending && !d->dv_mapfile_sent_ns)
			d->dv_mapfile_sent_ns = now;
		add(&lg->lg_st.st_inflight, 1);
		__atomic_store_n(&d->dv_waiting, now, __ATOMIC_RELAXED);
		nng_aio_set_msg(d->dv_aio, m);
		nng_ctx_send(d->dv_ctx, d->dv_aio);
		return;
	} else {
		sleep_until(d, d->dv_early_ns && d->dv_early_ns < d->dv_due_ns ? d->dv_early_ns
									       : d->dv_due_ns);
		return;
	}
	if (!err)
		return;
fail:
	add(&lg->lg_st.st_errors, 1);
	sleep_until(d, now + LG_RETRY_MS * 1000000ull);
}

/* take_reply: act on the symbolizer's answer as the agent does.  1 when
 * the device must wait before its next step, else 0. */
static int take_reply(struct loadgen *lg, struct lg_device *d, const struct fp_reply *r)
{

	if (r->fr_status == FP_REPLY_NEED_HELLO) {
		add(&lg->lg_st.st_need_hello, 1);
		d->dv_hello_ok = d->dv_defs_sent = 0;
		d->dv_nodes_sent = 0;
		/* The batch again, with every definition. */
		if (d->dv_batch &&
		    encode_batch(lg, d, d->dv_batch_start, d->dv_batch_end, d->dv_batch_samples)) {
			add(&lg->lg_st.st_errors, 1);
			return 1;
		}
		return 0;
	}
	if (r->fr_status == FP_REPLY_OK && d->dv_req == REQ_BATCH && r->fr_seq != d->dv_seq) {
		/* Not taken (the symbolizer's sinks are behind): again later. */
		add(&lg->lg_st.st_busy, 1);
		return 1;
	}
	if (r->fr_status != FP_REPLY_OK) {
		add(&lg->lg_st.st_rejected, 1);
		if (d->dv_req == REQ_BATCH) {
			nng_msg_free(d->dv_batch);
			d->dv_batch = NULL;
		}
		return d->dv_req == REQ_HELLO;
	}
	switch (d->dv_req) {
	case REQ_HELLO:
		d->dv_hello_ok = 1;
		add(&lg->lg_st.st_hellos, 1);
		break;
	case REQ_BATCH:
		add(&lg->lg_st.st_batches, 1);
		add(&lg->lg_st.st_accepted, d->dv_batch_samples);
		if (d->dv_mapfile_pending) {
			lg->lg_st.st_mapfile_us = (fp_now_ns(CLOCK_MONOTONIC) -
						   d->dv_mapfile_sent_ns) /
						  1000;
			d->dv_mapfile_pending = 0;
		}
		nng_msg_free(d->dv_batch);
		d->dv_batch = NULL;
		d->dv_defs_sent = 1;
		d->dv_nodes_sent = d->dv_batch_nodes;
		break;
	case REQ_KSYMS:
		add(&lg->lg_st.st_ksyms, 1);
		break;
	case REQ_FILE:
		add(&lg->lg_st.st_files, 1);
		break;
	}
	for (size_t i = 0; i < r->fr_ntables; i++)
		add(&lg->lg_st.st_table_bytes, r->fr_tables[i].tp_len);
	/* Tables to come: the next batch early, as the agent sends it. */
	if (d->dv_req == REQ_BATCH && r->fr_tables_pending) {
		d->dv_retry_ms = r->fr_ntables    ? LG_TABLES_RETRY_MS
				 : d->dv_retry_ms ? 2 * d->dv_retry_ms
						  : LG_TABLES_RETRY_MS;
		if (d->dv_retry_ms > lg->lg_interval_s * 1000)
			d->dv_retry_ms = lg->lg_interval_s * 1000;
		d->dv_early_ns = fp_now_ns(CLOCK_MONOTONIC) + d->dv_retry_ms * 1000000ull;
	} else if (d->dv_req == REQ_BATCH) {
		d->dv_retry_ms = 0;
	}
	if (r->fr_nwant)
		d->dv_want_ksyms = 1;
	if (r->fr_nranges && d->dv_nranges + r->fr_nranges <= 1024 &&
	    !fp_vec_reserve(&d->dv_ranges, &d->dv_ranges_cap, d->dv_nranges + r->fr_nranges,
			    sizeof(*d->dv_ranges))) {
		memcpy(d->dv_ranges + d->dv_nranges, r->fr_ranges,
		       r->fr_nranges * sizeof(*d->dv_ranges));
		d->dv_nranges += r->fr_nranges;
	}
	return 0;
}

static void device_cb(void *arg)
{
	struct lg_device *d = arg;
	struct loadgen *lg = d->dv_lg;
	int rv = nng_aio_result(d->dv_aio), err;
	struct fp_reply r;
	nng_msg *m;

	if (d->dv_state == ST_SLEEP) {
		device_next(d);
		return;
	}
	if (rv) {
		if (d->dv_state == ST_SEND)
			nng_msg_free(nng_aio_get_msg(d->dv_aio));
		__atomic_store_n(&d->dv_waiting, 0, __ATOMIC_RELAXED);
		add(&lg->lg_st.st_inflight, -1ull);
		if (lg_stop)
			return;
		/* Only the main thread cancels: the reply took too long. */
		if (rv == NNG_ECANCELED) {
			add(&lg->lg_st.st_timeouts, 1);
			lg_record_latency(lg, d);
		} else {
			add(&lg->lg_st.st_errors, 1);
		}
		/* Given up on, as an agent does: try again a little later. */
		sleep_until(d, fp_now_ns(CLOCK_MONOTONIC) + LG_RETRY_MS * 1000000ull);
		return;
	}
	if (d->dv_state == ST_SEND) {
		d->dv_state = ST_RECV;
		nng_ctx_recv(d->dv_ctx, d->dv_aio);
		return;
	}
	__atomic_store_n(&d->dv_waiting, 0, __ATOMIC_RELAXED);
	add(&lg->lg_st.st_inflight, -1ull);
	/* nng 1.5.2 has been seen to complete a receive with neither a
	 * message nor an error (nanomsg/nng#1620): a lost reply. */
	if (!(m = nng_aio_get_msg(d->dv_aio))) {
		add(&lg->lg_st.st_errors, 1);
		sleep_until(d, fp_now_ns(CLOCK_MONOTONIC) + LG_RETRY_MS * 1000000ull);
		return;
	}
	lg_record_latency(lg, d);
	err = fp_wire_decode_reply(nng_msg_body(m), nng_msg_len(m), &r);
	nng_msg_free(m);
	if (err) {
		add(&lg->lg_st.st_errors, 1);
		sleep_until(d, fp_now_ns(CLOCK_MONOTONIC) + LG_RETRY_MS * 1000000ull);
		return;
	}
	err = take_reply(lg, d, &r);
	fp_reply_fini(&r);
	if (err)
		sleep_until(d, fp_now_ns(CLOCK_MONOTONIC) + LG_RETRY_MS * 1000000ull);
	else
		device_next(d);
}

static void pipe_cb(nng_pipe p, nng_pipe_ev ev, void *arg)
{
	struct lg_device *d = arg;

	add(&d->dv_lg->lg_st.st_connects, 1);
	if (__atomic_fetch_add(&d->dv_pipes, 1, __ATOMIC_RELAXED) > 0)
		add(&d->dv_lg->lg_st.st_reconnects, 1);
}

/* map_file: a readable mapping for the ELF file at path; frames are drawn
 * from the second eighth to the middle of the file, where the code of a
 * shared library lies.  0 or a negative errno. */
static int map_file(struct lg_mapping *m, const char *path)
{
	struct stat st;
	int fd = open(path, O_RDONLY | O_CLOEXEC), err;

	if (fd < 0)
		return -errno;
	err = fstat(fd, &st) ? -errno : fp_elfnote_build_id(fd, &m->lm_id);
	close(fd);
	if (err)
		return err;
	if (!realpath(path, m->lm_path))
		return -errno;
	m->lm_kind = FP_MAP_USER;
	m->lm_lo = (uint64_t)st.st_size / 8;
	m->lm_hi = (uint64_t)st.st_size / 2;
	return m->lm_hi > m->lm_lo ? 0 : -EINVAL;
}

static int add_loaded(struct dl_phdr_info *info, size_t size, void *arg)
{
	struct loadgen *lg = arg;

	if (lg->lg_nknown < LG_MAX_KNOWN && info->dlpi_name[0] == '/' &&
	    map_file(&lg->lg_maps[lg->lg_nknown], info->dlpi_name) == 0)
		lg->lg_nknown++;
	return 0;
}

/* A build-ID nobody has, the same on every device: name's FNV-1a hash,
 * stretched. */
static void fake_build_id(const char *name, struct fp_build_id *id)
{
	uint64_t h = fp_hash_string(FP_HASH_SEED, name);
	size_t i;

	id->fb_len = FP_BUILD_ID_MAX;
	for (i = 0; i < FP_BUILD_ID_MAX; i++)
		id->fb_data[i] = (uint8_t)(rng_next(&h) >> 56);
}

static int lg_setup(struct loadgen *lg, const char *mapfile)
{
	double total = 0;
	size_t i;
	int err;

	dl_iterate_phdr(add_loaded, lg);
	if (!lg->lg_nknown) {
		fprintf(stderr, "fleetprof loadgen: no shared library with a build-ID is loaded\n");
		return -ENOENT;
	}
	lg->lg_nmaps = lg->lg_nknown;
	for (i = 0; i < LG_PROCESSES; i++) {
		struct lg_mapping *m = &lg->lg_maps[lg->lg_nmaps++];
		snprintf(m->lm_path, sizeof(m->lm_path), "/usr/bin/%s", proc_names[i]);
		fake_build_id(m->lm_path, &m->lm_id);
		m->lm_kind = FP_MAP_USER;
		m->lm_lo = 0x1000;
		m->lm_hi = 0x400000;
	}
	lg->lg_kernel = lg->lg_nmaps++;
	fake_build_id("vmlinux", &lg->lg_maps[lg->lg_kernel].lm_id);
	lg->lg_maps[lg->lg_kernel].lm_kind = FP_MAP_KERNEL;
	snprintf(lg->lg_maps[lg->lg_kernel].lm_path, PATH_MAX, "[kernel]");
	lg->lg_mapfile = -1;
	if (mapfile) {
		if ((err = map_file(&lg->lg_maps[lg->lg_nmaps], mapfile))) {
			fprintf(stderr, "fleetprof loadgen: --map-file %s: %s\n", mapfile,
				err == -ENOENT ? "no such file or no GNU build-ID"
					       : strerror(-err));
			return err;
		}
		lg->lg_mapfile = (int)lg->lg_nmaps++;
	}
	for (i = 0; i < LG_KSYMS; i++) {
		char name[32];
		snprintf(name, sizeof(name), "lg_kernel_fn%zu", i);
		lg->lg_ksyms[i].fk_offset = 0x1000 + i * 0x800;
		if (!(lg->lg_ksyms[i].fk_name = strdup(name)))
			return -ENOMEM;
	}
	if (!(lg->lg_weights = calloc(lg->lg_nstacks, sizeof(*lg->lg_weights))))
		return -ENOMEM;
	for (i = 0; i < lg->lg_nstacks; i++)
		total += lg->lg_weights[i] = 1.0 / (double)(i + 1);
	for (i = 0; i < lg->lg_nstacks; i++)
		lg->lg_weights[i] /= total;
	return 0;
}

/* warm_call: one request of the warm-up device and its reply.  0 or a
 * negative errno. */
static int warm_call(nng_socket sock, char *buf, size_t len, struct fp_reply *r)
{
	nng_msg *m = NULL;
	int rv;

	rv = nng_msg_alloc(&m, 0);
	if (!rv && (rv = nng_msg_append(m, buf, len)) == 0 && (rv = nng_sendmsg(sock, m, 0)) == 0)
		m = NULL;
	free(buf);
	if (m)
		nng_msg_free(m);
	if (rv || (rv = nng_recvmsg(sock, &m, 0)))
		return -EIO;
	rv = fp_wire_decode_reply(nng_msg_body(m), nng_msg_len(m), r);
	nng_msg_free(m);
	return rv ? -EPROTO : 0;
}

/* A table the warm-up device receives, part by part. */
struct warm_table {
	struct fp_build_id wt_id;
	uint8_t *wt_buf;
	uint32_t wt_total, wt_have;
};

/* warm_take: a part into its table; a table complete is held from now
 * on (its id in lg_held). */
static void warm_take(struct loadgen *lg, struct warm_table *w, size_t *nw,
		      const struct fp_table_part *p)
{
	struct warm_table *t = NULL;
	size_t i;

	for (i = 0; i < *nw; i++)
		if (fp_build_id_eq(&w[i].wt_id, &p->tp_build_id))
			t = &w[i];
	if (!t && *nw < LG_MAX_KNOWN && p->tp_offset == 0) {
		t = &w[(*nw)++];
		*t = (struct warm_table){ .wt_id = p->tp_build_id, .wt_total = p->tp_total };
		t->wt_buf = malloc(p->tp_total);
	}
	if (!t || !t->wt_buf || p->tp_offset != t->wt_have || p->tp_total != t->wt_total ||
	    p->tp_len > t->wt_total - t->wt_have)
		return;
	memcpy(t->wt_buf + t->wt_have, p->tp_data, p->tp_len);
	if ((t->wt_have += p->tp_len) < t->wt_total || lg->lg_nheld == LG_MAX_KNOWN)
		return;
	lg->lg_held[lg->lg_nheld++] = (struct fp_held_table){
		t->wt_id, fp_unwind_table_id(&t->wt_id, t->wt_buf, t->wt_total)
	};
	lg->lg_held_bytes += t->wt_total;
}

/* lg_warm_up: one device, before the others, that maps every readable
 * file and takes what the symbolizer sends, asking again while it says
 * more tables are to come: the symbolizer has compiled them all when the
 * devices start, and their ids are what --hold-tables devices name.  0,
 * -ETIMEDOUT (tables still to come after LG_WARM_S) or a negative errno. */
static int lg_warm_up(struct loadgen *lg)
{
	struct fp_mapping maps[LG_MAX_KNOWN];
	struct warm_table w[LG_MAX_KNOWN];
	struct fp_hello h = { .fh_host = "loadgen-warmup",
			      .fh_boot_id = "warm",
			      .fh_kernel_release = "6.1.0-loadgen-amd64",
			      .fh_agent_version = "fleetprof-loadgen " FP_VERSION,
			      .fh_frequency = 99,
			      .fh_ncpus = 4,
			      .fh_features = FP_FEATURE_HELD_TABLES };
	uint64_t deadline = fp_now_ns(CLOCK_MONOTONIC) + LG_WARM_S * 1000000000ull, seq;
	size_t nw = 0, i, len;
	nng_socket sock;
	int err = 0, pending = 1;
	char *buf;

	if (nng_req0_open(&sock))
		return -EIO;
	nng_socket_set_size(sock, NNG_OPT_RECVMAXSZ, FP_WIRE_MAX_MESSAGE);
	nng_socket_set_ms(sock, NNG_OPT_RECVTIMEO, 30000);
	nng_socket_set_ms(sock, NNG_OPT_REQ_RESENDTIME, NNG_DURATION_INFINITE);
	/* In the background, as the devices dial: a symbolizer starting up is
	 * waited for (the first reply's timeout). */
	if (nng_dial(sock, lg->lg_server, NULL, NNG_FLAG_NONBLOCK)) {
		nng_close(sock);
		return -EINVAL;
	}
	h.fh_session = fp_now_ns(CLOCK_REALTIME);
	for (i = 0; i < lg->lg_nknown; i++)
		maps[i] = (struct fp_mapping){ .fm_id = (uint32_t)i,
					       .fm_kind = FP_MAP_USER,
					       .fm_build_id = lg->lg_maps[i].lm_id,
					       .fm_path = lg->lg_maps[i].lm_path };
	if ((err = fp_wire_encode_hello(&h, &buf, &len)) == 0) {
		struct fp_reply r;
		if (!(err = warm_call(sock, buf, len, &r)))
			err = r.fr_status == FP_REPLY_OK ? 0 : -EPROTO;
		fp_reply_fini(&r);
	}
	for (seq = 1; !err && pending && fp_now_ns(CLOCK_MONOTONIC) < deadline; seq++) {
		uint64_t now = fp_now_ns(CLOCK_REALTIME);
		struct fp_batch b = { .fb_session = h.fh_session,
				      .fb_seq = seq,
				      .fb_start_ns = now,
				      .fb_end_ns = now,
				      .fb_period_ns = 1000000000ull / 99,
				      .fb_nmappings = seq == 1 ? lg->lg_nknown : 0,
				      .fb_mappings = maps };
		struct fp_reply r;

		if (seq > 1)
			usleep(LG_TABLES_RETRY_MS * 1000);
		if ((err = fp_wire_encode_batch(&b, &buf, &len)) ||
		    (err = warm_call(sock, buf, len, &r)))
			break;
		for (i = 0; i < r.fr_ntables; i++)
			warm_take(lg, w, &nw, &r.fr_tables[i]);
		pending = r.fr_status == FP_REPLY_OK && (r.fr_seq != seq || r.fr_tables_pending);
		err = r.fr_status == FP_REPLY_OK ? 0 : -EPROTO;
		fp_reply_fini(&r);
	}
	for (i = 0; i < nw; i++)
		free(w[i].wt_buf);
	nng_close(sock);
	return err ? err : pending ? -ETIMEDOUT : 0;
}

static int device_open(struct loadgen *lg, struct lg_device *d)
{
	int rv;

	if ((rv = nng_req0_open(&d->dv_sock)) != 0)
		goto fail;
	/* As the agent (device/uplink.c): resends are ours, not nng's. */
	nng_socket_set_ms(d->dv_sock, NNG_OPT_REQ_RESENDTIME, NNG_DURATION_INFINITE);
	nng_socket_set_ms(d->dv_sock, NNG_OPT_RECONNMINT, 100);
	nng_socket_set_ms(d->dv_sock, NNG_OPT_RECONNMAXT, 5000);
	nng_socket_set_size(d->dv_sock, NNG_OPT_RECVMAXSZ, FP_WIRE_MAX_MESSAGE);
	nng_pipe_notify(d->dv_sock, NNG_PIPE_EV_ADD_POST, pipe_cb, d);
	if ((rv = nng_ctx_open(&d->dv_ctx, d->dv_sock)) != 0 ||
	    (rv = nng_aio_alloc(&d->dv_aio, device_cb, d)) != 0 ||
	    (rv = nng_dial(d->dv_sock, lg->lg_server, NULL, NNG_FLAG_NONBLOCK)) != 0)
		goto fail;
	return 0;
fail:
	fprintf(stderr, "fleetprof loadgen: device %u: %s: %s\n", d->dv_index, lg->lg_server,
		nng_strerror(rv));
	return -EINVAL;
}

static void device_close(struct lg_device *d)
{
	if (d->dv_aio) {
		nng_aio_stop(d->dv_aio);
		nng_aio_free(d->dv_aio);
	}
	if (nng_socket_id(d->dv_sock) > 0)
		nng_close(d->dv_sock);
	if (d->dv_batch)
		nng_msg_free(d->dv_batch);
	free(d->dv_nodes);
	free(d->dv_node_proc);
	free(d->dv_node_depth);
	free(d->dv_stacks);
	free(d->dv_stack_thread);
	free(d->dv_ranges);
}

/* report_unanswered: on stderr, the requests still waiting for a reply at
 * the end (the summary's unanswered=), each with its device, kind and
 * age, so that a reply the symbolizer never sent can be found in its log. */
static void report_unanswered(const struct loadgen *lg)
{
	static const char *const kinds[] = { "hello", "batch", "kallsyms", "file" };
	uint64_t now = fp_now_ns(CLOCK_MONOTONIC), since;
	unsigned i;

	for (i = 0; i < lg->lg_ndevices; i++) {
		const struct lg_device *d = &lg->lg_devs[i];

		if ((since = __atomic_load_n(&d->dv_waiting, __ATOMIC_RELAXED)))
			fprintf(stderr,
				"loadgen: device %u: %s (seq %" PRIu64 ") unanswered "
				"after %" PRIu64 " ms\n",
				i, kinds[d->dv_req], d->dv_seq, (now - since) / 1000000);
	}
}

/* cancel_late: give up on requests waiting longer than the timeout (the
 * callback counts them); nng's own aio timeouts are not used, see
 * device_cb. */
static void cancel_late(struct loadgen *lg)
{
	uint64_t now = fp_now_ns(CLOCK_MONOTONIC), limit = lg->lg_timeout_ms * 1000000ull;
	uint32_t i;

	for (i = 0; i < lg->lg_ndevices; i++) {
		struct lg_device *d = &lg->lg_devs[i];
		uint64_t since = __atomic_load_n(&d->dv_waiting, __ATOMIC_RELAXED);

		if (since && now - since > limit &&
		    __atomic_compare_exchange_n(&d->dv_waiting, &since, 0, 0, __ATOMIC_RELAXED,
						__ATOMIC_RELAXED))
			nng_aio_cancel(d->dv_aio);
	}
}

/* raise_nofile: one descriptor per device and some to spare. */
static int raise_nofile(uint32_t ndevices)
{
	struct rlimit rl;
	rlim_t need = (rlim_t)ndevices + 256;

	if (getrlimit(RLIMIT_NOFILE, &rl))
		return -errno;
	if (rl.rlim_cur >= need)
		return 0;
	if (rl.rlim_max < need) {
		fprintf(stderr,
			"fleetprof loadgen: %u devices need %lu open files; the limit is %lu "
			"(ulimit -n)\n",
			ndevices, (unsigned long)need, (unsigned long)rl.rlim_max);
		return -EMFILE;
	}
	rl.rlim_cur = need;
	return setrlimit(RLIMIT_NOFILE, &rl) ? -errno : 0;
}

static uint64_t min_u64(uint64_t a, uint64_t b)
{
	return a < b ? a : b;
}

static void ms3(char *buf, size_t len, uint64_t us)
{
	snprintf(buf, len, "%.3f", (double)us / 1000.0);
}

static void loadgen_usage(FILE *f)
{
	fprintf(f,
		"usage: fleetprof loadgen --server ADDR --devices N --seconds S\n"
		"                         [--rate SAMPLES_PER_S] [--stacks K]\n"
		"                         [--churn NEW_STACKS_PER_S] [--interval SECONDS]\n"
		"                         [--timeout SECONDS] [--map-file FILE]\n"
		"                         [--spread SECONDS] [--early] [--warm]\n"
		"                         [--hold-tables]\n"
		"\n"
		"Simulates N devices, each with its own connection, session, host name,\n"
		"threads and stack trie, sending a hello and then one batch per interval\n"
		"to a fleetprof-symbolizer, as fleetprof-agent does.  Prints a line a\n"
		"second and a summary line at the end.\n"
		"\n"
		"  -s, --server ADDR        the symbolizer: tcp://HOST:PORT or ipc:///PATH\n"
		"  -n, --devices N          simulated devices (1-%u)\n"
		"  -d, --seconds S          how long to run (1-86400)\n"
		"  -r, --rate SAMPLES_PER_S samples per second per device (default 200)\n"
		"  -k, --stacks K           distinct stacks per device (default 100, 1-100000)\n"
		"  -c, --churn NEW_STACKS_PER_S  new stacks per second per device, each\n"
		"                           replacing an old one (default 0)\n"
		"  -i, --interval SECONDS   one batch per device per interval (default 10)\n"
		"  -t, --timeout SECONDS    wait for a reply this long (default 5)\n"
		"  -m, --map-file FILE      device 0 also maps this ELF file (by its build-ID\n"
		"                           and path); its replies are reported apart\n"
		"      --spread SECONDS     devices start spread over this long (default: the\n"
		"                           interval; 0: all at once)\n"
		"      --early              a device's first batch goes as soon as its hello\n"
		"                           is answered, as an agent's does when it reads new\n"
		"                           files (then one per interval)\n"
		"      --warm               first, one device takes every unwind table the\n"
		"                           symbolizer sends for the readable files, until it\n"
		"                           says none is to come: the devices start with them\n"
		"                           compiled\n"
		"      --hold-tables        --warm, and every device's hello names those\n"
		"                           tables as held (a restarted agent with its table\n"
		"                           cache): none should be sent\n"
		"  -h, --help               this help\n",
		LG_MAX_DEVICES);
}

int fp_cmd_loadgen(int argc, char **argv)
{
	static const struct option longopts[] = {
		{ "server", required_argument, NULL, 's' },
		{ "devices", required_argument, NULL, 'n' },
		{ "seconds", required_argument, NULL, 'd' },
		{ "rate", required_argument, NULL, 'r' },
		{ "stacks", required_argument, NULL, 'k' },
		{ "churn", required_argument, NULL, 'c' },
		{ "interval", required_argument, NULL, 'i' },
		{ "timeout", required_argument, NULL, 't' },
		{ "map-file", required_argument, NULL, 'm' },
		{ "spread", required_argument, NULL, 'S' },
		{ "early", no_argument, NULL, 'E' },
		{ "warm", no_argument, NULL, 'W' },
		{ "hold-tables", no_argument, NULL, 'H' },
		{ "help", no_argument, NULL, 'h' },
		{ 0 },
	};
	static struct loadgen lg; /* large: the histogram */
	const char *prog = "fleetprof loadgen", *mapfile = NULL;
	uint64_t prev_hist[FP_HIST_BUCKETS] = { 0 }, now_hist[FP_HIST_BUCKETS];
	uint64_t start, prev_accepted = 0, accepted, end, deadline, max_us;
	char p50[32], p99[32], max[32], lp99[32], mf[32];
	uint32_t timeout_s = 5, i, t;
	double secs;
	size_t b;
	int c, err, ret = 1;

	lg = (struct loadgen){ .lg_rate = 200,
			       .lg_nstacks = 100,
			       .lg_interval_s = 10,
			       .lg_spread_s = UINT32_MAX };
	optind = 1;
	while ((c = getopt_long(argc, argv, "s:n:d:r:k:c:i:t:m:h", longopts, NULL)) != -1) {
		switch (c) {
		case 's':
			lg.lg_server = optarg;
			break;
		case 'n':
			if (fp_parse_u32(prog, "--devices", optarg, 1, LG_MAX_DEVICES,
					 &lg.lg_ndevices))
				return 2;
			break;
		case 'd':
			if (fp_parse_u32(prog, "--seconds", optarg, 1, 86400, &lg.lg_seconds))
				return 2;
			break;
		case 'r':
			if (fp_parse_u32(prog, "--rate", optarg, 1, 1000000, &lg.lg_rate))
				return 2;
			break;
		case 'k':
			if (fp_parse_u32(prog, "--stacks", optarg, 1, 100000, &lg.lg_nstacks))
				return 2;
			break;
		case 'c':
			if (fp_parse_u32(prog, "--churn", optarg, 0, 100000, &lg.lg_churn))
				return 2;
			break;
		case 'i':
			if (fp_parse_u32(prog, "--interval", optarg, 1, 3600, &lg.lg_interval_s))
				return 2;
			break;
		case 't':
			if (fp_parse_u32(prog, "--timeout", optarg, 1, 600, &timeout_s))
				return 2;
			break;
		case 'm':
			mapfile = optarg;
			break;
		case 'S':
			if (fp_parse_u32(prog, "--spread", optarg, 0, 3600, &lg.lg_spread_s))
				return 2;
			break;
		case 'E':
			lg.lg_early = 1;
			break;
		case 'W':
			lg.lg_warm = 1;
			break;
		case 'H':
			lg.lg_warm = lg.lg_hold = 1;
			break;
		case 'h':
			loadgen_usage(stdout);
			return 0;
		default:
			loadgen_usage(stderr);
			return 2;
		}
	}
	if (optind < argc) {
		fprintf(stderr, "%s: unexpected argument '%s'\n", prog, argv[optind]);
		return 2;
	}
	if (!lg.lg_server || !lg.lg_ndevices || !lg.lg_seconds) {
		fprintf(stderr, "%s: --server, --devices and --seconds are required\n", prog);
		loadgen_usage(stderr);
		return 2;
	}
	if (lg.lg_nstacks < 2 && lg.lg_churn) {
		fprintf(stderr, "%s: --churn needs --stacks 2 or more\n", prog);
		return 2;
	}
	lg.lg_timeout_ms = timeout_s * 1000;
	if (lg.lg_spread_s == UINT32_MAX)
		lg.lg_spread_s = lg.lg_interval_s;
	if (lg_setup(&lg, mapfile) || raise_nofile(lg.lg_ndevices))
		goto out;
	if (lg.lg_warm) {
		uint64_t t0 = fp_now_ns(CLOCK_MONOTONIC);
		if ((err = lg_warm_up(&lg))) {
			fprintf(stderr, "%s: warm-up: %s\n", prog, strerror(-err));
			goto out;
		}
		printf("loadgen: warm-up: %zu tables (%" PRIu64 " bytes) in %.1f s\n", lg.lg_nheld,
		       lg.lg_held_bytes, (double)(fp_now_ns(CLOCK_MONOTONIC) - t0) / 1e9);
	}
	if (!(lg.lg_devs = calloc(lg.lg_ndevices, sizeof(*lg.lg_devs)))) {
		fprintf(stderr, "%s: out of memory\n", prog);
		goto out;
	}
	signal(SIGINT, lg_on_signal);
	signal(SIGTERM, lg_on_signal);
	signal(SIGPIPE, SIG_IGN);
	lg_stop = 0;
	start = fp_now_ns(CLOCK_MONOTONIC);
	for (i = 0; i < lg.lg_ndevices; i++) {
		struct lg_device *d = &lg.lg_devs[i];
		uint64_t offset;

		if ((err = device_alloc(&lg, d, i)) || (err = device_open(&lg, d))) {
			if (err == -ENOMEM)
				fprintf(stderr, "%s: out of memory\n", prog);
			goto stop;
		}
		/* Devices start spread over one interval, as a fleet's do. */
		offset = rng_below(&d->dv_rng, (uint64_t)lg.lg_spread_s * 1000000000ull);
		if (lg.lg_mapfile >= 0 && i == 0)
			offset = 0; /* its first batch is due one interval from now */
		d->dv_mapfile_pending = lg.lg_mapfile >= 0 && i == 0;
		d->dv_due_ns = start + offset +
			       (lg.lg_early ? 0 : (uint64_t)lg.lg_interval_s * 1000000000ull);
		d->dv_last_ns = fp_now_ns(CLOCK_REALTIME) + offset;
		sleep_until(d, start + offset);
	}
	for (t = 1; t <= lg.lg_seconds && !lg_stop; t++) {
		uint64_t when = start + (uint64_t)t * 1000000000ull, now;

		while ((now = fp_now_ns(CLOCK_MONOTONIC)) < when && !lg_stop) {
			usleep(when - now > 100000000 ? 100000 : (useconds_t)((when - now) / 1000));
			cancel_late(&lg);
		}
		accepted = get(&lg.lg_st.st_accepted);
		for (b = 0; b < FP_HIST_BUCKETS; b++) {
			now_hist[b] = get(&lg.lg_st.st_hist[b]);
			prev_hist[b] = now_hist[b] - prev_hist[b];
		}
		ms3(lp99, sizeof(lp99), fp_hist_percentile(prev_hist, 0.99));
		memcpy(prev_hist, now_hist, sizeof(prev_hist));
		printf("t=%u accepted %" PRIu64 " samples/s, replies p99 %s ms (this second), "
		       "connected %" PRIu64 ", in flight %" PRIu64 ", rejected %" PRIu64
		       ", need-hello %" PRIu64 ", timeouts %" PRIu64 "\n",
		       t, accepted - prev_accepted, lp99, get(&lg.lg_st.st_connects),
		       get(&lg.lg_st.st_inflight), get(&lg.lg_st.st_rejected),
		       get(&lg.lg_st.st_need_hello), get(&lg.lg_st.st_timeouts));
		fflush(stdout);
		prev_accepted = accepted;
	}
	ret = 0;
stop:
	end = fp_now_ns(CLOCK_MONOTONIC);
	lg_stop = 1;
	/* Wait for the replies still coming, at most one timeout. */
	deadline = end + lg.lg_timeout_ms * 1000000ull;
	while (get(&lg.lg_st.st_inflight) && fp_now_ns(CLOCK_MONOTONIC) < deadline)
		usleep(10000);
	report_unanswered(&lg);
	for (i = 0; i < lg.lg_ndevices; i++)
		if (lg.lg_devs[i].dv_aio)
			nng_aio_stop(lg.lg_devs[i].dv_aio);
	for (i = 0; i < lg.lg_ndevices; i++)
		device_close(&lg.lg_devs[i]);
	if (ret)
		goto out;
	secs = (double)(end - start) / 1e9;
	/* A bucket's bound may pass the largest value in it. */
	max_us = lg.lg_st.st_max_us;
	ms3(p50, sizeof(p50), min_u64(fp_hist_percentile(lg.lg_st.st_hist, 0.50), max_us));
	ms3(p99, sizeof(p99), min_u64(fp_hist_percentile(lg.lg_st.st_hist, 0.99), max_us));
	ms3(max, sizeof(max), lg.lg_st.st_max_us);
	ms3(mf, sizeof(mf), lg.lg_st.st_mapfile_us);
	printf("loadgen: devices=%u seconds=%.1f offered=%" PRIu64 " accepted=%" PRIu64
	       " accepted_per_s=%.0f batches=%" PRIu64 " hellos=%" PRIu64 " replies=%" PRIu64
	       " p50_ms=%s p99_ms=%s max_ms=%s rejected=%" PRIu64 " busy=%" PRIu64
	       " need_hello=%" PRIu64 " reconnects=%" PRIu64 " timeouts=%" PRIu64
	       " unanswered=%" PRIu64 " errors=%" PRIu64 " resets=%" PRIu64
	       " kallsyms_sent=%" PRIu64 " file_answers=%" PRIu64 " table_bytes=%" PRIu64
	       " held_tables=%zu%s%s\n",
	       lg.lg_ndevices, secs, lg.lg_st.st_offered, lg.lg_st.st_accepted,
	       (double)lg.lg_st.st_accepted / secs, lg.lg_st.st_batches, lg.lg_st.st_hellos,
	       lg.lg_st.st_replies, p50, p99, max, lg.lg_st.st_rejected, lg.lg_st.st_busy,
	       lg.lg_st.st_need_hello, lg.lg_st.st_reconnects, lg.lg_st.st_timeouts,
	       lg.lg_st.st_inflight, lg.lg_st.st_errors, lg.lg_st.st_resets, lg.lg_st.st_ksyms,
	       lg.lg_st.st_files, lg.lg_st.st_table_bytes, lg.lg_hold ? lg.lg_nheld : 0,
	       lg.lg_mapfile >= 0 ? " map_file_ms=" : "",
	       lg.lg_mapfile >= 0 ? (lg.lg_st.st_mapfile_us ? mf : "none") : "");
out:
	free(lg.lg_devs);
	free(lg.lg_weights);
	for (b = 0; b < LG_KSYMS; b++)
		free(lg.lg_ksyms[b].fk_name);
	return ret;
}
