/* symtab.c: validating and searching symbol table blobs (the layout in
 * symtab_format.h; symtab_build.c writes them).  Stateless: a table opened
 * once is searched by any number of threads.
 *
 * fp_symtab_open checks every fixed-size record (order, indexes, string
 * references) and the block index; the LEB128 rows are decoded with
 * bounds checks at look-up, where anything malformed reads as "no line
 * information".  Opening stays proportional to the number of records,
 * not of line rows.
 */
#include "symtab.h"
#include "symtab_format.h"
#include "batch.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>

/* A string reference must point at the start of a string: the table ends
 * with a NUL (checked once), so every in-range offset is terminated. */
static int valid_str(const char *strings, uint32_t strings_len, uint32_t off)
{
	return off < strings_len && (off == 0 || strings[off - 1] == '\0') && strings[off] != '\0';
}

static int valid_str_or_none(const char *strings, uint32_t strings_len, uint32_t off)
{
	return off == NONE || valid_str(strings, strings_len, off);
}

/* An array of n records of size rec at off must end by limit, which is
 * where the next one may start; 64-bit sums cannot wrap. */
static int array_fits(uint32_t off, uint32_t n, uint32_t rec, uint64_t limit)
{
	return (uint64_t)off + (uint64_t)n * rec <= limit;
}

