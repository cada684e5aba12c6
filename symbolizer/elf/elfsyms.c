/* elfsyms.c: build-IDs and function symbols of untrusted ELF files.
 *
 * Everything read from the file is checked before use: section and segment
 * ranges against the file size, entry sizes against what libelf expects,
 * and string offsets against the string table.  Work is bounded by the
 * file size, so a hostile upload cannot make us scan or allocate without
 * limit.
 */
#include "elfsyms.h"
#include "demangle.h"

#include <elf.h>
#include <errno.h>
#include <gelf.h>
#include <limits.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>
#include <zlib.h>

#include "dwarf.h"
#include "elfinit.h"
#include "fileid.h"
#include "gopclntab.h"
#include "minidebug.h"
#include "symtab.h"
#include "vec.h"


/* Longer names are dropped: real mangled names stay far below this, and it
 * bounds what one symbol can cost us (and the demangler). */
#define MAX_NAME_LEN 8192

/* What one file's names may demangle to in total, beyond their own size
 * times this factor, so that many names each just under the estimate
 * cannot add up. */
#define DEMANGLE_BUDGET_FACTOR 16
#define DEMANGLE_BUDGET_FLOOR (16u << 20)

/* Reading names may cost at most this many times the string table's size
 * (plus a floor): legitimate files reference each name about once, a
 * hostile one could point thousands of symbols at one long string. */
#define NAME_BUDGET_FACTOR 8
#define NAME_BUDGET_FLOOR (1u << 20)

/* MiniDebugInfo: what its compressed ELF may inflate to.  Real ones hold
 * a symbol table of a few hundred KiB to a few MiB. */
#define MINIDEBUG_MAX (256u << 20)
#define MINIDEBUG_RATIO 64

struct elf_file {
	Elf *ef_elf;
	uint64_t ef_size; /* of the file, bound for every offset in it */
};

static int elf_file_open(struct elf_file *f, int fd)
{
	struct stat st;
	GElf_Ehdr ehdr;
	Elf *e;
	int cls;

	if (fstat(fd, &st) != 0)
		return -errno;
	if (!S_ISREG(st.st_mode) || st.st_size <= 0)
		return -EINVAL;
	if (fp_elf_init())
		return -ENOSYS;
	/* Mapped, not read: the file is not copied, and libelf still checks
	 * every range against the mapping. */
	e = elf_begin(fd, ELF_C_READ_MMAP, NULL);
	if (!e)
		return -EINVAL;
	cls = gelf_getclass(e);
	if (elf_kind(e) != ELF_K_ELF || (cls != ELFCLASS32 && cls != ELFCLASS64) ||
	    !gelf_getehdr(e, &ehdr)) {
		elf_end(e);
		return -EINVAL;
	}
	f->ef_elf = e;
	f->ef_size = (uint64_t)st.st_size;
	return 0;
}

static void elf_file_close(struct elf_file *f)
{
	elf_end(f->ef_elf);
}

static int in_file(const struct elf_file *f, uint64_t offset, uint64_t size)
{
	return size <= f->ef_size && offset <= f->ef_size - size;
}

/* section_data: the contents of a section that is really in the file, or
 * NULL.  NOBITS sections (everything in a detached debug file but the
 * debug info and symbols) and compressed ones are refused. */
static Elf_Data *section_data(const struct elf_file *f, Elf_Scn *scn, GElf_Shdr *shdr)
{
	Elf_Data *data;

	if (!gelf_getshdr(scn, shdr))
		return NULL;
	if (shdr->sh_type == SHT_NOBITS || (shdr->sh_flags & SHF_COMPRESSED) ||
	    !in_file(f, shdr->sh_offset, shdr->sh_size))
		return NULL;
	data = elf_getdata(scn, NULL);
	if (!data || !data->d_buf || data->d_size == 0 || data->d_size > shdr->sh_size)
		return NULL;
	return data;
}

