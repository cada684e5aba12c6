/* main.c: fleetprof-agent, the device daemon.  Samples with BPF, ships
 * (build-ID, offset) stacks to the symbolizer once per interval, buffers
 * while the symbolizer is away, and moves to the next symbolizer given
 * when the current one stops answering.  Here: the flags, start-up and
 * privileges, sampling and the memory budget; interval.c closes the
 * intervals, tables.c holds the unwind tables and exchange.c talks to the
 * symbolizer. */
#include "agent.h"
#include "cli.h"
#include "kfuncs.h"
#include "log.h"
#include "privilege.h"

#include <errno.h>
#include <fcntl.h>
#include <getopt.h>
#include <inttypes.h>
#include <limits.h>
#include <malloc.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/random.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

static void on_signal(int sig)
{
	agent_exiting = 1;
}

static void on_known(uint32_t pid, int known, void *arg)
{
	struct agent *a = arg;

	if (pid)
		fp_sampler_mark_pid(a->ag_sampler, pid, known);
	else
		fp_sampler_forget_pids(a->ag_sampler);
}

/* log_start_up: what it cost to get to the first sample (make bench
 * reads it). */
static void log_start_up(struct agent *a)
{
	struct fp_sampler_stats st = { 0 };
	const struct fp_sampler_load *l = &st.ss_load;
	double verify;

	fp_sampler_stats(a->ag_sampler, &st);
	verify = l->sl_wall_ns ? (double)l->sl_cpu_ns *
					 (l->sl_verify_ns < l->sl_wall_ns ? l->sl_verify_ns
									  : l->sl_wall_ns) /
					 l->sl_wall_ns
			       : 0;
	fp_info("start-up: first sample after %.1f ms of CPU (%.1f ms since start); %u BPF "
		"programs loaded in %.1f ms of CPU, about %.1f ms of it verifying %" PRIu64
		" instructions",
		fp_now_ns(CLOCK_PROCESS_CPUTIME_ID) / 1e6,
		(fp_now_ns(CLOCK_MONOTONIC) - a->ag_start_ns) / 1e6, l->sl_progs,
		l->sl_cpu_ns / 1e6, verify / 1e6, l->sl_insns);
}

static void on_sample(const struct fp_bpf_sample *s, const void *u, const void *k, void *arg)
{
	struct agent *a = arg;

	if (!a->ag_sampling) {
		a->ag_sampling = 1;
		log_start_up(a);
	}
	fp_collector_add(a->ag_collector, s, u, k);
}

/* heap_bytes: the agent's private memory (RssAnon), or 0 if unknown. */
static uint64_t heap_bytes(void)
{
	unsigned long long kb = 0;
	char line[128];
	FILE *f = fopen("/proc/self/status", "re");

	while (f && fgets(line, sizeof(line), f))
		if (sscanf(line, "RssAnon: %llu kB", &kb) == 1)
			break;
	if (f)
		fclose(f);
	return (uint64_t)kb << 10;
}

static int collector_open(struct agent *a)
{
	int err = fp_collector_alloc(&a->ag_collector, "/proc", "/var/lib/docker", &a->ag_kernel);

	if (err)
		return err;
	fp_collector_set_known_fn(a->ag_collector, on_known, a);
	if (a->ag_python)
		fp_collector_set_pycode_fn(a->ag_collector, fp_python_read_code, a->ag_python);
	if (a->ag_unwind)
		fp_collector_set_maps_fn(a->ag_collector, agent_tables_on_maps, a);
	if (a->ag_unwind) {
		fp_collector_set_fold_fn(a->ag_collector, fp_unwind_fold, a->ag_unwind);
		fp_collector_set_cut_fn(a->ag_collector, agent_walk_cut, a);
	}
	if (a->ag_kfuncs.kf_n)
		fp_collector_set_kfuncs(a->ag_collector, &a->ag_kfuncs);
	return 0;
}

/* Over the memory budget: forget every process, thread, stack and path,
 * and the intervals that refer to them (counted as dropped), and start a
 * new session, rather than grow until the switch's OOM policy reboots it.
 * Unwind tables stay: they have their own fixed budget. */
static void agent_start_over(struct agent *a, uint64_t heap)
{
	fp_warnx("memory %" PRIu64 " MB over --max-mem %u MB: forgetting all processes and "
		 "stacks, new session",
		 heap >> 20, a->ag_o.ao_max_mem_mb);
	fp_ring_clear(&a->ag_ring, &a->ag_lost.fl_batches, &a->ag_lost.fl_samples_dropped);
	fp_collector_free(a->ag_collector);
	a->ag_collector = NULL;
	fp_sampler_forget_pids(a->ag_sampler);
	if (collector_open(a)) {
		fp_warnx("out of memory starting over: agent_exiting");
		agent_exiting = 1;
		return;
	}
	agent_new_session(a);
	a->ag_resets++;
	malloc_trim(0);
}