int fp_symtab_open(struct fp_symtab *t, const void *blob, size_t len)
{
	const uint8_t *base = blob;
	uint32_t nsegs, nsyms, seg_off, sym_off, str_off, str_len;
	uint32_t nfiles, file_off, nblocks, blk_off, ld_off, ld_len, nranges, rng_off, nscopes,
		scp_off;
	const uint8_t *segs, *syms, *files, *blocks, *ranges, *scopes;
	const char *strings;
	uint64_t prev_end = 0, prev_addr = 0;

	if (!base || len < HDR_SIZE || memcmp(base, FP_SYMTAB_MAGIC, 4) != 0)
		return -EINVAL;
	if (ld32(base + 4) != FP_SYMTAB_VERSION)
		return -EINVAL;
	nsegs = ld32(base + 8);
	nsyms = ld32(base + 12);
	seg_off = ld32(base + 16);
	sym_off = ld32(base + 20);
	str_off = ld32(base + 24);
	str_len = ld32(base + 28);
	nfiles = ld32(base + 32);
	file_off = ld32(base + 36);
	nblocks = ld32(base + 40);
	blk_off = ld32(base + 44);
	ld_off = ld32(base + 48);
	ld_len = ld32(base + 52);
	nranges = ld32(base + 56);
	rng_off = ld32(base + 60);
	nscopes = ld32(base + 64);
	scp_off = ld32(base + 68);

	if (seg_off < HDR_SIZE || !array_fits(seg_off, nsegs, SEG_SIZE, sym_off) ||
	    !array_fits(sym_off, nsyms, SYM_SIZE, file_off) ||
	    !array_fits(file_off, nfiles, FILE_SIZE, blk_off) ||
	    !array_fits(blk_off, nblocks, BLOCK_SIZE, ld_off) ||
	    !array_fits(ld_off, ld_len, 1, rng_off) ||
	    !array_fits(rng_off, nranges, RANGE_SIZE, scp_off) ||
	    !array_fits(scp_off, nscopes, SCOPE_SIZE, str_off) ||
	    (uint64_t)str_off + str_len != len)
		return -EINVAL;
	if (nsyms >= NONE || nfiles >= NONE || nranges >= NONE || nscopes >= NONE)
		return -EINVAL;
	/* Blocks and their data come together; every block has a row. */
	if (!nblocks != !ld_len || nblocks > ld_len)
		return -EINVAL;

	segs = base + seg_off;
	syms = base + sym_off;
	files = base + file_off;
	blocks = base + blk_off;
	ranges = base + rng_off;
	scopes = base + scp_off;
	strings = (const char *)base + str_off;
	if (str_len && strings[str_len - 1] != '\0')
		return -EINVAL;
	if ((nsyms || nfiles) && str_len == 0)
		return -EINVAL;

	for (uint32_t i = 0; i < nsegs; i++) {
		const uint8_t *s = segs + (size_t)i * SEG_SIZE;
		uint64_t off = ld64(s), filesz = ld64(s + 16);

		if (filesz > UINT64_MAX - off || (i && off < prev_end))
			return -EINVAL;
		prev_end = off + filesz;
	}
	for (uint32_t i = 0; i < nsyms; i++) {
		const uint8_t *s = syms + (size_t)i * SYM_SIZE;
		uint64_t addr = ld64(s);
		uint32_t parent = ld32(s + 20);

		if (i && addr <= prev_addr)
			return -EINVAL;
		if (!valid_str(strings, str_len, ld32(s + 12)) ||
		    !valid_str(strings, str_len, ld32(s + 16)) ||
		    !valid_str(strings, str_len, ld32(s + 24)) ||
		    !valid_str(strings, str_len, ld32(s + 28)))
			return -EINVAL;
		if (parent != NO_PARENT && parent >= i)
			return -EINVAL;
		prev_addr = addr;
	}
	for (uint32_t i = 0; i < nfiles; i++)
		if (!valid_str(strings, str_len, ld32(files + (size_t)i * FILE_SIZE)))
			return -EINVAL;
	for (uint32_t i = 0; i < nblocks; i++) {
		const uint8_t *blk = blocks + (size_t)i * BLOCK_SIZE;
		uint64_t addr = ld64(blk);
		uint32_t off = ld32(blk + 8);

		/* the first block starts the data; each one is non-empty */
		if (i ? (addr <= ld64(blk - BLOCK_SIZE) || off <= ld32(blk - BLOCK_SIZE + 8))
		      : off != 0)
			return -EINVAL;
		if (off >= ld_len)
			return -EINVAL;
	}
	for (uint32_t i = 0; i < nscopes; i++) {
		const uint8_t *sc = scopes + (size_t)i * SCOPE_SIZE;
		uint32_t parent = ld32(sc + 8), call_file = ld32(sc + 12);

		if (!valid_str_or_none(strings, str_len, ld32(sc)) ||
		    !valid_str_or_none(strings, str_len, ld32(sc + 4)))
			return -EINVAL;
		if ((parent != NONE && parent >= i) || (call_file != NONE && call_file >= nfiles))
			return -EINVAL;
	}
	for (uint32_t i = 0; i < nranges; i++) {
		const uint8_t *r = ranges + (size_t)i * RANGE_SIZE;
		uint32_t enc = ld32(r + 12);

		if (i && ld64(r) < ld64(r - RANGE_SIZE))
			return -EINVAL;
		if ((enc != NONE && enc >= i) || ld32(r + 16) >= nscopes)
			return -EINVAL;
	}

	t->st_base = base;
	t->st_len = len;
	t->st_nsegments = nsegs;
	t->st_nsymbols = nsyms;
	t->st_segments = segs;
	t->st_symbols = syms;
	t->st_strings = strings;
	t->st_strings_len = str_len;
	t->st_nfiles = nfiles;
	t->st_nblocks = nblocks;
	t->st_nranges = nranges;
	t->st_nscopes = nscopes;
	t->st_linedata_len = ld_len;
	t->st_files = files;
	t->st_blocks = blocks;
	t->st_linedata = base + ld_off;
	t->st_ranges = ranges;
	t->st_scopes = scopes;
	return 0;
}

