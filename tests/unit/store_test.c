/* store_test.c: the symbol service's store: hex validation (no path
 * traversal), the /usr/lib/debug layout, classification of real files
 * built here (debug file, stripped and unstripped executables, no section
 * headers), atomic commits that never replace, concurrent commits of one
 * build-ID, leftover temporary files; and the upload token comparison. */
#include "check.h"
#include "elfnote.h"
#include "elfsyms.h"
#include "http.h"
#include "store.h"

#include <dirent.h>
#include <elf.h>
#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/time.h>
#include <unistd.h>

static char tmpdir[64];
static char prog[128], prog_debug[128], prog_stripped[128], prog_noshdr[128];
static char symtab_only[128];
static int have_progs;

static int sh(const char *fmt, ...) __attribute__((format(printf, 1, 2)));

static int sh(const char *fmt, ...)
{
	char cmd[2048];
	va_list ap;

	va_start(ap, fmt);
	vsnprintf(cmd, sizeof(cmd), fmt, ap);
	va_end(ap);
	return system(cmd);
}

static int write_file(const char *path, const char *data, size_t len)
{
	FILE *f = fopen(path, "wb");

	if (!f)
		return -1;
	fwrite(data, 1, len, f);
	return fclose(f);
}

static char *read_all(const char *path, size_t *len)
{
	FILE *f = fopen(path, "rb");
	char *buf;
	long n;

	if (!f)
		return NULL;
	fseek(f, 0, SEEK_END);
	n = ftell(f);
	rewind(f);
	buf = malloc((size_t)n + 1);
	if (buf && fread(buf, 1, (size_t)n, f) != (size_t)n) {
		free(buf);
		buf = NULL;
	}
	fclose(f);
	*len = (size_t)n;
	return buf;
}

static size_t count_entries(const char *dir)
{
	DIR *d = opendir(dir);
	struct dirent *de;
	size_t n = 0;

	if (!d)
		return (size_t)-1;
	while ((de = readdir(d)))
		n += de->d_name[0] != '.';
	closedir(d);
	return n;
}

/* tmp_with: a temporary file of the store holding data. */
static int tmp_with(struct fp_store *s, const char *data, char *path, size_t len)
{
	int fd = fp_store_tmpfile(s, path, len);

	if (fd < 0)
		return fd;
	if (write(fd, data, strlen(data)) != (ssize_t)strlen(data)) {
		close(fd);
		return -EIO;
	}
	close(fd);
	return 0;
}

static void build_programs(void)
{
	char src[128];

	snprintf(src, sizeof(src), "%s/prog.c", tmpdir);
	snprintf(prog, sizeof(prog), "%s/prog", tmpdir);
	snprintf(prog_debug, sizeof(prog_debug), "%s/prog.debug", tmpdir);
	snprintf(prog_stripped, sizeof(prog_stripped), "%s/prog.stripped", tmpdir);
	snprintf(prog_noshdr, sizeof(prog_noshdr), "%s/prog.noshdr", tmpdir);
	snprintf(symtab_only, sizeof(symtab_only), "%s/nog.debug", tmpdir);
	if (write_file(src, "int f(int x) { return x * 3; }\nint main(void) { return f(1); }\n",
		       62))
		return;
	have_progs = sh("gcc -g -O1 %s -o %s", src, prog) == 0 &&
		     sh("objcopy --only-keep-debug %s %s", prog, prog_debug) == 0 &&
		     sh("strip -o %s %s", prog_stripped, prog) == 0 &&
		     /* no -g: a symbol table and no debug info */
		     sh("gcc -O1 %s -o %s.nog && objcopy --only-keep-debug %s.nog %s", src, prog,
			prog, symtab_only) == 0 &&
		     sh("cp %s %s", prog_stripped, prog_noshdr) == 0;
	if (have_progs) {
		/* No section headers at all (as sstrip leaves files): only the
		 * segments can tell. */
		int fd = open(prog_noshdr, O_RDWR);
		Elf64_Ehdr eh;
		have_progs = fd >= 0 && pread(fd, &eh, sizeof(eh), 0) == sizeof(eh);
		if (have_progs) {
			eh.e_shoff = 0;
			eh.e_shnum = 0;
			eh.e_shstrndx = 0;
			have_progs = pwrite(fd, &eh, sizeof(eh), 0) == sizeof(eh);
		}
		if (fd >= 0)
			close(fd);
	}
	if (!have_progs)
		fprintf(stderr, "  cannot build the test programs (gcc, objcopy, strip)\n");
}

