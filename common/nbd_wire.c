/* The NBD protocol's server side as a codec (doc/proto.md of the
 * NetworkBlockDevice project): bytes in, bytes out, no sockets.
 *
 * The handshake, as this file runs it. The greeting goes out when the
 * handshake is made (NBDMAGIC, IHAVEOPT, handshake flags FIXED_NEWSTYLE and
 * NO_ZEROES); then the client speaks, and each state waits for whole units
 * of input, never part of one:
 *
 *   state          waits for                    then
 *   CLIENT_FLAGS   4 bytes of client flags      unknown bits, or no
 *                                               C_FIXED_NEWSTYLE: CLOSED;
 *                                               else OPTIONS (C_NO_ZEROES kept)
 *   OPTIONS        a 16-byte option header      bad magic, data over
 *                  and then all its data        NBD_OPTION_MAX_DATA or more than
 *                                               NBD_OPTIONS_MAX options: CLOSED
 *                  EXPORT_NAME                  known export: reply, GONE;
 *                                               unknown or bad name: CLOSED
 *                  GO                           known export: NBD_REP_INFO
 *                                               replies and ACK, GONE; else an
 *                                               error reply, stay
 *                  INFO                         as GO, but stay either way
 *                  LIST                         NBD_REP_SERVER per export and
 *                                               ACK, stay
 *                  ABORT                        ACK, CLOSED ("client aborted")
 *                  STRUCTURED_REPLY, any other  NBD_REP_ERR_UNSUP, stay
 *   GONE           nothing: the transmission phase is the caller's
 *   CLOSED         nothing: the caller sends what is queued and closes
 *
 * A reply that cannot be built for want of memory is taken back out of the
 * output and the handshake goes to CLOSED, so a client never sees half a
 * reply followed by more. In GONE and CLOSED, input says the same result
 * again and consumes nothing.
 *
 * Transmission is stateless here: nbd_request_parse() reads one header,
 * nbd_request_check() says whether the export can serve it, and
 * nbd_reply_simple() writes the reply header. */
#include "nbd_wire.h"

#include <assert.h>
#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "be_bytes.h"

#define NBD_MAGIC 0x4e42444d41474943ull	     /* "NBDMAGIC" */
#define NBD_OPTS_MAGIC 0x49484156454f5054ull /* "IHAVEOPT" */
#define NBD_REP_MAGIC 0x0003e889045565a9ull  /* option replies */
#define NBD_REQUEST_MAGIC 0x25609513u
#define NBD_SIMPLE_REPLY_MAGIC 0x67446698u

/* Handshake flags (server) and client flags. */
#define NBD_FLAG_FIXED_NEWSTYLE (1u << 0)
#define NBD_FLAG_NO_ZEROES (1u << 1)
#define NBD_FLAG_C_FIXED_NEWSTYLE (1u << 0)
#define NBD_FLAG_C_NO_ZEROES (1u << 1)

/* Options. */
#define NBD_OPT_EXPORT_NAME 1
#define NBD_OPT_ABORT 2
#define NBD_OPT_LIST 3
#define NBD_OPT_INFO 6
#define NBD_OPT_GO 7

/* Option replies. */
#define NBD_REP_ACK 1u
#define NBD_REP_SERVER 2u
#define NBD_REP_INFO 3u
#define NBD_REP_ERR_UNSUP (0x80000000u + 1)
#define NBD_REP_ERR_POLICY (0x80000000u + 2)
#define NBD_REP_ERR_INVALID (0x80000000u + 3)
#define NBD_REP_ERR_UNKNOWN (0x80000000u + 6)
#define NBD_REP_ERR_SHUTDOWN (0x80000000u + 7)

/* NBD_REP_INFO types. */
#define NBD_INFO_EXPORT 0
#define NBD_INFO_NAME 1
#define NBD_INFO_DESCRIPTION 2
#define NBD_INFO_BLOCK_SIZE 3

/* What the reply to NBD_OPT_EXPORT_NAME pads with, unless C_NO_ZEROES. */
#define EXPORT_NAME_ZEROES 124

enum hs_state {
	HS_CLIENT_FLAGS,
	HS_OPTIONS,
	HS_GONE,
	HS_CLOSED,
};

struct nbd_handshake {
	nbd_lookup_fn lookup;
	nbd_list_fn list;
	void *arg;
	enum hs_state state;
	bool no_zeroes;
	unsigned options;	  /* options seen */
	char *export_name;	  /* set at GONE */
	struct nbd_export export; /* set at GONE */
	bool out_of_memory;	  /* CLOSED for want of memory */
	char error[160];	  /* set at CLOSED */
};

