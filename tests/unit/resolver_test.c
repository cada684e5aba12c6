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
#include "cli.h"
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
#include <time.h>
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
		int refused = paths[i] != plain, want_err = refused ? -ENODATA : 0;
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

/* A program whose symbols and CFI live in different files: its detached
 * debug file has the symbols (a static function among them) and a NOBITS
 * .eh_frame; the stripped program has the CFI and no .symtab. */
static const char prog_src[] =
	"#include <stdlib.h>\n"
	"__attribute__((noinline)) static int hidden_work(volatile int *p, int n) {\n"
	"	int s = 0;\n"
	"	for (int i = 0; i < n; i++) s += p[i % 4] * i;\n"
	"	return s; }\n"
	"int main(int argc, char **argv) { volatile int v[4] = { argc, 2, 3, 4 };\n"
	"	return hidden_work(v, atoi(argv[0])) & 1; }\n";

struct split {
	char exe[PATH_MAX], dbg[PATH_MAX], debug_dir[PATH_MAX];
	struct fp_build_id id;
	uint64_t hidden; /* hidden_work's file offset */
	void *table;     /* the stripped program's own table */
	size_t table_len;
};

/* symbol_offset: the file offset of symbol name in the ELF file at path
 * (through its PT_LOAD); 0 if not found. */
static uint64_t symbol_offset(const char *path, const char *name)
{
	uint64_t off = 0;
	Elf_Scn *scn = NULL;
	size_t nph, i;
	Elf *e;
	int fd = open(path, O_RDONLY);

	elf_version(EV_CURRENT);
	if (fd < 0 || !(e = elf_begin(fd, ELF_C_READ, NULL))) {
		if (fd >= 0)
			close(fd);
		return 0;
	}
	while (!off && (scn = elf_nextscn(e, scn))) {
		GElf_Shdr sh;
		Elf_Data *d;
		GElf_Sym sym;

		if (!gelf_getshdr(scn, &sh) || sh.sh_type != SHT_SYMTAB ||
		    !(d = elf_getdata(scn, NULL)))
			continue;
		for (i = 0; sh.sh_entsize && i < sh.sh_size / sh.sh_entsize; i++)
			if (gelf_getsym(d, (int)i, &sym) &&
			    !strcmp(elf_strptr(e, sh.sh_link, sym.st_name) ?: "", name))
				off = sym.st_value;
	}
	if (off && !elf_getphdrnum(e, &nph)) {
		for (i = 0; i < nph; i++) {
			GElf_Phdr ph;

			if (gelf_getphdr(e, (int)i, &ph) && ph.p_type == PT_LOAD &&
			    off >= ph.p_vaddr && off < ph.p_vaddr + ph.p_filesz) {
				off = off - ph.p_vaddr + ph.p_offset;
				break;
			}
		}
	}
	elf_end(e);
	close(fd);
	return off;
}

/* split_build: the program, its debug file (also in a debug directory's
 * .build-id tree) and the stripped program, in dir.  0 or -1. */
static int split_build(struct split *sp)
{
	char csrc[PATH_MAX], full[PATH_MAX], cmd[8 * PATH_MAX], hex[2 * FP_BUILD_ID_MAX + 1];
	FILE *f;
	int fd, err;

	snprintf(csrc, sizeof(csrc), "%s/prog.c", dir);
	snprintf(full, sizeof(full), "%s/prog", dir);
	snprintf(sp->exe, sizeof(sp->exe), "%s/prog.stripped", dir);
	snprintf(sp->dbg, sizeof(sp->dbg), "%s/prog.debug", dir);
	if (!(f = fopen(csrc, "w")))
		return -1;
	fputs(prog_src, f);
	fclose(f);
	snprintf(cmd, sizeof(cmd),
		 "cc -O2 -g -fomit-frame-pointer -Wl,--build-id -o %s %s 2>/dev/null && "
		 "objcopy --only-keep-debug %s %s && strip -o %s %s",
		 full, csrc, full, sp->dbg, sp->exe, full);
	if (system(cmd) != 0)
		return -1;
	sp->hidden = symbol_offset(full, "hidden_work");
	if ((fd = open(sp->exe, O_RDONLY)) < 0)
		return -1;
	err = fp_elfnote_build_id(fd, &sp->id) || fp_cfi_compile(fd, &sp->table, &sp->table_len);
	close(fd);
	if (err || !sp->hidden)
		return -1;
	fp_build_id_hex(&sp->id, hex);
	snprintf(sp->debug_dir, sizeof(sp->debug_dir), "%s/debug", dir);
	snprintf(cmd, sizeof(cmd), "mkdir -p %s/.build-id/%.2s && cp %s %s/.build-id/%.2s/%s.debug",
		 sp->debug_dir, hex, sp->dbg, sp->debug_dir, hex, hex + 2);
	return system(cmd) == 0 ? 0 : -1;
}

/* resolves_hidden: whether r names the split program's hidden_work (a
 * static function only the debug file knows); waits for the workers. */
