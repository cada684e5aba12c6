/* collector.c: interning of mappings, threads and stack trie nodes;
 * interval counts. */
#include "collector.h"
#include "cli.h"
#include "container.h"
#include "elfnote.h"
#include "intern.h"
#include "kfuncs.h"
#include "procmaps.h"
#include "pyline.h"
#include "python.h"
#include "vec.h"

#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <linux/bpf.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#define PROCS_REFRESH_CUTS 6 /* forget cached process state every N intervals */

enum def_state {
	DEF_UNSENT = 0,
	DEF_IN_FLIGHT = 1, /* in the batch being sent */
	DEF_KNOWN = 2,
};

struct mapping_key {
	uint8_t mk_kind;
	uint8_t mk_build_id_len;
	uint8_t mk_build_id[FP_BUILD_ID_MAX];
	uint8_t mk_pad[2];
	char mk_path[]; /* NUL-terminated */
};

struct thread_key {
	uint32_t tk_pid, tk_tid;
	uint64_t tk_cgroup;
	char tk_comm[FP_COMM_LEN];
};

struct node_key {
	uint32_t nk_parent;
	uint32_t nk_mapping;
	uint64_t nk_offset;
};

struct pair_key { /* what a count is of */
	uint32_t pk_thread;
	uint32_t pk_node;
	uint32_t pk_offcpu; /* 1: blocks off-CPU, 0: CPU samples */
};

/* A pair's off-CPU estimates this interval (bpf/stacks.bpf.c: a block
 * whose stacks were taken with probability q stands for 1 / q blocks of
 * its length). */
struct offcpu_sum {
	uint64_t os_ns;
	double os_blocks;
};

/* A thread's off-CPU time this interval: exact, as the BPF program
 * reports it, and as its stacks' weights add up. */
struct offcpu_thread {
	uint64_t ot_away_ns;
	uint64_t ot_weighed_ns;
};

/* A thread off-CPU whose stacks came, until it is back (by tid). */
struct offcpu_pending {
	uint64_t op_start; /* 0: none */
	uint32_t op_thread, op_node, op_q;
};

struct thread_info {
	char ti_process[FP_COMM_LEN];
	char *ti_container;
};

/* The same-line runs of a Python code object's bytecode (pyline.h), decoded
 * once when the code object is read: the offset each run starts at,
 * ascending from 0, and where the last one ends.  A frame's instruction
 * offset is sent as its run's start, so that the trie has a node per line
 * of Python, not per instruction. */
struct py_lines {
	uint32_t *pl_starts;
	uint32_t pl_n;
	uint64_t pl_end;
};

/* Run starts fit in 32 bits: a table has at most FP_PY_LINETABLE_MAX
 * bytes, and each moves the offset by at most 255 (3.9: 255 per 2-byte
 * pair) or 16 bytes (3.11+: 8 code units per header byte). */
_Static_assert((uint64_t)FP_PY_LINETABLE_MAX * 255 < UINT32_MAX, "run starts fit in 32 bits");

struct proc_entry {
	struct fp_procmaps *pe_maps;
	int pe_known;         /* the sampler sends this process's raw addresses */
	uint64_t pe_maps_cut; /* cut number when pe_maps was read */
	uint64_t pe_maps_ns;  /* and when (CLOCK_MONOTONIC) */
	int pe_have_info;
	char pe_name[FP_COMM_LEN];
	char pe_container[128];
};

struct fp_collector {
	const char *cl_proc, *cl_docker;
	const struct fp_kernel *cl_kernel;
	struct fp_intern *cl_mappings, *cl_threads, *cl_nodes, *cl_pairs, *cl_procs, *cl_paths;
	uint8_t *cl_mstate, *cl_tstate, *cl_nstate;
	size_t cl_mstate_cap, cl_tstate_cap, cl_nstate_cap;
	struct thread_info *cl_tinfo;
	size_t cl_tinfo_cap;
	struct proc_entry *cl_procv;
	size_t cl_procv_cap;
	char **cl_pathv;      /* build-ID -> path, by cl_paths id */
	uint32_t *cl_pathpid; /* and the process that reported it */
	size_t cl_pathv_cap, cl_pathpid_cap;
	uint32_t *cl_counts; /* by pair id, this interval */
	size_t cl_counts_cap;
	struct offcpu_sum *cl_offcpu; /* by pair id, off-CPU pairs only */
	size_t cl_offcpu_cap;
	struct offcpu_thread *cl_offthreads; /* by thread id, this interval */
	size_t cl_offthreads_cap;
	struct fp_intern *cl_pending_tids; /* tid -> index of cl_pending */
	struct offcpu_pending *cl_pending;
	size_t cl_pending_cap;
	uint32_t *cl_touched; /* pair ids with a count this interval */
	size_t cl_ntouched, cl_touched_cap;
	uint64_t cl_cuts;
	uint64_t cl_interval_start_ns;
	int cl_oom; /* samples dropped for lack of memory */
	fp_known_fn cl_known_fn;
	void *cl_known_arg;
	fp_maps_fn cl_maps_fn;
	void *cl_maps_arg;
	fp_pycode_fn cl_pycode_fn;
	void *cl_pycode_arg;
	fp_fold_fn cl_fold_fn;
	void *cl_fold_arg;
	fp_cut_fn cl_cut_fn;
	void *cl_cut_arg;
	uint64_t cl_folded;
	const struct fp_kfuncs *cl_kfuncs; /* the caller's; NULL: no kernel folding */
	uint64_t cl_kfolded;
	struct fp_pycode **cl_pycode; /* by mapping id: Python code objects */
	char **cl_pyfile;
	struct py_lines *cl_pylines; /* by mapping id: their line runs */
	size_t cl_pycode_cap, cl_pyfile_cap, cl_pylines_cap, cl_py_bytes;
	uint32_t cl_files_listed; /* cl_paths ids passed to fp_collector_new_files */
	uint32_t *cl_announce;    /* mappings to define before any frame uses them */
	size_t cl_nannounce, cl_announce_cap;
	struct fp_frame cl_frames[FP_MAX_FRAMES]; /* the sample being added */
	uint32_t *cl_chain;                       /* scratch for fp_collector_batch */
};

int fp_collector_alloc(struct fp_collector **out, const char *proc, const char *docker_root,
		       const struct fp_kernel *k)
{
	struct fp_collector *c = calloc(1, sizeof(*c));

	if (!c)
		return -ENOMEM;
	c->cl_proc = proc;
	c->cl_docker = docker_root;
	c->cl_kernel = k;
	c->cl_interval_start_ns = fp_now_ns(CLOCK_REALTIME); /* the first interval starts now */
	if (fp_intern_alloc(&c->cl_mappings) || fp_intern_alloc(&c->cl_threads) ||
	    fp_intern_alloc(&c->cl_nodes) || fp_intern_alloc(&c->cl_pairs) ||
	    fp_intern_alloc(&c->cl_procs) || fp_intern_alloc(&c->cl_paths)) {
		fp_collector_free(c);
		return -ENOMEM;
	}
	*out = c;
	return 0;
}

