/* devfetch.h: the last source of symbols and CFI, the device itself.
 *
 * When no other source has a build-ID's symbols, the symbolizer asks the
 * agent that reported it for parts of the file: first the ELF header, then
 * the section and program header tables, then the section names, then the
 * symbol tables and notes, and the CFI sections (.eh_frame, .eh_frame_hdr,
 * .debug_frame) for the unwind table when they fit the byte budget, and,
 * for a CPython interpreter, the few bytes of its Py_Version (its
 * version, for the table's trailer).  The agent copies the bytes; all
 * parsing happens here, on a sparse copy of the file, which is finally
 * ingested like an upload.  When the symbols are here (a detached debug
 * file, whose CFI is NOBITS) or on their way, but no file of the
 * symbolizer's host has the CFI (fp_resolver_unwind: -ENODATA), a CFI
 * fetch asks only for what the table needs: the headers, the section
 * names, the notes and the CFI sections (and, for a file with a
 * .PyRuntime section, the dynamic symbols and Py_Version), never the
 * symbol tables; its copy goes to fp_resolver_add_cfi_async, and what
 * came of it to fp_resolver_cfi_device.  One fetch of a file runs at a
 * time (an answer names the file, not the fetch); a symbols fetch after
 * a CFI fetch skips the CFI.  Each build-ID is fetched once for the whole
 * fleet.  A failure (the agent cannot read it, the bytes make no sense) is
 * that device's, not the build-ID's, so that no one agent can keep a
 * build-ID from ever being fetched: it is asked again at once of another
 * host, and of a host it failed on after a back-off (retry_s, doubled
 * with each failure); it is given up after FP_DEVFETCH_ATTEMPTS failures
 * or failures on FP_DEVFETCH_FAIL_HOSTS hosts (the hosts as the server
 * knows them: with client certificates, proven).  A fetch with no answer for its timeout
 * (FP_DEVFETCH_TIMEOUT seconds in the server) expires (fp_devfetch_expire)
 * and may start again from the next session that reports the build-ID.
 *
 * What a peer can make it hold is bounded: at most FP_DEVFETCH_ACTIVE
 * fetches run at once, FP_DEVFETCH_PER_SESSION of them from one session;
 * a reply asks for at most FP_WIRE_MAX_RANGES ranges; FP_DEVFETCH_TRACKED
 * build-IDs are remembered.  A fetch's temporary file is opened at its
 * first answer and closed when it ends or expires, so no more than
 * FP_DEVFETCH_ACTIVE descriptors are ever open.  A build-ID not started
 * for a bound is asked for again with a later batch.
 *
 * Threads: none of its own; the caller serialises the calls (the server,
 * under sv_lock).
 */
#ifndef FP_DEVFETCH_H
#define FP_DEVFETCH_H

#include <stddef.h>
#include <stdint.h>
#include "batch.h"
#include "resolver.h"

#define FP_DEVFETCH_TIMEOUT 300
#define FP_DEVFETCH_MAX_BYTES (64u << 20) /* per file */
#define FP_DEVFETCH_ACTIVE 64             /* fetches running at once */
#define FP_DEVFETCH_PER_SESSION 8         /* ... from one session */
#define FP_DEVFETCH_TRACKED 65536         /* build-IDs remembered */
#define FP_DEVFETCH_RETRY_S 60            /* back-off after a failure, doubled each time */
#define FP_DEVFETCH_ATTEMPTS 6            /* failures before a build-ID is given up */
#define FP_DEVFETCH_FAIL_HOSTS 3          /* ... or hosts it failed on */

struct fp_devfetch;

/* fp_devfetch_alloc: sparse copies go to files in tmpdir; a fetch with no
 * answer for timeout_s seconds expires; a failed one is asked again of
 * the hosts it failed on after retry_s seconds (FP_DEVFETCH_RETRY_S in
 * the server), doubled with each failure.  0 or -ENOMEM. */
int fp_devfetch_alloc(struct fp_devfetch **f, struct fp_resolver *r, const char *tmpdir,
		      uint32_t timeout_s, uint32_t retry_s);
void fp_devfetch_free(struct fp_devfetch *f);

/* fp_devfetch_want: session, of the host whose key is host (the same
 * number for all its sessions; 0 unknown), reported a user mapping with
 * build-ID id that no source could resolve.  Starts a fetch from that
 * session unless one runs or succeeded, failed not long ago (above), or a
 * bound says not now; appends to *ranges
 * (realloc'd, *n entries, never more than FP_WIRE_MAX_RANGES) what to ask
 * for.  0 or -ENOMEM. */
int fp_devfetch_want(struct fp_devfetch *f, uint64_t session, uint64_t host,
		     const struct fp_build_id *id, struct fp_range **ranges, size_t *n);

/* fp_devfetch_want_cfi: as fp_devfetch_want, a fetch of the CFI sections
 * alone (above) of id, whose symbols some other source gives and whose
 * CFI no source of the symbolizer has.  0 or -ENOMEM. */
int fp_devfetch_want_cfi(struct fp_devfetch *f, uint64_t session, uint64_t host,
			 const struct fp_build_id *id, struct fp_range **ranges, size_t *n);

/* fp_devfetch_running: how many fetches from session run now. */
size_t fp_devfetch_running(const struct fp_devfetch *f, uint64_t session);

/* fp_devfetch_data: an agent's answer.  Appends the next ranges to ask
 * for; when the file is complete, hands it to the resolver
 * (fp_resolver_add_file_async: ingested in a worker once the resolver
 * has them).  0, or -EINVAL when the
 * answer is for nothing asked (the caller rejects the message). */
int fp_devfetch_data(struct fp_devfetch *f, const struct fp_file_data *d, struct fp_range **ranges,
		     size_t *n);

/* fp_devfetch_expire: end the fetches that had no answer for their
 * timeout, closing their files.  Call it often (each
 * message): it looks at the fetches at most once a second. */
void fp_devfetch_expire(struct fp_devfetch *f);

struct fp_devfetch_stats {
	uint64_t dv_started, dv_done, dv_failed; /* fetches of both kinds */
	uint64_t dv_cfi_started;                 /* of them, CFI fetches */
	uint64_t dv_cfi_none;                    /* CFI fetches of files without CFI */
	uint64_t dv_retried;                     /* started again after a failure */
	uint64_t dv_given_up;                    /* build-IDs no device is asked for any more */
	uint64_t dv_bytes;
	uint64_t dv_expired;  /* no answer in time */
	uint64_t dv_deferred; /* not started now: a bound */
	uint64_t dv_active;   /* running now (each may hold a file) */
};

void fp_devfetch_stats(const struct fp_devfetch *f, struct fp_devfetch_stats *st);

#endif
