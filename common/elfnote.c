/* elfnote.c: build-ID notes, section headers and the debuglink of ELF
 * files, by hand: fixed-size headers and bounded buffers read with pread;
 * files without a GNU build-ID get the synthetic id of fileid.h. */
#include "elfnote.h"
#include "fileid.h"

#include <elf.h>
#include <errno.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#define NOTE_ALIGN(x) (((x) + 3u) & ~(size_t)3u)
#define MAX_PHDRS 256
#define MAX_NOTE_BYTES 4096
#define MAX_NOTE_SECTIONS 16
#define MAX_NAME 64           /* of a section looked up by name, with the NUL */
#define MAX_NAMES (64u << 10) /* of the section name table read */
#define SHDR_CHUNK 64         /* section headers read at once */

/* note_desc: the descriptor of the first note in a buffer of raw notes
 * with this type and name whose descriptor is 1 to max_desc bytes, or
 * NULL (none, or the notes are malformed before it); *desc_len its size. */
static const unsigned char *note_desc(const unsigned char *p, size_t len, uint32_t type,
				      const char *name, uint32_t namesz, size_t max_desc,
				      size_t *desc_len)
{
	size_t pos = 0;

	while (len - pos >= sizeof(Elf64_Nhdr)) {
		Elf64_Nhdr nh;
		size_t name_sz, desc_sz;

		memcpy(&nh, p + pos, sizeof(nh));
		pos += sizeof(nh);
		name_sz = NOTE_ALIGN((size_t)nh.n_namesz);
		desc_sz = NOTE_ALIGN((size_t)nh.n_descsz);
		if (nh.n_namesz > len || nh.n_descsz > len || name_sz > len - pos ||
		    desc_sz > len - pos - name_sz)
			return NULL;
		if (nh.n_type == type && nh.n_namesz == namesz &&
		    memcmp(p + pos, name, namesz) == 0 && nh.n_descsz > 0 &&
		    nh.n_descsz <= max_desc) {
			*desc_len = nh.n_descsz;
			return p + pos + name_sz;
		}
		pos += name_sz + desc_sz;
	}
	return NULL;
}

int fp_elfnote_find(const void *notes, size_t len, struct fp_build_id *id)
{
	size_t n;
	const unsigned char *d = note_desc(notes, len, NT_GNU_BUILD_ID, "GNU", 4, FP_BUILD_ID_MAX,
					   &n);

	if (!d)
		return -ENOENT;
	id->fb_len = (uint8_t)n;
	memcpy(id->fb_data, d, n);
	return 0;
}

/* go_note: the Go build ID string of the first Go note in a buffer of raw
 * notes, copied to out (FP_FILEID_GO_MAX bytes); its length, or 0. */
static size_t go_note(const unsigned char *p, size_t len, unsigned char *out)
{
	size_t n;
	const unsigned char *d = note_desc(p, len, FP_GO_NOTE_TYPE, FP_GO_NOTE_NAME,
					   FP_GO_NOTE_NAMESZ, FP_FILEID_GO_MAX, &n);

	if (!d)
		return 0;
	memcpy(out, d, n);
	return n;
}

static int read_exact(int fd, void *buf, size_t len, uint64_t off)
{
	ssize_t n;

	if (off > INT64_MAX)
		return -EINVAL;
	n = pread(fd, buf, len, (off_t)off);
	if (n < 0)
		return -errno;
	return (size_t)n == len ? 0 : -EINVAL;
}

/* Both ELF classes reduce to these. */
struct elf_header {
	int eh_is64;
	uint64_t eh_phoff, eh_shoff;
	unsigned eh_phnum, eh_shnum, eh_shstrndx;
};

struct note_seg {
	uint64_t off, size;
};

static int read_header(int fd, struct elf_header *h)
{
	unsigned char ident[EI_NIDENT];
	int err;

	/* e_phentsize and e_shentsize are not read: the tables hold Elf64_ or
	 * Elf32_ entries whatever they say, as libelf reads them, so that the
	 * server's look-ups here find what the parser in the child finds. */

	if ((err = read_exact(fd, ident, sizeof(ident), 0)))
		return err;
	if (memcmp(ident, ELFMAG, SELFMAG) != 0)
		return -EINVAL;
	h->eh_is64 = ident[EI_CLASS] == ELFCLASS64;
	if (!h->eh_is64 && ident[EI_CLASS] != ELFCLASS32)
		return -EINVAL;
	if (ident[EI_DATA] !=
	    (__BYTE_ORDER__ == __ORDER_LITTLE_ENDIAN__ ? ELFDATA2LSB : ELFDATA2MSB))
		return -EINVAL;
	if (h->eh_is64) {
		Elf64_Ehdr eh;
		if ((err = read_exact(fd, &eh, sizeof(eh), 0)))
			return err;
		h->eh_phoff = eh.e_phoff, h->eh_phnum = eh.e_phnum;
		h->eh_shoff = eh.e_shoff, h->eh_shnum = eh.e_shnum;
		h->eh_shstrndx = eh.e_shstrndx;
	} else {
		Elf32_Ehdr eh;
		if ((err = read_exact(fd, &eh, sizeof(eh), 0)))
			return err;
		h->eh_phoff = eh.e_phoff, h->eh_phnum = eh.e_phnum;
		h->eh_shoff = eh.e_shoff, h->eh_shnum = eh.e_shnum;
		h->eh_shstrndx = eh.e_shstrndx;
	}
	if (h->eh_phnum > MAX_PHDRS)
		return -EINVAL;
	/* Extended numbering (e_shnum 0, the count in section 0) is for
	 * relocatable files with 65,280 sections or more: none of ours. */
	if (!h->eh_shoff || h->eh_shstrndx >= h->eh_shnum)
		h->eh_shnum = 0;
	return 0;
}