void fp_collector_set_known_fn(struct fp_collector *c, fp_known_fn fn, void *arg)
{
	c->cl_known_fn = fn;
	c->cl_known_arg = arg;
}

void fp_collector_set_maps_fn(struct fp_collector *c, fp_maps_fn fn, void *arg)
{
	c->cl_maps_fn = fn;
	c->cl_maps_arg = arg;
}

void fp_collector_set_pycode_fn(struct fp_collector *c, fp_pycode_fn fn, void *arg)
{
	c->cl_pycode_fn = fn;
	c->cl_pycode_arg = arg;
}

void fp_collector_set_fold_fn(struct fp_collector *c, fp_fold_fn fn, void *arg)
{
	c->cl_fold_fn = fn;
	c->cl_fold_arg = arg;
}

void fp_collector_set_cut_fn(struct fp_collector *c, fp_cut_fn fn, void *arg)
{
	c->cl_cut_fn = fn;
	c->cl_cut_arg = arg;
}

void fp_collector_set_kfuncs(struct fp_collector *c, const struct fp_kfuncs *k)
{
	c->cl_kfuncs = k;
}

static void set_known(struct fp_collector *c, struct proc_entry *pe, uint32_t pid, int known)
{
	if (pe->pe_known == known || !c->cl_known_fn)
		return;
	pe->pe_known = known;
	c->cl_known_fn(pid, known, c->cl_known_arg);
}

static void procs_clear(struct fp_collector *c)
{
	size_t i, n = fp_intern_count(c->cl_procs);

	if (c->cl_known_fn)
		c->cl_known_fn(0, 0, c->cl_known_arg);
	for (i = 0; i < n; i++)
		fp_procmaps_free(c->cl_procv[i].pe_maps);
	if (c->cl_procv) /* memset(NULL, 0, 0) is undefined */
		memset(c->cl_procv, 0, c->cl_procv_cap * sizeof(*c->cl_procv));
	fp_intern_clear(c->cl_procs);
}

void fp_collector_free(struct fp_collector *c)
{
	size_t i;

	if (!c)
		return;
	c->cl_known_fn = NULL; /* the sampler may be gone already */
	if (c->cl_procs)
		procs_clear(c);
	for (i = 0; c->cl_threads && i < fp_intern_count(c->cl_threads); i++)
		free(c->cl_tinfo[i].ti_container);
	for (i = 0; c->cl_paths && i < fp_intern_count(c->cl_paths); i++)
		free(c->cl_pathv[i]);
	for (i = 0; i < c->cl_pycode_cap; i++)
		fp_pycode_free(c->cl_pycode[i]);
	for (i = 0; i < c->cl_pyfile_cap; i++)
		free(c->cl_pyfile[i]);
	for (i = 0; i < c->cl_pylines_cap; i++)
		free(c->cl_pylines[i].pl_starts);
	free(c->cl_pycode);
	free(c->cl_pyfile);
	free(c->cl_pylines);
	fp_intern_free(c->cl_mappings);
	fp_intern_free(c->cl_threads);
	fp_intern_free(c->cl_nodes);
	fp_intern_free(c->cl_pairs);
	fp_intern_free(c->cl_procs);
	fp_intern_free(c->cl_paths);
	free(c->cl_mstate);
	free(c->cl_tstate);
	free(c->cl_nstate);
	free(c->cl_chain);
	free(c->cl_tinfo);
	free(c->cl_procv);
	free(c->cl_pathv);
	free(c->cl_pathpid);
	free(c->cl_counts);
	free(c->cl_offcpu);
	free(c->cl_offthreads);
	fp_intern_free(c->cl_pending_tids);
	free(c->cl_pending);
	free(c->cl_touched);
	free(c->cl_announce);
	free(c);
}

static void read_comm(const char *proc, uint32_t pid, char *buf)
{
	char path[64];
	FILE *f;

	snprintf(path, sizeof(path), "%s/%" PRIu32 "/comm", proc, pid);
	buf[0] = '\0';
	f = fopen(path, "re");
	if (!f)
		return;
	if (fgets(buf, FP_COMM_LEN, f))
		buf[strcspn(buf, "\n")] = '\0';
	fclose(f);
}

static struct proc_entry *proc_get(struct fp_collector *c, uint32_t pid)
{
	struct proc_entry *pe;
	uint32_t id;

	if (fp_intern_get(c->cl_procs, &pid, sizeof(pid), &id, NULL) ||
	    fp_vec_reserve_zeroed(&c->cl_procv, &c->cl_procv_cap, (size_t)id + 1,
				  sizeof(*c->cl_procv)))
		return NULL;
	pe = &c->cl_procv[id];
	if (!pe->pe_have_info) {
		pe->pe_have_info = 1;
		read_comm(c->cl_proc, pid, pe->pe_name);
		fp_container_name(c->cl_proc, c->cl_docker, pid, pe->pe_container,
				  sizeof(pe->pe_container));
	}
	return pe;
}

static const char *remember_file(struct fp_collector *c, const struct fp_build_id *bid,
				 uint32_t pid, const char *path);

static int mapping_get(struct fp_collector *c, uint8_t kind, const struct fp_build_id *bid,
		       const char *path, uint32_t *id);

/* maps_read: pass a fresh copy of pid's mappings to the hook, every
 * build-ID read, so that it can name each mapping's file.  The mappings
 * are also defined to the symbolizer in the next batch, frames or not:
 * it sends unwind tables for the files it is told of, and a library that
 * only a whole walk would reach (libc below main) gets its table without
 * waiting for a walk that needs it. */
static void maps_read(struct fp_collector *c, uint32_t pid, struct fp_procmaps *pm)
{
	size_t i;

	if (!c->cl_maps_fn)
		return;
	for (i = 0; i < pm->pm_nvmas; i++) {
		struct fp_vma *v = &pm->pm_vmas[i];
		if (v->fv_path[0] != '/' || fp_procmaps_build_id(c->cl_proc, pm, v))
			continue;
		remember_file(c, &v->fv_build_id, pid, v->fv_path);
		if (v->fv_cookie == UINT32_MAX &&
		    mapping_get(c, FP_MAP_USER, &v->fv_build_id, v->fv_path, &v->fv_cookie))
			continue;
		if (!fp_vec_reserve_zeroed(&c->cl_announce, &c->cl_announce_cap,
					   c->cl_nannounce + 1, sizeof(*c->cl_announce)))
			c->cl_announce[c->cl_nannounce++] = v->fv_cookie;
	}
	c->cl_maps_fn(pid, pm, c->cl_maps_arg);
}

