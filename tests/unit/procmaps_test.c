/* procmaps_test.c: /proc/PID/maps parsing, lookups, map_files build-IDs
 * and opening mapped files safely (device/procmaps.c), against this very
 * process and a fake proc root with a hostile container's tricks. */
#include <dlfcn.h>
#include <elf.h>
#include <errno.h>
#include <fcntl.h>
#include <link.h>
#include <stdint.h>
#include <stdio.h>
#include <limits.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/sysmacros.h>
#include <unistd.h>

#include "check.h"
#include "elfnote.h"
#include "procmaps.h"

static const struct {
	const char *line;
	int err;
	uint64_t start, end, pgoff, inode;
	unsigned major, minor;
	const char *path;
	int exec;
} parse_cases[] = {
	/* A file mapping, as the kernel pads it. */
	{ "55d0c8a04000-55d0c8a09000 r-xp 00002000 fe:00 247026                     /usr/bin/cat\n",
	  0, 0x55d0c8a04000, 0x55d0c8a09000, 0x2000, 247026, 0xfe, 0, "/usr/bin/cat", 1 },
	/* Without the trailing newline. */
	{ "7f1e26c00000-7f1e26d95000 r-xp 00028000 08:02 1311423 /usr/lib/x86_64-linux-gnu/libc.so.6",
	  0, 0x7f1e26c00000, 0x7f1e26d95000, 0x28000, 1311423, 8, 2,
	  "/usr/lib/x86_64-linux-gnu/libc.so.6", 1 },
	/* Read-only data of the same file: parsed, not executable. */
	{ "7f1e26bd8000-7f1e26c00000 r--p 00000000 08:02 1311423 /usr/lib/x86_64-linux-gnu/libc.so.6\n",
	  0, 0x7f1e26bd8000, 0x7f1e26c00000, 0, 1311423, 8, 2,
	  "/usr/lib/x86_64-linux-gnu/libc.so.6", 0 },
	/* Spaces inside the path are part of it. */
	{ "7f0000001000-7f0000002000 r-xp 00001000 103:05 42                        /opt/my app/lib two  spaces.so\n",
	  0, 0x7f0000001000, 0x7f0000002000, 0x1000, 42, 0x103, 5, "/opt/my app/lib two  spaces.so",
	  1 },
	/* A deleted file keeps the kernel's suffix: the path is reported as is. */
	{ "7f0000003000-7f0000004000 r-xp 00000000 fe:01 99 /usr/lib/libfoo.so.1 (deleted)\n", 0,
	  0x7f0000003000, 0x7f0000004000, 0, 99, 0xfe, 1, "/usr/lib/libfoo.so.1 (deleted)", 1 },
	/* Anonymous memory: the kernel ends the line right after the inode. */
	{ "55e04d292000-55e04d2a2000 rw-p 00000000 00:00 0 \n", 0, 0x55e04d292000, 0x55e04d2a2000,
	  0, 0, 0, 0, "", 0 },
	{ "7f1e26ca6000-7f1e26ca9000 rwxp 00000000 00:00 0\n", 0, 0x7f1e26ca6000, 0x7f1e26ca9000, 0,
	  0, 0, 0, "", 1 },
	{ "7f1e26ca6000-7f1e26ca9000 r-xp 00000000 00:00 0", 0, 0x7f1e26ca6000, 0x7f1e26ca9000, 0,
	  0, 0, 0, "", 1 },
	/* Special mappings. */
	{ "7ffc8b1f0000-7ffc8b1f2000 r-xp 00000000 00:00 0                          [vdso]\n", 0,
	  0x7ffc8b1f0000, 0x7ffc8b1f2000, 0, 0, 0, 0, "[vdso]", 1 },
	{ "7ffc8b0d2000-7ffc8b0f3000 rw-p 00000000 00:00 0                          [stack]\n", 0,
	  0x7ffc8b0d2000, 0x7ffc8b0f3000, 0, 0, 0, 0, "[stack]", 0 },
	{ "ffffffffff600000-ffffffffff601000 --xp 00000000 00:00 0                  [vsyscall]\n",
	  0, 0xffffffffff600000, 0xffffffffff601000, 0, 0, 0, 0, "[vsyscall]", 1 },
	/* Malformed. */
	{ "garbage\n", -EINVAL },
	{ "", -EINVAL },
	{ "\n", -EINVAL },
	{ "7f0000002000-7f0000001000 r-xp 00000000 fe:00 1 /bin/x\n", -EINVAL }, /* end < start */
	{ "7f0000001000-7f0000001000 r-xp 00000000 fe:00 1 /bin/x\n", -EINVAL }, /* empty */
	{ "7f0000001000-7f0000002000 r-xp 00000000 fe:00\n", -EINVAL },          /* no inode */
	{ "7f0000001000-7f0000002000 r-xp 00000000\n", -EINVAL },                /* no device */
	{ "7f0000001000-7f0000002000 r-xp\n", -EINVAL },
	{ "7f0000001000-7f0000002000\n", -EINVAL },
	{ "7f0000001000 r-xp 00000000 fe:00 1 /bin/x\n", -EINVAL },             /* no end */
	{ "7f0000001000-7f0000002000 r-x 00000000 fe:00 1 /bin/x\n", -EINVAL }, /* short perms */
	{ "7f0000001000-7f0000002000 r-xp 00000000 fe-00 1 /bin/x\n", -EINVAL },
	{ "zz-7f0000002000 r-xp 00000000 fe:00 1 /bin/x\n", -EINVAL },
};

