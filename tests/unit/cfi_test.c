/* cfi_test.c: unwind tables from CFI, checked against readelf.
 *
 * The oracle is binutils' own interpretation of the same bytes
 * (readelf --debug-dump=frames-interp): for every row it prints, the row
 * of our table at the row's first and last byte must say the same CFA
 * rule and offset and the same RBP slot, or be INVALID where readelf's
 * rule is one a row cannot express.
 */
#include "check.h"
#include "cfi.h"
#include "elfnote.h"
#include "elfsyms.h"
#include "isolate.h"
#include "resolver.h"
#include "symcache.h"
#include "unwind_table.h"

#include <errno.h>
#include <fcntl.h>
#include <gelf.h>
#include <limits.h>
#include <lmdb.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

static const struct fp_unwind_row *row_at(const void *blob, size_t len, uint64_t off)
{
	return fp_cfi_row(blob, len, off);
}

static int compile_path(const char *path, void **blob, size_t *len, struct fp_cfi_stats *st)
{
	int fd = open(path, O_RDONLY | O_CLOEXEC), err;

	if (fd < 0)
		return -errno;
	err = fp_cfi_compile_stats(fd, blob, len, st);
	close(fd);
	return err;
}

/* Executable PT_LOAD segments of a file: virtual address to file offset,
 * as the compiler must do it. */
struct segs {
	size_t n;
	uint64_t vaddr[16], off[16], size[16];
	uint64_t entry;
	uint64_t plt, plt_size;
};

static int load_segs(const char *path, struct segs *s)
{
	int fd = open(path, O_RDONLY | O_CLOEXEC);
	size_t n, i, shstrndx;
	Elf_Scn *scn = NULL;
	GElf_Ehdr eh;
	Elf *e;

	memset(s, 0, sizeof(*s));
	elf_version(EV_CURRENT);
	if (fd < 0 || !(e = elf_begin(fd, ELF_C_READ, NULL)))
		return -1;
	gelf_getehdr(e, &eh);
	s->entry = eh.e_entry;
	elf_getphdrnum(e, &n);
	for (i = 0; i < n && s->n < 16; i++) {
		GElf_Phdr ph;
		if (gelf_getphdr(e, (int)i, &ph) && ph.p_type == PT_LOAD && (ph.p_flags & PF_X)) {
			s->vaddr[s->n] = ph.p_vaddr, s->off[s->n] = ph.p_offset;
			s->size[s->n++] = ph.p_filesz;
		}
	}
	elf_getshdrstrndx(e, &shstrndx);
	while ((scn = elf_nextscn(e, scn))) {
		GElf_Shdr sh;
		const char *name;
		if (gelf_getshdr(scn, &sh) && (name = elf_strptr(e, shstrndx, sh.sh_name)) &&
		    !strcmp(name, ".plt"))
			s->plt = sh.sh_addr, s->plt_size = sh.sh_size;
	}
	elf_end(e);
	close(fd);
	return 0;
}

static int to_off(const struct segs *s, uint64_t va, uint64_t *off)
{
	size_t i;

	for (i = 0; i < s->n; i++)
		if (va >= s->vaddr[i] && va - s->vaddr[i] < s->size[i]) {
			*off = va - s->vaddr[i] + s->off[i];
			return 0;
		}
	return -1;
}

/* What readelf says at one row, reduced to what a row can say. */
struct expect {
	int rule; /* FP_UNWIND_*; INVALID where we cannot express it */
	int cfa;
	int fp;
	int skip; /* an expression: PLT, SIGNAL or INVALID, checked elsewhere */
};

static struct expect expect_of(const char *cfa, const char *rbp, const char *ra, int signal)
{
	struct expect e = { FP_UNWIND_INVALID, 0, 0, 0 };
	long n;
	char *end;

	if (ra && !strcmp(ra, "u")) {
		e.rule = FP_UNWIND_STOP;
		return e;
	}
	if (signal) {
		e.rule = FP_UNWIND_SIGNAL;
		return e;
	}
	if (!strcmp(cfa, "exp")) {
		e.skip = 1;
		return e;
	}
	if (!ra || strcmp(ra, "c-8"))
		return e;
	if (!strncmp(cfa, "rsp+", 4))
		e.rule = FP_UNWIND_SP;
	else if (!strncmp(cfa, "rbp+", 4))
		e.rule = FP_UNWIND_FP;
	else
		return e;
	n = strtol(cfa + 4, &end, 10);
	if (*end || n < 0 || n % 8 || n / 8 > 0xffff) {
		e.rule = FP_UNWIND_INVALID;
		return e;
	}
	e.cfa = (int)(n / 8);
	if (rbp && rbp[0] == 'c') {
		n = strtol(rbp + 1, &end, 10);
		if (*end || n % 8 || n == 0 || n / 8 < -128 || n / 8 > 127)
			e.rule = FP_UNWIND_INVALID;
		else
			e.fp = (int)(n / 8);
	} else if (rbp && strcmp(rbp, "u")) {
		e.rule = FP_UNWIND_INVALID; /* in a register, an expression, a value */
	}
	return e;
}

struct oracle_result {
	unsigned rows, checked, mismatches, expected_invalid, signal_fdes, signal_ok;
};

static void check_one(const void *blob, size_t len, uint64_t off, const struct expect *e,
		      struct oracle_result *res, uint64_t va)
{
	const struct fp_unwind_row *r = row_at(blob, len, off);
	int rule = r ? FP_UNWIND_RULE(r) : -1;

	res->checked++;
	if (e->rule == FP_UNWIND_SIGNAL) {
		res->signal_ok += rule == FP_UNWIND_SIGNAL;
		return;
	}
	if (rule != e->rule || (rule == FP_UNWIND_SP || rule == FP_UNWIND_FP
					? (r->ur_cfa != e->cfa || r->ur_fp != e->fp)
					: 0)) {
		if (res->mismatches++ < 8)
			fprintf(stderr,
				"  at %#llx (off %#llx): ours rule %d cfa %d fp %d, readelf "
				"rule %d cfa %d fp %d\n",
				(unsigned long long)va, (unsigned long long)off, rule,
				r ? r->ur_cfa : -1, r ? r->ur_fp : -1, e->rule, e->cfa, e->fp);
	}
}

