/* cpython.c: CPython processes for the BPF walker, and their code objects. */
#include "cpython.h"
#include "intern.h"
#include "log.h"
#include "pyoffsets.h"
#include "python.h"
#include "unwind_table.h"
#include "vec.h"

#include <bpf/bpf.h>
#include <errno.h>
#include <inttypes.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>
#include <sys/uio.h>
#include <unistd.h>

#define FILENAME_MAX_BYTES 4096
#define PTHREAD_SCAN 2048 /* bytes of the thread descriptor searched for the tid */

enum proc_state { PROC_NONE = 0, PROC_LIVE, PROC_REFUSED };

struct proc {
	uint8_t p_state;
	uint64_t p_runtime; /* _PyRuntime's address */
	struct fp_py_offsets p_off;
	struct fp_py_proc p_bpf; /* what the walker was given */
};

struct fp_python {
	struct fp_unwind *py_unwind;
	struct fp_sampler *py_sampler;
	int py_procs_fd;           /* -1 until the Python walker is loaded */
	int py_pthread_tid;        /* offset of the tid in a pthread descriptor; -1 unknown */
	struct fp_intern *py_pids; /* pid -> index into py_procv */
	struct proc *py_procv;
	size_t py_procv_cap;
	struct fp_python_stats py_stats;
};

/* pthread_tid_offset: where this C library keeps a thread's kernel tid in
 * the descriptor pthread_self() points to (3.9's thread_id is that
 * pointer).  Found in our own descriptor and confirmed in a second
 * thread's; -1 when the two disagree (not glibc-like). */
struct tid_probe {
	int tp_off;
	int tp_ok;
};

static int tid_at(const void *self, int off)
{
	int32_t v;

	memcpy(&v, (const char *)self + off, sizeof(v));
	return v == (int32_t)gettid();
}

static void *probe_thread(void *arg)
{
	struct tid_probe *p = arg;

	p->tp_ok = tid_at((const void *)pthread_self(), p->tp_off);
	return NULL;
}

static int pthread_tid_offset(void)
{
	const void *self = (const void *)pthread_self();
	int off;

	for (off = 0; off + 4 <= PTHREAD_SCAN; off += 4) {
		struct tid_probe p = { off, 0 };
		pthread_t t;
		if (!tid_at(self, off))
			continue;
		if (pthread_create(&t, NULL, probe_thread, &p))
			return -1;
		pthread_join(t, NULL);
		if (p.tp_ok)
			return off;
	}
	return -1;
}

int fp_python_alloc(struct fp_python **out, struct fp_sampler *s, struct fp_unwind *u)
{
	struct fp_sampler_unwind maps;
	struct fp_python *py;
	int err;

	if ((err = fp_sampler_unwind_maps(s, &maps)))
		return err;
	if (!(py = calloc(1, sizeof(*py))))
		return -ENOMEM;
	if (fp_intern_alloc(&py->py_pids)) {
		free(py);
		return -ENOMEM;
	}
	py->py_unwind = u;
	py->py_sampler = s;
	py->py_procs_fd = -1;
	py->py_pthread_tid = pthread_tid_offset();
	*out = py;
	return 0;
}

void fp_python_free(struct fp_python *py)
{
	if (!py)
		return;
	fp_intern_free(py->py_pids);
	free(py->py_procv);
	free(py);
}

static struct proc *proc_get(struct fp_python *py, uint32_t pid, int create)
{
	uint32_t id;

	if (!create)
		return fp_intern_find(py->py_pids, &pid, sizeof(pid), &id) ? NULL
									   : &py->py_procv[id];
	if (fp_intern_get(py->py_pids, &pid, sizeof(pid), &id, NULL))
		return NULL;
	if (fp_vec_reserve_zeroed(&py->py_procv, &py->py_procv_cap, (size_t)id + 1,
				  sizeof(*py->py_procv)))
		return NULL;
	return &py->py_procv[id];
}

/* peek: exactly len bytes of pid's memory at addr. */
static int peek(struct fp_python *py, uint32_t pid, uint64_t addr, void *buf, size_t len)
{
	struct iovec local = { buf, len }, remote = { (void *)(uintptr_t)addr, len };
	ssize_t got;

	if (!len)
		return 0;
	got = process_vm_readv((pid_t)pid, &local, 1, &remote, 1, 0);
	if (got < 0)
		return errno == ESRCH ? -ESRCH : -EFAULT;
	py->py_stats.ps_bytes_read += (uint64_t)got;
	return (size_t)got == len ? 0 : -EFAULT;
}