static void test_parse_line(void)
{
	for (size_t i = 0; i < sizeof(parse_cases) / sizeof(parse_cases[0]); i++) {
		struct fp_vma v;
		int exec = -1, err, before = check_failures;

		memset(&v, 0xa5, sizeof(v));
		v.fv_path = NULL;
		err = fp_procmaps_parse_line(parse_cases[i].line, &v, &exec);
		CHECK_EQ_INT(err, parse_cases[i].err);
		if (err == 0 && parse_cases[i].err == 0) {
			CHECK(v.fv_start == parse_cases[i].start);
			CHECK(v.fv_end == parse_cases[i].end);
			CHECK(v.fv_pgoff == parse_cases[i].pgoff);
			CHECK(v.fv_inode == parse_cases[i].inode);
			CHECK_EQ_INT(v.fv_dev_major, parse_cases[i].major);
			CHECK_EQ_INT(v.fv_dev_minor, parse_cases[i].minor);
			CHECK(v.fv_path && !strcmp(v.fv_path, parse_cases[i].path));
			CHECK_EQ_INT(exec, parse_cases[i].exec);
			/* Nothing read yet. */
			CHECK_EQ_INT(v.fv_build_id_state, 0);
			CHECK_EQ_INT(v.fv_build_id.fb_len, 0);
		}
		if (err == 0)
			free(v.fv_path);
		if (check_failures != before)
			fprintf(stderr, "  case %zu: \"%s\"\n", i, parse_cases[i].line);
	}
}

/* A function of this binary, whose address is looked up in our own maps. */
__attribute__((noinline)) static int probe_function(int x)
{
	return x * 3 + 1;
}

static int exe_path(char *buf, size_t len)
{
	ssize_t n = readlink("/proc/self/exe", buf, len - 1);

	if (n <= 0)
		return -1;
	buf[n] = '\0';
	return 0;
}

/* count_exec_lines: executable mappings in /proc/self/maps, counted with
 * a deliberately different reading (the perms column's 'x'). */
static size_t count_exec_lines(void)
{
	FILE *f = fopen("/proc/self/maps", "re");
	char line[4096];
	size_t n = 0;

	if (!f)
		return 0;
	while (fgets(line, sizeof(line), f)) {
		char *sp = strchr(line, ' ');
		if (sp && sp[3] == 'x')
			n++;
	}
	fclose(f);
	return n;
}

static int find_main_program(struct dl_phdr_info *info, size_t size, void *arg)
{
	*(uint64_t *)arg = info->dlpi_addr;
	return 1; /* the first object is the main program */
}

/* expected_file_offset: where ip is in the test binary, from the ELF
 * program headers of the file: (ip - load bias) in a PT_LOAD segment. */
