/* sampler.c: skeleton lifecycle: open, size, load, attach, poll, destroy. */
#include "sampler.h"
#include "log.h"
#include "privilege.h"
#include "stacks.skel.h"
#include "stacks_off.skel.h"
#include "stacks_offpy.skel.h"
#include "stacks_py.skel.h"
#include "vec.h"

#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <stdbool.h>
#include <linux/perf_event.h>
#include <stdlib.h>
#include <string.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>
#include <bpf/bpf.h>
#include <bpf/libbpf.h>

struct fp_sampler {
	struct stacks_bpf *sm_skel;
	struct ring_buffer *sm_rb;
	size_t sm_rb_bytes;                   /* its size */
	uint64_t sm_records, sm_record_bytes; /* drained from it */
	uint64_t sm_poll_bytes, sm_poll_peak; /* in this poll; the most in one */
	struct bpf_link **sm_links;
	struct bpf_link *sm_exec_link, *sm_exit_link; /* NULL: no known pids */
	int *sm_pfds;
	int sm_ncpus;
	uint32_t sm_frequency;
	int sm_task;                 /* fp_sampler_opts.so_task */
	size_t sm_nrows;             /* the unwind budget, in rows; 0: no unwind tables */
	uint32_t sm_nchunks;         /* of FP_UNWIND_CHUNK_ROWS rows: the budget */
	struct stacks_py_bpf *sm_py; /* the Python walker, once loaded */
	struct bpf_link *sm_py_exec_link, *sm_py_exit_link;
	int sm_py_err;                 /* why the Python walker could not be loaded; 0: not tried */
	struct stacks_off_bpf *sm_off; /* the off-CPU hook, when asked for */
	struct stacks_offpy_bpf *sm_offpy; /* its Python walker, once both are loaded */
	struct bpf_link *sm_off_link;
	fp_sample_fn sm_fn;
	void *sm_arg;
	struct fp_sampler_load sm_load; /* what loading the programs cost */
};

static int sampler_record(void *ctx, void *data, size_t len)
{
	struct fp_sampler *s = ctx;
	const struct fp_bpf_sample *hdr = data;
	const unsigned char *p = data;

	s->sm_records++;
	s->sm_record_bytes += len;
	s->sm_poll_bytes += len + 8; /* and the ring buffer's record header */
	if (len < sizeof(*hdr) ||
	    hdr->ustack_bytes >
		    (hdr->flags & FP_SAMPLE_USER_RAW ? FP_STACK_DEPTH * 8 : FP_USTACK_BYTES) ||
	    hdr->kstack_bytes > FP_KSTACK_BYTES ||
	    len < sizeof(*hdr) + hdr->ustack_bytes + hdr->kstack_bytes)
		return 0;
	s->sm_fn(hdr, p + sizeof(*hdr), p + sizeof(*hdr) + hdr->ustack_bytes, s->sm_arg);
	return 0;
}

/* Parse a CPU list such as "0-3,5" into a boolean array of *n entries. */
static int online_cpus(bool **mask, int *n)
{
	char buf[4096], *p = buf, *end;
	bool *m = NULL;
	ssize_t len;
	size_t cap = 0;
	int fd, max = 0;

	fd = open("/sys/devices/system/cpu/online", O_RDONLY | O_CLOEXEC);
	if (fd < 0)
		return -errno;
	len = read(fd, buf, sizeof(buf) - 1);
	close(fd);
	if (len <= 0)
		return -EINVAL;
	buf[len] = '\0';
	while (*p && *p != '\n') {
		long lo = strtol(p, &end, 10), hi = lo;
		if (end == p || lo < 0 || lo > 65535)
			goto bad;
		p = end;
		if (*p == '-') {
			hi = strtol(p + 1, &end, 10);
			if (end == p + 1 || hi < lo || hi > 65535)
				goto bad;
			p = end;
		}
		if (hi + 1 > max) {
			if (fp_vec_reserve_zeroed(&m, &cap, (size_t)hi + 1, sizeof(*m))) {
				free(m);
				return -ENOMEM;
			}
			max = hi + 1;
		}
		for (; lo <= hi; lo++)
			m[lo] = true;
		if (*p == ',')
			p++;
	}
	*mask = m, *n = max;
	return 0;
bad:
	free(m);
	return -EINVAL;
}

