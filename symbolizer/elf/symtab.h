/* symtab.h: the per-build-ID symbol table the symbolizer stores in LMDB.
 *
 * A table is one contiguous, little-endian, position-independent blob
 * (layout in symtab.c) that is looked up in place: no copies and no
 * allocation per look-up.  Tables come from ELF files (elfsyms.c, with
 * DWARF line tables and inline scopes from dwarf.c) or from kallsyms
 * snapshots (ksyms), through the builder below.
 */
#ifndef FP_SYMTAB_H
#define FP_SYMTAB_H

#include <stddef.h>
#include <stdint.h>

/* Every blob starts with these: the magic (4 bytes) and, little-endian,
 * the u32 format version.  A blob of another version is not corrupt but
 * stale: its file must be read again (symcache.h). */
#define FP_SYMTAB_MAGIC "FPST"
#define FP_SYMTAB_VERSION 3u

struct fp_symtab_builder;

/* fp_symtab_builder_alloc: 0 or -ENOMEM. */
int fp_symtab_builder_alloc(struct fp_symtab_builder **b);
void fp_symtab_builder_free(struct fp_symtab_builder *b);

/* fp_symtab_builder_add_segment: a PT_LOAD segment, so that file offsets
 * can be turned into addresses.  Tables without segments (kernel) treat
 * offsets as addresses.  0 or -ENOMEM. */
int fp_symtab_builder_add_segment(struct fp_symtab_builder *b, uint64_t file_offset, uint64_t vaddr,
				  uint64_t filesz);

/* fp_symtab_builder_add_symbol: a function at [addr, addr + size).  size 0
 * means "up to the next symbol".  system_name is the mangled name, NULL when
 * it equals name.  Strings are copied.  0, -EINVAL (empty name) or -ENOMEM. */
int fp_symtab_builder_add_symbol(struct fp_symtab_builder *b, uint64_t addr, uint64_t size,
				 const char *name, const char *system_name);

/* fp_symtab_builder_add_symbol_ex: fp_symtab_builder_add_symbol, with the
 * name fp_symtab_lookup_frames shows for the function (frame_name, demangled,
 * and frame_system_name, mangled; NULL: name and system_name), when it
 * should differ from the preferred alias fp_symtab_lookup gives. */
int fp_symtab_builder_add_symbol_ex(struct fp_symtab_builder *b, uint64_t addr, uint64_t size,
				    const char *name, const char *system_name,
				    const char *frame_name, const char *frame_system_name);

/* No file, no scope, no string: the "none" value of those indexes. */
#define FP_SYMTAB_NONE UINT32_MAX

/* fp_symtab_builder_add_file: intern a source file name (as it should be
 * shown, directories already joined) and give its index for line rows and
 * call sites.  The same name always gives the same index.  0, -EINVAL
 * (empty name) or -ENOMEM. */
int fp_symtab_builder_add_file(struct fp_symtab_builder *b, const char *name, uint32_t *file);

/* One row of a line table: from lr_addr up to the next row's address the
 * code comes from lr_file (an index from fp_symtab_builder_add_file, or
 * FP_SYMTAB_NONE for "unknown") at lr_line:lr_column (0 if unknown). */
struct fp_line_row {
	uint64_t lr_addr;
	uint32_t lr_file;
	uint32_t lr_line;
	uint32_t lr_column;
};

/* fp_symtab_builder_add_sequence: one sequence of a line table (DWARF's
 * unit of contiguous code): n >= 2 rows by non-decreasing address, the
 * last of which only marks the end of the sequence.  Of rows at one
 * address the last counts; rows going backwards are dropped.  Where
 * sequences overlap, the one starting first wins.  0, -EINVAL (fewer than
 * 2 rows, unknown file) or -ENOMEM. */
int fp_symtab_builder_add_sequence(struct fp_symtab_builder *b, const struct fp_line_row *rows,
				   size_t n);

/* fp_symtab_builder_add_scope: a function instance: an out-of-line
 * function (parent FP_SYMTAB_NONE) or a call inlined into the scope
 * parent (an earlier scope).  name is demangled, system_name the mangled
 * one (NULL: same as name); both may be NULL when unknown.  call_* is the
 * call site of an inlined call, in the parent's code (FP_SYMTAB_NONE / 0
 * when unknown).  Its code is given with fp_symtab_builder_add_range.
 * *scope receives its index.  0, -EINVAL or -ENOMEM. */
int fp_symtab_builder_add_scope(struct fp_symtab_builder *b, uint32_t parent, const char *name,
				const char *system_name, uint32_t call_file, uint32_t call_line,
				uint32_t call_column, uint32_t *scope);

