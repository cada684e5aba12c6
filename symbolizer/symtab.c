/* symtab.c: building, validating and searching symbol table blobs.
 *
 * Blob layout, all integers little-endian:
 *
 *   header (32 bytes)
 *     0  u8[4] magic "FPST"
 *     4  u32   format version (FP_SYMTAB_VERSION)
 *     8  u32   number of segments
 *    12  u32   number of symbols
 *    16  u32   offset of the segment array
 *    20  u32   offset of the symbol array
 *    24  u32   offset of the string table
 *    28  u32   length of the string table
 *   segments, sorted by file offset, non-overlapping (24 bytes each)
 *     0  u64   file offset
 *     8  u64   virtual address
 *    16  u64   size in the file
 *   symbols, sorted by strictly increasing address (24 bytes each)
 *     0  u64   address
 *     8  u32   size (0-sized input symbols are already extended here)
 *    12  u32   name: offset into the string table
 *    16  u32   system name: offset into the string table
 *    20  u32   enclosing symbol: index of the nearest earlier symbol whose
 *              range contains this one's address, or NO_PARENT
 *   string table: NUL-terminated strings, each stored once
 *
 * The arrays come in this order, each starting at or after the end of the
 * previous one, and the string table ends exactly at the end of the blob.
 * Strings are referenced by the offset of their first byte; names equal to
 * their system name share it.
 *
 * The builder settles everything a look-up would otherwise decide: of the
 * symbols at one address the first added is kept (fp_elf_symtab adds the
 * preferred alias first), size-less symbols get their extent, and each
 * symbol records its enclosing one.  A look-up is then a binary search for
 * the last symbol starting at or before the address, falling back along
 * the enclosing chain when that one ends too early: the innermost symbol
 * containing the address wins.  sy_size reports the settled size.
 */
#include "symtab.h"

#include <endian.h>
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#define FP_SYMTAB_MAGIC "FPST"
#define FP_SYMTAB_VERSION 1u

#define HDR_SIZE 32u
#define SEG_SIZE 24u
#define SYM_SIZE 24u
#define NO_PARENT UINT32_MAX

/* A symbol without a size covers the gap up to the next symbol, but not more
 * than this.  Kernel tables (kallsyms) have no sizes at all and many kernel
 * functions are longer than a few KiB, so a small cap would leave their
 * tails unresolved; in ELF files zero-sized functions are rare assembly
 * entry points, whose code does follow them.  64 KiB bounds the damage when
 * the next symbol is far away (end of a section, unsymbolized code). */
#define ZERO_SIZE_EXTENT (64u * 1024)

/* Lookups follow the chain of enclosing symbols this far at most, so that a
 * hostile blob cannot make a lookup linear.  Real nesting is one or two. */
#define MAX_PARENT_HOPS 32

struct builder_sym {
	uint64_t bs_addr;
	uint64_t bs_size;
	uint32_t bs_name;    /* offsets into fb_names */
	uint32_t bs_sysname;
	uint32_t bs_seq;     /* order of addition: ties keep the earliest */
};

struct builder_seg {
	uint64_t bg_offset;
	uint64_t bg_vaddr;
	uint64_t bg_filesz;
};

struct fp_symtab_builder {
	struct builder_sym *fb_syms;
	size_t fb_nsyms, fb_syms_cap;
	struct builder_seg *fb_segs;
	size_t fb_nsegs, fb_segs_cap;
	char *fb_names; /* every added string, not yet deduplicated */
	size_t fb_names_len, fb_names_cap;
	int fb_finished;
};

/* Deduplicating string table under construction; slots hold offset + 1. */
struct strtab {
	char *sb_buf;
	size_t sb_len, sb_cap;
	uint32_t *sb_slots;
	size_t sb_nslots, sb_count;
};

static inline uint32_t ld32(const uint8_t *p)
{
	uint32_t v;

	memcpy(&v, p, sizeof(v));
	return le32toh(v);
}

