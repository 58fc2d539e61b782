/* The node's metrics over HTTP ([metrics] listen): GET /metrics answers the
 * Prometheus text of its status and sense (libftvm/metrics_text.h), the
 * same as `ftvmctl metrics` prints. libevent's evhttp, on the node's event
 * loop: each request is answered at once, from numbers gathered then, so
 * nothing waits and nothing is kept between scrapes.
 *
 * The HTTP surface: GET and HEAD of /metrics (any query string) are 200;
 * another path is 404; another method on /metrics is 405 with Allow: GET,
 * HEAD. Bounds, so that a scraper or a stranger on the port cannot hold on
 * to the node: a request's headers at most METRICS_HEADERS_MAX bytes, its
 * body METRICS_BODY_MAX (libevent answers past them and closes), and a
 * connection that sends or takes nothing for METRICS_TIMEOUT_S seconds is
 * closed, keep-alive ones too.
 *
 * Everything runs on the event loop thread. */
#pragma once

#include "ftvm.h"

struct event_base;
struct metrics_server;

#define METRICS_HEADERS_MAX 8192
#define METRICS_BODY_MAX 1024
#define METRICS_TIMEOUT_S 10

/* The node's status and sense now, as a client's status and sense requests
 * would get them; called for each scrape. */
typedef void (*metrics_gather_fn)(void *arg, struct ftvm_node_status *ret_status,
				  struct ftvm_sense *ret_sense);

/* Listens on endpoint (host:port, [v6]:port; copied) and serves there.
 * -EINVAL for an endpoint that does not resolve, -EADDRINUSE, -ENOMEM,
 * -errno. */
int metrics_server_new(struct event_base *base, const char *endpoint, metrics_gather_fn gather,
		       void *arg, struct metrics_server **ret);
/* Closes the listener and every connection. NULL is fine. */
void metrics_server_free(struct metrics_server *s);
