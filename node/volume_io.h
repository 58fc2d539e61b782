/* Block requests on volumes as page requests (node/NBD.md, "A request"):
 * the NBD server's backend. Each request's range is cut at page boundaries
 * and each piece asked of the memory manager as a client's page request,
 * made inside the node (client_call_new_internal), so that it takes the
 * path a client's takes. */
#pragma once

#include "nbd_server.h"

struct event_base;
struct vmm;
struct volume_io;

int volume_io_new(struct event_base *base, struct vmm *v, struct volume_io **ret);
/* After the NBD server and the memory manager are gone (their last
 * answers come here). NULL is fine. */
void volume_io_free(struct volume_io *vio);

/* The backend's ops; their arg is the struct volume_io. */
extern const struct nbd_backend_ops volume_io_nbd_ops;