void fp_collector_remap(struct fp_collector *c)
{
	size_t i, n = fp_intern_count(c->cl_procs);
	size_t len;

	for (i = 0; c->cl_maps_fn && i < n; i++)
		if (c->cl_procv[i].pe_maps)
			c->cl_maps_fn(*(const uint32_t *)fp_intern_key(c->cl_procs, i, &len),
				      c->cl_procv[i].pe_maps, c->cl_maps_arg);
}

int fp_collector_new_files(struct fp_collector *c, fp_file_fn fn, void *arg)
{
	uint32_t n = (uint32_t)fp_intern_count(c->cl_paths);
	size_t len;
	int err;

	for (; c->cl_files_listed < n; c->cl_files_listed++) {
		uint32_t i = c->cl_files_listed;
		struct fp_build_id id = { 0 };
		const void *key = fp_intern_key(c->cl_paths, i, &len);

		if (!c->cl_pathv[i] || c->cl_pathv[i][0] != '/' || len > FP_BUILD_ID_MAX)
			continue;
		id.fb_len = (uint8_t)len;
		memcpy(id.fb_data, key, len);
		if ((err = fn(&id, c->cl_pathv[i], c->cl_pathpid[i], arg)))
			return err;
	}
	return 0;
}

/* proc_maps: pid's mappings, read again (refresh: an address in none of
 * them, a new library) at most once in this long within one interval: a
 * library loaded late in a long interval (record's only one) is found,
 * and a process that keeps mapping code costs a few reads a second. */
#define MAPS_REREAD_NS 250000000ull

static struct fp_procmaps *proc_maps(struct fp_collector *c, struct proc_entry *pe, uint32_t pid,
				     int refresh)
{
	uint64_t now;

	if (pe->pe_maps && !refresh)
		return pe->pe_maps;
	now = fp_now_ns(CLOCK_MONOTONIC);
	if (pe->pe_maps_cut == c->cl_cuts + 1 && now - pe->pe_maps_ns < MAPS_REREAD_NS)
		return pe->pe_maps;
	fp_procmaps_free(pe->pe_maps);
	pe->pe_maps = NULL;
	pe->pe_maps_cut = c->cl_cuts + 1;
	pe->pe_maps_ns = now;
	if (refresh) /* it may have exec'd: its name too */
		read_comm(c->cl_proc, pid, pe->pe_name);
	if (fp_procmaps_read(c->cl_proc, pid, &pe->pe_maps) == 0)
		maps_read(c, pid, pe->pe_maps);
	return pe->pe_maps;
}

int fp_collector_adopt(struct fp_collector *c, uint32_t pid)
{
	struct proc_entry *pe = proc_get(c, pid);

	if (!pe)
		return -ENOMEM;
	if (!proc_maps(c, pe, pid, 1))
		return -ESRCH;
	set_known(c, pe, pid, 1);
	return 0;
}

static int mapping_get(struct fp_collector *c, uint8_t kind, const struct fp_build_id *bid,
		       const char *path, uint32_t *id)
{
	size_t plen = strlen(path) + 1;
	union {
		struct mapping_key mk;
		unsigned char bytes[sizeof(struct mapping_key) + 4096];
	} key;

	if (plen > 4096)
		plen = 4096;
	memset(&key.mk, 0, sizeof(key.mk));
	key.mk.mk_kind = kind;
	if (bid) {
		key.mk.mk_build_id_len = bid->fb_len;
		memcpy(key.mk.mk_build_id, bid->fb_data, bid->fb_len);
	}
	memcpy(key.mk.mk_path, path, plen - 1);
	key.mk.mk_path[plen - 1] = '\0';
	if (fp_intern_get(c->cl_mappings, &key, sizeof(key.mk) + plen, id, NULL))
		return -ENOMEM;
	return fp_vec_reserve_zeroed(&c->cl_mstate, &c->cl_mstate_cap, (size_t)*id + 1, 1);
}

/* remember_file: which process maps the file with build-ID bid, should the
 * symbolizer ask for it (the latest to show it), and its path (the first
 * seen). */
static const char *remember_file(struct fp_collector *c, const struct fp_build_id *bid,
				 uint32_t pid, const char *path)
{
	uint32_t id;
	int added;

	if (fp_intern_get(c->cl_paths, bid->fb_data, bid->fb_len, &id, &added) ||
	    fp_vec_reserve_zeroed(&c->cl_pathv, &c->cl_pathv_cap, (size_t)id + 1,
				  sizeof(*c->cl_pathv)) ||
	    fp_vec_reserve_zeroed(&c->cl_pathpid, &c->cl_pathpid_cap, (size_t)id + 1,
				  sizeof(*c->cl_pathpid)))
		return NULL;
	if (path && (!c->cl_pathv[id] || (!c->cl_pathv[id][0] && path[0]))) {
		free(c->cl_pathv[id]); /* a real path replaces "not found" */
		c->cl_pathv[id] = strdup(path);
	}
	if (path && path[0])
		c->cl_pathpid[id] = pid; /* the latest process is likelier alive */
	return c->cl_pathv[id];
}

/* vma_of_build_id: the mapping of pm whose file has build-ID bid, or NULL. */
static struct fp_vma *vma_of_build_id(struct fp_collector *c, struct fp_procmaps *pm,
				      const struct fp_build_id *bid)
{
	for (size_t i = 0; pm && i < pm->pm_nvmas; i++) {
		struct fp_vma *v = &pm->pm_vmas[i];
		if (fp_procmaps_build_id(c->cl_proc, pm, v) == 0 &&
		    fp_build_id_match(&v->fv_build_id, bid))
			return v;
	}
	return NULL;
}

/* The kernel hands us (build-ID, offset) without a path; find the path in
 * the mappings of the process that reported it, once per build-ID. */
static const char *path_of_build_id(struct fp_collector *c, uint32_t pid,
				    const struct fp_build_id *bid)
{
	struct proc_entry *pe;
	struct fp_vma *v;
	const char *known = remember_file(c, bid, pid, NULL);

	if (known)
		return known;
	pe = proc_get(c, pid);
	v = pe ? vma_of_build_id(c, proc_maps(c, pe, pid, 0), bid) : NULL;
	if (!v && pe) {
		/* Not in our copy of the mappings: the process exec'd (or
		 * mapped the file) since it was read, maybe in this very
		 * interval.  Read them again, once per build-ID, so that the
		 * file can be opened should the symbolizer ask for it. */
		pe->pe_maps_cut = 0;
		v = vma_of_build_id(c, proc_maps(c, pe, pid, 1), bid);
	}
	/* Not found (process gone): remember "" rather than search again;
	 * a path seen later replaces it. */
	return remember_file(c, bid, pid, v ? v->fv_path : "") ?: "";
}

