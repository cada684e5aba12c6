// SPDX-License-Identifier: (GPL-2.0-only OR BSD-2-Clause)
/* stacks.bpf.c: the device's sampler.  On every CPU-clock tick it records
 * the interrupted task's identity, its user stack as (build-ID, file offset)
 * pairs and its kernel stack as addresses, and hands them to user space
 * through a ring buffer.  Only UAPI headers and helpers: no vmlinux BTF, no
 * CO-RE, no kernel headers needed at build or load time. */
#include <linux/types.h>
#include <linux/bpf.h>
#include <bpf/bpf_helpers.h>
#include "stacks.h"

char LICENSE[] SEC("license") = "Dual BSD/GPL";

/* Written by the agent before load. */
const volatile __u32 target_pid = 0;    /* 0: every process */
const volatile __u64 wakeup_bytes = 0;  /* wake the agent past this backlog */

struct fp_bpf_event {
	struct fp_bpf_sample hdr;
	__u8 stacks[FP_USTACK_BYTES + FP_KSTACK_BYTES];
};

struct {
	__uint(type, BPF_MAP_TYPE_PERCPU_ARRAY);
	__uint(max_entries, 1);
	__type(key, __u32);
	__type(value, struct fp_bpf_event);
} scratch SEC(".maps");

struct {
	__uint(type, BPF_MAP_TYPE_PERCPU_ARRAY);
	__uint(max_entries, FP_CNT_MAX);
	__type(key, __u32);
	__type(value, __u64);
} counters SEC(".maps");

/* Processes whose executable mappings the agent has read: their user
 * frames can travel as plain addresses.  Written by the agent; an exec or
 * the process's exit removes the entry. */
struct {
	__uint(type, BPF_MAP_TYPE_HASH);
	__uint(max_entries, FP_KNOWN_PIDS);
	__uint(map_flags, BPF_F_NO_PREALLOC);
	__type(key, __u32);
	__type(value, __u32);
} known_pids SEC(".maps");

struct {
	__uint(type, BPF_MAP_TYPE_RINGBUF);
	__uint(max_entries, 1 << 20); /* resized by the agent */
} samples SEC(".maps");

static __always_inline void count(__u32 which)
{
	__u64 *c = bpf_map_lookup_elem(&counters, &which);

	if (c)
		*c += 1;
}

SEC("perf_event")
int fp_sample(void *ctx)
{
	__u64 id = bpf_get_current_pid_tgid();
	__u32 pid = id >> 32, tid = (__u32)id;
	struct fp_bpf_event *e;
	__u32 zero = 0;
	long ubytes, kbytes;
	__u64 size, flags;

	if (tid == 0) /* idle */
		return 0;
	if (target_pid && pid != target_pid)
		return 0;
	e = bpf_map_lookup_elem(&scratch, &zero);
	if (!e)
		return 0;
	count(FP_CNT_SAMPLES);

	e->hdr.pid = pid;
	e->hdr.tid = tid;
	e->hdr.cgroup_id = bpf_get_current_cgroup_id();
	bpf_get_current_comm(e->hdr.comm, sizeof(e->hdr.comm));

	if (bpf_map_lookup_elem(&known_pids, &pid)) {
		e->hdr.flags = FP_SAMPLE_USER_RAW;
		ubytes = bpf_get_stack(ctx, e->stacks, FP_STACK_DEPTH * 8, BPF_F_USER_STACK);
	} else {
		e->hdr.flags = 0;
		ubytes = bpf_get_stack(ctx, e->stacks, FP_USTACK_BYTES,
				       BPF_F_USER_STACK | BPF_F_USER_BUILD_ID);
	}
	if (ubytes < 0 || ubytes > FP_USTACK_BYTES) {
		count(FP_CNT_USTACK_ERR);
		ubytes = 0;
	}
	kbytes = bpf_get_stack(ctx, e->stacks + ubytes, FP_KSTACK_BYTES, 0);
	if (kbytes < 0 || kbytes > FP_KSTACK_BYTES) {
		count(FP_CNT_KSTACK_ERR);
		kbytes = 0;
	}
	e->hdr.ustack_bytes = ubytes;
	e->hdr.kstack_bytes = kbytes;

	size = sizeof(e->hdr) + ubytes + kbytes;
	if (size > sizeof(*e))
		return 0;
	flags = bpf_ringbuf_query(&samples, BPF_RB_AVAIL_DATA) > wakeup_bytes ?
			BPF_RB_FORCE_WAKEUP : BPF_RB_NO_WAKEUP;
	if (bpf_ringbuf_output(&samples, e, size, flags))
		count(FP_CNT_LOST);
	return 0;
}

/* A new program image: the agent's copy of the mappings is stale. */
SEC("raw_tracepoint/sched_process_exec")
int fp_exec(void *ctx)
{
	__u32 pid = bpf_get_current_pid_tgid() >> 32;

	bpf_map_delete_elem(&known_pids, &pid);
	return 0;
}

/* The process is gone (its main thread exits): the pid may be reused. */
SEC("raw_tracepoint/sched_process_exit")
int fp_exit(void *ctx)
{
	__u64 id = bpf_get_current_pid_tgid();
	__u32 pid = id >> 32;

	if (pid == (__u32)id)
		bpf_map_delete_elem(&known_pids, &pid);
	return 0;
}