/* oracle: compare the table of path with readelf's rows. */
static void oracle(const char *path, const void *blob, size_t len, struct oracle_result *res)
{
	char cmd[PATH_MAX + 64], line[4096], sigcies[64][16];
	char cols[32][16];
	int ncols = 0, in_fde = 0, fde_signal = 0, nsig = 0, rbp_col = -1, ra_col = -1, have = 0;
	uint64_t fde_end = 0, loc = 0;
	char cfa[32], rbp[16], ra[16];
	struct segs s;
	FILE *p;

	memset(res, 0, sizeof(*res));
	CHECK(load_segs(path, &s) == 0);
	snprintf(cmd, sizeof(cmd), "readelf --debug-dump=frames-interp '%s' 2>/dev/null", path);
	p = popen(cmd, "r");
	CHECK(p != NULL);
	if (!p)
		return;
		/* A row is checked once the next one (or the FDE's end) bounds it. */
#define FLUSH(next) \
	do { \
		if (have && (next) > loc) { \
			struct expect e_ = expect_of(cfa, rbp_col >= 0 ? rbp : NULL, \
						     ra_col >= 0 ? ra : NULL, fde_signal); \
			uint64_t o1, o2; \
			res->rows++; \
			res->expected_invalid += e_.rule == FP_UNWIND_INVALID && !e_.skip; \
			if (!e_.skip && !to_off(&s, loc, &o1) && !to_off(&s, (next)-1, &o2)) { \
				check_one(blob, len, o1, &e_, res, loc); \
				check_one(blob, len, o2, &e_, res, (next)-1); \
			} \
		} \
		have = 0; \
	} while (0)
	while (fgets(line, sizeof(line), p)) {
		unsigned long long a, b;
		char kind[8], aug[32];
		unsigned cie_id;
		char *tok, *save;
		int i;

		if (sscanf(line, "%x %*x %*x CIE \"%31[^\"]\"", &cie_id, aug) == 2) {
			FLUSH(fde_end);
			in_fde = 0;
			if (strchr(aug, 'S') && nsig < 64)
				snprintf(sigcies[nsig++], 16, "%08x", cie_id);
			continue;
		}
		if (strstr(line, " FDE cie=") &&
		    sscanf(strstr(line, "pc="), "pc=%llx..%llx", &a, &b) == 2) {
			char *c = strstr(line, "cie=") + 4;
			FLUSH(fde_end);
			in_fde = 1, fde_end = b, ncols = 0, rbp_col = ra_col = -1;
			fde_signal = 0;
			for (i = 0; i < nsig; i++)
				if (!strncmp(c, sigcies[i], 8))
					fde_signal = 1;
			res->signal_fdes += fde_signal;
			continue;
		}
		if (!in_fde)
			continue;
		if (strstr(line, "LOC") && strstr(line, "CFA")) {
			ncols = 0;
			for (tok = strtok_r(line, " \n", &save); tok && ncols < 32;
			     tok = strtok_r(NULL, " \n", &save)) {
				if (!strcmp(tok, "rbp"))
					rbp_col = ncols;
				if (!strcmp(tok, "ra"))
					ra_col = ncols;
				snprintf(cols[ncols++], 16, "%s", tok);
			}
			continue;
		}
		if (sscanf(line, "%llx %7s", &a, kind) == 2 && ncols) {
			FLUSH(a);
			loc = a;
			i = 0;
			rbp[0] = ra[0] = '\0';
			/* "r10 (r10)": a register rule names the register twice. */
			for (tok = strtok_r(line, " \n", &save); tok && i < ncols;
			     tok = strtok_r(NULL, " \n", &save)) {
				if (tok[0] == '(')
					continue;
				if (i == 1)
					snprintf(cfa, sizeof(cfa), "%s", tok);
				if (i == rbp_col)
					snprintf(rbp, sizeof(rbp), "%s", tok);
				if (i == ra_col)
					snprintf(ra, sizeof(ra), "%s", tok);
				i++;
			}
			have = 1;
			continue;
		}
		if (line[0] == '\n')
			FLUSH(fde_end);
	}
	FLUSH(fde_end);
#undef FLUSH
	pclose(p);
}

static const char *real(const char *path, char *buf)
{
	return realpath(path, buf);
}

static void test_oracle_x86(void)
{
#ifndef __x86_64__
	printf("  not x86-64: skipped\n");
	return;
#endif
	static const char *const files[] = {
		"/usr/lib/x86_64-linux-gnu/libc.so.6",
		"/usr/bin/python3",
		"/usr/bin/xz",
		"/lib64/ld-linux-x86-64.so.2",
	};
	size_t i;

	for (i = 0; i < sizeof(files) / sizeof(files[0]); i++) {
		char path[PATH_MAX];
		struct oracle_result res;
		struct fp_cfi_stats st;
		struct timespec t0, t1;
		struct stat sb;
		void *blob = NULL;
		size_t len = 0;
		int err;

		if (!real(files[i], path) || stat(path, &sb)) {
			printf("  %s: not installed, skipped\n", files[i]);
			continue;
		}
		clock_gettime(CLOCK_MONOTONIC, &t0);
		err = compile_path(path, &blob, &len, &st);
		clock_gettime(CLOCK_MONOTONIC, &t1);
		CHECK_EQ_INT(err, 0);
		if (err)
			continue;
		CHECK_EQ_INT(fp_unwind_table_check(blob, len), 0);
		oracle(path, blob, len, &res);
		printf("  %s: %.1f ms, %zu table bytes for %llu CFI bytes, %u FDEs, %u rows "
		       "(%u INVALID; readelf: %u rows, %u we cannot express), %u checks, %u "
		       "mismatches\n",
		       path, (t1.tv_sec - t0.tv_sec) * 1e3 + (t1.tv_nsec - t0.tv_nsec) / 1e6, len,
		       (unsigned long long)st.cs_cfi_bytes, st.cs_fdes, st.cs_rows, st.cs_invalid,
		       res.rows, res.expected_invalid, res.checked, res.mismatches);
		CHECK(res.rows > 100);
		CHECK_EQ_INT(res.mismatches, 0);
		CHECK(res.signal_ok * 2 >= res.signal_fdes); /* first and last byte of each */
		/* libc's CFI is all plain rules but for a few hand-written functions. */
		CHECK(st.cs_invalid * 100 <= st.cs_rows);
		free(blob);
	}
}

