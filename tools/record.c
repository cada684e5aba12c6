/* record.c: `fleetprof record`, the one-shot local mode: the agent's
 * sampler and collector and the symbolizer's pipeline in one process, no
 * socket, no setup.  It profiles the machine, one process, or a command
 * it runs (`record -- CMD`, as perf record does: from the command's first
 * instruction to its exit, its children too, its exit status passed on).  The interval goes through the server's own stages
 * (server.h, pipeline.h) as a hello and a batch; its sink is the file
 * sink's record layout: DIR/profile.folded, DIR/profile.pb.gz,
 * DIR/profile.otlp.pb and DIR/flame.svg. */
#include "cli.h"
#include "collector.h"
#include "commands.h"
#include "files.h"
#include "kernel.h"
#include "log.h"
#include "procmaps.h"
#include "resolver.h"
#include "sampler.h"
#include "server.h"
#include "unwind_maps.h"
#include "cpython.h"
#include "elfnote.h"
#include "unwind_table.h"

#include <dlfcn.h>
#include <errno.h>
#include <fcntl.h>
#include <getopt.h>
#include <inttypes.h>
#include <limits.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <sys/wait.h>
#include <unistd.h>

static volatile sig_atomic_t record_stop;
static volatile pid_t record_child; /* the command run, while it runs */

static void on_signal(int sig)
{
	record_stop = 1;
}

/* on_signal_forward: while a command runs, a signal for us is for it:
 * passed on, and we go on until it exits.  A terminal's Ctrl-C or Ctrl-\
 * reached the command already (the kernel sends those to the whole
 * foreground group, SI_KERNEL): not sent twice. */
static void on_signal_forward(int sig, siginfo_t *si, void *uc)
{
	if (record_child > 0 && si->si_code != SI_KERNEL)
		kill(record_child, sig);
}

static void record_usage(FILE *f)
{
	fprintf(f,
		"usage: fleetprof record [-d SECONDS | -p PID] [-F HZ] [--by-thread] [-o DIR]\n"
		"                        [--cache DIR] [--unwind-mem MB] [--no-python]\n"
		"                        [--off-cpu [--off-cpu-stacks N]] [-v]\n"
		"                        [[--] COMMAND [ARG]...]\n"
		"\n"
		"Profiles this machine (or one process) with eBPF for SECONDS, or runs\n"
		"COMMAND and profiles it and its children from its first instruction\n"
		"until it exits (signals for fleetprof go to COMMAND; its exit status is\n"
		"fleetprof's), and writes\n"
		"DIR/profile.folded, DIR/profile.pb.gz (pprof), DIR/profile.otlp.pb\n"
		"(OTLP ExportProfilesServiceRequest) and DIR/flame.svg; with --off-cpu\n"
		"also DIR/offcpu.folded (a stack, a space, nanoseconds off-CPU),\n"
		"DIR/offcpu.pb.gz, DIR/offcpu.otlp.pb and DIR/offcpu.svg.\n"
		"Needs root (or CAP_BPF and CAP_PERFMON).\n"
		"\n"
		"  -d, --duration SECONDS  how long to sample (default 10; Ctrl-C stops early;\n"
		"                          not with COMMAND)\n"
		"  -F, --frequency HZ      samples per second per CPU (default 99, 1-10000)\n"
		"  -p, --pid PID           only this process (stops when it exits)\n"
		"  -t, --by-thread         thread names under process names\n"
		"  -o, --output DIR        output directory (default out)\n"
		"      --cache DIR         symbol cache (default $XDG_CACHE_HOME/fleetprof or\n"
		"                          ~/.cache/fleetprof)\n"
		"      --unwind-mem MB     memory for unwind tables of code built without\n"
		"                          frame pointers (default %u; 0: frame pointers only)\n"
		"      --no-python         CPython processes as the interpreter's native frames,\n"
		"                          not as Python functions\n"
		"      --off-cpu           where threads wait off-CPU too, and how long (with\n"
		"                          COMMAND: its own process's waits, not its children's)\n"
		"      --off-cpu-stacks N  stacks of waits taken a second per CPU, about: past\n"
		"                          it a share of the waits, each weighed to stand for\n"
		"                          the others (default %u; 10-100000)\n"
		"  -v, --verbose           log debug messages\n"
		"  -h, --help              this help\n",
		FP_UNWIND_MEM_DEFAULT_MB, FP_OFFCPU_STACKS);
}