static inline uint64_t ld64(const uint8_t *p)
{
	uint64_t v;

	memcpy(&v, p, sizeof(v));
	return le64toh(v);
}

static inline void st32(uint8_t *p, uint32_t v)
{
	v = htole32(v);
	memcpy(p, &v, sizeof(v));
}

static inline void st64(uint8_t *p, uint64_t v)
{
	v = htole64(v);
	memcpy(p, &v, sizeof(v));
}

/* grow: make room for one more element of size elem in *arr. */
static int grow(void **arr, size_t *cap, size_t n, size_t elem)
{
	size_t ncap;
	void *p;

	if (n < *cap)
		return 0;
	ncap = *cap ? *cap * 2 : 64;
	if (ncap < *cap || ncap > SIZE_MAX / elem)
		return -ENOMEM;
	p = realloc(*arr, ncap * elem);
	if (!p)
		return -ENOMEM;
	*arr = p;
	*cap = ncap;
	return 0;
}

int fp_symtab_builder_alloc(struct fp_symtab_builder **b)
{
	struct fp_symtab_builder *nb = calloc(1, sizeof(*nb));

	if (!nb)
		return -ENOMEM;
	*b = nb;
	return 0;
}

void fp_symtab_builder_free(struct fp_symtab_builder *b)
{
	if (!b)
		return;
	free(b->fb_syms);
	free(b->fb_segs);
	free(b->fb_names);
	free(b);
}

int fp_symtab_builder_add_segment(struct fp_symtab_builder *b, uint64_t file_offset,
				  uint64_t vaddr, uint64_t filesz)
{
	int err;

	if (b->fb_finished)
		return -EINVAL;
	err = grow((void **)&b->fb_segs, &b->fb_segs_cap, b->fb_nsegs, sizeof(*b->fb_segs));
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
	char *p;

	if (len > UINT32_MAX || need > UINT32_MAX)
		return -ENOMEM;
	if (need > b->fb_names_cap) {
		size_t ncap = b->fb_names_cap ? b->fb_names_cap : 4096;

		while (ncap < need)
			ncap *= 2;
		p = realloc(b->fb_names, ncap);
		if (!p)
			return -ENOMEM;
		b->fb_names = p;
		b->fb_names_cap = ncap;
	}
	memcpy(b->fb_names + b->fb_names_len, s, len);
	*off = (uint32_t)b->fb_names_len;
	b->fb_names_len = need;
	return 0;
}

int fp_symtab_builder_add_symbol(struct fp_symtab_builder *b, uint64_t addr, uint64_t size,
				 const char *name, const char *system_name)
{
	uint32_t name_off, sys_off;
	int err;

	if (b->fb_finished || !name || !name[0])
		return -EINVAL;
	/* NO_PARENT and the u32 seq must stay out of range of real indexes. */
	if (b->fb_nsyms >= UINT32_MAX - 1)
		return -ENOMEM;
	err = grow((void **)&b->fb_syms, &b->fb_syms_cap, b->fb_nsyms, sizeof(*b->fb_syms));
	if (err)
		return err;
	err = builder_copy_name(b, name, &name_off);
	if (err)
		return err;
	sys_off = name_off;
	if (system_name && system_name[0] && strcmp(system_name, name) != 0) {
		err = builder_copy_name(b, system_name, &sys_off);
		if (err)
			return err;
	}
	b->fb_syms[b->fb_nsyms] = (struct builder_sym){
		.bs_addr = addr,
		.bs_size = size,
		.bs_name = name_off,
		.bs_sysname = sys_off,
		.bs_seq = (uint32_t)b->fb_nsyms,
	};
	b->fb_nsyms++;
	return 0;
}

static uint64_t str_hash(const char *s, size_t len)
{
	uint64_t h = 0xcbf29ce484222325ull; /* FNV-1a */

	for (size_t i = 0; i < len; i++) {
		h ^= (unsigned char)s[i];
		h *= 0x100000001b3ull;
	}
	return h;
}

