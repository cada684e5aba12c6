/* files.c: directories, atomic writes, safe file names. */
#include "files.h"
#include "output.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

int fp_mkdirs(const char *dir)
{
	char path[4096], *p;

	if (snprintf(path, sizeof(path), "%s", dir) >= (int)sizeof(path))
		return -ENAMETOOLONG;
	for (p = path + 1; *p; p++) {
		if (*p != '/')
			continue;
		*p = '\0';
		if (mkdir(path, 0755) && errno != EEXIST)
			return -errno;
		*p = '/';
	}
	if (mkdir(path, 0755) && errno != EEXIST)
		return -errno;
	return 0;
}

typedef int (*write_fn)(const struct fp_profile *p, FILE *f, const char *title, int by_thread);

static int write_atomic(const char *path, write_fn fn, const struct fp_profile *p,
			const char *title, int by_thread)
{
	char tmp[4200];
	FILE *f;
	int err;

	if (snprintf(tmp, sizeof(tmp), "%s.tmp.%d", path, (int)getpid()) >= (int)sizeof(tmp))
		return -ENAMETOOLONG;
	f = fopen(tmp, "we");
	if (!f)
		return -errno;
	err = fn(p, f, title, by_thread);
	if (fclose(f) && !err)
		err = -errno;
	if (!err && rename(tmp, path))
		err = -errno;
	if (err)
		unlink(tmp);
	return err;
}

static int folded_fn(const struct fp_profile *p, FILE *f, const char *title, int by_thread)
{
	return fp_folded_write(p, f, by_thread);
}

static int svg_fn(const struct fp_profile *p, FILE *f, const char *title, int by_thread)
{
	return fp_svg_write(p, f, title, by_thread);
}

int fp_write_folded(const struct fp_profile *p, const char *path, int by_thread)
{
	return write_atomic(path, folded_fn, p, NULL, by_thread);
}

int fp_write_svg(const struct fp_profile *p, const char *path, const char *title, int by_thread)
{
	return write_atomic(path, svg_fn, p, title, by_thread);
}

void fp_safe_name(const char *s, char *buf, size_t len)
{
	size_t i;

	for (i = 0; s[i] && i + 1 < len; i++) {
		char c = s[i];
		buf[i] = (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') ||
					 (c >= '0' && c <= '9') || c == '.' || c == '_' || c == '-' ?
				 c : '_';
	}
	buf[i] = '\0';
	if (!buf[0] || strcmp(buf, ".") == 0 || strcmp(buf, "..") == 0)
		snprintf(buf, len, "_");
}