static void on_known(uint32_t pid, int known, void *arg)
{
	if (pid)
		fp_sampler_mark_pid(arg, pid, known);
	else
		fp_sampler_forget_pids(arg);
}

static void on_sample(const struct fp_bpf_sample *s, const void *u, const void *k, void *arg)
{
	fp_collector_add(arg, s, u, k);
}

static int feed_ksyms(const struct fp_ksyms *part, void *arg)
{
	return fp_resolver_ksyms(arg, part);
}

/* kernel_symbols: kallsyms of id, as an agent uploads them when asked. */
static void kernel_symbols(struct fp_kernel *kernel, struct fp_resolver *res,
			   const struct fp_build_id *id)
{
	int err;

	if (fp_resolver_has(res, id))
		return;
	if ((err = fp_kernel_ksyms(kernel, "/proc", id, 1, 20000, feed_ksyms, res)))
		fp_warnx("kernel symbols unavailable: %s", strerror(-err));
}

/* Unwind tables: each file that samples show gets its table from the
 * resolver (compiled from the local file on first use), the two halves
 * the agent and the symbolizer play apart. */
struct record_unwind {
	struct fp_unwind *ru_tables;
	struct fp_resolver *ru_res;
	int ru_added;
	uint64_t ru_start_ns; /* CLOCK_MONOTONIC: sampling started */
};

static int on_file(const struct fp_build_id *id, const char *path, uint32_t pid, void *arg)
{
	struct record_unwind *ru = arg;
	size_t len;
	void *blob;
	int err;

	if (fp_resolver_note_path(ru->ru_res, id, path, pid) ||
	    fp_resolver_unwind(ru->ru_res, id, &blob, &len))
		return 0;
	if (fp_unwind_table_needed(blob, len)) {
		err = fp_unwind_add(ru->ru_tables, id, blob, len);
		if (err) {
			fp_debug("unwind table of %s: %s", path, strerror(-err));
		} else {
			ru->ru_added++;
			fp_debug("unwind table of %s installed %.0f ms after sampling started",
				 path,
				 (double)(fp_now_ns(CLOCK_MONOTONIC) - ru->ru_start_ns) / 1e6);
		}
	}
	free(blob);
	return 0;
}

/* compile_one: the unwind table of the file with build-ID id, at path as
 * process pid sees it, compiled into the resolver's cache. */
static void compile_one(struct fp_resolver *res, const struct fp_build_id *id, const char *path,
			uint32_t pid)
{
	size_t len;
	void *blob;

	if (fp_resolver_note_path(res, id, path, pid) == 0 &&
	    fp_resolver_unwind(res, id, &blob, &len) == 0)
		free(blob);
}

/* compile_tables: the unwind tables of pid's files, into the cache. */
static void compile_tables(struct fp_resolver *res, uint32_t pid)
{
	struct fp_procmaps *pm;
	size_t i;

	if (fp_procmaps_read("/proc", pid, &pm))
		return;
	for (i = 0; i < pm->pm_nvmas; i++) {
		struct fp_vma *v = &pm->pm_vmas[i];
		if (v->fv_path[0] == '/' && fp_procmaps_build_id("/proc", pm, v) == 0)
			compile_one(res, &v->fv_build_id, v->fv_path, pid);
	}
	fp_procmaps_free(pm);
}

/* compile_file: the unwind table of the ELF file at path (this mount
 * namespace's), compiled into the resolver's cache; nothing if it is not
 * an ELF file with a build-ID (a script). */
static void compile_file(struct fp_resolver *res, const char *path)
{
	struct fp_build_id id;
	char real[PATH_MAX];
	int fd;

	if (!realpath(path, real) || (fd = open(real, O_RDONLY | O_CLOEXEC)) < 0)
		return;
	if (fp_elfnote_build_id(fd, &id) == 0)
		compile_one(res, &id, real, (uint32_t)getpid());
	close(fd);
}

/* compile_command: before a command runs, the tables its first samples
 * need: its executable's (found as execvp finds it) and the C library's
 * (this process's own, which the command most likely maps too), so that
 * its first second is walked whole rather than while they compile. */
