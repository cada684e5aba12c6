/* kfuncs_test: kernel function starts, from the symbolizer's kallsyms
 * table (fp_symtab_kfuncs) over the wire (REPLY keys 9 and 10) to the
 * agent's fold (fp_kfuncs_fold): a folded frame keeps its name. */
#include "check.h"
#include "kfuncs.h"
#include "symtab.h"
#include "wire.h"

/* A kallsyms-like table: functions of size 0 (to the next one), one of
 * explicit size followed by a gap, and one far enough for the zero-size
 * extent to end before it. */
static void build(struct fp_symtab *t, void **blob)
{
	struct fp_symtab_builder *b;
	size_t len;

	CHECK(fp_symtab_builder_alloc(&b) == 0);
	CHECK(fp_symtab_builder_add_symbol(b, 0x100, 0, "first", NULL) == 0);
	CHECK(fp_symtab_builder_add_symbol(b, 0x180, 0x10, "sized", NULL) == 0);
	CHECK(fp_symtab_builder_add_symbol(b, 0x200, 0, "next", NULL) == 0);
	CHECK(fp_symtab_builder_add_symbol(b, 0x200, 0, "alias", NULL) == 0);
	CHECK(fp_symtab_builder_add_symbol(b, 0x2000000, 0, "far", NULL) == 0);
	CHECK(fp_symtab_builder_finish(b, blob, &len) == 0);
	fp_symtab_builder_free(b);
	CHECK(fp_symtab_open(t, *blob, len) == 0);
}

static const char *name_at(const struct fp_symtab *t, uint64_t addr)
{
	struct fp_symbol s;

	return fp_symtab_lookup(t, addr, &s) ? NULL : s.sy_name;
}

/* Every address, as leaf and as return address: the symbolizer names the
 * folded offset as it names the exact one, and folds whatever it names. */
static void test_same_name(void)
{
	struct fp_kfuncs k = { 0 };
	struct fp_symtab t;
	void *blob = NULL;
	uint64_t x, out;
	int leaf, bad = 0, folded = 0;

	build(&t, &blob);
	CHECK(fp_symtab_kfuncs(&t, &k) == 0);
	CHECK(k.kf_n >= 5);
	for (x = 0; x < 0x2000100; x += x < 0x400 ? 1 : 0x1001) {
		for (leaf = 0; leaf <= 1; leaf++) {
			uint64_t at = leaf ? x : x - 1;
			const char *exact = x || leaf ? name_at(&t, at) : NULL;
			if (fp_kfuncs_fold(&k, x, leaf, &out) == 0) {
				const char *f = name_at(&t, leaf ? out : out - 1);
				folded++;
				bad += !exact || !f || strcmp(exact, f) != 0;
				bad += out > x; /* never past the frame */
			} else {
				bad += exact != NULL; /* a named frame is folded */
			}
		}
	}
	CHECK_EQ_INT(bad, 0);
	CHECK(folded > 0);
	/* before the first start, in the gap after "sized", and past "far"'s extent */
	CHECK(fp_kfuncs_fold(&k, 0x80, 1, &out) == -ENOENT);
	CHECK(fp_kfuncs_fold(&k, 0x195, 1, &out) == -ENOENT);
	CHECK(fp_kfuncs_fold(&k, 0x185, 1, &out) == 0 && out == 0x180);
	CHECK(fp_kfuncs_fold(&k, 0x185, 0, &out) == 0 && out == 0x181);
	CHECK(fp_kfuncs_fold(&k, 0x300, 1, &out) == 0 && out == 0x200);
	CHECK(fp_kfuncs_fold(&k, 1ull << 33, 1, &out) == -ENOENT);
	fp_kfuncs_fini(&k);
	free(blob);
}

