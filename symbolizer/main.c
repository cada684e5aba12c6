/* main.c: fleetprof-symbolizer, the central server.  Receives agents'
 * batches over nng, resolves their frames through the LMDB symbol cache and
 * writes a folded and a pprof profile per device and interval. */
#include "log.h"
#include "resolver.h"
#include "server.h"
#include "wire.h"

#include <errno.h>
#include <getopt.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <nng/nng.h>
#include <nng/protocol/reqrep0/rep.h>
#include <nng/supplemental/util/platform.h>

static volatile sig_atomic_t exiting;

static void on_signal(int sig)
{
	exiting = 1;
}

static void usage(FILE *f)
{
	fprintf(f,
		"usage: fleetprof-symbolizer --listen ADDR [--cache DIR] [--out DIR]\n"
		"                            [--debug-dir DIR] [--no-local-files] [-v] [--syslog]\n"
		"\n"
		"Receives stacks from fleetprof-agents, resolves their symbols and writes\n"
		"OUT/HOST/STAMP-SEQ.folded and OUT/HOST/STAMP-SEQ.pb.gz per interval.\n"
		"\n"
		"  -l, --listen ADDR      listen address: tcp://HOST:PORT or ipc:///PATH\n"
		"  -c, --cache DIR        symbol cache (LMDB), kept across restarts\n"
		"                         (default /var/cache/fleetprof)\n"
		"  -o, --out DIR          where profiles are written (default ./out)\n"
		"      --debug-dir DIR    detached debug files, DIR/.build-id/xx/rest.debug\n"
		"                         (default /usr/lib/debug)\n"
		"      --no-local-files   do not read binaries at the paths agents report\n"
		"                         (they are read only when their build-ID matches)\n"
		"  -v, --verbose          log debug messages\n"
		"      --syslog           log to syslog instead of stderr\n"
		"  -h, --help             this help\n"
		"  -V, --version          print the version\n");
}

int main(int argc, char **argv)
{
	static const struct option longopts[] = {
		{ "listen", required_argument, NULL, 'l' },
		{ "cache", required_argument, NULL, 'c' },
		{ "out", required_argument, NULL, 'o' },
		{ "debug-dir", required_argument, NULL, 'D' },
		{ "no-local-files", no_argument, NULL, 'N' },
		{ "verbose", no_argument, NULL, 'v' },
		{ "syslog", no_argument, NULL, 'S' },
		{ "help", no_argument, NULL, 'h' },
		{ "version", no_argument, NULL, 'V' },
		{ 0 },
	};
	struct fp_resolver_opts ro = { .ro_cache_dir = "/var/cache/fleetprof",
				       .ro_debug_dir = "/usr/lib/debug", .ro_local_files = 1 };
	const char *listen = NULL, *out = "out";
	struct fp_resolver *r = NULL;
	struct fp_server *srv = NULL;
	struct fp_server_stats last = { 0 }, now;
	time_t last_log = time(NULL);
	int verbose = 0, use_syslog = 0, c, rv, err = 1;
	nng_socket sock = NNG_SOCKET_INITIALIZER;

	while ((c = getopt_long(argc, argv, "l:c:o:vhV", longopts, NULL)) != -1) {
		switch (c) {
		case 'l': listen = optarg; break;
		case 'c': ro.ro_cache_dir = optarg; break;
		case 'o': out = optarg; break;
		case 'D': ro.ro_debug_dir = optarg; break;
		case 'N': ro.ro_local_files = 0; break;
		case 'v': verbose++; break;
		case 'S': use_syslog = 1; break;
		case 'h': usage(stdout); return 0;
		case 'V': printf("fleetprof-symbolizer %s\n", FP_VERSION); return 0;
		default: usage(stderr); return 2;
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
	fp_log_init("fleetprof-symbolizer", verbose, use_syslog);
	signal(SIGINT, on_signal);
	signal(SIGTERM, on_signal);
	signal(SIGPIPE, SIG_IGN);

	if (fp_resolver_open(&r, &ro) || fp_server_alloc(&srv, r, out))
		goto cleanup;
	if ((rv = nng_rep0_open(&sock)) != 0) {
		fp_warnx("nng: %s", nng_strerror(rv));
		goto cleanup;
	}
	nng_socket_set_size(sock, NNG_OPT_RECVMAXSZ, FP_WIRE_MAX_MESSAGE);
	nng_socket_set_ms(sock, NNG_OPT_RECVTIMEO, 1000);
	nng_socket_set_ms(sock, NNG_OPT_SENDTIMEO, 5000);
	if ((rv = nng_listen(sock, listen, NULL, 0)) != 0) {
		fp_warnx("cannot listen on %s: %s", listen, nng_strerror(rv));
		goto cleanup;
	}
	fp_info("listening on %s, cache %s, writing to %s", listen, ro.ro_cache_dir, out);

	while (!exiting) {
		nng_msg *req, *rep;
		char *reply = NULL;
		size_t reply_len = 0;

		rv = nng_recvmsg(sock, &req, 0);
		if (rv == 0) {
			if (fp_server_handle(srv, nng_msg_body(req), nng_msg_len(req), &reply,
					     &reply_len) == 0 &&
			    nng_msg_alloc(&rep, 0) == 0) {
				if (nng_msg_append(rep, reply, reply_len) != 0 ||
				    nng_sendmsg(sock, rep, 0) != 0)
					nng_msg_free(rep);
			}
			free(reply);
			nng_msg_free(req);
		} else if (rv != NNG_ETIMEDOUT && rv != NNG_EINTR) {
			fp_warnx("receive: %s", nng_strerror(rv));
		}
		fp_server_stats(srv, &now);
		if (time(NULL) - last_log >= 60 && memcmp(&now, &last, sizeof(now))) {
			fp_server_log_stats(srv);
			last = now;
			last_log = time(NULL);
		}
	}
	fp_server_log_stats(srv);
	nng_msleep(200); /* let the last replies leave before the socket closes */
	err = 0;
cleanup:
	nng_close(sock);
	fp_server_free(srv);
	fp_resolver_close(r);
	return err;
}
