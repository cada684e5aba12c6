/* resolver_test.c: which unwind table the resolver keeps for a build-ID.
 *
 * Files of one build-ID can give different tables: a stripped CPython
 * interpreter has no .cold part, a sparse copy may lack Py_Version's
 * bytes, a debug file has no .eh_frame bytes.  The stored table is
 * replaced by one that knows more of the interpreter (trailer, then
 * version, then .cold), then by one with more FDEs; a file whose
 * .eh_frame is NOBITS never replaces it.  The files are small shared
 * objects built here, all linked with the same build-ID.
 */
#include "check.h"
#include "cfi.h"
#include "elfnote.h"
#include "resolver.h"
#include "unwind_table.h"

#include <errno.h>
#include <signal.h>
#include <fcntl.h>
#include <gelf.h>
#include <stdint.h>
#include <stdio.h>
#include <limits.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#define BUILD_ID "0x5eed5eed5eed5eed5eed5eed5eed5eed5eed5eed"

/* PY: an interpreter (eval loop, its .cold part in .symtab, _PyRuntime);
 * VERSION: Py_Version; FDES: how many more functions (FDEs); DEBUG_FRAME:
 * CFI in .debug_frame too. */
static const char src[] =
	"#ifdef DEBUG_FRAME\n"
	"__asm__(\".cfi_sections .eh_frame, .debug_frame\");\n"
	"#endif\n"
	"#ifdef PY\n"
	"int _PyEval_EvalFrameDefault(volatile int *p, int n) {\n"
	"	int s = 0;\n"
	"	for (int i = 0; i < n; i++) s += p[i] * i;\n"
	"	return s; }\n"
	"static int eval_cold(volatile int *p) __asm__(\"_PyEval_EvalFrameDefault.cold\");\n"
	"__attribute__((used, noinline)) static int eval_cold(volatile int *p) { return p[2] - p[1]; }\n"
	"struct { long a[8]; } _PyRuntime = { { 7 } };\n"
	"#endif\n"
	"#ifdef VERSION\n"
	"const unsigned long Py_Version = 0x030b04f0;\n"
	"#endif\n"
	"#define F(k) int extra##k(volatile int *p) { return p[k] * (k + 3); }\n"
	"#if FDES > 0\n"
	"F(0) F(1) F(2) F(3)\n"
	"#endif\n"
	"#if FDES > 4\n"
	"F(4) F(5) F(6) F(7) F(8) F(9) F(10) F(11) F(12) F(13) F(14) F(15)\n"
	"#endif\n";

static char dir[256];

/* build: dir/name.so from src with flags; 0 or -1 (no compiler). */
static int build(const char *name, const char *flags)
{
	char cmd[3 * PATH_MAX];

	snprintf(cmd, sizeof(cmd),
		 "cc -O2 -fPIC -shared -nostdlib -Wl,--build-id=" BUILD_ID
		 " %s -o %s/%s.so %s/src.c 2>/dev/null",
		 flags, dir, name, dir);
	return system(cmd) == 0 ? 0 : -1;
}

/* set_nobits: make section secname of dir/name.so NOBITS in place, as in
 * a detached debug file. */
static int set_nobits(const char *name, const char *secname)
{
	char path[PATH_MAX];
	uint32_t nobits = SHT_NOBITS;
	size_t shstrndx, i = 0, found = 0;
	Elf_Scn *scn = NULL;
	GElf_Ehdr eh;
	Elf *e;
	int fd, ok;

	snprintf(path, sizeof(path), "%s/%s.so", dir, name);
	if ((fd = open(path, O_RDWR)) < 0)
		return -1;
	elf_version(EV_CURRENT);
	if ((e = elf_begin(fd, ELF_C_READ, NULL)) && gelf_getehdr(e, &eh) &&
	    !elf_getshdrstrndx(e, &shstrndx)) {
		while (!found && (scn = elf_nextscn(e, scn))) {
			const char *n;
			GElf_Shdr sh;

			if (gelf_getshdr(scn, &sh) && (n = elf_strptr(e, shstrndx, sh.sh_name)) &&
			    !strcmp(n, secname))
				found = i = elf_ndxscn(scn);
		}
	}
	ok = found && pwrite(fd, &nobits, 4, (off_t)(eh.e_shoff + i * eh.e_shentsize + 4)) == 4;
	elf_end(e);
	close(fd);
	return ok ? 0 : -1;
}

