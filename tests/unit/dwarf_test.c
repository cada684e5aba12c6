/* dwarf_test.c: DWARF line tables and inline frames (dwarf.c, symtab.c),
 * checked against llvm-symbolizer on programs compiled here with gcc and
 * clang (DWARF 4 and 5, compressed sections, detached debug files,
 * MiniDebugInfo) and on libc's real debug file; .gnu_debuglink; broken
 * DWARF; ingest time, table size and look-up speed. */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE /* memfd_create */
#endif
#include <errno.h>
#include <fcntl.h>
#include <gelf.h>
#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "check.h"
#include "dwarf.h"
#include "elfnote.h"
#include "elfsyms.h"
#include "symtab.h"

#if defined(__SANITIZE_ADDRESS__)
#define SANITIZED 1
#elif defined(__has_feature)
#if __has_feature(address_sanitizer)
#define SANITIZED 1
#endif
#endif
#ifndef SANITIZED
#define SANITIZED 0
#endif

#define MAX_FRAMES 32
#define NADDRS 2000

static char tmpdir[64];
static char libc_debug[320]; /* "" without libc6-dbg */
static int have_llvm;

static double now_sec(clockid_t clk)
{
	struct timespec ts;

	clock_gettime(clk, &ts);
	return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

static uint64_t rng_state = 0x2545f4914f6cdd1dull;

static uint64_t rng(void)
{
	rng_state ^= rng_state >> 12;
	rng_state ^= rng_state << 25;
	rng_state ^= rng_state >> 27;
	return rng_state * 0x2545f4914f6cdd1dull;
}

/* sh: run a shell command quietly; 0 on success. */
static int sh(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
static int sh(const char *fmt, ...)
{
	char cmd[4096];
	va_list ap;
	int n;

	va_start(ap, fmt);
	n = vsnprintf(cmd, sizeof(cmd), fmt, ap);
	va_end(ap);
	if (n < 0 || (size_t)n >= sizeof(cmd))
		return -1;
	return system(cmd) == 0 ? 0 : -1;
}

static void *slurp(const char *path, size_t *len)
{
	struct stat st;
	char *buf;
	int fd = open(path, O_RDONLY);

	if (fd < 0)
		return NULL;
	if (fstat(fd, &st) != 0 || !(buf = malloc((size_t)st.st_size + 1))) {
		close(fd);
		return NULL;
	}
	if (read(fd, buf, (size_t)st.st_size) != st.st_size) {
		free(buf);
		close(fd);
		return NULL;
	}
	buf[st.st_size] = '\0';
	close(fd);
	*len = (size_t)st.st_size;
	return buf;
}

static int table_of(const char *path, void **blob, size_t *len, struct fp_symtab *t,
		    struct fp_dwarf_stats *ds)
{
	int fd = open(path, O_RDONLY | O_CLOEXEC), err;

	if (fd < 0)
		return -errno;
	err = fp_elf_symtab_stats(fd, blob, len, ds);
	close(fd);
	if (err)
		return err;
	err = fp_symtab_open(t, *blob, *len);
	if (err)
		free(*blob);
	return err;
}

/* ---- the programs ---------------------------------------------------- */

static const char cxx_source[] =
	"#include <algorithm>\n"
	"#include <map>\n"
	"#include <string>\n"
	"#include <vector>\n"
	"namespace ns {\n"
	"struct Klass {\n"
	"	int method(int);\n"
	"	long total = 0;\n"
	"};\n"
	"template <typename T> __attribute__((always_inline)) inline T mix(T a, T b)\n"
	"{\n"
	"	return a * 31 + (b ^ (a >> 3));\n"
	"}\n"
	"template <typename T> __attribute__((always_inline)) inline T fold(const T *v, int n)\n"
	"{\n"
	"	T acc = 0;\n"
	"	for (int i = 0; i < n; i++)\n"
	"		acc = mix<T>(acc, v[i]);\n"
	"	return acc;\n"
	"}\n"
	"__attribute__((always_inline)) inline int helper(int x)\n"
	"{\n"
	"	int v[4] = { x, x + 1, x * 2, x ^ 7 };\n"
	"	return fold<int>(v, 4) + 1;\n"
	"}\n"
	"__attribute__((noinline)) int Klass::method(int x)\n"
	"{\n"
	"	int s = 0;\n"
	"	for (int i = 0; i < x; i++)\n"
	"		s += helper(i);\n"
	"	total += s;\n"
	"	return s;\n"
	"}\n"
	"template <typename K> __attribute__((noinline)) long tally(const std::vector<K> &keys)\n"
	"{\n"
	"	std::map<K, long> m;\n"
	"	for (const K &k : keys)\n"
	"		m[k] += mix<long>((long)k, 3);\n"
	"	long t = 0;\n"
	"	for (auto &kv : m)\n"
	"		t += kv.second;\n"
	"	return t;\n"
	"}\n"
	"template long tally<int>(const std::vector<int> &);\n"
	"} // namespace ns\n"
	"static __attribute__((noinline)) int local_work(std::vector<int> &v)\n"
	"{\n"
	"	std::sort(v.begin(), v.end());\n"
	"	return (int)(std::unique(v.begin(), v.end()) - v.begin());\n"
	"}\n"
	"static __attribute__((noinline)) std::string label(int n)\n"
	"{\n"
	"	std::string s = \"n=\";\n"
	"	s += std::to_string(n);\n"
	"	return s;\n"
	"}\n"
	"extern \"C\" __attribute__((noinline)) int c_entry(int x)\n"
	"{\n"
	"	return ns::helper(x) - 1;\n"
	"}\n"
	"int main(int argc, char **argv)\n"
	"{\n"
	"	ns::Klass k;\n"
	"	std::vector<int> v;\n"
	"	for (int i = 0; i < 100 * argc; i++)\n"
	"		v.push_back((i * 7919) % 101);\n"
	"	int u = local_work(v);\n"
	"	long t = ns::tally<int>(v);\n"
	"	std::string s = label(u);\n"
	"	return k.method(argc) + (int)t + c_entry(argc) + (int)s.size() + (argv[0][0] == 0);\n"
	"}\n";

struct prog {
	const char *name;
	const char *cc;
	const char *flags;
	int built;
};

static struct prog progs[] = {
	{ "gcc4", "g++", "-O2 -g -gdwarf-4" },
	{ "gcc5", "g++", "-O2 -g -gdwarf-5" },
	{ "clang4", "clang++", "-O2 -g -gdwarf-4" },
	{ "clang5", "clang++", "-O2 -g -gdwarf-5" },
	{ "gcc5_gz", "g++", "-O2 -g -gdwarf-5 -gz" },
	{ "clang5_gz", "clang++", "-O2 -g -gdwarf-5 -gz" },
	{ "gcc4_gnuz", "g++", "-O2 -g -gdwarf-4 -gz=zlib-gnu" },
};
#define NPROGS (sizeof(progs) / sizeof(progs[0]))

static void setup(void)
{
	char line[256] = "";
	FILE *p;

	if (check_tmpdir(tmpdir, sizeof(tmpdir), "dwarf_test")) {
		tmpdir[0] = '\0'; /* nothing for cleanup to remove */
		CHECK(!"check_tmpdir");
	}
	have_llvm = system("llvm-symbolizer --version >/dev/null 2>&1") == 0;
	if (!have_llvm)
		printf("SKIP: %s:llvm_comparisons (no llvm-symbolizer)\n", __FILE__);
	p = popen("readelf -n /lib/x86_64-linux-gnu/libc.so.6 2>/dev/null | "
		  "sed -n 's/.*Build ID: \\([0-9a-f]*\\).*/\\1/p'",
		  "r");
	if (p) {
		if (fgets(line, sizeof(line), p))
			line[strcspn(line, "\n")] = '\0';
		pclose(p);
	}
	if (strlen(line) > 2)
		snprintf(libc_debug, sizeof(libc_debug), "/usr/lib/debug/.build-id/%.2s/%s.debug",
			 line, line + 2);
	if (!libc_debug[0] || access(libc_debug, R_OK) != 0) {
		printf("SKIP: %s:libc_debug_file (install libc6-dbg)\n", __FILE__);
		libc_debug[0] = '\0';
	}
	{
		char src[128];
		FILE *f;

		snprintf(src, sizeof(src), "%s/prog.cc", tmpdir);
		f = fopen(src, "w");
		CHECK(f != NULL);
		if (!f)
			return;
		fputs(cxx_source, f);
		fclose(f);
	}
	for (size_t i = 0; i < NPROGS; i++) {
		progs[i].built = sh("%s %s -o '%s/%s' '%s/prog.cc' >/dev/null 2>&1", progs[i].cc,
				    progs[i].flags, tmpdir, progs[i].name, tmpdir) == 0;
		if (!progs[i].built)
			printf("SKIP: %s:build_%s (%s %s failed)\n", __FILE__, progs[i].name,
			       progs[i].cc, progs[i].flags);
	}
}

/* ---- reference: functions, random addresses, llvm-symbolizer ------------ */

struct func {
	uint64_t addr, size;
};

/* text_functions: the sized text symbols of path (nm), merged where they
 * overlap. */
static size_t text_functions(const char *path, struct func **out)
{
	char cmd[512], line[4096];
	struct func *v = NULL;
	size_t n = 0, cap = 0;
	FILE *p;

	snprintf(cmd, sizeof(cmd), "nm -S --defined-only '%s' 2>/dev/null", path);
	p = popen(cmd, "r");
	if (!p)
		return 0;
	while (fgets(line, sizeof(line), p)) {
		unsigned long long addr, size;
		char type;

		if (sscanf(line, "%llx %llx %c", &addr, &size, &type) != 3)
			continue;
		if (!strchr("TtWwi", type) || size == 0)
			continue;
		if (n == cap) {
			cap = cap ? cap * 2 : 256;
			v = realloc(v, cap * sizeof(*v));
		}
		v[n++] = (struct func){ addr, size };
	}
	pclose(p);
	*out = v;
	return n;
}

/* random_addrs: n addresses uniformly spread over the functions' bytes. */
static void random_addrs(const struct func *f, size_t nf, uint64_t *addrs, size_t n)
{
	uint64_t total = 0;

	for (size_t i = 0; i < nf; i++)
		total += f[i].size;
	for (size_t k = 0; k < n; k++) {
		uint64_t r = rng() % total;
		size_t i = 0;

		while (r >= f[i].size)
			r -= f[i++].size;
		addrs[k] = f[i].addr + r;
	}
}

struct ref_frame {
	char *function; /* "??" if unknown */
	char *file;     /* "??" if unknown */
	uint32_t line, column;
};

struct ref_addr {
	struct ref_frame frames[MAX_FRAMES];
	int n;
};

/* llvm_symbolize: llvm-symbolizer's frames for each address, run once
 * with every address on its standard input.  The text is kept in *text. */
static int llvm_symbolize(const char *obj, const char *extra, const uint64_t *addrs, size_t n,
			  struct ref_addr *out, char **text)
{
	char in[128], res[128], *buf, *line, *save = NULL;
	size_t len = 0, k = 0;
	FILE *f;
	int nl = 0;

	snprintf(in, sizeof(in), "%s/addrs.txt", tmpdir);
	snprintf(res, sizeof(res), "%s/symbolized.txt", tmpdir);
	f = fopen(in, "w");
	if (!f)
		return -1;
	for (size_t i = 0; i < n; i++)
		fprintf(f, "0x%llx\n", (unsigned long long)addrs[i]);
	fclose(f);
	if (sh("llvm-symbolizer %s --obj='%s' < '%s' > '%s' 2>/dev/null", extra, obj, in, res))
		return -1;
	buf = slurp(res, &len);
	if (!buf)
		return -1;
	memset(out, 0, n * sizeof(*out));
	/* blocks of FUNCTION / FILE:LINE:COLUMN pairs, a blank line after
	 * each address */
	for (char *p = buf; k < n && p < buf + len;) {
		char *eol = strchr(p, '\n');

		if (!eol)
			break;
		*eol = '\0';
		line = p;
		p = eol + 1;
		if (!line[0]) {
			if (nl % 2 == 0 && out[k].n)
				k++;
			nl = 0;
			continue;
		}
		if (nl % 2 == 0) {
			if (out[k].n < MAX_FRAMES)
				out[k].frames[out[k].n].function = line;
		} else if (out[k].n < MAX_FRAMES) {
			struct ref_frame *fr = &out[k].frames[out[k].n];
			char *c2 = strrchr(line, ':'), *c1;

			fr->file = line;
			if (c2) {
				*c2 = '\0';
				c1 = strrchr(line, ':');
				if (c1) {
					*c1 = '\0';
					fr->line = (uint32_t)strtoul(c1 + 1, NULL, 10);
					fr->column = (uint32_t)strtoul(c2 + 1, NULL, 10);
				}
			}
			out[k].n++;
		}
		nl++;
	}
	(void)save;
	*text = buf;
	return k == n ? 0 : -1;
}

struct agreement {
	size_t addrs, agree, files_agree, frames, inlined, undemangled, versioned;
};

static const char *or_unknown(const char *s)
{
	return s ? s : "??";
}

/* compare: our frames against llvm-symbolizer's for each address:
 * same number of frames, and for every frame the same function name and
 * line (and, counted apart, file).  names_only: function names alone
 * (tables without DWARF). */
static void compare(const char *what, const struct fp_symtab *t, const uint64_t *addrs, size_t n,
		    const struct ref_addr *ref, int names_only, struct agreement *a)
{
	int shown = 0;

	memset(a, 0, sizeof(*a));
	for (size_t i = 0; i < n; i++) {
		struct fp_symframe fr[MAX_FRAMES];
		int got = fp_symtab_lookup_frames(t, addrs[i], fr, MAX_FRAMES), ok, files_ok = 1;
		int undemangled = 0, versioned = 0;
		int want = ref[i].n;

		/* llvm-symbolizer prints one "??" frame for nothing */
		if (got == 0 && want == 1 && !strcmp(ref[i].frames[0].function, "??") &&
		    !strcmp(ref[i].frames[0].file, "??"))
			want = 0;
		ok = names_only ? got >= 1 && want >= 1 : got == want;
		for (int k = 0; ok && k < (names_only ? 1 : got); k++) {
			const struct ref_frame *r = &ref[i].frames[names_only ? ref[i].n - 1 : k];
			const struct fp_symframe *f = &fr[names_only ? got - 1 : k];

			if (strcmp(or_unknown(f->sf_function), r->function) != 0) {
				/* LLVM 14's demangler gives up on some names the
				 * runtime's demangles (std::enable_if<...::value>
				 * return types): then it prints the mangled name,
				 * which is our system name. */
				if (f->sf_system_name && r->function[0] == '_' &&
				    r->function[1] == 'Z' &&
				    strcmp(f->sf_system_name, r->function) == 0)
					undemangled = 1;
				/* It keeps ELF symbol versions, which we
				 * show in the system name only. */
				else if (f->sf_function && f->sf_system_name &&
					 strcmp(f->sf_system_name, r->function) == 0 &&
					 strlen(f->sf_function) ==
						 fp_elf_unversioned_len(r->function,
									strlen(r->function)) &&
					 strncmp(f->sf_function, r->function,
						 strlen(f->sf_function)) == 0)
					versioned = 1;
				else
					ok = 0;
			}
			if (!names_only && f->sf_line != r->line)
				ok = 0;
			if (!names_only && strcmp(or_unknown(f->sf_file), r->file) != 0)
				files_ok = 0;
		}
		a->addrs++;
		a->agree += ok;
		a->undemangled += ok && undemangled;
		a->versioned += ok && versioned;
		a->files_agree += ok && files_ok;
		a->frames += got > 0 ? (size_t)got : 0;
		a->inlined += got > 1;
		if ((!ok || !files_ok) && shown < 6) {
			shown++;
			fprintf(stderr, "  %s: 0x%llx differs:\n", what,
				(unsigned long long)addrs[i]);
			for (int k = 0; k < got; k++)
				fprintf(stderr, "    ours %s %s:%u:%u\n",
					or_unknown(fr[k].sf_function), or_unknown(fr[k].sf_file),
					fr[k].sf_line, fr[k].sf_column);
			for (int k = 0; k < ref[i].n; k++)
				fprintf(stderr, "    llvm %s %s:%u:%u\n", ref[i].frames[k].function,
					ref[i].frames[k].file, ref[i].frames[k].line,
					ref[i].frames[k].column);
		}
	}
}

/* check_against_llvm: random addresses inside the functions of fn_path,
 * looked up in the table of table_path and by llvm-symbolizer on
 * llvm_path. */
static void check_against_llvm(const char *what, const char *table_path, const char *fn_path,
			       const char *llvm_path, const char *llvm_extra, int names_only,
			       double min_agree)
{
	struct ref_addr *ref = calloc(NADDRS, sizeof(*ref));
	uint64_t addrs[NADDRS];
	struct func *funcs = NULL;
	struct fp_dwarf_stats ds;
	struct agreement a;
	struct fp_symtab t;
	char *text = NULL;
	void *blob = NULL;
	size_t len = 0, nf;
	int err;

	if (!have_llvm || !ref) {
		free(ref);
		return;
	}
	err = table_of(table_path, &blob, &len, &t, &ds);
	CHECK_EQ_INT(err, 0);
	nf = text_functions(fn_path, &funcs);
	CHECK(nf > 0);
	if (err || !nf) {
		free(funcs);
		free(ref);
		return;
	}
	random_addrs(funcs, nf, addrs, NADDRS);
	err = llvm_symbolize(llvm_path, llvm_extra, addrs, NADDRS, ref, &text);
	CHECK_EQ_INT(err, 0);
	if (!err) {
		compare(what, &t, addrs, NADDRS, ref, names_only, &a);
		printf("  %-10s %5zu addresses: %.2f%% agree with llvm-symbolizer (function%s; "
		       "%zu of them where it could not demangle, %zu where it shows an ELF "
		       "symbol version), %.2f%% with files too; %zu "
		       "inlined, %.2f frames/address; table %zu bytes (%u scopes, %u inlined, %llu "
		       "line rows)\n",
		       what, a.addrs, 100.0 * (double)a.agree / (double)a.addrs,
		       names_only ? "" : " and line of every frame", a.undemangled, a.versioned,
		       100.0 * (double)a.files_agree / (double)a.addrs, a.inlined,
		       (double)a.frames / (double)a.addrs, len, ds.ds_scopes, ds.ds_inlined,
		       (unsigned long long)ds.ds_rows);
		CHECK((double)a.agree >= min_agree * (double)a.addrs);
		if (!names_only)
			CHECK(a.inlined > 0 || !strcmp(what, "libc"));
		/* libc's debug file names functions "getgrnam_r@@GLIBC_2.2.5" */
		if (!strcmp(what, "libc"))
			CHECK(a.versioned > 0);
	}
	free(text);
	free(funcs);
	free(ref);
	free(blob);
}

static void test_programs_against_llvm(void)
{
	char path[128];

	for (size_t i = 0; i < NPROGS; i++) {
		if (!progs[i].built)
			continue;
		snprintf(path, sizeof(path), "%s/%s", tmpdir, progs[i].name);
		check_against_llvm(progs[i].name, path, path, path, "", 0, 0.99);
	}
}

static void test_libc_against_llvm(void)
{
	if (!libc_debug[0])
		return;
	check_against_llvm("libc", libc_debug, libc_debug, libc_debug, "", 0, 0.99);
}

/* ---- detached debug files and .gnu_debuglink ------------------------- */

/* offsets_agree: for each address, the file offset the stripped file
 * loads it from maps back to it through the debug file's table. */
static void offsets_agree(const char *stripped, const struct fp_symtab *dt, const uint64_t *addrs,
			  size_t n)
{
	int fd = open(stripped, O_RDONLY);
	size_t phnum = 0, checked = 0, bad = 0;
	Elf *e;

	elf_version(EV_CURRENT);
	e = fd >= 0 ? elf_begin(fd, ELF_C_READ, NULL) : NULL;
	if (!e || elf_getphdrnum(e, &phnum) != 0) {
		CHECK(0);
		goto out;
	}
	for (size_t i = 0; i < n; i++) {
		for (size_t k = 0; k < phnum; k++) {
			GElf_Phdr ph;
			uint64_t a = 0;

			if (!gelf_getphdr(e, (int)k, &ph) || ph.p_type != PT_LOAD ||
			    addrs[i] < ph.p_vaddr || addrs[i] - ph.p_vaddr >= ph.p_filesz)
				continue;
			checked++;
			if (fp_symtab_addr(dt, addrs[i] - ph.p_vaddr + ph.p_offset, &a) != 0 ||
			    a != addrs[i])
				bad++;
			break;
		}
	}
	printf("  %zu file offsets of the stripped file map through the debug file's table, "
	       "%zu wrong\n",
	       checked, bad);
	CHECK(checked > n / 2);
	CHECK_EQ_INT(bad, 0);
out:
	if (e)
		elf_end(e);
	if (fd >= 0)
		close(fd);
}

static void test_detached_debug_file(void)
{
	char bin[128], dbg[128], name[256];
	uint32_t crc = 0, file_crc = 1;
	struct func *funcs = NULL;
	uint64_t addrs[256];
	struct fp_symtab t;
	void *blob = NULL;
	size_t len = 0, nf;
	int fd;

	if (!progs[1].built)
		return;
	snprintf(bin, sizeof(bin), "%s/split", tmpdir);
	snprintf(dbg, sizeof(dbg), "%s/split.debug", tmpdir);
	CHECK_EQ_INT(sh("cd '%s' && cp gcc5 split && objcopy --only-keep-debug split split.debug && "
			"strip --strip-all split && objcopy --add-gnu-debuglink=split.debug split",
			tmpdir),
		     0);
	/* The link: the debug file's name and CRC. */
	fd = open(bin, O_RDONLY);
	CHECK_EQ_INT(fp_elfnote_debuglink(fd, name, sizeof(name), &crc), 0);
	CHECK(strcmp(name, "split.debug") == 0);
	CHECK_EQ_INT(fp_elfnote_debuglink(fd, name, 5, &crc), -ENAMETOOLONG);
	/* The stripped file alone has nothing to offer. */
	CHECK_EQ_INT(fp_elf_symtab(fd, &blob, &len), -ENOENT);
	close(fd);
	fd = open(dbg, O_RDONLY);
	CHECK_EQ_INT(fp_elf_debuglink_crc(fd, &file_crc), 0);
	CHECK_EQ_INT(file_crc, crc);
	CHECK_EQ_INT(fp_elfnote_debuglink(fd, name, sizeof(name), &crc), -ENOENT);
	close(fd);

	/* The debug file, against llvm-symbolizer on it.  (On the stripped
	 * file, which it would find through the link, llvm-symbolizer has no
	 * symbol table to name outermost frames from, and names them from
	 * DWARF instead: "local_work" for the symbol's "local_work(std::...)".) */
	check_against_llvm("split", dbg, dbg, dbg, "", 0, 0.99);
	CHECK_EQ_INT(table_of(dbg, &blob, &len, &t, NULL), 0);
	nf = text_functions(dbg, &funcs);
	CHECK(nf > 0);
	if (blob && nf) {
		random_addrs(funcs, nf, addrs, 256);
		offsets_agree(bin, &t, addrs, 256);
	}
	free(funcs);
	free(blob);
}

/* A debuglink naming a path, or malformed, is refused. */
static void test_bad_debuglinks(void)
{
	static const char *links[] = { "../../etc/passwd", "..", "", "a/b" };
	char path[128], name[64];
	uint32_t crc;

	if (!progs[1].built)
		return;
	snprintf(path, sizeof(path), "%s/badlink", tmpdir);
	for (size_t i = 0; i < sizeof(links) / sizeof(links[0]); i++) {
		int fd, err;

		/* name, NUL, padding, CRC: written by hand */
		CHECK_EQ_INT(sh("cd '%s' && printf '%s\\000\\000\\000\\000\\000\\000\\000\\000' "
				"> link.bin && cp gcc5 badlink && "
				"objcopy --add-section .gnu_debuglink=link.bin badlink",
				tmpdir, links[i]),
			     0);
		fd = open(path, O_RDONLY);
		err = fp_elfnote_debuglink(fd, name, sizeof(name), &crc);
		CHECK(err == -EINVAL);
		close(fd);
	}
}

/* ---- MiniDebugInfo ------------------------------------------------------ */

/* make_minidebuginfo: a stripped copy of src carrying its function
 * symbols in .gnu_debugdata, as Fedora's find-debuginfo makes it. */
static int make_minidebuginfo(const char *src, const char *out)
{
	return sh("cd '%s' && cp '%s' '%s' && "
		  "nm -D '%s' --format=posix --defined-only | awk '{ print $1 }' | sort > dynsyms && "
		  "nm '%s' --format=posix --defined-only | "
		  "awk '{ if ($2 == \"T\" || $2 == \"t\" || $2 == \"D\") print $1 }' | sort > funcsyms && "
		  "comm -13 dynsyms funcsyms > keep_symbols && "
		  "objcopy --only-keep-debug '%s' debuginfo && "
		  "objcopy -S --remove-section .gdb_index --remove-section .comment "
		  "--keep-symbols=keep_symbols debuginfo mini_debuginfo && "
		  "rm -f mini_debuginfo.xz && xz -k mini_debuginfo && "
		  "strip --strip-all '%s' && "
		  "objcopy --add-section .gnu_debugdata=mini_debuginfo.xz '%s'",
		  tmpdir, src, out, out, out, out, out, out);
}

static void test_minidebuginfo(void)
{
	char src[128], mini[128], broken[128];
	void *blob = NULL;
	size_t len = 0;
	struct fp_symtab t;
	struct fp_symbol s;
	int fd;

	if (!progs[1].built)
		return;
	snprintf(src, sizeof(src), "%s/gcc5", tmpdir);
	snprintf(mini, sizeof(mini), "%s/mini", tmpdir);
	CHECK_EQ_INT(make_minidebuginfo(src, mini), 0);
	CHECK_EQ_INT(sh("readelf -S '%s' | grep -q gnu_debugdata && ! readelf -S '%s' | grep -q "
			"'\\.symtab'",
			mini, mini),
		     0);
	/* Its functions are local (a PIE exports none): all from the
	 * MiniDebugInfo, which holds the T and t symbols only (not the weak
	 * template instances).  Names in those checked against
	 * llvm-symbolizer on the original. */
	snprintf(broken, sizeof(broken), "%s/mini_debuginfo", tmpdir);
	check_against_llvm("minidebug", mini, broken, src, "", 1, 0.99);
	CHECK_EQ_INT(table_of(mini, &blob, &len, &t, NULL), 0);
	if (blob) {
		uint64_t a = 0;
		FILE *p;
		char cmd[256], line[128] = "";

		snprintf(cmd, sizeof(cmd),
			 "nm '%s' | awk '/ _ZL10local_workRSt6vectorIiSaIiEE$/ { print $1 }'", src);
		p = popen(cmd, "r");
		if (p && fgets(line, sizeof(line), p))
			a = strtoull(line, NULL, 16);
		if (p)
			pclose(p);
		CHECK(a != 0);
		CHECK_EQ_INT(fp_symtab_lookup(&t, a + 1, &s), 0);
		if (a && fp_symtab_lookup(&t, a + 1, &s) == 0)
			CHECK(strcmp(s.sy_name,
				     "local_work(std::vector<int, std::allocator<int> >&)") == 0);
		free(blob);
	}
	/* Damaged xz data: no crash, the outer file's (no) symbols. */
	snprintf(broken, sizeof(broken), "%s/mini_broken", tmpdir);
	CHECK_EQ_INT(sh("cd '%s' && head -c 200 mini_debuginfo.xz > trunc.xz && cp gcc5 '%s' && "
			"strip --strip-all '%s' && objcopy --add-section .gnu_debugdata=trunc.xz '%s'",
			tmpdir, broken, broken, broken),
		     0);
	fd = open(broken, O_RDONLY);
	CHECK_EQ_INT(fp_elf_symtab(fd, &blob, &len), -ENOENT);
	close(fd);
}

/* ---- broken DWARF ---------------------------------------------------- */

struct sec_range {
	uint64_t off, size;
};

/* debug_sections: where the .debug_* sections of path lie in the file. */
static size_t debug_sections(const char *path, struct sec_range *out, size_t max)
{
	int fd = open(path, O_RDONLY);
	Elf_Scn *scn = NULL;
	size_t shstrndx, n = 0;
	Elf *e;

	elf_version(EV_CURRENT);
	e = fd >= 0 ? elf_begin(fd, ELF_C_READ, NULL) : NULL;
	if (e && elf_getshdrstrndx(e, &shstrndx) == 0) {
		while ((scn = elf_nextscn(e, scn)) != NULL && n < max) {
			GElf_Shdr sh;
			const char *name;

			if (!gelf_getshdr(scn, &sh))
				continue;
			name = elf_strptr(e, shstrndx, sh.sh_name);
			if (name &&
			    (!strncmp(name, ".debug_", 7) || !strncmp(name, ".zdebug_", 8)) &&
			    sh.sh_type != SHT_NOBITS)
				out[n++] = (struct sec_range){ sh.sh_offset, sh.sh_size };
		}
	}
	if (e)
		elf_end(e);
	if (fd >= 0)
		close(fd);
	return n;
}

static int memfd_with(const void *data, size_t len)
{
	int fd = memfd_create("dwarf_test", MFD_CLOEXEC);

	if (fd >= 0 && len && write(fd, data, len) != (ssize_t)len) {
		close(fd);
		return -1;
	}
	return fd;
}

/* check_damaged: a damaged file gives a table that opens and answers, or
 * an error; never a crash. */
static void check_damaged(const uint8_t *data, size_t len, int *tables)
{
	struct fp_symframe fr[MAX_FRAMES];
	struct fp_symtab t;
	void *blob = NULL;
	size_t blen = 0;
	int fd = memfd_with(data, len), err;

	if (fd < 0) {
		CHECK(0);
		return;
	}
	err = fp_elf_symtab(fd, &blob, &blen);
	close(fd);
	CHECK(err == 0 || err == -ENOENT || err == -EINVAL);
	if (err)
		return;
	(*tables)++;
	CHECK_EQ_INT(fp_symtab_open(&t, blob, blen), 0);
	for (int i = 0; i < 64; i++) {
		uint64_t a = 0x1000 + rng() % 0x2000;
		int n = fp_symtab_lookup_frames(&t, a, fr, MAX_FRAMES);

		CHECK(n >= 0 && n <= MAX_FRAMES);
		for (int k = 0; k < n; k++) {
			CHECK(!fr[k].sf_function || fr[k].sf_function[0]);
			CHECK(!fr[k].sf_file || fr[k].sf_file[0]);
			/* Inlined frames inside, the real function last, unless
			 * the chain was cut at MAX_FRAMES. */
			if (k + 1 < n)
				CHECK_EQ_INT(fr[k].sf_inlined, 1);
			else if (n < MAX_FRAMES)
				CHECK_EQ_INT(fr[k].sf_inlined, 0);
		}
	}
	free(blob);
}

static void damage_file(const char *what, const char *path, int rounds)
{
	struct sec_range secs[32];
	size_t len = 0, nsecs;
	uint8_t *data, *copy;
	int tables = 0;

	data = slurp(path, &len);
	nsecs = data ? debug_sections(path, secs, 32) : 0;
	CHECK(nsecs > 0);
	if (!nsecs) {
		free(data);
		return;
	}
	copy = malloc(len);
	for (int r = 0; r < rounds; r++) {
		const struct sec_range *sr = &secs[rng() % nsecs];
		int flips = 1 + (int)(rng() % 8);
		size_t l = len;

		memcpy(copy, data, len);
		for (int k = 0; k < flips && sr->size; k++)
			copy[sr->off + rng() % sr->size] ^= (uint8_t)(1 + rng() % 255);
		/* sometimes the file ends inside the DWARF */
		if (rng() % 8 == 0 && sr->size)
			l = sr->off + rng() % sr->size;
		check_damaged(copy, l, &tables);
	}
	printf("  %s: %d damaged copies, %d still gave a table\n", what, rounds, tables);
	free(copy);
	free(data);
}

static void test_damaged_dwarf(void)
{
	char path[128];
	int rounds = SANITIZED ? 300 : 1500;

	for (size_t i = 0; i < NPROGS; i++) {
		if (!progs[i].built)
			continue;
		snprintf(path, sizeof(path), "%s/%s", tmpdir, progs[i].name);
		damage_file(progs[i].name, path, rounds / 3);
	}
}

/* ---- libc: ingest time, size, look-up rate ------------------------------ */

static void dwarf_size(const char *path, uint64_t *stored, uint64_t *full)
{
	int fd = open(path, O_RDONLY);
	Elf_Scn *scn = NULL;
	size_t shstrndx;
	Elf *e;

	*stored = *full = 0;
	elf_version(EV_CURRENT);
	e = fd >= 0 ? elf_begin(fd, ELF_C_READ, NULL) : NULL;
	if (e && elf_getshdrstrndx(e, &shstrndx) == 0) {
		while ((scn = elf_nextscn(e, scn)) != NULL) {
			GElf_Shdr sh;
			GElf_Chdr ch;
			const char *name;

			if (!gelf_getshdr(scn, &sh))
				continue;
			name = elf_strptr(e, shstrndx, sh.sh_name);
			if (!name || strncmp(name, ".debug_", 7) != 0)
				continue;
			*stored += sh.sh_size;
			if ((sh.sh_flags & SHF_COMPRESSED) && gelf_getchdr(scn, &ch))
				*full += ch.ch_size;
			else
				*full += sh.sh_size;
		}
	}
	if (e)
		elf_end(e);
	if (fd >= 0)
		close(fd);
}

static void test_libc_numbers(void)
{
	enum { NPROBES = 20000, REPS = 100 };
	struct fp_symframe fr[MAX_FRAMES];
	uint64_t stored, full, *probes, frames = 0;
	double best_wall = 1e9, best_cpu = 1e9, t0, c0, dt;
	struct fp_dwarf_stats ds;
	struct func *funcs = NULL;
	struct fp_symtab t;
	void *blob = NULL;
	size_t len = 0, nf;

	if (!libc_debug[0])
		return;
	for (int i = 0; i < 3; i++) {
		void *b = NULL;
		size_t l = 0;
		int fd = open(libc_debug, O_RDONLY), err;

		t0 = now_sec(CLOCK_MONOTONIC);
		c0 = now_sec(CLOCK_PROCESS_CPUTIME_ID);
		err = fp_elf_symtab_stats(fd, &b, &l, &ds);
		dt = now_sec(CLOCK_PROCESS_CPUTIME_ID) - c0;
		best_cpu = dt < best_cpu ? dt : best_cpu;
		dt = now_sec(CLOCK_MONOTONIC) - t0;
		best_wall = dt < best_wall ? dt : best_wall;
		close(fd);
		CHECK_EQ_INT(err, 0);
		free(blob);
		blob = b;
		len = l;
	}
	if (!blob)
		return;
	CHECK_EQ_INT(fp_symtab_open(&t, blob, len), 0);
	dwarf_size(libc_debug, &stored, &full);
	printf("  libc debug file: ingest %.0f ms (%.0f ms CPU; target < 500), %u units, %llu line "
	       "rows, %u scopes (%u inlined)\n",
	       best_wall * 1e3, best_cpu * 1e3, ds.ds_units, (unsigned long long)ds.ds_rows,
	       ds.ds_scopes, ds.ds_inlined);
	printf("  blob %zu bytes = %.1f%% of its DWARF as stored (%llu bytes), %.1f%% of it "
	       "uncompressed (%llu); %u symbols, %u files, %u line blocks (%u bytes of rows), "
	       "%u ranges, %u scopes, %u bytes of strings\n",
	       len, 100.0 * (double)len / (double)stored, (unsigned long long)stored,
	       100.0 * (double)len / (double)full, (unsigned long long)full, t.st_nsymbols,
	       t.st_nfiles, t.st_nblocks, t.st_linedata_len, t.st_nranges, t.st_nscopes,
	       t.st_strings_len);
	CHECK(len < stored);
	if (!SANITIZED)
		CHECK(best_cpu < 0.5);

	nf = text_functions(libc_debug, &funcs);
	probes = malloc(NPROBES * sizeof(*probes));
	CHECK(nf > 0 && probes);
	if (!nf || !probes) {
		free(funcs);
		free(probes);
		free(blob);
		return;
	}
	random_addrs(funcs, nf, probes, NPROBES);
	for (int i = 0; i < NPROBES; i++) /* warm */
		frames += (uint64_t)fp_symtab_lookup_frames(&t, probes[i], fr, MAX_FRAMES);
	frames = 0;
	t0 = now_sec(CLOCK_THREAD_CPUTIME_ID);
	for (int r = 0; r < REPS; r++)
		for (int i = 0; i < NPROBES; i++)
			frames += (uint64_t)fp_symtab_lookup_frames(&t, probes[i], fr, MAX_FRAMES);
	dt = now_sec(CLOCK_THREAD_CPUTIME_ID) - t0;
	printf("  warm look-ups over %d libc addresses: %.1f M look-ups/s, %.1f M frames/s on one "
	       "core (target >= 5 M frames/s), %.2f frames per look-up\n",
	       NPROBES, (double)NPROBES * REPS / dt / 1e6, (double)frames / dt / 1e6,
	       (double)frames / ((double)NPROBES * REPS));
	if (!SANITIZED)
		CHECK((double)frames / dt >= 5e6);
	free(probes);
	free(funcs);
	free(blob);
}

/* The fuzz target's corpus, crashers found while fuzzing included
 * (regress_*): each file gives a table that opens and answers, or an
 * error. */
static void test_fuzz_corpus(void)
{
	static const char dir[] = "tests/fuzz/corpus/fuzz_elf";
	char cmd[256], path[512];
	int files = 0, tables = 0;
	FILE *p;

	if (access(dir, R_OK) != 0) {
		printf("SKIP: %s:test_fuzz_corpus (run from the repository)\n", __FILE__);
		return;
	}
	snprintf(cmd, sizeof(cmd), "ls %s", dir);
	p = popen(cmd, "r");
	while (p && fgets(path + sizeof(dir), (int)(sizeof(path) - sizeof(dir)), p)) {
		size_t len = 0;
		uint8_t *data;

		memcpy(path, dir, sizeof(dir) - 1);
		path[sizeof(dir) - 1] = '/';
		path[strcspn(path, "\n")] = '\0';
		data = slurp(path, &len);
		CHECK(data != NULL);
		if (!data)
			continue;
		files++;
		check_damaged(data, len, &tables);
		free(data);
	}
	if (p)
		pclose(p);
	printf("  %d corpus files, %d gave a table\n", files, tables);
	CHECK(files > 0);
}

static void cleanup(void)
{
	if (tmpdir[0])
		CHECK_EQ_INT(check_rmtree(tmpdir), 0);
}

int main(void)
{
	RUN(setup);
	RUN(test_programs_against_llvm);
	RUN(test_libc_against_llvm);
	RUN(test_detached_debug_file);
	RUN(test_bad_debuglinks);
	RUN(test_minidebuginfo);
	RUN(test_damaged_dwarf);
	RUN(test_fuzz_corpus);
	RUN(test_libc_numbers);
	RUN(cleanup);
	return CHECK_DONE();
}