size_t fp_elf_unversioned_len(const char *name, size_t len)
{
	const char *at = memchr(name, '@', len), *node;

	if (!at || at == name)
		return len;
	node = at + 1;
	if (node < name + len && *node == '@')
		node++;
	if (node == name + len || memchr(node, '@', len - (size_t)(node - name)))
		return len;
	return (size_t)(at - name);
}

/* One function symbol as read, before choosing among aliases. */
struct cand {
	uint64_t c_addr;
	uint64_t c_size;
	const char *c_name;    /* inside the string table, not terminated at c_len */
	uint32_t c_len;        /* without its ELF symbol version */
	const char *c_version; /* the version's node name ("GLIBC_2.2.5"), or NULL */
	uint32_t c_version_len;
	uint32_t c_seq;   /* order in the symbol table(s) */
	uint8_t c_rank;   /* binding: lower is preferred */
	uint8_t c_hidden; /* a non-default version: "@", not "@@" */
};

struct cands {
	struct cand *cs_v;
	size_t cs_n, cs_cap;
};

static uint8_t binding_rank(unsigned char bind)
{
	switch (bind) {
	case STB_GLOBAL:
	case STB_GNU_UNIQUE:
		return 0;
	case STB_WEAK:
		return 1;
	case STB_LOCAL:
		return 2;
	default:
		return 3;
	}
}

static size_t leading_underscores(const struct cand *c)
{
	size_t n = 0;

	while (n < c->c_len && c->c_name[n] == '_')
		n++;
	return n;
}

/* Order by address, then by how good a name is for people reading a
 * profile: global before weak before local, sized before size-less, fewer
 * leading underscores (malloc, not __libc_malloc), shorter, and finally
 * byte order so that the choice never depends on the file's symbol order. */
static int cmp_cand(const void *a, const void *b)
{
	const struct cand *x = a, *y = b;
	size_t ux, uy;
	int c;

	if (x->c_addr != y->c_addr)
		return x->c_addr < y->c_addr ? -1 : 1;
	if (x->c_rank != y->c_rank)
		return x->c_rank < y->c_rank ? -1 : 1;
	if (!x->c_size != !y->c_size)
		return x->c_size ? -1 : 1;
	ux = leading_underscores(x);
	uy = leading_underscores(y);
	if (ux != uy)
		return ux < uy ? -1 : 1;
	if (x->c_len != y->c_len)
		return x->c_len < y->c_len ? -1 : 1;
	c = memcmp(x->c_name, y->c_name, x->c_len);
	if (c)
		return c;
	return x->c_size < y->c_size ? -1 : x->c_size > y->c_size;
}

static int cands_push(struct cands *cs, const struct cand *c)
{
	if (fp_vec_reserve(&cs->cs_v, &cs->cs_cap, cs->cs_n + 1, sizeof(*cs->cs_v)))
		return -ENOMEM;
	cs->cs_v[cs->cs_n++] = *c;
	return 0;
}

/* More version definitions than any real file has (libc: about 45). */
#define MAX_VERDEFS 1024

/* The versions a .dynsym's symbols carry apart from their names:
 * .gnu.version gives each symbol a version index, .gnu.version_d names
 * the indexes the file defines (index 1, the file itself, is no version).
 * In a .symtab the version is part of the name ("f@@V2") instead. */
struct versions {
	Elf_Data *vr_versym; /* NULL: none */
	size_t vr_nsyms;
	size_t vr_count;
	uint16_t vr_ndx[MAX_VERDEFS];
	const char *vr_name[MAX_VERDEFS];
};

/* versions_load: the versions of the dynamic symbol table symscn, whose
 * names are in strs up to last_nul.  Anything malformed leaves the rest
 * without versions, which only changes system names. */
