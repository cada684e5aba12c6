/* push_cli.c: the push flags of push.h (destinations, headers, header
 * files, spool and retry bounds) checked and turned into started pushers.
 * Called from main's thread at start-up. */
#include "cli.h"
#include "log.h"
#include "push.h"

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

static int cli_error(const char *flag, const char *arg, const char *why)
{
	char shown[512];

	fprintf(stderr, "fleetprof-symbolizer: invalid %s '%s'%s%s\n", flag,
		fp_log_escape(arg, strlen(arg), shown, sizeof(shown)), why ? ": " : "",
		why ? why : "");
	return -1;
}

int fp_push_cli_option(struct fp_push_cli *c, int opt, const char *arg)
{
	const char *why;
	char *end;
	unsigned long mb;

	switch (opt) {
	case FP_PUSH_OPT_PYROSCOPE:
	case FP_PUSH_OPT_OTLP_ENDPOINT:
		if (fp_push_url_check(arg))
			return cli_error(opt == FP_PUSH_OPT_PYROSCOPE ? "--pyroscope"
								      : "--otlp-endpoint",
					 arg, "expected http://HOST[:PORT][/PATH] or https://...");
		if (opt == FP_PUSH_OPT_PYROSCOPE)
			c->pc_pyroscope = arg;
		else
			c->pc_otlp = arg;
		return 1;
	case FP_PUSH_OPT_PYROSCOPE_FORMAT:
		if (strcmp(arg, "otlp") && strcmp(arg, "pprof"))
			return cli_error("--pyroscope-format", arg, "expected otlp or pprof");
		c->pc_pyroscope_pprof = !strcmp(arg, "pprof");
		return 1;
	case FP_PUSH_OPT_GZIP:
		c->pc_gzip = 1;
		return 1;
	case FP_PUSH_OPT_HEADER:
		if (fp_push_header_check(arg, &why))
			return cli_error("--push-header", arg, why);
		if (c->pc_nheaders == FP_PUSH_MAX_HEADERS)
			return cli_error("--push-header", arg, "too many headers");
		c->pc_headers[c->pc_nheaders++] = arg;
		return 1;
	case FP_PUSH_OPT_SPOOL:
		if (!arg[0])
			return cli_error("--spool", arg, "empty directory name");
		c->pc_spool = arg;
		return 1;
	case FP_PUSH_OPT_SPOOL_MAX:
		errno = 0;
		mb = strtoul(arg, &end, 10);
		if (errno || end == arg || *end || arg[0] == '-' || mb < 1 || mb > (1ul << 20))
			return cli_error("--spool-max", arg, "expected megabytes, 1 to 1048576");
		c->pc_spool_max_mb = (uint32_t)mb;
		return 1;
	case FP_PUSH_OPT_HEADER_FILE:
		if (!arg[0])
			return cli_error("--push-header-file", arg, "empty file name");
		c->pc_header_file = arg;
		return 1;
	case FP_PUSH_OPT_MAX_ATTEMPTS:
		return fp_parse_u32("fleetprof-symbolizer", "--push-max-attempts", arg, 1, 1000,
				    &c->pc_max_attempts)
			       ? -1
			       : 1;
	case FP_PUSH_OPT_MAX_AGE:
		return fp_parse_u32("fleetprof-symbolizer", "--push-max-age", arg, 60,
				    30 * 24 * 3600, &c->pc_max_age_s)
			       ? -1
			       : 1;
	default:
		return 0;
	}
}

#define HEADER_FILE_MAX (64 << 10)

