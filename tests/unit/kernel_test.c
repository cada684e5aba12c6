/* kernel_test.c: the running kernel's identity, modules and kallsyms
 * snapshots (device/kernel.c), against the real /proc and /sys and
 * against fake roots. */
#include <ctype.h>
#include <elf.h>
#include <errno.h>
#include <fcntl.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "check.h"
#include "kernel.h"

/* kallsyms_addr: the address of the first kernel (not module) symbol
 * called name in proc's kallsyms; 0 if none. */
static uint64_t kallsyms_addr(const char *proc, const char *name)
{
	char path[256], line[1024], sym[600], type;
	unsigned long long addr;
	uint64_t found = 0;
	FILE *f;

	snprintf(path, sizeof(path), "%s/kallsyms", proc);
	f = fopen(path, "re");
	if (!f)
		return 0;
	while (!found && fgets(line, sizeof(line), f))
		if (sscanf(line, "%llx %c %599s", &addr, &type, sym) == 3 && !strcmp(sym, name) &&
		    !strchr(line, '['))
			found = addr;
	fclose(f);
	return found;
}

/* notes_build_id: the 20-byte GNU build-ID in a raw notes file, by a plain
 * scan; 0 or -1. */
static int notes_build_id(const char *path, struct fp_build_id *id)
{
	unsigned char buf[8192];
	ssize_t n;
	int fd = open(path, O_RDONLY | O_CLOEXEC);

	if (fd < 0)
		return -1;
	n = read(fd, buf, sizeof(buf));
	close(fd);
	for (ssize_t at = 0; at + 36 <= n; at += 4) {
		Elf64_Nhdr nh;
		memcpy(&nh, buf + at, sizeof(nh));
		if (nh.n_namesz == 4 && nh.n_descsz == 20 && nh.n_type == NT_GNU_BUILD_ID &&
		    !memcmp(buf + at + 12, "GNU", 4)) {
			id->fb_len = 20;
			memcpy(id->fb_data, buf + at + 16, 20);
			return 0;
		}
	}
	return -1;
}

static void test_read_real(void)
{
	struct fp_kernel k;
	char release[128] = "", boot_id[64] = "";
	FILE *f;

	memset(&k, 0xa5, sizeof(k));
	CHECK_EQ_INT(fp_kernel_read("/proc", "/sys", &k), 0);

	/* _text, as /proc/kallsyms shows it to root. */
	uint64_t text = kallsyms_addr("/proc", "_text");
	CHECK(text != 0);
	CHECK(k.kn_text == text);
	CHECK(k.kn_text != 0);

	/* The build-ID of /sys/kernel/notes. */
	struct fp_build_id want = { 0 };
	if (notes_build_id("/sys/kernel/notes", &want) == 0) {
		CHECK_EQ_INT(k.kn_build_id.fb_len, 20);
		CHECK(fp_build_id_eq(&k.kn_build_id, &want));
	} else {
		fprintf(stderr, "  /sys/kernel/notes: no build-ID there\n");
		CHECK_EQ_INT(k.kn_build_id.fb_len, 0);
	}

	/* The release uname -r prints. */
	f = popen("uname -r", "r");
	CHECK(f != NULL);
	if (f) {
		if (fgets(release, sizeof(release), f))
			release[strcspn(release, "\n")] = '\0';
		pclose(f);
	}
	CHECK(release[0] != '\0');
	CHECK(!strcmp(k.kn_release, release));

	/* The boot id: 36 characters, 8-4-4-4-12 hex digits, as in procfs. */
	f = fopen("/proc/sys/kernel/random/boot_id", "re");
	CHECK(f != NULL);
	if (f) {
		if (fgets(boot_id, sizeof(boot_id), f))
			boot_id[strcspn(boot_id, "\n")] = '\0';
		fclose(f);
	}
	CHECK_EQ_INT(strlen(k.kn_boot_id), 36);
	CHECK(!strcmp(k.kn_boot_id, boot_id));
	for (int i = 0; i < 36 && k.kn_boot_id[i]; i++) {
		if (i == 8 || i == 13 || i == 18 || i == 23)
			CHECK(k.kn_boot_id[i] == '-');
		else
			CHECK(isxdigit((unsigned char)k.kn_boot_id[i]));
	}

	/* Modules: those /proc/modules lists with an address, sorted. */
	size_t want_modules = 0;
	char line[1024];
	f = fopen("/proc/modules", "re");
	if (f) {
		while (fgets(line, sizeof(line), f)) {
			const char *x = strstr(line, " 0x");
			if (x && strtoull(x + 1, NULL, 16) != 0)
				want_modules++;
		}
		fclose(f);
	}
	CHECK_EQ_INT(k.kn_nmodules, want_modules);
	for (size_t i = 0; i < k.kn_nmodules; i++) {
		const struct fp_kmodule *m = &k.kn_modules[i];
		CHECK(m->km_base != 0 && m->km_size != 0 && m->km_name[0]);
		if (i)
			CHECK(k.kn_modules[i - 1].km_base < m->km_base);
		CHECK(fp_kernel_module(&k, m->km_base) == m);
		CHECK(fp_kernel_module(&k, m->km_base + m->km_size - 1) == m);
	}
	/* Kernel text is in no module. */
	CHECK(fp_kernel_module(&k, k.kn_text) == NULL);
	fp_kernel_fini(&k);
	CHECK_EQ_INT(k.kn_nmodules, 0);
	CHECK(k.kn_modules == NULL);
}

