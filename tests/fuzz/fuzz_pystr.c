/* fuzz_pystr.c: libFuzzer target for the agent's decoding of str objects
 * read from a profiled (possibly hostile) process (device/cpython.c).  The
 * first byte picks a version's offsets, the next 128 bytes are the str's
 * header, the rest its characters.  Whatever is decoded must be valid
 * UTF-8 within the bound. */
#include "cpython.h"
#include "pyoffsets.h"

#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#define MAX 64

static void valid_utf8(const unsigned char *s, size_t n)
{
	size_t i = 0;

	while (i < n) {
		size_t w = s[i] < 0x80             ? 1
			   : (s[i] & 0xe0) == 0xc0 ? 2
			   : (s[i] & 0xf0) == 0xe0 ? 3
			   : (s[i] & 0xf8) == 0xf0 ? 4
						   : 0;
		if (!w || i + w > n)
			abort();
		for (size_t k = 1; k < w; k++)
			if ((s[i + k] & 0xc0) != 0x80)
				abort();
		i += w;
	}
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	static const unsigned versions[] = { 0x0309, 0x030b, 0x030c };
	const struct fp_py_offsets *o;
	uint8_t hdr[128];
	size_t off, n, len;
	unsigned kind;
	char out[MAX + 1];

	if (size < 1 + sizeof(hdr))
		return 0;
	o = fp_py_offsets_for(versions[data[0] % 3]);
	if (!o)
		abort();
	memcpy(hdr, data + 1, sizeof(hdr));
	if (fp_python_str_layout(o, hdr, MAX, &off, &kind, &n))
		return 0;
	if (n > MAX || (kind != 1 && kind != 2 && kind != 4) || off > 128)
		abort();
	data += 1 + sizeof(hdr), size -= 1 + sizeof(hdr);
	if (n * kind > size)
		n = size / kind;
	len = fp_python_str_utf8(data, n, kind, out, MAX);
	if (len > MAX || out[len] != '\0' || strlen(out) > len)
		abort();
	valid_utf8((const unsigned char *)out, len);
	return 0;
}
