/* devfetch_test.c: fetching a file from a device, with the agent played
 * here (answers read from the real file).
 *
 * A CPython interpreter's sparse copy must give the unwind table of the
 * whole file, trailer and version (Py_Version's bytes, fetched on their
 * own) included: Debian's python3.11 (no .symtab, Py_Version in .dynsym)
 * and a small interpreter built here (.symtab, .cold).  A device whose
 * answer about Py_Version's section disagrees with what it sent before
 * gets an unknown version, and nothing else changes.
 */
#include "check.h"
#include "cfi.h"
#include "devfetch.h"
#include "elfnote.h"
#include "elfsyms.h"
#include "resolver.h"
#include "unwind_table.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <gelf.h>
#include <stdint.h>
#include <stdio.h>
#include <limits.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

static char dir[256];

/* How the played agent lies. */
enum lie {
	HONEST,
	MOVED,   /* Py_Version's section header, asked again: another offset */
	NOBITS,  /* the same, NOBITS */
	BAD_CFI, /* .eh_frame's bytes: garbage */
	NOT_ELF, /* the ELF header: garbage */
};

/* section_at: the file range of section name of the ELF file at path;
 * 0, or -1 when there is none. */
static int section_at(const char *path, const char *name, uint64_t *off, uint64_t *size)
{
	int fd = open(path, O_RDONLY), found = -1;
	Elf_Scn *scn = NULL;
	size_t shstrndx;
	Elf *e;

	elf_version(EV_CURRENT);
	if (fd < 0 || !(e = elf_begin(fd, ELF_C_READ, NULL))) {
		if (fd >= 0)
			close(fd);
		return -1;
	}
	while (found && !elf_getshdrstrndx(e, &shstrndx) && (scn = elf_nextscn(e, scn))) {
		GElf_Shdr sh;
		const char *n;

		if (gelf_getshdr(scn, &sh) && sh.sh_type != SHT_NOBITS &&
		    (n = elf_strptr(e, shstrndx, sh.sh_name)) && !strcmp(n, name)) {
			*off = sh.sh_offset, *size = sh.sh_size;
			found = 0;
		}
	}
	elf_end(e);
	close(fd);
	return found;
}

/* overlaps: whether any of n ranges overlaps [off, off + size). */
static int overlaps(const struct fp_range *r, size_t n, uint64_t off, uint64_t size)
{
	for (size_t i = 0; i < n; i++)
		if (r[i].fg_offset < off + size && off < r[i].fg_offset + r[i].fg_length)
			return 1;
	return 0;
}

/* lie_about: change the answer d when it is a lone section header (what
 * devfetch asks for Py_Version's section) of the file with header eh. */
static void lie_about(struct fp_file_data *d, const Elf64_Ehdr *eh, enum lie lie)
{
	Elf64_Shdr sh;

	if (lie == HONEST || d->fd_len != sizeof(sh) || d->fd_offset < eh->e_shoff ||
	    d->fd_offset >= eh->e_shoff + (uint64_t)eh->e_shnum * sizeof(sh))
		return;
	memcpy(&sh, d->fd_data, sizeof(sh));
	if (lie == MOVED)
		sh.sh_offset += 16;
	else
		sh.sh_type = SHT_NOBITS;
	memcpy(d->fd_data, &sh, sizeof(sh));
}

/* What the played agent is asked for. */
enum what { SYMBOLS, CFI };

/* drive: a fetch of what of the file at path through f, answered as an
 * agent would (lying as told); every range asked is appended to *all
 * (realloc'd; *nall of them) when all is not NULL.  0 or -1. */
static int drive(struct fp_devfetch *f, const char *path, enum what what, enum lie lie,
		 struct fp_range **all, size_t *nall)
{
	struct fp_range *ranges = NULL, *asked;
	struct fp_build_id id;
	size_t n = 0, nasked, i, rounds = 0;
	uint64_t cfi_off = 0, cfi_size = 0;
	Elf64_Ehdr eh;
	struct stat sb;
	int fd = open(path, O_RDONLY), err = 0;