/* Symbols inside others: not a kallsyms table, no list. */
static void test_nested_refused(void)
{
	struct fp_symtab_builder *b;
	struct fp_kfuncs k = { 0 };
	struct fp_symtab t;
	void *blob;
	size_t len;

	CHECK(fp_symtab_builder_alloc(&b) == 0);
	CHECK(fp_symtab_builder_add_symbol(b, 0x100, 0x100, "outer", NULL) == 0);
	CHECK(fp_symtab_builder_add_symbol(b, 0x140, 0x10, "inner", NULL) == 0);
	CHECK(fp_symtab_builder_finish(b, &blob, &len) == 0);
	fp_symtab_builder_free(b);
	CHECK(fp_symtab_open(&t, blob, len) == 0);
	CHECK(fp_symtab_kfuncs(&t, &k) == -EINVAL);
	CHECK(k.kf_n == 0 && !k.kf_offsets);
	free(blob);
}

static void test_wire_roundtrip(void)
{
	static const uint32_t offs[] = { 0, 5, 6, 200, 0x10000, 0xfffffffe, 0xffffffff };
	struct fp_reply r = { .fr_status = FP_REPLY_OK, .fr_seq = 3 }, d;
	struct fp_hello h = { .fh_host = "h",
			      .fh_boot_id = "b",
			      .fh_kernel_release = "r",
			      .fh_agent_version = "v",
			      .fh_features = FP_FEATURE_KFUNCS },
			hd;
	uint32_t i, n = sizeof(offs) / sizeof(offs[0]);
	size_t len, len0;
	char *buf;

	r.fr_kfuncs.kf_build_id.fb_len = 20;
	memset(r.fr_kfuncs.kf_build_id.fb_data, 0xab, 20);
	r.fr_kfuncs.kf_n = n;
	r.fr_kfuncs.kf_offsets = malloc(sizeof(offs));
	r.fr_kfuncs.kf_gaps = calloc(1, 1);
	memcpy(r.fr_kfuncs.kf_offsets, offs, sizeof(offs));
	r.fr_kfuncs.kf_gaps[0] = 0x12; /* entries 1 and 4 are gaps */
	CHECK(fp_wire_encode_reply(&r, &buf, &len) == 0);
	CHECK(fp_wire_decode_reply(buf, len, &d) == 0);
	CHECK(d.fr_kfuncs.kf_n == n);
	CHECK(fp_build_id_eq(&d.fr_kfuncs.kf_build_id, &r.fr_kfuncs.kf_build_id));
	for (i = 0; i < n && d.fr_kfuncs.kf_n == n; i++)
		CHECK(d.fr_kfuncs.kf_offsets[i] == offs[i]);
	CHECK(d.fr_kfuncs.kf_gaps[0] == 0x12);
	fp_reply_fini(&d);
	free(buf);
	/* unsorted: the encoder refuses what the decoder would */
	r.fr_kfuncs.kf_offsets[2] = 5;
	CHECK(fp_wire_encode_reply(&r, &buf, &len) == -EINVAL);
	fp_kfuncs_fini(&r.fr_kfuncs);
	/* no list, no keys: what an older symbolizer sends */
	CHECK(fp_wire_encode_reply(&r, &buf, &len0) == 0);
	CHECK(fp_wire_decode_reply(buf, len0, &d) == 0 && d.fr_kfuncs.kf_n == 0);
	fp_reply_fini(&d);
	free(buf);
	/* the hello's features; an older agent's hello has none */
	CHECK(fp_wire_encode_hello(&h, &buf, &len) == 0);
	CHECK(fp_wire_decode_hello(buf, len, &hd) == 0 && hd.fh_features == FP_FEATURE_KFUNCS);
	fp_hello_fini(&hd);
	free(buf);
	h.fh_features = 0;
	CHECK(fp_wire_encode_hello(&h, &buf, &len0) == 0 && len0 == len - 2);
	CHECK(fp_wire_decode_hello(buf, len0, &hd) == 0 && hd.fh_features == 0);
	fp_hello_fini(&hd);
	free(buf);
}

/* A REPLY OK, seq 0, with key 9 a build-ID of bid_len bytes (none: < 0)
 * and key 10 a bin of body (none: NULL). */
