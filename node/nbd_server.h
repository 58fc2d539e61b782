/* The NBD server (node/NBD.md): connections on a TCP address and/or a unix
 * socket, on the event loop, speaking the protocol through common/nbd_wire.
 * It knows exports by name and requests by offset and length; a backend
 * (node/volume_io.c) serves them.
 *
 * Everything runs on the event loop thread. */
#pragma once

#include <stdbool.h>
#include <stdint.h>
#include <sys/types.h>

#include "nbd_wire.h"

struct event_base;
struct nbd_server;

/* The largest READ or WRITE a backend should offer as max_block: each
 * request in flight holds its bytes. */
#define NBD_SERVER_MAX_BLOCK (4u << 20)

/* One request handed to the backend: the client's request and its bytes.
 * For a WRITE, data holds its length bytes of payload; for a READ, data has
 * room for length bytes, which the backend fills. The backend calls
 * nbd_io_done() exactly once, now or later; until then io and data are its
 * to use. */
struct nbd_io {
	struct nbd_request req;
	uint8_t *data;
};

/* The backend's answer to io: 0, or a negative errno (nbd_error_from_errno
 * turns it into the client's error). io is the server's again. */
void nbd_io_done(struct nbd_io *io, int err);

struct nbd_backend_ops {
	/* The handshake's questions (nbd_wire.h). */
	nbd_lookup_fn lookup;
	nbd_list_fn list;
	/* The client chose export name (GO): what its requests go to, in
	 * *ret, passed to submit and close. 0, -ENOENT, -ENOMEM. */
	int (*open)(void *arg, const char *name, void **ret);
	/* Starts io on the export open gave. */
	void (*submit)(void *arg, void *export, struct nbd_io *io);
	/* The connection closed and its requests are done: what it held goes. */
	void (*close)(void *arg, void *export);
};

struct nbd_server_config {
	const char *listen;	 /* host:port, [v6]:port; NULL: none */
	const char *socket_path; /* NULL: none */
	mode_t socket_mode;
	gid_t socket_group; /* (gid_t)-1: the daemon's */
};

/* Listens where config says (strings copied). -EADDRINUSE, -EINVAL for an
 * endpoint that does not resolve, -errno. */
int nbd_server_new(struct event_base *base, const struct nbd_server_config *config,
		   const struct nbd_backend_ops *ops, void *arg, struct nbd_server **ret);
/* Closes every connection (requests in flight are answered to nobody) and
 * the listeners, unlinks the socket. NULL is fine. */
void nbd_server_free(struct nbd_server *s);

struct nbd_server_stats {
	uint64_t connections; /* open now */
	uint64_t accepted;    /* since start */
	uint64_t refused;     /* closed at once: past NBD_CONNECTIONS_MAX */
	uint64_t protocol_errors;
	uint64_t requests;
	uint64_t errors; /* requests answered with an error */
	uint64_t read_bytes, written_bytes;
};
void nbd_server_get_stats(const struct nbd_server *s, struct nbd_server_stats *ret);