static void versions_load(const struct elf_file *f, Elf_Scn *symscn, const GElf_Shdr *symshdr,
			  const char *strs, const char *last_nul, struct versions *v)
{
	Elf_Scn *scn = NULL, *defscn = NULL;
	Elf_Data *defdata;
	GElf_Shdr shdr;
	size_t off = 0, sym_ndx = elf_ndxscn(symscn);

	v->vr_versym = NULL;
	v->vr_count = 0;
	while ((scn = elf_nextscn(f->ef_elf, scn)) != NULL) {
		if (!gelf_getshdr(scn, &shdr) || shdr.sh_link != sym_ndx)
			continue;
		if (shdr.sh_type == SHT_GNU_versym)
			v->vr_versym = section_data(f, scn, &shdr);
	}
	scn = NULL;
	while ((scn = elf_nextscn(f->ef_elf, scn)) != NULL)
		if (gelf_getshdr(scn, &shdr) && shdr.sh_type == SHT_GNU_verdef &&
		    shdr.sh_link == symshdr->sh_link)
			defscn = scn;
	if (!v->vr_versym || v->vr_versym->d_type != ELF_T_HALF || !defscn ||
	    !(defdata = section_data(f, defscn, &shdr))) {
		v->vr_versym = NULL;
		return;
	}
	v->vr_nsyms = v->vr_versym->d_size / sizeof(GElf_Versym);
	/* Each step moves forward inside the section, so this ends. */
	for (size_t i = 0; i < shdr.sh_info && v->vr_count < MAX_VERDEFS; i++) {
		GElf_Verdef vd;
		GElf_Verdaux vda;

		if (off > INT_MAX || !gelf_getverdef(defdata, (int)off, &vd))
			break;
		if (vd.vd_cnt && vd.vd_aux && off + vd.vd_aux <= INT_MAX &&
		    gelf_getverdaux(defdata, (int)(off + vd.vd_aux), &vda) &&
		    vda.vda_name < (size_t)(last_nul - strs) && !(vd.vd_flags & VER_FLG_BASE)) {
			v->vr_ndx[v->vr_count] = vd.vd_ndx;
			v->vr_name[v->vr_count++] = strs + vda.vda_name;
		}
		if (vd.vd_next == 0 || vd.vd_next > defdata->d_size - off)
			break;
		off += vd.vd_next;
	}
}

/* version_of: symbol i's version (node name), or NULL; *hidden when it is
 * not the symbol's default version. */
static const char *version_of(const struct versions *v, size_t i, uint8_t *hidden)
{
	GElf_Versym vs;

	if (!v->vr_versym || i >= v->vr_nsyms || !gelf_getversym(v->vr_versym, (int)i, &vs))
		return NULL;
	for (size_t k = 0; k < v->vr_count; k++)
		if (v->vr_ndx[k] == (vs & 0x7fff)) {
			*hidden = (vs & 0x8000) != 0;
			return v->vr_name[k];
		}
	return NULL;
}

/* read_functions: the defined functions of symbol table section scn.
 * -ENOENT if the section is unusable (the caller may try another). */
