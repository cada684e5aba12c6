/* tls.c: nng TLS configurations from certificate, key and CA files. */
#include "tls.h"
#include "log.h"

#include <errno.h>
#include <fcntl.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#define PEM_MAX (1 << 20) /* a certificate chain or key file, at most */

int fp_tls_enabled(const struct fp_tls_opts *o)
{
	return o->to_cert || o->to_key || o->to_ca;
}

int fp_tls_check_opts(const struct fp_tls_opts *o, const char **why)
{
	if (!o->to_cert != !o->to_key) {
		*why = o->to_cert ? "--tls-cert needs --tls-key" : "--tls-key needs --tls-cert";
		return -EINVAL;
	}
	return 0;
}

/* read_pem: the whole file, NUL-terminated, for nng_tls_config_own_cert. */
static char *read_pem(const char *path, const char *who)
{
	struct stat st;
	char *buf = NULL;
	size_t got = 0;
	ssize_t n;
	int fd = open(path, O_RDONLY | O_CLOEXEC | O_NONBLOCK);

	if (fd < 0) {
		fp_warn("%s: cannot open %s", who, path);
		return NULL;
	}
	if (fstat(fd, &st) || !S_ISREG(st.st_mode) || st.st_size > PEM_MAX) {
		fp_warnx("%s: %s is not a regular file of at most %d bytes", who, path, PEM_MAX);
		goto fail;
	}
	if (!(buf = malloc((size_t)st.st_size + 1)))
		goto fail;
	while (got < (size_t)st.st_size && (n = read(fd, buf + got, (size_t)st.st_size - got)) > 0)
		got += (size_t)n;
	if (got != (size_t)st.st_size) {
		fp_warn("%s: cannot read %s", who, path);
		goto fail;
	}
	buf[got] = '\0';
	close(fd);
	return buf;
fail:
	free(buf);
	close(fd);
	return NULL;
}

/* own_cert: o->to_cert and o->to_key into cfg. */
static int own_cert(nng_tls_config *cfg, const struct fp_tls_opts *o, const char *who)
{
	char *cert = read_pem(o->to_cert, who), *key = cert ? read_pem(o->to_key, who) : NULL;
	int rv = NNG_EINVAL;

	if (cert && key && (rv = nng_tls_config_own_cert(cfg, cert, key, NULL)))
		fp_warnx("%s: cannot use the certificate %s with the key %s: %s", who, o->to_cert,
			 o->to_key, nng_strerror(rv));
	if (key)
		explicit_bzero(key, strlen(key));
	free(key);
	free(cert);
	return rv;
}

static int ca_file(nng_tls_config *cfg, const char *path, const char *who)
{
	int rv = nng_tls_config_ca_file(cfg, path);

	if (rv)
		fp_warnx("%s: cannot use the CA file %s: %s", who, path, nng_strerror(rv));
	return rv;
}

static int to_errno(int rv)
{
	return rv == NNG_ENOMEM ? -ENOMEM : -EINVAL;
}

int fp_tls_client_config(nng_tls_config **out, const struct fp_tls_opts *o, const char *server_name,
			 const char *who)
{
	nng_tls_config *cfg;
	int rv;

	if ((rv = nng_tls_config_alloc(&cfg, NNG_TLS_MODE_CLIENT))) {
		fp_warnx("%s: TLS: %s", who, nng_strerror(rv));
		return to_errno(rv);
	}
	if ((rv = nng_tls_config_auth_mode(cfg, NNG_TLS_AUTH_MODE_REQUIRED)) ||
	    (server_name && (rv = nng_tls_config_server_name(cfg, server_name))) ||
	    (rv = ca_file(cfg, o->to_ca ? o->to_ca : FP_TLS_SYSTEM_CA, who)) ||
	    (o->to_cert && (rv = own_cert(cfg, o, who)))) {
		nng_tls_config_free(cfg);
		return to_errno(rv);
	}
	*out = cfg;
	return 0;
}

int fp_tls_server_config(nng_tls_config **out, const struct fp_tls_opts *o, const char *who)
{
	nng_tls_config *cfg;
	int rv;

	if (!o->to_cert || !o->to_key) {
		fp_warnx("%s: TLS needs a certificate and its key", who);
		return -EINVAL;
	}
	if (o->to_require_client && !o->to_ca) {
		fp_warnx("%s: client certificates are required but no CA file verifies them", who);
		return -EINVAL;
	}
	if ((rv = nng_tls_config_alloc(&cfg, NNG_TLS_MODE_SERVER))) {
		fp_warnx("%s: TLS: %s", who, nng_strerror(rv));
		return to_errno(rv);
	}
	if ((rv = own_cert(cfg, o, who)) || (o->to_ca && (rv = ca_file(cfg, o->to_ca, who))) ||
	    (rv = nng_tls_config_auth_mode(cfg, !o->to_ca ? NNG_TLS_AUTH_MODE_NONE
						: o->to_require_client
							? NNG_TLS_AUTH_MODE_REQUIRED
							: NNG_TLS_AUTH_MODE_OPTIONAL))) {
		nng_tls_config_free(cfg);
		return to_errno(rv);
	}
	*out = cfg;
	return 0;
}
