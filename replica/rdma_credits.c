#include "rdma_credits.h"

#include <errno.h>
#include <string.h>

#include "be_bytes.h"

/* Bounds on what a peer may announce: at least three buffers (one is always
 * kept for a credit return, and a return waits for two owed), and sizes a
 * frame header and some payload fit. */
#define PARAMS_CREDITS_MIN 3u
#define PARAMS_CREDITS_MAX 4096u
#define PARAMS_BUF_MIN 1024u
#define PARAMS_BUF_MAX (16u << 20)

void rdma_credits_init(struct rdma_credits *c, uint32_t window, uint32_t peer_window)
{
	c->send = peer_window;
	c->peer_window = peer_window;
	c->owed = 0;
	c->window = window;
}

bool rdma_credits_can_send_data(const struct rdma_credits *c)
{
	return c->send >= 2;
}

bool rdma_credits_return_due(const struct rdma_credits *c)
{
	/* Never below 2: a return costs the peer a buffer, so at 1 two idle
	 * peers would send each other returns for ever. */
	uint32_t threshold = c->window / 2 > 2 ? c->window / 2 : 2;

	return c->send >= 1 && c->owed >= threshold;
}

uint32_t rdma_credits_spend(struct rdma_credits *c)
{
	uint32_t back = c->owed;

	c->send--;
	c->owed = 0;
	return back;
}

int rdma_credits_grant(struct rdma_credits *c, uint32_t n)
{
	if (n > c->peer_window - c->send)
		return -EPROTO;
	c->send += n;
	return 0;
}

void rdma_credits_reposted(struct rdma_credits *c)
{
	c->owed++;
}

void rdma_params_encode(const struct rdma_params *p, uint8_t out[RDMA_PARAMS_SIZE])
{
	out[0] = 'F';
	out[1] = 'R';
	out[2] = RDMA_PARAMS_VERSION;
	out[3] = 0;
	put_be32(out + 4, p->credits);
	put_be32(out + 8, p->buf_size);
}

int rdma_params_decode(const void *data, size_t len, struct rdma_params *ret, const char **ret_why)
{
	const uint8_t *b = data;
	struct rdma_params p;

	if (!data || len < RDMA_PARAMS_SIZE) {
		*ret_why = "no ftvm parameters in the connect private data";
		return -EBADMSG;
	}
	if (b[0] != 'F' || b[1] != 'R') {
		*ret_why = "the connect private data is not ftvm's (bad magic)";
		return -EBADMSG;
	}
	if (b[2] != RDMA_PARAMS_VERSION) {
		*ret_why = "the peer speaks another version of the RDMA transport";
		return -EBADMSG;
	}
	p.credits = get_be32(b + 4);
	p.buf_size = get_be32(b + 8);
	if (p.credits < PARAMS_CREDITS_MIN || p.credits > PARAMS_CREDITS_MAX) {
		*ret_why = "the peer announced a receive buffer count out of range (3..4096)";
		return -EBADMSG;
	}
	if (p.buf_size < PARAMS_BUF_MIN || p.buf_size > PARAMS_BUF_MAX) {
		*ret_why = "the peer announced a receive buffer size out of range (1 KiB..16 MiB)";
		return -EBADMSG;
	}
	*ret = p;
	return 0;
}