	section_at(path, ".eh_frame", &cfi_off, &cfi_size);
	if (fd < 0 || fstat(fd, &sb) || pread(fd, &eh, sizeof(eh), 0) != sizeof(eh) ||
	    fp_elfnote_build_id(fd, &id) ||
	    (what == CFI ? fp_devfetch_want_cfi : fp_devfetch_want)(f, 1, 1, &id, &ranges, &n)) {
		err = -1;
		goto out;
	}
	while (n && rounds++ < 16) {
		struct fp_range *p = all ? realloc(*all, (*nall + n) * sizeof(*p)) : NULL;

		if (p) {
			memcpy(p + *nall, ranges, n * sizeof(*p));
			*all = p, *nall += n;
		}
		asked = ranges, nasked = n;
		ranges = NULL, n = 0;
		for (i = 0; i < nasked && !err; i++) {
			struct fp_file_data d = { .fd_session = 1,
						  .fd_build_id = id,
						  .fd_offset = asked[i].fg_offset,
						  .fd_file_size = (uint64_t)sb.st_size };
			ssize_t got;

			d.fd_data = malloc(asked[i].fg_length);
			got = d.fd_data ? pread(fd, d.fd_data, asked[i].fg_length,
						(off_t)asked[i].fg_offset)
					: -1;
			if (got < 0) {
				err = -1;
			} else {
				d.fd_len = (size_t)got;
				lie_about(&d, &eh, lie);
				if (lie == BAD_CFI && overlaps(&asked[i], 1, cfi_off, cfi_size))
					memset(d.fd_data, 0xff, d.fd_len);
				if (lie == NOT_ELF && !d.fd_offset)
					memset(d.fd_data, 0, d.fd_len);
				err = fp_devfetch_data(f, &d, &ranges, &n) ? -1 : 0;
			}
			free(d.fd_data);
		}
		free(asked);
	}
out:
	free(ranges);
	if (fd >= 0)
		close(fd);
	return err || n ? -1 : 0;
}

/* fetch: the file at path, fetched through a fresh devfetch into r, as
 * an agent would answer; the stats when done.  0 or -1. */
static int fetch(struct fp_resolver *r, const char *path, enum lie lie,
		 struct fp_devfetch_stats *st)
{
	struct fp_devfetch *f = NULL;
	int err = fp_devfetch_alloc(&f, r, dir, FP_DEVFETCH_TIMEOUT, 1) ? -1 : 0;

	if (!err)
		err = drive(f, path, SYMBOLS, lie, NULL, NULL);
	if (f)
		fp_devfetch_stats(f, st);
	fp_devfetch_free(f);
	return err;
}

/* check_fetched: fetch path into a fresh cache; the stored table must be
 * the whole file's, with the trailer and want_version, or, lying, the
 * same with version 0. */
static void check_fetched(const char *path, uint32_t want_version, enum lie lie)
{
	char cache[PATH_MAX];
	struct fp_resolver_opts o = { .ro_cache_dir = cache };
	struct fp_devfetch_stats st = { 0 };
	struct fp_resolver *r = NULL;
	const struct fp_unwind_cpython *py, *fpy;
	void *full = NULL, *got = NULL;
	size_t flen = 0, glen = 0;
	struct fp_build_id id;
	int fd;

	snprintf(cache, sizeof(cache), "%s/cache", dir);
	if ((fd = open(path, O_RDONLY)) < 0) {
		CHECK(!"open");
		return;
	}
	CHECK_EQ_INT(fp_elfnote_build_id(fd, &id), 0);
	CHECK_EQ_INT(fp_cfi_compile(fd, &full, &flen), 0);
	close(fd);
	py = fp_unwind_table_cpython(full, flen);
	CHECK(py != NULL);
	CHECK_EQ_INT(py ? py->uc_version : 0, want_version);
	CHECK_EQ_INT(fp_resolver_open(&r, &o), 0);
	if (!r || !py) {
		free(full);
		return;
	}
	CHECK_EQ_INT(fetch(r, path, lie, &st), 0);
	CHECK_EQ_INT(st.dv_done, 1);
	CHECK_EQ_INT(st.dv_failed, 0);
	CHECK_EQ_INT(fp_resolver_unwind(r, &id, &got, &glen), 0);
	fpy = fp_unwind_table_cpython(got, glen);
	CHECK(fpy != NULL);
	printf("  %s (%s): %llu bytes fetched, version %#x\n", path,
	       lie == HONEST  ? "honest"
	       : lie == MOVED ? "moved"
			      : "nobits",
	       (unsigned long long)st.dv_bytes, fpy ? fpy->uc_version : 0);
	if (lie == HONEST) {
		CHECK(glen == flen && !memcmp(got, full, flen));
	} else if (fpy && glen == flen) {
		struct fp_unwind_cpython want = *py;

		want.uc_version = 0;
		CHECK(!memcmp(fpy, &want, sizeof(want)));
		CHECK(!memcmp(got, full, flen - sizeof(want)));
	} else {
		CHECK(!"the fetched table has another length");
	}
	free(got);
	free(full);
	fp_resolver_close(r);
	CHECK_EQ_INT(check_rmtree(cache), 0);
}

