/* elfinit_test.c: after fp_elf_init, libelf opens an ELF file, from any
 * number of threads calling it at once. */
#include "check.h"
#include "elfinit.h"

#include <fcntl.h>
#include <gelf.h>
#include <pthread.h>
#include <unistd.h>

static void *init_thread(void *arg)
{
	*(int *)arg = fp_elf_init();
	return NULL;
}

static void test_init_then_read(void)
{
	pthread_t th[4];
	int rv[4], fd;
	GElf_Ehdr eh;
	Elf *e;

	for (int i = 0; i < 4; i++)
		CHECK_EQ_INT(pthread_create(&th[i], NULL, init_thread, &rv[i]), 0);
	for (int i = 0; i < 4; i++) {
		pthread_join(th[i], NULL);
		CHECK_EQ_INT(rv[i], 0);
	}
	CHECK_EQ_INT(fp_elf_init(), 0);
	fd = open("/proc/self/exe", O_RDONLY | O_CLOEXEC);
	CHECK(fd >= 0);
	e = elf_begin(fd, ELF_C_READ_MMAP, NULL);
	CHECK(e != NULL);
	CHECK(e && elf_kind(e) == ELF_K_ELF && gelf_getehdr(e, &eh) != NULL);
	elf_end(e);
	close(fd);
}

int main(void)
{
	RUN(test_init_then_read);
	return CHECK_DONE();
}
