/* log.c: stderr in the foreground, syslog for daemons.  Messages are
 * formatted, then escaped (fp_log_escape) as a whole: the one place that
 * keeps strings from outside from breaking lines, whatever the call site. */
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

char *fp_log_escape(const char *s, size_t n, char *buf, size_t len)
{
	static const char hex[] = "0123456789abcdef";
	size_t o = 0, fit = 0;

	if (!len)
		return buf;
	for (size_t i = 0; i < n && s[i]; i++) {
		unsigned char c = (unsigned char)s[i];
		char e[4];
		size_t elen = 1;

		e[0] = (char)c;
		if (c == '\n' || c == '\r' || c == '\t') {
			e[0] = '\\';
			e[1] = c == '\n' ? 'n' : c == '\r' ? 'r' : 't';
			elen = 2;
		} else if (c < 0x20 || c == 0x7f) {
			e[0] = '\\';
			e[1] = 'x';
			e[2] = hex[c >> 4];
			e[3] = hex[c & 15];
			elen = 4;
		}
		if (o + elen + 1 > len) {
			/* Cut where "..." still fits, never inside an escape. */
			o = fit;
			if (o + 4 <= len) {
				memcpy(buf + o, "...", 3);
				o += 3;
			}
			break;
		}
		memcpy(buf + o, e, elen);
		o += elen;
		if (o + 4 <= len)
			fit = o;
	}
	buf[o] = '\0';
	return buf;
}

static void log_vwrite(int pri, const char *suffix, const char *fmt, va_list ap)
{
	char raw[1024], msg[1200];

	vsnprintf(raw, sizeof(raw), fmt, ap);
	fp_log_escape(raw, sizeof(raw), msg, sizeof(msg));
	if (log_syslog) {
		syslog(pri, "%s%s%s", msg, suffix ? ": " : "", suffix ? suffix : "");
		return;
	}
	fprintf(stderr, "%s: %s%s%s\n", log_progname, msg, suffix ? ": " : "",
		suffix ? suffix : "");
}

#define LOG_BODY(pri, suffix) \
	do { \
		va_list ap; \
		va_start(ap, fmt); \
		log_vwrite(pri, suffix, fmt, ap); \
		va_end(ap); \
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
