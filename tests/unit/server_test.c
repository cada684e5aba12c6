/* server_test.c: the symbolizer's request handling end to end, without a
 * socket: hello, kallsyms upload, batches, duplicates, stale references,
 * hostile messages, the session sequence surviving a restart, also a
 * restart from a symbolizer that kept it in the output tree, and the host
 * a connection proved (a client certificate's). */
#include "check.h"
#include "server.h"
#include "session.h"
#include "pyline.h"
#include "symcache.h"
#include "unwind_table.h"
#include "wire.h"

#include <dirent.h>
#include <errno.h>
#include <inttypes.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

static char tmpdir[64];
static char cache_dir[128], out_dir[128];
/* The host name the connection proved, as listen.c passes it; NULL: none. */
static const char *test_peer;

static struct fp_build_id kernel_id(void)
{
	struct fp_build_id id = { .fb_len = 20 };

	memset(id.fb_data, 0xab, 20);
	return id;
}

static struct fp_hello test_hello(uint64_t session)
{
	return (struct fp_hello){ .fh_session = session,
				  .fh_host = "switch-1",
				  .fh_boot_id = "boot",
				  .fh_kernel_release = "6.1.0",
				  .fh_kernel_build_id = kernel_id(),
				  .fh_agent_version = "test",
				  .fh_frequency = 99,
				  .fh_ncpus = 4 };
}

/* call: encode-free round trip through the server; returns the decoded reply. */
static int call(struct fp_server *s, const char *req, size_t len, struct fp_reply *r)
{
	char *buf;
	size_t blen;
	int err = fp_server_handle(s, test_peer, req, len, &buf, &blen);

	if (err)
		return err;
	err = fp_wire_decode_reply(buf, blen, r);
	free(buf);
	return err;
}

static int send_hello(struct fp_server *s, uint64_t session, struct fp_reply *r)
{
	struct fp_hello h = test_hello(session);
	char *buf;
	size_t len;
	int err;

	if ((err = fp_wire_encode_hello(&h, &buf, &len)))
		return err;
	err = call(s, buf, len, r);
	free(buf);
	return err;
}

static int send_ksyms(struct fp_server *s, uint64_t session, uint32_t part, int last,
		      struct fp_ksym *syms, size_t n, struct fp_reply *r)
{
	struct fp_ksyms k = { .fs_session = session,
			      .fs_kind = FP_MAP_KERNEL,
			      .fs_build_id = kernel_id(),
			      .fs_name = "vmlinux",
			      .fs_part = part,
			      .fs_last = (uint8_t)last,
			      .fs_nsyms = n,
			      .fs_syms = syms };
	char *buf;
	size_t len;
	int err;

	if ((err = fp_wire_encode_ksyms(&k, &buf, &len)))
		return err;
	err = call(s, buf, len, r);
	free(buf);
	return err;
}

/* A batch with one kernel mapping, one thread, and a stack of two kernel
 * frames (trie nodes 20 -> 21, leaf 21); defs=0 sends only the counts.
 * leaf names the node the count refers to. */
static int send_batch(struct fp_server *s, uint64_t session, uint64_t seq, int defs, uint32_t leaf,
		      uint32_t count, struct fp_reply *r)
{
	struct fp_node nodes[2] = { { 20, FP_NODE_NONE, { 7, 0x2004 } },
				    { 21, 20, { 7, 0x1010 } } };
	struct fp_mapping m = { .fm_id = 7,
				.fm_kind = FP_MAP_KERNEL,
				.fm_build_id = kernel_id(),
				.fm_path = "vmlinux" };
	struct fp_thread t = { .ft_id = 3,
			       .ft_pid = 100,
			       .ft_tid = 101,
			       .ft_comm = "worker",
			       .ft_process = "daemon",
			       .ft_container = "swss" };
	struct fp_count c = { 3, leaf, count };
	struct fp_batch b = { .fb_session = session,
			      .fb_seq = seq,
			      .fb_start_ns = 1700000000000000000ull + seq * 1000000000ull,
			      .fb_end_ns = 1700000001000000000ull + seq * 1000000000ull,
			      .fb_period_ns = 10101010,
			      .fb_ncounts = 1,
			      .fb_counts = &c };
	char *buf;
	size_t len;
	int err;

	if (defs) {
		b.fb_nmappings = 1, b.fb_mappings = &m;
		b.fb_nthreads = 1, b.fb_threads = &t;
		b.fb_nnodes = 2, b.fb_nodes = nodes;
	}
	if ((err = fp_wire_encode_batch(&b, &buf, &len)))
		return err;
	err = call(s, buf, len, r);
	free(buf);
	return err;
}

static int count_files(const char *dir, const char *suffix)
{
	struct dirent *e;
	int n = 0;
	DIR *d = opendir(dir);

	if (!d)
		return 0;
	while ((e = readdir(d)))
		if (strlen(e->d_name) > strlen(suffix) &&
		    !strcmp(e->d_name + strlen(e->d_name) - strlen(suffix), suffix))
			n++;
	closedir(d);
	return n;
}

static char *read_folded(void)
{
	char path[512], cmd[600];
	static char buf[4096];
	FILE *f;
	size_t n;

	snprintf(path, sizeof(path), "%s/switch-1", out_dir);
	snprintf(cmd, sizeof(cmd), "cat %s/*.folded 2>/dev/null", path);
	f = popen(cmd, "r");
	n = f ? fread(buf, 1, sizeof(buf) - 1, f) : 0;
	buf[n] = '\0';
	if (f)
		pclose(f);
	return buf;
}

static struct fp_resolver *open_resolver(void)
{
	struct fp_resolver_opts ro = { .ro_cache_dir = cache_dir };
	struct fp_resolver *r = NULL;

	fp_resolver_open(&r, &ro);
	return r;
}

