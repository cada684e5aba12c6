/* wire.h: msgpack encoding of the device <-> symbolizer protocol.
 *
 * proto/PROTOCOL.md documents every field.  Encoders return a malloc'd
 * buffer the caller frees.  Decoders take untrusted bytes: every length and
 * count is checked against the bytes that remain before anything is
 * allocated, so a hostile message costs at most a small multiple of its own
 * size; they never crash, and on error write nothing to the output.
 */
#ifndef FP_WIRE_H
#define FP_WIRE_H

#include "batch.h"

/* The largest message either side accepts.  Decoding costs up to about 24
 * bytes per msgpack item, so this also bounds what one hostile message can
 * make the symbolizer allocate (under 200 MiB). */
#define FP_WIRE_MAX_MESSAGE (8u << 20)
#define FP_WIRE_MAX_RANGES 64 /* file ranges per reply */

enum fp_msg_type {
	FP_MSG_HELLO = 1,
	FP_MSG_SAMPLES = 2,
	FP_MSG_KSYMS = 3,
	FP_MSG_REPLY = 4,
	FP_MSG_FILE = 5, /* file bytes an agent sends on the symbolizer's request */
};

/* Decoding errors (negative); fp_wire_strerror names them. */
enum fp_wire_error {
	FP_WIRE_EMALFORMED = -1001, /* not msgpack, truncated, or nested too deep */
	FP_WIRE_EVERSION = -1002,   /* unknown protocol version */
	FP_WIRE_ETYPE = -1003,      /* unknown message type */
	FP_WIRE_EFIELD = -1004,     /* missing field, wrong type, or out of range */
	FP_WIRE_ETOOBIG = -1005,    /* a count or length over its limit */
	FP_WIRE_ENOMEM = -1006,
};

const char *fp_wire_strerror(int err);

/* fp_wire_encode_*: 0, -EINVAL (a value the decoder would refuse),
 * -EMSGSIZE (over FP_WIRE_MAX_MESSAGE) or -ENOMEM. */
int fp_wire_encode_hello(const struct fp_hello *h, char **buf, size_t *len);
int fp_wire_encode_batch(const struct fp_batch *b, char **buf, size_t *len);
/* Bytes of an encoded batch by part, for the agent's accounting of what its
 * wire bytes go to; each part counts its key and its array header too. */
struct fp_wire_batch_parts {
	size_t wp_mappings, wp_threads, wp_nodes, wp_counts;
	size_t wp_other; /* envelope, session, times, lost counters */
};
/* fp_wire_encode_batch_parts: fp_wire_encode_batch, and on success the
 * bytes of each part in *parts.  features (enum fp_feature bits the peer
 * announced) picks the encoding: with FP_FEATURE_LEAVES the counts go as
 * SAMPLES key 11 (sorted; a count of 0 is then -EINVAL), else as key 9;
 * with FP_FEATURE_NODES the nodes go as key 12, else as key 8. */
int fp_wire_encode_batch_parts(const struct fp_batch *b, uint64_t features, char **buf, size_t *len,
			       struct fp_wire_batch_parts *parts);
int fp_wire_encode_ksyms(const struct fp_ksyms *k, char **buf, size_t *len);
int fp_wire_encode_reply(const struct fp_reply *r, char **buf, size_t *len);
int fp_wire_encode_file(const struct fp_file_data *d, char **buf, size_t *len);

/* fp_wire_peek: validate the envelope of buf and return its type in *type.
 * 0 on success; FP_WIRE_EMALFORMED, FP_WIRE_EVERSION or FP_WIRE_ETYPE. */
int fp_wire_peek(const void *buf, size_t len, int *type);

/* fp_wire_decode_*: decode a whole message of the given type.  0 on
 * success (the caller then owns *out and calls its _fini), or a negative
 * fp_wire_error; on error *out is untouched. */
int fp_wire_decode_hello(const void *buf, size_t len, struct fp_hello *out);
int fp_wire_decode_batch(const void *buf, size_t len, struct fp_batch *out);
int fp_wire_decode_ksyms(const void *buf, size_t len, struct fp_ksyms *out);
int fp_wire_decode_reply(const void *buf, size_t len, struct fp_reply *out);
int fp_wire_decode_file(const void *buf, size_t len, struct fp_file_data *out);

#endif
