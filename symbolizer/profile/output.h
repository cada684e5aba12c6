/* output.h: the profile encoders.  Each returns the encoded bytes in a new
 * buffer (the caller frees it) and touches no file: where bytes go, and
 * how they are written, is the sinks' business (sinks/files.h, push.h).
 * All return 0 or a negative errno; *buf and *len are written only on
 * success. */
#ifndef FP_OUTPUT_H
#define FP_OUTPUT_H

#include <stddef.h>
#include <stdint.h>
#include "profile.h"

/* fp_folded_encode: one line per distinct stack, root first:
 * "PROCESS[;THREAD];frame;...;frame COUNT\n", lines sorted, identical
 * stacks merged.  THREAD only when by_thread.  *buf is NUL-terminated (not
 * counted in *len).  0 or -ENOMEM. */
int fp_folded_encode(const struct fp_profile *p, int by_thread, char **buf, size_t *len);

/* fp_pprof_encode: the uncompressed pprof protobuf (perftools.profiles.Profile)
 * of p (`go tool pprof` reads it gzip'd or not).  0, -ENOMEM or -EPROTO. */
int fp_pprof_encode(const struct fp_profile *p, uint8_t **buf, size_t *len);

/* fp_protobuf_pack: the serialized form of protobuf-c message m,
 * malloc'd.  0, -ENOMEM or -EPROTO (protobuf-c packed a different size). */
struct ProtobufCMessage;
int fp_protobuf_pack(const struct ProtobufCMessage *m, uint8_t **buf, size_t *len);

/* fp_svg_encode: a self-contained interactive flame graph (hover: name,
 * samples and share; click: zoom; no external resources) titled title
 * (NULL: "Flame Graph").  *buf is NUL-terminated (not counted in *len).
 * 0 or -ENOMEM. */
int fp_svg_encode(const struct fp_profile *p, const char *title, int by_thread, char **buf,
		  size_t *len);

#endif
