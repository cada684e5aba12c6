/* sampler.h: the BPF sampler's user-space half.  Loads bpf/stacks.bpf.c,
 * attaches it to a CPU-clock perf event on every online CPU (or to one
 * task's, inherited by its children), and drains its ring buffer into a
 * callback. */
#ifndef FP_SAMPLER_H
#define FP_SAMPLER_H

#include <stddef.h>
#include <stdint.h>
#include <linux/types.h>
#include "stacks.h"
#include "unwind.h"

typedef void (*fp_sample_fn)(const struct fp_bpf_sample *s, const void *ustack, const void *kstack,
			     void *arg);

struct fp_sampler;

struct fp_sampler_opts {
	uint32_t so_frequency;            /* Hz per CPU */
	uint32_t so_pids[FP_TARGET_PIDS]; /* the processes sampled, the first so_npids */
	uint32_t so_npids;                /* 0: every process */
	int so_task;                      /* > 0: only this task and the tasks it
					   * creates from now on, on any CPU (a
					   * command run by fleetprof record) */
	size_t so_ringbuf_bytes;          /* 0: sized by frequency and CPU count */
	size_t so_unwind_bytes;           /* memory for unwind table rows; 0: none */
	int so_user_stacks_only;          /* no kernel stacks */
	int so_python;                    /* load the Python walker now, not when the
					   * first CPython process appears */
	int so_paused;                    /* sample from fp_sampler_start on only */
	int so_offcpu;                    /* off-CPU: blocks too (FP_SAMPLE_OFFCPU) */
	uint32_t so_offcpu_stacks;        /* stacks of blocks a second per CPU, at most
					   * about (0: FP_OFFCPU_STACKS) */
	fp_sample_fn so_fn;
	void *so_arg;
};

/* fp_sampler_open: open, load and attach (but with so_paused, sampling
 * starts at fp_sampler_start).  0 or a negative errno; errors are logged
 * with the reason (permissions, missing BPF support, ...). */
int fp_sampler_open(struct fp_sampler **s, const struct fp_sampler_opts *o);

/* fp_sampler_start: start sampling, after an open with so_paused.  0 or a
 * negative errno (logged). */
int fp_sampler_start(struct fp_sampler *s);
void fp_sampler_close(struct fp_sampler *s);

/* fp_sampler_poll: wait up to timeout_ms for samples and pass all pending
 * ones to the callback.  Number of samples, or a negative errno (-EINTR on
 * a signal). */
int fp_sampler_poll(struct fp_sampler *s, int timeout_ms);

/* fp_sampler_counters: totals of enum fp_bpf_counter over all CPUs. */
int fp_sampler_counters(struct fp_sampler *s, uint64_t out[FP_CNT_MAX]);

/* fp_sampler_offcpu_line: what the off-CPU counters of c say, as a line
 * of text for a log (NUL-terminated, truncated to len). */
void fp_sampler_offcpu_line(const uint64_t c[FP_CNT_MAX], char *buf, size_t len);

/* fp_sampler_mark_pid: tell the BPF program whether the agent holds pid's
 * mappings (then its user frames come as plain addresses) or not (the
 * kernel resolves them to build-IDs).  No effect when the exec/exit hooks
 * could not be attached, since stale mappings could then go unnoticed. */
void fp_sampler_mark_pid(struct fp_sampler *s, uint32_t pid, int known);

/* fp_sampler_forget_pids: every pid back to build-ID frames. */
void fp_sampler_forget_pids(struct fp_sampler *s);

/* The BPF maps of the unwinder (bpf/unwind.h), for device/unwind_maps.c. */
struct fp_sampler_unwind {
	size_t su_nrows;     /* the budget, in rows: every row number is below it */
	uint32_t su_nchunks; /* entries of the chunks array: su_nrows in chunks */
	int su_chunks_fd;    /* unwind_chunks: chunk -> its array of rows */
	int su_tables_fd;    /* unwind_tables: index -> rows */
	int su_procs_fd;     /* unwind_procs: pid -> its run of mappings */
	int su_mapv_fd;      /* unwind_mapv: the mappings (BPF_F_MMAPABLE) */
};

/* fp_sampler_unwind_maps: those maps.  0, or -ENOENT when the sampler was
 * opened without unwind memory.  The fds belong to the sampler. */
int fp_sampler_unwind_maps(struct fp_sampler *s, struct fp_sampler_unwind *u);

/* fp_sampler_python: load the Python walker (the second object of
 * bpf/stacks.bpf.c) if it is not loaded yet, sharing the sampler's maps,
 * and put it in the walkers' array; the fd of its py_procs map (pid ->
 * struct fp_py_proc) in *py_procs_fd, which belongs to the sampler.
 * Loads once: after a failure (logged) it fails at once with the same
 * error.  0, -ENOENT (no unwind memory) or a negative errno. */
int fp_sampler_python(struct fp_sampler *s, int *py_procs_fd);

/* What loading the BPF programs cost (every object loaded so far).  The
 * verifier reports its time by the wall clock (BPF_LOG_STATS), which
 * counts the time the loading thread waited for a CPU too: its share of
 * the loads' CPU time is about sl_cpu_ns * sl_verify_ns / sl_wall_ns. */
struct fp_sampler_load {
	uint64_t sl_cpu_ns;    /* CPU time of opening and loading (libbpf, maps, programs) */
	uint64_t sl_wall_ns;   /* wall time of the loads */
	uint64_t sl_verify_ns; /* ... of it in the verifier */
	uint64_t sl_insns;     /* instructions the verifier processed */
	uint32_t sl_progs;     /* programs loaded */
};

struct fp_sampler_stats {
	struct fp_sampler_load ss_load;
	uint64_t ss_rb_bytes;     /* the ring buffer's size */
	uint64_t ss_rb_peak;      /* the most bytes one poll drained from it */
	uint64_t ss_records;      /* records drained */
	uint64_t ss_record_bytes; /* ... their bytes */
	uint64_t ss_run_ns;       /* BPF program run time (needs kernel.bpf_stats_enabled) */
	uint64_t ss_run_count;
	uint64_t ss_off_run_ns; /* ... of the off-CPU hook (sched_switch) */
	uint64_t ss_off_run_count;
	uint64_t ss_map_bytes; /* kernel memory of the BPF maps (fdinfo memlock), but for the
				* chunks of rows (fp_unwind_stats) */
};

/* fp_sampler_stats: what the kernel reports about our program and maps. */
int fp_sampler_stats(struct fp_sampler *s, struct fp_sampler_stats *st);

#endif