static int note_segments(int fd, const struct elf_header *h, struct note_seg *segs, int *nsegs)
{
	unsigned i;
	int n = 0, err;

	for (i = 0; i < h->eh_phnum && n < *nsegs; i++) {
		if (h->eh_is64) {
			Elf64_Phdr ph;
			if ((err = read_exact(fd, &ph, sizeof(ph), h->eh_phoff + i * sizeof(ph))))
				return err;
			if (ph.p_type == PT_NOTE)
				segs[n++] = (struct note_seg){ ph.p_offset, ph.p_filesz };
		} else {
			Elf32_Phdr ph;
			if ((err = read_exact(fd, &ph, sizeof(ph), h->eh_phoff + i * sizeof(ph))))
				return err;
			if (ph.p_type == PT_NOTE)
				segs[n++] = (struct note_seg){ ph.p_offset, ph.p_filesz };
		}
	}
	*nsegs = n;
	return 0;
}

/* A cursor over the section headers, which it reads SHDR_CHUNK at a time:
 * a hostile file may declare 65,279 of them. */
struct shdr_cursor {
	const struct elf_header *sc_h;
	int sc_fd;
	unsigned sc_first, sc_count; /* the headers in sc_buf */
	unsigned char sc_buf[SHDR_CHUNK * sizeof(Elf64_Shdr)];
};

static void shdr_cursor_init(struct shdr_cursor *c, int fd, const struct elf_header *h)
{
	c->sc_h = h;
	c->sc_fd = fd;
	c->sc_first = c->sc_count = 0;
}

/* section_header: section i's header, and the offset of its name in the
 * section name table. */
static int section_header(struct shdr_cursor *c, unsigned i, struct fp_elfnote_section *s,
			  uint32_t *name)
{
	const struct elf_header *h = c->sc_h;
	size_t entsize = h->eh_is64 ? sizeof(Elf64_Shdr) : sizeof(Elf32_Shdr);
	const unsigned char *p;
	int err;

	if (i >= h->eh_shnum)
		return -EINVAL;
	if (i < c->sc_first || i - c->sc_first >= c->sc_count) {
		unsigned n = h->eh_shnum - i < SHDR_CHUNK ? h->eh_shnum - i : SHDR_CHUNK;

		c->sc_count = 0;
		if ((err = read_exact(c->sc_fd, c->sc_buf, n * entsize, h->eh_shoff + i * entsize)))
			return err;
		c->sc_first = i, c->sc_count = n;
	}
	p = c->sc_buf + (i - c->sc_first) * entsize;
	if (h->eh_is64) {
		Elf64_Shdr sh;
		memcpy(&sh, p, sizeof(sh));
		*s = (struct fp_elfnote_section){ sh.sh_type, sh.sh_flags, sh.sh_offset,
						  sh.sh_size };
		*name = sh.sh_name;
	} else {
		Elf32_Shdr sh;
		memcpy(&sh, p, sizeof(sh));
		*s = (struct fp_elfnote_section){ sh.sh_type, sh.sh_flags, sh.sh_offset,
						  sh.sh_size };
		*name = sh.sh_name;
	}
	return 0;
}

/* note_sections: the SHT_NOTE sections with bytes, as note_segments. */
static int note_sections(int fd, const struct elf_header *h, struct note_seg *segs, int *nsegs)
{
	struct fp_elfnote_section s;
	struct shdr_cursor c;
	uint32_t name;
	unsigned i;
	int n = 0, err;

	shdr_cursor_init(&c, fd, h);
	for (i = 1; i < h->eh_shnum && n < *nsegs; i++) {
		if ((err = section_header(&c, i, &s, &name)))
			return err;
		if (s.es_type == SHT_NOTE)
			segs[n++] = (struct note_seg){ s.es_offset, s.es_size };
	}
	*nsegs = n;
	return 0;
}