static void test_hex_valid(void)
{
	CHECK(fp_store_hex_valid("ab"));
	CHECK(fp_store_hex_valid("0123456789abcdef0123456789abcdef01234567"));
	CHECK(fp_store_hex_valid(
		"0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcdef"));
	CHECK(!fp_store_hex_valid(NULL));
	CHECK(!fp_store_hex_valid(""));
	CHECK(!fp_store_hex_valid("a"));
	CHECK(!fp_store_hex_valid("abc"));  /* half a byte */
	CHECK(!fp_store_hex_valid("ABCD")); /* lowercase only: one name per build-ID */
	CHECK(!fp_store_hex_valid(
		"0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcdef00"));
	/* Anything that could walk out of the store. */
	CHECK(!fp_store_hex_valid(".."));
	CHECK(!fp_store_hex_valid("../../etc/passwd"));
	CHECK(!fp_store_hex_valid("..%2f..%2fetc"));
	CHECK(!fp_store_hex_valid("ab/cd"));
	CHECK(!fp_store_hex_valid("abcd/"));
	CHECK(!fp_store_hex_valid("/abcd"));
	CHECK(!fp_store_hex_valid("ab\\cd"));
	CHECK(!fp_store_hex_valid("abcd\n"));
	CHECK(!fp_store_hex_valid(" abcd"));
	CHECK(!fp_store_hex_valid("abcg"));
	CHECK(!fp_store_hex_valid("ab.d"));
	CHECK_EQ_INT(fp_store_kind_parse("debuginfo"), FP_STORE_DEBUGINFO);
	CHECK_EQ_INT(fp_store_kind_parse("executable"), FP_STORE_EXECUTABLE);
	CHECK_EQ_INT(fp_store_kind_parse("source"), -EINVAL);
}

static void test_layout(void)
{
	char dir[128], path[512];
	struct fp_store *s = NULL;
	struct stat st;

	snprintf(dir, sizeof(dir), "%s/layout/store", tmpdir);
	CHECK_EQ_INT(fp_store_open(&s, dir), 0);
	if (!s)
		return;
	snprintf(path, sizeof(path), "%s/.build-id", dir);
	CHECK(stat(path, &st) == 0 && S_ISDIR(st.st_mode));
	snprintf(path, sizeof(path), "%s/.tmp", dir);
	CHECK(stat(path, &st) == 0 && S_ISDIR(st.st_mode));
	CHECK_EQ_INT(fp_store_path(s, "abcdef0123", FP_STORE_DEBUGINFO, path, sizeof(path)), 0);
	CHECK(strcmp(path, "") &&
	      !strcmp(strstr(path, "/store/"), "/store/.build-id/ab/cdef0123.debug"));
	CHECK_EQ_INT(fp_store_path(s, "abcdef0123", FP_STORE_EXECUTABLE, path, sizeof(path)), 0);
	CHECK(!strcmp(strstr(path, "/store/"), "/store/.build-id/ab/cdef0123"));
	CHECK_EQ_INT(fp_store_path(s, "../../x", FP_STORE_DEBUGINFO, path, sizeof(path)), -EINVAL);
	CHECK_EQ_INT(fp_store_path(s, "ab", FP_STORE_DEBUGINFO, path, sizeof(path)), -EINVAL);
	CHECK_EQ_INT(fp_store_path(s, "abcd", FP_STORE_ANY, path, sizeof(path)), -EINVAL);
	CHECK_EQ_INT(fp_store_path(s, "abcd", FP_STORE_DEBUGINFO, path, 10), -ENAMETOOLONG);
	CHECK_EQ_INT(fp_store_has(s, "abcdef0123", FP_STORE_ANY), 0);
	CHECK_EQ_INT(fp_store_open_file(s, "abcdef0123", FP_STORE_DEBUGINFO, NULL), -ENOENT);
	CHECK_EQ_INT(fp_store_open_file(s, "..", FP_STORE_DEBUGINFO, NULL), -EINVAL);
	CHECK_EQ_INT(fp_store_open_file(s, "../..", FP_STORE_EXECUTABLE, NULL), -EINVAL);
	CHECK(fp_store_has(s, "../../etc", FP_STORE_ANY) == 0);
	fp_store_close(s);
	CHECK_EQ_INT(fp_store_open(&s, ""), -EINVAL);
}

/* classify_path: fp_store_classify of the file at path; CHECKs that the
 * isolated child (what the server runs on uploads) says the same. */