static void test_full_conversation(void)
{
	struct fp_resolver *res = open_resolver();
	struct fp_server *s = NULL;
	struct fp_server_stats st;
	struct fp_reply r;
	struct fp_ksym part0[] = { { 0x1000, "ksys_write" } };
	struct fp_ksym part1[] = { { 0x2000, "do_syscall_64" }, { 0x3000, "other" } };
	char dir[256];

	CHECK(res != NULL);
	CHECK_EQ_INT(fp_server_alloc(&s, res, out_dir, tmpdir), 0);
	if (!res || !s)
		return;

	/* Hello: the server asks for the kernel's symbols, and says what it
	 * reads and promises beyond the first revision: the varint keys, a
	 * row at every function's start in the unwind tables it sends, the
	 * kernel's function starts to an agent that takes them, and no table
	 * an agent says it holds. */
	CHECK_EQ_INT(send_hello(s, 42, &r), 0);
	CHECK_EQ_INT(r.fr_status, FP_REPLY_OK);
	CHECK(r.fr_features == (FP_FEATURE_LEAVES | FP_FEATURE_NODES | FP_FEATURE_FUNCTION_ROWS |
				FP_FEATURE_KFUNCS | FP_FEATURE_HELD_TABLES));
	CHECK_EQ_INT(r.fr_nwant, 1);
	if (r.fr_nwant == 1) {
		struct fp_build_id k = kernel_id();
		CHECK(fp_build_id_eq(&r.fr_want[0], &k));
	}
	fp_reply_fini(&r);

	/* Kallsyms in two parts; out of order is refused. */
	CHECK_EQ_INT(send_ksyms(s, 42, 1, 1, part1, 2, &r), 0);
	CHECK_EQ_INT(r.fr_status, FP_REPLY_REJECTED);
	fp_reply_fini(&r);
	CHECK_EQ_INT(send_ksyms(s, 42, 0, 0, part0, 1, &r), 0);
	CHECK_EQ_INT(r.fr_status, FP_REPLY_OK);
	fp_reply_fini(&r);
	CHECK_EQ_INT(send_ksyms(s, 42, 1, 1, part1, 2, &r), 0);
	CHECK_EQ_INT(r.fr_status, FP_REPLY_OK);
	fp_reply_fini(&r);
	CHECK(fp_resolver_has(res, &(struct fp_build_id){ 0 }) == 0);
	{
		struct fp_build_id k = kernel_id();
		CHECK(fp_resolver_has(res, &k));
	}

	/* A batch: resolved, written, acknowledged. */
	CHECK_EQ_INT(send_batch(s, 42, 1, 1, 21, 5, &r), 0);
	CHECK_EQ_INT(r.fr_status, FP_REPLY_OK);
	CHECK_EQ_INT(r.fr_seq, 1);
	CHECK_EQ_INT(r.fr_nwant, 0);
	CHECK_EQ_INT(r.fr_kfuncs.kf_n, 0); /* its hello did not take them */
	fp_reply_fini(&r);
	CHECK(strstr(read_folded(), "daemon;do_syscall_64_[k];ksys_write_[k] 5\n") != NULL);

	/* Counts only, referring to the nodes defined before. */
	CHECK_EQ_INT(send_batch(s, 42, 2, 0, 21, 7, &r), 0);
	CHECK_EQ_INT(r.fr_status, FP_REPLY_OK);
	fp_reply_fini(&r);
	snprintf(dir, sizeof(dir), "%s/switch-1", out_dir);
	CHECK_EQ_INT(count_files(dir, ".folded"), 2);
	CHECK_EQ_INT(count_files(dir, ".pb.gz"), 2);

	/* The same interval again (a lost reply): acknowledged, not counted. */
	CHECK_EQ_INT(send_batch(s, 42, 2, 0, 21, 7, &r), 0);
	CHECK_EQ_INT(r.fr_status, FP_REPLY_OK);
	fp_reply_fini(&r);
	CHECK_EQ_INT(count_files(dir, ".folded"), 2);

	/* A caller's node as the leaf: the other stack of the trie. */
	CHECK_EQ_INT(send_batch(s, 42, 3, 0, 20, 2, &r), 0);
	CHECK_EQ_INT(r.fr_status, FP_REPLY_OK);
	fp_reply_fini(&r);
	CHECK(strstr(read_folded(), "daemon;do_syscall_64_[k] 2\n") != NULL);

	/* Nodes may not be defined again: that would change other stacks. */
	CHECK_EQ_INT(send_batch(s, 42, 4, 1, 21, 1, &r), 0);
	CHECK_EQ_INT(r.fr_status, FP_REPLY_REJECTED);
	fp_reply_fini(&r);

	/* A reference to a node never defined: the agent must start over. */
	CHECK_EQ_INT(send_batch(s, 42, 5, 0, 12345, 1, &r), 0);
	CHECK_EQ_INT(r.fr_status, FP_REPLY_NEED_HELLO);
	fp_reply_fini(&r);

	/* An unknown session. */
	CHECK_EQ_INT(send_batch(s, 777, 1, 1, 21, 1, &r), 0);
	CHECK_EQ_INT(r.fr_status, FP_REPLY_NEED_HELLO);
	fp_reply_fini(&r);

	fp_server_stats(s, &st);
	CHECK_EQ_INT(st.sv_hellos, 1);
	CHECK_EQ_INT(st.sv_batches, 3);
	CHECK_EQ_INT(st.sv_samples, 14);
	CHECK_EQ_INT(st.sv_duplicates, 1);
	CHECK_EQ_INT(st.sv_need_hello, 2);
	CHECK_EQ_INT(st.sv_ksyms, 2);
	CHECK_EQ_INT(st.sv_rejected_content, 2);
	fp_server_free(s);

	/* A new server process: the kernel table is cached, and the session's
	 * last interval is remembered, so a resend is still a duplicate. */
	CHECK_EQ_INT(fp_server_alloc(&s, res, out_dir, tmpdir), 0);
	CHECK_EQ_INT(send_hello(s, 42, &r), 0);
	CHECK_EQ_INT(r.fr_nwant, 0);
	fp_reply_fini(&r);
	CHECK_EQ_INT(send_batch(s, 42, 3, 1, 21, 7, &r), 0);
	CHECK_EQ_INT(r.fr_status, FP_REPLY_OK);
	fp_reply_fini(&r);
	CHECK_EQ_INT(count_files(dir, ".folded"), 3);
	fp_server_stats(s, &st);
	CHECK_EQ_INT(st.sv_duplicates, 1);
	fp_server_free(s);
	fp_resolver_close(res);
}

/* An older symbolizer kept the session's last interval in the output tree
 * (OUT/HOST/.session-SESSION): after an upgrade in place, an interval the
 * agent re-sends is still a duplicate, and the next one is written. */
static void test_upgrade(void)
{
	struct fp_resolver *res = open_resolver();
	struct fp_server *s = NULL;
	struct fp_server_stats st;
	struct fp_reply r;
	char out[192], state[192], dir[256], old[320], cmd[600];
	FILE *f;

	snprintf(out, sizeof(out), "%s/out-old", tmpdir);
	snprintf(state, sizeof(state), "%s/state-new", tmpdir);
	snprintf(dir, sizeof(dir), "%s/switch-1", out);
	snprintf(old, sizeof(old), "%s/.session-0000000000000063", dir);
	snprintf(cmd, sizeof(cmd), "mkdir -p %s", dir);
	CHECK_EQ_INT(system(cmd), 0);
	CHECK((f = fopen(old, "w")) != NULL);
	if (!f || !res)
		return;
	fputs("5\n", f);
	fclose(f);
	CHECK_EQ_INT(fp_server_alloc(&s, res, out, state), 0);
	CHECK(access(old, F_OK) < 0);
	CHECK_EQ_INT(send_hello(s, 99, &r), 0);
	fp_reply_fini(&r);
	CHECK_EQ_INT(send_batch(s, 99, 5, 1, 21, 2, &r), 0);
	CHECK_EQ_INT(r.fr_status, FP_REPLY_OK);
	fp_reply_fini(&r);
	fp_server_stats(s, &st);
	CHECK_EQ_INT(st.sv_duplicates, 1);
	CHECK_EQ_INT(count_files(dir, ".folded"), 0);
	CHECK_EQ_INT(send_batch(s, 99, 6, 1, 21, 2, &r), 0);
	CHECK_EQ_INT(r.fr_status, FP_REPLY_OK);
	CHECK_EQ_INT(r.fr_written, 6);
	fp_reply_fini(&r);
	fp_server_stats(s, &st);
	CHECK_EQ_INT(st.sv_duplicates, 1);
	CHECK_EQ_INT(count_files(dir, ".folded"), 1);
	fp_server_free(s);
	fp_resolver_close(res);
}

