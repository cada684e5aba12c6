/* nngsend.c: test client.  Sends raw bytes to a symbolizer as one request
 * and prints the reply, so the tests can feed it anything.
 *
 *   nngsend ADDR FILE        send FILE's bytes ("-": stdin)
 *   nngsend --hello FILE [HOST [SESSION]]
 *                            write a valid hello message to FILE, of host
 *                            "nngsend" or HOST (any bytes), session 42 or
 *                            SESSION
 *   nngsend --batch SEQ FILE [SESSION PATH BUILDID]
 *                            write batch SEQ of the hello's session to FILE:
 *                            10 samples of one two-frame stack in a user
 *                            mapping (/nonexistent/app, build-ID feed01...
 *                            unless given, in hex); SEQ 1 defines them
 */
#include "wire.h"

#include <ctype.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <nng/nng.h>
#include <nng/protocol/reqrep0/req.h>

static int dump_hello(const char *path, const char *host, uint64_t session)
{
	struct fp_hello h = { .fh_session = session,
			      .fh_host = "nngsend",
			      .fh_boot_id = "b",
			      .fh_kernel_release = "r",
			      .fh_agent_version = "t",
			      .fh_frequency = 99,
			      .fh_ncpus = 1 };
	size_t len;
	char *buf;
	FILE *f;

	if (host)
		h.fh_host = (char *)host;
	if (fp_wire_encode_hello(&h, &buf, &len) || !(f = fopen(path, "wb")))
		return 1;
	fwrite(buf, 1, len, f);
	fclose(f);
	free(buf);
	return 0;
}

/* parse_id: hex into id; 0 or -1. */
static int parse_id(const char *hex, struct fp_build_id *id)
{
	size_t n = strlen(hex) / 2;

	if (strlen(hex) % 2 || n == 0 || n > FP_BUILD_ID_MAX)
		return -1;
	for (size_t i = 0; i < n; i++) {
		unsigned v;
		if (!isxdigit((unsigned char)hex[2 * i]) || sscanf(hex + 2 * i, "%2x", &v) != 1)
			return -1;
		id->fb_data[i] = (uint8_t)v;
	}
	id->fb_len = (uint8_t)n;
	return 0;
}

static int dump_batch(const char *seq_arg, const char *path, uint64_t session, const char *map_path,
		      const struct fp_build_id *id)
{
	struct fp_node nodes[2] = { { 20, FP_NODE_NONE, { 7, 0x1004 } },
				    { 21, 20, { 7, 0x1010 } } };
	struct fp_mapping m = { .fm_id = 7,
				.fm_kind = FP_MAP_USER,
				.fm_build_id = *id,
				.fm_path = (char *)map_path };
	struct fp_thread t = { .ft_id = 3,
			       .ft_pid = 100,
			       .ft_tid = 101,
			       .ft_comm = "worker",
			       .ft_process = "app" };
	struct fp_count c = { 3, 21, 10 };
	uint64_t seq = strtoull(seq_arg, NULL, 10);
	struct fp_batch b = { .fb_session = session,
			      .fb_seq = seq,
			      .fb_start_ns = 1700000000000000000ull + seq * 1000000000ull,
			      .fb_end_ns = 1700000001000000000ull + seq * 1000000000ull,
			      .fb_period_ns = 10101010,
			      .fb_ncounts = 1,
			      .fb_counts = &c };
	size_t len;
	char *buf;
	FILE *f;

	if (seq == 1) {
		b.fb_nmappings = 1, b.fb_mappings = &m;
		b.fb_nthreads = 1, b.fb_threads = &t;
		b.fb_nnodes = 2, b.fb_nodes = nodes;
	}
	if (fp_wire_encode_batch(&b, &buf, &len) || !(f = fopen(path, "wb")))
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

	if (argc >= 3 && argc <= 5 && !strcmp(argv[1], "--hello"))
		return dump_hello(argv[2], argc >= 4 ? argv[3] : NULL,
				  argc == 5 ? strtoull(argv[4], NULL, 10) : 42);
	if (argc == 4 && !strcmp(argv[1], "--batch")) {
		struct fp_build_id id = { .fb_len = 20, .fb_data = { 0xfe, 0xed, 0x01 } };
		return dump_batch(argv[2], argv[3], 42, "/nonexistent/app", &id);
	}
	if (argc == 7 && !strcmp(argv[1], "--batch")) {
		struct fp_build_id id = { 0 };
		if (parse_id(argv[6], &id))
			return 2;
		return dump_batch(argv[2], argv[3], strtoull(argv[4], NULL, 10), argv[5], &id);
	}
	if (argc != 3) {
		fprintf(stderr,
			"usage: nngsend ADDR FILE | nngsend --hello FILE [HOST [SESSION]] | "
			"nngsend --batch SEQ FILE [SESSION PATH BUILDID]\n");
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
	printf("status %d%s%s\n", r.fr_status, r.fr_error ? ": " : "",
	       r.fr_error ? r.fr_error : "");
	fp_reply_fini(&r);
	nng_free(rbuf, rlen);
	nng_close(s);
	free(buf);
	return 0;
}
