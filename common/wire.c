/* wire.c: msgpack codec for the device <-> symbolizer protocol.
 *
 * proto/PROTOCOL.md is the specification; the key numbers and record
 * layouts below must match it.  Decoding runs in three steps, each of which
 * trusts only what the previous one established:
 *   1. envelope_read: version and type from the first few bytes, so an
 *      unsupported message is named as such even if its body is not ours;
 *   2. validate_item: a walk over every msgpack item of the raw bytes that
 *      bounds counts, lengths and depth, because msgpack_unpack allocates
 *      count * sizeof(msgpack_object) for whatever count a header declares;
 *   3. msgpack_unpack into a zone, then conversion of the object tree into
 *      the structures of batch.h with every value range-checked.
 */
#include "wire.h"

#include <errno.h>
#include <msgpack.h>
#include <stdlib.h>
#include <string.h>

#define WIRE_MAX_DEPTH 8     /* nested containers; ours go 4 deep */
#define WIRE_MAX_STRING 4096 /* bytes, excluding the terminating NUL */
#define WIRE_MAX_LABELS 64
#define WIRE_MAX_KSYMS 1000000                    /* symbols per FP_MSG_KSYMS message */
#define WIRE_MAX_WANT 4096                        /* build-IDs per reply */
#define WIRE_MAX_TABLE_PARTS FP_TABLE_REPLY_PARTS /* per reply */
#define WIRE_NONE (-1)                            /* FP_MAPPING_NONE, FP_NODE_NONE on the wire */
#define WIRE_ZONE_CHUNK 8192

/* Body keys.  Never renumber: add new keys at the end. */
enum {
	HELLO_SESSION = 1,
	HELLO_HOST = 2,
	HELLO_BOOT_ID = 3,
	HELLO_KERNEL_RELEASE = 4,
	HELLO_KERNEL_BUILD_ID = 5,
	HELLO_AGENT_VERSION = 6,
	HELLO_FREQUENCY = 7,
	HELLO_NCPUS = 8,
	HELLO_LABELS = 9,
	HELLO_FEATURES = 10,
	HELLO_HELD = 11,
	HELLO_NKEYS
};

enum {
	BATCH_SESSION = 1,
	BATCH_SEQ = 2,
	BATCH_START_NS = 3,
	BATCH_END_NS = 4,
	BATCH_PERIOD_NS = 5,
	BATCH_MAPPINGS = 6,
	BATCH_THREADS = 7,
	BATCH_NODES = 8,
	BATCH_COUNTS = 9,
	BATCH_LOST = 10,
	BATCH_LEAVES = 11,
	BATCH_NODES_VARINT = 12,
	BATCH_OFFCPU = 13,
	BATCH_NKEYS
};

enum {
	KSYMS_SESSION = 1,
	KSYMS_KIND = 2,
	KSYMS_BUILD_ID = 3,
	KSYMS_NAME = 4,
	KSYMS_PART = 5,
	KSYMS_LAST = 6,
	KSYMS_SYMS = 7,
	KSYMS_NKEYS
};

enum {
	REPLY_STATUS = 1,
	REPLY_SEQ = 2,
	REPLY_ERROR = 3,
	REPLY_WANT = 4,
	REPLY_RANGES = 5,
	REPLY_TABLES = 6,
	REPLY_FEATURES = 7,
	REPLY_WRITTEN = 8,
	REPLY_KFUNCS_BUILD_ID = 9,
	REPLY_KFUNCS = 10,
	REPLY_TABLES_PENDING = 11,
	REPLY_NKEYS
};

enum {
	FILE_SESSION = 1,
	FILE_BUILD_ID = 2,
	FILE_OFFSET = 3,
	FILE_SIZE = 4,
	FILE_ERROR = 5,
	FILE_DATA = 6,
	FILE_NKEYS
};

/* Flat tuple lists: elements per entry. */
#define NODE_WIDTH 4   /* id delta, parent delta, mapping, offset */
#define COUNT_WIDTH 3  /* thread, node, count */
#define OFFCPU_WIDTH 4 /* thread, node, blocks, ns */
#define RANGE_WIDTH 3  /* build_id, offset, length */
#define TABLE_WIDTH 4  /* build_id, offset, total, data */
#define HELD_WIDTH 2   /* build_id, table id */

/* Minimum lengths of the array records; later revisions may append. */
#define MAPPING_FIELDS 4    /* id, kind, build_id, path */
#define PY_MAPPING_FIELDS 8 /* + qualname, firstlineno, line-table format, line table */
#define THREAD_FIELDS 7     /* id, pid, tid, cgroup, comm, process, container */
#define LOST_FIELDS 4       /* samples, stack_errors, batches, samples_dropped */

const char *fp_wire_strerror(int err)
{
	switch (err) {
	case 0:
		return "success";
	case FP_WIRE_EMALFORMED:
		return "malformed message (not msgpack, truncated, or nested too deep)";
	case FP_WIRE_EVERSION:
		return "unsupported protocol version";
	case FP_WIRE_ETYPE:
		return "unknown or unexpected message type";
	case FP_WIRE_EFIELD:
		return "missing field, wrong field type, or value out of range";
	case FP_WIRE_ETOOBIG:
		return "count or length over its limit";
	case FP_WIRE_ENOMEM:
	case -ENOMEM:
		return "out of memory";
	/* The encoders return errno values; name those too. */
	case -EINVAL:
		return "invalid structure to encode (value out of range or over a limit)";
	case -EMSGSIZE:
		return "encoded message larger than FP_WIRE_MAX_MESSAGE";
	default:
		return "unknown wire error";
	}
}

/* ---- Checks shared by encoders and decoders ---------------------------- */

/* Encoders refuse exactly what decoders refuse, so that a message we
 * produce is never rejected by our own peer. */

static int kind_ok(uint64_t kind)
{
	return kind == FP_MAP_USER || kind == FP_MAP_KERNEL || kind == FP_MAP_KMODULE ||
	       kind == FP_MAP_PYTHON;
}

static int py_lines_ok(uint64_t format)
{
	return format == FP_PY_LNOTAB || format == FP_PY_LOCATIONS;
}

static int ksyms_kind_ok(uint64_t kind)
{
	return kind == FP_MAP_KERNEL || kind == FP_MAP_KMODULE;
}

static int status_ok(uint64_t status)
{
	return status == FP_REPLY_OK || status == FP_REPLY_NEED_HELLO ||
	       status == FP_REPLY_REJECTED;
}

/* ---- Encoding ----------------------------------------------------------- */

struct enc {
	msgpack_sbuffer e_sb;
	msgpack_packer e_pk;
	int e_err;     /* first error, negative errno */
	int e_too_big; /* the write callback refused to pass the size limit */
};

/* Refusing to grow past the limit bounds the memory an oversized batch
 * costs the agent to the limit itself. */
static int enc_write(void *data, const char *buf, size_t len)
{
	struct enc *e = data;

	if (len > FP_WIRE_MAX_MESSAGE - e->e_sb.size) {
		e->e_too_big = 1;
		return -1;
	}
	return msgpack_sbuffer_write(&e->e_sb, buf, len);
}

static void enc_init(struct enc *e)
{
	memset(e, 0, sizeof(*e));
	msgpack_sbuffer_init(&e->e_sb);
	msgpack_packer_init(&e->e_pk, e, enc_write);
}

/* enc_reserve: room for n bytes in all, allocated at once: a reply of
 * 4 MiB of table parts grown by doubling from 8 KiB was reallocated and
 * copied ten times over. */
static void enc_reserve(struct enc *e, size_t n)
{
	char *p;

	if (n > FP_WIRE_MAX_MESSAGE)
		n = FP_WIRE_MAX_MESSAGE;
	if (n <= e->e_sb.alloc || !(p = realloc(e->e_sb.data, n)))
		return; /* the buffer grows as it goes, as without */
	e->e_sb.data = p;
	e->e_sb.alloc = n;
}

static void enc_fail(struct enc *e, int err)
{
	if (!e->e_err)
		e->e_err = err;
}

static void enc_check(struct enc *e, int pack_ret)
{
	if (pack_ret != 0)
		enc_fail(e, e->e_too_big ? -EMSGSIZE : -ENOMEM);
}

static void enc_uint(struct enc *e, uint64_t v)
{
	enc_check(e, msgpack_pack_uint64(&e->e_pk, v));
}

static void enc_array(struct enc *e, size_t n)
{
	enc_check(e, msgpack_pack_array(&e->e_pk, n));
}

static void enc_map(struct enc *e, size_t n)
{
	enc_check(e, msgpack_pack_map(&e->e_pk, n));
}

static void enc_key(struct enc *e, int key)
{
	enc_uint(e, (uint64_t)key);
}

/* NULL is sent as "": the decoder never produces NULL strings. */
static void enc_str(struct enc *e, const char *s)
{
	size_t len = s ? strnlen(s, WIRE_MAX_STRING + 1) : 0;

	if (len > WIRE_MAX_STRING) {
		enc_fail(e, -EINVAL);
		return;
	}
	enc_check(e, msgpack_pack_str(&e->e_pk, len));
	/* msgpack_sbuffer_write asserts on a NULL body, even when empty. */
	if (len)
		enc_check(e, msgpack_pack_str_body(&e->e_pk, s, len));
}

static void enc_comm(struct enc *e, const char *comm)
{
	size_t len = strnlen(comm, FP_COMM_LEN);

	if (len >= FP_COMM_LEN) {
		enc_fail(e, -EINVAL);
		return;
	}
	enc_check(e, msgpack_pack_str(&e->e_pk, len));
	if (len)
		enc_check(e, msgpack_pack_str_body(&e->e_pk, comm, len));
}

static void enc_build_id(struct enc *e, const struct fp_build_id *id)
{
	if (id->fb_len > FP_BUILD_ID_MAX) {
		enc_fail(e, -EINVAL);
		return;
	}
	enc_check(e, msgpack_pack_bin(&e->e_pk, id->fb_len));
	if (id->fb_len)
		enc_check(e, msgpack_pack_bin_body(&e->e_pk, id->fb_data, id->fb_len));
}

