/* batch.h: the in-memory form of what a device sends to the symbolizer.
 *
 * The agent fills these structures, common/wire.c turns them into msgpack
 * and back, and the symbolizer (or `fleetprof record`, in-process) consumes
 * them.  Every id below is assigned by the agent and unique within one
 * session (one run of the agent, see fp_hello.session).  A definition
 * (mapping, thread, stack trie node) is sent once per session; later
 * batches refer to it by id only.
 */
#ifndef FP_BATCH_H
#define FP_BATCH_H

#include "buildid.h"

#include <stddef.h>
#include <stdint.h>

#define FP_PROTO_VERSION 1
#define FP_COMM_LEN 16             /* TASK_COMM_LEN */
#define FP_MAX_FRAMES 254          /* 127 kernel + 127 user: the deepest trie path */
#define FP_MAPPING_NONE UINT32_MAX /* frame.mapping of an unmapped address */

enum fp_mapping_kind {
	FP_MAP_USER = 0,    /* ELF file mapped into a process; offset = file offset */
	FP_MAP_KERNEL = 1,  /* vmlinux; offset = address - _text */
	FP_MAP_KMODULE = 2, /* kernel module; offset = address - module base */
	FP_MAP_PYTHON = 3,  /* a CPython code object; offset = byte offset of the
			     * instruction in its bytecode */
};

/* How a code object's line table is encoded (CPython's own formats). */
enum fp_py_lines {
	FP_PY_LNOTAB = 1,    /* co_lnotab, 3.9: (byte offset, line) increments */
	FP_PY_LOCATIONS = 2, /* co_linetable, 3.11 and later: location entries in
			       * code units of 2 bytes */
};

#define FP_PY_NAME_MAX 1024       /* bytes of a qualified name */
#define FP_PY_LINETABLE_MAX 65536 /* bytes of a line table */

/* What a Python code object tells (FP_MAP_PYTHON mappings only). */
struct fp_pycode {
	char *pc_qualname; /* owned; co_qualname (co_name before 3.11), UTF-8 */
	uint32_t pc_firstlineno;
	uint8_t pc_lines;          /* enum fp_py_lines */
	uint32_t pc_linetable_len; /* <= FP_PY_LINETABLE_MAX */
	uint8_t *pc_linetable;     /* owned; NULL when pc_linetable_len is 0 */
};

struct fp_mapping {
	uint32_t fm_id;
	uint8_t fm_kind;                /* enum fp_mapping_kind */
	struct fp_build_id fm_build_id; /* empty for FP_MAP_PYTHON */
	char *fm_path;                  /* owned; path, module name, or a code object's
				     * co_filename; never NULL */
	struct fp_pycode *fm_py;        /* owned; FP_MAP_PYTHON only, else NULL */
};

struct fp_thread {
	uint32_t ft_id;
	uint32_t ft_pid; /* in the agent's (initial) pid namespace */
	uint32_t ft_tid;
	uint64_t ft_cgroup;           /* cgroup v2 id, 0 if unknown */
	char ft_comm[FP_COMM_LEN];    /* thread name, NUL-terminated */
	char ft_process[FP_COMM_LEN]; /* process (main thread) name */
	char *ft_container;           /* owned; container id or name, "" if none */
};

struct fp_frame {
	uint32_t ff_mapping; /* mapping id, or FP_MAPPING_NONE */
	uint64_t ff_offset;  /* see enum fp_mapping_kind; raw address if NONE */
};

#define FP_NODE_NONE UINT32_MAX /* no node: outermost frame, or no frames */

/* One node of a session's stack trie: a frame and the node of its caller.
 * A stack is named by its innermost (leaf) node; following fn_parent from
 * there gives its frames, leaf first (kernel frames, then user frames).
 * Stacks that share callers share nodes, so a new stack usually costs one
 * or two nodes.  A node's parent is always defined before it. */
struct fp_node {
	uint32_t fn_id;
	uint32_t fn_parent; /* node id, or FP_NODE_NONE */
	struct fp_frame fn_frame;
};

/* fc_count samples of thread fc_thread with the stack ending in fc_node;
 * or, off-CPU (fc_off_ns not 0), fc_count blocks of that thread there,
 * fc_off_ns its time away in them (estimates: the blocks whose stacks
 * were taken stand for those that were not, see bpf/stacks.bpf.c). */
struct fp_count {
	uint32_t fc_thread;
	uint32_t fc_node; /* leaf node id, or FP_NODE_NONE (no frames) */
	uint32_t fc_count;
	uint64_t fc_off_ns; /* 0: CPU samples */
};

/* Counters the agent reports with every batch; totals since agent start. */
struct fp_lost {
	uint64_t fl_samples;         /* samples the BPF program could not emit */
	uint64_t fl_stack_errors;    /* samples whose stacks could not be read */
	uint64_t fl_batches;         /* batches dropped from the agent's buffer */
	uint64_t fl_samples_dropped; /* samples inside those dropped batches */
};

