/* pyinterp.c: the CPython interpreter of an ELF file (pyinterp.h).
 *
 * One pass over each of the two symbol tables, reading the raw bytes of
 * the file (nothing is copied or converted), then a few look-ups in the
 * program and section headers.
 */
#include "pyinterp.h"
#include "elfinit.h"

#include <errno.h>
#include <stdint.h>
#include <string.h>

#define MAX_SEGS 64 /* executable PT_LOAD segments looked at */

enum want {
	W_EVAL,    /* _PyEval_EvalFrameDefault */
	W_COLD,    /* _PyEval_EvalFrameDefault.cold */
	W_RUNTIME, /* _PyRuntime */
	W_VERSION, /* Py_Version (3.11+) */
	W_AITER,   /* PyAIter_Check (3.10+), dynamic symbols only */
	W_GETCODE, /* PyFrame_GetCode (3.9+), dynamic symbols only */
	W_COUNT,
};

static const struct wanted {
	const char *w_name;
	size_t w_len;
	uint8_t w_type;  /* STT_FUNC or STT_OBJECT */
	uint8_t w_sized; /* must have a non-zero size */
	uint8_t w_dyn;   /* counts only in .dynsym */
} wanted[W_COUNT] = {
#define W(name, type, sized, dyn) \
	{ \
		name, sizeof(name) - 1, type, sized, dyn \
	}
	[W_EVAL] = W("_PyEval_EvalFrameDefault", STT_FUNC, 1, 0),
	[W_COLD] = W("_PyEval_EvalFrameDefault.cold", STT_FUNC, 1, 0),
	[W_RUNTIME] = W("_PyRuntime", STT_OBJECT, 0, 0),
	[W_VERSION] = W("Py_Version", STT_OBJECT, 0, 0),
	[W_AITER] = W("PyAIter_Check", STT_FUNC, 0, 1),
	[W_GETCODE] = W("PyFrame_GetCode", STT_FUNC, 0, 1),
#undef W
};

struct found {
	int fd_have;
	uint64_t fd_value, fd_size;
	uint16_t fd_shndx;
};

struct seg {
	uint64_t sg_vaddr, sg_offset, sg_filesz;
};

struct scan {
	const uint8_t *sc_raw;
	size_t sc_rawsize;
	struct seg sc_segs[MAX_SEGS];
	size_t sc_nsegs;
	struct found sc_found[W_COUNT];
};

/* in_file: whether [off, off + len) lies within the file. */
static int in_file(const struct scan *s, uint64_t off, uint64_t len)
{
	return off <= s->sc_rawsize && len <= s->sc_rawsize - off;
}

/* scan_symbols: note the wanted symbols that the symbol table sh (of
 * type SHT_SYMTAB or SHT_DYNSYM) defines. */
static void scan_symbols(struct scan *s, Elf *elf, const GElf_Shdr *sh)
{
	int dyn = sh->sh_type == SHT_DYNSYM;
	const uint8_t *syms;
	const char *str;
	uint64_t n, i, strsz;
	Elf_Scn *strscn;
	GElf_Shdr strsh;

	if (sh->sh_entsize != sizeof(Elf64_Sym) || !in_file(s, sh->sh_offset, sh->sh_size) ||
	    !(strscn = elf_getscn(elf, sh->sh_link)) || !gelf_getshdr(strscn, &strsh) ||
	    strsh.sh_type != SHT_STRTAB || !in_file(s, strsh.sh_offset, strsh.sh_size))
		return;
	syms = s->sc_raw + sh->sh_offset;
	n = sh->sh_size / sizeof(Elf64_Sym);
	str = (const char *)s->sc_raw + strsh.sh_offset;
	strsz = strsh.sh_size;
	for (i = 0; i < n; i++) {
		const char *name;
		Elf64_Sym sym;
		uint64_t left;
		int k;

		memcpy(&sym, syms + i * sizeof(sym), sizeof(sym));
		if (sym.st_name >= strsz || sym.st_shndx == SHN_UNDEF ||
		    sym.st_shndx >= SHN_LORESERVE)
			continue;
		name = str + sym.st_name;
		if (name[0] != '_' && name[0] != 'P')
			continue; /* the common case, cheaply */
		left = strsz - sym.st_name;
		for (k = 0; k < W_COUNT; k++) {
			const struct wanted *w = &wanted[k];

			if (s->sc_found[k].fd_have || (w->w_dyn && !dyn) || left <= w->w_len ||
			    name[w->w_len] || memcmp(name, w->w_name, w->w_len))
				continue;
			if (ELF64_ST_TYPE(sym.st_info) != w->w_type || (w->w_sized && !sym.st_size))
				continue;
			s->sc_found[k] = (struct found){ 1, sym.st_value, sym.st_size,
							 sym.st_shndx };
			break;
		}
	}
}

