/* gopclntab_test.c: Go functions and lines from .gopclntab (gopclntab.h)
 * against `go tool addr2line`, on a Go program built here (Go from
 * /usr/local/go or PATH; without Go the test is skipped, or fails when CI
 * is set): stripped with no GNU build-ID (what SONiC's Go daemons look
 * like), stripped PIE, and not stripped (.symtab and DWARF beside the
 * table).  The same table rewritten in the 1.16 and 1.18 layouts must
 * give the same answers, and cut or scribbled copies must not crash. */
#include <errno.h>
#include <fcntl.h>
#include <gelf.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "check.h"
#include "elfnote.h"
#include "elfsyms.h"
#include "fileid.h"
#include "gopclntab.h"
#include "symtab.h"

#define NADDR 4000

static char tmpdir[64];
static char go[256];

static const char go_src[] = "package main\n"
			     "\n"
			     "import (\n"
			     "\t\"fmt\"\n"
			     "\t\"os\"\n"
			     "\t\"sort\"\n"
			     ")\n"
			     "\n"
			     "type acc struct{ n int }\n"
			     "\n"
			     "//go:noinline\n"
			     "func (a *acc) add(v int) { a.n += v * 3 }\n"
			     "\n"
			     "func small(x int) int { return x*x + 1 } // inlined\n"
			     "\n"
			     "//go:noinline\n"
			     "func leaf(x int) int {\n"
			     "\ts := 0\n"
			     "\tfor i := 0; i < x; i++ {\n"
			     "\t\ts += small(i)\n"
			     "\t}\n"
			     "\treturn s\n"
			     "}\n"
			     "\n"
			     "//go:noinline\n"
			     "func middle(x int) int { return leaf(x) + leaf(x/2) }\n"
			     "\n"
			     "//go:noinline\n"
			     "func sum[T int | float64](v []T) T {\n"
			     "\tvar s T\n"
			     "\tfor _, x := range v {\n"
			     "\t\ts += x\n"
			     "\t}\n"
			     "\treturn s\n"
			     "}\n"
			     "\n"
			     "func main() {\n"
			     "\ta := &acc{}\n"
			     "\tf := func(i int) { a.add(middle(i)) }\n"
			     "\tfor i := 0; i < len(os.Args)*100; i++ {\n"
			     "\t\tf(i)\n"
			     "\t}\n"
			     "\tv := []int{3, 1, 2}\n"
			     "\tsort.Ints(v)\n"
			     "\tfmt.Println(a.n, sum(v), sum([]float64{1.5}))\n"
			     "}\n";

static int find_go(void)
{
	const char *path = getenv("PATH");

	if (access("/usr/local/go/bin/go", X_OK) == 0) {
		snprintf(go, sizeof(go), "/usr/local/go/bin/go");
		return 0;
	}
	while (path && *path) {
		size_t n = strcspn(path, ":");

		snprintf(go, sizeof(go), "%.*s/go", (int)n, path);
		if (n && access(go, X_OK) == 0)
			return 0;
		path += n + (path[n] == ':');
	}
	go[0] = '\0';
	return -1;
}

/* go_build: the program, built with flags into tmpdir/name. */
static int go_build(const char *name, const char *flags)
{
	char cmd[1024];

	snprintf(cmd, sizeof(cmd),
		 "cd %s/src && GOCACHE=%s/cache GOPATH=%s/gopath GOFLAGS=-mod=mod "
		 "GOTOOLCHAIN=local GO111MODULE=on CGO_ENABLED=0 %s build %s -o %s/%s . "
		 "> %s/build.log 2>&1 || { cat %s/build.log >&2; exit 1; }",
		 tmpdir, tmpdir, tmpdir, go, flags, tmpdir, name, tmpdir, tmpdir);
	return system(cmd) == 0 ? 0 : -1;
}

static int write_text(const char *path, const char *text)
{
	FILE *f = fopen(path, "w");
	int ok;

	if (!f)
		return -1;
	ok = fputs(text, f) >= 0;
	return fclose(f) == 0 && ok ? 0 : -1;
}