/* The special rows: _start (the entry point) STOP, __restore_rt SIGNAL,
 * the PLT's entries PLT. */
static void test_special_rows(void)
{
	static const char *const exes[] = { "/usr/bin/python3", "/usr/bin/xz" };
	const char *libc = "/usr/lib/x86_64-linux-gnu/libc.so.6";
	const struct fp_unwind_row *r;
	struct segs s;
	uint64_t off;
	void *blob;
	size_t len, i;

#ifndef __x86_64__
	printf("  not x86-64: skipped\n");
	return;
#endif
	for (i = 0; i < sizeof(exes) / sizeof(exes[0]); i++) {
		char path[PATH_MAX];

		if (!real(exes[i], path) || load_segs(path, &s) ||
		    compile_path(path, &blob, &len, NULL))
			continue;
		CHECK(to_off(&s, s.entry, &off) == 0);
		r = row_at(blob, len, off);
		CHECK(r && FP_UNWIND_RULE(r) == FP_UNWIND_STOP);
		r = row_at(blob, len, off + 1);
		CHECK(r && FP_UNWIND_RULE(r) == FP_UNWIND_STOP);
		free(blob);
	}
	if (load_segs(libc, &s) || compile_path(libc, &blob, &len, NULL)) {
		CHECK(!"libc");
		return;
	}
	/* __restore_rt is not exported: find it by its signal CIE, whose FDE
	 * starts one byte early (a nop) so that lookups of pc - 1 land in it. */
	{
		const struct fp_unwind_header *h = blob;
		const struct fp_unwind_row *rows = (const void *)(h + 1);
		unsigned nsignal = 0, nplt = 0, k;

		for (k = 0; k < h->uh_nrows; k++) {
			nsignal += FP_UNWIND_RULE(&rows[k]) == FP_UNWIND_SIGNAL;
			nplt += FP_UNWIND_RULE(&rows[k]) == FP_UNWIND_PLT;
		}
		CHECK(nsignal >= 1);
		CHECK(nplt >= 1);
	}
	CHECK(s.plt_size >= 0x30);
	CHECK(to_off(&s, s.plt + 0x10, &off) == 0);
	for (i = 0; i < 16; i++) {
		r = row_at(blob, len, off + i);
		CHECK(r && FP_UNWIND_RULE(r) == FP_UNWIND_PLT);
	}
	CHECK(to_off(&s, s.plt, &off) == 0);
	r = row_at(blob, len, off);
	CHECK(r && FP_UNWIND_RULE(r) == FP_UNWIND_SP && r->ur_cfa == 2);
	free(blob);
}

/* .debug_frame: a program built without unwind tables has its CFI only
 * there (its crt files still bring .eh_frame): both are read. */
static void test_debug_frame(void)
{
	static const char src[] =
		"__attribute__((noinline)) int f(int *p, int n) {\n"
		"	int s = 0; for (int i = 0; i < n; i++) s += p[i] * f(p, 0);\n"
		"	return s; }\n"
		"int main(int c, char **v) { int a[64] = { c }; return f(a, c); }\n";
	char dir[256], cmd[3 * PATH_MAX], c_file[PATH_MAX], exe[PATH_MAX];
	struct oracle_result res;
	struct fp_cfi_stats st;
	void *blob;
	size_t len;
	FILE *f;

	if (check_tmpdir(dir, sizeof(dir), "cfi_test")) {
		CHECK(!"check_tmpdir");
		return;
	}
	snprintf(c_file, sizeof(c_file), "%s/f.c", dir);
	snprintf(exe, sizeof(exe), "%s/f", dir);
	f = fopen(c_file, "w");
	CHECK(f != NULL);
	if (!f)
		return;
	fputs(src, f);
	fclose(f);
	snprintf(cmd, sizeof(cmd),
		 "cc -O2 -g -fno-asynchronous-unwind-tables -fno-unwind-tables -o %s %s 2>/dev/null",
		 exe, c_file);
	if (system(cmd) != 0) {
		printf("  no C compiler: .debug_frame not tested\n");
		goto out;
	}
	CHECK_EQ_INT(compile_path(exe, &blob, &len, &st), 0);
	oracle(exe, blob, len, &res);
	printf("  .debug_frame program: %u FDEs, %u rows, readelf %u rows, %u mismatches\n",
	       st.cs_fdes, st.cs_rows, res.rows, res.mismatches);
	CHECK(st.cs_fdes >= 3);
	CHECK_EQ_INT(res.mismatches, 0);
	free(blob);
out:
	CHECK_EQ_INT(check_rmtree(dir), 0);
}

/* The frame-pointer flag: set for code built with frame pointers, not
 * without. */