static int read_functions(const struct elf_file *f, Elf_Scn *scn, struct cands *cs)
{
	GElf_Shdr shdr, strshdr;
	Elf_Data *data, *strdata;
	Elf_Scn *strscn;
	const char *strs, *last_nul;
	struct versions *vers = NULL;
	size_t entsize, nsyms;
	uint64_t budget;
	int err = 0;

	data = section_data(f, scn, &shdr);
	entsize = gelf_fsize(f->ef_elf, ELF_T_SYM, 1, EV_CURRENT);
	if (!data || entsize == 0 || shdr.sh_entsize != entsize || data->d_type != ELF_T_SYM)
		return -ENOENT;
	nsyms = data->d_size / entsize;
	if (nsyms > INT_MAX) /* gelf_getsym takes an int */
		return -EINVAL;

	if (shdr.sh_link == SHN_UNDEF)
		return -ENOENT;
	strscn = elf_getscn(f->ef_elf, shdr.sh_link);
	if (!strscn)
		return -ENOENT;
	strdata = section_data(f, strscn, &strshdr);
	if (!strdata || strshdr.sh_type != SHT_STRTAB)
		return -ENOENT;
	strs = strdata->d_buf;
	/* Every name must end before the table does; finding the last NUL once
	 * makes that an O(1) test per symbol. */
	last_nul = strs + strdata->d_size;
	while (last_nul > strs && last_nul[-1] != '\0')
		last_nul--;
	if (last_nul == strs)
		return -ENOENT;
	last_nul--;
	budget = (uint64_t)strdata->d_size * NAME_BUDGET_FACTOR + NAME_BUDGET_FLOOR;
	if (shdr.sh_type == SHT_DYNSYM) {
		if (!(vers = malloc(sizeof(*vers))))
			return -ENOMEM;
		versions_load(f, scn, &shdr, strs, last_nul, vers);
	}

	for (size_t i = 1; i < nsyms && !err; i++) {
		struct cand c;
		const char *name;
		unsigned char type;
		GElf_Sym sym;
		size_t len;

		if (!gelf_getsym(data, (int)i, &sym)) {
			err = -EINVAL;
			break;
		}
		type = GELF_ST_TYPE(sym.st_info);
		if ((type != STT_FUNC && type != STT_GNU_IFUNC) || sym.st_shndx == SHN_UNDEF)
			continue;
		if (sym.st_name >= (size_t)(last_nul - strs))
			continue;
		name = strs + sym.st_name;
		len = strnlen(name, MAX_NAME_LEN + 1);
		if (len > budget) {
			err = -EINVAL;
			break;
		}
		budget -= len;
		if (len == 0 || len > MAX_NAME_LEN)
			continue;
		c = (struct cand){
			.c_addr = sym.st_value,
			.c_size = sym.st_size,
			.c_name = name,
			.c_len = (uint32_t)fp_elf_unversioned_len(name, len),
			.c_seq = (uint32_t)cs->cs_n,
			.c_rank = binding_rank(GELF_ST_BIND(sym.st_info)),
		};
		if (c.c_len < len) { /* "f@V1" or "f@@V2" */
			c.c_hidden = name[c.c_len + 1] != '@';
			c.c_version = name + c.c_len + (c.c_hidden ? 1 : 2);
			c.c_version_len = (uint32_t)(len - (size_t)(c.c_version - name));
		} else if (vers && (c.c_version = version_of(vers, i, &c.c_hidden))) {
			c.c_version_len = (uint32_t)strnlen(c.c_version, MAX_NAME_LEN + 1);
		}
		err = cands_push(cs, &c);
	}
	free(vers);
	if (err)
		return err;
	return cs->cs_n ? 0 : -ENOENT;
}

/* first_section: the first section of the given type, or NULL. */
static Elf_Scn *first_section(const struct elf_file *f, Elf64_Word type)
{
	Elf_Scn *scn = NULL;

	while ((scn = elf_nextscn(f->ef_elf, scn)) != NULL) {
		GElf_Shdr shdr;

		if (gelf_getshdr(scn, &shdr) && shdr.sh_type == type)
			return scn;
	}
	return NULL;
}

/* demangle_budgeted: fp_demangle while the file's budget lasts. */
static char *demangle_budgeted(const char *name, uint64_t *budget)
{
	char *demangled = *budget ? fp_demangle(name) : NULL;

	if (demangled) {
		size_t dlen = strlen(demangled);

		*budget = dlen < *budget ? *budget - dlen : 0;
	}
	return demangled;
}

/* The alias llvm-symbolizer names an address after: of the symbols there,
 * the largest, and of those the last in the symbol table.  llvm-symbolizer
 * shows its version too ("glob@GLIBC_2.2.5"); we keep that for the system
 * name only. */
static const struct cand *llvm_alias(const struct cand *v, size_t n)
{
	const struct cand *pick = &v[0];

	for (size_t k = 1; k < n; k++)
		if (v[k].c_size > pick->c_size ||
		    (v[k].c_size == pick->c_size && v[k].c_seq > pick->c_seq))
			pick = &v[k];
	return pick;
}