static void strtab_fini(struct strtab *t)
{
	free(t->sb_buf);
	free(t->sb_slots);
}

static int strtab_rehash(struct strtab *t)
{
	size_t nslots = t->sb_nslots ? t->sb_nslots * 2 : 1024;
	uint32_t *slots;

	if (nslots > SIZE_MAX / sizeof(*slots))
		return -ENOMEM;
	slots = calloc(nslots, sizeof(*slots));
	if (!slots)
		return -ENOMEM;
	for (size_t i = 0; i < t->sb_nslots; i++) {
		uint32_t v = t->sb_slots[i];
		const char *s;
		size_t j;

		if (!v)
			continue;
		s = t->sb_buf + v - 1;
		j = str_hash(s, strlen(s)) & (nslots - 1);
		while (slots[j])
			j = (j + 1) & (nslots - 1);
		slots[j] = v;
	}
	free(t->sb_slots);
	t->sb_slots = slots;
	t->sb_nslots = nslots;
	return 0;
}

/* strtab_intern: the offset of s in t, adding it if new. */
static int strtab_intern(struct strtab *t, const char *s, uint32_t *off)
{
	size_t len = strlen(s);
	size_t j;
	int err;

	if (t->sb_count * 2 >= t->sb_nslots) {
		err = strtab_rehash(t);
		if (err)
			return err;
	}
	j = str_hash(s, len) & (t->sb_nslots - 1);
	while (t->sb_slots[j]) {
		const char *cand = t->sb_buf + t->sb_slots[j] - 1;

		if (memcmp(cand, s, len + 1) == 0) {
			*off = t->sb_slots[j] - 1;
			return 0;
		}
		j = (j + 1) & (t->sb_nslots - 1);
	}
	/* The offset + 1 stored in a slot must fit in u32 as well. */
	if (t->sb_len + len + 1 >= UINT32_MAX)
		return -ENOMEM;
	if (t->sb_len + len + 1 > t->sb_cap) {
		size_t ncap = t->sb_cap ? t->sb_cap : 4096;
		char *p;

		while (ncap < t->sb_len + len + 1)
			ncap *= 2;
		p = realloc(t->sb_buf, ncap);
		if (!p)
			return -ENOMEM;
		t->sb_buf = p;
		t->sb_cap = ncap;
	}
	memcpy(t->sb_buf + t->sb_len, s, len + 1);
	*off = (uint32_t)t->sb_len;
	t->sb_slots[j] = (uint32_t)t->sb_len + 1;
	t->sb_len += len + 1;
	t->sb_count++;
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

int fp_symtab_builder_finish(struct fp_symtab_builder *b, void **blob, size_t *len)
{
	struct strtab st = { 0 };
	uint32_t *parent = NULL, *names = NULL;
	uint64_t seg_off, sym_off, str_off, total;
	uint8_t *out = NULL, *p;
	int err;

	if (b->fb_finished)
		return -EINVAL;
	b->fb_finished = 1;
	builder_settle_segments(b);
	builder_settle_symbols(b);

	parent = malloc((b->fb_nsyms ? b->fb_nsyms : 1) * sizeof(*parent));
	names = malloc((b->fb_nsyms ? b->fb_nsyms : 1) * 2 * sizeof(*names));
	if (!parent || !names) {
		err = -ENOMEM;
		goto out;
	}
	err = builder_parents(b, parent);
	if (err)
		goto out;

	/* Intern only the names of surviving symbols, in address order, so
	 * that dropped aliases cost nothing. */
	for (size_t i = 0; i < b->fb_nsyms; i++) {
		const struct builder_sym *s = &b->fb_syms[i];

		err = strtab_intern(&st, b->fb_names + s->bs_name, &names[2 * i]);
		if (err)
			goto out;
		if (s->bs_sysname == s->bs_name) {
			names[2 * i + 1] = names[2 * i];
			continue;
		}
		err = strtab_intern(&st, b->fb_names + s->bs_sysname, &names[2 * i + 1]);
		if (err)
			goto out;
	}

	seg_off = HDR_SIZE;
	sym_off = seg_off + (uint64_t)b->fb_nsegs * SEG_SIZE;
	str_off = sym_off + (uint64_t)b->fb_nsyms * SYM_SIZE;
	total = str_off + st.sb_len;
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
	st32(out + 28, (uint32_t)st.sb_len);

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
		st32(p + 12, names[2 * i]);
		st32(p + 16, names[2 * i + 1]);
		st32(p + 20, parent[i]);
	}
	if (st.sb_len)
		memcpy(out + str_off, st.sb_buf, st.sb_len);

	*blob = out;
	*len = (size_t)total;
	err = 0;
out:
	strtab_fini(&st);
	free(names);
	free(parent);
	return err;
}