static void test_frame_pointer_flag(void)
{
	static const char *const flags[] = { "-fno-omit-frame-pointer", "-fomit-frame-pointer" };
	char dir[256], cmd[3 * PATH_MAX], c_file[PATH_MAX], so[PATH_MAX];
	struct fp_cfi_stats st;
	const struct fp_unwind_header *h;
	void *blob;
	size_t len, i;
	FILE *f;
	int k;

	if (check_tmpdir(dir, sizeof(dir), "cfi_fp")) {
		CHECK(!"check_tmpdir");
		return;
	}
	snprintf(c_file, sizeof(c_file), "%s/fp.c", dir);
	f = fopen(c_file, "w");
	CHECK(f != NULL);
	if (!f)
		return;
	/* Functions with a frame each: a local array the next one fills. */
	fprintf(f,
		"void sink(volatile int *p);\nint f0(int n) { volatile int a[8]; sink(a); return a[n & 7]; }\n");
	for (k = 1; k < 24; k++)
		fprintf(f,
			"int f%d(int n) { volatile int a[8]; a[n & 7] = f%d(n + 1); sink(a); return a[1]; }\n",
			k, k - 1);
	fclose(f);
	for (i = 0; i < 2; i++) {
		snprintf(so, sizeof(so), "%s/fp%zu.so", dir, i);
		snprintf(cmd, sizeof(cmd), "cc -O2 -fPIC -shared -nostdlib %s -o %s %s 2>/dev/null",
			 flags[i], so, c_file);
		if (system(cmd) != 0) {
			printf("  no C compiler: the frame-pointer flag not tested\n");
			break;
		}
		CHECK_EQ_INT(compile_path(so, &blob, &len, &st), 0);
		if (!blob)
			continue;
		h = blob;
		printf("  %s: %u FDEs, flags %u\n", flags[i], st.cs_fdes, h->uh_flags);
		CHECK_EQ_INT(h->uh_flags & FP_UNWIND_F_FRAME_POINTERS, i == 0);
		free(blob);
		blob = NULL;
	}
	CHECK_EQ_INT(check_rmtree(dir), 0);
}

/* A tiny ELF64 file in memory. */
struct buf {
	uint8_t b[4096];
	size_t n;
};

static void put(struct buf *b, const void *p, size_t n)
{
	if (n)
		memcpy(b->b + b->n, p, n);
	b->n += n;
}

static void put8(struct buf *b, uint8_t v)
{
	put(b, &v, 1);
}
static void put32(struct buf *b, uint32_t v)
{
	put(b, &v, 4);
}

#define SYN_VADDR 0x10000u
#define SYN_EH 0x100u   /* where .eh_frame sits in the file */
#define SYN_CODE 0x200u /* the code the FDEs describe */

/* fde: an FDE for [start, start + size) of the code, pc-relative. */
static void fde(struct buf *b, uint32_t cie_at, uint32_t start, uint32_t size, const uint8_t *insns,
		size_t n)
{
	size_t len_at = b->n;
	uint32_t field;

	put32(b, 0);
	put32(b, (uint32_t)(b->n - cie_at)); /* back to the CIE */
	field = SYN_VADDR + SYN_EH + (uint32_t)b->n;
	put32(b, SYN_VADDR + start - field);
	put32(b, size);
	put8(b, 0); /* augmentation data length */
	put(b, insns, n);
	while ((b->n - len_at) % 8)
		put8(b, 0); /* DW_CFA_nop */
	field = (uint32_t)(b->n - len_at - 4);
	memcpy(b->b + len_at, &field, 4);
}

/* make_arm64: an AArch64 shared object whose .eh_frame describes a
 * function as GCC does with frame pointers, one outermost function and
 * one with only the CIE's rules. */
static size_t make_arm64(uint8_t *out, size_t cap, int signal)
{
	static const uint8_t body[] = {
		0x41, 0x0e, 0x20, 0x9d, 0x04, 0x9e, 0x03, /* +4: cfa sp+32, x29 c-32, x30 c-24 */
		0x2d,                                     /* negate_ra_state */
		0x41, 0x0d, 0x1d,                         /* +8: cfa x29+32 */
		0x48, 0x0a, 0x0c, 0x1f, 0x00, 0xde, 0xdd, /* +40: remember; cfa sp+0; restore */
		0x41, 0x0b,                               /* +44: restore_state */
	};
	static const uint8_t outermost[] = { 0x07, 0x1e }; /* x30 undefined */
	struct buf eh = { .n = 0 };
	Elf64_Ehdr *e = (Elf64_Ehdr *)out;
	Elf64_Phdr *ph = (Elf64_Phdr *)(out + sizeof(*e));
	Elf64_Shdr *sh;
	static const char names[] = "\0.eh_frame\0.shstrtab";
	size_t cie_len_at, shoff = 0x300, strs = 0x2c0;
	uint32_t v;

	memset(out, 0, cap);
	/* CIE: "zR" (or "zRS"), code 4, data -8, ra x30, pcrel sdata4, cfa sp+0 */
	cie_len_at = eh.n;
	put32(&eh, 0);
	put32(&eh, 0);
	put8(&eh, 1);
	put(&eh, signal ? "zRS" : "zR", signal ? 4 : 3);
	put8(&eh, 4);
	put8(&eh, 0x78);
	put8(&eh, 30);
	put8(&eh, 1);
	put8(&eh, 0x1b);
	put8(&eh, 0x0c), put8(&eh, 31), put8(&eh, 0);
	while (eh.n % 8)
		put8(&eh, 0);
	v = (uint32_t)(eh.n - 4);
	memcpy(eh.b + cie_len_at, &v, 4);
	fde(&eh, 0, SYN_CODE, 0x40, body, sizeof(body));
	fde(&eh, 0, SYN_CODE + 0x40, 0x8, outermost, sizeof(outermost));
	fde(&eh, 0, SYN_CODE + 0x60, 0x10, NULL, 0);
	put32(&eh, 0); /* terminator */

	memcpy(e->e_ident, ELFMAG, SELFMAG);
	e->e_ident[EI_CLASS] = ELFCLASS64;
	e->e_ident[EI_DATA] = ELFDATA2LSB;
	e->e_ident[EI_VERSION] = EV_CURRENT;
	e->e_type = ET_DYN;
	e->e_machine = EM_AARCH64;
	e->e_version = EV_CURRENT;
	e->e_phoff = sizeof(*e);
	e->e_shoff = shoff;
	e->e_ehsize = sizeof(*e);
	e->e_phentsize = sizeof(*ph);
	e->e_phnum = 1;
	e->e_shentsize = sizeof(Elf64_Shdr);
	e->e_shnum = 3;
	e->e_shstrndx = 2;
	ph->p_type = PT_LOAD;
	ph->p_flags = PF_R | PF_X;
	ph->p_vaddr = SYN_VADDR;
	ph->p_filesz = ph->p_memsz = shoff + 3 * sizeof(Elf64_Shdr);
	ph->p_align = 0x1000;
	memcpy(out + SYN_EH, eh.b, eh.n);
	memcpy(out + strs, names, sizeof(names));
	sh = (Elf64_Shdr *)(out + shoff);
	sh[1].sh_name = 1;
	sh[1].sh_type = SHT_PROGBITS;
	sh[1].sh_flags = SHF_ALLOC;
	sh[1].sh_addr = SYN_VADDR + SYN_EH;
	sh[1].sh_offset = SYN_EH;
	sh[1].sh_size = eh.n;
	sh[2].sh_name = 11;
	sh[2].sh_type = SHT_STRTAB;
	sh[2].sh_offset = strs;
	sh[2].sh_size = sizeof(names);
	return shoff + 3 * sizeof(Elf64_Shdr);
}

