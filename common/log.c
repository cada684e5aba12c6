/* log.c: stderr in the foreground, syslog for daemons. */
#include "log.h"

#include <errno.h>
#include <stdio.h>
#include <string.h>
#include <syslog.h>

static const char *log_progname = "fleetprof";
static int log_verbose;
static int log_syslog;

void fp_log_init(const char *progname, int verbose, int use_syslog)
{
	log_progname = progname;
	log_verbose = verbose;
	log_syslog = use_syslog;
	if (use_syslog)
		openlog(progname, LOG_PID | LOG_NDELAY, LOG_DAEMON);
}

static void log_vwrite(int pri, const char *suffix, const char *fmt, va_list ap)
{
	char msg[1024];

	vsnprintf(msg, sizeof(msg), fmt, ap);
	if (log_syslog) {
		syslog(pri, "%s%s%s", msg, suffix ? ": " : "", suffix ? suffix : "");
		return;
	}
	fprintf(stderr, "%s: %s%s%s\n", log_progname, msg, suffix ? ": " : "",
		suffix ? suffix : "");
}

#define LOG_BODY(pri, suffix)                                                          \
	do {                                                                           \
		va_list ap;                                                            \
		va_start(ap, fmt);                                                     \
		log_vwrite(pri, suffix, fmt, ap);                                      \
		va_end(ap);                                                            \
	} while (0)

void fp_warn(const char *fmt, ...)
{
	const char *err = strerror(errno);

	LOG_BODY(LOG_WARNING, err);
}

void fp_warnx(const char *fmt, ...)
{
	LOG_BODY(LOG_WARNING, NULL);
}

void fp_info(const char *fmt, ...)
{
	LOG_BODY(LOG_INFO, NULL);
}

void fp_debug(const char *fmt, ...)
{
	if (log_verbose > 0)
		LOG_BODY(LOG_DEBUG, NULL);
}
