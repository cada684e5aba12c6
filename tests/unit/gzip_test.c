/* gzip_test.c: fp_gzip and fp_gzip_buf give gzip members that zlib reads
 * back, whole, for small, empty and multi-piece inputs; fp_gunzip_buf
 * reads them back too, several members in a row, and refuses what is cut
 * short, corrupt or larger than its bound. */
#include "check.h"
#include "gzip.h"

#include <errno.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <zlib.h>

/* gunzip: inflate a gzip member into out (cap bytes); its length, or -1. */
static long gunzip(const uint8_t *in, size_t len, uint8_t *out, size_t cap)
{
	z_stream z = { 0 };
	long n = -1;

	if (inflateInit2(&z, 15 + 16) != Z_OK)
		return -1;
	z.next_in = (Bytef *)in;
	z.avail_in = (uInt)len;
	z.next_out = out;
	z.avail_out = (uInt)cap;
	if (inflate(&z, Z_FINISH) == Z_STREAM_END && z.avail_in == 0)
		n = (long)z.total_out;
	inflateEnd(&z);
	return n;
}

/* A megabyte of text that compresses, but not to nothing: several
 * 64 KiB output pieces. */
static uint8_t *sample(size_t len)
{
	uint8_t *b = malloc(len);
	uint64_t s = 42;

	for (size_t i = 0; b && i < len; i++) {
		s = s * 6364136223846793005ull + 1442695040888963407ull;
		b[i] = (uint8_t)('a' + (s >> 33) % 16);
	}
	return b;
}

static void test_round_trip(void)
{
	size_t sizes[] = { 0, 1, 100, 1 << 20 };

	for (size_t i = 0; i < sizeof(sizes) / sizeof(sizes[0]); i++) {
		uint8_t *in = sample(sizes[i] ? sizes[i] : 1), *z = NULL, *back;
		size_t zlen = 0;

		back = malloc(sizes[i] + 1);
		CHECK_EQ_INT(fp_gzip_buf(in, sizes[i], Z_BEST_SPEED, &z, &zlen), 0);
		CHECK(zlen >= 20); /* a gzip header and trailer at least */
		CHECK(z && z[0] == 0x1f && z[1] == 0x8b);
		CHECK_EQ_INT(gunzip(z, zlen, back, sizes[i] + 1), sizes[i]);
		CHECK(memcmp(in, back, sizes[i]) == 0);
		free(z);
		free(back);
		free(in);
	}
}

struct pieces {
	uint8_t *p_data;
	size_t p_len;
	int p_calls, p_fail_at;
};

static int collect(void *arg, const void *buf, size_t len)
{
	struct pieces *p = arg;

	if (++p->p_calls == p->p_fail_at)
		return -ENOSPC;
	CHECK(len > 0 && len <= 65536);
	memcpy(p->p_data + p->p_len, buf, len);
	p->p_len += len;
	return 0;
}

static void test_writer_pieces_match_buffer(void)
{
	size_t len = 1 << 20;
	uint8_t *in = sample(len), *z = NULL;
	struct pieces p = { .p_data = malloc(2 * len) };
	size_t zlen = 0;

	CHECK_EQ_INT(fp_gzip(in, len, Z_DEFAULT_COMPRESSION, collect, &p), 0);
	CHECK(p.p_calls > 1);
	CHECK_EQ_INT(fp_gzip_buf(in, len, Z_DEFAULT_COMPRESSION, &z, &zlen), 0);
	CHECK_EQ_INT(p.p_len, zlen);
	CHECK(z && memcmp(p.p_data, z, zlen) == 0);
	free(z);
	free(p.p_data);
	free(in);
}

static void test_writer_error_stops(void)
{
	size_t len = 1 << 20;
	uint8_t *in = sample(len);
	struct pieces p = { .p_data = malloc(2 * len), .p_fail_at = 2 };

	CHECK_EQ_INT(fp_gzip(in, len, Z_DEFAULT_COMPRESSION, collect, &p), -ENOSPC);
	CHECK_EQ_INT(p.p_calls, 2);
	free(p.p_data);
	free(in);
}

static void test_gunzip(void)
{
	size_t sizes[] = { 0, 1, 100, 1 << 20 };

	for (size_t i = 0; i < sizeof(sizes) / sizeof(sizes[0]); i++) {
		uint8_t *in = sample(sizes[i] ? sizes[i] : 1), *z = NULL, *back = NULL;
		size_t zlen = 0, blen = 1;

		CHECK_EQ_INT(fp_gzip_buf(in, sizes[i], Z_BEST_SPEED, &z, &zlen), 0);
		CHECK_EQ_INT(fp_gunzip_buf(z, zlen, sizes[i] + 1, &back, &blen), 0);
		CHECK_EQ_INT(blen, sizes[i]);
		CHECK(!sizes[i] || (back && memcmp(in, back, sizes[i]) == 0));
		free(back);
		/* exactly the bound is fine; one byte less is not */
		back = NULL;
		CHECK_EQ_INT(fp_gunzip_buf(z, zlen, sizes[i] ? sizes[i] : 1, &back, &blen), 0);
		free(back);
		back = NULL;
		if (sizes[i] > 1)
			CHECK_EQ_INT(fp_gunzip_buf(z, zlen, sizes[i] - 1, &back, &blen), -EFBIG);
		CHECK(!back || sizes[i] <= 1);
		free(back);
		/* cut short, anywhere */
		back = NULL;
		CHECK_EQ_INT(fp_gunzip_buf(z, zlen - 1, sizes[i] + 1, &back, &blen), -EINVAL);
		CHECK_EQ_INT(fp_gunzip_buf(z, zlen / 2, sizes[i] + 1, &back, &blen), -EINVAL);
		CHECK(back == NULL);
		free(z);
		free(in);
	}
}

static void test_gunzip_members_and_garbage(void)
{
	uint8_t *a = NULL, *b = NULL, *both, *back = NULL;
	size_t alen, blen, len = 0;

	CHECK_EQ_INT(fp_gzip_buf("hello, ", 7, Z_BEST_SPEED, &a, &alen), 0);
	CHECK_EQ_INT(fp_gzip_buf("world", 5, Z_BEST_SPEED, &b, &blen), 0);
	both = malloc(alen + blen);
	memcpy(both, a, alen);
	memcpy(both + alen, b, blen);
	CHECK_EQ_INT(fp_gunzip_buf(both, alen + blen, 100, &back, &len), 0);
	CHECK(len == 12 && back && memcmp(back, "hello, world", 12) == 0);
	free(back);
	back = NULL;
	/* not gzip; a corrupt body (its CRC no longer matches) */
	CHECK_EQ_INT(fp_gunzip_buf("plain text", 10, 100, &back, &len), -EINVAL);
	both[alen - 6] ^= 0xff;
	CHECK_EQ_INT(fp_gunzip_buf(both, alen + blen, 100, &back, &len), -EINVAL);
	/* a member followed by bytes that are not one */
	memcpy(both + alen, "garbage", 7);
	both[alen - 6] ^= 0xff;
	CHECK_EQ_INT(fp_gunzip_buf(both, alen + 7, 100, &back, &len), -EINVAL);
	CHECK(back == NULL);
	free(both);
	free(a);
	free(b);
}

int main(void)
{
	RUN(test_round_trip);
	RUN(test_writer_pieces_match_buffer);
	RUN(test_writer_error_stops);
	RUN(test_gunzip);
	RUN(test_gunzip_members_and_garbage);
	return CHECK_DONE();
}
