/* The memory manager's failover state as a whole (failover.h): made, freed. */
#include "failover.h"

#include <stdio.h>
#include <stdlib.h>

#include <event2/event.h>

#include "failover_state.h"

struct failover_state *failover_state_new(struct event_base *base, struct vmm *v)
{
	struct failover_state *f = calloc(1, sizeof(*f));

	if (!f)
		return NULL;
	f->mode = VMM_MODE_OFFLINE;
	snprintf(f->mode_reason, sizeof(f->mode_reason), "starting");
	f->window_event = event_new(base, -1, 0, vmm_on_window_closed, v);
	if (!f->window_event) {
		free(f);
		return NULL;
	}
	return f;
}

const struct status_counts *failover_counted(const struct failover_state *f)
{
	return &f->counted;
}

void failover_state_free(struct failover_state *f)
{
	if (!f)
		return;
	event_free(f->window_event);
	free(f);
}
