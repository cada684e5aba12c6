/* spool_test.c: the push spool: order, whole files only, the bound (oldest
 * dropped and counted, the record being sent kept; per host, a flooding
 * host drops its own records, after a reopen too), resuming after a
 * reopen, records of the first version read, damaged and cut-short files
 * skipped and deleted, the lock. */
#include "check.h"
#include "spool.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>
#include <zlib.h>

#define OVERHEAD 22 /* header and CRC of every file, before the owner's name */

static char root[64];
static int ndirs;

static void new_dir(char *buf, size_t len)
{
	snprintf(buf, len, "%s/s%d", root, ndirs++);
}

static int put_as(struct fp_spool *sp, const char *owner, const char *s)
{
	struct iovec iov = { (void *)s, strlen(s) };

	return fp_spool_put(sp, owner, &iov, 1);
}

static int put_str(struct fp_spool *sp, const char *s)
{
	return put_as(sp, NULL, s);
}

/* take: peek the oldest record, compare it with want, delete it. */
static int take(struct fp_spool *sp, const char *want)
{
	uint64_t id;
	int64_t written, now = (int64_t)time(NULL);
	void *data;
	size_t len;
	int ok;

	if (fp_spool_peek(sp, &id, &data, &len, &written))
		return 0;
	/* Written by this test (the file's mtime): within the hour, which a
	 * step of the VM's clock does not break (one failed CI run once). */
	ok = len == strlen(want) && !memcmp(data, want, len) && written <= now + 3600 &&
	     written >= now - 3600;
	if (!ok)
		fprintf(stderr, "  got '%.*s' written at %lld, want '%s' (now %lld)\n", (int)len,
			(char *)data, (long long)written, want, (long long)now);
	free(data);
	fp_spool_release(sp, id, 1);
	return ok;
}

/* count_files: entries of dir, and how many are records / temporaries. */
static int count_files(const char *dir, int *records, int *tmps)
{
	DIR *d = opendir(dir);
	struct dirent *de;
	int n = 0;

	*records = *tmps = 0;
	if (!d)
		return -1;
	while ((de = readdir(d))) {
		if (!strcmp(de->d_name, ".") || !strcmp(de->d_name, ".."))
			continue;
		n++;
		if (strstr(de->d_name, ".req"))
			(*records)++;
		if (!strncmp(de->d_name, ".tmp", 4))
			(*tmps)++;
	}
	closedir(d);
	return n;
}

static void write_file(const char *dir, const char *name, const void *data, size_t len)
{
	char path[256];
	FILE *f;

	snprintf(path, sizeof(path), "%s/%s", dir, name);
	f = fopen(path, "w");
	if (f) {
		fwrite(data, 1, len, f);
		fclose(f);
	}
}

static void test_order(void)
{
	struct fp_spool *sp;
	struct fp_spool_stats st;
	char dir[128];
	struct iovec iov[3] = { { "he", 2 }, { "", 0 }, { "llo", 3 } };

	new_dir(dir, sizeof(dir));
	CHECK(fp_spool_open(&sp, dir, 1 << 20) == 0);
	CHECK(put_str(sp, "one") == 0);
	CHECK(put_str(sp, "two") == 0);
	CHECK(fp_spool_put(sp, NULL, iov, 3) == 0);
	CHECK(put_str(sp, "") == 0);
	CHECK_EQ_INT(fp_spool_count(sp), 4);
	CHECK(take(sp, "one"));
	CHECK(take(sp, "two"));
	CHECK(take(sp, "hello"));
	CHECK(take(sp, ""));
	fp_spool_stats(sp, &st);
	CHECK_EQ_INT(st.ss_added, 4);
	CHECK_EQ_INT(st.ss_files, 0);
	CHECK_EQ_INT(st.ss_bytes, 0);
	{
		uint64_t id;
		int64_t written;
		void *data;
		size_t len;
		CHECK_EQ_INT(fp_spool_peek(sp, &id, &data, &len, &written), -ENOENT);
	}
	fp_spool_close(sp);
}