/* An unwind table an agent holds already (HELLO key 11): installed, or
 * in its table cache; ht_id names its version (fp_unwind_table_id). */
struct fp_held_table {
	struct fp_build_id ht_build_id; /* not empty */
	uint64_t ht_id;
};

#define FP_HELD_TABLES_MAX 4096 /* per hello */

struct fp_hello {
	uint64_t fh_session; /* random, chosen at agent start */
	char *fh_host;
	char *fh_boot_id;
	char *fh_kernel_release;
	struct fp_build_id fh_kernel_build_id;
	char *fh_agent_version;
	uint32_t fh_frequency; /* Hz */
	uint32_t fh_ncpus;
	uint64_t fh_features; /* enum fp_feature bits the agent takes (HELLO key 10) */
	size_t fh_nlabels;
	char **fh_label_keys; /* owned arrays of owned strings */
	char **fh_label_values;
	size_t fh_nheld;               /* <= FP_HELD_TABLES_MAX */
	struct fp_held_table *fh_held; /* owned; tables the agent holds (HELLO key 11) */
};

struct fp_batch {
	uint64_t fb_session;
	uint64_t fb_seq;      /* 1, 2, ... per session */
	uint64_t fb_start_ns; /* CLOCK_REALTIME, unix nanoseconds */
	uint64_t fb_end_ns;
	uint64_t fb_period_ns; /* 1e9 / frequency */
	size_t fb_nmappings, fb_nthreads, fb_nnodes, fb_ncounts;
	struct fp_mapping *fb_mappings; /* new definitions only */
	struct fp_thread *fb_threads;
	struct fp_node *fb_nodes;   /* parents before children */
	struct fp_count *fb_counts; /* may refer to definitions of earlier batches */
	struct fp_lost fb_lost;
};

/* One symbol of a kallsyms snapshot; offset is relative to _text (kernel)
 * or to the module's base (module). */
struct fp_ksym {
	uint64_t fk_offset;
	char *fk_name; /* owned */
};

/* Part of a kallsyms snapshot for one target (the kernel or one module).
 * Large targets are sent in several parts; fs_last marks the final one. */
struct fp_ksyms {
	uint64_t fs_session;
	uint8_t fs_kind; /* FP_MAP_KERNEL or FP_MAP_KMODULE */
	struct fp_build_id fs_build_id;
	char *fs_name;    /* "vmlinux" or the module name */
	uint32_t fs_part; /* 0, 1, ... */
	uint8_t fs_last;
	size_t fs_nsyms;
	struct fp_ksym *fs_syms;
};

/* A byte range of the file with build-ID fg_build_id that the symbolizer
 * asks an agent for, when no other source has the file's symbols.  The
 * symbolizer reads the ELF structure itself and asks for what it needs;
 * the agent only copies bytes. */
struct fp_range {
	struct fp_build_id fg_build_id;
	uint64_t fg_offset;
	uint32_t fg_length; /* <= FP_RANGE_MAX */
};

#define FP_RANGE_MAX (1u << 20)

/* An agent's answer to one fp_range: the bytes there (fewer at the end of
 * the file), or why it cannot read the file. */
struct fp_file_data {
	uint64_t fd_session;
	struct fp_build_id fd_build_id;
	uint64_t fd_offset;
	uint64_t fd_file_size;
	uint32_t fd_error; /* 0, or an errno: the file cannot be read */
	size_t fd_len;
	uint8_t *fd_data; /* owned; NULL when fd_len is 0 */
};

/* A part of an unwind table (bpf/unwind.h) the symbolizer sends down: the
 * agent installs a table when its parts have arrived in order, from
 * offset 0 to tp_total.  Parts are at most FP_TABLE_PART_MAX bytes; a
 * reply carries at most FP_TABLE_REPLY_MAX bytes of them. */
struct fp_table_part {
	struct fp_build_id tp_build_id;
	uint32_t tp_offset; /* of this part in the whole table */
	uint32_t tp_total;  /* the whole table's bytes, <= FP_TABLE_MAX */
	uint32_t tp_len;    /* 1..FP_TABLE_PART_MAX */
	uint8_t *tp_data;   /* owned (freed by fp_reply_fini), unless tp_release */
	/* A part that borrows its bytes (the symbolizer's tables, shared by
	 * its sessions): fp_reply_fini calls tp_release(tp_release_arg)
	 * instead of freeing tp_data. */
	void (*tp_release)(void *arg);
	void *tp_release_arg;
};

#define FP_TABLE_PART_MAX (1u << 20)
#define FP_TABLE_REPLY_MAX (4u << 20)
/* Parts a reply may carry: FP_TABLE_REPLY_PARTS to an agent whose hello
 * has FP_FEATURE_HELD_TABLES (small tables need not wait for the next
 * reply), else FP_TABLE_REPLY_PARTS_OLD (what its decoder takes). */
