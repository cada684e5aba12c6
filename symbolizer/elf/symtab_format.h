/* symtab_format.h: the layout of symbol table blobs, private to the
 * builder (symtab_build.c) that writes them and the reader (symtab.c)
 * that validates and searches them.
 *
 * Blob layout (format 3), all integers little-endian.  Format 3 has the
 * layout of format 2; what changed is that ELF functions' frame names no
 * longer carry symbol versions (their system names do), so tables of
 * format 2 must be built again, not read.
 *
 *   header (72 bytes)
 *     0  u8[4] magic "FPST"
 *     4  u32   format version (FP_SYMTAB_VERSION)
 *     8  u32   number of segments
 *    12  u32   number of symbols
 *    16  u32   offset of the segment array
 *    20  u32   offset of the symbol array
 *    24  u32   offset of the string table
 *    28  u32   length of the string table
 *    32  u32   number of files
 *    36  u32   offset of the file array
 *    40  u32   number of line blocks
 *    44  u32   offset of the line block index
 *    48  u32   offset of the line data
 *    52  u32   length of the line data
 *    56  u32   number of ranges
 *    60  u32   offset of the range array
 *    64  u32   number of scopes
 *    68  u32   offset of the scope array
 *   segments, sorted by file offset, non-overlapping (24 bytes each)
 *     0  u64   file offset
 *     8  u64   virtual address
 *    16  u64   size in the file
 *   symbols, sorted by strictly increasing address (32 bytes each)
 *     0  u64   address
 *     8  u32   size (0-sized input symbols are already extended here)
 *    12  u32   name: offset into the string table
 *    16  u32   system name: offset into the string table
 *    20  u32   enclosing symbol: index of the nearest earlier symbol whose
 *              range contains this one's address, or NONE
 *    24  u32   frame name: the alias fp_symtab_lookup_frames shows (the
 *              one llvm-symbolizer picks), often the same offset as name
 *    28  u32   frame system name
 *   files (4 bytes each): u32 name, offset into the string table
 *   line block index, by strictly increasing address (12 bytes each)
 *     0  u64   address of the block's first row
 *     8  u32   offset of the block's rows in the line data (increasing;
 *              a block ends where the next begins)
 *   line data: each block holds up to LINE_BLOCK rows, LEB128-coded:
 *     first row    uleb file+1 (0: no line information), uleb line,
 *                  uleb column
 *     further rows uleb address delta (> 0),
 *                  uleb (zigzag(line delta) << 1 | file changed),
 *                  [uleb file+1 if changed], uleb column
 *     A row holds from its address to the next row's (the next block's
 *     first row for a block's last row); the last row of the table is a
 *     "no line information" row.  Consecutive rows differ.
 *   ranges: code of scopes, sorted by start, then by decreasing size, so
 *   that an enclosing range comes before what it encloses (20 bytes each)
 *     0  u64   start address
 *     8  u32   size
 *    12  u32   enclosing range: index of the nearest earlier range
 *              containing this one's start, or NONE
 *    16  u32   scope
 *   scopes: function instances, out-of-line or inlined (24 bytes each)
 *     0  u32   name (NONE: unknown)
 *     4  u32   system name (NONE: unknown; equal to name when not mangled)
 *     8  u32   parent: an earlier scope this one is inlined into, or NONE
 *    12  u32   call file (NONE: unknown)
 *    16  u32   call line
 *    20  u32   call column
 *   string table: NUL-terminated strings, each stored once
 *
 * The arrays come in this order, each starting at or after the end of the
 * previous one, and the string table ends exactly at the end of the blob.
 * Strings are referenced by the offset of their first byte; names equal to
 * their system name share it.  NONE is 0xffffffff.
 */
#ifndef FP_SYMTAB_FORMAT_H
#define FP_SYMTAB_FORMAT_H

#include "symtab.h"

#include <endian.h>
#include <stdint.h>
#include <string.h>

#define HDR_SIZE 72u
#define SEG_SIZE 24u
#define SYM_SIZE 32u
#define FILE_SIZE 4u
#define BLOCK_SIZE 12u
#define RANGE_SIZE 20u
#define SCOPE_SIZE 24u
#define NONE FP_SYMTAB_NONE
#define NO_PARENT NONE

/* Rows per line block: a look-up decodes at most this many. */
#define LINE_BLOCK 16

/* Inline chains are followed this far at most (real ones are < 20 deep). */
#define MAX_SCOPE_DEPTH 256

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

#endif