/* What an emit callback saw. */
struct walk {
	uint32_t next_part;
	int calls, lasts, bad_parts, last_was_final;
	size_t total, max_part;
	uint8_t kind;
	struct fp_build_id build_id;
	uint64_t session;
	char name[64];
	int consistent;    /* kind, build-ID, name, session the same in every part */
	const char *probe; /* a symbol to look for */
	uint64_t probe_offset;
	int probe_found;
	int fail_at_call; /* return fail_err from this call (1-based); 0 never */
	int fail_err;
	int record;      /* fill seen: */
	char seen[1024]; /* every symbol, as "name@offset;" */
};

static int emit(const struct fp_ksyms *part, void *arg)
{
	struct walk *w = arg;

	w->calls++;
	if (w->calls == 1) {
		w->kind = part->fs_kind;
		w->build_id = part->fs_build_id;
		w->session = part->fs_session;
		snprintf(w->name, sizeof(w->name), "%s", part->fs_name ? part->fs_name : "(null)");
		w->consistent = 1;
	} else if (part->fs_kind != w->kind || !fp_build_id_eq(&part->fs_build_id, &w->build_id) ||
		   part->fs_session != w->session || !part->fs_name ||
		   strcmp(part->fs_name, w->name)) {
		w->consistent = 0;
	}
	if (part->fs_part != w->next_part)
		w->bad_parts++;
	w->next_part = part->fs_part + 1;
	if (w->lasts)
		w->last_was_final = 0; /* a part after the last one */
	if (part->fs_last) {
		w->lasts++;
		w->last_was_final = 1;
	}
	w->total += part->fs_nsyms;
	if (part->fs_nsyms > w->max_part)
		w->max_part = part->fs_nsyms;
	for (size_t i = 0; i < part->fs_nsyms; i++) {
		const struct fp_ksym *s = &part->fs_syms[i];
		if (w->probe && !w->probe_found && s->fk_name && !strcmp(s->fk_name, w->probe)) {
			w->probe_found = 1;
			w->probe_offset = s->fk_offset;
		}
		if (w->record) {
			size_t used = strlen(w->seen);
			snprintf(w->seen + used, sizeof(w->seen) - used, "%s@%llx;", s->fk_name,
				 (unsigned long long)s->fk_offset);
		}
	}
	if (w->fail_at_call && w->calls == w->fail_at_call)
		return w->fail_err;
	return 0;
}