/* agent_keep_budget: start over when the heap is over --max-mem. */
static void agent_keep_budget(struct agent *a)
{
	uint64_t heap = heap_bytes();

	if (heap > (uint64_t)a->ag_o.ao_max_mem_mb << 20)
		agent_start_over(a, heap);
}

/* log_unwind_memory: the memory the unwind tables hold now (make bench
 * and the tests read it). */
static void log_unwind_memory(struct agent *a)
{
	struct fp_unwind_stats us;

	fp_unwind_stats(a->ag_unwind, &us);
	fp_info("unwind memory: %u chunks of rows, %" PRIu64 " bytes, for %" PRIu64
		" rows of %u tables (budget %" PRIu64 " rows); %u process lists of %u mappings; "
		"%" PRIu64 " chunks refused",
		us.us_chunks, us.us_chunk_bytes, us.us_rows_used, us.us_tables, us.us_rows_total,
		us.us_procs_now, us.us_mapv_used, us.us_chunks_failed);
}

/* What the benchmark reads: wire bytes, BPF cost and memory. */
static void log_footprint(struct agent *a)
{
	struct fp_sampler_stats st = { 0 };
	struct fp_collector_nodes nodes;
	uint64_t rows_bytes = 0;
	unsigned long hwm_kb = 0;
	uint64_t c[FP_CNT_MAX] = { 0 };
	char line[256];
	FILE *f;

	fp_sampler_stats(a->ag_sampler, &st);
	if (a->ag_unwind) {
		struct fp_unwind_stats us;
		fp_unwind_stats(a->ag_unwind, &us);
		rows_bytes = us.us_chunk_bytes;
	}
	fp_info("symbolizer's asks: file bytes deferred to a later interval %" PRIu64
		" times, kallsyms %" PRIu64 " times; %" PRIu64 " refused (queues full)",
		a->ag_fetch_deferred, a->ag_ksyms_deferred, a->ag_asks_dropped);
	f = fopen("/proc/self/status", "re");
	while (f && fgets(line, sizeof(line), f) && sscanf(line, "VmHWM: %lu kB", &hwm_kb) != 1)
		;
	if (f)
		fclose(f);
	fp_info("wire: %" PRIu64 " bytes of batches (%.2f bytes/sample), %" PRIu64
		" bytes of kallsyms, %" PRIu64 " bytes of files, %" PRIu64
		" bytes of unwind tables; "
		"bpf: %" PRIu64 " runs, %" PRIu64 " ns/run, maps %" PRIu64 " bytes (%" PRIu64
		" of rows, mapped by the agent too); collector %zu bytes; "
		"memory resets %" PRIu64 "; peak RSS %lu kB",
		a->ag_batch_bytes,
		a->ag_acked_samples ? (double)a->ag_batch_bytes / a->ag_acked_samples : 0.0,
		a->ag_ksyms_bytes, a->ag_file_bytes, a->ag_table_bytes, st.ss_run_count,
		st.ss_run_count ? st.ss_run_ns / st.ss_run_count : 0, st.ss_map_bytes + rows_bytes,
		rows_bytes, fp_collector_bytes(a->ag_collector), a->ag_resets, hwm_kb);
	fp_info("ring buffer: %" PRIu64 " bytes; %" PRIu64 " records of %.0f bytes on average; "
		"at most %" PRIu64 " bytes drained at once",
		st.ss_rb_bytes, st.ss_records,
		st.ss_records ? (double)st.ss_record_bytes / st.ss_records : 0.0, st.ss_rb_peak);
	fp_info("wire: batch bytes by part: nodes %zu, counts %zu, mappings %zu, threads %zu, "
		"headers %zu",
		a->ag_batch_parts.wp_nodes, a->ag_batch_parts.wp_counts,
		a->ag_batch_parts.wp_mappings, a->ag_batch_parts.wp_threads,
		a->ag_batch_parts.wp_other);
	fp_collector_nodes(a->ag_collector, &nodes);
	fp_info("stack trie: %" PRIu64 " nodes: %" PRIu64 " native user frames, %" PRIu64
		" kernel, %" PRIu64 " Python, %" PRIu64 " unmapped; %" PRIu64
		" native frames below Python folded to their row's start",
		nodes.cn_user + nodes.cn_kernel + nodes.cn_python + nodes.cn_unmapped,
		nodes.cn_user, nodes.cn_kernel, nodes.cn_python, nodes.cn_unmapped,
		nodes.cn_folded);
	fp_info("kernel function starts: %" PRIu32 " (%zu bytes), %" PRIu64
		" kernel frames folded to them, %" PRIu64 " lists refused (another kernel)",
		a->ag_kfuncs.kf_n, fp_kfuncs_bytes(&a->ag_kfuncs), nodes.cn_kfolded,
		a->ag_kfuncs_refused);
	if (a->ag_o.ao_offcpu || a->ag_unwind)
		fp_sampler_counters(a->ag_sampler, c);
	if (a->ag_o.ao_offcpu) {
		char off[512];
		fp_sampler_offcpu_line(c, off, sizeof(off));
		if (st.ss_off_run_count) /* with kernel.bpf_stats_enabled */
			fp_info("off-CPU: %s; the hook: %" PRIu64 " runs, %" PRIu64 " ns/run", off,
				st.ss_off_run_count, st.ss_off_run_ns / st.ss_off_run_count);
		else
			fp_info("off-CPU: %s", off);
	}
	if (a->ag_unwind) {
		struct fp_unwind_stats us;
		fp_info("stack walks: %" PRIu64 ", %" PRIu64 " to the root; %" PRIu64
			" with no user registers found (leaf only); steps by table %" PRIu64
			", by frame pointer %" PRIu64,
			c[FP_CNT_WALKS], c[FP_CNT_WALK_ROOT], c[FP_CNT_WALK_LOST],
			c[FP_CNT_WALK_TABLE], c[FP_CNT_WALK_FP]);
		fp_unwind_stats(a->ag_unwind, &us);
		fp_info("unwind tables: %u installed now (%" PRIu64 " of %" PRIu64
			" rows), %" PRIu64 " installed in all, %" PRIu64 " evicted, %" PRIu64
			" too big, %" PRIu64 " rejected, %" PRIu64 " parts dropped, %" PRIu64
			" sent again; %" PRIu64 " kept for when a walk needs them, %" PRIu64
			" installed so; process lists %" PRIu64 " (%" PRIu64
			" did not fit, %" PRIu64 " of exited processes dropped)",
			us.us_tables, us.us_rows_used, us.us_rows_total, us.us_installed,
			us.us_evicted, us.us_too_big, us.us_rejected, us.us_parts_dropped,
			us.us_parts_again,
			a->ag_deferred ? (uint64_t)fp_intern_count(a->ag_deferred) : 0,
			a->ag_deferred_installed, us.us_procs, us.us_procs_full, us.us_procs_swept);
		log_unwind_memory(a);
		if (a->ag_python)
			fp_python_log(a->ag_python, c);
		agent_tables_log(a);
	}
}