static int memfd_with(const void *data, size_t n)
{
	int fd = memfd_create("cfi_test", MFD_CLOEXEC);

	if (fd >= 0 && pwrite(fd, data, n, 0) != (ssize_t)n) {
		close(fd);
		return -1;
	}
	return fd;
}

static void test_arm64(void)
{
	static const struct {
		uint32_t pc;
		int rule, cfa, ra, fp;
	} want[] = {
		{ SYN_CODE, FP_UNWIND_SP, 0, 0, 0 },
		{ SYN_CODE + 4, FP_UNWIND_SP, 4, -3, -4 },
		{ SYN_CODE + 8, FP_UNWIND_FP, 4, -3, -4 },
		{ SYN_CODE + 40, FP_UNWIND_SP, 0, 0, 0 },
		{ SYN_CODE + 44, FP_UNWIND_FP, 4, -3, -4 },
		{ SYN_CODE + 0x40, FP_UNWIND_STOP, 0, 0, 0 },
		{ SYN_CODE + 0x48, FP_UNWIND_NONE, 0, 0, 0 },
		{ SYN_CODE + 0x60, FP_UNWIND_SP, 0, 0, 0 },
		{ SYN_CODE + 0x70, FP_UNWIND_NONE, 0, 0, 0 },
	};
	static uint8_t file[2048];
	const struct fp_unwind_header *h;
	const struct fp_unwind_row *rows;
	size_t n = make_arm64(file, sizeof(file), 0), len, i;
	void *blob = NULL;
	int fd = memfd_with(file, n);

	CHECK(fd >= 0);
	CHECK_EQ_INT(fp_cfi_compile(fd, &blob, &len), 0);
	close(fd);
	if (!blob)
		return;
	CHECK_EQ_INT(fp_unwind_table_check(blob, len), 0);
	h = blob;
	rows = (const void *)(h + 1);
	CHECK_EQ_INT(h->uh_arch, FP_UNWIND_ARCH_ARM64);
	CHECK_EQ_INT(h->uh_fdes, 3);
	CHECK_EQ_INT(h->uh_nrows, sizeof(want) / sizeof(want[0]));
	for (i = 0; i < h->uh_nrows && i < sizeof(want) / sizeof(want[0]); i++) {
		CHECK_EQ_INT(rows[i].ur_pc, want[i].pc);
		CHECK_EQ_INT(FP_UNWIND_RULE(&rows[i]), want[i].rule);
		CHECK_EQ_INT(rows[i].ur_cfa, want[i].cfa);
		CHECK_EQ_INT(FP_UNWIND_RA_SLOT(&rows[i]), want[i].ra);
		CHECK_EQ_INT(rows[i].ur_fp, want[i].fp);
	}
	free(blob);

	/* The same with an 'S' CIE: signal frames throughout, but the
	 * outermost one. */
	n = make_arm64(file, sizeof(file), 1);
	fd = memfd_with(file, n);
	CHECK_EQ_INT(fp_cfi_compile(fd, &blob, &len), 0);
	close(fd);
	CHECK(FP_UNWIND_RULE(fp_cfi_row(blob, len, SYN_CODE + 9)) == FP_UNWIND_SIGNAL);
	CHECK(FP_UNWIND_RULE(fp_cfi_row(blob, len, SYN_CODE + 0x41)) == FP_UNWIND_STOP);
	free(blob);
}

/* xorshift: deterministic damage. */
static uint64_t rnd_state = 0x9e3779b97f4a7c15ull;
static uint64_t rnd(void)
{
	rnd_state ^= rnd_state << 13;
	rnd_state ^= rnd_state >> 7;
	rnd_state ^= rnd_state << 17;
	return rnd_state;
}

/* hostile: damaged .eh_frame bytes and truncated files either fail
 * cleanly or give a table that passes the check. */
static void hostile_run(const uint8_t *orig, size_t n, size_t eh_off, size_t eh_len, int rounds,
			unsigned *ok, unsigned *refused)
{
	uint8_t *copy = malloc(n);
	int i, k;

	if (!copy)
		return;
	for (i = 0; i < rounds; i++) {
		size_t len = n, blen;
		void *blob = NULL;
		int fd, err, flips = 1 + (int)(rnd() % 16);

		memcpy(copy, orig, n);
		for (k = 0; k < flips && eh_len; k++)
			copy[eh_off + rnd() % eh_len] = (uint8_t)rnd();
		if (i % 8 == 7)
			len = (size_t)(rnd() % n); /* truncated */
		fd = memfd_with(copy, len);
		if (fd < 0)
			continue;
		err = fp_cfi_compile(fd, &blob, &blen);
		close(fd);
		if (!err) {
			CHECK_EQ_INT(fp_unwind_table_check(blob, blen), 0);
			(*ok)++;
		} else {
			CHECK(err == -EINVAL || err == -ENOENT || err == -E2BIG);
			(*refused)++;
		}
		free(blob);
	}
	free(copy);
}

