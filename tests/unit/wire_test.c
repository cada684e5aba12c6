/* wire_test.c: round trips and hostile input for common/wire.c. */
#include "check.h"

#include "batch.h"
#include "wire.h"

#include <errno.h>
#include <msgpack.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

/* ---- Building and comparing structures --------------------------------- */

static char *xstrdup(const char *s)
{
	char *d = strdup(s);

	if (!d)
		abort();
	return d;
}

static void *xcalloc(size_t n, size_t size)
{
	void *p = calloc(n ? n : 1, size);

	if (!p)
		abort();
	return p;
}

static void build_id_fill(struct fp_build_id *id, uint8_t len, uint8_t seed)
{
	uint8_t i;

	memset(id, 0, sizeof(*id));
	id->fb_len = len;
	for (i = 0; i < len; i++)
		id->fb_data[i] = (uint8_t)(seed * 31 + i * 7);
}

static int str_eq(const char *a, const char *b)
{
	if (!a || !b)
		return a == b;
	return strcmp(a, b) == 0;
}

static void make_hello(struct fp_hello *h, size_t nlabels)
{
	size_t i;

	memset(h, 0, sizeof(*h));
	h->fh_session = 0x8f3a29c4d1e07b65ull;
	h->fh_host = xstrdup("web-eu-042.example.net");
	h->fh_boot_id = xstrdup("5b1f0c2e-7d7a-4e36-9c55-0f1b8a9d3e21");
	h->fh_kernel_release = xstrdup("6.1.0-18-amd64");
	build_id_fill(&h->fh_kernel_build_id, 20, 1);
	h->fh_agent_version = xstrdup("0.1-42-gdeadbee");
	h->fh_frequency = 99;
	h->fh_ncpus = 128;
	h->fh_nlabels = nlabels;
	if (nlabels) {
		h->fh_label_keys = xcalloc(nlabels, sizeof(char *));
		h->fh_label_values = xcalloc(nlabels, sizeof(char *));
	}
	for (i = 0; i < nlabels; i++) {
		char k[32], v[32];

		snprintf(k, sizeof(k), "key%zu", i);
		if (i % 3)
			snprintf(v, sizeof(v), "value-%zu", i);
		else
			v[0] = '\0'; /* empty values are allowed */
		h->fh_label_keys[i] = xstrdup(k);
		h->fh_label_values[i] = xstrdup(v);
	}
}

static int hello_eq(const struct fp_hello *a, const struct fp_hello *b)
{
	size_t i;

	if (a->fh_session != b->fh_session || !str_eq(a->fh_host, b->fh_host) ||
	    !str_eq(a->fh_boot_id, b->fh_boot_id) ||
	    !str_eq(a->fh_kernel_release, b->fh_kernel_release) ||
	    !fp_build_id_eq(&a->fh_kernel_build_id, &b->fh_kernel_build_id) ||
	    !str_eq(a->fh_agent_version, b->fh_agent_version) ||
	    a->fh_frequency != b->fh_frequency || a->fh_ncpus != b->fh_ncpus ||
	    a->fh_nlabels != b->fh_nlabels || a->fh_features != b->fh_features ||
	    a->fh_nheld != b->fh_nheld)
		return 0;
	for (i = 0; i < a->fh_nheld; i++)
		if (!fp_build_id_eq(&a->fh_held[i].ht_build_id, &b->fh_held[i].ht_build_id) ||
		    a->fh_held[i].ht_id != b->fh_held[i].ht_id)
			return 0;
	for (i = 0; i < a->fh_nlabels; i++)
		if (!str_eq(a->fh_label_keys[i], b->fh_label_keys[i]) ||
		    !str_eq(a->fh_label_values[i], b->fh_label_values[i]))
			return 0;
	return 1;
}

/* A first batch of a session: definitions of every kind, then counts. */
static void make_batch(struct fp_batch *b)
{
	static const char *paths[] = { "/usr/lib/x86_64-linux-gnu/libc.so.6", "vmlinux",
				       "nf_conntrack", "/usr/bin/python3.11" };
	static const uint8_t kinds[] = { FP_MAP_USER, FP_MAP_KERNEL, FP_MAP_KMODULE, FP_MAP_USER };
	uint32_t i;

	memset(b, 0, sizeof(*b));
	b->fb_session = 0x8f3a29c4d1e07b65ull;
	b->fb_seq = 1;
	b->fb_start_ns = 1700000000000000000ull;
	b->fb_end_ns = 1700000010000000000ull;
	b->fb_period_ns = 10101010;

	b->fb_nmappings = 4;
	b->fb_mappings = xcalloc(4, sizeof(struct fp_mapping));
	for (i = 0; i < 4; i++) {
		b->fb_mappings[i].fm_id = i + 1;
		b->fb_mappings[i].fm_kind = kinds[i];
		/* The last one has an unknown build-ID. */
		build_id_fill(&b->fb_mappings[i].fm_build_id, i == 3 ? 0 : (uint8_t)(20 - i * 4),
			      (uint8_t)i);
		b->fb_mappings[i].fm_path = xstrdup(paths[i]);
	}

	b->fb_nthreads = 3;
	b->fb_threads = xcalloc(3, sizeof(struct fp_thread));
	for (i = 0; i < 3; i++) {
		struct fp_thread *t = &b->fb_threads[i];

		t->ft_id = i + 1;
		t->ft_pid = 4000 + i;
		t->ft_tid = 4000 + i * 17;
		t->ft_cgroup = i == 0 ? 0 : 0x1234567890abcull + i;
		snprintf(t->ft_comm, sizeof(t->ft_comm), i == 2 ? "123456789012345" : "worker-%u",
			 i);
		snprintf(t->ft_process, sizeof(t->ft_process), "python3");
		t->ft_container = xstrdup(i == 1 ? "3f4e1a0b9c2d" : "");
	}

	/* The stack trie, parents before children.  Nodes 1..254 are one full
	 * 254-frame path: from its leaf (254) the parents give 127 kernel
	 * frames, then 127 user frames, down to the root (1). */
	b->fb_nnodes = FP_MAX_FRAMES + 5;
	b->fb_nodes = xcalloc(b->fb_nnodes, sizeof(struct fp_node));
	for (i = 0; i < FP_MAX_FRAMES; i++) {
		struct fp_node *nd = &b->fb_nodes[i];
		/* Frame index of this node, counted from the leaf. */
		uint32_t f = FP_MAX_FRAMES - 1 - i;

		nd->fn_id = i + 1;
		nd->fn_parent = i == 0 ? FP_NODE_NONE : i;
		nd->fn_frame.ff_mapping = f < 127 ? 2 : 1;
		nd->fn_frame.ff_offset = f < 127 ? 0xa00000 + f * 0x40
						 : 0x28000 + (uint64_t)f * 0x1111;
	}
	/* Unmapped frames (JIT code) carry raw 64-bit addresses; ids out of
	 * order, large, and far apart (negative and 33-bit id deltas). */
	b->fb_nodes[FP_MAX_FRAMES + 0] = (struct fp_node){ 70000,
							   FP_NODE_NONE,
							   { FP_MAPPING_NONE, 0x7f3a12345678ull } };
	b->fb_nodes[FP_MAX_FRAMES + 1] = (struct fp_node){ 300, 70000, { 4, 0x1c2d3e } };
	b->fb_nodes[FP_MAX_FRAMES + 2] = (struct fp_node){ 4000000000u,
							   300,
							   { FP_MAPPING_NONE, UINT64_MAX } };
	/* A kernel module frame called from the path's innermost user frame
	 * (shared callers), and the largest node id under a 64-bit offset. */
	b->fb_nodes[FP_MAX_FRAMES + 3] = (struct fp_node){ 0, 127, { 3, 0x1f0 } };
	b->fb_nodes[FP_MAX_FRAMES + 4] = (struct fp_node){ FP_NODE_NONE - 1,
							   0,
							   { 2, 0xffffffff80000000ull } };

	b->fb_ncounts = 8;
	b->fb_counts = xcalloc(8, sizeof(struct fp_count));
	b->fb_counts[0] = (struct fp_count){ 1, FP_MAX_FRAMES, 17 };
	b->fb_counts[1] = (struct fp_count){ 2, 4000000000u, 1 };
	b->fb_counts[2] = (struct fp_count){ 3, FP_NODE_NONE - 1, 300 };
	b->fb_counts[3] = (struct fp_count){ 1, FP_NODE_NONE, UINT32_MAX }; /* no frames */
	b->fb_counts[4] = (struct fp_count){ 2, 999, 2 }; /* defined in an earlier batch */
	b->fb_counts[5] = (struct fp_count){ UINT32_MAX, 0, 1 };
	/* off-CPU: waits and their time, after the CPU counts */
	b->fb_counts[6] = (struct fp_count){ 1, FP_MAX_FRAMES, 3, 1234567 };
	b->fb_counts[7] = (struct fp_count){ 2, FP_NODE_NONE, UINT32_MAX, UINT64_MAX };

	b->fb_lost = (struct fp_lost){ 3, 0, 1, 4242 };
}

/* Python code objects; a NULL qualname encodes as "". */
static int pycode_eq(const struct fp_pycode *a, const struct fp_pycode *b)
{
	if (!a || !b)
		return a == b;
	return str_eq(a->pc_qualname ? a->pc_qualname : "", b->pc_qualname ? b->pc_qualname : "") &&
	       a->pc_firstlineno == b->pc_firstlineno && a->pc_lines == b->pc_lines &&
	       a->pc_linetable_len == b->pc_linetable_len &&
	       (!a->pc_linetable_len ||
		memcmp(a->pc_linetable, b->pc_linetable, a->pc_linetable_len) == 0);
}

static int batch_eq(const struct fp_batch *a, const struct fp_batch *b)
{
	size_t i;

	if (a->fb_session != b->fb_session || a->fb_seq != b->fb_seq ||
	    a->fb_start_ns != b->fb_start_ns || a->fb_end_ns != b->fb_end_ns ||
	    a->fb_period_ns != b->fb_period_ns || a->fb_nmappings != b->fb_nmappings ||
	    a->fb_nthreads != b->fb_nthreads || a->fb_nnodes != b->fb_nnodes ||
	    a->fb_ncounts != b->fb_ncounts ||
	    memcmp(&a->fb_lost, &b->fb_lost, sizeof(a->fb_lost)) != 0)
		return 0;
	for (i = 0; i < a->fb_nmappings; i++) {
		const struct fp_mapping *x = &a->fb_mappings[i], *y = &b->fb_mappings[i];

		if (x->fm_id != y->fm_id || x->fm_kind != y->fm_kind ||
		    !fp_build_id_eq(&x->fm_build_id, &y->fm_build_id) ||
		    !str_eq(x->fm_path, y->fm_path) || !pycode_eq(x->fm_py, y->fm_py))
			return 0;
	}
	for (i = 0; i < a->fb_nthreads; i++) {
		const struct fp_thread *x = &a->fb_threads[i], *y = &b->fb_threads[i];

		if (x->ft_id != y->ft_id || x->ft_pid != y->ft_pid || x->ft_tid != y->ft_tid ||
		    x->ft_cgroup != y->ft_cgroup || strcmp(x->ft_comm, y->ft_comm) != 0 ||
		    strcmp(x->ft_process, y->ft_process) != 0 ||
		    !str_eq(x->ft_container, y->ft_container))
			return 0;
	}
	for (i = 0; i < a->fb_nnodes; i++) {
		const struct fp_node *x = &a->fb_nodes[i], *y = &b->fb_nodes[i];

		if (x->fn_id != y->fn_id || x->fn_parent != y->fn_parent ||
		    x->fn_frame.ff_mapping != y->fn_frame.ff_mapping ||
		    x->fn_frame.ff_offset != y->fn_frame.ff_offset)
			return 0;
	}
	for (i = 0; i < a->fb_ncounts; i++)
		if (a->fb_counts[i].fc_thread != b->fb_counts[i].fc_thread ||
		    a->fb_counts[i].fc_node != b->fb_counts[i].fc_node ||
		    a->fb_counts[i].fc_count != b->fb_counts[i].fc_count ||
		    a->fb_counts[i].fc_off_ns != b->fb_counts[i].fc_off_ns)
			return 0;
	return 1;
}

/* The node of b with the given id, or NULL. */
static const struct fp_node *node_by_id(const struct fp_batch *b, uint32_t id)
{
	size_t i;

	for (i = 0; i < b->fb_nnodes; i++)
		if (b->fb_nodes[i].fn_id == id)
			return &b->fb_nodes[i];
	return NULL;
}

/* The frames of the stack ending in node leaf, leaf first, as far as b
 * defines them; returns how many, or -1 past max (a cycle, say). */
static int stack_of(const struct fp_batch *b, uint32_t leaf, struct fp_frame *frames, int max)
{
	const struct fp_node *nd;
	int n = 0;

	for (nd = node_by_id(b, leaf); nd; nd = node_by_id(b, nd->fn_parent)) {
		if (n == max)
			return -1;
		frames[n++] = nd->fn_frame;
		if (nd->fn_parent == FP_NODE_NONE)
			break;
	}
	return n;
}

static void make_ksyms(struct fp_ksyms *k, uint32_t part, int last, size_t first, size_t n)
{
	size_t i;

	memset(k, 0, sizeof(*k));
	k->fs_session = 77;
	k->fs_kind = FP_MAP_KERNEL;
	build_id_fill(&k->fs_build_id, 20, 9);
	k->fs_name = xstrdup("vmlinux");
	k->fs_part = part;
	k->fs_last = (uint8_t)last;
	k->fs_nsyms = n;
	k->fs_syms = n ? xcalloc(n, sizeof(struct fp_ksym)) : NULL;
	for (i = 0; i < n; i++) {
		char name[64];

		snprintf(name, sizeof(name), "sym_%zu_%s", first + i,
			 (first + i) % 5 ? "do_syscall_64" : "x");
		k->fs_syms[i].fk_offset = (first + i) * 0x30;
		k->fs_syms[i].fk_name = xstrdup(name);
	}
}

static int ksyms_eq(const struct fp_ksyms *a, const struct fp_ksyms *b)
{
	size_t i;

	if (a->fs_session != b->fs_session || a->fs_kind != b->fs_kind ||
	    !fp_build_id_eq(&a->fs_build_id, &b->fs_build_id) || !str_eq(a->fs_name, b->fs_name) ||
	    a->fs_part != b->fs_part || !a->fs_last != !b->fs_last || a->fs_nsyms != b->fs_nsyms)
		return 0;
	for (i = 0; i < a->fs_nsyms; i++)
		if (a->fs_syms[i].fk_offset != b->fs_syms[i].fk_offset ||
		    !str_eq(a->fs_syms[i].fk_name, b->fs_syms[i].fk_name))
			return 0;
	return 1;
}

static int reply_eq(const struct fp_reply *a, const struct fp_reply *b)
{
	size_t i;

	if (a->fr_status != b->fr_status || a->fr_seq != b->fr_seq ||
	    a->fr_features != b->fr_features || !str_eq(a->fr_error, b->fr_error) ||
	    a->fr_nwant != b->fr_nwant || a->fr_nranges != b->fr_nranges ||
	    a->fr_has_written != b->fr_has_written || a->fr_written != b->fr_written ||
	    a->fr_tables_pending != b->fr_tables_pending)
		return 0;
	for (i = 0; i < a->fr_nwant; i++)
		if (!fp_build_id_eq(&a->fr_want[i], &b->fr_want[i]))
			return 0;
	for (i = 0; i < a->fr_nranges; i++)
		if (!fp_build_id_eq(&a->fr_ranges[i].fg_build_id, &b->fr_ranges[i].fg_build_id) ||
		    a->fr_ranges[i].fg_offset != b->fr_ranges[i].fg_offset ||
		    a->fr_ranges[i].fg_length != b->fr_ranges[i].fg_length)
			return 0;
	if (a->fr_ntables != b->fr_ntables)
		return 0;
	for (i = 0; i < a->fr_ntables; i++) {
		const struct fp_table_part *x = &a->fr_tables[i], *y = &b->fr_tables[i];
		if (!fp_build_id_eq(&x->tp_build_id, &y->tp_build_id) ||
		    x->tp_offset != y->tp_offset || x->tp_total != y->tp_total ||
		    x->tp_len != y->tp_len || memcmp(x->tp_data, y->tp_data, x->tp_len))
			return 0;
	}
	return 1;
}

static int file_eq(const struct fp_file_data *a, const struct fp_file_data *b)
{
	return a->fd_session == b->fd_session && fp_build_id_eq(&a->fd_build_id, &b->fd_build_id) &&
	       a->fd_offset == b->fd_offset && a->fd_file_size == b->fd_file_size &&
	       a->fd_error == b->fd_error && a->fd_len == b->fd_len &&
	       (!a->fd_len || memcmp(a->fd_data, b->fd_data, a->fd_len) == 0);
}

/* Decodes buf as a message of the given type; on success releases the
 * result, on failure checks that the output was left untouched. */
static int decode_as(int type, const void *buf, size_t len)
{
	union {
		struct fp_hello h;
		struct fp_batch b;
		struct fp_ksyms k;
		struct fp_reply r;
		struct fp_file_data f;
	} out, before;
	int err;

	memset(&out, 0xa5, sizeof(out));
	memcpy(&before, &out, sizeof(out));
	switch (type) {
	case FP_MSG_HELLO:
		err = fp_wire_decode_hello(buf, len, &out.h);
		if (!err)
			fp_hello_fini(&out.h);
		break;
	case FP_MSG_SAMPLES:
		err = fp_wire_decode_batch(buf, len, &out.b);
		if (!err)
			fp_batch_fini(&out.b);
		break;
	case FP_MSG_KSYMS:
		err = fp_wire_decode_ksyms(buf, len, &out.k);
		if (!err)
			fp_ksyms_fini(&out.k);
		break;
	case FP_MSG_FILE:
		err = fp_wire_decode_file(buf, len, &out.f);
		if (!err)
			fp_file_data_fini(&out.f);
		break;
	default:
		err = fp_wire_decode_reply(buf, len, &out.r);
		if (!err)
			fp_reply_fini(&out.r);
		break;
	}
	if (err)
		CHECK(memcmp(&out, &before, sizeof(out)) == 0);
	return err;
}

/* A valid encoding of each message type, for the hostile-input tests. */
struct sample_msg {
	int sm_type;
	char *sm_buf;
	size_t sm_len;
};

