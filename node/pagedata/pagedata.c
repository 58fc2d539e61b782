/* The component's state as a whole (pagedata.h): made empty, counted, freed. */
#include "pagedata.h"

#include <stdlib.h>

#include "pagedata_state.h"
#include "vmm.h"

struct pagedata *pagedata_new(void)
{
	return calloc(1, sizeof(struct pagedata));
}

void pagedata_free(struct pagedata *pd)
{
	free(pd);
}

void pagedata_counts(const struct pagedata *pd, struct vmm_counts *ret)
{
	ret->landings_adopted = pd->landings_adopted;
	ret->landings_refused = pd->landings_refused;
	ret->landings_granted = pd->landings_granted;
}