/* ---- output ---- */

void nbd_out_free(struct nbd_out *out)
{
	if (!out)
		return;
	free(out->data);
	*out = (struct nbd_out){ 0 };
}

uint8_t *nbd_out_reserve(struct nbd_out *out, size_t n)
{
	if (n > SIZE_MAX - out->len)
		return NULL;
	if (out->len + n > out->cap) {
		size_t cap = out->cap ? out->cap : 256;
		uint8_t *p;

		while (cap < out->len + n)
			cap = cap > SIZE_MAX / 2 ? out->len + n : cap * 2;
		p = realloc(out->data, cap);
		if (!p)
			return NULL;
		out->data = p;
		out->cap = cap;
	}
	return out->data + out->len;
}

int nbd_out_append(struct nbd_out *out, const void *p, size_t n)
{
	uint8_t *dst = nbd_out_reserve(out, n);

	if (!dst)
		return -ENOMEM;
	if (n)
		memcpy(dst, p, n);
	out->len += n;
	return 0;
}

void nbd_out_consume(struct nbd_out *out, size_t n)
{
	assert(n <= out->len);
	memmove(out->data, out->data + n, out->len - n);
	out->len -= n;
}

/* ---- the export ---- */

static bool power_of_two(uint32_t v)
{
	return v && !(v & (v - 1));
}

/* e with the defaults in for block sizes left 0. */
static void export_normalise(struct nbd_export *e)
{
	if (!e->min_block)
		e->min_block = NBD_DEFAULT_MIN_BLOCK;
	if (!e->preferred_block)
		e->preferred_block = e->min_block > NBD_DEFAULT_PREFERRED_BLOCK
					     ? e->min_block
					     : NBD_DEFAULT_PREFERRED_BLOCK;
	if (!e->max_block)
		e->max_block = e->preferred_block > NBD_DEFAULT_MAX_BLOCK ? e->preferred_block
									  : NBD_DEFAULT_MAX_BLOCK;
	/* A lookup's values, not the client's: a programmer's error. */
	assert(power_of_two(e->min_block) && e->min_block <= 65536);
	assert(power_of_two(e->preferred_block) && e->preferred_block >= e->min_block);
	assert(e->max_block >= e->preferred_block);
}

uint16_t nbd_export_flags(const struct nbd_export *e)
{
	uint16_t flags = NBD_FLAG_HAS_FLAGS | NBD_FLAG_SEND_FLUSH | NBD_FLAG_SEND_FUA |
			 NBD_FLAG_SEND_TRIM | NBD_FLAG_SEND_WRITE_ZEROES;

	if (e->read_only)
		flags |= NBD_FLAG_READ_ONLY;
	if (e->multi_conn)
		flags |= NBD_FLAG_CAN_MULTI_CONN;
	return flags;
}

/* ---- the handshake ---- */

static enum nbd_handshake_result hs_close(struct nbd_handshake *h, const char *fmt, ...)
	__attribute__((format(printf, 2, 3)));

static enum nbd_handshake_result hs_close(struct nbd_handshake *h, const char *fmt, ...)
{
	va_list ap;

	va_start(ap, fmt);
	vsnprintf(h->error, sizeof(h->error), fmt, ap);
	va_end(ap);
	h->state = HS_CLOSED;
	return NBD_HS_CLOSE;
}

int nbd_handshake_new(nbd_lookup_fn lookup, nbd_list_fn list, void *arg, struct nbd_out *out,
		      struct nbd_handshake **ret)
{
	struct nbd_handshake *h;
	uint8_t *p;

	h = calloc(1, sizeof(*h));
	if (!h)
		return -ENOMEM;
	p = nbd_out_reserve(out, 18);
	if (!p) {
		free(h);
		return -ENOMEM;
	}
	put_be64(p, NBD_MAGIC);
	put_be64(p + 8, NBD_OPTS_MAGIC);
	put_be16(p + 16, NBD_FLAG_FIXED_NEWSTYLE | NBD_FLAG_NO_ZEROES);
	out->len += 18;
	h->lookup = lookup;
	h->list = list;
	h->arg = arg;
	h->state = HS_CLIENT_FLAGS;
	*ret = h;
	return 0;
}

void nbd_handshake_free(struct nbd_handshake *h)
{
	if (!h)
		return;
	free(h->export_name);
	free(h);
}