/* A record that is not removed is handed out again, first. */
static void test_keep_on_release(void)
{
	struct fp_spool *sp;
	char dir[128];
	uint64_t id, id2;
	int64_t written;
	void *data;
	size_t len;

	new_dir(dir, sizeof(dir));
	CHECK(fp_spool_open(&sp, dir, 1 << 20) == 0);
	put_str(sp, "a");
	put_str(sp, "b");
	CHECK(fp_spool_peek(sp, &id, &data, &len, &written) == 0);
	free(data);
	/* While "a" is out, the next peek moves on (one consumer would not). */
	CHECK(fp_spool_peek(sp, &id2, &data, &len, &written) == 0 && len == 1 &&
	      !memcmp(data, "b", 1));
	free(data);
	fp_spool_release(sp, id2, 0);
	fp_spool_release(sp, id, 0);
	CHECK(take(sp, "a"));
	CHECK(take(sp, "b"));
	fp_spool_close(sp);
}

static void test_atomic_files(void)
{
	struct fp_spool *sp;
	char dir[128], path[256], buf[64];
	int records, tmps, fd;
	ssize_t n;

	new_dir(dir, sizeof(dir));
	mkdir(dir, 0755);
	/* What a writer that died before its rename leaves behind. */
	write_file(dir, ".tmp-7", "FPSPOOL1partial", 15);
	CHECK(fp_spool_open(&sp, dir, 1 << 20) == 0);
	CHECK_EQ_INT(fp_spool_count(sp), 0);
	CHECK(put_str(sp, "payload") == 0);
	CHECK(put_str(sp, "second") == 0);
	/* Only whole records and the lock file; no temporary left. */
	CHECK_EQ_INT(count_files(dir, &records, &tmps), 3);
	CHECK_EQ_INT(records, 2);
	CHECK_EQ_INT(tmps, 0);
	snprintf(path, sizeof(path), "%s/%020d.req", dir, 1);
	fd = open(path, O_RDONLY);
	CHECK(fd >= 0);
	n = read(fd, buf, sizeof(buf));
	close(fd);
	CHECK_EQ_INT(n, 7 + OVERHEAD);
	CHECK(n >= 8 && !memcmp(buf, "FPSPOOL2", 8));
	CHECK(n >= 25 && !memcmp(buf + 16, "\0\0payload", 9)); /* no owner */
	fp_spool_close(sp);
}

static void test_bound(void)
{
	struct fp_spool *sp;
	struct fp_spool_stats st;
	char dir[128], rec[101];
	int records, tmps;
	uint64_t id;
	int64_t written;
	void *data;
	size_t len;

	new_dir(dir, sizeof(dir));
	/* Room for three 100-byte records. */
	CHECK(fp_spool_open(&sp, dir, 3 * (100 + OVERHEAD)) == 0);
	for (int i = 0; i < 5; i++) {
		memset(rec, 'a' + i, 100);
		rec[100] = '\0';
		CHECK(put_str(sp, rec) == 0);
	}
	fp_spool_stats(sp, &st);
	CHECK_EQ_INT(st.ss_dropped, 2);
	CHECK_EQ_INT(st.ss_files, 3);
	CHECK_EQ_INT(st.ss_bytes, 3 * (100 + OVERHEAD));
	count_files(dir, &records, &tmps);
	CHECK_EQ_INT(records, 3);
	/* The oldest went: "c" is first now. */
	CHECK(fp_spool_peek(sp, &id, &data, &len, &written) == 0);
	CHECK(len == 100 && ((char *)data)[0] == 'c');
	free(data);
	/* The record being sent survives overflow; the next oldest goes. */
	memset(rec, 'f', 100);
	CHECK(put_str(sp, rec) == 0);
	memset(rec, 'g', 100);
	CHECK(put_str(sp, rec) == 0);
	fp_spool_stats(sp, &st);
	CHECK_EQ_INT(st.ss_dropped, 4);
	fp_spool_release(sp, id, 0);
	memset(rec, 'c', 100);
	CHECK(take(sp, rec));
	memset(rec, 'f', 100);
	CHECK(take(sp, rec));
	memset(rec, 'g', 100);
	CHECK(take(sp, rec));
	/* Larger than the bound by itself: refused, nothing dropped for it. */
	{
		char *big = calloc(1, 400);
		memset(big, 'x', 399);
		CHECK_EQ_INT(put_str(sp, big), -EFBIG);
		free(big);
	}
	fp_spool_stats(sp, &st);
	CHECK_EQ_INT(st.ss_refused, 1);
	CHECK_EQ_INT(st.ss_dropped, 4);
	CHECK_EQ_INT(st.ss_files, 0);
	fp_spool_close(sp);
}

