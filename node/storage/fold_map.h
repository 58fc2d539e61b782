/* The newest page row of each page among the journal rows a fold takes
 * (pagetable_sqlite.c, fold(); vmm/VMM.md, "Page writes: journal now,
 * pages at the next fold"). The fold reads the rows in LSN order, which is
 * not always their order of call (seq: an op reserves its LSN when it
 * starts and journals when it ends), so a page keeps the row of highest
 * seq whatever the order it comes in.
 *
 * A fixed table, open addressing, sized for the pages it may hold: a put
 * past that, or of a guid longer than FOLD_GUID_MAX, is refused and the
 * caller folds another way. */
#pragma once

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#define FOLD_GUID_MAX 63

struct fold_row {
	const char *guid;
	uint64_t page, seq, version;
	uint32_t crc32c;
	bool dirty;
};

struct fold_map;

/* A map for up to max_pages pages (at least 1). 0 or -ENOMEM. */
int fold_map_new(size_t max_pages, struct fold_map **ret);
void fold_map_free(struct fold_map *m);
/* r, unless its page holds a row of higher seq already (the guid is
 * copied). 0, -ENOSPC (max_pages pages there, r's not among them),
 * -ENAMETOOLONG or -EINVAL (an empty guid). */
int fold_map_put(struct fold_map *m, const struct fold_row *r);
/* cb for each page's row, in no order; a negative return stops the walk
 * and is returned. */
int fold_map_each(const struct fold_map *m, int (*cb)(const struct fold_row *r, void *arg),
		  void *arg);