/* count_text_symbols: t/T/w/W kernel (not module) lines of kallsyms, all
 * of them and those at or above text. */
static size_t count_text_symbols(uint64_t text, size_t *all)
{
	char line[1024], sym[600], type;
	unsigned long long addr;
	size_t n = 0;
	FILE *f = fopen("/proc/kallsyms", "re");

	*all = 0;
	if (!f)
		return 0;
	while (fgets(line, sizeof(line), f)) {
		if (sscanf(line, "%llx %c %599s", &addr, &type, sym) != 3 || strchr(line, '['))
			continue;
		if (type != 't' && type != 'T' && type != 'w' && type != 'W')
			continue;
		(*all)++;
		n += addr >= text;
	}
	fclose(f);
	return n;
}

static void test_ksyms_real(void)
{
	struct fp_kernel k;
	struct walk w;
	size_t all, want;
	uint64_t ksys_write;

	CHECK_EQ_INT(fp_kernel_read("/proc", "/sys", &k), 0);
	if (!k.kn_text || k.kn_build_id.fb_len != 20) {
		CHECK(!"no kernel text address or build-ID");
		fp_kernel_fini(&k);
		return;
	}
	memset(&w, 0, sizeof(w));
	w.probe = "ksys_write";
	CHECK_EQ_INT(fp_kernel_ksyms(&k, "/proc", &k.kn_build_id, 0x5e55, 5000, emit, &w), 0);
	want = count_text_symbols(k.kn_text, &all);
	if (want != all)
		fprintf(stderr, "  %zu text symbols below _text are not part of vmlinux\n",
			all - want);
	CHECK(want > 10000);
	CHECK_EQ_INT(w.total, want);
	CHECK(w.calls >= 3);                         /* several parts */
	CHECK_EQ_INT(w.calls, (want + 5000) / 5000); /* full parts, then the rest */
	CHECK_EQ_INT(w.bad_parts, 0);
	CHECK_EQ_INT(w.lasts, 1);
	CHECK(w.last_was_final);
	CHECK_EQ_INT(w.max_part, 5000);
	CHECK(w.consistent);
	CHECK_EQ_INT(w.kind, FP_MAP_KERNEL);
	CHECK(fp_build_id_eq(&w.build_id, &k.kn_build_id));
	CHECK(!strcmp(w.name, "vmlinux"));
	CHECK(w.session == 0x5e55);

	/* Offsets are relative to _text. */
	ksys_write = kallsyms_addr("/proc", "ksys_write");
	CHECK(ksys_write != 0);
	CHECK(w.probe_found);
	CHECK(w.probe_offset + k.kn_text == ksys_write);

	/* _text itself is at offset 0.  With room for all, one part. */
	memset(&w, 0, sizeof(w));
	w.probe = "_text";
	CHECK_EQ_INT(fp_kernel_ksyms(&k, "/proc", &k.kn_build_id, 1, 1000000, emit, &w), 0);
	CHECK(w.probe_found && w.probe_offset == 0);
	CHECK_EQ_INT(w.calls, 1);
	CHECK_EQ_INT(w.lasts, 1);
	CHECK_EQ_INT(w.total, want);
	fp_kernel_fini(&k);
}