const char *nbd_handshake_export(const struct nbd_handshake *h)
{
	return h->state == HS_GONE ? h->export_name : NULL;
}

const struct nbd_export *nbd_handshake_export_info(const struct nbd_handshake *h)
{
	return h->state == HS_GONE ? &h->export : NULL;
}

bool nbd_handshake_structured(const struct nbd_handshake *h)
{
	(void)h;
	return false;
}

const char *nbd_handshake_error(const struct nbd_handshake *h)
{
	return h->state == HS_CLOSED ? h->error : NULL;
}

static enum nbd_handshake_result hs_out_of_memory(struct nbd_handshake *h)
{
	h->out_of_memory = true;
	return hs_close(h, "out of memory");
}

/* An option reply's header and data. */
static int opt_reply(struct nbd_out *out, uint32_t option, uint32_t type, const void *data,
		     size_t len)
{
	uint8_t *p = nbd_out_reserve(out, 20 + len);

	if (!p)
		return -ENOMEM;
	put_be64(p, NBD_REP_MAGIC);
	put_be32(p + 8, option);
	put_be32(p + 12, type);
	put_be32(p + 16, (uint32_t)len);
	if (len)
		memcpy(p + 20, data, len);
	out->len += 20 + len;
	return 0;
}

/* An error reply with a message for the client's user. */
static int opt_error(struct nbd_out *out, uint32_t option, uint32_t type, const char *msg)
{
	return opt_reply(out, option, type, msg, strlen(msg));
}

/* An NBD_REP_INFO of the given type: its 2-byte type, then a and b. */
static int opt_info(struct nbd_out *out, uint32_t option, uint16_t type, const void *a,
		    size_t a_len, const void *b, size_t b_len)
{
	uint8_t *p = nbd_out_reserve(out, 22 + a_len + b_len);

	if (!p)
		return -ENOMEM;
	put_be64(p, NBD_REP_MAGIC);
	put_be32(p + 8, option);
	put_be32(p + 12, NBD_REP_INFO);
	put_be32(p + 16, (uint32_t)(2 + a_len + b_len));
	put_be16(p + 20, type);
	if (a_len)
		memcpy(p + 22, a, a_len);
	if (b_len)
		memcpy(p + 22 + a_len, b, b_len);
	out->len += 22 + a_len + b_len;
	return 0;
}

/* The lookup's refusal as an option error. */
static int opt_lookup_error(struct nbd_out *out, uint32_t option, int r)
{
	if (r == -ENOENT)
		return opt_error(out, option, NBD_REP_ERR_UNKNOWN, "no such export");
	if (r == -ESHUTDOWN)
		return opt_error(out, option, NBD_REP_ERR_SHUTDOWN, "server shutting down");
	return opt_error(out, option, NBD_REP_ERR_POLICY, "export not available");
}

/* A name in option data: no NUL inside, no longer than NBD_NAME_MAX. Returns
 * a C string or NULL (*why set, or out of memory with *why NULL). */
static char *name_dup(const uint8_t *p, size_t len, const char **why)
{
	char *s;

	*why = NULL;
	if (len > NBD_NAME_MAX) {
		*why = "export name longer than 4096 bytes";
		return NULL;
	}
	if (memchr(p, '\0', len)) {
		*why = "export name holds a NUL byte";
		return NULL;
	}
	s = malloc(len + 1);
	if (!s)
		return NULL;
	memcpy(s, p, len);
	s[len] = '\0';
	return s;
}

static enum nbd_handshake_result opt_export_name(struct nbd_handshake *h, const uint8_t *data,
						 uint32_t len, struct nbd_out *out)
{
	struct nbd_export e = { 0 };
	const char *why;
	uint8_t *p;
	size_t n;
	char *name;
	int r;

	name = name_dup(data, len, &why);
	if (!name)
		return why ? hs_close(h, "NBD_OPT_EXPORT_NAME: %s", why) : hs_out_of_memory(h);
	r = h->lookup(h->arg, name, &e);
	if (r < 0) {
		free(name);
		/* This option has no error reply: the spec says to close. */
		return hs_close(h, "NBD_OPT_EXPORT_NAME of an export that %s",
				r == -ENOENT ? "does not exist" : "is refused");
	}
	export_normalise(&e);
	n = 10 + (h->no_zeroes ? 0 : EXPORT_NAME_ZEROES);
	p = nbd_out_reserve(out, n);
	if (!p) {
		free(name);
		return hs_out_of_memory(h);
	}
	put_be64(p, e.size);
	put_be16(p + 8, nbd_export_flags(&e));
	memset(p + 10, 0, n - 10);
	out->len += n;
	h->export_name = name;
	h->export = e;
	h->state = HS_GONE;
	return NBD_HS_GO;
}