static void test_python(void)
{
	static const char src[] =
		"int _PyEval_EvalFrameDefault(volatile int *p, int n) {\n"
		"	int s = 0;\n"
		"	for (int i = 0; i < n; i++) s += p[i] * i;\n"
		"	return s; }\n"
		"static int eval_cold(volatile int *p) __asm__(\"_PyEval_EvalFrameDefault.cold\");\n"
		"__attribute__((used, noinline)) static int eval_cold(volatile int *p) "
		"{ return p[2] - p[1]; }\n"
		"struct { long a[8]; } _PyRuntime = { { 7 } };\n"
		"const unsigned long Py_Version = 0x030c01f0;\n";
	char so[PATH_MAX], cmd[3 * PATH_MAX];
	FILE *f;

	if (check_tmpdir(dir, sizeof(dir), "devfetch_test")) {
		CHECK(!"check_tmpdir");
		return;
	}
	if (access("/usr/bin/python3.11", R_OK)) {
		printf("  /usr/bin/python3.11 not installed: skipped\n");
	} else {
		check_fetched("/usr/bin/python3.11", 0x030b, HONEST);
		check_fetched("/usr/bin/python3.11", 0x030b, MOVED);
		check_fetched("/usr/bin/python3.11", 0x030b, NOBITS);
	}
	snprintf(so, sizeof(so), "%s/py.c", dir);
	if ((f = fopen(so, "w"))) {
		fputs(src, f);
		fclose(f);
	}
	snprintf(cmd, sizeof(cmd),
		 "cc -O2 -fPIC -shared -nostdlib -Wl,--build-id -Wl,-Ttext-segment=0x200000 "
		 "-o %s/py.so %s 2>/dev/null",
		 dir, so);
	snprintf(so, sizeof(so), "%s/py.so", dir);
	if (system(cmd) != 0) {
		printf("  no C compiler: the synthetic interpreter skipped\n");
	} else {
		check_fetched(so, 0x030c, HONEST);
		check_fetched(so, 0x030c, MOVED);
	}
	CHECK_EQ_INT(check_rmtree(dir), 0);
}

static int open_fds(void)
{
	DIR *d = opendir("/proc/self/fd");
	struct dirent *e;
	int n = 0;

	while (d && (e = readdir(d)))
		n += e->d_name[0] != '.';
	if (d)
		closedir(d);
	return n;
}

/* want_as: session's (of host) want of build-ID number i; the ranges it
 * asked for. */
static size_t want_as(struct fp_devfetch *f, uint64_t session, uint64_t host, uint32_t i)
{
	struct fp_build_id id = { .fb_len = 20 };
	struct fp_range *ranges = NULL;
	size_t n = 0;

	memcpy(id.fb_data, &i, sizeof(i));
	CHECK_EQ_INT(fp_devfetch_want(f, session, host, &id, &ranges, &n), 0);
	free(ranges);
	return n;
}

