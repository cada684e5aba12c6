// SPDX-License-Identifier: (GPL-2.0-only OR BSD-2-Clause)
/* stacks.bpf.c: the device's sampler.  On every CPU-clock tick it records
 * the interrupted task's identity, its user stack and its kernel stack
 * (none with kernel_stacks 0, or in user mode), and hands them to user
 * space through a ring buffer.  Only UAPI headers and helpers: no vmlinux
 * BTF, no CO-RE, no kernel headers needed at build or load time.
 *
 * User stacks come three ways:
 *  - processes with unwind tables (bpf/unwind.h) are walked here, frame by
 *    frame: a table row where the PC's file has one, the frame pointer
 *    elsewhere.  A walk runs FP_WALK_FRAMES frames per program and goes on
 *    in a tail call, so the verifier sees small bounded loops on every
 *    kernel from 5.10, without bpf_loop;
 *  - other processes whose mappings the agent holds: the kernel's frame
 *    pointer walk, as plain addresses;
 *  - the rest: the kernel's walk with (build-ID, offset) per frame.
 *
 * Built four times: as is, the sampler and the native walker, which every
 * host loads; with FP_PYTHON_WALKER, the walker that also writes CPython
 * frames, which the agent loads when the first CPython process appears;
 * with FP_OFFCPU, the off-CPU hook and its native walker, loaded only
 * when off-CPU profiles are asked for; with both, the off-CPU hook's
 * Python walker, when both are loaded.  The later objects share the
 * earlier ones' maps (bpf_map__reuse_fd).  A host without CPython never
 * verifies the Python code. */
#include <linux/types.h>
#include <linux/bpf.h>
#include <bpf/bpf_helpers.h>
#include "stacks.h"
#include "unwind.h"
#include "python.h"

char LICENSE[] SEC("license") = "Dual BSD/GPL";

/* A tail call goes to a program of its own type: the off-CPU object's
 * walkers are raw tracepoint programs, in an array of their own, and
 * their context is the tracepoint's arguments, not registers: the task is
 * in the kernel, its user registers at the top of its kernel stack. */
#ifdef FP_OFFCPU
#define PROG_SEC "raw_tracepoint"
#define walk_prog walk_prog_off
#define CTX_USER_MODE(ctx) 0
#else
#define PROG_SEC "perf_event"
#define CTX_USER_MODE(ctx) USER_MODE((struct fp_regs *)(ctx))
#endif

/* Written by the agent before load. */
const volatile __u32 target_pids[FP_TARGET_PIDS] = { 0 }; /* the first target_npids */
const volatile __u32 target_npids = 0;                    /* 0: every process */
const volatile __u64 wakeup_bytes = 0;                    /* wake the agent past this backlog */
const volatile __u64 thread_size = 16384;                 /* THREAD_SIZE: kernel stack size */
const volatile __u32 kernel_stacks = 1;                   /* 0: user stacks only */

/* The user registers as the perf_event context holds them (UAPI layouts of
 * bpf_user_pt_regs_t), and the same layout at the top of a task's kernel
 * stack, where the kernel saved them on entry. */
#if defined(__TARGET_ARCH_arm64)
struct fp_regs {
	__u64 regs[31], sp, pc, pstate;
};
#define REG_IP(r) ((r)->pc)
#define REG_SP(r) ((r)->sp)
#define REG_FP(r) ((r)->regs[29])
#define REG_LR(r) ((r)->regs[30])
#define USER_MODE(r) (((r)->pstate & 0xf) == 0) /* EL0t */
#define REGS_AT_TOP 1                           /* pt_regs starts with them */
/* rt_sigframe at SP: siginfo, then ucontext, whose mcontext has x0..x30,
 * sp, pc. */
#define SIGFRAME_REGS 312
#define SIGFRAME_NREGS 33
#define SIGFRAME_IP 32
#define SIGFRAME_SP 31
#define SIGFRAME_FP 29
#define SIGFRAME_LR(g) ((g)[30])
#else
struct fp_regs {
	__u64 r15, r14, r13, r12, bp, bx, r11, r10, r9, r8, ax, cx, dx, si, di, orig_ax, ip, cs,
		flags, sp, ss;
};
#define REG_IP(r) ((r)->ip)
#define REG_SP(r) ((r)->sp)
#define REG_FP(r) ((r)->bp)
#define REG_LR(r) 0
#define USER_MODE(r) (((r)->cs & 3) == 3)
/* The ucontext at SP (the handler's return popped pretcode): flags, link,
 * stack, then mcontext: r8..r15, di, si, bp, bx, dx, ax, cx, sp, ip. */
#define SIGFRAME_REGS 40
#define SIGFRAME_NREGS 17
#define SIGFRAME_IP 16
#define SIGFRAME_SP 15
#define SIGFRAME_FP 10
#define SIGFRAME_LR(g) 0
#endif

/* Where one user stack walk stands between tail calls. */
struct fp_walk {
	__u64 ip, sp, fp, lr;
	__u32 n;           /* slots written */
	__u32 calls;       /* tail calls made */
	__u32 exact;       /* ip is where the code was, not a return address */
	__u32 frames;      /* frames written (a Python frame takes two slots) */
	__u64 py_frame;    /* the next Python frame to write; 0: none left */
	__u32 py_pending;  /* an eval loop activation's frames are being written */
	__u32 py_seen;     /* an activation was met: the interpreter's own frames
			   * between it and the next are not written */
	__u32 py_nothread; /* activations met without the thread's state */
	__u32 py_started;  /* the thread's current Python frame was looked up */
	__u32 py_tail;     /* the native walk was cut: the Python frames left
			    * follow its last frame */
	__u32 maps_first;  /* the process's mappings: unwind_mapv[maps_first..] */
	__u32 nmaps;
};