int fp_collector_open_file(struct fp_collector *c, const struct fp_build_id *id)
{
	struct fp_procmaps *pm;
	struct fp_build_id got;
	uint32_t idx, pid;
	int fd = -ENOENT;

	if (fp_intern_find(c->cl_paths, id->fb_data, id->fb_len, &idx))
		return -ENOENT;
	/* the mappings as they are now, not as last sampled */
	pid = c->cl_pathpid[idx];
	if (fp_procmaps_read(c->cl_proc, pid, &pm))
		return -ENOENT;
	for (size_t i = 0; i < pm->pm_nvmas && fd < 0; i++) {
		struct fp_vma *v = &pm->pm_vmas[i];

		if (fp_procmaps_build_id(c->cl_proc, pm, v) ||
		    !fp_build_id_match(&v->fv_build_id, id))
			continue;
		fd = fp_procmaps_open(c->cl_proc, pid, v);
		if (fd >= 0 && (fp_elfnote_build_id(fd, &got) || !fp_build_id_match(&got, id))) {
			close(fd);
			fd = -ENOENT;
		}
	}
	fp_procmaps_free(pm);
	return fd;
}

static int user_frame_by_ip(struct fp_collector *c, struct proc_entry *pe, uint32_t pid,
			    uint64_t ip, struct fp_frame *f)
{
	struct fp_procmaps *pm = pe ? proc_maps(c, pe, pid, 0) : NULL;
	struct fp_vma *v = pm ? fp_procmaps_find(pm, ip) : NULL;

	if (!v && pe) { /* new mapping since we read the maps? */
		pm = proc_maps(c, pe, pid, 1);
		v = pm ? fp_procmaps_find(pm, ip) : NULL;
		if (!v) /* let the kernel name the frames until we catch up */
			set_known(c, pe, pid, 0);
	}
	f->ff_mapping = FP_MAPPING_NONE;
	f->ff_offset = ip;
	if (!v || !v->fv_path[0])
		return 0; /* anonymous executable memory (JIT): raw address */
	if (v->fv_cookie == UINT32_MAX) {
		if (fp_procmaps_build_id(c->cl_proc, pm, v) == 0)
			remember_file(c, &v->fv_build_id, pid, v->fv_path);
		if (mapping_get(c, FP_MAP_USER, v->fv_build_id_state == 1 ? &v->fv_build_id : NULL,
				v->fv_path, &v->fv_cookie))
			return -ENOMEM;
	}
	f->ff_mapping = v->fv_cookie;
	f->ff_offset = ip - v->fv_start + v->fv_pgoff;
	return 0;
}

/* kernel_frame: ip, the stack's innermost frame when leaf, as a frame of
 * vmlinux or a module. */
static int kernel_frame(struct fp_collector *c, uint64_t ip, int leaf, struct fp_frame *f)
{
	const struct fp_kernel *k = c->cl_kernel;
	const struct fp_kmodule *m = fp_kernel_module(k, ip);
	uint64_t start;

	f->ff_mapping = FP_MAPPING_NONE;
	f->ff_offset = ip;
	if (m) {
		f->ff_offset = ip - m->km_base;
		return mapping_get(c, FP_MAP_KMODULE, &m->km_build_id, m->km_name, &f->ff_mapping);
	}
	if (k->kn_text && ip >= k->kn_text) {
		f->ff_offset = ip - k->kn_text;
		if (c->cl_kfuncs && fp_kfuncs_fold(c->cl_kfuncs, f->ff_offset, leaf, &start) == 0 &&
		    start != f->ff_offset) {
			f->ff_offset = start;
			c->cl_kfolded++;
		}
		return mapping_get(c, FP_MAP_KERNEL, &k->kn_build_id, "vmlinux", &f->ff_mapping);
	}
	return 0;
}

/* py_lines_build: the line runs of code's table.  Two passes, the first
 * to count them, so that the array is exactly their size. */
static int py_lines_build(const struct fp_pycode *code, struct py_lines *pl)
{
	struct fp_pyline_iter it;
	struct fp_pyline_run r;
	uint32_t n = 0;

	fp_pyline_iter_init(&it, code->pc_lines, code->pc_linetable, code->pc_linetable_len,
			    code->pc_firstlineno);
	while (fp_pyline_iter_next(&it, &r))
		n++;
	if (!n)
		return 0;
	if (!(pl->pl_starts = malloc(n * sizeof(*pl->pl_starts))))
		return -ENOMEM;
	fp_pyline_iter_init(&it, code->pc_lines, code->pc_linetable, code->pc_linetable_len,
			    code->pc_firstlineno);
	while (pl->pl_n < n && fp_pyline_iter_next(&it, &r)) {
		pl->pl_starts[pl->pl_n++] = (uint32_t)r.pr_start;
		pl->pl_end = r.pr_end;
	}
	return 0;
}

/* py_line_start: the start of the run that holds lasti; lasti itself when
 * it is unknown or in no run (past the table's end, a damaged table, a
 * code object that could not be read), for the symbolizer to judge. */
static uint32_t py_line_start(const struct py_lines *pl, uint32_t lasti)
{
	uint32_t lo = 0, hi = pl->pl_n;

	if (lasti == FP_PY_OFFSET_UNKNOWN || !pl->pl_n || lasti >= pl->pl_end)
		return lasti;
	while (hi - lo > 1) { /* pl_starts[lo] <= lasti < pl_starts[hi] */
		uint32_t mid = lo + (hi - lo) / 2;
		if (pl->pl_starts[mid] <= lasti)
			lo = mid;
		else
			hi = mid;
	}
	return pl->pl_starts[lo];
}

/* python_frame: the frame of a Python code object: a mapping per (pid,
 * address, tag), read once, "[unknown]" when it cannot be read; its
 * offset the first of lasti's line (py_lines). */
