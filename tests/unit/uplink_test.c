/* uplink_test.c: the agent's uplink (device/uplink.c) against a real nng
 * REP socket over ipc://: a reply as large as the protocol allows (four
 * 1 MiB unwind table parts) arrives whole, and one over
 * FP_WIRE_MAX_MESSAGE is never read (the connection is reset, and the
 * next request goes through).  The first failed before: replies
 * over 1 MiB were dropped, so a host with large tables got none. */
#include "check.h"
#include "uplink.h"
#include "wire.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>
#include <sys/wait.h>
#include <nng/nng.h>
#include <nng/protocol/reqrep0/rep.h>

static char addr[256];

static void sleep_ms(long ms)
{
	struct timespec ts = { ms / 1000, (ms % 1000) * 1000000 };

	nanosleep(&ts, NULL);
}

/* exchange: send a request through u, answer it from rep with the bytes
 * of reply, then poll u for up to wait_ms.  What fp_uplink_poll said. */
static int exchange(nng_socket rep, struct fp_uplink *u, const void *reply, size_t len,
		    long wait_ms, struct fp_reply *got)
{
	nng_msg *m;
	int err;

	/* as the agent does: no connection yet, try again */
	for (long t = 0; (err = fp_uplink_send(u, "hello", 5)) == -ETIMEDOUT && t < 5000; t += 10)
		sleep_ms(10);
	if (err || nng_recvmsg(rep, &m, 0))
		return -EIO;
	CHECK_EQ_INT(nng_msg_len(m), 5);
	nng_msg_clear(m);
	if (nng_msg_append(m, reply, len) || nng_sendmsg(rep, m, 0)) {
		nng_msg_free(m);
		return -EIO;
	}
	for (long t = 0; (err = fp_uplink_poll(u, got)) == -EAGAIN && t < wait_ms; t += 10)
		sleep_ms(10);
	return err;
}

static int rep_open(nng_socket *rep)
{
	if (nng_rep0_open(rep))
		return -1;
	nng_socket_set_ms(*rep, NNG_OPT_RECVTIMEO, 5000);
	nng_socket_set_ms(*rep, NNG_OPT_SENDTIMEO, 5000);
	if (nng_listen(*rep, addr, NULL, 0)) {
		nng_close(*rep);
		return -1;
	}
	return 0;
}

static void full_reply_of_tables_arrives(void)
{
	struct fp_table_part parts[FP_TABLE_REPLY_MAX / FP_TABLE_PART_MAX];
	struct fp_reply r = { .fr_status = FP_REPLY_OK, .fr_seq = 7 }, got = { 0 };
	struct fp_tls_opts tls = { 0 };
	struct fp_uplink *u = NULL;
	nng_socket rep;
	char *buf = NULL;
	size_t len = 0, i;

	for (i = 0; i < sizeof(parts) / sizeof(parts[0]); i++) {
		parts[i] = (struct fp_table_part){ .tp_build_id = { .fb_len = 20 },
						   .tp_offset = (uint32_t)i * FP_TABLE_PART_MAX,
						   .tp_total = FP_TABLE_REPLY_MAX,
						   .tp_len = FP_TABLE_PART_MAX };
		memset(parts[i].tp_build_id.fb_data, 0xab, 20);
		parts[i].tp_data = malloc(FP_TABLE_PART_MAX);
		if (parts[i].tp_data)
			memset(parts[i].tp_data, (int)('a' + i), FP_TABLE_PART_MAX);
	}
	r.fr_tables = parts;
	r.fr_ntables = i;
	CHECK_EQ_INT(fp_wire_encode_reply(&r, &buf, &len), 0);
	CHECK(len > FP_TABLE_REPLY_MAX);
	CHECK(len <= FP_WIRE_MAX_MESSAGE);
	if (!buf || rep_open(&rep)) {
		CHECK(!"set-up");
		goto out;
	}
	CHECK_EQ_INT(fp_uplink_open(&u, addr, &tls), 0);
	CHECK_EQ_INT(exchange(rep, u, buf, len, 5000, &got), 0);
	CHECK_EQ_INT(got.fr_seq, 7);
	CHECK_EQ_INT(got.fr_ntables, sizeof(parts) / sizeof(parts[0]));
	for (i = 0; i < got.fr_ntables; i++) {
		CHECK_EQ_INT(got.fr_tables[i].tp_offset, parts[i].tp_offset);
		CHECK_EQ_INT(got.fr_tables[i].tp_len, FP_TABLE_PART_MAX);
		CHECK(!memcmp(got.fr_tables[i].tp_data, parts[i].tp_data, FP_TABLE_PART_MAX));
	}
	fp_reply_fini(&got);
	fp_uplink_close(u);
	nng_close(rep);
out:
	free(buf);
	for (i = 0; i < sizeof(parts) / sizeof(parts[0]); i++)
		free(parts[i].tp_data);
}

