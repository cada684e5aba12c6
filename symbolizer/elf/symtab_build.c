/* symtab_build.c: building symbol table blobs (fp_symtab_builder_*, the
 * layout in symtab_format.h).  A builder belongs to one thread, the one
 * that ingests a file.
 *
 * The builder settles everything a look-up would otherwise decide: of the
 * symbols at one address the first added is kept (fp_elf_symtab adds the
 * preferred alias first), size-less symbols get their extent, and each
 * symbol records its enclosing one.  A look-up is then a binary search for
 * the last symbol starting at or before the address, falling back along
 * the enclosing chain when that one ends too early: the innermost symbol
 * containing the address wins.  sy_size reports the settled size.  Ranges
 * are searched the same way; the innermost range gives the innermost
 * scope, and the scopes' parents the rest of the inline chain.  Line
 * rows: a binary search of the block index, then decoding one block.
 */
#include "symtab.h"
#include "indexset.h"
#include "intern.h"
#include "symtab_format.h"
#include "vec.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>

struct builder_sym {
	uint64_t bs_addr;
	uint64_t bs_size;
	uint32_t bs_name; /* offsets into fb_names */
	uint32_t bs_sysname;
	uint32_t bs_fname, bs_fsysname; /* the names frames show */
	uint32_t bs_seq;                /* order of addition: ties keep the earliest */
};

struct builder_seg {
	uint64_t bg_offset;
	uint64_t bg_vaddr;
	uint64_t bg_filesz;
};

/* A line row as added; br_file is a file index or NONE. */
struct builder_row {
	uint64_t br_addr;
	uint32_t br_file;
	uint32_t br_line;
	uint32_t br_col;
};

struct builder_seqn {
	uint64_t bq_start;
	size_t bq_first, bq_n; /* rows in fb_rows */
	uint32_t bq_seq;
};

struct builder_scope {
	uint32_t bc_name, bc_sysname; /* string table offsets or NONE */
	uint32_t bc_parent;
	uint32_t bc_call_file, bc_call_line, bc_call_col;
};

struct builder_range {
	uint64_t bn_lo, bn_size;
	uint32_t bn_scope;
};

/* Deduplicating string table under construction: the set's indexes are
 * the strings' offsets in sb_buf, hashed with the keyed fp_hash (names
 * come from uploaded files: no one may choose colliding ones). */
struct strtab {
	char *sb_buf;
	size_t sb_len, sb_cap;
	struct fp_indexset sb_set;
};

struct fp_symtab_builder {
	struct builder_sym *fb_syms;
	size_t fb_nsyms, fb_syms_cap;
	struct builder_seg *fb_segs;
	size_t fb_nsegs, fb_segs_cap;
	char *fb_names; /* every added symbol name, not yet deduplicated */
	size_t fb_names_len, fb_names_cap;
	struct strtab fb_st; /* the blob's string table */
	uint32_t *fb_files;  /* file index -> string offset */
	size_t fb_nfiles, fb_files_cap;
	struct fp_indexset fb_file_set; /* file indexes, by string offset */
	struct builder_row *fb_rows;
	size_t fb_nrows, fb_rows_cap;
	struct builder_seqn *fb_seqs;
	size_t fb_nseqs, fb_seqs_cap;
	struct builder_scope *fb_scopes;
	size_t fb_nscopes, fb_scopes_cap;
	struct builder_range *fb_ranges;
	size_t fb_nranges, fb_ranges_cap;
	int fb_finished;
};

int fp_symtab_builder_alloc(struct fp_symtab_builder **b)
{
	struct fp_symtab_builder *nb = calloc(1, sizeof(*nb));

	if (!nb)
		return -ENOMEM;
	*b = nb;
	return 0;
}

static void strtab_fini(struct strtab *t);

void fp_symtab_builder_free(struct fp_symtab_builder *b)
{
	if (!b)
		return;
	free(b->fb_syms);
	free(b->fb_segs);
	free(b->fb_names);
	strtab_fini(&b->fb_st);
	free(b->fb_files);
	fp_indexset_free(&b->fb_file_set);
	free(b->fb_rows);
	free(b->fb_seqs);
	free(b->fb_scopes);
	free(b->fb_ranges);
	free(b);
}

