/* fileid_test.c: synthetic file ids (common/fileid.h): SipHash against the
 * reference vectors, and the ids fp_elfnote_build_id (the one reader of
 * the agent and the symbolizer) gives programs linked here without a GNU
 * build-ID, with a Go build ID note, and with a GNU build-ID (which
 * wins). */
#include <errno.h>
#include <fcntl.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "check.h"
#include "elfnote.h"
#include "fileid.h"

static char tmpdir[64];

static void test_siphash_vectors(void)
{
	/* The reference's vectors: key 00..0f, messages 00 01 .. (len-1). */
	static const struct {
		size_t len, outlen;
		const char *hex;
	} v[] = {
		{ 0, 8, "310e0edd47db6f72" },
		{ 15, 8, "e545be4961ca29a1" },
		{ 0, 16, "a3817f04ba25a8e66df67214c7550293" },
		{ 15, 16, "5493e99933b0a8117e08ec0f97cfc3d9" },
	};
	uint8_t key[16], msg[64], out[16];

	for (int i = 0; i < 16; i++)
		key[i] = (uint8_t)i;
	for (int i = 0; i < 64; i++)
		msg[i] = (uint8_t)i;
	for (size_t i = 0; i < sizeof(v) / sizeof(v[0]); i++) {
		const void *bufs[1] = { msg };
		char hex[33];

		fp_siphash(key, bufs, &v[i].len, 1, out, v[i].outlen);
		for (size_t k = 0; k < v[i].outlen; k++)
			snprintf(hex + 2 * k, 3, "%02x", out[k]);
		CHECK(!strcmp(hex, v[i].hex));
	}
	/* Split anywhere, same hash. */
	for (size_t cut = 0; cut <= 40; cut++) {
		const void *one[1] = { msg }, *two[3] = { msg, msg + cut / 2, msg + cut };
		size_t l1[1] = { 40 }, l3[3] = { cut / 2, cut - cut / 2, 40 - cut };
		uint8_t a[16], b[16];

		fp_siphash(key, one, l1, 1, a, 16);
		fp_siphash(key, two, l3, 3, b, 16);
		CHECK(!memcmp(a, b, 16));
	}
}

/* link: a C program, written to tmpdir/name, from src with extra flags.
 * 0 or -1. */
static int link_prog(const char *name, const char *src, const char *flags, char *path, size_t size)
{
	char cpath[160], cmd[768];
	FILE *f;

	snprintf(cpath, sizeof(cpath), "%s/%s.c", tmpdir, name);
	snprintf(path, size, "%s/%s", tmpdir, name);
	f = fopen(cpath, "w");
	if (!f)
		return -1;
	fputs(src, f);
	fclose(f);
	snprintf(cmd, sizeof(cmd), "cc -O1 %s -o %s %s", flags, path, cpath);
	return system(cmd) == 0 ? 0 : -1;
}

/* both_ids: the id of path, as the agent and the symbolizer read it.  0
 * or the error. */
static int both_ids(const char *path, struct fp_build_id *id)
{
	int fd = open(path, O_RDONLY | O_CLOEXEC), err;

	if (fd < 0)
		return -errno;
	err = fp_elfnote_build_id(fd, id);
	close(fd);
	return err;
}

static int patch_byte(const char *path, off_t at)
{
	int fd = open(path, O_RDWR | O_CLOEXEC);
	unsigned char c;
	int ok;

	if (fd < 0)
		return -1;
	ok = pread(fd, &c, 1, at) == 1;
	c ^= 0x5a;
	ok = ok && pwrite(fd, &c, 1, at) == 1;
	close(fd);
	return ok ? 0 : -1;
}

static int copy_file(const char *from, const char *to, off_t pad_to)
{
	char cmd[512];

	snprintf(cmd, sizeof(cmd), "cp %s %s", from, to);
	if (system(cmd) != 0)
		return -1;
	return pad_to ? truncate(to, pad_to) : 0;
}

static const char prog_src[] = "int main(int c, char **v) { return c > 5 ? v[0][0] : 0; }\n";

/* variant: a fresh file name for each changed copy: a file rewritten in
 * place within one clock tick keeps its cached id (fileid.c). */
static const char *variant(char *buf, size_t size)
{
	static int n;

	snprintf(buf, size, "%s/variant.%d", tmpdir, n++);
	return buf;
}

