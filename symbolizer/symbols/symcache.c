/* symcache.c: symbol tables in LMDB, one value per build-ID.
 *
 * The key is the build-ID's raw bytes, the value a symtab.h blob.  Readers
 * open the blob in place, inside LMDB's map: no copy, and it stays valid
 * for as long as their read transaction.  Environments are opened with
 * MDB_NOTLS so that a read transaction is not tied to the thread that
 * began it.  As with any LMDB environment, a process must open a given
 * directory only once at a time.
 */
#include "symcache.h"
#include "unwind_table.h"

#include <endian.h>
#include <errno.h>
#include <lmdb.h>
#include <limits.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

/* Address space, not disk: the data file only grows as tables are added.
 * Room for millions of build-IDs. */
#define SYMCACHE_MAP_SIZE (64ull << 30)

/* Every open read transaction holds a reader slot until it ends, whatever
 * thread it is on; the default (126) is low for a threaded server. */
#define SYMCACHE_MAX_READERS 1024

/* Named databases besides the main one (symbol tables).  Their names are
 * keys of the main database, which build-IDs (raw bytes) never equal in
 * practice; one that did would fail to store with -EINVAL. */
#define SYMCACHE_MAX_DBS 4

struct fp_symcache {
	MDB_env *sc_env;
	MDB_dbi sc_dbi;
	MDB_dbi sc_unwind_dbi;
};

struct fp_symcache_txn {
	MDB_txn *tx_txn;
	MDB_dbi tx_dbi;
};

static int mdb_to_errno(int rc)
{
	switch (rc) {
	case MDB_SUCCESS:
		return 0;
	case MDB_NOTFOUND:
		return -ENOENT;
	case MDB_MAP_FULL:
	case MDB_TXN_FULL:
		return -ENOSPC;
	case MDB_READERS_FULL:
		return -EAGAIN;
	case MDB_BAD_VALSIZE:
		return -EINVAL;
	case MDB_INVALID:
	case MDB_VERSION_MISMATCH:
	case MDB_INCOMPATIBLE:
		return -EINVAL; /* the directory holds something else */
	default:
		/* LMDB passes system errors through as positive errnos. */
		return rc > 0 ? -rc : -EIO;
	}
}

/* mkdir_p: create dir and its missing parents. */
static int mkdir_p(const char *dir, mode_t mode)
{
	char path[PATH_MAX];
	size_t len = strlen(dir);

	if (len == 0 || len >= sizeof(path))
		return -ENAMETOOLONG;
	memcpy(path, dir, len + 1);
	for (char *p = path + 1; *p; p++) {
		if (*p != '/')
			continue;
		*p = '\0';
		if (mkdir(path, mode) != 0 && errno != EEXIST)
			return -errno;
		*p = '/';
	}
	if (mkdir(path, mode) != 0 && errno != EEXIST)
		return -errno;
	return 0;
}

static int make_key(const struct fp_build_id *id, MDB_val *key)
{
	if (!id || id->fb_len == 0 || id->fb_len > FP_BUILD_ID_MAX)
		return -EINVAL;
	key->mv_size = id->fb_len;
	key->mv_data = (void *)id->fb_data;
	return 0;
}

/* The unwind databases of earlier revisions (symcache.h), dropped when
 * the cache opens: their tables would be compiled again anyway. */
static const char *const old_unwind_dbs[] = { "unwind" };

/* drop_old_unwind: drop the databases of old_unwind_dbs that txn's
 * environment holds.  0 or a negative errno. */
static int drop_old_unwind(MDB_txn *txn)
{
	MDB_dbi dbi;
	size_t i;
	int rc;

	for (i = 0; i < sizeof(old_unwind_dbs) / sizeof(old_unwind_dbs[0]); i++) {
		rc = mdb_dbi_open(txn, old_unwind_dbs[i], 0, &dbi);
		if (rc == MDB_NOTFOUND)
			continue;
		if (rc == 0)
			rc = mdb_drop(txn, dbi, 1);
		if (rc)
			return mdb_to_errno(rc);
	}
	return 0;
}

int fp_symcache_open(struct fp_symcache **c, const char *dir)
{
	struct fp_symcache *nc;
	MDB_txn *txn;
	int err;

	err = mkdir_p(dir, 0755);
	if (err)
		return err;
	nc = calloc(1, sizeof(*nc));
	if (!nc)
		return -ENOMEM;
	err = mdb_to_errno(mdb_env_create(&nc->sc_env));
	if (err)
		goto fail_free;
	err = mdb_to_errno(mdb_env_set_mapsize(nc->sc_env, SYMCACHE_MAP_SIZE));
	if (!err)
		err = mdb_to_errno(mdb_env_set_maxreaders(nc->sc_env, SYMCACHE_MAX_READERS));
	if (!err)
		err = mdb_to_errno(mdb_env_set_maxdbs(nc->sc_env, SYMCACHE_MAX_DBS));
	if (!err)
		err = mdb_to_errno(mdb_env_open(nc->sc_env, dir, MDB_NOTLS, 0644));
	if (err)
		goto fail_env;

	/* The handles of the DBs, opened once and shared by all txns. */
	err = mdb_to_errno(mdb_txn_begin(nc->sc_env, NULL, 0, &txn));
	if (err)
		goto fail_env;
	err = mdb_to_errno(mdb_dbi_open(txn, NULL, 0, &nc->sc_dbi));
	if (!err)
		err = drop_old_unwind(txn);
	if (!err)
		err = mdb_to_errno(
			mdb_dbi_open(txn, FP_SYMCACHE_UNWIND_DB, MDB_CREATE, &nc->sc_unwind_dbi));
	if (err) {
		mdb_txn_abort(txn);
		goto fail_env;
	}
	err = mdb_to_errno(mdb_txn_commit(txn));
	if (err)
		goto fail_env;
	*c = nc;
	return 0;

fail_env:
	mdb_env_close(nc->sc_env);
fail_free:
	free(nc);
	return err;
}