int fp_symtab_builder_add_segment(struct fp_symtab_builder *b, uint64_t file_offset, uint64_t vaddr,
				  uint64_t filesz)
{
	int err;

	if (b->fb_finished)
		return -EINVAL;
	err = fp_vec_reserve(&b->fb_segs, &b->fb_segs_cap, b->fb_nsegs + 1, sizeof(*b->fb_segs));
	if (err)
		return err;
	b->fb_segs[b->fb_nsegs++] = (struct builder_seg){
		.bg_offset = file_offset,
		.bg_vaddr = vaddr,
		.bg_filesz = filesz,
	};
	return 0;
}

/* Offsets into fb_names are u32, so the raw names are limited to 4 GiB;
 * far beyond any real table. */
static int builder_copy_name(struct fp_symtab_builder *b, const char *s, uint32_t *off)
{
	size_t len = strlen(s) + 1;
	size_t need = b->fb_names_len + len;

	if (len > UINT32_MAX || need > UINT32_MAX ||
	    fp_vec_reserve(&b->fb_names, &b->fb_names_cap, need, 1))
		return -ENOMEM;
	memcpy(b->fb_names + b->fb_names_len, s, len);
	*off = (uint32_t)b->fb_names_len;
	b->fb_names_len = need;
	return 0;
}

/* copy_names: name and system name (NULL, empty or equal: the same). */
static int builder_copy_names(struct fp_symtab_builder *b, const char *name,
			      const char *system_name, uint32_t *name_off, uint32_t *sys_off)
{
	int err = builder_copy_name(b, name, name_off);

	if (err)
		return err;
	*sys_off = *name_off;
	if (system_name && system_name[0] && strcmp(system_name, name) != 0)
		return builder_copy_name(b, system_name, sys_off);
	return 0;
}

int fp_symtab_builder_add_symbol_ex(struct fp_symtab_builder *b, uint64_t addr, uint64_t size,
				    const char *name, const char *system_name,
				    const char *frame_name, const char *frame_system_name)
{
	uint32_t name_off, sys_off, fname_off, fsys_off;
	int err;

	if (b->fb_finished || !name || !name[0])
		return -EINVAL;
	/* NO_PARENT and the u32 seq must stay out of range of real indexes. */
	if (b->fb_nsyms >= UINT32_MAX - 1)
		return -ENOMEM;
	err = fp_vec_reserve(&b->fb_syms, &b->fb_syms_cap, b->fb_nsyms + 1, sizeof(*b->fb_syms));
	if (err)
		return err;
	err = builder_copy_names(b, name, system_name, &name_off, &sys_off);
	if (err)
		return err;
	fname_off = name_off;
	fsys_off = sys_off;
	if (frame_name && frame_name[0] &&
	    (strcmp(frame_name, name) != 0 ||
	     strcmp(frame_system_name && frame_system_name[0] ? frame_system_name : frame_name,
		    b->fb_names + sys_off) != 0)) {
		err = builder_copy_names(b, frame_name, frame_system_name, &fname_off, &fsys_off);
		if (err)
			return err;
	}
	b->fb_syms[b->fb_nsyms] = (struct builder_sym){
		.bs_addr = addr,
		.bs_size = size,
		.bs_name = name_off,
		.bs_sysname = sys_off,
		.bs_fname = fname_off,
		.bs_fsysname = fsys_off,
		.bs_seq = (uint32_t)b->fb_nsyms,
	};
	b->fb_nsyms++;
	return 0;
}

int fp_symtab_builder_add_symbol(struct fp_symtab_builder *b, uint64_t addr, uint64_t size,
				 const char *name, const char *system_name)
{
	return fp_symtab_builder_add_symbol_ex(b, addr, size, name, system_name, NULL, NULL);
}

static void strtab_fini(struct strtab *t)
{
	free(t->sb_buf);
	fp_indexset_free(&t->sb_set);
}

/* strtab_eq: is the string at offset index key (a NUL-terminated string)? */
static int strtab_eq(const void *ctx, uint32_t index, const void *key)
{
	const struct strtab *t = ctx;

	return strcmp(t->sb_buf + index, key) == 0;
}

