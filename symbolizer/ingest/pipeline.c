/* pipeline.c: symbol wait, sinks and sequence numbers; the sink
 * workers.  See pipeline.h for who owns what. */
#include "pipeline.h"
#include "cli.h"
#include "files.h"
#include "intern.h"
#include "log.h"
#include "session.h"

#include <ctype.h>
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <malloc.h>
#include <pthread.h>
#include <sched.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#define PARKED_POLL_MS 20
/* Sink workers run this much nicer than the process: see worker_main. */
#define WORKER_NICE 10
/* A queue this deep that drains gives its memory back (malloc_trim). */
#define TRIM_AFTER_DEPTH 64
#define SEQ_FILE_MAX 21                   /* 20 digits and a newline */
#define SEQ_READS 4                       /* tries for two reads of a record that agree */
#define OLD_SEQ_PREFIX ".session-"        /* OUT/HOST/.session-SESSION, before the pipeline */
#define MIGRATED_MARKER ".moved-from-out" /* STATE/sessions/: OLD_SEQ_PREFIX files moved */

struct pipeline_job {
	struct pipeline_job *pj_next;
	struct fp_profile *pj_profile;
	struct fp_hello pj_hello;
	uint64_t pj_seq;
	uint64_t pj_deadline_ns; /* CLOCK_MONOTONIC: symbols wanted until then */
	size_t pj_bytes;         /* the heap it holds, profile and job (pl_bytes) */
};

/* The last written interval of a session, keyed by session id and host. */
struct written_slot {
	uint64_t ws_session, ws_host;
	uint64_t ws_seq;
};

struct pipeline_sink {
	fp_sink_fn ps_fn;
	void *ps_arg;
};

/* A sink worker: the hosts hashed to it are its own (worker_of). */
struct pipeline_worker {
	struct fp_pipeline *pw_pipeline;
	pthread_t pw_thread;
	pthread_cond_t pw_wake;                 /* a profile was queued, or stop */
	struct pipeline_job *pw_head, *pw_tail; /* under pl_lock */
};

struct fp_pipeline {
	struct fp_resolver *pl_resolver;
	char *pl_state_dir;
	uint32_t pl_symbol_wait_ms;
	struct pipeline_sink pl_sinks[FP_PIPELINE_MAX_SINKS];
	size_t pl_nsinks;
	struct pipeline_worker pl_workers[FP_PIPELINE_WORKERS];
	size_t pl_nworkers; /* running */
	int pl_started;
	/* Under pl_lock: */
	pthread_mutex_t pl_lock;
	size_t pl_count;              /* queued and set aside, all workers */
	size_t pl_ready;              /* workers running their loop */
	pthread_cond_t pl_ready_cond; /* one more is */
	size_t pl_deepest;            /* the most queued since the queue was last empty */
	size_t pl_busy;               /* busy from this many queued on */
	size_t pl_bytes;              /* the heap the queued and set aside hold */
	size_t pl_busy_bytes;         /* busy from this many bytes queued on */
	int pl_stop;
	struct fp_pipeline_stats pl_stats;
	struct written_slot *pl_written; /* FP_PIPELINE_WRITTEN_SLOTS */
};

int fp_pipeline_alloc(struct fp_pipeline **out, const struct fp_pipeline_opts *o)
{
	struct fp_pipeline *pl = calloc(1, sizeof(*pl));

	if (!pl)
		return -ENOMEM;
	if (!(pl->pl_written = calloc(FP_PIPELINE_WRITTEN_SLOTS, sizeof(*pl->pl_written))) ||
	    (o->po_state_dir && !(pl->pl_state_dir = strdup(o->po_state_dir)))) {
		free(pl->pl_written);
		free(pl);
		return -ENOMEM;
	}
	pl->pl_resolver = o->po_resolver;
	pl->pl_busy = FP_PIPELINE_BUSY;
	pl->pl_busy_bytes = FP_PIPELINE_BUSY_BYTES_DEFAULT;
	pl->pl_symbol_wait_ms = o->po_symbol_wait_ms;
	pthread_mutex_init(&pl->pl_lock, NULL);
	pthread_cond_init(&pl->pl_ready_cond, NULL);
	*out = pl;
	return 0;
}

