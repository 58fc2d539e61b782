/* The one place the memory manager's unit tests look inside struct vmm
 * (vmm_harness.h says what for): where the lead splits vmm_internal.h, only
 * this file follows. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "vmm_harness.h"
#include "vmm_state.h"

bool vmm_peek_page(struct vmm *v, const char *guid, uint64_t page, struct peek_page *ret)
{
	struct vmm_page *p = vmm_alloc_page(vmm_table_find(v->table, guid), page);

	if (!p)
		return false;
	*ret = (struct peek_page){
		.resident = p->resident,
		.dirty = p->dirty,
		.destaging = p->destaging,
		.stale = p->stale,
		.on_flash = vmm_page_on_flash(p),
		.media = vmm_media_name(p->alloc->media),
		.version = p->version,
		.crc32c = p->crc32c,
		.frame = p->frame,
		.lock_mode = p->lock_mode,
		.n_owners = p->n_owners,
		.owner0 = p->n_owners ? p->owners[0] : NULL,
	};
	return true;
}

struct committed {
	const char *guid;
	uint64_t page;
	char *owner;
	size_t len;
	bool has_alloc, has_page;
	struct pt_row *row;
};

static int on_alloc(const struct pt_alloc *a, void *arg)
{
	struct committed *c = arg;

	if (strcmp(a->guid, c->guid) != 0)
		return 0;
	c->has_alloc = true;
	if (c->owner)
		snprintf(c->owner, c->len, "%s", a->owner);
	return 0;
}

static int on_page(const struct pt_page *p, void *arg)
{
	struct committed *c = arg;

	if (strcmp(p->guid, c->guid) != 0 || p->page != c->page || !c->row)
		return 0;
	c->has_page = true;
	*c->row = (struct pt_row){ .version = p->version, .crc32c = p->crc32c, .dirty = p->dirty };
	return 0;
}

bool vmm_peek_committed(struct vmm *v, const char *guid, uint64_t page, char *owner, size_t len,
			struct pt_row *ret)
{
	struct committed c = { .guid = guid, .page = page, .owner = owner, .len = len, .row = ret };
	int r;

	if (pagetable_in_transaction(v->pt)) {
		fprintf(stderr, "ERROR the page table has a transaction open: nothing to read\n");
		exit(99);
	}
	r = pagetable_load(v->pt, on_alloc, on_page, &c);
	if (r == 0 && pagetable_in_transaction(v->pt))
		r = pagetable_commit(v->pt);
	if (r < 0) {
		fprintf(stderr, "ERROR reading the page table: %s\n", pagetable_last_error(v->pt));
		exit(99);
	}
	return ret ? c.has_page : c.has_alloc;
}

bool vmm_peek_uncommitted(struct vmm *v)
{
	return pagetable_in_transaction(v->pt);
}
