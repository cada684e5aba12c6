/* pyinterp_test.c: the CPython trailer of unwind tables, checked against
 * binutils.
 *
 * The oracle reads the same files through readelf (-l for the PT_LOAD
 * segments, -s for both symbol tables) and libelf (the 4 bytes of
 * Py_Version through its section), applies the rules pyinterp.h states,
 * and must find the trailer fp_cfi_compile appended.  Cases: the
 * machine's own python3.11, Debian's 3.9 and 3.13 when
 * tests/python/fetch.sh has provisioned them (with their -dbg files: the
 * .cold part, and a detached debug file that is no interpreter), small
 * shared objects built here for the version fallbacks and the odd cases,
 * and a file that is not Python (libc).
 */
#include "check.h"
#include "cfi.h"
#include "isolate.h"
#include "pyinterp.h"
#include "unwind_table.h"

#include <errno.h>
#include <fcntl.h>
#include <gelf.h>
#include <limits.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#define PY_CACHE "/var/cache/fleetprof-python"

/* What readelf says of a file. */
struct rsym {
	int have;
	uint64_t value, size;
	unsigned ndx;
};

struct rfile {
	size_t nsegs;
	uint64_t off[16], vaddr[16], filesz[16];
	int exec[16];
	struct rsym eval, cold, runtime, version, aiter, getcode;
};

static int run_readelf(const char *args, const char *path, struct rfile *r)
{
	char cmd[PATH_MAX + 64], line[1024], table[64] = "";
	FILE *p;

	snprintf(cmd, sizeof(cmd), "readelf -W %s '%s' 2>/dev/null", args, path);
	if (!(p = popen(cmd, "r")))
		return -1;
	while (fgets(line, sizeof(line), p)) {
		unsigned long long a, b, c, d, e;
		char size[32], type[16], bind[16], vis[16], ndx[16], name[512], *at;
		struct rsym *s = NULL;
		int dyn, fn;

		int pos = 0;

		if (sscanf(line, " LOAD 0x%llx 0x%llx 0x%llx 0x%llx 0x%llx%n", &a, &b, &c, &d, &e,
			   &pos) == 5 &&
		    pos) {
			/* Then the flags ("R E", "RW "), then the alignment. */
			const char *flags = line + pos, *align = strstr(flags, "0x");
			size_t n = align ? (size_t)(align - flags) : strlen(flags);

			if (r->nsegs < 16) {
				r->off[r->nsegs] = a, r->vaddr[r->nsegs] = b,
				r->filesz[r->nsegs] = d;
				r->exec[r->nsegs++] = memchr(flags, 'E', n) != NULL;
			}
			continue;
		}
		if (sscanf(line, "Symbol table '%63[^']'", table) == 1)
			continue;
		if (sscanf(line, " %*u: %llx %31s %15s %15s %15s %15s %511s", &a, size, type, bind,
			   vis, ndx, name) != 7 ||
		    !strcmp(ndx, "UND") || !strcmp(ndx, "ABS"))
			continue;
		if ((at = strchr(name, '@')))
			*at = 0;
		dyn = !strcmp(table, ".dynsym");
		fn = !strcmp(type, "FUNC");
		if (!strcmp(name, "_PyEval_EvalFrameDefault") && fn)
			s = &r->eval;
		else if (!strcmp(name, "_PyEval_EvalFrameDefault.cold") && fn)
			s = &r->cold;
		else if (!strcmp(name, "_PyRuntime") && !strcmp(type, "OBJECT"))
			s = &r->runtime;
		else if (!strcmp(name, "Py_Version") && !strcmp(type, "OBJECT"))
			s = &r->version;
		else if (!strcmp(name, "PyAIter_Check") && fn && dyn)
			s = &r->aiter;
		else if (!strcmp(name, "PyFrame_GetCode") && fn && dyn)
			s = &r->getcode;
		if (!s || s->have)
			continue;
		b = strtoull(size, NULL, 0); /* decimal, or 0x... when large */
		if ((s == &r->eval || s == &r->cold) && !b)
			continue;
		*s = (struct rsym){ 1, a, b, (unsigned)strtoul(ndx, NULL, 10) };
	}
	return pclose(p) == 0 ? 0 : -1;
}

