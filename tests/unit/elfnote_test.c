/* elfnote_test.c: GNU build-ID notes (common/elfnote.c) of real files,
 * compared with readelf; hostile and truncated inputs; sections by name
 * and debuglinks. */
#include <elf.h>
#include <errno.h>
#include <fcntl.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "check.h"
#include "elfnote.h"
#include "fileid.h"

static char tmpdir[64];

/* readelf_build_id: the "Build ID:" readelf -n prints for path, as hex;
 * 0 or -1. */
static int readelf_build_id(const char *path, char *hex, size_t len)
{
	char cmd[4200], line[512];
	FILE *p;
	int found = -1;

	snprintf(cmd, sizeof(cmd), "readelf -n '%s' 2>/dev/null", path);
	p = popen(cmd, "r");
	if (!p)
		return -1;
	while (fgets(line, sizeof(line), p)) {
		char *at = strstr(line, "Build ID:");
		if (found == 0 || !at)
			continue;
		if (sscanf(at, "Build ID: %127s", hex) == 1 && strlen(hex) < len)
			found = 0;
	}
	pclose(p);
	return found;
}

/* file_build_id: the GNU build-ID only.  A file without one gets a
 * synthetic id (fileid_test.c tests those); here it reads as -ENOENT. */
static int file_build_id(const char *path, struct fp_build_id *id)
{
	int fd = open(path, O_RDONLY | O_CLOEXEC), err;

	if (fd < 0)
		return -errno;
	err = fp_elfnote_build_id(fd, id);
	close(fd);
	if (err == 0 && fp_fileid_kind(id)) {
		memset(id, 0, sizeof(*id));
		err = -ENOENT;
	}
	return err;
}

static int self_exe(char *buf, size_t len)
{
	ssize_t n = readlink("/proc/self/exe", buf, len - 1);

	if (n <= 0)
		return -1;
	buf[n] = '\0';
	return 0;
}

static void test_matches_readelf(void)
{
	char exe[4096];
	const char *files[] = {
		exe,
		"/lib/x86_64-linux-gnu/libc.so.6",
		"/lib64/ld-linux-x86-64.so.2",
		"/usr/bin/readelf",
	};

	CHECK_EQ_INT(self_exe(exe, sizeof(exe)), 0);
	for (size_t i = 0; i < sizeof(files) / sizeof(files[0]); i++) {
		char want[128] = "", got[2 * FP_BUILD_ID_MAX + 1];
		struct fp_build_id id;
		int err;

		if (i >= 2 && access(files[i], R_OK) != 0)
			continue; /* extra files: only where present */
		memset(&id, 0, sizeof(id));
		err = file_build_id(files[i], &id);
		CHECK_EQ_INT(err, 0);
		CHECK_EQ_INT(readelf_build_id(files[i], want, sizeof(want)), 0);
		if (err)
			continue;
		fp_build_id_hex(&id, got);
		if (strcmp(got, want) != 0) {
			fprintf(stderr, "  %s: got %s, readelf says %s\n", files[i], got, want);
			CHECK(!"build-ID differs from readelf");
		}
		CHECK_EQ_INT(id.fb_len, 20); /* gcc/ld default: SHA-1 */
	}
	/* The same answer through /proc/self/exe. */
	struct fp_build_id a = { 0 }, b = { 0 };
	CHECK_EQ_INT(file_build_id("/proc/self/exe", &a), 0);
	CHECK_EQ_INT(file_build_id(exe, &b), 0);
	CHECK(fp_build_id_eq(&a, &b) && a.fb_len == 20);
}

