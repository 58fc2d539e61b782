/* Whether the RDMA transport can run here, for repl_transport_select(). */
#pragma once

#include <stdbool.h>
#include <stddef.h>

/* 1 when a device has an active port and listen ("host:port") is on one
 * (reason then names the device), 0 when not (reason says why). A loopback
 * address never is. for_auto is stricter: a wildcard listen address says
 * nothing of where the partner is, so auto keeps TCP for it. */
int rdma_probe(const char *listen, bool for_auto, char *reason, size_t reason_len);
