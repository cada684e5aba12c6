/* buildid.h: GNU build-IDs: their in-memory form, hex text, and the path
 * of a file named by one under a .build-id tree
 * (DIR/.build-id/xx/rest[.debug], the layout of /usr/lib/debug and of
 * debuginfod caches).  Stateless; any thread. */
#ifndef FP_BUILDID_H
#define FP_BUILDID_H

#include <stddef.h>
#include <stdint.h>

#define FP_BUILD_ID_MAX 20 /* GNU build-IDs are 20 bytes (SHA-1) or fewer */
/* The size of a buffer for any build-ID in hex, with its NUL. */
#define FP_BUILD_ID_HEX_SIZE (2 * FP_BUILD_ID_MAX + 1)

struct fp_build_id {
	uint8_t fb_len; /* 0: unknown */
	uint8_t fb_data[FP_BUILD_ID_MAX];
};

/* fp_build_id_hex: write id as lowercase hex into buf (FP_BUILD_ID_HEX_SIZE
 * bytes); a length past FP_BUILD_ID_MAX is taken as FP_BUILD_ID_MAX. */
void fp_build_id_hex(const struct fp_build_id *id, char *buf);
/* fp_build_id_parse: parse hex (either case, an even number of digits, at
 * most 2 * FP_BUILD_ID_MAX; "" is the unknown id); 0 or -EINVAL, and *id
 * is written only on success. */
int fp_build_id_parse(const char *hex, struct fp_build_id *id);
/* fp_build_id_eq: non-zero when a and b are the same build-ID. */
int fp_build_id_eq(const struct fp_build_id *a, const struct fp_build_id *b);
/* fp_build_id_match: like fp_build_id_eq, but the longer one may have
 * trailing zeros: the kernel pads build-IDs shorter than 20 bytes. */
int fp_build_id_match(const struct fp_build_id *a, const struct fp_build_id *b);
/* fp_build_id_trim: id without the zeros the kernel pads it with (at
 * least one byte is kept): files and servers know the real one. */
struct fp_build_id fp_build_id_trim(const struct fp_build_id *id);

/* fp_build_id_path: "DIR/.build-id/xx/rest" followed by suffix (may be
 * "" or NULL) into buf of len bytes, where xx are the first two digits of
 * hex and rest the others.  0, -EINVAL (hex shorter than 4 digits: a
 * one-byte build-ID would name the directory xx) or -ENAMETOOLONG.  hex is
 * not checked otherwise: callers pass fp_build_id_hex's output or text
 * they have validated. */
int fp_build_id_path(char *buf, size_t len, const char *dir, const char *hex, const char *suffix);

#endif