/* fp_symtab_builder_add_range: code [lo, hi) belongs to scope (which may
 * have several ranges).  Ranges of inlined calls lie inside their
 * parent's; where scopes overlap otherwise, the one starting later is the
 * inner one.  Empty ranges are ignored.  0, -EINVAL or -ENOMEM. */
int fp_symtab_builder_add_range(struct fp_symtab_builder *b, uint32_t scope, uint64_t lo,
				uint64_t hi);

/* fp_symtab_builder_finish: sort, drop duplicates (same address: keep the
 * one added first, so callers add the preferred alias first), intern
 * strings, and return the blob (malloc'd, the caller frees it).  The
 * builder may then only be freed; adding or finishing again gives -EINVAL.
 * 0, -EINVAL or -ENOMEM. */
int fp_symtab_builder_finish(struct fp_symtab_builder *b, void **blob, size_t *len);

/* A read-only view of a blob; valid while the blob is. */
struct fp_symtab {
	const uint8_t *st_base;
	size_t st_len;
	uint32_t st_nsegments;
	uint32_t st_nsymbols;
	const uint8_t *st_segments;
	const uint8_t *st_symbols;
	const char *st_strings;
	uint32_t st_strings_len;
	/* DWARF line tables and inline scopes (all 0 without) */
	uint32_t st_nfiles;
	uint32_t st_nblocks;
	uint32_t st_nranges;
	uint32_t st_nscopes;
	uint32_t st_linedata_len;
	const uint8_t *st_files;
	const uint8_t *st_blocks;
	const uint8_t *st_linedata;
	const uint8_t *st_ranges;
	const uint8_t *st_scopes;
};

struct fp_symbol {
	const char *sy_name;        /* demangled */
	const char *sy_system_name; /* mangled; equals sy_name for C */
	uint64_t sy_addr;
	uint64_t sy_size; /* a size-0 symbol's extension to the next one */
};

/* fp_symtab_open: check the whole blob (it comes from disk) and set up *t:
 * every record, index and string reference; the LEB128-coded line rows are
 * decoded with bounds checks when looked up instead (anything malformed
 * there reads as "no line").  Only FP_SYMTAB_VERSION opens: other blobs
 * are rejected, to be built again.
 * 0 or -EINVAL (bad magic, version, or any offset out of bounds). */
int fp_symtab_open(struct fp_symtab *t, const void *blob, size_t len);

/* fp_symtab_addr: turn a file offset into a virtual address through the
 * segments; tables without segments return the offset.  0 or -ENOENT. */
int fp_symtab_addr(const struct fp_symtab *t, uint64_t file_offset, uint64_t *addr);

/* fp_symtab_lookup: the function containing addr, from the ELF symbol
 * table (no inlining).  0 or -ENOENT. */
int fp_symtab_lookup(const struct fp_symtab *t, uint64_t addr, struct fp_symbol *sym);

/* One frame of a source-level stack at an address. */
struct fp_symframe {
	const char *sf_function;     /* demangled; NULL if unknown ("??" is the caller's job) */
	const char *sf_system_name;  /* mangled or same as sf_function */
	const char *sf_file;         /* NULL if unknown */
	uint32_t sf_line, sf_column; /* 0 if unknown */
	uint8_t sf_inlined;          /* 1 for inlined frames, 0 for the outermost (real) function */
};

/* fp_symtab_lookup_frames: the frames at addr, innermost (inlined) first,
 * the containing function last; at most max written.  Returns the number
 * of frames (0 when nothing is known) -- never allocates.
 *
 * As llvm-symbolizer shows them: frame 0 has the line of addr itself,
 * each outer frame the call site of the frame inside it; the outermost
 * frame is named after the ELF symbol containing addr when there is one,
 * after its DWARF function otherwise.  Without DWARF there is one frame,
 * from the symbol table, with sf_file NULL.  When the chain is longer
 * than max, the innermost max frames are returned. */
int fp_symtab_lookup_frames(const struct fp_symtab *t, uint64_t addr, struct fp_symframe *out,
			    int max);

struct fp_kfuncs;

/* fp_symtab_kfuncs: the function starts of t, a kallsyms table (no
 * segments), as the agent folds kernel frames with them (common/kfuncs.h):
 * each symbol's start, and its end when no symbol starts there (a gap),
 * up to offset 2^32 - 1; out's build-ID is left to the caller.  Folding
 * an address to the greatest start at or below it gives the symbol
 * fp_symtab_lookup gives, since no symbol of such a table lies inside
 * another.  0, -EINVAL (symbols overlap: not a kallsyms table), -E2BIG
 * (over FP_KFUNCS_MAX entries) or -ENOMEM; *out is written only on
 * success. */
int fp_symtab_kfuncs(const struct fp_symtab *t, struct fp_kfuncs *out);

#endif
