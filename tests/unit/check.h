/* check.h: the unit-test harness.  Each test function uses CHECK(); main()
 * lists them with RUN().  Every test prints "PASS: file:name" or
 * "FAIL: file:name"; tests/run.sh counts those lines.  CHECK_DONE() is
 * main's exit status: 1 after any failed CHECK, also one made outside a
 * RUN (set-up in main), which tests/run.sh reports as "FAIL: (exit 1)".
 * check_tmpdir and check_rmtree are the scratch directory most tests need. */
#ifndef FP_CHECK_H
#define FP_CHECK_H

#include <errno.h>
#include <ftw.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

static int check_failures;
static int check_failed_tests;

#define CHECK(cond) \
	do { \
		if (!(cond)) { \
			fprintf(stderr, "  %s:%d: CHECK(%s) failed\n", __FILE__, __LINE__, #cond); \
			check_failures++; \
		} \
	} while (0)

#define CHECK_EQ_INT(a, b) \
	do { \
		long long a_ = (long long)(a), b_ = (long long)(b); \
		if (a_ != b_) { \
			fprintf(stderr, "  %s:%d: %s == %lld, expected %s == %lld\n", __FILE__, \
				__LINE__, #a, a_, #b, b_); \
			check_failures++; \
		} \
	} while (0)

#define RUN(test) \
	do { \
		int before_ = check_failures; \
		test(); \
		int failed_ = check_failures != before_; \
		check_failed_tests += failed_; \
		printf("%s: %s:%s\n", failed_ ? "FAIL" : "PASS", __FILE__, #test); \
		fflush(stdout); \
	} while (0)

#define CHECK_DONE() (check_failures ? 1 : 0)

/* check_tmpdir: make a new, empty directory $TMPDIR/NAME.XXXXXX (/tmp
 * without TMPDIR) and write its path into dir, of len bytes.  0, or -1
 * with the reason on stderr. */
static inline int check_tmpdir(char *dir, size_t len, const char *name)
{
	const char *base = getenv("TMPDIR");
	int n = snprintf(dir, len, "%s/%s.XXXXXX", base && *base ? base : "/tmp", name);

	if (n < 0 || (size_t)n >= len || !mkdtemp(dir)) {
		fprintf(stderr, "  cannot make a directory %s: %s\n", dir,
			n < 0 || (size_t)n >= len ? "name too long" : strerror(errno));
		return -1;
	}
	return 0;
}

static inline int check_rmtree_writable(const char *path, const struct stat *sb, int type,
					struct FTW *ftw)
{
	/* A test may leave a directory read-only: its entries could not go. */
	if (type == FTW_D && !(sb->st_mode & S_IWUSR))
		chmod(path, sb->st_mode | S_IRWXU);
	return 0;
}

static inline int check_rmtree_one(const char *path, const struct stat *sb, int type,
				   struct FTW *ftw)
{
	return type == FTW_DP ? rmdir(path) : unlink(path);
}

/* check_rmtree: remove dir and everything under it, read-only directories
 * too; symbolic links are removed, never followed.  0 (also when dir did
 * not exist, as with rm -rf), or -1 when anything stayed. */
static inline int check_rmtree(const char *dir)
{
	struct stat sb;

	if (lstat(dir, &sb) && errno == ENOENT)
		return 0;
	if (nftw(dir, check_rmtree_writable, 16, FTW_PHYS))
		return -1;
	return nftw(dir, check_rmtree_one, 16, FTW_PHYS | FTW_DEPTH) ? -1 : 0;
}

#endif