static int expected_file_offset(uint64_t ip, uint64_t *off)
{
	uint64_t bias = 0, vaddr;
	Elf64_Ehdr eh;
	int fd = open("/proc/self/exe", O_RDONLY | O_CLOEXEC), found = -1;

	if (fd < 0)
		return -1;
	dl_iterate_phdr(find_main_program, &bias);
	vaddr = ip - bias;
	if (pread(fd, &eh, sizeof(eh), 0) == sizeof(eh) && eh.e_phentsize == sizeof(Elf64_Phdr)) {
		for (unsigned i = 0; i < eh.e_phnum; i++) {
			Elf64_Phdr ph;
			if (pread(fd, &ph, sizeof(ph), (off_t)(eh.e_phoff + i * sizeof(ph))) !=
			    sizeof(ph))
				break;
			if (ph.p_type == PT_LOAD && (ph.p_flags & PF_X) && vaddr >= ph.p_vaddr &&
			    vaddr < ph.p_vaddr + ph.p_filesz) {
				*off = vaddr - ph.p_vaddr + ph.p_offset;
				found = 0;
				break;
			}
		}
	}
	close(fd);
	return found;
}

static void test_read_self(void)
{
	struct fp_procmaps *pm = NULL;
	uint64_t ip = (uint64_t)(uintptr_t)&probe_function, want_off = 0;
	char exe[4096];
	struct fp_vma *v;
	size_t i;

	CHECK_EQ_INT(probe_function(1), 4);
	CHECK_EQ_INT(exe_path(exe, sizeof(exe)), 0);
	CHECK_EQ_INT(fp_procmaps_read("/proc", (uint32_t)getpid(), &pm), 0);
	if (!pm)
		return;
	CHECK_EQ_INT(pm->pm_pid, getpid());
	CHECK(pm->pm_nvmas > 0);
	CHECK_EQ_INT(pm->pm_nvmas, count_exec_lines());
	/* Sorted, non-overlapping, non-empty. */
	for (i = 0; i < pm->pm_nvmas; i++) {
		CHECK(pm->pm_vmas[i].fv_start < pm->pm_vmas[i].fv_end);
		if (i)
			CHECK(pm->pm_vmas[i - 1].fv_end <= pm->pm_vmas[i].fv_start);
		CHECK(pm->pm_vmas[i].fv_path != NULL);
	}

	v = fp_procmaps_find(pm, ip);
	CHECK(v != NULL);
	if (v) {
		CHECK(v->fv_start <= ip && ip < v->fv_end);
		CHECK(!strcmp(v->fv_path, exe));
		CHECK(v->fv_inode != 0);
		/* The file offset the collector computes agrees with the ELF
		 * program headers. */
		CHECK_EQ_INT(expected_file_offset(ip, &want_off), 0);
		CHECK(ip - v->fv_start + v->fv_pgoff == want_off);
		/* Bounds: start and end - 1 are inside, end is not. */
		CHECK(fp_procmaps_find(pm, v->fv_start) == v);
		CHECK(fp_procmaps_find(pm, v->fv_end - 1) == v);
		CHECK(fp_procmaps_find(pm, v->fv_end) != v);
	}
	/* A shared library's text is there too, under the name the dynamic
	 * linker knows it by. */
	Dl_info dl;
	uint64_t lib_ip = (uint64_t)(uintptr_t)&dladdr;
	v = fp_procmaps_find(pm, lib_ip);
	CHECK(v != NULL);
	CHECK(dladdr((void *)(uintptr_t)lib_ip, &dl) != 0 && dl.dli_fname);
	if (v && dl.dli_fname) {
		char *a = realpath(v->fv_path, NULL), *b = realpath(dl.dli_fname, NULL);
		CHECK(a && b && !strcmp(a, b));
		free(a);
		free(b);
	}
	/* Data is not executable: a global variable is in no vma. */
	static int global_data = 1;
	CHECK(fp_procmaps_find(pm, (uint64_t)(uintptr_t)&global_data) == NULL);
	CHECK(fp_procmaps_find(pm, 0) == NULL);
	CHECK(fp_procmaps_find(pm, 4096) == NULL);
	CHECK(fp_procmaps_find(pm, UINT64_MAX) == NULL);
	fp_procmaps_free(pm);
	fp_procmaps_free(NULL);
}

