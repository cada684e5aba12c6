/* seccomp.h: an allowlist seccomp filter, built with the raw system call
 * (no libseccomp).  The agent installs one once running
 * (fp_privilege_drop, device/privilege.h), the symbolizer's isolated
 * parser child one of its own (isolate.h).  The filter is per thread;
 * threads created later inherit it, and it cannot be removed. */
#ifndef FP_SECCOMP_H
#define FP_SECCOMP_H

#include <stddef.h>

/* fp_seccomp_allow: allow the system calls numbered calls[0..n-1] of the
 * native ABI, make every other one (and every call of another ABI, x32
 * included) fail with EPERM.  flags are SECCOMP_FILTER_FLAG_* (TSYNC: all
 * threads of the process).  The caller has set no_new_privs or holds
 * CAP_SYS_ADMIN.  0, -E2BIG (n over 250: jumps are 8 bits) or the errno of
 * seccomp(2). */
int fp_seccomp_allow(const int *calls, size_t n, unsigned flags);

#endif