int fp_symtab_addr(const struct fp_symtab *t, uint64_t file_offset, uint64_t *addr)
{
	const uint8_t *seg;
	uint32_t lo = 0, n = t->st_nsegments;

	if (!n) {
		*addr = file_offset;
		return 0;
	}
	/* Last segment starting at or before file_offset; they are disjoint. */
	while (n > 1) {
		uint32_t half = n / 2;

		if (ld64(t->st_segments + (size_t)(lo + half) * SEG_SIZE) <= file_offset)
			lo += half;
		n -= half;
	}
	seg = t->st_segments + (size_t)lo * SEG_SIZE;
	if (file_offset < ld64(seg) || file_offset - ld64(seg) >= ld64(seg + 16))
		return -ENOENT;
	*addr = ld64(seg + 8) + (file_offset - ld64(seg));
	return 0;
}

/* lookup_symbol: the record of the innermost symbol containing addr, or
 * NULL. */
static const uint8_t *lookup_symbol(const struct fp_symtab *t, uint64_t addr);

int fp_symtab_lookup(const struct fp_symtab *t, uint64_t addr, struct fp_symbol *sym)
{
	const uint8_t *s = lookup_symbol(t, addr);

	if (!s)
		return -ENOENT;
	sym->sy_name = t->st_strings + ld32(s + 12);
	sym->sy_system_name = t->st_strings + ld32(s + 16);
	sym->sy_addr = ld64(s);
	sym->sy_size = ld32(s + 8);
	return 0;
}

/* A binary search for the last record whose first 8 bytes (an address)
 * are at or before addr, one step at a time: written so that the
 * compiler can use conditional moves instead of unpredictable branches,
 * and so that several searches can be interleaved (their memory
 * latencies then overlap). */
struct search {
	const uint8_t *sr_base;
	size_t sr_stride;
	uint32_t sr_lo, sr_n;
};

static inline void search_init(struct search *sr, const uint8_t *base, size_t stride, uint32_t n)
{
	static const uint8_t none[8]; /* an empty array searches this */

	sr->sr_base = n ? base : none;
	sr->sr_stride = n ? stride : 0;
	sr->sr_lo = 0;
	sr->sr_n = n ? n : 1;
}

static inline void search_step(struct search *sr, uint64_t addr)
{
	uint32_t half = sr->sr_n / 2;

	sr->sr_lo = ld64(sr->sr_base + (size_t)(sr->sr_lo + half) * sr->sr_stride) <= addr
			    ? sr->sr_lo + half
			    : sr->sr_lo;
	sr->sr_n -= half;
}

static const uint8_t *symbol_from(const struct fp_symtab *t, uint32_t lo, uint64_t addr);

static const uint8_t *lookup_symbol(const struct fp_symtab *t, uint64_t addr)
{
	struct search sr;

	if (!t->st_nsymbols)
		return NULL;
	search_init(&sr, t->st_symbols, SYM_SIZE, t->st_nsymbols);
	while (sr.sr_n > 1)
		search_step(&sr, addr);
	return symbol_from(t, sr.sr_lo, addr);
}

/* symbol_from: the innermost symbol containing addr, from the last one
 * starting at or before it (lo). */
static const uint8_t *symbol_from(const struct fp_symtab *t, uint32_t lo, uint64_t addr)
{
	const uint8_t *syms = t->st_symbols;
	const uint8_t *s;
	uint32_t i;

	if (!t->st_nsymbols)
		return NULL;
	s = syms + (size_t)lo * SYM_SIZE;
	if (ld64(s) > addr)
		return NULL;

	/* Innermost first: if this symbol ends before addr, an earlier one
	 * may still enclose it, and only through the enclosing chain. */
	i = lo;
	for (int hops = 0; hops <= MAX_PARENT_HOPS; hops++) {
		uint64_t start;
		uint32_t parent;

		s = syms + (size_t)i * SYM_SIZE;
		start = ld64(s);
		if (addr - start < ld32(s + 8))
			return s;
		parent = ld32(s + 20);
		if (parent == NO_PARENT)
			break;
		i = parent;
	}
	return NULL;
}

/* get_uleb: a LEB128 number from [*p, end); 0 when it runs past end or
 * has more than 64 bits' worth of bytes. */