int fp_pipeline_add_sink(struct fp_pipeline *pl, fp_sink_fn fn, void *arg)
{
	if (pl->pl_nsinks == FP_PIPELINE_MAX_SINKS)
		return -ENOSPC;
	pl->pl_sinks[pl->pl_nsinks++] = (struct pipeline_sink){ fn, arg };
	return 0;
}

void fp_pipeline_stats(struct fp_pipeline *pl, struct fp_pipeline_stats *st)
{
	pthread_mutex_lock(&pl->pl_lock);
	*st = pl->pl_stats;
	st->pp_queue_depth = pl->pl_count;
	st->pp_queued_bytes = pl->pl_bytes;
	pthread_mutex_unlock(&pl->pl_lock);
}

static void job_free(struct pipeline_job *j)
{
	if (!j)
		return;
	fp_profile_free(j->pj_profile);
	fp_hello_fini(&j->pj_hello);
	free(j);
}

/* ---- sequence numbers ---- */

/* written_slot: h's slot and its key in *host.  Called with pl_lock held. */
static struct written_slot *written_slot(struct fp_pipeline *pl, const struct fp_hello *h,
					 uint64_t *host)
{
	*host = fp_hash(h->fh_host, strlen(h->fh_host));
	return &pl->pl_written[(*host ^ h->fh_session * 0x9e3779b97f4a7c15ull) &
			       (FP_PIPELINE_WRITTEN_SLOTS - 1)];
}

/* written_note: seq of h's session is through the sinks.  Called with
 * pl_lock held. */
static void written_note(struct fp_pipeline *pl, const struct fp_hello *h, uint64_t seq)
{
	struct written_slot *w;
	uint64_t host;

	w = written_slot(pl, h, &host);
	if (w->ws_session != h->fh_session || w->ws_host != host)
		*w = (struct written_slot){ h->fh_session, host, seq };
	else if (seq > w->ws_seq)
		w->ws_seq = seq;
}

uint64_t fp_pipeline_written(struct fp_pipeline *pl, const struct fp_hello *h)
{
	struct written_slot *w;
	uint64_t host, seq = 0;

	pthread_mutex_lock(&pl->pl_lock);
	w = written_slot(pl, h, &host);
	if (w->ws_session == h->fh_session && w->ws_host == host)
		seq = w->ws_seq;
	pthread_mutex_unlock(&pl->pl_lock);
	return seq;
}

/* seq_path: DIR/sessions/HOST and DIR/sessions/HOST/SESSION, host being
 * the name fp_safe_name made of the host's (host_dir). */
static int seq_path(const char *state_dir, const char *host_dir, uint64_t session, char *dir,
		    size_t dlen, char *path, size_t plen)
{
	if ((size_t)snprintf(dir, dlen, "%s/sessions/%s", state_dir, host_dir) >= dlen ||
	    (size_t)snprintf(path, plen, "%s/%016" PRIx64, dir, session) >= plen)
		return -ENAMETOOLONG;
	return 0;
}

/* seq_read: the sequence number in the file name (relative to dirfd, or
 * AT_FDCWD), read as untrusted: a regular file (no symbolic link
 * followed) of at most SEQ_FILE_MAX bytes holding 1 to 20 decimal digits
 * and a newline, a value that fits in 64 bits.  0, -ENOENT, -EBADMSG
 * (anything else there), -EBUSY (it kept changing as it was read) or
 * another negative errno. */
