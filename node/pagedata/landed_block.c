/* A block that came by RDMA WRITE (vmm/VMM.md, "Landings"): whichever way the
 * run was handed out (a lock's landing, a grant, a resync's landing), the
 * last checks before it is adopted, and the adoption. Its registration block
 * must still be at the generation it was handed out at, and its bytes must
 * match the CRC-32C the message names. Until both hold, the run is garbage
 * that nothing names. */
#include "vmm_core.h"

#include "pagedata_state.h"

#include <errno.h>
#include <stdio.h>

#include "crc32c.h"
#include "log.h"
#include "session.h"

#define LOG_SUBSYSTEM VMM_LOG_SUBSYSTEM

size_t pagedata_landed_reason_start(char *reason, size_t len, const char *message, const char *guid,
				    uint64_t page, const char *run,
				    const Ftvm__Partner__Landing *named)
{
	int n = snprintf(
		reason, len,
		"%s %s page %llu landed at %s %llu (%u frames, generation %llu): ", message, guid,
		(unsigned long long)page, run, (unsigned long long)named->frame, named->frames,
		(unsigned long long)named->generation);

	return n < 0 || (size_t)n >= len ? 0 : (size_t)n;
}

int pagedata_landed_run_check(struct pagedata *pd, const struct vmm_alloc *a,
			      const struct repl_landing *at, const Ftvm__Partner__Landing *named,
			      const char *handed, uint32_t named_crc32c, char *reason, size_t len)
{
	uint32_t frames = a->block_size / frame_pool_page_size(pd->pool);

	if (at->frames != frames) {
		snprintf(reason, len, "the run is %u frames, the page's block %u", at->frames,
			 frames);
		return -EINVAL;
	}
	if (at->generation != named->generation) {
		snprintf(reason, len, "stale: it was %s at generation %llu", handed,
			 (unsigned long long)at->generation);
		return -ESTALE;
	}
	return pagedata_landed_bytes_check(pd, at, a->block_size, named_crc32c, reason, len);
}

int pagedata_landed_bytes_check(struct pagedata *pd, const struct repl_landing *at,
				uint32_t block_size, uint32_t named_crc32c, char *reason,
				size_t len)
{
	char why[200];
	uint32_t crc;

	/* The block may have been registered again since: the WRITE then went
	 * nowhere of ours. */
	if (repl_session_landing_check(pd->session, at, why, sizeof(why)) < 0) {
		snprintf(reason, len, "%s", why);
		return -ESTALE;
	}
	crc = crc32c(0, frame_pool_addr(pd->pool, at->frame), block_size);
	if (crc != named_crc32c) {
		snprintf(reason, len, "its bytes' CRC-32C is 0x%08x, the message says 0x%08x", crc,
			 named_crc32c);
		return -EBADMSG;
	}
	return 0;
}

void pagedata_landed_adopt(struct pagedata *pd, struct vmm_alloc *a, uint64_t page, uint64_t frame)
{
	struct vmm_page *p = &a->page[page];
	char why[200];

	/* A run granted ahead (or for a resync) lies in server memory: a
	 * volume's page takes a copy in the storage cache's frames, which
	 * server memory's never are (vmm/VMM.md, "Volumes"). Failing that it
	 * keeps the run, as before partitions. */
	if (frame_pool_partition_of(pd->pool, frame) != vmm_alloc_partition(a)) {
		if (vmm_page_fill(pd->vmm, a, page, frame_pool_addr(pd->pool, frame), why,
				  sizeof(why)) == 0) {
			frame_pool_give(pd->pool, frame,
					a->block_size / frame_pool_page_size(pd->pool));
			pd->counted.landings_adopted++;
			return;
		}
		log_debug("%s page %llu: its landed block stays in server memory: %s", a->guid,
			  (unsigned long long)page, why);
	}

	if (p->resident) {
		uint64_t old = p->frame;

		p->frame = frame;
		vmm_frames_give(pd->vmm, old, a->block_size);
	} else {
		p->pagein = NULL; /* a read of the store in flight gives its own frames back */
		vmm_page_attach(pd->vmm, p, frame);
	}
	vmm_replace_touch(pd->vmm, p);
	pd->counted.landings_adopted++;
}

int pagedata_landed_settle(struct pagedata *pd, struct vmm_alloc *a, uint64_t page,
			   const struct repl_landing *held, int r)
{
	if (r < 0) {
		pd->counted.landings_refused++;
		if (held)
			frame_pool_give(pd->pool, held->frame, held->frames);
		return r;
	}
	pagedata_landed_adopt(pd, a, page, held->frame); /* its frames are the page's now */
	return 0;
}
