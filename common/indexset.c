/* indexset.c: the out-of-line parts of struct fp_indexset (indexset.h). */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "indexset.h"

#define INDEXSET_MIN_SLOTS 64

/* probe_empty: the first free slot on hash's probe sequence. */
static size_t probe_empty(const struct fp_indexset_slot *slots, size_t mask, uint32_t hash)
{
	size_t i = hash & mask;

	while (slots[i].sl_index1)
		i = (i + 1) & mask;
	return i;
}

int fp_indexset_reserve(struct fp_indexset *s, size_t n)
{
	size_t nslots = s->is_slots ? s->is_mask + 1 : 0;

	if (n > SIZE_MAX / 4 - s->is_used)
		return -ENOMEM;
	size_t need = s->is_used + n;
	if (nslots && need * 4 <= nslots * 3)
		return 0;
	size_t bigger = nslots ? nslots * 2 : INDEXSET_MIN_SLOTS;
	while (need * 4 > bigger * 3) {
		if (bigger > SIZE_MAX / 2 / sizeof(struct fp_indexset_slot))
			return -ENOMEM;
		bigger *= 2;
	}
	struct fp_indexset_slot *slots = calloc(bigger, sizeof(*slots));
	if (!slots)
		return -ENOMEM;
	for (size_t i = 0; i < nslots; i++) {
		const struct fp_indexset_slot *sl = &s->is_slots[i];

		if (sl->sl_index1)
			slots[probe_empty(slots, bigger - 1, sl->sl_hash)] = *sl;
	}
	free(s->is_slots);
	s->is_slots = slots;
	s->is_mask = bigger - 1;
	return 0;
}

int fp_indexset_grow_slot(struct fp_indexset *s, uint32_t hash, size_t *slot)
{
	size_t old_mask = s->is_mask;
	int err = fp_indexset_reserve(s, 1);

	/* The key is not in the set: its place is the first free slot. */
	if (!err && s->is_mask != old_mask)
		*slot = probe_empty(s->is_slots, s->is_mask, hash);
	return err;
}

void fp_indexset_clear(struct fp_indexset *s)
{
	if (s->is_slots)
		memset(s->is_slots, 0, (s->is_mask + 1) * sizeof(*s->is_slots));
	s->is_used = 0;
}

void fp_indexset_free(struct fp_indexset *s)
{
	free(s->is_slots);
	s->is_slots = NULL;
	s->is_mask = 0;
	s->is_used = 0;
}