/* GO and INFO: same request, same replies; GO then ends the handshake. */
static enum nbd_handshake_result opt_go_info(struct nbd_handshake *h, uint32_t option,
					     const uint8_t *data, uint32_t len, struct nbd_out *out)
{
	struct nbd_export e = { 0 };
	bool want_name = false, want_description = false;
	uint32_t name_len;
	uint16_t nreq;
	const char *why;
	uint8_t buf[12];
	char *name;
	int r;

	if (len < 6 || (name_len = get_be32(data)) > len - 6) {
		r = opt_error(out, option, NBD_REP_ERR_INVALID, "malformed request");
		goto stay;
	}
	nreq = get_be16(data + 4 + name_len);
	if ((uint64_t)6 + name_len + 2 * (uint64_t)nreq != len) {
		r = opt_error(out, option, NBD_REP_ERR_INVALID,
			      "information requests do not fill the option");
		goto stay;
	}
	for (uint16_t i = 0; i < nreq; i++) {
		uint16_t info = get_be16(data + 6 + name_len + 2 * i);

		/* Unknown requests are ignored, as the spec says. */
		if (info == NBD_INFO_NAME)
			want_name = true;
		else if (info == NBD_INFO_DESCRIPTION)
			want_description = true;
	}
	name = name_dup(data + 4, name_len, &why);
	if (!name) {
		if (!why)
			return hs_out_of_memory(h);
		r = opt_error(out, option, NBD_REP_ERR_INVALID, why);
		goto stay;
	}
	r = h->lookup(h->arg, name, &e);
	if (r < 0) {
		free(name);
		r = opt_lookup_error(out, option, r);
		goto stay;
	}
	export_normalise(&e);

	put_be64(buf, e.size);
	put_be16(buf + 8, nbd_export_flags(&e));
	r = opt_info(out, option, NBD_INFO_EXPORT, buf, 10, NULL, 0);
	if (r >= 0) {
		put_be32(buf, e.min_block);
		put_be32(buf + 4, e.preferred_block);
		put_be32(buf + 8, e.max_block);
		r = opt_info(out, option, NBD_INFO_BLOCK_SIZE, buf, 12, NULL, 0);
	}
	if (r >= 0 && want_name)
		r = opt_info(out, option, NBD_INFO_NAME, name, strlen(name), NULL, 0);
	if (r >= 0 && want_description && e.description)
		r = opt_info(out, option, NBD_INFO_DESCRIPTION, e.description,
			     strlen(e.description), NULL, 0);
	if (r >= 0)
		r = opt_reply(out, option, NBD_REP_ACK, NULL, 0);
	if (r < 0 || option == NBD_OPT_INFO) {
		free(name);
		goto stay;
	}
	h->export_name = name;
	h->export = e;
	h->state = HS_GONE;
	return NBD_HS_GO;
stay:
	return r < 0 ? hs_out_of_memory(h) : NBD_HS_MORE;
}

struct list_ctx {
	struct nbd_out *out;
	int r;
};

static void list_emit(void *ctx, const char *name, const char *description)
{
	struct list_ctx *l = ctx;
	size_t name_len = strlen(name);
	size_t desc_len = description ? strlen(description) : 0;
	uint8_t *p;

	if (l->r < 0)
		return;
	/* Names the lookup would refuse are not listed; nor is a description
	 * that would make the reply longer than 32 bits can say. */
	if (name_len > NBD_NAME_MAX)
		return;
	if (desc_len > 65536)
		desc_len = 65536;
	p = nbd_out_reserve(l->out, 24 + name_len + desc_len);
	if (!p) {
		l->r = -ENOMEM;
		return;
	}
	put_be64(p, NBD_REP_MAGIC);
	put_be32(p + 8, NBD_OPT_LIST);
	put_be32(p + 12, NBD_REP_SERVER);
	put_be32(p + 16, (uint32_t)(4 + name_len + desc_len));
	put_be32(p + 20, (uint32_t)name_len);
	memcpy(p + 24, name, name_len);
	if (desc_len)
		memcpy(p + 24 + name_len, description, desc_len);
	l->out->len += 24 + name_len + desc_len;
}

static enum nbd_handshake_result opt_list(struct nbd_handshake *h, uint32_t len,
					  struct nbd_out *out)
{
	struct list_ctx l = { .out = out };

