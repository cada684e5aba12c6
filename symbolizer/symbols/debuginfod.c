/* debuginfod.c: the resolver's fetch hook on libdebuginfod. */
#include "debuginfod.h"
#include "fileid.h"
#include "fileio.h"
#include "log.h"

#include <elfutils/debuginfod.h>
#include <errno.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

struct fp_debuginfod {
	debuginfod_client *dc_client;
	pthread_mutex_t dc_lock; /* a client handle serves one query at a time */
	struct fp_debuginfod_stats dc_stats;
};

int fp_debuginfod_open(struct fp_debuginfod **out, const char *const *urls, size_t n,
		       const char *cache_dir)
{
	struct fp_debuginfod *d;
	size_t i, len = 1;
	char *joined;
	int err;

	if (!n || !cache_dir)
		return -EINVAL;
	for (i = 0; i < n; i++) {
		if (strncmp(urls[i], "http://", 7) && strncmp(urls[i], "https://", 8))
			return -EINVAL;
		if (strchr(urls[i], ' '))
			return -EINVAL; /* the list is space-separated */
		len += strlen(urls[i]) + 1;
	}
	if ((err = fp_mkdirs(cache_dir)))
		return err;
	if (!(joined = malloc(len)))
		return -ENOMEM;
	joined[0] = '\0';
	for (i = 0; i < n; i++) {
		if (i)
			strcat(joined, " ");
		strcat(joined, urls[i]);
	}
	/* libdebuginfod reads these at each query; there is no API for them. */
	err = setenv(DEBUGINFOD_URLS_ENV_VAR, joined, 1) ||
			      setenv(DEBUGINFOD_CACHE_PATH_ENV_VAR, cache_dir, 1) ||
			      setenv(DEBUGINFOD_TIMEOUT_ENV_VAR, "10",
				     0) /* the default, 90 s, stalls batches */
		      ? -errno
		      : 0;
	free(joined);
	if (err)
		return err;
	if (!(d = calloc(1, sizeof(*d))))
		return -ENOMEM;
	if (!(d->dc_client = debuginfod_begin())) {
		free(d);
		return -ENOSYS;
	}
	pthread_mutex_init(&d->dc_lock, NULL);
	*out = d;
	return 0;
}

void fp_debuginfod_close(struct fp_debuginfod *d)
{
	if (!d)
		return;
	debuginfod_end(d->dc_client);
	pthread_mutex_destroy(&d->dc_lock);
	free(d);
}

int fp_debuginfod_fetch(const struct fp_build_id *id, int what, void *arg)
{
	struct fp_debuginfod *d = arg;
	char hex[2 * FP_BUILD_ID_MAX + 1];
	struct fp_build_id trimmed = fp_build_id_trim(id);
	char *path = NULL;
	int fd;

	/* Our synthetic ids (fileid.h) are unknown to every other server. */
	if (!trimmed.fb_len || fp_fileid_kind(id))
		return -ENOENT;
	fp_build_id_hex(&trimmed, hex);
	pthread_mutex_lock(&d->dc_lock);
	fd = what == FP_FETCH_CFI ? -ENOENT
				  : debuginfod_find_debuginfo(d->dc_client, trimmed.fb_data,
							      trimmed.fb_len, &path);
	if (fd < 0)
		fd = debuginfod_find_executable(d->dc_client, trimmed.fb_data, trimmed.fb_len,
						&path);
	if (fd >= 0)
		d->dc_stats.ds_fetched++;
	else if (fd == -ENOENT)
		d->dc_stats.ds_missed++;
	else
		d->dc_stats.ds_failed++;
	pthread_mutex_unlock(&d->dc_lock);
	if (fd >= 0)
		fp_info("debuginfod: fetched %s (%s)", hex, path ? path : "");
	else if (fd == -ENOENT)
		fp_debug("debuginfod: no server has %s%s",
			 what == FP_FETCH_CFI ? "the executable of " : "", hex);
	else
		fp_warnx("debuginfod: cannot fetch %s: %s", hex, strerror(-fd));
	free(path);
	return fd;
}

void fp_debuginfod_stats(struct fp_debuginfod *d, struct fp_debuginfod_stats *st)
{
	pthread_mutex_lock(&d->dc_lock);
	*st = d->dc_stats;
	pthread_mutex_unlock(&d->dc_lock);
}
