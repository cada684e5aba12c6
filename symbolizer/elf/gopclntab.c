/* gopclntab.c: reading Go's pc-line table (gopclntab.h).
 *
 * The layout, from the header on:
 *
 *   magic u32, 0, 0, pc quantum u8, pointer size u8, then pointer-sized
 *   words: nfunc, nfiles, [1.18+: text start], and the offsets (from the
 *   header) of the function name table, the compilation-unit table
 *   (cutab), the file name table, the pc-value tables and the function
 *   table.
 *
 *   The function table: nfunc pairs (entry, offset of the function's
 *   record from the function table), then one more entry, the end of the
 *   last function.  Entries are u32 offsets from the text start (1.18+)
 *   or pointer-sized addresses (1.16).
 *
 *   A function record: [1.16: entry pointer] / [1.18+: entry u32], name
 *   offset, args, deferreturn, and the pc-value table offsets pcsp,
 *   pcfile, pcln, then npcdata and the function's cutab offset.
 *
 *   A pc-value table: pairs of varints, a zig-zag value delta and a pc
 *   delta in quanta, starting from value -1 at the function's entry; a
 *   value delta of 0 after the first pair ends it.  pcfile's values index
 *   the function's slice of cutab, whose u32 entries are offsets of
 *   NUL-terminated names in the file table (~0: none).
 *
 * Inlining (1.20+): pcdata table 2 gives, per pc, an index into the
 * function's inline tree (-1: not inlined), found at funcdata 3, an
 * offset from moduledata's go:func.* base.  The header does not give that
 * base: the moduledata is found in a writable segment by its first
 * words, pointers to the table and to its function names.  An entry
 * names the inlined function and a pc whose position is the call site
 * (and whose index is the parent's).  Without the base (PIE, where those
 * pointers are relocations) a pc in inlined code gets its innermost
 * file:line under the outer function's name, as `go tool addr2line`
 * prints it.
 */
#include "gopclntab.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "symtab.h"
#include "vec.h"

#define MAGIC_116 0xfffffffau
#define MAGIC_118 0xfffffff0u
#define MAGIC_120 0xfffffff1u

/* Work bounds, in bytes read per byte of table (plus a floor): real
 * tables read each name and each pc-value table once; a hostile one could
 * point every function at the same long name or table. */
#define READ_FACTOR 8
#define READ_FLOOR (4u << 20)
#define MAX_NAME_LEN 8192
#define MAX_FILE_LEN 4096
#define PCDATA_INLTREE 2
#define FUNCDATA_INLTREE 3
#define MAX_INLINE_INDEX 8192 /* entries of one function's inline tree */
#define MAX_INLINE_DEPTH 64
#define MODULEDATA_TEXT 22   /* word of moduledata.text (1.20+) */
#define MODULEDATA_GOFUNC 40 /* word of moduledata.gofunc (1.20+) */

/* One inline tree entry's scope, for the function being read. */
struct inl {
	uint32_t in_gen;   /* function it belongs to; stale otherwise */
	uint32_t in_scope; /* FP_SYMTAB_NONE: being built or unusable */
	int32_t in_parent; /* parent entry, -1: the function itself */
};

struct pcln {
	const uint8_t *pl_data;
	size_t pl_len;
	int pl_big_endian;
	unsigned pl_version;
	unsigned pl_quantum;
	unsigned pl_ptrsize;
	uint64_t pl_nfunc;
	uint64_t pl_ncu; /* usable cutab entries */
	uint64_t pl_text;
	size_t pl_funcnames, pl_cutab, pl_filetab, pl_pctab, pl_functab;
	uint64_t pl_budget; /* bytes left to read */
	uint32_t *pl_files; /* builder file index + 1 per cutab entry, 0: not yet */
	const struct fp_gopclntab_image *pl_image;
	uint64_t pl_gofunc; /* moduledata.gofunc, 0: unknown (no inlines) */
	struct inl *pl_inl; /* MAX_INLINE_INDEX entries */
	uint32_t pl_gen;
	uint32_t pl_inlined;
};

