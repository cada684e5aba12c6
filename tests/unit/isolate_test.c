/* isolate_test.c: building symbol tables in a child process. */
#include "check.h"
#include "cli.h"
#include "elfsyms.h"
#include "isolate.h"
#include "symtab.h"

#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <limits.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <unistd.h>

static int crash(int fd, void **blob, size_t *len)
{
	raise(SIGSEGV);
	return 0;
}

static int spin(int fd, void **blob, size_t *len)
{
	for (;;)
		__asm__ volatile("");
}

static int __attribute__((unused)) hog(int fd, void **blob, size_t *len)
{
	/* Past the address-space limit: allocation fails, then the write. */
	for (;;) {
		char *p = malloc(1 << 28);
		if (!p)
			abort();
		memset(p, 1, 1 << 28);
	}
}

static int garbage(int fd, void **blob, size_t *len)
{
	*blob = strdup("not a symbol table at all");
	*len = strlen(*blob);
	return 0;
}

/* What a parser taken over by a hostile file could reach. */
struct reach {
	int rc_open_errno;   /* of open("/etc/passwd") */
	int rc_socket_errno; /* of socket() */
	int rc_fork_errno;   /* of fork() */
	int rc_nfds;         /* descriptors open, of the first 1024 */
	int rc_fds[8];       /* the first 8 of them */
	int rc_nenv;         /* environment variables */
};

extern char **environ;

static int probe(int fd, void **blob, size_t *len)
{
	struct reach *r = calloc(1, sizeof(*r));
	struct stat st;
	int s;

	if (!r)
		return -ENOMEM;
	r->rc_open_errno = open("/etc/passwd", O_RDONLY) < 0 ? errno : 0;
	s = socket(AF_INET, SOCK_STREAM, 0);
	r->rc_socket_errno = s < 0 ? errno : 0;
	r->rc_fork_errno = fork() < 0 ? errno : 0; /* a child, if any, exits at once */
	for (int i = 0; i < 1024; i++)
		if (fstat(i, &st) == 0 && r->rc_nfds++ < 8)
			r->rc_fds[r->rc_nfds - 1] = i;
	for (char **e = environ; e && *e; e++)
		r->rc_nenv++;
	*blob = r;
	*len = sizeof(*r);
	return 0;
}

static int any_blob(const void *blob, size_t len)
{
	return len == sizeof(struct reach) ? 0 : -EINVAL;
}

/* The child holds the file and its pipe, no environment (the upload
 * token), and cannot open, connect or fork. */
static void test_child_confined(void)
{
	int fd = open("/proc/self/exe", O_RDONLY | O_CLOEXEC), stray = dup(fd), extra;
	struct reach *r = NULL;
	size_t len = 0;
	int sock = socket(AF_UNIX, SOCK_STREAM, 0); /* a connection the server holds */

	setenv("FLEETPROF_UPLOAD_TOKEN", "secret", 1);
	extra = open("/etc/hostname", O_RDONLY); /* no O_CLOEXEC: forked children inherit it */
	CHECK(fd >= 0 && stray >= 0 && sock >= 0 && extra >= 0);
	CHECK_EQ_INT(fp_isolate_build_checked(probe, any_blob, fd, 5, (void **)&r, &len), 0);
	if (r) {
		CHECK_EQ_INT(r->rc_open_errno, EPERM);
		CHECK_EQ_INT(r->rc_socket_errno, EPERM);
		CHECK_EQ_INT(r->rc_fork_errno, EPERM);
		/* the file and the pipe (and stderr under ASan): nothing of the
		 * parent's */
#ifdef __SANITIZE_ADDRESS__
		CHECK_EQ_INT(r->rc_nfds, 3);
		CHECK_EQ_INT(r->rc_fds[0], STDERR_FILENO);
		memmove(r->rc_fds, r->rc_fds + 1, 2 * sizeof(r->rc_fds[0]));
#else
		CHECK_EQ_INT(r->rc_nfds, 2);
#endif
		CHECK_EQ_INT(r->rc_fds[0], fd);
		CHECK(r->rc_fds[1] != stray && r->rc_fds[1] != sock && r->rc_fds[1] != extra);
		CHECK_EQ_INT(r->rc_nenv, 0);
	}
	/* The parent is untouched. */
	CHECK(getenv("FLEETPROF_UPLOAD_TOKEN") != NULL);
	CHECK(fcntl(extra, F_GETFD) == 0);
	unsetenv("FLEETPROF_UPLOAD_TOKEN");
	free(r);
	close(extra);
	close(sock);
	close(stray);
	close(fd);
}