static int classify_path(const char *path, int *kinds)
{
	int fd = open(path, O_RDONLY), err, err2, kinds2 = -1;

	if (fd < 0)
		return -errno;
	err = fp_store_classify(fd, kinds);
	err2 = fp_store_classify_isolated(fd, &kinds2);
	close(fd);
	CHECK_EQ_INT(err2, err);
	CHECK(err || kinds2 == *kinds);
	return err;
}

static void test_classify(void)
{
	char notelf[128];
	int kinds = -1;

	if (!have_progs) {
		CHECK(have_progs);
		return;
	}
	CHECK_EQ_INT(classify_path(prog, &kinds), 0);
	CHECK_EQ_INT(kinds, FP_STORE_DEBUGINFO | FP_STORE_EXECUTABLE); /* -g, not stripped */
	CHECK_EQ_INT(classify_path(prog_debug, &kinds), 0);
	CHECK_EQ_INT(kinds, FP_STORE_DEBUGINFO);
	CHECK_EQ_INT(classify_path(prog_stripped, &kinds), 0);
	CHECK_EQ_INT(kinds, FP_STORE_EXECUTABLE);
	CHECK_EQ_INT(classify_path(symtab_only, &kinds), 0);
	CHECK_EQ_INT(kinds, FP_STORE_DEBUGINFO); /* symbols, no code, no .debug_info */
	CHECK_EQ_INT(classify_path(prog_noshdr, &kinds), 0);
	CHECK_EQ_INT(kinds, FP_STORE_EXECUTABLE);
	snprintf(notelf, sizeof(notelf), "%s/notelf", tmpdir);
	write_file(notelf, "#!/bin/sh\necho hello\n", 21);
	CHECK_EQ_INT(classify_path(notelf, &kinds), -EINVAL);
	write_file(notelf, "\177ELF\2\1\1", 7); /* truncated header */
	CHECK_EQ_INT(classify_path(notelf, &kinds), -EINVAL);
}

static void test_commit(void)
{
	char dir[128], tmp[512], path[512], tmpd[512], *data;
	struct fp_store *s = NULL;
	struct stat a, b;
	int created = -1;
	size_t len;

	snprintf(dir, sizeof(dir), "%s/commit", tmpdir);
	snprintf(tmpd, sizeof(tmpd), "%s/.tmp", dir);
	CHECK_EQ_INT(fp_store_open(&s, dir), 0);
	if (!s)
		return;
	/* The first file under a name is written whole, 0644. */
	CHECK_EQ_INT(tmp_with(s, "first", tmp, sizeof(tmp)), 0);
	CHECK(!strncmp(tmp, tmpd, strlen(tmpd)));
	CHECK_EQ_INT(fp_store_commit(s, tmp, "1234abcd", FP_STORE_DEBUGINFO, &created), 0);
	CHECK_EQ_INT(created, FP_STORE_DEBUGINFO);
	CHECK(access(tmp, F_OK) != 0);
	fp_store_path(s, "1234abcd", FP_STORE_DEBUGINFO, path, sizeof(path));
	data = read_all(path, &len);
	CHECK(data && len == 5 && !memcmp(data, "first", 5));
	free(data);
	CHECK(stat(path, &a) == 0 && (a.st_mode & 0777) == 0644);
	CHECK_EQ_INT(fp_store_has(s, "1234abcd", FP_STORE_ANY), FP_STORE_DEBUGINFO);

	/* A second file for that name is not written: the first stays. */
	CHECK_EQ_INT(tmp_with(s, "second!", tmp, sizeof(tmp)), 0);
	CHECK_EQ_INT(fp_store_commit(s, tmp, "1234abcd", FP_STORE_DEBUGINFO, &created), 0);
	CHECK_EQ_INT(created, 0);
	CHECK(access(tmp, F_OK) != 0);
	data = read_all(path, &len);
	CHECK(data && len == 5 && !memcmp(data, "first", 5));
	free(data);
	CHECK(stat(path, &b) == 0 && a.st_ino == b.st_ino);

	/* Both kinds: the new one appears, the old one is kept. */
	CHECK_EQ_INT(tmp_with(s, "both", tmp, sizeof(tmp)), 0);
	CHECK_EQ_INT(fp_store_commit(s, tmp, "1234abcd", FP_STORE_ANY, &created), 0);
	CHECK_EQ_INT(created, FP_STORE_EXECUTABLE);
	CHECK_EQ_INT(fp_store_has(s, "1234abcd", FP_STORE_ANY), FP_STORE_ANY);
	CHECK(fp_store_open_file(s, "1234abcd", FP_STORE_EXECUTABLE, NULL) >= 0);

	/* Both new: one file under two names. */
	CHECK_EQ_INT(tmp_with(s, "twice", tmp, sizeof(tmp)), 0);
	CHECK_EQ_INT(fp_store_commit(s, tmp, "99887766", FP_STORE_ANY, &created), 0);
	CHECK_EQ_INT(created, FP_STORE_ANY);
	fp_store_path(s, "99887766", FP_STORE_DEBUGINFO, path, sizeof(path));
	CHECK(stat(path, &a) == 0);
	fp_store_path(s, "99887766", FP_STORE_EXECUTABLE, path, sizeof(path));
	CHECK(stat(path, &b) == 0 && a.st_ino == b.st_ino);
	{
		uint64_t size = 0;
		int fd = fp_store_open_file(s, "99887766", FP_STORE_DEBUGINFO, &size);
		CHECK(fd >= 0 && size == 5);
		if (fd >= 0)
			close(fd);
	}

	/* Bad arguments remove the temporary file all the same. */
	CHECK_EQ_INT(tmp_with(s, "x", tmp, sizeof(tmp)), 0);
	CHECK_EQ_INT(fp_store_commit(s, tmp, "../../etc", FP_STORE_DEBUGINFO, &created), -EINVAL);
	CHECK(access(tmp, F_OK) != 0);
	CHECK_EQ_INT(tmp_with(s, "x", tmp, sizeof(tmp)), 0);
	CHECK_EQ_INT(fp_store_commit(s, tmp, "abcd", 0, &created), -EINVAL);
	CHECK_EQ_INT(tmp_with(s, "x", tmp, sizeof(tmp)), 0);
	fp_store_discard(tmp);
	CHECK_EQ_INT(count_entries(tmpd), 0);
	fp_store_close(s);
}

