/* dwarf.c: DWARF line tables and inline scopes, read with libdwarf.
 *
 * libdwarf reads the sections through our own object access interface
 * (dwarf_sections.h) on top of the libelf handle the caller already
 * validated, with every size checked and bounded, so a small hostile file
 * cannot make us allocate without limit.
 *
 * For each compilation unit: its line table (every sequence, with file
 * names joined the way llvm-symbolizer joins them), then a walk of its
 * DIEs that records each subprogram and inlined subroutine with code as a
 * scope: name (linkage name demangled, else DW_AT_name, found through
 * DW_AT_specification and DW_AT_abstract_origin), call site and address
 * ranges (low/high pc, DWARF 4 .debug_ranges, DWARF 5 .debug_rnglists).
 * Only DIEs that can hold code are entered: namespaces, lexical blocks and
 * the functions themselves; types and variables are skipped over.
 */
#include "dwarf.h"

#include <elf.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#if __has_include(<libdwarf/libdwarf.h>)
#include <libdwarf/dwarf.h>
#include <libdwarf/libdwarf.h>
#else
#include <dwarf.h>
#include <libdwarf.h>
#endif

#include "dwarf_sections.h"
#include "demangle.h"
#include "intern.h"
#include "vec.h"

/* Nesting of DIEs we follow (real code nests a few dozen levels). */
#define MAX_DIE_DEPTH 128
/* DW_AT_specification / DW_AT_abstract_origin hops when naming. */
#define MAX_NAME_HOPS 8
/* Longest file name we build. */
#define MAX_PATH_LEN 4096

/* libdwarf calls this instead of aborting where it has no Dwarf_Error to
 * fill in; the failing call still returns an error. */
static void dw_ignore_error(Dwarf_Error e, Dwarf_Ptr arg)
{
	(void)e;
	(void)arg;
}

/* A name found for a scope, cached by the DIE offset it came from. */
struct name_ent {
	char *ne_name;    /* demangled, or NULL */
	char *ne_sysname; /* mangled, NULL when equal to ne_name */
};

struct walk {
	Dwarf_Debug w_dbg;
	struct dw_obj *w_obj;
	struct fp_symtab_builder *w_b;
	struct fp_dwarf_stats *w_stats;
	int w_err;             /* -ENOMEM stops everything */
	uint64_t w_die_budget; /* DIEs the walk may still visit */
	/* the current unit */
	Dwarf_Half w_version;
	Dwarf_Half w_addr_size, w_offset_size;
	Dwarf_Addr w_base;
	Dwarf_Unsigned w_addr_base, w_rnglists_base;
	uint32_t *w_files; /* DWARF file number - w_file_base -> builder file */
	size_t w_files_cap;
	Dwarf_Signed w_file_base, w_nfiles;
	/* names by DIE offset: the offsets' ids in w_name_ids index w_names */
	struct fp_intern *w_name_ids;
	struct name_ent *w_names;
	size_t w_names_cap;
	/* line rows of the sequence being read */
	struct fp_line_row *w_rows;
	size_t w_nrows, w_rows_cap;
	/* ranges of the DIE being read */
	uint64_t *w_ranges; /* lo, hi pairs */
	size_t w_nranges, w_ranges_cap;
	char w_path[MAX_PATH_LEN];
};

static void dw_drop_error(struct walk *w, Dwarf_Error *e)
{
	if (*e) {
		dwarf_dealloc_error(w->w_dbg, *e);
		*e = NULL;
	}
}

/* path_append: llvm::sys::path::append of one component, POSIX style:
 * exactly one '/' between components, none added before an absolute one
 * when the path is empty.  0 if it would not fit. */
static int path_append(char *buf, size_t *len, const char *comp)
{
	size_t clen;

	if (!comp || !comp[0])
		return 1;
	if (*len && buf[*len - 1] == '/') {
		while (*comp == '/')
			comp++;
	} else if (*len && comp[0] != '/') {
		if (*len + 1 >= MAX_PATH_LEN)
			return 0;
		buf[(*len)++] = '/';
	}
	clen = strlen(comp);
	if (clen >= MAX_PATH_LEN - *len)
		return 0;
	memcpy(buf + *len, comp, clen + 1);
	*len += clen;
	return 1;
}

/* file_path: the name llvm-symbolizer shows for a line table file entry
 * (LLVM 14, FileLineInfoKind::AbsoluteFilePath): absolute names as they
 * are; else the entry's include directory (DWARF 5: any, 0 being the
 * compilation directory; earlier: 1 and up, 0 meaning none) and name,
 * preceded by the unit's DW_AT_comp_dir unless that directory is
 * absolute.  Nothing is normalized: "./a/./a/b.c" stays. */
