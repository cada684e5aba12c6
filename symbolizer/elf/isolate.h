/* isolate.h: ingesting a file in a child process.
 *
 * Files reach the symbolizer from uploads, devices and the network.
 * Our own code checks every size, but the libraries under it (libelf,
 * libdwarf, the C++ demangler) were not written for hostile input and can
 * crash, loop or allocate without bound.  So the table is built in a
 * forked child with limits on memory and CPU time, and comes back through
 * a pipe; the parent checks it like any blob read from disk.
 *
 * The child holds nothing worth taking and can reach nothing: before it
 * reads a byte it closes every descriptor but the file and the pipe
 * (stderr included: the server's log), clears its environment (the server's holds the upload token),
 * sets no_new_privs and installs a seccomp filter under which only
 * reading the file, memory, writing to what it holds and exiting work
 * (open, socket, exec, fork and the rest fail with EPERM).  The server
 * itself reads no more of a file from outside than fp_elfnote_* (a few
 * bounded preads) before the child has checked it.  Any thread may call
 * these functions; each call forks its own child.
 */
#ifndef FP_ISOLATE_H
#define FP_ISOLATE_H

#include <stddef.h>

#define FP_ISOLATE_MEMORY (4ull << 30) /* private memory of the child */
#define FP_ISOLATE_SECONDS 120         /* CPU time of the child */

/* A table builder such as fp_elf_symtab or fp_cfi_compile. */
typedef int (*fp_build_fn)(int fd, void **blob, size_t *len);

/* A blob checker such as fp_unwind_table_check: 0 when the blob is well
 * formed. */
typedef int (*fp_check_fn)(const void *blob, size_t len);

/* A call made in the child: arg is the caller's memory as it was at the
 * fork (the child's own copy); the result goes back in *blob (malloc'd,
 * *len bytes).  0 or a negative errno, passed back to the caller. */
typedef int (*fp_isolate_fn)(void *arg, int fd, void **blob, size_t *len);

/* fp_isolate_call: fn(arg, fd, ...) in a confined child process.  Its
 * results, or -ECHILD when the child crashed, ran out of CPU time
 * (cpu_seconds) or memory, or returned a blob that check refuses; or
 * the errno of pipe2 or fork.  The caller frees *blob. */
int fp_isolate_call(fp_isolate_fn fn, void *arg, fp_check_fn check, int fd, unsigned cpu_seconds,
		    void **blob, size_t *len);

/* fp_isolate_build_checked: build(fd, ...) in a child process.  Its
 * results, or -ECHILD when the child crashed, ran out of CPU time
 * (cpu_seconds) or memory, or returned a blob that check refuses.  The
 * caller frees *blob. */
int fp_isolate_build_checked(fp_build_fn build, fp_check_fn check, int fd, unsigned cpu_seconds,
			     void **blob, size_t *len);

/* fp_isolate_build: fp_isolate_build_checked for symbol tables: the blob
 * must open with fp_symtab_open. */
int fp_isolate_build(fp_build_fn build, int fd, unsigned cpu_seconds, void **blob, size_t *len);

/* fp_elf_symtab_isolated: fp_elf_symtab (elfsyms.h), isolated. */
int fp_elf_symtab_isolated(int fd, void **blob, size_t *len);

/* fp_cfi_compile_isolated: fp_cfi_compile (cfi.h), isolated; the table
 * passes fp_unwind_table_check. */
int fp_cfi_compile_isolated(int fd, void **blob, size_t *len);

#endif