static void enc_envelope(struct enc *e, int type, size_t nkeys)
{
	enc_array(e, 3);
	enc_uint(e, FP_PROTO_VERSION);
	enc_uint(e, (uint64_t)type);
	enc_map(e, nkeys);
}

static int enc_finish(struct enc *e, char **buf, size_t *len)
{
	if (e->e_err) {
		msgpack_sbuffer_destroy(&e->e_sb);
		return e->e_err;
	}
	*len = e->e_sb.size;
	*buf = msgpack_sbuffer_release(&e->e_sb);
	return 0;
}

int fp_wire_encode_hello(const struct fp_hello *h, char **buf, size_t *len)
{
	struct enc e;
	size_t i;

	if (h->fh_nlabels > WIRE_MAX_LABELS ||
	    (h->fh_nlabels && (!h->fh_label_keys || !h->fh_label_values)) ||
	    h->fh_nheld > FP_HELD_TABLES_MAX || (h->fh_nheld && !h->fh_held))
		return -EINVAL;
	for (i = 0; i < h->fh_nheld; i++)
		if (!h->fh_held[i].ht_build_id.fb_len)
			return -EINVAL;
	enc_init(&e);
	enc_envelope(&e, FP_MSG_HELLO,
		     8 + (h->fh_nlabels > 0) + (h->fh_features != 0) + (h->fh_nheld > 0));
	enc_key(&e, HELLO_SESSION);
	enc_uint(&e, h->fh_session);
	enc_key(&e, HELLO_HOST);
	enc_str(&e, h->fh_host);
	enc_key(&e, HELLO_BOOT_ID);
	enc_str(&e, h->fh_boot_id);
	enc_key(&e, HELLO_KERNEL_RELEASE);
	enc_str(&e, h->fh_kernel_release);
	enc_key(&e, HELLO_KERNEL_BUILD_ID);
	enc_build_id(&e, &h->fh_kernel_build_id);
	enc_key(&e, HELLO_AGENT_VERSION);
	enc_str(&e, h->fh_agent_version);
	enc_key(&e, HELLO_FREQUENCY);
	enc_uint(&e, h->fh_frequency);
	enc_key(&e, HELLO_NCPUS);
	enc_uint(&e, h->fh_ncpus);
	if (h->fh_nlabels) {
		enc_key(&e, HELLO_LABELS);
		enc_array(&e, 2 * h->fh_nlabels);
		for (i = 0; i < h->fh_nlabels; i++) {
			enc_str(&e, h->fh_label_keys[i]);
			enc_str(&e, h->fh_label_values[i]);
		}
	}
	if (h->fh_features) {
		enc_key(&e, HELLO_FEATURES);
		enc_uint(&e, h->fh_features);
	}
	if (h->fh_nheld) {
		enc_key(&e, HELLO_HELD);
		enc_array(&e, HELD_WIDTH * h->fh_nheld);
		for (i = 0; i < h->fh_nheld; i++) {
			enc_build_id(&e, &h->fh_held[i].ht_build_id);
			enc_uint(&e, h->fh_held[i].ht_id);
		}
	}
	return enc_finish(&e, buf, len);
}

/* A Python mapping carries its code object; no other kind carries one, and
 * a code object has no build-ID. */
static int py_mapping_ok(const struct fp_mapping *m)
{
	const struct fp_pycode *c = m->fm_py;

	if (m->fm_kind != FP_MAP_PYTHON)
		return c == NULL;
	return c && !m->fm_build_id.fb_len && py_lines_ok(c->pc_lines) &&
	       (!c->pc_qualname || strnlen(c->pc_qualname, FP_PY_NAME_MAX + 1) <= FP_PY_NAME_MAX) &&
	       c->pc_linetable_len <= FP_PY_LINETABLE_MAX &&
	       (!c->pc_linetable_len || c->pc_linetable);
}

static void enc_mapping(struct enc *e, const struct fp_mapping *m)
{
	const struct fp_pycode *c = m->fm_py;

	if (m->fm_id == FP_MAPPING_NONE || !kind_ok(m->fm_kind) || !py_mapping_ok(m)) {
		enc_fail(e, -EINVAL);
		return;
	}
	enc_array(e, m->fm_kind == FP_MAP_PYTHON ? PY_MAPPING_FIELDS : MAPPING_FIELDS);
	enc_uint(e, m->fm_id);
	enc_uint(e, m->fm_kind);
	enc_build_id(e, &m->fm_build_id);
	enc_str(e, m->fm_path);
	if (m->fm_kind != FP_MAP_PYTHON)
		return;
	enc_str(e, c->pc_qualname);
	enc_uint(e, c->pc_firstlineno);
	enc_uint(e, c->pc_lines);
	enc_check(e, msgpack_pack_bin(&e->e_pk, c->pc_linetable_len));
	if (c->pc_linetable_len)
		enc_check(e, msgpack_pack_bin_body(&e->e_pk, c->pc_linetable, c->pc_linetable_len));
}

static void enc_thread(struct enc *e, const struct fp_thread *t)
{
	enc_array(e, THREAD_FIELDS);
	enc_uint(e, t->ft_id);
	enc_uint(e, t->ft_pid);
	enc_uint(e, t->ft_tid);
	enc_uint(e, t->ft_cgroup);
	enc_comm(e, t->ft_comm);
	enc_comm(e, t->ft_process);
	enc_str(e, t->ft_container);
}

static void enc_none_or_uint(struct enc *e, uint32_t v, uint32_t none)
{
	if (v == none)
		enc_check(e, msgpack_pack_int64(&e->e_pk, WIRE_NONE));
	else
		enc_uint(e, v);
}

/* LEB128: 7 bits a byte, low bits first, the top bit set on all but the
 * last byte.  A u64 takes at most 10 bytes. */
#define VARINT_MAX 10

static uint8_t *put_varint(uint8_t *p, uint64_t v)
{
	while (v >= 0x80) {
		*p++ = (uint8_t)(v | 0x80);
		v >>= 7;
	}
	*p++ = (uint8_t)v;
	return p;
}

/* Nodes come in id order mostly, each right after its parent: ids and
 * parents travel as differences, one byte each in the common case. */
static void enc_nodes(struct enc *e, const struct fp_node *nodes, size_t n)
{
	int64_t prev = 0;
	size_t i;

	enc_array(e, NODE_WIDTH * n);
	for (i = 0; i < n && !e->e_err; i++) {
		const struct fp_node *nd = &nodes[i];

		if (nd->fn_id == FP_NODE_NONE || nd->fn_parent == nd->fn_id) {
			enc_fail(e, -EINVAL);
			return;
		}
		enc_check(e, msgpack_pack_int64(&e->e_pk, (int64_t)nd->fn_id - prev));
		enc_check(e, msgpack_pack_int64(&e->e_pk,
						nd->fn_parent == FP_NODE_NONE
							? 0
							: (int64_t)nd->fn_id - nd->fn_parent));
		enc_none_or_uint(e, nd->fn_frame.ff_mapping, FP_MAPPING_NONE);
		enc_uint(e, nd->fn_frame.ff_offset);
		prev = nd->fn_id;
	}
}

static uint64_t zigzag(int64_t v)
{
	return v < 0 ? ~((uint64_t)v << 1) : (uint64_t)v << 1;
}

/* Key 12: key 8's four numbers per node as varints, the deltas zigzag
 * (0, -1, 1, -2... as 0, 1, 2, 3...), the mapping plus 1 (0: none).  A
 * native file offset takes 3 bytes up to 2 MiB where msgpack took 5. */
static void enc_nodes_varint(struct enc *e, const struct fp_node *nodes, size_t n)
{
	/* Per node at most: zigzagged deltas of 34 bits, a mapping of 32 (5 bytes
	 * each), an offset of 64 (10). */
	uint8_t *buf = malloc(n * 25), *p = buf;
	int64_t prev = 0;
	size_t i;

	if (!buf) {
		enc_fail(e, -ENOMEM);
		return;
	}
	for (i = 0; i < n; i++) {
		const struct fp_node *nd = &nodes[i];

		if (nd->fn_id == FP_NODE_NONE || nd->fn_parent == nd->fn_id) {
			enc_fail(e, -EINVAL);
			goto out;
		}
		p = put_varint(p, zigzag((int64_t)nd->fn_id - prev));
		p = put_varint(p, nd->fn_parent == FP_NODE_NONE
					  ? 0
					  : zigzag((int64_t)nd->fn_id - nd->fn_parent));
		p = put_varint(p, ((uint64_t)nd->fn_frame.ff_mapping + 1) & UINT32_MAX);
		p = put_varint(p, nd->fn_frame.ff_offset);
		prev = nd->fn_id;
	}
	enc_check(e, msgpack_pack_bin(&e->e_pk, (size_t)(p - buf)));
	enc_check(e, msgpack_pack_bin_body(&e->e_pk, buf, (size_t)(p - buf)));
out:
	free(buf);
}

static int lost_is_zero(const struct fp_lost *l)
{
	return !l->fl_samples && !l->fl_stack_errors && !l->fl_batches && !l->fl_samples_dropped;
}

/* Counts sorted by thread, then by leaf with "no frames" first (node + 1
 * wraps FP_NODE_NONE to 0): the order key 11 needs; then by count, so
 * that any order of the same counts encodes to the same bytes. */
static int by_thread_leaf(const void *a, const void *b)
{
	const struct fp_count *x = a, *y = b;
	uint32_t xn = x->fc_node + 1, yn = y->fc_node + 1;

	if (x->fc_thread != y->fc_thread)
		return x->fc_thread < y->fc_thread ? -1 : 1;
	if (xn != yn)
		return xn < yn ? -1 : 1;
	return x->fc_count < y->fc_count ? -1 : x->fc_count > y->fc_count;
}

/* Key 11: per thread in ascending order, the thread's id as a difference
 * from the previous group's, the number of its leaves, then per leaf the
 * difference from the previous leaf (node + 1) doubled, plus 1 when a
 * count other than 1 follows.  A sample whose stack is new this interval
 * costs a byte or two where key 9 took five or six. */
