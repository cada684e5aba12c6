/* seccomp.c: the classic-BPF program of seccomp.h: the architecture
 * check, one jump per allowed call, then EPERM. */
#include "seccomp.h"

#include <errno.h>
#include <linux/audit.h>
#include <linux/filter.h>
#include <linux/seccomp.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <sys/syscall.h>
#include <unistd.h>

#if defined(__x86_64__)
#define FP_AUDIT_ARCH AUDIT_ARCH_X86_64
#elif defined(__aarch64__)
#define FP_AUDIT_ARCH AUDIT_ARCH_AARCH64
#else
#error "the seccomp filter knows x86_64 and aarch64"
#endif

#define MAX_CALLS 250

int fp_seccomp_allow(const int *calls, size_t n, unsigned flags)
{
	struct sock_filter prog[5 + MAX_CALLS + 2];
	struct sock_fprog fprog = { .filter = prog };
	size_t len = 0;

	if (n > MAX_CALLS)
		return -E2BIG;
	prog[len++] = (struct sock_filter)BPF_STMT(BPF_LD | BPF_W | BPF_ABS,
						   offsetof(struct seccomp_data, arch));
	prog[len++] = (struct sock_filter)BPF_JUMP(BPF_JMP | BPF_JEQ | BPF_K, FP_AUDIT_ARCH, 1, 0);
	prog[len++] = (struct sock_filter)BPF_STMT(BPF_RET | BPF_K, SECCOMP_RET_KILL_PROCESS);
	prog[len++] = (struct sock_filter)BPF_STMT(BPF_LD | BPF_W | BPF_ABS,
						   offsetof(struct seccomp_data, nr));
	/* x32's calls are numbered from bit 30 on x86_64: none allowed */
	prog[len++] = (struct sock_filter)BPF_JUMP(BPF_JMP | BPF_JGE | BPF_K, 0x40000000u,
						   (uint8_t)n, 0);
	for (size_t i = 0; i < n; i++)
		prog[len++] = (struct sock_filter)BPF_JUMP(BPF_JMP | BPF_JEQ | BPF_K,
							   (uint32_t)calls[i], (uint8_t)(n - i), 0);
	prog[len++] = (struct sock_filter)BPF_STMT(BPF_RET | BPF_K, SECCOMP_RET_ERRNO | EPERM);
	prog[len++] = (struct sock_filter)BPF_STMT(BPF_RET | BPF_K, SECCOMP_RET_ALLOW);
	fprog.len = (unsigned short)len;
	if (syscall(SYS_seccomp, SECCOMP_SET_MODE_FILTER, flags, &fprog))
		return -errno;
	return 0;
}