void fp_symcache_close(struct fp_symcache *c)
{
	if (!c)
		return;
	mdb_env_close(c->sc_env);
	free(c);
}

/* put: store blob under key in dbi, in a transaction of its own. */
static int put(struct fp_symcache *c, MDB_dbi dbi, MDB_val *key, const void *blob, size_t len)
{
	MDB_val val;
	MDB_txn *txn;
	int err;

	val.mv_size = len;
	val.mv_data = (void *)blob;

	err = mdb_to_errno(mdb_txn_begin(c->sc_env, NULL, 0, &txn));
	if (err)
		return err;
	err = mdb_to_errno(mdb_put(txn, dbi, key, &val, 0));
	if (err) {
		mdb_txn_abort(txn);
		return err;
	}
	return mdb_to_errno(mdb_txn_commit(txn));
}

int fp_symcache_put(struct fp_symcache *c, const struct fp_build_id *id, const void *blob,
		    size_t len)
{
	struct fp_symtab check;
	MDB_val key;
	int err;

	err = make_key(id, &key);
	if (err)
		return err;
	/* Readers trust nothing they read, but storing garbage would only
	 * turn a caller's bug into a later -EINVAL far from its cause. */
	if (fp_symtab_open(&check, blob, len) != 0)
		return -EINVAL;
	return put(c, c->sc_dbi, &key, blob, len);
}

int fp_symcache_put_unwind(struct fp_symcache *c, const struct fp_build_id *id, const void *blob,
			   size_t len)
{
	MDB_val key;
	int err;

	err = make_key(id, &key);
	if (err)
		return err;
	if (fp_unwind_table_check(blob, len) != 0)
		return -EINVAL;
	return put(c, c->sc_unwind_dbi, &key, blob, len);
}

int fp_symcache_get_unwind(struct fp_symcache *c, const struct fp_build_id *id, void **blob,
			   size_t *len)
{
	const struct fp_unwind_header *h;
	MDB_val key, val;
	MDB_txn *txn;
	void *copy = NULL;
	int err;

	err = make_key(id, &key);
	if (err)
		return err;
	err = mdb_to_errno(mdb_txn_begin(c->sc_env, NULL, MDB_RDONLY, &txn));
	if (err)
		return err;
	err = mdb_to_errno(mdb_get(txn, c->sc_unwind_dbi, &key, &val));
	if (err)
		goto out;
	h = val.mv_data;
	/* A table of another format version is not corrupt, just stale. */
	if (val.mv_size >= sizeof(*h) && !memcmp(h->uh_magic, FP_UNWIND_MAGIC, 4) &&
	    h->uh_version != FP_UNWIND_VERSION) {
		err = -ENOENT;
		goto out;
	}
	if (fp_unwind_table_check(val.mv_data, val.mv_size)) {
		err = -EINVAL;
		goto out;
	}
	copy = malloc(val.mv_size);
	if (!copy) {
		err = -ENOMEM;
		goto out;
	}
	memcpy(copy, val.mv_data, val.mv_size);
	*blob = copy;
	*len = val.mv_size;
out:
	mdb_txn_abort(txn);
	return err;
}

int fp_symcache_begin(struct fp_symcache *c, struct fp_symcache_txn **txn)
{
	struct fp_symcache_txn *t;
	int err;

	t = calloc(1, sizeof(*t));
	if (!t)
		return -ENOMEM;
	err = mdb_to_errno(mdb_txn_begin(c->sc_env, NULL, MDB_RDONLY, &t->tx_txn));
	if (err) {
		free(t);
		return err;
	}
	t->tx_dbi = c->sc_dbi;
	*txn = t;
	return 0;
}

void fp_symcache_end(struct fp_symcache_txn *txn)
{
	if (!txn)
		return;
	mdb_txn_abort(txn->tx_txn);
	free(txn);
}

int fp_symcache_get(struct fp_symcache_txn *txn, const struct fp_build_id *id, struct fp_symtab *t)
{
	struct fp_symtab opened;
	MDB_val key, val;
	uint32_t version;
	int err;

	err = make_key(id, &key);
	if (err)
		return err;
	err = mdb_to_errno(mdb_get(txn->tx_txn, txn->tx_dbi, &key, &val));
	if (err)
		return err;
	/* A table of another format version is not corrupt, just stale. */
	if (val.mv_size >= 8 && !memcmp(val.mv_data, FP_SYMTAB_MAGIC, 4)) {
		memcpy(&version, (const char *)val.mv_data + 4, sizeof(version));
		if (le32toh(version) != FP_SYMTAB_VERSION)
			return -ENOENT;
	}
	if (fp_symtab_open(&opened, val.mv_data, val.mv_size) != 0)
		return -EINVAL;
	*t = opened;
	return 0;
}