static int resolves_hidden(struct fp_resolver *r, const struct split *sp)
{
	struct fp_resolved res = { 0 };
	struct fp_lookup *l = NULL;
	int ok, tries;

	for (tries = 0; tries < 2; tries++) {
		if (fp_resolver_begin(r, &l))
			return 0;
		fp_resolver_frame(l, FP_MAP_USER, &sp->id, "/usr/bin/prog", 0, sp->hidden, &res);
		ok = res.rs_function && !strcmp(res.rs_function, "hidden_work");
		fp_resolver_end(l);
		if (ok)
			return 1;
		fp_resolver_wait(r, &sp->id, fp_now_ns(CLOCK_MONOTONIC) + 30000000000ull);
	}
	return 0;
}

/* unwind_settled: fp_resolver_unwind of id once no job for it runs. */
static int unwind_settled(struct fp_resolver *r, const struct fp_build_id *id, void **blob,
			  size_t *len)
{
	fp_resolver_wait(r, id, fp_now_ns(CLOCK_MONOTONIC) + 30000000000ull);
	return fp_resolver_unwind(r, id, blob, len);
}

static int same_table(const void *blob, size_t len, const struct split *sp)
{
	return blob && len == sp->table_len && !memcmp(blob, sp->table, len);
}

/* Symbols from the debug file, CFI from the program added later: the table
 * is compiled and stored, the debug file's symbols stay, and why the
 * build-ID had no table is counted while it had none. */
static void test_cfi_added_later(const struct split *sp)
{
	char cache[PATH_MAX];
	struct fp_resolver_opts o = { .ro_cache_dir = cache, .ro_debug_dir = sp->debug_dir };
	struct fp_resolver_stats st;
	struct fp_resolver *r = NULL;
	struct fp_build_id got;
	void *blob = NULL;
	size_t len = 0;
	int fd;

	snprintf(cache, sizeof(cache), "%s/cache-later", dir);
	CHECK_EQ_INT(fp_resolver_open(&r, &o), 0);
	if (!r)
		return;
	CHECK(resolves_hidden(r, sp)); /* from the debug directory */
	/* Its .eh_frame is NOBITS: only a device's copy would do. */
	CHECK_EQ_INT(fp_resolver_unwind(r, &sp->id, &blob, &len), -ENODATA);
	fp_resolver_stats(r, &st);
	CHECK_EQ_INT(st.rs_no_table[FP_UNWIND_DEVICE], 1);
	CHECK_EQ_INT(st.rs_no_table_total[FP_UNWIND_DEVICE], 1);
	if ((fd = open(sp->exe, O_RDONLY)) >= 0) {
		CHECK_EQ_INT(fp_resolver_add_file(r, fd, &got), 0);
		close(fd);
	}
	CHECK_EQ_INT(fp_resolver_unwind(r, &sp->id, &blob, &len), 0);
	CHECK(same_table(blob, len, sp));
	free(blob);
	CHECK(resolves_hidden(r, sp)); /* the stripped program did not replace them */
	fp_resolver_stats(r, &st);
	CHECK_EQ_INT(st.rs_no_table[FP_UNWIND_DEVICE], 0);
	CHECK_EQ_INT(st.rs_no_table_total[FP_UNWIND_DEVICE], 1);
	fp_resolver_close(r);
}

/* A fetch function (a store, debuginfod) that has the debug file for
 * symbols and the program for CFI, and counts what it was asked. */
struct split_fetch {
	const struct split *sf_split;
	int sf_no_program; /* has the debug file only */
	int sf_asked[2];   /* by enum fp_fetch_what */
};

static int split_fetch(const struct fp_build_id *id, int what, void *arg)
{
	struct split_fetch *sf = arg;

	if (what < 0 || what > FP_FETCH_CFI || !fp_build_id_eq(id, &sf->sf_split->id))
		return -ENOENT;
	sf->sf_asked[what]++;
	if (what == FP_FETCH_CFI && sf->sf_no_program)
		return -ENOENT;
	return open(what == FP_FETCH_CFI ? sf->sf_split->exe : sf->sf_split->dbg, O_RDONLY);
}

/* With workers: the CFI search asks the fetch function for a file with
 * code, the symbols' search for the debug file first.  (One worker: a
 * fork while another thread holds ASan's allocator lock can leave the
 * isolated child stuck, isolate.c.) */
