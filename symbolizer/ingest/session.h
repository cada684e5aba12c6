/* session.h: what the symbolizer remembers of one agent session: its hello
 * and every definition (mapping, thread, stack) it sent, so that later
 * batches can refer to them by id.  Everything is checked on the way in:
 * a batch that refers to something undefined is refused as a whole. */
#ifndef FP_SESSION_H
#define FP_SESSION_H

#include <stddef.h>
#include <stdint.h>
#include "batch.h"
#include "profile.h"
#include "resolver.h"
#include "tablestore.h"

#define FP_SESSION_MAX_NODES (1u << 21)    /* stack trie nodes kept per session */
#define FP_SESSION_MAX_MAPPINGS (1u << 16) /* mappings kept per session */
#define FP_SESSION_MAX_THREADS (1u << 18)  /* threads kept per session */
/* Bytes of Python code-object definitions (qualified names, paths and line
 * tables) kept per session. */
#define FP_SESSION_MAX_PY_BYTES (64u << 20)

struct fp_session;

/* fp_session_alloc: a session for hello (copied).  0 or -ENOMEM. */
int fp_session_alloc(struct fp_session **s, const struct fp_hello *hello);
void fp_session_free(struct fp_session *s);

const struct fp_hello *fp_session_hello(const struct fp_session *s);

/* fp_session_apply: take b's definitions, and check that every reference in
 * b (counts to threads and nodes, nodes to parents and mappings) resolves.
 * Nothing is kept unless all of it is valid.  0, -ESTALE (a reference to a
 * definition this session never received: the agent must start over),
 * -EINVAL (a node redefined, defined after its child, or deeper than
 * FP_MAX_FRAMES), -E2BIG (session too large: FP_SESSION_MAX_NODES nodes,
 * FP_SESSION_MAX_MAPPINGS mappings, FP_SESSION_MAX_THREADS threads or
 * FP_SESSION_MAX_PY_BYTES of Python code objects) or -ENOMEM.
 *
 * Nodes of FP_MAP_PYTHON mappings become Python frames in the profile
 * (FP_FRAME_PYTHON): the code's qualified name, file, and the line its
 * line table gives for the node's offset (pyline.h). */
int fp_session_apply(struct fp_session *s, const struct fp_batch *b);

/* fp_session_profile: the resolved profile of an applied batch's CPU
 * counts, and that of its off-CPU counts, if it has any, as its
 * pr_offcpu.  0 or -ENOMEM. */
int fp_session_profile(struct fp_session *s, struct fp_resolver *r, const struct fp_batch *b,
		       struct fp_profile **p);

/* fp_session_resolve_again: resolve p's user frames that are still
 * unresolved (their symbols were being ingested when the profile was
 * made), each in the role of the first sample that has it.  Needs no
 * session: what a frame needs is in the profile.  0 or -ENOMEM. */
int fp_session_resolve_again(struct fp_profile *p, struct fp_resolver *r);

/* fp_session_wants: build-IDs of the session's kernel and module mappings
 * that have no table yet and were not asked for before (each is asked for
 * once per session).  The caller frees *ids.  0 or -ENOMEM. */
int fp_session_wants(struct fp_session *s, struct fp_resolver *r, struct fp_build_id **ids,
		     size_t *n);

/* fp_session_asked: whether fp_session_wants asked this session for the
 * kallsyms of id: the only ones the server takes from it. */
int fp_session_asked(const struct fp_session *s, const struct fp_build_id *id);

/* What fp_session_tables gives one reply. */
struct fp_session_tables {
	size_t stb_budget; /* in: bytes this reply may carry (<= FP_TABLE_REPLY_MAX) */
	struct fp_table_part *stb_parts; /* out: NULL when none; fp_reply_fini frees them */
	size_t stb_nparts;
	uint32_t stb_pending;    /* out: tables this session is still to get (parts left
				 * over, or a search or compile under way) */
	uint32_t stb_held;       /* out: tables found held by the agent at this call */
	uint64_t stb_held_bytes; /* ... and their bytes, not sent */
};

/* fp_session_tables: the next parts of the unwind tables the agent needs:
 * for each distinct build-ID of the session's user mappings, its table
 * (from ts: kept in memory once for all sessions) when the code needs one
 * (fp_unwind_table_needed), once per session, unless the hello said the
 * agent holds that very table (HELLO key 11: same build-ID and id); in
 * parts (struct fp_table_part, pointing into ts's copy) of at most
 * FP_TABLE_PART_MAX bytes and t->stb_budget bytes in all, at most
 * FP_TABLE_REPLY_PARTS of them (FP_TABLE_REPLY_PARTS_OLD to an agent
 * without FP_FEATURE_HELD_TABLES); a table larger
 * than that goes on in the next replies (from its start again, should ts
 * hold a new version by then).  A build-ID whose table may still come (a
 * search or a fetch under way, or CFI wanted from the device:
 * fp_session_cfi_wanted) is tried again at the next call.  0 or
 * -ENOMEM. */
int fp_session_tables(struct fp_session *s, struct fp_resolver *r, struct fp_tablestore *ts,
		      struct fp_session_tables *t);

/* fp_session_cfi_wanted: up to max build-IDs (into ids) whose tables the
 * last fp_session_tables found waiting for CFI that only a device may
 * have (fp_resolver_unwind: -ENODATA), for the caller to ask the agent
 * (devfetch.h); their tables are sent once stored.  How many. */
size_t fp_session_cfi_wanted(const struct fp_session *s, struct fp_build_id *ids, size_t max);

/* fp_session_kfuncs: the kernel's function starts (fp_resolver_kfuncs)
 * for an agent whose hello takes them (FP_FEATURE_KFUNCS), once per
 * session, in *out once the kernel's kallsyms table is here; out is left
 * empty otherwise, and for good when the table gives none.  The caller
 * frees *out (fp_kfuncs_fini).  0 or -ENOMEM. */
int fp_session_kfuncs(struct fp_session *s, struct fp_resolver *r, struct fp_kfuncs *out);

/* fp_session_seen: whether seq was already applied (a resend after a lost
 * reply); fp_session_done records it. */
int fp_session_seen(const struct fp_session *s, uint64_t seq);
void fp_session_done(struct fp_session *s, uint64_t seq);

#endif
