/* Flow control and sizing of the RDMA transport's two-sided messages: pure
 * accounting, no verbs, so it is unit-tested without a device. The rule and
 * why it cannot deadlock: replica/RDMA.md, "Two-sided messages and credits".
 *
 * A credit is one receive buffer the peer has posted and we have not yet
 * filled. Each side starts with the count the other posted (exchanged in the
 * connect private data), spends one per SEND, and gets them back in the
 * immediate data of the peer's SENDs. */
#pragma once

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

struct rdma_credits {
	uint32_t send;	      /* the peer's posted buffers we may still fill */
	uint32_t peer_window; /* how many the peer posted in all */
	uint32_t owed;	      /* our buffers re-posted and not yet returned to the peer */
	uint32_t window;      /* how many we posted in all */
};

void rdma_credits_init(struct rdma_credits *c, uint32_t window, uint32_t peer_window);

/* A message with data may go: it must leave the last credit for a return. */
bool rdma_credits_can_send_data(const struct rdma_credits *c);

/* An explicit credit-return message is due: we owe at least half our window
 * (and at least 2) and have a credit to send it with. */
bool rdma_credits_return_due(const struct rdma_credits *c);

/* Spends one credit on a SEND (data or a return) and returns the count that
 * SEND carries back to the peer in its immediate data; owed goes to 0. */
uint32_t rdma_credits_spend(struct rdma_credits *c);

/* The peer returned n credits. -EPROTO when that is more than it can owe us
 * (a peer that lies would make us overrun its buffers). */
int rdma_credits_grant(struct rdma_credits *c, uint32_t n);

/* One of our receive buffers was consumed and is posted again. */
void rdma_credits_reposted(struct rdma_credits *c);

/* The connect private data: what each side tells the other of its receive
 * buffers. 12 bytes, big-endian; fits the 56 bytes an IB CM REQ carries. */
#define RDMA_PARAMS_SIZE 12u
#define RDMA_PARAMS_VERSION 1u

struct rdma_params {
	uint32_t credits;  /* receive buffers posted before connecting */
	uint32_t buf_size; /* bytes in each */
};

void rdma_params_encode(const struct rdma_params *p, uint8_t out[RDMA_PARAMS_SIZE]);

/* Decodes a peer's private data (len may exceed RDMA_PARAMS_SIZE: IB CM pads
 * it). -EBADMSG with *ret_why naming the problem. */
int rdma_params_decode(const void *data, size_t len, struct rdma_params *ret, const char **ret_why);