static int add_functions(struct fp_symtab_builder *b, struct cands *cs)
{
	uint64_t budget = DEMANGLE_BUDGET_FLOOR;
	char *buf, *fbuf, *fsys;
	int err = 0;

	buf = malloc(3 * (MAX_NAME_LEN + 1));
	if (!buf)
		return -ENOMEM;
	fbuf = buf + MAX_NAME_LEN + 1;
	fsys = fbuf + MAX_NAME_LEN + 1;
	for (size_t i = 0; i < cs->cs_n; i++)
		budget += (uint64_t)cs->cs_v[i].c_len * DEMANGLE_BUDGET_FACTOR;
	if (cs->cs_n)
		qsort(cs->cs_v, cs->cs_n, sizeof(*cs->cs_v), cmp_cand);
	for (size_t i = 0; i < cs->cs_n && !err;) {
		const struct cand *best = &cs->cs_v[i], *frame;
		uint64_t size = best->c_size;
		char *demangled, *fdemangled = NULL;
		size_t j, flen;

		/* Aliases: the best name, with a size if any alias has one. */
		for (j = i + 1; j < cs->cs_n && cs->cs_v[j].c_addr == best->c_addr; j++)
			if (!size)
				size = cs->cs_v[j].c_size;
		frame = llvm_alias(best, j - i);
		i = j;

		memcpy(buf, best->c_name, best->c_len);
		buf[best->c_len] = '\0';
		demangled = demangle_budgeted(buf, &budget);
		/* Frames show the name without its version, which stays in
		 * the system name: "getgrnam_r", "getgrnam_r@@GLIBC_2.2.5". */
		memcpy(fbuf, frame->c_name, frame->c_len);
		fbuf[frame->c_len] = '\0';
		flen = frame->c_len;
		memcpy(fsys, fbuf, flen);
		if (frame->c_version && flen + 2 + frame->c_version_len <= MAX_NAME_LEN) {
			memcpy(fsys + flen, "@@", frame->c_hidden ? 1 : 2);
			flen += frame->c_hidden ? 1 : 2;
			memcpy(fsys + flen, frame->c_version, frame->c_version_len);
			flen += frame->c_version_len;
		}
		fsys[flen] = '\0';
		if (strcmp(fbuf, buf) != 0)
			fdemangled = demangle_budgeted(fbuf, &budget);
		else if (demangled)
			fdemangled = strdup(demangled);
		err = fp_symtab_builder_add_symbol_ex(b, best->c_addr, size,
						      demangled ? demangled : buf, buf,
						      fdemangled ? fdemangled : fbuf, fsys);
		free(demangled);
		free(fdemangled);
	}
	free(buf);
	return err;
}

struct load {
	uint64_t l_offset, l_vaddr, l_filesz, l_memsz, l_align;
};

static int cmp_load_vaddr(const void *a, const void *b)
{
	const struct load *x = a, *y = b;

	return x->l_vaddr < y->l_vaddr ? -1 : x->l_vaddr > y->l_vaddr;
}

/* A detached debug file (objcopy --only-keep-debug) keeps the program
 * headers but not the loaded bytes: p_filesz and p_offset no longer say
 * where the segments were in the original file.  Linkers place each
 * PT_LOAD at the lowest offset after the previous one that is congruent to
 * its address modulo p_align, and in segments without .bss p_memsz is the
 * original p_filesz, so the original layout can be recomputed.  Returns
 * -EINVAL if the headers do not allow it. */