static size_t raw_reply(uint8_t *out, int bid_len, const uint8_t *body, uint32_t blen)
{
	size_t n = 0;

	out[n++] = 0x93, out[n++] = 0x01, out[n++] = 0x04;
	out[n++] = (uint8_t)(0x80 + 2 + (bid_len >= 0) + (body != NULL));
	out[n++] = 0x01, out[n++] = 0x00, out[n++] = 0x02, out[n++] = 0x00;
	if (bid_len >= 0) {
		out[n++] = 0x09, out[n++] = 0xc4, out[n++] = (uint8_t)bid_len;
		memset(out + n, 0x11, (size_t)bid_len);
		n += (size_t)bid_len;
	}
	if (body) {
		out[n++] = 0x0a, out[n++] = 0xc6;
		out[n++] = (uint8_t)(blen >> 24), out[n++] = (uint8_t)(blen >> 16);
		out[n++] = (uint8_t)(blen >> 8), out[n++] = (uint8_t)blen;
		memcpy(out + n, body, blen);
		n += blen;
	}
	return n;
}

static void test_wire_malformed(void)
{
	static const uint8_t ok[] = { 0x02, 0x04, 0x05 }, dup[] = { 0x02, 0x00 },
			     trunc[] = { 0x02, 0x84 },
			     wrap[] = { 0xfe, 0xff, 0xff, 0xff, 0x1f, 0x04 }; /* 2^32-1, then +2 */
	static uint8_t big[1000001 + 64], buf[1000001 + 128];
	struct fp_reply d;
	size_t len;

	len = raw_reply(buf, 4, ok, sizeof(ok));
	CHECK(fp_wire_decode_reply(buf, len, &d) == 0 && d.fr_kfuncs.kf_n == 3 &&
	      d.fr_kfuncs.kf_offsets[2] == 5 && d.fr_kfuncs.kf_gaps[0] == 0x04);
	fp_reply_fini(&d);
	len = raw_reply(buf, 4, dup, sizeof(dup)); /* not strictly ascending */
	CHECK_EQ_INT(fp_wire_decode_reply(buf, len, &d), FP_WIRE_EFIELD);
	len = raw_reply(buf, 4, trunc, sizeof(trunc));
	CHECK_EQ_INT(fp_wire_decode_reply(buf, len, &d), FP_WIRE_EFIELD);
	len = raw_reply(buf, 4, wrap, sizeof(wrap));
	CHECK_EQ_INT(fp_wire_decode_reply(buf, len, &d), FP_WIRE_EFIELD);
	len = raw_reply(buf, 4, ok, 0); /* empty */
	CHECK_EQ_INT(fp_wire_decode_reply(buf, len, &d), FP_WIRE_EFIELD);
	len = raw_reply(buf, 0, ok, sizeof(ok)); /* no build-ID */
	CHECK_EQ_INT(fp_wire_decode_reply(buf, len, &d), FP_WIRE_EFIELD);
	len = raw_reply(buf, -1, ok, sizeof(ok)); /* key 10 alone */
	CHECK_EQ_INT(fp_wire_decode_reply(buf, len, &d), FP_WIRE_EFIELD);
	len = raw_reply(buf, 4, NULL, 0); /* key 9 alone */
	CHECK_EQ_INT(fp_wire_decode_reply(buf, len, &d), FP_WIRE_EFIELD);
	memset(big, 0x02, sizeof(big)); /* 1,000,001 entries */
	len = raw_reply(buf, 4, big, 1000001);
	CHECK_EQ_INT(fp_wire_decode_reply(buf, len, &d), FP_WIRE_ETOOBIG);
	len = raw_reply(buf, 4, big, 1000000); /* the limit itself */
	CHECK(fp_wire_decode_reply(buf, len, &d) == 0 && d.fr_kfuncs.kf_n == 1000000 &&
	      fp_kfuncs_bytes(&d.fr_kfuncs) == 4125000);
	fp_reply_fini(&d);
}

int main(void)
{
	RUN(test_same_name);
	RUN(test_nested_refused);
	RUN(test_wire_roundtrip);
	RUN(test_wire_malformed);
	return CHECK_DONE();
}
