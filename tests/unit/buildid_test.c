/* buildid_test.c: build-ID hex both ways, trimming, and .build-id paths. */
#include "buildid.h"
#include "check.h"

#include <errno.h>
#include <string.h>

static void test_hex_round_trip(void)
{
	struct fp_build_id id = { .fb_len = 4, .fb_data = { 0x00, 0x9f, 0xa0, 0xff } }, back;
	char hex[FP_BUILD_ID_HEX_SIZE];

	fp_build_id_hex(&id, hex);
	CHECK(strcmp(hex, "009fa0ff") == 0);
	CHECK_EQ_INT(fp_build_id_parse(hex, &back), 0);
	CHECK(fp_build_id_eq(&id, &back));
	CHECK_EQ_INT(fp_build_id_parse("009FA0FF", &back), 0);
	CHECK(fp_build_id_eq(&id, &back));
	/* a length past the maximum prints the maximum, no more */
	id.fb_len = 200;
	memset(id.fb_data, 0x11, sizeof(id.fb_data));
	fp_build_id_hex(&id, hex);
	CHECK_EQ_INT(strlen(hex), 2 * FP_BUILD_ID_MAX);
}

static void test_parse_rejects(void)
{
	struct fp_build_id id = { .fb_len = 3 }, empty;
	char longest[2 * FP_BUILD_ID_MAX + 3];
	static const char *bad[] = { "abc", "zz", "0g", "12 4", NULL };

	for (int i = 0; bad[i]; i++) {
		CHECK_EQ_INT(fp_build_id_parse(bad[i], &id), -EINVAL);
		CHECK_EQ_INT(id.fb_len, 3); /* untouched on failure */
	}
	CHECK_EQ_INT(fp_build_id_parse(NULL, &id), -EINVAL);
	memset(longest, 'a', sizeof(longest) - 1);
	longest[sizeof(longest) - 1] = '\0';
	CHECK_EQ_INT(fp_build_id_parse(longest, &id), -EINVAL);
	longest[2 * FP_BUILD_ID_MAX] = '\0';
	CHECK_EQ_INT(fp_build_id_parse(longest, &id), 0);
	CHECK_EQ_INT(id.fb_len, FP_BUILD_ID_MAX);
	CHECK_EQ_INT(fp_build_id_parse("", &empty), 0);
	CHECK_EQ_INT(empty.fb_len, 0);
}

static void test_trim_and_match(void)
{
	struct fp_build_id padded = { .fb_len = 20, .fb_data = { 1, 2, 3 } }, t;
	struct fp_build_id zero = { .fb_len = 20 };

	t = fp_build_id_trim(&padded);
	CHECK_EQ_INT(t.fb_len, 3);
	CHECK(fp_build_id_match(&t, &padded));
	CHECK(!fp_build_id_eq(&t, &padded));
	t = fp_build_id_trim(&zero); /* one byte is kept */
	CHECK_EQ_INT(t.fb_len, 1);
	padded.fb_data[19] = 9;
	t.fb_len = 3, t.fb_data[0] = 1, t.fb_data[1] = 2, t.fb_data[2] = 3;
	CHECK(!fp_build_id_match(&t, &padded));
}

static void test_path(void)
{
	char buf[64];

	CHECK_EQ_INT(fp_build_id_path(buf, sizeof(buf), "/d", "abcdef", ".debug"), 0);
	CHECK(strcmp(buf, "/d/.build-id/ab/cdef.debug") == 0);
	CHECK_EQ_INT(fp_build_id_path(buf, sizeof(buf), "/d", "abcd", NULL), 0);
	CHECK(strcmp(buf, "/d/.build-id/ab/cd") == 0);
	CHECK_EQ_INT(fp_build_id_path(buf, sizeof(buf), "/d", "ab", ".debug"), -EINVAL);
	CHECK_EQ_INT(fp_build_id_path(buf, sizeof(buf), "/d", "", ""), -EINVAL);
	/* "/d/.build-id/ab/cdef.debug" is 26 bytes and its NUL */
	CHECK_EQ_INT(fp_build_id_path(buf, 26, "/d", "abcdef", ".debug"), -ENAMETOOLONG);
	CHECK_EQ_INT(fp_build_id_path(buf, 27, "/d", "abcdef", ".debug"), 0);
}

int main(void)
{
	RUN(test_hex_round_trip);
	RUN(test_parse_rejects);
	RUN(test_trim_and_match);
	RUN(test_path);
	return CHECK_DONE();
}