static size_t want(struct fp_devfetch *f, uint64_t session, uint32_t i)
{
	return want_as(f, session, session, i);
}

/* fail: session's device answers that it cannot read build-ID number i. */
static int fail(struct fp_devfetch *f, uint64_t session, uint32_t i)
{
	struct fp_file_data d = { .fd_session = session,
				  .fd_build_id = { .fb_len = 20 },
				  .fd_error = EACCES };
	struct fp_range *ranges = NULL;
	size_t n = 0;
	int err;

	memcpy(d.fd_build_id.fb_data, &i, sizeof(i));
	err = fp_devfetch_data(f, &d, &ranges, &n);
	free(ranges);
	return err || n ? -1 : 0;
}

/* One device's failure is not final: another host is asked at once, the
 * same host after the back-off (1 s, then 2 s), and the build-ID is given
 * up after failures on FP_DEVFETCH_FAIL_HOSTS hosts. */
static void test_retry(void)
{
	char tmp[256];
	struct fp_devfetch_stats st;
	struct fp_devfetch *f = NULL;
	enum { A = 101, B = 102, C = 103, D = 104 };

	CHECK(!check_tmpdir(tmp, sizeof(tmp), "devfetch_retry"));
	CHECK_EQ_INT(fp_devfetch_alloc(&f, NULL, tmp, 60, 1), 0);
	if (!f)
		goto out;
	CHECK_EQ_INT(want_as(f, 1, A, 7), 1);
	CHECK_EQ_INT(fail(f, 1, 7), 0);
	/* The host that failed: not before the back-off, from any session. */
	CHECK_EQ_INT(want_as(f, 1, A, 7), 0);
	CHECK_EQ_INT(want_as(f, 5, A, 7), 0);
	/* Another host: at once. */
	CHECK_EQ_INT(want_as(f, 2, B, 7), 1);
	CHECK_EQ_INT(want_as(f, 1, A, 7), 0); /* running */
	CHECK_EQ_INT(fail(f, 2, 7), 0);
	CHECK_EQ_INT(want_as(f, 2, B, 7), 0);
	/* Two failures: A waits 2 s. */
	usleep(1200 * 1000);
	CHECK_EQ_INT(want_as(f, 1, A, 7), 0);
	usleep(1000 * 1000);
	CHECK_EQ_INT(want_as(f, 1, A, 7), 1);
	CHECK_EQ_INT(fail(f, 1, 7), 0);
	fp_devfetch_stats(f, &st);
	CHECK_EQ_INT(st.dv_started, 3);
	CHECK_EQ_INT(st.dv_retried, 2);
	CHECK_EQ_INT(st.dv_failed, 3);
	CHECK_EQ_INT(st.dv_given_up, 0);
	/* A third host's failure: given up, for every host. */
	CHECK_EQ_INT(want_as(f, 3, C, 7), 1);
	CHECK_EQ_INT(fail(f, 3, 7), 0);
	CHECK_EQ_INT(want_as(f, 4, D, 7), 0);
	usleep(1100 * 1000);
	CHECK_EQ_INT(want_as(f, 1, A, 7), 0);
	fp_devfetch_stats(f, &st);
	CHECK_EQ_INT(st.dv_given_up, 1);
	CHECK_EQ_INT(st.dv_active, 0);
	/* Other build-IDs are not concerned. */
	CHECK_EQ_INT(want_as(f, 1, A, 8), 1);
out:
	fp_devfetch_free(f);
	CHECK_EQ_INT(check_rmtree(tmp), 0);
}

/* What peers can make devfetch hold: 8 fetches a session, 64 in all, no
 * file until a fetch's first answer, none after it expires; an expired
 * fetch starts again. */