static uint64_t get_at(const struct pcln *p, const uint8_t *q, unsigned size)
{
	uint64_t v = 0;

	if (p->pl_big_endian)
		for (unsigned i = 0; i < size; i++)
			v = v << 8 | q[i];
	else
		for (unsigned i = size; i-- > 0;)
			v = v << 8 | q[i];
	return v;
}

static uint64_t get_uint(const struct pcln *p, size_t off, unsigned size)
{
	return get_at(p, p->pl_data + off, size);
}

/* mem_at: len bytes of the image at vaddr, or NULL. */
static const uint8_t *mem_at(const struct pcln *p, uint64_t vaddr, size_t len)
{
	const struct fp_gopclntab_image *im = p->pl_image;

	for (size_t i = 0; im && i < im->gi_nsegments; i++) {
		const struct fp_gopclntab_segment *g = &im->gi_segments[i];

		if (vaddr >= g->gg_vaddr && vaddr - g->gg_vaddr <= g->gg_len &&
		    len <= g->gg_len - (vaddr - g->gg_vaddr))
			return g->gg_data + (vaddr - g->gg_vaddr);
	}
	return NULL;
}

/* find_gofunc: moduledata.gofunc, from the moduledata whose first words
 * point at the table and its function names and whose text is ours. */
static void find_gofunc(struct pcln *p)
{
	const struct fp_gopclntab_image *im = p->pl_image;
	unsigned ps = p->pl_ptrsize;
	size_t need = (size_t)(MODULEDATA_GOFUNC + 1) * ps;

	if (!im || p->pl_version != 120 || !p->pl_text)
		return;
	for (size_t i = 0; i < im->gi_nsegments; i++) {
		const struct fp_gopclntab_segment *g = &im->gi_segments[i];

		if (!g->gg_writable)
			continue;
		for (size_t off = 0; g->gg_len >= need && off <= g->gg_len - need; off += ps) {
			const uint8_t *m = g->gg_data + off;
			uint64_t gofunc;

			if (get_at(p, m, ps) != im->gi_pclntab ||
			    get_at(p, m + ps, ps) != im->gi_pclntab + p->pl_funcnames ||
			    get_at(p, m + (size_t)MODULEDATA_TEXT * ps, ps) != p->pl_text)
				continue;
			gofunc = get_at(p, m + (size_t)MODULEDATA_GOFUNC * ps, ps);
			if (gofunc && mem_at(p, gofunc, 1)) {
				p->pl_gofunc = gofunc;
				return;
			}
		}
	}
}

/* in_table: [off, off + size) lies in the table. */
static int in_table(const struct pcln *p, uint64_t off, uint64_t size)
{
	return size <= p->pl_len && off <= p->pl_len - size;
}

static int spend(struct pcln *p, uint64_t n)
{
	if (n > p->pl_budget) {
		p->pl_budget = 0;
		return -E2BIG;
	}
	p->pl_budget -= n;
	return 0;
}

/* string_at: the NUL-terminated string at base + off, at most max bytes,
 * or NULL. */
static const char *string_at(struct pcln *p, size_t base, uint64_t off, size_t max)
{
	const char *s;
	size_t room, n;

	if (off > p->pl_len - base)
		return NULL;
	s = (const char *)p->pl_data + base + off;
	room = p->pl_len - base - (size_t)off;
	n = strnlen(s, room < max + 1 ? room : max + 1);
	if (spend(p, n + 1))
		return NULL;
	if (n == 0 || n == room || n > max)
		return NULL;
	return s;
}

