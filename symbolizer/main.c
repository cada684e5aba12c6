/* main.c: fleetprof-symbolizer, the central server.  Receives agents'
 * batches over nng, resolves their frames through the LMDB symbol cache and
 * writes a folded and a pprof profile per device and interval.  With
 * --http it is also the symbol service: build pipelines upload ELF files,
 * debuginfod clients download them (http.h). */
#include "cli.h"
#include "debuginfod.h"
#include "http.h"
#include "listen.h"
#include "log.h"
#include "metrics.h"
#include "push.h"
#include "resolver.h"
#include "server.h"
#include "store.h"
#include "wire.h"

#include <errno.h>
#include <getopt.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <time.h>
#include <unistd.h>
#include <nng/nng.h>
#include <nng/supplemental/util/platform.h>

static volatile sig_atomic_t exiting;

static void on_signal(int sig)
{
	exiting = 1;
}

#define MAX_UPSTREAMS 16
#define SYMBOL_QUEUE 1024 /* symbol jobs waiting for a worker */

/* Long options without a letter (the pushers' are 0x7000 on). */
enum {
	OPT_MAX_SESSIONS = 0x6000,
	OPT_NEW_SESSIONS,
	OPT_MAX_CONNECTIONS,
	OPT_IDLE_TIMEOUT,
	OPT_MAX_QUEUED,
	OPT_MAX_QUEUED_MB,
	OPT_TABLE_RATE,
};