static void test_bounds(void)
{
	char tmp[256];
	struct fp_devfetch_stats st;
	struct fp_devfetch *f = NULL;
	struct fp_range *ranges = NULL;
	size_t n = 0, asked = 0;
	unsigned char hdr[sizeof(Elf64_Ehdr)];
	int fds = open_fds(), self = open("/proc/self/exe", O_RDONLY);
	struct stat sb;
	uint32_t i;

	CHECK(!check_tmpdir(tmp, sizeof(tmp), "devfetch_bounds"));
	CHECK_EQ_INT(fp_devfetch_alloc(&f, NULL, tmp, 1, 1), 0);
	if (!f || self < 0 || fstat(self, &sb) || pread(self, hdr, sizeof(hdr), 0) != sizeof(hdr)) {
		CHECK(!"setup");
		goto out;
	}
	for (i = 0; i < 20; i++)
		asked += want(f, 1, i);
	CHECK_EQ_INT(asked, FP_DEVFETCH_PER_SESSION);
	for (uint64_t session = 2; session <= 9; session++)
		for (i = 0; i < 20; i++)
			asked += want(f, session, (uint32_t)(session * 100 + i));
	CHECK_EQ_INT(asked, FP_DEVFETCH_ACTIVE);
	fp_devfetch_stats(f, &st);
	CHECK_EQ_INT(st.dv_active, FP_DEVFETCH_ACTIVE);
	CHECK_EQ_INT(st.dv_deferred, 9 * 20 - FP_DEVFETCH_ACTIVE);
	CHECK_EQ_INT(open_fds(), fds + 1); /* /proc/self/exe only */
	/* The first answer of build-ID 0 opens its file. */
	{
		struct fp_file_data d = { .fd_session = 1,
					  .fd_build_id = { .fb_len = 20 },
					  .fd_file_size = (uint64_t)sb.st_size,
					  .fd_data = hdr,
					  .fd_len = sizeof(hdr) };

		CHECK_EQ_INT(fp_devfetch_data(f, &d, &ranges, &n), 0);
		CHECK(n >= 1);
		CHECK_EQ_INT(open_fds(), fds + 2);
	}
	/* No answer for over a second: every fetch expires, its file closed. */
	usleep(2200 * 1000);
	fp_devfetch_expire(f);
	fp_devfetch_stats(f, &st);
	CHECK_EQ_INT(st.dv_expired, FP_DEVFETCH_ACTIVE);
	CHECK_EQ_INT(st.dv_active, 0);
	CHECK_EQ_INT(open_fds(), fds + 1);
	/* An expired fetch starts again, from whichever session reports it. */
	CHECK_EQ_INT(want(f, 9, 0), 1);
	fp_devfetch_stats(f, &st);
	CHECK_EQ_INT(st.dv_started, FP_DEVFETCH_ACTIVE + 1);
out:
	free(ranges);
	fp_devfetch_free(f);
	if (self >= 0)
		close(self);
	CHECK_EQ_INT(check_rmtree(tmp), 0);
}

/* cfi_fetch: a CFI fetch of path into a fresh resolver (cache under dir,
 * sub), lying as told: the resolver, devfetch (to go on with), the stats
 * and every range asked; the caller frees them.  0 or -1. */
static int cfi_fetch(const char *path, const char *sub, enum lie lie, struct fp_resolver **r,
		     struct fp_devfetch **f, struct fp_devfetch_stats *st, struct fp_range **all,
		     size_t *nall)
{
	char cache[PATH_MAX];
	struct fp_resolver_opts o = { .ro_cache_dir = cache };
	int err;

	snprintf(cache, sizeof(cache), "%s/%s", dir, sub);
	*r = NULL, *f = NULL, *all = NULL, *nall = 0;
	if (fp_resolver_open(r, &o) || fp_devfetch_alloc(f, *r, dir, FP_DEVFETCH_TIMEOUT, 1))
		return -1;
	err = drive(*f, path, CFI, lie, all, nall);
	fp_devfetch_stats(*f, st);
	return err;
}

/* whole_table: the table of the whole file at path, *len bytes. */
static void *whole_table(const char *path, struct fp_build_id *id, size_t *len)
{
	void *blob = NULL;
	int fd = open(path, O_RDONLY);

	if (fd < 0 || fp_elfnote_build_id(fd, id) || fp_cfi_compile(fd, &blob, len))
		blob = NULL;
	if (fd >= 0)
		close(fd);
	return blob;
}