/* readelf_file: segments and symbols; -1 when readelf fails. */
static int readelf_file(const char *path, struct rfile *r)
{
	memset(r, 0, sizeof(*r));
	/* -s lists .dynsym before .symtab: first definitions win, as documented. */
	return run_readelf("-l", path, r) || run_readelf("-s", path, r) ? -1 : 0;
}

/* version_bytes: Py_Version's PY_VERSION_HEX as major << 8 | minor, read
 * through its section with libelf; 0 when the section has no bytes. */
static uint32_t version_bytes(const char *path, const struct rsym *v)
{
	int fd = open(path, O_RDONLY | O_CLOEXEC);
	uint32_t hex = 0;
	Elf_Scn *scn;
	GElf_Shdr sh;
	Elf *e;

	if (fd < 0)
		return 0;
	elf_version(EV_CURRENT);
	if ((e = elf_begin(fd, ELF_C_READ, NULL)) && (scn = elf_getscn(e, v->ndx)) &&
	    gelf_getshdr(scn, &sh) && sh.sh_type != SHT_NOBITS &&
	    pread(fd, &hex, 4, (off_t)(sh.sh_offset + v->value - sh.sh_addr)) != 4)
		hex = 0;
	elf_end(e);
	close(fd);
	return hex >> 24 ? (hex >> 24) << 8 | ((hex >> 16) & 0xff) : 0;
}

/* range_of: symbol s as file offsets through r's executable segments. */
static int range_of(const struct rfile *r, const struct rsym *s, uint32_t *start, uint32_t *end,
		    uint64_t *bias)
{
	size_t i;

	for (i = 0; i < r->nsegs; i++)
		if (r->exec[i] && s->value >= r->vaddr[i] &&
		    s->value < r->vaddr[i] + r->filesz[i]) {
			uint64_t room = r->vaddr[i] + r->filesz[i] - s->value;

			*start = (uint32_t)(s->value - r->vaddr[i] + r->off[i]);
			*end = *start + (uint32_t)(s->size < room ? s->size : room);
			if (bias)
				*bias = r->vaddr[i] - r->off[i];
			return 0;
		}
	return -1;
}

/* expected: the trailer pyinterp.h promises for path; 0 when it promises
 * none, -1 when readelf cannot read the file. */
static int expected(const char *path, struct fp_unwind_cpython *want, struct rfile *r)
{
	uint64_t bias = 0;

	memset(want, 0, sizeof(*want));
	if (readelf_file(path, r))
		return -1;
	if (!r->eval.have || !r->runtime.have ||
	    range_of(r, &r->eval, &want->uc_eval[0].start, &want->uc_eval[0].end, &bias))
		return 0;
	if (r->cold.have)
		range_of(r, &r->cold, &want->uc_eval[1].start, &want->uc_eval[1].end, NULL);
	want->uc_runtime = (int64_t)(r->runtime.value - bias);
	if (r->version.have)
		want->uc_version = version_bytes(path, &r->version);
	else
		want->uc_version = r->aiter.have ? 0x030a : r->getcode.have ? 0x0309 : 0;
	return 1;
}

/* compiled: the table of path and its trailer (NULL when none). */
static int compiled(const char *path, void **blob, size_t *len, const struct fp_unwind_cpython **py)
{
	int fd = open(path, O_RDONLY | O_CLOEXEC), err;
	struct fp_cfi_stats st;

	*blob = NULL, *py = NULL;
	if (fd < 0)
		return -errno;
	err = fp_cfi_compile_stats(fd, blob, len, &st);
	close(fd);
	if (err)
		return err;
	CHECK_EQ_INT(fp_unwind_table_check(*blob, *len), 0);
	*py = fp_unwind_table_cpython(*blob, *len);
	CHECK_EQ_INT(st.cs_cpython, *py != NULL);
	CHECK_EQ_INT(!!(((const struct fp_unwind_header *)*blob)->uh_flags & FP_UNWIND_F_CPYTHON),
		     *py != NULL);
	return 0;
}