static const char *file_path(struct walk *w, Dwarf_Line_Context ctx, Dwarf_Unsigned version,
			     const char *comp_dir, const char *name, Dwarf_Unsigned dir)
{
	const char *inc = NULL;
	Dwarf_Signed ndirs = 0;
	Dwarf_Error e = NULL;
	size_t len = 0;

	if (name[0] == '/')
		return name;
	if (dwarf_srclines_include_dir_count(ctx, &ndirs, &e) != DW_DLV_OK)
		ndirs = 0;
	dw_drop_error(w, &e);
	/* libdwarf takes DWARF's directory numbers: DWARF 5 counts from 0
	 * (the compilation directory), earlier versions from 1 (0 meaning
	 * the compilation directory, not listed). */
	if (ndirs < 0)
		ndirs = 0;
	if (version >= 5 ? dir < (Dwarf_Unsigned)ndirs : dir > 0 && dir <= (Dwarf_Unsigned)ndirs) {
		if (dwarf_srclines_include_dir_data(ctx, (Dwarf_Signed)dir, &inc, &e) != DW_DLV_OK)
			inc = NULL;
	}
	dw_drop_error(w, &e);
	w->w_path[0] = '\0';
	if (comp_dir && comp_dir[0] && !(inc && inc[0] == '/'))
		if (!path_append(w->w_path, &len, comp_dir))
			return NULL;
	if (!path_append(w->w_path, &len, inc) || !path_append(w->w_path, &len, name))
		return NULL;
	return w->w_path;
}

static int push_row(struct walk *w, const struct fp_line_row *r)
{
	if (fp_vec_reserve(&w->w_rows, &w->w_rows_cap, w->w_nrows + 1, sizeof(*w->w_rows)))
		return -ENOMEM;
	w->w_rows[w->w_nrows++] = *r;
	return 0;
}

static uint32_t cu_file(const struct walk *w, Dwarf_Unsigned fileno)
{
	if ((Dwarf_Signed)fileno < w->w_file_base || fileno > INT64_MAX ||
	    (Dwarf_Signed)fileno - w->w_file_base >= w->w_nfiles)
		return FP_SYMTAB_NONE;
	return w->w_files[(Dwarf_Signed)fileno - w->w_file_base];
}

static uint32_t clamp32(Dwarf_Unsigned v)
{
	return v > UINT32_MAX ? UINT32_MAX : (uint32_t)v;
}

/* libdwarf up to 2021 starts DWARF 5 line programs (and each sequence)
 * with the file register at 0 instead of 1, so rows before the first
 * DW_LNS_set_file come out as file 0.  The GNU assembler writes those
 * tables (gcc, and assembly sources): it names file 1 by default and never
 * sets file 0, so from it a 0 can only be that default.  LLVM sets the file
 * explicitly at each sequence start, 0 included: its 0s are real. */
static int default_file_is_misread(const struct walk *w, Dwarf_Unsigned version,
				   const char *producer)
{
	static int old_libdwarf = -1;

	if (old_libdwarf < 0) {
		const char *v = dwarf_package_version();

		/* "20210528"; libdwarf 0.x, which fixed it, says "0.x.y" */
		old_libdwarf = v && strlen(v) == 8 && strcmp(v, "20220000") < 0;
	}
	(void)w;
	return old_libdwarf && version >= 5 &&
	       !(producer && (strstr(producer, "clang") || strstr(producer, "LLVM")));
}