/* A built file and its own table, compiled here. */
struct file {
	const char *name;
	void *blob;
	size_t len;
	const struct fp_unwind_cpython *py;
	uint32_t fdes;
};

static int load(struct file *f)
{
	char path[PATH_MAX];
	int fd, err;

	snprintf(path, sizeof(path), "%s/%s.so", dir, f->name);
	if ((fd = open(path, O_RDONLY)) < 0)
		return -1;
	err = fp_cfi_compile(fd, &f->blob, &f->len);
	close(fd);
	if (err)
		return err;
	f->py = fp_unwind_table_cpython(f->blob, f->len);
	f->fdes = ((const struct fp_unwind_header *)f->blob)->uh_fdes;
	return 0;
}

/* add: upload file f to r; then r's table for the build-ID must be
 * want's. */
static void add(struct fp_resolver *r, const struct file *f, const struct file *want)
{
	struct fp_build_id id;
	char path[PATH_MAX];
	void *blob = NULL;
	size_t len = 0;
	int fd;

	snprintf(path, sizeof(path), "%s/%s.so", dir, f->name);
	if ((fd = open(path, O_RDONLY)) < 0) {
		CHECK(!"open");
		return;
	}
	fp_resolver_add_file(r, fd, &id);
	close(fd);
	CHECK_EQ_INT(fp_resolver_unwind(r, &id, &blob, &len), 0);
	if (!(blob && len == want->len && !memcmp(blob, want->blob, len))) {
		fprintf(stderr, "  after %s: the stored table is not %s's\n", f->name, want->name);
		check_failures++;
	}
	free(blob);
}

enum { PLAIN, NOVER_COLD, VER, VER_COLD, VER_COLD_MORE, DEBUGLIKE, NFILES };

