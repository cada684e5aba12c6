/* files.c: atomic writes, safe file names, and the file sink.
 * The encoders (output.h, otlp.h) turn a profile into bytes; the sinks put
 * bytes into files, this one into the output tree. */
#include "files.h"
#include "fileio.h"
#include "gzip.h"
#include "log.h"
#include "otlp.h"
#include "output.h"

#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <stdint.h>
#include <time.h>
#include <zlib.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

/* open_beside: a new file beside path, named PATH.tmpXXXXXX with six
 * random characters, created with O_EXCL (mkstemp): nothing planted at a
 * guessable name is followed or overwritten.  Mode 0644: profiles are meant
 * to be read by others.  The fd, its name in *tmp (free it), or -errno. */
static int open_beside(const char *path, char **tmp)
{
	int fd, err;

	if (asprintf(tmp, "%s.tmpXXXXXX", path) < 0)
		return -ENOMEM;
	if ((fd = mkostemp(*tmp, O_CLOEXEC)) < 0 || fchmod(fd, 0644) < 0) {
		err = -errno;
		if (fd >= 0) {
			close(fd);
			unlink(*tmp);
		}
		free(*tmp);
		*tmp = NULL;
		return err;
	}
	return fd;
}

/* commit_beside: rename tmp over path when err is 0, else remove it;
 * frees tmp.  err, or the rename's. */
static int commit_beside(char *tmp, const char *path, int err)
{
	if (!err && rename(tmp, path) < 0)
		err = -errno;
	if (err)
		unlink(tmp);
	free(tmp);
	return err;
}

