/* The component's state as a whole (pagedata.h): made empty, counted, freed. */
#include "pagedata.h"

#include <stdlib.h>

#include "pagedata_state.h"

struct pagedata *pagedata_new(void)
{
	return calloc(1, sizeof(struct pagedata));
}

void pagedata_free(struct pagedata *pd)
{
	free(pd);
}

const struct status_counts *pagedata_counted(const struct pagedata *pd)
{
	return &pd->counted;
}
