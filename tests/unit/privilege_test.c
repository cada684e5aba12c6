/* privilege_test.c: the agent's dropped privileges (device/privilege.c),
 * checked in a child process as the kernel reports and enforces them:
 * /proc/self/status, and calls that must now fail or still work. */
#include <errno.h>
#include <fcntl.h>
#include <linux/capability.h>
#include <inttypes.h>
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mount.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

#include "check.h"
#include "privilege.h"
#include "table_cache.h"
#include "unwind.h"

/* status_hex: a hexadecimal field of /proc/self/status ("CapEff"), or
 * UINT64_MAX. */
static uint64_t status_hex(const char *field)
{
	FILE *f = fopen("/proc/self/status", "re");
	char line[256];
	size_t len = strlen(field);
	uint64_t v = UINT64_MAX;

	if (!f)
		return v;
	while (fgets(line, sizeof(line), f))
		if (!strncmp(line, field, len) && line[len] == ':') {
			v = strtoull(line + len + 1, NULL, 16);
			break;
		}
	fclose(f);
	return v;
}

static int status_int(const char *field)
{
	uint64_t v = status_hex(field); /* small decimals read the same */

	return v == UINT64_MAX ? -1 : (int)v;
}

static void *thread_caps(void *arg)
{
	*(uint64_t *)arg = status_hex("CapEff"); /* this thread's, as /proc/self is the leader's */
	return NULL;
}

/* in_child: after fp_privilege_drop, everything the kernel says and
 * does; other is a process of another user. */
/* table_cache_works: the agent's table cache, opened before the drop as
 * the agent does, still writes, replaces, reads and removes tables
 * after it (the seccomp filter lets its calls through). */
static void table_cache_works(struct fp_table_cache *c)
{
	struct {
		struct fp_unwind_header h;
		struct fp_unwind_row r[2];
	} t = { .h = { .uh_magic = FP_UNWIND_MAGIC,
		       .uh_version = FP_UNWIND_VERSION,
		       .uh_arch = FP_UNWIND_ARCH_X86_64,
		       .uh_nrows = 2 },
		.r = { { .ur_pc = 0, .ur_cfa = 8 }, { .ur_pc = 16, .ur_cfa = 8 } } };
	struct fp_build_id id = { .fb_len = 4, .fb_data = { 1, 2, 3, 4 } };
	struct fp_table_cache_stats st;
	uint32_t flags;
	size_t len;
	void *blob = NULL;

	CHECK_EQ_INT(fp_table_cache_store(c, &id, &t, sizeof(t), 0), 0);
	t.r[1].ur_pc = 32; /* a new version, renamed over the first */
	CHECK_EQ_INT(fp_table_cache_store(c, &id, &t, sizeof(t), 0), 0);
	CHECK_EQ_INT(fp_table_cache_load(c, &id, &blob, &len, &flags), 0);
	CHECK(blob && len == sizeof(t) && !memcmp(blob, &t, len));
	free(blob);
	fp_table_cache_drop(c, &id);
	fp_table_cache_stats(c, &st);
	CHECK_EQ_INT(st.tc_errors, 0);
	CHECK_EQ_INT(st.tc_stored, 2);
	CHECK_EQ_INT(st.tc_files, 0);
}

static void in_child(pid_t other)
{
	uint64_t kept = fp_privilege_kept(), thread_eff = 0;
	char path[64], dir[] = "/tmp/privilege_test.XXXXXX";
	struct fp_table_cache *c = NULL;
	pthread_t t;
	int fd;

	CHECK(mkdtemp(dir) != NULL);
	CHECK_EQ_INT(fp_table_cache_open(&c, dir, 1 << 20), 0);
	CHECK_EQ_INT(fp_privilege_drop(0), 0);
	if (c) {
		table_cache_works(c);
		fp_table_cache_close(c);
	}
	rmdir(dir);
	CHECK(status_hex("CapEff") == kept);
	CHECK(status_hex("CapPrm") == kept);
	CHECK(status_hex("CapBnd") == kept);
	CHECK(status_hex("CapInh") == 0);
	CHECK(status_hex("CapAmb") == 0);
	CHECK_EQ_INT(status_int("NoNewPrivs"), 1);
	CHECK_EQ_INT(status_int("Seccomp"), 2);
	/* threads started afterwards (nng's) have the same */
	CHECK_EQ_INT(pthread_create(&t, NULL, thread_caps, &thread_eff), 0);
	pthread_join(t, NULL);
	CHECK(thread_eff == kept);
	/* refused: a new program, tracing, mounting, a new perf event, a
	 * capability back, and x32's numbering of an allowed call */
	execl("/bin/true", "true", (char *)NULL);
	CHECK_EQ_INT(errno, EPERM);
	CHECK(syscall(SYS_ptrace, 16 /* PTRACE_ATTACH */, 1, 0, 0) == -1 && errno == EPERM);
	CHECK(mount("none", "/mnt", "tmpfs", 0, NULL) == -1 && errno == EPERM);
	CHECK(syscall(SYS_perf_event_open, NULL, -1, 0, -1, 0) == -1 && errno == EPERM);
	CHECK(setuid(1) == -1 && errno == EPERM);
#ifdef __x86_64__
	CHECK(syscall(0x40000000 | SYS_getpid) == -1 && errno == EPERM);
#endif
	/* still allowed: the maps of a process of another user
	 * (CAP_SYS_PTRACE), time, memory */
	snprintf(path, sizeof(path), "/proc/%d/maps", (int)other);
	fd = open(path, O_RDONLY | O_CLOEXEC);
	if (fd < 0)
		fprintf(stderr, "open %s: %s\n", path, strerror(errno));
	CHECK(fd >= 0);
	if (fd >= 0) {
		char buf[64];
		CHECK(read(fd, buf, sizeof(buf)) > 0);
		close(fd);
	}
	CHECK(getpid() > 1);
	free(malloc(1 << 20));
}

