/* store.c: uploaded files by build-ID, in the /usr/lib/debug layout. */
#include "store.h"
#include "buildid.h"
#include "elfinit.h"
#include "fileio.h"
#include "isolate.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <gelf.h>
#include <libelf.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#define TMP_MAX_AGE (24 * 3600) /* older temporary files are a crash's leftovers */

struct fp_store {
	char *st_dir;
};

int fp_store_hex_valid(const char *hex)
{
	size_t n;

	if (!hex)
		return 0;
	for (n = 0; hex[n]; n++) {
		if (n >= FP_STORE_HEX_MAX)
			return 0;
		if (!((hex[n] >= '0' && hex[n] <= '9') || (hex[n] >= 'a' && hex[n] <= 'f')))
			return 0;
	}
	return n >= FP_STORE_HEX_MIN && n % 2 == 0;
}

const char *fp_store_kind_name(int kind)
{
	switch (kind) {
	case FP_STORE_DEBUGINFO:
		return "debuginfo";
	case FP_STORE_EXECUTABLE:
		return "executable";
	default:
		return "unknown";
	}
}

int fp_store_kind_parse(const char *name)
{
	if (!strcmp(name, "debuginfo"))
		return FP_STORE_DEBUGINFO;
	if (!strcmp(name, "executable"))
		return FP_STORE_EXECUTABLE;
	return -EINVAL;
}

static void clean_tmp(const char *tmpdir)
{
	DIR *d = opendir(tmpdir);
	struct dirent *de;
	struct stat st;
	time_t now = time(NULL);

	if (!d)
		return;
	while ((de = readdir(d))) {
		if (de->d_name[0] == '.')
			continue;
		if (fstatat(dirfd(d), de->d_name, &st, AT_SYMLINK_NOFOLLOW) == 0 &&
		    S_ISREG(st.st_mode) && now - st.st_mtime > TMP_MAX_AGE)
			unlinkat(dirfd(d), de->d_name, 0);
	}
	closedir(d);
}

int fp_store_open(struct fp_store **out, const char *dir)
{
	struct fp_store *s;
	char path[4096];
	int err;

	if (!dir || !dir[0])
		return -EINVAL;
	if (snprintf(path, sizeof(path), "%s/.build-id", dir) >= (int)sizeof(path) - 64)
		return -ENAMETOOLONG;
	if ((err = fp_mkdirs(path)))
		return err;
	snprintf(path, sizeof(path), "%s/.tmp", dir);
	if ((err = fp_mkdirs(path)))
		return err;
	clean_tmp(path);
	if (!(s = calloc(1, sizeof(*s))) || !(s->st_dir = strdup(dir))) {
		free(s);
		return -ENOMEM;
	}
	*out = s;
	return 0;
}

void fp_store_close(struct fp_store *s)
{
	if (!s)
		return;
	free(s->st_dir);
	free(s);
}

const char *fp_store_dir(const struct fp_store *s)
{
	return s->st_dir;
}

int fp_store_path(const struct fp_store *s, const char *hex, int kind, char *buf, size_t len)
{
	if (!fp_store_hex_valid(hex))
		return -EINVAL;
	if (kind != FP_STORE_DEBUGINFO && kind != FP_STORE_EXECUTABLE)
		return -EINVAL;
	/* -EINVAL for a one-byte build-ID, which would name the directory xx. */
	return fp_build_id_path(buf, len, s->st_dir, hex,
				kind == FP_STORE_DEBUGINFO ? ".debug" : "");
}

int fp_store_open_file(const struct fp_store *s, const char *hex, int kind, uint64_t *size)
{
	char path[4200];
	struct stat st;
	int fd, err;

	if ((err = fp_store_path(s, hex, kind, path, sizeof(path))))
		return err;
	fd = open(path, O_RDONLY | O_CLOEXEC | O_NOFOLLOW);
	if (fd < 0)
		return -errno;
	if (fstat(fd, &st) || !S_ISREG(st.st_mode)) {
		close(fd);
		return -ENOENT;
	}
	if (size)
		*size = (uint64_t)st.st_size;
	return fd;
}

int fp_store_has(const struct fp_store *s, const char *hex, int mask)
{
	static const int kinds[] = { FP_STORE_DEBUGINFO, FP_STORE_EXECUTABLE };
	char path[4200];
	struct stat st;
	int found = 0;
	size_t i;

	for (i = 0; i < sizeof(kinds) / sizeof(kinds[0]); i++) {
		if (!(mask & kinds[i]) || fp_store_path(s, hex, kinds[i], path, sizeof(path)))
			continue;
		if (lstat(path, &st) == 0 && S_ISREG(st.st_mode))
			found |= kinds[i];
	}
	return found;
}