static void test_same_as_direct(void)
{
	int fd = open("/proc/self/exe", O_RDONLY);
	void *direct = NULL, *isolated = NULL;
	size_t dlen = 0, ilen = 0;

	CHECK(fd >= 0);
	CHECK_EQ_INT(fp_elf_symtab(fd, &direct, &dlen), 0);
	CHECK_EQ_INT(fp_elf_symtab_isolated(fd, &isolated, &ilen), 0);
	CHECK(dlen == ilen && dlen && memcmp(direct, isolated, dlen) == 0);
	free(direct);
	free(isolated);
	close(fd);
}

static void test_errors_pass_through(void)
{
	int fd = open("/etc/hostname", O_RDONLY);
	void *blob = NULL;
	size_t len = 0;

	CHECK(fd >= 0);
	CHECK_EQ_INT(fp_elf_symtab_isolated(fd, &blob, &len), fp_elf_symtab(fd, &blob, &len));
	CHECK(blob == NULL);
	close(fd);
}

static void test_child_failures(void)
{
	static const struct {
		const char *name;
		fp_build_fn fn;
	} cases[] = {
		{ "crash", crash },
		{ "spin", spin },
		{ "garbage", garbage },
#ifndef __SANITIZE_ADDRESS__ /* no address-space limit under ASan */
		{ "hog", hog },
#endif
	};
	size_t i;

	for (i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
		void *blob = NULL;
		size_t len = 0;
		int err = fp_isolate_build(cases[i].fn, 0, 1, &blob, &len);

		if (err != -ECHILD)
			fprintf(stderr, "  %s: %d\n", cases[i].name, err);
		CHECK_EQ_INT(err, -ECHILD);
		CHECK(blob == NULL);
	}
}

/* block: waits for bytes that never come (its fd is a FIFO with no
 * writer but itself), using no CPU time. */
static int block(int fd, void **blob, size_t *len)
{
	char c;

	return read(fd, &c, 1) == 1 ? -EINVAL : -EIO;
}

/* A child blocked without writing or using CPU time is killed after 5 s
 * of that, forked once more (a fork can leave the child blocked on a lock
 * another thread held: under ASan), and killed again: -ETIMEDOUT after
 * about 10 s, before its wall-clock time (twice its CPU time, plus 10 s)
 * is up. */
static void test_child_blocked(void)
{
	char path[256], fifo[PATH_MAX];
	void *blob = NULL;
	size_t len = 0;
	uint64_t t0;
	int fd, err;

	CHECK(!check_tmpdir(path, sizeof(path), "isolate_test"));
	snprintf(fifo, sizeof(fifo), "%s/fifo", path);
	CHECK_EQ_INT(mkfifo(fifo, 0600), 0);
	fd = open(fifo, O_RDWR);
	CHECK(fd >= 0);
	t0 = fp_now_ns(CLOCK_MONOTONIC);
	err = fp_isolate_build(block, fd, 1, &blob, &len);
	t0 = (fp_now_ns(CLOCK_MONOTONIC) - t0) / 1000000;
	CHECK_EQ_INT(err, -ETIMEDOUT);
	CHECK(t0 >= 9500 && t0 < 14000);
	CHECK(blob == NULL);
	close(fd);
	CHECK_EQ_INT(check_rmtree(path), 0);
}

int main(void)
{
	RUN(test_same_as_direct);
	RUN(test_errors_pass_through);
	RUN(test_child_failures);
	RUN(test_child_confined);
	RUN(test_child_blocked);
	return CHECK_DONE();
}