static void test_preference(void)
{
	struct file fs[NFILES] = {
		[PLAIN] = { "plain" },                 /* no interpreter, most FDEs */
		[NOVER_COLD] = { "nover_cold" },       /* trailer, version 0, .cold */
		[VER] = { "ver" },                     /* trailer, version, no .cold (stripped) */
		[VER_COLD] = { "ver_cold" },           /* trailer, version, .cold */
		[VER_COLD_MORE] = { "ver_cold_more" }, /* the same, more FDEs */
		[DEBUGLIKE] = { "debuglike" },         /* all of it, but .eh_frame NOBITS */
	};
	struct fp_resolver_opts o = { 0 };
	struct fp_resolver *r = NULL;
	char path[PATH_MAX];
	size_t i;
	FILE *f;

	if (check_tmpdir(dir, sizeof(dir), "resolver_test")) {
		CHECK(!"check_tmpdir");
		return;
	}
	snprintf(path, sizeof(path), "%s/src.c", dir);
	if (!(f = fopen(path, "w"))) {
		CHECK(!"fopen");
		return;
	}
	fputs(src, f);
	fclose(f);
	if (build("plain", "-DFDES=16")) {
		printf("  no C compiler: skipped\n");
		goto out;
	}
	CHECK_EQ_INT(build("nover_cold", "-DPY -DFDES=0"), 0);
	CHECK_EQ_INT(build("ver", "-DPY -DVERSION -DFDES=0 -s"), 0);
	CHECK_EQ_INT(build("ver_cold", "-DPY -DVERSION -DFDES=0"), 0);
	CHECK_EQ_INT(build("ver_cold_more", "-DPY -DVERSION -DFDES=4"), 0);
	CHECK_EQ_INT(build("debuglike", "-DPY -DVERSION -DFDES=16 -DDEBUG_FRAME"), 0);
	CHECK_EQ_INT(set_nobits("debuglike", ".eh_frame"), 0);
	for (i = 0; i < NFILES; i++)
		CHECK_EQ_INT(load(&fs[i]), 0);
	for (i = 0; i < NFILES; i++)
		if (!fs[i].blob)
			goto out;
	/* The files are what their names say. */
	CHECK(!fs[PLAIN].py);
	for (i = NOVER_COLD; i < NFILES; i++) {
		const struct fp_unwind_cpython *py = fs[i].py;

		CHECK(py != NULL);
		if (!py)
			goto out;
		CHECK_EQ_INT(py->uc_version, i == NOVER_COLD ? 0 : 0x030b);
		CHECK_EQ_INT(py->uc_eval[1].end > py->uc_eval[1].start, i != VER);
		CHECK(fs[i].fdes < fs[PLAIN].fdes || i == DEBUGLIKE);
		printf("  %-14s version %#x, .cold %s, %u FDEs\n", fs[i].name, py->uc_version,
		       py->uc_eval[1].end > py->uc_eval[1].start ? "yes" : "no", fs[i].fdes);
	}
	CHECK(fs[VER_COLD_MORE].fdes > fs[VER_COLD].fdes);
	CHECK(fs[DEBUGLIKE].fdes > fs[VER_COLD_MORE].fdes);
	{
		int fd;

		snprintf(path, sizeof(path), "%s/debuglike.so", dir);
		fd = open(path, O_RDONLY);
		CHECK(fp_cfi_has_cfi(fd)); /* from its .debug_frame */
		close(fd);
	}

	snprintf(path, sizeof(path), "%s/cache", dir);
	o.ro_cache_dir = path;
	CHECK_EQ_INT(fp_resolver_open(&r, &o), 0);
	if (!r)
		goto out;
	add(r, &fs[PLAIN], &fs[PLAIN]);
	add(r, &fs[NOVER_COLD], &fs[NOVER_COLD]); /* the trailer beats FDEs */
	add(r, &fs[PLAIN], &fs[NOVER_COLD]);
	add(r, &fs[VER], &fs[VER]); /* the version beats .cold */
	add(r, &fs[NOVER_COLD], &fs[VER]);
	add(r, &fs[VER_COLD], &fs[VER_COLD]); /* .cold, all else equal */
	add(r, &fs[VER], &fs[VER_COLD]);
	add(r, &fs[VER_COLD_MORE], &fs[VER_COLD_MORE]); /* then FDEs */
	add(r, &fs[VER_COLD], &fs[VER_COLD_MORE]);
	add(r, &fs[PLAIN], &fs[VER_COLD_MORE]);
	add(r, &fs[DEBUGLIKE], &fs[VER_COLD_MORE]); /* never over a table */
	fp_resolver_close(r);

	/* A debug-like file still gives a table where there was none. */
	snprintf(path, sizeof(path), "%s/cache2", dir);
	r = NULL;
	CHECK_EQ_INT(fp_resolver_open(&r, &o), 0);
	if (r) {
		add(r, &fs[DEBUGLIKE], &fs[DEBUGLIKE]);
		fp_resolver_close(r);
	}
out:
	for (i = 0; i < NFILES; i++)
		free(fs[i].blob);
	CHECK_EQ_INT(check_rmtree(dir), 0);
}

static void stalled(int sig)
{
	static const char msg[] = "FAIL: resolver_test.c:test_unsafe_paths (stalled)\n";

	(void)sig;
	(void)!write(STDOUT_FILENO, msg, sizeof(msg) - 1);
	_exit(1);
}

