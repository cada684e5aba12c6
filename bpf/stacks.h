/* stacks.h: shared between bpf/stacks.bpf.c and the agent.  Fixed-width
 * fields with explicit padding only. */
#ifndef FP_BPF_STACKS_H
#define FP_BPF_STACKS_H

#define FP_STACK_DEPTH 127
#define FP_USTACK_BYTES (FP_STACK_DEPTH * 32) /* struct bpf_stack_build_id */
#define FP_KSTACK_BYTES (FP_STACK_DEPTH * 8)

/* Indexes of the per-CPU counters map. */
enum fp_bpf_counter {
	FP_CNT_SAMPLES = 0,       /* perf events seen (after filtering) */
	FP_CNT_LOST = 1,          /* ring buffer full: sample dropped */
	FP_CNT_USTACK_ERR = 2,    /* user stack could not be read */
	FP_CNT_KSTACK_ERR = 3,    /* kernel stack could not be read */
	FP_CNT_WALKS = 4,         /* user stacks walked with unwind tables */
	FP_CNT_WALK_ROOT = 5,     /* ... that reached the outermost frame */
	FP_CNT_WALK_TABLE = 6,    /* frames unwound by a table row */
	FP_CNT_WALK_FP = 7,       /* frames unwound by the frame pointer */
	FP_CNT_WALK_LOST = 8,     /* walks that could not start (no user registers) */
	FP_CNT_PY_FRAMES = 9,     /* Python frames written */
	FP_CNT_PY_NO_THREAD = 10, /* eval loop sampled, but the thread's state not found */
	FP_CNT_PY_MISMATCH = 11,  /* native and Python stacks disagree: Python frames dropped */
	FP_CNT_PY_READ_ERR = 12,  /* interpreter memory could not be read mid-walk */
	/* Off-CPU (FP_OFFCPU), from struct fp_offcpu_cpu */
	FP_CNT_OFF_IN = 13,      /* switches back in measured: waits */
	FP_CNT_OFF_NS = 14,      /* ... their time away, ns, in all */
	FP_CNT_OFF_STACKS = 15,  /* switches out whose stacks were taken */
	FP_CNT_OFF_SKIPPED = 16, /* ... whose stacks were not, by design (sampling) */
	FP_CNT_MAX = 17,
};

/* Per CPU, the off-CPU hook's window (which sets the share of switches
 * whose stacks are taken) and counters. */
struct fp_offcpu_cpu {
	__u64 window_ns; /* the window's start */
	__u64 q_sum;     /* the q of its waits so far, in 65536ths: stacks to expect */
	__u32 share;     /* from the last window's, the factor on every q, in 65536ths */
	__u32 pad;
	__u64 oc_in, oc_ns, oc_stacks, oc_skipped; /* FP_CNT_OFF_* */
};

/* Processes whose mappings the agent holds: the processes sampled and
 * alive (the exit hook drops them), 117 processes in all on the test VM.
 * Past it a process's frames come with their build-IDs, which the kernel
 * finds itself: slower, never wrong.  41 KiB, preallocated (8,192 took
 * 656 KB). */
#define FP_KNOWN_PIDS 512
#define FP_TARGET_PIDS 16 /* processes one sampler may be limited to */
/* A walk runs FP_WALK_FRAMES frames per program run, then goes on in a
 * tail call: fp_sample's to the walker, then FP_WALK_CALLS more, 32 in
 * all, what every kernel allows; 4 * 32 > 127.  Verifying the walker
 * costs about 2,400 instructions a frame (make bench: start-up). */
#define FP_WALK_FRAMES 4
#define FP_WALK_CALLS 31
#define FP_USER_SLOTS (2 * FP_STACK_DEPTH) /* walked stacks: a Python frame takes 2 */

/* fp_bpf_sample.flags */
#define FP_SAMPLE_USER_RAW 1 /* user stack is __u64 addresses, not build-IDs */
#define FP_SAMPLE_WALKED 2   /* ... walked with unwind tables */
#define FP_SAMPLE_ROOT 4     /* ... up to the outermost frame */
#define FP_SAMPLE_PYTHON 8   /* ... with Python frames (bpf/python.h slots) */
#define FP_SAMPLE_PY_MISMATCH \
	16 /* ... whose Python frames do not match its eval
				  * loop activations: keep the native frames */
/* A switch out: the stacks of a wait, taken with probability pad / 65536;
 * its time comes in the FP_SAMPLE_OFFCPU_DONE of the same thread and
 * off_start. */
#define FP_SAMPLE_OFFCPU 32
/* The thread is back after off_ns (no stacks). */
#define FP_SAMPLE_OFFCPU_DONE 64

/* Threads whose last switch out is noted (off-CPU): an LRU, so that the
 * threads that left longest ago are forgotten first (a wait whose note
 * went is not measured).  A switch runs a thousand or two threads; the
 * map takes about 100 bytes an entry, preallocated (make bench). */
#define FP_OFFCPU_THREADS 4096
#define FP_OFFCPU_STACKS 100 /* the default: stacks of waits a second per CPU */

/* One ring buffer record: this header, then ustack_bytes of user frames
 * (struct bpf_stack_build_id, or __u64 addresses with FP_SAMPLE_USER_RAW;
 * leaf first), then kstack_bytes of kernel addresses (__u64, leaf first).
 *
 * The kernel turns user addresses into (build-ID, file offset) itself, but
 * that costs about 2 us per frame; for processes whose mappings the agent
 * already holds (the known_pids map) plain addresses are enough. */
struct fp_bpf_sample {
	__u32 pid; /* tgid */
	__u32 tid;
	__u64 cgroup_id;
	char comm[16]; /* thread name */
	__u32 ustack_bytes;
	__u32 kstack_bytes;
	__u32 flags;
	__u32 pad;         /* FP_SAMPLE_OFFCPU(_DONE): q, the share of switches taken, / 65536 */
	__u64 off_ns;      /* FP_SAMPLE_OFFCPU_DONE: the time away */
	__u64 off_start;   /* FP_SAMPLE_OFFCPU(_DONE): when it left (the block's id) */
	__u64 off_away_ns; /* FP_SAMPLE_OFFCPU_DONE: the thread's time away in all its
			    * waits since its last FP_SAMPLE_OFFCPU_DONE, this one's too */
};

#endif
