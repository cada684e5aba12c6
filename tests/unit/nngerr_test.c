/* nngerr_test.c: the nng-to-errno map, code by code. */
#include "check.h"
#include "nngerr.h"

#include <errno.h>
#include <nng/nng.h>

static void test_map(void)
{
	static const struct {
		int nng, err;
	} cases[] = {
		{ NNG_ENOMEM, -ENOMEM },
		{ NNG_EAGAIN, -EAGAIN },
		{ NNG_ESTATE, -EAGAIN },
		{ NNG_ETIMEDOUT, -ETIMEDOUT },
		{ NNG_EINVAL, -EINVAL },
		{ NNG_EADDRINVAL, -EINVAL },
		{ NNG_ECONNREFUSED, -ECONNREFUSED },
		{ NNG_EADDRINUSE, -EADDRINUSE },
		{ NNG_EPERM, -EACCES },
		{ NNG_ECLOSED, -EPIPE },
		{ NNG_ECONNRESET, -ECONNRESET },
		{ NNG_EPROTO, -EIO },
		{ NNG_ECRYPTO, -EIO },
		{ 9999, -EIO },
	};

	for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++)
		CHECK_EQ_INT(fp_nng_errno(cases[i].nng), cases[i].err);
}

int main(void)
{
	RUN(test_map);
	return CHECK_DONE();
}