static void encode_samples(struct sample_msg msgs[4])
{
	struct fp_hello h;
	struct fp_batch b;
	struct fp_ksyms k;
	struct fp_reply r;

	make_hello(&h, 3);
	make_batch(&b);
	make_ksyms(&k, 2, 1, 100, 20);
	memset(&r, 0, sizeof(r));
	r.fr_status = FP_REPLY_REJECTED;
	r.fr_seq = 12;
	r.fr_error = xstrdup("bad");
	r.fr_nwant = 2;
	r.fr_want = xcalloc(2, sizeof(struct fp_build_id));
	build_id_fill(&r.fr_want[0], 20, 3);
	build_id_fill(&r.fr_want[1], 8, 4);
	msgs[0].sm_type = FP_MSG_HELLO;
	msgs[1].sm_type = FP_MSG_SAMPLES;
	msgs[2].sm_type = FP_MSG_KSYMS;
	msgs[3].sm_type = FP_MSG_REPLY;
	if (fp_wire_encode_hello(&h, &msgs[0].sm_buf, &msgs[0].sm_len) ||
	    fp_wire_encode_batch(&b, &msgs[1].sm_buf, &msgs[1].sm_len) ||
	    fp_wire_encode_ksyms(&k, &msgs[2].sm_buf, &msgs[2].sm_len) ||
	    fp_wire_encode_reply(&r, &msgs[3].sm_buf, &msgs[3].sm_len))
		abort();
	fp_hello_fini(&h);
	fp_batch_fini(&b);
	fp_ksyms_fini(&k);
	fp_reply_fini(&r);
}

static void free_samples(struct sample_msg msgs[4])
{
	int i;

	for (i = 0; i < 4; i++)
		free(msgs[i].sm_buf);
}

/* ---- batch.c ------------------------------------------------------------ */

static void test_build_id_hex(void)
{
	struct fp_build_id id, parsed;
	char hex[2 * FP_BUILD_ID_MAX + 1];

	build_id_fill(&id, 20, 5);
	id.fb_data[0] = 0x0f;
	id.fb_data[19] = 0xa0;
	fp_build_id_hex(&id, hex);
	CHECK_EQ_INT(strlen(hex), 40);
	CHECK(strncmp(hex, "0f", 2) == 0);
	CHECK(strcmp(hex + 38, "a0") == 0);
	memset(&parsed, 0xee, sizeof(parsed));
	CHECK_EQ_INT(fp_build_id_parse(hex, &parsed), 0);
	CHECK(fp_build_id_eq(&id, &parsed));

	CHECK_EQ_INT(fp_build_id_parse("DEADbeef", &parsed), 0);
	CHECK_EQ_INT(parsed.fb_len, 4);
	CHECK(parsed.fb_data[0] == 0xde && parsed.fb_data[3] == 0xef);

	/* The unknown id prints as "" and parses back. */
	id.fb_len = 0;
	fp_build_id_hex(&id, hex);
	CHECK(hex[0] == '\0');
	CHECK_EQ_INT(fp_build_id_parse("", &parsed), 0);
	CHECK_EQ_INT(parsed.fb_len, 0);
}

static void test_build_id_parse_errors(void)
{
	static const char *bad[] = {
		"abc",                                        /* odd */
		"zz",                                         /* not hex */
		"0g",                                         /* not hex */
		"12 4",                                       /* space */
		"000102030405060708090a0b0c0d0e0f1011121314", /* 21 bytes */
		"0x12",                                       /* prefix */
	};
	struct fp_build_id id, before;
	size_t i;

	memset(&id, 0x5a, sizeof(id));
	before = id;
	for (i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
		CHECK_EQ_INT(fp_build_id_parse(bad[i], &id), -EINVAL);
		CHECK(memcmp(&id, &before, sizeof(id)) == 0);
	}
	CHECK_EQ_INT(fp_build_id_parse(NULL, &id), -EINVAL);
}

static void test_build_id_eq(void)
{
	struct fp_build_id a, b;

	build_id_fill(&a, 8, 1);
	build_id_fill(&b, 8, 1);
	/* Bytes past the length do not count. */
	b.fb_data[15] = 0x99;
	CHECK(fp_build_id_eq(&a, &b));
	b.fb_data[7] ^= 1;
	CHECK(!fp_build_id_eq(&a, &b));
	b.fb_data[7] ^= 1;
	b.fb_len = 7;
	CHECK(!fp_build_id_eq(&a, &b));
	a.fb_len = b.fb_len = 0;
	CHECK(fp_build_id_eq(&a, &b));
}

static void test_fini_zeroed(void)
{
	struct fp_hello h;
	struct fp_batch b;
	struct fp_ksyms k;
	struct fp_reply r;

	memset(&h, 0, sizeof(h));
	memset(&b, 0, sizeof(b));
	memset(&k, 0, sizeof(k));
	memset(&r, 0, sizeof(r));
	fp_hello_fini(&h);
	fp_batch_fini(&b);
	fp_ksyms_fini(&k);
	fp_reply_fini(&r);

	/* A filled structure is left zeroed, so a second fini is harmless. */
	make_hello(&h, 2);
	fp_hello_fini(&h);
	CHECK(h.fh_host == NULL && h.fh_nlabels == 0 && h.fh_label_keys == NULL);
	fp_hello_fini(&h);
	make_batch(&b);
	fp_batch_fini(&b);
	CHECK(b.fb_nodes == NULL && b.fb_nnodes == 0 && b.fb_counts == NULL && b.fb_ncounts == 0);
	fp_batch_fini(&b);
	make_ksyms(&k, 0, 0, 0, 3);
	fp_ksyms_fini(&k);
	CHECK(k.fs_syms == NULL && k.fs_nsyms == 0 && k.fs_name == NULL);
	fp_ksyms_fini(&k);
}

/* ---- Round trips ---------------------------------------------------------- */

static void test_hello_roundtrip(void)
{
	size_t nlabels[] = { 0, 3, 64 };
	size_t i;

	for (i = 0; i < 3; i++) {
		struct fp_hello h, d;
		char *buf = NULL;
		size_t len = 0;
		int type = 0;

		make_hello(&h, nlabels[i]);
		CHECK_EQ_INT(fp_wire_encode_hello(&h, &buf, &len), 0);
		CHECK_EQ_INT(fp_wire_peek(buf, len, &type), 0);
		CHECK_EQ_INT(type, FP_MSG_HELLO);
		CHECK_EQ_INT(fp_wire_decode_hello(buf, len, &d), 0);
		CHECK(hello_eq(&h, &d));
		fp_hello_fini(&d);
		fp_hello_fini(&h);
		free(buf);
	}
}

static void test_hello_null_strings(void)
{
	struct fp_hello h, d;
	char *buf;
	size_t len;

	/* Encoders send NULL strings as "", which is what the decoder yields. */
	memset(&h, 0, sizeof(h));
	CHECK_EQ_INT(fp_wire_encode_hello(&h, &buf, &len), 0);
	CHECK_EQ_INT(fp_wire_decode_hello(buf, len, &d), 0);
	CHECK(d.fh_host && d.fh_host[0] == '\0');
	CHECK(d.fh_agent_version && d.fh_agent_version[0] == '\0');
	CHECK_EQ_INT(d.fh_nlabels, 0);
	CHECK(d.fh_label_keys == NULL);
	fp_hello_fini(&d);
	free(buf);
}

static void test_batch_roundtrip(void)
{
	struct fp_frame frames[FP_MAX_FRAMES + 1];
	struct fp_batch b, d;
	char *buf, *buf2;
	size_t len, len2;
	int type = 0, n, i;

	make_batch(&b);
	CHECK_EQ_INT(fp_wire_encode_batch(&b, &buf, &len), 0);
	CHECK_EQ_INT(fp_wire_peek(buf, len, &type), 0);
	CHECK_EQ_INT(type, FP_MSG_SAMPLES);
	memset(&d, 0, sizeof(d));
	CHECK_EQ_INT(fp_wire_decode_batch(buf, len, &d), 0);
	CHECK(batch_eq(&b, &d));
	/* The full path: 127 kernel frames, then 127 user frames. */
	n = stack_of(&d, FP_MAX_FRAMES, frames, FP_MAX_FRAMES + 1);
	CHECK_EQ_INT(n, FP_MAX_FRAMES);
	for (i = 0; i < n; i++) {
		CHECK_EQ_INT(frames[i].ff_mapping, i < 127 ? 2 : 1);
		CHECK(frames[i].ff_offset ==
		      (i < 127 ? 0xa00000 + (uint64_t)i * 0x40 : 0x28000 + (uint64_t)i * 0x1111));
	}
	CHECK_EQ_INT(d.fb_nodes[0].fn_parent, FP_NODE_NONE);
	/* The module frame shares the path's 127 user frames. */
	n = stack_of(&d, FP_NODE_NONE - 1, frames, FP_MAX_FRAMES + 1);
	CHECK_EQ_INT(n, 129);
	CHECK(frames[0].ff_mapping == 2 && frames[0].ff_offset == 0xffffffff80000000ull);
	CHECK(frames[1].ff_mapping == 3 && frames[1].ff_offset == 0x1f0);
	CHECK(frames[2].ff_mapping == 1);
	/* Unmapped frames, raw addresses, ids out of order. */
	n = stack_of(&d, 4000000000u, frames, FP_MAX_FRAMES + 1);
	CHECK_EQ_INT(n, 3);
	CHECK_EQ_INT(frames[0].ff_mapping, FP_MAPPING_NONE);
	CHECK(frames[0].ff_offset == UINT64_MAX);
	CHECK(frames[1].ff_mapping == 4 && frames[1].ff_offset == 0x1c2d3e);
	CHECK_EQ_INT(frames[2].ff_mapping, FP_MAPPING_NONE);
	CHECK(frames[2].ff_offset == 0x7f3a12345678ull);
	CHECK_EQ_INT(d.fb_nodes[FP_MAX_FRAMES].fn_parent, FP_NODE_NONE);
	CHECK_EQ_INT(d.fb_nodes[FP_MAX_FRAMES + 3].fn_id, 0);
	CHECK_EQ_INT(d.fb_counts[3].fc_node, FP_NODE_NONE);
	CHECK_EQ_INT(d.fb_counts[3].fc_count, UINT32_MAX);
	CHECK_EQ_INT(d.fb_counts[5].fc_thread, UINT32_MAX);
	CHECK(d.fb_counts[5].fc_off_ns == 0);
	CHECK(d.fb_counts[7].fc_off_ns == UINT64_MAX && d.fb_counts[7].fc_count == UINT32_MAX);
	/* Encoding is deterministic. */
	CHECK_EQ_INT(fp_wire_encode_batch(&d, &buf2, &len2), 0);
	CHECK(len == len2 && memcmp(buf, buf2, len) == 0);
	fp_batch_fini(&d);
	fp_batch_fini(&b);
	free(buf);
	free(buf2);
}

static void test_batch_empty(void)
{
	struct fp_batch b, d;
	char *buf;
	size_t len;

	memset(&b, 0, sizeof(b));
	b.fb_session = 1;
	b.fb_seq = 2;
	CHECK_EQ_INT(fp_wire_encode_batch(&b, &buf, &len), 0);
	/* Envelope, five small required fields, nothing else. */
	CHECK_EQ_INT(len, 4 + 5 * 2);
	memset(&d, 0xa5, sizeof(d));
	CHECK_EQ_INT(fp_wire_decode_batch(buf, len, &d), 0);
	CHECK(batch_eq(&b, &d));
	CHECK(d.fb_mappings == NULL && d.fb_threads == NULL && d.fb_nodes == NULL &&
	      d.fb_counts == NULL);
	fp_batch_fini(&d);
	free(buf);
}

/* FP_MAPPING_NONE and FP_NODE_NONE are each the one byte 0xff; the whole
 * message, byte for byte. */
static void test_none_is_one_byte(void)
{
	struct fp_node nodes[2] = { { 9, FP_NODE_NONE, { FP_MAPPING_NONE, 5 } },
				    { 10, 9, { 3, 6 } } };
	struct fp_count counts[2] = { { 1, FP_NODE_NONE, 2 }, { 1, 10, 3 } };
	static const uint8_t expect[] = {
		0x93, 0x01, 0x02, 0x87, /* [1, SAMPLES, {7 keys */
		0x01, 0x00, 0x02, 0x00, 0x03, 0x00,
		0x04, 0x00, 0x05, 0x00, 0x08, 0x98, /* nodes: 8 elements */
		0x09, 0x00, 0xff, 0x05,             /* 9, no parent, NONE, 5 */
		0x01, 0x01, 0x03, 0x06,             /* 10 = 9 + 1, parent 10 - 1 */
		0x09, 0x96,                         /* counts: 6 elements */
		0x01, 0xff, 0x02,                   /* thread 1, no frames, 2 */
		0x01, 0x0a, 0x03,
	};
	struct fp_batch b, d;
	char *buf;
	size_t len;

	memset(&b, 0, sizeof(b));
	b.fb_nnodes = 2;
	b.fb_nodes = nodes;
	b.fb_ncounts = 2;
	b.fb_counts = counts;
	CHECK_EQ_INT(fp_wire_encode_batch(&b, &buf, &len), 0);
	CHECK_EQ_INT(len, sizeof(expect));
	CHECK(len == sizeof(expect) && memcmp(buf, expect, len) == 0);
	CHECK_EQ_INT(fp_wire_decode_batch(buf, len, &d), 0);
	CHECK(batch_eq(&b, &d));
	fp_batch_fini(&d);
	free(buf);
}

/* PROTOCOL.md's example with the varint keys: node 9, node 10 under it,
 * and thread 1's counts: 2 without frames, 3 of node 10, 1 of node 12. */
static void test_varint_bytes(void)
{
	struct fp_node nodes[2] = { { 9, FP_NODE_NONE, { FP_MAPPING_NONE, 5 } },
				    { 10, 9, { 3, 6 } } };
	struct fp_count counts[3] = { { 1, 12, 1 }, { 1, 10, 3 }, { 1, FP_NODE_NONE, 2 } };
	static const uint8_t expect[] = {
		0x93, 0x01, 0x02, 0x87, /* [1, SAMPLES, {7 keys */
		0x01, 0x00, 0x02, 0x00, 0x03, 0x00, 0x04,
		0x00, 0x05, 0x00, 0x0c, 0xc4, 0x08, /* nodes: 8 bytes */
		0x12, 0x00, 0x00, 0x05,             /* 9 (zigzag 18), none, none, 5 */
		0x02, 0x02, 0x04, 0x06,             /* +1, parent -1, mapping 3 + 1, 6 */
		0x0b, 0xc4, 0x07,                   /* leaves: 7 bytes */
		0x01, 0x03,                         /* thread 0 + 1: 3 leaves */
		0x01, 0x02,                         /* none (0) + 0, odd: count 2 */
		0x17, 0x03,                         /* 11 = 0 + 11, odd: count 3 */
		0x04,                               /* 13 = 11 + 2, even: count 1 */
	};
	struct fp_wire_batch_parts parts;
	struct fp_batch b, d;
	char *buf;
	size_t len, i;

	memset(&b, 0, sizeof(b));
	b.fb_nnodes = 2;
	b.fb_nodes = nodes;
	b.fb_ncounts = 3;
	b.fb_counts = counts;
	CHECK_EQ_INT(fp_wire_encode_batch_parts(&b, FP_FEATURES_KNOWN, &buf, &len, &parts), 0);
	CHECK_EQ_INT(len, sizeof(expect));
	CHECK(len == sizeof(expect) && memcmp(buf, expect, len) == 0);
	CHECK_EQ_INT(parts.wp_nodes, 1 + 2 + 8);
	CHECK_EQ_INT(parts.wp_counts, 1 + 2 + 7);
	CHECK_EQ_INT(parts.wp_other, 14);
	CHECK_EQ_INT(parts.wp_mappings + parts.wp_threads, 0);
	CHECK_EQ_INT(fp_wire_decode_batch(buf, len, &d), 0);
	CHECK_EQ_INT(d.fb_nnodes, 2);
	for (i = 0; i < d.fb_nnodes && i < 2; i++)
		CHECK(d.fb_nodes[i].fn_id == nodes[i].fn_id &&
		      d.fb_nodes[i].fn_parent == nodes[i].fn_parent &&
		      d.fb_nodes[i].fn_frame.ff_mapping == nodes[i].fn_frame.ff_mapping &&
		      d.fb_nodes[i].fn_frame.ff_offset == nodes[i].fn_frame.ff_offset);
	/* Counts come back sorted by thread, then node + 1. */
	CHECK_EQ_INT(d.fb_ncounts, 3);
	if (d.fb_ncounts == 3) {
		CHECK(d.fb_counts[0].fc_node == FP_NODE_NONE && d.fb_counts[0].fc_count == 2);
		CHECK(d.fb_counts[1].fc_node == 10 && d.fb_counts[1].fc_count == 3);
		CHECK(d.fb_counts[2].fc_node == 12 && d.fb_counts[2].fc_count == 1);
		CHECK(d.fb_counts[2].fc_thread == 1);
	}
	fp_batch_fini(&d);
	free(buf);
	/* Without the features: keys 8 and 9, as test_none_is_one_byte. */
	CHECK_EQ_INT(fp_wire_encode_batch_parts(&b, 0, &buf, &len, &parts), 0);
	CHECK_EQ_INT(len, 14 + 2 + 8 + 2 + 9);
	free(buf);
	counts[0].fc_count = 0; /* key 9 carries it; key 11 cannot */
	CHECK_EQ_INT(fp_wire_encode_batch_parts(&b, FP_FEATURE_LEAVES, &buf, &len, &parts),
		     -EINVAL);
}

