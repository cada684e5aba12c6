/* spool.h: a bounded first-in first-out queue of opaque records on disk,
 * one file per record, that survives restarts.
 *
 * - A record is written to a temporary name in the directory and renamed
 *   into place (DIR/SEQ.req, SEQ zero-padded to 20 digits), so a reader
 *   never sees half of one; each file carries a header (magic, length) and a
 *   CRC-32 of the record, so one cut short or damaged in any other way is
 *   recognised, counted and deleted instead of being handed out.
 * - fp_spool_open takes over what an earlier process left in DIR: its
 *   records keep their order and new ones come after them; left-over
 *   temporary files are deleted; files of other names are left alone.  An
 *   flock() on DIR/.lock keeps a second process out.
 * - The files together stay within max_bytes: adding a record drops
 *   records (counted) until it fits, each time the oldest of the owner
 *   (a host) that holds the most bytes, the new record counted as its
 *   owner's.  So a host that floods drops its own records, and the
 *   others keep theirs while they hold less than it does; with one owner
 *   this is oldest first.  Each file names its owner (its first 1,024
 *   bytes), so after a restart the records found at open still belong to
 *   their hosts; those written before owners were kept on disk belong to
 *   no one, with records of no name.  The record fp_spool_peek handed
 *   out and that is not yet released is never dropped.
 * - Thread-safe: one thread may add while another peeks and releases.
 */
#ifndef FP_SPOOL_H
#define FP_SPOOL_H

#include <stddef.h>
#include <stdint.h>
#include <sys/uio.h>

struct fp_spool;

struct fp_spool_stats {
	uint64_t ss_files, ss_bytes; /* in the spool now */
	uint64_t ss_added;           /* records written */
	uint64_t ss_dropped;         /* oldest records dropped to stay within the bound */
	uint64_t ss_refused;         /* records not written: larger than the bound, or an
	                                   I/O error */
	uint64_t ss_corrupt;         /* files found damaged or cut short, deleted */
};

/* fp_spool_open: DIR is created if needed (with its parents).  max_bytes
 * > 0.  0, -EBUSY (another process has DIR), -ENOMEM or another negative
 * errno. */
int fp_spool_open(struct fp_spool **sp, const char *dir, uint64_t max_bytes);
void fp_spool_close(struct fp_spool *sp);

/* fp_spool_put: append one record of owner (a host name; NULL or "" for
 * none), the concatenation of iov[0, iovcnt).  0, -EFBIG (larger than the
 * bound by itself), -ENOMEM, or a negative errno from writing it; in
 * every failure case ss_refused is counted and nothing is left behind. */
int fp_spool_put(struct fp_spool *sp, const char *owner, const struct iovec *iov, int iovcnt);

/* fp_spool_peek: the oldest intact record, malloc'd into *data (free it),
 * its id, and when it was written (its file's mtime, seconds since the
 * epoch: kept across restarts); damaged files met on the way are deleted
 * and counted.  The
 * record stays in the spool, and is not dropped, until fp_spool_release.
 * 0, -ENOENT (empty; also when the only record is already handed out),
 * -ENOMEM. */
int fp_spool_peek(struct fp_spool *sp, uint64_t *id, void **data, size_t *len, int64_t *written);

/* fp_spool_release: done with a peeked record; remove deletes it, else it
 * stays, to be peeked again. */
void fp_spool_release(struct fp_spool *sp, uint64_t id, int remove);

/* fp_spool_count: records in the spool now. */
size_t fp_spool_count(struct fp_spool *sp);

void fp_spool_stats(struct fp_spool *sp, struct fp_spool_stats *st);

#endif