static void usage(FILE *f)
{
	fprintf(f,
		"usage: fleetprof-symbolizer --listen ADDR [--cache DIR] [--out DIR]\n"
		"                            [--debug-dir DIR] [--local-files] [-v] [--syslog]\n"
		"                            [--http HOST:PORT] [--store DIR] [--upload-token TOKEN]\n"
		"                            [--max-upload MB] [--debuginfod URL]...\n"
		"                            [--pyroscope URL [--pyroscope-format otlp|pprof]]\n"
		"                            [--otlp-endpoint URL] [--push-gzip] [--push-header H]...\n"
		"                            [--push-header-file FILE] [--push-max-attempts N]\n"
		"                            [--push-max-age SECONDS] [--spool DIR] [--spool-max MB]\n"
		"                            [--symbol-wait SECONDS] [--symbol-workers N]\n"
		"                            [--listen-workers N] [--max-connections N]\n"
		"                            [--idle-timeout SECONDS] [--max-sessions N]\n"
		"                            [--new-sessions N] [--max-queued N]\n"
		"                            [--max-queued-mb MB] [--table-rate MB]\n"
		"                            [--tls-cert FILE --tls-key FILE [--tls-ca FILE]\n"
		"                             [--tls-require-client-cert yes|no]]\n"
		"                            [--http-token-for-reads]\n"
		"\n"
		"Receives stacks from fleetprof-agents, resolves their symbols and writes\n"
		"OUT/HOST/STAMP-SEQ.folded and OUT/HOST/STAMP-SEQ.pb.gz per interval.\n"
		"\n"
		"  -l, --listen ADDR      listen address: tcp://HOST:PORT, ipc:///PATH or\n"
		"                         tls+tcp://HOST:PORT (with --tls-cert and --tls-key)\n"
		"  -c, --cache DIR        symbol cache (LMDB), kept across restarts\n"
		"                         (default /var/cache/fleetprof)\n"
		"  -o, --out DIR          where profiles are written (default ./out)\n"
		"      --debug-dir DIR    detached debug files, DIR/.build-id/xx/rest.debug\n"
		"                         (default /usr/lib/debug)\n"
		"      --local-files      also read binaries at the paths agents report, on\n"
		"                         this host (regular files only, used only when their\n"
		"                         build-ID matches); for agents that share the host's\n"
		"                         files.  Off by default (--no-local-files)\n"
		"      --symbol-wait SECONDS  how long an interval whose build-IDs are being\n"
		"                         ingested waits for their symbols before it is\n"
		"                         written and pushed (default 5, 0-3600; keep it under\n"
		"                         the agents' interval); replies never wait\n"
		"      --symbol-workers N threads that ingest files, ask debuginfod servers\n"
		"                         and take files fetched from devices (default 2, 1-64)\n"
		"      --listen-workers N requests handled at once (default 8, 1-256)\n"
		"      --max-connections N  agents' connections open at once; more are closed\n"
		"                         as soon as made (default 20000)\n"
		"      --idle-timeout SECONDS  close a connection that completed no message\n"
		"                         for SECONDS (default 120)\n"
		"      --max-sessions N   agent sessions held (default and most 16384)\n"
		"      --new-sessions N   new sessions admitted a second, also the burst\n"
		"                         (default 1000); more hellos are refused\n"
		"      --max-queued N     interval profiles waiting for the sinks (about 50 kB\n"
		"                         each) before batches are answered busy: agents send\n"
		"                         them again later (default and most 3840)\n"
		"      --max-queued-mb MB the same bound in MiB of heap those profiles hold\n"
		"                         (default 256, most 65536)\n"
		"      --table-rate MB    unwind table MiB sent to agents a second, at most a\n"
		"                         second's worth at once (default 256, 1-100000); agents\n"
		"                         come back for the rest\n"
		"\n"
		"TLS (the agents' tls+tcp:// link, and HTTPS on --http):\n"
		"      --tls-cert FILE    the symbolizer's certificate (PEM, chain after it)\n"
		"      --tls-key FILE     its private key (PEM, unencrypted)\n"
		"      --tls-ca FILE      CA certificates (PEM) that verify agents' certificates\n"
		"      --tls-require-client-cert yes|no  refuse agents without a certificate\n"
		"                         signed by --tls-ca during the handshake (default yes)\n"
		"                         An agent's certificate names its host (its first DNS\n"
		"                         name, else its common name): a hello for another host\n"
		"                         is refused (rejected_total{reason=\"host_mismatch\"})\n"
		"\n"
		"Symbol service:\n"
		"      --http HOST:PORT   serve the HTTP API: POST /v1/upload, POST /v1/missing,\n"
		"                         debuginfod's GET /buildid/HEX/debuginfo|executable,\n"
		"                         and GET /metrics (Prometheus)\n"
		"      --store DIR        where uploaded files are kept, DIR/.build-id/xx/rest[.debug]\n"
		"                         (default /var/lib/fleetprof/store); also a symbol source\n"
		"      --upload-token TOKEN  uploads need 'Authorization: Bearer TOKEN' (default:\n"
		"                         $FLEETPROF_UPLOAD_TOKEN; none: anyone on loopback may\n"
		"                         upload; required when --http is not on loopback)\n"
		"      --http-token-for-reads  downloads and /v1/missing need the token too\n"
		"      --max-upload MB    largest upload accepted (default 1024)\n"
		"      --debuginfod URL   upstream debuginfod server for build-IDs found nowhere\n"
		"                         else (repeatable; files cached in CACHE/debuginfod)\n"
		"\n"
		"Pushing every interval (through an on-disk spool, retried with backoff):\n"
		"      --pyroscope URL    Grafana Pyroscope: OTLP to URL/v1development/profiles\n"
		"      --pyroscope-format otlp|pprof  pprof: URL/ingest, one request per service\n"
		"      --otlp-endpoint URL  any OTLP/HTTP receiver: URL/v1development/profiles\n"
		"      --push-gzip        compress what is pushed (gzip)\n"
		"      --push-header 'Name: value'  add a header to every push, e.g.\n"
		"                         X-Scope-OrgID or Authorization (repeatable)\n"
		"      --push-header-file FILE  more headers, one 'Name: value' a line (keep\n"
		"                         credentials out of the command line; chmod 600 it)\n"
		"      --push-max-attempts N  drop a request after N failed attempts the\n"
		"                         destination answered (default 10, 1-1000)\n"
		"      --push-max-age SECONDS  drop a request that fails when spooled longer\n"
		"                         ago than this (default 86400, 60-2592000)\n"
		"      --spool DIR        requests waiting to be sent, DIR/otlp and DIR/pyroscope\n"
		"                         (default CACHE/spool); kept across restarts\n"
		"      --spool-max MB     bound of each destination's spool; the oldest requests\n"
		"                         are dropped beyond it (default 256)\n"
		"\n"
		"  -v, --verbose          log debug messages\n"
		"      --syslog           log to syslog instead of stderr\n"
		"  -h, --help             this help\n"
		"  -V, --version          print the version\n");
}

