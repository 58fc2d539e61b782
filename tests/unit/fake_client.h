/* A fake of the client API server's calls (node/client_server.h) for the
 * memory manager's unit tests: requests go straight into
 * vmm_client_request() and each reply is kept, as the client would read it
 * (packed and unpacked), instead of going down a socket. The real server is
 * tested in test_client_server, and under real daemons in e2e.
 *
 * A client is its connection: an id, the uid and pid of its process and the
 * rights (CLIENT_RIGHT_*) the real server would give it at accept. */
#pragma once

#include <stdbool.h>
#include <stdint.h>
#include <sys/types.h>

#include "client.pb-c.h"

struct vmm;
struct fake_client;

/* One request and, once it came, its reply. */
struct fake_call {
	uint64_t id;
	bool answered;
	Ftvm__Client__ClientReply *reply; /* NULL until answered */
	bool had_fd;			  /* the reply came with a descriptor */
};

struct fake_client *fake_client_new(uint64_t id, uid_t uid, pid_t pid, unsigned rights);
/* Frees the client and its calls' replies; every call must have been
 * answered by then (fake_client_unanswered). */
void fake_client_free(struct fake_client *c);

/* Sends req (its request set; id is filled here) to v as this client; the
 * call, answered now or later. */
struct fake_call *fake_client_send(struct fake_client *c, struct vmm *v,
				   const Ftvm__Client__ClientRequest *req);
/* The client's connection closed: its calls' replies are dropped from now
 * on (client_call_client_gone says so) and vmm_client_gone() is told. */
void fake_client_close(struct fake_client *c, struct vmm *v);
/* Calls of c made and not answered. */
unsigned fake_client_unanswered(const struct fake_client *c);
