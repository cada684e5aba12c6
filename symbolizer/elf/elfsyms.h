/* elfsyms.h: reading ELF files (executables, shared objects, detached debug
 * files) with libelf.  Files may be hostile: every size is checked. */
#ifndef FP_ELFSYMS_H
#define FP_ELFSYMS_H

#include <stddef.h>
#include <stdint.h>
#include "batch.h"

/* fp_elf_symtab: build a symbol table blob (symtab.h) from the ELF file at
 * fd: function symbols (STT_FUNC, STT_GNU_IFUNC) of .symtab, or of .dynsym
 * when there is no .symtab, plus those of the .symtab inside MiniDebugInfo
 * (.gnu_debugdata, xz-compressed), C++ names demangled, frames named
 * without ELF symbol versions, which stay in their system names (from the
 * name in a .symtab, from .gnu.version and .gnu.version_d for .dynsym);
 * PT_LOAD segments;
 * DWARF line tables and inline scopes (dwarf.h) when the file has them;
 * Go's functions from .gopclntab (gopclntab.h), and its lines when there
 * is no DWARF line table.
 * Detached debug files lose their segments' file offsets; they are rebuilt
 * the way linkers lay segments out.  Names whose demangled form would be
 * huge stay mangled.  The demangler needs about 256 KiB of stack.
 * The caller frees *blob.  0, -ENOENT (no function symbols and no DWARF),
 * -EINVAL, -ENOMEM or a negative errno. */
int fp_elf_symtab(int fd, void **blob, size_t *len);

struct fp_dwarf_stats;

/* fp_elf_symtab_stats: fp_elf_symtab, also telling what the DWARF held
 * (stats may be NULL). */
int fp_elf_symtab_stats(int fd, void **blob, size_t *len, struct fp_dwarf_stats *stats);

/* fp_elf_debuglink_crc: the CRC-32 (zlib's, as GNU debuglink uses) of the
 * whole file at fd, read with pread, to compare with the one
 * fp_elfnote_debuglink (elfnote.h) found.  0 or a negative errno. */
int fp_elf_debuglink_crc(int fd, uint32_t *crc);

/* fp_elf_unversioned_len: the length of the first len bytes of name
 * without an ELF symbol version: 10 for "getgrnam_r@@GLIBC_2.2.5" (the
 * default version) and 6 for "memcpy@GLIBC_2.2.5" (a hidden one).  A
 * version is "@" or "@@" after a non-empty name, then a non-empty node
 * name without '@'; anything else is not one, and gives len: "@V",
 * "f@", "@@", "f@@", "a@b@c", "f@@@V".  Profiles show the unversioned
 * name and keep the whole one as the function's system name. */
size_t fp_elf_unversioned_len(const char *name, size_t len);

#endif
