/* fuzz_server.c: libFuzzer target for the symbolizer's whole request path
 * (envelope, decoders, session checks, resolution, profile building) on
 * arbitrary bytes.  A session 42 exists before every input, so batches and
 * kallsyms parts of that session get past the session look-up. */
#include "server.h"
#include "wire.h"

#include <stdint.h>
#include <stdlib.h>
#include <string.h>

static struct fp_resolver *res;
static struct fp_server *srv;

static void hello(uint64_t session)
{
	struct fp_hello h = { .fh_session = session,
			      .fh_host = "fuzz",
			      .fh_boot_id = "b",
			      .fh_kernel_release = "r",
			      .fh_agent_version = "v",
			      .fh_kernel_build_id = { .fb_len = 20 },
			      .fh_frequency = 99 };
	char *buf, *reply;
	size_t len, rlen;

	if (fp_wire_encode_hello(&h, &buf, &len))
		abort();
	if (fp_server_handle(srv, NULL, buf, len, &reply, &rlen) == 0)
		free(reply);
	free(buf);
}

int LLVMFuzzerInitialize(int *argc, char ***argv)
{
	static char dir[] = "/tmp/fp-fuzz-server.XXXXXX";
	struct fp_resolver_opts ro = { .ro_cache_dir = dir };

	if (!mkdtemp(dir) || fp_resolver_open(&res, &ro) || fp_server_alloc(&srv, res, NULL, dir))
		abort();
	hello(42);
	return 0;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	char *reply = NULL;
	size_t rlen = 0;
	struct fp_reply r;

	if (fp_server_handle(srv, NULL, data, size, &reply, &rlen) == 0) {
		/* Every request gets a reply a client can decode. */
		if (fp_wire_decode_reply(reply, rlen, &r) != 0)
			abort();
		fp_reply_fini(&r);
		free(reply);
	}
	return 0;
}
