/* output.h: the profile writers.  All return 0 or a negative errno. */
#ifndef FP_OUTPUT_H
#define FP_OUTPUT_H

#include <stdint.h>
#include <stdio.h>
#include "profile.h"

/* fp_folded_write: one line per distinct stack, root first:
 * "PROCESS[;THREAD];frame;...;frame COUNT", lines sorted, identical stacks
 * merged.  THREAD only when by_thread. */
int fp_folded_write(const struct fp_profile *p, FILE *f, int by_thread);

/* fp_pprof_encode: the uncompressed pprof protobuf (perftools.profiles.Profile)
 * of p, malloc'd.  fp_pprof_write: the gzip-compressed form at path. */
int fp_pprof_encode(const struct fp_profile *p, uint8_t **buf, size_t *len);
int fp_pprof_write(const struct fp_profile *p, const char *path);

/* fp_protobuf_pack: the serialized form of protobuf-c message m,
 * malloc'd.  0, -ENOMEM or -EPROTO (protobuf-c packed a different size). */
struct ProtobufCMessage;
int fp_protobuf_pack(const struct ProtobufCMessage *m, uint8_t **buf, size_t *len);

/* fp_svg_write: a self-contained interactive flame graph (hover: name,
 * samples and share; click: zoom; no external resources). */
int fp_svg_write(const struct fp_profile *p, FILE *f, const char *title, int by_thread);

#endif