/* Paths agents report are opened only when they are regular files: a FIFO
 * (whose open would block the worker) or a device is refused, and so is a
 * symbolic link, even to the right file.  The same file at a plain path
 * gives its tables.  Both as a local file and as a container's (through
 * /proc/PID/root, here this process's). */
static void test_unsafe_paths(void)
{
	char tmp[256], cache[PATH_MAX], plain[PATH_MAX], fifo[PATH_MAX], link[PATH_MAX],
		cmd[3 * PATH_MAX], self[PATH_MAX];
	const char *paths[] = { fifo, link, "/dev/zero", "/tmp", plain };
	struct fp_resolver_opts o = { 0 };
	struct fp_resolver_stats st;
	struct fp_build_id id;
	struct fp_resolver *r;
	const size_t npaths = sizeof(paths) / sizeof(paths[0]);
	size_t i;
	int container;

	CHECK(!check_tmpdir(tmp, sizeof(tmp), "resolver_paths"));
	snprintf(cache, sizeof(cache), "%s/cache", tmp);
	snprintf(plain, sizeof(plain), "%s/exe", tmp);
	snprintf(fifo, sizeof(fifo), "%s/fifo", tmp);
	snprintf(link, sizeof(link), "%s/link", tmp);
	CHECK(realpath("/proc/self/exe", self) != NULL);
	snprintf(cmd, sizeof(cmd), "cp %s %s", self, plain);
	CHECK_EQ_INT(system(cmd), 0);
	CHECK_EQ_INT(mkfifo(fifo, 0600), 0);
	CHECK_EQ_INT(symlink(plain, link), 0);
	{
		int fd = open(plain, O_RDONLY);
		CHECK(fd >= 0 && fp_elfnote_build_id(fd, &id) == 0);
		close(fd);
	}
	o.ro_cache_dir = cache;
	signal(SIGALRM, stalled);
	/* Each path as a local file, then each as a container's. */
	for (i = 0, container = 0; container < 2; i = (i + 1) % npaths, container += i == 0) {
		int refused = paths[i] != plain, want_err = refused ? -ENOENT : 0;
		uint32_t pid = container ? (uint32_t)getpid() : 0;
		struct fp_resolved res;
		struct fp_lookup *l;
		size_t len = 0;
		void *blob = NULL;

		CHECK_EQ_INT(check_rmtree(cache), 0);
		r = NULL;
		o.ro_local_files = !container;
		o.ro_proc_root = container;
		CHECK_EQ_INT(fp_resolver_open(&r, &o), 0);
		if (!r)
			break;
		alarm(30);
		/* The unwind table's search, then the symbols'. */
		CHECK_EQ_INT(fp_resolver_note_path(r, &id, paths[i], pid), 0);
		CHECK_EQ_INT(fp_resolver_unwind(r, &id, &blob, &len), want_err);
		free(blob);
		CHECK_EQ_INT(fp_resolver_begin(r, &l), 0);
		fp_resolver_frame(l, FP_MAP_USER, &id, paths[i], pid, 0x1000, &res);
		fp_resolver_end(l);
		alarm(0);
		CHECK_EQ_INT(fp_resolver_has(r, &id), !refused);
		fp_resolver_stats(r, &st);
		/* Refused by the unwind table's search and the symbols'. */
		if (refused)
			CHECK(st.rs_paths_refused >= 2);
		else
			CHECK_EQ_INT(st.rs_paths_refused, 0);
		printf("  %-9s %-5s %s (%llu refused)\n", container ? "container" : "local",
		       strrchr(paths[i], '/') + 1, refused ? "refused" : "read",
		       (unsigned long long)st.rs_paths_refused);
		fp_resolver_close(r);
	}
	signal(SIGALRM, SIG_DFL);
	CHECK_EQ_INT(check_rmtree(tmp), 0);
}

int main(void)
{
	RUN(test_preference);
	RUN(test_unsafe_paths);
	return CHECK_DONE();
}
