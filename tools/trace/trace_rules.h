/* What a replay compares, and how (common/TRACE.md, "Fields that
 * legitimately differ"): every field of a recorded answer must equal the new
 * run's, except the fields this module's table names. A mapped field binds
 * its recorded value to the new one the first time it is seen; both sides of
 * the binding are then fixed for the whole replay. */
#pragma once

#include <stddef.h>

#include <protobuf-c/protobuf-c.h>

struct trace_maps;

int trace_maps_new(struct trace_maps **ret);
void trace_maps_free(struct trace_maps *maps);

/* Compares the recorded message with the new run's. 0 when they match under
 * the rules (binding what they map); -1 with where naming the first field
 * that does not ("CommandComplete.lock.owners[0]") and why. */
int trace_compare(struct trace_maps *maps, const ProtobufCMessage *recorded,
		  const ProtobufCMessage *actual, char *where, size_t where_len);

/* Rewrites, in place, the mapped fields of a message the replayer is about to
 * send (guids, owners, epochs) from their recorded values to the new run's.
 * Values not bound yet stay as recorded. Rewritten strings point into maps,
 * which must outlive m. */
void trace_rewrite(struct trace_maps *maps, ProtobufCMessage *m);

/* A sequence number the node used in the recording, as the new run numbered
 * the same request: 0 when it has not been seen. */
uint64_t trace_maps_node_seq(const struct trace_maps *maps, uint64_t recorded);

/* The node's LSN, or an epoch, as the new run has it for a recorded one: 0
 * when it has not been seen. */
uint64_t trace_maps_node_lsn(const struct trace_maps *maps, uint64_t recorded);
uint64_t trace_maps_epoch(const struct trace_maps *maps, uint64_t recorded);
/* Binds a recorded epoch to the new run's, from a message that is not
 * compared (the node's Hello). -1 with why when either side is bound to
 * another already. */
int trace_maps_bind_epoch(struct trace_maps *maps, uint64_t recorded, uint64_t now, char *why,
			  size_t why_len);
