/* libFuzzer target: what an RDMA peer controls at connection set-up and
 * after (replica/rdma_credits.c): the private data of its rdma_cm connect
 * request or accept, through rdma_params_decode() as transport_rdma.c calls
 * it, and then the credits it returns in the immediate data of its SENDs,
 * through the accounting rdma_conn.c runs on them. None of this needs a
 * device or rdma-core, so the target builds everywhere, HAVE_RDMA or not.
 *
 * The input: one byte, the private data's length (at most 255: what
 * rdma_cm's uint8_t length can say), that many bytes of it (NULL when 0, as
 * transport_rdma.c passes it), then the peer's doings, a byte each: bit 0
 * clear, we send (data when the credits allow, else a due return); set, a
 * SEND of the peer arrives returning the next four bytes (big-endian) as
 * credits, and we re-post the buffer it filled.
 *
 * Nothing may crash or read past the private data. Parameters that decode
 * are in range and encode back to what was read; a refusal says why. A
 * lying peer is caught (-EPROTO) before we would fill more of its buffers
 * than it posted: our credits never exceed its window. */
#include <errno.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "be_bytes.h"
#include "rdma_credits.h"

/* rdma_conn.h's RDMA_RECV_BUFS: that header needs rdma-core. */
#define OUR_WINDOW 32u

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static void run_credits(const struct rdma_params *p, const uint8_t *ops, size_t n)
{
	struct rdma_credits c;

	rdma_credits_init(&c, OUR_WINDOW, p->credits);
	for (size_t i = 0; i < n; i++) {
		if (!(ops[i] & 1)) {
			if (rdma_credits_can_send_data(&c) || rdma_credits_return_due(&c))
				rdma_credits_spend(&c);
		} else {
			if (n - i < 5)
				return;
			if (rdma_credits_grant(&c, get_be32(ops + i + 1)) < 0)
				return; /* the connection fails: the peer lied */
			rdma_credits_reposted(&c);
			i += 4;
		}
		if (c.send > c.peer_window || c.peer_window != p->credits)
			abort();
	}
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	uint8_t again[RDMA_PARAMS_SIZE];
	struct rdma_params p, p2;
	const char *why = NULL;
	uint8_t *priv = NULL;
	size_t len;
	int r;

	if (size < 1)
		return 0;
	len = data[0];
	if (len > size - 1)
		len = size - 1;
	/* Exactly len bytes, so ASan sees a read past them. */
	if (len) {
		priv = malloc(len);
		if (!priv)
			abort();
		memcpy(priv, data + 1, len);
	}
	r = rdma_params_decode(priv, len, &p, &why);
	if (r < 0) {
		if (r != -EBADMSG || !why || !why[0])
			abort();
		goto out;
	}
	if (p.credits < 3 || p.credits > 4096 || p.buf_size < 1024 || p.buf_size > (16u << 20))
		abort();
	rdma_params_encode(&p, again);
	if (memcmp(again, priv, 3) != 0 || memcmp(again + 4, priv + 4, 8) != 0 ||
	    rdma_params_decode(again, sizeof(again), &p2, &why) != 0 || p2.credits != p.credits ||
	    p2.buf_size != p.buf_size)
		abort();
	run_credits(&p, data + 1 + len, size - 1 - len);
out:
	free(priv);
	return 0;
}
