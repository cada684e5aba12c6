/* minidebug.c: xz decompression for MiniDebugInfo, with liblzma. */
#include "minidebug.h"

#include <errno.h>
#include <lzma.h>
#include <stdint.h>
#include <stdlib.h>

/* Memory the decoder may use for its dictionary and state: xz's default
 * presets need 8 MiB at most (-9: 64 MiB dictionary, which MiniDebugInfo
 * files are far too small to use). */
#define XZ_MEMLIMIT (80u << 20)

int fp_xz_decompress(const void *in, size_t len, size_t max_out, void **out, size_t *out_len)
{
	lzma_stream zs = LZMA_STREAM_INIT;
	size_t cap = len * 4 < max_out ? len * 4 : max_out;
	uint8_t *buf;
	lzma_ret ret;

	if (!in || !len || !max_out)
		return -EINVAL;
	if (cap < 4096)
		cap = max_out < 4096 ? max_out : 4096;
	buf = malloc(cap);
	if (!buf)
		return -ENOMEM;
	/* LZMA_CONCATENATED: xz may write several streams */
	if (lzma_stream_decoder(&zs, XZ_MEMLIMIT, LZMA_CONCATENATED) != LZMA_OK) {
		free(buf);
		return -ENOMEM;
	}
	zs.next_in = in;
	zs.avail_in = len;
	zs.next_out = buf;
	zs.avail_out = cap;
	for (;;) {
		ret = lzma_code(&zs, LZMA_FINISH);
		if (ret == LZMA_STREAM_END)
			break;
		if (ret != LZMA_OK && ret != LZMA_BUF_ERROR)
			goto bad;
		if (zs.avail_out == 0) {
			size_t ncap = cap * 2 < max_out ? cap * 2 : max_out;
			uint8_t *nbuf;

			if (ncap == cap)
				goto bad; /* larger than max_out */
			nbuf = realloc(buf, ncap);
			if (!nbuf) {
				lzma_end(&zs);
				free(buf);
				return -ENOMEM;
			}
			buf = nbuf;
			zs.next_out = buf + cap;
			zs.avail_out = ncap - cap;
			cap = ncap;
		} else if (ret == LZMA_BUF_ERROR) {
			goto bad; /* truncated: no input left, output room to spare */
		}
	}
	*out_len = (size_t)zs.total_out;
	lzma_end(&zs);
	*out = buf;
	return 0;
bad:
	lzma_end(&zs);
	free(buf);
	return ret == LZMA_MEM_ERROR ? -ENOMEM : -EINVAL;
}
