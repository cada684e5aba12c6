/* files_test.c: the temporary files of files.h.  A symbolic link planted at
 * the temporary name fleetprof used to pick (PATH.tmp.PID) is not followed;
 * the names used instead are random and leave nothing behind.  Every
 * writer syncs its temporary file, whole, before renaming it into place
 * (fsync is this file's, which records what it syncs). */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <unistd.h>

#include "check.h"
#include "files.h"
#include "output.h"

static char dir[64];

/* What fsync was called on: the file's name then, and its size. */
static struct {
	char sy_path[256];
	off_t sy_size;
} synced[8];
static int nsynced;

/* fsync: the files library's calls land here (the program's definition
 * comes first); recorded, then done. */
int fsync(int fd)
{
	char link[64];
	struct stat st;
	ssize_t n;

	if (nsynced < (int)(sizeof(synced) / sizeof(synced[0]))) {
		snprintf(link, sizeof(link), "/proc/self/fd/%d", fd);
		n = readlink(link, synced[nsynced].sy_path, sizeof(synced[0].sy_path) - 1);
		synced[nsynced].sy_path[n > 0 ? n : 0] = '\0';
		synced[nsynced].sy_size = fstat(fd, &st) ? -1 : st.st_size;
		nsynced++;
	}
	return (int)syscall(SYS_fsync, fd);
}

/* synced_whole: whether path's temporary (PATH.tmpXXXXXX) was synced
 * holding as many bytes as path holds now. */
static int synced_whole(const char *path)
{
	struct stat st;
	size_t len = strlen(path);

	if (stat(path, &st))
		return 0;
	for (int i = 0; i < nsynced; i++)
		if (!strncmp(synced[i].sy_path, path, len) &&
		    !strncmp(synced[i].sy_path + len, ".tmp", 4) &&
		    synced[i].sy_size == st.st_size && st.st_size > 0)
			return 1;
	fprintf(stderr, "  %s (%lld bytes) was not synced whole before its rename\n", path,
		(long long)st.st_size);
	return 0;
}

static struct fp_profile *one_sample(void)
{
	static const struct fp_build_id id = { .fb_len = 4, .fb_data = { 1, 2, 3, 4 } };
	struct fp_profile *p = NULL;
	uint32_t m, f;

	if (fp_profile_alloc(&p, "h", 1700000000000000000ull, 10000000000ull, 10101010))
		return NULL;
	if (fp_profile_add_mapping(p, FP_MAP_USER, &id, "/usr/bin/app", &m) ||
	    fp_profile_add_frame(p, m, 0x1000, FP_FRAME_USER, "main", NULL, &f) ||
	    fp_profile_add_sample(p, &f, 1, 100, 100, "app", "app", "", 7)) {
		fp_profile_free(p);
		return NULL;
	}
	return p;
}

static size_t slurp(const char *path, char *buf, size_t len)
{
	int fd = open(path, O_RDONLY | O_CLOEXEC);
	ssize_t n = fd >= 0 ? read(fd, buf, len - 1) : -1;

	if (fd >= 0)
		close(fd);
	buf[n > 0 ? n : 0] = '\0';
	return n > 0 ? (size_t)n : 0;
}

/* others: entries of dir but the names given (NULL-terminated). */
static int others(const char *const *known)
{
	struct dirent *de;
	DIR *d = opendir(dir);
	int n = 0;

	while (d && (de = readdir(d))) {
		int k = !strcmp(de->d_name, ".") || !strcmp(de->d_name, "..");
		for (const char *const *s = known; *s && !k; s++)
			k = !strcmp(de->d_name, *s);
		if (!k) {
			fprintf(stderr, "  left: %s\n", de->d_name);
			n++;
		}
	}
	if (d)
		closedir(d);
	return n;
}

/* Both writers (stdio: folded, SVG; fd: pprof, OTLP) with a link at the
 * old name pointing to a file that must stay as it is. */