int fp_push_header_file(const char *path, char **headers, size_t *n)
{
	char *buf = NULL, *line, *next;
	size_t have = *n, lineno = 0, len = 0;
	struct stat st;
	ssize_t r;
	int fd, err = 0;

	if ((fd = open(path, O_RDONLY | O_CLOEXEC | O_NOCTTY)) < 0 || fstat(fd, &st)) {
		err = -errno;
		fp_warn("--push-header-file %s", path);
		goto out;
	}
	if (!S_ISREG(st.st_mode) || st.st_size > HEADER_FILE_MAX) {
		fp_warnx("--push-header-file %s: %s", path,
			 S_ISREG(st.st_mode) ? "larger than 64 KiB" : "not a regular file");
		err = -EINVAL;
		goto out;
	}
	if (st.st_mode & (S_IRGRP | S_IROTH))
		fp_warnx("--push-header-file %s: readable by %s (mode %03o): its credentials "
			 "are not secret; chmod 600 it",
			 path, st.st_mode & S_IROTH ? "everyone" : "its group",
			 (unsigned)(st.st_mode & 0777));
	if (!(buf = malloc(HEADER_FILE_MAX + 1))) {
		err = -ENOMEM;
		goto out;
	}
	/* Read to the end, whatever stat said: the bound is ours. */
	while ((r = read(fd, buf + len, HEADER_FILE_MAX + 1 - len)) > 0 &&
	       (len += (size_t)r) <= HEADER_FILE_MAX)
		;
	if (r < 0 || len > HEADER_FILE_MAX) {
		err = r < 0 ? -errno : -EINVAL;
		fp_warnx("--push-header-file %s: %s", path,
			 r < 0 ? strerror(errno) : "larger than 64 KiB");
		goto out;
	}
	buf[len] = '\0';
	if (strlen(buf) != len) {
		fp_warnx("--push-header-file %s: contains a NUL byte", path);
		err = -EINVAL;
		goto out;
	}
	for (line = buf; line && *line; line = next) {
		const char *why;
		size_t l;

		lineno++;
		if ((next = strchr(line, '\n')))
			*next++ = '\0';
		l = strlen(line);
		if (l && line[l - 1] == '\r')
			line[--l] = '\0';
		if (!l || line[0] == '#')
			continue;
		if (fp_push_header_check(line, &why)) {
			fp_warnx("--push-header-file %s: line %zu: %s", path, lineno, why);
			err = -EINVAL;
			goto out;
		}
		if (*n == FP_PUSH_MAX_HEADERS) {
			fp_warnx("--push-header-file %s: line %zu: more than %d headers", path,
				 lineno, FP_PUSH_MAX_HEADERS);
			err = -EINVAL;
			goto out;
		}
		if (!(headers[*n] = strdup(line))) {
			err = -ENOMEM;
			goto out;
		}
		(*n)++;
	}
out:
	if (err)
		while (*n > have)
			free(headers[--*n]);
	if (buf) /* it held credentials */
		explicit_bzero(buf, HEADER_FILE_MAX + 1);
	free(buf);
	if (fd >= 0)
		close(fd);
	return err;
}

int fp_push_cli_start(const struct fp_push_cli *c, const char *cache_dir, struct fp_push **pushers)
{
	char *headers[FP_PUSH_MAX_HEADERS];
	struct fp_push_opts o = { .po_gzip = c->pc_gzip,
				  .po_headers = (const char *const *)headers,
				  .po_max_attempts = c->pc_max_attempts,
				  .po_max_age_s = c->pc_max_age_s };
	char spool[4200];
	size_t n = 0, nheaders = 0;
	int err = 0;

	pushers[0] = NULL;
	if (!c->pc_pyroscope && !c->pc_otlp) {
		if (c->pc_gzip || c->pc_nheaders || c->pc_spool || c->pc_pyroscope_pprof ||
		    c->pc_header_file || c->pc_max_attempts || c->pc_max_age_s)
			fp_warnx("push flags without --pyroscope or --otlp-endpoint: "
				 "nothing is pushed");
		return 0;
	}
	/* --push-header first, then the file's, up to the same bound. */
	for (size_t i = 0; i < c->pc_nheaders; i++)
		headers[nheaders++] = (char *)c->pc_headers[i];
	if (c->pc_header_file && (err = fp_push_header_file(c->pc_header_file, headers, &nheaders)))
		return err;
	o.po_nheaders = nheaders;
	if (c->pc_spool)
		snprintf(spool, sizeof(spool), "%s", c->pc_spool);
	else
		snprintf(spool, sizeof(spool), "%s/spool", cache_dir);
	o.po_spool_dir = spool;
	o.po_spool_max = (uint64_t)(c->pc_spool_max_mb ? c->pc_spool_max_mb : 256) << 20;
	if (c->pc_pyroscope) {
		o.po_name = "pyroscope";
		o.po_url = c->pc_pyroscope;
		o.po_format = c->pc_pyroscope_pprof ? FP_PUSH_PPROF : FP_PUSH_OTLP;
		if ((err = fp_push_start(&pushers[n], &o)))
			goto out;
		pushers[++n] = NULL;
	}
	if (c->pc_otlp) {
		o.po_name = "otlp";
		o.po_url = c->pc_otlp;
		o.po_format = FP_PUSH_OTLP;
		if ((err = fp_push_start(&pushers[n], &o))) {
			fp_push_stop_all(pushers, 0);
			goto out;
		}
		pushers[++n] = NULL;
	}
out:
	/* The pushers keep copies. */
	for (size_t i = c->pc_nheaders; i < nheaders; i++) {
		explicit_bzero(headers[i], strlen(headers[i]));
		free(headers[i]);
	}
	return err;
}