/* Each hostile message is rejected and counted under its own reason. */
static void test_hostile_messages(void)
{
	enum { MALFORMED, VERSION, TYPE, CONTENT, NREASONS };
	static const struct {
		const char *name;
		const char *bytes;
		size_t len;
		int reason;
	} cases[] = {
		{ "empty", "", 0, MALFORMED },
		{ "not msgpack", "\xc1\xc1\xc1", 3, MALFORMED },
		{ "not an array", "\x01", 1, MALFORMED },
		{ "huge array", "\x93\x01\x02\xdd\xff\xff\xff\xff", 8, MALFORMED },
		{ "wrong version", "\x93\x63\x01\x80", 4, VERSION },
		{ "unknown type", "\x93\x01\x4d\x80", 4, TYPE },
		{ "reply sent to server", "\x93\x01\x04\x80", 4, TYPE },
		{ "hello without fields", "\x93\x01\x01\x80", 4, CONTENT },
	};
	struct fp_resolver *res = open_resolver();
	struct fp_server *s = NULL;
	struct fp_server_stats st;
	uint64_t before[NREASONS] = { 0 }, after[NREASONS];
	size_t i;

	CHECK_EQ_INT(fp_server_alloc(&s, res, NULL, tmpdir), 0);
	for (i = 0; s && i < sizeof(cases) / sizeof(cases[0]); i++) {
		struct fp_reply r;
		if (call(s, cases[i].bytes, cases[i].len, &r)) {
			fprintf(stderr, "  case %s: no reply\n", cases[i].name);
			CHECK(0);
			continue;
		}
		if (r.fr_status != FP_REPLY_REJECTED || !r.fr_error)
			fprintf(stderr, "  case %s: status %d\n", cases[i].name, r.fr_status);
		CHECK_EQ_INT(r.fr_status, FP_REPLY_REJECTED);
		CHECK(r.fr_error && r.fr_error[0]);
		fp_reply_fini(&r);
		fp_server_stats(s, &st);
		after[MALFORMED] = st.sv_rejected_malformed;
		after[VERSION] = st.sv_rejected_version;
		after[TYPE] = st.sv_rejected_type;
		after[CONTENT] = st.sv_rejected_content;
		for (int k = 0; k < NREASONS; k++) {
			uint64_t want = before[k] + (k == cases[i].reason);

			if (after[k] != want)
				fprintf(stderr,
					"  case %s: reason %d counted %llu, expected %llu\n",
					cases[i].name, k, (unsigned long long)after[k],
					(unsigned long long)want);
			CHECK(after[k] == want);
			before[k] = after[k];
		}
	}
	fp_server_stats(s, &st);
	CHECK_EQ_INT(st.sv_rejected_malformed, 4);
	CHECK_EQ_INT(st.sv_rejected_version, 1);
	CHECK_EQ_INT(st.sv_rejected_type, 2);
	CHECK_EQ_INT(st.sv_rejected_content, 1);
	fp_server_free(s);
	fp_resolver_close(res);
}

/* A kernel no other test stores kallsyms of. */
static const struct fp_build_id admission_kernel = { .fb_len = 20, .fb_data = { 0xee, 0x01 } };

/* hello_from: a hello of session from host, running admission_kernel; its
 * reply's status, or -1. */
static int hello_from(struct fp_server *s, uint64_t session, const char *host)
{
	struct fp_hello h = test_hello(session);
	struct fp_reply r;
	size_t len;
	char *buf;
	int st = -1;

	h.fh_host = (char *)host;
	h.fh_kernel_build_id = admission_kernel;
	if (fp_wire_encode_hello(&h, &buf, &len))
		return -1;
	if (call(s, buf, len, &r) == 0) {
		st = r.fr_status;
		CHECK(st == FP_REPLY_OK || (r.fr_error && r.fr_error[0]));
		fp_reply_fini(&r);
	}
	free(buf);
	return st;
}

/* ksyms_from: kallsyms of build-ID id from session; the reply's status. */
static int ksyms_from(struct fp_server *s, uint64_t session, const struct fp_build_id *id)
{
	struct fp_ksym sym = { 0x10, "some_name" };
	struct fp_ksyms k = { .fs_session = session,
			      .fs_kind = FP_MAP_KERNEL,
			      .fs_build_id = *id,
			      .fs_name = "vmlinux",
			      .fs_last = 1,
			      .fs_nsyms = 1,
			      .fs_syms = &sym };
	struct fp_reply r;
	size_t len;
	char *buf;
	int st = -1;

	if (fp_wire_encode_ksyms(&k, &buf, &len))
		return -1;
	if (call(s, buf, len, &r) == 0) {
		st = r.fr_status;
		fp_reply_fini(&r);
	}
	free(buf);
	return st;
}

/* What the server admits: new sessions at a rate into free slots only
 * (a live one is never evicted), one host per session id, intervals not
 * from the future, kallsyms only as asked. */