static int add_debug_file_segments(struct fp_symtab_builder *b, struct load *loads, size_t n)
{
	uint64_t end = 0;
	int err;

	qsort(loads, n, sizeof(*loads), cmp_load_vaddr);
	for (size_t i = 0; i < n; i++) {
		const struct load *l = &loads[i];
		uint64_t align = l->l_align ? l->l_align : 1, off;

		if (align & (align - 1))
			return -EINVAL;
		/* The first segment usually kept its bytes (ELF header and
		 * notes), and with them its real offset. */
		if (i == 0 && l->l_filesz)
			off = l->l_offset;
		else
			off = end + ((l->l_vaddr - end) & (align - 1));
		if (off < end || l->l_memsz > UINT64_MAX - off)
			return -EINVAL;
		err = fp_symtab_builder_add_segment(b, off, l->l_vaddr, l->l_memsz);
		if (err)
			return err;
		end = off + l->l_memsz;
	}
	return 0;
}

static int add_segments(const struct elf_file *f, struct fp_symtab_builder *b)
{
	struct load *loads;
	size_t phnum, n = 0, added = 0;
	int detached = 0, err = 0;

	if (elf_getphdrnum(f->ef_elf, &phnum) != 0 || phnum == 0)
		return 0; /* relocatable objects: nothing is loaded */
	if (phnum > f->ef_size / sizeof(Elf32_Phdr))
		return -EINVAL;
	loads = calloc(phnum, sizeof(*loads));
	if (!loads)
		return -ENOMEM;
	for (size_t i = 0; i < phnum; i++) {
		GElf_Phdr phdr;

		if (!gelf_getphdr(f->ef_elf, (int)i, &phdr)) {
			err = -EINVAL;
			goto out;
		}
		if (phdr.p_type != PT_LOAD)
			continue;
		/* Only writable segments have .bss; anything else loaded with
		 * less than its size from the file has lost its bytes. */
		if (!(phdr.p_flags & PF_W) && phdr.p_filesz < phdr.p_memsz)
			detached = 1;
		loads[n++] = (struct load){
			.l_offset = phdr.p_offset,
			.l_vaddr = phdr.p_vaddr,
			.l_filesz = phdr.p_filesz,
			.l_memsz = phdr.p_memsz,
			.l_align = phdr.p_align,
		};
	}
	if (detached) {
		err = add_debug_file_segments(b, loads, n);
		if (err == 0)
			added = n;
		else if (err != -EINVAL)
			goto out;
		err = 0;
	} else {
		for (size_t i = 0; i < n && !err; i++) {
			if (!loads[i].l_filesz)
				continue;
			err = fp_symtab_builder_add_segment(b, loads[i].l_offset, loads[i].l_vaddr,
							    loads[i].l_filesz);
			added++;
		}
	}
	/* A loadable file whose offsets cannot be mapped must not fall back to
	 * "offsets are addresses": an empty segment maps nothing. */
	if (!err && n && !added)
		err = fp_symtab_builder_add_segment(b, 0, 0, 0);
out:
	free(loads);
	return err;
}

/* named_section: the first section called name, or NULL. */
static Elf_Scn *named_section(const struct elf_file *f, const char *name)
{
	Elf_Scn *scn = NULL;
	size_t shstrndx;

	if (elf_getshdrstrndx(f->ef_elf, &shstrndx) != 0)
		return NULL;
	while ((scn = elf_nextscn(f->ef_elf, scn)) != NULL) {
		const char *n;
		GElf_Shdr shdr;

		if (!gelf_getshdr(scn, &shdr))
			continue;
		n = elf_strptr(f->ef_elf, shstrndx, shdr.sh_name);
		if (n && strcmp(n, name) == 0)
			return scn;
	}
	return NULL;
}

/* A MiniDebugInfo ELF, inflated: its buffer must outlive the candidates
 * read from it, which point into its string table. */
struct minidebug {
	void *md_buf;
	struct elf_file md_file;
	int md_open;
};

static void minidebug_close(struct minidebug *md)
{
	if (md->md_open)
		elf_end(md->md_file.ef_elf);
	free(md->md_buf);
}

/* read_minidebug: the function symbols of the .symtab inside the
 * .gnu_debugdata section, added to cs.  Broken or absent MiniDebugInfo is
 * not an error: the outer file's symbols still count. */
