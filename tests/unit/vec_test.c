/* vec_test.c: fp_vec_reserve and fp_vec_reserve_zeroed. */
#include "check.h"
#include "vec.h"

#include <errno.h>
#include <stdint.h>
#include <stdlib.h>

static void test_grows_to_need(void)
{
	uint32_t *v = NULL;
	size_t cap = 0;

	CHECK_EQ_INT(fp_vec_reserve(&v, &cap, 1, sizeof(*v)), 0);
	CHECK(v != NULL);
	CHECK(cap >= 1);
	for (size_t i = 0; i < 1000; i++) {
		CHECK_EQ_INT(fp_vec_reserve(&v, &cap, i + 1, sizeof(*v)), 0);
		CHECK(cap >= i + 1);
		v[i] = (uint32_t)i;
	}
	for (size_t i = 0; i < 1000; i++)
		CHECK_EQ_INT(v[i], i);
	free(v);
}

static void test_enough_room_is_untouched(void)
{
	char *v = NULL;
	size_t cap = 0;

	CHECK_EQ_INT(fp_vec_reserve(&v, &cap, 100, 1), 0);
	char *was = v;
	size_t cap_was = cap;
	CHECK_EQ_INT(fp_vec_reserve(&v, &cap, cap_was, 1), 0);
	CHECK(v == was);
	CHECK_EQ_INT(cap, cap_was);
	free(v);
}

static void test_overflow_refused(void)
{
	uint64_t *v = NULL, *was;
	size_t cap = 0;

	CHECK_EQ_INT(fp_vec_reserve(&v, &cap, 4, sizeof(*v)), 0);
	was = v;
	size_t cap_was = cap;
	/* need * elem wraps around: refused, the array unchanged */
	CHECK_EQ_INT(fp_vec_reserve(&v, &cap, SIZE_MAX / 4, sizeof(*v)), -ENOMEM);
	CHECK_EQ_INT(fp_vec_reserve(&v, &cap, SIZE_MAX / sizeof(*v) + 1, sizeof(*v)), -ENOMEM);
	CHECK(v == was);
	CHECK_EQ_INT(cap, cap_was);
	free(v);
}

static void test_zeroed(void)
{
	uint8_t *v = NULL;
	size_t cap = 0, old;

	CHECK_EQ_INT(fp_vec_reserve_zeroed(&v, &cap, 10, 1), 0);
	for (size_t i = 0; i < cap; i++)
		CHECK_EQ_INT(v[i], 0);
	for (size_t i = 0; i < cap; i++)
		v[i] = 0xff;
	old = cap;
	CHECK_EQ_INT(fp_vec_reserve_zeroed(&v, &cap, old + 1, 1), 0);
	CHECK(cap > old);
	for (size_t i = 0; i < old; i++)
		CHECK_EQ_INT(v[i], 0xff);
	for (size_t i = old; i < cap; i++)
		CHECK_EQ_INT(v[i], 0);
	free(v);
}

int main(void)
{
	RUN(test_grows_to_need);
	RUN(test_enough_room_is_untouched);
	RUN(test_overflow_refused);
	RUN(test_zeroed);
	return CHECK_DONE();
}
