/* elfsyms.h: reading ELF files (executables, shared objects, detached debug
 * files) with libelf.  Files may be hostile: every size is checked. */
#ifndef FP_ELFSYMS_H
#define FP_ELFSYMS_H

#include <stddef.h>
#include "batch.h"

/* fp_elf_build_id: the GNU build-ID of the ELF file open at fd, from a
 * SHT_NOTE section or, failing that, a PT_NOTE segment (gelf_getnote).
 * 0, -ENOENT (no build-ID, or one over FP_BUILD_ID_MAX bytes), -EINVAL
 * (not ELF / malformed), -ENOSYS (libelf unusable) or a negative errno. */
int fp_elf_build_id(int fd, struct fp_build_id *id);

/* fp_elf_symtab: build a symbol table blob (symtab.h) from the ELF file at
 * fd: function symbols (STT_FUNC, STT_GNU_IFUNC) of .symtab, or of .dynsym
 * when there is no .symtab, C++ names demangled; PT_LOAD segments.
 * Detached debug files lose their segments' file offsets; they are rebuilt
 * the way linkers lay segments out.  Names whose demangled form would be
 * huge stay mangled.  The demangler needs about 256 KiB of stack.
 * The caller frees *blob.  0, -ENOENT (no function symbols), -EINVAL,
 * -ENOMEM or a negative errno. */
int fp_elf_symtab(int fd, void **blob, size_t *len);

/* fp_demangle: the demangled form of an Itanium C++ name (malloc'd), or
 * NULL if name is not mangled or cannot be demangled. */
char *fp_demangle(const char *name);

#endif
