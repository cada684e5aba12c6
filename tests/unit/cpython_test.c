/* cpython_test.c: the agent's decoding of CPython str objects read from a
 * process (device/cpython.c): where the characters are, and their UTF-8. */
#include "check.h"
#include "cpython.h"
#include "pyoffsets.h"

#include <errno.h>
#include <stdint.h>
#include <string.h>

/* A str header as CPython 3.11 lays it out: length at 16, state at 32. */
static void header(uint8_t *hdr, int64_t len, unsigned kind, int compact, int ascii)
{
	memset(hdr, 0, 128);
	memcpy(hdr + 16, &len, 8);
	hdr[32] = (uint8_t)(kind << 2 | compact << 5 | ascii << 6);
}

static void test_layout(void)
{
	const struct fp_py_offsets *o = fp_py_offsets_for(0x030b);
	const struct fp_py_offsets *o12 = fp_py_offsets_for(0x030c);
	uint8_t hdr[128];
	size_t off = 0, n = 0;
	unsigned kind = 0;

	CHECK(o && o12);
	if (!o || !o12)
		return;
	/* ASCII: the characters follow the PyASCIIObject */
	header(hdr, 10, 1, 1, 1);
	CHECK_EQ_INT(fp_python_str_layout(o, hdr, 100, &off, &kind, &n), 0);
	CHECK_EQ_INT(off, 48);
	CHECK_EQ_INT(kind, 1);
	CHECK_EQ_INT(n, 10);
	CHECK_EQ_INT(fp_python_str_layout(o12, hdr, 100, &off, &kind, &n), 0);
	CHECK_EQ_INT(off, 40); /* 3.12 dropped wstr */
	/* other compact strs: after the PyCompactUnicodeObject; capped */
	header(hdr, 500, 2, 1, 0);
	CHECK_EQ_INT(fp_python_str_layout(o, hdr, 100, &off, &kind, &n), 0);
	CHECK_EQ_INT(off, 72);
	CHECK_EQ_INT(kind, 2);
	CHECK_EQ_INT(n, 100);
	/* refused: not compact, a width that is not 1, 2 or 4, a negative length */
	header(hdr, 5, 1, 0, 1);
	CHECK_EQ_INT(fp_python_str_layout(o, hdr, 100, &off, &kind, &n), -EINVAL);
	header(hdr, 5, 3, 1, 0);
	CHECK_EQ_INT(fp_python_str_layout(o, hdr, 100, &off, &kind, &n), -EINVAL);
	header(hdr, -1, 1, 1, 1);
	CHECK_EQ_INT(fp_python_str_layout(o, hdr, 100, &off, &kind, &n), -EINVAL);
}

static void test_utf8(void)
{
	static const uint8_t latin1[] = { 'g', 'r', 0xf6, 0xdf, 'e' };          /* größe */
	static const uint8_t ucs2[] = { 0x2d, 0x4e, 0x87, 0x65 };               /* 中文 */
	static const uint8_t ucs4[] = { 0x00, 0xf6, 0x01, 0x00, 'a', 0, 0, 0 }; /* 😀a */
	static const uint8_t bad[] = {
		0x00, 0xd8, 0, 0, 0xff, 0xff, 0x11, 0
	}; /* surrogate, > U+10FFFF */
	char out[64];

	CHECK_EQ_INT(fp_python_str_utf8(latin1, 5, 1, out, 63), 7);
	CHECK(strcmp(out, "gr\xc3\xb6\xc3\x9f"
			  "e") == 0);
	CHECK_EQ_INT(fp_python_str_utf8(ucs2, 2, 2, out, 63), 6);
	CHECK(strcmp(out, "\xe4\xb8\xad\xe6\x96\x87") == 0);
	CHECK_EQ_INT(fp_python_str_utf8(ucs4, 2, 4, out, 63), 5);
	CHECK(strcmp(out, "\xf0\x9f\x98\x80"
			  "a") == 0);
	CHECK_EQ_INT(fp_python_str_utf8(bad, 2, 4, out, 63), 6);
	CHECK(strcmp(out, "\xef\xbf\xbd\xef\xbf\xbd") == 0);
	/* cut on a character boundary, never inside one */
	CHECK_EQ_INT(fp_python_str_utf8(ucs2, 2, 2, out, 5), 3);
	CHECK(strcmp(out, "\xe4\xb8\xad") == 0);
	CHECK_EQ_INT(fp_python_str_utf8(ucs2, 2, 2, out, 2), 0);
	CHECK(out[0] == '\0');
}

int main(void)
{
	RUN(test_layout);
	RUN(test_utf8);
	return check_failed_tests != 0;
}
