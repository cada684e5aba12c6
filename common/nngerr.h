/* nngerr.h: nng's error codes as the negative errno values our functions
 * return.  Stateless; any thread. */
#ifndef FP_NNGERR_H
#define FP_NNGERR_H

/* fp_nng_errno: the negative errno for the nng error rv (non-zero):
 * -ENOMEM, -EAGAIN (NNG_EAGAIN, and NNG_ESTATE: a receive before any
 * send), -ETIMEDOUT, -EINVAL (NNG_EINVAL, NNG_EADDRINVAL),
 * -ECONNREFUSED, -EADDRINUSE, -EACCES (NNG_EPERM), -EPIPE (NNG_ECLOSED),
 * and -EIO for every other code. */
int fp_nng_errno(int rv);

#endif