static int python_frame(struct fp_collector *c, uint32_t pid, uint64_t addr, uint32_t tag,
			uint32_t lasti, struct fp_frame *f)
{
	struct fp_build_id key = { .fb_len = 16 };
	struct fp_pycode *code = NULL;
	char *file = NULL;
	uint32_t before = (uint32_t)fp_intern_count(c->cl_mappings);

	memcpy(key.fb_data, &pid, 4);
	memcpy(key.fb_data + 4, &addr, 8);
	memcpy(key.fb_data + 12, &tag, 4);
	if (mapping_get(c, FP_MAP_PYTHON, &key, "", &f->ff_mapping))
		return -ENOMEM;
	if (f->ff_mapping < before) { /* read before, or out of memory then */
		f->ff_offset = f->ff_mapping < c->cl_pylines_cap
				       ? py_line_start(&c->cl_pylines[f->ff_mapping], lasti)
				       : lasti;
		return 0;
	}
	if (fp_vec_reserve_zeroed(&c->cl_pycode, &c->cl_pycode_cap, (size_t)f->ff_mapping + 1,
				  sizeof(*c->cl_pycode)) ||
	    fp_vec_reserve_zeroed(&c->cl_pyfile, &c->cl_pyfile_cap, (size_t)f->ff_mapping + 1,
				  sizeof(*c->cl_pyfile)) ||
	    fp_vec_reserve_zeroed(&c->cl_pylines, &c->cl_pylines_cap, (size_t)f->ff_mapping + 1,
				  sizeof(*c->cl_pylines)))
		return -ENOMEM;
	if (!c->cl_pycode_fn || c->cl_pycode_fn(pid, addr, tag, &code, &file, c->cl_pycode_arg)) {
		if (!(code = calloc(1, sizeof(*code))) ||
		    !(code->pc_qualname = strdup("[unknown]"))) {
			fp_pycode_free(code);
			return -ENOMEM;
		}
		code->pc_lines = FP_PY_LOCATIONS;
	}
	c->cl_pycode[f->ff_mapping] = code;
	c->cl_pyfile[f->ff_mapping] = file;
	if (py_lines_build(code, &c->cl_pylines[f->ff_mapping]))
		return -ENOMEM;
	c->cl_py_bytes += sizeof(*code) + strlen(code->pc_qualname) + code->pc_linetable_len +
			  (file ? strlen(file) : 0) +
			  c->cl_pylines[f->ff_mapping].pl_n * sizeof(uint32_t);
	f->ff_offset = py_line_start(&c->cl_pylines[f->ff_mapping], lasti);
	return 0;
}

static int thread_get(struct fp_collector *c, const struct fp_bpf_sample *s, uint32_t *id)
{
	struct thread_key key;
	struct proc_entry *pe;
	int added;

	memset(&key, 0, sizeof(key));
	key.tk_pid = s->pid;
	key.tk_tid = s->tid;
	key.tk_cgroup = s->cgroup_id;
	memcpy(key.tk_comm, s->comm, FP_COMM_LEN - 1);
	if (fp_intern_get(c->cl_threads, &key, sizeof(key), id, &added) ||
	    fp_vec_reserve_zeroed(&c->cl_tstate, &c->cl_tstate_cap, (size_t)*id + 1, 1) ||
	    fp_vec_reserve_zeroed(&c->cl_tinfo, &c->cl_tinfo_cap, (size_t)*id + 1,
				  sizeof(*c->cl_tinfo)))
		return -ENOMEM;
	if (added) {
		struct thread_info *ti = &c->cl_tinfo[*id];
		pe = proc_get(c, s->pid);
		/* The main thread's name is the process's, as the sample saw
		 * it: a name read before an exec (a shell script that execs
		 * python3) must not stay. */
		if (pe && s->pid == s->tid && s->comm[0])
			memcpy(pe->pe_name, key.tk_comm, FP_COMM_LEN);
		memcpy(ti->ti_process, pe && pe->pe_name[0] ? pe->pe_name : key.tk_comm,
		       FP_COMM_LEN);
		ti->ti_container = strdup(pe ? pe->pe_container : "");
		if (!ti->ti_container)
			return -ENOMEM;
	}
	return 0;
}

/* User frames the kernel resolved to (build-ID, offset).  The process is
 * not known to the sampler (new, or it exec'd): read its mappings now, so
 * that its next samples can come as plain addresses. */
static int add_build_id_frames(struct fp_collector *c, const struct fp_bpf_sample *s,
			       const void *ustack, uint32_t *n)
{
	struct proc_entry *pe;
	uint32_t i;

	for (i = 0; i < s->ustack_bytes / sizeof(struct bpf_stack_build_id) && *n < FP_MAX_FRAMES;
	     i++) {
		struct bpf_stack_build_id u;
		struct fp_frame *f = &c->cl_frames[*n];

		memcpy(&u, (const char *)ustack + i * sizeof(u), sizeof(u));
		if (u.status == BPF_STACK_BUILD_ID_VALID) {
			struct fp_build_id bid = { .fb_len = BPF_BUILD_ID_SIZE };
			memcpy(bid.fb_data, u.build_id, BPF_BUILD_ID_SIZE);
			if (mapping_get(c, FP_MAP_USER, &bid, path_of_build_id(c, s->pid, &bid),
					&f->ff_mapping))
				return -ENOMEM;
			f->ff_offset = u.offset;
		} else if (u.status == BPF_STACK_BUILD_ID_IP) {
			if (user_frame_by_ip(c, proc_get(c, s->pid), s->pid, u.ip, f))
				return -ENOMEM;
		} else {
			continue;
		}
		(*n)++;
	}
	pe = proc_get(c, s->pid);
	if (!pe)
		return 0;
	/* Known to us but not to the kernel: it dropped the pid on exec (or
	 * exit and reuse), so our copy of the mappings is stale.  Samples
	 * queued before our own update arrive this way too; those come in the
	 * interval the mappings were read in, and are left alone. */
	if (pe->pe_known && pe->pe_maps_cut != c->cl_cuts + 1) {
		fp_procmaps_free(pe->pe_maps);
		pe->pe_maps = NULL;
		pe->pe_maps_cut = 0;
		pe->pe_known = 0;
	}
	if (!pe->pe_known && proc_maps(c, pe, s->pid, 1))
		set_known(c, pe, s->pid, 1);
	return 0;
}

/* fold_frame: f, a native frame below a stack's innermost Python frame,
 * at the start of its code (fp_fold_fn) when the hook knows it. */
static void fold_frame(struct fp_collector *c, struct fp_frame *f)
{
	const struct mapping_key *mk;
	struct fp_build_id id;
	uint64_t start;
	size_t len;

	if (!c->cl_fold_fn || f->ff_mapping == FP_MAPPING_NONE)
		return;
	mk = fp_intern_key(c->cl_mappings, f->ff_mapping, &len);
	if (mk->mk_kind != FP_MAP_USER || !mk->mk_build_id_len)
		return;
	id.fb_len = mk->mk_build_id_len;
	memcpy(id.fb_data, mk->mk_build_id, id.fb_len);
	if (c->cl_fold_fn(&id, f->ff_offset, &start, c->cl_fold_arg) == 0 &&
	    start != f->ff_offset) {
		f->ff_offset = start;
		c->cl_folded++;
	}
}

/* node_chain: intern the frames as a path of the trie, outermost first;
 * *leaf is the innermost node (FP_NODE_NONE without frames). */