/* read_lines: the unit's file names and line table. */
static int read_lines(struct walk *w, Dwarf_Die cu, const char *comp_dir, const char *producer)
{
	Dwarf_Line_Context ctx = NULL;
	Dwarf_Unsigned version = 0;
	Dwarf_Small count = 0;
	Dwarf_Signed base = 0, nfiles = 0, end = 0, nlines = 0;
	Dwarf_Line *lines = NULL;
	Dwarf_Error e = NULL;
	int err = 0, fix_default;

	w->w_nfiles = 0;
	if (dwarf_srclines_b(cu, &version, &count, &ctx, &e) != DW_DLV_OK) {
		dw_drop_error(w, &e);
		return 0;
	}
	if (count != 1 ||
	    dwarf_srclines_files_indexes(ctx, &base, &nfiles, &end, &e) != DW_DLV_OK ||
	    nfiles < 0 || base < 0 || base > 1 || end - base != nfiles) {
		dw_drop_error(w, &e);
		dwarf_srclines_dealloc_b(ctx);
		return 0;
	}
	if (fp_vec_reserve(&w->w_files, &w->w_files_cap, (size_t)nfiles, sizeof(*w->w_files))) {
		dwarf_srclines_dealloc_b(ctx);
		return -ENOMEM;
	}
	for (Dwarf_Signed i = 0; i < nfiles; i++) {
		const char *name = NULL, *path;
		Dwarf_Unsigned dir = 0, mtime, flen;
		Dwarf_Form_Data16 *md5 = NULL;

		w->w_files[i] = FP_SYMTAB_NONE;
		if (dwarf_srclines_files_data_b(ctx, base + i, &name, &dir, &mtime, &flen, &md5,
						&e) != DW_DLV_OK ||
		    !name || !name[0]) {
			dw_drop_error(w, &e);
			continue;
		}
		path = file_path(w, ctx, version, comp_dir, name, dir);
		if (path) {
			err = fp_symtab_builder_add_file(w->w_b, path, &w->w_files[i]);
			if (err == -ENOMEM)
				goto out;
			err = 0;
		}
	}
	w->w_file_base = base;
	w->w_nfiles = nfiles;

	if (dwarf_srclines_from_linecontext(ctx, &lines, &nlines, &e) != DW_DLV_OK) {
		dw_drop_error(w, &e);
		goto out;
	}
	w->w_nrows = 0;
	fix_default = default_file_is_misread(w, version, producer);
	for (Dwarf_Signed i = 0; i < nlines; i++) {
		Dwarf_Unsigned lineno = 0, col = 0, fileno = 0;
		Dwarf_Bool endseq = 0;
		Dwarf_Addr addr = 0;
		struct fp_line_row r;

		if (dwarf_lineaddr(lines[i], &addr, &e) != DW_DLV_OK ||
		    dwarf_lineendsequence(lines[i], &endseq, &e) != DW_DLV_OK ||
		    dwarf_lineno(lines[i], &lineno, &e) != DW_DLV_OK ||
		    dwarf_lineoff_b(lines[i], &col, &e) != DW_DLV_OK ||
		    dwarf_line_srcfileno(lines[i], &fileno, &e) != DW_DLV_OK) {
			dw_drop_error(w, &e);
			break;
		}
		r = (struct fp_line_row){
			.lr_addr = addr,
			.lr_file = cu_file(w, fileno == 0 && fix_default ? 1 : fileno),
			.lr_line = clamp32(lineno),
			.lr_column = clamp32(col),
		};
		err = push_row(w, &r);
		if (err)
			goto out;
		if (!endseq)
			continue;
		/* Sequences of discarded code start at 0 (or at a tombstone):
		 * no code of a linked file is there. */
		if (w->w_nrows >= 2 && w->w_rows[0].lr_addr != 0) {
			err = fp_symtab_builder_add_sequence(w->w_b, w->w_rows, w->w_nrows);
			if (err == -ENOMEM)
				goto out;
			err = 0;
			if (w->w_stats)
				w->w_stats->ds_sequences++;
		}
		if (w->w_stats)
			w->w_stats->ds_rows += w->w_nrows;
		w->w_nrows = 0;
	}
out:
	dwarf_srclines_dealloc_b(ctx);
	return err;
}

static int push_range(struct walk *w, uint64_t lo, uint64_t hi)
{
	/* Empty ranges, and discarded code at 0 or at a tombstone. */
	if (hi <= lo || lo == 0)
		return 0;
	if (fp_vec_reserve(&w->w_ranges, &w->w_ranges_cap, w->w_nranges + 2, sizeof(*w->w_ranges)))
		return -ENOMEM;
	w->w_ranges[w->w_nranges++] = lo;
	w->w_ranges[w->w_nranges++] = hi;
	return 0;
}

/* find_attr: attribute at of die into *a (the caller deallocates it);
 * 0 when it has none. */
static int find_attr(struct walk *w, Dwarf_Die die, Dwarf_Half at, Dwarf_Attribute *a)
{
	Dwarf_Error e = NULL;

	if (dwarf_attr(die, at, a, &e) == DW_DLV_OK)
		return 1;
	dw_drop_error(w, &e);
	return 0;
}

static int attr_udata(struct walk *w, Dwarf_Die die, Dwarf_Half at, Dwarf_Unsigned *v)
{
	Dwarf_Attribute a = NULL;
	Dwarf_Error e = NULL;
	int ok;

	if (!find_attr(w, die, at, &a))
		return 0;
	ok = dwarf_formudata(a, v, &e) == DW_DLV_OK;
	dw_drop_error(w, &e);
	if (!ok) {
		/* DW_FORM_implicit_const (gcc's DWARF 5) is signed */
		Dwarf_Signed sv = 0;

		ok = dwarf_formsdata(a, &sv, &e) == DW_DLV_OK && sv >= 0;
		dw_drop_error(w, &e);
		*v = (Dwarf_Unsigned)sv;
	}
	dwarf_dealloc_attribute(a);
	return ok;
}

/* form_offset: an attribute's value as a section offset or an index
 * (DW_FORM_sec_offset, data forms, DW_FORM_rnglistx). */