static void test_admission(void)
{
	struct fp_server_limits lim = { .sl_max_sessions = 4, .sl_new_sessions_per_s = 3 };
	struct fp_resolver *res = open_resolver();
	struct fp_server_stats st;
	struct fp_server *s = NULL;
	const struct fp_build_id other = { .fb_len = 20, .fb_data = { 0xcd } };
	struct fp_reply r;
	int i;

	CHECK_EQ_INT(fp_server_alloc(&s, res, NULL, tmpdir), 0);
	if (!s)
		return;
	CHECK_EQ_INT(fp_server_set_limits(s, &(struct fp_server_limits){ 0, 1 }), -EINVAL);
	CHECK_EQ_INT(fp_server_set_limits(s, &(struct fp_server_limits){ 1, 0 }), -EINVAL);
	CHECK_EQ_INT(fp_server_set_limits(s, &lim), 0);
	/* Three new sessions at once, the fourth waits for the rate. */
	for (i = 0; i < 3; i++)
		CHECK_EQ_INT(hello_from(s, 100 + i, "switch-1"), FP_REPLY_OK);
	CHECK_EQ_INT(hello_from(s, 103, "switch-1"), FP_REPLY_REJECTED);
	/* A session held says hello again: no new session, always taken. */
	CHECK_EQ_INT(hello_from(s, 100, "switch-1"), FP_REPLY_OK);
	usleep(400 * 1000);
	CHECK_EQ_INT(hello_from(s, 103, "switch-1"), FP_REPLY_OK);
	/* Table full of live sessions: refused, none evicted. */
	usleep(700 * 1000);
	CHECK_EQ_INT(hello_from(s, 104, "switch-1"), FP_REPLY_REJECTED);
	for (i = 0; i < 4; i++) {
		CHECK_EQ_INT(send_batch(s, 100 + i, 1, 1, 21, 5, &r), 0);
		CHECK_EQ_INT(r.fr_status, FP_REPLY_OK);
		fp_reply_fini(&r);
	}
	/* Another host's session id. */
	CHECK_EQ_INT(hello_from(s, 101, "intruder"), FP_REPLY_REJECTED);
	/* An interval from tomorrow. */
	{
		struct fp_count c = { 3, 21, 1 };
		uint64_t t = ((uint64_t)time(NULL) + 86400) * 1000000000ull;
		struct fp_batch b = { .fb_session = 100,
				      .fb_seq = 2,
				      .fb_start_ns = t,
				      .fb_end_ns = t + 1,
				      .fb_ncounts = 1,
				      .fb_counts = &c };
		char *buf;
		size_t len;

		CHECK_EQ_INT(fp_wire_encode_batch(&b, &buf, &len), 0);
		CHECK_EQ_INT(call(s, buf, len, &r), 0);
		CHECK_EQ_INT(r.fr_status, FP_REPLY_REJECTED);
		fp_reply_fini(&r);
		free(buf);
	}
	/* Kallsyms: the kernel's were asked of each session at its hello;
	 * another build-ID's were asked of none. */
	CHECK_EQ_INT(ksyms_from(s, 100, &other), FP_REPLY_REJECTED);
	CHECK(!fp_resolver_has(res, &other));
	CHECK_EQ_INT(ksyms_from(s, 100, &admission_kernel), FP_REPLY_OK);
	CHECK(fp_resolver_has(res, &admission_kernel));
	/* Asked of 101 too, stored already: taken, not stored again. */
	CHECK_EQ_INT(ksyms_from(s, 101, &admission_kernel), FP_REPLY_OK);
	/* A session that said hello after it was stored was not asked. */
	CHECK_EQ_INT(hello_from(s, 100, "switch-1"), FP_REPLY_OK);
	CHECK_EQ_INT(ksyms_from(s, 100, &admission_kernel), FP_REPLY_REJECTED);
	fp_server_stats(s, &st);
	CHECK_EQ_INT(st.sv_rejected_unasked, 2);
	CHECK_EQ_INT(st.sv_ksyms, 1);
	CHECK_EQ_INT(st.sv_ksyms_dropped, 1);
	CHECK_EQ_INT(st.sv_rejected_new_sessions, 1);
	CHECK_EQ_INT(st.sv_rejected_sessions_full, 1);
	CHECK_EQ_INT(st.sv_rejected_content, 1);
	CHECK_EQ_INT(st.sv_rejected_clock, 1);
	CHECK_EQ_INT(st.sv_sessions, 4);
	CHECK_EQ_INT(st.sv_batches, 4);
	fp_server_free(s);
	fp_resolver_close(res);
}

/* ---- Python frames ------------------------------------------------------ */

/* Worker.run as CPython 3.11 compiles it (PROTOCOL.md's example): offset 6
 * is on line 5. */
static const uint8_t worker_run_table[] = { 0x80, 0x00, 0xd8, 0x0c, 0x0d, 0x88,
					    0x01, 0xd8, 0x0f, 0x10, 0x88, 0x08 };
/* A 3.9 co_lnotab: bytes 0-5 on line 870, 6-49 on 871, 50 on 876. */
static const uint8_t thread_run_lnotab[] = { 6, 1, 44, 5 };

/* A Python program's batch: python3 (no symbols) calls Worker.run, which
 * calls Thread.run, sampled at two instructions: one known (offset 50,
 * line 876), one the agent could not read (0x3fffffff: the first line).
 * Trie: 1 python3 -> 2 Worker.run@6 -> 3 Thread.run@50
 *                                   \-> 4 Thread.run@unknown */
static void python_batch(struct fp_batch *b, struct fp_mapping m[3], struct fp_pycode py[2],
			 struct fp_node nodes[4], struct fp_thread *t, struct fp_count c[3])
{
	memset(b, 0, sizeof(*b));
	m[0] = (struct fp_mapping){ .fm_id = 1,
				    .fm_kind = FP_MAP_USER,
				    .fm_path = "/opt/none/python3" };
	py[0] = (struct fp_pycode){ "Worker.run", 3, FP_PY_LOCATIONS, sizeof(worker_run_table),
				    (uint8_t *)worker_run_table };
	py[1] = (struct fp_pycode){ "Thread.run", 870, FP_PY_LNOTAB, sizeof(thread_run_lnotab),
				    (uint8_t *)thread_run_lnotab };
	m[1] = (struct fp_mapping){ .fm_id = 7,
				    .fm_kind = FP_MAP_PYTHON,
				    .fm_path = "/srv/app/w.py",
				    .fm_py = &py[0] };
	m[2] = (struct fp_mapping){ .fm_id = 8,
				    .fm_kind = FP_MAP_PYTHON,
				    .fm_path = "/usr/lib/python3.9/threading.py",
				    .fm_py = &py[1] };
	nodes[0] = (struct fp_node){ 1, FP_NODE_NONE, { 1, 0x1000 } };
	nodes[1] = (struct fp_node){ 2, 1, { 7, 6 } };
	nodes[2] = (struct fp_node){ 3, 2, { 8, 50 } };
	nodes[3] = (struct fp_node){ 4, 2, { 8, FP_PY_OFFSET_UNKNOWN } };
	*t = (struct fp_thread){ .ft_id = 3,
				 .ft_pid = 100,
				 .ft_tid = 100,
				 .ft_comm = "python3",
				 .ft_process = "python3",
				 .ft_container = "" };
	c[0] = (struct fp_count){ 3, 3, 4 };
	c[1] = (struct fp_count){ 3, 4, 2 };
	c[2] = (struct fp_count){ 3, 2, 1 };
	b->fb_session = 99;
	b->fb_seq = 1;
	b->fb_start_ns = 1700000000000000000ull;
	b->fb_end_ns = 1700000001000000000ull;
	b->fb_period_ns = 10101010;
	b->fb_nmappings = 3, b->fb_mappings = m;
	b->fb_nthreads = 1, b->fb_threads = t;
	b->fb_nnodes = 4, b->fb_nodes = nodes;
	b->fb_ncounts = 3, b->fb_counts = c;
}

/* The session turns Python nodes into Python frames: qualname, file, the
 * line of the offset (the first line when unknown), no mapping. */