static void usage(FILE *f)
{
	fprintf(f,
		"usage: fleetprof-agent --server ADDR... [-F HZ] [--interval SECONDS]\n"
		"                       [--label KEY=VALUE]... [-p PID] [--buffer N]\n"
		"                       [--timeout SECONDS] [--failover-after N]\n"
		"                       [--failback SECONDS] [--unwind-mem MB] [--max-mem MB]\n"
		"                       [--no-python] [--user-stacks-only]\n"
		"                       [--off-cpu [--off-cpu-stacks N]]\n"
		"                       [--fetch-budget KB | --no-fetch]\n"
		"                       [--tls-cert FILE --tls-key FILE] [--tls-ca FILE]\n"
		"                       [--table-cache DIR] [--table-cache-mb MB]\n"
		"                       [--keep-privileges] [-v] [--syslog]\n"
		"\n"
		"Samples user and kernel stacks on every CPU with eBPF and sends them,\n"
		"as build-IDs and file offsets, to a fleetprof-symbolizer.\n"
		"\n"
		"  -s, --server ADDR       symbolizer address: tcp://HOST:PORT, ipc:///PATH or\n"
		"                          tls+tcp://HOST:PORT; repeatable (up to %d), in\n"
		"                          order of preference\n"
		"      --tls-cert FILE     the agent's certificate (PEM), presented to\n"
		"                          tls+tcp:// servers; its name is the host name\n"
		"                          the symbolizer accepts\n"
		"      --tls-key FILE      its private key (PEM, unencrypted)\n"
		"      --tls-ca FILE       CA certificates (PEM) that verify the symbolizer's\n"
		"                          certificate (default: the system's)\n"
		"  -F, --frequency HZ      samples per second per CPU (default 99, 1-10000)\n"
		"  -i, --interval SECONDS  send a batch every SECONDS (default 10, 1-3600)\n"
		"  -l, --label KEY=VALUE   static label sent with every profile (up to 64)\n"
		"  -p, --pid PID           profile this process only (default: all); repeatable, up to 16\n"
		"  -b, --buffer N          intervals kept while the symbolizer is away\n"
		"                          (default 60; the oldest is dropped first)\n"
		"  -t, --timeout SECONDS   wait for a reply this long (default 5); a retry\n"
		"                          waits 1 s, doubling up to 60 s\n"
		"      --failover-after N  after N failed tries in a row, move to the next\n"
		"                          --server (after the last: the first) in a new\n"
		"                          session, buffered intervals included (default %d)\n"
		"      --failback SECONDS  while not on the first --server, try the earlier\n"
		"                          ones this often and go back to the first that\n"
		"                          answers (default %d; 0: stay)\n"
		"      --unwind-mem MB     BPF map memory for the unwind tables of code built\n"
		"                          without frame pointers (default %u; 0: frame\n"
		"                          pointers only); least recently used tables go first\n"
		"      --no-python         show CPython processes as the interpreter's native\n"
		"                          frames, not as Python functions (Python frames\n"
		"                          need unwind memory: --unwind-mem 0 turns them off)\n"
		"      --user-stacks-only  no kernel frames: a sample taken in the kernel\n"
		"                          keeps only the user stack that entered it (the\n"
		"                          kernel's stack walk is most of such a sample's\n"
		"                          cost)\n"
		"      --off-cpu           where threads wait off their CPU too, and how long:\n"
		"                          an off-CPU profile beside the CPU one\n"
		"      --off-cpu-stacks N  stacks of waits taken a second per CPU, about: past\n"
		"                          it a share of the waits, each weighed to stand for\n"
		"                          the others; every wait is counted (default %u,\n"
		"                          10-100000)\n"
		"      --max-mem MB        the agent's own memory (heap); above it the agent\n"
		"                          forgets every process and stack and starts a new\n"
		"                          session (default %u, 8-4096)\n"
		"      --fetch-budget KB   file bytes sent per interval to a symbolizer that\n"
		"                          has no symbols for a binary and asks for its\n"
		"                          symbol sections (default %u, 1-1048576; the rest\n"
		"                          waits for the next intervals; the last range of\n"
		"                          an interval may overrun it, by at most 1 MiB)\n"
		"      --no-fetch          never send file bytes (the symbolizer is told no)\n"
		"      --table-cache DIR   keep the unwind tables received in DIR, the agent's\n"
		"                          own (mode 0700), so that a restarted agent walks\n"
		"                          whole stacks at once and is sent none again\n"
		"                          (default %s)\n"
		"      --table-cache-mb MB at most MB of tables there, the least recently used\n"
		"                          removed first (default %u, 0-%u; 0: off)\n"
		"      --keep-privileges   stay root with every capability and no seccomp\n"
		"                          filter (by default, once the BPF program is\n"
		"                          attached, the agent keeps CAP_BPF, CAP_SYS_PTRACE,\n"
		"                          CAP_DAC_READ_SEARCH, CAP_CHECKPOINT_RESTORE and\n"
		"                          CAP_SYSLOG only; for troubleshooting)\n"
		"  -v, --verbose           log debug messages\n"
		"      --syslog            log to syslog instead of stderr\n"
		"  -h, --help              this help\n"
		"  -V, --version           print the version\n",
		MAX_SERVERS, FAILOVER_AFTER_DEFAULT, FAILBACK_DEFAULT_S, FP_UNWIND_MEM_DEFAULT_MB,
		FP_OFFCPU_STACKS, MAX_MEM_DEFAULT_MB, FETCH_KB_DEFAULT, FP_TABLE_CACHE_DIR_DEFAULT,
		FP_TABLE_CACHE_MB_DEFAULT, FP_TABLE_CACHE_MB_MAX);
}