static void compile_command(struct fp_resolver *res, const char *name)
{
	const char *dirs = getenv("PATH"), *end;
	char path[PATH_MAX];
	Dl_info libc;

	if (dladdr((void *)&printf, &libc) && libc.dli_fname)
		compile_file(res, libc.dli_fname);
	if (strchr(name, '/')) {
		compile_file(res, name);
		return;
	}
	for (dirs = dirs ? dirs : "/usr/bin:/bin"; *dirs; dirs = *end ? end + 1 : end) {
		end = strchrnul(dirs, ':');
		if (snprintf(path, sizeof(path), "%.*s/%s", (int)(end - dirs), dirs, name) <
			    (int)sizeof(path) &&
		    access(path, X_OK) == 0) {
			compile_file(res, path);
			return;
		}
	}
}

/* start_command: fork the process that will run argv, held until
 * go_command, so that the sampler can be attached to it first.  Its pid,
 * or a negative errno. */
static pid_t start_command(char **argv, int *go_fd, int *exec_fd)
{
	int go[2], ex[2];
	pid_t pid;
	char c;

	if (pipe2(go, O_CLOEXEC))
		return -errno;
	if (pipe2(ex, O_CLOEXEC)) {
		close(go[0]), close(go[1]);
		return -errno;
	}
	pid = fork();
	if (pid < 0) {
		int err = -errno;
		close(go[0]), close(go[1]), close(ex[0]), close(ex[1]);
		return err;
	}
	if (pid == 0) {
		int e;
		close(go[1]);
		close(ex[0]);
		signal(SIGINT, SIG_DFL);
		signal(SIGTERM, SIG_DFL);
		/* Wait for the word: 'g' to go; anything else (or the parent
		 * gone) ends us before the command ever runs. */
		if (read(go[0], &c, 1) != 1 || c != 'g')
			_exit(127);
		execvp(argv[0], argv);
		e = errno; /* the parent says why */
		if (write(ex[1], &e, sizeof(e)) < 0)
			_exit(127);
		_exit(e == ENOENT ? 127 : 126);
	}
	close(go[0]);
	close(ex[1]);
	*go_fd = go[1];
	*exec_fd = ex[0];
	return pid;
}

/* go_command: let the command run (go 1) or end it unrun (go 0); with go,
 * 0 once it runs, or the errno its exec failed with. */
static int go_command(int go_fd, int exec_fd, int go)
{
	int e = 0;
	ssize_t n;

	n = write(go_fd, go ? "g" : "x", 1);
	close(go_fd);
	if (go && n == 1) {
		/* The exec closes the pipe's end (close-on-exec): nothing to
		 * read means it ran. */
		do
			n = read(exec_fd, &e, sizeof(e));
		while (n < 0 && errno == EINTR);
		if (n != sizeof(e))
			e = 0;
	}
	close(exec_fd);
	return e;
}

/* exit_status: a shell's $? for a wait status. */
static int exit_status(int status)
{
	if (WIFEXITED(status))
		return WEXITSTATUS(status);
	return WIFSIGNALED(status) ? 128 + WTERMSIG(status) : 1;
}

static void default_cache(char *buf, size_t len)
{
	const char *xdg = getenv("XDG_CACHE_HOME"), *home = getenv("HOME");

	if (xdg && xdg[0])
		snprintf(buf, len, "%s/fleetprof", xdg);
	else
		snprintf(buf, len, "%s/.cache/fleetprof", home && home[0] ? home : "/tmp");
}