static int parse_header(struct pcln *p, const void *data, size_t len)
{
	const uint8_t *d = data;
	uint32_t le, be, magic;
	unsigned words, fieldsize;
	uint64_t w[8], ncu;

	if (len < 8)
		return -EINVAL;
	le = (uint32_t)d[0] | (uint32_t)d[1] << 8 | (uint32_t)d[2] << 16 | (uint32_t)d[3] << 24;
	be = (uint32_t)d[3] | (uint32_t)d[2] << 8 | (uint32_t)d[1] << 16 | (uint32_t)d[0] << 24;
	if (le == MAGIC_116 || le == MAGIC_118 || le == MAGIC_120)
		magic = le, p->pl_big_endian = 0;
	else if (be == MAGIC_116 || be == MAGIC_118 || be == MAGIC_120)
		magic = be, p->pl_big_endian = 1;
	else
		return -EINVAL;
	p->pl_version = magic == MAGIC_116 ? 116 : magic == MAGIC_118 ? 118 : 120;
	p->pl_quantum = d[6];
	p->pl_ptrsize = d[7];
	if (d[4] || d[5] || (p->pl_quantum != 1 && p->pl_quantum != 2 && p->pl_quantum != 4) ||
	    (p->pl_ptrsize != 4 && p->pl_ptrsize != 8))
		return -EINVAL;
	p->pl_data = d;
	p->pl_len = len;
	words = p->pl_version == 116 ? 7 : 8;
	if (!in_table(p, 8, (uint64_t)words * p->pl_ptrsize))
		return -EINVAL;
	for (unsigned i = 0; i < words; i++)
		w[i] = get_uint(p, 8 + (size_t)i * p->pl_ptrsize, p->pl_ptrsize);
	p->pl_nfunc = w[0];
	if (p->pl_version == 116) {
		p->pl_text = 0;
		memmove(&w[3], &w[2], 5 * sizeof(w[0]));
	} else {
		p->pl_text = w[2];
	}
	for (unsigned i = 3; i < 8; i++)
		if (w[i] >= len)
			return -EINVAL;
	p->pl_funcnames = (size_t)w[3];
	p->pl_cutab = (size_t)w[4];
	p->pl_filetab = (size_t)w[5];
	p->pl_pctab = (size_t)w[6];
	p->pl_functab = (size_t)w[7];
	fieldsize = p->pl_version == 116 ? p->pl_ptrsize : 4;
	/* nfunc pairs and the end entry. */
	if (p->pl_nfunc > (len - p->pl_functab) / (2 * fieldsize) ||
	    !in_table(p, p->pl_functab, (p->pl_nfunc * 2 + 1) * fieldsize))
		return -EINVAL;
	/* nfiles counts distinct names, not cutab entries: cutab ends where
	 * the next table starts (the linker writes them in header order). */
	ncu = (p->pl_filetab > p->pl_cutab ? p->pl_filetab : len) - p->pl_cutab;
	p->pl_ncu = ncu / 4;
	p->pl_budget = (uint64_t)len * READ_FACTOR + READ_FLOOR;
	return 0;
}

/* functab_entry: entry i of the function table (i <= nfunc) as an
 * address, and the offset of function i's record. */
static void functab_entry(const struct pcln *p, uint64_t i, uint64_t *pc, uint64_t *funcoff)
{
	unsigned fs = p->pl_version == 116 ? p->pl_ptrsize : 4;
	size_t at = p->pl_functab + (size_t)(2 * i) * fs;

	*pc = get_uint(p, at, fs);
	if (p->pl_version != 116)
		*pc += p->pl_text;
	*funcoff = i < p->pl_nfunc ? get_uint(p, at + fs, fs) : 0;
}

struct func {
	uint64_t fn_entry, fn_end;
	const char *fn_name;
	uint32_t fn_pcfile, fn_pcln, fn_cu;
	size_t fn_rec; /* the record's offset in the table */
	uint32_t fn_npcdata, fn_nfuncdata;
};