static int form_offset(struct walk *w, Dwarf_Attribute a, Dwarf_Unsigned *v)
{
	Dwarf_Error e = NULL;
	Dwarf_Half form = 0;
	Dwarf_Off off = 0;

	if (dwarf_whatform(a, &form, &e) != DW_DLV_OK) {
		dw_drop_error(w, &e);
		return 0;
	}
	/* libdwarf reads DW_FORM_sec_offset as a reference only, and
	 * "succeeds" reading index forms as references too: ask by form */
	if (form == DW_FORM_sec_offset) {
		if (dwarf_global_formref(a, &off, &e) == DW_DLV_OK) {
			*v = off;
			return 1;
		}
	} else if (dwarf_formudata(a, v, &e) == DW_DLV_OK) {
		return 1;
	}
	dw_drop_error(w, &e);
	return 0;
}

static int attr_offset(struct walk *w, Dwarf_Die die, Dwarf_Half at, Dwarf_Unsigned *v)
{
	Dwarf_Attribute a = NULL;
	int ok;

	if (!find_attr(w, die, at, &a))
		return 0;
	ok = form_offset(w, a, v);
	dwarf_dealloc_attribute(a);
	return ok;
}

/* The range lists are decoded here, from the sections as checked and
 * inflated by the object layer: libdwarf 20210528's range list readers
 * crash on damaged lists.  A cursor over one section: */
struct cursor {
	const struct dw_obj *c_obj;
	const uint8_t *c_p;
	uint64_t c_size, c_off;
	int c_bad;
};

static int cursor_init(struct cursor *c, struct dw_obj *o, size_t sec, uint64_t off)
{
	Dwarf_Small *data = NULL;
	int err = 0;

	memset(c, 0, sizeof(*c));
	c->c_obj = o;
	if (!sec || dw_obj_load_section(o, (Dwarf_Half)sec, &data, &err) != DW_DLV_OK)
		return 0;
	c->c_p = data;
	c->c_size = o->do_secs[sec].ds_size;
	c->c_off = off;
	return off < c->c_size;
}

static uint64_t cur_fixed(struct cursor *c, unsigned n)
{
	uint64_t v;

	if (c->c_bad || n == 0 || n > 8 || c->c_size - c->c_off < n) {
		c->c_bad = 1;
		return 0;
	}
	v = dw_load_end(c->c_obj, c->c_p + c->c_off, (int)n);
	c->c_off += n;
	return v;
}

static uint64_t cur_uleb(struct cursor *c)
{
	uint64_t v = 0;

	for (unsigned shift = 0; !c->c_bad; shift += 7) {
		uint8_t byte;

		if (c->c_off >= c->c_size || shift >= 64) {
			c->c_bad = 1;
			break;
		}
		byte = c->c_p[c->c_off++];
		v |= (uint64_t)(byte & 0x7f) << shift;
		if (!(byte & 0x80))
			return v;
	}
	return 0;
}

/* debug_addr: entry idx of the unit's .debug_addr table. */
static int debug_addr(struct walk *w, uint64_t idx, uint64_t *addr)
{
	struct cursor c;
	uint64_t off;

	if (idx > UINT64_MAX / 8)
		return 0;
	off = w->w_addr_base + idx * w->w_addr_size;
	if (off < w->w_addr_base || !cursor_init(&c, w->w_obj, w->w_obj->do_addr, off))
		return 0;
	*addr = cur_fixed(&c, w->w_addr_size);
	return !c.c_bad;
}

/* DWARF 5 DW_AT_ranges: a list in .debug_rnglists, given by offset or by
 * index into the unit's offset table (DW_AT_rnglists_base). */
static int rnglists(struct walk *w, Dwarf_Half form, uint64_t value)
{
	struct dw_obj *o = w->w_obj;
	uint64_t base = w->w_base, off = value;
	struct cursor c;
	int err = 0;

	if (form == DW_FORM_rnglistx) {
		uint64_t at = w->w_rnglists_base + value * w->w_offset_size;

		if (value > UINT64_MAX / 8 || !cursor_init(&c, o, o->do_rnglists, at))
			return 0;
		off = w->w_rnglists_base + cur_fixed(&c, w->w_offset_size);
		if (c.c_bad)
			return 0;
	}
	if (!cursor_init(&c, o, o->do_rnglists, off))
		return 0;
	/* every entry takes at least a byte: the section bounds the loop */
	while (!err && !c.c_bad) {
		uint64_t a = 0, b = 0, lo, hi;
		unsigned kind = (unsigned)cur_fixed(&c, 1);

		if (c.c_bad || kind == DW_RLE_end_of_list)
			break;
		switch (kind) {
		case DW_RLE_base_addressx:
			if (!debug_addr(w, cur_uleb(&c), &base))
				return err;
			continue;
		case DW_RLE_base_address:
			base = cur_fixed(&c, w->w_addr_size);
			continue;
		case DW_RLE_startx_endx:
			a = cur_uleb(&c);
			b = cur_uleb(&c);
			if (c.c_bad || !debug_addr(w, a, &lo) || !debug_addr(w, b, &hi))
				return err;
			break;
		case DW_RLE_startx_length:
			a = cur_uleb(&c);
			b = cur_uleb(&c);
			if (c.c_bad || !debug_addr(w, a, &lo))
				return err;
			hi = lo + b;
			break;
		case DW_RLE_offset_pair:
			a = cur_uleb(&c);
			b = cur_uleb(&c);
			lo = base + a;
			hi = base + b;
			break;
		case DW_RLE_start_end:
			lo = cur_fixed(&c, w->w_addr_size);
			hi = cur_fixed(&c, w->w_addr_size);
			break;
		case DW_RLE_start_length:
			lo = cur_fixed(&c, w->w_addr_size);
			hi = lo + cur_uleb(&c);
			break;
		default:
			return err; /* unknown: the rest cannot be parsed */
		}
		if (!c.c_bad && hi >= lo)
			err = push_range(w, lo, hi);
	}
	return err;
}

