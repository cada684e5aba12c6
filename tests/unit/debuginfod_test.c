/* debuginfod_test.c: the resolver's fetch hook against a real debuginfod
 * server (elfutils' debuginfod, on loopback) that serves the debug file of
 * a program built here.  The resolver has neither a debug directory entry
 * nor the program's path, so the symbols can only come from upstream. */
#include "check.h"
#include "debuginfod.h"
#include "elfnote.h"
#include "elfsyms.h"
#include "log.h"
#include "resolver.h"

#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <gelf.h>
#include <libelf.h>
#include <netinet/in.h>
#include <signal.h>
#include <spawn.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#define FUNC "fp_test_upstream_fn"

static char tmpdir[64], prog[128], srvdir[128], hex[2 * FP_BUILD_ID_MAX + 1];
static struct fp_build_id prog_id;
static uint64_t func_offset; /* file offset of FUNC in prog */
static pid_t server = -1;
static int port;

static double now(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

static int free_port(void)
{
	struct sockaddr_in a = { .sin_family = AF_INET, .sin_addr.s_addr = htonl(INADDR_LOOPBACK) };
	socklen_t len = sizeof(a);
	int s = socket(AF_INET, SOCK_STREAM, 0), p = -1;

	if (s >= 0 && bind(s, (struct sockaddr *)&a, sizeof(a)) == 0 &&
	    getsockname(s, (struct sockaddr *)&a, &len) == 0)
		p = ntohs(a.sin_port);
	if (s >= 0)
		close(s);
	return p;
}

/* func_file_offset: FUNC's address in prog's symbol table, turned into a
 * file offset through the executable segment that holds it. */
static int func_file_offset(const char *path, uint64_t *off)
{
	int fd = open(path, O_RDONLY), found = 0;
	uint64_t addr = 0;
	Elf_Scn *scn = NULL;
	size_t phnum, i;
	Elf *e;

	if (fd < 0 || elf_version(EV_CURRENT) == EV_NONE || !(e = elf_begin(fd, ELF_C_READ, NULL)))
		return -1;
	while (!found && (scn = elf_nextscn(e, scn))) {
		GElf_Shdr sh;
		Elf_Data *d;
		if (!gelf_getshdr(scn, &sh) || sh.sh_type != SHT_SYMTAB ||
		    !(d = elf_getdata(scn, NULL)))
			continue;
		for (i = 0; i < sh.sh_size / sh.sh_entsize; i++) {
			GElf_Sym sym;
			const char *name;
			if (gelf_getsym(d, (int)i, &sym) &&
			    (name = elf_strptr(e, sh.sh_link, sym.st_name)) &&
			    !strcmp(name, FUNC)) {
				addr = sym.st_value;
				found = 1;
				break;
			}
		}
	}
	found = 0;
	if (addr && !elf_getphdrnum(e, &phnum)) {
		for (i = 0; i < phnum; i++) {
			GElf_Phdr ph;
			if (gelf_getphdr(e, (int)i, &ph) && ph.p_type == PT_LOAD &&
			    addr >= ph.p_vaddr && addr < ph.p_vaddr + ph.p_filesz) {
				*off = addr - ph.p_vaddr + ph.p_offset;
				found = 1;
			}
		}
	}
	elf_end(e);
	close(fd);
	return found ? 0 : -1;
}

static int setup(void)
{
	char cmd[1024], src[128], db[128], logf[128], portstr[16];
	posix_spawn_file_actions_t fa;
	double deadline;
	int fd;
	FILE *f;

	snprintf(src, sizeof(src), "%s/prog.c", tmpdir);
	snprintf(prog, sizeof(prog), "%s/prog", tmpdir);
	snprintf(srvdir, sizeof(srvdir), "%s/upstream", tmpdir);
	if (!(f = fopen(src, "w")))
		return -1;
	fprintf(f, "int " FUNC
		   "(int x) { int s = 0; for (int i = 0; i < x; i++) s += i * x; return s; }\n"
		   "int main(int argc, char **argv) { return " FUNC "(argc); }\n");
	fclose(f);
	/* Only the detached debug file goes to the server's directory. */
	snprintf(cmd, sizeof(cmd),
		 "gcc -g -O1 %s -o %s && mkdir -p %s && objcopy --only-keep-debug %s %s/prog.debug",
		 src, prog, srvdir, prog, srvdir);
	if (system(cmd)) {
		fprintf(stderr, "  cannot build the test program\n");
		return -1;
	}
	fd = open(prog, O_RDONLY);
	if (fd < 0 || fp_elfnote_build_id(fd, &prog_id) || func_file_offset(prog, &func_offset)) {
		fprintf(stderr, "  cannot read the test program's build-ID or " FUNC "\n");
		return -1;
	}
	close(fd);
	fp_build_id_hex(&prog_id, hex);

	if ((port = free_port()) < 0)
		return -1;
	snprintf(portstr, sizeof(portstr), "%d", port);
	snprintf(db, sizeof(db), "%s/debuginfod.sqlite", tmpdir);
	snprintf(logf, sizeof(logf), "%s/debuginfod.log", tmpdir);
	posix_spawn_file_actions_init(&fa);
	posix_spawn_file_actions_addopen(&fa, 1, logf, O_WRONLY | O_CREAT | O_TRUNC, 0644);
	posix_spawn_file_actions_adddup2(&fa, 1, 2);
	{
		char *argv[] = { "debuginfod", "-F", srvdir, "-p", portstr, "-d", db, NULL };
		extern char **environ;
		if (posix_spawnp(&server, "debuginfod", &fa, NULL, argv, environ)) {
			fprintf(stderr, "  cannot start debuginfod (Debian package debuginfod)\n");
			server = -1;
		}
	}
	posix_spawn_file_actions_destroy(&fa);
	if (server < 0)
		return -1;
	/* Wait until it has scanned the directory: curl, not libdebuginfod,
	 * which would remember the miss for ten minutes. */
	snprintf(cmd, sizeof(cmd), "curl -sf -o /dev/null http://127.0.0.1:%d/buildid/%s/debuginfo",
		 port, hex);
	for (deadline = now() + 90; now() < deadline; usleep(200000)) {
		int st;
		if (waitpid(server, &st, WNOHANG) == server) {
			server = -1;
			snprintf(cmd, sizeof(cmd), "cat %s >&2", logf);
			fprintf(stderr, "  debuginfod exited:\n");
			if (system(cmd))
				return -1;
			return -1;
		}
		if (system(cmd) == 0)
			return 0;
	}
	fprintf(stderr, "  debuginfod did not index %s in time\n", srvdir);
	return -1;
}

static void teardown(void)
{

	if (server > 0) {
		kill(server, SIGTERM);
		waitpid(server, NULL, 0);
	}
	if (check_rmtree(tmpdir))
		fprintf(stderr, "  cannot remove %s\n", tmpdir);
}

static int ready;

/* The resolver finds the program's symbols only through upstream, stores
 * them, and the next look-up needs no server. */
static void test_resolves_through_upstream(void)
{
	char url[64], cache[128], dcache[128], empty[128];
	const char *urls[1] = { url };
	struct fp_debuginfod *d = NULL;
	struct fp_debuginfod_stats st;
	struct fp_resolver *r = NULL;
	struct fp_lookup *l = NULL;
	struct fp_resolved res;
	struct fp_resolver_opts ro = { 0 };

	CHECK(ready);
	if (!ready)
		return;
	snprintf(url, sizeof(url), "http://127.0.0.1:%d", port);
	snprintf(cache, sizeof(cache), "%s/cache", tmpdir);
	snprintf(dcache, sizeof(dcache), "%s/cache/debuginfod", tmpdir);
	snprintf(empty, sizeof(empty), "%s/empty-debug-dir", tmpdir);
	CHECK_EQ_INT(fp_debuginfod_open(&d, urls, 1, dcache), 0);
	if (!d)
		return;
	ro.ro_cache_dir = cache;
	ro.ro_debug_dir = empty;
	ro.ro_local_files = 1; /* the mapping's path does not exist */
	ro.ro_fetch = fp_debuginfod_fetch;
	ro.ro_fetch_remote = 1;
	ro.ro_fetch_arg = d;
	CHECK_EQ_INT(fp_resolver_open(&r, &ro), 0);
	if (!r)
		goto out;
	CHECK(!fp_resolver_has(r, &prog_id));
	CHECK_EQ_INT(fp_resolver_begin(r, &l), 0);
	if (l) {
		fp_resolver_frame(l, FP_MAP_USER, &prog_id, "/nonexistent/prog", 0, func_offset + 2,
				  &res);
		CHECK(res.rs_function && !strcmp(res.rs_function, FUNC));
		if (res.rs_function && strcmp(res.rs_function, FUNC))
			fprintf(stderr, "  resolved to %s\n", res.rs_function);
		fp_resolver_end(l);
		l = NULL;
	}
	CHECK(fp_resolver_has(r, &prog_id));
	fp_debuginfod_stats(d, &st);
	CHECK_EQ_INT(st.ds_fetched, 1);
	CHECK_EQ_INT(st.ds_failed, 0);

	/* A build-ID the server lacks: unresolved, counted as a miss. */
	{
		struct fp_build_id other = prog_id;
		other.fb_data[0] ^= 0xff;
		CHECK_EQ_INT(fp_resolver_begin(r, &l), 0);
		if (l) {
			fp_resolver_frame(l, FP_MAP_USER, &other, "/nonexistent/other", 0, 0x1000,
					  &res);
			CHECK(res.rs_function == NULL);
			fp_resolver_end(l);
		}
		CHECK(!fp_resolver_has(r, &other));
		fp_debuginfod_stats(d, &st);
		CHECK_EQ_INT(st.ds_missed, 1);
	}

	/* Cached: a new resolver on the same cache resolves with no server. */
	fp_resolver_close(r);
	r = NULL;
	ro.ro_fetch = NULL;
	CHECK_EQ_INT(fp_resolver_open(&r, &ro), 0);
	if (r) {
		CHECK(fp_resolver_has(r, &prog_id));
		l = NULL;
		CHECK_EQ_INT(fp_resolver_begin(r, &l), 0);
		if (l) {
			fp_resolver_frame(l, FP_MAP_USER, &prog_id, "/nonexistent/prog", 0,
					  func_offset + 2, &res);
			CHECK(res.rs_function && !strcmp(res.rs_function, FUNC));
			fp_resolver_end(l);
		}
	}
	/* libdebuginfod kept the file under the cache directory it was given. */
	{
		char path[512];
		snprintf(path, sizeof(path), "%s/%s/debuginfo", dcache, hex);
		CHECK(access(path, R_OK) == 0);
	}
out:
	fp_resolver_close(r);
	fp_debuginfod_close(d);
}

/* Direct fetches: debuginfo comes back as a file with the right build-ID;
 * an unreachable server is an error, quickly, not a hang. */
static void test_fetch_direct(void)
{
	char url[64], dcache[128];
	const char *urls[2] = { "http://127.0.0.1:1", url };
	struct fp_debuginfod *d = NULL;
	struct fp_build_id got;
	double t0;
	int fd;

	CHECK(ready);
	if (!ready)
		return;
	/* The first server refuses connections; the second has the file. */
	snprintf(url, sizeof(url), "http://127.0.0.1:%d", port);
	snprintf(dcache, sizeof(dcache), "%s/direct-cache", tmpdir);
	CHECK_EQ_INT(fp_debuginfod_open(&d, urls, 2, dcache), 0);
	if (!d)
		return;
	fd = fp_debuginfod_fetch(&prog_id, FP_FETCH_SYMBOLS, d);
	CHECK(fd >= 0);
	if (fd >= 0) {
		CHECK(fp_elfnote_build_id(fd, &got) == 0 && fp_build_id_eq(&got, &prog_id));
		close(fd);
	}
	fp_debuginfod_close(d);

	d = NULL; /* only the refusing one */
	snprintf(dcache, sizeof(dcache), "%s/dead-cache", tmpdir);
	CHECK_EQ_INT(fp_debuginfod_open(&d, urls, 1, dcache), 0);
	if (!d)
		return;
	t0 = now();
	fd = fp_debuginfod_fetch(&prog_id, FP_FETCH_SYMBOLS, d);
	CHECK(fd < 0);
	CHECK(now() - t0 < 20);
	if (fd >= 0)
		close(fd);
	fp_debuginfod_close(d);

	/* Bad arguments. */
	CHECK_EQ_INT(fp_debuginfod_open(&d, urls, 0, dcache), -EINVAL);
	urls[0] = "ftp://example";
	CHECK_EQ_INT(fp_debuginfod_open(&d, urls, 1, dcache), -EINVAL);
}

int main(void)
{
	int failed;

	if (check_tmpdir(tmpdir, sizeof(tmpdir), "fleetprof-debuginfod-test"))
		return 1;
	fp_log_init("debuginfod_test", 1, 0); /* the resolver says why a frame fails */
	ready = setup() == 0;
	RUN(test_resolves_through_upstream);
	RUN(test_fetch_direct);
	failed = CHECK_DONE();
	teardown();
	return failed;
}