/* servers_valid: whether nng takes every --server address (the reason is
 * logged).  After the privileges are dropped: nng starts threads, and the
 * agent stays single-threaded until then.  (In a child process before
 * the BPF load, reaping nng's threads cost the agent up to 11 ms.) */
static int servers_valid(const struct agent_opts *o)
{
	for (size_t i = 0; i < o->ao_nservers; i++)
		if (fp_uplink_check(o->ao_servers[i], &o->ao_tls))
			return 0;
	return 1;
}

static int parse_args(int argc, char **argv, struct agent_opts *o, int *verbose, int *use_syslog)
{
	static const struct option longopts[] = {
		{ "server", required_argument, NULL, 's' },
		{ "frequency", required_argument, NULL, 'F' },
		{ "interval", required_argument, NULL, 'i' },
		{ "label", required_argument, NULL, 'l' },
		{ "pid", required_argument, NULL, 'p' },
		{ "buffer", required_argument, NULL, 'b' },
		{ "timeout", required_argument, NULL, 't' },
		{ "unwind-mem", required_argument, NULL, 'U' },
		{ "no-python", no_argument, NULL, 'P' },
		{ "user-stacks-only", no_argument, NULL, 'k' },
		{ "off-cpu", no_argument, NULL, 'o' },
		{ "off-cpu-stacks", required_argument, NULL, 'W' },
		{ "keep-privileges", no_argument, NULL, 'K' },
		{ "no-fetch", no_argument, NULL, 'N' },
		{ "fetch-budget", required_argument, NULL, 'B' },
		{ "max-mem", required_argument, NULL, 'M' },
		{ "failover-after", required_argument, NULL, 'O' },
		{ "failback", required_argument, NULL, 'R' },
		{ "tls-cert", required_argument, NULL, 'C' },
		{ "tls-key", required_argument, NULL, 'Y' },
		{ "tls-ca", required_argument, NULL, 'A' },
		{ "table-cache", required_argument, NULL, 'T' },
		{ "table-cache-mb", required_argument, NULL, 'X' },
		{ "verbose", no_argument, NULL, 'v' },
		{ "syslog", no_argument, NULL, 'S' },
		{ "help", no_argument, NULL, 'h' },
		{ "version", no_argument, NULL, 'V' },
		{ 0 },
	};
	uint32_t timeout_s = 5;
	const char *why;
	int c;

	while ((c = getopt_long(argc, argv, "s:F:i:l:p:b:t:vhV", longopts, NULL)) != -1) {
		switch (c) {
		case 's':
			if (o->ao_nservers == MAX_SERVERS) {
				fprintf(stderr, "fleetprof-agent: at most %d --server\n",
					MAX_SERVERS);
				return 2;
			}
			o->ao_servers[o->ao_nservers++] = optarg;
			break;
		case 'O':
			if (fp_parse_u32("fleetprof-agent", "failover-after", optarg, 1, 100,
					 &o->ao_failover_after))
				return 2;
			break;
		case 'R':
			if (fp_parse_u32("fleetprof-agent", "failback", optarg, 0, 86400,
					 &o->ao_failback_s))
				return 2;
			break;
		case 'F':
			if (fp_parse_u32("fleetprof-agent", "frequency", optarg, 1, 10000,
					 &o->ao_frequency))
				return 2;
			break;
		case 'i':
			if (fp_parse_u32("fleetprof-agent", "interval", optarg, 1, 3600,
					 &o->ao_interval_s))
				return 2;
			break;
		case 'p':
			if (o->ao_npids == FP_TARGET_PIDS) {
				fprintf(stderr, "fleetprof-agent: at most %d -p\n", FP_TARGET_PIDS);
				return 2;
			}
			if (fp_parse_u32("fleetprof-agent", "pid", optarg, 1, INT_MAX,
					 &o->ao_pids[o->ao_npids]))
				return 2;
			o->ao_npids++;
			break;
		case 'b':
			if (fp_parse_u32("fleetprof-agent", "buffer", optarg, 1, 100000,
					 &o->ao_buffer))
				return 2;
			break;
		case 't':
			if (fp_parse_u32("fleetprof-agent", "timeout", optarg, 1, 600, &timeout_s))
				return 2;
			break;
		case 'P':
			o->ao_no_python = 1;
			break;
		case 'k':
			o->ao_user_stacks_only = 1;
			break;
		case 'o':
			o->ao_offcpu = 1;
			break;
		case 'W':
			if (fp_parse_u32("fleetprof-agent", "off-cpu-stacks", optarg, 10, 100000,
					 &o->ao_offcpu_stacks))
				return 2;
			break;
		case 'C':
			o->ao_tls.to_cert = optarg;
			break;
		case 'Y':
			o->ao_tls.to_key = optarg;
			break;
		case 'A':
			o->ao_tls.to_ca = optarg;
			break;
		case 'K':
			o->ao_keep_privileges = 1;
			break;
		case 'T':
			if (!*optarg) {
				fprintf(stderr,
					"fleetprof-agent: --table-cache: empty directory\n");
				return 2;
			}
			o->ao_table_cache = optarg;
			break;
		case 'X':
			if (fp_parse_u32("fleetprof-agent", "table-cache-mb", optarg, 0,
					 FP_TABLE_CACHE_MB_MAX, &o->ao_table_cache_mb))
				return 2;
			break;
		case 'N':
			o->ao_fetch_kb = 0;
			break;
		case 'B':
			if (fp_parse_u32("fleetprof-agent", "fetch-budget", optarg, 1, 1 << 20,
					 &o->ao_fetch_kb))
				return 2;
			break;
		case 'U':
			if (fp_parse_u32("fleetprof-agent", "unwind-mem", optarg, 0,
					 FP_UNWIND_MEM_MAX_MB, &o->ao_unwind_mb))
				return 2;
			break;
		case 'M':
			if (fp_parse_u32("fleetprof-agent", "max-mem", optarg, 8, 4096,
					 &o->ao_max_mem_mb))
				return 2;
			break;
		case 'l': {
			char *eq = strchr(optarg, '=');
			if (!eq || eq == optarg || o->ao_nlabels == 64 || strlen(optarg) > 512) {
				fprintf(stderr,
					"fleetprof-agent: invalid label '%s' (expected KEY=VALUE, "
					"at most 64 labels)\n",
					optarg);
				return 2;
			}
			o->ao_label_keys[o->ao_nlabels] = strndup(optarg, eq - optarg);
			o->ao_label_values[o->ao_nlabels++] = strdup(eq + 1);
			break;
		}
		case 'v':
			(*verbose)++;
			break;
		case 'S':
			*use_syslog = 1;
			break;
		case 'h':
			usage(stdout);
			exit(0);
		case 'V':
			printf("fleetprof-agent %s\n", FP_VERSION);
			exit(0);
		default:
			usage(stderr);
			return 2;
		}
	}
	if (optind != argc) {
		fprintf(stderr, "fleetprof-agent: unexpected argument '%s'\n", argv[optind]);
		return 2;
	}
	if (!o->ao_nservers) {
		fprintf(stderr, "fleetprof-agent: --server is required\n");
		usage(stderr);
		return 2;
	}
	if (fp_tls_check_opts(&o->ao_tls, &why)) {
		fprintf(stderr, "fleetprof-agent: %s\n", why);
		return 2;
	}
	o->ao_timeout_ms = timeout_s * 1000;
	return 0;
}