#define FP_TABLE_REPLY_PARTS 64
#define FP_TABLE_REPLY_PARTS_OLD (FP_TABLE_REPLY_MAX / FP_TABLE_PART_MAX)
#define FP_TABLE_MAX \
	(16u + 8u * (1u << 23) + 32u) /* header + FP_UNWIND_MAX_ROWS rows
						   * + the CPython trailer */

enum fp_reply_status {
	FP_REPLY_OK = 0,
	FP_REPLY_NEED_HELLO = 1, /* unknown session: send hello, resend definitions */
	FP_REPLY_REJECTED = 2,   /* malformed or unsupported; do not resend as is */
};

/* What a symbolizer reads beyond version 1's first revision, in the reply
 * to a hello (fr_features): an agent uses a feature only when told. */
enum fp_feature {
	FP_FEATURE_LEAVES = 1, /* SAMPLES key 11: counts as varints (PROTOCOL.md) */
	FP_FEATURE_NODES = 2,  /* SAMPLES key 12: trie nodes as varints */
	/* Every unwind table it sends has a row at each function's start, so
	 * that no row spans two functions: the agent may then send a native
	 * frame below Python at its row's start whatever the row's state. */
	FP_FEATURE_FUNCTION_ROWS = 4,
	/* REPLY keys 9 and 10: the kernel's function starts (struct
	 * fp_kfuncs).  Both ways: the symbolizer sends them only to an agent
	 * whose hello (fh_features) has the bit, and announces it too. */
	FP_FEATURE_KFUNCS = 8,
	/* HELLO key 11 and REPLY key 11.  In a hello: the agent lists the
	 * tables it holds (none, maybe) and reads the tables still to come.
	 * In the reply to it: the symbolizer sends no table the hello lists
	 * with the same id, and says how many are still to come. */
	FP_FEATURE_HELD_TABLES = 16,
};
#define FP_FEATURES_KNOWN \
	(FP_FEATURE_LEAVES | FP_FEATURE_NODES | FP_FEATURE_FUNCTION_ROWS | FP_FEATURE_KFUNCS | \
	 FP_FEATURE_HELD_TABLES)

/* The kernel's function starts, from the kallsyms table the symbolizer
 * resolves the kernel's frames with (PROTOCOL.md section 6): offsets from
 * _text, strictly ascending.  Entry i starts a function, or, with bit i
 * of kf_gaps set, a gap (no function: the end of one not followed at once
 * by the next).  An agent sends a kernel frame as the start of its
 * function (common/kfuncs.h), so that a function is one trie node per
 * caller, not one per address. */
#define FP_KFUNCS_MAX 1000000u
struct fp_kfuncs {
	struct fp_build_id kf_build_id; /* the kernel's; empty: no list */
	uint32_t kf_n;                  /* 0..FP_KFUNCS_MAX */
	uint32_t *kf_offsets;           /* owned, kf_n */
	uint8_t *kf_gaps;               /* owned bitmap, (kf_n + 7) / 8 bytes */
};

/* The symbolizer's answer to every request. */
struct fp_reply {
	uint8_t fr_status;    /* enum fp_reply_status */
	uint64_t fr_features; /* enum fp_feature bits; 0 from older symbolizers */
	uint64_t fr_seq;      /* seq of the batch answered (OK or NEED_HELLO), else 0 */
	char *fr_error;       /* owned; NULL unless rejected */
	size_t fr_nwant;      /* build-IDs whose kallsyms the server wants */
	struct fp_build_id *fr_want;
	size_t fr_nranges; /* file bytes the server wants */
	struct fp_range *fr_ranges;
	size_t fr_ntables; /* unwind table parts for the agent */
	struct fp_table_part *fr_tables;
	uint8_t fr_has_written;     /* fr_written is sent (OK to SAMPLES) */
	uint64_t fr_written;        /* the session's intervals up to this seq are
				     * through the sinks; 0: none yet */
	struct fp_kfuncs fr_kfuncs; /* kf_n 0: none (to agents with FP_FEATURE_KFUNCS) */
	uint32_t fr_tables_pending; /* tables the session is still to get: more
				     * than this reply held, or being compiled
				     * (REPLY key 11; to FP_FEATURE_HELD_TABLES) */
};

/* fp_pycode_free: free c and what it owns; NULL is fine. */
void fp_pycode_free(struct fp_pycode *c);

/* *_fini release what the structure owns (not the structure itself). */
void fp_hello_fini(struct fp_hello *h);
/* fp_hello_copy: a deep copy of src in dst (NULL strings become "");
 * fp_hello_fini frees it.  0 or -ENOMEM (dst then holds nothing). */
int fp_hello_copy(struct fp_hello *dst, const struct fp_hello *src);
void fp_batch_fini(struct fp_batch *b);
void fp_ksyms_fini(struct fp_ksyms *k);
void fp_reply_fini(struct fp_reply *r);
void fp_kfuncs_fini(struct fp_kfuncs *k);
void fp_file_data_fini(struct fp_file_data *d);

#endif
