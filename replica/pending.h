/* Requests sent to the partner and not yet answered, keyed by sequence number.
 * Each has a deadline and a completion callback that runs exactly once: with
 * the partner's CommandComplete, or with one made here (TIMEOUT when the
 * deadline passes, PARTNER_UNAVAILABLE when the link goes down). */
#pragma once

#include <stdbool.h>
#include <stdint.h>

#include "codec.h"

struct event_base;
struct pending_table;

typedef void (*pending_done_fn)(const CommandComplete *cc, void *arg);

int pending_table_new(struct event_base *base, struct pending_table **ret);
/* Fails what is left with STATUS_SHUTTING_DOWN, then frees. NULL is fine. */
void pending_table_free(struct pending_table *t);

int pending_add(struct pending_table *t, uint64_t seq, uint32_t timeout_ms, pending_done_fn done,
		void *arg);

/* Runs and removes seq's callback; false when seq is not pending (late or
 * unknown answers are the caller's to log). */
bool pending_complete(struct pending_table *t, uint64_t seq, const CommandComplete *cc);

/* Runs every callback with status and reason, emptying the table. */
void pending_fail_all(struct pending_table *t, int status, const char *reason);

size_t pending_count(const struct pending_table *t);
