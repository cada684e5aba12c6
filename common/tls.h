/* tls.h: the one place where nng TLS configurations are built, for every
 * end that speaks TLS: the agent's link (device/uplink.c) and the
 * symbolizer's listener (symbolizer/ingest/listen.c) on tls+tcp://, the symbol
 * service's HTTPS server (symbolizer/service/http.c), the pushers' and `fleetprof
 * upload`'s HTTPS clients (symbolizer/sinks/push.c, tools/upload.c).
 *
 * A client always verifies the server's certificate: against its CA file,
 * or the system's CA bundle without one, and for the host name it dials.
 * A server presents its certificate and, when asked to, requires one from
 * each client, signed by its CA file.
 *
 * The files are read each time a configuration is built, so a renewed
 * certificate is used from the next connection on.  The caller owns the
 * configuration and frees it with nng_tls_config_free once it has handed
 * it to nng (which holds its own reference).  No state of its own; any
 * thread. */
#ifndef FP_TLS_H
#define FP_TLS_H

#include <nng/nng.h>
#include <nng/supplemental/tls/tls.h>

#define FP_TLS_SYSTEM_CA "/etc/ssl/certs/ca-certificates.crt"

struct fp_tls_opts {
	const char *to_cert;   /* PEM certificate, chain after it; NULL: none */
	const char *to_key;    /* PEM private key of to_cert, unencrypted */
	const char *to_ca;     /* PEM CA certificates; NULL: see below */
	int to_require_client; /* server: refuse clients without a certificate */
};

/* fp_tls_enabled: whether o names a certificate or a CA (TLS is wanted). */
int fp_tls_enabled(const struct fp_tls_opts *o);

/* fp_tls_client_config: a client configuration that verifies the server
 * against o->to_ca (NULL: FP_TLS_SYSTEM_CA) for server_name (NULL: no name
 * check, for addresses that name none) and presents o->to_cert when set.
 * who names the user in log messages.  0, or -EINVAL (a file unreadable or
 * not PEM, a certificate without its key: logged), -ENOMEM. */
int fp_tls_client_config(nng_tls_config **cfg, const struct fp_tls_opts *o, const char *server_name,
			 const char *who);

/* fp_tls_server_config: a server configuration presenting o->to_cert
 * (required) with o->to_key.  With o->to_ca, clients' certificates are
 * verified against it: required when o->to_require_client, else
 * optional; without it no client certificate is asked for, and
 * o->to_require_client is an error.  0, -EINVAL (logged) or -ENOMEM. */
int fp_tls_server_config(nng_tls_config **cfg, const struct fp_tls_opts *o, const char *who);

/* fp_tls_check_opts: the flags' consistency, for a front end to refuse
 * at start: a key without a certificate or the reverse.  0 or -EINVAL with
 * the reason in *why. */
int fp_tls_check_opts(const struct fp_tls_opts *o, const char **why);

#endif