static void test_python_session(void)
{
	struct fp_resolver *res = open_resolver();
	struct fp_hello h = test_hello(99);
	struct fp_session *se = NULL;
	struct fp_profile *p = NULL;
	struct fp_mapping m[3];
	struct fp_pycode py[2];
	struct fp_node nodes[4];
	struct fp_thread t;
	struct fp_count c[3];
	struct fp_batch b;
	int seen = 0;

	CHECK(res != NULL);
	CHECK_EQ_INT(fp_session_alloc(&se, &h), 0);
	if (!res || !se)
		goto out;
	python_batch(&b, m, py, nodes, &t, c);
	CHECK_EQ_INT(fp_session_apply(se, &b), 0);
	CHECK_EQ_INT(fp_session_profile(se, res, &b, &p), 0);
	if (!p)
		goto out;
	CHECK_EQ_INT(p->pr_nsamples, 3);
	/* Python code objects are no mappings of the profile. */
	CHECK_EQ_INT(p->pr_nmappings, 1);
	for (size_t i = 0; i < p->pr_nsamples; i++) {
		const struct fp_psample *sm = &p->pr_samples[i];
		const struct fp_pframe *leaf = &p->pr_frames[sm->ps_frames[0]];
		const struct fp_pframe *root = &p->pr_frames[sm->ps_frames[sm->ps_nframes - 1]];

		CHECK_EQ_INT(root->pf_kind, FP_FRAME_USER);
		CHECK_EQ_INT(root->pf_address, 0x1000);
		CHECK_EQ_INT(leaf->pf_kind, FP_FRAME_PYTHON);
		CHECK_EQ_INT(leaf->pf_mapping, FP_INDEX_NONE);
		if (sm->ps_count == 4 || sm->ps_count == 2) {
			const struct fp_pframe *caller = &p->pr_frames[sm->ps_frames[1]];

			CHECK_EQ_INT(sm->ps_nframes, 3);
			CHECK(!strcmp(leaf->pf_function, "Thread.run"));
			CHECK(!strcmp(leaf->pf_file, "/usr/lib/python3.9/threading.py"));
			CHECK_EQ_INT(leaf->pf_start_line, 870);
			CHECK_EQ_INT(leaf->pf_line, sm->ps_count == 4 ? 876 : 870);
			/* The caller is looked up at its own offset, not - 1. */
			CHECK(!strcmp(caller->pf_function, "Worker.run"));
			CHECK(!strcmp(caller->pf_file, "/srv/app/w.py"));
			CHECK_EQ_INT(caller->pf_line, 5);
			CHECK_EQ_INT(caller->pf_start_line, 3);
			seen |= sm->ps_count;
		} else {
			CHECK_EQ_INT(sm->ps_count, 1);
			CHECK_EQ_INT(sm->ps_nframes, 2);
			CHECK(!strcmp(leaf->pf_function, "Worker.run"));
			CHECK_EQ_INT(leaf->pf_line, 5);
			/* The same frame as the callers' Worker.run. */
			CHECK_EQ_INT(sm->ps_frames[0], p->pr_samples[i ? 0 : 1].ps_frames[1]);
			seen |= 1;
		}
	}
	CHECK_EQ_INT(seen, 7);
	fp_profile_free(p);
	p = NULL;

	/* A definition again replaces the code object: line 870 + 1 now. */
	py[1].pc_firstlineno = 900;
	struct fp_batch again = { .fb_session = 99,
				  .fb_seq = 2,
				  .fb_nmappings = 1,
				  .fb_mappings = &m[2],
				  .fb_ncounts = 1,
				  .fb_counts = &c[0] };
	CHECK_EQ_INT(fp_session_apply(se, &again), 0);
	CHECK_EQ_INT(fp_session_profile(se, res, &again, &p), 0);
	if (p && p->pr_nsamples == 1)
		CHECK_EQ_INT(p->pr_frames[p->pr_samples[0].ps_frames[0]].pf_line, 906);
	fp_profile_free(p);
	p = NULL;

	/* Python definitions are bounded per session: a batch that would go
	 * past FP_SESSION_MAX_PY_BYTES is refused whole. */
	size_t n = FP_SESSION_MAX_PY_BYTES / FP_PY_LINETABLE_MAX + 1;
	uint8_t *table = calloc(1, FP_PY_LINETABLE_MAX);
	struct fp_mapping *many = calloc(n, sizeof(*many));
	struct fp_pycode big = { "f", 1, FP_PY_LOCATIONS, FP_PY_LINETABLE_MAX, table };
	CHECK(table && many);
	if (table && many) {
		for (size_t i = 0; i < n; i++)
			many[i] = (struct fp_mapping){ .fm_id = 1000 + (uint32_t)i,
						       .fm_kind = FP_MAP_PYTHON,
						       .fm_path = "x.py",
						       .fm_py = &big };
		struct fp_batch huge = { .fb_session = 99,
					 .fb_seq = 3,
					 .fb_nmappings = n,
					 .fb_mappings = many };
		CHECK_EQ_INT(fp_session_apply(se, &huge), -E2BIG);
		/* Nothing of it was kept; the session goes on. */
		CHECK_EQ_INT(fp_session_apply(se, &again), 0);
		CHECK_EQ_INT(fp_session_profile(se, res, &again, &p), 0);
		if (p && p->pr_nsamples == 1)
			CHECK_EQ_INT(p->pr_frames[p->pr_samples[0].ps_frames[0]].pf_line, 906);
		fp_profile_free(p);
		p = NULL;
	}
	free(table);
	free(many);
out:
	fp_profile_free(p);
	fp_session_free(se);
	fp_resolver_close(res);
}

/* Over the wire to the written outputs: the folded lines name the Python
 * functions. */
static void test_python_conversation(void)
{
	struct fp_resolver *res = open_resolver();
	struct fp_server *s = NULL;
	struct fp_reply r;
	struct fp_mapping m[3];
	struct fp_pycode py[2];
	struct fp_node nodes[4];
	struct fp_thread t;
	struct fp_count c[3];
	struct fp_batch b;
	char *buf;
	size_t len;

	CHECK(res != NULL);
	CHECK_EQ_INT(fp_server_alloc(&s, res, out_dir, tmpdir), 0);
	if (!res || !s)
		goto out;
	CHECK_EQ_INT(send_hello(s, 99, &r), 0);
	fp_reply_fini(&r);
	python_batch(&b, m, py, nodes, &t, c);
	b.fb_seq = 10;
	CHECK_EQ_INT(fp_wire_encode_batch(&b, &buf, &len), 0);
	CHECK_EQ_INT(call(s, buf, len, &r), 0);
	free(buf);
	CHECK_EQ_INT(r.fr_status, FP_REPLY_OK);
	/* No kallsyms or tables for code objects. */
	for (size_t i = 0; i < r.fr_nwant; i++)
		CHECK(r.fr_want[i].fb_len != 0);
	CHECK_EQ_INT(r.fr_ntables, 0);
	fp_reply_fini(&r);
	const char *folded = read_folded();
	CHECK(strstr(folded, "python3;python3+0x1000;Worker.run_[py];Thread.run_[py] 6\n") != NULL);
	CHECK(strstr(folded, "python3;python3+0x1000;Worker.run_[py] 1\n") != NULL);
out:
	fp_server_free(s);
	fp_resolver_close(res);
}