static void test_ksyms_multipart(void)
{
	/* A snapshot split in three parts, as the agent sends a large one. */
	const size_t total = 2500, per_part = 1000;
	struct fp_ksyms whole, part, d;
	size_t first, got = 0;
	uint32_t p = 0;

	make_ksyms(&whole, 0, 1, 0, total);
	for (first = 0; first < total; first += per_part, p++) {
		size_t n = total - first < per_part ? total - first : per_part;
		int last = first + n == total;
		char *buf;
		size_t len, i;
		int type = 0;

		make_ksyms(&part, p, last, first, n);
		CHECK_EQ_INT(fp_wire_encode_ksyms(&part, &buf, &len), 0);
		CHECK_EQ_INT(fp_wire_peek(buf, len, &type), 0);
		CHECK_EQ_INT(type, FP_MSG_KSYMS);
		CHECK_EQ_INT(fp_wire_decode_ksyms(buf, len, &d), 0);
		CHECK(ksyms_eq(&part, &d));
		CHECK_EQ_INT(d.fs_part, p);
		CHECK_EQ_INT(d.fs_last, last);
		for (i = 0; i < d.fs_nsyms && got + i < total; i++)
			CHECK(d.fs_syms[i].fk_offset == whole.fs_syms[got + i].fk_offset &&
			      strcmp(d.fs_syms[i].fk_name, whole.fs_syms[got + i].fk_name) == 0);
		got += d.fs_nsyms;
		fp_ksyms_fini(&d);
		fp_ksyms_fini(&part);
		free(buf);
	}
	CHECK_EQ_INT(got, total);
	CHECK_EQ_INT(p, 3);
	fp_ksyms_fini(&whole);
}

static void test_ksyms_module_empty_part(void)
{
	struct fp_ksyms k, d;
	char *buf;
	size_t len;

	make_ksyms(&k, 4, 1, 0, 0);
	k.fs_kind = FP_MAP_KMODULE;
	free(k.fs_name);
	k.fs_name = xstrdup("nf_conntrack");
	build_id_fill(&k.fs_build_id, 0, 0);
	CHECK_EQ_INT(fp_wire_encode_ksyms(&k, &buf, &len), 0);
	CHECK_EQ_INT(fp_wire_decode_ksyms(buf, len, &d), 0);
	CHECK(ksyms_eq(&k, &d));
	CHECK(d.fs_syms == NULL);
	fp_ksyms_fini(&d);
	fp_ksyms_fini(&k);
	free(buf);
}

static void test_reply_roundtrip(void)
{
	struct fp_build_id want[3];
	struct fp_reply cases[8], d;
	int i;

	build_id_fill(&want[0], 20, 1);
	build_id_fill(&want[1], 16, 2);
	build_id_fill(&want[2], 1, 3);
	memset(cases, 0, sizeof(cases));
	cases[0] = (struct fp_reply){ .fr_status = FP_REPLY_OK,
				      .fr_seq = 41,
				      .fr_nwant = 3,
				      .fr_want = want };
	cases[1] = (struct fp_reply){ .fr_status = FP_REPLY_NEED_HELLO };
	cases[2] = (struct fp_reply){ .fr_status = FP_REPLY_REJECTED,
				      .fr_error = "count refers to unknown node 12" };
	/* Written: absent (an older server), 0 (nothing yet) and a seq. */
	cases[3] = (struct fp_reply){ .fr_status = FP_REPLY_OK, .fr_seq = 9, .fr_has_written = 1 };
	cases[4] = (struct fp_reply){ .fr_status = FP_REPLY_OK,
				      .fr_seq = 9,
				      .fr_has_written = 1,
				      .fr_written = 8 };
	cases[5] = (struct fp_reply){ .fr_status = FP_REPLY_OK, .fr_features = FP_FEATURES_KNOWN };
	/* Tables still to come (REPLY key 11): one, and the most. */
	cases[6] = (struct fp_reply){ .fr_status = FP_REPLY_OK,
				      .fr_seq = 3,
				      .fr_tables_pending = 1 };
	cases[7] = (struct fp_reply){ .fr_status = FP_REPLY_OK, .fr_tables_pending = UINT32_MAX };
	for (i = 0; i < 8; i++) {
		char *buf;
		size_t len;
		int type = 0;

		CHECK_EQ_INT(fp_wire_encode_reply(&cases[i], &buf, &len), 0);
		CHECK_EQ_INT(fp_wire_peek(buf, len, &type), 0);
		CHECK_EQ_INT(type, FP_MSG_REPLY);
		CHECK_EQ_INT(fp_wire_decode_reply(buf, len, &d), 0);
		CHECK(reply_eq(&cases[i], &d));
		fp_reply_fini(&d);
		free(buf);
	}
}

/* The symbolizer's questions for file bytes and the agent's answers. */
static void test_file_roundtrip(void)
{
	static uint8_t bytes[4096];
	struct fp_range ranges[2];
	struct fp_reply r = { .fr_status = FP_REPLY_OK,
			      .fr_seq = 7,
			      .fr_nranges = 2,
			      .fr_ranges = ranges },
			rd;
	struct fp_file_data cases[3], d;
	char *buf;
	size_t len, i;
	int type;

	for (i = 0; i < sizeof(bytes); i++)
		bytes[i] = (uint8_t)(i * 7);
	build_id_fill(&ranges[0].fg_build_id, 20, 4);
	ranges[0].fg_offset = 0, ranges[0].fg_length = 64;
	build_id_fill(&ranges[1].fg_build_id, 20, 5);
	ranges[1].fg_offset = 0x123456789ull, ranges[1].fg_length = FP_RANGE_MAX;
	CHECK_EQ_INT(fp_wire_encode_reply(&r, &buf, &len), 0);
	CHECK_EQ_INT(fp_wire_decode_reply(buf, len, &rd), 0);
	CHECK(reply_eq(&r, &rd));
	fp_reply_fini(&rd);
	free(buf);

	memset(cases, 0, sizeof(cases));
	for (i = 0; i < 3; i++) {
		cases[i].fd_session = 42 + i;
		build_id_fill(&cases[i].fd_build_id, 20, (uint8_t)(4 + i));
		cases[i].fd_offset = i * 0x1000;
		cases[i].fd_file_size = 1u << 20;
	}
	cases[0].fd_len = sizeof(bytes), cases[0].fd_data = bytes; /* data */
	cases[1].fd_error = 2;                                     /* ENOENT: no data */
	cases[2].fd_offset = 1u << 20;                             /* past the end: empty */
	for (i = 0; i < 3; i++) {
		CHECK_EQ_INT(fp_wire_encode_file(&cases[i], &buf, &len), 0);
		CHECK_EQ_INT(fp_wire_peek(buf, len, &type), 0);
		CHECK_EQ_INT(type, FP_MSG_FILE);
		CHECK_EQ_INT(fp_wire_decode_file(buf, len, &d), 0);
		CHECK(file_eq(&cases[i], &d));
		fp_file_data_fini(&d);
		free(buf);
	}

	/* What the encoders refuse, the decoders would refuse too. */
	cases[1].fd_len = 1, cases[1].fd_data = bytes; /* error and data */
	CHECK_EQ_INT(fp_wire_encode_file(&cases[1], &buf, &len), -EINVAL);
	cases[0].fd_build_id.fb_len = 0;
	CHECK_EQ_INT(fp_wire_encode_file(&cases[0], &buf, &len), -EINVAL);
	ranges[0].fg_length = FP_RANGE_MAX + 1;
	CHECK_EQ_INT(fp_wire_encode_reply(&r, &buf, &len), -EINVAL);
}

/* Unwind tables travel in parts of at most 1 MiB, 64 to a reply (four to
 * an agent of before FP_FEATURE_HELD_TABLES). */
static void test_table_parts(void)
{
	static uint8_t bytes[FP_TABLE_PART_MAX + 1];
	struct fp_table_part parts[FP_TABLE_REPLY_PARTS + 1];
	struct fp_reply r = { .fr_status = FP_REPLY_OK,
			      .fr_seq = 9,
			      .fr_ntables = 4,
			      .fr_tables = parts },
			rd;
	char *buf;
	size_t len, i;

	for (i = 0; i < sizeof(bytes); i++)
		bytes[i] = (uint8_t)(i * 13 + 1);
	for (i = 0; i < FP_TABLE_REPLY_PARTS + 1; i++) {
		build_id_fill(&parts[i].tp_build_id, 20, (uint8_t)(9 + i));
		parts[i].tp_offset = 0;
		parts[i].tp_total = FP_TABLE_PART_MAX;
		parts[i].tp_len = FP_TABLE_PART_MAX;
		parts[i].tp_data = bytes;
	}
	parts[1].tp_offset = 3 * FP_TABLE_PART_MAX, parts[1].tp_total = FP_TABLE_MAX,
	parts[1].tp_len = 17;                         /* a middle part of a large table */
	parts[2].tp_total = 16, parts[2].tp_len = 16; /* a whole small table */
	CHECK_EQ_INT(fp_wire_encode_reply(&r, &buf, &len), 0);
	CHECK(len > 2 * FP_TABLE_PART_MAX && len < FP_WIRE_MAX_MESSAGE);
	CHECK_EQ_INT(fp_wire_decode_reply(buf, len, &rd), 0);
	CHECK(reply_eq(&r, &rd));
	fp_reply_fini(&rd);
	free(buf);

	/* 64 small tables in one reply; 65 are refused (and decoders refuse
	 * them: test_table_part_limit). */
	for (i = 4; i < FP_TABLE_REPLY_PARTS + 1; i++)
		parts[i].tp_total = parts[i].tp_len = 16;
	r.fr_ntables = FP_TABLE_REPLY_PARTS;
	CHECK_EQ_INT(fp_wire_encode_reply(&r, &buf, &len), 0);
	CHECK_EQ_INT(fp_wire_decode_reply(buf, len, &rd), 0);
	CHECK(reply_eq(&r, &rd));
	fp_reply_fini(&rd);
	free(buf);
	/* What the encoder refuses, the decoder refuses too (body cases). */
	r.fr_ntables = FP_TABLE_REPLY_PARTS + 1;
	CHECK_EQ_INT(fp_wire_encode_reply(&r, &buf, &len), -EINVAL);
	r.fr_ntables = 1;
	parts[0].tp_len = FP_TABLE_PART_MAX + 1, parts[0].tp_total = FP_TABLE_MAX;
	CHECK_EQ_INT(fp_wire_encode_reply(&r, &buf, &len), -EINVAL);
	parts[0].tp_len = 8, parts[0].tp_offset = FP_TABLE_MAX - 4;
	CHECK_EQ_INT(fp_wire_encode_reply(&r, &buf, &len), -EINVAL);
	parts[0].tp_offset = 0, parts[0].tp_len = 0;
	CHECK_EQ_INT(fp_wire_encode_reply(&r, &buf, &len), -EINVAL);
}

/* Steady state: every definition was sent before, a batch is counts only.
 * New nodes cost a few bytes more each; this measures both. */
static void test_steady_state_size(void)
{
	struct fp_count counts[100];
	struct fp_node nodes[100];
	struct fp_batch b;
	char *buf, *empty;
	size_t len, empty_len, i;

	memset(&b, 0, sizeof(b));
	b.fb_session = 0x8f3a29c4d1e07b65ull;
	b.fb_seq = 123456;
	b.fb_start_ns = 1700000000000000000ull;
	b.fb_end_ns = b.fb_start_ns + 10000000000ull;
	b.fb_period_ns = 10101010;
	CHECK_EQ_INT(fp_wire_encode_batch(&b, &empty, &empty_len), 0);
	printf("  empty batch: %zu bytes\n", empty_len);

	/* Thread, node and count ids under 128: 3 bytes a triple, plus the
	 * key and a 3-byte array header. */
	for (i = 0; i < 100; i++)
		counts[i] = (struct fp_count){ (uint32_t)(1 + i % 7), (uint32_t)i,
					       (uint32_t)(1 + i % 100) };
	b.fb_ncounts = 100;
	b.fb_counts = counts;
	CHECK_EQ_INT(fp_wire_encode_batch(&b, &buf, &len), 0);
	printf("  100 count triples, ids < 128: %zu bytes, %.2f bytes/triple (%.2f with the "
	       "fixed fields)\n",
	       len - empty_len, (double)(len - empty_len) / 100, (double)len / 100);
	CHECK_EQ_INT(len - empty_len, 1 + 3 + 100 * 3);
	CHECK(len <= 100 * 5);
	free(buf);

	/* Node ids past 127 (under 65536): 3 more bytes for the node. */
	for (i = 0; i < 100; i++)
		counts[i].fc_node = (uint32_t)(1000 + i * 37);
	CHECK_EQ_INT(fp_wire_encode_batch(&b, &buf, &len), 0);
	printf("  100 count triples, node ids < 65536: %.2f bytes/triple\n",
	       (double)(len - empty_len) / 100);
	CHECK(len - empty_len <= 1 + 3 + 100 * 5);
	free(buf);
	b.fb_ncounts = 0;
	b.fb_counts = NULL;

	/* A new 100-frame path, ids in sequence, each after its parent: one
	 * byte each for id delta, parent delta and mapping, then the offset
	 * (5 bytes at 32 bits, 3 under 65536). */
	for (i = 0; i < 100; i++)
		nodes[i] = (struct fp_node){ (uint32_t)(1000 + i),
					     i ? (uint32_t)(1000 + i - 1) : FP_NODE_NONE,
					     { (uint32_t)(1 + i % 3), 0x28000 + i * 0x1234 } };
	b.fb_nnodes = 100;
	b.fb_nodes = nodes;
	CHECK_EQ_INT(fp_wire_encode_batch(&b, &buf, &len), 0);
	printf("  100 nodes, 32-bit offsets: %.2f bytes/node\n", (double)(len - empty_len) / 100);
	/* The first id delta (1000) takes 3 bytes, the rest 1. */
	CHECK_EQ_INT(len - empty_len, 1 + 3 + 2 + 100 * 8);
	free(buf);
	for (i = 0; i < 100; i++)
		nodes[i].fn_frame.ff_offset = 0x100 + i * 0x123;
	CHECK_EQ_INT(fp_wire_encode_batch(&b, &buf, &len), 0);
	printf("  100 nodes, 16-bit offsets: %.2f bytes/node\n", (double)(len - empty_len) / 100);
	CHECK_EQ_INT(len - empty_len, 1 + 3 + 2 + 100 * 6);
	free(buf);
	free(empty);
}

/* ---- Hostile input ------------------------------------------------------- */

static void test_truncations(void)
{
	struct sample_msg msgs[4];
	int i;

	encode_samples(msgs);
	for (i = 0; i < 4; i++) {
		size_t n;

		CHECK_EQ_INT(decode_as(msgs[i].sm_type, msgs[i].sm_buf, msgs[i].sm_len), 0);
		for (n = 0; n < msgs[i].sm_len; n++) {
			/* A heap copy of exactly n bytes, so ASan sees any overread. */
			char *cut = malloc(n ? n : 1);
			int err;

			memcpy(cut, msgs[i].sm_buf, n);
			err = decode_as(msgs[i].sm_type, cut, n);
			if (err != FP_WIRE_EMALFORMED)
				fprintf(stderr, "  type %d cut at %zu/%zu: %d\n", msgs[i].sm_type,
					n, msgs[i].sm_len, err);
			CHECK_EQ_INT(err, FP_WIRE_EMALFORMED);
			free(cut);
		}
	}
	free_samples(msgs);
}

static int decode_roundtrip_stable(int type, const void *buf, size_t len);

/* Every single-byte change of each valid message: no crash, and whatever
 * still decodes must re-encode to something that decodes the same. */
static void test_byte_mutations(void)
{
	static const uint8_t values[] = { 0x00, 0x01, 0x7f, 0x80, 0x90, 0xa0, 0xc0, 0xc1, 0xc2,
					  0xc4, 0xcc, 0xcf, 0xd4, 0xdc, 0xdd, 0xdf, 0xe0, 0xff };
	struct sample_msg msgs[4];
	int i;

	encode_samples(msgs);
	for (i = 0; i < 4; i++) {
		char *copy = malloc(msgs[i].sm_len);
		size_t pos, v;

		for (pos = 0; pos < msgs[i].sm_len; pos++) {
			for (v = 0; v < sizeof(values) + 1; v++) {
				memcpy(copy, msgs[i].sm_buf, msgs[i].sm_len);
				copy[pos] = v < sizeof(values) ? (char)values[v]
							       : (char)(copy[pos] ^ 1);
				CHECK(decode_roundtrip_stable(msgs[i].sm_type, copy,
							      msgs[i].sm_len));
			}
		}
		free(copy);
	}
	free_samples(msgs);
}

/* Random bytes, half of them behind a valid envelope.  Whatever the body,
 * every decoder agrees with fp_wire_peek on the envelope, refuses a type
 * that is not its own with FP_WIRE_ETYPE, and answers its own type with 0
 * or a body error; the mix of outcomes shows the body checks were reached. */
static void test_random_garbage(void)
{
	uint64_t state = 0x9e3779b97f4a7c15ull;
	uint8_t buf[96];
	int iter, bad = 0, enveloped = 0, outcomes[8] = { 0 };

	for (iter = 0; iter < 40000; iter++) {
		size_t len, i;
		int type, peeked = 0, want_type = 0, p;

		state = state * 6364136223846793005ull + 1442695040888963407ull;
		len = (size_t)(state >> 33) % sizeof(buf);
		for (i = 0; i < len; i++) {
			state = state * 6364136223846793005ull + 1442695040888963407ull;
			buf[i] = (uint8_t)(state >> 56);
		}
		/* Half of them get a valid envelope, to reach the body checks. */
		if (iter % 2 && len >= 4) {
			buf[0] = 0x93;
			buf[1] = 0x01;
			buf[2] = (uint8_t)(1 + iter / 2 % 4);
			buf[3] = (uint8_t)(0x80 | (buf[3] & 0x0f));
			want_type = buf[2];
			enveloped++;
		}
		p = fp_wire_peek(buf, len, &peeked);
		if (want_type && (p != 0 || peeked != want_type))
			bad++;
		if (p != 0 && p != FP_WIRE_EMALFORMED && p != FP_WIRE_EVERSION &&
		    p != FP_WIRE_ETYPE)
			bad++;
		for (type = FP_MSG_HELLO; type <= FP_MSG_FILE; type++) {
			int err = decode_as(type, buf, len), ok;

			if (p != 0)
				ok = err == p;
			else if (type != peeked)
				ok = err == FP_WIRE_ETYPE;
			else
				ok = err == 0 || err == FP_WIRE_EMALFORMED ||
				     err == FP_WIRE_EFIELD || err == FP_WIRE_ETOOBIG;
			if (ok && p == 0 && type == peeked)
				outcomes[-err % 8]++;
			if (!ok && !bad++) /* the first one, to debug */
				fprintf(stderr, "  iteration %d, type %d: %s (peek %d)\n", iter,
					type, fp_wire_strerror(err), p);
		}
	}
	CHECK_EQ_INT(bad, 0);
	CHECK(enveloped > 18000);
	/* Decoding as its own type reached the body: a truncated or trailing
	 * body and a body missing its fields were both seen. */
	CHECK(outcomes[-FP_WIRE_EMALFORMED % 8] > 15000);
	CHECK(outcomes[-FP_WIRE_EFIELD % 8] > 20);
	CHECK_EQ_INT(decode_as(FP_MSG_HELLO, "", 0), FP_WIRE_EMALFORMED);
	CHECK_EQ_INT(decode_as(FP_MSG_HELLO, NULL, 0), FP_WIRE_EMALFORMED);
}

