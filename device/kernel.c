/* kernel.c: kernel identity, modules and kallsyms. */
#include "kernel.h"
#include "elfnote.h"
#include "vec.h"

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/utsname.h>
#include <unistd.h>

static void read_line_file(const char *path, char *buf, size_t len)
{
	FILE *f = fopen(path, "re");

	buf[0] = '\0';
	if (!f)
		return;
	if (fgets(buf, (int)len, f))
		buf[strcspn(buf, "\n")] = '\0';
	fclose(f);
}

static void read_note_file(const char *path, struct fp_build_id *id)
{
	unsigned char buf[4096];
	ssize_t n;
	int fd = open(path, O_RDONLY | O_CLOEXEC);

	if (fd < 0)
		return;
	n = read(fd, buf, sizeof(buf));
	if (n > 0)
		fp_elfnote_find(buf, (size_t)n, id);
	close(fd);
}

static uint64_t find_text(const char *proc)
{
	char path[256], line[512], type, name[256];
	unsigned long long addr;
	uint64_t text = 0;
	FILE *f;

	snprintf(path, sizeof(path), "%s/kallsyms", proc);
	f = fopen(path, "re");
	if (!f)
		return 0;
	while (fgets(line, sizeof(line), f)) {
		if (sscanf(line, "%llx %c %255s", &addr, &type, name) != 3)
			continue;
		if (strcmp(name, "_text") == 0) {
			text = addr;
			break;
		}
	}
	fclose(f);
	return text;
}

static int module_cmp(const void *a, const void *b)
{
	const struct fp_kmodule *x = a, *y = b;

	return x->km_base < y->km_base ? -1 : x->km_base > y->km_base;
}

static int read_modules(const char *proc, const char *sys, struct fp_kernel *k)
{
	char path[256], line[1024];
	size_t cap = 0;
	FILE *f;

	snprintf(path, sizeof(path), "%s/modules", proc);
	f = fopen(path, "re");
	if (!f)
		return 0;
	while (fgets(line, sizeof(line), f)) {
		struct fp_kmodule m = { 0 };
		unsigned long long size, base;

		if (sscanf(line, "%63s %llu %*s %*s %*s %llx", m.km_name, &size, &base) != 3 ||
		    base == 0)
			continue;
		m.km_base = base, m.km_size = size;
		snprintf(path, sizeof(path), "%s/module/%s/notes/.note.gnu.build-id", sys,
			 m.km_name);
		read_note_file(path, &m.km_build_id);
		if (fp_vec_reserve(&k->kn_modules, &cap, k->kn_nmodules + 1,
				   sizeof(*k->kn_modules))) {
			fclose(f);
			return -ENOMEM;
		}
		k->kn_modules[k->kn_nmodules++] = m;
	}
	fclose(f);
	if (k->kn_nmodules)
		qsort(k->kn_modules, k->kn_nmodules, sizeof(*k->kn_modules), module_cmp);
	return 0;
}

int fp_kernel_read(const char *proc, const char *sys, struct fp_kernel *k)
{
	char path[256];
	struct utsname u;

	memset(k, 0, sizeof(*k));
	if (uname(&u) == 0)
		snprintf(k->kn_release, sizeof(k->kn_release), "%s", u.release);
	snprintf(path, sizeof(path), "%s/sys/kernel/random/boot_id", proc);
	read_line_file(path, k->kn_boot_id, sizeof(k->kn_boot_id));
	snprintf(path, sizeof(path), "%s/kernel/notes", sys);
	read_note_file(path, &k->kn_build_id);
	k->kn_text = find_text(proc);
	return read_modules(proc, sys, k);
}

void fp_kernel_fini(struct fp_kernel *k)
{
	free(k->kn_modules);
	memset(k, 0, sizeof(*k));
}

const struct fp_kmodule *fp_kernel_module(const struct fp_kernel *k, uint64_t addr)
{
	size_t lo = 0, hi = k->kn_nmodules;

	while (lo < hi) {
		size_t mid = lo + (hi - lo) / 2;
		const struct fp_kmodule *m = &k->kn_modules[mid];
		if (addr < m->km_base)
			hi = mid;
		else if (addr >= m->km_base + m->km_size)
			lo = mid + 1;
		else
			return m;
	}
	return NULL;
}

static void ksyms_clear(struct fp_ksyms *part)
{
	size_t i;

	for (i = 0; i < part->fs_nsyms; i++)
		free(part->fs_syms[i].fk_name);
	part->fs_nsyms = 0;
}

int fp_kernel_ksyms(const struct fp_kernel *k, const char *proc, const struct fp_build_id *target,
		    uint64_t session, size_t max_syms, fp_ksyms_emit_fn emit, void *arg)
{
	const struct fp_kmodule *mod = NULL;
	struct fp_ksyms part = { 0 };
	char path[256], line[1024], type, name[512], modname[80];
	uint64_t base;
	size_t i;
	FILE *f;
	int err = 0;

	if (!max_syms)
		return -EINVAL;
	if (target->fb_len && fp_build_id_eq(target, &k->kn_build_id)) {
		part.fs_kind = FP_MAP_KERNEL;
		base = k->kn_text;
	} else {
		for (i = 0; i < k->kn_nmodules && !mod; i++)
			if (k->kn_modules[i].km_build_id.fb_len &&
			    fp_build_id_eq(target, &k->kn_modules[i].km_build_id))
				mod = &k->kn_modules[i];
		if (!mod)
			return -ENOENT;
		part.fs_kind = FP_MAP_KMODULE;
		base = mod->km_base;
	}
	if (!base)
		return -ENOENT;
	part.fs_session = session;
	part.fs_build_id = *target;
	part.fs_name = mod ? (char *)mod->km_name : (char *)"vmlinux";
	part.fs_syms = calloc(max_syms, sizeof(*part.fs_syms));
	if (!part.fs_syms)
		return -ENOMEM;

	snprintf(path, sizeof(path), "%s/kallsyms", proc);
	f = fopen(path, "re");
	if (!f) {
		free(part.fs_syms);
		return -errno;
	}
	while (!err && fgets(line, sizeof(line), f)) {
		unsigned long long addr;
		int n = sscanf(line, "%llx %c %511s [%79[^]]]", &addr, &type, name, modname);

		if (n < 3 || (type != 't' && type != 'T' && type != 'w' && type != 'W'))
			continue;
		if (mod ? (n != 4 || strcmp(modname, mod->km_name) != 0) : n == 4)
			continue;
		if (addr < base || (mod && addr >= base + mod->km_size))
			continue;
		part.fs_syms[part.fs_nsyms].fk_offset = addr - base;
		part.fs_syms[part.fs_nsyms].fk_name = strdup(name);
		if (!part.fs_syms[part.fs_nsyms].fk_name) {
			err = -ENOMEM;
			break;
		}
		if (++part.fs_nsyms == max_syms) {
			err = emit(&part, arg);
			ksyms_clear(&part);
			part.fs_part++;
		}
	}
	fclose(f);
	if (!err) {
		part.fs_last = 1;
		err = emit(&part, arg);
	}
	ksyms_clear(&part);
	free(part.fs_syms);
	return err;
}