static void test_cfi_from_fetch(const struct split *sp)
{
	char cache[PATH_MAX];
	struct split_fetch sf = { .sf_split = sp };
	struct fp_resolver_opts o = { .ro_cache_dir = cache,
				      .ro_fetch = split_fetch,
				      .ro_fetch_arg = &sf,
				      .ro_fetch_remote = 1 };
	struct fp_resolver *r = NULL;
	void *blob = NULL;
	size_t len = 0;

	snprintf(cache, sizeof(cache), "%s/cache-fetch", dir);
	CHECK_EQ_INT(fp_resolver_open(&r, &o), 0);
	if (!r || fp_resolver_start(r, 1, 16)) {
		CHECK(!"resolver");
		fp_resolver_close(r);
		return;
	}
	CHECK_EQ_INT(fp_resolver_unwind(r, &sp->id, &blob, &len), -EAGAIN); /* queued */
	CHECK_EQ_INT(unwind_settled(r, &sp->id, &blob, &len), 0);
	CHECK(same_table(blob, len, sp));
	free(blob);
	CHECK(resolves_hidden(r, sp));
	CHECK_EQ_INT(sf.sf_asked[FP_FETCH_CFI], 1);
	CHECK_EQ_INT(sf.sf_asked[FP_FETCH_SYMBOLS], 1);
	fp_resolver_close(r);

	/* A local fetch function (the store) without the program: asked at
	 * once, in the caller's thread, and a device is wanted at once. */
	snprintf(cache, sizeof(cache), "%s/cache-store", dir);
	o.ro_fetch_remote = 0;
	sf = (struct split_fetch){ .sf_split = sp, .sf_no_program = 1 };
	CHECK_EQ_INT(fp_resolver_open(&r, &o), 0);
	if (!r || fp_resolver_start(r, 1, 16)) {
		CHECK(!"resolver");
		fp_resolver_close(r);
		return;
	}
	CHECK_EQ_INT(fp_resolver_unwind(r, &sp->id, &blob, &len), -ENODATA);
	CHECK_EQ_INT(sf.sf_asked[FP_FETCH_CFI], 1);
	fp_resolver_close(r);
}

/* With workers and the debug directory as the only source: the device is
 * wanted at once (no search queued), and what comes of asking it moves
 * the answer: asked (wait), failed (ask again), its copy (the table), or
 * a file without CFI (none, for good). */
static void test_cfi_from_device(const struct split *sp)
{
	char cache[PATH_MAX];
	struct fp_resolver_opts o = { .ro_cache_dir = cache, .ro_debug_dir = sp->debug_dir };
	struct fp_build_id other = { .fb_len = 20, .fb_data = { 0xee, 0x17 } };
	struct fp_resolver_stats st;
	struct fp_resolver *r = NULL;
	void *blob = NULL;
	size_t len = 0;
	int fd;

	snprintf(cache, sizeof(cache), "%s/cache-device", dir);
	CHECK_EQ_INT(fp_resolver_open(&r, &o), 0);
	if (!r || fp_resolver_start(r, 1, 16)) {
		CHECK(!"resolver");
		fp_resolver_close(r);
		return;
	}
	CHECK(resolves_hidden(r, sp));
	CHECK_EQ_INT(fp_resolver_unwind(r, &sp->id, &blob, &len), -ENODATA);
	fp_resolver_stats(r, &st);
	CHECK_EQ_INT(st.rs_queued, 1); /* the symbols' job only */
	fp_resolver_cfi_device(r, &sp->id, FP_CFI_DEVICE_ASKED);
	CHECK_EQ_INT(fp_resolver_unwind(r, &sp->id, &blob, &len), -EAGAIN);
	fp_resolver_cfi_device(r, &sp->id, FP_CFI_DEVICE_RETRY);
	CHECK_EQ_INT(fp_resolver_unwind(r, &sp->id, &blob, &len), -ENODATA);
	fp_resolver_cfi_device(r, &sp->id, FP_CFI_DEVICE_ASKED);
	fp_resolver_stats(r, &st);
	CHECK_EQ_INT(st.rs_no_table[FP_UNWIND_DEVICE], 1);
	/* A copy of another file is refused. */
	if ((fd = open(sp->dbg, O_RDONLY)) >= 0)
		CHECK_EQ_INT(fp_resolver_add_cfi_async(r, fd, &other), 0); /* queued */
	if ((fd = open(sp->exe, O_RDONLY)) >= 0)
		CHECK_EQ_INT(fp_resolver_add_cfi_async(r, fd, &sp->id), 0);
	CHECK_EQ_INT(unwind_settled(r, &sp->id, &blob, &len), 0);
	CHECK(same_table(blob, len, sp));
	free(blob);
	fp_resolver_stats(r, &st);
	CHECK_EQ_INT(st.rs_no_table[FP_UNWIND_DEVICE], 0);
	/* No file here (the copy of another file was not taken), and the
	 * device's has no CFI: none, for good. */
	CHECK_EQ_INT(unwind_settled(r, &other, &blob, &len), -ENODATA);
	fp_resolver_cfi_device(r, &other, FP_CFI_DEVICE_NONE);
	CHECK_EQ_INT(fp_resolver_unwind(r, &other, &blob, &len), -ENOENT);
	fp_resolver_close(r);
}

static void test_cfi_elsewhere(void)
{
	struct split sp = { 0 };

	CHECK(!check_tmpdir(dir, sizeof(dir), "resolver_split"));
	if (split_build(&sp)) {
		printf("  no compiler, objcopy or strip: skipped\n");
	} else {
		test_cfi_added_later(&sp);
		test_cfi_from_fetch(&sp);
		test_cfi_from_device(&sp);
	}
	free(sp.table);
	CHECK_EQ_INT(check_rmtree(dir), 0);
}

int main(void)
{
	RUN(test_preference);
	RUN(test_unsafe_paths);
	RUN(test_cfi_elsewhere);
	return CHECK_DONE();
}