static void test_build_id_self(void)
{
	struct fp_procmaps *pm = NULL;
	struct fp_build_id want = { 0 };
	struct fp_vma *v;
	int fd;

	fd = open("/proc/self/exe", O_RDONLY | O_CLOEXEC);
	CHECK(fd >= 0);
	if (fd < 0)
		return;
	CHECK_EQ_INT(fp_elfnote_build_id(fd, &want), 0);
	close(fd);
	CHECK_EQ_INT(want.fb_len, 20);

	CHECK_EQ_INT(fp_procmaps_read("/proc", (uint32_t)getpid(), &pm), 0);
	if (!pm)
		return;
	v = fp_procmaps_find(pm, (uint64_t)(uintptr_t)&probe_function);
	CHECK(v != NULL);
	if (v) {
		CHECK_EQ_INT(v->fv_build_id_state, 0);
		CHECK_EQ_INT(fp_procmaps_build_id("/proc", pm, v), 0);
		CHECK_EQ_INT(v->fv_build_id_state, 1);
		CHECK(fp_build_id_eq(&v->fv_build_id, &want));
		/* Read once: a second call answers from the vma. */
		CHECK_EQ_INT(fp_procmaps_build_id("/nonexistent-proc", pm, v), 0);
		CHECK(fp_build_id_eq(&v->fv_build_id, &want));
	}
	/* Anonymous or special executable mappings have no build-ID; the
	 * answer is remembered too. */
	for (size_t i = 0; i < pm->pm_nvmas; i++) {
		struct fp_vma *a = &pm->pm_vmas[i];
		if (a->fv_inode != 0)
			continue;
		CHECK_EQ_INT(fp_procmaps_build_id("/proc", pm, a), -ENOENT);
		CHECK_EQ_INT(a->fv_build_id_state, -1);
		CHECK_EQ_INT(fp_procmaps_build_id("/proc", pm, a), -ENOENT);
	}
	fp_procmaps_free(pm);

	/* A vma whose map_files entry is missing (wrong proc root) has none. */
	CHECK_EQ_INT(fp_procmaps_read("/proc", (uint32_t)getpid(), &pm), 0);
	if (!pm)
		return;
	v = fp_procmaps_find(pm, (uint64_t)(uintptr_t)&probe_function);
	if (v)
		CHECK_EQ_INT(fp_procmaps_build_id("/nonexistent-proc", pm, v), -ENOENT);
	fp_procmaps_free(pm);
}

static void test_missing_pid(void)
{
	struct fp_procmaps *pm = (struct fp_procmaps *)&pm;
	char line[32] = "";
	uint32_t pid_max = 4194304;
	FILE *f = fopen("/proc/sys/kernel/pid_max", "re");

	if (f) {
		if (fgets(line, sizeof(line), f))
			pid_max = (uint32_t)strtoul(line, NULL, 10);
		fclose(f);
	}
	CHECK_EQ_INT(fp_procmaps_read("/proc", pid_max + 1, &pm), -ESRCH);
	CHECK(pm == (struct fp_procmaps *)&pm); /* untouched */
	CHECK_EQ_INT(fp_procmaps_read("/proc", UINT32_MAX, &pm), -ESRCH);
	/* No procfs at all: the same answer, the process is unreachable. */
	CHECK_EQ_INT(fp_procmaps_read("/nonexistent-proc", (uint32_t)getpid(), &pm), -ESRCH);
}