static void enc_leaves(struct enc *e, const struct fp_count *counts, size_t n)
{
	struct fp_count *c = malloc(n * sizeof(*c));
	/* Per count at most: its group's thread delta and size (5 bytes
	 * each), a leaf of 33 bits and a count of 32 (5 each). */
	uint8_t *buf = malloc(n * 20), *p = buf;
	uint32_t thread = 0;
	size_t i, j;

	if (!c || !buf) {
		enc_fail(e, -ENOMEM);
		goto out;
	}
	for (i = j = 0; i < n; i++) /* the CPU counts only */
		if (!counts[i].fc_off_ns)
			c[j++] = counts[i];
	n = j;
	qsort(c, n, sizeof(*c), by_thread_leaf);
	for (i = 0; i < n; i = j) {
		uint32_t prev = 0;

		for (j = i; j < n && c[j].fc_thread == c[i].fc_thread; j++)
			if (!c[j].fc_count) {
				enc_fail(e, -EINVAL);
				goto out;
			}
		p = put_varint(p, c[i].fc_thread - thread);
		p = put_varint(p, j - i);
		thread = c[i].fc_thread;
		for (; i < j; i++) {
			uint32_t leaf = c[i].fc_node + 1;
			p = put_varint(p, 2 * (uint64_t)(leaf - prev) + (c[i].fc_count != 1));
			if (c[i].fc_count != 1)
				p = put_varint(p, c[i].fc_count);
			prev = leaf;
		}
	}
	enc_check(e, msgpack_pack_bin(&e->e_pk, (size_t)(p - buf)));
	if (p > buf)
		enc_check(e, msgpack_pack_bin_body(&e->e_pk, buf, (size_t)(p - buf)));
out:
	free(buf);
	free(c);
}

/* Keys 9 and 13: the m CPU counts of counts (offcpu 0) as flat
 * [thread, node, count] tuples, or its m off-CPU ones (offcpu 1) as
 * [thread, node, waits, ns]. */
static void enc_counts(struct enc *e, const struct fp_count *counts, size_t n, size_t m, int offcpu)
{
	enc_array(e, (offcpu ? OFFCPU_WIDTH : COUNT_WIDTH) * m);
	for (size_t i = 0; i < n && !e->e_err; i++) {
		if ((counts[i].fc_off_ns != 0) != offcpu)
			continue;
		enc_uint(e, counts[i].fc_thread);
		enc_none_or_uint(e, counts[i].fc_node, FP_NODE_NONE);
		enc_uint(e, counts[i].fc_count);
		if (offcpu)
			enc_uint(e, counts[i].fc_off_ns);
	}
}

int fp_wire_encode_batch(const struct fp_batch *b, char **buf, size_t *len)
{
	struct fp_wire_batch_parts parts;

	return fp_wire_encode_batch_parts(b, 0, buf, len, &parts);
}

int fp_wire_encode_batch_parts(const struct fp_batch *b, uint64_t features, char **buf, size_t *len,
			       struct fp_wire_batch_parts *parts)
{
	struct fp_wire_batch_parts p = { 0 };
	struct enc e;
	size_t i, at, noff = 0, ncpu;
	int err;

	if ((b->fb_nmappings && !b->fb_mappings) || (b->fb_nthreads && !b->fb_threads) ||
	    (b->fb_nnodes && !b->fb_nodes) || (b->fb_ncounts && !b->fb_counts))
		return -EINVAL;
	/* Each entry costs at least one byte, so larger counts cannot fit. */
	if (b->fb_nmappings > FP_WIRE_MAX_MESSAGE || b->fb_nthreads > FP_WIRE_MAX_MESSAGE ||
	    b->fb_nnodes > FP_WIRE_MAX_MESSAGE || b->fb_ncounts > FP_WIRE_MAX_MESSAGE)
		return -EMSGSIZE;
	for (i = 0; i < b->fb_ncounts; i++)
		noff += b->fb_counts[i].fc_off_ns != 0;
	ncpu = b->fb_ncounts - noff;
	enc_init(&e);
	enc_envelope(&e, FP_MSG_SAMPLES,
		     5 + (b->fb_nmappings > 0) + (b->fb_nthreads > 0) + (b->fb_nnodes > 0) +
			     (ncpu > 0) + (noff > 0) + !lost_is_zero(&b->fb_lost));
	enc_key(&e, BATCH_SESSION);
	enc_uint(&e, b->fb_session);
	enc_key(&e, BATCH_SEQ);
	enc_uint(&e, b->fb_seq);
	enc_key(&e, BATCH_START_NS);
	enc_uint(&e, b->fb_start_ns);
	enc_key(&e, BATCH_END_NS);
	enc_uint(&e, b->fb_end_ns);
	enc_key(&e, BATCH_PERIOD_NS);
	enc_uint(&e, b->fb_period_ns);
	at = e.e_sb.size;
	if (b->fb_nmappings) {
		enc_key(&e, BATCH_MAPPINGS);
		enc_array(&e, b->fb_nmappings);
		for (i = 0; i < b->fb_nmappings && !e.e_err; i++)
			enc_mapping(&e, &b->fb_mappings[i]);
	}
	p.wp_mappings = e.e_sb.size - at;
	at = e.e_sb.size;
	if (b->fb_nthreads) {
		enc_key(&e, BATCH_THREADS);
		enc_array(&e, b->fb_nthreads);
		for (i = 0; i < b->fb_nthreads && !e.e_err; i++)
			enc_thread(&e, &b->fb_threads[i]);
	}
	p.wp_threads = e.e_sb.size - at;
	at = e.e_sb.size;
	if (b->fb_nnodes && (features & FP_FEATURE_NODES)) {
		enc_key(&e, BATCH_NODES_VARINT);
		enc_nodes_varint(&e, b->fb_nodes, b->fb_nnodes);
	} else if (b->fb_nnodes) {
		enc_key(&e, BATCH_NODES);
		enc_nodes(&e, b->fb_nodes, b->fb_nnodes);
	}
	p.wp_nodes = e.e_sb.size - at;
	at = e.e_sb.size;
	if (ncpu && (features & FP_FEATURE_LEAVES)) {
		enc_key(&e, BATCH_LEAVES);
		enc_leaves(&e, b->fb_counts, b->fb_ncounts);
	} else if (ncpu) {
		enc_key(&e, BATCH_COUNTS);
		enc_counts(&e, b->fb_counts, b->fb_ncounts, ncpu, 0);
	}
	if (noff) {
		enc_key(&e, BATCH_OFFCPU);
		enc_counts(&e, b->fb_counts, b->fb_ncounts, noff, 1);
	}
	p.wp_counts = e.e_sb.size - at;
	if (!lost_is_zero(&b->fb_lost)) {
		enc_key(&e, BATCH_LOST);
		enc_array(&e, LOST_FIELDS);
		enc_uint(&e, b->fb_lost.fl_samples);
		enc_uint(&e, b->fb_lost.fl_stack_errors);
		enc_uint(&e, b->fb_lost.fl_batches);
		enc_uint(&e, b->fb_lost.fl_samples_dropped);
	}
	if ((err = enc_finish(&e, buf, len)))
		return err;
	p.wp_other = *len - p.wp_mappings - p.wp_threads - p.wp_nodes - p.wp_counts;
	*parts = p;
	return 0;
}

int fp_wire_encode_ksyms(const struct fp_ksyms *k, char **buf, size_t *len)
{
	struct enc e;
	size_t i;

	if (!ksyms_kind_ok(k->fs_kind) || k->fs_nsyms > WIRE_MAX_KSYMS ||
	    (k->fs_nsyms && !k->fs_syms))
		return -EINVAL;
	enc_init(&e);
	enc_envelope(&e, FP_MSG_KSYMS, 6 + (k->fs_nsyms > 0));
	enc_key(&e, KSYMS_SESSION);
	enc_uint(&e, k->fs_session);
	enc_key(&e, KSYMS_KIND);
	enc_uint(&e, k->fs_kind);
	enc_key(&e, KSYMS_BUILD_ID);
	enc_build_id(&e, &k->fs_build_id);
	enc_key(&e, KSYMS_NAME);
	enc_str(&e, k->fs_name);
	enc_key(&e, KSYMS_PART);
	enc_uint(&e, k->fs_part);
	enc_key(&e, KSYMS_LAST);
	enc_check(&e, k->fs_last ? msgpack_pack_true(&e.e_pk) : msgpack_pack_false(&e.e_pk));
	if (k->fs_nsyms) {
		enc_key(&e, KSYMS_SYMS);
		enc_array(&e, 2 * k->fs_nsyms);
		for (i = 0; i < k->fs_nsyms && !e.e_err; i++) {
			enc_uint(&e, k->fs_syms[i].fk_offset);
			enc_str(&e, k->fs_syms[i].fk_name);
		}
	}
	return enc_finish(&e, buf, len);
}

/* table_part_ok: the limits both ends check. */
static int table_part_ok(const struct fp_table_part *t)
{
	return t->tp_build_id.fb_len && t->tp_len && t->tp_len <= FP_TABLE_PART_MAX &&
	       t->tp_total <= FP_TABLE_MAX && t->tp_offset < t->tp_total &&
	       t->tp_len <= t->tp_total - t->tp_offset;
}

/* kfuncs_ok: what the decoder takes: a kernel build-ID, 1 to
 * FP_KFUNCS_MAX offsets, strictly ascending. */
static int kfuncs_ok(const struct fp_kfuncs *k)
{
	uint32_t i;

	if (!k->kf_build_id.fb_len || k->kf_n > FP_KFUNCS_MAX || !k->kf_offsets || !k->kf_gaps)
		return 0;
	for (i = 1; i < k->kf_n; i++)
		if (k->kf_offsets[i] <= k->kf_offsets[i - 1])
			return 0;
	return 1;
}

/* Keys 9 and 10: per entry 2 * (offset - previous offset) + gap bit. */
static void enc_kfuncs(struct enc *e, const struct fp_kfuncs *k)
{
	uint8_t *bytes, *p;
	uint32_t i, prev = 0;

	enc_key(e, REPLY_KFUNCS_BUILD_ID);
	enc_build_id(e, &k->kf_build_id);
	enc_key(e, REPLY_KFUNCS);
	if (!(bytes = malloc((size_t)k->kf_n * VARINT_MAX))) {
		enc_fail(e, -ENOMEM);
		return;
	}
	for (i = 0, p = bytes; i < k->kf_n; i++) {
		p = put_varint(p, 2 * (uint64_t)(k->kf_offsets[i] - prev) +
					  ((k->kf_gaps[i / 8] >> (i % 8)) & 1));
		prev = k->kf_offsets[i];
	}
	enc_check(e, msgpack_pack_bin(&e->e_pk, (size_t)(p - bytes)));
	enc_check(e, msgpack_pack_bin_body(&e->e_pk, bytes, (size_t)(p - bytes)));
	free(bytes);
}

