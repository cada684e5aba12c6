/* fuzz_wire.c: libFuzzer target for common/wire.c.
 *
 * Every input goes through fp_wire_peek and all four decoders.  Whatever
 * decodes must re-encode, decode again to an equal value, and re-encode to
 * the same bytes (a batch both with and without the varint keys): the
 * symbolizer re-encodes what it received (e.g. when
 * forwarding), so an unstable round trip would be a silent corruption.
 * Any violation calls abort() so libFuzzer records the input.
 */
#include "batch.h"
#include "wire.h"

#include <errno.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static void fail(const char *what, int type, int err)
{
	fprintf(stderr, "fuzz_wire: %s (type %d, err %d: %s)\n", what, type, err,
		fp_wire_strerror(err));
	abort();
}

static int str_eq(const char *a, const char *b)
{
	if (!a || !b)
		return a == b;
	return strcmp(a, b) == 0;
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
	    a->fh_features != b->fh_features || a->fh_nlabels != b->fh_nlabels ||
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

static int pycode_eq(const struct fp_pycode *a, const struct fp_pycode *b)
{
	if (!a || !b)
		return a == b;
	return str_eq(a->pc_qualname, b->pc_qualname) && a->pc_firstlineno == b->pc_firstlineno &&
	       a->pc_lines == b->pc_lines && a->pc_linetable_len == b->pc_linetable_len &&
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
		    x->ft_cgroup != y->ft_cgroup ||
		    memcmp(x->ft_comm, y->ft_comm, FP_COMM_LEN) != 0 ||
		    memcmp(x->ft_process, y->ft_process, FP_COMM_LEN) != 0 ||
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

static int ksyms_eq(const struct fp_ksyms *a, const struct fp_ksyms *b)
{
	size_t i;

	if (a->fs_session != b->fs_session || a->fs_kind != b->fs_kind ||
	    !fp_build_id_eq(&a->fs_build_id, &b->fs_build_id) || !str_eq(a->fs_name, b->fs_name) ||
	    a->fs_part != b->fs_part || a->fs_last != b->fs_last || a->fs_nsyms != b->fs_nsyms)
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
	    !str_eq(a->fr_error, b->fr_error) || a->fr_nwant != b->fr_nwant ||
	    a->fr_nranges != b->fr_nranges || a->fr_kfuncs.kf_n != b->fr_kfuncs.kf_n ||
	    a->fr_tables_pending != b->fr_tables_pending)
		return 0;
	if (a->fr_kfuncs.kf_n &&
	    (!fp_build_id_eq(&a->fr_kfuncs.kf_build_id, &b->fr_kfuncs.kf_build_id) ||
	     memcmp(a->fr_kfuncs.kf_offsets, b->fr_kfuncs.kf_offsets,
		    a->fr_kfuncs.kf_n * sizeof(uint32_t)) ||
	     memcmp(a->fr_kfuncs.kf_gaps, b->fr_kfuncs.kf_gaps, (a->fr_kfuncs.kf_n + 7) / 8)))
		return 0;
	for (i = 0; i < a->fr_nwant; i++)
		if (!fp_build_id_eq(&a->fr_want[i], &b->fr_want[i]))
			return 0;
	for (i = 0; i < a->fr_nranges; i++)
		if (!fp_build_id_eq(&a->fr_ranges[i].fg_build_id, &b->fr_ranges[i].fg_build_id) ||
		    a->fr_ranges[i].fg_offset != b->fr_ranges[i].fg_offset ||
		    a->fr_ranges[i].fg_length != b->fr_ranges[i].fg_length)
			return 0;
	return 1;
}

static int file_eq(const struct fp_file_data *a, const struct fp_file_data *b)
{
	return a->fd_session == b->fd_session && fp_build_id_eq(&a->fd_build_id, &b->fd_build_id) &&
	       a->fd_offset == b->fd_offset && a->fd_file_size == b->fd_file_size &&
	       a->fd_error == b->fd_error && a->fd_len == b->fd_len &&
	       (!a->fd_len || memcmp(a->fd_data, b->fd_data, a->fd_len) == 0);
}

static void same_bytes(const char *e1, size_t l1, const char *e2, size_t l2, int type)
{
	if (l1 != l2 || memcmp(e1, e2, l1) != 0)
		fail("re-encoding is not stable", type, 0);
}

/* One round trip per message type; each returns whether the input decoded
 * as that type.  The four differ only in their types, which C cannot
 * abstract without losing the compiler's type checks. */

static int roundtrip_hello(const uint8_t *data, size_t size)
{
	struct fp_hello a, b;
	char *e1, *e2;
	size_t l1, l2;
	int err;

	if (fp_wire_decode_hello(data, size, &a))
		return 0;
	if ((err = fp_wire_encode_hello(&a, &e1, &l1)))
		fail("decoded hello does not encode", FP_MSG_HELLO, err);
	if ((err = fp_wire_decode_hello(e1, l1, &b)))
		fail("re-encoded hello does not decode", FP_MSG_HELLO, err);
	if (!hello_eq(&a, &b))
		fail("hello changed in the round trip", FP_MSG_HELLO, 0);
	if ((err = fp_wire_encode_hello(&b, &e2, &l2)))
		fail("hello does not encode twice", FP_MSG_HELLO, err);
	same_bytes(e1, l1, e2, l2, FP_MSG_HELLO);
	fp_hello_fini(&a);
	fp_hello_fini(&b);
	free(e1);
	free(e2);
	return 1;
}

static int count_cmp(const void *a, const void *b)
{
	const struct fp_count *x = a, *y = b;

	if (x->fc_thread != y->fc_thread)
		return x->fc_thread < y->fc_thread ? -1 : 1;
	if (x->fc_node + 1 != y->fc_node + 1)
		return x->fc_node + 1 < y->fc_node + 1 ? -1 : 1;
	return x->fc_count < y->fc_count ? -1 : x->fc_count > y->fc_count;
}

/* sort_cpu_counts: b's CPU counts sorted as key 11 sends them, then its
 * off-CPU counts (key 13) in their order. */
static void sort_cpu_counts(struct fp_batch *b)
{
	struct fp_count *t = malloc((b->fb_ncounts ? b->fb_ncounts : 1) * sizeof(*t));
	size_t i, n = 0;

	if (!t)
		abort();
	for (i = 0; i < b->fb_ncounts; i++)
		if (!b->fb_counts[i].fc_off_ns)
			t[n++] = b->fb_counts[i];
	qsort(t, n, sizeof(*t), count_cmp);
	for (i = 0; i < b->fb_ncounts; i++)
		if (b->fb_counts[i].fc_off_ns)
			t[n++] = b->fb_counts[i];
	memcpy(b->fb_counts, t, b->fb_ncounts * sizeof(*t));
	free(t);
}

/* Through SAMPLES keys 11 and 12 (FP_FEATURES_KNOWN): the same nodes, the
 * same counts (the CPU ones sorted), the same bytes again.  b's CPU counts
 * end up sorted. */
static void roundtrip_varint(struct fp_batch *b)
{
	struct fp_wire_batch_parts parts;
	struct fp_batch c;
	char *e3, *e4;
	size_t l3, l4, i;
	int err, zero = 0;

	for (i = 0; i < b->fb_ncounts; i++)
		zero |= !b->fb_counts[i].fc_count;
	err = fp_wire_encode_batch_parts(b, FP_FEATURES_KNOWN, &e3, &l3, &parts);
	if (zero) { /* key 11 has no spelling for a count of 0 */
		if (err != -EINVAL)
			fail("count 0 encoded as key 11", FP_MSG_SAMPLES, err);
		return;
	}
	if (err)
		fail("decoded batch does not encode as varints", FP_MSG_SAMPLES, err);
	if ((err = fp_wire_decode_batch(e3, l3, &c)))
		fail("varint batch does not decode", FP_MSG_SAMPLES, err);
	sort_cpu_counts(b);
	if (!batch_eq(b, &c))
		fail("batch changed in the varint round trip", FP_MSG_SAMPLES, 0);
	if ((err = fp_wire_encode_batch_parts(&c, FP_FEATURES_KNOWN, &e4, &l4, &parts)))
		fail("varint batch does not encode twice", FP_MSG_SAMPLES, err);
	same_bytes(e3, l3, e4, l4, FP_MSG_SAMPLES);
	fp_batch_fini(&c);
	free(e3);
	free(e4);
}

static int roundtrip_batch(const uint8_t *data, size_t size)
{
	struct fp_batch a, b;
	char *e1, *e2;
	size_t l1, l2;
	int err;

	if (fp_wire_decode_batch(data, size, &a))
		return 0;
	if ((err = fp_wire_encode_batch(&a, &e1, &l1)))
		fail("decoded batch does not encode", FP_MSG_SAMPLES, err);
	if ((err = fp_wire_decode_batch(e1, l1, &b)))
		fail("re-encoded batch does not decode", FP_MSG_SAMPLES, err);
	if (!batch_eq(&a, &b))
		fail("batch changed in the round trip", FP_MSG_SAMPLES, 0);
	if ((err = fp_wire_encode_batch(&b, &e2, &l2)))
		fail("batch does not encode twice", FP_MSG_SAMPLES, err);
	same_bytes(e1, l1, e2, l2, FP_MSG_SAMPLES);
	roundtrip_varint(&b);
	fp_batch_fini(&a);
	fp_batch_fini(&b);
	free(e1);
	free(e2);
	return 1;
}

static int roundtrip_ksyms(const uint8_t *data, size_t size)
{
	struct fp_ksyms a, b;
	char *e1, *e2;
	size_t l1, l2;
	int err;

	if (fp_wire_decode_ksyms(data, size, &a))
		return 0;
	if ((err = fp_wire_encode_ksyms(&a, &e1, &l1)))
		fail("decoded ksyms does not encode", FP_MSG_KSYMS, err);
	if ((err = fp_wire_decode_ksyms(e1, l1, &b)))
		fail("re-encoded ksyms does not decode", FP_MSG_KSYMS, err);
	if (!ksyms_eq(&a, &b))
		fail("ksyms changed in the round trip", FP_MSG_KSYMS, 0);
	if ((err = fp_wire_encode_ksyms(&b, &e2, &l2)))
		fail("ksyms does not encode twice", FP_MSG_KSYMS, err);
	same_bytes(e1, l1, e2, l2, FP_MSG_KSYMS);
	fp_ksyms_fini(&a);
	fp_ksyms_fini(&b);
	free(e1);
	free(e2);
	return 1;
}

static int roundtrip_reply(const uint8_t *data, size_t size)
{
	struct fp_reply a, b;
	char *e1, *e2;
	size_t l1, l2;
	int err;

	if (fp_wire_decode_reply(data, size, &a))
		return 0;
	if ((err = fp_wire_encode_reply(&a, &e1, &l1)))
		fail("decoded reply does not encode", FP_MSG_REPLY, err);
	if ((err = fp_wire_decode_reply(e1, l1, &b)))
		fail("re-encoded reply does not decode", FP_MSG_REPLY, err);
	if (!reply_eq(&a, &b))
		fail("reply changed in the round trip", FP_MSG_REPLY, 0);
	if ((err = fp_wire_encode_reply(&b, &e2, &l2)))
		fail("reply does not encode twice", FP_MSG_REPLY, err);
	same_bytes(e1, l1, e2, l2, FP_MSG_REPLY);
	fp_reply_fini(&a);
	fp_reply_fini(&b);
	free(e1);
	free(e2);
	return 1;
}

static int roundtrip_file(const uint8_t *data, size_t size)
{
	struct fp_file_data a, b;
	char *e1, *e2;
	size_t l1, l2;
	int err;

	if (fp_wire_decode_file(data, size, &a))
		return 0;
	if ((err = fp_wire_encode_file(&a, &e1, &l1)))
		fail("decoded file data does not encode", FP_MSG_FILE, err);
	if ((err = fp_wire_decode_file(e1, l1, &b)))
		fail("re-encoded file data does not decode", FP_MSG_FILE, err);
	if (!file_eq(&a, &b))
		fail("file data changed in the round trip", FP_MSG_FILE, 0);
	if ((err = fp_wire_encode_file(&b, &e2, &l2)))
		fail("file data does not encode twice", FP_MSG_FILE, err);
	same_bytes(e1, l1, e2, l2, FP_MSG_FILE);
	fp_file_data_fini(&a);
	fp_file_data_fini(&b);
	free(e1);
	free(e2);
	return 1;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	int type = 0, peek, decoded = 0;

	peek = fp_wire_peek(data, size, &type);
	if (peek > 0 || (peek == 0 && (type < FP_MSG_HELLO || type > FP_MSG_FILE)))
		fail("fp_wire_peek returned nonsense", type, peek);

	/* Every decoder sees every input, whatever its envelope says. */
	if (roundtrip_hello(data, size))
		decoded = FP_MSG_HELLO;
	if (roundtrip_batch(data, size)) {
		if (decoded)
			fail("input decodes as two types", FP_MSG_SAMPLES, 0);
		decoded = FP_MSG_SAMPLES;
	}
	if (roundtrip_ksyms(data, size)) {
		if (decoded)
			fail("input decodes as two types", FP_MSG_KSYMS, 0);
		decoded = FP_MSG_KSYMS;
	}
	if (roundtrip_reply(data, size)) {
		if (decoded)
			fail("input decodes as two types", FP_MSG_REPLY, 0);
		decoded = FP_MSG_REPLY;
	}
	if (roundtrip_file(data, size)) {
		if (decoded)
			fail("input decodes as two types", FP_MSG_FILE, 0);
		decoded = FP_MSG_FILE;
	}
	/* A decoder must agree with peek on the envelope. */
	if (decoded && (peek != 0 || type != decoded))
		fail("decoded a message whose envelope peek rejects", decoded, peek);
	return 0;
}