static void print_trailer(const char *what, const struct fp_unwind_cpython *py)
{
	printf("  %s: version %#x, runtime %#llx, eval [%#x, %#x), cold [%#x, %#x)\n", what,
	       py->uc_version, (unsigned long long)py->uc_runtime, py->uc_eval[0].start,
	       py->uc_eval[0].end, py->uc_eval[1].start, py->uc_eval[1].end);
}

static void check_same(const struct fp_unwind_cpython *got, const struct fp_unwind_cpython *want)
{
	int i;

	CHECK_EQ_INT(got->uc_version, want->uc_version);
	CHECK_EQ_INT(got->uc_pad, 0);
	CHECK_EQ_INT(got->uc_runtime, want->uc_runtime);
	for (i = 0; i < FP_UNWIND_CPYTHON_RANGES; i++) {
		CHECK_EQ_INT(got->uc_eval[i].start, want->uc_eval[i].start);
		CHECK_EQ_INT(got->uc_eval[i].end, want->uc_eval[i].end);
	}
}

/* check_interpreter: path's table has the trailer readelf predicts, with
 * version want_version (a CPython of that version); 0 when it was
 * checked, -1 when skipped. */
static int check_interpreter(const char *path, uint32_t want_version, struct rfile *r,
			     struct fp_unwind_cpython *got_out)
{
	const struct fp_unwind_cpython *py;
	struct fp_unwind_cpython want, direct;
	struct timespec t0, t1, t2;
	void *blob;
	size_t len;
	int fd;

	if (access(path, R_OK)) {
		printf("  %s: not there, skipped\n", path);
		return -1;
	}
	if (expected(path, &want, r) != 1) {
		CHECK(!"readelf finds no interpreter");
		return -1;
	}
	clock_gettime(CLOCK_MONOTONIC, &t0);
	CHECK_EQ_INT(compiled(path, &blob, &len, &py), 0);
	clock_gettime(CLOCK_MONOTONIC, &t1);
	CHECK(py != NULL);
	if (!py) {
		free(blob);
		return -1;
	}
	print_trailer(path, py);
	check_same(py, &want);
	CHECK_EQ_INT(py->uc_version, want_version);
	/* The agent's sum gives _PyRuntime's link-time address. */
	{
		uint64_t bias = 0;
		uint32_t s, e;

		CHECK_EQ_INT(range_of(r, &r->eval, &s, &e, &bias), 0);
		CHECK((uint64_t)py->uc_runtime + bias == r->runtime.value);
	}
	CHECK(py->uc_eval[0].end - py->uc_eval[0].start == r->eval.size);
	CHECK(fp_unwind_table_needed(blob, len));
	fd = open(path, O_RDONLY | O_CLOEXEC);
	CHECK_EQ_INT(fp_pyinterp_find_fd(fd, &direct), 1);
	clock_gettime(CLOCK_MONOTONIC, &t2);
	close(fd);
	check_same(&direct, &want);
	printf("  %s: table %zu bytes (trailer %zu), compile %.2f ms, of it the "
	       "interpreter look-up about %.3f ms\n",
	       path, len, sizeof(*py),
	       (t1.tv_sec - t0.tv_sec) * 1e3 + (t1.tv_nsec - t0.tv_nsec) / 1e6,
	       (t2.tv_sec - t1.tv_sec) * 1e3 + (t2.tv_nsec - t1.tv_nsec) / 1e6);
	if (got_out)
		*got_out = *py;
	free(blob);
	return 0;
}

