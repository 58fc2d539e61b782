/* A node's status and sense as Prometheus's text exposition format, version
 * 0.0.4: what `ftvmctl metrics` prints and ftvmd serves at GET /metrics
 * ([metrics] listen). Which metric each status row is, and why some are
 * not: metrics_table.h.
 *
 * Built into ftvmctl and ftvmd alike (a static library of its own: it
 * needs ftvm.h's structs and stdio, nothing of either program). */
#pragma once

#include <stdio.h>

#include "ftvm.h"

/* The Content-Type of the text, for HTTP. */
#define METRICS_TEXT_CONTENT_TYPE "text/plain; version=0.0.4; charset=utf-8"

/* Writes every metric of st, and of sense unless it is NULL (a node that
 * did not answer one), to f. Returns 0, or -EIO when f reports an error. */
int metrics_text_write(FILE *f, const struct ftvm_node_status *st, const struct ftvm_sense *sense);