int fp_store_classify(int fd, int *kinds)
{
	int has_code = 0, has_debug = 0, has_symtab = 0, err = 0;
	size_t shstrndx, phnum, i;
	GElf_Ehdr ehdr;
	Elf_Scn *scn = NULL;
	Elf *e;

	if (fp_elf_init())
		return -ENOSYS;
	e = elf_begin(fd, ELF_C_READ_MMAP, NULL);
	if (!e)
		return -EINVAL;
	if (elf_kind(e) != ELF_K_ELF || !gelf_getehdr(e, &ehdr) || ehdr.e_type == ET_CORE ||
	    elf_getshdrstrndx(e, &shstrndx)) {
		err = -EINVAL;
		goto out;
	}
	while ((scn = elf_nextscn(e, scn))) {
		GElf_Shdr sh;
		const char *name;

		if (!gelf_getshdr(scn, &sh)) {
			err = -EINVAL;
			goto out;
		}
		if (sh.sh_type == SHT_NOBITS || sh.sh_size == 0)
			continue; /* a detached debug file's copies of code sections */
		if ((sh.sh_flags & SHF_EXECINSTR) && sh.sh_type == SHT_PROGBITS)
			has_code = 1;
		if (sh.sh_type == SHT_SYMTAB && sh.sh_entsize && sh.sh_size > sh.sh_entsize)
			has_symtab = 1; /* more than the null symbol */
		name = elf_strptr(e, shstrndx, sh.sh_name);
		if (name && (!strcmp(name, ".debug_info") || !strcmp(name, ".zdebug_info")))
			has_debug = 1;
	}
	/* Without section headers (sstrip), the segments tell. */
	if (!elf_nextscn(e, NULL) && !elf_getphdrnum(e, &phnum)) {
		for (i = 0; i < phnum; i++) {
			GElf_Phdr ph;
			if (gelf_getphdr(e, (int)i, &ph) && ph.p_type == PT_LOAD &&
			    (ph.p_flags & PF_X) && ph.p_filesz > 0)
				has_code = 1;
		}
	}
	*kinds = (has_debug || (has_symtab && !has_code) ? FP_STORE_DEBUGINFO : 0) |
		 (has_code ? FP_STORE_EXECUTABLE : 0);
out:
	elf_end(e);
	return err;
}

/* The blob of the child is the kinds, an int. */
static int classify_build(int fd, void **blob, size_t *len)
{
	int *kinds = malloc(sizeof(*kinds)), err;

	if (!kinds)
		return -ENOMEM;
	if ((err = fp_store_classify(fd, kinds))) {
		free(kinds);
		return err;
	}
	*blob = kinds;
	*len = sizeof(*kinds);
	return 0;
}

static int classify_check(const void *blob, size_t len)
{
	int kinds;

	if (len != sizeof(kinds))
		return -EINVAL;
	memcpy(&kinds, blob, sizeof(kinds));
	return kinds & ~(FP_STORE_DEBUGINFO | FP_STORE_EXECUTABLE) ? -EINVAL : 0;
}

int fp_store_classify_isolated(int fd, int *kinds)
{
	void *blob;
	size_t len;
	int err = fp_isolate_build_checked(classify_build, classify_check, fd, FP_ISOLATE_SECONDS,
					   &blob, &len);

	if (err)
		return err;
	memcpy(kinds, blob, sizeof(*kinds));
	free(blob);
	return 0;
}

int fp_store_tmpfile(struct fp_store *s, char *buf, size_t len)
{
	int n = snprintf(buf, len, "%s/.tmp/upload-XXXXXX", s->st_dir), fd;

	if (n < 0 || (size_t)n >= len)
		return -ENAMETOOLONG;
	fd = mkostemp(buf, O_CLOEXEC);
	if (fd < 0)
		return -errno;
	/* Stored files are read by debuginfod clients and other users. */
	if (fchmod(fd, 0644)) {
		int err = -errno;
		close(fd);
		unlink(buf);
		return err;
	}
	return fd;
}

void fp_store_discard(const char *tmp)
{
	if (tmp && tmp[0])
		unlink(tmp);
}

/* place: make target name tmp's file unless target exists.  The last
 * name takes tmp itself (a rename that never replaces; *moved is set);
 * earlier ones are hard links.  1 created, 0 already there, or a negative
 * errno. */
static int place(const char *tmp, const char *target, int last, int *moved)
{
	if (last) {
		if (renameat2(AT_FDCWD, tmp, AT_FDCWD, target, RENAME_NOREPLACE) == 0) {
			*moved = 1;
			return 1;
		}
		if (errno == EEXIST)
			return 0;
		if (errno != EINVAL && errno != ENOSYS)
			return -errno;
		/* File systems without RENAME_NOREPLACE: link, then unlink
		 * (the caller removes tmp). */
	}
	if (link(tmp, target) == 0)
		return 1;
	return errno == EEXIST ? 0 : -errno;
}

int fp_store_commit(struct fp_store *s, const char *tmp, const char *hex, int kinds, int *created)
{
	static const int order[] = { FP_STORE_DEBUGINFO, FP_STORE_EXECUTABLE };
	char path[4200], *slash;
	int err = 0, moved = 0, fd, rv;
	size_t i;

	*created = 0;
	if (!kinds || (kinds & ~FP_STORE_ANY) || !fp_store_hex_valid(hex)) {
		err = -EINVAL;
		goto out;
	}
	/* The data must be on disk before the name is: a crash must not leave
	 * an empty file under a valid name. */
	fd = open(tmp, O_RDONLY | O_CLOEXEC);
	if (fd < 0 || fsync(fd)) {
		err = -errno;
		if (fd >= 0)
			close(fd);
		goto out;
	}
	close(fd);
	for (i = 0; i < sizeof(order) / sizeof(order[0]) && !err; i++) {
		if (!(kinds & order[i]))
			continue;
		if ((err = fp_store_path(s, hex, order[i], path, sizeof(path))))
			break;
		slash = strrchr(path, '/');
		*slash = '\0';
		if (mkdir(path, 0755) && errno != EEXIST) {
			err = -errno;
			break;
		}
		*slash = '/';
		rv = place(tmp, path, !(kinds & ~((order[i] << 1) - 1)), &moved);
		if (rv < 0)
			err = rv;
		else if (rv > 0)
			*created |= order[i];
	}
out:
	if (!moved)
		unlink(tmp);
	return err;
}