/* offsets_of: the offsets for an interpreter of version, whose _PyRuntime
 * is at runtime in pid.  0, -ENOTSUP or -EINVAL. */
static int offsets_of(struct fp_python *py, uint32_t pid, unsigned version, uint64_t runtime,
		      struct fp_py_offsets *out)
{
	const struct fp_py_offsets *t = fp_py_offsets_for(version);
	uint8_t buf[FP_PY_DEBUG_OFFSETS_MAX];
	int err;

	if (t) {
		*out = *t;
	} else if (version >= 0x030d) {
		if ((err = peek(py, pid, runtime, buf, sizeof(buf))))
			return err;
		if ((err = fp_py_offsets_debug(buf, sizeof(buf), out)))
			return err == -EINVAL ? -EINVAL : -ENOTSUP;
	} else {
		return -ENOTSUP;
	}
	if (out->po_tid_kind == FP_PY_TID_PTHREAD && py->py_pthread_tid < 0)
		return -ENOTSUP;
	return fp_py_offsets_check(out);
}

static void fill(struct fp_py_proc *pp, const struct fp_py_offsets *o)
{
	pp->pp_rt_interp_head = o->po_rt_interp_head;
	pp->pp_is_threads_head = o->po_is_threads_head;
	pp->pp_ts_next = o->po_ts_next;
	pp->pp_ts_tid = o->po_ts_tid;
	pp->pp_ts_frame = o->po_ts_frame;
	pp->pp_cf_frame = o->po_cf_frame;
	pp->pp_fr_previous = o->po_fr_previous;
	pp->pp_fr_code = o->po_fr_code;
	pp->pp_fr_instr = o->po_fr_instr;
	pp->pp_fr_entry = o->po_fr_entry;
	pp->pp_co_firstlineno = o->po_co_firstlineno;
	pp->pp_co_filename = o->po_co_filename;
	pp->pp_co_name = o->po_co_name;
	pp->pp_co_code = o->po_co_code;
	pp->pp_str_length = o->po_str_length;
	pp->pp_str_data = o->po_str_ascii_size;
	pp->pp_model = o->po_model;
	pp->pp_tid_kind = o->po_tid_kind;
	pp->pp_instr_kind = o->po_instr_kind;
}

/* walk_python: give pid's interpreter pp to the Python walker, loaded
 * first if this is the first, and have the walker walk pid. */
static int walk_python(struct fp_python *py, uint32_t pid, const struct fp_py_proc *pp)
{
	int err;

	if (py->py_procs_fd < 0 && (err = fp_sampler_python(py->py_sampler, &py->py_procs_fd)))
		return err;
	if (bpf_map_update_elem(py->py_procs_fd, &pid, pp, BPF_ANY))
		return -errno;
	return fp_unwind_set_walker(py->py_unwind, pid, FP_WALKER_PYTHON);
}