/* serve: the REP end in a process of its own, as the symbolizer is (in
 * one process, nng 1.5.2's single reaper can wait on the REP pipe's send
 * to a REQ pipe it has yet to close itself, and closing hangs): the
 * first request is answered with FP_WIRE_MAX_MESSAGE + 1 bytes, the
 * second with the len bytes of small.  Exits 0 when both were answered. */
static void __attribute__((noreturn)) serve(const void *small, size_t len)
{
	size_t big = FP_WIRE_MAX_MESSAGE + 1;
	char *huge = calloc(1, big);
	nng_socket rep;
	nng_msg *m;
	int i;

	alarm(30);
	if (!huge || rep_open(&rep))
		_exit(1);
	for (i = 0; i < 2; i++) {
		if (nng_recvmsg(rep, &m, 0))
			_exit(2);
		nng_msg_clear(m);
		if (nng_msg_append(m, i ? small : huge, i ? len : big) || nng_sendmsg(rep, m, 0))
			_exit(3);
	}
	sleep_ms(500); /* the last reply on its way */
	_exit(0);
}

/* poll_reply: send a request through u and poll for up to wait_ms. */
static int poll_reply(struct fp_uplink *u, long wait_ms, struct fp_reply *got)
{
	int err;

	for (long t = 0; (err = fp_uplink_send(u, "hello", 5)) == -ETIMEDOUT && t < 5000; t += 10)
		sleep_ms(10);
	if (err)
		return err;
	for (long t = 0; (err = fp_uplink_poll(u, got)) == -EAGAIN && t < wait_ms; t += 10)
		sleep_ms(10);
	return err;
}

/* Run first: the server is forked before this process starts nng. */
static void reply_over_the_largest_message_is_not_read(void)
{
	struct fp_reply r = { .fr_status = FP_REPLY_OK, .fr_seq = 8 }, got = { 0 };
	struct fp_tls_opts tls = { 0 };
	struct fp_uplink *u = NULL;
	size_t len = 0;
	char *buf = NULL;
	int status = -1;
	pid_t pid;

	CHECK_EQ_INT(fp_wire_encode_reply(&r, &buf, &len), 0);
	if (!buf || (pid = fork()) < 0) {
		CHECK(!"set-up");
		free(buf);
		return;
	}
	if (pid == 0)
		serve(buf, len);
	CHECK_EQ_INT(fp_uplink_open(&u, addr, &tls), 0);
	if (u) {
		CHECK_EQ_INT(poll_reply(u, 5000, &got), -ECONNRESET);
		/* ... and the connection comes back for the next request. */
		CHECK_EQ_INT(poll_reply(u, 5000, &got), 0);
		CHECK_EQ_INT(got.fr_seq, 8);
		fp_reply_fini(&got);
	}
	CHECK_EQ_INT(waitpid(pid, &status, 0), pid);
	CHECK(WIFEXITED(status) && WEXITSTATUS(status) == 0);
	fp_uplink_close(u);
	free(buf);
}

int main(void)
{
	const char *tmp = getenv("TMPDIR");

	snprintf(addr, sizeof(addr), "ipc://%s/fleetprof-uplink-test-%d.ipc", tmp ? tmp : "/tmp",
		 (int)getpid());
	RUN(reply_over_the_largest_message_is_not_read);
	RUN(full_reply_of_tables_arrives);
	unlink(addr + strlen("ipc://"));
	return CHECK_DONE();
}
