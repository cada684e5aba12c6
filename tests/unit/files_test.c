/* files_test.c: the file sink and the temporary files of files.h.  A
 * symbolic link planted at the temporary name fleetprof used to pick
 * (PATH.tmp.PID) is not followed; the names used instead are random and
 * leave nothing behind.  Every output is synced, whole, before it is
 * renamed into place (fsync is this file's, which records what it syncs),
 * and holds its encoder's bytes. */
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
#include "gzip.h"
#include "otlp.h"
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

/* others: entries of directory in but the names given (NULL-terminated). */
static int others(const char *in, const char *const *known)
{
	struct dirent *de;
	DIR *d = opendir(in);
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

/* read_all: the whole file at path, malloc'd, NUL-terminated (not
 * counted in *len).  0 or -1. */
static int read_all(const char *path, char **buf, size_t *len)
{
	FILE *f = fopen(path, "rb");
	char *b = NULL;
	size_t cap = 0, n = 0, got;

	if (!f)
		return -1;
	do {
		if (cap - n < 4097 && !(b = realloc(b, cap = cap * 2 + 8192)))
			abort();
		got = fread(b + n, 1, cap - n - 1, f);
		n += got;
	} while (got);
	fclose(f);
	b[n] = '\0';
	*buf = b;
	*len = n;
	return 0;
}

/* same_bytes: whether the file at path holds len bytes, those of want. */
static int same_bytes(const char *path, const void *want, size_t len)
{
	char *got = NULL;
	size_t n = 0;
	int same = !read_all(path, &got, &n) && n == len && !memcmp(got, want, len);

	if (!same)
		fprintf(stderr, "  %s: %zu bytes, not the encoder's %zu\n", path, n, len);
	free(got);
	return same;
}

static const char *const record_names[] = { "profile.folded", "profile.pb.gz", "profile.otlp.pb",
					    "flame.svg" };

static const struct fp_hello hello = { .fh_session = 1, .fh_host = "h" };

/* The sink writes through the temporary names only, with a link at the old
 * name (PATH.tmp.PID) of two outputs pointing to a file that must stay as
 * it is; fp_write_file alone likewise. */
static void test_planted_link(void)
{
	char victim[128], folded[160], pb[128], link1[192], link2[160], buf[256], out[128];
	const char *known[] = { "victim", "out", link2 + strlen(dir) + 1, "out.pb", NULL };
	const char *known_out[] = {
		"profile.folded", "profile.pb.gz", "profile.otlp.pb", "flame.svg", "", NULL
	};
	struct fp_files_sink fs = { .fs_dir = out, .fs_layout = FP_FILES_RECORD };
	struct fp_profile *p = one_sample();
	struct stat st;
	FILE *f;

	snprintf(victim, sizeof(victim), "%s/victim", dir);
	CHECK((f = fopen(victim, "w")) && fputs("untouched\n", f) >= 0 && !fclose(f));
	CHECK(p != NULL);
	if (!p)
		return;
	snprintf(out, sizeof(out), "%s/out", dir);
	CHECK_EQ_INT(mkdir(out, 0755), 0);
	snprintf(folded, sizeof(folded), "%s/profile.folded", out);
	snprintf(link1, sizeof(link1), "%s.tmp.%d", folded, (int)getpid());
	snprintf(pb, sizeof(pb), "%s/out.pb", dir);
	snprintf(link2, sizeof(link2), "%s.tmp.%d", pb, (int)getpid());
	CHECK_EQ_INT(symlink(victim, link1), 0);
	CHECK_EQ_INT(symlink(victim, link2), 0);

	CHECK_EQ_INT(fp_files_sink(&fs, p, &hello, 1), 0);
	slurp(folded, buf, sizeof(buf));
	CHECK(!strcmp(buf, "app;main 7\n"));
	for (size_t i = 0; i < sizeof(record_names) / sizeof(record_names[0]); i++) {
		char path[192];

		snprintf(path, sizeof(path), "%s/%s", out, record_names[i]);
		CHECK(!lstat(path, &st) && S_ISREG(st.st_mode) && (st.st_mode & 0777) == 0644);
	}

	CHECK_EQ_INT(fp_write_file(pb, "payload", 7, 0), 0);
	slurp(pb, buf, sizeof(buf));
	CHECK(!strcmp(buf, "payload"));
	CHECK(!lstat(pb, &st) && S_ISREG(st.st_mode) && (st.st_mode & 0777) == 0644);

	slurp(victim, buf, sizeof(buf));
	CHECK(!strcmp(buf, "untouched\n"));
	CHECK(!lstat(link1, &st) && S_ISLNK(st.st_mode));
	CHECK_EQ_INT(others(dir, known), 0);
	known_out[4] = link1 + strlen(out) + 1;
	CHECK_EQ_INT(others(out, known_out), 0);
	CHECK_EQ_INT(check_rmtree(out), 0);
	CHECK_EQ_INT(unlink(victim), 0);
	CHECK_EQ_INT(unlink(link2), 0);
	CHECK_EQ_INT(unlink(pb), 0);
	fp_profile_free(p);
}

/* Every output of both layouts is synced whole before its rename. */
static void test_synced(void)
{
	char out[128], path[192];
	struct fp_files_sink rec = { .fs_dir = out, .fs_layout = FP_FILES_RECORD };
	struct fp_files_sink iv = { .fs_dir = out, .fs_layout = FP_FILES_INTERVALS };
	struct fp_profile *p = one_sample();

	CHECK(p != NULL);
	if (!p)
		return;
	snprintf(out, sizeof(out), "%s/synced", dir);
	nsynced = 0;
	CHECK_EQ_INT(fp_files_sink(&rec, p, &hello, 1), 0);
	CHECK_EQ_INT(nsynced, 4);
	for (size_t i = 0; i < sizeof(record_names) / sizeof(record_names[0]); i++) {
		snprintf(path, sizeof(path), "%s/%s", out, record_names[i]);
		CHECK(synced_whole(path));
	}
	nsynced = 0;
	CHECK_EQ_INT(fp_files_sink(&iv, p, &hello, 3), 0);
	CHECK_EQ_INT(nsynced, 2);
	snprintf(path, sizeof(path), "%s/h/20231114T221320Z-3.folded", out);
	CHECK(synced_whole(path));
	snprintf(path, sizeof(path), "%s/h/20231114T221320Z-3.pb.gz", out);
	CHECK(synced_whole(path));
	CHECK_EQ_INT(check_rmtree(out), 0);
	fp_profile_free(p);
}

/* Each file of the layouts holds its encoder's bytes (pprof gzip'd), a
 * second record replaces the first, and an interval never replaces one
 * written before. */
static void test_layouts(void)
{
	char out[128], path[192], *text = NULL, *file = NULL;
	uint8_t *bin = NULL, *plain = NULL;
	size_t len = 0, plen = 0, flen = 0;
	struct fp_files_sink rec = { .fs_dir = out,
				     .fs_layout = FP_FILES_RECORD,
				     .fs_title = "T<1>" };
	struct fp_files_sink iv = { .fs_dir = out,
				    .fs_layout = FP_FILES_INTERVALS,
				    .fs_by_thread = 1 };
	const char *known[] = {
		"profile.folded", "profile.pb.gz", "profile.otlp.pb", "flame.svg", "h", NULL
	};
	struct fp_profile *p = one_sample();

	CHECK(p != NULL);
	if (!p)
		return;
	snprintf(out, sizeof(out), "%s/layouts", dir);
	CHECK_EQ_INT(fp_files_sink(&rec, p, &hello, 1), 0);
	CHECK_EQ_INT(fp_files_sink(&rec, p, &hello, 2), 0);

	snprintf(path, sizeof(path), "%s/profile.folded", out);
	CHECK_EQ_INT(fp_folded_encode(p, 0, &text, &len), 0);
	CHECK(same_bytes(path, text, len));
	free(text);
	snprintf(path, sizeof(path), "%s/flame.svg", out);
	CHECK_EQ_INT(fp_svg_encode(p, "T<1>", 0, &text, &len), 0);
	CHECK(same_bytes(path, text, len));
	free(text);
	snprintf(path, sizeof(path), "%s/profile.otlp.pb", out);
	CHECK_EQ_INT(fp_otlp_encode(p, NULL, &bin, &len), 0);
	CHECK(same_bytes(path, bin, len));
	free(bin);
	snprintf(path, sizeof(path), "%s/profile.pb.gz", out);
	CHECK_EQ_INT(fp_pprof_encode(p, &bin, &len), 0);
	CHECK_EQ_INT(read_all(path, &file, &flen), 0);
	CHECK(file && !fp_gunzip_buf(file, flen, 1 << 20, &plain, &plen) && plen == len &&
	      !memcmp(plain, bin, len));
	free(file);
	free(plain);

	/* Intervals: HOST/STAMP-SEQ, the thread under the process (by_thread). */
	CHECK_EQ_INT(fp_files_sink(&iv, p, &hello, 9), 0);
	snprintf(path, sizeof(path), "%s/h/20231114T221320Z-9.folded", out);
	CHECK(same_bytes(path, "app;app;main 7\n", 15));
	snprintf(path, sizeof(path), "%s/h/20231114T221320Z-9.pb.gz", out);
	CHECK_EQ_INT(read_all(path, &file, &flen), 0);
	CHECK(file && !fp_gunzip_buf(file, flen, 1 << 20, &plain, &plen) && plen == len &&
	      !memcmp(plain, bin, len));
	free(file);
	free(plain);
	free(bin);
	/* The same host, interval and sequence again: refused, not replaced. */
	snprintf(path, sizeof(path), "%s/h/20231114T221320Z-9.folded", out);
	CHECK_EQ_INT(truncate(path, 3), 0);
	CHECK_EQ_INT(fp_files_sink(&iv, p, &hello, 9), -EEXIST);
	CHECK(same_bytes(path, "app", 3));

	CHECK_EQ_INT(others(out, known), 0); /* no temporary left beside the outputs */
	CHECK_EQ_INT(check_rmtree(out), 0);
	fp_profile_free(p);
}

/* A failed write leaves no temporary behind (the directory is gone, or
 * cannot be made). */
static void test_no_leftovers(void)
{
	char path[128], sub[96];
	struct fp_files_sink fs = { .fs_dir = path, .fs_layout = FP_FILES_RECORD };
	struct fp_profile *p = one_sample();
	const char *known[] = { "file", NULL };
	FILE *f;

	snprintf(sub, sizeof(sub), "%s/fail", dir);
	CHECK_EQ_INT(mkdir(sub, 0755), 0);
	snprintf(path, sizeof(path), "%s/missing/out.folded", sub);
	CHECK_EQ_INT(fp_write_file(path, "x", 1, 1), -ENOENT);
	CHECK_EQ_INT(fp_write_file(path, "x", 1, 0), -ENOENT);
	snprintf(path, sizeof(path), "%s/file", sub);
	CHECK((f = fopen(path, "w")) && !fclose(f));
	snprintf(path, sizeof(path), "%s/file/out", sub);
	CHECK_EQ_INT(fp_files_sink(&fs, p, &hello, 1), -ENOTDIR);
	CHECK_EQ_INT(others(sub, known), 0);
	CHECK_EQ_INT(check_rmtree(sub), 0);
	fp_profile_free(p);
}

int main(void)
{

	if (check_tmpdir(dir, sizeof(dir), "files_test"))
		return 1;
	RUN(test_planted_link);
	RUN(test_no_leftovers);
	RUN(test_synced);
	RUN(test_layouts);
	if (check_rmtree(dir))
		fprintf(stderr, "files_test: cannot remove %s\n", dir);
	return CHECK_DONE();
}
