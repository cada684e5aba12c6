/* privilege.c: capabilities, no_new_privs and the seccomp filter of
 * privilege.h, with the raw system calls (no libcap; the filter is
 * common/seccomp.c's). */
#include "privilege.h"
#include "seccomp.h"

#include <errno.h>
#include <linux/capability.h>
#include <linux/seccomp.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/syscall.h>
#include <unistd.h>

#ifndef CAP_PERFMON
#define CAP_PERFMON 38
#endif
#ifndef CAP_BPF
#define CAP_BPF 39
#endif
#ifndef CAP_CHECKPOINT_RESTORE
#define CAP_CHECKPOINT_RESTORE 40
#endif

/* The system calls of the agent once running, as strace shows them over
 * the end-to-end tests (sampling, Python, device fetch, failover, exit),
 * and those libc, libbpf and nng make on paths the tests may not reach
 * (errors, signals, thread start). */
static const int allowed[] = {
	/* files and /proc */
	SYS_openat,
	SYS_openat2,
	SYS_close,
	SYS_read,
	SYS_pread64,
	SYS_readv,
	SYS_lseek,
	SYS_newfstatat,
	SYS_fstat,
	SYS_statx,
	SYS_getdents64,
	SYS_readlinkat,
	SYS_fcntl,
	SYS_faccessat,
	SYS_faccessat2,
	SYS_write,
	SYS_writev,
	SYS_ioctl,
	/* the table cache: a file written, renamed over the old, its time
	 * of use set, one removed */
	SYS_renameat2,
	SYS_unlinkat,
	SYS_utimensat,
#ifdef SYS_renameat
	SYS_renameat,
#endif
#ifdef SYS_open
	SYS_open,
	SYS_stat,
	SYS_lstat,
	SYS_readlink,
	SYS_access,
#endif
	/* the BPF maps and the processes sampled */
	SYS_bpf,
	SYS_process_vm_readv,
	/* sockets (nng, syslog) and waiting */
	SYS_socket,
	SYS_connect,
	SYS_bind,
	SYS_getsockname,
	SYS_getpeername,
	SYS_setsockopt,
	SYS_getsockopt,
	SYS_sendto,
	SYS_recvfrom,
	SYS_sendmsg,
	SYS_recvmsg,
	SYS_shutdown,
	SYS_epoll_create1,
	SYS_epoll_ctl,
	SYS_epoll_pwait,
	SYS_ppoll,
	SYS_pipe2,
	SYS_eventfd2,
	SYS_dup,
	SYS_dup3,
#ifdef SYS_epoll_wait
	SYS_epoll_wait,
	SYS_poll,
	SYS_pipe,
	SYS_dup2,
#endif
	/* memory */
	SYS_brk,
	SYS_mmap,
	SYS_munmap,
	SYS_mremap,
	SYS_mprotect,
	SYS_madvise,
	/* threads, signals, time */
	SYS_clone,
	SYS_clone3,
	SYS_futex,
	SYS_set_robust_list,
	SYS_rseq,
	SYS_exit,
	SYS_exit_group,
	SYS_rt_sigaction,
	SYS_rt_sigprocmask,
	SYS_rt_sigreturn,
	SYS_sigaltstack,
	SYS_tgkill,
	SYS_getpid,
	SYS_gettid,
	SYS_sched_yield,
	SYS_sched_getaffinity,
	SYS_nanosleep,
	SYS_clock_nanosleep,
	SYS_clock_gettime,
	SYS_gettimeofday,
	SYS_restart_syscall,
	SYS_prctl,
	SYS_getrandom,
	SYS_uname,
	SYS_getrusage,
	SYS_prlimit64,
	SYS_sysinfo,
	SYS_getuid,
	SYS_geteuid,
	SYS_getgid,
	SYS_getegid,
	/* CAP_PERFMON up and down for a later BPF load (fp_privilege_perfmon) */
	SYS_capget,
	SYS_capset,
};

static int dropped; /* fp_privilege_drop succeeded */

/* known_caps: the capabilities this kernel knows. */
static uint64_t known_caps(void)
{
	int last = CAP_LAST_CAP;
	FILE *f = fopen("/proc/sys/kernel/cap_last_cap", "re");

	if (f) {
		if (fscanf(f, "%d", &last) != 1)
			last = CAP_LAST_CAP;
		fclose(f);
	}
	return last < 63 ? (2ull << last) - 1 : ~0ull;
}

uint64_t fp_privilege_kept(void)
{
	return (1ull << CAP_BPF | 1ull << CAP_SYS_PTRACE | 1ull << CAP_DAC_READ_SEARCH |
		1ull << CAP_CHECKPOINT_RESTORE | 1ull << CAP_SYSLOG) &
	       known_caps();
}

static int threads(void)
{
	FILE *f = fopen("/proc/self/status", "re");
	char line[256];
	int n = -1;

	if (!f)
		return -1;
	while (fgets(line, sizeof(line), f))
		if (sscanf(line, "Threads: %d", &n) == 1)
			break;
	fclose(f);
	return n;
}

static int drop_capabilities(uint64_t kept, uint64_t permitted)
{
	struct __user_cap_header_struct hdr = { .version = _LINUX_CAPABILITY_VERSION_3 };
	struct __user_cap_data_struct data[2];

	for (int cap = 0; cap < 64; cap++) {
		if (kept >> cap & 1)
			continue;
		/* EINVAL: a capability this kernel does not know */
		if (prctl(PR_CAPBSET_DROP, cap, 0, 0, 0) && errno != EINVAL)
			return -errno;
	}
	if (prctl(PR_CAP_AMBIENT, PR_CAP_AMBIENT_CLEAR_ALL, 0, 0, 0) && errno != EINVAL)
		return -errno;
	memset(data, 0, sizeof(data));
	if (syscall(SYS_capget, &hdr, data))
		return -errno;
	for (int i = 0; i < 2; i++) {
		uint32_t mask = (uint32_t)(kept >> (32 * i));

		data[i].effective &= mask;
		data[i].permitted &= mask | (uint32_t)(permitted >> (32 * i));
		data[i].inheritable = 0;
	}
	if (syscall(SYS_capset, &hdr, data))
		return -errno;
	return 0;
}

#define NALLOWED (sizeof(allowed) / sizeof(allowed[0]))

int fp_privilege_perfmon(int on)
{
	struct __user_cap_header_struct hdr = { .version = _LINUX_CAPABILITY_VERSION_3 };
	struct __user_cap_data_struct data[2];
	uint32_t bit = 1u << (CAP_PERFMON - 32);

	if (!dropped)
		return 0;
	memset(data, 0, sizeof(data));
	if (syscall(SYS_capget, &hdr, data))
		return -errno;
	if (on)
		data[1].effective |= bit;
	else
		data[1].effective &= ~bit;
	return syscall(SYS_capset, &hdr, data) ? -errno : 0;
}

int fp_privilege_drop(int later_loads)
{
	int err;

	/* A thread just joined (the agent's probe of pthread's layout) may
	 * still be counted for a moment after pthread_join returns. */
	for (int i = 0; threads() != 1; i++) {
		if (i == 100)
			return -EBUSY;
		usleep(1000);
	}
	if ((err = drop_capabilities(fp_privilege_kept(),
				     later_loads ? 1ull << CAP_PERFMON & known_caps() : 0)))
		return err;
	if (prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0))
		return -errno;
	if ((err = fp_seccomp_allow(allowed, NALLOWED, SECCOMP_FILTER_FLAG_TSYNC)))
		return err;
	dropped = 1;
	return 0;
}