static void test_ksyms_errors(void)
{
	struct fp_kernel k;
	struct walk w;
	struct fp_build_id unknown = { 20, { 0xde, 0xad, 0xbe, 0xef } }, empty = { 0 };

	CHECK_EQ_INT(fp_kernel_read("/proc", "/sys", &k), 0);
	if (!k.kn_text || !k.kn_build_id.fb_len) {
		CHECK(!"no kernel text address or build-ID");
		fp_kernel_fini(&k);
		return;
	}
	/* emit's error stops the walk and is returned. */
	memset(&w, 0, sizeof(w));
	w.fail_at_call = 2;
	w.fail_err = -EPIPE;
	CHECK_EQ_INT(fp_kernel_ksyms(&k, "/proc", &k.kn_build_id, 1, 5000, emit, &w), -EPIPE);
	CHECK_EQ_INT(w.calls, 2);
	CHECK_EQ_INT(w.lasts, 0);
	CHECK_EQ_INT(w.total, 10000);

	memset(&w, 0, sizeof(w));
	w.fail_at_call = 1;
	w.fail_err = -ECONNRESET;
	CHECK_EQ_INT(fp_kernel_ksyms(&k, "/proc", &k.kn_build_id, 1, 5000, emit, &w), -ECONNRESET);
	CHECK_EQ_INT(w.calls, 1);

	/* An error from the last part is returned too. */
	memset(&w, 0, sizeof(w));
	w.fail_at_call = 1;
	w.fail_err = -EIO;
	CHECK_EQ_INT(fp_kernel_ksyms(&k, "/proc", &k.kn_build_id, 1, 1000000, emit, &w), -EIO);
	CHECK_EQ_INT(w.calls, 1);
	CHECK_EQ_INT(w.lasts, 1);

	/* Unknown targets. */
	memset(&w, 0, sizeof(w));
	CHECK_EQ_INT(fp_kernel_ksyms(&k, "/proc", &unknown, 1, 5000, emit, &w), -ENOENT);
	CHECK_EQ_INT(fp_kernel_ksyms(&k, "/proc", &empty, 1, 5000, emit, &w), -ENOENT);
	/* The kernel's ID with a different length is another ID. */
	struct fp_build_id shorter = k.kn_build_id;
	shorter.fb_len--;
	CHECK_EQ_INT(fp_kernel_ksyms(&k, "/proc", &shorter, 1, 5000, emit, &w), -ENOENT);
	CHECK_EQ_INT(w.calls, 0);

	/* No room for a single symbol. */
	CHECK_EQ_INT(fp_kernel_ksyms(&k, "/proc", &k.kn_build_id, 1, 0, emit, &w), -EINVAL);
	CHECK_EQ_INT(w.calls, 0);

	/* kallsyms unreadable. */
	CHECK_EQ_INT(fp_kernel_ksyms(&k, "/nonexistent-proc", &k.kn_build_id, 1, 5000, emit, &w),
		     -ENOENT);
	CHECK_EQ_INT(w.calls, 0);
	fp_kernel_fini(&k);
}

/* Fake roots. */
static char tmp[64];

static int put_file(const char *rel, const void *data, size_t len)
{
	char path[256];
	FILE *f;

	snprintf(path, sizeof(path), "%s/%s", tmp, rel);
	for (char *p = path + strlen(tmp) + 1; *p; p++)
		if (*p == '/') {
			*p = '\0';
			mkdir(path, 0755);
			*p = '/';
		}
	f = fopen(path, "w");
	if (!f)
		return -1;
	if (len && fwrite(data, 1, len, f) != len) {
		fclose(f);
		return -1;
	}
	return fclose(f);
}

static int put_str(const char *rel, const char *s)
{
	return put_file(rel, s, strlen(s));
}

/* A raw notes file: an ABI note, then the build-ID. */
static int put_notes(const char *rel, const unsigned char *id, size_t len)
{
	unsigned char buf[128];
	Elf64_Nhdr abi = { 6, 4, 0x101 }, nh = { 4, (Elf64_Word)len, NT_GNU_BUILD_ID };
	size_t at = 0;

	memcpy(buf, &abi, sizeof(abi));
	memcpy(buf + 12, "Linux\0\0\0", 8);
	memcpy(buf + 20, "\0\1\0\0", 4);
	at = 24;
	memcpy(buf + at, &nh, sizeof(nh));
	memcpy(buf + at + 12, "GNU", 4);
	memcpy(buf + at + 16, id, len);
	at += 16 + ((len + 3) & ~(size_t)3);
	return put_file(rel, buf, at);
}