int main(int argc, char **argv)
{
	struct agent a = { .ag_o = { .ao_frequency = 99,
				     .ao_interval_s = 10,
				     .ao_buffer = 60,
				     .ao_unwind_mb = FP_UNWIND_MEM_DEFAULT_MB,
				     .ao_max_mem_mb = MAX_MEM_DEFAULT_MB,
				     .ao_fetch_kb = FETCH_KB_DEFAULT,
				     .ao_failover_after = FAILOVER_AFTER_DEFAULT,
				     .ao_failback_s = FAILBACK_DEFAULT_S,
				     .ao_table_cache = FP_TABLE_CACHE_DIR_DEFAULT,
				     .ao_table_cache_mb = FP_TABLE_CACHE_MB_DEFAULT } };
	struct fp_sampler_opts so = { 0 };
	char host[256] = "";
	uint64_t now, last_setup_failures = 0;
	int verbose = 0, use_syslog = 0, status = 0, err;
	size_t i;

	a.ag_start_ns = fp_now_ns(CLOCK_MONOTONIC);
	/* Memory: nng's threads share the main heap (an arena each held
	 * 170 KB of RSS), and blocks of 64 KiB and more (a table as it
	 * arrives, kallsyms parts, replies) go back to the kernel when freed:
	 * glibc's moving threshold otherwise keeps them in the heap, which
	 * grew to 2.1 MB for 0.95 MB in use after the first tables. */
	mallopt(M_ARENA_MAX, 1);
	mallopt(M_MMAP_THRESHOLD, 64 << 10);
	if ((err = parse_args(argc, argv, &a.ag_o, &verbose, &use_syslog)))
		return err;
	fp_log_init("fleetprof-agent", verbose, use_syslog);
	signal(SIGINT, on_signal);
	signal(SIGTERM, on_signal);
	signal(SIGPIPE, SIG_IGN);

	if (getrandom(&a.ag_session, sizeof(a.ag_session), 0) != sizeof(a.ag_session))
		a.ag_session = fp_now_ns(CLOCK_REALTIME) ^ ((uint64_t)getpid() << 32);
	if ((err = fp_kernel_read("/proc", "/sys", &a.ag_kernel)))
		goto cleanup;
	if (!a.ag_kernel.kn_text)
		fp_warnx("cannot read _text from /proc/kallsyms: kernel frames stay unresolved");
	gethostname(host, sizeof(host) - 1);
	a.ag_hello = (struct fp_hello){
		.fh_session = a.ag_session,
		.fh_host = host,
		.fh_boot_id = a.ag_kernel.kn_boot_id,
		.fh_kernel_release = a.ag_kernel.kn_release,
		.fh_kernel_build_id = a.ag_kernel.kn_build_id,
		.fh_agent_version = FP_VERSION,
		.fh_frequency = a.ag_o.ao_frequency,
		.fh_ncpus = (uint32_t)sysconf(_SC_NPROCESSORS_ONLN),
		.fh_features = FP_FEATURE_KFUNCS | FP_FEATURE_HELD_TABLES,
		.fh_nlabels = a.ag_o.ao_nlabels,
		.fh_label_keys = a.ag_o.ao_label_keys,
		.fh_label_values = a.ag_o.ao_label_values,
	};
	if ((err = fp_ring_init(&a.ag_ring, a.ag_o.ao_buffer)))
		goto cleanup;
	fp_failover_init(&a.ag_fo, a.ag_o.ao_nservers, a.ag_o.ao_failover_after,
			 a.ag_o.ao_failback_s);
	so = (struct fp_sampler_opts){ .so_frequency = a.ag_o.ao_frequency,
				       .so_npids = a.ag_o.ao_npids,
				       .so_ringbuf_bytes = 0,
				       .so_unwind_bytes = (size_t)a.ag_o.ao_unwind_mb << 20,
				       .so_user_stacks_only = a.ag_o.ao_user_stacks_only,
				       .so_offcpu = a.ag_o.ao_offcpu,
				       .so_offcpu_stacks = a.ag_o.ao_offcpu_stacks,
				       .so_paused = 1,
				       .so_fn = on_sample,
				       .so_arg = &a };
	memcpy(so.so_pids, a.ag_o.ao_pids, sizeof(so.so_pids));
	if ((err = fp_sampler_open(&a.ag_sampler, &so)))
		goto cleanup;
	/* The first interval starts now, with sampling a few milliseconds
	 * away (an early cut may come before its end). */
	a.ag_loaded_ns = fp_now_ns(CLOCK_MONOTONIC);
	a.ag_next_cut_ns = a.ag_loaded_ns + (uint64_t)a.ag_o.ao_interval_s * 1000000000ull;
	if (a.ag_o.ao_unwind_mb &&
	    ((err = fp_unwind_alloc(&a.ag_unwind, a.ag_sampler)) || (err = agent_tables_open(&a))))
		goto cleanup;
	if (a.ag_unwind && !a.ag_o.ao_no_python &&
	    (err = fp_python_alloc(&a.ag_python, a.ag_sampler, a.ag_unwind)))
		goto cleanup;
	if ((err = collector_open(&a)))
		goto cleanup;
	/* The processes of -p: their mappings, and their tables from the
	 * table cache, before their first sample, so that it is walked (a
	 * sample of a process the BPF program has no list for yet is its
	 * leaf alone, or the kernel's frame-pointer walk).  Then sampling
	 * starts, with privileges the drop below takes away. */
	for (i = 0; a.ag_unwind && i < a.ag_o.ao_npids; i++)
		fp_collector_adopt(a.ag_collector, a.ag_o.ao_pids[i]);
	if ((err = fp_sampler_start(a.ag_sampler)))
		goto cleanup;
	/* Root's work is done: what remains needs five capabilities.  Before
	 * nng starts its threads, which inherit what is left. */
	if (!a.ag_o.ao_keep_privileges && (err = fp_privilege_drop(a.ag_python != NULL))) {
		fp_warnx("cannot drop privileges: %s (--keep-privileges runs without)",
			 strerror(-err));
		goto cleanup;
	}
	if (!servers_valid(&a.ag_o)) {
		status = 2;
		goto cleanup;
	}
	if ((err = fp_uplink_open(&a.ag_uplink, a.ag_o.ao_servers[0], &a.ag_o.ao_tls)))
		goto cleanup;
	a.ag_addr = a.ag_o.ao_servers[0];
	fp_info("sampling at %u Hz (%s), sending to %s every %u s", a.ag_o.ao_frequency,
		a.ag_o.ao_npids == 0   ? "every process"
		: a.ag_o.ao_npids == 1 ? "one process"
				       : "the processes of -p",
		a.ag_addr, a.ag_o.ao_interval_s);
	agent_budget(&a);

	while (!agent_exiting) {
		/* Idle wake-ups cost more than the samples: the BPF program wakes us
		 * early when the ring buffer fills. */
		agent_pump(&a, 250);
		if (a.ag_nneeded) /* tables walks stopped in since the last poll */
			agent_tables_needed(&a);
		if (fp_failover_probe_due(&a.ag_fo, fp_now_ns(CLOCK_MONOTONIC)))
			agent_failback(&a);
		if (!fp_ring_unsent(&a.ag_ring))
			continue;
		if (fp_now_ns(CLOCK_MONOTONIC) < a.ag_fo.fo_next_try) {
			/* Waiting to try again: the budget holds meanwhile, at
			 * the price of the intervals not sent yet. */
			agent_keep_budget(&a);
			continue;
		}
		err = agent_send(&a);
		now = fp_now_ns(CLOCK_MONOTONIC);
		if (err && !agent_exiting) {
			const char *addr = a.ag_addr, *why = strerror(-err);
			uint64_t setup_failures = fp_uplink_setup_failures(a.ag_uplink);
			/* nng counts a connection it reset there too (a reply
			 * over the receive limit was): only TLS is set up. */
			if (setup_failures != last_setup_failures && !strncmp(addr, "tls+", 4))
				why = "connected, then refused during set-up (TLS: see the "
				      "certificates and --tls-ca)";
			last_setup_failures = setup_failures;
			if (fp_failover_failed(&a.ag_fo, now))
				fp_warnx("symbolizer %s: %s, %u times in a row: failing over to %s with "
					 "%zu intervals buffered",
					 addr, why, a.ag_o.ao_failover_after,
					 a.ag_o.ao_servers[a.ag_fo.fo_current],
					 fp_ring_unsent(&a.ag_ring));
			else
				fp_warnx("symbolizer %s: %s; %zu intervals buffered, retrying in %" PRIu64
					 " ms",
					 addr, why, fp_ring_unsent(&a.ag_ring),
					 (a.ag_fo.fo_next_try - now) / 1000000);
		} else if (!err) {
			fp_failover_ok(&a.ag_fo);
		}
		/* After a flush: when it went out, starting over loses nothing. */
		agent_keep_budget(&a);
	}

	/* Stop: the last partial interval goes out too, if the server is there. */
	agent_budget(&a);
	agent_cut(&a);
	a.ag_o.ao_timeout_ms = a.ag_o.ao_timeout_ms < 3000 ? a.ag_o.ao_timeout_ms : 3000;
	agent_exiting = 0;
	err = agent_send(&a);
	for (i = 1; err && i < a.ag_o.ao_nservers; i++) {
		fp_warnx("symbolizer %s: %s; trying %s", a.ag_addr, strerror(-err),
			 a.ag_o.ao_servers[(a.ag_fo.fo_current + 1) % a.ag_o.ao_nservers]);
		fp_failover_next(&a.ag_fo, fp_now_ns(CLOCK_MONOTONIC));
		err = agent_send(&a);
	}
	/* A busy symbolizer took nothing: give it the timeout to catch up. */
	for (i = 0; !err && fp_ring_unsent(&a.ag_ring) && i < a.ag_o.ao_timeout_ms / 200; i++) {
		usleep(200000);
		err = agent_send(&a);
	}
	if (err || fp_ring_unsent(&a.ag_ring))
		fp_warnx("agent_exiting with %zu intervals unsent: %s", fp_ring_unsent(&a.ag_ring),
			 err ? strerror(-err) : "the symbolizer is busy");
	err = 0;
	fp_info("sampled %" PRIu64 " samples in %" PRIu64 " intervals; acknowledged %" PRIu64
		"; dropped %" PRIu64 " in %" PRIu64 " intervals; failed over %" PRIu64
		" times, back %" PRIu64 " times; not taken by a busy symbolizer %" PRIu64 " times",
		a.ag_sampled, a.ag_seq, a.ag_acked_samples, a.ag_lost.fl_samples_dropped,
		a.ag_lost.fl_batches, a.ag_fo.fo_failovers, a.ag_fo.fo_failbacks, a.ag_busy);
	log_footprint(&a);
cleanup:
	fp_collector_free(a.ag_collector);
	fp_python_free(a.ag_python);
	fp_unwind_free(a.ag_unwind);
	agent_tables_close(&a);
	fp_sampler_close(a.ag_sampler);
	fp_uplink_close(a.ag_uplink);
	agent_session_asks_fini(&a);
	fp_ring_fini(&a.ag_ring);
	fp_kernel_fini(&a.ag_kernel);
	fp_kfuncs_fini(&a.ag_kfuncs);
	for (i = 0; i < a.ag_o.ao_nlabels; i++) {
		free(a.ag_o.ao_label_keys[i]);
		free(a.ag_o.ao_label_values[i]);
	}
	return status ? status : err ? 1 : 0;
}