static void test_no_build_id(void)
{
	char prog[160], big[176], copy[176];
	struct fp_build_id a, b;
	struct stat st;

	if (link_prog("nobid", prog_src, "-Wl,--build-id=none", prog, sizeof(prog))) {
		CHECK(!"cc -Wl,--build-id=none");
		return;
	}
	/* Same file, same id, both sides; marked as content-derived. */
	CHECK_EQ_INT(both_ids(prog, &a), 0);
	CHECK_EQ_INT(fp_fileid_kind(&a), FP_FILEID_CONTENT);
	CHECK_EQ_INT(a.fb_len, FP_FILEID_LEN);
	CHECK_EQ_INT(both_ids(prog, &b), 0);
	CHECK(fp_build_id_eq(&a, &b));
	/* A copy elsewhere is the same file. */
	CHECK_EQ_INT(copy_file(prog, variant(copy, sizeof(copy)), 0), 0);
	CHECK_EQ_INT(both_ids(copy, &b), 0);
	CHECK(fp_build_id_eq(&a, &b));
	/* Small files are hashed whole: any byte counts. */
	CHECK_EQ_INT(stat(prog, &st), 0);
	CHECK_EQ_INT(copy_file(prog, variant(copy, sizeof(copy)), 0), 0);
	CHECK_EQ_INT(patch_byte(copy, st.st_size / 2), 0);
	CHECK_EQ_INT(both_ids(copy, &b), 0);
	CHECK(!fp_build_id_eq(&a, &b));

	/* Past FP_FILEID_WHOLE_MAX: the size and 64 sampled pages. */
	snprintf(big, sizeof(big), "%s.big", prog);
	CHECK_EQ_INT(copy_file(prog, big, 8 << 20), 0);
	CHECK_EQ_INT(both_ids(big, &a), 0);
	CHECK_EQ_INT(fp_fileid_kind(&a), FP_FILEID_CONTENT);
	{
		static const struct {
			off_t at;
			int changes;
		} cases[] = {
			{ 100, 1 },              /* first page */
			{ (8 << 20) - 1, 1 },    /* last page */
			{ (8 << 20) - 4096, 1 }, /* first byte of the last page */
			/* page 32 starts at floor((8 MiB - 4 KiB) * 32 / 63) = 4258799 */
			{ 4258799 + 10, 1 },
			{ 4258799 - 100, 0 }, /* between pages 31 and 32: not read */
		};

		for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
			CHECK_EQ_INT(copy_file(big, variant(copy, sizeof(copy)), 0), 0);
			CHECK_EQ_INT(patch_byte(copy, cases[i].at), 0);
			CHECK_EQ_INT(both_ids(copy, &b), 0);
			if (fp_build_id_eq(&a, &b) == cases[i].changes)
				fprintf(stderr, "  patch at %lld: %s\n", (long long)cases[i].at,
					cases[i].changes ? "same id" : "new id");
			CHECK(fp_build_id_eq(&a, &b) != cases[i].changes);
		}
	}
	/* One byte longer: another size, another id. */
	CHECK_EQ_INT(copy_file(big, variant(copy, sizeof(copy)), (8 << 20) + 1), 0);
	CHECK_EQ_INT(both_ids(copy, &b), 0);
	CHECK(!fp_build_id_eq(&a, &b));
	/* Hashed again (from the cache or not): the same id. */
	CHECK_EQ_INT(both_ids(big, &b), 0);
	CHECK(fp_build_id_eq(&a, &b));
}