static int read_minidebug(const struct elf_file *f, struct minidebug *md, struct cands *cs)
{
	size_t outlen = 0, max;
	GElf_Shdr shdr;
	Elf_Data *data;
	Elf_Scn *scn;
	Elf *inner;
	int err;

	scn = named_section(f, ".gnu_debugdata");
	if (!scn || !(data = section_data(f, scn, &shdr)))
		return 0;
	max = data->d_size < MINIDEBUG_MAX / MINIDEBUG_RATIO ? data->d_size * MINIDEBUG_RATIO
							     : MINIDEBUG_MAX;
	if (max < (1u << 20))
		max = 1u << 20;
	err = fp_xz_decompress(data->d_buf, data->d_size, max, &md->md_buf, &outlen);
	if (err)
		return err == -ENOMEM ? err : 0;
	inner = elf_memory(md->md_buf, outlen);
	if (!inner)
		return 0;
	md->md_file.ef_elf = inner;
	md->md_file.ef_size = outlen;
	md->md_open = 1;
	if (elf_kind(inner) != ELF_K_ELF || gelf_getclass(inner) != gelf_getclass(f->ef_elf))
		return 0;
	scn = first_section(&md->md_file, SHT_SYMTAB);
	if (!scn)
		return 0;
	err = read_functions(&md->md_file, scn, cs);
	return err == -ENOENT ? 0 : err;
}

int fp_elf_debuglink_crc(int fd, uint32_t *crc)
{
	static const size_t chunk = 1u << 16;
	unsigned char *buf = malloc(chunk);
	uLong c = crc32(0L, Z_NULL, 0);
	off_t off = 0;

	if (!buf)
		return -ENOMEM;
	for (;;) {
		ssize_t n = pread(fd, buf, chunk, off);

		if (n < 0) {
			int err = -errno;

			if (err == -EINTR)
				continue;
			free(buf);
			return err;
		}
		if (n == 0)
			break;
		c = crc32(c, buf, (uInt)n);
		off += n;
	}
	free(buf);
	*crc = (uint32_t)c;
	return 0;
}

/* add_gopclntab: what (FP_GOPCLNTAB_*) of Go's pc-line table.  A broken
 * table is no error: the rest of the file still counts. */
/* go_image: the file-backed parts of the PT_LOAD segments, where Go's
 * inline trees and moduledata are.  The caller frees *segs. */
static int go_image(const struct elf_file *f, struct fp_gopclntab_segment **segs, size_t *n)
{
	const uint8_t *raw;
	size_t phnum, rawlen = 0;

	*segs = NULL;
	*n = 0;
	raw = (const uint8_t *)elf_rawfile(f->ef_elf, &rawlen);
	if (!raw || rawlen < f->ef_size || elf_getphdrnum(f->ef_elf, &phnum) != 0 || !phnum ||
	    phnum > f->ef_size / sizeof(Elf32_Phdr))
		return 0;
	*segs = calloc(phnum, sizeof(**segs));
	if (!*segs)
		return -ENOMEM;
	for (size_t i = 0; i < phnum; i++) {
		GElf_Phdr ph;

		if (!gelf_getphdr(f->ef_elf, (int)i, &ph) || ph.p_type != PT_LOAD ||
		    !in_file(f, ph.p_offset, ph.p_filesz))
			continue;
		(*segs)[(*n)++] = (struct fp_gopclntab_segment){
			.gg_vaddr = ph.p_vaddr,
			.gg_data = raw + ph.p_offset,
			.gg_len = (size_t)ph.p_filesz,
			.gg_writable = !!(ph.p_flags & PF_W),
		};
	}
	return 0;
}