/* strtab_intern: the offset of s in t, adding it if new. */
static int strtab_intern(struct strtab *t, const char *s, uint32_t *off)
{
	size_t len = strlen(s), slot;
	uint32_t hash = (uint32_t)fp_hash(s, len), found;

	found = fp_indexset_find(&t->sb_set, hash, strtab_eq, t, s, &slot);
	if (found != FP_INDEXSET_NONE) {
		*off = found;
		return 0;
	}
	/* Offsets are u32 and below FP_INDEXSET_NONE. */
	if (t->sb_len + len + 1 >= UINT32_MAX)
		return -ENOMEM;
	if (fp_vec_reserve(&t->sb_buf, &t->sb_cap, t->sb_len + len + 1, 1) ||
	    fp_indexset_make_room(&t->sb_set, hash, &slot))
		return -ENOMEM;
	memcpy(t->sb_buf + t->sb_len, s, len + 1);
	*off = (uint32_t)t->sb_len;
	fp_indexset_insert(&t->sb_set, slot, hash, *off);
	t->sb_len += len + 1;
	return 0;
}

/* file_eq: does file index name the string at offset *key? */
static int file_eq(const void *ctx, uint32_t index, const void *key)
{
	const struct fp_symtab_builder *b = ctx;

	return b->fb_files[index] == *(const uint32_t *)key;
}

int fp_symtab_builder_add_file(struct fp_symtab_builder *b, const char *name, uint32_t *file)
{
	uint32_t off, hash, found;
	size_t slot;
	int err;

	if (b->fb_finished || !name || !name[0])
		return -EINVAL;
	err = strtab_intern(&b->fb_st, name, &off);
	if (err)
		return err;
	/* The offset is ours (not chosen by the file): a plain mix will do. */
	hash = fp_hash_finish(fp_hash_word(0, off));
	found = fp_indexset_find(&b->fb_file_set, hash, file_eq, b, &off, &slot);
	if (found != FP_INDEXSET_NONE) {
		*file = found;
		return 0;
	}
	if (b->fb_nfiles >= NONE - 1)
		return -ENOMEM;
	err = fp_vec_reserve(&b->fb_files, &b->fb_files_cap, b->fb_nfiles + 1,
			     sizeof(*b->fb_files));
	if (err || (err = fp_indexset_make_room(&b->fb_file_set, hash, &slot)))
		return err;
	b->fb_files[b->fb_nfiles] = off;
	fp_indexset_insert(&b->fb_file_set, slot, hash, (uint32_t)b->fb_nfiles);
	*file = (uint32_t)b->fb_nfiles++;
	return 0;
}

int fp_symtab_builder_add_sequence(struct fp_symtab_builder *b, const struct fp_line_row *rows,
				   size_t n)
{
	size_t first = b->fb_nrows;
	int err;

	if (b->fb_finished || n < 2 || !rows)
		return -EINVAL;
	for (size_t i = 0; i < n; i++)
		if (rows[i].lr_file != NONE && rows[i].lr_file >= b->fb_nfiles)
			return -EINVAL;
	if (b->fb_nseqs >= UINT32_MAX)
		return -ENOMEM;
	for (size_t i = 0; i < n; i++) {
		struct builder_row r = {
			.br_addr = rows[i].lr_addr,
			.br_file = i + 1 < n ? rows[i].lr_file : NONE,
			.br_line = i + 1 < n ? rows[i].lr_line : 0,
			.br_col = i + 1 < n ? rows[i].lr_column : 0,
		};

		if (r.br_file == NONE)
			r.br_line = r.br_col = 0;
		/* Backwards rows are dropped; of rows at one address the last
		 * one counts (the end row included: an empty line range). */
		if (b->fb_nrows > first) {
			struct builder_row *prev = &b->fb_rows[b->fb_nrows - 1];

			if (r.br_addr < prev->br_addr)
				continue;
			if (r.br_addr == prev->br_addr) {
				*prev = r;
				continue;
			}
		}
		err = fp_vec_reserve(&b->fb_rows, &b->fb_rows_cap, b->fb_nrows + 1,
				     sizeof(*b->fb_rows));
		if (err) {
			b->fb_nrows = first;
			return err;
		}
		b->fb_rows[b->fb_nrows++] = r;
	}
	/* Nothing left but an end: an empty sequence. */
	if (b->fb_nrows - first < 2 || b->fb_rows[b->fb_nrows - 1].br_file != NONE) {
		b->fb_nrows = first;
		return 0;
	}
	err = fp_vec_reserve(&b->fb_seqs, &b->fb_seqs_cap, b->fb_nseqs + 1, sizeof(*b->fb_seqs));
	if (err) {
		b->fb_nrows = first;
		return err;
	}
	b->fb_seqs[b->fb_nseqs] = (struct builder_seqn){
		.bq_start = b->fb_rows[first].br_addr,
		.bq_first = first,
		.bq_n = b->fb_nrows - first,
		.bq_seq = (uint32_t)b->fb_nseqs,
	};
	b->fb_nseqs++;
	return 0;
}

