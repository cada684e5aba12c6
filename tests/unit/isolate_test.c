/* isolate_test.c: building symbol tables in a child process. */
#include "check.h"
#include "elfsyms.h"
#include "isolate.h"
#include "symtab.h"

#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdlib.h>
#include <string.h>
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
		{ "crash", crash }, { "spin", spin }, { "garbage", garbage },
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

int main(void)
{
	RUN(test_same_as_direct);
	RUN(test_errors_pass_through);
	RUN(test_child_failures);
	return CHECK_DONE();
}
