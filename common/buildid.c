/* buildid.c: see buildid.h. */
#include "buildid.h"

#include <errno.h>
#include <stdio.h>
#include <string.h>

static const char hex_digits[] = "0123456789abcdef";

void fp_build_id_hex(const struct fp_build_id *id, char *buf)
{
	/* A corrupted length must not make us write past the documented buffer. */
	size_t n = id->fb_len <= FP_BUILD_ID_MAX ? id->fb_len : FP_BUILD_ID_MAX;
	size_t i;

	for (i = 0; i < n; i++) {
		buf[2 * i] = hex_digits[id->fb_data[i] >> 4];
		buf[2 * i + 1] = hex_digits[id->fb_data[i] & 0xf];
	}
	buf[2 * n] = '\0';
}

static int hex_value(char c)
{
	if (c >= '0' && c <= '9')
		return c - '0';
	if (c >= 'a' && c <= 'f')
		return c - 'a' + 10;
	if (c >= 'A' && c <= 'F')
		return c - 'A' + 10;
	return -1;
}

int fp_build_id_parse(const char *hex, struct fp_build_id *id)
{
	struct fp_build_id parsed;
	size_t len, i;

	if (!hex)
		return -EINVAL;
	/* strnlen: an unterminated or huge argument is rejected without
	 * reading more than one byte past the longest valid input. */
	len = strnlen(hex, 2 * FP_BUILD_ID_MAX + 1);
	/* "" is accepted: it is what fp_build_id_hex prints for an unknown id. */
	if (len % 2 != 0 || len > 2 * FP_BUILD_ID_MAX)
		return -EINVAL;
	memset(&parsed, 0, sizeof(parsed));
	for (i = 0; i < len / 2; i++) {
		int hi = hex_value(hex[2 * i]);
		int lo = hex_value(hex[2 * i + 1]);

		if (hi < 0 || lo < 0)
			return -EINVAL;
		parsed.fb_data[i] = (uint8_t)(hi << 4 | lo);
	}
	parsed.fb_len = (uint8_t)(len / 2);
	*id = parsed;
	return 0;
}

int fp_build_id_eq(const struct fp_build_id *a, const struct fp_build_id *b)
{
	size_t n = a->fb_len <= FP_BUILD_ID_MAX ? a->fb_len : FP_BUILD_ID_MAX;

	/* Bytes past fb_len are not part of the id and may hold anything. */
	if (a->fb_len != b->fb_len)
		return 0;
	return memcmp(a->fb_data, b->fb_data, n) == 0;
}

int fp_build_id_match(const struct fp_build_id *a, const struct fp_build_id *b)
{
	const struct fp_build_id *s = a->fb_len <= b->fb_len ? a : b, *l = s == a ? b : a;
	int i;

	if (!s->fb_len || memcmp(s->fb_data, l->fb_data, s->fb_len) != 0)
		return 0;
	for (i = s->fb_len; i < l->fb_len; i++)
		if (l->fb_data[i])
			return 0;
	return 1;
}

struct fp_build_id fp_build_id_trim(const struct fp_build_id *id)
{
	struct fp_build_id t = *id;

	while (t.fb_len > 1 && !t.fb_data[t.fb_len - 1])
		t.fb_len--;
	return t;
}

int fp_build_id_path(char *buf, size_t len, const char *dir, const char *hex, const char *suffix)
{
	int n;

	if (strnlen(hex, 4) < 4)
		return -EINVAL;
	n = snprintf(buf, len, "%s/.build-id/%.2s/%s%s", dir, hex, hex + 2, suffix ? suffix : "");
	return n < 0 || (size_t)n >= len ? -ENAMETOOLONG : 0;
}