static const unsigned char kernel_id[20] = { 0x11, 0x22, 0x33, 0x44, 0x55, 0x66, 0x77,
					     0x88, 0x99, 0xaa, 0xbb, 0xcc, 0xdd, 0xee,
					     0xff, 0x01, 0x02, 0x03, 0x04, 0x05 };
static const unsigned char foo_id[20] = { 0xf0, 0x0f, 0xf0, 0x0f, 1,  2,  3,  4,  5,  6,
					  7,    8,    9,    10,   11, 12, 13, 14, 15, 16 };

static const char fake_kallsyms[] = "ffffffff80fff000 t below_text\n"
				    "ffffffff81000000 T _text\n"
				    "ffffffff81000000 T startup_64\n"
				    "ffffffff81001000 t helper\n"
				    "ffffffff81002000 D some_data\n"
				    "ffffffff81003000 W weak_fn\n"
				    "ffffffff81004000 r some_rodata\n"
				    "ffffffff81005000 T last_fn\n"
				    "ffffffffc0000000 t foo_init\t[foo]\n"
				    "ffffffffc0000100 T foo_work\t[foo]\n"
				    "ffffffffc0000200 d foo_data\t[foo]\n"
				    "ffffffffc0000f00 w foo_weak\t[foo]\n"
				    "ffffffffc0002000 t bar_fn\t[bar]\n"
				    "ffffffffc0010000 t foo_outside\t[foo]\n"
				    "ffffffffc0020000 t bpf_prog_0123456789abcdef_x\t[bpf]\n"
				    "not a symbol line\n";

static const char fake_modules[] = "foo 4096 0 - Live 0xffffffffc0000000\n"
				   "bar 8192 1 foo, Live 0xffffffffc0002000 (OE)\n"
				   "hidden 100 0 - Live 0x0000000000000000\n"
				   "garbage\n";