static void test_hostile(void)
{
	static uint8_t syn[2048];
	char path[PATH_MAX];
	unsigned ok = 0, refused = 0;
	size_t n = make_arm64(syn, sizeof(syn), 0);
	struct stat sb;
	uint8_t *xz;
	int fd;

	hostile_run(syn, n, SYN_EH, 0x100, 4000, &ok, &refused);
	/* A real program: its .eh_frame in place. */
	if (real("/usr/bin/xz", path) && (fd = open(path, O_RDONLY)) >= 0) {
		Elf *e;
		Elf_Scn *scn = NULL;
		size_t shstrndx, eh_off = 0, eh_len = 0;

		fstat(fd, &sb);
		xz = malloc((size_t)sb.st_size);
		CHECK(xz && pread(fd, xz, (size_t)sb.st_size, 0) == sb.st_size);
		elf_version(EV_CURRENT);
		e = elf_begin(fd, ELF_C_READ, NULL);
		elf_getshdrstrndx(e, &shstrndx);
		while ((scn = elf_nextscn(e, scn))) {
			GElf_Shdr sh;
			if (gelf_getshdr(scn, &sh) &&
			    !strcmp(elf_strptr(e, shstrndx, sh.sh_name), ".eh_frame"))
				eh_off = sh.sh_offset, eh_len = sh.sh_size;
		}
		elf_end(e);
		close(fd);
		if (xz && eh_len)
			hostile_run(xz, (size_t)sb.st_size, eh_off, eh_len, 300, &ok, &refused);
		free(xz);
	}
	printf("  hostile inputs: %u tables, %u refused\n", ok, refused);
	CHECK(ok > 0);
	/* Not ELF at all. */
	fd = memfd_with("garbage", 7);
	{
		void *blob;
		size_t len;
		CHECK_EQ_INT(fp_cfi_compile(fd, &blob, &len), -EINVAL);
	}
	close(fd);
}

static void test_isolated(void)
{
	int fd = open("/proc/self/exe", O_RDONLY);
	void *a = NULL, *b = NULL;
	size_t alen = 0, blen = 0;

	CHECK(fd >= 0);
	CHECK(fp_cfi_has_cfi(fd));
	CHECK_EQ_INT(fp_cfi_compile(fd, &a, &alen), 0);
	CHECK_EQ_INT(fp_cfi_compile_isolated(fd, &b, &blen), 0);
	CHECK(alen == blen && a && b && !memcmp(a, b, alen));
	free(a);
	free(b);
	close(fd);
	/* Not a table: the isolated path refuses what the check refuses. */
	fd = open("/etc/hostname", O_RDONLY);
	CHECK(fd >= 0);
	CHECK(!fp_cfi_has_cfi(fd));
	CHECK_EQ_INT(fp_cfi_compile_isolated(fd, &a, &alen), -EINVAL);
	close(fd);
}

/* raw_put: blob under id in database name of the cache in dir, created
 * when name is not NULL, written behind the cache's back; with name NULL,
 * whether the database "unwind" exists (-ENOENT when not). */
static int raw_put(const char *dir, const char *name, const struct fp_build_id *id,
		   const void *blob, size_t len)
{
	MDB_val k = { id->fb_len, (void *)id->fb_data }, v = { len, (void *)blob };
	MDB_env *env;
	MDB_txn *txn;
	MDB_dbi dbi;
	int err;

	if (mdb_env_create(&env))
		return -ENOMEM;
	mdb_env_set_maxdbs(env, 4);
	mdb_env_set_mapsize(env, 64ull << 30);
	err = mdb_env_open(env, dir, MDB_NOTLS, 0644);
	if (!err)
		err = mdb_txn_begin(env, NULL, 0, &txn);
	if (!err) {
		err = mdb_dbi_open(txn, name ? name : "unwind", name ? MDB_CREATE : 0, &dbi);
		if (!err && name)
			err = mdb_put(txn, dbi, &k, &v, 0);
		err = err ? (mdb_txn_abort(txn), err) : mdb_txn_commit(txn);
	}
	mdb_env_close(env);
	return err == MDB_NOTFOUND ? -ENOENT : err ? -EIO : 0;
}

/* Tables in the cache: stored, copied out, another version absent. */
static void test_store(void)
{
	char dir[256];
	struct fp_build_id id = { .fb_len = 20, .fb_data = { 1, 2, 3 } };
	struct fp_symcache *c = NULL;
	struct fp_unwind_header *h;
	void *blob = NULL, *got = NULL;
	size_t len = 0, glen = 0;
	int fd = open("/proc/self/exe", O_RDONLY);

	CHECK(!check_tmpdir(dir, sizeof(dir), "cfi_store"));
	CHECK_EQ_INT(fp_cfi_compile(fd, &blob, &len), 0);
	close(fd);
	CHECK_EQ_INT(fp_symcache_open(&c, dir), 0);
	if (!c || !blob)
		return;
	CHECK_EQ_INT(fp_symcache_get_unwind(c, &id, &got, &glen), -ENOENT);
	CHECK_EQ_INT(fp_symcache_put_unwind(c, &id, blob, len), 0);
	CHECK_EQ_INT(fp_symcache_get_unwind(c, &id, &got, &glen), 0);
	CHECK(glen == len && got && !memcmp(got, blob, len));
	free(got);
	/* Not a symbol table: the symbol side does not see it. */
	{
		struct fp_symcache_txn *txn;
		struct fp_symtab t;
		CHECK_EQ_INT(fp_symcache_begin(c, &txn), 0);
		CHECK_EQ_INT(fp_symcache_get(txn, &id, &t), -ENOENT);
		fp_symcache_end(txn);
	}
	CHECK_EQ_INT(fp_symcache_put_unwind(c, &id, "junk", 4), -EINVAL);
	fp_symcache_close(c);
	/* A table of another version, written behind the cache's back (a
	 * cache from an older symbolizer): absent.  The check refuses it, so
	 * it goes in through a raw put of a valid table, patched. */
	h = blob;
	h->uh_version = FP_UNWIND_VERSION + 1;
	CHECK_EQ_INT(raw_put(dir, FP_SYMCACHE_UNWIND_DB, &id, blob, len), 0);
	CHECK_EQ_INT(fp_symcache_open(&c, dir), 0);
	CHECK_EQ_INT(fp_symcache_get_unwind(c, &id, &got, &glen), -ENOENT);
	fp_symcache_close(c);
	/* A valid table in the database of symbolizers whose compiler could
	 * leave a function without a row of its own: dropped at open, with
	 * its database. */
	h->uh_version = FP_UNWIND_VERSION;
	CHECK_EQ_INT(raw_put(dir, "unwind", &id, blob, len), 0);
	CHECK_EQ_INT(fp_symcache_open(&c, dir), 0);
	CHECK_EQ_INT(fp_symcache_get_unwind(c, &id, &got, &glen), -ENOENT);
	fp_symcache_close(c);
	CHECK_EQ_INT(raw_put(dir, NULL, &id, blob, len), -ENOENT);
	free(blob);
	CHECK_EQ_INT(check_rmtree(dir), 0);
}