/* DWARF 2-4 DW_AT_ranges: pairs of addresses in .debug_ranges from the
 * unit's base address; (max, x) sets the base to x; (0, 0) ends. */
static int debug_ranges(struct walk *w, uint64_t off)
{
	uint64_t base = w->w_base, max = w->w_addr_size == 8 ? UINT64_MAX : UINT32_MAX;
	struct cursor c;
	int err = 0;

	if (!cursor_init(&c, w->w_obj, w->w_obj->do_ranges, off))
		return 0;
	while (!err) {
		uint64_t a = cur_fixed(&c, w->w_addr_size), b = cur_fixed(&c, w->w_addr_size);

		if (c.c_bad || (a == 0 && b == 0))
			break;
		if (a == max) {
			base = b;
			continue;
		}
		if (base + a >= base && base + b >= base + a)
			err = push_range(w, base + a, base + b);
	}
	return err;
}

/* read_ranges: the code of a DIE into w_ranges. */
static int read_ranges(struct walk *w, Dwarf_Die die)
{
	Dwarf_Addr lo = 0, hi = 0;
	Dwarf_Half form = 0;
	enum Dwarf_Form_Class cls = DW_FORM_CLASS_UNKNOWN;
	Dwarf_Attribute a = NULL;
	Dwarf_Unsigned value = 0;
	Dwarf_Error e = NULL;

	w->w_nranges = 0;
	if (dwarf_lowpc(die, &lo, &e) == DW_DLV_OK) {
		if (dwarf_highpc_b(die, &hi, &form, &cls, &e) != DW_DLV_OK) {
			dw_drop_error(w, &e);
			return 0;
		}
		if (cls == DW_FORM_CLASS_CONSTANT) {
			if (hi > UINT64_MAX - lo)
				return 0;
			hi += lo;
		}
		return push_range(w, lo, hi);
	}
	dw_drop_error(w, &e);
	if (!find_attr(w, die, DW_AT_ranges, &a))
		return 0;
	if (dwarf_whatform(a, &form, &e) != DW_DLV_OK || !form_offset(w, a, &value)) {
		dw_drop_error(w, &e);
		dwarf_dealloc_attribute(a);
		return 0;
	}
	dwarf_dealloc_attribute(a);
	if (w->w_version >= 5)
		return rnglists(w, form, value);
	return debug_ranges(w, value);
}

/* ref_die: the DIE an attribute of die refers to, or NULL. */
static Dwarf_Die ref_die(struct walk *w, Dwarf_Die die, Dwarf_Half at)
{
	Dwarf_Attribute a = NULL;
	Dwarf_Off off = 0;
	Dwarf_Die ref = NULL;
	Dwarf_Error e = NULL;
	int ok;

	if (!find_attr(w, die, at, &a))
		return NULL;
	ok = dwarf_global_formref(a, &off, &e) == DW_DLV_OK;
	dw_drop_error(w, &e);
	dwarf_dealloc_attribute(a);
	if (!ok || dwarf_offdie_b(w->w_dbg, off, 1, &ref, &e) != DW_DLV_OK) {
		dw_drop_error(w, &e);
		return NULL;
	}
	return ref;
}

static const char *attr_string(struct walk *w, Dwarf_Die die, Dwarf_Half at)
{
	Dwarf_Attribute a = NULL;
	Dwarf_Error e = NULL;
	char *s = NULL;

	if (!find_attr(w, die, at, &a))
		return NULL;
	if (dwarf_formstring(a, &s, &e) != DW_DLV_OK)
		s = NULL;
	dw_drop_error(w, &e);
	dwarf_dealloc_attribute(a);
	return s;
}

/* find_names: the linkage name and the name of die, each from the first
 * DIE having it along DW_AT_specification / DW_AT_abstract_origin. */