static void test_fake_roots(void)
{
	char proc[96], sys[96];
	struct fp_kernel k;
	struct fp_build_id kid = { 20 }, fid = { 20 }, bid = { 0 };
	struct walk w;

	memcpy(kid.fb_data, kernel_id, 20);
	memcpy(fid.fb_data, foo_id, 20);
	snprintf(proc, sizeof(proc), "%s/proc", tmp);
	snprintf(sys, sizeof(sys), "%s/sys", tmp);
	CHECK_EQ_INT(put_str("proc/kallsyms", fake_kallsyms), 0);
	CHECK_EQ_INT(put_str("proc/modules", fake_modules), 0);
	CHECK_EQ_INT(put_str("proc/sys/kernel/random/boot_id",
			     "01234567-89ab-cdef-0123-456789abcdef\n"),
		     0);
	CHECK_EQ_INT(put_notes("sys/kernel/notes", kernel_id, 20), 0);
	CHECK_EQ_INT(put_notes("sys/module/foo/notes/.note.gnu.build-id", foo_id, 20), 0);

	CHECK_EQ_INT(fp_kernel_read(proc, sys, &k), 0);
	CHECK(k.kn_text == 0xffffffff81000000ull);
	CHECK(fp_build_id_eq(&k.kn_build_id, &kid));
	CHECK(!strcmp(k.kn_boot_id, "01234567-89ab-cdef-0123-456789abcdef"));
	CHECK(k.kn_release[0] != '\0'); /* from uname(2), whatever the roots */

	/* Modules: the hidden (zero-address) one and garbage skipped; sorted. */
	CHECK_EQ_INT(k.kn_nmodules, 2);
	if (k.kn_nmodules == 2) {
		const struct fp_kmodule *foo = &k.kn_modules[0], *bar = &k.kn_modules[1];
		CHECK(!strcmp(foo->km_name, "foo"));
		CHECK(foo->km_base == 0xffffffffc0000000ull && foo->km_size == 4096);
		CHECK(fp_build_id_eq(&foo->km_build_id, &fid));
		CHECK(!strcmp(bar->km_name, "bar"));
		CHECK(bar->km_base == 0xffffffffc0002000ull && bar->km_size == 8192);
		CHECK_EQ_INT(bar->km_build_id.fb_len, 0); /* no notes in sysfs */

		static const struct {
			uint64_t addr;
			int module; /* 0 foo, 1 bar, -1 none */
		} lookups[] = {
			{ 0xffffffffc0000000ull, 0 },
			{ 0xffffffffc0000123ull, 0 },
			{ 0xffffffffc0000fffull, 0 },
			{ 0xffffffffc0001000ull, -1 }, /* the gap */
			{ 0xffffffffc0001fffull, -1 },
			{ 0xffffffffc0002000ull, 1 },
			{ 0xffffffffc0003fffull, 1 },
			{ 0xffffffffc0004000ull, -1 },
			{ 0xffffffffbfffffffull, -1 },
			{ 0xffffffff81000000ull, -1 },
			{ 0, -1 },
			{ UINT64_MAX, -1 },
		};
		for (size_t i = 0; i < sizeof(lookups) / sizeof(lookups[0]); i++) {
			const struct fp_kmodule *m = fp_kernel_module(&k, lookups[i].addr);
			const struct fp_kmodule *want = lookups[i].module < 0
								? NULL
								: &k.kn_modules[lookups[i].module];
			if (m != want) {
				fprintf(stderr, "  lookup %zu: 0x%llx\n", i,
					(unsigned long long)lookups[i].addr);
				CHECK(m == want);
			}
		}
	}

	/* The kernel's symbols: text types only, not below _text, no module
	 * symbols; offsets from _text; in parts of 3. */
	memset(&w, 0, sizeof(w));
	w.record = 1;
	CHECK_EQ_INT(fp_kernel_ksyms(&k, proc, &kid, 9, 3, emit, &w), 0);
	CHECK(!strcmp(w.seen, "_text@0;startup_64@0;helper@1000;weak_fn@3000;last_fn@5000;"));
	CHECK_EQ_INT(w.calls, 2);
	CHECK_EQ_INT(w.lasts, 1);
	CHECK(w.last_was_final);
	CHECK_EQ_INT(w.bad_parts, 0);
	CHECK_EQ_INT(w.kind, FP_MAP_KERNEL);
	CHECK(!strcmp(w.name, "vmlinux"));
	CHECK(w.session == 9);

	/* A count that fills its parts exactly: the last part is empty. */
	memset(&w, 0, sizeof(w));
	CHECK_EQ_INT(fp_kernel_ksyms(&k, proc, &kid, 9, 5, emit, &w), 0);
	CHECK_EQ_INT(w.total, 5);
	CHECK_EQ_INT(w.calls, 2);
	CHECK_EQ_INT(w.lasts, 1);
	CHECK(w.last_was_final);

	/* A module's symbols: its own, inside it, offsets from its base. */
	memset(&w, 0, sizeof(w));
	w.record = 1;
	CHECK_EQ_INT(fp_kernel_ksyms(&k, proc, &fid, 9, 100, emit, &w), 0);
	CHECK(!strcmp(w.seen, "foo_init@0;foo_work@100;foo_weak@f00;"));
	CHECK_EQ_INT(w.calls, 1);
	CHECK_EQ_INT(w.lasts, 1);
	CHECK_EQ_INT(w.kind, FP_MAP_KMODULE);
	CHECK(!strcmp(w.name, "foo"));
	CHECK(fp_build_id_eq(&w.build_id, &fid));

	/* bar has no build-ID: it cannot be asked for, even by the empty ID. */
	CHECK_EQ_INT(fp_kernel_ksyms(&k, proc, &bid, 9, 100, emit, &w), -ENOENT);
	fp_kernel_fini(&k);

	/* What a non-root reader sees: zero addresses.  No _text, no modules,
	 * and no kernel snapshot. */
	CHECK_EQ_INT(put_str("proc/kallsyms", "0000000000000000 T _text\n"
					      "0000000000000000 t helper\n"
					      "0000000000000000 t foo_init\t[foo]\n"),
		     0);
	CHECK_EQ_INT(put_str("proc/modules", "foo 4096 0 - Live 0x0000000000000000\n"), 0);
	CHECK_EQ_INT(fp_kernel_read(proc, sys, &k), 0);
	CHECK(k.kn_text == 0);
	CHECK(fp_build_id_eq(&k.kn_build_id, &kid));
	CHECK_EQ_INT(k.kn_nmodules, 0);
	memset(&w, 0, sizeof(w));
	CHECK_EQ_INT(fp_kernel_ksyms(&k, proc, &kid, 9, 100, emit, &w), -ENOENT);
	CHECK_EQ_INT(w.calls, 0);
	fp_kernel_fini(&k);

	/* Empty roots: everything missing, nothing fails. */
	char empty[96];
	snprintf(empty, sizeof(empty), "%s/empty", tmp);
	mkdir(empty, 0755);
	memset(&k, 0xa5, sizeof(k));
	CHECK_EQ_INT(fp_kernel_read(empty, empty, &k), 0);
	CHECK(k.kn_text == 0);
	CHECK_EQ_INT(k.kn_build_id.fb_len, 0);
	CHECK(!strcmp(k.kn_boot_id, ""));
	CHECK_EQ_INT(k.kn_nmodules, 0);
	CHECK(fp_kernel_module(&k, 0xffffffffc0000000ull) == NULL);
	CHECK_EQ_INT(fp_kernel_ksyms(&k, empty, &kid, 9, 100, emit, &w), -ENOENT);
	CHECK_EQ_INT(fp_kernel_ksyms(&k, empty, &bid, 9, 100, emit, &w), -ENOENT);
	fp_kernel_fini(&k);
}

