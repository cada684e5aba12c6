/* elfnote.c: build-ID notes from ELF program headers, by hand; files
 * without a GNU build-ID get the synthetic id of common/fileid.h. */
#include "elfnote.h"
#include "fileid.h"

#include <elf.h>
#include <errno.h>
#include <string.h>
#include <unistd.h>

#define NOTE_ALIGN(x) (((x) + 3u) & ~(size_t)3u)
#define MAX_PHDRS 256
#define MAX_NOTE_BYTES 4096

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
	const unsigned char *d = note_desc(notes, len, NT_GNU_BUILD_ID, "GNU", 4,
					   FP_BUILD_ID_MAX, &n);

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

static int read_exact(int fd, void *buf, size_t len, off_t off)
{
	ssize_t n = pread(fd, buf, len, off);

	if (n < 0)
		return -errno;
	return (size_t)n == len ? 0 : -EINVAL;
}

/* Both ELF classes reduce to this: where each PT_NOTE is and how big. */
struct note_seg {
	uint64_t off, size;
};

static int note_segments(int fd, struct note_seg *segs, int *nsegs)
{
	unsigned char ident[EI_NIDENT];
	uint64_t phoff;
	unsigned phnum, phentsize, i;
	int n = 0, err, is64;

	if ((err = read_exact(fd, ident, sizeof(ident), 0)))
		return err;
	if (memcmp(ident, ELFMAG, SELFMAG) != 0)
		return -EINVAL;
	is64 = ident[EI_CLASS] == ELFCLASS64;
	if (!is64 && ident[EI_CLASS] != ELFCLASS32)
		return -EINVAL;
	/* Only native byte order: the agent reads files of its own machine. */
	if (ident[EI_DATA] != (__BYTE_ORDER__ == __ORDER_LITTLE_ENDIAN__ ? ELFDATA2LSB : ELFDATA2MSB))
		return -EINVAL;

	if (is64) {
		Elf64_Ehdr eh;
		if ((err = read_exact(fd, &eh, sizeof(eh), 0)))
			return err;
		phoff = eh.e_phoff, phnum = eh.e_phnum, phentsize = eh.e_phentsize;
		if (phentsize != sizeof(Elf64_Phdr))
			return -EINVAL;
	} else {
		Elf32_Ehdr eh;
		if ((err = read_exact(fd, &eh, sizeof(eh), 0)))
			return err;
		phoff = eh.e_phoff, phnum = eh.e_phnum, phentsize = eh.e_phentsize;
		if (phentsize != sizeof(Elf32_Phdr))
			return -EINVAL;
	}
	if (phnum > MAX_PHDRS)
		return -EINVAL;
	for (i = 0; i < phnum && n < *nsegs; i++) {
		off_t at = (off_t)(phoff + (uint64_t)i * phentsize);
		if (is64) {
			Elf64_Phdr ph;
			if ((err = read_exact(fd, &ph, sizeof(ph), at)))
				return err;
			if (ph.p_type == PT_NOTE)
				segs[n++] = (struct note_seg){ ph.p_offset, ph.p_filesz };
		} else {
			Elf32_Phdr ph;
			if ((err = read_exact(fd, &ph, sizeof(ph), at)))
				return err;
			if (ph.p_type == PT_NOTE)
				segs[n++] = (struct note_seg){ ph.p_offset, ph.p_filesz };
		}
	}
	*nsegs = n;
	return 0;
}

int fp_elfnote_build_id(int fd, struct fp_build_id *id)
{
	struct note_seg segs[16];
	unsigned char buf[MAX_NOTE_BYTES], go_id[FP_FILEID_GO_MAX];
	size_t go_len = 0;
	int nsegs = 16, err, i;

	if ((err = note_segments(fd, segs, &nsegs)))
		return err;
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
		if (!go_len)
			go_len = go_note(buf, (size_t)n, go_id);
	}
	/* No GNU build-ID: the same synthetic id the symbolizer computes. */
	return fp_fileid(fd, go_len ? go_id : NULL, go_len, id);
}
