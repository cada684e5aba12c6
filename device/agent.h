/* agent.h: the agent's state, shared by its parts: main.c (flags,
 * start-up, sampling, the memory budget), interval.c (closing intervals,
 * new sessions), exchange.c (the
 * exchanges with the symbolizer) and tables.c (its unwind tables: the
 * table cache, and asking for what it lacks at once).  One thread runs them
 * all: nothing here is locked. */
#ifndef FP_AGENT_H
#define FP_AGENT_H

#include "collector.h"
#include "cpython.h"
#include "failover.h"
#include "intern.h"
#include "kernel.h"
#include "ring.h"
#include "sampler.h"
#include "table_cache.h"
#include "tls.h"
#include "unwind_maps.h"
#include "uplink.h"
#include "wire.h"

#include <signal.h>
#include <stddef.h>
#include <stdint.h>

#define KSYMS_PART 4000 /* symbols per message: bounds the agent's memory */
/* The agent's own budget for what a symbolizer asks of it, per interval:
 * kallsyms reads (each reads all of /proc/kallsyms), and file bytes
 * (--fetch-budget).  What does not fit waits for the next interval; what
 * does not fit the queues is refused. */
#define KSYMS_PER_INTERVAL 4
#define KSYMS_QUEUE 256
#define FETCH_KB_DEFAULT 8192
#define FETCH_QUEUE 4096
#define MAX_MEM_DEFAULT_MB 32 /* the agent's heap; docs/agent.md */
#define MAX_SERVERS 16
#define FAILOVER_AFTER_DEFAULT 3
#define FAILBACK_DEFAULT_S 300
/* Whole stacks from the first seconds: an interval closes early (at most
 * every EARLY_GAP_MS) when a process maps files whose unwind tables the
 * agent does not hold, or when the symbolizer says more tables are to
 * come; EARLY_DELAY_MS lets the mappings read together go in one batch.
 * While the symbolizer is still compiling, it is asked again after
 * EARLY_RETRY_MS, doubling up to the interval. */
#define EARLY_GAP_MS 250
#define EARLY_DELAY_MS 20
#define EARLY_RETRY_MS 250

/* A table received and installed, to be written to the table cache. */
struct unwritten_table {
	struct fp_build_id ut_id;
	void *ut_blob; /* owned */
	size_t ut_len;
	uint32_t ut_flags; /* FP_TABLE_CACHE_* */
};

struct agent_opts {
	const char *ao_servers[MAX_SERVERS]; /* in order of preference */
	size_t ao_nservers;
	uint32_t ao_failover_after; /* consecutive failures that move us on */
	uint32_t ao_failback_s;     /* between tries of earlier servers; 0: never */
	uint32_t ao_frequency;
	uint32_t ao_interval_s;
	uint32_t ao_pids[FP_TARGET_PIDS]; /* -p, the first ao_npids */
	uint32_t ao_npids;
	uint32_t ao_buffer;         /* intervals kept while the server is away */
	uint32_t ao_timeout_ms;     /* for one reply */
	uint32_t ao_unwind_mb;      /* unwind table rows in BPF maps */
	int ao_no_python;           /* leave CPython's eval loop as native frames */
	int ao_user_stacks_only;    /* no kernel stacks */
	int ao_offcpu;              /* off-CPU profiles too */
	uint32_t ao_offcpu_stacks;  /* stacks of waits a second per CPU */
	int ao_keep_privileges;     /* stay root, without the seccomp filter */
	uint32_t ao_fetch_kb;       /* file bytes sent per interval; 0: --no-fetch */
	uint32_t ao_max_mem_mb;     /* heap above which the agent starts over */
	const char *ao_table_cache; /* directory of the table cache */
	uint32_t ao_table_cache_mb; /* its bound; 0: off */
	struct fp_tls_opts ao_tls;  /* for tls+tcp:// servers */
	size_t ao_nlabels;
	char *ao_label_keys[64];
	char *ao_label_values[64];
};