/* Many modules, listed out of order: lookups by binary search. */
static void test_many_modules(void)
{
	char proc[96], sys[96], line[128];
	size_t n = 300, len = 0;
	char *mods = malloc(n * sizeof(line));
	struct fp_kernel k;

	if (!mods)
		return;
	snprintf(proc, sizeof(proc), "%s/proc2", tmp);
	snprintf(sys, sizeof(sys), "%s/sys2", tmp);
	/* Module i at 0xffffffffa0000000 + i * 0x10000, size 0x8000, written
	 * in a scrambled order. */
	for (size_t j = 0; j < n; j++) {
		size_t i = (j * 7) % n;
		len += (size_t)snprintf(mods + len, n * sizeof(line) - len,
					"m%zu %u 0 - Live 0x%llx\n", i, 0x8000u,
					0xffffffffa0000000ull + i * 0x10000ull);
	}
	CHECK_EQ_INT(put_file("proc2/modules", mods, len), 0);
	free(mods);
	CHECK_EQ_INT(fp_kernel_read(proc, sys, &k), 0);
	CHECK_EQ_INT(k.kn_nmodules, n);
	for (size_t i = 0; i < k.kn_nmodules; i++) {
		uint64_t base = 0xffffffffa0000000ull + i * 0x10000ull;
		const struct fp_kmodule *m = fp_kernel_module(&k, base + 0x1234);
		char name[32];

		snprintf(name, sizeof(name), "m%zu", i);
		CHECK(m != NULL && !strcmp(m->km_name, name) && m->km_base == base);
		CHECK(fp_kernel_module(&k, base + 0x8000) == NULL);
		if (i)
			CHECK(k.kn_modules[i - 1].km_base < k.kn_modules[i].km_base);
	}
	fp_kernel_fini(&k);
}

int main(void)
{
	int rc;

	if (check_tmpdir(tmp, sizeof(tmp), "fpkt"))
		return 1;
	RUN(test_read_real);
	RUN(test_ksyms_real);
	RUN(test_ksyms_errors);
	RUN(test_fake_roots);
	RUN(test_many_modules);
	rc = CHECK_DONE();
	if (check_rmtree(tmp))
		fprintf(stderr, "cleanup of %s failed\n", tmp);
	return rc;
}