static inline int get_uleb(const uint8_t **p, const uint8_t *end, uint64_t *v)
{
	const uint8_t *q = *p;
	uint64_t r = 0;

	for (unsigned shift = 0; q < end && shift < 64; shift += 7) {
		uint8_t byte = *q++;

		r |= (uint64_t)(byte & 0x7f) << shift;
		if (!(byte & 0x80)) {
			*p = q;
			*v = r;
			return 1;
		}
	}
	return 0;
}

static const char *str_at(const struct fp_symtab *t, uint32_t off)
{
	return off == NONE ? NULL : t->st_strings + off;
}

static const char *file_at(const struct fp_symtab *t, uint32_t file)
{
	return file == NONE ? NULL : t->st_strings + ld32(t->st_files + (size_t)file * FILE_SIZE);
}

/* line_from: the row holding addr, from the last block starting at or
 * before it (lo).  *file is a file index or NONE. */
static void line_from(const struct fp_symtab *t, uint32_t lo, uint64_t addr, uint32_t *file,
		      uint32_t *line, uint32_t *col)
{
	const uint8_t *blocks = t->st_blocks, *p, *end;
	uint32_t off, next;
	uint64_t a, f, l, c, v;

	*file = NONE;
	*line = *col = 0;
	if (!t->st_nblocks || ld64(blocks + (size_t)lo * BLOCK_SIZE) > addr)
		return;
	a = ld64(blocks + (size_t)lo * BLOCK_SIZE);
	off = ld32(blocks + (size_t)lo * BLOCK_SIZE + 8);
	next = lo + 1 < t->st_nblocks ? ld32(blocks + (size_t)(lo + 1) * BLOCK_SIZE + 8)
				      : t->st_linedata_len;
	p = t->st_linedata + off;
	end = t->st_linedata + next; /* open() checked off < next <= len */
	if (!get_uleb(&p, end, &f) || !get_uleb(&p, end, &l) || !get_uleb(&p, end, &c))
		return;
	while (p < end) {
		uint64_t da, h, nf = f, nc;

		if (!get_uleb(&p, end, &da) || !get_uleb(&p, end, &h))
			return;
		if (h & 1) {
			if (!get_uleb(&p, end, &nf))
				return;
		}
		if (!get_uleb(&p, end, &nc))
			return;
		if (da > addr - a)
			break; /* the next row starts after addr */
		a += da;
		v = h >> 1;
		l += (v >> 1) ^ (0 - (v & 1)); /* zigzag: wraps like the encoder */
		f = nf;
		c = nc;
	}
	if (f == 0 || f > t->st_nfiles)
		return;
	*file = (uint32_t)(f - 1);
	*line = (uint32_t)l;
	*col = (uint32_t)c;
}

/* scope_from: the innermost scope with code at addr, or NONE, from the
 * last range starting at or before it (lo). */
static uint32_t scope_from(const struct fp_symtab *t, uint32_t lo, uint64_t addr)
{
	const uint8_t *ranges = t->st_ranges;
	uint32_t i;

	if (!t->st_nranges || ld64(ranges + (size_t)lo * RANGE_SIZE) > addr)
		return NONE;
	i = lo;
	for (int hops = 0; hops <= MAX_SCOPE_DEPTH; hops++) {
		const uint8_t *r = ranges + (size_t)i * RANGE_SIZE;

		if (addr - ld64(r) < ld32(r + 8))
			return ld32(r + 16);
		i = ld32(r + 12);
		if (i == NONE)
			break;
	}
	return NONE;
}

