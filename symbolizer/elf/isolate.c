/* isolate.c: fork, confine the child, build the table, send it back
 * through a pipe. */
#include "isolate.h"
#include "cli.h"
#include "cfi.h"
#include "fileio.h"
#include "log.h"
#include "elfsyms.h"
#include "seccomp.h"
#include "symtab.h"
#include "unwind_table.h"

#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/resource.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

struct isolate_header {
	int32_t ih_err;
	uint32_t ih_pad;
	uint64_t ih_len;
};

/* A child that neither writes nor uses CPU for this long is blocked for
 * good: under ASan, on an allocator lock another thread of the parent held
 * at the fork (the child has no other thread to release it).  The parser
 * reads a local file and never waits on anything else. */
#define STALL_NS (5 * 1000000000ull)

/* cpu_ns: the CPU time process pid has used, or 0 if unknown. */
static uint64_t cpu_ns(pid_t pid)
{
	struct timespec ts;
	clockid_t clk;

	if (clock_getcpuclockid(pid, &clk) || clock_gettime(clk, &ts))
		return 0;
	return (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
}

/* read_all: len bytes from fd, written by child pid, by deadline_ns
 * (CLOCK_MONOTONIC).  0; -1 at the end of the stream, an error or the
 * deadline; -2 when the child stalled (STALL_NS without a byte or a
 * moment of CPU). */
static int read_all(int fd, void *buf, size_t len, pid_t pid, uint64_t deadline_ns)
{
	uint64_t progress = fp_now_ns(CLOCK_MONOTONIC), cpu = cpu_ns(pid);
	char *p = buf;

	while (len) {
		uint64_t now = fp_now_ns(CLOCK_MONOTONIC), wait = deadline_ns - now, c;
		struct pollfd pfd = { fd, POLLIN, 0 };
		ssize_t n;
		int r;

		if (now >= deadline_ns)
			return -1;
		r = poll(&pfd, 1,
			 (int)((wait < 1000000000ull ? wait : 1000000000ull) / 1000000 + 1));
		if (r < 0 && errno == EINTR)
			continue;
		if (r < 0)
			return -1;
		if (r == 0) {
			now = fp_now_ns(CLOCK_MONOTONIC);
			if ((c = cpu_ns(pid)) != cpu) {
				cpu = c;
				progress = now;
			} else if (now - progress >= STALL_NS) {
				return -2;
			}
			continue;
		}
		n = read(fd, p, len);
		if (n < 0 && errno == EINTR)
			continue;
		if (n <= 0)
			return -1;
		p += n, len -= (size_t)n;
		progress = fp_now_ns(CLOCK_MONOTONIC);
	}
	return 0;
}

/* What the builders (libelf on a mapping, libdwarf, liblzma, the
 * demangler, malloc) and the way back (write, exit) use, and what a crash
 * needs to end in its signal (abort: tgkill); libelf checks its fd with
 * fcntl.  No open, no socket, no exec, no fork. */
static const int child_calls[] = {
	/* the file it holds (pwrite: a fetch marks sections absent) */
	SYS_read,
	SYS_pread64,
	SYS_readv,
	SYS_pwrite64,
	SYS_lseek,
	SYS_fstat,
	SYS_newfstatat,
	SYS_fcntl,
	SYS_close,
	/* the way back (and stderr under sanitizers) */
	SYS_write,
	SYS_writev,
	/* memory */
	SYS_brk,
	SYS_mmap,
	SYS_munmap,
	SYS_mremap,
	SYS_mprotect,
	SYS_madvise,
	/* signals, locks, time, exit */
	SYS_futex,
	SYS_rt_sigaction,
	SYS_rt_sigprocmask,
	SYS_rt_sigreturn,
	SYS_sigaltstack,
	SYS_getpid,
	SYS_gettid,
	SYS_tgkill,
	SYS_clock_gettime,
	SYS_getrandom,
	SYS_sysinfo,
	SYS_exit,
	SYS_exit_group,
};

/* keep_only: close every descriptor but a and b; and stderr in sanitizer
 * builds, for their reports.  Not otherwise: the server's log is no place
 * for what a parser taken over would write (the upload token is in its
 * memory). */
static void keep_only(int a, int b)
{
#ifdef __SANITIZE_ADDRESS__
	int keep[3] = { a, b, STDERR_FILENO }, n = 3;
#else
	int keep[3] = { a, b }, n = 2;
#endif
	unsigned from = 0;

	for (int i = 1; i < n; i++) /* sorted */
		for (int j = i; j > 0 && keep[j - 1] > keep[j]; j--) {
			int t = keep[j];
			keep[j] = keep[j - 1], keep[j - 1] = t;
		}
	for (int i = 0; i < n; i++) {
		if ((unsigned)keep[i] > from)
			close_range(from, (unsigned)keep[i] - 1, 0);
		if ((unsigned)keep[i] + 1 > from)
			from = (unsigned)keep[i] + 1;
	}
	close_range(from, ~0u, 0);
}

/* confine: what the child holds and may do: fd and out, an empty
 * environment (the server's may hold the upload token), no new
 * privileges, the calls of child_calls.  0 or -errno. */
static int confine(int fd, int out)
{
	keep_only(fd, out);
	if (clearenv())
		return -ENOMEM;
	if (prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0))
		return -errno;
	return fp_seccomp_allow(child_calls, sizeof(child_calls) / sizeof(child_calls[0]), 0);
}