/* section: a copy of section name of the ELF at path, and its address. */
static void *section(const char *path, const char *name, size_t *len, uint64_t *addr)
{
	int fd = open(path, O_RDONLY | O_CLOEXEC);
	Elf *e = NULL;
	Elf_Scn *scn = NULL;
	size_t shstrndx;
	void *copy = NULL;

	if (fd < 0)
		return NULL;
	elf_version(EV_CURRENT);
	e = elf_begin(fd, ELF_C_READ, NULL);
	if (e && elf_getshdrstrndx(e, &shstrndx) == 0) {
		while ((scn = elf_nextscn(e, scn)) != NULL) {
			GElf_Shdr sh;
			const char *n;
			Elf_Data *d;

			if (!gelf_getshdr(scn, &sh) || !(n = elf_strptr(e, shstrndx, sh.sh_name)) ||
			    strcmp(n, name))
				continue;
			d = elf_getdata(scn, NULL);
			if (d && d->d_buf && (copy = malloc(d->d_size ? d->d_size : 1))) {
				memcpy(copy, d->d_buf, d->d_size);
				*len = d->d_size;
				*addr = sh.sh_addr;
			}
			break;
		}
	}
	elf_end(e);
	close(fd);
	return copy;
}

struct answer {
	char an_func[512];
	char an_file[1024]; /* "" unknown */
	unsigned an_line;
};

/* oracle: `go tool addr2line` for the addresses. */
static int oracle(const char *bin, const uint64_t *addrs, size_t n, struct answer *out)
{
	char in[128], cmd[1024], fn[512], fl[1024];
	FILE *f;
	size_t i;

	snprintf(in, sizeof(in), "%s/addrs", tmpdir);
	f = fopen(in, "w");
	if (!f)
		return -1;
	for (i = 0; i < n; i++)
		fprintf(f, "0x%llx\n", (unsigned long long)addrs[i]);
	fclose(f);
	snprintf(cmd, sizeof(cmd), "GOCACHE=%s/cache GOTOOLCHAIN=local %s tool addr2line %s < %s",
		 tmpdir, go, bin, in);
	f = popen(cmd, "r");
	if (!f)
		return -1;
	for (i = 0; i < n; i++) {
		char *colon;

		if (!fgets(fn, sizeof(fn), f) || !fgets(fl, sizeof(fl), f))
			break;
		fn[strcspn(fn, "\n")] = fl[strcspn(fl, "\n")] = '\0';
		snprintf(out[i].an_func, sizeof(out[i].an_func), "%s", fn);
		colon = strrchr(fl, ':');
		out[i].an_line = 0;
		out[i].an_file[0] = '\0';
		if (colon) {
			long line = strtol(colon + 1, NULL, 10);

			*colon = '\0';
			if (line > 0 && strcmp(fl, "?") && fl[0]) {
				out[i].an_line = (unsigned)line;
				snprintf(out[i].an_file, sizeof(out[i].an_file), "%s", fl);
			}
		}
	}
	return pclose(f) == 0 && i == n ? 0 : -1;
}

/* ours: the same from a table: the containing function (outermost frame)
 * and the innermost frame's file:line, as addr2line prints them. */
static void ours(const struct fp_symtab *t, uint64_t addr, struct answer *a)
{
	struct fp_symframe fr[16];
	int n = fp_symtab_lookup_frames(t, addr, fr, 16);

	memset(a, 0, sizeof(*a));
	if (n <= 0)
		return;
	snprintf(a->an_func, sizeof(a->an_func), "%s",
		 fr[n - 1].sf_function ? fr[n - 1].sf_function : "");
	if (fr[0].sf_file && fr[0].sf_line) {
		snprintf(a->an_file, sizeof(a->an_file), "%s", fr[0].sf_file);
		a->an_line = fr[0].sf_line;
	}
}

/* file_matches: DWARF's names of generated code ("././<autogenerated>")
 * end in the table's. */
static int file_matches(const char *ours_file, const char *want)
{
	size_t a = strlen(ours_file), b = strlen(want);

	return a >= b && !strcmp(ours_file + a - b, want) &&
	       (a == b || ours_file[a - b - 1] == '/');
}

static uint64_t rnd_state = 88172645463325252ull;
static uint64_t rnd(void)
{
	rnd_state ^= rnd_state << 13;
	rnd_state ^= rnd_state >> 7;
	rnd_state ^= rnd_state << 17;
	return rnd_state;
}

/* addresses: every function entry (+0 and +1) of main, then random ones
 * in .text. */
