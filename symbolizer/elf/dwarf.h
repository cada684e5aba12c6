/* dwarf.h: line tables and inline scopes from the DWARF of ELF files, read
 * with libdwarf, for symbol table blobs (symtab.h).  Files may be hostile:
 * every section is checked against the file, decompression is bounded,
 * and a unit that libdwarf reports broken ends the walk with what was
 * read so far. */
#ifndef FP_DWARF_H
#define FP_DWARF_H

#include <gelf.h>
#include <stdint.h>

#include "symtab.h"

/* What one ingest found (the tests check it). */
struct fp_dwarf_stats {
	uint32_t ds_units;     /* compilation units walked */
	uint32_t ds_sequences; /* line table sequences added */
	uint64_t ds_rows;      /* line rows read */
	uint32_t ds_scopes;    /* functions and inlined calls with code */
	uint32_t ds_inlined;   /* of which inlined calls */
};

/* fp_dwarf_ingest: add the line tables (every .debug_line sequence
 * reachable from a unit of .debug_info) and the function scopes (each
 * DW_TAG_subprogram and DW_TAG_inlined_subroutine with code, with names
 * and call sites) of the ELF file elf, file_size bytes long, to b.
 * Sections may be compressed (SHF_COMPRESSED with zlib, or .zdebug_*).
 * Relocatable objects are skipped: their addresses are not final.
 * File names are shown as llvm-symbolizer shows them (compilation
 * directory, include directory and name joined).  stats may be NULL.
 * 0 (also when there is no DWARF, or it is broken: what could be read is
 * added) or -ENOMEM. */
int fp_dwarf_ingest(Elf *elf, uint64_t file_size, struct fp_symtab_builder *b,
		    struct fp_dwarf_stats *stats);

#endif