int fp_symtab_builder_add_scope(struct fp_symtab_builder *b, uint32_t parent, const char *name,
				const char *system_name, uint32_t call_file, uint32_t call_line,
				uint32_t call_column, uint32_t *scope)
{
	struct builder_scope sc = {
		.bc_name = NONE,
		.bc_sysname = NONE,
		.bc_parent = parent,
		.bc_call_file = call_file,
		.bc_call_line = call_line,
		.bc_call_col = call_column,
	};
	int err;

	if (b->fb_finished || (parent != NONE && parent >= b->fb_nscopes) ||
	    (call_file != NONE && call_file >= b->fb_nfiles))
		return -EINVAL;
	if (b->fb_nscopes >= NONE - 1)
		return -ENOMEM;
	err = fp_vec_reserve(&b->fb_scopes, &b->fb_scopes_cap, b->fb_nscopes + 1,
			     sizeof(*b->fb_scopes));
	if (err)
		return err;
	if (name && name[0]) {
		err = strtab_intern(&b->fb_st, name, &sc.bc_name);
		if (err)
			return err;
		sc.bc_sysname = sc.bc_name;
	}
	if (system_name && system_name[0] && (!name || strcmp(name, system_name) != 0)) {
		err = strtab_intern(&b->fb_st, system_name, &sc.bc_sysname);
		if (err)
			return err;
	}
	if (call_file == NONE)
		sc.bc_call_line = sc.bc_call_col = 0;
	b->fb_scopes[b->fb_nscopes] = sc;
	*scope = (uint32_t)b->fb_nscopes++;
	return 0;
}

int fp_symtab_builder_add_range(struct fp_symtab_builder *b, uint32_t scope, uint64_t lo,
				uint64_t hi)
{
	int err;

	if (b->fb_finished || scope >= b->fb_nscopes)
		return -EINVAL;
	if (hi <= lo)
		return 0;
	if (b->fb_nranges >= NONE - 1)
		return -ENOMEM;
	err = fp_vec_reserve(&b->fb_ranges, &b->fb_ranges_cap, b->fb_nranges + 1,
			     sizeof(*b->fb_ranges));
	if (err)
		return err;
	b->fb_ranges[b->fb_nranges++] = (struct builder_range){
		.bn_lo = lo,
		.bn_size = hi - lo > UINT32_MAX ? UINT32_MAX : hi - lo,
		.bn_scope = scope,
	};
	return 0;
}

static int cmp_builder_sym(const void *a, const void *b)
{
	const struct builder_sym *x = a, *y = b;

	if (x->bs_addr != y->bs_addr)
		return x->bs_addr < y->bs_addr ? -1 : 1;
	return x->bs_seq < y->bs_seq ? -1 : x->bs_seq > y->bs_seq;
}

static int cmp_builder_seg(const void *a, const void *b)
{
	const struct builder_seg *x = a, *y = b;

	if (x->bg_offset != y->bg_offset)
		return x->bg_offset < y->bg_offset ? -1 : 1;
	if (x->bg_filesz != y->bg_filesz)
		return x->bg_filesz < y->bg_filesz ? -1 : 1;
	return x->bg_vaddr < y->bg_vaddr ? -1 : x->bg_vaddr > y->bg_vaddr;
}

/* Sort segments and drop any whose file range overlaps an earlier one:
 * a file offset must map to a single address. */
