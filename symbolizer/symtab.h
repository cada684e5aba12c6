/* symtab.h: the per-build-ID symbol table the symbolizer stores in LMDB.
 *
 * A table is one contiguous, little-endian, position-independent blob
 * (layout in symtab.c) that is looked up in place: no copies and no
 * allocation per look-up.  Tables come from ELF files (elfsyms.c) or from
 * kallsyms snapshots (ksyms), through the builder below.
 */
#ifndef FP_SYMTAB_H
#define FP_SYMTAB_H

#include <stddef.h>
#include <stdint.h>

struct fp_symtab_builder;

/* fp_symtab_builder_alloc: 0 or -ENOMEM. */
int fp_symtab_builder_alloc(struct fp_symtab_builder **b);
void fp_symtab_builder_free(struct fp_symtab_builder *b);

/* fp_symtab_builder_add_segment: a PT_LOAD segment, so that file offsets
 * can be turned into addresses.  Tables without segments (kernel) treat
 * offsets as addresses.  0 or -ENOMEM. */
int fp_symtab_builder_add_segment(struct fp_symtab_builder *b, uint64_t file_offset,
				  uint64_t vaddr, uint64_t filesz);

/* fp_symtab_builder_add_symbol: a function at [addr, addr + size).  size 0
 * means "up to the next symbol".  system_name is the mangled name, NULL when
 * it equals name.  Strings are copied.  0, -EINVAL (empty name) or -ENOMEM. */
int fp_symtab_builder_add_symbol(struct fp_symtab_builder *b, uint64_t addr, uint64_t size,
				 const char *name, const char *system_name);

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
};

struct fp_symbol {
	const char *sy_name;        /* demangled */
	const char *sy_system_name; /* mangled; equals sy_name for C */
	uint64_t sy_addr;
	uint64_t sy_size;           /* a size-0 symbol's extension to the next one */
};

/* fp_symtab_open: check the whole blob (it comes from disk) and set up *t.
 * 0 or -EINVAL (bad magic, version, or any offset out of bounds). */
int fp_symtab_open(struct fp_symtab *t, const void *blob, size_t len);

/* fp_symtab_addr: turn a file offset into a virtual address through the
 * segments; tables without segments return the offset.  0 or -ENOENT. */
int fp_symtab_addr(const struct fp_symtab *t, uint64_t file_offset, uint64_t *addr);

/* fp_symtab_lookup: the function containing addr.  0 or -ENOENT. */
int fp_symtab_lookup(const struct fp_symtab *t, uint64_t addr, struct fp_symbol *sym);

#endif