int fp_wire_encode_reply(const struct fp_reply *r, char **buf, size_t *len)
{
	struct enc e;
	size_t i;

	if (!status_ok(r->fr_status) || r->fr_nwant > WIRE_MAX_WANT ||
	    (r->fr_nwant && !r->fr_want) || r->fr_nranges > FP_WIRE_MAX_RANGES ||
	    (r->fr_nranges && !r->fr_ranges))
		return -EINVAL;
	for (i = 0; i < r->fr_nranges; i++)
		if (r->fr_ranges[i].fg_length > FP_RANGE_MAX || !r->fr_ranges[i].fg_build_id.fb_len)
			return -EINVAL;
	if (r->fr_ntables > WIRE_MAX_TABLE_PARTS || (r->fr_ntables && !r->fr_tables))
		return -EINVAL;
	for (i = 0; i < r->fr_ntables; i++)
		if (!table_part_ok(&r->fr_tables[i]) || !r->fr_tables[i].tp_data)
			return -EINVAL;
	if (r->fr_kfuncs.kf_n && !kfuncs_ok(&r->fr_kfuncs))
		return -EINVAL;
	enc_init(&e);
	if (r->fr_ntables) {
		size_t n = 1024;
		for (i = 0; i < r->fr_ntables; i++)
			n += r->fr_tables[i].tp_len + 40; /* bin header, build-ID, offsets */
		enc_reserve(&e, n);
	}
	enc_envelope(&e, FP_MSG_REPLY,
		     2 + (r->fr_error != NULL) + (r->fr_nwant > 0) + (r->fr_nranges > 0) +
			     (r->fr_ntables > 0) + (r->fr_features != 0) +
			     (r->fr_has_written != 0) + 2 * (r->fr_kfuncs.kf_n > 0) +
			     (r->fr_tables_pending != 0));
	enc_key(&e, REPLY_STATUS);
	enc_uint(&e, r->fr_status);
	enc_key(&e, REPLY_SEQ);
	enc_uint(&e, r->fr_seq);
	if (r->fr_error) {
		enc_key(&e, REPLY_ERROR);
		enc_str(&e, r->fr_error);
	}
	if (r->fr_nwant) {
		enc_key(&e, REPLY_WANT);
		enc_array(&e, r->fr_nwant);
		for (i = 0; i < r->fr_nwant; i++)
			enc_build_id(&e, &r->fr_want[i]);
	}
	if (r->fr_nranges) {
		enc_key(&e, REPLY_RANGES);
		enc_array(&e, RANGE_WIDTH * r->fr_nranges);
		for (i = 0; i < r->fr_nranges; i++) {
			enc_build_id(&e, &r->fr_ranges[i].fg_build_id);
			enc_uint(&e, r->fr_ranges[i].fg_offset);
			enc_uint(&e, r->fr_ranges[i].fg_length);
		}
	}
	if (r->fr_ntables) {
		enc_key(&e, REPLY_TABLES);
		enc_array(&e, TABLE_WIDTH * r->fr_ntables);
		for (i = 0; i < r->fr_ntables; i++) {
			const struct fp_table_part *t = &r->fr_tables[i];
			enc_build_id(&e, &t->tp_build_id);
			enc_uint(&e, t->tp_offset);
			enc_uint(&e, t->tp_total);
			enc_check(&e, msgpack_pack_bin(&e.e_pk, t->tp_len));
			enc_check(&e, msgpack_pack_bin_body(&e.e_pk, t->tp_data, t->tp_len));
		}
	}
	if (r->fr_features) {
		enc_key(&e, REPLY_FEATURES);
		enc_uint(&e, r->fr_features);
	}
	if (r->fr_has_written) {
		enc_key(&e, REPLY_WRITTEN);
		enc_uint(&e, r->fr_written);
	}
	if (r->fr_kfuncs.kf_n)
		enc_kfuncs(&e, &r->fr_kfuncs);
	if (r->fr_tables_pending) {
		enc_key(&e, REPLY_TABLES_PENDING);
		enc_uint(&e, r->fr_tables_pending);
	}
	return enc_finish(&e, buf, len);
}

int fp_wire_encode_file(const struct fp_file_data *d, char **buf, size_t *len)
{
	struct enc e;

	if (!d->fd_build_id.fb_len || d->fd_len > FP_RANGE_MAX || (d->fd_len && !d->fd_data) ||
	    (d->fd_error && d->fd_len))
		return -EINVAL;
	enc_init(&e);
	enc_envelope(&e, FP_MSG_FILE, 4 + (d->fd_error != 0) + (d->fd_len > 0));
	enc_key(&e, FILE_SESSION);
	enc_uint(&e, d->fd_session);
	enc_key(&e, FILE_BUILD_ID);
	enc_build_id(&e, &d->fd_build_id);
	enc_key(&e, FILE_OFFSET);
	enc_uint(&e, d->fd_offset);
	enc_key(&e, FILE_SIZE);
	enc_uint(&e, d->fd_file_size);
	if (d->fd_error) {
		enc_key(&e, FILE_ERROR);
		enc_uint(&e, d->fd_error);
	}
	if (d->fd_len) {
		enc_key(&e, FILE_DATA);
		enc_check(&e, msgpack_pack_bin(&e.e_pk, d->fd_len));
		enc_check(&e, msgpack_pack_bin_body(&e.e_pk, d->fd_data, d->fd_len));
	}
	return enc_finish(&e, buf, len);
}

/* ---- Raw byte reading: envelope and structural validation -------------- */

struct rd {
	const uint8_t *r_p;
	size_t r_len;
	size_t r_pos;
};

static int rd_byte(struct rd *r, uint8_t *b)
{
	if (r->r_pos >= r->r_len)
		return -1;
	*b = r->r_p[r->r_pos++];
	return 0;
}

/* Big-endian unsigned of 1, 2, 4 or 8 bytes. */
static int rd_be(struct rd *r, unsigned nbytes, uint64_t *v)
{
	uint64_t x = 0;
	unsigned i;

	if (r->r_len - r->r_pos < nbytes)
		return -1;
	for (i = 0; i < nbytes; i++)
		x = x << 8 | r->r_p[r->r_pos + i];
	r->r_pos += nbytes;
	*v = x;
	return 0;
}

static int rd_skip(struct rd *r, uint64_t n)
{
	if (n > r->r_len - r->r_pos)
		return -1;
	r->r_pos += (size_t)n;
	return 0;
}

/* An unsigned integer in any msgpack encoding; -1 if the next item is
 * something else or is cut short. */
static int rd_uint(struct rd *r, uint64_t *v)
{
	uint8_t b;

	if (rd_byte(r, &b))
		return -1;
	if (b <= 0x7f) {
		*v = b;
		return 0;
	}
	switch (b) {
	case 0xcc:
		return rd_be(r, 1, v);
	case 0xcd:
		return rd_be(r, 2, v);
	case 0xce:
		return rd_be(r, 4, v);
	case 0xcf:
		return rd_be(r, 8, v);
	default:
		return -1;
	}
}

/* Reads the header of an array (want_map 0) or map (1); *n is its count
 * of elements or pairs. */
static int rd_container(struct rd *r, int want_map, uint64_t *n)
{
	uint8_t b;

	if (rd_byte(r, &b))
		return -1;
	if (!want_map && b >= 0x90 && b <= 0x9f) {
		*n = b & 0x0f;
		return 0;
	}
	if (want_map && b >= 0x80 && b <= 0x8f) {
		*n = b & 0x0f;
		return 0;
	}
	if (b == (want_map ? 0xde : 0xdc))
		return rd_be(r, 2, n);
	if (b == (want_map ? 0xdf : 0xdd))
		return rd_be(r, 4, n);
	return -1;
}

/* The envelope of version 1 is [version, type, {body}].  The version is
 * read first and judged alone, so that a later version may change
 * everything after it and still get a clear FP_WIRE_EVERSION. */
static int envelope_read(const void *buf, size_t len, int *type)
{
	struct rd r = { buf, len, 0 };
	uint64_t n, version, t;
	uint8_t b;

	if (!buf || len == 0)
		return FP_WIRE_EMALFORMED;
	if (rd_container(&r, 0, &n) || n < 1 || rd_uint(&r, &version))
		return FP_WIRE_EMALFORMED;
	if (version != FP_PROTO_VERSION)
		return FP_WIRE_EVERSION;
	if (n != 3 || rd_uint(&r, &t))
		return FP_WIRE_EMALFORMED;
	if (t < FP_MSG_HELLO || t > FP_MSG_FILE)
		return FP_WIRE_ETYPE;
	if (rd_byte(&r, &b) || !((b >= 0x80 && b <= 0x8f) || b == 0xde || b == 0xdf))
		return FP_WIRE_EMALFORMED;
	*type = (int)t;
	return 0;
}

int fp_wire_peek(const void *buf, size_t len, int *type)
{
	return envelope_read(buf, len, type);
}

/* Walks one item and everything inside it.  Every element of an array or
 * map takes at least one byte, so a count above the bytes left is a lie we
 * can reject before msgpack_unpack trusts it; the walk itself then proves
 * each counted element is present.  Recursion is bounded by WIRE_MAX_DEPTH. */