/* Hand-made messages.  Bodies are given in hex; the envelope is added. */
struct body_case {
	int bc_type;
	int bc_nkeys;
	const char *bc_body;
	int bc_err;
	const char *bc_what;
};

#define HELLO_BASE "01 01 02 a1 68 03 a1 62 04 a1 6b 05 c4 00 06 a1 76 07 63 08 04"
#define BATCH_BASE "01 01 02 01 03 00 04 00 05 00"
#define KSYMS_BASE "01 01 02 01 03 c4 00 04 a1 6b 05 00 06 c3"
#define REPLY_BASE "01 00 02 00"
#define FILE_BASE "01 2a 02 c4 02 aa bb 03 00 04 cd 10 00"
#define BID21 "c4 15 00 01 02 03 04 05 06 07 08 09 0a 0b 0c 0d 0e 0f 10 11 12 13 14"
#define BID20 "c4 14 00 01 02 03 04 05 06 07 08 09 0a 0b 0c 0d 0e 0f 10 11 12 13"

static const struct body_case body_cases[] = {
	{ FP_MSG_HELLO, 8, HELLO_BASE, 0, "hello baseline" },
	{ FP_MSG_HELLO, 7, "02 a1 68 03 a1 62 04 a1 6b 05 c4 00 06 a1 76 07 63 08 04",
	  FP_WIRE_EFIELD, "hello without session" },
	{ FP_MSG_HELLO, 7, "01 01 02 a1 68 03 a1 62 04 a1 6b 06 a1 76 07 63 08 04", FP_WIRE_EFIELD,
	  "hello without build-ID" },
	{ FP_MSG_HELLO, 8, "01 a1 31 02 a1 68 03 a1 62 04 a1 6b 05 c4 00 06 a1 76 07 63 08 04",
	  FP_WIRE_EFIELD, "session as a string" },
	{ FP_MSG_HELLO, 8, "01 ff 02 a1 68 03 a1 62 04 a1 6b 05 c4 00 06 a1 76 07 63 08 04",
	  FP_WIRE_EFIELD, "negative session" },
	{ FP_MSG_HELLO, 8, "01 01 02 c4 01 68 03 a1 62 04 a1 6b 05 c4 00 06 a1 76 07 63 08 04",
	  FP_WIRE_EFIELD, "host as bin" },
	{ FP_MSG_HELLO, 8, "01 01 02 a3 61 00 62 03 a1 62 04 a1 6b 05 c4 00 06 a1 76 07 63 08 04",
	  FP_WIRE_EFIELD, "NUL inside host" },
	{ FP_MSG_HELLO, 8, "01 01 02 c0 03 a1 62 04 a1 6b 05 c4 00 06 a1 76 07 63 08 04",
	  FP_WIRE_EFIELD, "host nil" },
	{ FP_MSG_HELLO, 8, "01 01 02 a1 68 03 a1 62 04 a1 6b 05 " BID21 " 06 a1 76 07 63 08 04",
	  FP_WIRE_ETOOBIG, "21-byte build-ID" },
	{ FP_MSG_HELLO, 8, "01 01 02 a1 68 03 a1 62 04 a1 6b 05 " BID20 " 06 a1 76 07 63 08 04", 0,
	  "20-byte build-ID" },
	{ FP_MSG_HELLO, 8, "01 01 02 a1 68 03 a1 62 04 a1 6b 05 a0 06 a1 76 07 63 08 04",
	  FP_WIRE_EFIELD, "build-ID as str" },
	{ FP_MSG_HELLO, 8,
	  "01 01 02 a1 68 03 a1 62 04 a1 6b 05 c4 00 06 a1 76 07 cf 00 00 00 01 00 00 00 00 08 04",
	  FP_WIRE_EFIELD, "frequency over 32 bits" },
	{ FP_MSG_HELLO, 8,
	  "01 01 02 a1 68 03 a1 62 04 a1 6b 05 c4 00 06 a1 76 07 ca 42 c6 00 00 08 04",
	  FP_WIRE_EFIELD, "frequency as float" },
	{ FP_MSG_HELLO, 8, "01 01 02 a1 68 03 a1 62 04 a1 6b 05 c4 00 06 a1 76 07 c3 08 04",
	  FP_WIRE_EFIELD, "frequency as bool" },
	{ FP_MSG_HELLO, 9, HELLO_BASE " 0b 94 c4 02 aa bb 05 c4 01 cc cf ff ff ff ff ff ff ff ff",
	  0, "two held tables" },
	{ FP_MSG_HELLO, 9, HELLO_BASE " 0b 90", 0, "no held tables spelled out" },
	{ FP_MSG_HELLO, 9, HELLO_BASE " 0b 93 c4 02 aa bb 05 c4 01 cc", FP_WIRE_EFIELD,
	  "held tables: odd list" },
	{ FP_MSG_HELLO, 9, HELLO_BASE " 0b 92 c4 00 05", FP_WIRE_EFIELD,
	  "held table without build-ID" },
	{ FP_MSG_HELLO, 9, HELLO_BASE " 0b 92 " BID21 " 05", FP_WIRE_ETOOBIG,
	  "held table of a 21-byte build-ID" },
	{ FP_MSG_HELLO, 9, HELLO_BASE " 0b 92 a2 aa bb 05", FP_WIRE_EFIELD,
	  "held build-ID as str" },
	{ FP_MSG_HELLO, 9, HELLO_BASE " 0b 92 c4 02 aa bb ff", FP_WIRE_EFIELD, "held id negative" },
	{ FP_MSG_HELLO, 9, HELLO_BASE " 0b 92 c4 02 aa bb c4 01 05", FP_WIRE_EFIELD,
	  "held id as bin" },
	{ FP_MSG_HELLO, 9, HELLO_BASE " 0b 81 c4 02 aa bb 05", FP_WIRE_EFIELD,
	  "held tables as map" },
	{ FP_MSG_HELLO, 9, HELLO_BASE " 09 94 a1 61 a1 62 a1 63 a0", 0, "two labels" },
	{ FP_MSG_HELLO, 9, HELLO_BASE " 09 93 a1 61 a1 62 a1 63", FP_WIRE_EFIELD, "odd labels" },
	{ FP_MSG_HELLO, 9, HELLO_BASE " 09 81 a1 61 a1 62", FP_WIRE_EFIELD, "labels as map" },
	{ FP_MSG_HELLO, 9, HELLO_BASE " 09 92 a1 61 05", FP_WIRE_EFIELD, "label value int" },
	{ FP_MSG_HELLO, 9, HELLO_BASE " 09 92 a1 61 a2 00 62", FP_WIRE_EFIELD, "NUL in label" },
	{ FP_MSG_HELLO, 9, HELLO_BASE " 01 02", FP_WIRE_EFIELD, "duplicate key" },
	{ FP_MSG_HELLO, 9, HELLO_BASE " 7f 93 01 02 03", 0, "unknown key 127" },
	{ FP_MSG_HELLO, 9, HELLO_BASE " cd 01 2c c0", 0, "unknown key 300" },
	{ FP_MSG_HELLO, 10, HELLO_BASE " 7e c0 7e c0", 0, "repeated unknown key" },
	{ FP_MSG_HELLO, 9, HELLO_BASE " 00 a1 78", 0, "key 0 is unknown" },
	{ FP_MSG_HELLO, 9, HELLO_BASE " a1 78 01", FP_WIRE_EFIELD, "string key" },
	{ FP_MSG_HELLO, 9, HELLO_BASE " ff 01", FP_WIRE_EFIELD, "negative key" },
	{ FP_MSG_HELLO, 9, HELLO_BASE " 63 91 91 91 91 91 90", 0, "nesting of 8" },
	{ FP_MSG_HELLO, 9, HELLO_BASE " 63 91 91 91 91 91 91 90", FP_WIRE_EMALFORMED,
	  "nesting of 9" },
	{ FP_MSG_HELLO, 9, HELLO_BASE " 63 d4 01 00", FP_WIRE_EMALFORMED, "fixext" },
	{ FP_MSG_HELLO, 9, HELLO_BASE " 63 c7 01 05 00", FP_WIRE_EMALFORMED, "ext8" },
	{ FP_MSG_HELLO, 9, HELLO_BASE " 63 c1", FP_WIRE_EMALFORMED, "0xc1" },
	{ FP_MSG_HELLO, 9, HELLO_BASE " 63 cb 00 00 00 00 00 00 00 00", 0, "unknown float" },

	{ FP_MSG_SAMPLES, 5, BATCH_BASE, 0, "batch baseline" },
	{ FP_MSG_SAMPLES, 4, "01 01 03 00 04 00 05 00", FP_WIRE_EFIELD, "batch without seq" },
	{ FP_MSG_SAMPLES, 5, "01 01 02 d0 01 03 00 04 00 05 00", 0, "seq as int8" },
	{ FP_MSG_SAMPLES, 5, "01 01 02 d0 ff 03 00 04 00 05 00", FP_WIRE_EFIELD, "seq -1" },
	{ FP_MSG_SAMPLES, 6, BATCH_BASE " 06 91 94 01 00 c4 00 a1 70", 0, "one mapping" },
	{ FP_MSG_SAMPLES, 6, BATCH_BASE " 0d 94 01 ff 03 cd 03 e8", 0,
	  "one off-CPU count (PROTOCOL.md's example)" },
	{ FP_MSG_SAMPLES, 7, BATCH_BASE " 09 93 01 ff 02 0d 94 01 ff 05 cd 03 e8", 0,
	  "CPU and off-CPU counts" },
	{ FP_MSG_SAMPLES, 6, BATCH_BASE " 0d 94 01 ff 05 00", FP_WIRE_EFIELD, "off-CPU time 0" },
	{ FP_MSG_SAMPLES, 6, BATCH_BASE " 0d 94 01 ff 00 01", FP_WIRE_EFIELD, "off-CPU waits 0" },
	{ FP_MSG_SAMPLES, 6, BATCH_BASE " 0d 94 01 ff 05 ff", FP_WIRE_EFIELD, "off-CPU time -1" },
	{ FP_MSG_SAMPLES, 6, BATCH_BASE " 0d 93 01 ff 05", FP_WIRE_EFIELD, "off-CPU tuple short" },
	{ FP_MSG_SAMPLES, 6, BATCH_BASE " 0d 90", FP_WIRE_EFIELD, "no off-CPU counts spelled out" },
	{ FP_MSG_SAMPLES, 6, BATCH_BASE " 06 91 95 01 00 c4 00 a1 70 c0", FP_WIRE_EFIELD,
	  "user mapping with a fifth element (positions 4-7 are Python's)" },
	{ FP_MSG_SAMPLES, 6, BATCH_BASE " 06 91 98 01 00 c4 00 a1 70 a1 66 01 02 c4 00",
	  FP_WIRE_EFIELD, "user mapping with Python fields" },
	{ FP_MSG_SAMPLES, 6, BATCH_BASE " 06 91 98 01 01 c4 00 a1 70 a1 66 01 02 c4 00",
	  FP_WIRE_EFIELD, "kernel mapping with Python fields" },
	{ FP_MSG_SAMPLES, 6, BATCH_BASE " 06 91 98 01 03 c4 00 a1 70 a1 66 01 02 c4 00", 0,
	  "Python mapping" },
	{ FP_MSG_SAMPLES, 6, BATCH_BASE " 06 91 98 01 03 c4 00 a1 70 a0 00 01 c4 02 01 00", 0,
	  "Python mapping, lnotab, empty qualname, line 0" },
	{ FP_MSG_SAMPLES, 6, BATCH_BASE " 06 91 99 01 03 c4 00 a1 70 a1 66 01 02 c4 00 c0", 0,
	  "Python mapping with a ninth element" },
	{ FP_MSG_SAMPLES, 6, BATCH_BASE " 06 91 94 01 03 c4 00 a1 70", FP_WIRE_EFIELD,
	  "Python mapping of 4 elements" },
	{ FP_MSG_SAMPLES, 6, BATCH_BASE " 06 91 97 01 03 c4 00 a1 70 a1 66 01 02", FP_WIRE_EFIELD,
	  "Python mapping without its table" },
	{ FP_MSG_SAMPLES, 6, BATCH_BASE " 06 91 98 01 03 c4 01 aa a1 70 a1 66 01 02 c4 00",
	  FP_WIRE_EFIELD, "Python mapping with a build-ID" },
	{ FP_MSG_SAMPLES, 6, BATCH_BASE " 06 91 98 01 03 c4 00 a1 70 a1 66 01 00 c4 00",
	  FP_WIRE_EFIELD, "Python line-table format 0" },
	{ FP_MSG_SAMPLES, 6, BATCH_BASE " 06 91 98 01 03 c4 00 a1 70 a1 66 01 03 c4 00",
	  FP_WIRE_EFIELD, "Python line-table format 3" },
	{ FP_MSG_SAMPLES, 6,
	  BATCH_BASE " 06 91 98 01 03 c4 00 a1 70 a1 66 01 cf 00 00 00 01 00 00 00 02 c4 00",
	  FP_WIRE_EFIELD, "Python line-table format 2 + 2^32" },
	{ FP_MSG_SAMPLES, 6, BATCH_BASE " 06 91 98 01 03 c4 00 a1 70 a1 66 01 02 a1 00",
	  FP_WIRE_EFIELD, "Python line table as str" },
	{ FP_MSG_SAMPLES, 6, BATCH_BASE " 06 91 98 01 03 c4 00 a1 70 c4 01 66 01 02 c4 00",
	  FP_WIRE_EFIELD, "Python qualname as bin" },
	{ FP_MSG_SAMPLES, 6, BATCH_BASE " 06 91 98 01 03 c4 00 a1 70 a2 66 00 01 02 c4 00",
	  FP_WIRE_EFIELD, "Python qualname with a NUL" },
	{ FP_MSG_SAMPLES, 6, BATCH_BASE " 06 91 98 01 03 c4 00 a1 70 a1 66 ff 02 c4 00",
	  FP_WIRE_EFIELD, "Python firstlineno -1" },
	{ FP_MSG_SAMPLES, 6,
	  BATCH_BASE " 06 91 98 01 03 c4 00 a1 70 a1 66 cf 00 00 00 01 00 00 00 00 02 c4 00",
	  FP_WIRE_EFIELD, "Python firstlineno 2^32" },
	{ FP_MSG_SAMPLES, 6, BATCH_BASE " 06 91 98 01 03 c4 00 a1 70 a1 66 c0 02 c4 00",
	  FP_WIRE_EFIELD, "Python firstlineno nil" },
	{ FP_MSG_SAMPLES, 6, BATCH_BASE " 06 91 93 01 00 c4 00", FP_WIRE_EFIELD,
	  "mapping too short" },
	{ FP_MSG_SAMPLES, 6, BATCH_BASE " 06 91 94 01 04 c4 00 a1 70", FP_WIRE_EFIELD,
	  "mapping kind 4" },
	{ FP_MSG_SAMPLES, 6, BATCH_BASE " 06 91 94 ce ff ff ff ff 00 c4 00 a1 70", FP_WIRE_EFIELD,
	  "mapping id FP_MAPPING_NONE" },
	{ FP_MSG_SAMPLES, 6, BATCH_BASE " 06 91 94 01 00 c4 00 07", FP_WIRE_EFIELD,
	  "mapping path int" },
	{ FP_MSG_SAMPLES, 6, BATCH_BASE " 06 91 94 01 00 " BID21 " a1 70", FP_WIRE_ETOOBIG,
	  "mapping build-ID 21 bytes" },
	{ FP_MSG_SAMPLES, 6, BATCH_BASE " 06 81 01 02", FP_WIRE_EFIELD, "mappings as map" },
	{ FP_MSG_SAMPLES, 6, BATCH_BASE " 06 91 01", FP_WIRE_EFIELD, "mapping not an array" },
	{ FP_MSG_SAMPLES, 6, BATCH_BASE " 06 90", 0, "empty mappings" },
	{ FP_MSG_SAMPLES, 6, BATCH_BASE " 07 91 97 01 02 03 00 a4 63 6f 6d 6d a1 70 a0", 0,
	  "one thread" },
	{ FP_MSG_SAMPLES, 6,
	  BATCH_BASE
	  " 07 91 97 01 02 03 00 af 61 61 61 61 61 61 61 61 61 61 61 61 61 61 61 a1 70 a0",
	  0, "comm of 15" },
	{ FP_MSG_SAMPLES, 6,
	  BATCH_BASE
	  " 07 91 97 01 02 03 00 b0 61 61 61 61 61 61 61 61 61 61 61 61 61 61 61 61 a1 70 a0",
	  FP_WIRE_ETOOBIG, "comm of 16" },
	{ FP_MSG_SAMPLES, 6,
	  BATCH_BASE
	  " 07 91 97 01 02 03 00 a1 70 b0 61 61 61 61 61 61 61 61 61 61 61 61 61 61 61 61 a0",
	  FP_WIRE_ETOOBIG, "process name of 16" },
	{ FP_MSG_SAMPLES, 6, BATCH_BASE " 07 91 97 01 02 03 00 a2 00 61 a1 70 a0", FP_WIRE_EFIELD,
	  "NUL in comm" },
	{ FP_MSG_SAMPLES, 6, BATCH_BASE " 07 91 97 01 02 03 ff a1 63 a1 70 a0", FP_WIRE_EFIELD,
	  "negative cgroup" },
	{ FP_MSG_SAMPLES, 6,
	  BATCH_BASE " 07 91 97 01 cf 00 00 00 01 00 00 00 00 03 00 a1 63 a1 70 a0", FP_WIRE_EFIELD,
	  "pid over 32 bits" },
	{ FP_MSG_SAMPLES, 6, BATCH_BASE " 07 91 96 01 02 03 00 a1 63 a1 70", FP_WIRE_EFIELD,
	  "thread too short" },
	/* nodes: [id delta, parent delta (0: none), mapping (-1: none), offset, ...] */
	{ FP_MSG_SAMPLES, 6, BATCH_BASE " 08 94 00 00 01 10", 0, "one node" },
	{ FP_MSG_SAMPLES, 6, BATCH_BASE " 08 90", 0, "empty nodes" },
	{ FP_MSG_SAMPLES, 6, BATCH_BASE " 08 98 05 00 ff 20 01 01 01 cf ff ff ff ff ff ff ff ff", 0,
	  "unmapped root, child with offset 2^64-1" },
	{ FP_MSG_SAMPLES, 6, BATCH_BASE " 08 98 0a 00 01 00 fd 00 01 00", 0, "negative id delta" },
	{ FP_MSG_SAMPLES, 6, BATCH_BASE " 08 94 05 05 01 10", 0, "parent 0" },
	{ FP_MSG_SAMPLES, 6, BATCH_BASE " 08 94 05 fe 01 10", 0, "negative parent delta" },
	{ FP_MSG_SAMPLES, 6, BATCH_BASE " 08 94 ce ff ff ff fe 00 01 10", 0, "id 2^32-2" },
	{ FP_MSG_SAMPLES, 6, BATCH_BASE " 08 94 00 d3 ff ff ff ff 00 00 00 02 01 10", 0,
	  "parent 2^32-2" },
	{ FP_MSG_SAMPLES, 6, BATCH_BASE " 08 94 d0 05 d0 05 d0 01 d0 10", 0,
	  "node fields as int8" },
	{ FP_MSG_SAMPLES, 6, BATCH_BASE " 08 93 00 00 01", FP_WIRE_EFIELD, "3 node elements" },
	{ FP_MSG_SAMPLES, 6, BATCH_BASE " 08 95 00 00 01 10 00", FP_WIRE_EFIELD,
	  "5 node elements" },
	{ FP_MSG_SAMPLES, 6, BATCH_BASE " 08 97 00 00 01 10 01 01 01", FP_WIRE_EFIELD,
	  "7 node elements" },
	{ FP_MSG_SAMPLES, 6, BATCH_BASE " 08 94 ff 00 01 10", FP_WIRE_EFIELD, "first id -1" },
	{ FP_MSG_SAMPLES, 6, BATCH_BASE " 08 98 02 00 01 10 fd 00 01 10", FP_WIRE_EFIELD,
	  "id delta to -1" },
	{ FP_MSG_SAMPLES, 6, BATCH_BASE " 08 94 ce ff ff ff ff 00 01 10", FP_WIRE_EFIELD,
	  "id 2^32-1 (FP_NODE_NONE)" },
	{ FP_MSG_SAMPLES, 6, BATCH_BASE " 08 98 ce ff ff ff fe 00 01 10 01 00 01 10",
	  FP_WIRE_EFIELD, "id delta to 2^32-1" },
	{ FP_MSG_SAMPLES, 6, BATCH_BASE " 08 94 cf 00 00 00 01 00 00 00 00 00 01 10",
	  FP_WIRE_EFIELD, "id delta 2^32" },
	{ FP_MSG_SAMPLES, 6, BATCH_BASE " 08 94 cf ff ff ff ff ff ff ff ff 00 01 10",
	  FP_WIRE_EFIELD, "id delta 2^64-1" },
	{ FP_MSG_SAMPLES, 6, BATCH_BASE " 08 94 d3 80 00 00 00 00 00 00 00 00 01 10",
	  FP_WIRE_EFIELD, "id delta -2^63" },
	{ FP_MSG_SAMPLES, 6, BATCH_BASE " 08 94 05 06 01 10", FP_WIRE_EFIELD, "parent -1" },
	{ FP_MSG_SAMPLES, 6, BATCH_BASE " 08 94 00 d3 ff ff ff ff 00 00 00 01 01 10",
	  FP_WIRE_EFIELD, "parent 2^32-1 (FP_NODE_NONE)" },
	{ FP_MSG_SAMPLES, 6, BATCH_BASE " 08 94 00 cf 00 00 00 01 00 00 00 00 01 10",
	  FP_WIRE_EFIELD, "parent delta 2^32" },
	{ FP_MSG_SAMPLES, 6, BATCH_BASE " 08 94 00 d3 80 00 00 00 00 00 00 00 01 10",
	  FP_WIRE_EFIELD, "parent delta -2^63" },
	{ FP_MSG_SAMPLES, 6, BATCH_BASE " 08 94 fb cf 7f ff ff ff ff ff ff ff 01 10",
	  FP_WIRE_EFIELD, "id -5, parent delta 2^63-1" },
	{ FP_MSG_SAMPLES, 6, BATCH_BASE " 08 94 00 cf ff ff ff ff ff ff ff ff 01 10",
	  FP_WIRE_EFIELD, "parent delta 2^64-1" },
	{ FP_MSG_SAMPLES, 6, BATCH_BASE " 08 94 00 00 fe 10", FP_WIRE_EFIELD, "mapping -2" },
	/* The decoders take any spelling of an integer (section 1 of
	 * PROTOCOL.md), -1 included; encoders write it as the one byte 0xff. */
	{ FP_MSG_SAMPLES, 6, BATCH_BASE " 08 94 00 00 d0 ff 10", 0, "mapping -1 as int8" },
	{ FP_MSG_SAMPLES, 6, BATCH_BASE " 08 94 00 00 d3 ff ff ff ff ff ff ff ff 10", 0,
	  "mapping -1 as int64" },
	{ FP_MSG_SAMPLES, 6, BATCH_BASE " 08 94 00 00 ce ff ff ff ff 10", FP_WIRE_EFIELD,
	  "mapping 0xffffffff" },
	{ FP_MSG_SAMPLES, 6, BATCH_BASE " 08 94 00 00 c0 10", FP_WIRE_EFIELD, "mapping nil" },
	{ FP_MSG_SAMPLES, 6, BATCH_BASE " 08 94 00 00 01 ff", FP_WIRE_EFIELD, "negative offset" },
	{ FP_MSG_SAMPLES, 6, BATCH_BASE " 08 94 00 00 01 d3 80 00 00 00 00 00 00 00",
	  FP_WIRE_EFIELD, "offset -2^63" },
	{ FP_MSG_SAMPLES, 6, BATCH_BASE " 08 94 00 00 01 ca 3f 80 00 00", FP_WIRE_EFIELD,
	  "offset as float" },
	{ FP_MSG_SAMPLES, 6, BATCH_BASE " 08 a0", FP_WIRE_EFIELD, "nodes as a string" },
	{ FP_MSG_SAMPLES, 6, BATCH_BASE " 08 81 01 02", FP_WIRE_EFIELD, "nodes as a map" },
	{ FP_MSG_SAMPLES, 6, BATCH_BASE " 08 91 94 00 00 01 10", FP_WIRE_EFIELD,
	  "nodes as records" },
	{ FP_MSG_SAMPLES, 6, BATCH_BASE " 08 94 91 00 00 01 10", FP_WIRE_EFIELD,
	  "id delta an array" },
	{ FP_MSG_SAMPLES, 6, BATCH_BASE " 08 94 ca 3f 80 00 00 00 01 10", FP_WIRE_EFIELD,
	  "id delta as float" },
	{ FP_MSG_SAMPLES, 6, BATCH_BASE " 08 94 c0 00 01 10", FP_WIRE_EFIELD, "id delta nil" },
	{ FP_MSG_SAMPLES, 6, BATCH_BASE " 08 94 00 c2 01 10", FP_WIRE_EFIELD,
	  "parent delta as bool" },
	{ FP_MSG_SAMPLES, 6, BATCH_BASE " 08 94 00 00 a1 31 10", FP_WIRE_EFIELD,
	  "mapping as a string" },

	/* counts: [thread, node (-1: none), count, ...] */
	{ FP_MSG_SAMPLES, 6, BATCH_BASE " 09 93 01 02 03", 0, "one count" },
	{ FP_MSG_SAMPLES, 6, BATCH_BASE " 09 96 01 02 03 01 ff ce ff ff ff ff", 0,
	  "no frames, count 2^32-1" },
	{ FP_MSG_SAMPLES, 6, BATCH_BASE " 09 93 ce ff ff ff ff ce ff ff ff fe 01", 0,
	  "thread 2^32-1, node 2^32-2" },
	{ FP_MSG_SAMPLES, 6, BATCH_BASE " 09 90", 0, "empty counts" },
	{ FP_MSG_SAMPLES, 7, BATCH_BASE " 08 94 00 00 01 10 09 93 01 00 01", 0,
	  "a node and its count" },
	{ FP_MSG_SAMPLES, 6, BATCH_BASE " 09 92 01 02", FP_WIRE_EFIELD, "2 count elements" },
	{ FP_MSG_SAMPLES, 6, BATCH_BASE " 09 94 01 02 03 04", FP_WIRE_EFIELD, "4 count elements" },
	{ FP_MSG_SAMPLES, 6, BATCH_BASE " 09 95 01 02 03 04 05", FP_WIRE_EFIELD,
	  "5 count elements" },
	{ FP_MSG_SAMPLES, 6, BATCH_BASE " 09 93 01 fe 03", FP_WIRE_EFIELD, "count node -2" },
	{ FP_MSG_SAMPLES, 6, BATCH_BASE " 09 93 01 d0 ff 03", 0, "count node -1 as int8" },
	{ FP_MSG_SAMPLES, 6, BATCH_BASE " 09 93 01 ce ff ff ff ff 03", FP_WIRE_EFIELD,
	  "count node 0xffffffff" },
	{ FP_MSG_SAMPLES, 6, BATCH_BASE " 09 93 01 cf 00 00 00 01 00 00 00 00 03", FP_WIRE_EFIELD,
	  "count node over 32 bits" },
	{ FP_MSG_SAMPLES, 6, BATCH_BASE " 09 93 01 02 ff", FP_WIRE_EFIELD, "negative count" },
	{ FP_MSG_SAMPLES, 6, BATCH_BASE " 09 93 ff 02 03", FP_WIRE_EFIELD, "thread -1" },
	{ FP_MSG_SAMPLES, 6, BATCH_BASE " 09 93 01 02 cf 00 00 00 01 00 00 00 00", FP_WIRE_EFIELD,
	  "count over 32 bits" },
	{ FP_MSG_SAMPLES, 6, BATCH_BASE " 09 93 01 c0 03", FP_WIRE_EFIELD, "nil node" },
	{ FP_MSG_SAMPLES, 6, BATCH_BASE " 09 93 91 01 02 03", FP_WIRE_EFIELD, "nested counts" },
	{ FP_MSG_SAMPLES, 6, BATCH_BASE " 09 a0", FP_WIRE_EFIELD, "counts as a string" },
	{ FP_MSG_SAMPLES, 6, BATCH_BASE " 0a 94 01 02 03 04", 0, "lost counters" },
	{ FP_MSG_SAMPLES, 6, BATCH_BASE " 0a 93 01 02 03", FP_WIRE_EFIELD, "lost too short" },
	{ FP_MSG_SAMPLES, 6, BATCH_BASE " 0a 01", FP_WIRE_EFIELD, "lost not an array" },

	{ FP_MSG_KSYMS, 6, KSYMS_BASE, 0, "ksyms baseline" },
	{ FP_MSG_KSYMS, 6, "01 01 02 00 03 c4 00 04 a1 6b 05 00 06 c3", FP_WIRE_EFIELD,
	  "ksyms of a user mapping" },
	{ FP_MSG_KSYMS, 6, "01 01 02 03 03 c4 00 04 a1 6b 05 00 06 c3", FP_WIRE_EFIELD,
	  "ksyms kind 3" },
	{ FP_MSG_KSYMS, 6, "01 01 02 01 03 c4 00 04 a1 6b 05 00 06 01", FP_WIRE_EFIELD,
	  "last as int" },
	{ FP_MSG_KSYMS, 5, "01 01 02 01 03 c4 00 04 a1 6b 06 c3", FP_WIRE_EFIELD,
	  "ksyms without part" },
	{ FP_MSG_KSYMS, 6, "01 01 02 01 03 c4 00 04 a1 6b 05 cf 00 00 00 01 00 00 00 00 06 c3",
	  FP_WIRE_EFIELD, "part over 32 bits" },
	{ FP_MSG_KSYMS, 7, KSYMS_BASE " 07 94 00 a1 61 10 a1 62", 0, "two symbols" },
	{ FP_MSG_KSYMS, 7, KSYMS_BASE " 07 93 00 a1 61 10", FP_WIRE_EFIELD, "odd symbols" },
	{ FP_MSG_KSYMS, 7, KSYMS_BASE " 07 92 00 01", FP_WIRE_EFIELD, "symbol name int" },
	{ FP_MSG_KSYMS, 7, KSYMS_BASE " 07 92 a1 61 a1 61", FP_WIRE_EFIELD, "symbol offset str" },
	{ FP_MSG_KSYMS, 7, KSYMS_BASE " 07 92 00 a3 61 00 61", FP_WIRE_EFIELD, "NUL in symbol" },

	{ FP_MSG_REPLY, 2, REPLY_BASE, 0, "reply baseline" },
	{ FP_MSG_REPLY, 1, "01 00", FP_WIRE_EFIELD, "reply without seq" },
	{ FP_MSG_REPLY, 2, "01 03 02 00", FP_WIRE_EFIELD, "reply status 3" },
	{ FP_MSG_REPLY, 3, REPLY_BASE " 03 a3 62 61 64", 0, "reply with error" },
	{ FP_MSG_REPLY, 3, REPLY_BASE " 03 01", FP_WIRE_EFIELD, "error as int" },
	{ FP_MSG_REPLY, 3, REPLY_BASE " 04 92 c4 02 aa bb c4 00", 0, "want list" },
	{ FP_MSG_REPLY, 3, REPLY_BASE " 04 91 a2 aa bb", FP_WIRE_EFIELD, "want of str" },
	{ FP_MSG_REPLY, 3, REPLY_BASE " 04 91 " BID21, FP_WIRE_ETOOBIG, "want 21 bytes" },
	{ FP_MSG_REPLY, 3, REPLY_BASE " 04 c4 00", FP_WIRE_EFIELD, "want not an array" },
	{ FP_MSG_REPLY, 3, REPLY_BASE " 05 93 c4 02 aa bb 00 40", 0, "one range" },
	{ FP_MSG_REPLY, 3, REPLY_BASE " 05 92 c4 02 aa bb 00", FP_WIRE_EFIELD, "range pair" },
	{ FP_MSG_REPLY, 3, REPLY_BASE " 05 93 c4 00 00 40", FP_WIRE_EFIELD, "range without id" },
	{ FP_MSG_REPLY, 3, REPLY_BASE " 05 93 c4 02 aa bb 00 ce 00 10 00 01", FP_WIRE_EFIELD,
	  "range over 1 MiB" },
	{ FP_MSG_REPLY, 3, REPLY_BASE " 05 93 c4 02 aa bb ff 40", FP_WIRE_EFIELD,
	  "negative range offset" },
	{ FP_MSG_REPLY, 3, REPLY_BASE " 06 94 c4 02 aa bb 00 02 c4 02 01 02", 0, "whole table" },
	{ FP_MSG_REPLY, 3, REPLY_BASE " 06 94 c4 02 aa bb 02 04 c4 02 01 02", 0, "last part" },
	{ FP_MSG_REPLY, 3, REPLY_BASE " 06 93 c4 02 aa bb 00 02", FP_WIRE_EFIELD, "table triple" },
	{ FP_MSG_REPLY, 3, REPLY_BASE " 06 94 c4 00 00 02 c4 02 01 02", FP_WIRE_EFIELD,
	  "table without id" },
	{ FP_MSG_REPLY, 3, REPLY_BASE " 06 94 c4 02 aa bb 00 02 c4 00", FP_WIRE_EFIELD,
	  "empty table part" },
	{ FP_MSG_REPLY, 3, REPLY_BASE " 06 94 c4 02 aa bb 00 01 c4 02 01 02", FP_WIRE_EFIELD,
	  "part past the total" },
	{ FP_MSG_REPLY, 3, REPLY_BASE " 06 94 c4 02 aa bb 02 02 c4 01 01", FP_WIRE_EFIELD,
	  "part at the total" },
	{ FP_MSG_REPLY, 3, REPLY_BASE " 06 94 c4 02 aa bb 00 ce 7f 00 00 00 c4 01 01",
	  FP_WIRE_EFIELD, "table over the row limit" },
	{ FP_MSG_REPLY, 3, REPLY_BASE " 06 94 c4 02 aa bb 00 02 a2 01 02", FP_WIRE_EFIELD,
	  "table part as str" },
	{ FP_MSG_REPLY, 3,
	  REPLY_BASE " 06 dc 00 14"
		     " c4 01 aa 00 01 c4 01 01 c4 01 aa 00 01 c4 01 01 c4 01 aa 00 01 c4 01 01"
		     " c4 01 aa 00 01 c4 01 01 c4 01 aa 00 01 c4 01 01",
	  0, "five table parts" },
	{ FP_MSG_REPLY, 3, REPLY_BASE " 0b 01", 0, "one table to come" },
	{ FP_MSG_REPLY, 3, REPLY_BASE " 0b ce ff ff ff ff", 0, "2^32 - 1 tables to come" },
	{ FP_MSG_REPLY, 3, REPLY_BASE " 0b cf 00 00 00 01 00 00 00 00", FP_WIRE_EFIELD,
	  "2^32 tables to come" },
	{ FP_MSG_REPLY, 3, REPLY_BASE " 0b ff", FP_WIRE_EFIELD, "-1 tables to come" },
	{ FP_MSG_REPLY, 3, REPLY_BASE " 0b c2", FP_WIRE_EFIELD, "tables to come as bool" },

	{ FP_MSG_FILE, 4, FILE_BASE, 0, "file baseline" },
	{ FP_MSG_FILE, 5, FILE_BASE " 06 c4 03 01 02 03", 0, "file with data" },
	{ FP_MSG_FILE, 5, FILE_BASE " 05 02", 0, "file with error" },
	{ FP_MSG_FILE, 6, FILE_BASE " 05 02 06 c4 01 00", FP_WIRE_EFIELD, "error and data" },
	{ FP_MSG_FILE, 5, FILE_BASE " 05 00", FP_WIRE_EFIELD, "error 0 spelled out" },
	{ FP_MSG_FILE, 5, FILE_BASE " 06 c4 00", FP_WIRE_EFIELD, "empty data spelled out" },
	{ FP_MSG_FILE, 5, FILE_BASE " 06 a3 61 62 63", FP_WIRE_EFIELD, "data as str" },
	{ FP_MSG_FILE, 3, "01 2a 02 c4 02 aa bb 03 00", FP_WIRE_EFIELD, "file without size" },
	{ FP_MSG_FILE, 4, "01 2a 02 c4 00 03 00 04 00", FP_WIRE_EFIELD, "file without build-ID" },
};