static void __attribute__((noreturn))
child(fp_isolate_fn fn, void *arg, int fd, unsigned seconds, int out)
{
	struct rlimit mem = { FP_ISOLATE_MEMORY, FP_ISOLATE_MEMORY };
	struct rlimit cpu = { seconds, seconds };
	struct isolate_header h = { 0 };
	void *blob = NULL;
	size_t len = 0;

	/* The data limit, not the address space: the child inherits the
	 * parent's mappings, the symbol cache's tens of gigabytes among them,
	 * which are shared and cost nothing here. */
#ifndef __SANITIZE_ADDRESS__ /* ASan's shadow memory counts as data */
	setrlimit(RLIMIT_DATA, &mem);
#else
	(void)mem;
#endif
	setrlimit(RLIMIT_CPU, &cpu);
	signal(SIGPIPE, SIG_DFL);
	h.ih_err = confine(fd, out);
	if (!h.ih_err)
		h.ih_err = fn(arg, fd, &blob, &len);
	h.ih_len = h.ih_err ? 0 : len;
	if (fp_write_all(out, &h, sizeof(h)) || (h.ih_len && fp_write_all(out, blob, len)))
		_exit(1);
	_exit(0);
}

/* isolate_once: fork a child that runs fn, and read its answer.  0 with
 * *blob (malloc'd) and *len, -EAGAIN when the child stalled before it
 * wrote anything (killed), or another negative errno. */
static int isolate_once(fp_isolate_fn fn, void *arg, fp_check_fn check, int fd,
			unsigned cpu_seconds, void **blob, size_t *len)
{
	struct isolate_header h;
	int pipefd[2], status, err = -ECHILD, r;
	uint64_t deadline;
	void *buf = NULL;
	pid_t pid;

	if (pipe2(pipefd, O_CLOEXEC))
		return -errno;
	pid = fork();
	if (pid < 0) {
		err = -errno;
		close(pipefd[0]);
		close(pipefd[1]);
		return err;
	}
	if (pid == 0) {
		close(pipefd[0]);
		child(fn, arg, fd, cpu_seconds, pipefd[1]);
	}
	close(pipefd[1]);
	/* Read while the child writes: a large table does not fit a pipe.
	 * A child past its wall-clock time, or stalled (read_all), is
	 * killed. */
	deadline = fp_now_ns(CLOCK_MONOTONIC) + (2ull * cpu_seconds + 10) * 1000000000ull;
	if ((r = read_all(pipefd[0], &h, sizeof(h), pid, deadline)) == 0) {
		if (h.ih_err) {
			err = h.ih_err < 0 ? h.ih_err : -EINVAL;
		} else if (h.ih_len && h.ih_len <= SIZE_MAX / 2 && (buf = malloc(h.ih_len)) &&
			   (r = read_all(pipefd[0], buf, h.ih_len, pid, deadline)) == 0) {
			err = 0;
		}
	} else if (r == -2) {
		err = -EAGAIN; /* nothing written: fork again */
	}
	close(pipefd[0]);
	if (err && (r == -2 || fp_now_ns(CLOCK_MONOTONIC) >= deadline)) {
		kill(pid, SIGKILL);
		err = err == -EAGAIN ? err : -ETIMEDOUT;
	}
	while (waitpid(pid, &status, 0) < 0 && errno == EINTR)
		;
	if (!WIFEXITED(status) || WEXITSTATUS(status) != 0)
		err = err ? err : -ECHILD;
	if (!err && check(buf, h.ih_len))
		err = -ECHILD;
	if (err) {
		free(buf);
		return err;
	}
	*blob = buf;
	*len = h.ih_len;
	return 0;
}

int fp_isolate_call(fp_isolate_fn fn, void *arg, fp_check_fn check, int fd, unsigned cpu_seconds,
		    void **blob, size_t *len)
{
	int err = isolate_once(fn, arg, check, fd, cpu_seconds, blob, len);

	/* A child that stalled before writing a byte never ran into the
	 * file's contents: a fork at a better moment does. */
	if (err == -EAGAIN) {
		fp_warnx(
			"a file's parser made no progress for 5 s (blocked since its fork): forked again");
		err = isolate_once(fn, arg, check, fd, cpu_seconds, blob, len);
	}
	return err == -EAGAIN ? -ETIMEDOUT : err;
}

/* A table builder is a call without an argument. */
struct builder {
	fp_build_fn bd_build;
};

static int call_builder(void *arg, int fd, void **blob, size_t *len)
{
	return ((const struct builder *)arg)->bd_build(fd, blob, len);
}

int fp_isolate_build_checked(fp_build_fn build, fp_check_fn check, int fd, unsigned cpu_seconds,
			     void **blob, size_t *len)
{
	struct builder b = { build };

	return fp_isolate_call(call_builder, &b, check, fd, cpu_seconds, blob, len);
}

static int symtab_check(const void *blob, size_t len)
{
	struct fp_symtab t;

	return fp_symtab_open(&t, blob, len);
}

int fp_isolate_build(fp_build_fn build, int fd, unsigned cpu_seconds, void **blob, size_t *len)
{
	return fp_isolate_build_checked(build, symtab_check, fd, cpu_seconds, blob, len);
}

int fp_elf_symtab_isolated(int fd, void **blob, size_t *len)
{
	return fp_isolate_build(fp_elf_symtab, fd, FP_ISOLATE_SECONDS, blob, len);
}

int fp_cfi_compile_isolated(int fd, void **blob, size_t *len)
{
	return fp_isolate_build_checked(fp_cfi_compile, fp_unwind_table_check, fd,
					FP_ISOLATE_SECONDS, blob, len);
}