/* A host that floods drops its own records: the quiet hosts' stay, those
 * that come later too, and the record being sent is kept. */
static void test_bound_per_host(void)
{
	struct fp_spool *sp;
	struct fp_spool_stats st;
	char dir[128], rec[16];
	uint64_t id;
	int64_t written;
	void *data;
	size_t len;
	int i;

	new_dir(dir, sizeof(dir));
	/* Room for ten 8-byte records of 7-byte owners. */
	CHECK(fp_spool_open(&sp, dir, 10 * (8 + 7 + OVERHEAD)) == 0);
	CHECK(put_as(sp, "quiet-a", "a-000000") == 0);
	CHECK(put_as(sp, "quiet-b", "b-000000") == 0);
	CHECK(put_as(sp, "quiet-a", "a-000001") == 0);
	/* The oldest record, a-000000, is being sent. */
	CHECK(fp_spool_peek(sp, &id, &data, &len, &written) == 0);
	free(data);
	for (i = 0; i < 500; i++) {
		snprintf(rec, sizeof(rec), "f-%06d", i);
		CHECK(put_as(sp, "flooder", rec) == 0);
	}
	CHECK(put_as(sp, "late-cc", "c-000000") == 0);
	fp_spool_stats(sp, &st);
	CHECK_EQ_INT(st.ss_files, 10);
	CHECK_EQ_INT(st.ss_dropped, 500 + 4 - 10);
	fp_spool_release(sp, id, 0);
	CHECK(take(sp, "a-000000"));
	CHECK(take(sp, "b-000000"));
	CHECK(take(sp, "a-000001"));
	/* The flood's newest six, then the late host's. */
	for (i = 494; i < 500; i++) {
		snprintf(rec, sizeof(rec), "f-%06d", i);
		CHECK(take(sp, rec));
	}
	CHECK(take(sp, "c-000000"));
	CHECK_EQ_INT(fp_spool_count(sp), 0);
	/* Hosts of equal shares: the oldest of the largest goes first. */
	for (i = 0; i < 10; i++) {
		snprintf(rec, sizeof(rec), "%c-%06d", i % 2 ? 'y' : 'x', i);
		CHECK(put_as(sp, i % 2 ? "host-yy" : "host-xx", rec) == 0);
	}
	CHECK(put_as(sp, "host-xx", "x-000010") == 0);
	CHECK(take(sp, "y-000001")); /* x-000000 went: x held the most with the new one */
	fp_spool_close(sp);
}

/* The owners are in the files: after a reopen, a host that floods still
 * drops its own oldest records, not those of the hosts it found there. */
static void test_bound_per_host_reopened(void)
{
	struct fp_spool *sp;
	struct fp_spool_stats st;
	char dir[128], rec[16];
	int i;

	new_dir(dir, sizeof(dir));
	/* Room for ten 8-byte records of 7-byte owners. */
	CHECK(fp_spool_open(&sp, dir, 10 * (8 + 7 + OVERHEAD)) == 0);
	CHECK(put_as(sp, "quiet-a", "a-000000") == 0);
	CHECK(put_as(sp, "quiet-b", "b-000000") == 0);
	for (i = 0; i < 8; i++) {
		snprintf(rec, sizeof(rec), "f-%06d", i);
		CHECK(put_as(sp, "flooder", rec) == 0);
	}
	fp_spool_close(sp);

	CHECK(fp_spool_open(&sp, dir, 10 * (8 + 7 + OVERHEAD)) == 0);
	for (i = 8; i < 20; i++) {
		snprintf(rec, sizeof(rec), "f-%06d", i);
		CHECK(put_as(sp, "flooder", rec) == 0);
	}
	fp_spool_stats(sp, &st);
	CHECK_EQ_INT(st.ss_files, 10);
	CHECK_EQ_INT(st.ss_dropped, 12);
	CHECK(take(sp, "a-000000"));
	CHECK(take(sp, "b-000000"));
	for (i = 12; i < 20; i++) {
		snprintf(rec, sizeof(rec), "f-%06d", i);
		CHECK(take(sp, rec));
	}
	fp_spool_close(sp);
}

