/* gzip.c: see gzip.h. */
#include "gzip.h"
#include "vec.h"

#include <errno.h>
#include <limits.h>
#include <stdlib.h>
#include <string.h>
#include <zlib.h>

int fp_gzip(const void *in, size_t len, int level, fp_gzip_write_fn write, void *arg)
{
	uint8_t out[65536];
	z_stream z = { 0 };
	int zerr, err = 0;

	/* 15 + 16: a 32 KiB window with a gzip header and trailer. */
	if (deflateInit2(&z, level, Z_DEFLATED, 15 + 16, 8, Z_DEFAULT_STRATEGY) != Z_OK)
		return -ENOMEM;
	z.next_in = (Bytef *)in;
	do {
		/* avail_in is a uInt: feed large inputs in pieces. */
		if (!z.avail_in && len) {
			uInt chunk = len > UINT_MAX ? UINT_MAX : (uInt)len;

			z.avail_in = chunk;
			len -= chunk;
		}
		z.next_out = out;
		z.avail_out = sizeof(out);
		zerr = deflate(&z, len || z.avail_in ? Z_NO_FLUSH : Z_FINISH);
		if (zerr == Z_STREAM_ERROR) {
			err = -EIO;
			break;
		}
		if (z.avail_out < sizeof(out))
			err = write(arg, out, sizeof(out) - z.avail_out);
	} while (!err && zerr != Z_STREAM_END);
	deflateEnd(&z);
	return err;
}

struct gzip_buf {
	uint8_t *gb_data;
	size_t gb_len, gb_cap;
};

static int buf_append(void *arg, const void *data, size_t len)
{
	struct gzip_buf *b = arg;

	if (fp_vec_reserve(&b->gb_data, &b->gb_cap, b->gb_len + len, 1))
		return -ENOMEM;
	memcpy(b->gb_data + b->gb_len, data, len);
	b->gb_len += len;
	return 0;
}

int fp_gzip_buf(const void *in, size_t len, int level, uint8_t **out, size_t *olen)
{
	struct gzip_buf b = { 0 };
	int err;

	/* Compressed profiles are a fraction of their input: start there. */
	if (fp_vec_reserve(&b.gb_data, &b.gb_cap, len / 4 + 64, 1))
		return -ENOMEM;
	if ((err = fp_gzip(in, len, level, buf_append, &b))) {
		free(b.gb_data);
		return err;
	}
	*out = b.gb_data;
	*olen = b.gb_len;
	return 0;
}

int fp_gunzip_buf(const void *in, size_t len, size_t max, uint8_t **out, size_t *olen)
{
	struct gzip_buf b = { 0 };
	z_stream z = { 0 };
	int zerr = Z_OK, err = 0;

	if (inflateInit2(&z, 15 + 16) != Z_OK)
		return -ENOMEM;
	z.next_in = (Bytef *)in;
	for (;;) {
		size_t room;

		if (!z.avail_in && len) { /* avail_in is a uInt: large inputs in pieces */
			uInt chunk = len > UINT_MAX ? UINT_MAX : (uInt)len;

			z.avail_in = chunk;
			len -= chunk;
		}
		if (zerr == Z_STREAM_END) {
			if (!z.avail_in)
				break;                  /* the last member ended with the input */
			if (inflateReset(&z) != Z_OK) { /* another member follows */
				err = -EINVAL;
				break;
			}
		}
		if (b.gb_len < max &&
		    fp_vec_reserve(&b.gb_data, &b.gb_cap, b.gb_len + (b.gb_cap == b.gb_len), 1)) {
			err = -ENOMEM;
			break;
		}
		/* Room as the array doubles, never past max; at max, inflate
		 * still reads a member's trailer, which writes nothing. */
		room = b.gb_cap - b.gb_len;
		if (room > max - b.gb_len)
			room = max - b.gb_len;
		if (room > UINT_MAX)
			room = UINT_MAX;
		z.next_out = b.gb_data + b.gb_len;
		z.avail_out = (uInt)room;
		zerr = inflate(&z, Z_NO_FLUSH);
		b.gb_len += room - z.avail_out;
		if (zerr == Z_MEM_ERROR) {
			err = -ENOMEM;
			break;
		}
		if (zerr == Z_BUF_ERROR) {
			if (b.gb_len == max && z.avail_in) {
				err = -EFBIG; /* output pending past max */
				break;
			}
			if (!z.avail_in && !len) {
				err = -EINVAL; /* input used up before the member's end */
				break;
			}
		} else if (zerr != Z_OK && zerr != Z_STREAM_END) {
			err = -EINVAL;
			break;
		}
	}
	inflateEnd(&z);
	if (err) {
		free(b.gb_data);
		return err;
	}
	*out = b.gb_data;
	*olen = b.gb_len;
	return 0;
}