/* A sink that holds the pipeline thread until released, so that profiles
 * pile up in the queue as when the sinks are behind. */
struct held_sink {
	pthread_mutex_t hs_lock;
	pthread_cond_t hs_cond;
	int hs_released;
	unsigned hs_profiles;
};

static int held_sink(void *arg, const struct fp_profile *p, const struct fp_hello *hello,
		     uint64_t seq)
{
	struct held_sink *h = arg;

	pthread_mutex_lock(&h->hs_lock);
	while (!h->hs_released)
		pthread_cond_wait(&h->hs_cond, &h->hs_lock);
	h->hs_profiles++;
	pthread_mutex_unlock(&h->hs_lock);
	return 0;
}

/* release_and_drain: let the held sink go, and wait (at most 5 s) until
 * the pipeline's queue is empty; st is the server's stats then. */
static void release_and_drain(struct fp_server *s, struct held_sink *h, struct fp_server_stats *st)
{
	pthread_mutex_lock(&h->hs_lock);
	h->hs_released = 1;
	pthread_cond_broadcast(&h->hs_cond);
	pthread_mutex_unlock(&h->hs_lock);
	for (int i = 0; i < 500; i++) {
		fp_server_stats(s, st);
		if (st->sv_pipeline_queue == 0)
			break;
		usleep(10000);
	}
}

/* Busy: with FP_PIPELINE_BUSY profiles waiting for the sinks, a batch is
 * answered OK with seq 0 and nothing of it is applied; sent again once
 * the sinks caught up, it is taken, and every interval reaches the sinks
 * once. */
static void test_busy(void)
{
	struct held_sink h = { PTHREAD_MUTEX_INITIALIZER, PTHREAD_COND_INITIALIZER, 0, 0 };
	struct fp_resolver *res = open_resolver();
	struct fp_server_stats st;
	struct fp_server *s = NULL;
	char state[] = "/dev/shm/fp-server-busy.XXXXXX";
	struct fp_reply r;
	uint64_t seq, taken = 0;

	/* On tmpfs, not under $TMPDIR (check_tmpdir): the pipeline syncs
	 * each session's sequence file, 3,841 times here. */
	CHECK(mkdtemp(state) != NULL);
	CHECK_EQ_INT(fp_server_alloc(&s, res, NULL, state), 0);
	if (!s)
		return;
	CHECK_EQ_INT(fp_server_add_sink(s, held_sink, &h), 0);
	CHECK_EQ_INT(fp_server_start(s, 0), 0);
	CHECK_EQ_INT(send_hello(s, 0xb5, &r), 0);
	fp_reply_fini(&r);
	/* The thread holds the first profile in the sink; FP_PIPELINE_BUSY
	 * are then counted, and the next batch finds the pipeline busy. */
	for (seq = 1; seq <= FP_PIPELINE_BUSY + 1; seq++) {
		if (send_batch(s, 0xb5, seq, seq == 1, 21, 1, &r))
			break;
		taken += r.fr_status == FP_REPLY_OK && r.fr_seq == seq;
		fp_reply_fini(&r);
	}
	CHECK_EQ_INT(taken, FP_PIPELINE_BUSY);
	fp_server_stats(s, &st);
	CHECK_EQ_INT(st.sv_pipeline_busy, 1);
	CHECK_EQ_INT(st.sv_batches, FP_PIPELINE_BUSY);
	/* Again: still busy, still not applied. */
	CHECK_EQ_INT(send_batch(s, 0xb5, FP_PIPELINE_BUSY + 1, 0, 21, 1, &r), 0);
	CHECK(r.fr_status == FP_REPLY_OK && r.fr_seq == 0);
	fp_reply_fini(&r);
	fp_server_stats(s, &st);
	CHECK_EQ_INT(st.sv_pipeline_busy, 2);
	CHECK_EQ_INT(st.sv_batches, FP_PIPELINE_BUSY);
	/* The sinks catch up: the batch is taken. */
	release_and_drain(s, &h, &st);
	CHECK_EQ_INT(send_batch(s, 0xb5, FP_PIPELINE_BUSY + 1, 0, 21, 1, &r), 0);
	CHECK(r.fr_status == FP_REPLY_OK && r.fr_seq == FP_PIPELINE_BUSY + 1);
	fp_reply_fini(&r);
	fp_server_free(s); /* the pipeline drains first */
	CHECK_EQ_INT(h.hs_profiles, FP_PIPELINE_BUSY + 1);
	fp_resolver_close(res);
	CHECK_EQ_INT(check_rmtree(state), 0);
}

/* Busy by bytes: with --max-queued-mb 1, batches are taken while the
 * profiles queued hold less than 1 MiB; the one that finds them holding
 * it or more is answered busy and not applied.  Once the sinks caught
 * up, the queued bytes are 0 again (what each profile added was taken
 * off), the batch sent again is taken, and sent a third time is a
 * duplicate: it reaches the sinks once. */