/* to_offsets: the file offsets [*start, *end) of the code at virtual
 * addresses [va, va + size), and the bias (p_vaddr - p_offset) of the
 * executable segment that holds va; -ENOENT when none does, or the range
 * ends beyond 4 GiB. */
static int to_offsets(const struct scan *s, uint64_t va, uint64_t size, uint32_t *start,
		      uint32_t *end, uint64_t *bias)
{
	size_t i;

	for (i = 0; i < s->sc_nsegs; i++) {
		const struct seg *g = &s->sc_segs[i];
		uint64_t off, len;

		if (va < g->sg_vaddr || va - g->sg_vaddr >= g->sg_filesz)
			continue;
		off = g->sg_offset + (va - g->sg_vaddr);
		len = g->sg_filesz - (va - g->sg_vaddr);
		if (size < len)
			len = size;
		/* The segment lies within the file: off + len cannot wrap. */
		if (off + len > UINT32_MAX)
			return -ENOENT;
		*start = (uint32_t)off;
		*end = (uint32_t)(off + len);
		*bias = g->sg_vaddr - g->sg_offset;
		return 0;
	}
	return -ENOENT;
}

/* read_version: PY_VERSION_HEX from Py_Version's bytes, as major << 8 |
 * minor; 0 when they are not in the file. */
static uint32_t read_version(const struct scan *s, Elf *elf, const struct found *v)
{
	Elf_Scn *scn = elf_getscn(elf, v->fd_shndx);
	const uint8_t *p;
	uint64_t off;
	uint32_t hex;
	GElf_Shdr sh;

	if (!scn || !gelf_getshdr(scn, &sh) || sh.sh_type == SHT_NOBITS ||
	    !in_file(s, sh.sh_offset, sh.sh_size) || v->fd_value < sh.sh_addr ||
	    v->fd_value - sh.sh_addr >= sh.sh_size || sh.sh_size - (v->fd_value - sh.sh_addr) < 4)
		return 0;
	/* Within the section, which lies within the file. */
	off = sh.sh_offset + (v->fd_value - sh.sh_addr);
	p = s->sc_raw + off;
	hex = (uint32_t)p[0] | (uint32_t)p[1] << 8 | (uint32_t)p[2] << 16 | (uint32_t)p[3] << 24;
	return hex >> 24 ? (hex >> 24) << 8 | ((hex >> 16) & 0xff) : 0;
}

/* scan_file: s filled in from the symbol tables of elf: -EINVAL when elf
 * is not a 64-bit little-endian ELF file, else 0. */
static int scan_file(Elf *elf, struct scan *s)
{
	int have_symtab = 0, have_dynsym = 0;
	Elf_Scn *scn = NULL;
	GElf_Shdr dynsym, symtab;
	GElf_Ehdr eh;

	if (!elf || elf_kind(elf) != ELF_K_ELF || !gelf_getehdr(elf, &eh) ||
	    eh.e_ident[EI_CLASS] != ELFCLASS64 || eh.e_ident[EI_DATA] != ELFDATA2LSB ||
	    !(s->sc_raw = (const uint8_t *)elf_rawfile(elf, &s->sc_rawsize)))
		return -EINVAL;
	/* The first table of each kind; .dynsym first: its definitions win. */
	while ((scn = elf_nextscn(elf, scn)) && !(have_dynsym && have_symtab)) {
		GElf_Shdr sh;

		if (!gelf_getshdr(scn, &sh))
			continue;
		if (sh.sh_type == SHT_DYNSYM && !have_dynsym)
			dynsym = sh, have_dynsym = 1;
		else if (sh.sh_type == SHT_SYMTAB && !have_symtab)
			symtab = sh, have_symtab = 1;
	}
	if (have_dynsym)
		scan_symbols(s, elf, &dynsym);
	if (have_symtab)
		scan_symbols(s, elf, &symtab);
	return 0;
}