int fp_python_set_proc(struct fp_python *py, uint32_t pid, const struct fp_procmaps *pm)
{
	const struct fp_unwind_cpython *c = NULL;
	const struct fp_vma *v = NULL;
	struct fp_py_proc pp;
	struct proc *p;
	uint64_t bias;
	size_t i;
	int err, k;

	for (i = 0; i < pm->pm_nvmas && !c; i++) {
		v = &pm->pm_vmas[i];
		if (v->fv_build_id_state == 1)
			c = fp_unwind_cpython(py->py_unwind, &v->fv_build_id);
	}
	p = proc_get(py, pid, c != NULL);
	if (!c) {
		if (p && p->p_state == PROC_LIVE)
			fp_python_forget_proc(py, pid);
		return 0;
	}
	if (!p)
		return -ENOMEM;
	bias = v->fv_start - v->fv_pgoff;
	if (p->p_state == PROC_REFUSED && p->p_runtime == bias + (uint64_t)c->uc_runtime)
		return -ENOTSUP; /* told already */
	if (p->p_state == PROC_LIVE && p->p_runtime == bias + (uint64_t)c->uc_runtime)
		/* the same interpreter; the exit or exec hook may have
		 * dropped it from the map (a reused pid) */
		return walk_python(py, pid, &p->p_bpf);
	p->p_runtime = bias + (uint64_t)c->uc_runtime;
	err = offsets_of(py, pid, c->uc_version, p->p_runtime, &p->p_off);
	if (err) {
		p->p_state = PROC_REFUSED;
		if (err == -EINVAL) {
			py->py_stats.ps_bad_offsets++;
			fp_warnx("python: pid %u: the offsets of Python %u.%u do not fit the walker",
				 pid, c->uc_version >> 8, c->uc_version & 0xff);
		} else if (err == -ENOTSUP) {
			py->py_stats.ps_unknown_version++;
			fp_warnx("python: pid %u: Python %u.%u is not supported: its frames show as "
				 "the interpreter's",
				 pid, c->uc_version >> 8, c->uc_version & 0xff);
		}
		return err;
	}
	memset(&pp, 0, sizeof(pp));
	fill(&pp, &p->p_off);
	pp.pp_runtime = p->p_runtime;
	pp.pp_pthread_tid = (uint16_t)(py->py_pthread_tid < 0 ? 0 : py->py_pthread_tid);
	pp.pp_interp_start = v->fv_start;
	pp.pp_interp_end = v->fv_end;
	for (k = 0; k < FP_PY_EVAL_RANGES && k < FP_UNWIND_CPYTHON_RANGES; k++) {
		uint64_t s = bias + c->uc_eval[k].start, e = bias + c->uc_eval[k].end;
		if (c->uc_eval[k].start < c->uc_eval[k].end && s >= v->fv_start && e <= v->fv_end)
			pp.pp_eval_start[k] = s, pp.pp_eval_end[k] = e;
	}
	if ((err = walk_python(py, pid, &pp))) {
		p->p_state = PROC_NONE;
		return err;
	}
	p->p_bpf = pp;
	p->p_state = PROC_LIVE;
	py->py_stats.ps_procs++;
	return 0;
}

void fp_python_forget_proc(struct fp_python *py, uint32_t pid)
{
	struct proc *p = proc_get(py, pid, 0);

	fp_unwind_set_walker(py->py_unwind, pid, FP_WALKER_NATIVE);
	if (py->py_procs_fd >= 0)
		bpf_map_delete_elem(py->py_procs_fd, &pid);
	if (p)
		memset(p, 0, sizeof(*p));
}

/* put_utf8: code point cp as UTF-8 at out (room for 4). */
static size_t put_utf8(uint32_t cp, char *out)
{
	if (cp < 0x80) {
		out[0] = (char)cp;
		return 1;
	}
	if (cp < 0x800) {
		out[0] = (char)(0xc0 | cp >> 6), out[1] = (char)(0x80 | (cp & 0x3f));
		return 2;
	}
	if (cp < 0x10000) {
		if (cp >= 0xd800 && cp < 0xe000)
			cp = 0xfffd; /* a lone surrogate */
		out[0] = (char)(0xe0 | cp >> 12), out[1] = (char)(0x80 | ((cp >> 6) & 0x3f));
		out[2] = (char)(0x80 | (cp & 0x3f));
		return 3;
	}
	if (cp > 0x10ffff)
		cp = 0xfffd;
	if (cp == 0xfffd)
		return put_utf8(cp, out);
	out[0] = (char)(0xf0 | cp >> 18), out[1] = (char)(0x80 | ((cp >> 12) & 0x3f));
	out[2] = (char)(0x80 | ((cp >> 6) & 0x3f)), out[3] = (char)(0x80 | (cp & 0x3f));
	return 4;
}

int fp_python_str_layout(const struct fp_py_offsets *o, const uint8_t *hdr, size_t max,
			 size_t *data_off, unsigned *kind, size_t *count)
{
	uint8_t state = hdr[o->po_str_state];
	int64_t len;

	memcpy(&len, hdr + o->po_str_length, sizeof(len));
	*kind = (state >> 2) & 7;
	if (!(state & 0x20) || (*kind != 1 && *kind != 2 && *kind != 4) || len < 0)
		return -EINVAL; /* not compact: never a code object's name */
	*data_off = (state & 0x40) ? o->po_str_ascii_size : o->po_str_compact_size;
	*count = (uint64_t)len < max ? (size_t)len : max;
	return 0;
}

