/* One ftvm node: the partner session, the client API server and the node's
 * own state, wired to one libevent loop.
 *
 * Node states (INTERFACES.md `state`), as far as this version goes:
 *
 *   starting --partner linked--> active --link lost--> solo --linked--> active
 *
 * Takeover, fencing and resync (which add `resyncing` and `fenced`) belong to
 * the failover work; until then a node that lost its partner only reports it. */
#pragma once

#include <stdint.h>

#include "config.h"

struct event_base;
struct node;

/* Builds the node from a loaded config: picks the transport, creates the
 * state directory, binds the partner and client sockets. Errors are logged. */
int node_new(struct event_base *base, const struct ftvm_config *config, struct node **ret);
/* Runs the loop until SIGTERM or SIGINT. */
int node_run(struct node *n);
void node_free(struct node *n);