static void test_kernel_notes(void)
{
	unsigned char buf[8192];
	struct fp_build_id id = { 0 };
	ssize_t n;
	int fd = open("/sys/kernel/notes", O_RDONLY | O_CLOEXEC);

	if (fd < 0) {
		fprintf(stderr, "  /sys/kernel/notes absent: case skipped\n");
		return;
	}
	n = read(fd, buf, sizeof(buf));
	close(fd);
	CHECK(n > 0);
	if (n <= 0)
		return;
	CHECK_EQ_INT(fp_elfnote_find(buf, (size_t)n, &id), 0);
	CHECK_EQ_INT(id.fb_len, 20);
	/* The ID is the descriptor of the first NT_GNU_BUILD_ID "GNU" note:
	 * find its bytes in the buffer the simple way. */
	int found = 0;
	for (ssize_t at = 0; at + 12 + 4 + 20 <= n && !found; at += 4) {
		Elf64_Nhdr nh;
		memcpy(&nh, buf + at, sizeof(nh));
		if (nh.n_namesz == 4 && nh.n_descsz == 20 && nh.n_type == NT_GNU_BUILD_ID &&
		    !memcmp(buf + at + 12, "GNU", 4))
			found = !memcmp(buf + at + 16, id.fb_data, 20);
	}
	CHECK(found);
}