static void test_drop(void)
{
	int status = 0;
	pid_t pid, other;

	if (getuid() != 0) {
		if (getenv("CI"))
			CHECK(!"privilege_test needs root, and CI is set");
		else
			printf("SKIP: %s:test_drop (needs root)\n", __FILE__);
		return;
	}
	fflush(NULL);
	other = fork();
	if (other == 0) {
		if (setuid(65534) == 0)
			pause();
		_exit(1);
	}
	pid = fork();
	if (pid == 0) {
		in_child(other);
		fflush(NULL);
		_exit(check_failures ? 1 : 0);
	}
	CHECK(pid > 0 && waitpid(pid, &status, 0) == pid);
	CHECK(WIFEXITED(status) && WEXITSTATUS(status) == 0);
	kill(other, SIGKILL);
	waitpid(other, NULL, 0);
}

/* With later loads (the Python walker), CAP_PERFMON stays permitted but
 * not effective, and goes up and down on demand; capset is allowed, and
 * nothing beyond the permitted set can be raised. */
static void test_perfmon_for_later_loads(void)
{
	int status = 0;
	pid_t pid;

	if (getuid() != 0) {
		if (getenv("CI"))
			CHECK(!"privilege_test needs root, and CI is set");
		else
			printf("SKIP: %s:test_perfmon_for_later_loads (needs root)\n", __FILE__);
		return;
	}
	fflush(NULL);
	pid = fork();
	if (pid == 0) {
		uint64_t kept = fp_privilege_kept(), perfmon = 1ull << 38;
		CHECK_EQ_INT(fp_privilege_perfmon(1), 0); /* before a drop: nothing to do */
		CHECK_EQ_INT(fp_privilege_drop(1), 0);
		CHECK(status_hex("CapEff") == kept);
		CHECK(status_hex("CapPrm") == (kept | perfmon));
		CHECK(status_hex("CapBnd") == kept);
		CHECK_EQ_INT(fp_privilege_perfmon(1), 0);
		CHECK(status_hex("CapEff") == (kept | perfmon));
		CHECK_EQ_INT(fp_privilege_perfmon(0), 0);
		CHECK(status_hex("CapEff") == kept);
		/* CAP_SYS_ADMIN was not kept: it cannot come back */
		{
			struct __user_cap_header_struct hdr = {
				.version = _LINUX_CAPABILITY_VERSION_3
			};
			struct __user_cap_data_struct data[2];
			memset(data, 0, sizeof(data));
			CHECK_EQ_INT(syscall(SYS_capget, &hdr, data), 0);
			data[0].effective |= 1u << 21;
			CHECK(syscall(SYS_capset, &hdr, data) == -1 && errno == EPERM);
		}
		fflush(NULL);
		_exit(check_failures ? 1 : 0);
	}
	CHECK(pid > 0 && waitpid(pid, &status, 0) == pid);
	CHECK(WIFEXITED(status) && WEXITSTATUS(status) == 0);
}

/* A process with a second thread is refused: the capability sets are per
 * thread, and the first thread's drop would leave the other's. */
static void *sleeper(void *arg)
{
	(void)arg;
	pause();
	return NULL;
}

static void test_threads_refused(void)
{
	int status = 0;
	pid_t pid;

	fflush(NULL);
	pid = fork();
	if (pid == 0) {
		pthread_t t;
		pthread_create(&t, NULL, sleeper, NULL);
		_exit(fp_privilege_drop(0) == -EBUSY && status_int("Seccomp") == 0 ? 0 : 1);
	}
	CHECK(pid > 0 && waitpid(pid, &status, 0) == pid);
	CHECK(WIFEXITED(status) && WEXITSTATUS(status) == 0);
}

/* The set kept: the five named capabilities, and no other. */
static void test_kept(void)
{
	uint64_t kept = fp_privilege_kept();

	CHECK(kept >> 19 & 1); /* CAP_SYS_PTRACE */
	CHECK(kept >> 2 & 1);  /* CAP_DAC_READ_SEARCH */
	CHECK(kept >> 34 & 1); /* CAP_SYSLOG */
	CHECK(kept >> 39 & 1); /* CAP_BPF (this kernel has it) */
	CHECK(kept >> 40 & 1); /* CAP_CHECKPOINT_RESTORE */
	CHECK_EQ_INT(__builtin_popcountll(kept), 5);
	CHECK(!(kept >> 21 & 1)); /* not CAP_SYS_ADMIN */
}

int main(void)
{
	RUN(test_kept);
	RUN(test_threads_refused);
	RUN(test_drop);
	RUN(test_perfmon_for_later_loads);
	return CHECK_DONE();
}