int fp_cmd_record(int argc, char **argv)
{
	static const struct option longopts[] = {
		{ "duration", required_argument, NULL, 'd' },
		{ "frequency", required_argument, NULL, 'F' },
		{ "pid", required_argument, NULL, 'p' },
		{ "by-thread", no_argument, NULL, 't' },
		{ "output", required_argument, NULL, 'o' },
		{ "cache", required_argument, NULL, 'C' },
		{ "unwind-mem", required_argument, NULL, 'U' },
		{ "no-python", no_argument, NULL, 'P' },
		{ "off-cpu", no_argument, NULL, 'O' },
		{ "off-cpu-stacks", required_argument, NULL, 'T' },
		{ "verbose", no_argument, NULL, 'v' },
		{ "help", no_argument, NULL, 'h' },
		{ 0 },
	};
	uint32_t duration = 10, frequency = 99, pid = 0, unwind_mb = FP_UNWIND_MEM_DEFAULT_MB;
	struct record_unwind ru = { 0 };
	struct fp_python *py = NULL;
	const char *outdir = "out";
	char cache[4096], host[256] = "", title[512], offtitle[512];
	int by_thread = 0, verbose = 0, no_python = 0, have_duration = 0, offcpu = 0, c, err;
	uint32_t offcpu_stacks = FP_OFFCPU_STACKS;
	int go_fd = -1, exec_fd = -1, status = 0, ran = 0;
	char **command = NULL;
	pid_t child = 0;
	struct fp_kernel kernel = { 0 };
	struct fp_collector *col = NULL;
	struct fp_sampler *smp = NULL;
	struct fp_resolver *res = NULL;
	struct fp_server *srv = NULL;
	struct fp_files_sink files = { .fs_layout = FP_FILES_RECORD };
	struct fp_server_stats st;
	struct fp_reply reply = { 0 };
	struct fp_interval iv = { 0 };
	struct fp_batch batch = { 0 };
	size_t i;
	uint64_t bpf[FP_CNT_MAX] = { 0 }, start, deadline;

	default_cache(cache, sizeof(cache));
	optind = 1;
	/* "+": options end at the command's name, so that its own options
	 * are its own (with or without "--"). */
	while ((c = getopt_long(argc, argv, "+d:F:p:to:vh", longopts, NULL)) != -1) {
		switch (c) {
		case 'd':
			if (fp_parse_u32("fleetprof record", "duration", optarg, 1, 86400,
					 &duration))
				return 2;
			have_duration = 1;
			break;
		case 'F':
			if (fp_parse_u32("fleetprof record", "frequency", optarg, 1, 10000,
					 &frequency))
				return 2;
			break;
		case 'p':
			if (fp_parse_u32("fleetprof record", "pid", optarg, 1, INT_MAX, &pid))
				return 2;
			break;
		case 't':
			by_thread = 1;
			break;
		case 'o':
			outdir = optarg;
			break;
		case 'C':
			snprintf(cache, sizeof(cache), "%s", optarg);
			break;
		case 'P':
			no_python = 1;
			break;
		case 'O':
			offcpu = 1;
			break;
		case 'T':
			if (fp_parse_u32("fleetprof record", "off-cpu-stacks", optarg, 10, 100000,
					 &offcpu_stacks))
				return 2;
			break;
		case 'U':
			if (fp_parse_u32("fleetprof record", "unwind-mem", optarg, 0,
					 FP_UNWIND_MEM_MAX_MB, &unwind_mb))
				return 2;
			break;
		case 'v':
			verbose++;
			break;
		case 'h':
			record_usage(stdout);
			return 0;
		default:
			record_usage(stderr);
			return 2;
		}
	}
	if (optind < argc) {
		command = argv + optind;
		if (pid || have_duration) {
			fprintf(stderr, "fleetprof record: %s and a command exclude each other\n",
				pid ? "-p" : "-d");
			return 2;
		}
	}
	fp_log_init("fleetprof record", verbose, 0);
	if (pid && kill((pid_t)pid, 0) && errno == ESRCH) {
		fp_warnx("no process %u", pid);
		return 1;
	}
	if (command) {
		struct sigaction sa = { .sa_sigaction = on_signal_forward, .sa_flags = SA_SIGINFO };
		int sigs[] = { SIGINT, SIGTERM, SIGHUP, SIGQUIT, SIGUSR1, SIGUSR2 };
		sigemptyset(&sa.sa_mask);
		for (i = 0; i < sizeof(sigs) / sizeof(sigs[0]); i++)
			sigaction(sigs[i], &sa, NULL);
		if ((child = start_command(command, &go_fd, &exec_fd)) < 0) {
			fp_warnx("cannot start %s: %s", command[0], strerror((int)-child));
			return 1;
		}
		record_child = child;
	} else {
		signal(SIGINT, on_signal);
		signal(SIGTERM, on_signal);
	}

	err = fp_kernel_read("/proc", "/sys", &kernel);
	if (!err)
		err = fp_collector_alloc(&col, "/proc", "/var/lib/docker", &kernel);
	if (!err) {
		struct fp_resolver_opts ro = { .ro_cache_dir = cache,
					       .ro_debug_dir = "/usr/lib/debug",
					       .ro_local_files = 1,
					       .ro_proc_root = 1 };
		err = fp_resolver_open(&res, &ro);
	}
	/* One process: its tables are compiled before sampling starts and
	 * installed before its first sample, so that none of its stacks is
	 * walked by frame pointer while a table compiles. */
	if (!err && pid && unwind_mb)
		compile_tables(res, pid);
	if (!err && command && unwind_mb)
		compile_command(res, command[0]);
	if (!err) {
		struct fp_sampler_opts so = { .so_frequency = frequency,
					      .so_pids = { pid },
					      .so_npids = pid ? 1 : 0,
					      .so_task = child,
					      .so_ringbuf_bytes = 0,
					      .so_unwind_bytes = (size_t)unwind_mb << 20,
					      /* before the first sample, as the tables */
					      .so_python = !no_python,
					      .so_paused = 1,
					      .so_offcpu = offcpu,
					      .so_offcpu_stacks = offcpu_stacks,
					      .so_fn = on_sample,
					      .so_arg = col };
		err = fp_sampler_open(&smp, &so);
		if (!err)
			fp_collector_set_known_fn(col, on_known, smp);
		if (!err && unwind_mb && !(err = fp_unwind_alloc(&ru.ru_tables, smp))) {
			/* the tables come from this program's own compiler */
			fp_unwind_set_function_rows(ru.ru_tables, 1);
			if (!no_python && !(err = fp_python_alloc(&py, smp, ru.ru_tables))) {
				fp_collector_set_maps_fn(col, fp_python_on_maps, py);
				fp_collector_set_pycode_fn(col, fp_python_read_code, py);
			} else {
				fp_collector_set_maps_fn(col, fp_unwind_on_maps, ru.ru_tables);
			}
			fp_collector_set_fold_fn(col, fp_unwind_fold, ru.ru_tables);
		}
	}
	if (err)
		goto out;
	ru.ru_res = res;
	ru.ru_start_ns = fp_now_ns(CLOCK_MONOTONIC);
	if (pid && ru.ru_tables && fp_collector_adopt(col, pid) == 0) {
		fp_collector_new_files(col, on_file, &ru);
		fp_collector_remap(col);
	}
	if ((err = fp_sampler_start(smp)))
		goto out;

	/* Sample */
	if (command)
		fp_info("sampling %s and its children at %u Hz until it exits", command[0],
			frequency);
	else
		fp_info("sampling %s at %u Hz for %u s", pid ? "one process" : "all CPUs",
			frequency, duration);
	start = fp_now_ns(CLOCK_REALTIME);
	fp_collector_cut(col, 0, start, &iv); /* the interval starts now */
	fp_interval_fini(&iv);
	if (command) {
		int e = go_command(go_fd, exec_fd, 1);
		go_fd = -1;
		ran = 1;
		if (e)
			fp_warnx("cannot run %s: %s", command[0], strerror(e));
	}
	deadline = fp_now_ns(CLOCK_MONOTONIC) + (uint64_t)duration * 1000000000ull;
	while (command ? child > 0 : !record_stop && fp_now_ns(CLOCK_MONOTONIC) < deadline) {
		int n = fp_sampler_poll(smp, 100);
		if (n < 0 && n != -EINTR) {
			fp_warnx("ring buffer: %s", strerror(-n));
			break;
		}
		if (pid && kill((pid_t)pid, 0) && errno == ESRCH) {
			fp_info("process %u exited", pid);
			break;
		}
		if (child > 0 && waitpid(child, &status, WNOHANG) == child) {
			record_child = child = 0;
			fp_info("%s exited (status %d)", command[0], exit_status(status));
		}
		if (ru.ru_tables) {
			ru.ru_added = 0;
			fp_collector_new_files(col, on_file, &ru);
			if (ru.ru_added)
				fp_collector_remap(col);
		}
	}
	fp_sampler_poll(smp, 0);
	fp_info("sampling stopped");
	fp_sampler_counters(smp, bpf);
	if (py) {
		struct fp_python_stats ps;
		fp_python_stats(py, &ps);
		if (ps.ps_procs || ps.ps_unknown_version || verbose)
			fp_python_log(py, bpf);
	}
	if ((err = fp_collector_cut(col, 1, fp_now_ns(CLOCK_REALTIME), &iv)))
		goto out;

	/* Symbolize and write: the path a batch takes through the symbolizer */
	gethostname(host, sizeof(host) - 1);
	if (command)
		snprintf(title, sizeof(title), "CPU of %.200s on %s, %.1f s at %u Hz", command[0],
			 host, (double)(fp_now_ns(CLOCK_REALTIME) - start) / 1e9, frequency);
	else
		snprintf(title, sizeof(title), "CPU on %s, %u s at %u Hz", host, duration,
			 frequency);
	if (command)
		snprintf(offtitle, sizeof(offtitle), "Off-CPU of %.200s on %s", command[0], host);
	else
		snprintf(offtitle, sizeof(offtitle), "Off-CPU on %s, %u s", host, duration);
	files = (struct fp_files_sink){ .fs_dir = outdir,
					.fs_layout = FP_FILES_RECORD,
					.fs_by_thread = by_thread,
					.fs_title = title,
					.fs_offcpu_title = offtitle };
	if ((err = fp_server_alloc(&srv, res, NULL, cache)) ||
	    (err = fp_server_add_sink(srv, fp_files_sink, &files)))
		goto out;
	{
		/* A new session each run, as an agent's: the server remembers
		 * the last interval of each. */
		struct fp_hello h = { .fh_session = fp_now_ns(CLOCK_REALTIME) ^ (uint64_t)getpid(),
				      .fh_host = host,
				      .fh_boot_id = kernel.kn_boot_id,
				      .fh_kernel_release = kernel.kn_release,
				      .fh_kernel_build_id = kernel.kn_build_id,
				      .fh_agent_version = FP_VERSION,
				      .fh_frequency = frequency,
				      .fh_ncpus = (uint32_t)sysconf(_SC_NPROCESSORS_ONLN) };
		if ((err = fp_server_hello(srv, &h, &reply)))
			goto out;
		for (i = 0; i < reply.fr_nwant; i++)
			kernel_symbols(&kernel, res, &reply.fr_want[i]);
		fp_reply_fini(&reply);
		if ((err = fp_collector_batch(col, &iv, h.fh_session, 1000000000ull / frequency,
					      &batch)))
			goto out;
	}
	/* The profile is made as the batch arrives: the kernel's and
	 * modules' symbols first, as an agent's earlier uploads. */
	for (i = 0; i < batch.fb_nmappings; i++)
		if (batch.fb_mappings[i].fm_kind == FP_MAP_KERNEL ||
		    batch.fb_mappings[i].fm_kind == FP_MAP_KMODULE)
			kernel_symbols(&kernel, res, &batch.fb_mappings[i].fm_build_id);
	if ((err = fp_server_batch(srv, &batch, &reply)))
		goto out;
	if (reply.fr_status != FP_REPLY_OK)
		err = -EPROTO;
	fp_reply_fini(&reply);
	fp_server_stats(srv, &st);
	if (!err && (st.sv_write_errors || st.sv_profiles != 1))
		err = -EIO; /* the sink said why */
	if (err) {
		fp_warnx("cannot write to %s: %s", outdir, strerror(-err));
		goto out;
	}
	printf("%" PRIu64 " samples (%" PRIu64 " lost, %" PRIu64 " stack errors), %zu stacks -> "
	       "%s/flame.svg, %s/profile.folded, %s/profile.pb.gz, %s/profile.otlp.pb\n",
	       iv.fi_samples, bpf[FP_CNT_LOST], bpf[FP_CNT_USTACK_ERR] + bpf[FP_CNT_KSTACK_ERR],
	       iv.fi_ncounts, outdir, outdir, outdir, outdir);
	if (offcpu) {
		char line[512];
		fp_sampler_offcpu_line(bpf, line, sizeof(line));
		printf("off-CPU: %s; %.3f s as the stacks weigh it -> %s/offcpu.svg, offcpu.folded, "
		       "offcpu.pb.gz, offcpu.otlp.pb\n",
		       line, iv.fi_offcpu_ns / 1e9, outdir);
	}
out:
	if (err)
		fp_warnx("record failed: %s", strerror(-err));
	if (go_fd >= 0) /* failed before the command ran: it never will */
		go_command(go_fd, exec_fd, 0);
	while (child > 0 && waitpid(child, &status, 0) < 0 && errno == EINTR)
		;
	fp_reply_fini(&reply);
	fp_server_free(srv);
	if (col)
		fp_collector_batch_release(col, &batch);
	fp_interval_fini(&iv);
	fp_resolver_close(res);
	fp_python_free(py);
	fp_unwind_free(ru.ru_tables);
	fp_sampler_close(smp);
	fp_collector_free(col);
	fp_kernel_fini(&kernel);
	/* A command's status is ours, as perf record passes it on */
	return ran ? exit_status(status) : err ? 1 : 0;
}
