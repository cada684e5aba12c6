/* nngsend.c: test client.  Sends raw bytes to a symbolizer as one request
 * and prints the reply, so the tests can feed it anything.
 *
 *   nngsend ADDR FILE        send FILE's bytes ("-": stdin)
 *   nngsend --hello FILE     write a valid hello message to FILE
 */
#include "wire.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <nng/nng.h>
#include <nng/protocol/reqrep0/req.h>

static int dump_hello(const char *path)
{
	struct fp_hello h = { .fh_session = 42, .fh_host = "nngsend", .fh_boot_id = "b",
			      .fh_kernel_release = "r", .fh_agent_version = "t", .fh_frequency = 99,
			      .fh_ncpus = 1 };
	size_t len;
	char *buf;
	FILE *f;

	if (fp_wire_encode_hello(&h, &buf, &len) || !(f = fopen(path, "wb")))
		return 1;
	fwrite(buf, 1, len, f);
	fclose(f);
	free(buf);
	return 0;
}

int main(int argc, char **argv)
{
	size_t len = 0, cap = 1 << 16, n;
	char *buf = malloc(cap), *rbuf;
	struct fp_reply r;
	nng_socket s;
	size_t rlen;
	FILE *f;

	if (argc == 3 && !strcmp(argv[1], "--hello"))
		return dump_hello(argv[2]);
	if (argc != 3) {
		fprintf(stderr, "usage: nngsend ADDR FILE | nngsend --hello FILE\n");
		return 2;
	}
	f = strcmp(argv[2], "-") ? fopen(argv[2], "rb") : stdin;
	if (!f || !buf)
		return 2;
	while ((n = fread(buf + len, 1, cap - len, f)) > 0) {
		len += n;
		if (len == cap && !(buf = realloc(buf, cap *= 2)))
			return 2;
	}
	if (nng_req0_open(&s) || nng_dial(s, argv[1], NULL, 0)) {
		printf("cannot connect\n");
		return 1;
	}
	nng_socket_set_ms(s, NNG_OPT_RECVTIMEO, 5000);
	if (nng_send(s, buf, len, 0) || nng_recv(s, &rbuf, &rlen, NNG_FLAG_ALLOC)) {
		printf("no reply\n");
		return 1;
	}
	if (fp_wire_decode_reply(rbuf, rlen, &r)) {
		printf("bad reply\n");
		return 1;
	}
	printf("status %d%s%s\n", r.fr_status, r.fr_error ? ": " : "", r.fr_error ? r.fr_error : "");
	fp_reply_fini(&r);
	nng_free(rbuf, rlen);
	nng_close(s);
	free(buf);
	return 0;
}