static void builder_settle_segments(struct fp_symtab_builder *b)
{
	size_t n = 0;
	uint64_t end = 0;

	if (b->fb_nsegs)
		qsort(b->fb_segs, b->fb_nsegs, sizeof(*b->fb_segs), cmp_builder_seg);
	for (size_t i = 0; i < b->fb_nsegs; i++) {
		struct builder_seg *s = &b->fb_segs[i];

		if (s->bg_filesz > UINT64_MAX - s->bg_offset)
			continue;
		if (n && s->bg_offset < end)
			continue;
		b->fb_segs[n++] = *s;
		end = s->bg_offset + s->bg_filesz;
	}
	b->fb_nsegs = n;
}

/* Sort symbols, keep the first added at each address (taking the first
 * non-zero size of the group if it has none), and give 0-sized symbols
 * their extent. */
static void builder_settle_symbols(struct fp_symtab_builder *b)
{
	size_t n = 0;

	if (b->fb_nsyms)
		qsort(b->fb_syms, b->fb_nsyms, sizeof(*b->fb_syms), cmp_builder_sym);
	for (size_t i = 0; i < b->fb_nsyms; i++) {
		struct builder_sym *s = &b->fb_syms[i];

		if (n && b->fb_syms[n - 1].bs_addr == s->bs_addr) {
			if (!b->fb_syms[n - 1].bs_size)
				b->fb_syms[n - 1].bs_size = s->bs_size;
			continue;
		}
		b->fb_syms[n++] = *s;
	}
	b->fb_nsyms = n;

	for (size_t i = 0; i < n; i++) {
		struct builder_sym *s = &b->fb_syms[i];

		if (!s->bs_size) {
			uint64_t gap = i + 1 < n ? b->fb_syms[i + 1].bs_addr - s->bs_addr
						 : UINT64_MAX;

			s->bs_size = gap < ZERO_SIZE_EXTENT ? gap : ZERO_SIZE_EXTENT;
		} else if (s->bs_size > UINT32_MAX) {
			s->bs_size = UINT32_MAX;
		}
	}
}

/* end of a symbol's range, saturating instead of wrapping. */
static uint64_t sym_end(uint64_t addr, uint64_t size)
{
	return size > UINT64_MAX - addr ? UINT64_MAX : addr + size;
}

/* The nearest earlier symbol containing each symbol's address.  A stack of
 * still-open ranges: ranges ending at or before an address cannot contain
 * it nor anything after it. */
static int builder_parents(const struct fp_symtab_builder *b, uint32_t *parent)
{
	uint32_t *stack;
	size_t depth = 0;

	stack = malloc((b->fb_nsyms ? b->fb_nsyms : 1) * sizeof(*stack));
	if (!stack)
		return -ENOMEM;
	for (size_t i = 0; i < b->fb_nsyms; i++) {
		uint64_t addr = b->fb_syms[i].bs_addr;

		while (depth) {
			const struct builder_sym *top = &b->fb_syms[stack[depth - 1]];

			if (sym_end(top->bs_addr, top->bs_size) > addr)
				break;
			depth--;
		}
		parent[i] = depth ? stack[depth - 1] : NO_PARENT;
		stack[depth++] = (uint32_t)i;
	}
	free(stack);
	return 0;
}

static int cmp_builder_seqn(const void *a, const void *b)
{
	const struct builder_seqn *x = a, *y = b;

	if (x->bq_start != y->bq_start)
		return x->bq_start < y->bq_start ? -1 : 1;
	return x->bq_seq < y->bq_seq ? -1 : x->bq_seq > y->bq_seq;
}

static int same_line(const struct builder_row *x, const struct builder_row *y)
{
	return x->br_file == y->br_file && x->br_line == y->br_line && x->br_col == y->br_col;
}

static void emit_row(struct builder_row *rows, size_t *n, struct builder_row r)
{
	if (*n && rows[*n - 1].br_addr == r.br_addr) {
		rows[*n - 1] = r;
		if (*n > 1 && same_line(&rows[*n - 2], &rows[*n - 1]))
			(*n)--;
		return;
	}
	if (*n ? same_line(&rows[*n - 1], &r) : r.br_file == NONE)
		return;
	rows[(*n)++] = r;
}