/* make_table: a table of nrows rows (pcs 0x100, 0x110, ...) with flags,
 * and the trailer py when not NULL; *len its size.  The caller frees. */
static void *make_table(uint32_t nrows, uint8_t flags, const struct fp_unwind_cpython *py,
			size_t *len)
{
	struct fp_unwind_header *h;
	struct fp_unwind_row *r;
	uint32_t i;

	*len = sizeof(*h) + nrows * sizeof(*r) + (py ? sizeof(*py) : 0);
	h = calloc(1, *len);
	if (!h)
		return NULL;
	memcpy(h->uh_magic, FP_UNWIND_MAGIC, 4);
	h->uh_version = FP_UNWIND_VERSION;
	h->uh_arch = FP_UNWIND_ARCH_X86_64;
	h->uh_flags = flags;
	h->uh_nrows = nrows;
	r = (struct fp_unwind_row *)(h + 1);
	for (i = 0; i < nrows; i++)
		r[i] = (struct fp_unwind_row){ 0x100 + 0x10 * i, 1, FP_UNWIND_SP, 0 };
	if (py)
		memcpy(r + nrows, py, sizeof(*py));
	return h;
}

/* The CPython trailer: what fp_unwind_table_check takes and refuses, what
 * fp_unwind_table_needed says, where fp_unwind_table_cpython finds it. */
static void test_cpython_trailer(void)
{
	const struct fp_unwind_cpython good = { 0x030b,
						0,
						0x65b740,
						{ { 0x1000, 0x2000 }, { 0, 0 } } };
	struct fp_unwind_cpython py;
	struct fp_unwind_header *h;
	size_t len;
	void *t;
	int i;

	/* Well-formed, with rows, without rows, with a .cold range, any version. */
	t = make_table(3, FP_UNWIND_F_CPYTHON, &good, &len);
	CHECK_EQ_INT(fp_unwind_table_check(t, len), 0);
	CHECK(fp_unwind_table_cpython(t, len) == (const void *)((char *)t + 16 + 3 * 8));
	CHECK(!memcmp(fp_unwind_table_cpython(t, len), &good, sizeof(good)));
	CHECK(fp_unwind_table_needed(t, len));
	/* Past the rows: fp_cfi_row still answers from the rows only. */
	CHECK(fp_cfi_row(t, len, 0x1000000) && fp_cfi_row(t, len, 0x1000000)->ur_pc == 0x120);
	/* One byte short or long, or the flag without the trailer. */
	CHECK_EQ_INT(fp_unwind_table_check(t, len - 1), -EINVAL);
	CHECK(fp_unwind_table_cpython(t, len - 1) == NULL);
	CHECK_EQ_INT(fp_unwind_table_check(t, len - sizeof(good)), -EINVAL);
	CHECK(fp_unwind_table_cpython(t, len - sizeof(good)) == NULL);
	free(t);
	t = make_table(0, FP_UNWIND_F_CPYTHON | FP_UNWIND_F_FRAME_POINTERS, &good, &len);
	CHECK_EQ_INT(fp_unwind_table_check(t, len), 0);
	/* Frame pointers and no rows: still needed, for the Python walk. */
	CHECK(fp_unwind_table_needed(t, len));
	free(t);
	py = good;
	py.uc_version = 0;
	py.uc_eval[1].start = py.uc_eval[1].end = 0x3000;
	t = make_table(2, FP_UNWIND_F_CPYTHON, &py, &len);
	CHECK_EQ_INT(fp_unwind_table_check(t, len), 0);
	free(t);
	py.uc_version = 0xffffffffu;
	py.uc_eval[1].end = 0x3100;
	t = make_table(2, FP_UNWIND_F_CPYTHON, &py, &len);
	CHECK_EQ_INT(fp_unwind_table_check(t, len), 0);
	free(t);
	/* The trailer's bytes without the flag: a length that does not fit. */
	t = make_table(2, 0, &good, &len);
	CHECK_EQ_INT(fp_unwind_table_check(t, len), -EINVAL);
	CHECK(fp_unwind_table_cpython(t, len) == NULL);
	free(t);
	/* Garbage in the trailer. */
	for (i = 0; i < 5; i++) {
		py = good;
		switch (i) {
		case 0:
			py.uc_eval[0].start = 0x2001;
			break; /* start after end */
		case 1:
			py.uc_eval[1].start = 5, py.uc_eval[1].end = 4;
			break;
		case 2:
			py.uc_eval[0].start = py.uc_eval[0].end = 0;
			break; /* no eval loop */
		case 3:
			py.uc_pad = 1;
			break;
		case 4:
			py.uc_eval[0].end = 0;
			break;
		}
		t = make_table(2, FP_UNWIND_F_CPYTHON, &py, &len);
		CHECK_EQ_INT(fp_unwind_table_check(t, len), -EINVAL);
		free(t);
	}
	/* An unknown flag. */
	t = make_table(2, 0x80, NULL, &len);
	CHECK_EQ_INT(fp_unwind_table_check(t, len), -EINVAL);
	free(t);
	/* Without the trailer: frame pointers, or no rows, are not needed. */
	t = make_table(2, FP_UNWIND_F_FRAME_POINTERS, NULL, &len);
	CHECK_EQ_INT(fp_unwind_table_check(t, len), 0);
	CHECK(!fp_unwind_table_needed(t, len));
	CHECK(fp_unwind_table_cpython(t, len) == NULL);
	free(t);
	t = make_table(0, 0, NULL, &len);
	CHECK(!fp_unwind_table_needed(t, len));
	free(t);
	t = make_table(1, 0, NULL, &len);
	CHECK(fp_unwind_table_needed(t, len));
	h = t;
	h->uh_nrows = 0xffffffffu; /* a count whose size would wrap */
	CHECK(fp_unwind_table_cpython(t, len) == NULL);
	CHECK_EQ_INT(fp_unwind_table_check(t, len), -EINVAL);
	free(t);
	CHECK(fp_unwind_table_cpython(NULL, 100) == NULL);
}

