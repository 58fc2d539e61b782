/* The node's status and sense replies (proto/client.proto) read into the
 * structs of ftvm.h: struct ftvm_node_status row by row of
 * FTVM_STATUS_FIELDS, struct ftvm_sense and its media.
 *
 * libftvm reads what a node answered with these; the node reads its own
 * replies with them for its metrics (node/metrics_server.c), so that what
 * it serves there is what `ftvmctl status` and `sense` show. Built into
 * both; nothing here is exported from libftvm. The bytes are not trusted:
 * strings are cut to fit, media past the room left out, a missing partner
 * or pagetable message reads as empty, a LIST row past the node's list (an
 * older node's) as 0. */
#pragma once

#include <stddef.h>

#include "client.pb-c.h"
#include "ftvm.h"

void reply_read_status(const Ftvm__Client__StatusReply *reply, struct ftvm_node_status *ret);
/* The first room of n media into ret; how many it took. */
size_t reply_read_media(struct ftvm_media *ret, size_t room,
			Ftvm__Partner__MediaCapacity *const *media, size_t n);
void reply_read_sense(const Ftvm__Partner__SenseInformation *si, struct ftvm_sense *ret);
