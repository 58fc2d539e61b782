/* References that stay up through a run and serve many connections at once,
 * each a process of its own with one epoll loop, as a node is:
 *  - the echo: a TCP listener on loopback that answers each request of
 *    request_bytes on a connection with reply_bytes (a partner doing no
 *    work);
 *  - the relay: a unix-socket listener that passes each client's whole
 *    requests on over one TCP connection to an echo, and each answer back
 *    to the client whose request it was (a node doing no work).
 * A client of the relay makes the four hops of a mirrored write, client ->
 * relay -> echo -> relay -> client, with nothing done on the way. Both
 * write what a read brought in one write(2), the relay its answers for one
 * client so too: no more batching than the kernel's. */
#pragma once

#include <netinet/in.h>
#include <stddef.h>
#include <sys/un.h>

#include "bench_proc.h"

#define BENCH_RELAY_CLIENTS_MAX 64

struct bench_peer {
	struct bench_proc proc;
	struct sockaddr_in addr; /* the echo's */
	struct sockaddr_un path; /* the relay's */
};

/* Starts an echo on an ephemeral loopback port (p->addr). 0 or -errno. */
int bench_echo_start(struct bench_peer *p, size_t request_bytes, size_t reply_bytes);

/* Starts a relay listening on path, passing requests to echo. */
int bench_relay_start(struct bench_peer *p, const char *path, const struct sockaddr_in *echo,
		      size_t request_bytes, size_t reply_bytes);

/* Stops it; its connections are closed. */
void bench_peer_stop(struct bench_peer *p);
