/* log.h: logging to stderr (foreground) or syslog (daemon).
 *
 * Every line written is one line: control bytes in the formatted message
 * (from host names, labels, thread names, paths, response bodies: whatever
 * came from outside) are escaped by fp_log_escape's rules before it is
 * written, so no string can end a line early or forge another one.  Any
 * thread may log. */
#ifndef FP_LOG_H
#define FP_LOG_H

#include <stdarg.h>
#include <stddef.h>

/* fp_log_init: name the program; verbose > 0 enables debug messages;
 * use_syslog sends everything to syslog instead of stderr. */
void fp_log_init(const char *progname, int verbose, int use_syslog);

void fp_warn(const char *fmt, ...) __attribute__((format(printf, 1, 2))); /* adds strerror(errno) */
void fp_warnx(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
void fp_info(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
void fp_debug(const char *fmt, ...) __attribute__((format(printf, 1, 2)));

/* fp_log_escape: the first n bytes of s (up to a NUL) into buf, printable:
 * CR, LF and tab become \r, \n and \t, other bytes below 0x20 and 0x7f
 * become \xNN, everything else is copied (UTF-8 stays readable).  Cut with
 * "..." when buf is too small.  buf is always terminated (len > 0);
 * returns buf. */
char *fp_log_escape(const char *s, size_t n, char *buf, size_t len);

#endif