static size_t hex_to_bytes(const char *hex, uint8_t *out, size_t cap)
{
	size_t n = 0;

	while (*hex) {
		unsigned v;

		if (*hex == ' ') {
			hex++;
			continue;
		}
		if (n >= cap || sscanf(hex, "%2x", &v) != 1)
			abort();
		out[n++] = (uint8_t)v;
		hex += 2;
	}
	return n;
}

static size_t body_msg(const struct body_case *c, uint8_t *out, size_t cap)
{
	out[0] = 0x93;
	out[1] = FP_PROTO_VERSION;
	out[2] = (uint8_t)c->bc_type;
	out[3] = (uint8_t)(0x80 | c->bc_nkeys);
	return 4 + hex_to_bytes(c->bc_body, out + 4, cap - 4);
}

static void test_body_cases(void)
{
	size_t i;

	for (i = 0; i < sizeof(body_cases) / sizeof(body_cases[0]); i++) {
		const struct body_case *c = &body_cases[i];
		uint8_t buf[256];
		size_t len = body_msg(c, buf, sizeof(buf));
		/* A heap copy of the exact size, so ASan sees any overread. */
		uint8_t *heap = malloc(len);
		int err, type = 0;

		memcpy(heap, buf, len);
		err = decode_as(c->bc_type, heap, len);
		if (err != c->bc_err)
			fprintf(stderr, "  case '%s': got %d (%s), expected %d\n", c->bc_what, err,
				fp_wire_strerror(err), c->bc_err);
		CHECK_EQ_INT(err, c->bc_err);
		if (!err)
			CHECK(decode_roundtrip_stable(c->bc_type, heap, len));
		/* The envelope is fine in every case. */
		CHECK_EQ_INT(fp_wire_peek(heap, len, &type), 0);
		CHECK_EQ_INT(type, c->bc_type);
		free(heap);
	}
}