static size_t addresses(const struct fp_symtab *t, uint64_t text, uint64_t text_len, uint64_t *out,
			size_t max)
{
	size_t n = 0;

	for (uint64_t a = text; a < text + text_len && n + 2 < max / 4; a += 1) {
		struct fp_symbol s;

		if (fp_symtab_lookup(t, a, &s) || s.sy_addr != a || strncmp(s.sy_name, "main.", 5))
			continue;
		out[n++] = a;
		out[n++] = a + 1;
	}
	while (n < max)
		out[n++] = text + rnd() % text_len;
	return n;
}

struct agreement {
	size_t ag_n, ag_names, ag_lines, ag_main;
};

static void compare(const char *bin, const struct fp_symtab *t, const uint64_t *addrs, size_t n,
		    struct agreement *ag)
{
	struct answer *want = calloc(n, sizeof(*want)), got;
	int shown = 0;

	memset(ag, 0, sizeof(*ag));
	if (!want || oracle(bin, addrs, n, want)) {
		CHECK(!"go tool addr2line");
		free(want);
		return;
	}
	for (size_t i = 0; i < n; i++) {
		int name_ok, line_ok;

		ours(t, addrs[i], &got);
		name_ok = !strcmp(got.an_func, want[i].an_func);
		line_ok = got.an_line == want[i].an_line &&
			  (want[i].an_file[0] ? file_matches(got.an_file, want[i].an_file)
					      : !got.an_file[0]);
		ag->ag_names += name_ok;
		ag->ag_lines += line_ok;
		ag->ag_main += !strncmp(want[i].an_func, "main.", 5) && name_ok && line_ok;
		if ((!name_ok || !line_ok) && shown++ < 10)
			fprintf(stderr, "  %s 0x%llx: ours %s %s:%u, go %s %s:%u\n", bin,
				(unsigned long long)addrs[i], got.an_func, got.an_file, got.an_line,
				want[i].an_func, want[i].an_file, want[i].an_line);
	}
	ag->ag_n = n;
	free(want);
}

/* table_of: the symbolizer's table of the binary at path. */
static int table_of(const char *path, void **blob, size_t *len, struct fp_symtab *t)
{
	int fd = open(path, O_RDONLY | O_CLOEXEC), err;

	if (fd < 0)
		return -errno;
	err = fp_elf_symtab(fd, blob, len);
	close(fd);
	if (!err && fp_symtab_open(t, *blob, *len)) {
		free(*blob);
		err = -EINVAL;
	}
	return err;
}

static void check_binary(const char *name, int stripped)
{
	char bin[128];
	uint64_t *addrs = calloc(NADDR, sizeof(*addrs)), text = 0;
	struct agreement ag;
	struct fp_symtab t;
	size_t len = 0, tlen = 0, n;
	void *blob = NULL, *tx;

	snprintf(bin, sizeof(bin), "%s/%s", tmpdir, name);
	tx = section(bin, ".text", &tlen, &text);
	free(tx);
	CHECK(addrs && tlen);
	if (!addrs || !tlen || table_of(bin, &blob, &len, &t)) {
		CHECK(!"a table from the Go binary");
		free(addrs);
		return;
	}
	n = addresses(&t, text, tlen, addrs, NADDR);
	compare(bin, &t, addrs, n, &ag);
	printf("  %s: %zu addresses, function names agree with go tool addr2line for %.2f%%, "
	       "file:line for %.2f%%; %zu exact answers in main.*\n",
	       name, ag.ag_n, 100.0 * ag.ag_names / (ag.ag_n ? ag.ag_n : 1),
	       100.0 * ag.ag_lines / (ag.ag_n ? ag.ag_n : 1), ag.ag_main);
	CHECK_EQ_INT(ag.ag_names, ag.ag_n);
	/* Stripped: every line is the table's, as Go's.  Not stripped: lines
	 * come from DWARF, which names a few generated functions' files
	 * differently. */
	if (stripped)
		CHECK_EQ_INT(ag.ag_lines, ag.ag_n);
	else
		CHECK(ag.ag_lines * 100 >= ag.ag_n * 97);
	CHECK(ag.ag_main >= 10);
	free(blob);
	free(addrs);
}

static int built;