static int read_func(struct pcln *p, uint64_t i, struct func *fn)
{
	unsigned pre = p->pl_version == 116 ? p->pl_ptrsize : 4;
	uint64_t funcoff, next_off, at;
	uint32_t nameoff;

	functab_entry(p, i, &fn->fn_entry, &funcoff);
	functab_entry(p, i + 1, &fn->fn_end, &next_off);
	if (fn->fn_end <= fn->fn_entry || funcoff > p->pl_len - p->pl_functab)
		return -EINVAL;
	at = p->pl_functab + funcoff;
	/* entry, nameoff, args, deferreturn, pcsp, pcfile, pcln, npcdata, cu */
	if (!in_table(p, at, pre + 32))
		return -EINVAL;
	nameoff = (uint32_t)get_uint(p, (size_t)at + pre, 4);
	fn->fn_pcfile = (uint32_t)get_uint(p, (size_t)at + pre + 16, 4);
	fn->fn_pcln = (uint32_t)get_uint(p, (size_t)at + pre + 20, 4);
	fn->fn_cu = (uint32_t)get_uint(p, (size_t)at + pre + 28, 4);
	fn->fn_npcdata = (uint32_t)get_uint(p, (size_t)at + pre + 24, 4);
	fn->fn_rec = (size_t)at;
	/* nfuncdata is the fixed part's last byte (1.20+: 44 bytes). */
	fn->fn_nfuncdata = p->pl_version == 120 && in_table(p, at, 44) ? p->pl_data[at + 43] : 0;
	fn->fn_name = string_at(p, p->pl_funcnames, nameoff, MAX_NAME_LEN);
	return fn->fn_name ? 0 : -EINVAL;
}

/* A pc-value table being walked: [pv_pc, pv_next) has value pv_val. */
struct pcvalue {
	struct pcln *pv_p;
	size_t pv_pos;
	int pv_first, pv_done;
	uint64_t pv_pc, pv_next, pv_end;
	int64_t pv_val;
};

static int uvarint(struct pcvalue *v, uint32_t *out)
{
	struct pcln *p = v->pv_p;
	uint32_t x = 0;

	for (unsigned shift = 0; shift < 35; shift += 7) {
		uint8_t c;

		if (v->pv_pos >= p->pl_len || spend(p, 1))
			return -EINVAL;
		c = p->pl_data[v->pv_pos++];
		x |= (uint32_t)(c & 0x7f) << shift;
		if (!(c & 0x80)) {
			*out = x;
			return 0;
		}
	}
	return -EINVAL;
}

/* pcvalue_step: move to the next run; pv_done at the table's end, at the
 * function's end, or on malformed bytes. */
static void pcvalue_step(struct pcvalue *v)
{
	uint32_t uv, pcd;

	v->pv_pc = v->pv_next;
	if (v->pv_done || v->pv_pc >= v->pv_end || uvarint(v, &uv) || (uv == 0 && !v->pv_first) ||
	    uvarint(v, &pcd)) {
		v->pv_done = 1;
		return;
	}
	v->pv_first = 0;
	v->pv_val += (int32_t)(uv >> 1) ^ -(int32_t)(uv & 1);
	v->pv_next = v->pv_pc + (uint64_t)pcd * v->pv_p->pl_quantum;
	if (v->pv_next > v->pv_end || v->pv_next < v->pv_pc)
		v->pv_next = v->pv_end;
}

static void pcvalue_start(struct pcvalue *v, struct pcln *p, uint32_t off, const struct func *fn)
{
	memset(v, 0, sizeof(*v));
	v->pv_p = p;
	v->pv_first = 1;
	v->pv_val = -1;
	v->pv_next = fn->fn_entry;
	v->pv_end = fn->fn_end;
	v->pv_done = off == 0 || off >= p->pl_len - p->pl_pctab;
	v->pv_pos = p->pl_pctab + off;
	pcvalue_step(v);
}

