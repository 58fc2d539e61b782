/* The sending side of page data (pagedata.h, pagedata_send): a page's block
 * in a batch to the partner, a whole-page write's or a write pointer's
 * release. The batch's WritePage is made here, for the way the block goes:
 *
 *   one-sided link, a landing the partner gave with the lock, or a run it
 *   granted free for the block's size
 *       -> the block where an RDMA WRITE reads it (registered frames, or a
 *          staging slab it is copied to), written into the run; the
 *          WritePage names the run, and the batch follows the WRITE
 *   otherwise, or when the transport cannot write it one-sided now
 *       -> the WritePage carries the block inline
 *
 * A granted run and a staging slab are held until the batch is answered
 * (pagedata_sent): the partner may still be reading the run, and the run is
 * spent only if the partner applied the WritePage (or may have). */
#include "vmm_core.h"

#include "pagedata_state.h"

#include <errno.h>
#include <string.h>

#include "frame_pool.h"
#include "log.h"
#include "vmm_msg.h"

#define LOG_SUBSYSTEM VMM_LOG_SUBSYSTEM

/* Where the partner takes out's block by RDMA WRITE, and the registered
 * memory the WRITE reads it from, in w; false: it goes inline. */
static bool one_sided_source(struct pagedata *pd, struct pagedata_outgoing *out,
			     struct repl_page_write *w)
{
	uint32_t frames = out->block_size / frame_pool_page_size(pd->pool);
	void *src = out->frames;

	if (!repl_session_one_sided(pd->session))
		return false;
	if (out->landing) {
		w->to = *out->landing;
	} else if (out->grant_ok && pagedata_granted_take(pd, frames, &out->grant)) {
		out->granted = true;
		w->to = out->grant;
	} else {
		return false;
	}
	if (!src && repl_session_staging_take(pd->session, out->block_size, &out->staging) == 0)
		src = out->staging;
	if (!src) {
		pagedata_sent(pd, out, false);
		return false;
	}
	if (src != out->block && !(src == out->frames && out->frames_filled))
		memcpy(src, out->block, out->block_size);
	w->src = src;
	w->len = out->block_size;
	return true;
}

int pagedata_send(struct pagedata *pd, struct vmm_op *op, struct vmm_msg *msgs, Envelope **envs,
		  size_t n, size_t at, struct pagedata_outgoing *out)
{
	struct repl_page_write w;
	int r = -EOPNOTSUPP;

	if (one_sided_source(pd, out, &w)) {
		envs[at] = vmm_msg_write_page_landed(&msgs[at], out->guid, out->page, out->crc32c,
						     &w.to);
		r = vmm_op_send_landed(op, envs, n, &w, 1);
		if (r == 0) {
			pd->counted.pages_one_sided++;
			return 0;
		}
		pagedata_sent(pd, out, false);
		if (!repl_session_inline_instead(r))
			return r;
		log_debug("%s page %llu: block sent inline, not one-sided: %s", out->guid,
			  (unsigned long long)out->page, strerror(-r));
	}
	envs[at] = vmm_msg_write_page(&msgs[at], out->guid, out->page, out->block, out->block_size,
				      out->crc32c);
	r = vmm_op_send(op, envs, n);
	if (r == 0)
		pd->counted.pages_inline++;
	return r;
}

void pagedata_sent(struct pagedata *pd, struct pagedata_outgoing *out, bool spent)
{
	if (out->granted)
		pagedata_granted_done(pd, &out->grant, spent);
	if (out->staging)
		repl_session_staging_give(pd->session, out->staging);
	out->granted = false;
	out->staging = NULL;
}