/* The machine's own interpreter: Debian bookworm's 3.11, stripped (no
 * .symtab, so no .cold), without frame pointers. */
static void test_host_python(void)
{
	char path[PATH_MAX];
	struct fp_unwind_cpython got;
	struct rfile r;

	if (!realpath("/usr/bin/python3.11", path)) {
		printf("  /usr/bin/python3.11 not installed: skipped\n");
		return;
	}
	if (check_interpreter(path, 0x030b, &r, &got))
		return;
	CHECK(r.version.have); /* 3.11 exports Py_Version */
	if (!r.cold.have) {
		CHECK_EQ_INT(got.uc_eval[1].start, 0);
		CHECK_EQ_INT(got.uc_eval[1].end, 0);
	}
	/* The symbolizer compiles in a child: the trailer comes through. */
	{
		const struct fp_unwind_cpython *py;
		void *blob = NULL;
		size_t len = 0;
		int fd = open(path, O_RDONLY | O_CLOEXEC);

		CHECK_EQ_INT(fp_cfi_compile_isolated(fd, &blob, &len), 0);
		close(fd);
		py = fp_unwind_table_cpython(blob, len);
		CHECK(py && !memcmp(py, &got, sizeof(got)));
		free(blob);
	}
}

/* A file that is no interpreter has no trailer. */
static void test_not_python(void)
{
	static const char *const files[] = { "/usr/lib/x86_64-linux-gnu/libc.so.6",
					     "/usr/lib/aarch64-linux-gnu/libc.so.6",
					     "/proc/self/exe" };
	const struct fp_unwind_cpython *py;
	size_t i, len;
	void *blob;

	for (i = 0; i < sizeof(files) / sizeof(files[0]); i++) {
		const struct fp_unwind_header *h;

		if (access(files[i], R_OK) || compiled(files[i], &blob, &len, &py))
			continue;
		h = blob;
		CHECK(py == NULL);
		CHECK(!(h->uh_flags & FP_UNWIND_F_CPYTHON));
		CHECK_EQ_INT(len, sizeof(*h) + (size_t)h->uh_nrows * sizeof(struct fp_unwind_row));
		printf("  %s: no trailer, %zu bytes\n", files[i], len);
		free(blob);
	}
}

static int build_id_of(const char *path, char *out, size_t cap)
{
	char cmd[PATH_MAX + 64];
	FILE *p;
	int ok;

	snprintf(cmd, sizeof(cmd), "readelf -n '%s' 2>/dev/null | sed -n 's/^ *Build ID: //p'",
		 path);
	if (!(p = popen(cmd, "r")))
		return -1;
	ok = fgets(out, (int)cap, p) != NULL;
	pclose(p);
	out[strcspn(out, "\n")] = 0;
	return ok && strlen(out) > 2 ? 0 : -1;
}

/* Debian's 3.9 (bullseye) and 3.13 (trixie), when provisioned: the
 * version, 3.9's from PyFrame_GetCode; with their -dbg files, the .cold
 * part in an unstripped copy (eu-unstrip), whose range must be the debug
 * file's .cold symbol through the stripped binary's segments; the debug
 * file alone holds no code and is no interpreter. */