static int seq_read(int dirfd, const char *name, uint64_t *seq)
{
	char buf[SEQ_FILE_MAX + 1];
	uint64_t v = 0;
	struct stat st;
	ssize_t n;
	size_t i;
	int fd, err;

	if ((fd = openat(dirfd, name, O_RDONLY | O_CLOEXEC | O_NOFOLLOW | O_NONBLOCK)) < 0)
		return errno == ELOOP ? -EBADMSG : -errno;
	if (fstat(fd, &st) < 0 || !S_ISREG(st.st_mode)) {
		close(fd);
		return -EBADMSG;
	}
	/* A worker may be rewriting the record as it is read (a session
	 * saying hello again with intervals queued): read until two reads
	 * agree, so that old and new digits are never taken mixed. */
	n = pread(fd, buf, sizeof(buf), 0);
	for (i = 0; n >= 0 && i < SEQ_READS; i++) {
		char again[sizeof(buf)];
		ssize_t m = pread(fd, again, sizeof(again), 0);

		if (m == n && !memcmp(buf, again, (size_t)n))
			break;
		memcpy(buf, again, sizeof(buf));
		n = m;
	}
	err = n < 0 ? -errno : 0;
	close(fd);
	if (err)
		return err;
	if (i == SEQ_READS)
		return -EBUSY;
	if (n < 2 || n > SEQ_FILE_MAX || buf[n - 1] != '\n')
		return -EBADMSG;
	for (i = 0; i < (size_t)n - 1; i++) {
		unsigned d = (unsigned)(buf[i] - '0');

		if (d > 9 || v > (UINT64_MAX - d) / 10)
			return -EBADMSG;
		v = v * 10 + d;
	}
	*seq = v;
	return 0;
}

/* seq_write: seq as the file at path, in place: a fixed-width record
 * (SEQ_FILE_MAX bytes, zero-padded) over the last one, so that storing
 * an interval makes no new inode and no deleted one, and the sync writes
 * one data block.  The directory is made on the first. */
static int seq_write(const char *dir, const char *path, uint64_t seq)
{
	char buf[SEQ_FILE_MAX + 1];
	ssize_t n;
	int fd, err = 0;

	snprintf(buf, sizeof(buf), "%020" PRIu64 "\n", seq);
	fd = open(path, O_WRONLY | O_CREAT | O_CLOEXEC | O_NOFOLLOW, 0644);
	if (fd < 0 && errno == ENOENT && !(err = fp_mkdirs(dir)))
		fd = open(path, O_WRONLY | O_CREAT | O_CLOEXEC | O_NOFOLLOW, 0644);
	if (fd < 0)
		return err ? err : -errno;
	if ((n = pwrite(fd, buf, SEQ_FILE_MAX, 0)) < 0)
		err = -errno;
	else if (n != SEQ_FILE_MAX)
		err = -EIO;
	else if (fdatasync(fd) < 0)
		err = -errno;
	if (close(fd) < 0 && !err)
		err = -errno;
	return err;
}

int fp_pipeline_last_seq(struct fp_pipeline *pl, const struct fp_hello *h, uint64_t *seq)
{
	char host[256], dir[4200], path[4300];
	uint64_t v = 0;

	if (!pl->pl_state_dir)
		return -ENOENT;
	fp_safe_name(h->fh_host, host, sizeof(host));
	if (seq_path(pl->pl_state_dir, host, h->fh_session, dir, sizeof(dir), path, sizeof(path)) ||
	    seq_read(AT_FDCWD, path, &v))
		return -ENOENT;
	*seq = v;
	pthread_mutex_lock(&pl->pl_lock);
	written_note(pl, h, v);
	pthread_mutex_unlock(&pl->pl_lock);
	return 0;
}

static int seq_store(struct fp_pipeline *pl, const struct fp_hello *h, uint64_t seq)
{
	char host[256], dir[4200], path[4300];
	int err;

	fp_safe_name(h->fh_host, host, sizeof(host));
	if ((err = seq_path(pl->pl_state_dir, host, h->fh_session, dir, sizeof(dir), path,
			    sizeof(path))))
		return err;
	return seq_write(dir, path, seq);
}

/* ---- sequence numbers of older symbolizers ---- */

/* migrate_host: the OLD_SEQ_PREFIX files in host (an open directory of
 * the output tree) moved to the state directory.  Counts in *moved and
 * *bad; the first bad one's name in bad_name. */
