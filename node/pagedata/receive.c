/* The receiving side of page data (pagedata.h, pagedata_receive): a block
 * the partner sent for a page, whichever way it came. The message names
 * where it is:
 *
 *   WritePage   landed in a run granted to the partner -> grants_to_partner.c
 *               landed in the run held for the write lock -> pointer_landings.c
 *               inline -------------------------------------+
 *   ResyncPage  landed in a run the resync handed out ----- | -> resync_landings.c
 *               inline -------------------------------------+-> checked, copied
 *                                                               into the page's
 *                                                               frames
 *
 * A landed block's run becomes the page's frames; an inline one is copied
 * into them (taken first when the page is not resident). Either way its
 * bytes must be the page's block size and hash to the CRC-32C the message
 * names. */
#include "vmm_core.h"

#include "pagedata_state.h"

#include <errno.h>
#include <stdio.h>

#include "crc32c.h"

/* An inline block into a's page's frames: checked (-EINVAL, the reason
 * naming the message), then copied (-ENOSPC, the reason vmm_page_fill's). */
static int take_inline(struct pagedata *pd, struct vmm_alloc *a, const char *message,
		       const char *guid, uint64_t page, const ProtobufCBinaryData *data,
		       uint32_t want_crc, char *reason, size_t len)
{
	if (data->len != a->block_size) {
		snprintf(reason, len, "%s %s page %llu: %zu bytes for a block of %u", message, guid,
			 (unsigned long long)page, data->len, a->block_size);
		return -EINVAL;
	}
	if (crc32c(0, data->data, data->len) != want_crc) {
		snprintf(reason, len, "%s %s page %llu: checksum differs", message, guid,
			 (unsigned long long)page);
		return -EINVAL;
	}
	return vmm_page_fill(pd->vmm, a, page, data->data, reason, len) < 0 ? -ENOSPC : 0;
}

static int receive_write_page(struct pagedata *pd, struct vmm_alloc *a,
			      const Ftvm__Partner__WritePage *m, Ftvm__Partner__Landing *ret_fresh,
			      bool *ret_has_fresh, char *reason, size_t len)
{
	int r;

	if (m->landed && pagedata_grant_named(pd, m->landed)) {
		r = pagedata_grant_adopt(pd, a, m->page, m, ret_fresh, ret_has_fresh, reason, len);
		/* A run held for the lock (none, for a whole-page write) is unused. */
		if (r == 0)
			pagedata_landing_close(pd, m->guid, m->page, NULL);
		return r;
	}
	if (m->landed)
		return pagedata_landing_adopt(pd, a, m->page, m, reason, len);
	/* The block came inline: a run held for the lock will not be used, and
	 * its frames may be what this block needs. */
	pagedata_landing_close(pd, m->guid, m->page, NULL);
	return take_inline(pd, a, "WritePage to", m->guid, m->page, &m->data, m->crc32c, reason,
			   len);
}

static int receive_resync_page(struct pagedata *pd, struct vmm_alloc *a,
			       const Ftvm__Partner__ResyncPage *m, char *reason, size_t len)
{
	char why[256];
	int r;

	if (!m->landed) {
		r = take_inline(pd, a, "ResyncPage", m->guid, m->page, &m->data,
				a->page[m->page].crc32c, why, sizeof(why));
		if (r == 0)
			a->page[m->page].stale = false; /* as an adopted run leaves it */
		else if (r == -ENOSPC)
			snprintf(reason, len, "ResyncPage %s page %llu: %s", m->guid,
				 (unsigned long long)m->page, why);
		else
			snprintf(reason, len, "%s", why);
		return r;
	}
	if (!m->state || m->data.len) {
		pagedata_resync_landing_close(pd, m->landed);
		snprintf(reason, len, "ResyncPage %s page %llu: landed, but with %s", m->guid,
			 (unsigned long long)m->page, m->data.len ? "data as well" : "no state");
		return -EINVAL;
	}
	return pagedata_resync_landing_adopt(pd, a, m->page, m->landed, m->state->crc32c, reason,
					     len);
}

int pagedata_receive(struct pagedata *pd, struct vmm_alloc *a, const struct pagedata_incoming *in,
		     Ftvm__Partner__Landing *ret_fresh, bool *ret_has_fresh, char *reason,
		     size_t len)
{
	*ret_has_fresh = false;
	if (in->write_page)
		return receive_write_page(pd, a, in->write_page, ret_fresh, ret_has_fresh, reason,
					  len);
	return receive_resync_page(pd, a, in->resync_page, reason, len);
}

void pagedata_discard(struct pagedata *pd, const struct pagedata_incoming *in)
{
	if (in->resync_page && in->resync_page->landed)
		pagedata_resync_landing_close(pd, in->resync_page->landed);
}