static void test_busy_bytes(void)
{
	struct held_sink h = { PTHREAD_MUTEX_INITIALIZER, PTHREAD_COND_INITIALIZER, 0, 0 };
	struct fp_server_limits lim = { FP_SERVER_MAX_SESSIONS, FP_SERVER_NEW_SESSIONS_DEFAULT, 0,
					1 };
	struct fp_resolver *res = open_resolver();
	struct fp_server_stats st;
	struct fp_server *s = NULL;
	char state[] = "/dev/shm/fp-server-busy-bytes.XXXXXX", cmd[64];
	uint64_t seq, before = 0, busy_seq = 0;
	struct fp_reply r;
	int taken_past = 0;

	CHECK(mkdtemp(state) != NULL);
	CHECK_EQ_INT(fp_server_alloc(&s, res, NULL, state), 0);
	if (!s)
		return;
	CHECK_EQ_INT(fp_server_add_sink(s, held_sink, &h), 0);
	CHECK_EQ_INT(fp_server_set_limits(s, &lim), 0);
	lim.sl_max_queued_mb = (uint32_t)(FP_PIPELINE_BUSY_BYTES_MAX >> 20) + 1;
	CHECK_EQ_INT(fp_server_set_limits(s, &lim), -EINVAL);
	CHECK_EQ_INT(fp_server_start(s, 0), 0);
	CHECK_EQ_INT(send_hello(s, 0xb6, &r), 0);
	fp_reply_fini(&r);
	for (seq = 1; seq < FP_PIPELINE_BUSY && !busy_seq; seq++) {
		if (send_batch(s, 0xb6, seq, seq == 1, 21, 1, &r))
			break;
		fp_server_stats(s, &st);
		if (r.fr_status == FP_REPLY_OK && r.fr_seq == 0)
			busy_seq = seq;
		else if (before >= 1 << 20)
			taken_past++; /* taken with 1 MiB queued */
		if (!busy_seq && st.sv_pipeline_bytes <= before)
			break; /* taken, yet nothing was added */
		if (!busy_seq)
			before = st.sv_pipeline_bytes;
		fp_reply_fini(&r);
	}
	fp_reply_fini(&r);
	fprintf(stderr, "  busy at batch %" PRIu64 ", %" PRIu64 " bytes queued\n", busy_seq,
		before);
	CHECK(busy_seq > 2);
	CHECK_EQ_INT(taken_past, 0);
	CHECK(before >= 1 << 20);
	fp_server_stats(s, &st);
	CHECK_EQ_INT(st.sv_pipeline_busy, 1);
	CHECK_EQ_INT(st.sv_batches, busy_seq - 1);
	CHECK_EQ_INT(st.sv_pipeline_queue, busy_seq - 1);
	CHECK_EQ_INT(st.sv_pipeline_bytes, before);
	release_and_drain(s, &h, &st);
	CHECK_EQ_INT(st.sv_pipeline_bytes, 0);
	CHECK_EQ_INT(send_batch(s, 0xb6, busy_seq, 0, 21, 1, &r), 0);
	CHECK(r.fr_status == FP_REPLY_OK && r.fr_seq == busy_seq);
	fp_reply_fini(&r);
	CHECK_EQ_INT(send_batch(s, 0xb6, busy_seq, 0, 21, 1, &r), 0);
	CHECK(r.fr_status == FP_REPLY_OK && r.fr_seq == busy_seq);
	fp_reply_fini(&r);
	fp_server_stats(s, &st);
	CHECK_EQ_INT(st.sv_duplicates, 1);
	fp_server_free(s);
	CHECK_EQ_INT(h.hs_profiles, busy_seq);
	fp_resolver_close(res);
	snprintf(cmd, sizeof(cmd), "rm -rf %s", state);
	CHECK_EQ_INT(system(cmd), 0);
}

/* expect_refused: r is a REJECTED reply whose reason has why in it. */
static void expect_refused(struct fp_reply *r, const char *why)
{
	CHECK_EQ_INT(r->fr_status, FP_REPLY_REJECTED);
	CHECK(r->fr_error && strstr(r->fr_error, why));
	if (r->fr_error && !strstr(r->fr_error, why))
		fprintf(stderr, "  reason: %s\n", r->fr_error);
	fp_reply_fini(r);
}

/* A connection that proved host switch-2 may neither say hello as
 * switch-1 nor use switch-1's session; one that proved no host may say
 * no hello at all; switch-1's own connection is served. */
static void test_identity(void)
{
	struct fp_resolver *res = open_resolver();
	struct fp_ksym sym = { 0x1000, (char *)"start_kernel" };
	struct fp_server_stats st;
	struct fp_server *s = NULL;
	struct fp_reply r;

	CHECK_EQ_INT(fp_server_alloc(&s, res, NULL, tmpdir), 0);
	if (!s)
		return;
	test_peer = "switch-1";
	CHECK_EQ_INT(send_hello(s, 500, &r), 0);
	CHECK_EQ_INT(r.fr_status, FP_REPLY_OK);
	fp_reply_fini(&r);
	test_peer = "switch-2";
	CHECK_EQ_INT(send_hello(s, 501, &r), 0);
	expect_refused(&r, "host switch-1 is not switch-2, the client certificate's");
	CHECK_EQ_INT(send_batch(s, 500, 1, 1, 21, 5, &r), 0);
	expect_refused(&r, "session of another host");
	CHECK_EQ_INT(send_ksyms(s, 500, 0, 1, &sym, 1, &r), 0);
	expect_refused(&r, "session of another host");
	test_peer = "";
	CHECK_EQ_INT(send_hello(s, 502, &r), 0);
	expect_refused(&r, "the client certificate names no host");
	test_peer = "switch-1";
	CHECK_EQ_INT(send_batch(s, 500, 1, 1, 21, 5, &r), 0);
	CHECK_EQ_INT(r.fr_status, FP_REPLY_OK);
	fp_reply_fini(&r);
	test_peer = NULL;
	fp_server_stats(s, &st);
	CHECK_EQ_INT(st.sv_rejected_host, 4);
	CHECK_EQ_INT(st.sv_hellos, 1);
	CHECK_EQ_INT(st.sv_batches, 1);
	fp_server_free(s);
	fp_resolver_close(res);
}

/* The two tables of test_held_tables: build-ID 0xd1... (1.6 MB, two
 * parts) and 0xd2... (8 KB). */
#define HELD_ROWS_1 200000
#define HELD_ROWS_2 1000
static struct fp_build_id held_id(int which)
{
	struct fp_build_id id = { .fb_len = 20 };

	memset(id.fb_data, which == 1 ? 0xd1 : 0xd2, 20);
	return id;
}

static struct fp_unwind_header *held_table(int which, size_t *len)
{
	uint32_t rows = which == 1 ? HELD_ROWS_1 : HELD_ROWS_2, i;
	struct fp_unwind_header *h;
	struct fp_unwind_row *r;

	*len = sizeof(*h) + rows * sizeof(*r);
	if (!(h = calloc(1, *len)))
		return NULL;
	r = (struct fp_unwind_row *)(h + 1);
	memcpy(h->uh_magic, FP_UNWIND_MAGIC, 4);
	h->uh_version = FP_UNWIND_VERSION;
	h->uh_arch = FP_UNWIND_ARCH_X86_64;
	h->uh_nrows = rows;
	for (i = 0; i < rows; i++)
		r[i] = (struct fp_unwind_row){ .ur_pc = i * 16, .ur_cfa = 8 };
	return h;
}

/* held_session: a hello (with features and the held tables given) and a
 * batch that maps both tables' files; *got the table bytes of the reply
 * per table, *pending its key 11. */