/* A fake proc root: a maps file with mixed lines, malformed ones skipped. */
static void test_read_fake_root(void)
{
	char dir[256], path[PATH_MAX];
	struct fp_procmaps *pm = NULL;
	FILE *f;

	if (check_tmpdir(dir, sizeof(dir), "fppm")) {
		CHECK(!"check_tmpdir");
		return;
	}
	snprintf(path, sizeof(path), "%s/77", dir);
	CHECK_EQ_INT(mkdir(path, 0755), 0);
	snprintf(path, sizeof(path), "%s/77/maps", dir);
	f = fopen(path, "w");
	CHECK(f != NULL);
	if (!f)
		return;
	fputs("00400000-00401000 r--p 00000000 fe:00 11 /bin/app\n"
	      "00401000-00402000 r-xp 00001000 fe:00 11 /bin/app\n"
	      "this line is garbage\n"
	      "00402000-00403000 rw-p 00002000 fe:00 11 /bin/app\n"
	      "7f0000000000-7f0000010000 r-xp 00000000 00:00 0 \n"
	      "7f0000010000-7f0000020000 r-xp 00004000 fe:00 12 /lib/with space.so (deleted)\n"
	      "7ffc8b1f0000-7ffc8b1f2000 r-xp 00000000 00:00 0                          [vdso]",
	      f);
	fclose(f);
	CHECK_EQ_INT(fp_procmaps_read(dir, 77, &pm), 0);
	if (pm) {
		CHECK_EQ_INT(pm->pm_pid, 77);
		CHECK_EQ_INT(pm->pm_nvmas, 4);
		if (pm->pm_nvmas == 4) {
			CHECK(!strcmp(pm->pm_vmas[0].fv_path, "/bin/app"));
			CHECK(pm->pm_vmas[0].fv_pgoff == 0x1000);
			CHECK(!strcmp(pm->pm_vmas[1].fv_path, ""));
			CHECK(!strcmp(pm->pm_vmas[2].fv_path, "/lib/with space.so (deleted)"));
			CHECK(!strcmp(pm->pm_vmas[3].fv_path, "[vdso]"));
		}
		struct fp_vma *v = fp_procmaps_find(pm, 0x401800);
		CHECK(v && v->fv_start == 0x401000);
		CHECK(fp_procmaps_find(pm, 0x400800) == NULL); /* not executable */
		CHECK(fp_procmaps_find(pm, 0x402800) == NULL);
		v = fp_procmaps_find(pm, 0x7f0000015000);
		CHECK(v && v->fv_inode == 12);
		/* No map_files under the fake root: no build-ID. */
		if (v)
			CHECK_EQ_INT(fp_procmaps_build_id(dir, pm, v), -ENOENT);
		fp_procmaps_free(pm);
	}
	/* An empty maps file: no mappings, not an error. */
	f = fopen(path, "w");
	if (f)
		fclose(f);
	pm = NULL;
	CHECK_EQ_INT(fp_procmaps_read(dir, 77, &pm), 0);
	CHECK(pm != NULL && pm->pm_nvmas == 0);
	if (pm)
		CHECK(fp_procmaps_find(pm, 0x401800) == NULL);
	fp_procmaps_free(pm);

	CHECK_EQ_INT(check_rmtree(dir), 0);
}

/* fp_procmaps_open through map_files: this process's own text is the
 * file /proc/self/exe names; a vma whose inode is not the mapped file's
 * (the range now maps something else) is refused. */
static void test_open_self(void)
{
	struct fp_procmaps *pm = NULL;
	struct stat want, got;
	struct fp_vma *v, wrong;
	int fd;

	CHECK_EQ_INT(stat("/proc/self/exe", &want), 0);
	CHECK_EQ_INT(fp_procmaps_read("/proc", (uint32_t)getpid(), &pm), 0);
	if (!pm)
		return;
	v = fp_procmaps_find(pm, (uint64_t)(uintptr_t)&probe_function);
	CHECK(v != NULL);
	if (v) {
		fd = fp_procmaps_open("/proc", pm->pm_pid, v);
		CHECK(fd >= 0);
		CHECK(fd >= 0 && fstat(fd, &got) == 0 && got.st_ino == want.st_ino &&
		      got.st_dev == want.st_dev);
		CHECK(fd >= 0 && (fcntl(fd, F_GETFL) & O_ACCMODE) == O_RDONLY);
		if (fd >= 0)
			close(fd);
		wrong = *v;
		wrong.fv_inode++;
		CHECK_EQ_INT(fp_procmaps_open("/proc", pm->pm_pid, &wrong), -ENOENT);
		wrong = *v;
		wrong.fv_dev_minor++;
		CHECK_EQ_INT(fp_procmaps_open("/proc", pm->pm_pid, &wrong), -ENOENT);
		wrong = *v;
		wrong.fv_inode = 0;
		CHECK_EQ_INT(fp_procmaps_open("/proc", pm->pm_pid, &wrong), -ENOENT);
	}
	fp_procmaps_free(pm);
}

/* vma_of: a vma for path as a container would map it, device and inode
 * from the file itself (lstat: a link's own). */
static struct fp_vma vma_of(const char *host_path, const char *path)
{
	struct fp_vma v = { .fv_start = 0x1000, .fv_end = 0x2000, .fv_path = (char *)path };
	struct stat st;