struct fp_bpf_event {
	struct fp_bpf_sample hdr;
	__u8 stacks[FP_USTACK_BYTES + FP_KSTACK_BYTES];
	struct fp_walk walk;                   /* not sent */
	__u64 irq_stack_top;                   /* this CPU's, once found; not sent */
	__u64 ksp;                             /* kernel_sp's; not sent */
	__u8 py_frame_buf[FP_PY_FRAME_WINDOW]; /* not sent */
	__u8 py_code_buf[256]; /* FP_PY_CODE_WINDOW read; a power of two for FIELD */
	__u8 py_name_buf[FP_PY_NAME_WINDOW];
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
 * the process's exit removes the entry.  Preallocated: kernels before 5.13
 * refuse other hash maps in perf_event programs. */
struct {
	__uint(type, BPF_MAP_TYPE_HASH);
	__uint(max_entries, FP_KNOWN_PIDS);
	__type(key, __u32);
	__type(value, __u32);
} known_pids SEC(".maps");

/* Per process: where its mappings that have an unwind table are, and
 * which walker walks it (bpf/unwind.h). */
struct {
	__uint(type, BPF_MAP_TYPE_HASH);
	__uint(max_entries, FP_UNWIND_PROCS);
	__type(key, __u32);
	__type(value, struct fp_unwind_proc);
} unwind_procs SEC(".maps");

/* The mappings of every process with tables, a run per process; the
 * agent writes them through mmap. */
struct {
	__uint(type, BPF_MAP_TYPE_ARRAY);
	__uint(map_flags, BPF_F_MMAPABLE);
	__uint(max_entries, FP_UNWIND_MAPV);
	__type(key, __u32);
	__type(value, struct fp_unwind_map);
} unwind_mapv SEC(".maps");

/* Where each installed table's rows are. */
struct {
	__uint(type, BPF_MAP_TYPE_ARRAY);
	__uint(max_entries, FP_UNWIND_TABLES);
	__type(key, __u32);
	__type(value, struct fp_unwind_table);
} unwind_tables SEC(".maps");

/* The rows of the installed tables, in chunks the agent creates as tables
 * arrive and writes through mmap (bpf/unwind.h).  The outer array spans
 * the device's budget (--unwind-mem): sized before load. */
struct unwind_chunk {
	__uint(type, BPF_MAP_TYPE_ARRAY);
	__uint(map_flags, BPF_F_MMAPABLE);
	__uint(max_entries, FP_UNWIND_CHUNK_ROWS);
	__uint(key_size, sizeof(__u32));
	__uint(value_size, sizeof(struct fp_unwind_row)); /* its BTF would be a forward */
};

struct {
	__uint(type, BPF_MAP_TYPE_ARRAY_OF_MAPS);
	__uint(max_entries, 1);
	__type(key, __u32);
	__array(values, struct unwind_chunk);
} unwind_chunks SEC(".maps");

#ifdef FP_PYTHON_WALKER
/* Per Python process: where its interpreter keeps its state.  A switch
 * runs a few dozen Python daemons. */
struct {
	__uint(type, BPF_MAP_TYPE_HASH);
	__uint(max_entries, FP_PY_PROCS);
	__type(key, __u32);
	__type(value, struct fp_py_proc);
} py_procs SEC(".maps");

/* Per thread: its PyThreadState, found once. */
struct {
	__uint(type, BPF_MAP_TYPE_LRU_HASH);
	__uint(max_entries, FP_PY_THREADS);
	__type(key, __u32);
	__type(value, struct fp_py_thread);
} py_threads SEC(".maps");
#endif

#ifdef FP_PYTHON_WALKER
#define WALKER FP_WALKER_PYTHON /* this object's walker */
#else
#define WALKER FP_WALKER_NATIVE
#endif

/* The walkers, by enum fp_walker. */
struct {
	__uint(type, BPF_MAP_TYPE_PROG_ARRAY);
	__uint(max_entries, FP_WALKERS);
	__type(key, __u32);
	__type(value, __u32);
} walk_prog SEC(".maps");

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

/* The kernel stack, then the record out. */
static __always_inline int finish(void *ctx, struct fp_bpf_event *e, long ubytes)
{
	long kbytes;
	__u64 size, flags;

	if (ubytes < 0 || ubytes > FP_USTACK_BYTES) {
		count(FP_CNT_USTACK_ERR);
		ubytes = 0;
	}
	/* Keep the compiler from using a copy of ubytes taken before the
	 * check: the verifier must see the bounded value. */
	asm volatile("" : "+r"(ubytes));
	if (ubytes > FP_USTACK_BYTES)
		ubytes = 0;
	/* A sample in user mode has no kernel stack, and asking for it
	 * costs a microsecond on a cold cache. */
	kbytes = !kernel_stacks || CTX_USER_MODE(ctx)
			 ? 0
			 : bpf_get_stack(ctx, e->stacks + ubytes, FP_KSTACK_BYTES, 0);
	if (kbytes < 0 || kbytes > FP_KSTACK_BYTES) {
		count(FP_CNT_KSTACK_ERR);
		kbytes = 0;
	}
	e->hdr.ustack_bytes = ubytes;
	e->hdr.kstack_bytes = kbytes;

	size = sizeof(e->hdr) + ubytes + kbytes;
	if (size > sizeof(e->hdr) + sizeof(e->stacks))
		return 0;
	flags = bpf_ringbuf_query(&samples, BPF_RB_AVAIL_DATA) > wakeup_bytes ? BPF_RB_FORCE_WAKEUP
									      : BPF_RB_NO_WAKEUP;
	if (bpf_ringbuf_output(&samples, e, size, flags))
		count(FP_CNT_LOST);
	return 0;
}

/* The words below the top of a kernel stack that hold the user registers
 * the kernel saved on entry: they end at the top, or 16 bytes below it on
 * x86-64 kernels built with FRED.  One read covers both places. */
struct fp_stack_top {
	__u64 w[sizeof(struct fp_regs) / 8 + 2];
};

#ifdef FP_OFFCPU
/* kernel_sp: an address on the kernel stack this program runs on (its
 * own frame), as a number: stored in a map and read back, which the
 * verifier allows a program loaded with CAP_PERFMON. */
static __always_inline __u64 kernel_sp(struct fp_bpf_event *e)
{
	__u64 here = 0;

	*(volatile __u64 *)&e->ksp = (__u64)(long)&here;
	return *(volatile __u64 *)&e->ksp;
}
#endif

/* saved_regs: take the user registers r if they are user registers. */
static __always_inline int saved_regs(const struct fp_regs *r, struct fp_walk *w)
{
#if defined(__TARGET_ARCH_arm64)
	if (!USER_MODE(r))
		return -1;
#else
	if (r->cs != 0x33 || r->ss != 0x2b) /* __USER_CS, __USER_DS */
		return -1;
#endif
	w->ip = REG_IP(r), w->sp = REG_SP(r), w->fp = REG_FP(r), w->lr = REG_LR(r);
	return 0;
}

/* regs_below: the user registers saved below the top of the kernel stack
 * that holds kernel stack pointer ksp.  0, or -1 when they are not there. */
static __always_inline int regs_below(__u64 ksp, struct fp_walk *w)
{
	__u64 top = (ksp & ~(thread_size - 1)) + thread_size;
	struct fp_stack_top t;

	if (bpf_probe_read_kernel(&t, sizeof(t), (void *)(top - sizeof(t))))
		return -1;
	if (saved_regs((struct fp_regs *)&t.w[2], w) == 0)
		return 0;
	return saved_regs((struct fp_regs *)&t.w[0], w); /* FRED */
}

/* irq_stack_regs: for a sample on the IRQ stack whose top is irq_top, the
 * user registers, found through the interrupted stack pointer that x86-64
 * saves in its top word when it switches to it. */
static __always_inline int irq_stack_regs(__u64 irq_top, struct fp_walk *w)
{
	__u64 prev;

	if (bpf_probe_read_kernel(&prev, sizeof(prev), (void *)(irq_top - 8)) || !prev)
		return -1;
	return regs_below(prev, w);
}

/* user_regs: the registers the task had in user mode.  Interrupted in user
 * mode they are the context's; in kernel mode the kernel saved them at the
 * top of the task's kernel stack, which is THREAD_SIZE-aligned, so the
 * interrupted kernel SP finds it without task_struct offsets (no BTF).
 * A sample in an interrupt or a softirq interrupted this CPU's IRQ stack
 * instead: *irq_top is its top once found, 0 before.  0, or -1 when the
 * registers cannot be found. */
static __always_inline int user_regs(struct fp_regs *ctx, struct fp_walk *w, __u64 *irq_top)
{
	__u64 ksp, top;
	int page;

	/* Read the context once, each field at a constant offset: the
	 * verifier refuses context loads through a moved pointer. */
	w->ip = REG_IP(ctx), w->sp = REG_SP(ctx), w->fp = REG_FP(ctx), w->lr = REG_LR(ctx);
	if (USER_MODE(ctx))
		return 0;
	/* One read for a sample on the task's stack, two on the IRQ stack
	 * once its top is known. */
	ksp = w->sp, top = *irq_top;
	if (top && ksp < top && top - ksp <= thread_size && irq_stack_regs(top, w) == 0)
		return 0;
	if (regs_below(ksp, w) == 0)
		return 0;
	/* Not the task's stack: an IRQ stack not met yet on this CPU.  IRQ
	 * stacks (THREAD_SIZE, 16 KiB, on x86-64) are only page-aligned, so
	 * each of the next pages' boundaries is tried as its top; the saved
	 * CS and SS confirm a find. */
	for (page = 1; page <= 4; page++) {
		top = (ksp & ~4095ull) + 4096 * (__u64)page;
		if (irq_stack_regs(top, w) == 0) {
			*irq_top = top;
			return 0;
		}
	}
	return -1;
}

/* The searches below find the last entry at or before a key: each step
 * halves the range, a search takes log2(entries) steps (under the loop's
 * bound) and never stops early on a match, so that the verifier's paths
 * through a step meet again at the next: with four frames a run, the
 * walker verifies in about 12,000 instructions.  The comparison stays a
 * branch: without one (a mask), each step's load waited for the last
 * one's, and a search of python3.11's 66,000 rows took twice as long
 * (5.3 against 11 us of a sample's BPF time, timed in the program). */

/* find_map: the mapping of the walked process that holds pc, or NULL. */
static __always_inline struct fp_unwind_map *find_map(const struct fp_walk *w, __u64 pc)
{
	__u32 base = 0, len = w->nmaps, i, k;
	struct fp_unwind_map *m;

	if (!len || len > FP_UNWIND_MAPS)
		return NULL;
	for (i = 0; i < 7; i++) { /* the answer in [base, base + len) */
		__u32 half = len / 2;
		if (!half)
			break;
		k = w->maps_first + base + half;
		m = bpf_map_lookup_elem(&unwind_mapv, &k);
		if (!m)
			return NULL;
		if (m->um_start <= pc)
			base += half;
		len -= half;
	}
	k = w->maps_first + base;
	m = bpf_map_lookup_elem(&unwind_mapv, &k);
	if (!m || pc < m->um_start || pc - m->um_start >= m->um_len)
		return NULL;
	return m;
}

/* find_row: the last row of table t at or before file offset off, in two
 * searches: of the chunks the table spans, by each one's first row (a
 * table's rows in chunk c > its first chunk start at the chunk's row 0),
 * then of the rows of that chunk.  The chunks array is read once a step
 * of the first search, and once for the second. */
static __always_inline struct fp_unwind_row *find_row(__u32 t, __u64 off)
{
	struct fp_unwind_table *tab = bpf_map_lookup_elem(&unwind_tables, &t);
	__u32 first, last, c0, c1, base, len, lo, hi, c, k, i, zero = 0, at_c0, at_c1;
	struct fp_unwind_row *r;
	void *chunk;

	if (!tab || !tab->ut_nrows || off > 0xffffffffull)
		return NULL;
	first = tab->ut_first, last = first + tab->ut_nrows - 1;
	c0 = first >> FP_UNWIND_CHUNK_SHIFT, c1 = last >> FP_UNWIND_CHUNK_SHIFT;
	base = c0, len = c1 - c0 + 1;
	for (i = 0; i < 11; i++) { /* 2^11 > the chunks of FP_UNWIND_MAX_ROWS rows */
		__u32 half = len / 2;
		if (!half)
			break;
		c = base + half;
		chunk = bpf_map_lookup_elem(&unwind_chunks, &c);
		if (!chunk)
			return NULL;
		r = bpf_map_lookup_elem(chunk, &zero);
		if (!r)
			return NULL;
		if (r->ur_pc <= off)
			base += half;
		len -= half;
	}
	c = base;
	chunk = bpf_map_lookup_elem(&unwind_chunks, &c);
	if (!chunk)
		return NULL;
	/* the table's rows in chunk c: [lo, hi), without a branch, which
	 * would double the paths the verifier follows through the search */
	at_c0 = (c - c0 - 1) >> 31; /* 1 when c == c0 */
	at_c1 = (c1 - c - 1) >> 31; /* 1 when c == c1 */
	asm volatile("" : "+r"(at_c0), "+r"(at_c1));
	lo = (first & (FP_UNWIND_CHUNK_ROWS - 1)) & -at_c0;
	hi = FP_UNWIND_CHUNK_ROWS -
	     ((FP_UNWIND_CHUNK_ROWS - 1 - (last & (FP_UNWIND_CHUNK_ROWS - 1))) & -at_c1);
	base = lo, len = hi - lo;
	for (i = 0; i < FP_UNWIND_CHUNK_SHIFT; i++) { /* the answer in [base, base + len) */
		__u32 half = len / 2;
		if (!half)
			break;
		k = base + half;
		r = bpf_map_lookup_elem(chunk, &k);
		if (!r)
			return NULL;
		if (r->ur_pc <= off)
			base += half;
		len -= half;
	}
	r = bpf_map_lookup_elem(chunk, &base);
	if (!r || r->ur_pc > off)
		return NULL; /* before the first row */
	return r;
}

enum step_result { STEP_NEXT, STEP_ROOT, STEP_END };

/* step: from the frame at w->ip to its caller. */
static __always_inline int step(struct fp_walk *w)
{
	struct fp_unwind_map *m = find_map(w, w->ip);
	struct fp_unwind_row *row = NULL;
	__u64 cfa, ra = 0, fp = w->fp, lookup = w->exact ? w->ip : w->ip - 1;
	__u8 rule = FP_UNWIND_NONE;

	if (m && m->um_table != FP_UNWIND_NO_TABLE)
		row = find_row(m->um_table, lookup - m->um_bias);
	if (row)
		rule = FP_UNWIND_RULE(row);
	switch (rule) {
	case FP_UNWIND_STOP:
		return STEP_ROOT;
	case FP_UNWIND_SP:
		cfa = w->sp + 8 * (__u64)row->ur_cfa;
		break;
	case FP_UNWIND_FP:
		cfa = w->fp + 8 * (__u64)row->ur_cfa;
		break;
	case FP_UNWIND_PLT:
		cfa = w->sp + 8 + ((w->ip & 15) >= 11 ? 8 : 0);
		break;
	case FP_UNWIND_SIGNAL: {
		/* The kernel's signal frame: the interrupted registers. */
		__u64 g[SIGFRAME_NREGS];
		if (bpf_probe_read_user(g, sizeof(g), (void *)(w->sp + SIGFRAME_REGS)))
			return STEP_END;
		w->ip = g[SIGFRAME_IP], w->sp = g[SIGFRAME_SP], w->fp = g[SIGFRAME_FP];
		w->lr = SIGFRAME_LR(g);
		w->exact = 1; /* the interrupted instruction itself */
		count(FP_CNT_WALK_TABLE);
		return w->ip ? STEP_NEXT : STEP_END;
	}
	default: /* no table here, or a rule we cannot follow: frame pointer */
		if (!w->fp || w->fp < w->sp)
			return STEP_END;
		cfa = w->fp + 16;
		if (bpf_probe_read_user(&ra, 8, (void *)(w->fp + 8)) ||
		    bpf_probe_read_user(&fp, 8, (void *)w->fp))
			return STEP_END;
		count(FP_CNT_WALK_FP);
		goto out;
	}
	count(FP_CNT_WALK_TABLE);
#if defined(__TARGET_ARCH_arm64)
	{
		__s8 slot = FP_UNWIND_RA_SLOT(row);
		if (!slot)
			ra = w->lr;
		else if (bpf_probe_read_user(&ra, 8, (void *)(cfa + 8 * (__s64)slot)))
			return STEP_END;
	}
#else
	if (bpf_probe_read_user(&ra, 8, (void *)(cfa - 8)))
		return STEP_END;
#endif
	if (row->ur_fp && bpf_probe_read_user(&fp, 8, (void *)(cfa + 8 * (__s64)row->ur_fp)))
		return STEP_END;
out:
#if defined(__TARGET_ARCH_arm64)
	ra &= 0x0000ffffffffffffull; /* pointer authentication bits */
#endif
	if (cfa <= w->sp || !ra)
		return STEP_END; /* the stack only grows down; 0 ends it */
	w->ip = ra, w->sp = cfa, w->fp = fp, w->exact = 0;
	return STEP_NEXT;
}

/* read_ptr: the 8 bytes at user address a; 0 when unreadable. */
static __always_inline __u64 read_ptr(__u64 a)
{
	__u64 v = 0;

	if (bpf_probe_read_user(&v, sizeof(v), (void *)a))
		return 0;
	return v;
}

/* py_is_thread: whether thread state ts belongs to kernel thread tid. */
static __always_inline int py_is_thread(const struct fp_py_proc *py, __u64 ts, __u32 tid)
{
	__u64 id = read_ptr(ts + py->pp_ts_tid);
	__u32 t = 0;

	if (py->pp_tid_kind == FP_PY_TID_NATIVE)
		return id == tid;
	/* thread_id is pthread_self(): the C library's thread descriptor */
	if (!id || bpf_probe_read_user(&t, sizeof(t), (void *)(id + py->pp_pthread_tid)))
		return 0;
	return t == tid;
}

#ifdef FP_PYTHON_WALKER
/* py_thread_state: the sampled thread's PyThreadState, 0 if it has none.
 * Remembered per thread and checked on every use; a thread without one
 * is searched for again after FP_PY_RETRY_NS. */
static __always_inline __u64 py_thread_state(const struct fp_py_proc *py, __u32 pid, __u32 tid)
{
	struct fp_py_thread *t = bpf_map_lookup_elem(&py_threads, &tid), v = { 0 };
	__u64 now = bpf_ktime_get_ns(), ts;
	int i;

	if (t && t->pt_pid == pid) {
		if (t->pt_tstate && py_is_thread(py, t->pt_tstate, tid))
			return t->pt_tstate;
		if (!t->pt_tstate && now - t->pt_checked_ns < FP_PY_RETRY_NS)
			return 0;
	}
	ts = read_ptr(py->pp_runtime + py->pp_rt_interp_head); /* the main interpreter */
	ts = ts ? read_ptr(ts + py->pp_is_threads_head) : 0;
	for (i = 0; i < FP_PY_THREAD_SCAN && ts; i++) {
		if (py_is_thread(py, ts, tid))
			break;
		ts = read_ptr(ts + py->pp_ts_next);
	}
	if (i == FP_PY_THREAD_SCAN)
		ts = 0;
	v.pt_tstate = ts, v.pt_checked_ns = now, v.pt_pid = pid;
	bpf_map_update_elem(&py_threads, &tid, &v, BPF_ANY);
	return ts;
}

/* py_start: point the walk at the sampled thread's current Python frame. */
static __always_inline void py_start(const struct fp_py_proc *py, struct fp_bpf_event *e)
{
	__u64 ts = py_thread_state(py, e->hdr.pid, e->hdr.tid), f = 0;

	if (ts) {
		f = read_ptr(ts + py->pp_ts_frame);
		if (f && py->pp_cf_frame != FP_PY_NO_OFFSET)
			f = read_ptr(f + py->pp_cf_frame); /* _PyCFrame -> current_frame */
	}
	e->walk.py_frame = f;
}

#endif

static __always_inline int in_eval(const struct fp_py_proc *py, __u64 ip)
{
	return (ip >= py->pp_eval_start[0] && ip < py->pp_eval_end[0]) ||
	       (ip >= py->pp_eval_start[1] && ip < py->pp_eval_end[1]);
}

/* FIELD: the field at off of a buffer whose size is a power of two: the
 * mask keeps it inside and aligned, as the verifier wants to see. */
#define FIELD(buf, off, type) (*(type *)&(buf)[(off) & (sizeof(buf) - sizeof(type))])

enum py_result { PY_MORE, PY_DONE, PY_FULL };

/* py_unreadable: the interpreter's memory could not be read mid-walk: no
 * Python frame of this sample can be trusted. */
static __always_inline int py_unreadable(struct fp_bpf_event *e)
{
	count(FP_CNT_PY_READ_ERR);
	e->hdr.flags |= FP_SAMPLE_PY_MISMATCH;
	e->walk.py_frame = 0;
	return PY_DONE;
}

/* py_frames: write at most FP_PY_BATCH Python frames of the eval loop
 * activation being replaced; PY_DONE once its first frame is written. */
#define FP_PY_BATCH 4
static __always_inline int py_frames(const struct fp_py_proc *py, struct fp_bpf_event *e)
{
	struct fp_walk *w = &e->walk;
	int i;

	for (i = 0; i < FP_PY_BATCH; i++) {
		__u64 f = w->py_frame, code, prev, lasti, slot, name, file;
		__u32 n = w->n, line;
		__u8 entry;

		if (!f) {
			/* an activation without frames: the stacks disagree */
			e->hdr.flags |= FP_SAMPLE_PY_MISMATCH;
			return PY_DONE;
		}
		if (bpf_probe_read_user(e->py_frame_buf, sizeof(e->py_frame_buf), (void *)f))
			return py_unreadable(e);
		prev = FIELD(e->py_frame_buf, py->pp_fr_previous, __u64);
		code = FIELD(e->py_frame_buf, py->pp_fr_code, __u64);
		entry = FIELD(e->py_frame_buf, py->pp_fr_entry, __u8);
		w->py_frame = prev;
		if (py->pp_model == FP_PY_SHIM && entry == FP_PY_OWNED_BY_CSTACK)
			return PY_DONE; /* the activation's entry shim: not a Python frame */
		if (n >= FP_USER_SLOTS - 1 || w->frames >= FP_STACK_DEPTH)
			return PY_FULL;
		if (bpf_probe_read_user(e->py_code_buf, FP_PY_CODE_WINDOW, (void *)code))
			return py_unreadable(e);
		name = FIELD(e->py_code_buf, py->pp_co_name, __u64);
		file = FIELD(e->py_code_buf, py->pp_co_filename, __u64);
		line = FIELD(e->py_code_buf, py->pp_co_firstlineno, __u32);
		/* the name's length and first characters: see fp_py_tag */
		if (bpf_probe_read_user(e->py_name_buf, sizeof(e->py_name_buf),
					(void *)(name + py->pp_str_length)))
			__builtin_memset(e->py_name_buf, 0, sizeof(e->py_name_buf));
		if (py->pp_instr_kind == FP_PY_LASTI) {
			__s32 l = FIELD(e->py_frame_buf, py->pp_fr_instr, __s32);
			lasti = l < 0 ? FP_PY_LASTI_NONE : (__u64)l;
		} else {
			/* a frame being set up may still hold its last user's
			 * pointer: past the code's end (ob_size code units) it
			 * is no offset of this code */
			lasti = FIELD(e->py_frame_buf, py->pp_fr_instr, __u64) - code -
				py->pp_co_code;
			if (lasti >= 2 * FIELD(e->py_code_buf, 16, __u64))
				lasti = FP_PY_LASTI_NONE;
		}
		if (lasti > FP_PY_LASTI_NONE)
			lasti = FP_PY_LASTI_NONE;
		slot = FP_PY_SLOT_FRAME | lasti << 32 |
		       fp_py_tag(name, file, line, FIELD(e->py_name_buf, 0, __u64),
				 FIELD(e->py_name_buf, py->pp_str_data - py->pp_str_length, __u64),
				 FIELD(e->py_name_buf, py->pp_str_data - py->pp_str_length + 8,
				       __u64));
		*(__u64 *)&e->stacks[(n & 255) * 8] = slot;
		*(__u64 *)&e->stacks[((n + 1) & 255) * 8] = code;
		w->n = n + 2;
		w->frames++;
		e->hdr.flags |= FP_SAMPLE_PYTHON;
		count(FP_CNT_PY_FRAMES);
		if (py->pp_model == FP_PY_FRAMEOBJECT || (py->pp_model == FP_PY_IS_ENTRY && entry))
			return PY_DONE;
	}
	return PY_MORE;
}

/* walk: FP_WALK_FRAMES frames, then again in a tail call, then out.
 * The native walker is this without the Python parts (py is NULL). */
static __always_inline int walk(void *ctx, struct fp_bpf_event *e)
{
	struct fp_walk *w = &e->walk;
#ifdef FP_PYTHON_WALKER
	struct fp_py_proc *py = bpf_map_lookup_elem(&py_procs, &e->hdr.pid);
#else
	const struct fp_py_proc *py = NULL;
#endif
	int i, r = STEP_NEXT;

#ifdef FP_PYTHON_WALKER
	if (py && !w->py_started) {
		w->py_started = 1;
		py_start(py, e);
	}
#endif
	for (i = 0; i < FP_WALK_FRAMES; i++) {
		__u32 n = w->n;
		if (!w->py_pending) {
			if (n >= FP_USER_SLOTS || w->frames >= FP_STACK_DEPTH)
				return finish(ctx, e, n * 8);
			if (py && w->py_frame && in_eval(py, w->ip)) {
				/* replaced by its Python frames, kept in case
				 * they do not match */
				*(__u64 *)&e->stacks[(n & 255) * 8] = FP_PY_SLOT_EVAL | w->ip;
				w->n = n + 1;
				w->py_pending = w->py_seen = 1;
			} else if (py && !w->py_frame && in_eval(py, w->ip)) {
				/* an activation with no Python frame left for it */
				if (w->py_seen)
					e->hdr.flags |= FP_SAMPLE_PY_MISMATCH;
				else if (!w->py_nothread++)
					count(FP_CNT_PY_NO_THREAD);
				*(__u64 *)&e->stacks[(n & 255) * 8] = w->ip;
				w->n = n + 1;
				w->frames++;
			} else if (!(py && w->py_seen && w->py_frame &&
				     w->ip >= py->pp_interp_start && w->ip < py->pp_interp_end)) {
				*(__u64 *)&e->stacks[(n & 255) * 8] = w->ip;
				w->n = n + 1;
				w->frames++;
			} /* else the interpreter calling itself between two activations:
			   * frames below the outermost one (main, Py_RunMain) stay */
		}
		if (w->py_pending && py) {
			int pr = py_frames(py, e);
			if (pr == PY_FULL)
				return finish(ctx, e, w->n * 8);
			if (pr == PY_MORE || (w->py_tail && w->py_frame))
				continue;
			if (w->py_tail) {
				r = STEP_END;
				break;
			}
			w->py_pending = 0;
		}
		r = step(w);
		if (r == STEP_END && py && w->py_frame) {
			/* No table (yet) for some frame: the thread's Python
			 * frames are still known, and the stack goes on
			 * with them, with the native frames in between
			 * missing. */
			w->py_tail = w->py_pending = 1;
			r = STEP_NEXT;
			continue;
		}
		if (r != STEP_NEXT)
			break;
	}
	if (r == STEP_NEXT && w->calls < FP_WALK_CALLS) {
		w->calls++;
		bpf_tail_call(ctx, &walk_prog, WALKER);
	}
	if (r == STEP_ROOT) {
		e->hdr.flags |= FP_SAMPLE_ROOT;
		count(FP_CNT_WALK_ROOT);
		/* Python frames left over: some activation was not seen */
		if (w->py_seen && w->py_frame && !(e->hdr.flags & FP_SAMPLE_PY_MISMATCH))
			e->hdr.flags |= FP_SAMPLE_PY_MISMATCH;
	}
	if (e->hdr.flags & FP_SAMPLE_PY_MISMATCH)
		count(FP_CNT_PY_MISMATCH);
	return finish(ctx, e, w->n * 8);
}

#ifdef FP_PYTHON_WALKER
SEC(PROG_SEC)
int fp_walk_py(void *ctx)
#else
SEC(PROG_SEC)
int fp_walk(void *ctx)
#endif
{
	__u32 zero = 0;
	struct fp_bpf_event *e = bpf_map_lookup_elem(&scratch, &zero);

	return e ? walk(ctx, e) : 0;
}

#if defined(FP_PYTHON_WALKER) && !defined(FP_OFFCPU)
/* A new program image, or the process gone: its interpreter too. */
SEC("raw_tracepoint/sched_process_exec")
int fp_py_exec(void *ctx)
{
	__u32 pid = bpf_get_current_pid_tgid() >> 32;

	bpf_map_delete_elem(&py_procs, &pid);
	return 0;
}

SEC("raw_tracepoint/sched_process_exit")
int fp_py_exit(void *ctx)
{
	__u64 id = bpf_get_current_pid_tgid();
	__u32 pid = id >> 32;

	if (pid == (__u32)id)
		bpf_map_delete_elem(&py_procs, &pid);
	return 0;
}
#endif

#ifndef FP_PYTHON_WALKER
static __always_inline int is_target(__u32 pid)
{
	int i;

	for (i = 0; i < FP_TARGET_PIDS && i < target_npids; i++)
		if (target_pids[i] == pid)
			return 1;
	return 0;
}

/* sample: the current task's identity and stacks out through the ring
 * buffer, its user stack walked here when it has unwind tables.  flags
 * and off_ns say what the record is of (a CPU sample: 0). */
static __always_inline int sample(void *ctx, struct fp_bpf_event *e, __u64 id, __u32 flags, __u32 q,
				  __u64 off_start)
{
	__u32 pid = id >> 32, tid = (__u32)id;
	struct fp_unwind_proc *p;
	__u32 walker;
	long ubytes;

	e->hdr.pid = pid;
	e->hdr.tid = tid;
	e->hdr.cgroup_id = bpf_get_current_cgroup_id();
	e->hdr.pad = q;
	e->hdr.off_ns = 0;
	e->hdr.off_start = off_start;
	bpf_get_current_comm(e->hdr.comm, sizeof(e->hdr.comm));

	/* A process with unwind tables is walked, by its walker.  Its entry
	 * goes on exec and exit, like known_pids', so its addresses are the
	 * current image's even while the agent refreshes what it knows. */
	if ((p = bpf_map_lookup_elem(&unwind_procs, &pid))) {
		e->hdr.flags = flags | FP_SAMPLE_USER_RAW;
		__builtin_memset(&e->walk, 0, sizeof(e->walk));
		e->walk.exact = 1;
		e->walk.maps_first = p->up_first;
		e->walk.nmaps = p->up_nmaps;
		walker = p->up_walker;
#ifdef FP_OFFCPU
		if (regs_below(kernel_sp(e), &e->walk) == 0) {
#else
		if (user_regs(ctx, &e->walk, &e->irq_stack_top) == 0) {
#endif
			e->hdr.flags |= FP_SAMPLE_WALKED;
			count(FP_CNT_WALKS);
			bpf_tail_call(ctx, &walk_prog, walker);
			/* that walker is not loaded (yet) */
			bpf_tail_call(ctx, &walk_prog, FP_WALKER_NATIVE);
			e->hdr.flags &= ~FP_SAMPLE_WALKED;
		}
		count(FP_CNT_WALK_LOST);
		/* The kernel finds the user registers (on an IRQ stack,
		 * say) but walks by frame pointer, which this process's
		 * code may not keep: only its first frame, the interrupted
		 * PC, is sure. */
		ubytes = bpf_get_stack(ctx, e->stacks, 8, BPF_F_USER_STACK);
	} else if (bpf_map_lookup_elem(&known_pids, &pid)) {
		e->hdr.flags = flags | FP_SAMPLE_USER_RAW;
		ubytes = bpf_get_stack(ctx, e->stacks, FP_STACK_DEPTH * 8, BPF_F_USER_STACK);
	} else {
		e->hdr.flags = flags;
		ubytes = bpf_get_stack(ctx, e->stacks, FP_USTACK_BYTES,
				       BPF_F_USER_STACK | BPF_F_USER_BUILD_ID);
	}
	return finish(ctx, e, ubytes);
}
#endif

#if !defined(FP_PYTHON_WALKER) && !defined(FP_OFFCPU)
SEC("perf_event")
int fp_sample(void *ctx)
{
	__u64 id = bpf_get_current_pid_tgid();
	struct fp_bpf_event *e;
	__u32 zero = 0;

	if ((__u32)id == 0) /* idle */
		return 0;
	if (target_npids && !is_target(id >> 32))
		return 0;
	e = bpf_map_lookup_elem(&scratch, &zero);
	if (!e)
		return 0;
	count(FP_CNT_SAMPLES);
	return sample(ctx, e, id, 0, 0, 0);
}

/* A new program image: the agent's copy of the mappings is stale. */
SEC("raw_tracepoint/sched_process_exec")
int fp_exec(void *ctx)
{
	__u32 pid = bpf_get_current_pid_tgid() >> 32;

	bpf_map_delete_elem(&known_pids, &pid);
	bpf_map_delete_elem(&unwind_procs, &pid);
	return 0;
}

/* The process is gone (its main thread exits): the pid may be reused. */
SEC("raw_tracepoint/sched_process_exit")
int fp_exit(void *ctx)
{
	__u64 id = bpf_get_current_pid_tgid();
	__u32 pid = id >> 32;

	if (pid == (__u32)id) {
		bpf_map_delete_elem(&known_pids, &pid);
		bpf_map_delete_elem(&unwind_procs, &pid);
	}
	return 0;
}
#endif

#if defined(FP_OFFCPU) && !defined(FP_PYTHON_WALKER)
/* Off-CPU, on the sched_switch raw tracepoint, which runs in the thread
 * leaving its CPU and is handed the task_struct pointers of it and of the
 * thread coming in, used here as identities only (no field is read, so no
 * BTF and no offsets).  There, with the leaving thread's own stacks at
 * hand, the time is noted under its task pointer and, for a share q of
 * the switches, its stacks are taken and sent at once, marked pending;
 * when the same tracepoint hands the thread over as the one coming back,
 * the time away is measured, counted, and, for a thread whose stacks were
 * taken, sent in a short record that completes them, to be weighed 1/q.
 * q is set before the wait, from what came before it, so that the
 * weights stay unbiased.  A thread's n-th wait in a second has q =
 * OFFCPU_ALWAYS / n (1 for its first ones: a daemon waking now and then,
 * a long sleep, are taken whole), so that a thread has about
 * OFFCPU_ALWAYS * (1 + ln(n / OFFCPU_ALWAYS)) of its n waits a second
 * taken, and no thread's switches thin out another's: a storm takes
 * about 45 stacks a second per thread.  When a CPU's threads would have
 * had more than offcpu_stacks taken in its last window (their q added
 * up), every q there is scaled down to it, but a thread's first wait of
 * each second's.  The record that completes
 * a wait's stacks also brings the time of all the thread's waits since
 * its last such record: each thread's time away is exact, and its stacks
 * only say how to share it (collector.c).
 * (A kprobe on the switch's end, as others use, would run in the
 * returning thread and know the time first; kernels built without
 * kprobes, as this project's test machines', have none.  The classic
 * tracepoint costs a record built for every switch: docs/offcpu.md.) */
const volatile __u32 offcpu_stacks = FP_OFFCPU_STACKS / 10; /* a window's, per CPU */
#define OFFCPU_WINDOW_NS 100000000ull                       /* 100 ms */
#define OFFCPU_SECOND_NS 1000000000ull
#define OFFCPU_ALWAYS 4 /* a thread's switches out a second always taken */
#define Q_ONE 65536     /* q in 65536ths */

/* A thread's last switch out, by its task pointer; kept while it runs,
 * with how often it left in the current second. */
struct offcpu_note {
	__u64 out_ns;    /* when it left; 0: it is back */
	__u64 second_ns; /* when its current second began */
	__u64 away_ns;   /* its waits' time since the last one whose stacks were taken */
	__u32 pid, tid;
	__u32 q;    /* its stacks were taken with this q; 0: not */
	__u32 outs; /* its switches out in that second */
};

struct {
	__uint(type, BPF_MAP_TYPE_LRU_HASH);
	__uint(max_entries, FP_OFFCPU_THREADS);
	__type(key, __u64);
	__type(value, struct offcpu_note);
} offcpu_out SEC(".maps");

/* Per CPU: the window that sets q, and the off-CPU counters (one lookup
 * a switch for all of them; the agent adds them to the counters map's). */
struct {
	__uint(type, BPF_MAP_TYPE_PERCPU_ARRAY);
	__uint(max_entries, 1);
	__type(key, __u32);
	__type(value, struct fp_offcpu_cpu);
} offcpu_cpus SEC(".maps");

/* cpu_share: this CPU's factor on every thread's q, in 65536ths: 1 but
 * when the last window's waits would have had more stacks taken than
 * offcpu_stacks (their q added up), then what brings them down to it. */
static __always_inline __u32 cpu_share(struct fp_offcpu_cpu *r, __u64 now)
{
	if (now - r->window_ns >= OFFCPU_WINDOW_NS) {
		__u64 want = r->q_sum, budget = (__u64)offcpu_stacks * Q_ONE;
		r->share = want <= budget ? Q_ONE : (__u32)(budget * Q_ONE / want) ?: 1;
		r->window_ns = now;
		r->q_sum = 0;
	}
	return r->share ?: Q_ONE;
}

SEC("raw_tracepoint/sched_switch")
int fp_switch(struct bpf_raw_tracepoint_args *ctx)
{
	__u64 id = bpf_get_current_pid_tgid(), now = bpf_ktime_get_ns(), d;
	__u64 next = ctx->args[2], task; /* (preempt, prev, next, ...) */
	__u32 tid = (__u32)id, zero = 0, q;
	struct fp_offcpu_cpu *c = bpf_map_lookup_elem(&offcpu_cpus, &zero);
	struct offcpu_note *n, note;
	struct fp_bpf_event *e;

	if (!c)
		return 0;
	/* The thread coming back: its time away. */
	if ((n = bpf_map_lookup_elem(&offcpu_out, &next)) && n->out_ns) {
		d = now - n->out_ns;
		c->oc_in++;
		c->oc_ns += d;
		n->away_ns += d;
		if (n->q) {
			struct fp_bpf_sample done = { .pid = n->pid,
						      .tid = n->tid,
						      .flags = FP_SAMPLE_OFFCPU_DONE,
						      .pad = n->q,
						      .off_ns = d,
						      .off_start = n->out_ns,
						      .off_away_ns = n->away_ns };
			if (bpf_ringbuf_output(&samples, &done, sizeof(done), BPF_RB_NO_WAKEUP))
				count(FP_CNT_LOST);
			else
				n->away_ns = 0;
		}
		n->out_ns = 0;
	}
	/* The thread leaving. */
	if (tid == 0 || (target_npids && !is_target(id >> 32)))
		return 0;
	task = bpf_get_current_task();
	note = (struct offcpu_note){ now, now, 0, id >> 32, tid, 0, 1 };
	n = bpf_map_lookup_elem(&offcpu_out, &task);
	/* the same thread (a task's memory may serve another later) */
	if (n && n->tid == tid) {
		note.away_ns = n->away_ns;
		if (now - n->second_ns < OFFCPU_SECOND_NS)
			note.second_ns = n->second_ns, note.outs = n->outs + 1;
	}
	/* its n-th wait of the second: q = OFFCPU_ALWAYS / n, 1 for the first
	 * ones, times the CPU's share but for the very first, always taken
	 * (a long sleep before the thread ends has no later wait to bring
	 * its time) */
	q = note.outs <= OFFCPU_ALWAYS ? Q_ONE : OFFCPU_ALWAYS * Q_ONE / note.outs;
	if (note.outs > 1)
		q = (__u32)(((__u64)q * cpu_share(c, now)) >> 16) ?: 1;
	c->q_sum += q;
	note.q = q;
	if (q < Q_ONE && (bpf_get_prandom_u32() >> 16) >= q)
		note.q = 0;
	/* In place when the thread has a note (only it writes its note while
	 * it leaves, and it cannot come back meanwhile): an update of an LRU
	 * map takes a new element each time. */
	if (n)
		*n = note;
	else if (bpf_map_update_elem(&offcpu_out, &task, &note, BPF_ANY))
		return 0;
	if (!note.q) {
		c->oc_skipped++;
		return 0;
	}
	c->oc_stacks++;
	e = bpf_map_lookup_elem(&scratch, &zero);
	if (!e)
		return 0;
	return sample(ctx, e, id, FP_SAMPLE_OFFCPU, note.q, now);
}
#endif