static int node_chain(struct fp_collector *c, uint32_t n, uint32_t *leaf)
{
	uint32_t parent = FP_NODE_NONE, i;

	for (i = n; i-- > 0;) {
		struct node_key k = { parent, c->cl_frames[i].ff_mapping,
				      c->cl_frames[i].ff_offset };
		if (fp_intern_get(c->cl_nodes, &k, sizeof(k), &parent, NULL) ||
		    fp_vec_reserve_zeroed(&c->cl_nstate, &c->cl_nstate_cap, (size_t)parent + 1, 1))
			return -ENOMEM;
	}
	*leaf = parent;
	return 0;
}

/* pair_get: the id of pair pk in *pair, with room for its count and
 * its place among this interval's touched pairs.  0 or -ENOMEM. */
static int pair_get(struct fp_collector *c, const struct pair_key *pk, uint32_t *pair)
{
	if (fp_intern_get(c->cl_pairs, pk, sizeof(*pk), pair, NULL) ||
	    fp_vec_reserve_zeroed(&c->cl_counts, &c->cl_counts_cap, (size_t)*pair + 1,
				  sizeof(*c->cl_counts)) ||
	    fp_vec_reserve_zeroed(&c->cl_touched, &c->cl_touched_cap, c->cl_ntouched + 1,
				  sizeof(*c->cl_touched)))
		return -ENOMEM;
	return 0;
}

/* pair_bump: one more count of pair this interval (after pair_get). */
static void pair_bump(struct fp_collector *c, uint32_t pair)
{
	if (c->cl_counts[pair]++ == 0)
		c->cl_touched[c->cl_ntouched++] = pair;
}

/* offcpu_pending: the stacks of a thread that left its CPU (s), as its
 * thread and leaf node, until it is back.  0 or -ENOMEM. */
static int offcpu_pending(struct fp_collector *c, const struct fp_bpf_sample *s, uint32_t thread,
			  uint32_t node)
{
	uint32_t id;

	if (!s->pad || !s->off_start)
		return 0; /* nothing to weigh it by: not from our program */
	if ((!c->cl_pending_tids && fp_intern_alloc(&c->cl_pending_tids)) ||
	    fp_intern_get(c->cl_pending_tids, &s->tid, sizeof(s->tid), &id, NULL) ||
	    fp_vec_reserve_zeroed(&c->cl_pending, &c->cl_pending_cap, (size_t)id + 1,
				  sizeof(*c->cl_pending)))
		return -ENOMEM;
	c->cl_pending[id] = (struct offcpu_pending){ s->off_start, thread, node, s->pad };
	return 0;
}

/* offcpu_done: the thread of s is back after s->off_ns: its pending
 * stacks, if they are of that block, are counted, weighed by their q. */
static void offcpu_done(struct fp_collector *c, const struct fp_bpf_sample *s)
{
	struct pair_key pk = { 0 };
	struct offcpu_pending *p;
	uint32_t id, pair;

	if (!c->cl_pending_tids ||
	    fp_intern_find(c->cl_pending_tids, &s->tid, sizeof(s->tid), &id) ||
	    (p = &c->cl_pending[id])->op_start != s->off_start || !p->op_q)
		return; /* not the wait whose stacks came (its stacks were lost) */
	pk = (struct pair_key){ p->op_thread, p->op_node, 1 };
	p->op_start = 0;
	if (pair_get(c, &pk, &pair) ||
	    fp_vec_reserve_zeroed(&c->cl_offcpu, &c->cl_offcpu_cap, (size_t)pair + 1,
				  sizeof(*c->cl_offcpu)) ||
	    fp_vec_reserve_zeroed(&c->cl_offthreads, &c->cl_offthreads_cap,
				  (size_t)pk.pk_thread + 1, sizeof(*c->cl_offthreads))) {
		c->cl_oom++;
		return;
	}
	pair_bump(c, pair);
	c->cl_offcpu[pair].os_ns += (uint64_t)((double)s->off_ns * 65536.0 / p->op_q + 0.5);
	c->cl_offcpu[pair].os_blocks += 65536.0 / p->op_q;
	c->cl_offthreads[pk.pk_thread].ot_away_ns += s->off_away_ns;
}

/* walk_cut: a walk stopped at address last (cl_cut_fn). */
static void walk_cut(struct fp_collector *c, struct proc_entry *pe, uint64_t last)
{
	const struct fp_vma *v = pe && pe->pe_maps ? fp_procmaps_find(pe->pe_maps, last) : NULL;

	if (v && v->fv_build_id_state == 1)
		c->cl_cut_fn(&v->fv_build_id, c->cl_cut_arg);
}

void fp_collector_add(struct fp_collector *c, const struct fp_bpf_sample *s, const void *ustack,
		      const void *kstack)
{
	struct pair_key pk = { 0 };
	uint32_t n = 0, i, pair;

	if (s->flags & FP_SAMPLE_OFFCPU_DONE) {
		offcpu_done(c, s);
		return;
	}
	pk.pk_offcpu = !!(s->flags & FP_SAMPLE_OFFCPU);
	if (thread_get(c, s, &pk.pk_thread))
		goto oom;
	for (i = 0; i < s->kstack_bytes / 8 && n < FP_MAX_FRAMES; i++) {
		uint64_t ip;
		memcpy(&ip, (const char *)kstack + i * 8, 8);
		if (!ip)
			break;
		if (kernel_frame(c, ip, i == 0, &c->cl_frames[n++]))
			goto oom;
	}
	if (s->flags & FP_SAMPLE_USER_RAW) {
		struct proc_entry *pe = proc_get(c, s->pid);
		uint32_t nslots = s->ustack_bytes / 8, user = 0, leaf = n, py = FP_MAX_FRAMES;
		uint64_t last = 0; /* the last native frame's address */
		/* Python frames that do not match the eval loop activations
		 * they replace are dropped; the activations stay. */
		int py_ok = !(s->flags & FP_SAMPLE_PY_MISMATCH);
		for (i = 0; i < nslots && n < FP_MAX_FRAMES; i++) {
			uint64_t ip, code;
			memcpy(&ip, (const char *)ustack + i * 8, 8);
			if (ip & FP_PY_SLOT_FRAME) {
				if (++i >= nslots)
					break;
				memcpy(&code, (const char *)ustack + i * 8, 8);
				if (!py_ok)
					continue;
				if (python_frame(c, s->pid, code, FP_PY_SLOT_TAG(ip),
						 FP_PY_SLOT_LASTI(ip), &c->cl_frames[n++]))
					goto oom;
				if (py == FP_MAX_FRAMES)
					py = n - 1;
				user++;
				continue;
			}
			if (ip & FP_PY_SLOT_EVAL) {
				if (py_ok)
					continue;
				ip &= ~FP_PY_SLOT_EVAL;
			}
			/* Past the leaf, an address outside every executable
			 * mapping is no return address: a frame-pointer walk
			 * through code without frame pointers read a stack
			 * word.  The stack ends there. */
			if (user && pe && pe->pe_maps && !fp_procmaps_find(pe->pe_maps, ip))
				break;
			if (user_frame_by_ip(c, pe, s->pid, ip, &c->cl_frames[n++]))
				goto oom;
			user++;
			last = ip;
		}
		if (c->cl_cut_fn && last && !(s->flags & FP_SAMPLE_ROOT))
			walk_cut(c, pe, last);
		/* Below Python frames, what tells is which C functions
		 * Python called; their exact addresses only multiply nodes. */
		for (i = leaf; py < n && i < py; i++)
			fold_frame(c, &c->cl_frames[i]);
	} else {
		if (add_build_id_frames(c, s, ustack, &n))
			goto oom;
	}
	if (node_chain(c, n, &pk.pk_node))
		goto oom;
	if (pk.pk_offcpu) { /* counted when the thread is back */
		if (offcpu_pending(c, s, pk.pk_thread, pk.pk_node))
			goto oom;
		return;
	}
	if (pair_get(c, &pk, &pair))
		goto oom;
	pair_bump(c, pair);
	return;
oom:
	c->cl_oom++;
}

