/* otlp.h: a profile as OpenTelemetry Profiles (OTLP, profiles/v1development in
 * the layout of OTLP v1.10/v1.11): one serialized
 * opentelemetry.proto.collector.profiles.v1development.ExportProfilesServiceRequest
 * (proto/otlp_profiles_service.proto), ready to be POSTed as
 * application/x-protobuf to a collector's /v1development/profiles or stored.
 *
 * What the request holds:
 * - One ResourceProfiles per service: service.name is the container when the
 *   process runs in one, otherwise the process name.  Each resource has
 *   service.name, host.name and the static labels as attributes, and one
 *   ScopeProfiles (scope "fleetprof") with one Profile over that service's
 *   samples: sample type samples/count, period type cpu/nanoseconds, period
 *   pr_period_ns, the profile's interval as time and duration.
 * - One ProfilesDictionary shared by all: every table starts with its zero
 *   entry (index 0 means "none") and holds no entry twice.  One Mapping per
 *   distinct mapping, with the attribute process.executable.build_id.gnu (hex)
 *   when the build-ID is known; one Location per frame (mapping, address =
 *   file offset, attribute profile.frame.type = kernel or native) with one
 *   Line naming its Function when the frame is resolved, none otherwise.
 * - Sample attributes: process.pid, process.executable.name, thread.id,
 *   thread.name and, when the process is in one, container.id.
 */
#ifndef FP_OTLP_H
#define FP_OTLP_H

#include <stddef.h>
#include <stdint.h>
#include "profile.h"

/* What describes every resource besides its service: the host and static
 * labels (e.g. fp_hello's).  A label whose key is empty or already present
 * (service.name, host.name, an earlier label) is left out. */
struct fp_otlp_resource {
	const char *or_host; /* host.name; NULL: the profile's pr_host */
	size_t or_nlabels;
	char *const *or_label_keys;
	char *const *or_label_values;
};

/* fp_otlp_encode: the serialized ExportProfilesServiceRequest of p, malloc'd
 * into *buf (free it).  res may be NULL (the profile's host, no labels).
 * 0, -EINVAL (NULL p or buf, a table past INT32_MAX entries), -ENOMEM or
 * -EPROTO (the encoder disagreed with itself). */
int fp_otlp_encode(const struct fp_profile *p, const struct fp_otlp_resource *res, uint8_t **buf,
		   size_t *len);

#endif
