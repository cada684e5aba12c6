/* vec.h: growing the plain arrays (pointer, capacity, count) that every
 * module keeps.  One function makes room and does the one overflow check;
 * the caller owns the array and its count, and serialises the calls. */
#ifndef FP_VEC_H
#define FP_VEC_H

#include <stddef.h>

/* fp_vec_grow: make room for need elements of size elem in the array
 * *arrp (a pointer to the caller's pointer), which has room for *cap.  The
 * capacity doubles from 16 until need fits.  0, or -ENOMEM when
 * need * elem does not fit in a size_t or realloc fails; then *arrp and
 * *cap are unchanged.  elem must not be 0. */
int fp_vec_grow(void *arrp, size_t *cap, size_t need, size_t elem);

/* fp_vec_reserve: fp_vec_grow when need does not fit; inline, so that the
 * common case (room left) costs one comparison in the caller's loop. */
static inline int fp_vec_reserve(void *arrp, size_t *cap, size_t need, size_t elem)
{
	return need <= *cap ? 0 : fp_vec_grow(arrp, cap, need, elem);
}

/* fp_vec_reserve_zeroed: fp_vec_reserve, and the new room past the old
 * capacity is zero-filled. */
int fp_vec_reserve_zeroed(void *arrp, size_t *cap, size_t need, size_t elem);

#endif