static void find_names(struct walk *w, Dwarf_Die die, const char **linkage, const char **name)
{
	Dwarf_Die cur = die, next;

	*linkage = *name = NULL;
	for (int hop = 0; cur && hop <= MAX_NAME_HOPS; hop++) {
		if (!*linkage) {
			*linkage = attr_string(w, cur, DW_AT_linkage_name);
			if (!*linkage)
				*linkage = attr_string(w, cur, DW_AT_MIPS_linkage_name);
		}
		if (!*name)
			*name = attr_string(w, cur, DW_AT_name);
		if (*linkage)
			break;
		next = ref_die(w, cur, DW_AT_specification);
		if (!next)
			next = ref_die(w, cur, DW_AT_abstract_origin);
		if (cur != die)
			dwarf_dealloc_die(cur);
		cur = next;
	}
	if (cur && cur != die)
		dwarf_dealloc_die(cur);
}

/* scope_names: the names of the function die is an instance of: demangled
 * linkage name, else DW_AT_name (as llvm-symbolizer names functions).
 * Cached by the DIE the instance comes from. */
static int scope_names(struct walk *w, Dwarf_Die die, const struct name_ent **out)
{
	static const struct name_ent none = { 0 };
	const char *linkage, *name;
	Dwarf_Off key = 0;
	Dwarf_Attribute a = NULL;
	Dwarf_Error e = NULL;
	struct name_ent *ent;
	uint32_t id;
	char *dem;
	int added;

	/* The origin (inlined calls, concrete instances) or the DIE. */
	if (dwarf_attr(die, DW_AT_abstract_origin, &a, &e) == DW_DLV_OK) {
		if (dwarf_global_formref(a, &key, &e) != DW_DLV_OK)
			key = 0;
		dwarf_dealloc_attribute(a);
	}
	dw_drop_error(w, &e);
	if (!key && dwarf_dieoffset(die, &key, &e) != DW_DLV_OK)
		key = 0;
	dw_drop_error(w, &e);
	*out = &none;
	if (!key)
		return 0;
	if ((!w->w_name_ids && fp_intern_alloc(&w->w_name_ids)) ||
	    fp_intern_get(w->w_name_ids, &key, sizeof(key), &id, &added) ||
	    fp_vec_reserve_zeroed(&w->w_names, &w->w_names_cap, (size_t)id + 1, sizeof(*ent)))
		return -ENOMEM;
	ent = &w->w_names[id];
	if (!added) {
		*out = ent;
		return 0;
	}
	find_names(w, die, &linkage, &name);
	dem = linkage ? fp_demangle(linkage) : NULL;
	if (dem) {
		ent->ne_name = dem;
		ent->ne_sysname = strdup(linkage);
	} else if (linkage) {
		ent->ne_name = strdup(linkage);
	} else if (name) {
		ent->ne_name = strdup(name);
	}
	if ((linkage || name) && !ent->ne_name)
		return -ENOMEM;
	if (dem && !ent->ne_sysname)
		return -ENOMEM;
	*out = ent;
	return 0;
}

static int walk_children(struct walk *w, Dwarf_Die die, uint32_t scope, int depth);

/* add_scope: a subprogram or inlined subroutine with code, and what it
 * contains.  Returns whether its children were all walked. */
static int add_scope(struct walk *w, Dwarf_Die die, Dwarf_Half tag, uint32_t parent, int depth)
{
	const struct name_ent *names;
	Dwarf_Unsigned call_file = 0, call_line = 0, call_col = 0;
	uint32_t file = FP_SYMTAB_NONE, id;
	int err;

	err = read_ranges(w, die);
	if (err || !w->w_nranges) {
		w->w_err = err;
		return 0;
	}
	if (tag == DW_TAG_subprogram) {
		parent = FP_SYMTAB_NONE; /* the chain stops at the function */
	} else if (attr_udata(w, die, DW_AT_call_file, &call_file)) {
		file = cu_file(w, call_file);
		attr_udata(w, die, DW_AT_call_line, &call_line);
		attr_udata(w, die, DW_AT_call_column, &call_col);
	}
	err = scope_names(w, die, &names);
	if (!err)
		err = fp_symtab_builder_add_scope(w->w_b, parent, names->ne_name, names->ne_sysname,
						  file, clamp32(call_line), clamp32(call_col), &id);
	for (size_t i = 0; !err && i < w->w_nranges; i += 2)
		err = fp_symtab_builder_add_range(w->w_b, id, w->w_ranges[i], w->w_ranges[i + 1]);
	if (err) {
		w->w_err = err == -ENOMEM ? err : 0;
		return 0;
	}
	if (w->w_stats) {
		w->w_stats->ds_scopes++;
		w->w_stats->ds_inlined += tag == DW_TAG_inlined_subroutine;
	}
	return walk_children(w, die, id, depth + 1);
}