static void test_unknown_keys_ignored(void)
{
	static const char *hex = "93 01 04 84 01 02 02 05 14 92 c4 01 aa 81 01 02 03 a1 78";
	uint8_t buf[64];
	size_t len = hex_to_bytes(hex, buf, sizeof(buf));
	struct fp_reply r;

	CHECK_EQ_INT(fp_wire_decode_reply(buf, len, &r), 0);
	CHECK_EQ_INT(r.fr_status, FP_REPLY_REJECTED);
	CHECK_EQ_INT(r.fr_seq, 5);
	CHECK(r.fr_error && strcmp(r.fr_error, "x") == 0);
	CHECK_EQ_INT(r.fr_nwant, 0);
	fp_reply_fini(&r);
}

/* Whole messages given in hex: the envelope and the framing. */
struct raw_case {
	int rc_type; /* decoder to run */
	const char *rc_hex;
	int rc_err;  /* from the decoder */
	int rc_peek; /* from fp_wire_peek */
	const char *rc_what;
};

static const struct raw_case raw_cases[] = {
	{ FP_MSG_SAMPLES, "93 01 02 86 01 00 02 00 03 00 04 00 05 00 0b c4 03 00 01 02", 0, 0,
	  "leaves: thread 0, node 0, count 1" },
	{ FP_MSG_SAMPLES, "93 01 02 86 01 00 02 00 03 00 04 00 05 00 0b c4 00", FP_WIRE_EFIELD, 0,
	  "leaves: empty" },
	{ FP_MSG_SAMPLES, "93 01 02 86 01 00 02 00 03 00 04 00 05 00 0b 90", FP_WIRE_EFIELD, 0,
	  "leaves: an array" },
	{ FP_MSG_SAMPLES, "93 01 02 86 01 00 02 00 03 00 04 00 05 00 0b c4 01 01", FP_WIRE_EFIELD,
	  0, "leaves: group without its size" },
	{ FP_MSG_SAMPLES, "93 01 02 86 01 00 02 00 03 00 04 00 05 00 0b c4 02 01 00",
	  FP_WIRE_EFIELD, 0, "leaves: group of 0" },
	{ FP_MSG_SAMPLES, "93 01 02 86 01 00 02 00 03 00 04 00 05 00 0b c4 03 00 01 81",
	  FP_WIRE_EFIELD, 0, "leaves: varint cut short" },
	{ FP_MSG_SAMPLES, "93 01 02 86 01 00 02 00 03 00 04 00 05 00 0b c4 04 00 01 01 01",
	  FP_WIRE_EFIELD, 0, "leaves: count 1 spelled out" },
	{ FP_MSG_SAMPLES, "93 01 02 86 01 00 02 00 03 00 04 00 05 00 0b c4 03 00 02 02",
	  FP_WIRE_EFIELD, 0, "leaves: group larger than its bytes" },
	{ FP_MSG_SAMPLES,
	  "93 01 02 86 01 00 02 00 03 00 04 00 05 00 0b c4 0a ff ff ff ff 0f 01 02 01 01 02",
	  FP_WIRE_EFIELD, 0, "leaves: thread past u32" },
	{ FP_MSG_SAMPLES, "93 01 02 86 01 00 02 00 03 00 04 00 05 00 0b c4 07 00 01 80 80 80 80 20",
	  FP_WIRE_EFIELD, 0, "leaves: leaf past u32" },
	{ FP_MSG_SAMPLES,
	  "93 01 02 86 01 00 02 00 03 00 04 00 05 00 0b c4 0d ff ff ff ff ff ff ff ff ff ff 01 01 02",
	  FP_WIRE_EFIELD, 0, "leaves: 11-byte varint" },
	{ FP_MSG_SAMPLES, "93 01 02 86 01 00 02 00 03 00 04 00 05 00 0c c4 04 00 00 00 05", 0, 0,
	  "nodes: node 0, unmapped, offset 5" },
	{ FP_MSG_SAMPLES, "93 01 02 86 01 00 02 00 03 00 04 00 05 00 0c c4 04 02 01 00 05", 0, 0,
	  "nodes: parent after its child" },
	{ FP_MSG_SAMPLES, "93 01 02 86 01 00 02 00 03 00 04 00 05 00 0c c4 00", FP_WIRE_EFIELD, 0,
	  "nodes: empty" },
	{ FP_MSG_SAMPLES, "93 01 02 86 01 00 02 00 03 00 04 00 05 00 0c c4 03 00 00 00",
	  FP_WIRE_EFIELD, 0, "nodes: three of four numbers" },
	{ FP_MSG_SAMPLES, "93 01 02 86 01 00 02 00 03 00 04 00 05 00 0c c4 04 01 00 00 05",
	  FP_WIRE_EFIELD, 0, "nodes: id -1" },
	{ FP_MSG_SAMPLES, "93 01 02 86 01 00 02 00 03 00 04 00 05 00 0c c4 04 00 02 00 05",
	  FP_WIRE_EFIELD, 0, "nodes: parent 0 - 1" },
	{ FP_MSG_SAMPLES,
	  "93 01 02 86 01 00 02 00 03 00 04 00 05 00 0c c4 08 00 00 80 80 80 80 10 05",
	  FP_WIRE_EFIELD, 0, "nodes: mapping past u32" },
	{ FP_MSG_SAMPLES,
	  "93 01 02 86 01 00 02 00 03 00 04 00 05 00 0c c4 08 fe ff ff ff 1f 00 00 05",
	  FP_WIRE_EFIELD, 0, "nodes: id 0xffffffff" },
	{ FP_MSG_REPLY, "", FP_WIRE_EMALFORMED, FP_WIRE_EMALFORMED, "empty" },
	{ FP_MSG_REPLY, "c0", FP_WIRE_EMALFORMED, FP_WIRE_EMALFORMED, "nil" },
	{ FP_MSG_REPLY, "90", FP_WIRE_EMALFORMED, FP_WIRE_EMALFORMED, "empty array" },
	{ FP_MSG_REPLY, "81 01 02", FP_WIRE_EMALFORMED, FP_WIRE_EMALFORMED, "map envelope" },
	{ FP_MSG_REPLY, "93 02 04 82 01 00 02 00", FP_WIRE_EVERSION, FP_WIRE_EVERSION,
	  "version 2" },
	{ FP_MSG_REPLY, "93 00 04 82 01 00 02 00", FP_WIRE_EVERSION, FP_WIRE_EVERSION,
	  "version 0" },
	{ FP_MSG_REPLY, "92 cd 01 00 c7 05 01", FP_WIRE_EVERSION, FP_WIRE_EVERSION,
	  "version 256, body not ours" },
	{ FP_MSG_REPLY, "93 a1 31 04 80", FP_WIRE_EMALFORMED, FP_WIRE_EMALFORMED,
	  "version as string" },
	{ FP_MSG_REPLY, "93 01 7f 82 01 00 02 00", FP_WIRE_ETYPE, FP_WIRE_ETYPE, "type 127" },
	{ FP_MSG_REPLY, "93 01 00 82 01 00 02 00", FP_WIRE_ETYPE, FP_WIRE_ETYPE, "type 0" },
	{ FP_MSG_REPLY, "93 01 cd 01 04 80", FP_WIRE_ETYPE, FP_WIRE_ETYPE, "type 260" },
	{ FP_MSG_REPLY, "93 01 ff 80", FP_WIRE_EMALFORMED, FP_WIRE_EMALFORMED, "type -1" },
	{ FP_MSG_HELLO, "93 01 04 82 01 00 02 00", FP_WIRE_ETYPE, 0, "reply to hello decoder" },
	{ FP_MSG_SAMPLES, "93 01 04 82 01 00 02 00", FP_WIRE_ETYPE, 0, "reply to batch decoder" },
	{ FP_MSG_KSYMS, "93 01 04 82 01 00 02 00", FP_WIRE_ETYPE, 0, "reply to ksyms decoder" },
	{ FP_MSG_REPLY, "93 01 04 92 01 00", FP_WIRE_EMALFORMED, FP_WIRE_EMALFORMED,
	  "body an array" },
	{ FP_MSG_REPLY, "94 01 04 82 01 00 02 00 00", FP_WIRE_EMALFORMED, FP_WIRE_EMALFORMED,
	  "four-element envelope" },
	{ FP_MSG_REPLY, "92 01 04", FP_WIRE_EMALFORMED, FP_WIRE_EMALFORMED,
	  "two-element envelope" },
	{ FP_MSG_REPLY, "93 01 04 82 01 00 02 00 00", FP_WIRE_EMALFORMED, 0, "trailing byte" },
	{ FP_MSG_REPLY, "93 01 04 82 01 00 02 00 93 01 04 80", FP_WIRE_EMALFORMED, 0,
	  "two messages" },
	{ FP_MSG_REPLY, "dc 00 03 01 04 de 00 02 01 00 02 00", 0, 0, "16-bit headers" },
	{ FP_MSG_REPLY, "dd 00 00 00 03 cc 01 04 df 00 00 00 02 01 00 02 00", 0, 0,
	  "32-bit headers" },
	/* Counts that no buffer this size could hold: must fail before any
	 * allocation sized by them. */
	{ FP_MSG_SAMPLES, "93 01 02 86 01 01 02 01 03 00 04 00 05 00 09 dd ff ff ff ff 01 02",
	  FP_WIRE_EMALFORMED, 0, "array32 of 4G in a tiny buffer" },
	{ FP_MSG_SAMPLES, "93 01 02 86 01 01 02 01 03 00 04 00 05 00 09 dc ff ff 01 02",
	  FP_WIRE_EMALFORMED, 0, "array16 of 64K in a tiny buffer" },
	{ FP_MSG_SAMPLES, "93 01 02 df ff ff ff ff 01 01", FP_WIRE_EMALFORMED, 0,
	  "map32 of 4G pairs" },
	{ FP_MSG_SAMPLES, "93 01 02 de 00 03 01 01 02 01 03", FP_WIRE_EMALFORMED, 0,
	  "map16 one byte per pair" },
	{ FP_MSG_REPLY, "93 01 04 83 01 00 02 00 03 db ff ff ff ff 61", FP_WIRE_EMALFORMED, 0,
	  "str32 of 4G" },
	{ FP_MSG_REPLY, "93 01 04 83 01 00 02 00 04 91 c6 ff ff ff ff", FP_WIRE_EMALFORMED, 0,
	  "bin32 of 4G" },
	{ FP_MSG_REPLY, "dd ff ff ff ff 01 04 80", FP_WIRE_EMALFORMED, FP_WIRE_EMALFORMED,
	  "envelope of 4G" },
};

static void test_raw_cases(void)
{
	size_t i;

	for (i = 0; i < sizeof(raw_cases) / sizeof(raw_cases[0]); i++) {
		const struct raw_case *c = &raw_cases[i];
		uint8_t buf[256];
		size_t len = hex_to_bytes(c->rc_hex, buf, sizeof(buf));
		uint8_t *heap = malloc(len ? len : 1);
		struct timespec t0, t1;
		int err, peek, type = -7;

		memcpy(heap, buf, len);
		clock_gettime(CLOCK_MONOTONIC, &t0);
		err = decode_as(c->rc_type, heap, len);
		clock_gettime(CLOCK_MONOTONIC, &t1);
		peek = fp_wire_peek(heap, len, &type);
		if (err != c->rc_err || peek != c->rc_peek)
			fprintf(stderr, "  case '%s': got %d/%d, expected %d/%d\n", c->rc_what, err,
				peek, c->rc_err, c->rc_peek);
		CHECK_EQ_INT(err, c->rc_err);
		CHECK_EQ_INT(peek, c->rc_peek);
		if (peek)
			CHECK_EQ_INT(type, -7);
		/* Failing fast: nothing proportional to a declared count. */
		CHECK((t1.tv_sec - t0.tv_sec) * 1000000000L + (t1.tv_nsec - t0.tv_nsec) <
		      50000000L);
		free(heap);
	}
}

/* ---- Limits that need big messages: built with msgpack directly --------- */

struct mp {
	msgpack_sbuffer m_sb;
	msgpack_packer m_pk;
};

static void mp_init(struct mp *m, int type, size_t nkeys)
{
	msgpack_sbuffer_init(&m->m_sb);
	msgpack_packer_init(&m->m_pk, &m->m_sb, msgpack_sbuffer_write);
	msgpack_pack_array(&m->m_pk, 3);
	msgpack_pack_uint64(&m->m_pk, FP_PROTO_VERSION);
	msgpack_pack_uint64(&m->m_pk, (uint64_t)type);
	msgpack_pack_map(&m->m_pk, nkeys);
}

static void mp_str(struct mp *m, const char *s, size_t len)
{
	msgpack_pack_str(&m->m_pk, len);
	if (len)
		msgpack_pack_str_body(&m->m_pk, s, len);
}

static void mp_hello_base(struct mp *m, size_t nkeys)
{
	mp_init(m, FP_MSG_HELLO, nkeys);
	msgpack_pack_uint64(&m->m_pk, 1);
	msgpack_pack_uint64(&m->m_pk, 1);
	for (uint64_t k = 2; k <= 4; k++) {
		msgpack_pack_uint64(&m->m_pk, k);
		mp_str(m, "x", 1);
	}
	msgpack_pack_uint64(&m->m_pk, 5);
	msgpack_pack_bin(&m->m_pk, 0);
	msgpack_pack_uint64(&m->m_pk, 6);
	mp_str(m, "x", 1);
	msgpack_pack_uint64(&m->m_pk, 7);
	msgpack_pack_uint64(&m->m_pk, 99);
	msgpack_pack_uint64(&m->m_pk, 8);
	msgpack_pack_uint64(&m->m_pk, 4);
}

static int mp_decode(struct mp *m, int type)
{
	int err = decode_as(type, m->m_sb.data, m->m_sb.size);

	msgpack_sbuffer_destroy(&m->m_sb);
	return err;
}

static int count_cmp(const void *a, const void *b)
{
	const struct fp_count *x = a, *y = b;

	if (!x->fc_off_ns != !y->fc_off_ns) /* off-CPU counts after, as key 13 */
		return x->fc_off_ns ? 1 : -1;
	if (x->fc_thread != y->fc_thread)
		return x->fc_thread < y->fc_thread ? -1 : 1;
	if (x->fc_node + 1 != y->fc_node + 1)
		return x->fc_node + 1 < y->fc_node + 1 ? -1 : 1;
	return x->fc_count < y->fc_count ? -1 : x->fc_count > y->fc_count;
}

/* make_batch's extremes (ids out of order, u32 and u64 maxima, none) through
 * keys 11 and 12: the same nodes in the same order, the same counts as a
 * multiset; and both old and new keys in one message add up. */