/* pcvalue_at: the value of fn's table at off for pc; 0 or -ENOENT. */
static int pcvalue_at(struct pcln *p, uint32_t off, const struct func *fn, uint64_t pc,
		      int64_t *val)
{
	struct pcvalue v;

	pcvalue_start(&v, p, off, fn);
	while (!v.pv_done && v.pv_next <= pc)
		pcvalue_step(&v);
	if (v.pv_done || pc < v.pv_pc)
		return -ENOENT;
	*val = v.pv_val;
	return 0;
}

/* file_index: the builder's file for value val of fn's pcfile table. */
static int file_index(struct pcln *p, struct fp_symtab_builder *b, const struct func *fn,
		      int64_t val, uint32_t *file)
{
	uint64_t cu = (uint64_t)fn->fn_cu + (uint64_t)val;
	uint32_t off;
	const char *name;
	int err;

	*file = FP_SYMTAB_NONE;
	if (val < 0 || cu >= p->pl_ncu)
		return 0;
	if (p->pl_files[cu]) {
		*file = p->pl_files[cu] - 1;
		return 0;
	}
	off = (uint32_t)get_uint(p, p->pl_cutab + (size_t)cu * 4, 4);
	if (off == UINT32_MAX || !(name = string_at(p, p->pl_filetab, off, MAX_FILE_LEN)))
		return 0;
	if ((err = fp_symtab_builder_add_file(b, name, file)))
		return err;
	if (*file != FP_SYMTAB_NONE)
		p->pl_files[cu] = *file + 1;
	return 0;
}

struct rows {
	struct fp_line_row *r_v;
	size_t r_n, r_cap;
};

static int rows_append(struct rows *r, uint64_t addr, uint32_t file, uint32_t line)
{
	if (fp_vec_reserve(&r->r_v, &r->r_cap, r->r_n + 1, sizeof(*r->r_v)))
		return -ENOMEM;
	r->r_v[r->r_n++] = (struct fp_line_row){ .lr_addr = addr,
						 .lr_file = file,
						 .lr_line = line };
	return 0;
}

/* add_lines: fn's rows, its pcfile and pcln tables walked side by side,
 * as one sequence; a row where either changes. */
static int add_lines(struct pcln *p, struct fp_symtab_builder *b, const struct func *fn,
		     struct rows *r, uint32_t *added)
{
	struct pcvalue vf, vl;
	uint64_t pc = fn->fn_entry;
	int err;

	pcvalue_start(&vl, p, fn->fn_pcln, fn);
	pcvalue_start(&vf, p, fn->fn_pcfile, fn);
	r->r_n = 0;
	for (;;) {
		uint32_t file = FP_SYMTAB_NONE, line;
		struct fp_line_row *last = r->r_n ? &r->r_v[r->r_n - 1] : NULL;

		while (!vl.pv_done && vl.pv_next <= pc)
			pcvalue_step(&vl);
		if (vl.pv_done || pc >= fn->fn_end)
			break;
		while (!vf.pv_done && vf.pv_next <= pc)
			pcvalue_step(&vf);
		if (!vf.pv_done && (err = file_index(p, b, fn, vf.pv_val, &file)))
			return err;
		line = vl.pv_val > 0 && vl.pv_val <= INT32_MAX ? (uint32_t)vl.pv_val : 0;
		if (!last || last->lr_file != file || last->lr_line != line)
			if ((err = rows_append(r, pc, file, line)))
				return err;
		/* pc only grows: both runs end past it. */
		pc = vl.pv_next;
		if (!vf.pv_done && vf.pv_next < pc)
			pc = vf.pv_next;
	}
	if (!r->r_n)
		return p->pl_budget ? 0 : -E2BIG;
	if ((err = rows_append(r, pc, FP_SYMTAB_NONE, 0)))
		return err;
	err = fp_symtab_builder_add_sequence(b, r->r_v, r->r_n);
	if (err == -EINVAL)
		err = 0;
	else if (!err)
		(*added)++;
	if (!err && !p->pl_budget)
		err = -E2BIG;
	return err;
}