/* builder_lines: all sequences as one table by address, each address
 * taken by the first sequence covering it, consecutive equal rows merged. */
static int builder_lines(struct fp_symtab_builder *b, struct builder_row **out, size_t *nout)
{
	struct builder_row *rows;
	uint64_t end = 0;
	size_t n = 0;

	*out = NULL;
	*nout = 0;
	if (!b->fb_nseqs)
		return 0;
	rows = malloc(b->fb_nrows * sizeof(*rows));
	if (!rows)
		return -ENOMEM;
	qsort(b->fb_seqs, b->fb_nseqs, sizeof(*b->fb_seqs), cmp_builder_seqn);
	for (size_t i = 0; i < b->fb_nseqs; i++) {
		const struct builder_row *r = b->fb_rows + b->fb_seqs[i].bq_first;
		size_t m = b->fb_seqs[i].bq_n, k = 0;

		if (i && r[m - 1].br_addr <= end)
			continue;
		if (i && r[0].br_addr < end) {
			struct builder_row clipped;

			while (k + 1 < m && r[k + 1].br_addr <= end)
				k++;
			clipped = r[k++];
			clipped.br_addr = end;
			emit_row(rows, &n, clipped);
		}
		for (; k < m; k++)
			emit_row(rows, &n, r[k]);
		end = r[m - 1].br_addr;
	}
	*out = rows;
	*nout = n;
	return 0;
}

static size_t put_uleb(uint8_t *p, uint64_t v)
{
	size_t n = 0;

	do {
		uint8_t byte = v & 0x7f;

		v >>= 7;
		p[n++] = byte | (v ? 0x80 : 0);
	} while (v);
	return n;
}

/* encode_lines: the block index and the row data of rows[0..n). */
static int encode_lines(const struct builder_row *rows, size_t n, uint8_t **index, size_t *nblocks,
			uint8_t **data, size_t *data_len)
{
	size_t nb = (n + LINE_BLOCK - 1) / LINE_BLOCK, len = 0;
	uint8_t *idx, *d;

	*index = *data = NULL;
	*nblocks = *data_len = 0;
	if (!n)
		return 0;
	idx = malloc(nb * BLOCK_SIZE);
	d = malloc(n * 40 + 16); /* worst case per row: 10 + 10 + 5 + 5 */
	if (!idx || !d) {
		free(idx);
		free(d);
		return -ENOMEM;
	}
	for (size_t i = 0, blk = 0; i < n; i += LINE_BLOCK, blk++) {
		size_t last = i + LINE_BLOCK < n ? i + LINE_BLOCK : n;

		if (len > UINT32_MAX) {
			free(idx);
			free(d);
			return -ENOMEM;
		}
		st64(idx + blk * BLOCK_SIZE, rows[i].br_addr);
		st32(idx + blk * BLOCK_SIZE + 8, (uint32_t)len);
		len += put_uleb(d + len,
				rows[i].br_file == NONE ? 0 : (uint64_t)rows[i].br_file + 1);
		len += put_uleb(d + len, rows[i].br_line);
		len += put_uleb(d + len, rows[i].br_col);
		for (size_t j = i + 1; j < last; j++) {
			int64_t dl = (int64_t)rows[j].br_line - (int64_t)rows[j - 1].br_line;
			/* Zigzag: the sign goes to bit 0 (no shift of a negative value). */
			uint64_t zz = ((uint64_t)dl << 1) ^ (dl < 0 ? UINT64_MAX : 0);
			int changed = rows[j].br_file != rows[j - 1].br_file;

			len += put_uleb(d + len, rows[j].br_addr - rows[j - 1].br_addr);
			len += put_uleb(d + len, zz << 1 | (uint64_t)changed);
			if (changed)
				len += put_uleb(d + len, rows[j].br_file == NONE
								 ? 0
								 : (uint64_t)rows[j].br_file + 1);
			len += put_uleb(d + len, rows[j].br_col);
		}
	}
	*index = idx;
	*nblocks = nb;
	*data = d;
	*data_len = len;
	return 0;
}