static int validate_item(struct rd *r, unsigned depth)
{
	uint64_t n;
	uint8_t b;

	if (rd_byte(r, &b))
		return -1;
	if (b <= 0x7f || b >= 0xe0) /* positive and negative fixint */
		return 0;
	if (b <= 0x8f) {
		n = 2 * (uint64_t)(b & 0x0f);
		goto container;
	}
	if (b <= 0x9f) {
		n = b & 0x0f;
		goto container;
	}
	if (b <= 0xbf)
		return rd_skip(r, b & 0x1f);
	switch (b) {
	case 0xc0: /* nil */
	case 0xc2: /* false */
	case 0xc3: /* true */
		return 0;
	case 0xcc: /* uint8 */
	case 0xd0: /* int8 */
		return rd_skip(r, 1);
	case 0xcd:
	case 0xd1:
		return rd_skip(r, 2);
	case 0xca: /* float32 */
	case 0xce:
	case 0xd2:
		return rd_skip(r, 4);
	case 0xcb: /* float64 */
	case 0xcf:
	case 0xd3:
		return rd_skip(r, 8);
	case 0xc4: /* bin8 */
	case 0xd9: /* str8 */
		return rd_be(r, 1, &n) || rd_skip(r, n);
	case 0xc5:
	case 0xda:
		return rd_be(r, 2, &n) || rd_skip(r, n);
	case 0xc6:
	case 0xdb:
		return rd_be(r, 4, &n) || rd_skip(r, n);
	case 0xdc: /* array16 */
		if (rd_be(r, 2, &n))
			return -1;
		goto container;
	case 0xdd:
		if (rd_be(r, 4, &n))
			return -1;
		goto container;
	case 0xde: /* map16 */
		if (rd_be(r, 2, &n))
			return -1;
		n *= 2;
		goto container;
	case 0xdf:
		if (rd_be(r, 4, &n))
			return -1;
		n *= 2;
		goto container;
	default:
		/* 0xc1 (never used) and every ext type: we define none. */
		return -1;
	}

container:
	/* depth counts the containers around this one. */
	if (depth >= WIRE_MAX_DEPTH || n > r->r_len - r->r_pos)
		return -1;
	while (n--)
		if (validate_item(r, depth + 1))
			return -1;
	return 0;
}

/* ---- Decoding ----------------------------------------------------------- */

/* Everything up to the body of a message of the expected type.  On success
 * the caller destroys *zone; *body points into it. */
static int wire_open(const void *buf, size_t len, int want_type, msgpack_zone *zone,
		     const msgpack_object **body)
{
	struct rd r = { buf, len, 0 };
	msgpack_unpack_return ret;
	msgpack_object root;
	size_t off = 0;
	int type, err;

	if (len > FP_WIRE_MAX_MESSAGE)
		return FP_WIRE_ETOOBIG;
	err = envelope_read(buf, len, &type);
	if (err)
		return err;
	if (type != want_type)
		return FP_WIRE_ETYPE;
	/* Exactly one item: trailing bytes would be a second, unchecked one. */
	if (validate_item(&r, 0) || r.r_pos != len)
		return FP_WIRE_EMALFORMED;
	if (!msgpack_zone_init(zone, WIRE_ZONE_CHUNK))
		return FP_WIRE_ENOMEM;
	ret = msgpack_unpack(buf, len, &off, zone, &root);
	if (ret != MSGPACK_UNPACK_SUCCESS || off != len) {
		msgpack_zone_destroy(zone);
		return ret == MSGPACK_UNPACK_NOMEM_ERROR ? FP_WIRE_ENOMEM : FP_WIRE_EMALFORMED;
	}
	/* envelope_read checked this on the bytes; check the tree we use. */
	if (root.type != MSGPACK_OBJECT_ARRAY || root.via.array.size != 3 ||
	    root.via.array.ptr[2].type != MSGPACK_OBJECT_MAP) {
		msgpack_zone_destroy(zone);
		return FP_WIRE_EMALFORMED;
	}
	/* The array lives in the zone, which the caller destroys, not here. */
	*body = &root.via.array.ptr[2]; // cppcheck-suppress autoVariables
	return 0;
}

/* Collects the values of keys 1..nkeys-1 of a body map.  Unknown keys are
 * skipped (a newer peer of the same version may send more); a repeated
 * known key is refused because peers could disagree on which one counts. */
static int body_fields(const msgpack_object *body, const msgpack_object **fields, size_t nkeys)
{
	uint32_t i;

	memset(fields, 0, nkeys * sizeof(*fields));
	for (i = 0; i < body->via.map.size; i++) {
		const msgpack_object_kv *kv = &body->via.map.ptr[i];
		uint64_t key;

		if (kv->key.type != MSGPACK_OBJECT_POSITIVE_INTEGER)
			return FP_WIRE_EFIELD;
		key = kv->key.via.u64;
		if (key == 0 || key >= nkeys)
			continue;
		if (fields[key])
			return FP_WIRE_EFIELD;
		fields[key] = &kv->val;
	}
	return 0;
}

static int obj_u64(const msgpack_object *o, uint64_t *v)
{
	if (!o || o->type != MSGPACK_OBJECT_POSITIVE_INTEGER)
		return FP_WIRE_EFIELD;
	*v = o->via.u64;
	return 0;
}

static int obj_u32(const msgpack_object *o, uint32_t *v)
{
	uint64_t x;

	if (obj_u64(o, &x) || x > UINT32_MAX)
		return FP_WIRE_EFIELD;
	*v = (uint32_t)x;
	return 0;
}

static int obj_bool(const msgpack_object *o, uint8_t *v)
{
	if (!o || o->type != MSGPACK_OBJECT_BOOLEAN)
		return FP_WIRE_EFIELD;
	*v = o->via.boolean ? 1 : 0;
	return 0;
}

/* A string's bytes, checked for the limits every string shares; a NUL
 * would silently cut the string short in C. */
static int obj_str_check(const msgpack_object *o, size_t max)
{
	if (!o || o->type != MSGPACK_OBJECT_STR)
		return FP_WIRE_EFIELD;
	if (o->via.str.size > max)
		return FP_WIRE_ETOOBIG;
	if (o->via.str.size && memchr(o->via.str.ptr, '\0', o->via.str.size))
		return FP_WIRE_EFIELD;
	return 0;
}

static int obj_strdup(const msgpack_object *o, char **out)
{
	int err = obj_str_check(o, WIRE_MAX_STRING);
	char *s;

	if (err)
		return err;
	s = malloc(o->via.str.size + 1);
	if (!s)
		return FP_WIRE_ENOMEM;
	if (o->via.str.size)
		memcpy(s, o->via.str.ptr, o->via.str.size);
	s[o->via.str.size] = '\0';
	*out = s;
	return 0;
}

static int obj_comm(const msgpack_object *o, char out[FP_COMM_LEN])
{
	int err = obj_str_check(o, FP_COMM_LEN - 1);

	if (err)
		return err;
	memset(out, 0, FP_COMM_LEN);
	if (o->via.str.size)
		memcpy(out, o->via.str.ptr, o->via.str.size);
	return 0;
}

static int obj_build_id(const msgpack_object *o, struct fp_build_id *id)
{
	if (!o || o->type != MSGPACK_OBJECT_BIN)
		return FP_WIRE_EFIELD;
	if (o->via.bin.size > FP_BUILD_ID_MAX)
		return FP_WIRE_ETOOBIG;
	memset(id, 0, sizeof(*id));
	id->fb_len = (uint8_t)o->via.bin.size;
	if (o->via.bin.size)
		memcpy(id->fb_data, o->via.bin.ptr, o->via.bin.size);
	return 0;
}

/* An array of at least min elements; *elems is NULL when it is empty. */
static int obj_array(const msgpack_object *o, uint32_t min, const msgpack_object **elems,
		     uint32_t *n)
{
	if (!o || o->type != MSGPACK_OBJECT_ARRAY || o->via.array.size < min)
		return FP_WIRE_EFIELD;
	*elems = o->via.array.ptr;
	*n = o->via.array.size;
	return 0;
}

/* A flat array of pairs: even length, at most max pairs. */
/* obj_tuples: a flat list of width-element entries, at most max of them. */
static int obj_tuples(const msgpack_object *o, uint32_t width, size_t max,
		      const msgpack_object **elems, size_t *nentries)
{
	uint32_t n;
	int err = obj_array(o, 0, elems, &n);

	if (err)
		return err;
	if (n % width != 0)
		return FP_WIRE_EFIELD;
	if (n / width > max)
		return FP_WIRE_ETOOBIG;
	*nentries = n / width;
	return 0;
}

static int obj_pairs(const msgpack_object *o, size_t max, const msgpack_object **elems,
		     size_t *npairs)
{
	return obj_tuples(o, 2, max, elems, npairs);
}

/* calloc that treats zero elements as "nothing", so empty lists stay NULL. */
static int alloc_array(size_t n, size_t size, void **out)
{
	void *p = NULL;

	if (n) {
		p = calloc(n, size);
		if (!p)
			return FP_WIRE_ENOMEM;
	}
	*out = p;
	return 0;
}

/* held_from_obj: HELLO key 11, the tables the agent holds. */
static int held_from_obj(const msgpack_object *o, struct fp_hello *h)
{
	const msgpack_object *a;
	size_t n, i;
	void *p;
	int err;

	if ((err = obj_tuples(o, HELD_WIDTH, FP_HELD_TABLES_MAX, &a, &n)) ||
	    (err = alloc_array(n, sizeof(struct fp_held_table), &p)))
		return err;
	h->fh_held = p;
	h->fh_nheld = n;
	for (i = 0; i < n; i++) {
		struct fp_held_table *t = &h->fh_held[i];

		if ((err = obj_build_id(&a[HELD_WIDTH * i], &t->ht_build_id)) ||
		    (err = obj_u64(&a[HELD_WIDTH * i + 1], &t->ht_id)))
			return err;
		if (!t->ht_build_id.fb_len)
			return FP_WIRE_EFIELD;
	}
	return 0;
}