static void test_not_elf(void)
{
	struct fp_build_id id = { 0 };
	char path[128];
	int fd;

	CHECK_EQ_INT(file_build_id("/etc/passwd", &id), -EINVAL);
	CHECK_EQ_INT(id.fb_len, 0);
	/* An empty file and a directory. */
	snprintf(path, sizeof(path), "%s/empty", tmpdir);
	fd = open(path, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
	CHECK(fd >= 0);
	if (fd >= 0)
		close(fd);
	CHECK_EQ_INT(file_build_id(path, &id), -EINVAL);
	unlink(path);
	fd = open(tmpdir, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
	CHECK(fd >= 0);
	if (fd >= 0) {
		CHECK_EQ_INT(fp_elfnote_build_id(fd, &id), -EISDIR);
		close(fd);
	}
	/* A bad descriptor: pread's error. */
	CHECK_EQ_INT(fp_elfnote_build_id(-1, &id), -EBADF);
}

static int write_file(const char *path, const void *data, size_t len)
{
	int fd = open(path, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
	ssize_t n;

	if (fd < 0)
		return -1;
	n = len ? write(fd, data, len) : 0;
	close(fd);
	return n == (ssize_t)len ? 0 : -1;
}

static unsigned char *read_whole(const char *path, size_t *len)
{
	struct stat st;
	unsigned char *buf;
	int fd = open(path, O_RDONLY | O_CLOEXEC);

	if (fd < 0)
		return NULL;
	if (fstat(fd, &st) || !(buf = malloc((size_t)st.st_size))) {
		close(fd);
		return NULL;
	}
	if (pread(fd, buf, (size_t)st.st_size, 0) != st.st_size) {
		free(buf);
		buf = NULL;
	}
	*len = (size_t)st.st_size;
	close(fd);
	return buf;
}

/* notes_end: the end of the PT_NOTE segment holding the build-ID (the
 * first prefix length from which the ID must be found). */
static size_t notes_end(const unsigned char *elf, size_t len, const struct fp_build_id *want)
{
	Elf64_Ehdr eh;
	size_t end = 0;

	memcpy(&eh, elf, sizeof(eh));
	for (unsigned i = 0; i < eh.e_phnum; i++) {
		Elf64_Phdr ph;
		memcpy(&ph, elf + eh.e_phoff + i * sizeof(ph), sizeof(ph));
		if (ph.p_type != PT_NOTE || ph.p_offset + ph.p_filesz > len)
			continue;
		if (memmem(elf + ph.p_offset, ph.p_filesz, want->fb_data, want->fb_len)) {
			end = ph.p_offset + ph.p_filesz;
			break;
		}
	}
	/* The program headers must be whole too. */
	if (end < eh.e_phoff + (size_t)eh.e_phnum * sizeof(Elf64_Phdr))
		end = eh.e_phoff + (size_t)eh.e_phnum * sizeof(Elf64_Phdr);
	return end;
}

static void test_truncated_copies(void)
{
	struct fp_build_id want = { 0 };
	unsigned char *elf;
	size_t len = 0, end, cut;
	char path[128];
	int errors = 0, found = 0, wrong = 0;

	CHECK_EQ_INT(file_build_id("/proc/self/exe", &want), 0);
	elf = read_whole("/proc/self/exe", &len);
	CHECK(elf != NULL && len > 4096);
	if (!elf)
		return;
	end = notes_end(elf, len, &want);
	CHECK(end > sizeof(Elf64_Ehdr) && end < len);
	snprintf(path, sizeof(path), "%s/prefix", tmpdir);

	/* Every length up to a little past the notes, then coarser steps. */
	for (cut = 0; cut <= len; cut += cut < end + 64 ? 1 : cut < 65536 ? 509 : 65521) {
		struct fp_build_id id;
		int err;

		if (write_file(path, elf, cut)) {
			CHECK(!"write prefix");
			break;
		}
		memset(&id, 0, sizeof(id));
		err = file_build_id(path, &id);
		if (err == 0) {
			found++;
			if (!fp_build_id_eq(&id, &want)) {
				wrong++;
				fprintf(stderr, "  prefix %zu: wrong build-ID\n", cut);
			}
		} else {
			errors++;
			if (err != -EINVAL && err != -ENOENT) {
				fprintf(stderr, "  prefix %zu: unexpected error %d\n", cut, err);
				CHECK(!"unexpected error");
			}
			/* Once the notes are all there, the ID must be found. */
			if (cut >= end) {
				fprintf(stderr, "  prefix %zu (notes end at %zu): %d\n", cut, end,
					err);
				CHECK(!"build-ID not found in a long enough prefix");
			}
		}
		/* Too short for an ELF header: not ELF. */
		if (cut < sizeof(Elf64_Ehdr))
			CHECK_EQ_INT(err, -EINVAL);
	}
	CHECK_EQ_INT(wrong, 0);
	CHECK(found > 0 && errors > 0);
	unlink(path);
	free(elf);
}

/* A note: header, name padded to 4, descriptor padded to 4. */
static size_t put_note(unsigned char *p, uint32_t namesz, uint32_t descsz, uint32_t type,
		       const char *name, const unsigned char *desc, size_t desc_bytes)
{
	Elf64_Nhdr nh = { namesz, descsz, type };
	size_t at = 0, nlen = name ? strlen(name) + 1 : 0;

	memcpy(p, &nh, sizeof(nh));
	at = sizeof(nh);
	if (name) {
		memcpy(p + at, name, nlen);
		at += (nlen + 3) & ~(size_t)3;
	}
	if (desc) {
		memcpy(p + at, desc, desc_bytes);
		at += (desc_bytes + 3) & ~(size_t)3;
	}
	return at;
}

static const unsigned char id20[20] = { 0x4a, 0x5a, 0x9b, 0x0a, 0xff, 0xb6, 0x6c, 0x43, 0x7a, 0xbc,
					0xd4, 0x55, 0xd2, 0x73, 0x8a, 0xf8, 0x79, 0x98, 0x5f, 0xa9 };
static const unsigned char id32[32] = { 1,  2,  3,  4,  5,  6,  7,  8,  9,  10, 11,
					12, 13, 14, 15, 16, 17, 18, 19, 20, 21, 22,
					23, 24, 25, 26, 27, 28, 29, 30, 31, 32 };

enum note_case {
	NC_VALID,
	NC_VALID_16,
	NC_AFTER_OTHER,
	NC_NAMESZ_HUGE,
	NC_DESCSZ_HUGE,
	NC_NAMESZ_PAST_END,
	NC_DESCSZ_PAST_END,
	NC_DESCSZ_ONE_PAST,
	NC_NAMESZ_PAST_REST,
	NC_DESCSZ_PAST_REST,
	NC_TOO_LONG_21,
	NC_TOO_LONG_32,
	NC_WRONG_TYPE,
	NC_WRONG_NAME,
	NC_EMPTY_DESC,
	NC_SHORT_HEADER,
	NC_EMPTY,
	NC_LONG_THEN_VALID,
};

static const struct {
	enum note_case c;
	const char *what;
	int err;
	int len; /* expected fb_len when err == 0 */
} note_cases[] = {
	{ NC_VALID, "valid 20-byte ID", 0, 20 },
	{ NC_VALID_16, "valid 16-byte ID (md5/uuid)", 0, 16 },
	{ NC_AFTER_OTHER, "ID after a property note", 0, 20 },
	{ NC_NAMESZ_HUGE, "n_namesz 0xffffffff", -ENOENT, 0 },
	{ NC_DESCSZ_HUGE, "n_descsz 0xffffffff", -ENOENT, 0 },
	{ NC_NAMESZ_PAST_END, "n_namesz past the buffer", -ENOENT, 0 },
	{ NC_DESCSZ_PAST_END, "n_descsz past the buffer", -ENOENT, 0 },
	{ NC_DESCSZ_ONE_PAST, "descriptor one byte short", -ENOENT, 0 },
	{ NC_NAMESZ_PAST_REST, "n_namesz within the buffer, past its rest", -ENOENT, 0 },
	{ NC_DESCSZ_PAST_REST, "n_descsz within the buffer, past its rest", -ENOENT, 0 },
	{ NC_TOO_LONG_21, "21-byte ID", -ENOENT, 0 },
	{ NC_TOO_LONG_32, "32-byte ID", -ENOENT, 0 },
	{ NC_WRONG_TYPE, "GNU note of another type", -ENOENT, 0 },
	{ NC_WRONG_NAME, "type 3 owned by another name", -ENOENT, 0 },
	{ NC_EMPTY_DESC, "empty descriptor", -ENOENT, 0 },
	{ NC_SHORT_HEADER, "11 bytes", -ENOENT, 0 },
	{ NC_EMPTY, "0 bytes", -ENOENT, 0 },
	{ NC_LONG_THEN_VALID, "32-byte ID skipped, then a valid one", 0, 20 },
};

/* build_notes: the raw notes of one case; the length. */
static size_t build_notes(enum note_case c, unsigned char *buf)
{
	static const unsigned char prop[16] = { 0x02, 0x80, 0x00, 0xc0, 4, 0, 0, 0, 1, 0, 0, 0 };
	size_t n = 0;

	switch (c) {
	case NC_VALID:
		return put_note(buf, 4, 20, NT_GNU_BUILD_ID, "GNU", id20, 20);
	case NC_VALID_16:
		return put_note(buf, 4, 16, NT_GNU_BUILD_ID, "GNU", id20, 16);
	case NC_AFTER_OTHER:
		n = put_note(buf, 4, 16, NT_GNU_PROPERTY_TYPE_0, "GNU", prop, 16);
		n += put_note(buf + n, 6, 4, 1, "Linux", (const unsigned char *)"\1\2\3\4", 4);
		return n + put_note(buf + n, 4, 20, NT_GNU_BUILD_ID, "GNU", id20, 20);
	case NC_NAMESZ_HUGE:
		return put_note(buf, 0xffffffffu, 20, NT_GNU_BUILD_ID, "GNU", id20, 20);
	case NC_DESCSZ_HUGE:
		return put_note(buf, 4, 0xffffffffu, NT_GNU_BUILD_ID, "GNU", id20, 20);
	case NC_NAMESZ_PAST_END:
		return put_note(buf, 12 + 4 + 20 + 1, 20, NT_GNU_BUILD_ID, "GNU", id20, 20);
	case NC_DESCSZ_PAST_END:
		return put_note(buf, 4, 64, NT_GNU_BUILD_ID, "GNU", id20, 20);
	case NC_DESCSZ_ONE_PAST:
		/* Declares 20 bytes; the buffer ends one byte into them short. */
		return put_note(buf, 4, 20, NT_GNU_BUILD_ID, "GNU", id20, 20) - 1;
	case NC_NAMESZ_PAST_REST:
		/* 28 <= the 36 bytes there are, but only 24 follow the header. */
		return put_note(buf, 28, 20, NT_GNU_BUILD_ID, "GNU", id20, 20);
	case NC_DESCSZ_PAST_REST:
		/* 24 <= 36, but only 20 follow the name. */
		return put_note(buf, 4, 24, NT_GNU_BUILD_ID, "GNU", id20, 20);
	case NC_TOO_LONG_21:
		return put_note(buf, 4, 21, NT_GNU_BUILD_ID, "GNU", id32, 21);
	case NC_TOO_LONG_32:
		return put_note(buf, 4, 32, NT_GNU_BUILD_ID, "GNU", id32, 32);
	case NC_WRONG_TYPE:
		return put_note(buf, 4, 20, NT_GNU_ABI_TAG, "GNU", id20, 20);
	case NC_WRONG_NAME:
		return put_note(buf, 4, 20, NT_GNU_BUILD_ID, "GNX", id20, 20);
	case NC_EMPTY_DESC:
		return put_note(buf, 4, 0, NT_GNU_BUILD_ID, "GNU", NULL, 0);
	case NC_SHORT_HEADER:
		put_note(buf, 4, 20, NT_GNU_BUILD_ID, "GNU", id20, 20);
		return 11;
	case NC_EMPTY:
		return 0;
	case NC_LONG_THEN_VALID:
		n = put_note(buf, 4, 32, NT_GNU_BUILD_ID, "GNU", id32, 32);
		return n + put_note(buf + n, 4, 20, NT_GNU_BUILD_ID, "GNU", id20, 20);
	}
	return 0;
}

static void test_crafted_notes(void)
{
	for (size_t i = 0; i < sizeof(note_cases) / sizeof(note_cases[0]); i++) {
		unsigned char buf[256];
		/* The ID with a guard right behind it: nothing may be written past
		 * fb_data. */
		struct {
			struct fp_build_id id;
			unsigned char guard[32];
		} out;
		size_t len;
		unsigned char *copy;
		int err, before = check_failures;

		memset(buf, 0x5c, sizeof(buf));
		len = build_notes(note_cases[i].c, buf);
		/* An exact-size heap copy: ASan sees any read past the end. */
		copy = malloc(len ? len : 1);
		if (!copy)
			continue;
		memcpy(copy, buf, len);
		memset(&out, 0xee, sizeof(out));
		out.id.fb_len = 0;
		err = fp_elfnote_find(copy, len, &out.id);
		CHECK_EQ_INT(err, note_cases[i].err);
		if (note_cases[i].err == 0 && err == 0) {
			CHECK_EQ_INT(out.id.fb_len, note_cases[i].len);
			CHECK(!memcmp(out.id.fb_data, id20, (size_t)note_cases[i].len));
		} else {
			CHECK_EQ_INT(out.id.fb_len, 0); /* not accepted: nothing set */
		}
		for (size_t g = 0; g < sizeof(out.guard); g++)
			if (out.guard[g] != 0xee) {
				CHECK(!"wrote past the build-ID");
				break;
			}
		free(copy);
		if (check_failures != before)
			fprintf(stderr, "  case %zu: %s\n", i, note_cases[i].what);
	}
}

/* A minimal ELF file holding one PT_NOTE segment with the given notes. */
struct elf_spec {
	const char *what;
	int class32;
	int big_endian;
	int bad_phentsize;
	unsigned phnum;     /* program headers (all PT_NOTE after the first) */
	int note_type;      /* p_type of the note header */
	uint64_t note_off;  /* 0: right after the headers */
	uint64_t note_size; /* 0: the notes' length */
	enum note_case notes;
	int err;
	int len;
};

static const struct elf_spec elf_cases[] = {
	{ "64-bit, one note", 0, 0, 0, 1, PT_NOTE, 0, 0, NC_VALID, 0, 20 },
	{ "32-bit, one note", 1, 0, 0, 1, PT_NOTE, 0, 0, NC_VALID, 0, 20 },
	{ "notes after others", 0, 0, 0, 1, PT_NOTE, 0, 0, NC_AFTER_OTHER, 0, 20 },
	{ "segment larger than the file", 0, 0, 0, 1, PT_NOTE, 0, 1ull << 40, NC_VALID, 0, 20 },
	{ "21-byte ID", 0, 0, 0, 1, PT_NOTE, 0, 0, NC_TOO_LONG_21, -ENOENT, 0 },
	{ "32-byte ID", 1, 0, 0, 1, PT_NOTE, 0, 0, NC_TOO_LONG_32, -ENOENT, 0 },
	{ "overflowing n_descsz", 0, 0, 0, 1, PT_NOTE, 0, 0, NC_DESCSZ_HUGE, -ENOENT, 0 },
	{ "no PT_NOTE", 0, 0, 0, 1, PT_LOAD, 0, 0, NC_VALID, -ENOENT, 0 },
	{ "no program headers", 0, 0, 0, 0, PT_NOTE, 0, 0, NC_VALID, -ENOENT, 0 },
	{ "note offset past EOF", 0, 0, 0, 1, PT_NOTE, 1u << 20, 0, NC_VALID, -ENOENT, 0 },
	{ "note offset negative as off_t", 0, 0, 0, 1, PT_NOTE, 1ull << 63, 0, NC_VALID, -ENOENT,
	  0 },
	{ "big-endian", 0, 1, 0, 1, PT_NOTE, 0, 0, NC_VALID, -EINVAL, 0 },
	{ "wrong e_phentsize, ignored", 0, 0, 1, 1, PT_NOTE, 0, 0, NC_VALID, 0, 20 },
	{ "wrong e_phentsize, ignored (32-bit)", 1, 0, 1, 1, PT_NOTE, 0, 0, NC_VALID, 0, 20 },
	{ "e_phnum 0xffff", 0, 0, 0, 0xffff, PT_NOTE, 0, 0, NC_VALID, -EINVAL, 0 },
	{ "program headers past EOF", 0, 0, 0, 200, PT_NOTE, 0, 0, NC_VALID, -EINVAL, 0 },
};

static size_t build_elf(const struct elf_spec *s, unsigned char *buf, size_t cap)
{
	unsigned char notes[256];
	size_t nlen = build_notes(s->notes, notes), hdrs, at;
	unsigned phnum_written = s->phnum > 4 ? 1 : s->phnum;

	memset(buf, 0, cap);
	if (s->class32) {
		Elf32_Ehdr eh = { 0 };
		Elf32_Phdr ph = { 0 };
		hdrs = sizeof(eh) + phnum_written * sizeof(ph);
		memcpy(eh.e_ident, ELFMAG, SELFMAG);
		eh.e_ident[EI_CLASS] = ELFCLASS32;
		eh.e_ident[EI_DATA] = s->big_endian ? ELFDATA2MSB : ELFDATA2LSB;
		eh.e_ident[EI_VERSION] = EV_CURRENT;
		eh.e_type = ET_DYN;
		eh.e_machine = EM_386;
		eh.e_version = EV_CURRENT;
		eh.e_phoff = sizeof(eh);
		eh.e_ehsize = sizeof(eh);
		eh.e_phentsize = s->bad_phentsize ? sizeof(ph) + 4 : sizeof(ph);
		eh.e_phnum = (Elf32_Half)s->phnum;
		memcpy(buf, &eh, sizeof(eh));
		for (unsigned i = 0; i < phnum_written; i++) {
			ph.p_type = (Elf32_Word)s->note_type;
			ph.p_offset = (Elf32_Off)(s->note_off ? s->note_off : hdrs);
			ph.p_filesz = (Elf32_Word)(s->note_size ? s->note_size : nlen);
			ph.p_align = 4;
			memcpy(buf + sizeof(eh) + i * sizeof(ph), &ph, sizeof(ph));
		}
	} else {
		Elf64_Ehdr eh = { 0 };
		Elf64_Phdr ph = { 0 };
		hdrs = sizeof(eh) + phnum_written * sizeof(ph);
		memcpy(eh.e_ident, ELFMAG, SELFMAG);
		eh.e_ident[EI_CLASS] = ELFCLASS64;
		eh.e_ident[EI_DATA] = s->big_endian ? ELFDATA2MSB : ELFDATA2LSB;
		eh.e_ident[EI_VERSION] = EV_CURRENT;
		eh.e_type = ET_DYN;
		eh.e_machine = EM_X86_64;
		eh.e_version = EV_CURRENT;
		eh.e_phoff = sizeof(eh);
		eh.e_ehsize = sizeof(eh);
		eh.e_phentsize = s->bad_phentsize ? sizeof(ph) + 8 : sizeof(ph);
		eh.e_phnum = (Elf64_Half)s->phnum;
		memcpy(buf, &eh, sizeof(eh));
		for (unsigned i = 0; i < phnum_written; i++) {
			ph.p_type = (Elf64_Word)s->note_type;
			ph.p_offset = s->note_off ? s->note_off : hdrs;
			ph.p_filesz = s->note_size ? s->note_size : nlen;
			ph.p_align = 4;
			memcpy(buf + sizeof(eh) + i * sizeof(ph), &ph, sizeof(ph));
		}
	}
	at = hdrs;
	memcpy(buf + at, notes, nlen);
	return at + nlen;
}

static void test_crafted_elf(void)
{
	char path[128];

	snprintf(path, sizeof(path), "%s/crafted", tmpdir);
	for (size_t i = 0; i < sizeof(elf_cases) / sizeof(elf_cases[0]); i++) {
		unsigned char buf[1024];
		struct fp_build_id id;
		size_t len = build_elf(&elf_cases[i], buf, sizeof(buf));
		int err, before = check_failures;

		if (write_file(path, buf, len)) {
			CHECK(!"write");
			break;
		}
		memset(&id, 0, sizeof(id));
		err = file_build_id(path, &id);
		CHECK_EQ_INT(err, elf_cases[i].err);
		if (err == 0 && elf_cases[i].err == 0) {
			CHECK_EQ_INT(id.fb_len, elf_cases[i].len);
			CHECK(!memcmp(id.fb_data, id20, 20));
		}
		if (check_failures != before)
			fprintf(stderr, "  case %zu: %s\n", i, elf_cases[i].what);
	}
	/* The valid 64-bit file agrees with readelf. */
	{
		unsigned char buf[1024];
		char want[128] = "", got[2 * FP_BUILD_ID_MAX + 1];
		struct fp_build_id id = { 0 };
		size_t len = build_elf(&elf_cases[0], buf, sizeof(buf));

		CHECK_EQ_INT(write_file(path, buf, len), 0);
		CHECK_EQ_INT(file_build_id(path, &id), 0);
		CHECK_EQ_INT(readelf_build_id(path, want, sizeof(want)), 0);
		fp_build_id_hex(&id, got);
		CHECK(!strcmp(got, want));
	}
	unlink(path);
}

/* many_sections: an ELF64 file in a memfd with nsec section headers: the
 * name table (section 1), then sections named ".text" but the last, named
 * last_name and holding a debuglink to "x.debug" with CRC 0x12345678.
 * fd or -1. */
static int many_sections(unsigned nsec, const char *last_name)
{
	static const char link[12] = "x.debug\0\x78\x56\x34\x12";
	char names[64];
	size_t nameslen = 1 + sizeof(".text") + strlen(last_name) + 1;
	uint64_t shoff = sizeof(Elf64_Ehdr), data = shoff + (uint64_t)nsec * sizeof(Elf64_Shdr);
	Elf64_Ehdr eh = { .e_type = ET_EXEC,
			  .e_machine = EM_X86_64,
			  .e_version = EV_CURRENT,
			  .e_shoff = shoff,
			  .e_ehsize = sizeof(Elf64_Ehdr),
			  .e_phentsize = sizeof(Elf64_Phdr),
			  .e_shentsize = sizeof(Elf64_Shdr),
			  .e_shnum = (uint16_t)nsec,
			  .e_shstrndx = 1 };
	int fd = memfd_create("sections", MFD_CLOEXEC);

	if (fd < 0)
		return -1;
	memcpy(eh.e_ident, ELFMAG, SELFMAG);
	eh.e_ident[EI_CLASS] = ELFCLASS64, eh.e_ident[EI_DATA] = ELFDATA2LSB;
	eh.e_ident[EI_VERSION] = EV_CURRENT;
	memset(names, 0, sizeof(names));
	memcpy(names + 1, ".text", sizeof(".text"));
	memcpy(names + 1 + sizeof(".text"), last_name, strlen(last_name) + 1);
	if (pwrite(fd, &eh, sizeof(eh), 0) != sizeof(eh) ||
	    pwrite(fd, names, nameslen, (off_t)data) != (ssize_t)nameslen ||
	    pwrite(fd, link, sizeof(link), (off_t)(data + 64)) != sizeof(link))
		goto fail;
	for (unsigned i = 1; i < nsec; i++) {
		Elf64_Shdr sh = { .sh_name = 1,
				  .sh_type = SHT_PROGBITS,
				  .sh_offset = data + 64,
				  .sh_size = sizeof(link) };
		if (i == 1)
			sh = (Elf64_Shdr){ .sh_type = SHT_STRTAB,
					   .sh_offset = data,
					   .sh_size = nameslen };
		else if (i == nsec - 1)
			sh.sh_name = 1 + sizeof(".text");
		if (pwrite(fd, &sh, sizeof(sh), (off_t)(shoff + i * sizeof(sh))) != sizeof(sh))
			goto fail;
	}
	return fd;
fail:
	close(fd);
	return -1;
}

/* Sections by name and the debuglink, through the chunked section reader:
 * found at the last of 65,279 sections (the most e_shnum holds) in a few
 * milliseconds, missing ones -ENOENT, none where the name table is not
 * one. */
static void test_sections(void)
{
	static const unsigned counts[] = { 4, 64, 65, 129, 65279 };
	struct fp_elfnote_section s;
	char name[16];
	uint32_t crc;

	for (size_t i = 0; i < sizeof(counts) / sizeof(counts[0]); i++) {
		int fd = many_sections(counts[i], ".gnu_debuglink");
		struct timespec a, b;
		double ms;

		CHECK(fd >= 0);
		clock_gettime(CLOCK_MONOTONIC, &a);
		CHECK_EQ_INT(fp_elfnote_debuglink(fd, name, sizeof(name), &crc), 0);
		clock_gettime(CLOCK_MONOTONIC, &b);
		ms = (double)(b.tv_sec - a.tv_sec) * 1e3 + (double)(b.tv_nsec - a.tv_nsec) / 1e6;
		CHECK(strcmp(name, "x.debug") == 0 && crc == 0x12345678);
		CHECK_EQ_INT(fp_elfnote_section(fd, ".text", &s), 0);
		CHECK(s.es_type == SHT_PROGBITS && s.es_size == 12);
		CHECK_EQ_INT(fp_elfnote_section(fd, ".eh_frame", &s), -ENOENT);
		CHECK_EQ_INT(fp_elfnote_debuglink(fd, name, 7, &crc), -ENAMETOOLONG);
		printf("  %5u sections: debuglink in %.2f ms\n", counts[i], ms);
		CHECK(ms < 50);
		close(fd);
	}
	{
		/* The name table's index names a section that is not one. */
		int fd = many_sections(3, ".gnu_debuglink");
		Elf64_Ehdr eh;

		CHECK(fd >= 0 && pread(fd, &eh, sizeof(eh), 0) == sizeof(eh));
		eh.e_shstrndx = 2;
		CHECK(pwrite(fd, &eh, sizeof(eh), 0) == sizeof(eh));
		CHECK_EQ_INT(fp_elfnote_section(fd, ".text", &s), -EINVAL);
		close(fd);
	}
}

int main(void)
{
	if (check_tmpdir(tmpdir, sizeof(tmpdir), "elfnote_test"))
		return 1;
	RUN(test_matches_readelf);
	RUN(test_kernel_notes);
	RUN(test_not_elf);
	RUN(test_truncated_copies);
	RUN(test_crafted_notes);
	RUN(test_crafted_elf);
	RUN(test_sections);
	check_rmtree(tmpdir);
	return CHECK_DONE();
}
