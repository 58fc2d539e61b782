/* Recording this node's traffic to a trace file (common/TRACE.md): the taps
 * on the partner session and on the client server hand every payload here,
 * started from [trace] path or by `ftvmctl trace start`. */
#pragma once

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

#include "config.h"

struct trace_tap;

/* Creates path (-EEXIST when it exists) with a header describing this node
 * (partner_id: "" while not yet seen) and starts recording channels
 * (CONFIG_TRACE_*). Logs nothing: the caller says what failed. */
int trace_tap_start(const struct ftvm_config *config, const char *partner_id, const char *path,
		    int channels, struct trace_tap **ret);
void trace_tap_partner(struct trace_tap *t, bool out, const char *peer, const uint8_t *payload,
		       size_t len);
void trace_tap_client(struct trace_tap *t, uint64_t client_id, pid_t pid, bool out,
		      const uint8_t *payload, size_t len);
const char *trace_tap_path(const struct trace_tap *t);
/* Stops and frees; returns the records written, or -errno when writing
 * failed on the way (logged once when it happened). */
int64_t trace_tap_stop(struct trace_tap *t);