static void test_build(void)
{
	char path[160];

	snprintf(path, sizeof(path), "%s/src", tmpdir);
	CHECK_EQ_INT(mkdir(path, 0700), 0);
	snprintf(path, sizeof(path), "%s/src/go.mod", tmpdir);
	CHECK_EQ_INT(write_text(path, "module fleetprof/gopclntabtest\n\ngo 1.19\n"), 0);
	snprintf(path, sizeof(path), "%s/src/main.go", tmpdir);
	CHECK_EQ_INT(write_text(path, go_src), 0);
	/* -B none: Go 1.24+ writes a GNU build-ID unless told not to; older
	 * linkers write none and refuse "none". */
	CHECK_EQ_INT(go_build("stripped", "-ldflags='-s -w -B none'") &&
			     go_build("stripped", "-ldflags='-s -w'"),
		     0);
	CHECK_EQ_INT(go_build("pie", "-buildmode=pie -ldflags='-s -w'"), 0);
	CHECK_EQ_INT(go_build("full", ""), 0);
	built = check_failures == 0;
}

static void test_stripped(void)
{
	check_binary("stripped", 1);
}

static void test_pie(void)
{
	check_binary("pie", 1);
}

static void test_not_stripped(void)
{
	check_binary("full", 0);
}

/* chain_eq: the same frames (names, files, lines) at addr in both tables;
 * *inlined counts chains of more than one frame in a. */
static int chain_eq(const struct fp_symtab *a, const struct fp_symtab *b, uint64_t addr,
		    size_t *inlined)
{
	struct fp_symframe x[16], y[16];
	int n = fp_symtab_lookup_frames(a, addr, x, 16),
	    m = fp_symtab_lookup_frames(b, addr, y, 16);

	*inlined += n > 1;
	if (n != m)
		return 0;
	for (int i = 0; i < n; i++) {
		const char *fx = x[i].sf_file ? x[i].sf_file : "",
			   *fy = y[i].sf_file ? y[i].sf_file : "";

		if (strcmp(x[i].sf_function ? x[i].sf_function : "",
			   y[i].sf_function ? y[i].sf_function : "") ||
		    x[i].sf_line != y[i].sf_line || !file_matches(fy, fx) ||
		    x[i].sf_inlined != y[i].sf_inlined)
			return 0;
	}
	return 1;
}

/* Inline chains: from the stripped binary's table (pclntab's inline
 * trees) as from the unstripped one's DWARF, at the same addresses (-s -w
 * leaves the code where it was). */
static void test_inline_chains(void)
{
	char s_bin[128], f_bin[128];
	void *sb = NULL, *fb = NULL, *tx;
	struct fp_symtab st, ft;
	size_t sl, fl, tlen = 0, same = 0, inl_s = 0, inl_f = 0, n = 20000, autogen = 0;
	uint64_t text = 0;

	snprintf(s_bin, sizeof(s_bin), "%s/stripped", tmpdir);
	snprintf(f_bin, sizeof(f_bin), "%s/full", tmpdir);
	tx = section(s_bin, ".text", &tlen, &text);
	free(tx);
	if (!tlen || table_of(s_bin, &sb, &sl, &st) || table_of(f_bin, &fb, &fl, &ft)) {
		CHECK(!"tables of the stripped and the full binary");
		free(sb);
		return;
	}
	for (size_t i = 0; i < n; i++) {
		uint64_t addr = text + rnd() % tlen;
		struct fp_symframe fr[16];
		int k = fp_symtab_lookup_frames(&st, addr, fr, 16);

		if (chain_eq(&st, &ft, addr, &inl_s)) {
			same++;
		} else if (k > 0 && fr[k - 1].sf_file &&
			   strstr(fr[k - 1].sf_file, "<autogenerated>")) {
			autogen++; /* DWARF: "././<autogenerated>" or no line */
		} else if (same + 8 > i) {
			fprintf(stderr, "  0x%llx: chains differ\n", (unsigned long long)addr);
		}
		inl_f += fp_symtab_lookup_frames(&ft, addr, fr, 16) > 1;
	}
	printf("  %zu addresses: inline chains from .gopclntab equal DWARF's at %zu (%.2f%%), "
	       "%zu more differ only in DWARF's <autogenerated>; %zu vs %zu with inlined frames\n",
	       n, same, 100.0 * same / n, autogen, inl_s, inl_f);
	CHECK(inl_s > n / 50);
	CHECK(inl_s == inl_f);
	CHECK(same + autogen == n);
	free(sb);
	free(fb);
}

