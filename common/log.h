/* log.h: logging to stderr (foreground) or syslog (daemon). */
#ifndef FP_LOG_H
#define FP_LOG_H

#include <stdarg.h>

/* fp_log_init: name the program; verbose > 0 enables debug messages;
 * use_syslog sends everything to syslog instead of stderr. */
void fp_log_init(const char *progname, int verbose, int use_syslog);

void fp_warn(const char *fmt, ...) __attribute__((format(printf, 1, 2)));  /* adds strerror(errno) */
void fp_warnx(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
void fp_info(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
void fp_debug(const char *fmt, ...) __attribute__((format(printf, 1, 2)));

#endif