static void migrate_host(struct fp_pipeline *pl, DIR *host, const char *host_name, size_t *moved,
			 size_t *bad, char *bad_name, size_t blen)
{
	char safe[256], dir[4200], path[4300];
	size_t i, plen = strlen(OLD_SEQ_PREFIX);
	struct dirent *de;
	uint64_t session, seq, have;
	int err;

	fp_safe_name(host_name, safe, sizeof(safe));
	while ((de = readdir(host))) {
		if (strncmp(de->d_name, OLD_SEQ_PREFIX, plen) || strlen(de->d_name) != plen + 16)
			continue;
		for (i = 0, session = 0, err = 0; i < 16 && !err; i++) {
			char c = de->d_name[plen + i];

			err = isxdigit((unsigned char)c) ? 0 : -EBADMSG;
			session = session << 4 |
				  (uint64_t)(c <= '9' ? c - '0' : (c | 0x20) - 'a' + 10);
		}
		if (!err)
			err = seq_read(dirfd(host), de->d_name, &seq);
		if (!err &&
		    !(err = seq_path(pl->pl_state_dir, safe, session, dir, sizeof(dir), path,
				     sizeof(path))) &&
		    (seq_read(AT_FDCWD, path, &have) || have < seq))
			err = seq_write(dir, path, seq);
		if (!err && unlinkat(dirfd(host), de->d_name, 0) < 0)
			err = -errno;
		if (err) {
			if (!(*bad)++)
				snprintf(bad_name, blen, "%s/%s: %s", host_name, de->d_name,
					 strerror(-err));
			continue;
		}
		(*moved)++;
	}
}