struct racer {
	struct fp_store *r_store;
	int r_index;
	int r_err;
	int r_created;
};

static void *race(void *arg)
{
	struct racer *r = arg;
	char tmp[512], body[64];

	/* Same length, different bytes: a torn file would show. */
	snprintf(body, sizeof(body), "racer %02d racer %02d racer %02d", r->r_index, r->r_index,
		 r->r_index);
	r->r_err = tmp_with(r->r_store, body, tmp, sizeof(tmp));
	if (!r->r_err)
		r->r_err = fp_store_commit(r->r_store, tmp, "feedfacecafe", FP_STORE_ANY,
					   &r->r_created);
	return NULL;
}

static void test_concurrent_commits(void)
{
	enum { N = 16 };
	struct racer r[N];
	pthread_t t[N];
	char dir[128], path[512], tmpd[512], *dbg, *exe;
	struct fp_store *s = NULL;
	int i, created_dbg = 0, created_exe = 0;
	size_t l1 = 0, l2 = 0;

	snprintf(dir, sizeof(dir), "%s/race", tmpdir);
	snprintf(tmpd, sizeof(tmpd), "%s/.tmp", dir);
	CHECK_EQ_INT(fp_store_open(&s, dir), 0);
	if (!s)
		return;
	for (i = 0; i < N; i++) {
		r[i] = (struct racer){ .r_store = s, .r_index = i };
		pthread_create(&t[i], NULL, race, &r[i]);
	}
	for (i = 0; i < N; i++) {
		pthread_join(t[i], NULL);
		CHECK_EQ_INT(r[i].r_err, 0);
		created_dbg += !!(r[i].r_created & FP_STORE_DEBUGINFO);
		created_exe += !!(r[i].r_created & FP_STORE_EXECUTABLE);
	}
	/* Each name was created once, whole, and nothing is left over. */
	CHECK_EQ_INT(created_dbg, 1);
	CHECK_EQ_INT(created_exe, 1);
	fp_store_path(s, "feedfacecafe", FP_STORE_DEBUGINFO, path, sizeof(path));
	dbg = read_all(path, &l1);
	fp_store_path(s, "feedfacecafe", FP_STORE_EXECUTABLE, path, sizeof(path));
	exe = read_all(path, &l2);
	CHECK(dbg && l1 == 26 && !strncmp(dbg, "racer ", 6) && !memcmp(dbg, dbg + 9, 8));
	CHECK(exe && l2 == 26 && !strncmp(exe, "racer ", 6) && !memcmp(exe, exe + 18, 8));
	free(dbg);
	free(exe);
	CHECK_EQ_INT(count_entries(tmpd), 0);
	fp_store_close(s);
}