/* A CFI fetch asks for the headers, the section names, the notes and the
 * CFI sections: never the symbol tables, DWARF or code; its copy gives
 * the whole file's table and no symbols.  A symbols fetch of the same
 * file afterwards does not ask for the CFI again. */
static void test_cfi_only(void)
{
	static const char *const never[] = { ".symtab",    ".strtab",     ".dynsym",
					     ".dynstr",    ".debug_info", ".debug_line",
					     ".debug_str", ".text",       ".rodata" };
	char self[PATH_MAX];
	struct fp_devfetch_stats st = { 0 };
	struct fp_resolver *r = NULL;
	struct fp_devfetch *f = NULL;
	struct fp_range *all = NULL;
	struct fp_build_id id;
	uint64_t off, size;
	size_t nall = 0, len = 0, glen = 0, i, absent = 0;
	void *full, *got = NULL;

	CHECK(!check_tmpdir(dir, sizeof(dir), "devfetch_cfi"));
	CHECK(realpath("/proc/self/exe", self) != NULL);
	full = whole_table(self, &id, &len);
	CHECK(full != NULL);
	CHECK_EQ_INT(cfi_fetch(self, "cache", HONEST, &r, &f, &st, &all, &nall), 0);
	CHECK_EQ_INT(st.dv_cfi_started, 1);
	CHECK_EQ_INT(st.dv_done, 1);
	CHECK_EQ_INT(st.dv_failed, 0);
	for (i = 0; i < sizeof(never) / sizeof(never[0]); i++) {
		if (section_at(self, never[i], &off, &size)) {
			absent++;
			continue;
		}
		if (overlaps(all, nall, off, size)) {
			fprintf(stderr, "  the CFI fetch asked for bytes of %s\n", never[i]);
			check_failures++;
		}
	}
	CHECK(absent < 3); /* .symtab, .strtab, .dynsym, .text... are there */
	CHECK(!section_at(self, ".eh_frame", &off, &size) && overlaps(all, nall, off, size));
	CHECK(!section_at(self, ".eh_frame_hdr", &off, &size) && overlaps(all, nall, off, size));
	printf("  CFI fetch of %s: %zu ranges, %llu bytes\n", self, nall,
	       (unsigned long long)st.dv_bytes);
	CHECK_EQ_INT(r ? fp_resolver_unwind(r, &id, &got, &glen) : -1, 0);
	CHECK(full && got && glen == len && !memcmp(got, full, len));
	CHECK(r && !fp_resolver_has(r, &id)); /* a CFI copy gives no symbols */
	free(got);
	/* Then the symbols: not the CFI again. */
	free(all);
	all = NULL, nall = 0;
	CHECK_EQ_INT(f ? drive(f, self, SYMBOLS, HONEST, &all, &nall) : -1, 0);
	CHECK(!section_at(self, ".symtab", &off, &size) && overlaps(all, nall, off, size));
	CHECK(!section_at(self, ".eh_frame", &off, &size) && !overlaps(all, nall, off, size));
	CHECK(r && fp_resolver_has(r, &id));
	free(all);
	free(full);
	fp_devfetch_free(f);
	fp_resolver_close(r);
	CHECK_EQ_INT(check_rmtree(dir), 0);
}

/* A CPython interpreter (a .PyRuntime section): the CFI fetch also takes
 * its dynamic symbols and Py_Version, for the table's trailer. */