	if (len) {
		l.r = opt_error(out, NBD_OPT_LIST, NBD_REP_ERR_INVALID,
				"NBD_OPT_LIST takes no data");
	} else {
		if (h->list)
			h->list(h->arg, list_emit, &l);
		if (l.r >= 0)
			l.r = opt_reply(out, NBD_OPT_LIST, NBD_REP_ACK, NULL, 0);
	}
	return l.r < 0 ? hs_out_of_memory(h) : NBD_HS_MORE;
}

/* One whole option: its number, its data. */
static enum nbd_handshake_result option(struct nbd_handshake *h, uint32_t opt, const uint8_t *data,
					uint32_t len, struct nbd_out *out)
{
	switch (opt) {
	case NBD_OPT_EXPORT_NAME:
		return opt_export_name(h, data, len, out);
	case NBD_OPT_GO:
	case NBD_OPT_INFO:
		return opt_go_info(h, opt, data, len, out);
	case NBD_OPT_LIST:
		return opt_list(h, len, out);
	case NBD_OPT_ABORT:
		/* Data with it is ignored, as the spec asks. */
		if (opt_reply(out, opt, NBD_REP_ACK, NULL, 0) < 0)
			return hs_out_of_memory(h);
		return hs_close(h, "client aborted");
	default:
		/* NBD_OPT_STRUCTURED_REPLY among them: simple replies only, yet. */
		if (opt_error(out, opt, NBD_REP_ERR_UNSUP, "option not supported") < 0)
			return hs_out_of_memory(h);
		return NBD_HS_MORE;
	}
}

enum nbd_handshake_result nbd_handshake_input(struct nbd_handshake *h, const uint8_t *in,
					      size_t len, size_t *consumed, struct nbd_out *out)
{
	size_t off = 0;
	enum nbd_handshake_result res = NBD_HS_MORE;

	while (res == NBD_HS_MORE) {
		if (h->state == HS_GONE) {
			res = NBD_HS_GO;
		} else if (h->state == HS_CLOSED) {
			res = NBD_HS_CLOSE;
		} else if (h->state == HS_CLIENT_FLAGS) {
			uint32_t flags;

			if (len - off < 4)
				break;
			flags = get_be32(in + off);
			off += 4;
			if (flags & ~(NBD_FLAG_C_FIXED_NEWSTYLE | NBD_FLAG_C_NO_ZEROES))
				res = hs_close(h, "unknown client flags 0x%08x", flags);
			else if (!(flags & NBD_FLAG_C_FIXED_NEWSTYLE))
				res = hs_close(h, "client does not speak fixed newstyle");
			else
				h->no_zeroes = flags & NBD_FLAG_C_NO_ZEROES;
			if (res == NBD_HS_MORE)
				h->state = HS_OPTIONS;
		} else {
			uint32_t opt, opt_len;
			size_t mark = out->len;

			if (len - off < NBD_OPTION_HEADER_SIZE)
				break;
			if (get_be64(in + off) != NBD_OPTS_MAGIC) {
				res = hs_close(h, "option without the IHAVEOPT magic");
				break;
			}
			opt = get_be32(in + off + 8);
			opt_len = get_be32(in + off + 12);
			if (opt_len > NBD_OPTION_MAX_DATA) {
				res = hs_close(h, "option %u has %u bytes of data, more than %u",
					       opt, opt_len, NBD_OPTION_MAX_DATA);
				break;
			}
			if (h->options >= NBD_OPTIONS_MAX) {
				res = hs_close(h, "more than %u options", NBD_OPTIONS_MAX);
				break;
			}
			if (len - off < NBD_OPTION_HEADER_SIZE + (size_t)opt_len)
				break;
			h->options++;
			res = option(h, opt, in + off + NBD_OPTION_HEADER_SIZE, opt_len, out);
			off += NBD_OPTION_HEADER_SIZE + (size_t)opt_len;
			/* Half a reply never goes out: take back what was built. */
			if (h->out_of_memory)
				out->len = mark;
		}
	}
	*consumed = off;
	return res;
}

/* ---- transmission ---- */

int nbd_request_parse(const uint8_t *in, size_t len, struct nbd_request *ret)
{
	if (len >= 4 && get_be32(in) != NBD_REQUEST_MAGIC)
		return -EPROTO;
	if (len < NBD_REQUEST_SIZE)
		return 0;
	ret->flags = get_be16(in + 4);
	ret->type = get_be16(in + 6);
	ret->cookie = get_be64(in + 8);
	ret->offset = get_be64(in + 16);
	ret->length = get_be32(in + 24);
	return NBD_REQUEST_SIZE;
}