/* The stripped binary has neither a GNU build-ID nor .symtab: the agent
 * and the symbolizer (one reader, fp_elfnote_build_id) give it the id of
 * its Go build ID. */
static void test_file_id(void)
{
	struct fp_build_id dev;
	char bin[128];
	int fd;

	snprintf(bin, sizeof(bin), "%s/stripped", tmpdir);
	fd = open(bin, O_RDONLY | O_CLOEXEC);
	CHECK(fd >= 0);
	CHECK_EQ_INT(fp_elfnote_build_id(fd, &dev), 0);
	CHECK_EQ_INT(fp_fileid_kind(&dev), FP_FILEID_GO);
	close(fd);
}

/* to_v118: the table with the 1.18 magic (1.18's function records lack
 * 1.20's startLine, which we do not read). */
static void to_v118(uint8_t *p)
{
	p[0] = 0xf0;
}

/* to_v116: the table rewritten in the 1.16 layout: no text start word,
 * function table entries as absolute pointer-sized addresses, function
 * records led by their pointer-sized entry.  Assumes little-endian,
 * 8-byte pointers, as the tables of this test are.  The caller frees. */
static uint8_t *to_v116(const uint8_t *p, size_t len, uint64_t text, size_t *outlen)
{
	uint64_t w[8], nfunc;
	size_t functab, ft16, rec, out_len, at;
	uint8_t *o;

	for (int i = 0; i < 8; i++)
		memcpy(&w[i], p + 8 + 8 * i, 8);
	nfunc = w[0];
	functab = (size_t)w[7];
	ft16 = (size_t)(nfunc * 2 + 1) * 8;
	/* Records of 1.20: 44 bytes plus pcdata and funcdata; we copy the
	 * whole tail of the section after each record's fixed part, so keep
	 * a record area of the same size, each record grown by 4. */
	rec = len - functab;
	out_len = functab + ft16 + rec + (size_t)nfunc * 8 + 64;
	o = calloc(1, out_len);
	if (!o)
		return NULL;
	memcpy(o, p, functab);
	/* Header: drop the text start word; offsets stay (they are below
	 * the function table, which moves nowhere). */
	o[0] = 0xfa;
	memcpy(o + 8 + 8 * 2, &w[3], 8 * 5);
	memset(o + 8 + 8 * 7, 0, 8);
	at = functab + ft16;
	for (uint64_t i = 0; i <= nfunc; i++) {
		uint32_t entoff, funcoff;
		uint64_t entry, off16;

		memcpy(&entoff, p + functab + i * 8, 4);
		entry = text + entoff;
		memcpy(o + functab + i * 16, &entry, 8);
		if (i == nfunc)
			break;
		memcpy(&funcoff, p + functab + i * 8 + 4, 4);
		off16 = at - functab;
		memcpy(o + functab + i * 16 + 8, &off16, 8);
		/* entry (8), then nameoff .. cuOffset, 32 bytes, and 4 more. */
		memcpy(o + at, &entry, 8);
		if (functab + funcoff + 40 <= len)
			memcpy(o + at + 8, p + functab + funcoff + 4, 36);
		at += 48;
	}
	*outlen = at;
	return o;
}

static int table_from(const uint8_t *p, size_t len, uint64_t text, void **blob, size_t *blen,
		      struct fp_symtab *t)
{
	struct fp_symtab_builder *b;
	int err;

	if ((err = fp_symtab_builder_alloc(&b)))
		return err;
	err = fp_gopclntab_ingest(p, len, text, FP_GOPCLNTAB_FUNCTIONS | FP_GOPCLNTAB_LINES, NULL,
				  b, NULL);
	if (!err)
		err = fp_symtab_builder_finish(b, blob, blen);
	fp_symtab_builder_free(b);
	if (!err && fp_symtab_open(t, *blob, *blen)) {
		free(*blob);
		err = -EINVAL;
	}
	return err;
}

