/* stacks.h: shared between bpf/stacks.bpf.c and the agent.  Fixed-width
 * fields with explicit padding only. */
#ifndef FP_BPF_STACKS_H
#define FP_BPF_STACKS_H

#define FP_STACK_DEPTH 127
#define FP_USTACK_BYTES (FP_STACK_DEPTH * 32) /* struct bpf_stack_build_id */
#define FP_KSTACK_BYTES (FP_STACK_DEPTH * 8)

/* Indexes of the per-CPU counters map. */
enum fp_bpf_counter {
	FP_CNT_SAMPLES = 0,     /* perf events seen (after filtering) */
	FP_CNT_LOST = 1,        /* ring buffer full: sample dropped */
	FP_CNT_USTACK_ERR = 2,  /* user stack could not be read */
	FP_CNT_KSTACK_ERR = 3,  /* kernel stack could not be read */
	FP_CNT_MAX = 4,
};

#define FP_KNOWN_PIDS 8192

/* fp_bpf_sample.flags */
#define FP_SAMPLE_USER_RAW 1    /* user stack is __u64 addresses, not build-IDs */

/* One ring buffer record: this header, then ustack_bytes of user frames
 * (struct bpf_stack_build_id, or __u64 addresses with FP_SAMPLE_USER_RAW;
 * leaf first), then kstack_bytes of kernel addresses (__u64, leaf first).
 *
 * The kernel turns user addresses into (build-ID, file offset) itself, but
 * that costs about 2 us per frame; for processes whose mappings the agent
 * already holds (the known_pids map) plain addresses are enough. */
struct fp_bpf_sample {
	__u32 pid;              /* tgid */
	__u32 tid;
	__u64 cgroup_id;
	char comm[16];          /* thread name */
	__u32 ustack_bytes;
	__u32 kstack_bytes;
	__u32 flags;
	__u32 pad;
};

#endif
