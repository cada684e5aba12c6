/* server_test.c: the symbolizer's request handling end to end, without a
 * socket: hello, kallsyms upload, batches, duplicates, stale references,
 * hostile messages, and the session sequence surviving a restart. */
#include "check.h"
#include "server.h"
#include "wire.h"

#include <dirent.h>
#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

static char tmpdir[64];
static char cache_dir[128], out_dir[128];

static struct fp_build_id kernel_id(void)
{
	struct fp_build_id id = { .fb_len = 20 };

	memset(id.fb_data, 0xab, 20);
	return id;
}

static struct fp_hello test_hello(uint64_t session)
{
	return (struct fp_hello){ .fh_session = session, .fh_host = "switch-1",
				  .fh_boot_id = "boot", .fh_kernel_release = "6.1.0",
				  .fh_kernel_build_id = kernel_id(), .fh_agent_version = "test",
				  .fh_frequency = 99, .fh_ncpus = 4 };
}

/* call: encode-free round trip through the server; returns the decoded reply. */
static int call(struct fp_server *s, const char *req, size_t len, struct fp_reply *r)
{
	char *buf;
	size_t blen;
	int err = fp_server_handle(s, req, len, &buf, &blen);

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
	struct fp_ksyms k = { .fs_session = session, .fs_kind = FP_MAP_KERNEL,
			      .fs_build_id = kernel_id(), .fs_name = "vmlinux", .fs_part = part,
			      .fs_last = (uint8_t)last, .fs_nsyms = n, .fs_syms = syms };
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
static int send_batch(struct fp_server *s, uint64_t session, uint64_t seq, int defs,
		      uint32_t leaf, uint32_t count, struct fp_reply *r)
{
	struct fp_node nodes[2] = { { 20, FP_NODE_NONE, { 7, 0x2004 } },
				    { 21, 20, { 7, 0x1010 } } };
	struct fp_mapping m = { .fm_id = 7, .fm_kind = FP_MAP_KERNEL, .fm_build_id = kernel_id(),
				.fm_path = "vmlinux" };
	struct fp_thread t = { .ft_id = 3, .ft_pid = 100, .ft_tid = 101, .ft_comm = "worker",
			       .ft_process = "daemon", .ft_container = "swss" };
	struct fp_count c = { 3, leaf, count };
	struct fp_batch b = { .fb_session = session, .fb_seq = seq,
			      .fb_start_ns = 1700000000000000000ull + seq * 1000000000ull,
			      .fb_end_ns = 1700000001000000000ull + seq * 1000000000ull,
			      .fb_period_ns = 10101010, .fb_ncounts = 1, .fb_counts = &c };
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

	/* Hello: the server asks for the kernel's symbols. */
	CHECK_EQ_INT(send_hello(s, 42, &r), 0);
	CHECK_EQ_INT(r.fr_status, FP_REPLY_OK);
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

static void test_hostile_messages(void)
{
	static const struct {
		const char *name;
		const char *bytes;
		size_t len;
		int field; /* 0 malformed, 1 version, 2 type */
	} cases[] = {
		{ "empty", "", 0, 0 },
		{ "not msgpack", "\xc1\xc1\xc1", 3, 0 },
		{ "not an array", "\x01", 1, 0 },
		{ "huge array", "\x93\x01\x02\xdd\xff\xff\xff\xff", 8, 0 },
		{ "wrong version", "\x93\x63\x01\x80", 4, 1 },
		{ "unknown type", "\x93\x01\x4d\x80", 4, 2 },
		{ "reply sent to server", "\x93\x01\x04\x80", 4, 2 },
	};
	struct fp_resolver *res = open_resolver();
	struct fp_server *s = NULL;
	struct fp_server_stats st;
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
	}
	fp_server_stats(s, &st);
	CHECK(st.sv_rejected_version == 1);
	CHECK(st.sv_rejected_type == 2);
	CHECK(st.sv_rejected_malformed + st.sv_rejected_content == 4);
	fp_server_free(s);
	fp_resolver_close(res);
}

int main(void)
{
	char cmd[128];
	int rc;

	snprintf(tmpdir, sizeof(tmpdir), "/tmp/fp-server-test.XXXXXX");
	if (!mkdtemp(tmpdir))
		return 1;
	snprintf(cache_dir, sizeof(cache_dir), "%s/cache", tmpdir);
	snprintf(out_dir, sizeof(out_dir), "%s/out", tmpdir);
	RUN(test_full_conversation);
	RUN(test_hostile_messages);
	rc = CHECK_DONE();
	snprintf(cmd, sizeof(cmd), "rm -rf %s", tmpdir);
	if (system(cmd))
		rc = 1;
	return rc;
}
