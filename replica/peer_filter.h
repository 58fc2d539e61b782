/* Which addresses may open a partner connection: those the partner's
 * configured endpoint resolves to. Both transports ask before they read
 * anything from a new connection (replica/session.c, "Authentication"). The
 * port is not compared: the partner dials from any port. */
#pragma once

#include <stdbool.h>
#include <stddef.h>
#include <sys/socket.h>

#define PEER_FILTER_ADDRS_MAX 8

struct peer_filter {
	size_t n; /* 0: anyone may connect */
	struct sockaddr_storage addrs[PEER_FILTER_ADDRS_MAX];
};

/* The addresses endpoint's host ("host:port", "[v6]:port") resolves to.
 * NULL endpoint: a filter that lets anyone in (tests, benchmarks). -EINVAL
 * for a bad endpoint, -EHOSTUNREACH when its host does not resolve; reason
 * says so. */
int peer_filter_init(struct peer_filter *f, const char *endpoint, char *reason, size_t reason_len);

/* Whether a connection from sa may go on. An IPv4 address mapped into IPv6
 * (a dual-stack listener) counts as the IPv4 address. */
bool peer_filter_allows(const struct peer_filter *f, const struct sockaddr *sa);