struct agent {
	struct agent_opts ag_o;
	struct fp_kernel ag_kernel;
	struct fp_collector *ag_collector;
	struct fp_sampler *ag_sampler;
	struct fp_uplink *ag_uplink; /* to ag_addr, one of ag_o.ao_servers */
	const char *ag_addr;
	struct fp_failover ag_fo;
	struct fp_unwind *ag_unwind;      /* NULL with --unwind-mem 0 */
	struct fp_table_cache *ag_tables; /* held tables, on disk unless off; with ag_unwind */
	/* Build-IDs of files mapped without a table this session: the early
	 * interval that names them is asked for once. */
	struct fp_intern *ag_tables_asked;
	uint64_t ag_early_ns;             /* CLOCK_MONOTONIC: an early cut due; 0: none */
	uint64_t ag_last_cut_ns;          /* CLOCK_MONOTONIC of the last cut */
	uint32_t ag_retry_ms;             /* the next wait for tables being compiled */
	uint64_t ag_early_cuts;           /* intervals closed early */
	uint64_t ag_cache_installed;      /* tables installed from the table cache */
	struct fp_intern *ag_cache_reads; /* build-ID -> ag_cache_read_ns index */
	uint64_t *ag_cache_read_ns;       /* CLOCK_MONOTONIC of its last read */
	size_t ag_cache_read_cap;
	struct unwritten_table *ag_unwritten; /* installed, not yet on disk */
	size_t ag_nunwritten, ag_unwritten_cap;
	/* Large tables are installed once a walk needs them (tables.c):
	 * build-ID -> enum table_deferral, and those a walk needed. */
	struct fp_intern *ag_deferred;
	uint8_t *ag_deferred_state;
	size_t ag_deferred_cap;
	struct fp_build_id *ag_needed;
	size_t ag_nneeded, ag_needed_cap;
	struct fp_intern *ag_executables; /* build-IDs of processes' executables */
	uint64_t ag_deferred_installed;   /* deferred tables installed since */
	uint64_t ag_loaded_ns;            /* CLOCK_MONOTONIC when the BPF programs were loaded */
	int ag_first_table_logged;
	struct fp_python *ag_python; /* CPython frames; NULL without ag_unwind */
	struct fp_hello ag_hello;
	int ag_hello_ok;
	uint64_t ag_session;
	uint64_t ag_seq;
	uint64_t ag_next_cut_ns;
	struct fp_ring ag_ring; /* closed intervals until written */
	struct fp_lost ag_lost; /* agent-side totals */
	uint64_t ag_sampled, ag_acked_samples;
	uint64_t ag_batch_bytes, ag_ksyms_bytes;   /* acknowledged, on the wire */
	struct fp_wire_batch_parts ag_batch_parts; /* ag_batch_bytes by part */
	uint64_t ag_features;       /* what the symbolizer said it reads (fp_feature) */
	uint64_t ag_file_bytes;     /* file bytes the symbolizer asked for */
	uint64_t ag_table_bytes;    /* unwind table bytes received */
	struct fp_kfuncs ag_kfuncs; /* the kernel's function starts, once received */
	uint64_t ag_kfuncs_refused; /* lists for another kernel's build-ID */
	uint64_t ag_resets;         /* times the memory budget made us start over */
	uint64_t ag_busy;           /* intervals a busy symbolizer did not take (sent again) */
	/* What the symbolizer asked for and this interval's budget has not
	 * covered yet, carried to the next ones (this session only). */
	struct fp_range *ag_fetch_q;
	size_t ag_fetch_head, ag_fetch_len, ag_fetch_cap;
	uint64_t ag_fetch_left; /* file bytes this interval may still send */
	struct fp_build_id ag_ksyms_q[KSYMS_QUEUE];
	size_t ag_ksyms_len;
	unsigned ag_ksyms_left; /* kallsyms reads this interval may still make */
	uint64_t ag_fetch_deferred, ag_ksyms_deferred, ag_asks_dropped;
	uint64_t ag_start_ns; /* CLOCK_MONOTONIC when main began */
	int ag_sampling;      /* the first sample arrived */
};

/* Set by SIGINT and SIGTERM (and when starting over fails): the agent
 * sends what it has and exits. */
extern volatile sig_atomic_t agent_exiting;

/* interval.c */
/* agent_new_session: the next exchange starts a new session (a hello);
 * the collector forgets what the peer knew when the hello is answered. */
void agent_new_session(struct agent *a);
/* agent_pump: sample for up to timeout_ms; close the interval when it is
 * due, or when an early cut is. */
void agent_pump(struct agent *a, int timeout_ms);
/* agent_want_cut: close the interval in delay_ms (EARLY_GAP_MS after the
 * last cut at the soonest), unless the regular cut comes first: the
 * symbolizer hears of new files, or is asked for more tables, now. */
void agent_want_cut(struct agent *a, uint32_t delay_ms);
/* agent_budget: refill what the symbolizer may ask of one interval (file
 * bytes, kallsyms reads). */
void agent_budget(struct agent *a);
/* agent_cut: close the interval now, into the buffer (the oldest interval
 * is dropped, and counted, when it is full). */
void agent_cut(struct agent *a);

/* tables.c */
/* agent_tables_open: the table cache (--table-cache; in memory only when
 * it is off or unusable, which is logged) and the installed-table hook.
 * 0 or -ENOMEM. */
int agent_tables_open(struct agent *a);
/* agent_tables_on_maps: the collector's maps hook: the tables a process's
 * files need from the table cache, an early interval for those the agent
 * has none of, then the process's list for the BPF program. */
void agent_tables_on_maps(uint32_t pid, const struct fp_procmaps *pm, void *arg);
/* agent_tables_write: the tables received since the last call, to the
 * table cache (after the BPF program was told of them). */
void agent_tables_write(struct agent *a);
/* agent_walk_cut: the collector's cut hook: a walk stopped in the file
 * id, whose table may be one kept for when a walk needs it. */
void agent_walk_cut(const struct fp_build_id *id, void *arg);
/* agent_tables_needed: install the tables walks needed since the last
 * call (from main.c's loop, after each agent_pump). */
void agent_tables_needed(struct agent *a);
/* agent_tables_close: the last writes, and everything freed. */
void agent_tables_close(struct agent *a);
/* agent_tables_log: the table cache's counters, at exit. */
void agent_tables_log(struct agent *a);
/* agent_first_tables: log, once, how long after the BPF programs were loaded the first
 * unwind tables were installed, and where they came from. */
void agent_first_tables(struct agent *a, const char *from);

/* exchange.c */
/* agent_send: flush the buffer to the server the failover state names,
 * moving the uplink there first if it moved.  0 when the buffer is empty. */
int agent_send(struct agent *a);
/* agent_failback: say hello to the servers before the current one, in
 * order; the first that answers becomes current, in the session the
 * hello opened.  When none does, the current session goes on untouched. */
void agent_failback(struct agent *a);
/* agent_session_asks_fini: a new session starts with no questions: forget
 * what the last one's symbolizer asked for and was not answered yet. */
void agent_session_asks_fini(struct agent *a);

#endif