/* inline_tree: where fn's inline tree is and its pc-to-index table. */
static int inline_tree(struct pcln *p, const struct func *fn, uint64_t *tree, uint32_t *table)
{
	size_t arrays = fn->fn_rec + 44;
	uint32_t off;

	if (!p->pl_gofunc || fn->fn_npcdata <= PCDATA_INLTREE ||
	    fn->fn_nfuncdata <= FUNCDATA_INLTREE ||
	    !in_table(p, arrays, ((uint64_t)fn->fn_npcdata + fn->fn_nfuncdata) * 4))
		return -ENOENT;
	*table = (uint32_t)get_uint(p, arrays + PCDATA_INLTREE * 4, 4);
	off = (uint32_t)get_uint(p, arrays + (size_t)fn->fn_npcdata * 4 + FUNCDATA_INLTREE * 4, 4);
	if (!*table || off == UINT32_MAX)
		return -ENOENT;
	*tree = p->pl_gofunc + off;
	return 0;
}

struct inl_ctx {
	const struct func *ic_fn;
	uint64_t ic_tree;
	uint32_t ic_table;
	uint32_t ic_outer; /* the function's own scope, NONE until needed */
};

/* inl_scope: the scope of inline tree entry k (and its parents, first).
 * 0, -EINVAL (unusable entry) or -ENOMEM. */
static int inl_scope(struct pcln *p, struct fp_symtab_builder *b, struct inl_ctx *c, int64_t k,
		     int depth, uint32_t *scope)
{
	const struct func *fn = c->ic_fn;
	uint32_t parent = c->ic_outer, file = FP_SYMTAB_NONE, line = 0;
	const uint8_t *e;
	const char *name;
	int64_t parent_k = -1, v;
	uint64_t call_pc;
	struct inl *in;
	int err;

	if (k < 0 || k >= MAX_INLINE_INDEX || depth > MAX_INLINE_DEPTH)
		return -EINVAL;
	in = &p->pl_inl[k];
	if (in->in_gen == p->pl_gen) {
		*scope = in->in_scope;
		return in->in_scope == FP_SYMTAB_NONE ? -EINVAL : 0;
	}
	in->in_gen = p->pl_gen;
	in->in_scope = FP_SYMTAB_NONE; /* a loop back here finds it unusable */
	in->in_parent = -1;
	/* funcID, 3 bytes of padding, nameOff, parentPc, startLine */
	e = mem_at(p, c->ic_tree + (uint64_t)k * 16, 16);
	if (!e || spend(p, 16))
		return -EINVAL;
	name = string_at(p, p->pl_funcnames, (uint32_t)get_at(p, e + 4, 4), MAX_NAME_LEN);
	call_pc = fn->fn_entry + (uint64_t)(int64_t)(int32_t)get_at(p, e + 8, 4);
	if (!name || call_pc < fn->fn_entry || call_pc >= fn->fn_end)
		return -EINVAL;
	if (pcvalue_at(p, c->ic_table, fn, call_pc, &parent_k) == 0 && parent_k >= 0) {
		if ((err = inl_scope(p, b, c, parent_k, depth + 1, &parent)))
			return err;
	} else {
		parent_k = -1;
	}
	if (pcvalue_at(p, fn->fn_pcfile, fn, call_pc, &v) == 0 &&
	    (err = file_index(p, b, fn, v, &file)))
		return err;
	if (pcvalue_at(p, fn->fn_pcln, fn, call_pc, &v) == 0 && v > 0 && v <= INT32_MAX)
		line = (uint32_t)v;
	err = fp_symtab_builder_add_scope(b, parent, name, NULL, file, line, 0, scope);
	if (err)
		return err;
	in->in_scope = *scope;
	in->in_parent = (int32_t)parent_k;
	p->pl_inlined++;
	return 0;
}

/* add_inlines: fn's inlined calls as scopes, each with the code of its
 * runs of the pc-to-index table, and that code also in every enclosing
 * call's scope and in the function's own. */
