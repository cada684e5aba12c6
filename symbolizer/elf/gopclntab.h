/* gopclntab.h: functions and lines of Go binaries from .gopclntab.
 *
 * The Go runtime needs its pc-line table to print panics, so it survives
 * `-ldflags=-s -w` and strip(1): a stripped Go binary has no .symtab and
 * no DWARF, but still every function's name and address range and, per
 * pc, the file and line.  Go 1.16 and 1.17 (magic 0xfffffffa), 1.18 and
 * 1.19 (0xfffffff0) and 1.20 onwards (0xfffffff1) are read; older tables
 * (0xfffffffb) are refused.  The section comes from untrusted files:
 * every offset is checked against its size, and the work per table is
 * bounded by a multiple of its size.
 */
#ifndef FP_GOPCLNTAB_H
#define FP_GOPCLNTAB_H

#include <stddef.h>
#include <stdint.h>

struct fp_symtab_builder;

struct fp_gopclntab_stats {
	uint32_t gs_functions; /* functions added */
	uint32_t gs_sequences; /* line sequences added (one per function) */
	uint32_t gs_inlined;   /* inlined call scopes added */
};

#define FP_GOPCLNTAB_FUNCTIONS 1 /* add the functions as symbols */
#define FP_GOPCLNTAB_LINES 2     /* add their file:line rows as line sequences */
#define FP_GOPCLNTAB_INLINES 4   /* with LINES: inline chains as scopes (needs an image) */

/* What of the binary's loaded image the inline trees need: they hang off
 * the runtime's moduledata (found by its pointer to the table, in a
 * writable segment) through an offset from its go:func.* base. */
struct fp_gopclntab_segment {
	uint64_t gg_vaddr;
	const uint8_t *gg_data; /* the segment's bytes in the file */
	size_t gg_len;
	int gg_writable;
};

struct fp_gopclntab_image {
	uint64_t gi_pclntab; /* address of the table (the section's) */
	const struct fp_gopclntab_segment *gi_segments;
	size_t gi_nsegments;
};

/* fp_gopclntab_ingest: add what what (FP_GOPCLNTAB_*) asks for of the
 * pc-line table data (len bytes, the section's contents) to b.  Inline
 * chains are read from Go 1.20+ tables with an image (NULL: none); where
 * the moduledata cannot be found (PIE: its pointers are relocations)
 * there are none, and lines stay the innermost ones.  text is the address of the
 * binary's text (runtime.text: the .text section's address), to which Go
 * 1.18+ tables store function entries relative; 0 when unknown (then the
 * table's own, possibly unrelocated, copy is used).  st may be NULL.
 * 0, -EINVAL (not a table of a known version, or malformed headers; a
 * malformed function is skipped instead), -E2BIG (the work bound was hit
 * part way: what was added stays) or -ENOMEM. */
int fp_gopclntab_ingest(const void *data, size_t len, uint64_t text, int what,
			const struct fp_gopclntab_image *image, struct fp_symtab_builder *b,
			struct fp_gopclntab_stats *st);

#endif
