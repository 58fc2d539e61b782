/* libFuzzer target: bytes from an NBD client, through common/nbd_wire.
 *
 * The first byte says where to split the rest: the handshake is fed the
 * bytes before the split, then everything it left unconsumed together with
 * the rest, the way a server feeds what one read and then the next brought.
 * So partial options and client flags are exercised, not only whole ones.
 * After NBD_HS_GO the bytes it did not consume are the transmission phase:
 * requests are parsed one after another, each checked against the export
 * chosen (a WRITE's payload skipped, as a server reads it whatever the
 * answer) and answered with a simple reply, until the bytes run out or a
 * header is not a request.
 *
 * Exports: "disk" (1 MiB, default block sizes), "ro" (read-only, 512-byte
 * blocks, a description) and "" (empty, 64 KiB max payload); anything else
 * is unknown.
 *
 * Nothing may crash, leak or read out of bounds, and the codec must keep its
 * promises: it never consumes more than it was given, an export after GO, a
 * reason after CLOSE, the same answer again after either, a reason with
 * every refused request and none with an accepted one, and an accepted
 * request lies inside the export. */
#include <errno.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "fuzz_util.h"
#include "nbd_wire.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static int lookup(void *arg, const char *name, struct nbd_export *ret)
{
	(void)arg;
	if (!strcmp(name, "disk")) {
		*ret = (struct nbd_export){ .size = 1 << 20 };
		return 0;
	}
	if (!strcmp(name, "ro")) {
		*ret = (struct nbd_export){ .size = 1 << 20,
					    .min_block = 512,
					    .preferred_block = 4096,
					    .max_block = 1 << 20,
					    .read_only = true,
					    .multi_conn = true,
					    .description = "read-only" };
		return 0;
	}
	if (!strcmp(name, "")) {
		*ret = (struct nbd_export){ .size = 0, .max_block = 65536 };
		return 0;
	}
	return -ENOENT;
}

static void list(void *arg, void (*emit)(void *ctx, const char *name, const char *description),
		 void *ctx)
{
	(void)arg;
	emit(ctx, "disk", NULL);
	emit(ctx, "ro", "read-only");
	emit(ctx, "", "the default");
}

static void transmission(const struct nbd_export *e, const uint8_t *in, size_t len,
			 struct nbd_out *out)
{
	size_t off = 0;

	for (;;) {
		struct nbd_request r;
		const char *why = NULL;
		uint32_t error;
		int n = nbd_request_parse(in + off, len - off, &r);

		if (n < 0 && n != -EPROTO)
			abort();
		if (n <= 0)
			return;
		if (n != NBD_REQUEST_SIZE)
			abort();
		off += NBD_REQUEST_SIZE;
		error = nbd_request_check(&r, e, &why);
		if ((error != 0) != (why != NULL))
			abort();
		switch (error) {
		case 0:
			if (r.type != NBD_CMD_DISC && r.type != NBD_CMD_FLUSH &&
			    (r.length == 0 || r.offset > e->size || r.length > e->size - r.offset))
				abort();
			break;
		case NBD_EINVAL:
		case NBD_EPERM:
		case NBD_ENOSPC:
			break;
		default:
			abort();
		}
		if (r.type == NBD_CMD_DISC)
			return;
		if (r.type == NBD_CMD_WRITE) {
			if (r.length > len - off)
				return;
			off += r.length;
		}
		if (nbd_reply_simple(out, r.cookie, error) < 0)
			abort();
		(void)nbd_cmd_name(r.type);
	}
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	struct nbd_out out = { 0 };
	struct nbd_handshake *h = NULL;
	enum nbd_handshake_result res;
	uint8_t *buf = NULL;
	size_t split, kept, consumed, len;

	data = fuzz_data(data);
	if (size < 1)
		return 0;
	split = (size - 1) * data[0] / 255;
	data++;
	size--;

	if (nbd_handshake_new(lookup, list, NULL, &out, &h) < 0)
		abort();
	if (out.len != 18)
		abort();

	/* The first read: the bytes before the split. */
	res = nbd_handshake_input(h, data, split, &consumed, &out);
	if (consumed > split)
		abort();
	kept = split - consumed;

	/* The second: what was kept, then the rest, in one buffer of exactly
	 * that size so that ASan sees a read past it. */
	len = kept + (size - split);
	buf = malloc(len ? len : 1);
	if (!buf)
		abort();
	memcpy(buf, data + consumed, kept);
	memcpy(buf + kept, data + split, size - split);
	if (res == NBD_HS_MORE) {
		res = nbd_handshake_input(h, buf, len, &consumed, &out);
		if (consumed > len)
			abort();
	} else {
		/* Done already: the rest is not the handshake's. */
		size_t again;

		if (nbd_handshake_input(h, buf, len, &again, &out) != res || again != 0)
			abort();
		consumed = 0;
	}

	switch (res) {
	case NBD_HS_MORE:
		if (nbd_handshake_export(h) || nbd_handshake_error(h))
			abort();
		break;
	case NBD_HS_CLOSE:
		if (!nbd_handshake_error(h) || !nbd_handshake_error(h)[0] ||
		    nbd_handshake_export(h))
			abort();
		break;
	case NBD_HS_GO: {
		const struct nbd_export *e = nbd_handshake_export_info(h);
		struct nbd_export looked;

		if (!nbd_handshake_export(h) || !e || nbd_handshake_error(h))
			abort();
		if (lookup(NULL, nbd_handshake_export(h), &looked) < 0 || looked.size != e->size)
			abort();
		if (nbd_handshake_structured(h))
			abort();
		transmission(e, buf + consumed, len - consumed, &out);
		break;
	}
	default:
		abort();
	}

	free(buf);
	nbd_handshake_free(h);
	nbd_out_free(&out);
	return 0;
}
