/* privilege.h: the agent's least privilege.  Root is needed to load and
 * attach the BPF program; afterwards the agent keeps only what its steady
 * state uses, and cannot gain more:
 *
 *   CAP_BPF              update its BPF maps (unwind tables, Python
 *                        processes): kernels that disable unprivileged
 *                        bpf() ask for it on every call
 *   CAP_SYS_PTRACE       read other processes' /proc/PID/maps and
 *                        /proc/PID/root, and their memory
 *                        (process_vm_readv: Python code objects)
 *   CAP_DAC_READ_SEARCH  read mapped files whatever their modes
 *   CAP_CHECKPOINT_RESTORE  open /proc/PID/map_files/ (kernels from 5.9;
 *                        without it the agent resolves the path inside
 *                        the process's root instead)
 *   CAP_SYSLOG           kallsyms with addresses, for the symbolizer
 *   CAP_PERFMON          permitted, not effective, unless --no-python:
 *                        made effective in the main thread only while the
 *                        Python walker, a BPF program of the tracing kind,
 *                        loads (the first CPython process appears), then
 *                        lowered again; perf_event_open stays refused by
 *                        the filter
 *
 * Every other capability leaves the effective, permitted, inheritable,
 * ambient and bounding sets; no_new_privs is set; and a seccomp filter
 * allows only the system calls the agent makes once running (files,
 * sockets, bpf(), process_vm_readv, memory, threads, time).  Any other
 * call (execve, ptrace, mount, perf_event_open, ...) fails with EPERM. */
#ifndef FP_PRIVILEGE_H
#define FP_PRIVILEGE_H

#include <stdint.h>

/* fp_privilege_kept: the capability mask kept effective (bit N:
 * capability N), limited to the capabilities this kernel knows. */
uint64_t fp_privilege_kept(void);

/* fp_privilege_drop: drop the rest, set no_new_privs, install the filter;
 * with later_loads, CAP_PERFMON stays permitted for fp_privilege_perfmon.
 * Call once, after the BPF program is attached, in a process whose
 * threads are not yet running (the filter and capability sets are
 * per thread; threads created later inherit them).  0 or -errno. */
int fp_privilege_drop(int later_loads);

/* fp_privilege_perfmon: raise CAP_PERFMON to effective in the calling
 * thread (on), or lower it again (off), after fp_privilege_drop kept it
 * permitted; without a drop (root throughout) nothing changes.  0 or
 * -errno (-EPERM: not kept). */
int fp_privilege_perfmon(int on);

#endif
