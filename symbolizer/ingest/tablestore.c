/* tablestore.c: the resolver's unwind tables in memory, by build-ID, with
 * references; see tablestore.h. */
#include "tablestore.h"
#include "cli.h"
#include "intern.h"
#include "unwind_table.h"
#include "vec.h"

#include <errno.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>

struct fp_tablestore {
	struct fp_resolver *ts_resolver;
	size_t ts_max_bytes;
	pthread_mutex_t ts_lock;
	/* Under ts_lock: build-ID -> ts_slots index; a slot is NULL once its
	 * table was evicted (interned keys are never removed). */
	struct fp_intern *ts_ids;
	struct fp_stored_table **ts_slots;
	size_t ts_slots_cap;
	uint64_t ts_tick;
	size_t ts_unreferenced; /* bytes of the tables in slots with no reference */
	struct fp_tablestore_stats ts_stats;
};

int fp_tablestore_alloc(struct fp_tablestore **out, struct fp_resolver *r, size_t max_bytes)
{
	struct fp_tablestore *ts = calloc(1, sizeof(*ts));

	if (!ts || fp_intern_alloc(&ts->ts_ids)) {
		free(ts);
		return -ENOMEM;
	}
	ts->ts_resolver = r;
	ts->ts_max_bytes = max_bytes ? max_bytes : FP_TABLESTORE_MAX_BYTES;
	pthread_mutex_init(&ts->ts_lock, NULL);
	*out = ts;
	return 0;
}

static void table_free(struct fp_stored_table *t)
{
	free((void *)t->st_blob);
	free(t);
}

void fp_tablestore_free(struct fp_tablestore *ts)
{
	size_t i;

	if (!ts)
		return;
	for (i = 0; i < fp_intern_count(ts->ts_ids) && i < ts->ts_slots_cap; i++)
		if (ts->ts_slots[i])
			table_free(ts->ts_slots[i]);
	free(ts->ts_slots);
	fp_intern_free(ts->ts_ids);
	pthread_mutex_destroy(&ts->ts_lock);
	free(ts);
}

/* unlink_slot: take slot i's table out of the index (under ts_lock); it is
 * freed now when nothing refers to it, else with its last reference. */
static void unlink_slot(struct fp_tablestore *ts, uint32_t i)
{
	struct fp_stored_table *t = ts->ts_slots[i];

	ts->ts_slots[i] = NULL;
	ts->ts_stats.ts_bytes -= t->st_len;
	ts->ts_stats.ts_tables--;
	if (t->st_refs) {
		t->st_replaced = 1;
		return;
	}
	ts->ts_unreferenced -= t->st_len;
	table_free(t);
}

/* evict: the least recently asked for of the tables nobody refers to,
 * until those fit the bound (under ts_lock). */
static void evict(struct fp_tablestore *ts)
{
	size_t i, n = fp_intern_count(ts->ts_ids);

	while (ts->ts_unreferenced > ts->ts_max_bytes) {
		uint32_t victim = UINT32_MAX;

		for (i = 0; i < n && i < ts->ts_slots_cap; i++) {
			struct fp_stored_table *t = ts->ts_slots[i];
			if (t && !t->st_refs &&
			    (victim == UINT32_MAX || t->st_used < ts->ts_slots[victim]->st_used))
				victim = (uint32_t)i;
		}
		if (victim == UINT32_MAX)
			return;
		unlink_slot(ts, victim);
		ts->ts_stats.ts_evicted++;
	}
}

/* take_ref: one more reference to t (under ts_lock). */
static void take_ref(struct fp_tablestore *ts, struct fp_stored_table *t)
{
	if (!t->st_refs++ && !t->st_replaced)
		ts->ts_unreferenced -= t->st_len;
	t->st_used = ++ts->ts_tick;
}

/* lookup: id's table when it is in memory and fresh, referenced; *stale
 * says whether one is there but due to be read again. */
static struct fp_stored_table *lookup(struct fp_tablestore *ts, const struct fp_build_id *id,
				      uint64_t now, int *stale)
{
	struct fp_stored_table *t;
	uint32_t i;

	*stale = 0;
	if (fp_intern_find(ts->ts_ids, id->fb_data, id->fb_len, &i) || i >= ts->ts_slots_cap ||
	    !(t = ts->ts_slots[i]))
		return NULL;
	if (now - t->st_read_ms >= FP_TABLESTORE_RECHECK_S * 1000ull) {
		*stale = 1;
		t->st_read_ms = now; /* one reader at a time reads it again */
		return NULL;
	}
	take_ref(ts, t);
	ts->ts_stats.ts_hits++;
	return t;
}