static void test_varint_roundtrip(void)
{
	struct fp_batch b, d, both;
	char *buf, *buf2, *old;
	size_t len, len2, oldlen, i;

	make_batch(&b);
	CHECK_EQ_INT(fp_wire_encode_batch_parts(&b, FP_FEATURES_KNOWN, &buf, &len,
						&(struct fp_wire_batch_parts){ 0 }),
		     0);
	CHECK_EQ_INT(fp_wire_encode_batch(&b, &old, &oldlen), 0);
	printf("  make_batch: %zu bytes with keys 11 and 12, %zu with 8 and 9\n", len, oldlen);
	CHECK(len < oldlen);
	CHECK_EQ_INT(fp_wire_decode_batch(buf, len, &d), 0);
	qsort(b.fb_counts, b.fb_ncounts, sizeof(*b.fb_counts), count_cmp);
	CHECK(batch_eq(&b, &d));
	/* Deterministic. */
	CHECK_EQ_INT(fp_wire_encode_batch_parts(&d, FP_FEATURES_KNOWN, &buf2, &len2,
						&(struct fp_wire_batch_parts){ 0 }),
		     0);
	CHECK(len == len2 && memcmp(buf, buf2, len) == 0);
	free(buf2);
	/* Keys 8 and 9 and keys 11 and 12 in one message: nodes and
	 * counts of both, the old keys' first. */
	{
		struct mp m;

		mp_init(&m, FP_MSG_SAMPLES, 9);
		for (i = 1; i <= 5; i++) {
			msgpack_pack_uint64(&m.m_pk, i);
			msgpack_pack_uint64(&m.m_pk, 0);
		}
		msgpack_pack_uint64(&m.m_pk, 8);
		msgpack_pack_array(&m.m_pk, 4);
		msgpack_pack_uint64(&m.m_pk, 4000000001u);
		msgpack_pack_uint64(&m.m_pk, 0);
		msgpack_pack_int64(&m.m_pk, -1);
		msgpack_pack_uint64(&m.m_pk, 7);
		msgpack_pack_uint64(&m.m_pk, 9);
		msgpack_pack_array(&m.m_pk, 3);
		msgpack_pack_uint64(&m.m_pk, 5);
		msgpack_pack_uint64(&m.m_pk, 4000000001u);
		msgpack_pack_uint64(&m.m_pk, 6);
		msgpack_pack_uint64(&m.m_pk, 12);
		msgpack_pack_bin(&m.m_pk, 4);
		msgpack_pack_bin_body(&m.m_pk, "\x02\x00\x00\x05", 4); /* node 1 */
		msgpack_pack_uint64(&m.m_pk, 11);
		msgpack_pack_bin(&m.m_pk, 3);
		msgpack_pack_bin_body(&m.m_pk, "\x05\x01\x04", 3); /* thread 5, node 1 */
		memset(&both, 0, sizeof(both));
		CHECK_EQ_INT(fp_wire_decode_batch(m.m_sb.data, m.m_sb.size, &both), 0);
		CHECK_EQ_INT(both.fb_nnodes, 2);
		CHECK_EQ_INT(both.fb_ncounts, 2);
		if (both.fb_nnodes == 2 && both.fb_ncounts == 2) {
			CHECK(both.fb_nodes[0].fn_id == 4000000001u && both.fb_nodes[1].fn_id == 1);
			CHECK(both.fb_nodes[1].fn_frame.ff_mapping == FP_MAPPING_NONE &&
			      both.fb_nodes[1].fn_frame.ff_offset == 5);
			CHECK(both.fb_counts[0].fc_node == 4000000001u &&
			      both.fb_counts[0].fc_count == 6);
			CHECK(both.fb_counts[1].fc_thread == 5 && both.fb_counts[1].fc_node == 1 &&
			      both.fb_counts[1].fc_count == 1);
		}
		fp_batch_fini(&both);
		msgpack_sbuffer_destroy(&m.m_sb);
	}
	fp_batch_fini(&d);
	fp_batch_fini(&b);
	free(buf);
	free(old);
}

/* HELLO key 11 round trip: tables held, their build-IDs of every length
 * and ids of every size, with the feature bit. */
static void test_hello_held_roundtrip(void)
{
	struct fp_held_table held[4];
	struct fp_hello h, d;
	char *buf;
	size_t len, plain;

	make_hello(&h, 1);
	CHECK_EQ_INT(fp_wire_encode_hello(&h, &buf, &len), 0);
	free(buf);
	plain = len;
	build_id_fill(&held[0].ht_build_id, 20, 1);
	build_id_fill(&held[1].ht_build_id, 1, 2);
	build_id_fill(&held[2].ht_build_id, 16, 3);
	build_id_fill(&held[3].ht_build_id, 20, 4);
	held[0].ht_id = 0;
	held[1].ht_id = 127;
	held[2].ht_id = 0x8000000000000000ull;
	held[3].ht_id = UINT64_MAX;
	h.fh_features = FP_FEATURE_KFUNCS | FP_FEATURE_HELD_TABLES;
	h.fh_held = held;
	h.fh_nheld = 4;
	CHECK_EQ_INT(fp_wire_encode_hello(&h, &buf, &len), 0);
	/* 2 bytes key and list header, build-ID bins, ids of 1, 1, 9, 9 */
	CHECK_EQ_INT(len - plain, 2 + 2 + (22 + 3 + 18 + 22) + (1 + 1 + 9 + 9));
	CHECK_EQ_INT(fp_wire_decode_hello(buf, len, &d), 0);
	CHECK(hello_eq(&h, &d));
	fp_hello_fini(&d);
	free(buf);
	/* A copy (the symbolizer's session keeps one) holds the same. */
	CHECK_EQ_INT(fp_hello_copy(&d, &h), 0);
	CHECK(hello_eq(&h, &d));
	fp_hello_fini(&d);
	/* What decoders refuse, the encoder refuses: no build-ID, too many. */
	held[2].ht_build_id.fb_len = 0;
	CHECK_EQ_INT(fp_wire_encode_hello(&h, &buf, &len), -EINVAL);
	held[2].ht_build_id.fb_len = 16;
	h.fh_nheld = FP_HELD_TABLES_MAX + 1;
	CHECK_EQ_INT(fp_wire_encode_hello(&h, &buf, &len), -EINVAL);
	h.fh_held = NULL;
	h.fh_nheld = 0;
	fp_hello_fini(&h);
}

/* At most FP_HELD_TABLES_MAX held tables in a hello, at most 64 table
 * parts in a reply. */
static void test_held_and_part_limits(void)
{
	size_t n;

	for (n = FP_HELD_TABLES_MAX; n <= FP_HELD_TABLES_MAX + 1; n++) {
		struct mp m;
		size_t i;

		mp_hello_base(&m, 9);
		msgpack_pack_uint64(&m.m_pk, 11);
		msgpack_pack_array(&m.m_pk, 2 * n);
		for (i = 0; i < n; i++) {
			msgpack_pack_bin(&m.m_pk, 2);
			msgpack_pack_bin_body(&m.m_pk, "ab", 2);
			msgpack_pack_uint64(&m.m_pk, i);
		}
		CHECK_EQ_INT(mp_decode(&m, FP_MSG_HELLO),
			     n == FP_HELD_TABLES_MAX ? 0 : FP_WIRE_ETOOBIG);
	}
	for (n = FP_TABLE_REPLY_PARTS; n <= FP_TABLE_REPLY_PARTS + 1; n++) {
		struct mp m;
		size_t i;

		mp_init(&m, FP_MSG_REPLY, 3);
		msgpack_pack_uint64(&m.m_pk, 1);
		msgpack_pack_uint64(&m.m_pk, 0);
		msgpack_pack_uint64(&m.m_pk, 2);
		msgpack_pack_uint64(&m.m_pk, 0);
		msgpack_pack_uint64(&m.m_pk, 6);
		msgpack_pack_array(&m.m_pk, 4 * n);
		for (i = 0; i < n; i++) {
			msgpack_pack_bin(&m.m_pk, 1);
			msgpack_pack_bin_body(&m.m_pk, "a", 1);
			msgpack_pack_uint64(&m.m_pk, 0);
			msgpack_pack_uint64(&m.m_pk, 1);
			msgpack_pack_bin(&m.m_pk, 1);
			msgpack_pack_bin_body(&m.m_pk, "x", 1);
		}
		CHECK_EQ_INT(mp_decode(&m, FP_MSG_REPLY),
			     n == FP_TABLE_REPLY_PARTS ? 0 : FP_WIRE_ETOOBIG);
	}
}

static void test_label_limit(void)
{
	size_t n;

	for (n = 64; n <= 65; n++) {
		struct mp m;
		size_t i;

		mp_hello_base(&m, 9);
		msgpack_pack_uint64(&m.m_pk, 9);
		msgpack_pack_array(&m.m_pk, 2 * n);
		for (i = 0; i < 2 * n; i++)
			mp_str(&m, "k", 1);
		CHECK_EQ_INT(mp_decode(&m, FP_MSG_HELLO), n == 64 ? 0 : FP_WIRE_ETOOBIG);
	}
}

static void test_string_limit(void)
{
	char *big = malloc(4097);
	size_t n;

	memset(big, 'a', 4097);
	for (n = 4096; n <= 4097; n++) {
		struct mp m;

		mp_hello_base(&m, 9);
		msgpack_pack_uint64(&m.m_pk, 9);
		msgpack_pack_array(&m.m_pk, 2);
		mp_str(&m, "path", 4);
		mp_str(&m, big, n);
		CHECK_EQ_INT(mp_decode(&m, FP_MSG_HELLO), n == 4096 ? 0 : FP_WIRE_ETOOBIG);
	}
	free(big);
}

/* The codec limits neither the depth of a path nor the number of nodes
 * (beyond the message size): both are the symbolizer session's to check,
 * as are references, cycles and redefinitions. */
static void test_nodes_unchecked_semantics(void)
{
	const size_t n = 1000;
	struct fp_node *nodes = xcalloc(n + 3, sizeof(*nodes));
	struct fp_count count = { 1, (uint32_t)n, 1 };
	struct fp_batch b, d;
	char *buf;
	size_t len, i;

	/* One path of 1000 frames, deeper than FP_MAX_FRAMES. */
	for (i = 0; i < n; i++)
		nodes[i] = (struct fp_node){ (uint32_t)(i + 1),
					     i ? (uint32_t)i : FP_NODE_NONE,
					     { 1, i } };
	/* A cycle, a node defined twice, a parent defined after its child. */
	nodes[n] = (struct fp_node){ 5000, 5001, { 1, 0 } };
	nodes[n + 1] = (struct fp_node){ 5001, 5000, { 1, 0 } };
	nodes[n + 2] = (struct fp_node){ 5001, 7, { FP_MAPPING_NONE, 0 } };
	memset(&b, 0, sizeof(b));
	b.fb_nnodes = n + 3;
	b.fb_nodes = nodes;
	b.fb_ncounts = 1;
	b.fb_counts = &count;
	CHECK_EQ_INT(fp_wire_encode_batch(&b, &buf, &len), 0);
	CHECK_EQ_INT(fp_wire_decode_batch(buf, len, &d), 0);
	CHECK(batch_eq(&b, &d));
	fp_batch_fini(&d);
	free(buf);
	free(nodes);
}

/* A batch over FP_WIRE_MAX_MESSAGE does not encode; one just under it
 * encodes and decodes. */
static void test_batch_size_limit(void)
{
	/* 12 bytes a node: 1 + 1 + 1 (none) + 9 (offset 2^64-1). */
	const size_t fits = FP_WIRE_MAX_MESSAGE / 12 - 10, over = FP_WIRE_MAX_MESSAGE / 12 + 1;
	struct fp_node *nodes = xcalloc(over, sizeof(*nodes));
	struct fp_batch b, d;
	char *buf = NULL;
	size_t len = 0, i;

	for (i = 0; i < over; i++)
		nodes[i] = (struct fp_node){ (uint32_t)i,
					     i ? (uint32_t)(i - 1) : FP_NODE_NONE,
					     { FP_MAPPING_NONE, UINT64_MAX } };
	memset(&b, 0, sizeof(b));
	b.fb_nodes = nodes;
	b.fb_nnodes = over;
	CHECK_EQ_INT(fp_wire_encode_batch(&b, &buf, &len), -EMSGSIZE);
	b.fb_nnodes = fits;
	CHECK_EQ_INT(fp_wire_encode_batch(&b, &buf, &len), 0);
	CHECK(len <= FP_WIRE_MAX_MESSAGE && len > FP_WIRE_MAX_MESSAGE - 200);
	memset(&d, 0, sizeof(d));
	CHECK_EQ_INT(fp_wire_decode_batch(buf, len, &d), 0);
	CHECK_EQ_INT(d.fb_nnodes, fits);
	CHECK(d.fb_nnodes == fits && d.fb_nodes[fits - 1].fn_parent == fits - 2 &&
	      d.fb_nodes[fits - 1].fn_frame.ff_offset == UINT64_MAX);
	fp_batch_fini(&d);
	free(buf);
	free(nodes);
}

static void test_ksyms_limit(void)
{
	size_t nsyms;

	for (nsyms = 1000000; nsyms <= 1000001; nsyms++) {
		struct mp m;
		size_t i;

		mp_init(&m, FP_MSG_KSYMS, 7);
		msgpack_pack_uint64(&m.m_pk, 1);
		msgpack_pack_uint64(&m.m_pk, 1);
		msgpack_pack_uint64(&m.m_pk, 2);
		msgpack_pack_uint64(&m.m_pk, FP_MAP_KERNEL);
		msgpack_pack_uint64(&m.m_pk, 3);
		msgpack_pack_bin(&m.m_pk, 0);
		msgpack_pack_uint64(&m.m_pk, 4);
		mp_str(&m, "vmlinux", 7);
		msgpack_pack_uint64(&m.m_pk, 5);
		msgpack_pack_uint64(&m.m_pk, 0);
		msgpack_pack_uint64(&m.m_pk, 6);
		msgpack_pack_true(&m.m_pk);
		msgpack_pack_uint64(&m.m_pk, 7);
		msgpack_pack_array(&m.m_pk, 2 * nsyms);
		for (i = 0; i < nsyms; i++) {
			msgpack_pack_uint64(&m.m_pk, i);
			mp_str(&m, "s", 1);
		}
		CHECK_EQ_INT(mp_decode(&m, FP_MSG_KSYMS), nsyms == 1000000 ? 0 : FP_WIRE_ETOOBIG);
	}
}

static void test_want_limit(void)
{
	size_t n;

	for (n = 4096; n <= 4097; n++) {
		struct mp m;
		size_t i;

		mp_init(&m, FP_MSG_REPLY, 3);
		msgpack_pack_uint64(&m.m_pk, 1);
		msgpack_pack_uint64(&m.m_pk, FP_REPLY_OK);
		msgpack_pack_uint64(&m.m_pk, 2);
		msgpack_pack_uint64(&m.m_pk, 0);
		msgpack_pack_uint64(&m.m_pk, 4);
		msgpack_pack_array(&m.m_pk, n);
		for (i = 0; i < n; i++) {
			msgpack_pack_bin(&m.m_pk, 1);
			msgpack_pack_bin_body(&m.m_pk, "x", 1);
		}
		CHECK_EQ_INT(mp_decode(&m, FP_MSG_REPLY), n == 4096 ? 0 : FP_WIRE_ETOOBIG);
	}
}

static void test_message_size_limit(void)
{
	size_t len = FP_WIRE_MAX_MESSAGE + 1;
	/* Pages never touched stay unallocated: cheap. */
	uint8_t *buf = calloc(1, len);
	int type;

	if (!buf)
		return;
	memcpy(buf, "\x93\x01\x04\x82\x01\x00\x02\x00", 8);
	CHECK_EQ_INT(decode_as(FP_MSG_REPLY, buf, len), FP_WIRE_ETOOBIG);
	/* peek looks at the envelope only. */
	CHECK_EQ_INT(fp_wire_peek(buf, len, &type), 0);
	free(buf);
}

/* ---- Encoders refuse what decoders would refuse -------------------------- */

static void test_encode_rejects(void)
{
	struct fp_node node = { 1, FP_NODE_NONE, { 1, 2 } };
	struct fp_count count = { 1, 1, 1 };
	char *buf = (char *)"untouched";
	size_t len = 12345;
	char *long_str = malloc(4098);
	struct fp_hello h;
	struct fp_batch b;
	struct fp_ksyms k;
	struct fp_reply r;

	memset(long_str, 'a', 4097);
	long_str[4097] = '\0';

	make_hello(&h, 2);
	free(h.fh_host);
	h.fh_host = long_str;
	CHECK_EQ_INT(fp_wire_encode_hello(&h, &buf, &len), -EINVAL);
	h.fh_host = NULL;
	h.fh_kernel_build_id.fb_len = FP_BUILD_ID_MAX + 1;
	CHECK_EQ_INT(fp_wire_encode_hello(&h, &buf, &len), -EINVAL);
	h.fh_kernel_build_id.fb_len = 0;
	h.fh_nlabels = 65;
	CHECK_EQ_INT(fp_wire_encode_hello(&h, &buf, &len), -EINVAL);
	h.fh_nlabels = 2;
	fp_hello_fini(&h);

	make_batch(&b);
	b.fb_mappings[1].fm_kind = 7;
	CHECK_EQ_INT(fp_wire_encode_batch(&b, &buf, &len), -EINVAL);
	b.fb_mappings[1].fm_kind = FP_MAP_KERNEL;
	b.fb_mappings[1].fm_id = FP_MAPPING_NONE;
	CHECK_EQ_INT(fp_wire_encode_batch(&b, &buf, &len), -EINVAL);
	b.fb_mappings[1].fm_id = 2;
	memset(b.fb_threads[0].ft_comm, 'c', FP_COMM_LEN); /* not terminated */
	CHECK_EQ_INT(fp_wire_encode_batch(&b, &buf, &len), -EINVAL);
	b.fb_threads[0].ft_comm[FP_COMM_LEN - 1] = '\0';
	/* FP_NODE_NONE is no node id, and a node is not its own parent. */
	b.fb_nodes[5].fn_id = FP_NODE_NONE;
	CHECK_EQ_INT(fp_wire_encode_batch(&b, &buf, &len), -EINVAL);
	b.fb_nodes[5].fn_id = 6;
	b.fb_nodes[5].fn_parent = 6;
	CHECK_EQ_INT(fp_wire_encode_batch(&b, &buf, &len), -EINVAL);
	b.fb_nodes[5].fn_parent = 5;
	CHECK_EQ_INT(fp_wire_encode_batch(&b, &buf, &len), 0);
	free(buf);
	buf = (char *)"untouched";
	len = 12345;
	fp_batch_fini(&b);
	memset(&b, 0, sizeof(b));
	b.fb_ncounts = 3;
	CHECK_EQ_INT(fp_wire_encode_batch(&b, &buf, &len), -EINVAL);
	b.fb_ncounts = 0;
	b.fb_nnodes = 1;
	CHECK_EQ_INT(fp_wire_encode_batch(&b, &buf, &len), -EINVAL);
	b.fb_nodes = &node;
	CHECK_EQ_INT(fp_wire_encode_batch(&b, &buf, &len), 0);
	free(buf);
	buf = (char *)"untouched";
	len = 12345;
	/* More entries than bytes in a message: refused before any work. */
	b.fb_nnodes = (size_t)FP_WIRE_MAX_MESSAGE + 1;
	CHECK_EQ_INT(fp_wire_encode_batch(&b, &buf, &len), -EMSGSIZE);
	b.fb_nnodes = 0;
	b.fb_counts = &count;
	b.fb_ncounts = (size_t)FP_WIRE_MAX_MESSAGE + 1;
	CHECK_EQ_INT(fp_wire_encode_batch(&b, &buf, &len), -EMSGSIZE);

	make_ksyms(&k, 0, 1, 0, 2);
	k.fs_kind = FP_MAP_USER;
	CHECK_EQ_INT(fp_wire_encode_ksyms(&k, &buf, &len), -EINVAL);
	k.fs_kind = FP_MAP_KERNEL;
	k.fs_nsyms = 1000001;
	CHECK_EQ_INT(fp_wire_encode_ksyms(&k, &buf, &len), -EINVAL);
	k.fs_nsyms = 2;
	fp_ksyms_fini(&k);

	memset(&r, 0, sizeof(r));
	r.fr_status = 3;
	CHECK_EQ_INT(fp_wire_encode_reply(&r, &buf, &len), -EINVAL);
	r.fr_status = FP_REPLY_OK;
	r.fr_nwant = 1;
	CHECK_EQ_INT(fp_wire_encode_reply(&r, &buf, &len), -EINVAL);

	CHECK(strcmp(buf, "untouched") == 0);
	CHECK_EQ_INT(len, 12345);
	free(long_str);
}

