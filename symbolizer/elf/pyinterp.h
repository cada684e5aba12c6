/* pyinterp.h: finding a CPython interpreter in an ELF file, for the
 * trailer of its unwind table (struct fp_unwind_cpython, bpf/unwind.h).
 *
 * The device walks Python frames from the interpreter's own state, but
 * never reads a symbol table: this module finds, once per file, what the
 * walker needs from the symbols, and fp_cfi_compile (cfi.h) appends it to
 * the file's table.  A file holds an interpreter when its .symtab or
 * .dynsym defines
 *   _PyEval_EvalFrameDefault  a FUNC of non-zero size: the eval loop;
 *   _PyRuntime                an OBJECT: the runtime state.
 * An undefined reference (a program linked against libpython) does not
 * count: the table of the libpython that defines them gets the trailer.
 * The first definition of each name wins, .dynsym before .symtab.
 *
 * uc_eval[0] is the eval loop, uc_eval[1] its .cold part
 * (_PyEval_EvalFrameDefault.cold, a FUNC of non-zero size, found only
 * where a .symtab has it: an unstripped build), both as file offsets,
 * converted like CFI addresses: through the executable PT_LOAD segment
 * (whose bytes are in the file) that holds the start; the end is clipped
 * to that segment; a range that no such segment holds, or that ends
 * beyond 4 GiB, is [0, 0).  Without a usable eval loop range the file is
 * not taken for an interpreter.
 *
 * uc_runtime is _PyRuntime's st_value minus (p_vaddr - p_offset) of the
 * segment that holds the eval loop.
 *
 * uc_version (major << 8 | minor):
 *   - 3.11 and later export Py_Version, PY_VERSION_HEX as an unsigned long
 *     in .rodata: its low 4 bytes (little-endian) are read from the file,
 *     through the section that holds the symbol; when that section has no
 *     bytes in the file (NOBITS: a detached debug file, or a sparse copy
 *     fetched from a device without them: devfetch.c fetches them with
 *     fp_pyinterp_version_site), or the bytes lie outside
 *     it, or their major version is 0, the version is 0 (unknown), with
 *     no guess from other symbols;
 *   - without a Py_Version symbol: 0x030a (3.10) when the dynamic symbols
 *     define PyAIter_Check (new in 3.10), else 0x0309 (3.9) when they
 *     define PyFrame_GetCode (new in 3.9), else 0.
 *
 * The input is untrusted: only the first SHT_SYMTAB and SHT_DYNSYM
 * sections are read, every symbol, name and byte read is bounded by the
 * file's size, and nothing is allocated.
 */
#ifndef FP_PYINTERP_H
#define FP_PYINTERP_H

#include <gelf.h>
#include <stddef.h>
#include <stdint.h>
#include "unwind.h"

/* fp_pyinterp_find: 1 with *out filled in (host byte order, uc_pad 0)
 * when the ELF file elf holds a CPython interpreter; 0 when it does not
 * (*out zeroed); -EINVAL when elf is not a 64-bit little-endian ELF file
 * (the only kind fp_cfi_compile takes). */
int fp_pyinterp_find(Elf *elf, struct fp_unwind_cpython *out);

/* Where fp_pyinterp_find reads Py_Version: for a sparse copy of a file
 * (devfetch.c), which has the symbol tables but not the section that
 * holds the bytes. */
#define FP_PYINTERP_SITE_MAX 8 /* bytes: the unsigned long Py_Version */
struct fp_pyinterp_site {
	size_t ps_shndx;    /* the section Py_Version's symbol names */
	uint64_t ps_addr;   /* its st_value */
	uint64_t ps_offset; /* its file offset, through that section's header */
	uint32_t ps_len;    /* bytes there, 1 to FP_PYINTERP_SITE_MAX: up to
			     * the end of the section */
};

/* fp_pyinterp_version_site: 1 with *out filled in when the symbol tables
 * of elf define _PyEval_EvalFrameDefault, _PyRuntime and Py_Version (the
 * definition fp_pyinterp_find takes), and Py_Version's address lies in
 * its section, which lies within the file; the section's type is not
 * looked at (a sparse copy marks absent sections NOBITS).  0 (*out
 * zeroed) otherwise; -EINVAL as fp_pyinterp_find. */
int fp_pyinterp_version_site(Elf *elf, struct fp_pyinterp_site *out);

/* fp_pyinterp_find_fd: fp_pyinterp_find on the file open at fd. */
int fp_pyinterp_find_fd(int fd, struct fp_unwind_cpython *out);

#endif