/* A string reference must point at the start of a string: the table ends
 * with a NUL (checked once), so every in-range offset is terminated. */
static int valid_str(const char *strings, uint32_t strings_len, uint32_t off)
{
	return off < strings_len && (off == 0 || strings[off - 1] == '\0') && strings[off] != '\0';
}

int fp_symtab_open(struct fp_symtab *t, const void *blob, size_t len)
{
	const uint8_t *base = blob;
	uint32_t nsegs, nsyms, seg_off, sym_off, str_off, str_len;
	const uint8_t *segs, *syms;
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

	/* 64-bit sums: none of these can wrap. */
	if (seg_off < HDR_SIZE || (uint64_t)seg_off + (uint64_t)nsegs * SEG_SIZE > sym_off ||
	    (uint64_t)sym_off + (uint64_t)nsyms * SYM_SIZE > str_off ||
	    (uint64_t)str_off + str_len != len)
		return -EINVAL;
	if (nsyms >= NO_PARENT)
		return -EINVAL;

	segs = base + seg_off;
	syms = base + sym_off;
	strings = (const char *)base + str_off;
	if (nsyms && (str_len == 0 || strings[str_len - 1] != '\0'))
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
		    !valid_str(strings, str_len, ld32(s + 16)))
			return -EINVAL;
		if (parent != NO_PARENT && parent >= i)
			return -EINVAL;
		prev_addr = addr;
	}

	t->st_base = base;
	t->st_len = len;
	t->st_nsegments = nsegs;
	t->st_nsymbols = nsyms;
	t->st_segments = segs;
	t->st_symbols = syms;
	t->st_strings = strings;
	t->st_strings_len = str_len;
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

int fp_symtab_lookup(const struct fp_symtab *t, uint64_t addr, struct fp_symbol *sym)
{
	const uint8_t *syms = t->st_symbols;
	const uint8_t *s;
	uint32_t lo = 0, n = t->st_nsymbols, i;

	if (!n)
		return -ENOENT;
	/* Last symbol starting at or before addr; written so that the compiler
	 * can use conditional moves instead of unpredictable branches. */
	while (n > 1) {
		uint32_t half = n / 2;

		lo = ld64(syms + (size_t)(lo + half) * SYM_SIZE) <= addr ? lo + half : lo;
		n -= half;
	}
	s = syms + (size_t)lo * SYM_SIZE;
	if (ld64(s) > addr)
		return -ENOENT;

	/* Innermost first: if this symbol ends before addr, an earlier one
	 * may still enclose it, and only through the enclosing chain. */
	i = lo;
	for (int hops = 0; hops <= MAX_PARENT_HOPS; hops++) {
		uint64_t start;
		uint32_t parent;

		s = syms + (size_t)i * SYM_SIZE;
		start = ld64(s);
		if (addr - start < ld32(s + 8)) {
			sym->sy_name = t->st_strings + ld32(s + 12);
			sym->sy_system_name = t->st_strings + ld32(s + 16);
			sym->sy_addr = start;
			sym->sy_size = ld32(s + 8);
			return 0;
		}
		parent = ld32(s + 20);
		if (parent == NO_PARENT)
			break;
		i = parent;
	}
	return -ENOENT;
}