size_t fp_python_str_utf8(const uint8_t *raw, size_t count, unsigned kind, char *out, size_t max)
{
	size_t i, at = 0;

	for (i = 0; i < count; i++) {
		const uint8_t *r = raw + i * kind;
		uint32_t cp = kind == 1   ? r[0]
			      : kind == 2 ? (uint32_t)r[0] | (uint32_t)r[1] << 8
					  : (uint32_t)r[0] | (uint32_t)r[1] << 8 |
						    (uint32_t)r[2] << 16 | (uint32_t)r[3] << 24;
		char c[4];
		size_t w = put_utf8(cp, c);
		if (at + w > max)
			break;
		memcpy(out + at, c, w);
		at += w;
	}
	out[at] = '\0';
	return at;
}

/* read_str: the compact str object at addr as UTF-8, at most max bytes
 * (cut at a character boundary). */
static int read_str(struct fp_python *py, uint32_t pid, const struct fp_py_offsets *o,
		    uint64_t addr, size_t max, char **out)
{
	uint8_t hdr[128], *raw;
	size_t off, n;
	unsigned kind;
	char *s;
	int err;

	if ((err = peek(py, pid, addr, hdr, o->po_str_compact_size)) ||
	    (err = fp_python_str_layout(o, hdr, max, &off, &kind, &n)))
		return err;
	if (!(raw = malloc(n * kind + 1)) || !(s = malloc(max + 1))) {
		free(raw);
		return -ENOMEM;
	}
	if ((err = peek(py, pid, addr + off, raw, n * kind))) {
		free(raw);
		free(s);
		return err;
	}
	fp_python_str_utf8(raw, n, kind, s, max);
	free(raw);
	*out = s;
	return 0;
}

/* read_bytes: the bytes object at addr; lines unknown (0 bytes) when it is
 * longer than FP_PY_LINETABLE_MAX. */
static int read_bytes(struct fp_python *py, uint32_t pid, const struct fp_py_offsets *o,
		      uint64_t addr, uint8_t **out, uint32_t *len)
{
	uint8_t hdr[64];
	int64_t n;
	int err;

	*out = NULL, *len = 0;
	if ((err = peek(py, pid, addr, hdr, o->po_bytes_size + 8)))
		return err;
	memcpy(&n, hdr + o->po_bytes_size, sizeof(n));
	if (n < 0)
		return -EINVAL;
	if (n == 0 || n > FP_PY_LINETABLE_MAX)
		return 0;
	if (!(*out = malloc((size_t)n)))
		return -ENOMEM;
	if ((err = peek(py, pid, addr + o->po_bytes_data, *out, (size_t)n))) {
		free(*out);
		*out = NULL;
		return err;
	}
	*len = (uint32_t)n;
	return 0;
}

/* code_tag: read the code object at addr into co (FP_PY_CODE_WINDOW
 * bytes) and its tag as the walker computes it (bpf/python.h); -ESTALE
 * when the memory there is free. */
static int code_tag(struct fp_python *py, uint32_t pid, const struct fp_py_offsets *o,
		    uint64_t addr, uint8_t *co, uint32_t *tag)
{
	uint8_t nb[FP_PY_NAME_WINDOW];
	uint64_t refs, name, file, len, c0, c1;
	uint32_t first;
	int err;

	if ((err = peek(py, pid, addr, co, FP_PY_CODE_WINDOW)))
		return err;
	/* Freed memory keeps its fields, and so its tag, but pymalloc puts
	 * the next free block's address (or 0) where the reference count
	 * was: a live object's count is 1 to 2^32 - 1 (immortal included). */
	memcpy(&refs, co, 8);
	if (!refs || refs > 0xffffffffull)
		return -ESTALE;
	memcpy(&name, co + o->po_co_name, 8);
	memcpy(&file, co + o->po_co_filename, 8);
	memcpy(&first, co + o->po_co_firstlineno, 4);
	/* as the walker reads it: zeros when it cannot */
	if (peek(py, pid, name + o->po_str_length, nb, sizeof(nb)))
		memset(nb, 0, sizeof(nb));
	memcpy(&len, nb, 8);
	memcpy(&c0, nb + (o->po_str_ascii_size - o->po_str_length), 8);
	memcpy(&c1, nb + (o->po_str_ascii_size - o->po_str_length) + 8, 8);
	*tag = fp_py_tag(name, file, first, len, c0, c1);
	return 0;
}

