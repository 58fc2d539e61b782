/* A listening TCP socket on a configured endpoint, for the node's servers
 * that listen on one ([nbd] listen, [metrics] listen): on that address
 * only, never on every interface. */
#pragma once

/* A nonblocking, close-on-exec socket bound to endpoint ("host:port" or
 * "[v6addr]:port", as config_parse_endpoint() reads it) with SO_REUSEADDR,
 * listening with backlog. Returns the fd, or -EINVAL for an endpoint that
 * is not one or does not resolve, -EADDRINUSE, -EADDRNOTAVAIL, -errno. */
int tcp_listen(const char *endpoint, int backlog);
