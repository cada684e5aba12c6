/* uplink.h: the agent's connection to the symbolizer: an nng REQ socket
 * that dials in the background (reconnecting by itself) and is used
 * without blocking, so that sampling never waits on the network. */
#ifndef FP_UPLINK_H
#define FP_UPLINK_H

#include <stddef.h>
#include <stdint.h>
#include "batch.h"
#include "tls.h"

struct fp_uplink;

/* fp_uplink_open: dial addr ("tcp://host:port", "ipc:///path", or
 * "tls+tcp://host:port" with the certificates of tls, see tls.h; the
 * server's certificate must name host).  Any tls->to_cert or to_ca with
 * an address that is not tls+ is an error.  0, or a negative errno with
 * the reason logged (-EINVAL: bad address or TLS files). */
int fp_uplink_open(struct fp_uplink **u, const char *addr, const struct fp_tls_opts *tls);
void fp_uplink_close(struct fp_uplink *u);

/* fp_uplink_setup_failures: connections of u made and then lost before
 * they could carry a message, so far: a TLS handshake that failed (the
 * server's certificate not verified, or ours refused) or a peer that
 * does not speak the protocol.  nng retries them by itself; the agent
 * only sees its request time out. */
uint64_t fp_uplink_setup_failures(struct fp_uplink *u);

/* fp_uplink_check: whether addr is an address fp_uplink_open can dial,
 * without dialling it.  0, or a negative errno with the reason logged. */
int fp_uplink_check(const char *addr, const struct fp_tls_opts *tls);

/* fp_uplink_send: start one request (an earlier unanswered one is
 * abandoned).  0 or a negative errno. */
int fp_uplink_send(struct fp_uplink *u, const void *buf, size_t len);

/* fp_uplink_poll: the reply to the last request, if it has come: 0 (then
 * the caller owns *reply), -EAGAIN (not yet), -EPROTO (undecodable reply,
 * logged) or a negative errno.  A reply may be FP_WIRE_MAX_MESSAGE bytes
 * (a full reply of unwind tables is 4 MiB and more); a longer one is
 * never read: nng drops it with its connection (-ECONNRESET), and dials
 * again for the next request. */
int fp_uplink_poll(struct fp_uplink *u, struct fp_reply *reply);

#endif
