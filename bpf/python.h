/* python.h: what bpf/stacks.bpf.c needs to walk CPython frames, shared with
 * the agent (device/python.c), which fills it in per process.  Fixed-width
 * fields only.
 *
 * The BPF walker replaces each activation of the interpreter's eval loop
 * (_PyEval_EvalFrameDefault) on the native stack by the Python frames that
 * activation was running.  It finds them from the sampled thread's
 * PyThreadState: the interpreter's thread list is searched for the thread
 * whose id is the sampled tid, then its current frame is followed to the
 * caller's, activation by activation.  Every offset below comes from the
 * agent: a table per minor version, or _Py_DebugOffsets (3.13 and later).
 */
#ifndef FP_BPF_PYTHON_H
#define FP_BPF_PYTHON_H

#include <linux/types.h>

#define FP_PY_EVAL_RANGES 2 /* _PyEval_EvalFrameDefault and its .cold part */
/* The busiest host measured walked 18 CPython processes at once
 * (docs/performance.md: the test VM with other Python tests running);
 * make bench runs ten daemons.  Both maps exist only once the
 * Python walker is loaded: 23 and 48 KiB.  Past FP_PY_PROCS a process
 * shows as the interpreter's native frames; the LRU of threads only costs
 * a new search of the thread list. */
#define FP_PY_PROCS 128             /* Python processes walked at once */
#define FP_PY_THREADS 512           /* thread states remembered (LRU) */
#define FP_PY_THREAD_SCAN 32        /* thread states searched per lookup */
#define FP_PY_FRAME_WINDOW 128      /* bytes of a frame read at once */
#define FP_PY_CODE_WINDOW 192       /* bytes of a code object read at once */
#define FP_PY_RETRY_NS 100000000ull /* a thread with no thread state: look again after */

/* How the interpreter chains its frames. */
enum fp_py_model {
	FP_PY_FRAMEOBJECT = 1, /* 3.9: one PyFrameObject per activation, f_back */
	FP_PY_IS_ENTRY = 2,    /* 3.11: _PyInterpreterFrame; an activation's first frame
				* has is_entry set */
	FP_PY_SHIM = 3,        /* 3.12+: an activation starts above a frame owned by
				* the C stack (owner FRAME_OWNED_BY_CSTACK) */
};

/* What identifies a thread state's thread. */
enum fp_py_tid {
	FP_PY_TID_NATIVE = 1,  /* native_thread_id is the kernel tid (3.11+) */
	FP_PY_TID_PTHREAD = 2, /* thread_id is pthread_self(): the tid sits in the
				* C library's thread descriptor at pp_pthread_tid */
};

/* How a frame tells where it is in its code. */
enum fp_py_instr {
	FP_PY_LASTI = 1,     /* an int: byte offset of the last instruction (3.9) */
	FP_PY_INSTR_PTR = 2, /* a pointer into the code object's bytecode, which
				* starts pp_co_code bytes into the code object */
};

#define FP_PY_OWNED_BY_CSTACK 3 /* 3.12 and 3.13 */
#define FP_PY_NO_OFFSET 0xffff

/* Per process (map py_procs, key pid). */
struct fp_py_proc {
	__u64 pp_runtime;                       /* address of _PyRuntime */
	__u64 pp_eval_start[FP_PY_EVAL_RANGES]; /* eval loop code; end 0: unused */
	__u64 pp_eval_end[FP_PY_EVAL_RANGES];
	__u64 pp_interp_start, pp_interp_end; /* the interpreter's code mapping */
	__u16 pp_rt_interp_head;              /* _PyRuntime -> first PyInterpreterState * */
	__u16 pp_is_threads_head;             /* PyInterpreterState -> first PyThreadState * */
	__u16 pp_ts_next;                     /* PyThreadState -> next */
	__u16 pp_ts_tid;                      /* -> native_thread_id, or thread_id (pthread_t) */
	__u16 pp_ts_frame;       /* -> current frame, or the _PyCFrame * (pp_cf_frame) */
	__u16 pp_cf_frame;       /* _PyCFrame -> current_frame; FP_PY_NO_OFFSET: none */
	__u16 pp_pthread_tid;    /* pthread descriptor -> tid (FP_PY_TID_PTHREAD) */
	__u16 pp_fr_previous;    /* frame -> caller's frame */
	__u16 pp_fr_code;        /* frame -> code object */
	__u16 pp_fr_instr;       /* frame -> f_lasti, prev_instr or instr_ptr */
	__u16 pp_fr_entry;       /* frame -> is_entry (3.11) or owner (3.12+) */
	__u16 pp_co_firstlineno; /* code object -> co_firstlineno (int) */
	__u16 pp_co_filename;    /* -> co_filename */
	__u16 pp_co_name;        /* -> co_qualname, or co_name before 3.11 */
	__u16 pp_co_code;        /* -> first bytecode unit (FP_PY_INSTR_PTR) */
	__u16 pp_str_length;     /* str -> length */
	__u16 pp_str_data;       /* str -> the characters of an ASCII str */
	__u8 pp_model;           /* enum fp_py_model */
	__u8 pp_tid_kind;        /* enum fp_py_tid */
	__u8 pp_instr_kind;      /* enum fp_py_instr */
	__u8 pp_pad[7];
};

/* A remembered thread state (map py_threads, key tid). */
struct fp_py_thread {
	__u64 pt_tstate; /* 0: the thread had none at pt_checked_ns */
	__u64 pt_checked_ns;
	__u32 pt_pid;
	__u32 pt_pad;
};

/* In a walked user stack (FP_SAMPLE_USER_RAW), two kinds of slot are not
 * plain addresses (user addresses never have bits 62 or 63 set):
 *  - FP_PY_SLOT_EVAL | pc: an eval loop activation; the Python frames it
 *    was running follow it (towards the root);
 *  - FP_PY_SLOT_FRAME | lasti << 32 | tag, then the code object's address:
 *    one Python frame, two slots.  lasti is the byte offset of the
 *    instruction in the bytecode (FP_PY_LASTI_NONE when unknown); tag is
 *    fp_py_tag of the code object's name (its address, its length and its
 *    first 16 bytes of characters), file name and first line, which the
 *    agent checks when it reads the code object, so that a code object
 *    freed and its memory reused by another is never named after the
 *    other: the allocator tends to put the new one, and its name, where the
 *    old ones were, so addresses alone do not tell them apart. */
#define FP_PY_SLOT_FRAME (1ull << 63)
#define FP_PY_SLOT_EVAL (1ull << 62)
#define FP_PY_LASTI_NONE 0x3fffffffu
#define FP_PY_SLOT_LASTI(s) ((__u32)((s) >> 32) & FP_PY_LASTI_NONE)
#define FP_PY_SLOT_TAG(s) ((__u32)(s))

#define FP_PY_NAME_WINDOW 64 /* bytes of a name read: its length, its first characters */

static inline __u32 fp_py_tag(__u64 name, __u64 filename, __u32 firstlineno, __u64 length,
			      __u64 chars0, __u64 chars1)
{
	__u64 h = (name ^ (filename << 17) ^ (filename >> 47) ^ firstlineno) *
		  0x9e3779b97f4a7c15ull;

	h = (h ^ length ^ (h >> 29)) * 0xbf58476d1ce4e5b9ull;
	h = (h ^ chars0 ^ (h >> 31)) * 0x94d049bb133111ebull;
	h = (h ^ chars1 ^ (h >> 29)) * 0x9e3779b97f4a7c15ull;
	return (__u32)(h >> 32);
}

#endif