/* write_v1: a record as the first version wrote it (no owner). */
static void write_v1(const char *dir, uint64_t seq, const char *rec)
{
	uint8_t buf[256];
	size_t len = strlen(rec), i;
	uLong crc = crc32(0, (const Bytef *)rec, (uInt)len);
	char name[64];

	memcpy(buf, "FPSPOOL1", 8);
	for (i = 0; i < 8; i++)
		buf[8 + i] = (uint8_t)((uint64_t)len >> (8 * i));
	memcpy(buf + 16, rec, len);
	for (i = 0; i < 4; i++)
		buf[16 + len + i] = (uint8_t)(crc >> (8 * i));
	snprintf(name, sizeof(name), "%020llu.req", (unsigned long long)seq);
	write_file(dir, name, buf, 16 + len + 4);
}

/* Records of the first version are read, and belong to no owner: a host
 * adding records drops its own before them only while it holds more. */
static void test_v1_records(void)
{
	struct fp_spool *sp;
	struct fp_spool_stats st;
	char dir[128];

	new_dir(dir, sizeof(dir));
	mkdir(dir, 0755);
	write_v1(dir, 1, "old-1");
	write_v1(dir, 2, "old-2");
	/* Room for the two (25 bytes each) and two 8-byte records of
	 * 7-byte owners (37 bytes each). */
	CHECK(fp_spool_open(&sp, dir, 2 * 25 + 2 * 37) == 0);
	CHECK_EQ_INT(fp_spool_count(sp), 2);
	CHECK(put_as(sp, "flooder", "f-000000") == 0);
	CHECK(put_as(sp, "flooder", "f-000001") == 0);
	CHECK(put_as(sp, "flooder", "f-000002") == 0);
	fp_spool_stats(sp, &st);
	CHECK_EQ_INT(st.ss_dropped, 1);
	CHECK(take(sp, "old-1"));
	CHECK(take(sp, "old-2"));
	CHECK(take(sp, "f-000001"));
	CHECK(take(sp, "f-000002"));
	fp_spool_stats(sp, &st);
	CHECK_EQ_INT(st.ss_corrupt, 0);
	fp_spool_close(sp);
}

static void test_resume(void)
{
	struct fp_spool *sp;
	struct fp_spool_stats st;
	char dir[128];

	new_dir(dir, sizeof(dir));
	CHECK(fp_spool_open(&sp, dir, 1 << 20) == 0);
	put_str(sp, "r1");
	put_str(sp, "r2");
	put_str(sp, "r3");
	CHECK(take(sp, "r1"));
	fp_spool_close(sp);

	CHECK(fp_spool_open(&sp, dir, 1 << 20) == 0);
	CHECK_EQ_INT(fp_spool_count(sp), 2);
	fp_spool_stats(sp, &st);
	CHECK_EQ_INT(st.ss_bytes, 2 * (2 + OVERHEAD));
	put_str(sp, "r4"); /* after the old ones */
	CHECK(take(sp, "r2"));
	fp_spool_close(sp);

	/* A smaller bound at the next start drops the oldest. */
	CHECK(fp_spool_open(&sp, dir, 2 + OVERHEAD) == 0);
	fp_spool_stats(sp, &st);
	CHECK_EQ_INT(st.ss_dropped, 1);
	CHECK(take(sp, "r4"));
	CHECK_EQ_INT(fp_spool_count(sp), 0);
	fp_spool_close(sp);
}