/* The resolver: tables from the files it ingests and from the paths it
 * saw; a debug file without CFI does not replace a table. */
static void test_resolver(void)
{
	char dir[256], cache[PATH_MAX], dbg[PATH_MAX], cmd[3 * PATH_MAX];
	char path[PATH_MAX];
	struct fp_resolver_opts o = { 0 };
	struct fp_resolver_stats st;
	struct fp_resolver *r = NULL;
	struct fp_build_id id, got_id;
	void *direct = NULL, *blob = NULL;
	size_t dlen = 0, len = 0;
	int fd;

	if (!real("/usr/bin/xz", path))
		return;
	CHECK(!check_tmpdir(dir, sizeof(dir), "cfi_resolver"));
	snprintf(cache, sizeof(cache), "%s/cache", dir);
	snprintf(dbg, sizeof(dbg), "%s/xz.debug", dir);
	o.ro_cache_dir = cache;
	o.ro_local_files = 1;
	CHECK_EQ_INT(fp_resolver_open(&r, &o), 0);
	if (!r)
		return;
	fd = open(path, O_RDONLY);
	CHECK_EQ_INT(fp_elfnote_build_id(fd, &id), 0);
	CHECK_EQ_INT(fp_cfi_compile(fd, &direct, &dlen), 0);
	close(fd);
	/* No path known, no debug directory: nothing here, only a device's
	 * copy could give it (and remembered). */
	CHECK_EQ_INT(fp_resolver_unwind(r, &id, &blob, &len), -ENODATA);
	CHECK_EQ_INT(fp_resolver_unwind(r, &id, &blob, &len), -ENODATA);
	CHECK_EQ_INT(fp_resolver_note_path(r, &id, path, 0), 0);
	CHECK_EQ_INT(fp_resolver_unwind(r, &id, &blob, &len), 0);
	CHECK(len == dlen && blob && !memcmp(blob, direct, len));
	free(blob);
	fp_resolver_stats(r, &st);
	CHECK_EQ_INT(st.rs_unwind_compiled, 1);
	CHECK_EQ_INT(st.rs_unwind_bytes, dlen);
	/* The symbols' miss path compiles the table on its way, from the
	 * mapping's own path. */
	{
		struct fp_resolver *r2 = NULL;
		struct fp_lookup *l = NULL;
		struct fp_resolved out;
		char cache2[PATH_MAX];

		snprintf(cache2, sizeof(cache2), "%s/cache2", dir);
		o.ro_cache_dir = cache2;
		CHECK_EQ_INT(fp_resolver_open(&r2, &o), 0);
		CHECK_EQ_INT(fp_resolver_begin(r2, &l), 0);
		if (l)
			fp_resolver_frame(l, FP_MAP_USER, &id, path, 0, 0x1000, &out);
		fp_resolver_end(l);
		fp_resolver_stats(r2, &st);
		CHECK_EQ_INT(st.rs_unwind_compiled, 1);
		CHECK_EQ_INT(fp_resolver_unwind(r2, &id, &blob, &len), 0);
		CHECK(len == dlen && blob && !memcmp(blob, direct, len));
		free(blob);
		fp_resolver_close(r2);
	}
	/* A detached debug file: its .eh_frame is NOBITS. */
	snprintf(cmd, sizeof(cmd), "objcopy --only-keep-debug %s %s 2>/dev/null", path, dbg);
	if (system(cmd) == 0 && (fd = open(dbg, O_RDONLY)) >= 0) {
		CHECK(!fp_cfi_has_cfi(fd));
		fp_resolver_add_file(r, fd, &got_id);
		close(fd);
		CHECK_EQ_INT(fp_resolver_unwind(r, &id, &blob, &len), 0);
		CHECK(len == dlen && blob && !memcmp(blob, direct, len));
		free(blob);
	}
	/* The binary itself, added (xz has no function symbols to give, but
	 * its CFI is taken): the same table. */
	fd = open(path, O_RDONLY);
	fp_resolver_add_file(r, fd, &got_id);
	close(fd);
	CHECK_EQ_INT(fp_resolver_unwind(r, &id, &blob, &len), 0);
	CHECK(len == dlen && blob && !memcmp(blob, direct, len));
	free(blob);
	fp_resolver_close(r);
	free(direct);
	CHECK_EQ_INT(check_rmtree(dir), 0);
}

int main(void)
{
	RUN(test_oracle_x86);
	RUN(test_special_rows);
	RUN(test_debug_frame);
	RUN(test_frame_pointer_flag);
	RUN(test_arm64);
	RUN(test_hostile);
	RUN(test_isolated);
	RUN(test_store);
	RUN(test_resolver);
	RUN(test_cpython_trailer);
	return CHECK_DONE();
}
