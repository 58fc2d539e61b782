/* The component's state as a whole (pagedata.h): made with the memory
 * manager's handles, counted, told of the link, freed. */
#include "pagedata.h"

#include <stdlib.h>

#include "pagedata_state.h"

struct pagedata *pagedata_new(struct vmm *v, struct event_base *base,
			      const struct ftvm_config *config, struct pagetable *pt,
			      struct frame_pool *pool)
{
	struct pagedata *pd = calloc(1, sizeof(*pd));

	if (!pd)
		return NULL;
	pd->vmm = v;
	pd->base = base;
	pd->config = config;
	pd->pt = pt;
	pd->pool = pool;
	return pd;
}

void pagedata_free(struct pagedata *pd)
{
	free(pd);
}

const struct status_counts *pagedata_counted(const struct pagedata *pd)
{
	return &pd->counted;
}

void pagedata_link_changed(struct pagedata *pd, bool up)
{
	if (!up) {
		pagedata_landings_drop(pd);
		pagedata_resync_landings_drop(pd);
	}
	pagedata_grants_link_changed(pd, up);
}
