/* vec.c: see vec.h. */
#include "vec.h"

#include <errno.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#define VEC_MIN 16

int fp_vec_grow(void *arrp, size_t *cap, size_t need, size_t elem)
{
	void **arr = arrp;
	size_t n;
	void *p;

	if (need <= *cap)
		return 0;
	if (need > SIZE_MAX / elem)
		return -ENOMEM;
	n = *cap >= VEC_MIN ? *cap : VEC_MIN;
	while (n < need)
		n = n > SIZE_MAX / 2 ? need : n * 2;
	if (n > SIZE_MAX / elem)
		n = need; /* the doubling overshot; need itself fits */
	p = realloc(*arr, n * elem);
	if (!p)
		return -ENOMEM;
	*arr = p;
	*cap = n;
	return 0;
}

int fp_vec_reserve_zeroed(void *arrp, size_t *cap, size_t need, size_t elem)
{
	size_t old = *cap;
	int err = fp_vec_reserve(arrp, cap, need, elem);

	if (!err && *cap > old)
		memset(*(char **)arrp + old * elem, 0, (*cap - old) * elem);
	return err;
}