int fp_collector_cut(struct fp_collector *c, uint64_t seq, uint64_t end_ns, struct fp_interval *iv)
{
	struct fp_interval n = { 0 };
	size_t i;

	n.fi_seq = seq;
	n.fi_start_ns = c->cl_interval_start_ns;
	n.fi_end_ns = end_ns;
	if (c->cl_ntouched) {
		n.fi_counts = malloc(c->cl_ntouched * sizeof(*n.fi_counts));
		if (!n.fi_counts)
			return -ENOMEM;
	}
	/* Each thread's off-CPU time is the BPF program's exact sum; its
	 * stacks' weights only share it out. */
	for (i = 0; i < c->cl_ntouched; i++) {
		size_t len;
		const struct pair_key *pk = fp_intern_key(c->cl_pairs, c->cl_touched[i], &len);
		if (pk->pk_offcpu)
			c->cl_offthreads[pk->pk_thread].ot_weighed_ns +=
				c->cl_offcpu[c->cl_touched[i]].os_ns;
	}
	for (i = 0; i < c->cl_ntouched; i++) {
		uint32_t p = c->cl_touched[i];
		size_t len;
		const struct pair_key *pk = fp_intern_key(c->cl_pairs, p, &len);

		n.fi_counts[i] = (struct fp_count){ pk->pk_thread, pk->pk_node, c->cl_counts[p],
						    0 };
		if (pk->pk_offcpu) {
			struct offcpu_sum *o = &c->cl_offcpu[p];
			const struct offcpu_thread *t = &c->cl_offthreads[pk->pk_thread];
			double blocks = o->os_blocks + 0.5, ns = (double)o->os_ns;
			if (t->ot_away_ns && t->ot_weighed_ns)
				ns = ns * (double)t->ot_away_ns / (double)t->ot_weighed_ns;
			n.fi_counts[i].fc_count = blocks >= UINT32_MAX ? UINT32_MAX
						  : blocks < 1         ? 1
								       : (uint32_t)blocks;
			n.fi_counts[i].fc_off_ns = ns >= 1 ? (uint64_t)(ns + 0.5) : 1;
			n.fi_offcpu_ns += n.fi_counts[i].fc_off_ns;
			*o = (struct offcpu_sum){ 0, 0 };
		} else {
			n.fi_samples += c->cl_counts[p];
		}
		c->cl_counts[p] = 0;
	}
	for (i = 0; i < c->cl_ntouched; i++) {
		size_t len;
		const struct pair_key *pk = fp_intern_key(c->cl_pairs, c->cl_touched[i], &len);
		if (pk->pk_offcpu)
			c->cl_offthreads[pk->pk_thread] = (struct offcpu_thread){ 0, 0 };
	}
	n.fi_ncounts = c->cl_ntouched;
	n.fi_lost.fl_samples = c->cl_oom;
	c->cl_ntouched = 0;
	c->cl_interval_start_ns = end_ns;
	if (++c->cl_cuts % PROCS_REFRESH_CUTS == 0)
		procs_clear(c);
	*iv = n;
	return 0;
}

void fp_interval_fini(struct fp_interval *iv)
{
	free(iv->fi_counts);
	memset(iv, 0, sizeof(*iv));
}

/* push: append one element to a batch array of unknown final size. */
static int push(void *pp, size_t *n, size_t *cap, size_t elem, const void *v)
{
	void **p = pp;

	if (fp_vec_reserve_zeroed(p, cap, *n + 1, elem))
		return -ENOMEM;
	memcpy((char *)*p + *n * elem, v, elem);
	(*n)++;
	return 0;
}

static int batch_thread(struct fp_collector *c, uint32_t tid, struct fp_batch *b, size_t *cap)
{
	const struct thread_key *tk;
	const struct thread_info *ti;
	struct fp_thread t;
	size_t len;

	if (c->cl_tstate[tid] != DEF_UNSENT)
		return 0;
	tk = fp_intern_key(c->cl_threads, tid, &len);
	ti = &c->cl_tinfo[tid];
	t = (struct fp_thread){ .ft_id = tid,
				.ft_pid = tk->tk_pid,
				.ft_tid = tk->tk_tid,
				.ft_cgroup = tk->tk_cgroup,
				.ft_container = ti->ti_container };
	memcpy(t.ft_comm, tk->tk_comm, FP_COMM_LEN);
	memcpy(t.ft_process, ti->ti_process, FP_COMM_LEN);
	c->cl_tstate[tid] = DEF_IN_FLIGHT;
	return push(&b->fb_threads, &b->fb_nthreads, cap, sizeof(t), &t);
}

static int batch_mapping(struct fp_collector *c, uint32_t m, struct fp_batch *b, size_t *cap)
{
	const struct mapping_key *mk;
	struct fp_mapping fm;
	size_t len;

	if (m == FP_MAPPING_NONE || c->cl_mstate[m] != DEF_UNSENT)
		return 0;
	mk = fp_intern_key(c->cl_mappings, m, &len);
	fm = (struct fp_mapping){ .fm_id = m,
				  .fm_kind = mk->mk_kind,
				  .fm_path = (char *)mk->mk_path };
	if (mk->mk_kind == FP_MAP_PYTHON) {
		/* the key's build-ID is (pid, address, tag): not sent */
		fm.fm_py = m < c->cl_pycode_cap ? c->cl_pycode[m] : NULL;
		if (m < c->cl_pyfile_cap && c->cl_pyfile[m])
			fm.fm_path = c->cl_pyfile[m];
	} else {
		fm.fm_build_id.fb_len = mk->mk_build_id_len;
		memcpy(fm.fm_build_id.fb_data, mk->mk_build_id, mk->mk_build_id_len);
	}
	c->cl_mstate[m] = DEF_IN_FLIGHT;
	return push(&b->fb_mappings, &b->fb_nmappings, cap, sizeof(fm), &fm);
}