	if (lstat(host_path, &st) == 0) {
		v.fv_inode = st.st_ino;
		v.fv_dev_major = major(st.st_dev);
		v.fv_dev_minor = minor(st.st_dev);
	}
	return v;
}

/* fp_procmaps_open by path, where map_files cannot serve (here: a fake
 * proc root without it): the path is resolved inside the process's root
 * and nothing the container planted there leads out of it or blocks. */
static void test_open_in_root(void)
{
	char dir[256], root[512], path[PATH_MAX], host[PATH_MAX];
	struct fp_vma v;
	struct stat st;
	int fd;

	if (check_tmpdir(dir, sizeof(dir), "fppm")) {
		CHECK(!"check_tmpdir");
		return;
	}
	snprintf(root, sizeof(root), "%s/5/root", dir);
	snprintf(path, sizeof(path), "%s/5", dir);
	CHECK_EQ_INT(mkdir(path, 0755), 0);
	CHECK_EQ_INT(mkdir(root, 0755), 0);
	snprintf(path, sizeof(path), "%s/bin", root);
	CHECK_EQ_INT(mkdir(path, 0755), 0);
	/* the host's own file, outside the container's root */
	snprintf(host, sizeof(host), "%s/host-secret", dir);
	fd = open(host, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0600);
	CHECK(fd >= 0 && write(fd, "secret", 6) == 6);
	if (fd >= 0)
		close(fd);

	/* A regular file in the root opens, read-only. */
	snprintf(path, sizeof(path), "%s/bin/app", root);
	fd = open(path, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0755);
	CHECK(fd >= 0 && write(fd, "app", 3) == 3);
	if (fd >= 0)
		close(fd);
	v = vma_of(path, "/bin/app");
	fd = fp_procmaps_open(dir, 5, &v);
	CHECK(fd >= 0 && fstat(fd, &st) == 0 && st.st_ino == v.fv_inode);
	if (fd >= 0)
		close(fd);
	/* The same path with another file's inode: refused. */
	v = vma_of(host, "/bin/app");
	CHECK_EQ_INT(fp_procmaps_open(dir, 5, &v), -ENOENT);

	/* An absolute symbolic link to the host's file, with the host file's
	 * device and inode as if the mapping were of it: never followed. */
	snprintf(path, sizeof(path), "%s/bin/link", root);
	CHECK_EQ_INT(symlink(host, path), 0);
	v = vma_of(host, "/bin/link");
	CHECK_EQ_INT(fp_procmaps_open(dir, 5, &v), -ENOENT);
	/* A relative one inside the root is not followed either. */
	snprintf(path, sizeof(path), "%s/bin/rel", root);
	CHECK_EQ_INT(symlink("app", path), 0);
	snprintf(path, sizeof(path), "%s/bin/app", root);
	v = vma_of(path, "/bin/rel");
	CHECK_EQ_INT(fp_procmaps_open(dir, 5, &v), -ENOENT);
	/* ".." does not climb out of the root: /../../host-secret is the
	 * root's own /host-secret, which does not exist. */
	v = vma_of(host, "/../../host-secret");
	CHECK_EQ_INT(fp_procmaps_open(dir, 5, &v), -ENOENT);
	/* A FIFO with nobody writing: refused at once, not waited on. */
	snprintf(path, sizeof(path), "%s/bin/fifo", root);
	CHECK_EQ_INT(mkfifo(path, 0600), 0);
	v = vma_of(path, "/bin/fifo");
	CHECK_EQ_INT(fp_procmaps_open(dir, 5, &v), -ENOENT);
	/* A relative path is not resolved at all. */
	snprintf(path, sizeof(path), "%s/bin/app", root);
	v = vma_of(path, "bin/app");
	CHECK_EQ_INT(fp_procmaps_open(dir, 5, &v), -ENOENT);

	CHECK_EQ_INT(check_rmtree(dir), 0);
}

int main(void)
{
	RUN(test_parse_line);
	RUN(test_read_self);
	RUN(test_build_id_self);
	RUN(test_missing_pid);
	RUN(test_read_fake_root);
	RUN(test_open_self);
	RUN(test_open_in_root);
	return CHECK_DONE();
}