static int cmp_builder_range(const void *a, const void *b)
{
	const struct builder_range *x = a, *y = b;

	if (x->bn_lo != y->bn_lo)
		return x->bn_lo < y->bn_lo ? -1 : 1;
	if (x->bn_size != y->bn_size)
		return x->bn_size > y->bn_size ? -1 : 1;
	return x->bn_scope < y->bn_scope ? -1 : x->bn_scope > y->bn_scope;
}

/* builder_ranges: sort, drop duplicates and set each range's enclosing
 * one, as for symbols. */
static int builder_ranges(struct fp_symtab_builder *b, uint32_t **enclosing)
{
	size_t n = 0, depth = 0;
	uint32_t *stack, *enc;

	if (b->fb_nranges)
		qsort(b->fb_ranges, b->fb_nranges, sizeof(*b->fb_ranges), cmp_builder_range);
	for (size_t i = 0; i < b->fb_nranges; i++) {
		if (n && cmp_builder_range(&b->fb_ranges[n - 1], &b->fb_ranges[i]) == 0)
			continue;
		b->fb_ranges[n++] = b->fb_ranges[i];
	}
	b->fb_nranges = n;
	enc = malloc((n ? n : 1) * sizeof(*enc));
	stack = malloc((n ? n : 1) * sizeof(*stack));
	if (!enc || !stack) {
		free(enc);
		free(stack);
		return -ENOMEM;
	}
	for (size_t i = 0; i < n; i++) {
		uint64_t lo = b->fb_ranges[i].bn_lo;

		while (depth) {
			const struct builder_range *top = &b->fb_ranges[stack[depth - 1]];

			if (sym_end(top->bn_lo, top->bn_size) > lo)
				break;
			depth--;
		}
		enc[i] = depth ? stack[depth - 1] : NONE;
		stack[depth++] = (uint32_t)i;
	}
	free(stack);
	*enclosing = enc;
	return 0;
}