/* ---- Python code objects (FP_MAP_PYTHON mappings) ---------------------- */

static struct fp_pycode *make_pycode(const char *qualname, uint32_t first, uint8_t format,
				     const uint8_t *table, uint32_t len)
{
	struct fp_pycode *c = xcalloc(1, sizeof(*c));

	c->pc_qualname = qualname ? xstrdup(qualname) : NULL;
	c->pc_firstlineno = first;
	c->pc_lines = format;
	c->pc_linetable_len = len;
	if (len) {
		c->pc_linetable = xcalloc(len, 1);
		memcpy(c->pc_linetable, table, len);
	}
	return c;
}

/* The example of PROTOCOL.md, byte for byte: Worker.run as CPython 3.11
 * compiles it, one node at offset 6. */
static void test_python_mapping_bytes(void)
{
	static const uint8_t table[] = { 0x80, 0x00, 0xd8, 0x0c, 0x0d, 0x88,
					 0x01, 0xd8, 0x0f, 0x10, 0x88, 0x08 };
	static const uint8_t
		expect[] = {
			0x93, 0x01, 0x02, 0x87, /* [1, SAMPLES, {7 keys */
			0x01, 0x00, 0x02, 0x00, 0x03, 0x00, 0x04, 0x00, 0x05, 0x00, 0x06,
			0x91,                         /* mappings: 1 */
			0x98, 0x07, 0x03, 0xc4, 0x00, /* [8: id 7, kind 3, bin 0 */
			0xad, '/',  's',  'r',  'v',  '/',  'a',  'p',  'p',  '/',  'w',
			'.',  'p',  'y',  0xaa, 'W',  'o',  'r',  'k',  'e',  'r',  '.',
			'r',  'u',  'n',  0x03, 0x02, /* line 3, co_linetable */
			0xc4, 0x0c, 0x80, 0x00, 0xd8, 0x0c, 0x0d, 0x88, 0x01, 0xd8, 0x0f,
			0x10, 0x88, 0x08, 0x08, 0x94, 0x01, 0x00, 0x07, 0x06, /* node 1, root, mapping 7, 6 */
		};
	struct fp_mapping m = { 0 };
	struct fp_node node = { 1, FP_NODE_NONE, { 7, 6 } };
	struct fp_batch b, d;
	char *buf;
	size_t len;

	memset(&b, 0, sizeof(b));
	m.fm_id = 7;
	m.fm_kind = FP_MAP_PYTHON;
	m.fm_path = xstrdup("/srv/app/w.py");
	m.fm_py = make_pycode("Worker.run", 3, FP_PY_LOCATIONS, table, sizeof(table));
	b.fb_nmappings = 1;
	b.fb_mappings = &m;
	b.fb_nnodes = 1;
	b.fb_nodes = &node;
	CHECK_EQ_INT(fp_wire_encode_batch(&b, &buf, &len), 0);
	CHECK_EQ_INT(len, sizeof(expect));
	CHECK(len == sizeof(expect) && memcmp(buf, expect, len) == 0);
	CHECK_EQ_INT(fp_wire_decode_batch(buf, len, &d), 0);
	CHECK(batch_eq(&b, &d));
	CHECK_EQ_INT(d.fb_mappings[0].fm_kind, FP_MAP_PYTHON);
	CHECK(d.fb_mappings[0].fm_py && !strcmp(d.fb_mappings[0].fm_py->pc_qualname, "Worker.run"));
	CHECK_EQ_INT(d.fb_mappings[0].fm_py->pc_firstlineno, 3);
	CHECK_EQ_INT(d.fb_mappings[0].fm_py->pc_lines, FP_PY_LOCATIONS);
	CHECK_EQ_INT(d.fb_mappings[0].fm_py->pc_linetable_len, sizeof(table));
	fp_batch_fini(&d);
	free(buf);
	free(m.fm_path);
	fp_pycode_free(m.fm_py);
}

/* Python mappings of both formats and at their limits, among the others;
 * re-encoding gives the same bytes. */
static void test_python_roundtrip(void)
{
	static const uint8_t lnotab[] = { 6, 1, 44, 5, 255, 0, 45, 127, 0, 73, 11, 0xff };
	char *name = xcalloc(FP_PY_NAME_MAX + 1, 1);
	uint8_t *big = xcalloc(FP_PY_LINETABLE_MAX, 1);
	struct fp_batch b, d;
	char *buf, *buf2;
	size_t len, len2, i;

	memset(name, 'q', FP_PY_NAME_MAX);
	for (i = 0; i < FP_PY_LINETABLE_MAX; i++)
		big[i] = (uint8_t)(i * 13);
	make_batch(&b);
	b.fb_mappings = realloc(b.fb_mappings, 8 * sizeof(struct fp_mapping));
	if (!b.fb_mappings)
		abort();
	memset(&b.fb_mappings[4], 0, 4 * sizeof(struct fp_mapping));
	for (i = 4; i < 8; i++) {
		b.fb_mappings[i].fm_id = 100 + (uint32_t)i;
		b.fb_mappings[i].fm_kind = FP_MAP_PYTHON;
		b.fb_mappings[i].fm_path = xstrdup(i == 7 ? "" : "/usr/lib/python3.9/threading.py");
	}
	b.fb_mappings[4].fm_py = make_pycode("Thread._bootstrap_inner", 926, FP_PY_LNOTAB, lnotab,
					     sizeof(lnotab));
	b.fb_mappings[5].fm_py = make_pycode(name, UINT32_MAX, FP_PY_LOCATIONS, big,
					     FP_PY_LINETABLE_MAX);
	b.fb_mappings[6].fm_py = make_pycode("caf\xc3\xa9.<locals>.<lambda>", 0, FP_PY_LOCATIONS,
					     NULL, 0);
	b.fb_mappings[7].fm_py = make_pycode(NULL, 1, FP_PY_LNOTAB, NULL, 0);
	b.fb_nmappings = 8;
	CHECK_EQ_INT(fp_wire_encode_batch(&b, &buf, &len), 0);
	CHECK_EQ_INT(fp_wire_decode_batch(buf, len, &d), 0);
	CHECK(batch_eq(&b, &d));
	for (i = 0; i < 4; i++)
		CHECK(d.fb_mappings[i].fm_py == NULL);
	CHECK_EQ_INT(d.fb_mappings[5].fm_py->pc_linetable_len, FP_PY_LINETABLE_MAX);
	CHECK_EQ_INT(strlen(d.fb_mappings[5].fm_py->pc_qualname), FP_PY_NAME_MAX);
	CHECK(d.fb_mappings[6].fm_py->pc_linetable == NULL);
	CHECK(d.fb_mappings[7].fm_py->pc_qualname && !d.fb_mappings[7].fm_py->pc_qualname[0]);
	CHECK_EQ_INT(fp_wire_encode_batch(&d, &buf2, &len2), 0);
	CHECK(len == len2 && memcmp(buf, buf2, len) == 0);
	fp_batch_fini(&d);
	fp_batch_fini(&b);
	free(buf);
	free(buf2);
	free(name);
	free(big);
}

/* A batch of one Python mapping record packed by hand, qualname and table
 * of the given sizes. */
static void pack_python(msgpack_sbuffer *sb, size_t name_len, size_t table_len)
{
	msgpack_packer pk;
	char *name = xcalloc(name_len + 1, 1);
	uint8_t *table = xcalloc(table_len + 1, 1);

	memset(name, 'n', name_len);
	msgpack_sbuffer_init(sb);
	msgpack_packer_init(&pk, sb, msgpack_sbuffer_write);
	msgpack_pack_array(&pk, 3);
	msgpack_pack_uint8(&pk, FP_PROTO_VERSION);
	msgpack_pack_uint8(&pk, FP_MSG_SAMPLES);
	msgpack_pack_map(&pk, 6);
	for (int k = 1; k <= 5; k++) {
		msgpack_pack_uint8(&pk, (uint8_t)k);
		msgpack_pack_uint8(&pk, 0);
	}
	msgpack_pack_uint8(&pk, 6);
	msgpack_pack_array(&pk, 1);
	msgpack_pack_array(&pk, 8);
	msgpack_pack_uint8(&pk, 1);
	msgpack_pack_uint8(&pk, FP_MAP_PYTHON);
	msgpack_pack_bin(&pk, 0);
	msgpack_pack_str(&pk, 4);
	msgpack_pack_str_body(&pk, "a.py", 4);
	msgpack_pack_str(&pk, name_len);
	msgpack_pack_str_body(&pk, name, name_len);
	msgpack_pack_uint8(&pk, 1);
	msgpack_pack_uint8(&pk, FP_PY_LOCATIONS);
	msgpack_pack_bin(&pk, table_len);
	msgpack_pack_bin_body(&pk, table, table_len);
	free(name);
	free(table);
}

static void test_python_limits(void)
{
	static const struct {
		size_t name, table;
		int err;
	} cases[] = {
		{ FP_PY_NAME_MAX, FP_PY_LINETABLE_MAX, 0 },
		{ FP_PY_NAME_MAX + 1, 10, FP_WIRE_ETOOBIG },
		{ 10, FP_PY_LINETABLE_MAX + 1, FP_WIRE_ETOOBIG },
		{ 4097, 10, FP_WIRE_ETOOBIG },
	};
	struct fp_batch b, untouched;
	size_t i;

	for (i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
		msgpack_sbuffer sb;

		pack_python(&sb, cases[i].name, cases[i].table);
		memset(&b, 0x5a, sizeof(b));
		untouched = b;
		CHECK_EQ_INT(fp_wire_decode_batch(sb.data, sb.size, &b), cases[i].err);
		if (!cases[i].err) {
			CHECK_EQ_INT(b.fb_mappings[0].fm_py->pc_linetable_len, cases[i].table);
			fp_batch_fini(&b);
		} else {
			CHECK(memcmp(&b, &untouched, sizeof(b)) == 0);
		}
		msgpack_sbuffer_destroy(&sb);
	}
}

/* Encoders refuse what decoders would. */
static void test_python_encode_rejects(void)
{
	static const uint8_t t[] = { 0x80, 0x00 };
	char *long_name = xcalloc(FP_PY_NAME_MAX + 2, 1);
	struct fp_mapping m = { 0 };
	struct fp_batch b;
	char *buf = (char *)"untouched";
	size_t len = 12345;

	memset(long_name, 'x', FP_PY_NAME_MAX + 1);
	memset(&b, 0, sizeof(b));
	b.fb_nmappings = 1;
	b.fb_mappings = &m;
	m.fm_id = 1;
	m.fm_path = (char *)"a.py";
	m.fm_kind = FP_MAP_PYTHON;
	CHECK_EQ_INT(fp_wire_encode_batch(&b, &buf, &len), -EINVAL); /* no code object */
	m.fm_py = make_pycode("f", 1, FP_PY_LOCATIONS, t, sizeof(t));
	CHECK_EQ_INT(fp_wire_encode_batch(&b, &buf, &len), 0);
	free(buf);
	buf = (char *)"untouched";
	len = 12345;
	m.fm_kind = FP_MAP_USER; /* a code object on an ELF mapping */
	CHECK_EQ_INT(fp_wire_encode_batch(&b, &buf, &len), -EINVAL);
	m.fm_kind = FP_MAP_PYTHON;
	build_id_fill(&m.fm_build_id, 20, 3);
	CHECK_EQ_INT(fp_wire_encode_batch(&b, &buf, &len), -EINVAL);
	m.fm_build_id.fb_len = 0;
	m.fm_py->pc_lines = 0;
	CHECK_EQ_INT(fp_wire_encode_batch(&b, &buf, &len), -EINVAL);
	m.fm_py->pc_lines = 3;
	CHECK_EQ_INT(fp_wire_encode_batch(&b, &buf, &len), -EINVAL);
	m.fm_py->pc_lines = FP_PY_LNOTAB;
	m.fm_py->pc_linetable_len = FP_PY_LINETABLE_MAX + 1;
	CHECK_EQ_INT(fp_wire_encode_batch(&b, &buf, &len), -EINVAL);
	m.fm_py->pc_linetable_len = 1;
	free(m.fm_py->pc_linetable);
	m.fm_py->pc_linetable = NULL;
	CHECK_EQ_INT(fp_wire_encode_batch(&b, &buf, &len), -EINVAL);
	m.fm_py->pc_linetable_len = 0;
	free(m.fm_py->pc_qualname);
	m.fm_py->pc_qualname = long_name;
	CHECK_EQ_INT(fp_wire_encode_batch(&b, &buf, &len), -EINVAL);
	CHECK(strcmp(buf, "untouched") == 0);
	CHECK_EQ_INT(len, 12345);
	fp_pycode_free(m.fm_py);
}

static void test_strerror(void)
{
	static const int codes[] = { FP_WIRE_EMALFORMED, FP_WIRE_EVERSION, FP_WIRE_ETYPE,
				     FP_WIRE_EFIELD,     FP_WIRE_ETOOBIG,  FP_WIRE_ENOMEM };
	const char *unknown = fp_wire_strerror(-999999);
	size_t i, j;

	CHECK(unknown && unknown[0]);
	CHECK(fp_wire_strerror(12345) != NULL);
	CHECK(fp_wire_strerror(-EINVAL) != unknown);
	CHECK(fp_wire_strerror(-EMSGSIZE) != unknown);
	for (i = 0; i < sizeof(codes) / sizeof(codes[0]); i++) {
		const char *s = fp_wire_strerror(codes[i]);

		CHECK(s && s[0] && s != unknown);
		for (j = 0; j < i; j++)
			CHECK(strcmp(s, fp_wire_strerror(codes[j])) != 0);
	}
}

/* ---- Round-trip stability, as the fuzzer checks it ----------------------- */

/* If buf decodes as type, its re-encoding must decode to an equal value and
 * re-encode to the same bytes.  Returns 1 when that holds (or buf does not
 * decode at all). */
static int decode_roundtrip_stable(int type, const void *buf, size_t len)
{
	char *e1 = NULL, *e2 = NULL;
	size_t l1 = 0, l2 = 0;
	int ok = 0;

	switch (type) {
	case FP_MSG_HELLO: {
		struct fp_hello a, b;

		if (fp_wire_decode_hello(buf, len, &a))
			return 1;
		if (!fp_wire_encode_hello(&a, &e1, &l1) && !fp_wire_decode_hello(e1, l1, &b)) {
			ok = hello_eq(&a, &b) && !fp_wire_encode_hello(&b, &e2, &l2);
			fp_hello_fini(&b);
		}
		fp_hello_fini(&a);
		break;
	}
	case FP_MSG_SAMPLES: {
		struct fp_batch a, b;

		if (fp_wire_decode_batch(buf, len, &a))
			return 1;
		if (!fp_wire_encode_batch(&a, &e1, &l1) && !fp_wire_decode_batch(e1, l1, &b)) {
			ok = batch_eq(&a, &b) && !fp_wire_encode_batch(&b, &e2, &l2);
			fp_batch_fini(&b);
		}
		fp_batch_fini(&a);
		break;
	}
	case FP_MSG_KSYMS: {
		struct fp_ksyms a, b;

		if (fp_wire_decode_ksyms(buf, len, &a))
			return 1;
		if (!fp_wire_encode_ksyms(&a, &e1, &l1) && !fp_wire_decode_ksyms(e1, l1, &b)) {
			ok = ksyms_eq(&a, &b) && !fp_wire_encode_ksyms(&b, &e2, &l2);
			fp_ksyms_fini(&b);
		}
		fp_ksyms_fini(&a);
		break;
	}
	default: {
		struct fp_reply a, b;

		if (fp_wire_decode_reply(buf, len, &a))
			return 1;
		if (!fp_wire_encode_reply(&a, &e1, &l1) && !fp_wire_decode_reply(e1, l1, &b)) {
			ok = reply_eq(&a, &b) && !fp_wire_encode_reply(&b, &e2, &l2);
			fp_reply_fini(&b);
		}
		fp_reply_fini(&a);
		break;
	}
	}
	ok = ok && l1 == l2 && memcmp(e1, e2, l1) == 0;
	free(e1);
	free(e2);
	return ok;
}

int main(void)
{
	RUN(test_build_id_hex);
	RUN(test_build_id_parse_errors);
	RUN(test_build_id_eq);
	RUN(test_fini_zeroed);
	RUN(test_hello_roundtrip);
	RUN(test_hello_null_strings);
	RUN(test_batch_roundtrip);
	RUN(test_batch_empty);
	RUN(test_none_is_one_byte);
	RUN(test_varint_bytes);
	RUN(test_varint_roundtrip);
	RUN(test_ksyms_multipart);
	RUN(test_ksyms_module_empty_part);
	RUN(test_reply_roundtrip);
	RUN(test_file_roundtrip);
	RUN(test_table_parts);
	RUN(test_steady_state_size);
	RUN(test_truncations);
	RUN(test_byte_mutations);
	RUN(test_random_garbage);
	RUN(test_body_cases);
	RUN(test_unknown_keys_ignored);
	RUN(test_raw_cases);
	RUN(test_label_limit);
	RUN(test_hello_held_roundtrip);
	RUN(test_held_and_part_limits);
	RUN(test_string_limit);
	RUN(test_nodes_unchecked_semantics);
	RUN(test_batch_size_limit);
	RUN(test_ksyms_limit);
	RUN(test_want_limit);
	RUN(test_message_size_limit);
	RUN(test_encode_rejects);
	RUN(test_python_mapping_bytes);
	RUN(test_python_roundtrip);
	RUN(test_python_limits);
	RUN(test_python_encode_rejects);
	RUN(test_strerror);
	return CHECK_DONE();
}