/* insert: t (read just now, one reference for the caller) into id's slot;
 * a table there with the same bytes is kept instead and t freed.  Under
 * ts_lock.  The table referenced, or NULL on ENOMEM. */
static struct fp_stored_table *insert(struct fp_tablestore *ts, struct fp_stored_table *t)
{
	const struct fp_build_id *id = &t->st_build_id;
	struct fp_stored_table *old;
	uint32_t i;

	if (fp_intern_get(ts->ts_ids, id->fb_data, id->fb_len, &i, NULL) ||
	    fp_vec_reserve_zeroed(&ts->ts_slots, &ts->ts_slots_cap, (size_t)i + 1,
				  sizeof(*ts->ts_slots))) {
		table_free(t);
		return NULL;
	}
	if ((old = ts->ts_slots[i])) {
		if (old->st_id == t->st_id && old->st_len == t->st_len) {
			table_free(t);
			old->st_read_ms = fp_mono_ms();
			take_ref(ts, old);
			return old;
		}
		unlink_slot(ts, i);
		ts->ts_stats.ts_replaced++;
	}
	ts->ts_slots[i] = t;
	t->st_refs = 1;
	t->st_used = ++ts->ts_tick;
	ts->ts_stats.ts_bytes += t->st_len;
	ts->ts_stats.ts_tables++;
	evict(ts);
	return t;
}

int fp_tablestore_get(struct fp_tablestore *ts, const struct fp_build_id *id,
		      struct fp_stored_table **out)
{
	struct fp_stored_table *t;
	void *blob = NULL;
	size_t len = 0;
	int stale, err;

	pthread_mutex_lock(&ts->ts_lock);
	t = lookup(ts, id, fp_mono_ms(), &stale);
	pthread_mutex_unlock(&ts->ts_lock);
	if (t) {
		*out = t;
		return 0;
	}
	/* Read (again) outside the lock: the cache's read copies the table. */
	err = fp_resolver_unwind(ts->ts_resolver, id, &blob, &len);
	if (err && stale) {
		/* Gone or being compiled again: the copy in memory goes on. */
		pthread_mutex_lock(&ts->ts_lock);
		t = lookup(ts, id, fp_mono_ms(), &stale);
		pthread_mutex_unlock(&ts->ts_lock);
		if (t) {
			*out = t;
			return 0;
		}
	}
	if (err)
		return err;
	if (!(t = calloc(1, sizeof(*t)))) {
		free(blob);
		return -ENOMEM;
	}
	*t = (struct fp_stored_table){ .st_build_id = *id,
				       .st_blob = blob,
				       .st_len = len,
				       .st_id = fp_unwind_table_id(id, blob, len),
				       .st_needed = fp_unwind_table_needed(blob, len),
				       .st_read_ms = fp_mono_ms(),
				       .st_store = ts };
	pthread_mutex_lock(&ts->ts_lock);
	ts->ts_stats.ts_reads++;
	t = insert(ts, t);
	pthread_mutex_unlock(&ts->ts_lock);
	if (!t)
		return -ENOMEM;
	*out = t;
	return 0;
}

void fp_tablestore_ref(struct fp_stored_table *t)
{
	struct fp_tablestore *ts = t->st_store;

	pthread_mutex_lock(&ts->ts_lock);
	t->st_refs++;
	pthread_mutex_unlock(&ts->ts_lock);
}

void fp_tablestore_put(struct fp_stored_table *t)
{
	struct fp_tablestore *ts;
	int gone = 0;

	if (!t)
		return;
	ts = t->st_store;
	pthread_mutex_lock(&ts->ts_lock);
	if (--t->st_refs == 0) {
		if (t->st_replaced) {
			gone = 1;
		} else {
			ts->ts_unreferenced += t->st_len;
			evict(ts);
		}
	}
	pthread_mutex_unlock(&ts->ts_lock);
	if (gone)
		table_free(t);
}

void fp_tablestore_release(void *t)
{
	fp_tablestore_put(t);
}

void fp_tablestore_stats(struct fp_tablestore *ts, struct fp_tablestore_stats *st)
{
	pthread_mutex_lock(&ts->ts_lock);
	*st = ts->ts_stats;
	pthread_mutex_unlock(&ts->ts_lock);
}