int fp_symtab_builder_finish(struct fp_symtab_builder *b, void **blob, size_t *len)
{
	struct strtab *st = &b->fb_st;
	uint32_t *parent = NULL, *names = NULL, *range_enc = NULL;
	struct builder_row *rows = NULL;
	uint8_t *line_index = NULL, *line_data = NULL;
	size_t nrows = 0, nblocks = 0, line_len = 0;
	uint64_t seg_off, sym_off, file_off, blk_off, ld_off, rng_off, scp_off, str_off, total;
	uint8_t *out = NULL, *p;
	int err;

	if (b->fb_finished)
		return -EINVAL;
	b->fb_finished = 1;
	builder_settle_segments(b);
	builder_settle_symbols(b);

	parent = malloc((b->fb_nsyms ? b->fb_nsyms : 1) * sizeof(*parent));
	names = malloc((b->fb_nsyms ? b->fb_nsyms : 1) * 4 * sizeof(*names));
	if (!parent || !names) {
		err = -ENOMEM;
		goto out;
	}
	err = builder_parents(b, parent);
	if (err)
		goto out;
	err = builder_lines(b, &rows, &nrows);
	if (err)
		goto out;
	err = encode_lines(rows, nrows, &line_index, &nblocks, &line_data, &line_len);
	if (err)
		goto out;
	err = builder_ranges(b, &range_enc);
	if (err)
		goto out;

	/* Intern only the names of surviving symbols, in address order, so
	 * that dropped aliases cost nothing. */
	for (size_t i = 0; i < b->fb_nsyms; i++) {
		const struct builder_sym *s = &b->fb_syms[i];
		const uint32_t raw[4] = { s->bs_name, s->bs_sysname, s->bs_fname, s->bs_fsysname };

		for (int k = 0; k < 4; k++) {
			/* equal raw offsets are the same copy: intern once */
			int same = -1;

			for (int m = 0; m < k && same < 0; m++)
				if (raw[m] == raw[k])
					same = m;
			if (same >= 0) {
				names[4 * i + k] = names[4 * i + same];
				continue;
			}
			err = strtab_intern(st, b->fb_names + raw[k], &names[4 * i + k]);
			if (err)
				goto out;
		}
	}

	seg_off = HDR_SIZE;
	sym_off = seg_off + (uint64_t)b->fb_nsegs * SEG_SIZE;
	file_off = sym_off + (uint64_t)b->fb_nsyms * SYM_SIZE;
	blk_off = file_off + (uint64_t)b->fb_nfiles * FILE_SIZE;
	ld_off = blk_off + (uint64_t)nblocks * BLOCK_SIZE;
	rng_off = ld_off + line_len;
	scp_off = rng_off + (uint64_t)b->fb_nranges * RANGE_SIZE;
	str_off = scp_off + (uint64_t)b->fb_nscopes * SCOPE_SIZE;
	total = str_off + st->sb_len;
	if (total > UINT32_MAX || total > SIZE_MAX) {
		err = -ENOMEM; /* not representable: as good as out of memory */
		goto out;
	}
	out = malloc(total);
	if (!out) {
		err = -ENOMEM;
		goto out;
	}

	memcpy(out, FP_SYMTAB_MAGIC, 4);
	st32(out + 4, FP_SYMTAB_VERSION);
	st32(out + 8, (uint32_t)b->fb_nsegs);
	st32(out + 12, (uint32_t)b->fb_nsyms);
	st32(out + 16, (uint32_t)seg_off);
	st32(out + 20, (uint32_t)sym_off);
	st32(out + 24, (uint32_t)str_off);
	st32(out + 28, (uint32_t)st->sb_len);
	st32(out + 32, (uint32_t)b->fb_nfiles);
	st32(out + 36, (uint32_t)file_off);
	st32(out + 40, (uint32_t)nblocks);
	st32(out + 44, (uint32_t)blk_off);
	st32(out + 48, (uint32_t)ld_off);
	st32(out + 52, (uint32_t)line_len);
	st32(out + 56, (uint32_t)b->fb_nranges);
	st32(out + 60, (uint32_t)rng_off);
	st32(out + 64, (uint32_t)b->fb_nscopes);
	st32(out + 68, (uint32_t)scp_off);

	p = out + seg_off;
	for (size_t i = 0; i < b->fb_nsegs; i++, p += SEG_SIZE) {
		st64(p, b->fb_segs[i].bg_offset);
		st64(p + 8, b->fb_segs[i].bg_vaddr);
		st64(p + 16, b->fb_segs[i].bg_filesz);
	}
	p = out + sym_off;
	for (size_t i = 0; i < b->fb_nsyms; i++, p += SYM_SIZE) {
		st64(p, b->fb_syms[i].bs_addr);
		st32(p + 8, (uint32_t)b->fb_syms[i].bs_size);
		st32(p + 12, names[4 * i]);
		st32(p + 16, names[4 * i + 1]);
		st32(p + 20, parent[i]);
		st32(p + 24, names[4 * i + 2]);
		st32(p + 28, names[4 * i + 3]);
	}
	p = out + file_off;
	for (size_t i = 0; i < b->fb_nfiles; i++, p += FILE_SIZE)
		st32(p, b->fb_files[i]);
	if (nblocks)
		memcpy(out + blk_off, line_index, nblocks * BLOCK_SIZE);
	if (line_len)
		memcpy(out + ld_off, line_data, line_len);
	p = out + rng_off;
	for (size_t i = 0; i < b->fb_nranges; i++, p += RANGE_SIZE) {
		st64(p, b->fb_ranges[i].bn_lo);
		st32(p + 8, (uint32_t)b->fb_ranges[i].bn_size);
		st32(p + 12, range_enc[i]);
		st32(p + 16, b->fb_ranges[i].bn_scope);
	}
	p = out + scp_off;
	for (size_t i = 0; i < b->fb_nscopes; i++, p += SCOPE_SIZE) {
		const struct builder_scope *sc = &b->fb_scopes[i];

		st32(p, sc->bc_name);
		st32(p + 4, sc->bc_sysname);
		st32(p + 8, sc->bc_parent);
		st32(p + 12, sc->bc_call_file);
		st32(p + 16, sc->bc_call_line);
		st32(p + 20, sc->bc_call_col);
	}
	if (st->sb_len)
		memcpy(out + str_off, st->sb_buf, st->sb_len);

	*blob = out;
	*len = (size_t)total;
	err = 0;
out:
	free(rows);
	free(line_index);
	free(line_data);
	free(range_enc);
	free(names);
	free(parent);
	return err;
}
