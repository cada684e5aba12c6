/* elfinit.h: libelf's one-time set-up (elf_version), for every module of
 * the symbolizer that opens files with libelf.  Any thread: the first
 * call does the set-up, once for the process. */
#ifndef FP_ELFINIT_H
#define FP_ELFINIT_H

/* fp_elf_init: 0 when libelf is set up for the ELF version we were built
 * with, -ENOSYS when the library does not support it (then no libelf
 * call can be made). */
int fp_elf_init(void);

#endif