int fp_symtab_lookup_frames(const struct fp_symtab *t, uint64_t addr, struct fp_symframe *out,
			    int max)
{
	struct search ss, sb, sr;
	const uint8_t *sym;
	uint32_t file, line, col, scope;
	int n = 0;

	if (max <= 0)
		return 0;
	/* the three searches side by side */
	search_init(&ss, t->st_symbols, SYM_SIZE, t->st_nsymbols);
	search_init(&sb, t->st_blocks, BLOCK_SIZE, t->st_nblocks);
	search_init(&sr, t->st_ranges, RANGE_SIZE, t->st_nranges);
	while (ss.sr_n > 1 || sb.sr_n > 1 || sr.sr_n > 1) {
		search_step(&ss, addr);
		search_step(&sb, addr);
		search_step(&sr, addr);
	}
	sym = symbol_from(t, ss.sr_lo, addr);
	line_from(t, sb.sr_lo, addr, &file, &line, &col);
	scope = scope_from(t, sr.sr_lo, addr);
	if (scope == NONE) {
		if (!sym && file == NONE)
			return 0;
		out[0] = (struct fp_symframe){
			.sf_function = sym ? t->st_strings + ld32(sym + 24) : NULL,
			.sf_system_name = sym ? t->st_strings + ld32(sym + 28) : NULL,
			.sf_file = file_at(t, file),
			.sf_line = line,
			.sf_column = col,
		};
		return 1;
	}
	/* Scopes' parents come before them: the chain ends. */
	while (n < max) {
		const uint8_t *sc = t->st_scopes + (size_t)scope * SCOPE_SIZE;
		uint32_t parent = ld32(sc + 8);
		struct fp_symframe *f = &out[n++];

		f->sf_function = str_at(t, ld32(sc));
		f->sf_system_name = str_at(t, ld32(sc + 4));
		f->sf_file = file_at(t, file);
		f->sf_line = line;
		f->sf_column = col;
		f->sf_inlined = parent != NONE;
		if (parent == NONE) {
			if (sym) {
				f->sf_function = t->st_strings + ld32(sym + 24);
				f->sf_system_name = t->st_strings + ld32(sym + 28);
			}
			break;
		}
		file = ld32(sc + 12);
		line = ld32(sc + 16);
		col = ld32(sc + 20);
		scope = parent;
	}
	return n;
}

/* kfuncs_walk: the entries of fp_symtab_kfuncs, written to k's arrays
 * when k is not NULL; *n their number. */
static int kfuncs_walk(const struct fp_symtab *t, struct fp_kfuncs *k, uint32_t *n)
{
	uint64_t prev_end = 0;
	uint32_t i, m = 0;

	for (i = 0; i < t->st_nsymbols; i++) {
		const uint8_t *s = t->st_symbols + (size_t)i * SYM_SIZE;
		uint64_t start = ld64(s), end = start + ld32(s + 8), next;

		if (i && start < prev_end)
			return -EINVAL;
		if (start > UINT32_MAX)
			break;
		next = i + 1 < t->st_nsymbols ? ld64(s + SYM_SIZE) : UINT64_MAX;
		if (m + 2 > FP_KFUNCS_MAX)
			return -E2BIG;
		if (k)
			k->kf_offsets[m] = (uint32_t)start;
		m++;
		if (end < next && end <= UINT32_MAX) {
			if (k) {
				k->kf_offsets[m] = (uint32_t)end;
				k->kf_gaps[m / 8] |= (uint8_t)(1u << (m % 8));
			}
			m++;
		}
		prev_end = end;
	}
	*n = m;
	return 0;
}

int fp_symtab_kfuncs(const struct fp_symtab *t, struct fp_kfuncs *out)
{
	struct fp_kfuncs k = { 0 };
	uint32_t n;
	int err;

	if ((err = kfuncs_walk(t, NULL, &n)))
		return err;
	k.kf_offsets = malloc((n ? n : 1) * sizeof(*k.kf_offsets));
	k.kf_gaps = calloc((n + 7) / 8 + 1, 1);
	if (!k.kf_offsets || !k.kf_gaps) {
		fp_kfuncs_fini(&k);
		return -ENOMEM;
	}
	kfuncs_walk(t, &k, &n);
	k.kf_n = n;
	out->kf_n = k.kf_n;
	out->kf_offsets = k.kf_offsets;
	out->kf_gaps = k.kf_gaps;
	return 0;
}