/* The sources after the debug directory and local files.  For symbols:
 * the store's debug file, the upstream servers, then the store's
 * executable (last: a stripped one has few symbols).  For CFI, files with
 * code only: the store's executable, then the upstream servers'. */
struct fetch_chain {
	struct fp_store *fc_store;
	struct fp_debuginfod *fc_upstream;
};

static int fetch_chain(const struct fp_build_id *id, int what, void *arg)
{
	struct fetch_chain *fc = arg;
	char hex[2 * FP_BUILD_ID_MAX + 1];
	struct fp_build_id trimmed = fp_build_id_trim(id);
	int fd = -ENOENT;

	fp_build_id_hex(&trimmed, hex);
	if (fc->fc_store && what == FP_FETCH_SYMBOLS)
		fd = fp_store_open_file(fc->fc_store, hex, FP_STORE_DEBUGINFO, NULL);
	if (fd < 0 && fc->fc_store && what == FP_FETCH_CFI)
		fd = fp_store_open_file(fc->fc_store, hex, FP_STORE_EXECUTABLE, NULL);
	if (fd < 0 && fc->fc_upstream)
		fd = fp_debuginfod_fetch(id, what, fc->fc_upstream);
	if (fd < 0 && fc->fc_store && what == FP_FETCH_SYMBOLS)
		fd = fp_store_open_file(fc->fc_store, hex, FP_STORE_EXECUTABLE, NULL);
	return fd;
}

/* raise_nofile: every agent holds a connection, so the soft limit on
 * open files (often 1,024) goes up to the hard one. */
static void raise_nofile(void)
{
	struct rlimit rl;

	if (getrlimit(RLIMIT_NOFILE, &rl) || rl.rlim_cur >= rl.rlim_max)
		return;
	rl.rlim_cur = rl.rlim_max;
	if (setrlimit(RLIMIT_NOFILE, &rl))
		fp_warn("cannot raise the limit on open files");
}