static void test_provisioned(void)
{
	static const struct {
		const char *tree, *exe;
		uint32_t version;
	} pys[] = { { "bullseye", "python3.9", 0x0309 }, { "trixie", "python3.13", 0x030d } };
	size_t i;

	for (i = 0; i < sizeof(pys) / sizeof(pys[0]); i++) {
		char exe[PATH_MAX], dbg[PATH_MAX], bid[128], dir[256];
		char full[PATH_MAX + 16], cmd[4 * PATH_MAX];
		struct fp_unwind_cpython got, direct, fullpy;
		struct rfile r, rd, rf;
		uint32_t s, e;
		int fd;

		snprintf(exe, sizeof(exe), PY_CACHE "/%s/usr/bin/%s", pys[i].tree, pys[i].exe);
		if (check_interpreter(exe, pys[i].version, &r, &got))
			continue; /* printed why */
		if (pys[i].version == 0x0309)
			CHECK(!r.version.have && r.getcode.have && !r.aiter.have);
		if (build_id_of(exe, bid, sizeof(bid))) {
			CHECK(!"no build-ID");
			continue;
		}
		snprintf(dbg, sizeof(dbg), PY_CACHE "/%s/usr/lib/debug/.build-id/%.2s/%s.debug",
			 pys[i].tree, bid, bid + 2);
		if (access(dbg, R_OK)) {
			printf("  %s: no -dbg file, .cold not checked\n", exe);
			continue;
		}
		/* The detached debug file: symbols, but no code in the file. */
		fd = open(dbg, O_RDONLY | O_CLOEXEC);
		CHECK_EQ_INT(fp_pyinterp_find_fd(fd, &direct), 0);
		close(fd);
		CHECK_EQ_INT(readelf_file(dbg, &rd), 0);
		CHECK(rd.cold.have);
		if (!rd.cold.have || check_tmpdir(dir, sizeof(dir), "pyinterp"))
			continue;
		snprintf(full, sizeof(full), "%s/full", dir);
		snprintf(cmd, sizeof(cmd), "eu-unstrip -o '%s' '%s' '%s' 2>/dev/null", full, exe,
			 dbg);
		if (system(cmd) != 0) {
			printf("  no eu-unstrip: .cold of %s not checked\n", exe);
		} else if (check_interpreter(full, pys[i].version, &rf, &fullpy) == 0) {
			/* The debug file's .cold through the stripped binary's segments. */
			CHECK_EQ_INT(range_of(&r, &rd.cold, &s, &e, NULL), 0);
			CHECK_EQ_INT(fullpy.uc_eval[1].start, s);
			CHECK_EQ_INT(fullpy.uc_eval[1].end, e);
			CHECK(e > s);
			CHECK_EQ_INT(fullpy.uc_eval[0].start, got.uc_eval[0].start);
			CHECK_EQ_INT(fullpy.uc_runtime, got.uc_runtime);
			/* The stripped binary has no .symtab: no .cold. */
			CHECK_EQ_INT(got.uc_eval[1].end, 0);
		}
		CHECK_EQ_INT(check_rmtree(dir), 0);
	}
}

/* Small shared objects, one rule each. */
static const char synth_src[] =
	"#ifdef EVAL\n"
	"__attribute__((noinline, cold)) void py_slow(volatile int *p, int i) { p[i] = -p[i]; }\n"
	"int _PyEval_EvalFrameDefault(volatile int *p, int n) {\n"
	"	int s = 0;\n"
	"	for (int i = 0; i < n; i++) { if (p[i] < 0) { py_slow(p, i); s -= 3; } s += p[i]; }\n"
	"	return s; }\n"
	"#endif\n"
	"#ifdef EVAL_UNDEF\n"
	"extern int _PyEval_EvalFrameDefault(volatile int *p, int n);\n"
	"int call_eval(volatile int *p) { return _PyEval_EvalFrameDefault(p, 1) + 1; }\n"
	"#endif\n"
	"#ifdef RUNTIME\n"
	"struct { long a[8]; } _PyRuntime = { { 1 } };\n"
	"#endif\n"
	"#ifdef RUNTIME_FUNC\n"
	"void _PyRuntime(void) {}\n"
	"#endif\n"
	"#ifdef VERSION\n"
	"const unsigned long Py_Version = VERSION;\n"
	"#endif\n"
	"#ifdef AITER\n"
	"int PyAIter_Check(void *o) { return o != 0; }\n"
	"#endif\n"
	"#ifdef AITER_LOCAL\n"
	"static __attribute__((used, noinline)) int PyAIter_Check(void *o) { return o != 0; }\n"
	"#endif\n"
	"#ifdef GETCODE\n"
	"void *PyFrame_GetCode(void *f) { return (char *)f + 8; }\n"
	"#endif\n"
	"#ifdef FRAMES\n"
	"void sink(volatile int *p);\n"
	"int f0(int n) { volatile int a[8]; sink(a); return a[n & 7]; }\n"
	"#define F(k, j) int f##k(int n) { volatile int a[8]; a[n & 7] = f##j(n + 1); sink(a); return a[1]; }\n"
	"F(1,0) F(2,1) F(3,2) F(4,3) F(5,4) F(6,5) F(7,6) F(8,7) F(9,8) F(10,9) F(11,10) F(12,11)\n"
	"F(13,12) F(14,13) F(15,14) F(16,15) F(17,16) F(18,17) F(19,18) F(20,19)\n"
	"#endif\n";

