/* check.h: the unit-test harness.  Each test function uses CHECK(); main()
 * lists them with RUN().  Every test prints "PASS: file:name" or
 * "FAIL: file:name"; tests/run.sh counts those lines.  CHECK_DONE() is
 * main's exit status: 1 after any failed CHECK, also one made outside a
 * RUN (set-up in main), which tests/run.sh reports as "FAIL: (exit 1)". */
#ifndef FP_CHECK_H
#define FP_CHECK_H

#include <stdio.h>

static int check_failures;
static int check_failed_tests;

#define CHECK(cond)                                                                    \
	do {                                                                           \
		if (!(cond)) {                                                         \
			fprintf(stderr, "  %s:%d: CHECK(%s) failed\n", __FILE__, __LINE__, \
				#cond);                                                \
			check_failures++;                                              \
		}                                                                      \
	} while (0)

#define CHECK_EQ_INT(a, b)                                                             \
	do {                                                                           \
		long long a_ = (long long)(a), b_ = (long long)(b);                    \
		if (a_ != b_) {                                                        \
			fprintf(stderr, "  %s:%d: %s == %lld, expected %s == %lld\n",  \
				__FILE__, __LINE__, #a, a_, #b, b_);                   \
			check_failures++;                                              \
		}                                                                      \
	} while (0)

#define RUN(test)                                                                      \
	do {                                                                           \
		int before_ = check_failures;                                          \
		test();                                                                \
		int failed_ = check_failures != before_;                               \
		check_failed_tests += failed_;                                         \
		printf("%s: %s:%s\n", failed_ ? "FAIL" : "PASS", __FILE__, #test);     \
		fflush(stdout);                                                        \
	} while (0)

#define CHECK_DONE() (check_failures ? 1 : 0)

#endif