int main(int argc, char **argv)
{
	static const struct option longopts[] = {
		{ "listen", required_argument, NULL, 'l' },
		{ "cache", required_argument, NULL, 'c' },
		{ "out", required_argument, NULL, 'o' },
		{ "debug-dir", required_argument, NULL, 'D' },
		{ "local-files", no_argument, NULL, 'F' },
		{ "no-local-files", no_argument, NULL, 'N' },
		{ "verbose", no_argument, NULL, 'v' },
		{ "syslog", no_argument, NULL, 'S' },
		{ "help", no_argument, NULL, 'h' },
		{ "version", no_argument, NULL, 'V' },
		{ "http", required_argument, NULL, 'H' },
		{ "store", required_argument, NULL, 's' },
		{ "upload-token", required_argument, NULL, 'T' },
		{ "max-upload", required_argument, NULL, 'M' },
		{ "debuginfod", required_argument, NULL, 'U' },
		{ "symbol-wait", required_argument, NULL, 'W' },
		{ "symbol-workers", required_argument, NULL, 'K' },
		{ "listen-workers", required_argument, NULL, 'L' },
		{ "max-sessions", required_argument, NULL, OPT_MAX_SESSIONS },
		{ "max-queued", required_argument, NULL, OPT_MAX_QUEUED },
		{ "max-queued-mb", required_argument, NULL, OPT_MAX_QUEUED_MB },
		{ "table-rate", required_argument, NULL, OPT_TABLE_RATE },
		{ "new-sessions", required_argument, NULL, OPT_NEW_SESSIONS },
		{ "max-connections", required_argument, NULL, OPT_MAX_CONNECTIONS },
		{ "idle-timeout", required_argument, NULL, OPT_IDLE_TIMEOUT },
		{ "tls-cert", required_argument, NULL, 'C' },
		{ "tls-key", required_argument, NULL, 'Y' },
		{ "tls-ca", required_argument, NULL, 'A' },
		{ "tls-require-client-cert", required_argument, NULL, 'Q' },
		{ "http-token-for-reads", no_argument, NULL, 'R' },
		FP_PUSH_LONGOPTS,
		{ 0 },
	};
	struct fp_resolver_opts ro = { .ro_cache_dir = "/var/cache/fleetprof",
				       .ro_debug_dir = "/usr/lib/debug" };
	const char *listen = NULL, *out = "out", *http_addr = NULL, *store_dir = NULL;
	const char *token = getenv("FLEETPROF_UPLOAD_TOKEN"), *upstreams[MAX_UPSTREAMS];
	size_t nupstreams = 0;
	uint32_t max_upload_mb = 1024, symbol_wait_s = FP_SYMBOL_WAIT_DEFAULT_MS / 1000;
	uint32_t symbol_workers = 2, listen_workers = FP_LISTEN_WORKERS_DEFAULT;
	uint32_t max_connections = FP_LISTEN_CONNECTIONS_DEFAULT, idle_s = FP_LISTEN_IDLE_DEFAULT_S;
	struct fp_server_limits limits = { FP_SERVER_MAX_SESSIONS, FP_SERVER_NEW_SESSIONS_DEFAULT,
					   FP_PIPELINE_BUSY };
	struct fp_listener *listener = NULL;
	char dcache[4200];
	struct fetch_chain chain = { 0 };
	struct fp_http *http = NULL;
	struct fp_resolver *r = NULL;
	struct fp_server *srv = NULL;
	struct fp_push_cli push_cli = { 0 };
	struct fp_push *pushers[3] = { NULL };
	struct fp_metrics metrics = { 0 };
	struct fp_server_stats last = { 0 }, now;
	struct fp_http_stats hlast = { 0 };
	struct fp_listen_stats llast = { 0 }, lnow;
	time_t last_log = time(NULL);
	struct fp_tls_opts tls = { .to_require_client = 1 };
	const char *why;
	int verbose = 0, use_syslog = 0, token_reads = 0, c, rv, err = 1;

	while ((c = getopt_long(argc, argv, "l:c:o:vhV", longopts, NULL)) != -1) {
		switch (c) {
		case 'l':
			listen = optarg;
			break;
		case 'c':
			ro.ro_cache_dir = optarg;
			break;
		case 'o':
			out = optarg;
			break;
		case 'D':
			ro.ro_debug_dir = optarg;
			break;
		case 'F':
			ro.ro_local_files = 1;
			break;
		case 'N':
			ro.ro_local_files = 0;
			break;
		case 'v':
			verbose++;
			break;
		case 'S':
			use_syslog = 1;
			break;
		case 'h':
			usage(stdout);
			return 0;
		case 'V':
			printf("fleetprof-symbolizer %s\n", FP_VERSION);
			return 0;
		case 'H':
			http_addr = optarg;
			break;
		case 's':
			store_dir = optarg;
			break;
		case 'T':
			token = optarg;
			break;
		case 'C':
			tls.to_cert = optarg;
			break;
		case 'Y':
			tls.to_key = optarg;
			break;
		case 'A':
			tls.to_ca = optarg;
			break;
		case 'R':
			token_reads = 1;
			break;
		case 'Q':
			if (strcmp(optarg, "yes") && strcmp(optarg, "no")) {
				fprintf(stderr,
					"fleetprof-symbolizer: invalid "
					"--tls-require-client-cert '%s' (expected yes or no)\n",
					optarg);
				return 2;
			}
			tls.to_require_client = !strcmp(optarg, "yes");
			break;
		case 'M':
			if (fp_parse_u32("fleetprof-symbolizer", "--max-upload", optarg, 1, 1 << 20,
					 &max_upload_mb))
				return 2;
			break;
		case 'W':
			if (fp_parse_u32("fleetprof-symbolizer", "--symbol-wait", optarg, 0,
					 FP_SYMBOL_WAIT_MAX_MS / 1000, &symbol_wait_s))
				return 2;
			break;
		case 'K':
			if (fp_parse_u32("fleetprof-symbolizer", "--symbol-workers", optarg, 1, 64,
					 &symbol_workers))
				return 2;
			break;
		case 'L':
			if (fp_parse_u32("fleetprof-symbolizer", "--listen-workers", optarg, 1,
					 FP_LISTEN_WORKERS_MAX, &listen_workers))
				return 2;
			break;
		case OPT_MAX_SESSIONS:
			if (fp_parse_u32("fleetprof-symbolizer", "--max-sessions", optarg, 1,
					 FP_SERVER_MAX_SESSIONS, &limits.sl_max_sessions))
				return 2;
			break;
		case OPT_MAX_QUEUED:
			if (fp_parse_u32("fleetprof-symbolizer", "--max-queued", optarg, 1,
					 FP_PIPELINE_BUSY, &limits.sl_max_queued))
				return 2;
			break;
		case OPT_MAX_QUEUED_MB:
			if (fp_parse_u32("fleetprof-symbolizer", "--max-queued-mb", optarg, 1,
					 FP_PIPELINE_BUSY_BYTES_MAX >> 20,
					 &limits.sl_max_queued_mb))
				return 2;
			break;
		case OPT_TABLE_RATE:
			if (fp_parse_u32("fleetprof-symbolizer", "--table-rate", optarg, 1,
					 FP_SERVER_TABLE_MB_S_MAX, &limits.sl_table_mb_s))
				return 2;
			break;
		case OPT_NEW_SESSIONS:
			if (fp_parse_u32("fleetprof-symbolizer", "--new-sessions", optarg, 1,
					 FP_SERVER_NEW_SESSIONS_MAX, &limits.sl_new_sessions_per_s))
				return 2;
			break;
		case OPT_MAX_CONNECTIONS:
			if (fp_parse_u32("fleetprof-symbolizer", "--max-connections", optarg, 1,
					 FP_LISTEN_CONNECTIONS_MAX, &max_connections))
				return 2;
			break;
		case OPT_IDLE_TIMEOUT:
			if (fp_parse_u32("fleetprof-symbolizer", "--idle-timeout", optarg, 1,
					 FP_LISTEN_IDLE_MAX_S, &idle_s))
				return 2;
			break;
		case 'U':
			if (strncmp(optarg, "http://", 7) && strncmp(optarg, "https://", 8)) {
				fprintf(stderr,
					"fleetprof-symbolizer: invalid --debuginfod '%s' "
					"(expected http://... or https://...)\n",
					optarg);
				return 2;
			}
			if (nupstreams == MAX_UPSTREAMS) {
				fprintf(stderr, "fleetprof-symbolizer: at most %d --debuginfod\n",
					MAX_UPSTREAMS);
				return 2;
			}
			upstreams[nupstreams++] = optarg;
			break;
		default:
			if ((rv = fp_push_cli_option(&push_cli, c, optarg)) > 0)
				break;
			if (rv == 0)
				usage(stderr);
			return 2;
		}
	}
	if (optind != argc) {
		fprintf(stderr, "fleetprof-symbolizer: unexpected argument '%s'\n", argv[optind]);
		return 2;
	}
	if (!listen) {
		fprintf(stderr, "fleetprof-symbolizer: --listen is required\n");
		usage(stderr);
		return 2;
	}
	if (token && !token[0])
		token = NULL;
	if (fp_tls_check_opts(&tls, &why)) {
		fprintf(stderr, "fleetprof-symbolizer: %s\n", why);
		return 2;
	}
	if (fp_tls_enabled(&tls) && strncmp(listen, "tls+", 4) && !http_addr) {
		fprintf(stderr, "fleetprof-symbolizer: the --tls-* options need a tls+tcp:// "
				"--listen address or --http\n");
		return 2;
	}
	/* Beyond loopback anyone could fill the store and the cache. */
	if (http_addr && !token && !fp_http_addr_loopback(http_addr)) {
		fprintf(stderr,
			"fleetprof-symbolizer: --http %s listens beyond loopback: uploads "
			"need a token (--upload-token or $FLEETPROF_UPLOAD_TOKEN)\n",
			http_addr);
		return 2;
	}
	if (token_reads && !token) {
		fprintf(stderr, "fleetprof-symbolizer: --http-token-for-reads needs a token\n");
		return 2;
	}
	fp_log_init("fleetprof-symbolizer", verbose, use_syslog);
	raise_nofile();
	signal(SIGINT, on_signal);
	signal(SIGTERM, on_signal);
	signal(SIGPIPE, SIG_IGN);

	/* The store is a symbol source whenever it is named or served. */
	if (store_dir || http_addr) {
		if (!store_dir)
			store_dir = "/var/lib/fleetprof/store";
		if ((rv = fp_store_open(&chain.fc_store, store_dir))) {
			fp_warnx("cannot use the store %s: %s", store_dir, strerror(-rv));
			goto cleanup;
		}
	}
	/* Before any thread: it sets libdebuginfod's environment. */
	if (nupstreams) {
		snprintf(dcache, sizeof(dcache), "%s/debuginfod", ro.ro_cache_dir);
		if ((rv = fp_debuginfod_open(&chain.fc_upstream, upstreams, nupstreams, dcache))) {
			fp_warnx("cannot use debuginfod (cache %s): %s", dcache, strerror(-rv));
			goto cleanup;
		}
	}
	if (chain.fc_store || chain.fc_upstream) {
		ro.ro_fetch = fetch_chain;
		ro.ro_fetch_arg = &chain;
		ro.ro_fetch_remote = chain.fc_upstream != NULL;
	}
	if (fp_resolver_open(&r, &ro) || fp_server_alloc(&srv, r, out, ro.ro_cache_dir) ||
	    fp_server_set_limits(srv, &limits))
		goto cleanup;
	if (fp_push_cli_start(&push_cli, ro.ro_cache_dir, pushers))
		goto cleanup;
	/* Symbol work in the resolver's workers, sinks in the pipeline's
	 * thread: the request path only reads the cache. */
	if ((rv = fp_resolver_start(r, symbol_workers, SYMBOL_QUEUE)) ||
	    (rv = fp_server_add_sink(srv, fp_push_sink, pushers)) ||
	    (rv = fp_server_start(srv, symbol_wait_s * 1000))) {
		fp_warnx("cannot start the symbolizer's threads: %s", strerror(-rv));
		goto cleanup;
	}
	if (fp_listen_open(&listener, srv, listen, listen_workers,
			   strncmp(listen, "tls+", 4) ? NULL : &tls) ||
	    fp_listen_limits(listener, max_connections, idle_s))
		goto cleanup;
	fp_info("listening on %s (%u workers), cache %s, writing to %s; %u symbol workers, "
		"symbol wait %u s",
		listen, listen_workers, ro.ro_cache_dir, out, symbol_workers, symbol_wait_s);
	if (http_addr) {
		struct fp_http_opts ho = { .ho_addr = http_addr,
					   .ho_token = token,
					   .ho_token_reads = token_reads,
					   .ho_tls = tls.to_cert ? &tls : NULL,
					   .ho_max_upload = (uint64_t)max_upload_mb << 20,
					   .ho_store = chain.fc_store,
					   .ho_resolver = r,
					   .ho_metrics = fp_metrics_http,
					   .ho_metrics_arg = &metrics };

		metrics = (struct fp_metrics){ .mt_server = srv,
					       .mt_listener = listener,
					       .mt_resolver = r,
					       .mt_upstream = chain.fc_upstream,
					       .mt_pushers = pushers };
		if (fp_http_start(&http, &ho))
			goto cleanup;
		fp_info("%s on %s, store %s, uploads %s, at most %u MB",
			tls.to_cert ? "HTTPS" : "HTTP", http_addr, store_dir,
			token ? "need a token" : "open to anyone on loopback", max_upload_mb);
	}
	for (size_t i = 0; i < nupstreams; i++)
		fp_info("upstream debuginfod %s", upstreams[i]);

	while (!exiting) {
		nng_msleep(200);
		fp_server_stats(srv, &now);
		if (time(NULL) - last_log >= 60) {
			struct fp_http_stats hnow = { 0 };
			if (http)
				fp_http_stats(http, &hnow);
			if (memcmp(&now, &last, sizeof(now)))
				fp_server_log_stats(srv);
			if (memcmp(&hnow, &hlast, sizeof(hnow)))
				fp_http_log_stats(http);
			fp_listen_stats(listener, &lnow);
			if (memcmp(&lnow, &llast, sizeof(lnow)))
				fp_listen_log_stats(listener);
			llast = lnow;
			last = now;
			hlast = hnow;
			last_log = time(NULL);
		}
	}
	fp_server_log_stats(srv);
	fp_listen_log_stats(listener);
	if (http)
		fp_http_log_stats(http);
	err = 0;
cleanup:
	/* Its handlers use the resolver, the store; /metrics the server, the
	 * pushers, the listener and the debuginfod client. */
	fp_http_stop(http);
	fp_listen_close(listener);
	fp_server_free(srv); /* the sinks of the last profiles run, pushers too */
	fp_push_stop_all(pushers, FP_PUSH_FLUSH_MS); /* what is not sent stays spooled */
	fp_resolver_close(r);
	fp_debuginfod_close(chain.fc_upstream);
	fp_store_close(chain.fc_store);
	return err;
}