static int same_answers(const struct fp_symtab *a, const struct fp_symtab *b, uint64_t text,
			uint64_t tlen)
{
	int diff = 0;

	for (int i = 0; i < 20000; i++) {
		uint64_t addr = text + rnd() % tlen;
		struct answer x, y;

		ours(a, addr, &x);
		ours(b, addr, &y);
		if (strcmp(x.an_func, y.an_func) || strcmp(x.an_file, y.an_file) ||
		    x.an_line != y.an_line)
			diff++;
	}
	return diff;
}

static void test_older_layouts(void)
{
	char bin[128];
	size_t len = 0, tlen = 0, l16 = 0, bl[3];
	uint64_t addr, text = 0;
	uint8_t *pcln, *v16 = NULL;
	void *blob[3] = { NULL, NULL, NULL }, *tx;
	struct fp_symtab t[3];
	struct fp_gopclntab_stats st;
	struct fp_symtab_builder *b;

	snprintf(bin, sizeof(bin), "%s/stripped", tmpdir);
	tx = section(bin, ".text", &tlen, &text);
	free(tx);
	pcln = section(bin, ".gopclntab", &len, &addr);
	CHECK(pcln && tlen && len > 64);
	if (!pcln || !tlen)
		return;
	CHECK_EQ_INT(table_from(pcln, len, text, &blob[0], &bl[0], &t[0]), 0);
	v16 = to_v116(pcln, len, text, &l16);
	CHECK(v16 != NULL);
	if (v16) {
		CHECK_EQ_INT(table_from(v16, l16, 0, &blob[1], &bl[1], &t[1]), 0);
		if (blob[0] && blob[1])
			CHECK_EQ_INT(same_answers(&t[0], &t[1], text, tlen), 0);
	}
	to_v118(pcln);
	CHECK_EQ_INT(table_from(pcln, len, text, &blob[2], &bl[2], &t[2]), 0);
	if (blob[0] && blob[2])
		CHECK_EQ_INT(same_answers(&t[0], &t[2], text, tlen), 0);
	/* Go 1.2-1.15 tables and garbage are refused. */
	pcln[0] = 0xfb;
	CHECK_EQ_INT(fp_symtab_builder_alloc(&b), 0);
	CHECK_EQ_INT(fp_gopclntab_ingest(pcln, len, text, FP_GOPCLNTAB_FUNCTIONS, NULL, b, &st),
		     -EINVAL);
	CHECK_EQ_INT(fp_gopclntab_ingest(pcln, 7, text, FP_GOPCLNTAB_FUNCTIONS, NULL, b, &st),
		     -EINVAL);
	fp_symtab_builder_free(b);
	for (int i = 0; i < 3; i++)
		free(blob[i]);
	free(v16);
	free(pcln);
}

/* load_image: the whole file at path and its PT_LOAD segments, as
 * elfsyms.c hands them over for inline trees. */
static uint8_t *load_image(const char *path, size_t *len, struct fp_gopclntab_segment *segs,
			   size_t *nsegs)
{
	int fd = open(path, O_RDONLY | O_CLOEXEC);
	struct stat st;
	uint8_t *buf = NULL;
	Elf *e;
	size_t phnum, n = 0;

	if (fd < 0 || fstat(fd, &st) || !(buf = malloc((size_t)st.st_size)) ||
	    pread(fd, buf, (size_t)st.st_size, 0) != st.st_size) {
		free(buf);
		if (fd >= 0)
			close(fd);
		return NULL;
	}
	*len = (size_t)st.st_size;
	e = elf_begin(fd, ELF_C_READ, NULL);
	if (e && elf_getphdrnum(e, &phnum) == 0)
		for (size_t i = 0; i < phnum && n < *nsegs; i++) {
			GElf_Phdr ph;

			if (gelf_getphdr(e, (int)i, &ph) && ph.p_type == PT_LOAD &&
			    ph.p_offset + ph.p_filesz <= *len)
				segs[n++] = (struct fp_gopclntab_segment){ ph.p_vaddr,
									   buf + ph.p_offset,
									   ph.p_filesz,
									   !!(ph.p_flags & PF_W) };
		}
	elf_end(e);
	close(fd);
	*nsegs = n;
	return buf;
}

/* Cut and scribbled copies of the table, and scribbled images: anything
 * may come out but a crash or an error other than the documented ones,
 * and what is built must open. */