static int hello_from_body(const msgpack_object *body, struct fp_hello *h)
{
	const msgpack_object *f[HELLO_NKEYS], *labels;
	size_t n, i;
	void *keys, *values;
	int err;

	if ((err = body_fields(body, f, HELLO_NKEYS)) ||
	    (err = obj_u64(f[HELLO_SESSION], &h->fh_session)) ||
	    (err = obj_strdup(f[HELLO_HOST], &h->fh_host)) ||
	    (err = obj_strdup(f[HELLO_BOOT_ID], &h->fh_boot_id)) ||
	    (err = obj_strdup(f[HELLO_KERNEL_RELEASE], &h->fh_kernel_release)) ||
	    (err = obj_build_id(f[HELLO_KERNEL_BUILD_ID], &h->fh_kernel_build_id)) ||
	    (err = obj_strdup(f[HELLO_AGENT_VERSION], &h->fh_agent_version)) ||
	    (err = obj_u32(f[HELLO_FREQUENCY], &h->fh_frequency)) ||
	    (err = obj_u32(f[HELLO_NCPUS], &h->fh_ncpus)) ||
	    (f[HELLO_FEATURES] && (err = obj_u64(f[HELLO_FEATURES], &h->fh_features))) ||
	    (f[HELLO_HELD] && (err = held_from_obj(f[HELLO_HELD], h))))
		return err;
	if (!f[HELLO_LABELS])
		return 0;
	if ((err = obj_pairs(f[HELLO_LABELS], WIRE_MAX_LABELS, &labels, &n)))
		return err;
	if ((err = alloc_array(n, sizeof(char *), &keys)))
		return err;
	h->fh_label_keys = keys;
	if ((err = alloc_array(n, sizeof(char *), &values)))
		return err;
	h->fh_label_values = values;
	h->fh_nlabels = n;
	for (i = 0; i < n; i++) {
		if ((err = obj_strdup(&labels[2 * i], &h->fh_label_keys[i])) ||
		    (err = obj_strdup(&labels[2 * i + 1], &h->fh_label_values[i])))
			return err;
	}
	return 0;
}

/* pycode_from_obj: elements 4..7 of a Python mapping record. */
static int pycode_from_obj(const msgpack_object *a, struct fp_pycode **out)
{
	struct fp_pycode *c = calloc(1, sizeof(*c));
	uint64_t format;
	uint32_t len;
	int err;

	if (!c)
		return FP_WIRE_ENOMEM;
	*out = c; /* freed with the mapping, whatever happens below */
	if ((err = obj_str_check(&a[4], FP_PY_NAME_MAX)) ||
	    (err = obj_strdup(&a[4], &c->pc_qualname)) ||
	    (err = obj_u32(&a[5], &c->pc_firstlineno)) || (err = obj_u64(&a[6], &format)))
		return err;
	if (!py_lines_ok(format) || a[7].type != MSGPACK_OBJECT_BIN)
		return FP_WIRE_EFIELD;
	c->pc_lines = (uint8_t)format;
	len = a[7].via.bin.size;
	if (len > FP_PY_LINETABLE_MAX)
		return FP_WIRE_ETOOBIG;
	if (len) {
		if (!(c->pc_linetable = malloc(len)))
			return FP_WIRE_ENOMEM;
		memcpy(c->pc_linetable, a[7].via.bin.ptr, len);
	}
	c->pc_linetable_len = len;
	return 0;
}

static int mapping_from_obj(const msgpack_object *o, struct fp_mapping *m)
{
	const msgpack_object *a;
	uint64_t kind;
	uint32_t n;
	int err;

	if ((err = obj_array(o, MAPPING_FIELDS, &a, &n)) || (err = obj_u32(&a[0], &m->fm_id)) ||
	    (err = obj_u64(&a[1], &kind)) || (err = obj_build_id(&a[2], &m->fm_build_id)))
		return err;
	/* FP_MAPPING_NONE as an id could never be referred to by a frame.
	 * Elements 4..7 are a Python code object's: required for kind 3,
	 * refused on the others (they would be silently dropped). */
	if (m->fm_id == FP_MAPPING_NONE || !kind_ok(kind))
		return FP_WIRE_EFIELD;
	if (kind == FP_MAP_PYTHON ? n < PY_MAPPING_FIELDS || m->fm_build_id.fb_len
				  : n > MAPPING_FIELDS)
		return FP_WIRE_EFIELD;
	m->fm_kind = (uint8_t)kind;
	if ((err = obj_strdup(&a[3], &m->fm_path)))
		return err;
	return kind == FP_MAP_PYTHON ? pycode_from_obj(a, &m->fm_py) : 0;
}

static int thread_from_obj(const msgpack_object *o, struct fp_thread *t)
{
	const msgpack_object *a;
	uint32_t n;
	int err;

	if ((err = obj_array(o, THREAD_FIELDS, &a, &n)) || (err = obj_u32(&a[0], &t->ft_id)) ||
	    (err = obj_u32(&a[1], &t->ft_pid)) || (err = obj_u32(&a[2], &t->ft_tid)) ||
	    (err = obj_u64(&a[3], &t->ft_cgroup)) || (err = obj_comm(&a[4], t->ft_comm)) ||
	    (err = obj_comm(&a[5], t->ft_process)))
		return err;
	return obj_strdup(&a[6], &t->ft_container);
}

/* obj_none_or_u32: a u32 other than none, or WIRE_NONE meaning none.  The
 * sentinel has one spelling only, so that re-encoding is exact. */
static int obj_none_or_u32(const msgpack_object *o, uint32_t none, uint32_t *v)
{
	if (o->type == MSGPACK_OBJECT_NEGATIVE_INTEGER && o->via.i64 == WIRE_NONE) {
		*v = none;
		return 0;
	}
	if (obj_u32(o, v) || *v == none)
		return FP_WIRE_EFIELD;
	return 0;
}

static int obj_i64(const msgpack_object *o, int64_t *v)
{
	if (o->type == MSGPACK_OBJECT_NEGATIVE_INTEGER) {
		*v = o->via.i64;
		return 0;
	}
	if (o->type != MSGPACK_OBJECT_POSITIVE_INTEGER || o->via.u64 > INT64_MAX)
		return FP_WIRE_EFIELD;
	*v = (int64_t)o->via.u64;
	return 0;
}

/* id = previous id + delta, parent = id - delta (0: none); both must be
 * valid node ids, and a node cannot be its own parent. */
static int nodes_from_obj(const msgpack_object *o, struct fp_batch *b)
{
	const msgpack_object *a;
	int64_t prev = 0, id_delta, parent_delta;
	size_t n, i;
	void *p;
	int err;

	if ((err = obj_tuples(o, NODE_WIDTH, SIZE_MAX, &a, &n)) ||
	    (err = alloc_array(n, sizeof(struct fp_node), &p)))
		return err;
	b->fb_nodes = p;
	b->fb_nnodes = n;
	for (i = 0; i < n; i++) {
		struct fp_node *nd = &b->fb_nodes[i];
		const msgpack_object *t = &a[NODE_WIDTH * i];
		int64_t id, parent;

		if ((err = obj_i64(&t[0], &id_delta)) || (err = obj_i64(&t[1], &parent_delta)) ||
		    (err = obj_none_or_u32(&t[2], FP_MAPPING_NONE, &nd->fn_frame.ff_mapping)) ||
		    (err = obj_u64(&t[3], &nd->fn_frame.ff_offset)))
			return err;
		/* Both deltas bounded first, so that the sums cannot overflow. */
		if (id_delta < -(int64_t)UINT32_MAX || id_delta > (int64_t)UINT32_MAX ||
		    parent_delta < -(int64_t)UINT32_MAX || parent_delta > (int64_t)UINT32_MAX)
			return FP_WIRE_EFIELD;
		id = prev + id_delta;
		parent = id - parent_delta;
		if (id < 0 || id >= FP_NODE_NONE ||
		    (parent_delta && (parent < 0 || parent >= FP_NODE_NONE)))
			return FP_WIRE_EFIELD;
		nd->fn_id = (uint32_t)id;
		nd->fn_parent = parent_delta ? (uint32_t)parent : FP_NODE_NONE;
		prev = id;
	}
	return 0;
}

static int counts_from_obj(const msgpack_object *o, struct fp_batch *b)
{
	const msgpack_object *a;
	size_t n, i;
	void *p;
	int err;

	if ((err = obj_tuples(o, COUNT_WIDTH, SIZE_MAX, &a, &n)) ||
	    (err = alloc_array(n, sizeof(struct fp_count), &p)))
		return err;
	b->fb_counts = p;
	b->fb_ncounts = n;
	for (i = 0; i < n; i++) {
		struct fp_count *c = &b->fb_counts[i];
		const msgpack_object *t = &a[COUNT_WIDTH * i];

		if ((err = obj_u32(&t[0], &c->fc_thread)) ||
		    (err = obj_none_or_u32(&t[1], FP_NODE_NONE, &c->fc_node)) ||
		    (err = obj_u32(&t[2], &c->fc_count)))
			return err;
	}
	return 0;
}

static int get_varint(const uint8_t **p, const uint8_t *end, uint64_t *v)
{
	uint64_t x = 0;
	unsigned i;

	for (i = 0; i < VARINT_MAX && *p < end; i++) {
		uint8_t byte = *(*p)++;
		x |= (uint64_t)(byte & 0x7f) << (7 * i);
		if (!(byte & 0x80)) {
			*v = x;
			return 0;
		}
	}
	return FP_WIRE_EFIELD; /* truncated, or longer than a u64 */
}

/* leaves_walk: check key 11's bytes (enc_leaves) and, with out, write its
 * counts there; *n is how many it holds.  Every value is range-checked:
 * thread ids and leaves stay within u32 (leaf - 1 is the node, 0 none),
 * each group holds at least one leaf, a following count is at least 2. */
static int leaves_walk(const uint8_t *p, const uint8_t *end, struct fp_count *out, size_t *n)
{
	uint64_t thread = 0, group, v, count;
	size_t k = 0;
	int err;

	while (p < end) {
		uint64_t leaf = 0;

		if ((err = get_varint(&p, end, &v)) || (err = get_varint(&p, end, &group)))
			return err;
		if (v > UINT32_MAX - thread || !group || group > (size_t)(end - p))
			return FP_WIRE_EFIELD;
		thread += v;
		for (; group; group--) {
			if ((err = get_varint(&p, end, &v)))
				return err;
			count = 1;
			if ((v & 1) && (err = get_varint(&p, end, &count)))
				return err;
			if (v / 2 > UINT32_MAX - leaf ||
			    (v & 1 && (count < 2 || count > UINT32_MAX)))
				return FP_WIRE_EFIELD;
			leaf += v / 2;
			if (out)
				out[k] = (struct fp_count){ (uint32_t)thread, (uint32_t)(leaf - 1),
							    (uint32_t)count };
			k++;
		}
	}
	*n = k;
	return 0;
}

/* nodes_walk: key 12's bytes (enc_nodes_varint) by the rules of key 8
 * (nodes_from_obj), into out when given; *n is how many it holds. */