int fp_pyinterp_find(Elf *elf, struct fp_unwind_cpython *out)
{
	struct scan s = { 0 };
	const struct found *f = s.sc_found;
	size_t nph, i;
	uint64_t bias, unused;

	memset(out, 0, sizeof(*out));
	if (scan_file(elf, &s) || elf_getphdrnum(elf, &nph))
		return -EINVAL;
	if (!f[W_EVAL].fd_have || !f[W_RUNTIME].fd_have)
		return 0;
	for (i = 0; i < nph && s.sc_nsegs < MAX_SEGS; i++) {
		GElf_Phdr ph;

		if (gelf_getphdr(elf, (int)i, &ph) && ph.p_type == PT_LOAD && (ph.p_flags & PF_X) &&
		    in_file(&s, ph.p_offset, ph.p_filesz))
			s.sc_segs[s.sc_nsegs++] = (struct seg){ ph.p_vaddr, ph.p_offset,
								ph.p_filesz };
	}
	if (to_offsets(&s, f[W_EVAL].fd_value, f[W_EVAL].fd_size, &out->uc_eval[0].start,
		       &out->uc_eval[0].end, &bias))
		return 0;
	if (f[W_COLD].fd_have && to_offsets(&s, f[W_COLD].fd_value, f[W_COLD].fd_size,
					    &out->uc_eval[1].start, &out->uc_eval[1].end, &unused))
		out->uc_eval[1].start = out->uc_eval[1].end = 0;
	out->uc_runtime = (int64_t)(f[W_RUNTIME].fd_value - bias);
	if (f[W_VERSION].fd_have)
		out->uc_version = read_version(&s, elf, &f[W_VERSION]);
	else if (f[W_AITER].fd_have)
		out->uc_version = 0x030a;
	else if (f[W_GETCODE].fd_have)
		out->uc_version = 0x0309;
	return 1;
}

int fp_pyinterp_version_site(Elf *elf, struct fp_pyinterp_site *out)
{
	struct scan s = { 0 };
	const struct found *v = &s.sc_found[W_VERSION];
	uint64_t at, left;
	Elf_Scn *scn;
	GElf_Shdr sh;

	memset(out, 0, sizeof(*out));
	if (scan_file(elf, &s))
		return -EINVAL;
	if (!s.sc_found[W_EVAL].fd_have || !s.sc_found[W_RUNTIME].fd_have || !v->fd_have ||
	    !(scn = elf_getscn(elf, v->fd_shndx)) || !gelf_getshdr(scn, &sh) ||
	    v->fd_value < sh.sh_addr || v->fd_value - sh.sh_addr >= sh.sh_size)
		return 0;
	/* As read_version: the whole section within the file. */
	if (!in_file(&s, sh.sh_offset, sh.sh_size))
		return 0;
	at = v->fd_value - sh.sh_addr;
	left = sh.sh_size - at;
	out->ps_shndx = v->fd_shndx;
	out->ps_addr = v->fd_value;
	out->ps_offset = sh.sh_offset + at;
	out->ps_len = (uint32_t)(left < FP_PYINTERP_SITE_MAX ? left : FP_PYINTERP_SITE_MAX);
	return 1;
}

int fp_pyinterp_find_fd(int fd, struct fp_unwind_cpython *out)
{
	Elf *elf;
	int ret;

	memset(out, 0, sizeof(*out));
	if (fp_elf_init() || !(elf = elf_begin(fd, ELF_C_READ_MMAP, NULL)))
		return -EINVAL;
	ret = fp_pyinterp_find(elf, out);
	elf_end(elf);
	return ret;
}