static void test_stale_tmp_removed(void)
{
	char dir[128], old[512], fresh[512];
	struct timeval tv[2] = { { .tv_sec = 1000000000 }, { .tv_sec = 1000000000 } };
	struct fp_store *s = NULL;

	snprintf(dir, sizeof(dir), "%s/stale", tmpdir);
	CHECK_EQ_INT(fp_store_open(&s, dir), 0);
	fp_store_close(s);
	snprintf(old, sizeof(old), "%s/.tmp/upload-old", dir);
	snprintf(fresh, sizeof(fresh), "%s/.tmp/upload-new", dir);
	write_file(old, "crash", 5);
	write_file(fresh, "busy", 4);
	utimes(old, tv);
	s = NULL;
	CHECK_EQ_INT(fp_store_open(&s, dir), 0);
	CHECK(access(old, F_OK) != 0);
	CHECK(access(fresh, F_OK) == 0); /* maybe another server's upload in progress */
	fp_store_close(s);
}

/* A real upload's path through the store: build-ID and kinds read from
 * the file, committed under its build-ID, found by the debug-dir name. */
static void test_real_file(void)
{
	char dir[128], tmp[512], hex[2 * FP_BUILD_ID_MAX + 1], cmd[512], path[512];
	struct fp_build_id id;
	struct fp_store *s = NULL;
	int fd, out, kinds = 0, created = 0;
	char buf[65536];
	ssize_t n;

	if (!have_progs) {
		CHECK(have_progs);
		return;
	}
	snprintf(dir, sizeof(dir), "%s/real", tmpdir);
	CHECK_EQ_INT(fp_store_open(&s, dir), 0);
	if (!s)
		return;
	fd = open(prog_debug, O_RDONLY);
	out = fp_store_tmpfile(s, tmp, sizeof(tmp));
	CHECK(fd >= 0 && out >= 0);
	while ((n = read(fd, buf, sizeof(buf))) > 0)
		CHECK(write(out, buf, (size_t)n) == n);
	close(fd);
	CHECK_EQ_INT(fp_elfnote_build_id(out, &id), 0);
	CHECK_EQ_INT(fp_store_classify(out, &kinds), 0);
	close(out);
	fp_build_id_hex(&id, hex);
	CHECK_EQ_INT(fp_store_commit(s, tmp, hex, kinds, &created), 0);
	CHECK_EQ_INT(created, FP_STORE_DEBUGINFO);
	/* The name /usr/lib/debug would have. */
	snprintf(cmd, sizeof(cmd), "cmp -s %s %s/.build-id/%.2s/%s.debug", prog_debug, dir, hex,
		 hex + 2);
	CHECK_EQ_INT(system(cmd), 0);
	fp_store_path(s, hex, FP_STORE_DEBUGINFO, path, sizeof(path));
	fd = open(path, O_RDONLY);
	CHECK(fd >= 0);
	if (fd >= 0) {
		struct fp_build_id again;
		CHECK(fp_elfnote_build_id(fd, &again) == 0 && fp_build_id_eq(&id, &again));
		close(fd);
	}
	fp_store_close(s);
}

static void test_token_eq(void)
{
	CHECK(fp_http_token_eq("Bearer s3cret", "s3cret"));
	CHECK(fp_http_token_eq("bearer s3cret", "s3cret"));
	CHECK(!fp_http_token_eq("Bearer s3cre", "s3cret"));
	CHECK(!fp_http_token_eq("Bearer s3crett", "s3cret"));
	CHECK(!fp_http_token_eq("Bearer S3cret", "s3cret"));
	CHECK(!fp_http_token_eq("Bearer ", "s3cret"));
	CHECK(!fp_http_token_eq("Basic s3cret", "s3cret"));
	CHECK(!fp_http_token_eq("s3cret", "s3cret"));
	CHECK(!fp_http_token_eq(NULL, "s3cret"));
}

int main(void)
{

	if (check_tmpdir(tmpdir, sizeof(tmpdir), "fleetprof-store-test"))
		return 1;
	build_programs();
	RUN(test_hex_valid);
	RUN(test_layout);
	RUN(test_classify);
	RUN(test_commit);
	RUN(test_concurrent_commits);
	RUN(test_stale_tmp_removed);
	RUN(test_real_file);
	RUN(test_token_eq);
	if (check_rmtree(tmpdir))
		return 1;
	return CHECK_DONE();
}