void fp_safe_name(const char *s, char *buf, size_t len)
{
	size_t i;

	for (i = 0; s[i] && i + 1 < len; i++) {
		char c = s[i];
		buf[i] = (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') ||
					 (c >= '0' && c <= '9') || c == '.' || c == '_' || c == '-'
				 ? c
				 : '_';
	}
	buf[i] = '\0';
	if (!buf[0] || strcmp(buf, ".") == 0 || strcmp(buf, "..") == 0)
		snprintf(buf, len, "_");
}

static int write_fd(void *arg, const void *buf, size_t len)
{
	return fp_write_all(*(int *)arg, buf, len);
}

int fp_write_file(const char *path, const void *buf, size_t len, int gzip)
{
	char *tmp;
	int fd, err;

	/* Readers of path see the old file or the complete new one, never a
	 * prefix: write beside it, then rename over it. */
	if ((fd = open_beside(path, &tmp)) < 0)
		return fd;
	/* Fastest level: on profiles it is about 3x faster than the default
	 * for files under 10% larger, and the symbolizer writes one per
	 * device and interval (Go's runtime/pprof makes the same choice). */
	err = gzip ? fp_gzip(buf, len, Z_BEST_SPEED, write_fd, &fd) : fp_write_all(fd, buf, len);
	if (!err && fsync(fd) < 0)
		err = -errno;
	if (close(fd) < 0 && !err)
		err = -errno;
	return commit_beside(tmp, path, err);
}

/* The outputs of the layouts. */
enum output {
	OUT_FOLDED,
	OUT_PPROF, /* gzip'd, as `go tool pprof` names .pb.gz */
	OUT_OTLP,
	OUT_SVG,
};

/* write_output: the output kind of p, encoded, as the file at path
 * (fp_write_file).  0 or a negative errno. */
static int write_output(const struct fp_files_sink *fs, const struct fp_profile *p,
			enum output kind, const char *path)
{
	char *text = NULL;
	uint8_t *bin = NULL;
	size_t len = 0;
	int err = -EINVAL;

	switch (kind) {
	case OUT_FOLDED:
		err = fp_folded_encode(p, fs->fs_by_thread, &text, &len);
		break;
	case OUT_PPROF:
		err = fp_pprof_encode(p, &bin, &len);
		break;
	case OUT_OTLP:
		err = fp_otlp_encode(p, NULL, &bin, &len);
		break;
	case OUT_SVG:
		err = fp_svg_encode(p,
				    p->pr_is_offcpu ? (fs->fs_offcpu_title ? fs->fs_offcpu_title
									   : "Off-CPU")
				    : fs->fs_title  ? fs->fs_title
						    : "CPU",
				    fs->fs_by_thread, &text, &len);
		break;
	}
	if (!err)
		err = fp_write_file(path, text ? (const void *)text : bin, len, kind == OUT_PPROF);
	free(text);
	free(bin);
	return err;
}

static int write_intervals(const struct fp_files_sink *fs, const struct fp_profile *p,
			   const struct fp_hello *hello, uint64_t seq, char *dir, size_t dlen)
{
	char host[256], path[4300], stamp[32];
	time_t secs = (time_t)(p->pr_start_ns / 1000000000ull);
	struct tm tm;
	int err;

	fp_safe_name(hello->fh_host, host, sizeof(host));
	gmtime_r(&secs, &tm);
	strftime(stamp, sizeof(stamp), "%Y%m%dT%H%M%SZ", &tm);
	if ((size_t)snprintf(dir, dlen, "%s/%s", fs->fs_dir, host) >= dlen)
		return -ENAMETOOLONG;
	if ((err = fp_mkdirs(dir)))
		return err;
	snprintf(path, sizeof(path), "%s/%s-%" PRIu64 ".folded", dir, stamp, seq);
	/* Never over a profile written before: the host name, start time
	 * and sequence number are the agent's word, and another agent's
	 * word could name a profile of a real device.  One worker writes a
	 * host's directory (pipeline.h), so nothing comes between the test
	 * and the write. */
	if (access(path, F_OK) == 0) {
		fp_warnx("%s exists: not replacing it with a profile of session %016" PRIx64, path,
			 hello->fh_session);
		return -EEXIST;
	}
	if ((err = write_output(fs, p, OUT_FOLDED, path)))
		return err;
	snprintf(path, sizeof(path), "%s/%s-%" PRIu64 ".pb.gz", dir, stamp, seq);
	if ((err = write_output(fs, p, OUT_PPROF, path)) || !p->pr_offcpu)
		return err;
	/* Off-CPU profiles beside, in a directory of their own, so that
	 * HOST/ *.folded stays the CPU profiles. */
	snprintf(path, sizeof(path), "%s/offcpu", dir);
	if ((err = fp_mkdirs(path)))
		return err;
	snprintf(path, sizeof(path), "%s/offcpu/%s-%" PRIu64 ".folded", dir, stamp, seq);
	if ((err = write_output(fs, p->pr_offcpu, OUT_FOLDED, path)))
		return err;
	snprintf(path, sizeof(path), "%s/offcpu/%s-%" PRIu64 ".pb.gz", dir, stamp, seq);
	return write_output(fs, p->pr_offcpu, OUT_PPROF, path);
}

static int write_record(const struct fp_files_sink *fs, const struct fp_profile *p)
{
	static const struct {
		const char *name;
		enum output kind;
	} files[] = {
		{ "profile.folded", OUT_FOLDED },
		{ "profile.pb.gz", OUT_PPROF },
		{ "profile.otlp.pb", OUT_OTLP },
		{ "flame.svg", OUT_SVG },
	}, off[] = {
		{ "offcpu.folded", OUT_FOLDED },
		{ "offcpu.pb.gz", OUT_PPROF },
		{ "offcpu.otlp.pb", OUT_OTLP },
		{ "offcpu.svg", OUT_SVG },
	};
	char path[4300];
	int err;

	if ((err = fp_mkdirs(fs->fs_dir)))
		return err;
	for (size_t i = 0; i < sizeof(files) / sizeof(files[0]); i++) {
		snprintf(path, sizeof(path), "%s/%s", fs->fs_dir, files[i].name);
		if ((err = write_output(fs, p, files[i].kind, path)))
			return err;
	}
	/* The off-CPU profile, as the CPU one, the folded file's counts in
	 * nanoseconds off-CPU. */
	for (size_t i = 0; p->pr_offcpu && i < sizeof(off) / sizeof(off[0]); i++) {
		snprintf(path, sizeof(path), "%s/%s", fs->fs_dir, off[i].name);
		if ((err = write_output(fs, p->pr_offcpu, off[i].kind, path)))
			return err;
	}
	return 0;
}

int fp_files_sink(void *arg, const struct fp_profile *p, const struct fp_hello *hello, uint64_t seq)
{
	const struct fp_files_sink *fs = arg;
	char dir[4200];
	int err;

	snprintf(dir, sizeof(dir), "%s", fs->fs_dir);
	if (fs->fs_layout == FP_FILES_RECORD)
		err = write_record(fs, p);
	else
		err = write_intervals(fs, p, hello, seq, dir, sizeof(dir));
	if (err)
		fp_warnx("cannot write the profile of %s to %s: %s", hello->fh_host, dir,
			 strerror(-err));
	return err;
}