const char *nbd_cmd_name(uint16_t type)
{
	switch (type) {
	case NBD_CMD_READ:
		return "READ";
	case NBD_CMD_WRITE:
		return "WRITE";
	case NBD_CMD_DISC:
		return "DISC";
	case NBD_CMD_FLUSH:
		return "FLUSH";
	case NBD_CMD_TRIM:
		return "TRIM";
	case NBD_CMD_CACHE:
		return "CACHE";
	case NBD_CMD_WRITE_ZEROES:
		return "WRITE_ZEROES";
	case NBD_CMD_BLOCK_STATUS:
		return "BLOCK_STATUS";
	default:
		return "UNKNOWN";
	}
}

static uint32_t refuse(const char **why, const char *reason, uint32_t error)
{
	*why = reason;
	return error;
}

uint32_t nbd_request_check(const struct nbd_request *r, const struct nbd_export *e,
			   const char **why)
{
	uint32_t allowed = NBD_CMD_FLAG_FUA; /* on every command: we send SEND_FUA */
	uint32_t min_block = e->min_block ? e->min_block : NBD_DEFAULT_MIN_BLOCK;
	uint32_t max_block = e->max_block ? e->max_block : NBD_DEFAULT_MAX_BLOCK;
	bool writes = false;

	*why = NULL;
	switch (r->type) {
	case NBD_CMD_DISC:
	case NBD_CMD_FLUSH:
		if (r->flags & ~allowed)
			return refuse(why, "command flag not valid for the command", NBD_EINVAL);
		if (r->offset || r->length)
			return refuse(why, "offset and length must be 0", NBD_EINVAL);
		return 0;
	case NBD_CMD_WRITE_ZEROES:
		allowed |= NBD_CMD_FLAG_NO_HOLE;
		writes = true;
		break;
	case NBD_CMD_WRITE:
	case NBD_CMD_TRIM:
		writes = true;
		break;
	case NBD_CMD_READ:
		break;
	default:
		/* CACHE and BLOCK_STATUS are not advertised, so unknown here too. */
		return refuse(why, "unknown command", NBD_EINVAL);
	}
	if (r->flags & ~allowed)
		return refuse(why, "command flag not valid for the command", NBD_EINVAL);
	if (writes && e->read_only)
		return refuse(why, "export is read-only", NBD_EPERM);
	/* The spec leaves length 0 unspecified, short of disconnecting. */
	if (r->length == 0)
		return refuse(why, "length 0", NBD_EINVAL);
	if ((r->type == NBD_CMD_READ || r->type == NBD_CMD_WRITE) && r->length > max_block)
		return refuse(why, "length over the maximum payload", NBD_EINVAL);
	if (r->offset % min_block || r->length % min_block)
		return refuse(why, "not aligned to the minimum block size", NBD_EINVAL);
	if (r->offset > e->size || r->length > e->size - r->offset) {
		bool data = r->type == NBD_CMD_WRITE || r->type == NBD_CMD_WRITE_ZEROES;

		return refuse(why, "past the end of the export", data ? NBD_ENOSPC : NBD_EINVAL);
	}
	return 0;
}

int nbd_reply_simple(struct nbd_out *out, uint64_t cookie, uint32_t error)
{
	uint8_t *p = nbd_out_reserve(out, NBD_SIMPLE_REPLY_SIZE);

	if (!p)
		return -ENOMEM;
	put_be32(p, NBD_SIMPLE_REPLY_MAGIC);
	put_be32(p + 4, error);
	put_be64(p + 8, cookie);
	out->len += NBD_SIMPLE_REPLY_SIZE;
	return 0;
}

uint32_t nbd_error_from_errno(int err)
{
	switch (err < 0 ? -err : err) {
	case 0:
		return 0;
	case EPERM:
		return NBD_EPERM;
	case EIO:
		return NBD_EIO;
	case ENOMEM:
		return NBD_ENOMEM;
	case EINVAL:
		return NBD_EINVAL;
	case ENOSPC:
	case EDQUOT:
	case EFBIG:
		return NBD_ENOSPC;
	case EOVERFLOW:
		return NBD_EOVERFLOW;
	case ENOTSUP:
		return NBD_ENOTSUP;
	case ESHUTDOWN:
		return NBD_ESHUTDOWN;
	default:
		return NBD_EIO;
	}
}