/* About a second of samples at 256 bytes each: records averaged 111 to
 * 204 bytes (make bench, device part: a walked stack is its addresses,
 * 8 bytes a frame), and the most one poll drained was 48 KiB on a busy
 * host (99 Hz, 2 CPUs).  The agent drains the buffer every 250 ms, and
 * the BPF program wakes it when half full; losses are counted. */
static size_t ringbuf_size(uint32_t frequency, int ncpus)
{
	size_t want = (size_t)frequency * ncpus * 256, size = 64 * 1024;

	while (size < want && size < (64u << 20))
		size *= 2;
	return size;
}

/* The verifier's statistics of one program (BPF_LOG_STATS), or the reason
 * it refused it: enough room for their few lines. */
#define STATS_LOG_BYTES 1024

/* clock_ns: clock clk in ns (CPU time of the calling thread, or wall). */
static uint64_t clock_ns(clockid_t clk)
{
	struct timespec ts;

	clock_gettime(clk, &ts);
	return (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
}

static uint64_t cpu_ns(void)
{
	return clock_ns(CLOCK_THREAD_CPUTIME_ID);
}

/* load_object: load obj's programs, with the verifier's statistics added
 * to *l.  0 or a negative errno. */
static int load_object(struct bpf_object *obj, struct fp_sampler_load *l)
{
	struct bpf_program *prog;
	uint64_t t0 = cpu_ns(), w0 = clock_ns(CLOCK_MONOTONIC);
	char *logs, *log;
	size_t n = 0;
	int err;

	bpf_object__for_each_program(prog, obj) n++;
	logs = calloc(n ? n : 1, STATS_LOG_BYTES);
	if (!logs)
		return -ENOMEM;
	log = logs;
	bpf_object__for_each_program(prog, obj)
	{
		bpf_program__set_log_buf(prog, log, STATS_LOG_BYTES);
		bpf_program__set_log_level(prog, 4); /* BPF_LOG_STATS */
		log += STATS_LOG_BYTES;
	}
	err = bpf_object__load(obj);
	log = logs;
	bpf_object__for_each_program(prog, obj)
	{
		const char *t = strstr(log, "verification time "), *i = strstr(log, "processed ");
		/* A refused program: libbpf prints no log it does not own */
		if (err && bpf_program__fd(prog) < 0 && log[0])
			fp_warnx("BPF program %s: %.*s", bpf_program__name(prog), STATS_LOG_BYTES,
				 log);
		if (bpf_program__fd(prog) >= 0) {
			l->sl_progs++;
			if (t)
				l->sl_verify_ns += strtoull(t + 18, NULL, 10) * 1000;
			if (i)
				l->sl_insns += strtoull(i + 10, NULL, 10);
		}
		bpf_program__set_log_buf(prog, NULL, 0);
		log += STATS_LOG_BYTES;
	}
	free(logs);
	l->sl_cpu_ns += cpu_ns() - t0;
	l->sl_wall_ns += clock_ns(CLOCK_MONOTONIC) - w0;
	return err;
}

static int libbpf_quiet(enum libbpf_print_level level, const char *fmt, va_list ap)
{
	if (level == LIBBPF_DEBUG)
		return 0;
	return vfprintf(stderr, fmt, ap);
}

void fp_sampler_close(struct fp_sampler *s)
{
	int i;

	if (!s)
		return;
	ring_buffer__free(s->sm_rb);
	bpf_link__destroy(s->sm_off_link);
	stacks_offpy_bpf__destroy(s->sm_offpy);
	stacks_off_bpf__destroy(s->sm_off);
	bpf_link__destroy(s->sm_py_exec_link);
	bpf_link__destroy(s->sm_py_exit_link);
	stacks_py_bpf__destroy(s->sm_py);
	bpf_link__destroy(s->sm_exec_link);
	bpf_link__destroy(s->sm_exit_link);
	/* Open may have failed before either array was allocated. */
	for (i = 0; s->sm_links && s->sm_pfds && i < s->sm_ncpus; i++) {
		bpf_link__destroy(s->sm_links[i]);
		if (s->sm_pfds[i] >= 0)
			close(s->sm_pfds[i]);
	}
	free(s->sm_links);
	free(s->sm_pfds);
	stacks_bpf__destroy(s->sm_skel);
	free(s);
}

static int offcpu_load(struct fp_sampler *s, const struct fp_sampler_opts *o);

int fp_sampler_open(struct fp_sampler **out, const struct fp_sampler_opts *o)
{
	struct fp_sampler *s;
	size_t rb_bytes, rows;
	uint64_t t0;
	int i, err;

	libbpf_set_print(libbpf_quiet);
	s = calloc(1, sizeof(*s));
	if (!s)
		return -ENOMEM;
	s->sm_fn = o->so_fn;
	s->sm_arg = o->so_arg;
	s->sm_ncpus = libbpf_num_possible_cpus();
	if (s->sm_ncpus <= 0) {
		err = s->sm_ncpus ? s->sm_ncpus : -EINVAL;
		fp_warnx("cannot count CPUs: %s", strerror(-err));
		goto fail;
	}
	s->sm_links = calloc(s->sm_ncpus, sizeof(*s->sm_links));
	s->sm_pfds = malloc(s->sm_ncpus * sizeof(*s->sm_pfds));
	if (!s->sm_links || !s->sm_pfds) {
		err = -ENOMEM;
		goto fail;
	}
	for (i = 0; i < s->sm_ncpus; i++)
		s->sm_pfds[i] = -1;

	/* Open */
	t0 = cpu_ns();
	s->sm_skel = stacks_bpf__open();
	s->sm_load.sl_cpu_ns += cpu_ns() - t0;
	if (!s->sm_skel) {
		err = -errno;
		fp_warnx("cannot open the BPF object: %s", strerror(-err));
		goto fail;
	}
	/* a wait's stacks and its end are two records */
	rb_bytes = o->so_ringbuf_bytes
			   ? o->so_ringbuf_bytes
			   : ringbuf_size(o->so_frequency +
						  (o->so_offcpu ? 2 * (o->so_offcpu_stacks
									       ?: FP_OFFCPU_STACKS)
								: 0),
					  s->sm_ncpus);
	if (o->so_npids > FP_TARGET_PIDS) {
		err = -EINVAL;
		goto fail;
	}
	memcpy((void *)s->sm_skel->rodata->target_pids, o->so_pids,
	       o->so_npids * sizeof(o->so_pids[0]));
	s->sm_skel->rodata->target_npids = o->so_npids;
	s->sm_skel->rodata->wakeup_bytes = rb_bytes / 2;
	s->sm_skel->rodata->kernel_stacks = !o->so_user_stacks_only;
	bpf_map__set_max_entries(s->sm_skel->maps.samples, rb_bytes);
	s->sm_rb_bytes = rb_bytes;
	/* The chunks array spans the budget; the chunks come with tables. */
	rows = o->so_unwind_bytes / sizeof(struct fp_unwind_row);
	s->sm_nchunks = (uint32_t)((rows + FP_UNWIND_CHUNK_ROWS - 1) / FP_UNWIND_CHUNK_ROWS);
	bpf_map__set_max_entries(s->sm_skel->maps.unwind_chunks, s->sm_nchunks ? s->sm_nchunks : 1);

	/* Load & verify */
	err = load_object(s->sm_skel->obj, &s->sm_load);
	if (err) {
		fp_warnx("cannot load the BPF program (root, or CAP_BPF + CAP_PERFMON, "
			 "needed): %s",
			 strerror(-err));
		goto fail;
	}

	/* Walks go on in tail calls, to the native walker until the Python
	 * one is loaded. */
	{
		__u32 slot = FP_WALKER_NATIVE;
		int fd = bpf_program__fd(s->sm_skel->progs.fp_walk);
		err = bpf_map__update_elem(s->sm_skel->maps.walk_prog, &slot, sizeof(slot), &fd,
					   sizeof(fd), BPF_ANY);
		if (err) {
			fp_warnx("cannot install the stack walker: %s", strerror(-err));
			goto fail;
		}
	}
	s->sm_nrows = rows;
	if (o->so_python && rows && (err = fp_sampler_python(s, &(int){ 0 })))
		goto fail;
	if (o->so_offcpu && (err = offcpu_load(s, o)))
		goto fail;

	/* Attach: one CPU-clock event per online CPU */
	s->sm_frequency = o->so_frequency;
	s->sm_task = o->so_task;
	if (!o->so_paused && (err = fp_sampler_start(s)))
		goto fail;

	/* Attach the exec/exit hooks that keep known_pids honest; without them
	 * every frame goes through the kernel's build-ID lookup. */
	s->sm_exec_link = bpf_program__attach_raw_tracepoint(s->sm_skel->progs.fp_exec,
							     "sched_process_exec");
	s->sm_exit_link = bpf_program__attach_raw_tracepoint(s->sm_skel->progs.fp_exit,
							     "sched_process_exit");
	if (!s->sm_exec_link || !s->sm_exit_link) {
		fp_warnx("exec/exit hooks unavailable: all user frames resolved by the kernel");
		bpf_link__destroy(s->sm_exec_link);
		bpf_link__destroy(s->sm_exit_link);
		s->sm_exec_link = s->sm_exit_link = NULL;
	}

	s->sm_rb = ring_buffer__new(bpf_map__fd(s->sm_skel->maps.samples), sampler_record, s, NULL);
	if (!s->sm_rb) {
		err = -errno;
		fp_warnx("cannot set up the ring buffer: %s", strerror(-err));
		goto fail;
	}
	*out = s;
	return 0;
fail:
	fp_sampler_close(s);
	return err;
}

int fp_sampler_start(struct fp_sampler *s)
{
	bool *online = NULL;
	int nonline = 0, i, err;

	err = online_cpus(&online, &nonline);
	if (err) {
		fp_warnx("cannot read the online CPUs: %s", strerror(-err));
		return err;
	}
	for (i = 0; i < s->sm_ncpus && i < nonline; i++) {
		struct perf_event_attr attr = {
			.type = PERF_TYPE_SOFTWARE,
			.config = PERF_COUNT_SW_CPU_CLOCK,
			.size = sizeof(attr),
			.sample_freq = s->sm_frequency,
			.freq = 1,
			.inherit = s->sm_task != 0,
		};
		if (!online[i] || s->sm_links[i])
			continue;
		/* One task and those it creates: one event that follows each
		 * of them from CPU to CPU (inherited on fork and clone). */
		s->sm_pfds[i] = syscall(__NR_perf_event_open, &attr, s->sm_task ? s->sm_task : -1,
					s->sm_task ? -1 : i, -1, PERF_FLAG_FD_CLOEXEC);
		if (s->sm_pfds[i] < 0) {
			err = -errno;
			fp_warnx("perf_event_open on CPU %d: %s", i, strerror(-err));
			break;
		}
		s->sm_links[i] = bpf_program__attach_perf_event(s->sm_skel->progs.fp_sample,
								s->sm_pfds[i]);
		if (!s->sm_links[i]) {
			err = -errno;
			fp_warnx("cannot attach to CPU %d: %s", i, strerror(-err));
			break;
		}
		if (s->sm_task)
			break;
	}
	free(online);
	return err;
}

int fp_sampler_poll(struct fp_sampler *s, int timeout_ms)
{
	int n;

	s->sm_poll_bytes = 0;
	n = ring_buffer__poll(s->sm_rb, timeout_ms);

	/* Records below the wake-up threshold raise no notification: collect
	 * them too, so that an interval ends with everything sampled in it. */
	if (n >= 0) {
		int m = ring_buffer__consume(s->sm_rb);
		n = m < 0 ? m : n + m;
	}
	if (s->sm_poll_bytes > s->sm_poll_peak)
		s->sm_poll_peak = s->sm_poll_bytes;
	return n;
}

int fp_sampler_counters(struct fp_sampler *s, uint64_t out[FP_CNT_MAX])
{
	uint64_t *vals = calloc(s->sm_ncpus, sizeof(*vals));
	__u32 key;
	int i;

	if (!vals)
		return -ENOMEM;
	for (key = 0; key < FP_CNT_MAX; key++) {
		out[key] = 0;
		if (bpf_map__lookup_elem(s->sm_skel->maps.counters, &key, sizeof(key), vals,
					 s->sm_ncpus * sizeof(*vals), 0))
			continue;
		for (i = 0; i < s->sm_ncpus; i++)
			out[key] += vals[i];
	}
	free(vals);
	if (s->sm_off) { /* the off-CPU hook's, kept apart per CPU */
		struct fp_offcpu_cpu *oc = calloc(s->sm_ncpus, sizeof(*oc));
		__u32 zero = 0;
		if (!oc)
			return -ENOMEM;
		if (!bpf_map__lookup_elem(s->sm_off->maps.offcpu_cpus, &zero, sizeof(zero), oc,
					  s->sm_ncpus * sizeof(*oc), 0))
			for (i = 0; i < s->sm_ncpus; i++) {
				out[FP_CNT_OFF_IN] += oc[i].oc_in;
				out[FP_CNT_OFF_NS] += oc[i].oc_ns;
				out[FP_CNT_OFF_STACKS] += oc[i].oc_stacks;
				out[FP_CNT_OFF_SKIPPED] += oc[i].oc_skipped;
			}
		free(oc);
	}
	return 0;
}

void fp_sampler_mark_pid(struct fp_sampler *s, uint32_t pid, int known)
{
	__u32 one = 1;

	if (!s->sm_exec_link)
		return;
	if (known)
		bpf_map__update_elem(s->sm_skel->maps.known_pids, &pid, sizeof(pid), &one,
				     sizeof(one), BPF_ANY);
	else
		bpf_map__delete_elem(s->sm_skel->maps.known_pids, &pid, sizeof(pid), 0);
}

void fp_sampler_forget_pids(struct fp_sampler *s)
{
	int fd = bpf_map__fd(s->sm_skel->maps.known_pids);
	__u32 key, next;

	/* Deleting while iterating restarts the walk at the first key. */
	while (bpf_map_get_next_key(fd, NULL, &next) == 0) {
		key = next;
		if (bpf_map_delete_elem(fd, &key))
			break;
	}
}

/* map_bytes: the kernel's count of map m's memory (fdinfo memlock: from
 * 6.4 what the map holds, before an estimate of it); 0 for a map the
 * object shares with another and for internal maps of no size. */
static uint64_t map_bytes(const struct bpf_map *m)
{
	unsigned long long v = 0;
	char path[64], line[128];
	FILE *f;

	snprintf(path, sizeof(path), "/proc/self/fdinfo/%d", bpf_map__fd(m));
	if (!(f = fopen(path, "re")))
		return 0;
	while (fgets(line, sizeof(line), f) && sscanf(line, "memlock: %llu", &v) != 1)
		;
	fclose(f);
	return v;
}

int fp_sampler_stats(struct fp_sampler *s, struct fp_sampler_stats *st)
{
	struct bpf_prog_info info = { 0 };
	__u32 len = sizeof(info);
	const struct bpf_map *m;
	int err;

	err = bpf_obj_get_info_by_fd(bpf_program__fd(s->sm_skel->progs.fp_sample), &info, &len);
	if (err)
		return err;
	st->ss_load = s->sm_load;
	st->ss_rb_bytes = s->sm_rb_bytes;
	st->ss_rb_peak = s->sm_poll_peak;
	st->ss_records = s->sm_records;
	st->ss_record_bytes = s->sm_record_bytes;
	st->ss_run_ns = info.run_time_ns;
	st->ss_run_count = info.run_cnt;
	st->ss_map_bytes = 0;
	bpf_object__for_each_map(m, s->sm_skel->obj) st->ss_map_bytes += map_bytes(m);
	st->ss_off_run_ns = st->ss_off_run_count = 0;
	if (s->sm_off) {
		struct bpf_prog_info pi = { 0 };
		__u32 plen = sizeof(pi);
		if (!bpf_obj_get_info_by_fd(bpf_program__fd(s->sm_off->progs.fp_switch), &pi,
					    &plen)) {
			st->ss_off_run_ns = pi.run_time_ns;
			st->ss_off_run_count = pi.run_cnt;
		}
		st->ss_map_bytes += map_bytes(s->sm_off->maps.offcpu_out);
		st->ss_map_bytes += map_bytes(s->sm_off->maps.walk_prog_off);
		st->ss_map_bytes += map_bytes(s->sm_off->maps.offcpu_cpus);
		st->ss_map_bytes += map_bytes(s->sm_off->maps.rodata);
	}
	/* the Python walker's own maps: the rest are the first object's */
	if (s->sm_py) {
		st->ss_map_bytes += map_bytes(s->sm_py->maps.py_procs);
		st->ss_map_bytes += map_bytes(s->sm_py->maps.py_threads);
		st->ss_map_bytes += map_bytes(s->sm_py->maps.rodata);
	}
	return 0;
}

int fp_sampler_unwind_maps(struct fp_sampler *s, struct fp_sampler_unwind *u)
{
	if (!s->sm_nrows)
		return -ENOENT;
	u->su_nrows = s->sm_nrows;
	u->su_nchunks = s->sm_nchunks;
	u->su_chunks_fd = bpf_map__fd(s->sm_skel->maps.unwind_chunks);
	u->su_tables_fd = bpf_map__fd(s->sm_skel->maps.unwind_tables);
	u->su_procs_fd = bpf_map__fd(s->sm_skel->maps.unwind_procs);
	u->su_mapv_fd = bpf_map__fd(s->sm_skel->maps.unwind_mapv);
	return 0;
}

/* SHARE_SETTINGS: the settings the agent writes before load, from the
 * rodata of an object loaded before (skeletons of one source, each its
 * own type). */
#define SHARE_SETTINGS(to, from) \
	do { \
		memcpy((void *)(to)->target_pids, (const void *)(from)->target_pids, \
		       sizeof((to)->target_pids)); \
		(to)->target_npids = (from)->target_npids; \
		(to)->wakeup_bytes = (from)->wakeup_bytes; \
		(to)->thread_size = (from)->thread_size; \
		(to)->kernel_stacks = (from)->kernel_stacks; \
	} while (0)

/* share_maps: obj's maps that an object loaded before has too (by name)
 * become that object's.  0 or a negative errno. */
static int share_maps(struct fp_sampler *s, struct bpf_object *obj)
{
	struct bpf_object *loaded[] = { s->sm_skel->obj, s->sm_py ? s->sm_py->obj : NULL,
					s->sm_off ? s->sm_off->obj : NULL };
	struct bpf_map *m, *base;
	int err;

	bpf_object__for_each_map(m, obj)
	{
		if (bpf_map__is_internal(m))
			continue;
		base = NULL;
		for (size_t i = 0; i < 3 && !base; i++)
			if (loaded[i] && loaded[i] != obj)
				base = bpf_object__find_map_by_name(loaded[i], bpf_map__name(m));
		if (base && (err = bpf_map__reuse_fd(m, bpf_map__fd(base))))
			return err;
	}
	return 0;
}

/* offpy_load: the off-CPU hook's Python walker, once the hook and the
 * Python walker are both loaded; in the hook's walkers.  0 or a negative
 * errno (logged; the hook then walks Python processes natively). */
static int offpy_load(struct fp_sampler *s)
{
	struct stacks_offpy_bpf *op;
	__u32 slot = FP_WALKER_PYTHON;
	uint64_t t0 = cpu_ns();
	int fd, err;

	if (s->sm_offpy || !s->sm_off || !s->sm_py)
		return 0;
	if (!(op = stacks_offpy_bpf__open()))
		return -errno;
	s->sm_offpy = op;
	s->sm_load.sl_cpu_ns += cpu_ns() - t0;
	SHARE_SETTINGS(op->rodata, s->sm_off->rodata);
	fp_privilege_perfmon(1);
	err = share_maps(s, op->obj);
	if (!err)
		err = load_object(op->obj, &s->sm_load);
	fp_privilege_perfmon(0);
	if (!err) {
		fd = bpf_program__fd(op->progs.fp_walk_py);
		err = bpf_map__update_elem(s->sm_off->maps.walk_prog_off, &slot, sizeof(slot), &fd,
					   sizeof(fd), BPF_ANY);
	}
	if (err)
		fp_warnx("cannot load the off-CPU Python walker: %s; Python processes' waits "
			 "show as the interpreter's native frames",
			 strerror(-err));
	return err;
}

/* python_load: open and load the Python walker with the first object's
 * maps and settings, install it, and attach its exec and exit hooks. */
static int python_load(struct fp_sampler *s)
{
	struct stacks_py_bpf *py;
	__u32 slot = FP_WALKER_PYTHON;
	uint64_t t0 = cpu_ns();
	int fd, err;

	py = stacks_py_bpf__open();
	if (!py)
		return -errno;
	s->sm_py = py;
	s->sm_load.sl_cpu_ns += cpu_ns() - t0;
	SHARE_SETTINGS(py->rodata, s->sm_skel->rodata);
	if ((err = share_maps(s, py->obj)))
		return err;
	/* Loading a tracing program takes CAP_PERFMON, which the agent keeps
	 * for this (privilege.h). */
	fp_privilege_perfmon(1);
	err = load_object(py->obj, &s->sm_load);
	if (!err) {
		s->sm_py_exec_link = bpf_program__attach_raw_tracepoint(py->progs.fp_py_exec,
									"sched_process_exec");
		s->sm_py_exit_link = bpf_program__attach_raw_tracepoint(py->progs.fp_py_exit,
									"sched_process_exit");
		if (!s->sm_py_exec_link || !s->sm_py_exit_link)
			err = -errno;
	}
	fp_privilege_perfmon(0);
	if (err)
		return err;
	fd = bpf_program__fd(py->progs.fp_walk_py);
	return bpf_map__update_elem(s->sm_skel->maps.walk_prog, &slot, sizeof(slot), &fd,
				    sizeof(fd), BPF_ANY);
}

int fp_sampler_python(struct fp_sampler *s, int *py_procs_fd)
{
	if (!s->sm_nrows)
		return -ENOENT;
	if (!s->sm_py_err && !s->sm_py) {
		struct fp_sampler_load before = s->sm_load;
		int err = python_load(s);
		if (!err)
			fp_info("Python walker loaded: %.1f ms of CPU, %" PRIu64
				" instructions verified",
				(s->sm_load.sl_cpu_ns - before.sl_cpu_ns) / 1e6,
				s->sm_load.sl_insns - before.sl_insns);
		if (!err)
			offpy_load(s);
		if (err) {
			fp_warnx("cannot load the Python walker: %s; Python processes show as "
				 "the interpreter's native frames",
				 strerror(-err));
			s->sm_py_err = err;
			bpf_link__destroy(s->sm_py_exec_link);
			bpf_link__destroy(s->sm_py_exit_link);
			stacks_py_bpf__destroy(s->sm_py);
			s->sm_py_exec_link = s->sm_py_exit_link = NULL;
			s->sm_py = NULL;
		}
	}
	if (s->sm_py_err)
		return s->sm_py_err;
	*py_procs_fd = bpf_map__fd(s->sm_py->maps.py_procs);
	return 0;
}

/* offcpu_load: open and load the off-CPU hook with the first object's
 * maps and settings, install its walker, and attach it.  It sees every
 * thread: for one task (so_task) it watches that process only. */
static int offcpu_load(struct fp_sampler *s, const struct fp_sampler_opts *o)
{
	struct stacks_off_bpf *off;
	__u32 slot = FP_WALKER_NATIVE;
	uint32_t per_s = o->so_offcpu_stacks ? o->so_offcpu_stacks : FP_OFFCPU_STACKS;
	uint64_t t0 = cpu_ns();
	int fd, err;

	off = stacks_off_bpf__open();
	if (!off) {
		err = -errno;
		goto fail;
	}
	s->sm_off = off;
	s->sm_load.sl_cpu_ns += cpu_ns() - t0;
	SHARE_SETTINGS(off->rodata, s->sm_skel->rodata);
	if (o->so_task > 0) {
		((uint32_t *)off->rodata->target_pids)[0] = (uint32_t)o->so_task;
		off->rodata->target_npids = 1;
	}
	off->rodata->offcpu_stacks = per_s >= 10 ? per_s / 10 : 1; /* a 100 ms window's */
	if ((err = share_maps(s, off->obj)) || (err = load_object(off->obj, &s->sm_load)))
		goto fail;
	fd = bpf_program__fd(off->progs.fp_walk);
	if ((err = bpf_map__update_elem(off->maps.walk_prog_off, &slot, sizeof(slot), &fd,
					sizeof(fd), BPF_ANY)))
		goto fail;
	s->sm_off_link = bpf_program__attach_raw_tracepoint(off->progs.fp_switch, "sched_switch");
	if (!s->sm_off_link) {
		err = -errno;
		goto fail;
	}
	offpy_load(s);
	return 0;
fail:
	fp_warnx("cannot load the off-CPU hook (raw tracepoint sched_switch): %s", strerror(-err));
	return err;
}

void fp_sampler_offcpu_line(const uint64_t c[FP_CNT_MAX], char *buf, size_t len)
{
	snprintf(buf, len,
		 "%" PRIu64 " waits off-CPU measured, %.3f s in all; stacks of %" PRIu64
		 " taken, %" PRIu64 " left by design (a share is taken)",
		 c[FP_CNT_OFF_IN], (double)c[FP_CNT_OFF_NS] / 1e9, c[FP_CNT_OFF_STACKS],
		 c[FP_CNT_OFF_SKIPPED]);
}