/* notes_build_id: the GNU build-ID in the notes at segs, or -ENOENT; the
 * first Go build ID seen on the way into go_id (*go_len its length). */
static int notes_build_id(int fd, const struct note_seg *segs, int nsegs, struct fp_build_id *id,
			  unsigned char *go_id, size_t *go_len)
{
	unsigned char buf[MAX_NOTE_BYTES];
	int i;

	for (i = 0; i < nsegs; i++) {
		size_t len = segs[i].size < sizeof(buf) ? segs[i].size : sizeof(buf);
		ssize_t n;

		if (segs[i].off > INT64_MAX)
			continue;
		n = pread(fd, buf, len, (off_t)segs[i].off);
		if (n <= 0)
			continue;
		if (fp_elfnote_find(buf, (size_t)n, id) == 0)
			return 0;
		if (!*go_len)
			*go_len = go_note(buf, (size_t)n, go_id);
	}
	return -ENOENT;
}

int fp_elfnote_build_id(int fd, struct fp_build_id *id)
{
	struct note_seg segs[MAX_NOTE_SECTIONS];
	unsigned char go_id[FP_FILEID_GO_MAX];
	struct elf_header h;
	size_t go_len = 0;
	int nsegs = MAX_NOTE_SECTIONS, err;

	if ((err = read_header(fd, &h)))
		return err;
	if ((err = note_segments(fd, &h, segs, &nsegs)))
		return err;
	if (notes_build_id(fd, segs, nsegs, id, go_id, &go_len) == 0)
		return 0;
	nsegs = MAX_NOTE_SECTIONS;
	if (note_sections(fd, &h, segs, &nsegs) == 0 &&
	    notes_build_id(fd, segs, nsegs, id, go_id, &go_len) == 0)
		return 0;
	/* No GNU build-ID: the same synthetic id on both sides. */
	return fp_fileid(fd, go_len ? go_id : NULL, go_len, id);
}

int fp_elfnote_section(int fd, const char *name, struct fp_elfnote_section *out)
{
	size_t want = strlen(name) + 1, have;
	struct fp_elfnote_section names, s;
	struct shdr_cursor c;
	struct elf_header h;
	char *table = NULL;
	uint32_t at;
	unsigned i;
	ssize_t n;
	int err;

	if (want > MAX_NAME)
		return -ENOENT;
	if ((err = read_header(fd, &h)))
		return err;
	if (!h.eh_shnum)
		return -ENOENT;
	shdr_cursor_init(&c, fd, &h);
	if ((err = section_header(&c, h.eh_shstrndx, &names, &at)))
		return err;
	if (names.es_type != SHT_STRTAB || names.es_offset > INT64_MAX)
		return -EINVAL;
	/* The names, read once; those past MAX_NAMES bytes match nothing. */
	have = names.es_size < MAX_NAMES ? (size_t)names.es_size : MAX_NAMES;
	if (!(table = malloc(have ? have : 1)))
		return -ENOMEM;
	n = pread(fd, table, have, (off_t)names.es_offset);
	if (n < 0) {
		err = -errno;
		goto out;
	}
	have = (size_t)n;
	err = -ENOENT;
	for (i = 1; i < h.eh_shnum; i++) {
		int e = section_header(&c, i, &s, &at);

		if (e) {
			err = e;
			break;
		}
		if (at < have && have - at >= want && !memcmp(table + at, name, want)) {
			int full = s.es_type != SHT_NOBITS && s.es_size;
			if (err || full)
				*out = s;
			err = 0;
			if (full)
				break;
		}
	}
out:
	free(table);
	return err;
}

int fp_elfnote_debuglink(int fd, char *name, size_t name_size, uint32_t *crc)
{
	struct fp_elfnote_section s;
	char buf[MAX_NOTE_BYTES];
	size_t len, crc_off;
	int err;

	if ((err = fp_elfnote_section(fd, ".gnu_debuglink", &s)))
		return err;
	/* name, NUL, padding to 4 bytes, CRC-32 in the file's byte order */
	if (s.es_type == SHT_NOBITS || (s.es_flags & SHF_COMPRESSED) || s.es_size < 8 ||
	    s.es_size > sizeof(buf))
		return -EINVAL;
	if ((err = read_exact(fd, buf, (size_t)s.es_size, s.es_offset)))
		return err;
	len = strnlen(buf, (size_t)s.es_size);
	crc_off = (len + 4) & ~(size_t)3;
	if (len == 0 || crc_off + 4 > s.es_size)
		return -EINVAL;
	/* A file name, not a path: it is joined to directories. */
	if (memchr(buf, '/', len) || strcmp(buf, ".") == 0 || strcmp(buf, "..") == 0)
		return -EINVAL;
	if (len >= name_size)
		return -ENAMETOOLONG;
	memcpy(crc, buf + crc_off, 4);
	memcpy(name, buf, len + 1);
	return 0;
}