static void test_damaged(void)
{
	struct fp_gopclntab_segment segs[8], moved[8];
	struct fp_gopclntab_image image;
	char bin[128];
	size_t len = 0, flen = 0, tlen = 0, nsegs = 8, inlined = 0;
	uint64_t addr, text = 0;
	uint8_t *pcln, *copy, *file, *img;
	void *tx;

	snprintf(bin, sizeof(bin), "%s/stripped", tmpdir);
	pcln = section(bin, ".gopclntab", &len, &addr);
	tx = section(bin, ".text", &tlen, &text);
	free(tx);
	file = load_image(bin, &flen, segs, &nsegs);
	img = file ? malloc(flen) : NULL;
	CHECK(pcln && file && img && nsegs >= 2 && tlen);
	if (!pcln || !file || !img || !tlen) {
		free(pcln), free(file), free(img);
		return;
	}
	for (size_t i = 0; i < nsegs; i++) {
		moved[i] = segs[i];
		moved[i].gg_data = img + (segs[i].gg_data - file);
	}
	image = (struct fp_gopclntab_image){ addr, moved, nsegs };
	for (int round = 0; round < 300; round++) {
		size_t cut = round < 100 ? (size_t)(rnd() % len) : len;
		struct fp_symtab_builder *b;
		struct fp_gopclntab_stats st;
		void *blob;
		size_t blen;
		int err;

		copy = malloc(cut ? cut : 1);
		if (!copy)
			break;
		memcpy(copy, pcln, cut);
		memcpy(img, file, flen);
		for (int k = 0; round >= 100 && round < 200 && k < 1 + round % 16; k++)
			copy[rnd() % cut] = (uint8_t)rnd();
		for (int k = 0; round >= 200 && k < 1 + round % 64; k++)
			img[rnd() % flen] = (uint8_t)rnd();
		if (fp_symtab_builder_alloc(&b)) {
			free(copy);
			break;
		}
		err = fp_gopclntab_ingest(copy, cut, text,
					  FP_GOPCLNTAB_FUNCTIONS | FP_GOPCLNTAB_LINES |
						  FP_GOPCLNTAB_INLINES,
					  &image, b, &st);
		CHECK(err == 0 || err == -EINVAL || err == -E2BIG);
		inlined += st.gs_inlined;
		if (fp_symtab_builder_finish(b, &blob, &blen) == 0) {
			struct fp_symtab t;

			CHECK_EQ_INT(fp_symtab_open(&t, blob, blen), 0);
			for (int k = 0; k < 64; k++) {
				struct answer a;

				ours(&t, text + rnd() % tlen, &a);
			}
			free(blob);
		}
		fp_symtab_builder_free(b);
		free(copy);
	}
	/* The undamaged rounds did read inline trees through the image. */
	CHECK(inlined > 0);
	free(pcln);
	free(file);
	free(img);
}

/* The fuzz seeds are small tables of every layout we read, written by
 * hand: each must give its three functions, files and lines. */