/* skip_is_safe: whether libdwarf 20210528 can step over die (at off).
 * It jumps to a DIE's DW_AT_sibling (unless its form is
 * DW_FORM_ref_addr), and without one walks the DIE's children, jumping
 * or walking at each in turn; inside that walk, a reference to the DIE
 * itself makes it spin forever.  top: die is where the step starts, so
 * it is stepped over once whatever its reference (the caller wants each
 * DIE past the one before); walked: the walk went through all of die's
 * children already.  Below the top a reference must lie past its DIE,
 * and the children of a DIE without one are checked in turn. */
static int skip_is_safe(struct walk *w, Dwarf_Die die, Dwarf_Off off, int depth, int top,
			int walked)
{
	Dwarf_Attribute a = NULL;
	Dwarf_Error e = NULL;
	Dwarf_Half form = 0, kids = 0;
	Dwarf_Die child = NULL, next = NULL;
	Dwarf_Off sib = 0, prev = off;
	int res;

	if (dwarf_die_abbrev_children_flag(die, &kids) != DW_DLV_OK)
		return 0;
	if (top && (!kids || walked))
		return 1;
	if (find_attr(w, die, DW_AT_sibling, &a)) {
		int ok = dwarf_whatform(a, &form, &e) == DW_DLV_OK;

		if (ok && form != DW_FORM_ref_addr)
			ok = top || (dwarf_global_formref(a, &sib, &e) == DW_DLV_OK && sib > off);
		dw_drop_error(w, &e);
		dwarf_dealloc_attribute(a);
		if (!ok || form != DW_FORM_ref_addr)
			return ok;
	}
	if (!kids)
		return 1;
	if (depth > MAX_DIE_DEPTH)
		return 0;
	res = dwarf_child(die, &child, &e);
	while (res == DW_DLV_OK) {
		if (dwarf_dieoffset(child, &off, &e) != DW_DLV_OK || off <= prev ||
		    !w->w_die_budget || !skip_is_safe(w, child, off, depth + 1, 0, 0)) {
			res = DW_DLV_ERROR;
			break;
		}
		prev = off;
		w->w_die_budget--;
		res = dwarf_siblingof_b(w->w_dbg, child, 1, &next, &e);
		dwarf_dealloc_die(child);
		child = res == DW_DLV_OK ? next : NULL;
	}
	if (child)
		dwarf_dealloc_die(child);
	dw_drop_error(w, &e);
	return res == DW_DLV_NO_ENTRY;
}

/* next_sibling: the DIE after die (at offset off) and its children,
 * DW_DLV_NO_ENTRY at the end of the list or when libdwarf cannot be
 * trusted to find it. */
static int next_sibling(struct walk *w, Dwarf_Die die, Dwarf_Off off, int depth, int walked,
			Dwarf_Die *next)
{
	Dwarf_Error e = NULL;
	int res;

	if (!skip_is_safe(w, die, off, depth, 1, walked))
		return DW_DLV_ERROR;
	res = dwarf_siblingof_b(w->w_dbg, die, 1, next, &e);
	dw_drop_error(w, &e);
	return res;
}

/* walk_children: the DIEs under die.  Damaged sibling references can
 * point back (libdwarf follows them): each DIE must lie after the one
 * before, and the walk as a whole visits at most about one DIE per byte
 * of .debug_info.  Returns whether it reached the end of the list. */
static int walk_children(struct walk *w, Dwarf_Die die, uint32_t scope, int depth)
{
	Dwarf_Die child = NULL, next = NULL;
	Dwarf_Off prev = 0, off = 0;
	Dwarf_Error e = NULL;
	int res;

	if (depth > MAX_DIE_DEPTH || dwarf_dieoffset(die, &prev, &e) != DW_DLV_OK) {
		dw_drop_error(w, &e);
		return 0;
	}
	res = dwarf_child(die, &child, &e);
	while (res == DW_DLV_OK && !w->w_err) {
		Dwarf_Half tag = 0;
		int walked = 0;

		if (dwarf_dieoffset(child, &off, &e) != DW_DLV_OK || off <= prev ||
		    !w->w_die_budget)
			break;
		prev = off;
		w->w_die_budget--;
		if (dwarf_tag(child, &tag, &e) == DW_DLV_OK) {
			switch (tag) {
			case DW_TAG_subprogram:
			case DW_TAG_inlined_subroutine:
				walked = add_scope(w, child, tag, scope, depth);
				break;
			case DW_TAG_lexical_block:
			case DW_TAG_namespace:
			case DW_TAG_module:
			case DW_TAG_try_block:
			case DW_TAG_catch_block:
				walked = walk_children(w, child, scope, depth + 1);
				break;
			default:
				break;
			}
		}
		dw_drop_error(w, &e);
		res = next_sibling(w, child, off, depth, walked, &next);
		dwarf_dealloc_die(child);
		child = res == DW_DLV_OK ? next : NULL;
	}
	if (child)
		dwarf_dealloc_die(child);
	dw_drop_error(w, &e);
	return res == DW_DLV_NO_ENTRY;
}