static int add_inlines(struct pcln *p, struct fp_symtab_builder *b, const struct func *fn)
{
	struct inl_ctx c = { .ic_fn = fn, .ic_outer = FP_SYMTAB_NONE };
	struct pcvalue v;
	int err = 0;

	if (inline_tree(p, fn, &c.ic_tree, &c.ic_table))
		return 0;
	p->pl_gen++;
	pcvalue_start(&v, p, c.ic_table, fn);
	for (; !v.pv_done && !err; pcvalue_step(&v)) {
		uint32_t scope;
		int64_t k = v.pv_val;

		if (k < 0 || v.pv_next <= v.pv_pc)
			continue;
		if (c.ic_outer == FP_SYMTAB_NONE) {
			err = fp_symtab_builder_add_scope(b, FP_SYMTAB_NONE, fn->fn_name, NULL,
							  FP_SYMTAB_NONE, 0, 0, &c.ic_outer);
			if (!err)
				err = fp_symtab_builder_add_range(b, c.ic_outer, fn->fn_entry,
								  fn->fn_end);
			if (err)
				break;
		}
		err = inl_scope(p, b, &c, k, 0, &scope);
		if (err == -EINVAL) {
			err = 0;
			continue;
		}
		for (int depth = 0; !err && depth <= MAX_INLINE_DEPTH; depth++) {
			err = fp_symtab_builder_add_range(b, scope, v.pv_pc, v.pv_next);
			k = p->pl_inl[k].in_parent;
			if (k < 0)
				break;
			scope = p->pl_inl[k].in_scope;
		}
	}
	return err == -EINVAL ? 0 : err;
}

int fp_gopclntab_ingest(const void *data, size_t len, uint64_t text, int what,
			const struct fp_gopclntab_image *image, struct fp_symtab_builder *b,
			struct fp_gopclntab_stats *st)
{
	struct fp_gopclntab_stats s = { 0 };
	struct rows r = { 0 };
	struct pcln p = { 0 };
	int err;

	if (st)
		*st = s;
	if ((err = parse_header(&p, data, len)))
		return err;
	if (text)
		p.pl_text = text;
	if ((what & FP_GOPCLNTAB_LINES) && p.pl_ncu) {
		p.pl_files = calloc(p.pl_ncu, sizeof(*p.pl_files));
		if (!p.pl_files)
			return -ENOMEM;
	}
	if ((what & FP_GOPCLNTAB_LINES) && (what & FP_GOPCLNTAB_INLINES) && image) {
		p.pl_image = image;
		find_gofunc(&p);
		if (p.pl_gofunc && !(p.pl_inl = calloc(MAX_INLINE_INDEX, sizeof(*p.pl_inl)))) {
			free(p.pl_files);
			return -ENOMEM;
		}
		if (!p.pl_inl)
			p.pl_gofunc = 0;
	}
	for (uint64_t i = 0; i < p.pl_nfunc && !err; i++) {
		struct func fn;

		if (read_func(&p, i, &fn)) {
			if (p.pl_budget == 0)
				err = -E2BIG;
			continue;
		}
		if (what & FP_GOPCLNTAB_FUNCTIONS) {
			err = fp_symtab_builder_add_symbol(b, fn.fn_entry, fn.fn_end - fn.fn_entry,
							   fn.fn_name, NULL);
			if (err == -EINVAL) {
				err = 0;
				continue;
			}
			if (!err)
				s.gs_functions++;
		}
		if (!err && (what & FP_GOPCLNTAB_LINES))
			err = add_lines(&p, b, &fn, &r, &s.gs_sequences);
		if (!err && p.pl_gofunc)
			err = add_inlines(&p, b, &fn);
	}
	s.gs_inlined = p.pl_inlined;
	free(r.r_v);
	free(p.pl_files);
	free(p.pl_inl);
	if (st)
		*st = s;
	return err;
}