/* batch_nodes: the unsent part of the chain ending in leaf, parents first. */
static int batch_nodes(struct fp_collector *c, uint32_t leaf, struct fp_batch *b, size_t *ncap,
		       size_t *mcap)
{
	uint32_t depth = 0, node = leaf;
	size_t len;

	while (node != FP_NODE_NONE && c->cl_nstate[node] == DEF_UNSENT && depth < FP_MAX_FRAMES) {
		c->cl_chain[depth++] = node;
		node = ((const struct node_key *)fp_intern_key(c->cl_nodes, node, &len))->nk_parent;
	}
	while (depth-- > 0) {
		const struct node_key *k = fp_intern_key(c->cl_nodes, c->cl_chain[depth], &len);
		struct fp_node nd = { c->cl_chain[depth],
				      k->nk_parent,
				      { k->nk_mapping, k->nk_offset } };

		if (batch_mapping(c, k->nk_mapping, b, mcap) ||
		    push(&b->fb_nodes, &b->fb_nnodes, ncap, sizeof(nd), &nd))
			return -ENOMEM;
		c->cl_nstate[nd.fn_id] = DEF_IN_FLIGHT;
	}
	return 0;
}

int fp_collector_batch(struct fp_collector *c, const struct fp_interval *iv, uint64_t session,
		       uint64_t period_ns, struct fp_batch *b)
{
	size_t mcap = 0, tcap = 0, ncap = 0, i;

	memset(b, 0, sizeof(*b));
	b->fb_session = session;
	b->fb_seq = iv->fi_seq;
	b->fb_start_ns = iv->fi_start_ns;
	b->fb_end_ns = iv->fi_end_ns;
	b->fb_period_ns = period_ns;
	b->fb_lost = iv->fi_lost;
	b->fb_ncounts = iv->fi_ncounts;
	b->fb_counts = iv->fi_counts;
	if (!c->cl_chain && !(c->cl_chain = malloc(FP_MAX_FRAMES * sizeof(*c->cl_chain))))
		goto oom;
	for (i = 0; i < iv->fi_ncounts; i++) {
		if (batch_thread(c, iv->fi_counts[i].fc_thread, b, &tcap) ||
		    batch_nodes(c, iv->fi_counts[i].fc_node, b, &ncap, &mcap))
			goto oom;
	}
	for (i = 0; i < c->cl_nannounce; i++)
		if (batch_mapping(c, c->cl_announce[i], b, &mcap))
			goto oom;
	return 0;
oom:
	fp_collector_batch_release(c, b);
	return -ENOMEM;
}

static void set_states(struct fp_collector *c, const struct fp_batch *b, uint8_t from, uint8_t to)
{
	size_t i;

	for (i = 0; i < b->fb_nmappings; i++)
		if (c->cl_mstate[b->fb_mappings[i].fm_id] == from)
			c->cl_mstate[b->fb_mappings[i].fm_id] = to;
	for (i = 0; i < b->fb_nthreads; i++)
		if (c->cl_tstate[b->fb_threads[i].ft_id] == from)
			c->cl_tstate[b->fb_threads[i].ft_id] = to;
	for (i = 0; i < b->fb_nnodes; i++)
		if (c->cl_nstate[b->fb_nodes[i].fn_id] == from)
			c->cl_nstate[b->fb_nodes[i].fn_id] = to;
}

void fp_collector_batch_release(struct fp_collector *c, struct fp_batch *b)
{
	set_states(c, b, DEF_IN_FLIGHT, DEF_UNSENT);
	free(b->fb_mappings);
	free(b->fb_threads);
	free(b->fb_nodes);
	memset(b, 0, sizeof(*b));
}

void fp_collector_sent(struct fp_collector *c, const struct fp_batch *b)
{
	size_t i, j;

	set_states(c, b, DEF_IN_FLIGHT, DEF_KNOWN);
	/* Keep what was announced after b was built. */
	for (i = j = 0; i < c->cl_nannounce; i++)
		if (c->cl_mstate[c->cl_announce[i]] != DEF_KNOWN)
			c->cl_announce[j++] = c->cl_announce[i];
	c->cl_nannounce = j;
}

void fp_collector_forget(struct fp_collector *c)
{
	if (c->cl_mstate) /* all three are NULL until the first sample */
		memset(c->cl_mstate, 0, c->cl_mstate_cap);
	if (c->cl_tstate)
		memset(c->cl_tstate, 0, c->cl_tstate_cap);
	if (c->cl_nstate)
		memset(c->cl_nstate, 0, c->cl_nstate_cap);
}

size_t fp_collector_bytes(const struct fp_collector *c)
{
	return fp_intern_bytes(c->cl_mappings) + fp_intern_bytes(c->cl_threads) +
	       fp_intern_bytes(c->cl_nodes) + fp_intern_bytes(c->cl_pairs) +
	       fp_intern_bytes(c->cl_procs) + fp_intern_bytes(c->cl_paths) +
	       c->cl_counts_cap * sizeof(*c->cl_counts) + c->cl_offcpu_cap * sizeof(*c->cl_offcpu) +
	       c->cl_offthreads_cap * sizeof(*c->cl_offthreads) + c->cl_mstate_cap +
	       c->cl_tstate_cap + c->cl_nstate_cap + c->cl_tinfo_cap * sizeof(*c->cl_tinfo) +
	       c->cl_py_bytes + (c->cl_pycode_cap + c->cl_pyfile_cap) * sizeof(void *) +
	       c->cl_pylines_cap * sizeof(*c->cl_pylines);
}

void fp_collector_nodes(const struct fp_collector *c, struct fp_collector_nodes *n)
{
	size_t i, len, count = fp_intern_count(c->cl_nodes);

	memset(n, 0, sizeof(*n));
	n->cn_folded = c->cl_folded;
	n->cn_kfolded = c->cl_kfolded;
	for (i = 0; i < count; i++) {
		const struct node_key *k = fp_intern_key(c->cl_nodes, (uint32_t)i, &len);
		const struct mapping_key *mk;

		if (k->nk_mapping == FP_MAPPING_NONE) {
			n->cn_unmapped++;
			continue;
		}
		mk = fp_intern_key(c->cl_mappings, k->nk_mapping, &len);
		if (mk->mk_kind == FP_MAP_PYTHON)
			n->cn_python++;
		else if (mk->mk_kind == FP_MAP_USER)
			n->cn_user++;
		else
			n->cn_kernel++;
	}
}