static int nodes_walk(const uint8_t *p, const uint8_t *end, struct fp_node *out, size_t *n)
{
	int64_t prev = 0;
	size_t k = 0;
	int err;

	while (p < end) {
		uint64_t id_zz, parent_zz, mapping, offset;
		int64_t id, parent, id_delta, parent_delta;

		if ((err = get_varint(&p, end, &id_zz)) ||
		    (err = get_varint(&p, end, &parent_zz)) ||
		    (err = get_varint(&p, end, &mapping)) || (err = get_varint(&p, end, &offset)))
			return err;
		if (id_zz > 2 * (uint64_t)UINT32_MAX || parent_zz > 2 * (uint64_t)UINT32_MAX ||
		    mapping > UINT32_MAX)
			return FP_WIRE_EFIELD;
		id_delta = (int64_t)(id_zz >> 1) ^ -(int64_t)(id_zz & 1);
		parent_delta = (int64_t)(parent_zz >> 1) ^ -(int64_t)(parent_zz & 1);
		id = prev + id_delta;
		parent = id - parent_delta;
		if (id < 0 || id >= FP_NODE_NONE ||
		    (parent_delta && (parent < 0 || parent >= FP_NODE_NONE)))
			return FP_WIRE_EFIELD;
		if (out)
			out[k] = (struct fp_node){
				.fn_id = (uint32_t)id,
				.fn_parent = parent_delta ? (uint32_t)parent : FP_NODE_NONE,
				.fn_frame = { (uint32_t)(mapping - 1), offset },
			};
		k++;
		prev = id;
	}
	*n = k;
	return 0;
}

/* Key 12, after any key 8 nodes. */
static int nodes_varint_from_obj(const msgpack_object *o, struct fp_batch *b)
{
	const uint8_t *p, *end;
	size_t n;
	void *all;
	int err;

	if (o->type != MSGPACK_OBJECT_BIN || !o->via.bin.size)
		return FP_WIRE_EFIELD;
	p = (const uint8_t *)o->via.bin.ptr;
	end = p + o->via.bin.size;
	if ((err = nodes_walk(p, end, NULL, &n)))
		return err;
	if (!(all = realloc(b->fb_nodes, (b->fb_nnodes + n) * sizeof(struct fp_node))))
		return FP_WIRE_ENOMEM;
	b->fb_nodes = all;
	nodes_walk(p, end, b->fb_nodes + b->fb_nnodes, &n);
	b->fb_nnodes += n;
	return 0;
}

/* Key 13, after the CPU counts: off-CPU counts, whose time is never 0. */
static int offcpu_from_obj(const msgpack_object *o, struct fp_batch *b)
{
	const msgpack_object *a;
	size_t n, i;
	void *all;
	int err;

	if ((err = obj_tuples(o, OFFCPU_WIDTH, SIZE_MAX, &a, &n)))
		return err;
	if (!n)
		return FP_WIRE_EFIELD;
	if (!(all = realloc(b->fb_counts, (b->fb_ncounts + n) * sizeof(struct fp_count))))
		return FP_WIRE_ENOMEM;
	b->fb_counts = all;
	for (i = 0; i < n; i++) {
		struct fp_count *c = &b->fb_counts[b->fb_ncounts];
		const msgpack_object *t = &a[OFFCPU_WIDTH * i];

		if ((err = obj_u32(&t[0], &c->fc_thread)) ||
		    (err = obj_none_or_u32(&t[1], FP_NODE_NONE, &c->fc_node)) ||
		    (err = obj_u32(&t[2], &c->fc_count)) || (err = obj_u64(&t[3], &c->fc_off_ns)))
			return err;
		if (!c->fc_off_ns || !c->fc_count)
			return FP_WIRE_EFIELD;
		b->fb_ncounts++;
	}
	return 0;
}

/* Key 11, after any key 9 counts. */
static int leaves_from_obj(const msgpack_object *o, struct fp_batch *b)
{
	const uint8_t *p, *end;
	size_t n;
	void *all;
	int err;

	if (o->type != MSGPACK_OBJECT_BIN)
		return FP_WIRE_EFIELD;
	/* Empty is spelled by leaving the key out, so re-encoding is exact. */
	if (!o->via.bin.size)
		return FP_WIRE_EFIELD;
	p = (const uint8_t *)o->via.bin.ptr;
	end = p + o->via.bin.size;
	if ((err = leaves_walk(p, end, NULL, &n)))
		return err;
	if (!(all = realloc(b->fb_counts, (b->fb_ncounts + n) * sizeof(struct fp_count))))
		return FP_WIRE_ENOMEM;
	b->fb_counts = all;
	leaves_walk(p, end, b->fb_counts + b->fb_ncounts, &n);
	b->fb_ncounts += n;
	return 0;
}

static int lost_from_obj(const msgpack_object *o, struct fp_lost *l)
{
	const msgpack_object *a;
	uint32_t n;
	int err;

	if ((err = obj_array(o, LOST_FIELDS, &a, &n)) || (err = obj_u64(&a[0], &l->fl_samples)) ||
	    (err = obj_u64(&a[1], &l->fl_stack_errors)) || (err = obj_u64(&a[2], &l->fl_batches)) ||
	    (err = obj_u64(&a[3], &l->fl_samples_dropped)))
		return err;
	return 0;
}

static int batch_from_body(const msgpack_object *body, struct fp_batch *b)
{
	const msgpack_object *f[BATCH_NKEYS], *a;
	uint32_t n, i;
	void *p;
	int err;

	if ((err = body_fields(body, f, BATCH_NKEYS)) ||
	    (err = obj_u64(f[BATCH_SESSION], &b->fb_session)) ||
	    (err = obj_u64(f[BATCH_SEQ], &b->fb_seq)) ||
	    (err = obj_u64(f[BATCH_START_NS], &b->fb_start_ns)) ||
	    (err = obj_u64(f[BATCH_END_NS], &b->fb_end_ns)) ||
	    (err = obj_u64(f[BATCH_PERIOD_NS], &b->fb_period_ns)))
		return err;
	if (f[BATCH_MAPPINGS]) {
		if ((err = obj_array(f[BATCH_MAPPINGS], 0, &a, &n)) ||
		    (err = alloc_array(n, sizeof(struct fp_mapping), &p)))
			return err;
		b->fb_mappings = p;
		b->fb_nmappings = n;
		for (i = 0; i < n; i++)
			if ((err = mapping_from_obj(&a[i], &b->fb_mappings[i])))
				return err;
	}
	if (f[BATCH_THREADS]) {
		if ((err = obj_array(f[BATCH_THREADS], 0, &a, &n)) ||
		    (err = alloc_array(n, sizeof(struct fp_thread), &p)))
			return err;
		b->fb_threads = p;
		b->fb_nthreads = n;
		for (i = 0; i < n; i++)
			if ((err = thread_from_obj(&a[i], &b->fb_threads[i])))
				return err;
	}
	if (f[BATCH_NODES] && (err = nodes_from_obj(f[BATCH_NODES], b)))
		return err;
	if (f[BATCH_NODES_VARINT] && (err = nodes_varint_from_obj(f[BATCH_NODES_VARINT], b)))
		return err;
	if (f[BATCH_COUNTS] && (err = counts_from_obj(f[BATCH_COUNTS], b)))
		return err;
	if (f[BATCH_LEAVES] && (err = leaves_from_obj(f[BATCH_LEAVES], b)))
		return err;
	if (f[BATCH_OFFCPU] && (err = offcpu_from_obj(f[BATCH_OFFCPU], b)))
		return err;
	if (f[BATCH_LOST] && (err = lost_from_obj(f[BATCH_LOST], &b->fb_lost)))
		return err;
	return 0;
}

static int ksyms_from_body(const msgpack_object *body, struct fp_ksyms *k)
{
	const msgpack_object *f[KSYMS_NKEYS], *a;
	uint64_t kind;
	size_t n, i;
	void *p;
	int err;

	if ((err = body_fields(body, f, KSYMS_NKEYS)) ||
	    (err = obj_u64(f[KSYMS_SESSION], &k->fs_session)) ||
	    (err = obj_u64(f[KSYMS_KIND], &kind)) ||
	    (err = obj_build_id(f[KSYMS_BUILD_ID], &k->fs_build_id)) ||
	    (err = obj_strdup(f[KSYMS_NAME], &k->fs_name)) ||
	    (err = obj_u32(f[KSYMS_PART], &k->fs_part)) ||
	    (err = obj_bool(f[KSYMS_LAST], &k->fs_last)))
		return err;
	if (!ksyms_kind_ok(kind))
		return FP_WIRE_EFIELD;
	k->fs_kind = (uint8_t)kind;
	if (!f[KSYMS_SYMS])
		return 0;
	if ((err = obj_pairs(f[KSYMS_SYMS], WIRE_MAX_KSYMS, &a, &n)) ||
	    (err = alloc_array(n, sizeof(struct fp_ksym), &p)))
		return err;
	k->fs_syms = p;
	k->fs_nsyms = n;
	for (i = 0; i < n; i++) {
		if ((err = obj_u64(&a[2 * i], &k->fs_syms[i].fk_offset)) ||
		    (err = obj_strdup(&a[2 * i + 1], &k->fs_syms[i].fk_name)))
			return err;
	}
	return 0;
}

static int ranges_from_obj(const msgpack_object *o, struct fp_reply *r)
{
	const msgpack_object *a;
	size_t n, i;
	void *p;
	int err;

	if ((err = obj_tuples(o, RANGE_WIDTH, FP_WIRE_MAX_RANGES, &a, &n)) ||
	    (err = alloc_array(n, sizeof(struct fp_range), &p)))
		return err;
	r->fr_ranges = p;
	r->fr_nranges = n;
	for (i = 0; i < n; i++) {
		struct fp_range *g = &r->fr_ranges[i];
		const msgpack_object *t = &a[RANGE_WIDTH * i];

		if ((err = obj_build_id(&t[0], &g->fg_build_id)) ||
		    (err = obj_u64(&t[1], &g->fg_offset)) || (err = obj_u32(&t[2], &g->fg_length)))
			return err;
		if (!g->fg_build_id.fb_len || g->fg_length > FP_RANGE_MAX)
			return FP_WIRE_EFIELD;
	}
	return 0;
}