static void walk_unit(struct walk *w, Dwarf_Die cu, Dwarf_Half version, Dwarf_Half addr_size,
		      Dwarf_Half offset_size)
{
	Dwarf_Half tag = 0;
	Dwarf_Error e = NULL;
	const char *comp_dir;

	if (dwarf_tag(cu, &tag, &e) != DW_DLV_OK ||
	    (tag != DW_TAG_compile_unit && tag != DW_TAG_partial_unit)) {
		dw_drop_error(w, &e);
		return;
	}
	w->w_version = version;
	w->w_addr_size = addr_size == 4 ? 4 : 8;
	w->w_offset_size = offset_size == 8 ? 8 : 4;
	/* without DW_AT_*_base, the first table after a section's first
	 * header, as for units without them in practice */
	if (!attr_offset(w, cu, DW_AT_addr_base, &w->w_addr_base))
		w->w_addr_base = w->w_offset_size == 8 ? 16 : 8;
	if (!attr_offset(w, cu, DW_AT_rnglists_base, &w->w_rnglists_base))
		w->w_rnglists_base = w->w_offset_size == 8 ? 20 : 12;
	w->w_base = 0;
	if (dwarf_lowpc(cu, &w->w_base, &e) != DW_DLV_OK)
		w->w_base = 0;
	dw_drop_error(w, &e);
	comp_dir = attr_string(w, cu, DW_AT_comp_dir);
	w->w_err = read_lines(w, cu, comp_dir, attr_string(w, cu, DW_AT_producer));
	if (w->w_err)
		return;
	if (w->w_stats)
		w->w_stats->ds_units++;
	walk_children(w, cu, FP_SYMTAB_NONE, 0);
}

int fp_dwarf_ingest(Elf *elf, uint64_t file_size, struct fp_symtab_builder *b,
		    struct fp_dwarf_stats *stats)
{
	Dwarf_Obj_Access_Interface iface;
	struct walk w = { 0 };
	struct dw_obj o;
	Dwarf_Debug dbg = NULL;
	Dwarf_Error e = NULL;
	int err;

	if (stats)
		memset(stats, 0, sizeof(*stats));
	err = dw_obj_init(&o, elf, file_size);
	if (err) {
		dw_obj_fini(&o);
		return err == -ENOMEM ? err : 0;
	}
	iface.object = &o;
	iface.methods = &dw_obj_methods;
	if (dwarf_object_init_b(&iface, dw_ignore_error, NULL, DW_GROUPNUMBER_ANY, &dbg, &e) !=
	    DW_DLV_OK) {
		/* Without a Dwarf_Debug the error was allocated apart, and is
		 * freed apart. */
		if (e)
			dwarf_dealloc(NULL, e, DW_DLA_ERROR);
		dw_obj_fini(&o);
		return 0;
	}
	w.w_dbg = dbg;
	w.w_obj = &o;
	w.w_die_budget = 1024;
	for (size_t i = 0; i < o.do_nsecs; i++)
		if (o.do_secs[i].ds_kind != DS_NONE && !strcmp(o.do_secs[i].ds_name, ".debug_info"))
			w.w_die_budget += o.do_secs[i].ds_size;
	w.w_b = b;
	w.w_stats = stats;
	for (;;) {
		Dwarf_Unsigned hdr_len = 0, typeoff = 0, next = 0;
		Dwarf_Half version = 0, addr_size = 0, len_size = 0, ext_size = 0, cu_type = 0;
		Dwarf_Off abbrev = 0;
		Dwarf_Sig8 sig;
		Dwarf_Die cu = NULL;
		int res;

		res = dwarf_next_cu_header_d(dbg, 1, &hdr_len, &version, &abbrev, &addr_size,
					     &len_size, &ext_size, &sig, &typeoff, &next, &cu_type,
					     &e);
		if (res != DW_DLV_OK)
			break;
		res = dwarf_siblingof_b(dbg, NULL, 1, &cu, &e);
		if (res == DW_DLV_ERROR)
			break;
		if (res == DW_DLV_OK) {
			walk_unit(&w, cu, version, addr_size, len_size);
			dwarf_dealloc_die(cu);
		}
		if (w.w_err)
			break;
	}
	dw_drop_error(&w, &e);
	err = w.w_err == -ENOMEM ? -ENOMEM : 0;
	for (size_t i = 0; i < w.w_names_cap; i++) {
		free(w.w_names[i].ne_name);
		free(w.w_names[i].ne_sysname);
	}
	free(w.w_names);
	fp_intern_free(w.w_name_ids);
	free(w.w_files);
	free(w.w_rows);
	free(w.w_ranges);
	dwarf_object_finish(dbg, &e);
	dw_obj_fini(&o);
	return err;
}
