/* nngerr.c: see nngerr.h. */
#include "nngerr.h"

#include <errno.h>
#include <nng/nng.h>

int fp_nng_errno(int rv)
{
	switch (rv) {
	case NNG_ENOMEM:
		return -ENOMEM;
	case NNG_EAGAIN:
		return -EAGAIN;
	case NNG_ESTATE:
		return -EAGAIN;
	case NNG_ETIMEDOUT:
		return -ETIMEDOUT;
	case NNG_EINVAL:
		return -EINVAL;
	case NNG_EADDRINVAL:
		return -EINVAL;
	case NNG_ECONNREFUSED:
		return -ECONNREFUSED;
	case NNG_EADDRINUSE:
		return -EADDRINUSE;
	case NNG_EPERM:
		return -EACCES;
	case NNG_ECLOSED:
		return -EPIPE;
	case NNG_ECONNRESET:
		return -ECONNRESET; /* e.g. a reply over the receive limit */
	default:
		return -EIO;
	}
}