int fp_pipeline_migrate(struct fp_pipeline *pl, const char *out_dir)
{
	char marker[4200], bad_name[600] = "";
	size_t moved = 0, bad = 0;
	struct dirent *de;
	DIR *out, *host;
	int fd, err;

	if (!pl->pl_state_dir)
		return 0;
	if ((size_t)snprintf(marker, sizeof(marker), "%s/sessions/" MIGRATED_MARKER,
			     pl->pl_state_dir) >= sizeof(marker))
		return -ENAMETOOLONG;
	if (access(marker, F_OK) == 0)
		return 0;
	if (!(out = opendir(out_dir)))
		return errno == ENOENT ? 0 : -errno;
	while ((de = readdir(out))) {
		if (!strcmp(de->d_name, ".") || !strcmp(de->d_name, ".."))
			continue;
		/* A host's directory, never one a symbolic link points to. */
		fd = openat(dirfd(out), de->d_name,
			    O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
		if (fd < 0)
			continue;
		if (!(host = fdopendir(fd))) {
			close(fd);
			continue;
		}
		migrate_host(pl, host, de->d_name, &moved, &bad, bad_name, sizeof(bad_name));
		closedir(host);
	}
	closedir(out);
	if (moved)
		fp_info("moved the last interval of %zu sessions from %s/HOST/" OLD_SEQ_PREFIX
			"* (older symbolizers) to %s/sessions",
			moved, out_dir, pl->pl_state_dir);
	if (bad)
		fp_warnx("left %zu " OLD_SEQ_PREFIX "* files of older symbolizers in %s unread, "
			 "the first %s",
			 bad, out_dir, bad_name);
	/* The marker is a directory: fp_mkdirs makes sessions/ with it. */
	if ((err = fp_mkdirs(marker)))
		fp_warnx("cannot note in %s that they were moved: %s", marker, strerror(-err));
	return err;
}

/* ---- symbols ---- */

/* waiting_for: whether a frame of p that is not resolved yet names a
 * build-ID a resolver worker is busy with. */
static int waiting_for(struct fp_pipeline *pl, const struct fp_profile *p)
{
	uint8_t *asked;
	size_t i;
	int busy = 0;

	if (!pl->pl_resolver || !pl->pl_symbol_wait_ms)
		return 0;
	if (p->pr_offcpu && waiting_for(pl, p->pr_offcpu))
		return 1;
	if (!p->pr_nmappings || !(asked = calloc(p->pr_nmappings, 1)))
		return 0;
	for (i = 0; i < p->pr_nframes && !busy; i++) {
		const struct fp_pframe *f = &p->pr_frames[i];
		const struct fp_pmapping *m;

		if (f->pf_function || f->pf_kind != FP_FRAME_USER ||
		    f->pf_mapping == FP_INDEX_NONE || asked[f->pf_mapping])
			continue;
		asked[f->pf_mapping] = 1;
		m = &p->pr_mappings[f->pf_mapping];
		busy = m->pm_kind == FP_MAP_USER &&
		       fp_resolver_busy(pl->pl_resolver, &m->pm_build_id);
	}
	free(asked);
	return busy;
}

static int unresolved(const struct fp_profile *p)
{
	size_t i;

	for (i = 0; i < p->pr_nframes; i++)
		if (!p->pr_frames[i].pf_function && p->pr_frames[i].pf_kind == FP_FRAME_USER &&
		    p->pr_frames[i].pf_mapping != FP_INDEX_NONE)
			return 1;
	return 0;
}

/* finish: resolve what came in meanwhile, run the sinks, store the
 * sequence number, free j. */
static void finish(struct fp_pipeline *pl, struct pipeline_job *j)
{
	uint64_t errors = 0, state_errors = 0;
	size_t i;
	int err, trim;

	for (struct fp_profile *p = j->pj_profile; p; p = p->pr_offcpu)
		if (pl->pl_resolver && unresolved(p) &&
		    (err = fp_session_resolve_again(p, pl->pl_resolver)))
			fp_warnx("cannot resolve a profile of %s again: %s", j->pj_hello.fh_host,
				 strerror(-err));
	for (i = 0; i < pl->pl_nsinks; i++)
		if (pl->pl_sinks[i].ps_fn(pl->pl_sinks[i].ps_arg, j->pj_profile, &j->pj_hello,
					  j->pj_seq))
			errors++;
	if (pl->pl_state_dir && (err = seq_store(pl, &j->pj_hello, j->pj_seq))) {
		fp_warnx("cannot store the interval of session %016" PRIx64 " in %s: %s",
			 j->pj_hello.fh_session, pl->pl_state_dir, strerror(-err));
		state_errors++;
	}
	pthread_mutex_lock(&pl->pl_lock);
	written_note(pl, &j->pj_hello, j->pj_seq);
	pl->pl_stats.pp_profiles++;
	pl->pl_stats.pp_sink_errors += errors;
	pl->pl_stats.pp_state_errors += state_errors;
	if (pl->pl_started) {
		pl->pl_count--;
		pl->pl_bytes -= j->pj_bytes;
	}
	/* A backlog drained: give its memory back (glibc keeps freed memory
	 * in its arenas, so the process would stay as large as its deepest
	 * backlog: 137 MB after 1,330 queued profiles drained, 74 MB before). */
	trim = pl->pl_count == 0 && pl->pl_deepest >= TRIM_AFTER_DEPTH;
	if (trim) {
		pl->pl_deepest = 0;
		pl->pl_stats.pp_trims++;
	}
	pthread_mutex_unlock(&pl->pl_lock);
	job_free(j);
	if (trim)
		malloc_trim(0);
}

/* wait_inline: without workers, wait for each busy build-ID in turn. */
static void wait_inline(struct fp_pipeline *pl, struct pipeline_job *j)
{
	const struct fp_profile *p = j->pj_profile;
	int timed_out = 0;
	size_t i;

	for (i = 0; i < p->pr_nmappings && !timed_out; i++)
		if (p->pr_mappings[i].pm_kind == FP_MAP_USER)
			timed_out = fp_resolver_wait(pl->pl_resolver,
						     &p->pr_mappings[i].pm_build_id,
						     j->pj_deadline_ns) != 0;
	pthread_mutex_lock(&pl->pl_lock);
	pl->pl_stats.pp_waited++;
	pl->pl_stats.pp_wait_timeouts += timed_out;
	pthread_mutex_unlock(&pl->pl_lock);
}

int fp_pipeline_busy(struct fp_pipeline *pl)
{
	int busy;

	pthread_mutex_lock(&pl->pl_lock);
	busy = pl->pl_started && (pl->pl_count >= pl->pl_busy || pl->pl_bytes >= pl->pl_busy_bytes);
	pthread_mutex_unlock(&pl->pl_lock);
	return busy;
}

void fp_pipeline_set_busy(struct fp_pipeline *pl, size_t n, size_t bytes)
{
	pthread_mutex_lock(&pl->pl_lock);
	pl->pl_busy = n;
	pl->pl_busy_bytes = bytes;
	pthread_mutex_unlock(&pl->pl_lock);
}

/* worker_of: the worker that owns hello's host.  By host, not by
 * session: a host's files and sequence numbers are in directories of
 * its own, which then only one thread writes. */
static struct pipeline_worker *worker_of(struct fp_pipeline *pl, const struct fp_hello *hello)
{
	return &pl->pl_workers[fp_hash(hello->fh_host, strlen(hello->fh_host)) % pl->pl_nworkers];
}

int fp_pipeline_submit(struct fp_pipeline *pl, struct fp_profile *p, const struct fp_hello *hello,
		       uint64_t seq)
{
	struct pipeline_job *j = calloc(1, sizeof(*j));
	struct pipeline_worker *w;
	int err = 0;

	if (!j || fp_hello_copy(&j->pj_hello, hello)) {
		free(j);
		fp_profile_free(p);
		return -ENOMEM;
	}
	j->pj_profile = p;
	j->pj_seq = seq;
	j->pj_deadline_ns = fp_now_ns(CLOCK_MONOTONIC) + (uint64_t)pl->pl_symbol_wait_ms * 1000000;
	if (!pl->pl_started) {
		if (waiting_for(pl, p))
			wait_inline(pl, j);
		finish(pl, j);
		return 0;
	}
	/* Measured outside the lock: it walks the whole profile. */
	j->pj_bytes = fp_profile_bytes(p) + malloc_usable_size(j);
	w = worker_of(pl, hello);
	pthread_mutex_lock(&pl->pl_lock);
	if (pl->pl_count >= FP_PIPELINE_QUEUE) {
		pl->pl_stats.pp_dropped++;
		err = -EAGAIN;
	} else {
		if (w->pw_tail)
			w->pw_tail->pj_next = j;
		else
			w->pw_head = j;
		w->pw_tail = j;
		pl->pl_count++;
		pl->pl_bytes += j->pj_bytes;
		if (pl->pl_count > pl->pl_deepest)
			pl->pl_deepest = pl->pl_count;
		pthread_cond_signal(&w->pw_wake);
		j = NULL;
	}
	pthread_mutex_unlock(&pl->pl_lock);
	job_free(j);
	return err;
}

/* behind: whether a job of j's session is set aside before j in the list
 * at head (a device's intervals reach the sinks in order). */
static int behind(const struct pipeline_job *head, const struct pipeline_job *j)
{
	for (; head && head != j; head = head->pj_next)
		if (head->pj_hello.fh_session == j->pj_hello.fh_session)
			return 1;
	return 0;
}

/* worker_main: a sink worker.  The profiles set aside for their symbols
 * (parked, oldest first) are its own: no other thread sees that list. */
static void *worker_main(void *arg)
{
	struct pipeline_worker *w = arg;
	struct fp_pipeline *pl = w->pw_pipeline;
	struct pipeline_job *parked = NULL, **tail = &parked, *in, *j, **pp;
	int stop, nice;
	id_t tid = (id_t)gettid();

	/* Replies first: on a loaded machine the workers' encoding and
	 * compression took the CPU the listener's threads needed to answer
	 * (reply p99 7.3 s with a busy loop on the side), and a profile may
	 * wait, a reply may not.  A thread's nice is its own on Linux; the
	 * request threads keep the process's. */
	if (pthread_setschedparam(pthread_self(), SCHED_BATCH, &(struct sched_param){ 0 }))
		fp_warnx("sink worker: cannot use SCHED_BATCH");
	errno = 0;
	nice = getpriority(PRIO_PROCESS, tid);
	if (!errno &&
	    setpriority(PRIO_PROCESS, tid, nice + WORKER_NICE > 19 ? 19 : nice + WORKER_NICE))
		fp_warn("sink worker: setpriority");
	pthread_mutex_lock(&pl->pl_lock);
	pl->pl_ready++;
	pthread_cond_broadcast(&pl->pl_ready_cond);
	pthread_mutex_unlock(&pl->pl_lock);
	for (;;) {
		pthread_mutex_lock(&pl->pl_lock);
		if (parked && !w->pw_head && !pl->pl_stop) {
			uint64_t at = fp_now_ns(CLOCK_REALTIME) + PARKED_POLL_MS * 1000000ull;
			struct timespec ts = { (time_t)(at / 1000000000ull),
					       (long)(at % 1000000000ull) };
			pthread_cond_timedwait(&w->pw_wake, &pl->pl_lock, &ts);
		}
		while (!parked && !w->pw_head && !pl->pl_stop)
			pthread_cond_wait(&w->pw_wake, &pl->pl_lock);
		in = w->pw_head;
		w->pw_head = w->pw_tail = NULL;
		stop = pl->pl_stop;
		pthread_mutex_unlock(&pl->pl_lock);

		/* New profiles: set aside when their symbols are on the way,
		 * or when an earlier one of their session is. */
		while ((j = in)) {
			in = j->pj_next;
			j->pj_next = NULL;
			if (!stop && (waiting_for(pl, j->pj_profile) || behind(parked, j))) {
				pthread_mutex_lock(&pl->pl_lock);
				pl->pl_stats.pp_waited++;
				pthread_mutex_unlock(&pl->pl_lock);
				*tail = j;
				tail = &j->pj_next;
			} else {
				finish(pl, j);
			}
		}
		/* Set aside ones, oldest first, once their symbols are there
		 * or their time is up. */
		for (pp = &parked; (j = *pp);) {
			int late = fp_now_ns(CLOCK_MONOTONIC) >= j->pj_deadline_ns;

			if (!stop && !late &&
			    (waiting_for(pl, j->pj_profile) || behind(parked, j))) {
				pp = &j->pj_next;
				continue;
			}
			*pp = j->pj_next;
			if (late && waiting_for(pl, j->pj_profile)) {
				pthread_mutex_lock(&pl->pl_lock);
				pl->pl_stats.pp_wait_timeouts++;
				pthread_mutex_unlock(&pl->pl_lock);
			}
			finish(pl, j);
		}
		for (tail = &parked; *tail; tail = &(*tail)->pj_next)
			;
		if (stop && !parked)
			break;
	}
	return NULL;
}

/* stop_workers: the running workers run the sinks of what they hold, and
 * end. */
static void stop_workers(struct fp_pipeline *pl)
{
	size_t i;

	pthread_mutex_lock(&pl->pl_lock);
	pl->pl_stop = 1;
	for (i = 0; i < pl->pl_nworkers; i++)
		pthread_cond_signal(&pl->pl_workers[i].pw_wake);
	pthread_mutex_unlock(&pl->pl_lock);
	for (i = 0; i < pl->pl_nworkers; i++) {
		pthread_join(pl->pl_workers[i].pw_thread, NULL);
		pthread_cond_destroy(&pl->pl_workers[i].pw_wake);
	}
	pl->pl_nworkers = 0;
}

int fp_pipeline_start(struct fp_pipeline *pl, uint32_t symbol_wait_ms)
{
	struct pipeline_worker *w;
	int err;

	if (pl->pl_started)
		return -EINVAL;
	pl->pl_symbol_wait_ms = symbol_wait_ms;
	pl->pl_started = 1;
	for (; pl->pl_nworkers < FP_PIPELINE_WORKERS; pl->pl_nworkers++) {
		w = &pl->pl_workers[pl->pl_nworkers];
		w->pw_pipeline = pl;
		pthread_cond_init(&w->pw_wake, NULL);
		if ((err = pthread_create(&w->pw_thread, NULL, worker_main, w))) {
			pthread_cond_destroy(&w->pw_wake);
			stop_workers(pl);
			pl->pl_stop = 0;
			pl->pl_started = 0;
			return -err;
		}
	}
	/* Started means running: a thread that is still starting allocates,
	 * and a fork then (an isolated parse) copies the allocator's lock
	 * held, which ASan's runtime does not take across fork. */
	pthread_mutex_lock(&pl->pl_lock);
	while (pl->pl_ready < pl->pl_nworkers)
		pthread_cond_wait(&pl->pl_ready_cond, &pl->pl_lock);
	pthread_mutex_unlock(&pl->pl_lock);
	return 0;
}

void fp_pipeline_free(struct fp_pipeline *pl)
{
	if (!pl)
		return;
	stop_workers(pl);
	pthread_mutex_destroy(&pl->pl_lock);
	pthread_cond_destroy(&pl->pl_ready_cond);
	free(pl->pl_state_dir);
	free(pl->pl_written);
	free(pl);
}