static int tables_from_obj(const msgpack_object *o, struct fp_reply *r)
{
	const msgpack_object *a;
	size_t n, i;
	void *p;
	int err;

	if ((err = obj_tuples(o, TABLE_WIDTH, WIRE_MAX_TABLE_PARTS, &a, &n)) ||
	    (err = alloc_array(n, sizeof(struct fp_table_part), &p)))
		return err;
	r->fr_tables = p;
	r->fr_ntables = n;
	for (i = 0; i < n; i++) {
		struct fp_table_part *t = &r->fr_tables[i];
		const msgpack_object *x = &a[TABLE_WIDTH * i];

		if ((err = obj_build_id(&x[0], &t->tp_build_id)) ||
		    (err = obj_u32(&x[1], &t->tp_offset)) || (err = obj_u32(&x[2], &t->tp_total)))
			return err;
		if (x[3].type != MSGPACK_OBJECT_BIN)
			return FP_WIRE_EFIELD;
		t->tp_len = x[3].via.bin.size;
		if (!table_part_ok(t))
			return x[3].via.bin.size > FP_TABLE_PART_MAX ? FP_WIRE_ETOOBIG
								     : FP_WIRE_EFIELD;
		if (!(t->tp_data = malloc(t->tp_len)))
			return FP_WIRE_ENOMEM;
		memcpy(t->tp_data, x[3].via.bin.ptr, t->tp_len);
	}
	return 0;
}

static int file_from_body(const msgpack_object *body, struct fp_file_data *d)
{
	const msgpack_object *f[FILE_NKEYS];
	int err;

	if ((err = body_fields(body, f, FILE_NKEYS)) ||
	    (err = obj_u64(f[FILE_SESSION], &d->fd_session)) ||
	    (err = obj_build_id(f[FILE_BUILD_ID], &d->fd_build_id)) ||
	    (err = obj_u64(f[FILE_OFFSET], &d->fd_offset)) ||
	    (err = obj_u64(f[FILE_SIZE], &d->fd_file_size)) ||
	    (f[FILE_ERROR] && (err = obj_u32(f[FILE_ERROR], &d->fd_error))))
		return err;
	if (!d->fd_build_id.fb_len || (f[FILE_ERROR] && !d->fd_error))
		return FP_WIRE_EFIELD;
	if (!f[FILE_DATA])
		return 0;
	if (f[FILE_DATA]->type != MSGPACK_OBJECT_BIN || d->fd_error)
		return FP_WIRE_EFIELD;
	if (f[FILE_DATA]->via.bin.size > FP_RANGE_MAX)
		return FP_WIRE_ETOOBIG;
	/* Empty data is spelled by leaving the key out, so re-encoding is exact. */
	if (f[FILE_DATA]->via.bin.size == 0)
		return FP_WIRE_EFIELD;
	d->fd_data = malloc(f[FILE_DATA]->via.bin.size);
	if (!d->fd_data)
		return FP_WIRE_ENOMEM;
	memcpy(d->fd_data, f[FILE_DATA]->via.bin.ptr, f[FILE_DATA]->via.bin.size);
	d->fd_len = f[FILE_DATA]->via.bin.size;
	return 0;
}

/* kfuncs_walk: check key 10's bytes (enc_kfuncs) and, with k's arrays,
 * fill them; *n is how many entries it holds.  Offsets rise strictly and
 * stay within u32. */
static int kfuncs_walk(const uint8_t *p, const uint8_t *end, struct fp_kfuncs *k, uint32_t *n)
{
	uint64_t v, off = 0;
	uint32_t i = 0;
	int err;

	while (p < end) {
		if ((err = get_varint(&p, end, &v)))
			return err;
		if (i == FP_KFUNCS_MAX)
			return FP_WIRE_ETOOBIG;
		if ((i && v / 2 == 0) || v / 2 > UINT32_MAX - off)
			return FP_WIRE_EFIELD;
		off += v / 2;
		if (k) {
			k->kf_offsets[i] = (uint32_t)off;
			k->kf_gaps[i / 8] |= (uint8_t)((v & 1) << (i % 8));
		}
		i++;
	}
	*n = i;
	return 0;
}

/* Keys 9 and 10 come together. */
static int kfuncs_from_obj(const msgpack_object *id, const msgpack_object *o, struct fp_kfuncs *k)
{
	const uint8_t *p, *end;
	uint32_t n;
	int err;

	if (!id || !o || o->type != MSGPACK_OBJECT_BIN || !o->via.bin.size)
		return FP_WIRE_EFIELD;
	if ((err = obj_build_id(id, &k->kf_build_id)))
		return err;
	if (!k->kf_build_id.fb_len)
		return FP_WIRE_EFIELD;
	p = (const uint8_t *)o->via.bin.ptr;
	end = p + o->via.bin.size;
	if ((err = kfuncs_walk(p, end, NULL, &n)))
		return err;
	k->kf_offsets = malloc((size_t)n * sizeof(*k->kf_offsets));
	k->kf_gaps = calloc((n + 7) / 8, 1);
	if (!k->kf_offsets || !k->kf_gaps)
		return FP_WIRE_ENOMEM;
	kfuncs_walk(p, end, k, &n);
	k->kf_n = n;
	return 0;
}

static int reply_from_body(const msgpack_object *body, struct fp_reply *r)
{
	const msgpack_object *f[REPLY_NKEYS], *a;
	uint64_t status;
	uint32_t n, i;
	void *p;
	int err;

	if ((err = body_fields(body, f, REPLY_NKEYS)) ||
	    (err = obj_u64(f[REPLY_STATUS], &status)) || (err = obj_u64(f[REPLY_SEQ], &r->fr_seq)))
		return err;
	if (!status_ok(status))
		return FP_WIRE_EFIELD;
	r->fr_status = (uint8_t)status;
	if (f[REPLY_FEATURES] && (err = obj_u64(f[REPLY_FEATURES], &r->fr_features)))
		return err;
	if (f[REPLY_TABLES_PENDING] &&
	    (err = obj_u32(f[REPLY_TABLES_PENDING], &r->fr_tables_pending)))
		return err;
	if (f[REPLY_ERROR] && (err = obj_strdup(f[REPLY_ERROR], &r->fr_error)))
		return err;
	if (f[REPLY_RANGES] && (err = ranges_from_obj(f[REPLY_RANGES], r)))
		return err;
	if (f[REPLY_TABLES] && (err = tables_from_obj(f[REPLY_TABLES], r)))
		return err;
	if (f[REPLY_WRITTEN]) {
		if ((err = obj_u64(f[REPLY_WRITTEN], &r->fr_written)))
			return err;
		r->fr_has_written = 1;
	}
	if ((f[REPLY_KFUNCS_BUILD_ID] || f[REPLY_KFUNCS]) &&
	    (err = kfuncs_from_obj(f[REPLY_KFUNCS_BUILD_ID], f[REPLY_KFUNCS], &r->fr_kfuncs)))
		return err;
	if (!f[REPLY_WANT])
		return 0;
	if ((err = obj_array(f[REPLY_WANT], 0, &a, &n)))
		return err;
	if (n > WIRE_MAX_WANT)
		return FP_WIRE_ETOOBIG;
	if ((err = alloc_array(n, sizeof(struct fp_build_id), &p)))
		return err;
	r->fr_want = p;
	r->fr_nwant = n;
	for (i = 0; i < n; i++)
		if ((err = obj_build_id(&a[i], &r->fr_want[i])))
			return err;
	return 0;
}

int fp_wire_decode_hello(const void *buf, size_t len, struct fp_hello *out)
{
	const msgpack_object *body;
	struct fp_hello h;
	msgpack_zone zone;
	int err = wire_open(buf, len, FP_MSG_HELLO, &zone, &body);

	if (err)
		return err;
	memset(&h, 0, sizeof(h));
	err = hello_from_body(body, &h);
	msgpack_zone_destroy(&zone);
	if (err) {
		fp_hello_fini(&h);
		return err;
	}
	*out = h;
	return 0;
}

int fp_wire_decode_batch(const void *buf, size_t len, struct fp_batch *out)
{
	const msgpack_object *body;
	struct fp_batch b;
	msgpack_zone zone;
	int err = wire_open(buf, len, FP_MSG_SAMPLES, &zone, &body);

	if (err)
		return err;
	memset(&b, 0, sizeof(b));
	err = batch_from_body(body, &b);
	msgpack_zone_destroy(&zone);
	if (err) {
		fp_batch_fini(&b);
		return err;
	}
	*out = b;
	return 0;
}

int fp_wire_decode_ksyms(const void *buf, size_t len, struct fp_ksyms *out)
{
	const msgpack_object *body;
	struct fp_ksyms k;
	msgpack_zone zone;
	int err = wire_open(buf, len, FP_MSG_KSYMS, &zone, &body);

	if (err)
		return err;
	memset(&k, 0, sizeof(k));
	err = ksyms_from_body(body, &k);
	msgpack_zone_destroy(&zone);
	if (err) {
		fp_ksyms_fini(&k);
		return err;
	}
	*out = k;
	return 0;
}

int fp_wire_decode_reply(const void *buf, size_t len, struct fp_reply *out)
{
	const msgpack_object *body;
	struct fp_reply r;
	msgpack_zone zone;
	int err = wire_open(buf, len, FP_MSG_REPLY, &zone, &body);

	if (err)
		return err;
	memset(&r, 0, sizeof(r));
	err = reply_from_body(body, &r);
	msgpack_zone_destroy(&zone);
	if (err) {
		fp_reply_fini(&r);
		return err;
	}
	*out = r;
	return 0;
}

int fp_wire_decode_file(const void *buf, size_t len, struct fp_file_data *out)
{
	const msgpack_object *body;
	struct fp_file_data d;
	msgpack_zone zone;
	int err = wire_open(buf, len, FP_MSG_FILE, &zone, &body);

	if (err)
		return err;
	memset(&d, 0, sizeof(d));
	err = file_from_body(body, &d);
	msgpack_zone_destroy(&zone);
	if (err) {
		fp_file_data_fini(&d);
		return err;
	}
	*out = d;
	return 0;
}
