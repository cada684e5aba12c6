/* elfinit.c: see elfinit.h. */
#include "elfinit.h"

#include <errno.h>
#include <libelf.h>
#include <pthread.h>

static pthread_once_t elf_once = PTHREAD_ONCE_INIT;
static int elf_usable;

static void elf_setup(void)
{
	elf_usable = elf_version(EV_CURRENT) != EV_NONE;
}

int fp_elf_init(void)
{
	pthread_once(&elf_once, elf_setup);
	return elf_usable ? 0 : -ENOSYS;
}