static void test_corrupt(void)
{
	struct fp_spool *sp;
	struct fp_spool_stats st;
	char dir[128], path[256], name[64];
	int records, tmps, fd;

	new_dir(dir, sizeof(dir));
	CHECK(fp_spool_open(&sp, dir, 1 << 20) == 0);
	for (int i = 1; i <= 6; i++) {
		char rec[32];
		snprintf(rec, sizeof(rec), "record-%d", i);
		put_str(sp, rec);
	}
	fp_spool_close(sp);

	/* 1: cut short; 2: a flipped byte; 3: empty; 4: another magic;
	 * 5: length field past the end; 6: intact. */
	snprintf(path, sizeof(path), "%s/%020d.req", dir, 1);
	CHECK(truncate(path, 16 + 3) == 0);
	snprintf(path, sizeof(path), "%s/%020d.req", dir, 2);
	fd = open(path, O_WRONLY);
	CHECK(fd >= 0 && pwrite(fd, "X", 1, 18) == 1);
	close(fd);
	snprintf(path, sizeof(path), "%s/%020d.req", dir, 3);
	CHECK(truncate(path, 0) == 0);
	snprintf(path, sizeof(path), "%s/%020d.req", dir, 4);
	fd = open(path, O_WRONLY);
	CHECK(fd >= 0 && pwrite(fd, "GARBAGE!", 8, 0) == 8);
	close(fd);
	snprintf(path, sizeof(path), "%s/%020d.req", dir, 5);
	fd = open(path, O_WRONLY);
	CHECK(fd >= 0 && pwrite(fd, "\xff\xff\xff\xff\xff\xff\xff\x7f", 8, 8) == 8);
	close(fd);
	/* Not ours: left alone. */
	write_file(dir, "notes.txt", "hello", 5);
	snprintf(name, sizeof(name), "%019d.req", 9);
	write_file(dir, name, "short name", 10);

	CHECK(fp_spool_open(&sp, dir, 1 << 20) == 0);
	CHECK_EQ_INT(fp_spool_count(sp), 6);
	CHECK(take(sp, "record-6"));
	fp_spool_stats(sp, &st);
	CHECK_EQ_INT(st.ss_corrupt, 5);
	CHECK_EQ_INT(st.ss_files, 0);
	CHECK_EQ_INT(count_files(dir, &records, &tmps), 3); /* .lock, notes.txt, short name */
	CHECK_EQ_INT(records, 1);
	/* New records continue after the highest number seen. */
	put_str(sp, "record-7");
	snprintf(path, sizeof(path), "%s/%020d.req", dir, 7);
	CHECK(access(path, F_OK) == 0);
	CHECK(take(sp, "record-7"));
	fp_spool_close(sp);
}

static void test_lock(void)
{
	struct fp_spool *a, *b = NULL;
	char dir[128];

	new_dir(dir, sizeof(dir));
	CHECK(fp_spool_open(&a, dir, 1 << 20) == 0);
	CHECK_EQ_INT(fp_spool_open(&b, dir, 1 << 20), -EBUSY);
	fp_spool_close(a);
	CHECK(fp_spool_open(&b, dir, 1 << 20) == 0);
	fp_spool_close(b);
	CHECK_EQ_INT(fp_spool_open(&b, dir, 0), -EINVAL);
}

/* A symbolic link planted at the temporary name the spool used to pick
 * (.tmp-SEQ) is not followed: the record goes into its own file. */
static void test_planted_link(void)
{
	struct fp_spool *sp;
	char dir[128], victim[160], link[160], buf[64];
	int records, tmps, fd;
	ssize_t n;

	new_dir(dir, sizeof(dir));
	CHECK(fp_spool_open(&sp, dir, 1 << 20) == 0);
	snprintf(victim, sizeof(victim), "%s.victim", dir);
	fd = open(victim, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
	CHECK(fd >= 0 && write(fd, "untouched", 9) == 9);
	close(fd);
	snprintf(link, sizeof(link), "%s/.tmp-1", dir);
	CHECK_EQ_INT(symlink(victim, link), 0);
	CHECK_EQ_INT(put_str(sp, "record"), 0);
	fd = open(victim, O_RDONLY | O_CLOEXEC);
	n = fd >= 0 ? read(fd, buf, sizeof(buf)) : -1;
	close(fd);
	CHECK(n == 9 && !memcmp(buf, "untouched", 9));
	CHECK(take(sp, "record"));
	count_files(dir, &records, &tmps);
	CHECK_EQ_INT(records, 0);
	CHECK_EQ_INT(tmps, 1); /* the link, left alone until the next open */
	fp_spool_close(sp);
}

int main(void)
{
	int rc;

	if (check_tmpdir(root, sizeof(root), "fp-spool-test"))
		return 1;
	RUN(test_order);
	RUN(test_keep_on_release);
	RUN(test_atomic_files);
	RUN(test_bound);
	RUN(test_bound_per_host);
	RUN(test_bound_per_host_reopened);
	RUN(test_v1_records);
	RUN(test_resume);
	RUN(test_corrupt);
	RUN(test_lock);
	RUN(test_planted_link);
	rc = CHECK_DONE();
	if (check_rmtree(root))
		rc = 1;
	return rc;
}