struct synth {
	const char *name, *defs;
	int is_python;
	uint32_t version;
	int cold;
	int keeps_fp;
};

/* sparse: a copy of so with the section holding Py_Version made NOBITS,
 * as a copy fetched from a device without .rodata is. */
static int sparse_copy(const char *so, const char *out, unsigned ndx)
{
	char cmd[2 * PATH_MAX];
	uint32_t nobits = SHT_NOBITS;
	Elf64_Ehdr eh;
	int fd, ok;

	snprintf(cmd, sizeof(cmd), "cp '%s' '%s'", so, out);
	if (system(cmd) != 0 || (fd = open(out, O_RDWR)) < 0)
		return -1;
	ok = pread(fd, &eh, sizeof(eh), 0) == sizeof(eh) &&
	     pwrite(fd, &nobits, 4, (off_t)(eh.e_shoff + ndx * eh.e_shentsize + 4)) == 4;
	close(fd);
	return ok ? 0 : -1;
}

static void test_synthetic(void)
{
	static const struct synth cases[] = {
		{ "v312", "-DEVAL -DRUNTIME -DVERSION=0x030c02f0 -DAITER -DGETCODE", 1, 0x030c, 1,
		  0 },
		{ "v310", "-DEVAL -DRUNTIME -DAITER -DGETCODE", 1, 0x030a, 1, 0 },
		{ "v39", "-DEVAL -DRUNTIME -DGETCODE", 1, 0x0309, 1, 0 },
		{ "unknown", "-DEVAL -DRUNTIME", 1, 0, 1, 0 },
		/* PyAIter_Check only in .symtab: not a dynamic symbol. */
		{ "aiter_local", "-DEVAL -DRUNTIME -DAITER_LOCAL -DGETCODE", 1, 0x0309, 1, 0 },
		/* A garbage major version: unknown. */
		{ "v0", "-DEVAL -DRUNTIME -DVERSION=0x000b0000 -DAITER", 1, 0, 1, 0 },
		/* Built with frame pointers: the trailer still comes, and the
		 * table is still needed. */
		{ "fp", "-DEVAL -DRUNTIME -DVERSION=0x030d00f0 -DFRAMES -fno-omit-frame-pointer", 1,
		  0x030d, 1, 1 },
		/* Stripped: .dynsym only, no .cold. */
		{ "stripped", "-DEVAL -DRUNTIME -DVERSION=0x030b04f0 -s", 1, 0x030b, 0, 0 },
		{ "no_runtime", "-DEVAL -DVERSION=0x030b04f0", 0, 0, 0, 0 },
		{ "runtime_func", "-DEVAL -DRUNTIME_FUNC -DVERSION=0x030b04f0", 0, 0, 0, 0 },
		/* A program linked against libpython: references only. */
		{ "eval_undef", "-DEVAL_UNDEF -DRUNTIME -DVERSION=0x030b04f0", 0, 0, 0, 0 },
	};
	char dir[256], src[PATH_MAX], cmd[4 * PATH_MAX];
	size_t i;
	FILE *f;

	if (check_tmpdir(dir, sizeof(dir), "pyinterp_syn")) {
		CHECK(!"check_tmpdir");
		return;
	}
	snprintf(src, sizeof(src), "%s/py.c", dir);
	if (!(f = fopen(src, "w"))) {
		CHECK(!"fopen");
		return;
	}
	fputs(synth_src, f);
	fclose(f);
	for (i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
		const struct synth *c = &cases[i];
		const struct fp_unwind_cpython *py;
		const struct fp_unwind_header *h;
		struct fp_unwind_cpython want;
		char so[512];
		struct rfile r;
		void *blob;
		size_t len;

		snprintf(so, sizeof(so), "%s/%s.so", dir, c->name);
		/* -Ttext-segment: link-time addresses are not file offsets. */
		snprintf(cmd, sizeof(cmd),
			 "cc -O2 -fPIC -shared -nostdlib -Wl,-Ttext-segment=0x200000 %s -o %s %s "
			 "2>/dev/null",
			 c->defs, so, src);
		if (system(cmd) != 0) {
			printf("  no C compiler: synthetic interpreters not tested\n");
			break;
		}
		CHECK_EQ_INT(expected(so, &want, &r), c->is_python);
		CHECK_EQ_INT(compiled(so, &blob, &len, &py), 0);
		if (!blob)
			continue;
		h = blob;
		CHECK_EQ_INT((py != NULL), c->is_python);
		CHECK_EQ_INT(!!(h->uh_flags & FP_UNWIND_F_FRAME_POINTERS), c->keeps_fp);
		if (py) {
			check_same(py, &want);
			CHECK_EQ_INT(py->uc_version, c->version);
			CHECK_EQ_INT(py->uc_eval[1].end > py->uc_eval[1].start, c->cold);
			/* Not the link-time address: 0x200000 lower. */
			CHECK(py->uc_eval[0].start < 0x200000);
			CHECK(fp_unwind_table_needed(blob, len));
		} else {
			CHECK_EQ_INT(len, sizeof(*h) + (size_t)h->uh_nrows *
							       sizeof(struct fp_unwind_row));
			CHECK_EQ_INT(fp_unwind_table_needed(blob, len), !c->keeps_fp);
		}
		printf("  %-12s %s, flags %u\n", c->name, py ? "CPython" : "not CPython",
		       h->uh_flags);
		if (py)
			print_trailer(c->name, py);
		/* The same file without Py_Version's bytes: version unknown, the
		 * rest unchanged. */
		if (py && r.version.have) {
			char sp[PATH_MAX];
			const struct fp_unwind_cpython *spy;
			void *sblob;
			size_t slen;

			snprintf(sp, sizeof(sp), "%s.sparse", so);
			CHECK_EQ_INT(sparse_copy(so, sp, r.version.ndx), 0);
			CHECK_EQ_INT(compiled(sp, &sblob, &slen, &spy), 0);
			CHECK(spy != NULL);
			if (spy) {
				want.uc_version = 0;
				check_same(spy, &want);
			}
			free(sblob);
		}
		free(blob);
	}
	CHECK_EQ_INT(check_rmtree(dir), 0);
}

/* Not ELF, or not 64-bit little-endian: no answer. */
static void test_not_elf(void)
{
	struct fp_unwind_cpython py;
	int fd = open("/etc/hostname", O_RDONLY | O_CLOEXEC);

	CHECK(fd >= 0);
	CHECK_EQ_INT(fp_pyinterp_find_fd(fd, &py), -EINVAL);
	CHECK_EQ_INT(py.uc_version, 0);
	close(fd);
	CHECK_EQ_INT(fp_pyinterp_find(NULL, &py), -EINVAL);
}

int main(void)
{
	RUN(test_host_python);
	RUN(test_not_python);
	RUN(test_provisioned);
	RUN(test_synthetic);
	RUN(test_not_elf);
	return CHECK_DONE();
}