void fp_python_on_maps(uint32_t pid, const struct fp_procmaps *pm, void *arg)
{
	struct fp_python *py = arg;

	fp_unwind_set_proc(py->py_unwind, pid, pm);
	fp_python_set_proc(py, pid, pm);
}

int fp_python_read_code(uint32_t pid, uint64_t addr, uint32_t tag, struct fp_pycode **code,
			char **filename, void *arg)
{
	struct fp_python *py = arg;
	struct proc *p = proc_get(py, pid, 0);
	const struct fp_py_offsets *o;
	uint8_t co[FP_PY_CODE_WINDOW];
	uint64_t name, file, lines;
	uint32_t first, t1, t2;
	struct fp_pycode *c;
	int err;

	if (!p || p->p_state != PROC_LIVE)
		return -ESRCH;
	o = &p->p_off;
	py->py_stats.ps_code_reads++;
	if ((err = code_tag(py, pid, o, addr, co, &t1)) == -ESTALE) {
		py->py_stats.ps_code_stale++;
		return err;
	}
	if (err)
		goto fail;
	memcpy(&name, co + o->po_co_name, 8);
	memcpy(&file, co + o->po_co_filename, 8);
	memcpy(&lines, co + o->po_co_linetable, 8);
	memcpy(&first, co + o->po_co_firstlineno, 4);
	if (t1 != tag) {
		py->py_stats.ps_code_stale++;
		return -ESTALE;
	}
	if (!(c = calloc(1, sizeof(*c)))) {
		err = -ENOMEM;
		goto fail;
	}
	c->pc_firstlineno = first;
	c->pc_lines = o->po_lines;
	if ((err = read_str(py, pid, o, name, FP_PY_NAME_MAX - 1, &c->pc_qualname)) ||
	    (err = read_bytes(py, pid, o, lines, &c->pc_linetable, &c->pc_linetable_len)) ||
	    (err = read_str(py, pid, o, file, FILENAME_MAX_BYTES - 1, filename))) {
		fp_pycode_free(c);
		goto fail;
	}
	/* Freed while we read it?  Then the name may be the new object's and
	 * the lines the old one's: the same object before and after, or none. */
	if ((err = code_tag(py, pid, o, addr, co, &t2)) || t2 != tag) {
		fp_pycode_free(c);
		free(*filename);
		*filename = NULL;
		if (err && err != -ESTALE)
			goto fail;
		py->py_stats.ps_code_stale++;
		return -ESTALE;
	}
	*code = c;
	return 0;
fail:
	py->py_stats.ps_code_errors++;
	return err;
}

void fp_python_stats(const struct fp_python *py, struct fp_python_stats *st)
{
	*st = py->py_stats;
}

size_t fp_python_bytes(const struct fp_python *py)
{
	return sizeof(*py) + fp_intern_bytes(py->py_pids) + py->py_procv_cap * sizeof(struct proc);
}

void fp_python_log(const struct fp_python *py, const uint64_t c[FP_CNT_MAX])
{
	const struct fp_python_stats *ps = &py->py_stats;

	fp_info("python: %" PRIu64 " processes walked, %" PRIu64 " of unknown versions, %" PRIu64
		" with offsets that do not fit; frames %" PRIu64 ", samples whose thread state was "
		"not found %" PRIu64 ", whose Python and native stacks disagreed %" PRIu64
		" (native kept), memory unreadable mid-walk %" PRIu64 "; code objects read %" PRIu64
		" (%" PRIu64 " reused since sampled, %" PRIu64 " unreadable), %" PRIu64 " bytes",
		ps->ps_procs, ps->ps_unknown_version, ps->ps_bad_offsets, c[FP_CNT_PY_FRAMES],
		c[FP_CNT_PY_NO_THREAD], c[FP_CNT_PY_MISMATCH], c[FP_CNT_PY_READ_ERR],
		ps->ps_code_reads, ps->ps_code_stale, ps->ps_code_errors, ps->ps_bytes_read);
}