static void test_go_note(void)
{
	/* A Go build ID note, as the Go linker writes it: owner "Go", type 4,
	 * in a loaded SHT_NOTE section, which ld puts in a PT_NOTE. */
	static const char src[] =
		"__asm__(\".section .note.go.buildid,\\\"a\\\",@note\\n"
		".balign 4\\n.long 4\\n.long 11\\n.long 4\\n.asciz \\\"Go\\\"\\n.byte 0\\n"
		".ascii \\\"abcd/efghij\\\"\\n.balign 4\\n.text\\n\");\n"
		"int main(void) { return 0; }\n";
	static const char go_id[] = "abcd/efghij";
	struct fp_build_id got, want, with_gnu;
	char prog[160], prog2[160];

	if (link_prog("gonote", src, "-Wl,--build-id=none", prog, sizeof(prog))) {
		CHECK(!"cc with a Go note");
		return;
	}
	CHECK_EQ_INT(fp_fileid(-1, go_id, strlen(go_id), &want), 0);
	CHECK_EQ_INT(fp_fileid_kind(&want), FP_FILEID_GO);
	CHECK_EQ_INT(both_ids(prog, &got), 0);
	CHECK(fp_build_id_eq(&got, &want));
	/* The Go build ID decides, not the rest of the file. */
	CHECK_EQ_INT(copy_file(prog, variant(prog2, sizeof(prog2)), 0), 0);
	CHECK_EQ_INT(patch_byte(prog2, 0x300), 0);
	CHECK_EQ_INT(both_ids(prog2, &got), 0);
	CHECK(fp_build_id_eq(&got, &want));

	/* With a GNU build-ID too, the GNU one is the id. */
	if (link_prog("gonote_gnu", src, "-Wl,--build-id=sha1", prog2, sizeof(prog2))) {
		CHECK(!"cc with both notes");
		return;
	}
	CHECK_EQ_INT(both_ids(prog2, &with_gnu), 0);
	CHECK_EQ_INT(fp_fileid_kind(&with_gnu), 0);
	CHECK_EQ_INT(with_gnu.fb_len, 20);
	unlink(prog), unlink(prog2);
}

static void test_gnu_build_id_wins(void)
{
	struct fp_build_id id;
	char prog[160];

	if (link_prog("gnubid", prog_src, "-Wl,--build-id=md5", prog, sizeof(prog))) {
		CHECK(!"cc -Wl,--build-id=md5");
		return;
	}
	CHECK_EQ_INT(both_ids(prog, &id), 0);
	CHECK_EQ_INT(id.fb_len, 16);
	CHECK_EQ_INT(fp_fileid_kind(&id), 0);
	unlink(prog);
}

static void test_errors(void)
{
	struct fp_build_id id = { 0 };
	char path[128];
	int fd;

	CHECK_EQ_INT(fp_fileid(-1, "x", 0, &id), -EINVAL);
	{
		char longid[FP_FILEID_GO_MAX + 1];

		memset(longid, 'a', sizeof(longid));
		CHECK_EQ_INT(fp_fileid(-1, longid, sizeof(longid), &id), -EINVAL);
		CHECK_EQ_INT(fp_fileid(-1, longid, FP_FILEID_GO_MAX, &id), 0);
	}
	CHECK_EQ_INT(fp_fileid(-1, NULL, 0, &id), -EBADF);
	fd = open(tmpdir, O_RDONLY | O_DIRECTORY);
	CHECK_EQ_INT(fp_fileid(fd, NULL, 0, &id), -EINVAL);
	close(fd);
	snprintf(path, sizeof(path), "%s/empty", tmpdir);
	fd = open(path, O_RDWR | O_CREAT | O_TRUNC, 0600);
	CHECK_EQ_INT(fp_fileid(fd, NULL, 0, &id), -EINVAL);
	/* Not ELF: no id at all, on either side. */
	CHECK_EQ_INT(write(fd, "hello, not an ELF file, long enough for a header.....", 53), 53);
	CHECK_EQ_INT(fp_elfnote_build_id(fd, &id), -EINVAL);
	close(fd);
	unlink(path);
	/* A GNU build-ID is never taken for a synthetic one. */
	id.fb_len = 20;
	memset(id.fb_data, 0xab, 20);
	CHECK_EQ_INT(fp_fileid_kind(&id), 0);
	id.fb_data[0] = 0xfb, id.fb_data[1] = 0x1d, id.fb_data[2] = 9, id.fb_data[3] = 1;
	CHECK_EQ_INT(fp_fileid_kind(&id), 0);
}

int main(void)
{
	if (check_tmpdir(tmpdir, sizeof(tmpdir), "fileid_test"))
		return 1;
	RUN(test_siphash_vectors);
	RUN(test_no_build_id);
	RUN(test_go_note);
	RUN(test_gnu_build_id_wins);
	RUN(test_errors);
	if (check_rmtree(tmpdir))
		fprintf(stderr, "could not remove %s\n", tmpdir);
	return CHECK_DONE();
}
