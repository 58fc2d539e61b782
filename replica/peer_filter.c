#include "peer_filter.h"

#include <errno.h>
#include <netdb.h>
#include <netinet/in.h>
#include <stdio.h>
#include <string.h>

#include "config.h"
#include "reason.h"

int peer_filter_init(struct peer_filter *f, const char *endpoint, char *reason, size_t reason_len)
{
	struct addrinfo hints = { .ai_family = AF_UNSPEC, .ai_socktype = SOCK_STREAM };
	struct addrinfo *ai, *a;
	char host[256];
	uint16_t port;
	int r;

	f->n = 0;
	if (!endpoint)
		return 0;
	if (config_parse_endpoint(endpoint, host, sizeof(host), &port) < 0)
		return reason_fail(reason, reason_len, -EINVAL, "'%s' is not an endpoint",
				   endpoint);
	r = getaddrinfo(host, NULL, &hints, &ai);
	if (r != 0)
		return reason_fail(reason, reason_len, -EHOSTUNREACH,
				   "the partner's host '%s' does not resolve: %s", host,
				   gai_strerror(r));
	for (a = ai; a && f->n < PEER_FILTER_ADDRS_MAX; a = a->ai_next)
		if (a->ai_addrlen <= sizeof(f->addrs[0]))
			memcpy(&f->addrs[f->n++], a->ai_addr, a->ai_addrlen);
	freeaddrinfo(ai);
	if (!f->n)
		return reason_fail(reason, reason_len, -EHOSTUNREACH,
				   "the partner's host '%s' resolves to no address", host);
	return 0;
}

/* sa's address as IPv4 when it is one, mapped or not: 0, or -1 for IPv6. */
static int as_ipv4(const struct sockaddr *sa, struct in_addr *ret)
{
	const struct sockaddr_in6 *sin6 = (const struct sockaddr_in6 *)sa;

	if (sa->sa_family == AF_INET) {
		*ret = ((const struct sockaddr_in *)sa)->sin_addr;
		return 0;
	}
	if (sa->sa_family == AF_INET6 && IN6_IS_ADDR_V4MAPPED(&sin6->sin6_addr)) {
		memcpy(&ret->s_addr, &sin6->sin6_addr.s6_addr[12], 4);
		return 0;
	}
	return -1;
}

static bool same_address(const struct sockaddr *a, const struct sockaddr *b)
{
	struct in_addr a4, b4;

	if (as_ipv4(a, &a4) == 0 || as_ipv4(b, &b4) == 0)
		return as_ipv4(a, &a4) == 0 && as_ipv4(b, &b4) == 0 && a4.s_addr == b4.s_addr;
	if (a->sa_family != AF_INET6 || b->sa_family != AF_INET6)
		return false;
	return memcmp(&((const struct sockaddr_in6 *)a)->sin6_addr,
		      &((const struct sockaddr_in6 *)b)->sin6_addr, sizeof(struct in6_addr)) == 0;
}

bool peer_filter_allows(const struct peer_filter *f, const struct sockaddr *sa)
{
	if (!f->n)
		return true;
	for (size_t i = 0; i < f->n; i++)
		if (same_address((const struct sockaddr *)&f->addrs[i], sa))
			return true;
	return false;
}
