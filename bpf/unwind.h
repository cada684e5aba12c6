/* unwind.h: the unwind table format, shared by the symbolizer (which
 * compiles tables from CFI), the wire, the agent (which installs them) and
 * bpf/stacks.bpf.c (which walks them).  Fixed-width fields only.
 *
 * A table belongs to one file (build-ID).  It is a sorted array of rows;
 * a row applies from its ur_pc up to the next row's ur_pc.  Addresses are
 * FILE OFFSETS, not ELF virtual addresses: the agent turns a PC into a file
 * offset with the mapping's start and page offset, as it does for frames on
 * the wire, and the compiler turns CFI addresses into file offsets with the
 * PT_LOAD headers, so the device never needs the ELF layout.
 *
 * Rules were chosen for what compilers and libc emit on x86-64 and arm64;
 * anything else becomes FP_UNWIND_INVALID, and the walker then tries the
 * frame pointer.
 */
#ifndef FP_BPF_UNWIND_H
#define FP_BPF_UNWIND_H

#include <linux/types.h>

enum fp_unwind_rule {
	FP_UNWIND_NONE = 0,    /* no CFI covers this address: walk by frame pointer */
	FP_UNWIND_SP = 1,      /* CFA = SP + 8 * ur_cfa */
	FP_UNWIND_FP = 2,      /* CFA = FP (RBP, X29) + 8 * ur_cfa */
	FP_UNWIND_PLT = 3,     /* x86-64 PLT: CFA = SP + 8 + ((PC & 15) >= 11 ? 8 : 0) */
	FP_UNWIND_STOP = 4,    /* return address undefined: the outermost frame */
	FP_UNWIND_SIGNAL = 5,  /* signal trampoline: registers are in the signal frame at SP */
	FP_UNWIND_INVALID = 6, /* CFI we cannot express: try the frame pointer */
};

/* One row, 8 bytes.
 * ur_rule: low 4 bits enum fp_unwind_rule; high 4 bits (arm64 only) the
 *          slot of the return address as a signed 4-bit count of 8-byte
 *          words from the CFA (X30 saved at CFA + 8 * slot), 0 when it is
 *          still in the link register.  x86-64: always 0 (RA at CFA - 8).
 * ur_fp:   the caller's frame pointer is saved at CFA + 8 * ur_fp; 0 when
 *          it is not saved (the register still holds it). */
struct fp_unwind_row {
	__u32 ur_pc;
	__u16 ur_cfa;
	__u8 ur_rule;
	__s8 ur_fp;
};

#define FP_UNWIND_RULE(r) ((r)->ur_rule & 0x0f)
#define FP_UNWIND_RA_SLOT(r) ((__s8)((r)->ur_rule & 0xf0) >> 4)

/* A compiled table as stored (LMDB) and sent (wire): this header, then
 * uh_nrows rows sorted by ur_pc with no two equal pcs, then, with
 * FP_UNWIND_F_CPYTHON, one struct fp_unwind_cpython; little-endian. */
#define FP_UNWIND_MAGIC "FPUW"
#define FP_UNWIND_VERSION 2
#define FP_UNWIND_ARCH_X86_64 1
#define FP_UNWIND_ARCH_ARM64 2
#define FP_UNWIND_F_FRAME_POINTERS 1  /* code keeps frame pointers: no table needed */
#define FP_UNWIND_F_CPYTHON 2         /* the file holds a CPython interpreter */
#define FP_UNWIND_MAX_ROWS (1u << 23) /* per file: OT#230's largest had 2.8 M */

struct fp_unwind_header {
	char uh_magic[4];
	__u16 uh_version;
	__u8 uh_arch;
	__u8 uh_flags;
	__u32 uh_nrows;
	__u32 uh_fdes; /* FDEs the table came from (statistics) */
};

/* Where a file that holds a CPython interpreter keeps what the walker
 * needs (bpf/python.h), found by the symbolizer in its symbol tables so
 * that the device never reads them.
 * uc_version: major << 8 | minor (0x030b for 3.11); 0 when unknown.
 * uc_runtime: _PyRuntime's address minus the load bias of the segment the
 *             eval loop is in, as a file offset there would be: the agent
 *             adds the executable mapping's start minus its page offset.
 * uc_eval:    file offsets [start, end) of _PyEval_EvalFrameDefault and of
 *             its .cold part; unused entries are [0, 0). */
#define FP_UNWIND_CPYTHON_RANGES 2
struct fp_unwind_cpython {
	__u32 uc_version;
	__u32 uc_pad;
	__s64 uc_runtime;
	struct {
		__u32 start, end;
	} uc_eval[FP_UNWIND_CPYTHON_RANGES];
};

/* What the BPF program knows of a process it unwinds: its mappings that
 * have a table, sorted by start, as a run of entries of the mappings array
 * (unwind_mapv) that the agent allocates per process.  An address outside
 * them walks by frame pointer.
 *
 * Sizes: redis-server maps 18 files with code, python3.11 with a few
 * extension modules 13, fleetprof-symbolizer 46; FP_UNWIND_MAPS bounds
 * one process.  A process has a list only while it is sampled and its
 * code has tables: the whole test VM, busy with builds and VMs, had 41
 * lists of 71 mappings (make bench, device part).  256 lists and 2,048
 * mappings take 21 KiB of hash (preallocated: kernels before 5.13 refuse
 * other hash maps in perf_event programs) and 48 KiB of array.  When
 * either is full, the lists of processes that exited are dropped; a
 * process that still does not fit is walked by frame pointer. */
#define FP_UNWIND_MAPS 64     /* per process, at most */
#define FP_UNWIND_PROCS 256   /* processes with tables at once */
#define FP_UNWIND_MAPV 2048   /* mappings of all of them */
#define FP_UNWIND_TABLES 1024 /* tables installed at once */
#define FP_UNWIND_NO_TABLE 0xffffffffu

struct fp_unwind_map {
	__u64 um_start; /* first address */
	__u64 um_bias;  /* file offset = address - um_bias */
	__u32 um_len;   /* bytes */
	__u32 um_table; /* index into the tables map */
};

/* The walkers (slots of the walk_prog array): the native one, and the one
 * that also writes CPython frames, loaded when the first CPython process
 * shows up. */
enum fp_walker {
	FP_WALKER_NATIVE = 0,
	FP_WALKER_PYTHON = 1,
	FP_WALKERS = 2,
};

struct fp_unwind_proc {
	__u32 up_first; /* its first mapping in unwind_mapv */
	__u8 up_nmaps;  /* how many, at most FP_UNWIND_MAPS */
	__u8 up_walker; /* enum fp_walker */
	__u16 up_pad;
};

/* Rows live in chunks of FP_UNWIND_CHUNK_ROWS, BPF arrays the agent
 * creates when a table first needs them and frees when no table uses them
 * any more; an array of maps holds them.  A table's rows are numbered as
 * one run in the whole budget, chunk = row >> FP_UNWIND_CHUNK_SHIFT, and
 * may span chunks.  64 KiB chunks: the kernel adds a page to each
 * (BPF_F_MMAPABLE), 6%; the last chunk in use is half empty on average,
 * 32 KiB of waste. */
#define FP_UNWIND_CHUNK_SHIFT 13
#define FP_UNWIND_CHUNK_ROWS (1u << FP_UNWIND_CHUNK_SHIFT)

/* Where a table's rows sit among all rows; ut_nrows 0: slot unused. */
struct fp_unwind_table {
	__u32 ut_first;
	__u32 ut_nrows;
};

#endif