static void test_seeds(void)
{
	static const char *const seeds[] = { "v116_le64", "v118_le64", "v118_le32",
					     "v120_le64", "v120_be64", "v120_q4" };
	static const struct {
		uint64_t addr;
		const char *func, *file;
		unsigned line;
	} want[] = {
		{ 0x401000, "main.main", "main.go", 10 },  { 0x40101f, "main.main", "main.go", 11 },
		{ 0x401030, "main.main", "main.go", 12 },  { 0x401040, "main.leaf", "leaf.go", 20 },
		{ 0x401048, "main.leaf", "leaf.go", 21 },  { 0x401079, "main.leaf", "leaf.go", 22 },
		{ 0x4010bf, "runtime.gogo", "asm.s", 30 },
	};

	if (access("tests/fuzz/corpus/fuzz_gopclntab", F_OK)) {
		printf("SKIP: %s:test_seeds (run from the repository)\n", __FILE__);
		return;
	}
	for (size_t i = 0; i < sizeof(seeds) / sizeof(seeds[0]); i++) {
		char path[128];
		uint8_t buf[4096];
		struct fp_symtab t;
		void *blob = NULL;
		size_t blen, n;
		FILE *f;
		int before = check_failures;

		snprintf(path, sizeof(path), "tests/fuzz/corpus/fuzz_gopclntab/%s", seeds[i]);
		f = fopen(path, "rb");
		CHECK(f != NULL);
		if (!f)
			continue;
		n = fread(buf, 1, sizeof(buf), f);
		fclose(f);
		CHECK_EQ_INT(table_from(buf, n, 0x401000, &blob, &blen, &t), 0);
		for (size_t k = 0; blob && k < sizeof(want) / sizeof(want[0]); k++) {
			struct answer a;

			ours(&t, want[k].addr, &a);
			CHECK(!strcmp(a.an_func, want[k].func));
			CHECK(!strcmp(a.an_file, want[k].file));
			CHECK_EQ_INT(a.an_line, want[k].line);
		}
		if (blob) {
			struct answer a;

			ours(&t, 0x4010c0, &a); /* past the last function */
			CHECK(!a.an_func[0]);
		}
		free(blob);
		if (check_failures != before)
			fprintf(stderr, "  seed %s\n", seeds[i]);
	}
	/* A 1.20 table followed by a moduledata and an inline tree: main.small
	 * inlined into main.leaf, called from leaf.go:20, its code at
	 * [0x401048, 0x401078). */
	{
		uint8_t buf[4096];
		size_t n = 0;
		FILE *f = fopen("tests/fuzz/corpus/fuzz_gopclntab/v120_inline", "rb");
		struct fp_gopclntab_segment seg;
		struct fp_gopclntab_image image;
		struct fp_symtab_builder *b;
		struct fp_gopclntab_stats st;
		struct fp_symframe fr[4];
		struct fp_symtab t;
		void *blob = NULL;
		size_t blen;

		CHECK(f != NULL);
		if (f) {
			n = fread(buf, 1, sizeof(buf), f);
			fclose(f);
		}
		seg = (struct fp_gopclntab_segment){ 0x500000, buf, n, 1 };
		image = (struct fp_gopclntab_image){ 0x500000, &seg, 1 };
		CHECK_EQ_INT(fp_symtab_builder_alloc(&b), 0);
		CHECK_EQ_INT(fp_gopclntab_ingest(buf, n, 0x401000,
						 FP_GOPCLNTAB_FUNCTIONS | FP_GOPCLNTAB_LINES |
							 FP_GOPCLNTAB_INLINES,
						 &image, b, &st),
			     0);
		CHECK_EQ_INT(st.gs_inlined, 1);
		CHECK_EQ_INT(fp_symtab_builder_finish(b, &blob, &blen), 0);
		fp_symtab_builder_free(b);
		if (blob && fp_symtab_open(&t, blob, blen) == 0) {
			CHECK_EQ_INT(fp_symtab_lookup_frames(&t, 0x401050, fr, 4), 2);
			CHECK(fr[0].sf_function && !strcmp(fr[0].sf_function, "main.small"));
			CHECK(fr[0].sf_file && !strcmp(fr[0].sf_file, "leaf.go"));
			CHECK_EQ_INT(fr[0].sf_line, 21);
			CHECK(fr[1].sf_function && !strcmp(fr[1].sf_function, "main.leaf"));
			CHECK_EQ_INT(fr[1].sf_line, 20);
			CHECK_EQ_INT(fp_symtab_lookup_frames(&t, 0x401044, fr, 4), 1);
			CHECK_EQ_INT(fp_symtab_lookup_frames(&t, 0x401078, fr, 4), 1);
		}
		free(blob);
	}
}

int main(void)
{
	if (check_tmpdir(tmpdir, sizeof(tmpdir), "gopclntab_test"))
		return 1;
	RUN(test_seeds);
	if (find_go()) {
		if (getenv("CI")) {
			printf("FAIL: %s:go (no Go toolchain: /usr/local/go/bin/go or go in PATH)\n",
			       __FILE__);
			return 1;
		}
		printf("SKIP: %s:go (no Go toolchain: /usr/local/go/bin/go or go in PATH)\n",
		       __FILE__);
		check_rmtree(tmpdir);
		return 0;
	}
	RUN(test_build);
	if (built) {
		RUN(test_stripped);
		RUN(test_pie);
		RUN(test_not_stripped);
		RUN(test_inline_chains);
		RUN(test_file_id);
		RUN(test_older_layouts);
		RUN(test_damaged);
	}
	/* Go's module cache is read-only: check_rmtree makes it writable. */
	if (check_rmtree(tmpdir))
		fprintf(stderr, "could not remove %s\n", tmpdir);
	return CHECK_DONE();
}