static void test_cfi_python(void)
{
	const char *py = "/usr/bin/python3.11";
	struct fp_devfetch_stats st = { 0 };
	struct fp_resolver *r = NULL;
	struct fp_devfetch *f = NULL;
	struct fp_range *all = NULL;
	struct fp_build_id id;
	uint64_t off, size;
	size_t nall = 0, len = 0, glen = 0;
	void *full, *got = NULL;

	if (access(py, R_OK)) {
		printf("  %s not installed: skipped\n", py);
		return;
	}
	CHECK(!check_tmpdir(dir, sizeof(dir), "devfetch_cfipy"));
	full = whole_table(py, &id, &len);
	CHECK(full && fp_unwind_table_cpython(full, len));
	CHECK_EQ_INT(cfi_fetch(py, "cache", HONEST, &r, &f, &st, &all, &nall), 0);
	CHECK(!section_at(py, ".dynsym", &off, &size) && overlaps(all, nall, off, size));
	CHECK(!section_at(py, ".text", &off, &size) && !overlaps(all, nall, off, size));
	CHECK_EQ_INT(r ? fp_resolver_unwind(r, &id, &got, &glen) : -1, 0);
	CHECK(full && got && glen == len && !memcmp(got, full, len));
	free(got);
	free(all);
	free(full);
	fp_devfetch_free(f);
	fp_resolver_close(r);
	CHECK_EQ_INT(check_rmtree(dir), 0);
}

/* What a device sends is not trusted: garbage CFI is counted (a compile
 * failure) and final for that build-ID, a copy that is not ELF fails the
 * fetch (another device may be asked), a file without CFI is an answer
 * (none for good); none of them is fatal. */
static void test_cfi_bad_answers(void)
{
	char self[PATH_MAX], nocfi[PATH_MAX], cmd[3 * PATH_MAX];
	struct fp_devfetch_stats st = { 0 };
	struct fp_resolver_stats rs;
	struct fp_resolver *r = NULL;
	struct fp_devfetch *f = NULL;
	struct fp_range *all = NULL;
	struct fp_build_id id;
	size_t nall = 0, len = 0;
	void *blob = NULL;

	CHECK(!check_tmpdir(dir, sizeof(dir), "devfetch_cfibad"));
	CHECK(realpath("/proc/self/exe", self) != NULL);
	free(whole_table(self, &id, &len));

	CHECK_EQ_INT(cfi_fetch(self, "bad", BAD_CFI, &r, &f, &st, &all, &nall), 0);
	CHECK_EQ_INT(st.dv_done, 1);
	if (r) {
		fp_resolver_stats(r, &rs);
		CHECK_EQ_INT(rs.rs_unwind_failed, 1);
		CHECK_EQ_INT(rs.rs_unwind_compiled, 0);
		CHECK_EQ_INT(fp_resolver_unwind(r, &id, &blob, &len), -ENOENT);
	}
	free(all);
	fp_devfetch_free(f);
	fp_resolver_close(r);

	CHECK_EQ_INT(cfi_fetch(self, "notelf", NOT_ELF, &r, &f, &st, &all, &nall), 0);
	CHECK_EQ_INT(st.dv_failed, 1);
	CHECK_EQ_INT(st.dv_done, 0);
	CHECK_EQ_INT(r ? fp_resolver_unwind(r, &id, &blob, &len) : -1, -ENODATA);
	free(all);
	fp_devfetch_free(f);
	fp_resolver_close(r);

	snprintf(nocfi, sizeof(nocfi), "%s/nocfi", dir);
	snprintf(cmd, sizeof(cmd),
		 "objcopy --remove-section .eh_frame --remove-section .eh_frame_hdr %s %s", self,
		 nocfi);
	if (system(cmd) != 0) {
		printf("  no objcopy: the file without CFI skipped\n");
	} else {
		CHECK_EQ_INT(cfi_fetch(nocfi, "nocfi-cache", HONEST, &r, &f, &st, &all, &nall), 0);
		CHECK_EQ_INT(st.dv_cfi_none, 1);
		CHECK_EQ_INT(st.dv_failed, 0);
		CHECK_EQ_INT(r ? fp_resolver_unwind(r, &id, &blob, &len) : -1, -ENOENT);
		free(all);
		fp_devfetch_free(f);
		fp_resolver_close(r);
	}
	CHECK_EQ_INT(check_rmtree(dir), 0);
}

int main(void)
{
	RUN(test_cfi_only);
	RUN(test_cfi_python);
	RUN(test_cfi_bad_answers);
	RUN(test_python);
	RUN(test_bounds);
	RUN(test_retry);
	return CHECK_DONE();
}
