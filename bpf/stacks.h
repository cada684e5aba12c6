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

/* One ring buffer record: this header, then ustack_bytes of
 * struct bpf_stack_build_id (leaf first), then kstack_bytes of kernel
 * instruction pointers (__u64, leaf first). */
struct fp_bpf_sample {
	__u32 pid;              /* tgid */
	__u32 tid;
	__u64 cgroup_id;
	char comm[16];          /* thread name */
	__u32 ustack_bytes;
	__u32 kstack_bytes;
};

#endif