static int add_gopclntab(const struct elf_file *f, struct fp_symtab_builder *b, int what,
			 struct fp_gopclntab_stats *gs)
{
	Elf_Scn *scn = named_section(f, ".gopclntab");
	struct fp_gopclntab_image image = { 0 };
	struct fp_gopclntab_segment *segs = NULL;
	GElf_Shdr shdr, text_shdr;
	Elf_Data *data;
	uint64_t text = 0;
	int err;

	if (!scn) /* PIE */
		scn = named_section(f, ".data.rel.ro.gopclntab");
	if (!scn || !(data = section_data(f, scn, &shdr)))
		return 0;
	/* Entries are relative to runtime.text, the start of .text. */
	scn = named_section(f, ".text");
	if (scn && gelf_getshdr(scn, &text_shdr))
		text = text_shdr.sh_addr;
	if ((what & FP_GOPCLNTAB_INLINES) && (err = go_image(f, &segs, &image.gi_nsegments)))
		return err;
	image.gi_pclntab = shdr.sh_addr;
	image.gi_segments = segs;
	err = fp_gopclntab_ingest(data->d_buf, data->d_size, text, what, segs ? &image : NULL, b,
				  gs);
	free(segs);
	return err == -ENOMEM ? err : 0;
}

int fp_elf_symtab(int fd, void **blob, size_t *len)
{
	return fp_elf_symtab_stats(fd, blob, len, NULL);
}

int fp_elf_symtab_stats(int fd, void **blob, size_t *len, struct fp_dwarf_stats *stats)
{
	struct fp_symtab_builder *b = NULL;
	struct fp_dwarf_stats ds;
	struct fp_gopclntab_stats gs = { 0 }, gl = { 0 };
	struct minidebug md = { 0 };
	struct cands cs = { 0 };
	struct elf_file f;
	Elf_Scn *scn;
	int err;

	err = elf_file_open(&f, fd);
	if (err)
		return err;

	/* .symtab has the local functions too; .dynsym is what a stripped
	 * file has left, with perhaps MiniDebugInfo's .symtab for the
	 * rest. */
	err = -ENOENT;
	scn = first_section(&f, SHT_SYMTAB);
	if (scn)
		err = read_functions(&f, scn, &cs);
	if (err == -ENOENT) {
		cs.cs_n = 0;
		scn = first_section(&f, SHT_DYNSYM);
		if (scn)
			err = read_functions(&f, scn, &cs);
	}
	if (err && err != -ENOENT)
		goto out;
	err = read_minidebug(&f, &md, &cs);
	if (err)
		goto out;

	err = fp_symtab_builder_alloc(&b);
	if (err)
		goto out;
	err = add_segments(&f, b);
	if (err)
		goto out;
	/* Go's own function table first: where .symtab has the same
	 * function, the name stays the one the Go runtime prints (.symtab
	 * adds ".abi0" to assembly functions), a stripped and an unstripped
	 * build show the same names, and a function covers its padding. */
	err = add_gopclntab(&f, b, FP_GOPCLNTAB_FUNCTIONS, &gs);
	if (err)
		goto out;
	err = add_functions(b, &cs);
	if (err)
		goto out;
	err = fp_dwarf_ingest(f.ef_elf, f.ef_size, b, &ds);
	if (err)
		goto out;
	/* Go's lines and inline chains only without DWARF's. */
	if (gs.gs_functions && !ds.ds_sequences) {
		err = add_gopclntab(&f, b, FP_GOPCLNTAB_LINES | FP_GOPCLNTAB_INLINES, &gl);
		if (err)
			goto out;
	}
	/* Neither symbols nor DWARF nor Go's table: nothing to look up. */
	if (!cs.cs_n && !ds.ds_sequences && !ds.ds_scopes && !gs.gs_functions) {
		err = -ENOENT;
		goto out;
	}
	err = fp_symtab_builder_finish(b, blob, len);
	if (!err && stats)
		*stats = ds;
out:
	fp_symtab_builder_free(b);
	free(cs.cs_v);
	minidebug_close(&md);
	elf_file_close(&f);
	return err;
}