static void test_planted_link(void)
{
	char victim[128], folded[128], pb[128], link1[160], link2[160], buf[256];
	const char *known[] = {
		"victim", "out.folded", link1 + strlen(dir) + 1, "out.pb", link2 + strlen(dir) + 1,
		NULL
	};
	struct fp_profile *p = one_sample();
	struct stat st;
	FILE *f;

	snprintf(victim, sizeof(victim), "%s/victim", dir);
	CHECK((f = fopen(victim, "w")) && fputs("untouched\n", f) >= 0 && !fclose(f));
	CHECK(p != NULL);
	if (!p)
		return;
	snprintf(folded, sizeof(folded), "%s/out.folded", dir);
	snprintf(link1, sizeof(link1), "%s.tmp.%d", folded, (int)getpid());
	snprintf(pb, sizeof(pb), "%s/out.pb", dir);
	snprintf(link2, sizeof(link2), "%s.tmp.%d", pb, (int)getpid());
	CHECK_EQ_INT(symlink(victim, link1), 0);
	CHECK_EQ_INT(symlink(victim, link2), 0);

	CHECK_EQ_INT(fp_write_folded(p, folded, 0), 0);
	slurp(folded, buf, sizeof(buf));
	CHECK(!strcmp(buf, "app;main 7\n"));
	CHECK(!lstat(folded, &st) && S_ISREG(st.st_mode) && (st.st_mode & 0777) == 0644);

	CHECK_EQ_INT(fp_write_file(pb, "payload", 7, 0), 0);
	slurp(pb, buf, sizeof(buf));
	CHECK(!strcmp(buf, "payload"));
	CHECK(!lstat(pb, &st) && S_ISREG(st.st_mode) && (st.st_mode & 0777) == 0644);

	slurp(victim, buf, sizeof(buf));
	CHECK(!strcmp(buf, "untouched\n"));
	CHECK(!lstat(link1, &st) && S_ISLNK(st.st_mode));
	CHECK_EQ_INT(others(known), 0);
	fp_profile_free(p);
}

/* Each writer (stdio: folded, SVG; fd: pprof and OTLP) syncs its file
 * whole before the rename. */
static void test_synced(void)
{
	char folded[128], svg[128], pb[128];
	struct fp_profile *p = one_sample();

	CHECK(p != NULL);
	if (!p)
		return;
	snprintf(folded, sizeof(folded), "%s/synced.folded", dir);
	snprintf(svg, sizeof(svg), "%s/synced.svg", dir);
	snprintf(pb, sizeof(pb), "%s/synced.pb.gz", dir);
	nsynced = 0;
	CHECK_EQ_INT(fp_write_folded(p, folded, 0), 0);
	CHECK_EQ_INT(fp_write_svg(p, svg, "CPU", 0), 0);
	CHECK_EQ_INT(fp_write_file(pb, "payload", 7, 1), 0);
	CHECK(synced_whole(folded));
	CHECK(synced_whole(svg));
	CHECK(synced_whole(pb));
	unlink(folded);
	unlink(svg);
	unlink(pb);
	fp_profile_free(p);
}

/* A failed write leaves no temporary behind (the directory is gone). */
static void test_no_leftovers(void)
{
	char path[128];
	struct fp_profile *p = one_sample();

	snprintf(path, sizeof(path), "%s/missing/out.folded", dir);
	CHECK_EQ_INT(fp_write_folded(p, path, 0), -ENOENT);
	CHECK_EQ_INT(fp_write_file(path, "x", 1, 1), -ENOENT);
	fp_profile_free(p);
}

int main(void)
{

	if (check_tmpdir(dir, sizeof(dir), "files_test"))
		return 1;
	RUN(test_planted_link);
	RUN(test_no_leftovers);
	RUN(test_synced);
	if (check_rmtree(dir))
		fprintf(stderr, "files_test: cannot remove %s\n", dir);
	return CHECK_DONE();
}
