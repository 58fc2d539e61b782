#include "fold_map.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>

struct slot {
	char guid[FOLD_GUID_MAX + 1]; /* "": empty */
	struct fold_row row;	      /* row.guid points at guid */
};

struct fold_map {
	size_t max_pages, pages;
	size_t mask; /* slots - 1, slots a power of two at least twice max_pages */
	struct slot slot[];
};

int fold_map_new(size_t max_pages, struct fold_map **ret)
{
	size_t slots = 2;
	struct fold_map *m;

	*ret = NULL;
	if (max_pages == 0)
		max_pages = 1;
	while (slots < 2 * max_pages)
		slots *= 2;
	m = calloc(1, sizeof(*m) + slots * sizeof(m->slot[0]));
	if (!m)
		return -ENOMEM;
	m->max_pages = max_pages;
	m->mask = slots - 1;
	*ret = m;
	return 0;
}

void fold_map_free(struct fold_map *m)
{
	free(m);
}

/* FNV-1a over the guid, then the page. */
static size_t hash(const char *guid, uint64_t page)
{
	uint64_t h = 0xcbf29ce484222325ull;

	for (; *guid; guid++)
		h = (h ^ (uint8_t)*guid) * 0x100000001b3ull;
	for (int i = 0; i < 8; i++, page >>= 8)
		h = (h ^ (page & 0xff)) * 0x100000001b3ull;
	return (size_t)h;
}

int fold_map_put(struct fold_map *m, const struct fold_row *r)
{
	size_t len = strlen(r->guid), i = hash(r->guid, r->page) & m->mask;
	struct slot *s;

	if (len == 0) /* "" marks an empty slot */
		return -EINVAL;
	if (len > FOLD_GUID_MAX)
		return -ENAMETOOLONG;
	/* At most half the slots are taken: an empty one ends the probe. */
	for (s = &m->slot[i]; s->guid[0]; s = &m->slot[i = (i + 1) & m->mask]) {
		if (s->row.page != r->page || strcmp(s->guid, r->guid) != 0)
			continue;
		if (r->seq > s->row.seq) {
			s->row = *r;
			s->row.guid = s->guid;
		}
		return 0;
	}
	if (m->pages == m->max_pages)
		return -ENOSPC;
	memcpy(s->guid, r->guid, len + 1);
	s->row = *r;
	s->row.guid = s->guid;
	m->pages++;
	return 0;
}

int fold_map_each(const struct fold_map *m, int (*cb)(const struct fold_row *r, void *arg),
		  void *arg)
{
	for (size_t i = 0; i <= m->mask; i++) {
		int r;

		if (!m->slot[i].guid[0])
			continue;
		r = cb(&m->slot[i].row, arg);
		if (r < 0)
			return r;
	}
	return 0;
}
