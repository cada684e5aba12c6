/* pusher.h: what the files of push.h share (private to them): the
 * pusher's state and the spool record's format.
 *
 * push_request.c turns a profile into spool records in the sink's thread;
 * push.c sends them from the pusher thread and runs the pusher's life
 * cycle; push_cli.c parses the flags.  Fields above pu_mu are set by
 * fp_push_start and read-only after; pu_mu guards the rest, which both the
 * sink's thread (an encoding error counted, the pusher woken) and the
 * pusher thread change.
 *
 * A spool record is one HTTP request, written by fp_push_profile:
 *
 *     FPPUSH1\n
 *     PATH?QUERY\n          relative to the base URL's path
 *     CONTENT-TYPE\n
 *     CONTENT-ENCODING\n    empty for none
 *     DESCRIPTION\n         host, interval (and service) for the logs
 *     BODY
 *
 * so a record says all about its request but the base URL and the
 * --push-header values (credentials stay out of the spool). */
#ifndef FP_PUSHER_H
#define FP_PUSHER_H

#include <pthread.h>
#include <stddef.h>
#include <stdint.h>
#include "push.h"

#define FP_PUSH_RECORD_MAGIC "FPPUSH1"
#define FP_PUSH_OTLP_PATH "/v1development/profiles"

struct fp_push {
	char *pu_name;
	char *pu_base; /* the URL as given, for logs */
	char *pu_path; /* its path without a trailing '/' */
	int pu_format, pu_gzip;
	size_t pu_nheaders;
	char *pu_hname[FP_PUSH_MAX_HEADERS], *pu_hvalue[FP_PUSH_MAX_HEADERS];
	uint32_t pu_backoff_min, pu_backoff_max, pu_timeout;
	uint32_t pu_max_attempts; /* answered failures before a record is dropped */
	int64_t pu_max_age;       /* seconds: a record failing when older is dropped */
	struct fp_httpc *pu_http;
	struct fp_spool *pu_spool;

	pthread_t pu_thread;
	int pu_started;
	pthread_mutex_t pu_mu; /* guards what follows */
	pthread_cond_t pu_cv;
	int pu_stop, pu_pending;
	uint64_t pu_deadline;           /* monotonic ms: end of the flush */
	struct fp_push_stats pu_stats;  /* the counters push.c keeps itself */
	struct fp_push_stats pu_logged; /* as of the last stats line */
	unsigned pu_seed;
};

#endif