static void held_session(struct fp_server *s, uint64_t session, uint64_t features,
			 const struct fp_held_table *held, size_t nheld, size_t got[2],
			 uint32_t *pending)
{
	struct fp_hello h = test_hello(session);
	struct fp_mapping m[2] = {
		{ .fm_id = 1, .fm_kind = FP_MAP_USER, .fm_build_id = held_id(1), .fm_path = "/x/1" },
		{ .fm_id = 2, .fm_kind = FP_MAP_USER, .fm_build_id = held_id(2), .fm_path = "/x/2" },
	};
	struct fp_batch b = { .fb_session = session,
			      .fb_seq = 1,
			      .fb_start_ns = 1700000000000000000ull,
			      .fb_end_ns = 1700000001000000000ull,
			      .fb_period_ns = 10101010,
			      .fb_nmappings = 2,
			      .fb_mappings = m };
	struct fp_reply r;
	size_t len, i;
	char *buf;

	got[0] = got[1] = 0;
	*pending = UINT32_MAX;
	h.fh_features = features;
	h.fh_held = (struct fp_held_table *)held;
	h.fh_nheld = nheld;
	if (fp_wire_encode_hello(&h, &buf, &len))
		return;
	CHECK_EQ_INT(call(s, buf, len, &r), 0);
	free(buf);
	CHECK_EQ_INT(r.fr_status, FP_REPLY_OK);
	fp_reply_fini(&r);
	if (fp_wire_encode_batch(&b, &buf, &len))
		return;
	CHECK_EQ_INT(call(s, buf, len, &r), 0);
	free(buf);
	CHECK_EQ_INT(r.fr_status, FP_REPLY_OK);
	for (i = 0; i < r.fr_ntables; i++)
		got[r.fr_tables[i].tp_build_id.fb_data[0] == 0xd2] += r.fr_tables[i].tp_len;
	*pending = r.fr_tables_pending;
	fp_reply_fini(&r);
}

/* next_batch: seq's batch of the same session (counts only): the table
 * bytes its reply carries, and its pending count. */
static void next_batch(struct fp_server *s, uint64_t session, uint64_t seq, size_t got[2],
		       uint32_t *pending)
{
	struct fp_batch b = { .fb_session = session,
			      .fb_seq = seq,
			      .fb_start_ns = 1700000000000000000ull + seq * 1000000000ull,
			      .fb_end_ns = 1700000001000000000ull + seq * 1000000000ull,
			      .fb_period_ns = 10101010 };
	struct fp_reply r;
	size_t len, i;
	char *buf;

	if (fp_wire_encode_batch(&b, &buf, &len))
		return;
	CHECK_EQ_INT(call(s, buf, len, &r), 0);
	free(buf);
	for (i = 0; i < r.fr_ntables; i++)
		got[r.fr_tables[i].tp_build_id.fb_data[0] == 0xd2] += r.fr_tables[i].tp_len;
	*pending = r.fr_tables_pending;
	fp_reply_fini(&r);
}

/* HELLO key 11: an agent that holds a table gets none, one that holds an
 * older version (another id) gets the new one, an agent of before the key
 * gets all (and no key 11 in the reply); the server's table rate bounds a
 * reply, and the rest comes in the next ones. */
static void test_held_tables(void)
{
	struct fp_resolver *res;
	struct fp_symcache *c = NULL;
	struct fp_server *s = NULL;
	struct fp_server_stats st;
	struct fp_unwind_header *t1, *t2;
	struct fp_held_table held[2];
	struct fp_build_id id1 = held_id(1), id2 = held_id(2);
	size_t l1, l2, got[2], all[2];
	uint32_t pending;
	int i;

	t1 = held_table(1, &l1);
	t2 = held_table(2, &l2);
	CHECK(t1 && t2 && fp_symcache_open(&c, cache_dir) == 0);
	if (!t1 || !t2 || !c)
		goto out;
	CHECK_EQ_INT(fp_symcache_put_unwind(c, &id1, t1, l1), 0);
	CHECK_EQ_INT(fp_symcache_put_unwind(c, &id2, t2, l2), 0);
	fp_symcache_close(c);
	res = open_resolver();
	CHECK(res && fp_server_alloc(&s, res, NULL, tmpdir) == 0);
	if (!s)
		goto out;
	held[0] = (struct fp_held_table){ id1, fp_unwind_table_id(&id1, t1, l1) };
	held[1] = (struct fp_held_table){ id2, fp_unwind_table_id(&id2, t2, l2) };

	/* Holds both: receives nothing, nothing is pending. */
	held_session(s, 501, FP_FEATURE_HELD_TABLES, held, 2, got, &pending);
	CHECK_EQ_INT(got[0] + got[1], 0);
	CHECK_EQ_INT(pending, 0);
	/* Holds the first only, and the second in another version. */
	held[1].ht_id ^= 1;
	held_session(s, 502, FP_FEATURE_HELD_TABLES, held, 2, got, &pending);
	CHECK_EQ_INT(got[0], 0);
	CHECK_EQ_INT(got[1], l2);
	CHECK_EQ_INT(pending, 0);
	fp_server_stats(s, &st);
	CHECK_EQ_INT(st.sv_tables_held, 3);
	CHECK_EQ_INT(st.sv_table_held_bytes, 2 * l1 + l2);
	CHECK_EQ_INT(st.sv_table_bytes, l2);
	/* An agent from before the key: everything, and no key 11. */
	held_session(s, 503, 0, NULL, 0, got, &pending);
	CHECK_EQ_INT(got[0], l1);
	CHECK_EQ_INT(got[1], l2);
	CHECK_EQ_INT(pending, 0);
	/* At 1 MiB a second, the first reply carries 1 MiB and says two
	 * tables are to come; the next, at once, nothing; the rest comes. */
	CHECK_EQ_INT(fp_server_set_limits(s,
					  &(struct fp_server_limits){ .sl_max_sessions = 100,
								      .sl_new_sessions_per_s = 100,
								      .sl_table_mb_s = 1 }),
		     0);
	held_session(s, 504, FP_FEATURE_HELD_TABLES, NULL, 0, all, &pending);
	CHECK_EQ_INT(all[0] + all[1], 1 << 20);
	CHECK_EQ_INT(pending, 2);
	next_batch(s, 504, 2, all, &pending);
	CHECK_EQ_INT(all[0] + all[1], 1 << 20);
	CHECK_EQ_INT(pending, 2);
	for (i = 3; i < 6 && pending; i++) {
		usleep(1100000);
		next_batch(s, 504, (uint64_t)i, all, &pending);
	}
	CHECK_EQ_INT(pending, 0);
	CHECK_EQ_INT(all[0], l1);
	CHECK_EQ_INT(all[1], l2);
	fp_server_free(s);
	fp_resolver_close(res);
out:
	free(t1);
	free(t2);
}

int main(void)
{
	int rc;

	if (check_tmpdir(tmpdir, sizeof(tmpdir), "fp-server-test"))
		return 1;
	snprintf(cache_dir, sizeof(cache_dir), "%s/cache", tmpdir);
	snprintf(out_dir, sizeof(out_dir), "%s/out", tmpdir);
	RUN(test_full_conversation);
	RUN(test_upgrade);
	RUN(test_hostile_messages);
	RUN(test_admission);
	RUN(test_identity);
	RUN(test_python_session);
	RUN(test_python_conversation);
	RUN(test_busy);
	RUN(test_busy_bytes);
	RUN(test_held_tables);
	rc = CHECK_DONE();
	if (check_rmtree(tmpdir))
		rc = 1;
	return rc;
}
