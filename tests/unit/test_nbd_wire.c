/* common/nbd_wire.c: the handshake's greeting, every option and the bytes of
 * each reply, its bounds and refusals, input fed whole and a byte at a time;
 * request headers, the checks of each command, simple replies and the errno
 * mapping. The expected bytes are written out here from doc/proto.md's
 * layouts, not from the codec's own helpers. */
#include <errno.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "be_bytes.h"
#include "check.h"
#include "nbd_wire.h"

#define REP_MAGIC 0x0003e889045565a9ull
#define OPTS_MAGIC 0x49484156454f5054ull

#define OPT_EXPORT_NAME 1
#define OPT_ABORT 2
#define OPT_LIST 3
#define OPT_STARTTLS 5
#define OPT_INFO 6
#define OPT_GO 7
#define OPT_STRUCTURED_REPLY 8

#define REP_ACK 1u
#define REP_SERVER 2u
#define REP_INFO 3u
#define REP_ERR_UNSUP 0x80000001u
#define REP_ERR_POLICY 0x80000002u
#define REP_ERR_INVALID 0x80000003u
#define REP_ERR_UNKNOWN 0x80000006u

/* ---- exports the tests serve ---- */

static const char *last_lookup; /* the name the last lookup was asked for */
static char last_lookup_buf[NBD_NAME_MAX + 1];

static int lookup(void *arg, const char *name, struct nbd_export *ret)
{
	(void)arg;
	snprintf(last_lookup_buf, sizeof(last_lookup_buf), "%s", name);
	last_lookup = last_lookup_buf;
	if (!strcmp(name, "disk")) {
		*ret = (struct nbd_export){ .size = 1 << 20,
					    .min_block = 1,
					    .preferred_block = 4096,
					    .max_block = 1 << 25,
					    .multi_conn = true,
					    .description = "a test disk" };
		return 0;
	}
	if (!strcmp(name, "ro")) {
		/* Block sizes left to the defaults, no description. */
		*ret = (struct nbd_export){ .size = 0x123456789aull, .read_only = true };
		return 0;
	}
	if (!strcmp(name, "")) {
		*ret = (struct nbd_export){ .size = 512 };
		return 0;
	}
	if (!strcmp(name, "busy"))
		return -EBUSY;
	return -ENOENT;
}

static void list(void *arg, void (*emit)(void *ctx, const char *name, const char *description),
		 void *ctx)
{
	(void)arg;
	emit(ctx, "disk", "a test disk");
	emit(ctx, "ro", NULL);
}

/* ---- bytes the client sends ---- */

struct buf {
	uint8_t data[64 << 10];
	size_t len;
};

static void put32(struct buf *b, uint32_t v)
{
	put_be32(b->data + b->len, v);
	b->len += 4;
}

static void put16(struct buf *b, uint16_t v)
{
	put_be16(b->data + b->len, v);
	b->len += 2;
}

static void put_bytes(struct buf *b, const void *p, size_t n)
{
	if (n)
		memcpy(b->data + b->len, p, n);
	b->len += n;
}

/* An option header and its data. */
static void put_option(struct buf *b, uint32_t opt, const void *data, uint32_t len)
{
	put_be64(b->data + b->len, OPTS_MAGIC);
	b->len += 8;
	put32(b, opt);
	put32(b, len);
	put_bytes(b, data, len);
}

/* GO or INFO for name, with the information requests in infos. */
static void put_go(struct buf *b, uint32_t opt, const char *name, const uint16_t *infos, uint16_t n)
{
	struct buf d = { .len = 0 };

	put32(&d, (uint32_t)strlen(name));
	put_bytes(&d, name, strlen(name));
	put16(&d, n);
	for (uint16_t i = 0; i < n; i++)
		put16(&d, infos[i]);
	put_option(b, opt, d.data, (uint32_t)d.len);
}

/* ---- replies the server sends ---- */

struct reply {
	uint32_t opt, type, len;
	const uint8_t *data;
};

/* Splits out->data from off into option replies; returns how many, or -1
 * when they do not parse. */
static int replies(const struct nbd_out *out, size_t off, struct reply *r, int max)
{
	int n = 0;

	while (off < out->len) {
		if (n == max || out->len - off < 20 || get_be64(out->data + off) != REP_MAGIC)
			return -1;
		r[n].opt = get_be32(out->data + off + 8);
		r[n].type = get_be32(out->data + off + 12);
		r[n].len = get_be32(out->data + off + 16);
		r[n].data = out->data + off + 20;
		if (out->len - off - 20 < r[n].len)
			return -1;
		off += 20 + r[n].len;
		n++;
	}
	return n;
}

/* A handshake past its greeting and client flags; out emptied. */
static struct nbd_handshake *start(struct nbd_out *out, uint32_t client_flags)
{
	struct nbd_handshake *h = NULL;
	uint8_t f[4];
	size_t consumed;

	if (nbd_handshake_new(lookup, list, NULL, out, &h) < 0)
		die("nbd_handshake_new");
	out->len = 0;
	put_be32(f, client_flags);
	CHECK_INT("client flags result", NBD_HS_MORE, nbd_handshake_input(h, f, 4, &consumed, out));
	CHECK_INT("client flags consumed", 4, consumed);
	return h;
}

/* Feeds all of b; checks it is consumed (unless the handshake closed, when
 * the rest does not matter) and says what came of it. */
static enum nbd_handshake_result feed(struct nbd_handshake *h, const struct buf *b,
				      struct nbd_out *out)
{
	size_t consumed = 0;
	enum nbd_handshake_result res = nbd_handshake_input(h, b->data, b->len, &consumed, out);

	if (res != NBD_HS_CLOSE)
		CHECK_INT("consumed all", b->len, consumed);
	return res;
}

static void test_greeting(void)
{
	static const uint8_t expected[18] = { 'N', 'B', 'D', 'M', 'A', 'G', 'I', 'C', 'I',
					      'H', 'A', 'V', 'E', 'O', 'P', 'T', 0,   3 };
	struct nbd_out out = { 0 };
	struct nbd_handshake *h = NULL;

	CHECK_INT("new", 0, nbd_handshake_new(lookup, list, NULL, &out, &h));
	CHECK_INT("greeting length", 18, out.len);
	CHECK(out.len == 18 && !memcmp(out.data, expected, 18),
	      "greeting bytes: NBDMAGIC IHAVEOPT 0x0003");
	nbd_handshake_free(h);
	nbd_out_free(&out);
	nbd_handshake_free(NULL);
	nbd_out_free(NULL);
}

static void test_client_flags(void)
{
	struct {
		uint32_t flags;
		enum nbd_handshake_result res;
	} cases[] = {
		{ 0, NBD_HS_CLOSE },	      /* plain newstyle: refused */
		{ 2, NBD_HS_CLOSE },	      /* NO_ZEROES without FIXED */
		{ 1 | 4, NBD_HS_CLOSE },      /* an unknown bit */
		{ 0x80000001, NBD_HS_CLOSE }, /* another */
		{ 1, NBD_HS_MORE },	      { 3, NBD_HS_MORE },
	};

	for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
		struct nbd_out out = { 0 };
		struct nbd_handshake *h = NULL;
		size_t consumed;
		uint8_t f[4];
		char what[64];

		nbd_handshake_new(lookup, list, NULL, &out, &h);
		out.len = 0;
		put_be32(f, cases[i].flags);
		/* Three bytes are not enough. */
		CHECK_INT("3 bytes of flags", NBD_HS_MORE,
			  nbd_handshake_input(h, f, 3, &consumed, &out));
		CHECK_INT("3 bytes consumed", 0, consumed);
		snprintf(what, sizeof(what), "client flags 0x%x", cases[i].flags);
		CHECK_INT(what, cases[i].res, nbd_handshake_input(h, f, 4, &consumed, &out));
		CHECK_INT(what, 4, consumed);
		CHECK_INT("nothing sent", 0, out.len);
		if (cases[i].res == NBD_HS_CLOSE) {
			CHECK(nbd_handshake_error(h) && *nbd_handshake_error(h), "%s: no reason",
			      what);
			/* Closed stays closed. */
			CHECK_INT("closed again", NBD_HS_CLOSE,
				  nbd_handshake_input(h, f, 4, &consumed, &out));
			CHECK_INT("closed consumes nothing", 0, consumed);
		} else {
			CHECK(nbd_handshake_error(h) == NULL, "%s: a reason while open", what);
		}
		nbd_handshake_free(h);
		nbd_out_free(&out);
	}
}

static void test_export_name(void)
{
	for (int no_zeroes = 0; no_zeroes <= 1; no_zeroes++) {
		struct nbd_out out = { 0 };
		struct nbd_handshake *h = start(&out, no_zeroes ? 3 : 1);
		struct buf b = { .len = 0 };
		size_t n = no_zeroes ? 10 : 134, consumed;

		put_option(&b, OPT_EXPORT_NAME, "disk", 4);
		put_bytes(&b, "\x25\x60\x95\x13", 4); /* transmission begins */
		CHECK_INT("export name", NBD_HS_GO,
			  nbd_handshake_input(h, b.data, b.len, &consumed, &out));
		CHECK_INT("the option consumed, not what follows", b.len - 4, consumed);
		CHECK_INT("reply length", n, out.len);
		if (out.len == n) {
			CHECK_INT("size", 1 << 20, get_be64(out.data));
			/* HAS_FLAGS SEND_FLUSH SEND_FUA SEND_TRIM SEND_WRITE_ZEROES
			 * CAN_MULTI_CONN */
			CHECK_INT("flags", 0x16d, get_be16(out.data + 8));
			for (size_t i = 10; i < n; i++)
				if (out.data[i])
					FAIL("byte %zu of the padding is %u", i, out.data[i]);
		}
		CHECK_STR("export", "disk", nbd_handshake_export(h));
		CHECK_INT("info size", 1 << 20, nbd_handshake_export_info(h)->size);
		CHECK(!nbd_handshake_structured(h), "structured: said yes");
		CHECK_INT("again", NBD_HS_GO,
			  nbd_handshake_input(h, b.data, b.len, &consumed, &out));
		CHECK_INT("again consumes nothing", 0, consumed);
		nbd_handshake_free(h);
		nbd_out_free(&out);
	}

	/* The read-only export, its defaults, and the flags. */
	{
		struct nbd_out out = { 0 };
		struct nbd_handshake *h = start(&out, 3);
		struct buf b = { .len = 0 };

		put_option(&b, OPT_EXPORT_NAME, "ro", 2);
		CHECK_INT("ro", NBD_HS_GO, feed(h, &b, &out));
		CHECK_INT("ro reply", 10, out.len);
		CHECK_INT("ro size", 0x123456789aull, get_be64(out.data));
		CHECK_INT("ro flags", 0x6f, get_be16(out.data + 8));
		CHECK_INT("ro min", 1, nbd_handshake_export_info(h)->min_block);
		CHECK_INT("ro preferred", 4096, nbd_handshake_export_info(h)->preferred_block);
		CHECK_INT("ro max", 32 << 20, nbd_handshake_export_info(h)->max_block);
		nbd_handshake_free(h);
		nbd_out_free(&out);
	}

	/* The empty name is the export named "". */
	{
		struct nbd_out out = { 0 };
		struct nbd_handshake *h = start(&out, 3);
		struct buf b = { .len = 0 };

		put_option(&b, OPT_EXPORT_NAME, "", 0);
		CHECK_INT("empty name", NBD_HS_GO, feed(h, &b, &out));
		CHECK_STR("empty name looked up", "", last_lookup);
		CHECK_STR("empty export", "", nbd_handshake_export(h));
		nbd_handshake_free(h);
		nbd_out_free(&out);
	}

	/* No such export, a refused one, a name too long, a NUL: closed, nothing sent. */
	{
		static char long_name[NBD_NAME_MAX + 1];
		const struct {
			const char *name;
			size_t len;
		} bad[] = { { "nope", 4 },
			    { "busy", 4 },
			    { long_name, NBD_NAME_MAX + 1 },
			    { "di\0sk", 5 } };

		memset(long_name, 'x', sizeof(long_name));
		for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
			struct nbd_out out = { 0 };
			struct nbd_handshake *h = start(&out, 1);
			struct buf b = { .len = 0 };

			put_option(&b, OPT_EXPORT_NAME, bad[i].name, (uint32_t)bad[i].len);
			CHECK_INT("bad export name", NBD_HS_CLOSE, feed(h, &b, &out));
			CHECK_INT("bad export name: nothing sent", 0, out.len);
			CHECK(nbd_handshake_error(h) && *nbd_handshake_error(h), "no reason");
			CHECK(nbd_handshake_export(h) == NULL, "an export after close");
			nbd_handshake_free(h);
			nbd_out_free(&out);
		}
	}
}

/* The replies to GO or INFO for "disk" with NAME and DESCRIPTION asked. */
static void check_info_replies(const struct nbd_out *out, uint32_t opt, bool name, bool desc)
{
	struct reply r[8];
	int n = replies(out, 0, r, 8), want = 3 + name + desc, i = 0;

	CHECK_INT("number of replies", want, n);
	if (n != want)
		return;
	for (int k = 0; k < n; k++)
		CHECK_INT("reply's option", opt, r[k].opt);
	CHECK_INT("INFO_EXPORT", REP_INFO, r[i].type);
	CHECK_INT("INFO_EXPORT length", 12, r[i].len);
	CHECK_INT("INFO_EXPORT type", 0, get_be16(r[i].data));
	CHECK_INT("INFO_EXPORT size", 1 << 20, get_be64(r[i].data + 2));
	CHECK_INT("INFO_EXPORT flags", 0x16d, get_be16(r[i].data + 10));
	i++;
	CHECK_INT("INFO_BLOCK_SIZE", REP_INFO, r[i].type);
	CHECK_INT("INFO_BLOCK_SIZE length", 14, r[i].len);
	CHECK_INT("INFO_BLOCK_SIZE type", 3, get_be16(r[i].data));
	CHECK_INT("min block", 1, get_be32(r[i].data + 2));
	CHECK_INT("preferred block", 4096, get_be32(r[i].data + 6));
	CHECK_INT("max block", 1 << 25, get_be32(r[i].data + 10));
	i++;
	if (name) {
		CHECK_INT("INFO_NAME", REP_INFO, r[i].type);
		CHECK_INT("INFO_NAME length", 6, r[i].len);
		CHECK_INT("INFO_NAME type", 1, get_be16(r[i].data));
		CHECK(!memcmp(r[i].data + 2, "disk", 4), "INFO_NAME name: not disk");
		i++;
	}
	if (desc) {
		CHECK_INT("INFO_DESCRIPTION", REP_INFO, r[i].type);
		CHECK_INT("INFO_DESCRIPTION length", 13, r[i].len);
		CHECK_INT("INFO_DESCRIPTION type", 2, get_be16(r[i].data));
		CHECK(!memcmp(r[i].data + 2, "a test disk", 11),
		      "INFO_DESCRIPTION text: not the description");
		i++;
	}
	CHECK_INT("ACK", REP_ACK, r[i].type);
	CHECK_INT("ACK length", 0, r[i].len);
}

static void test_go_info(void)
{
	static const uint16_t name_desc[] = { 1, 2 };
	static const uint16_t all_and_unknown[] = { 3, 0, 2, 1, 0x7777 };

	for (int go = 0; go <= 1; go++) {
		uint32_t opt = go ? OPT_GO : OPT_INFO;
		struct nbd_out out = { 0 };
		struct nbd_handshake *h = start(&out, 1);
		struct buf b = { .len = 0 };

		/* No requests: EXPORT and BLOCK_SIZE anyway. */
		put_go(&b, OPT_INFO, "disk", NULL, 0);
		CHECK_INT("INFO plain", NBD_HS_MORE, feed(h, &b, &out));
		check_info_replies(&out, OPT_INFO, false, false);
		out.len = b.len = 0;

		put_go(&b, OPT_INFO, "disk", name_desc, 2);
		CHECK_INT("INFO name and description", NBD_HS_MORE, feed(h, &b, &out));
		check_info_replies(&out, OPT_INFO, true, true);
		out.len = b.len = 0;

		/* The same as GO or INFO, with every request and an unknown one. */
		put_go(&b, opt, "disk", all_and_unknown, 5);
		CHECK_INT(go ? "GO" : "INFO", go ? NBD_HS_GO : NBD_HS_MORE, feed(h, &b, &out));
		check_info_replies(&out, opt, true, true);
		if (go) {
			CHECK_STR("GO export", "disk", nbd_handshake_export(h));
			CHECK_INT("GO multi_conn", 1, nbd_handshake_export_info(h)->multi_conn);
		} else {
			CHECK(nbd_handshake_export(h) == NULL, "an export after INFO");
		}
		nbd_handshake_free(h);
		nbd_out_free(&out);
	}

	/* A description asked of an export without one: not sent. */
	{
		struct nbd_out out = { 0 };
		struct nbd_handshake *h = start(&out, 1);
		struct buf b = { .len = 0 };
		struct reply r[8];

		put_go(&b, OPT_GO, "ro", name_desc, 2);
		CHECK_INT("GO ro", NBD_HS_GO, feed(h, &b, &out));
		CHECK_INT("GO ro replies", 4, replies(&out, 0, r, 8));
		CHECK_INT("GO ro: EXPORT", 0, get_be16(r[0].data));
		CHECK_INT("GO ro: flags", 0x6f, get_be16(r[0].data + 10));
		CHECK_INT("GO ro: BLOCK_SIZE", 3, get_be16(r[1].data));
		CHECK_INT("GO ro: max default", 32 << 20, get_be32(r[1].data + 10));
		CHECK_INT("GO ro: NAME", 1, get_be16(r[2].data));
		CHECK_INT("GO ro: ACK", REP_ACK, r[3].type);
		nbd_handshake_free(h);
		nbd_out_free(&out);
	}

	/* Refusals: an error reply, and the handshake goes on. */
	{
		static char long_name[NBD_NAME_MAX + 2];
		struct nbd_out out = { 0 };
		struct nbd_handshake *h = start(&out, 1);
		struct buf b = { .len = 0 };
		struct reply r[4];
		const struct {
			const char *what;
			uint32_t type;
		} * c, cases[] = {
			{ "unknown export", REP_ERR_UNKNOWN },
			{ "refused export", REP_ERR_POLICY },
			{ "name over 4096", REP_ERR_INVALID },
			{ "name past the data", REP_ERR_INVALID },
			{ "requests past the data", REP_ERR_INVALID },
			{ "bytes after the requests", REP_ERR_INVALID },
			{ "data shorter than 6", REP_ERR_INVALID },
			{ "NUL in the name", REP_ERR_INVALID },
		};

		memset(long_name, 'n', NBD_NAME_MAX + 1);
		for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
			c = &cases[i];
			b.len = out.len = 0;
			switch (i) {
			case 0:
				put_go(&b, OPT_GO, "nope", NULL, 0);
				break;
			case 1:
				put_go(&b, OPT_GO, "busy", NULL, 0);
				break;
			case 2:
				put_go(&b, OPT_GO, long_name, NULL, 0);
				break;
			case 3: {
				uint8_t d[10] = { 0, 0, 0, 5, 'd', 'i', 's', 'k', 0, 0 };
				put_option(&b, OPT_GO, d, sizeof(d));
				break;
			}
			case 4: {
				uint8_t d[12] = { 0, 0, 0, 4, 'd', 'i', 's', 'k', 0, 3, 0, 1 };
				put_option(&b, OPT_GO, d, sizeof(d));
				break;
			}
			case 5: {
				uint8_t d[11] = { 0, 0, 0, 4, 'd', 'i', 's', 'k', 0, 0, 9 };
				put_option(&b, OPT_GO, d, sizeof(d));
				break;
			}
			case 6:
				put_option(&b, OPT_GO, "\0\0\0\0\0", 5);
				break;
			case 7: {
				uint8_t d[10] = { 0, 0, 0, 4, 'd', 0, 's', 'k', 0, 0 };
				put_option(&b, OPT_INFO, d, sizeof(d));
				break;
			}
			}
			CHECK_INT(c->what, NBD_HS_MORE, feed(h, &b, &out));
			CHECK_INT(c->what, 1, replies(&out, 0, r, 4));
			CHECK_INT(c->what, c->type, r[0].type);
			CHECK(r[0].len > 0, "%s: no message", c->what);
		}
		CHECK_STR("no lookup for a malformed request", "busy", last_lookup);
		/* And then a good GO still works. */
		b.len = out.len = 0;
		put_go(&b, OPT_GO, "", NULL, 0);
		CHECK_INT("GO after refusals", NBD_HS_GO, feed(h, &b, &out));
		CHECK_STR("GO of the empty name", "", last_lookup);
		CHECK_INT("GO empty size", 512, nbd_handshake_export_info(h)->size);
		nbd_handshake_free(h);
		nbd_out_free(&out);
	}
}

static void test_list(void)
{
	struct nbd_out out = { 0 };
	struct nbd_handshake *h = start(&out, 1);
	struct buf b = { .len = 0 };
	struct reply r[4];

	put_option(&b, OPT_LIST, NULL, 0);
	CHECK_INT("LIST", NBD_HS_MORE, feed(h, &b, &out));
	CHECK_INT("LIST replies", 3, replies(&out, 0, r, 4));
	CHECK_INT("SERVER 1", REP_SERVER, r[0].type);
	CHECK_INT("SERVER 1 option", OPT_LIST, r[0].opt);
	CHECK_INT("SERVER 1 length", 4 + 4 + 11, r[0].len);
	CHECK_INT("SERVER 1 name length", 4, get_be32(r[0].data));
	CHECK(!memcmp(r[0].data + 4, "diska test disk", 15), "SERVER 1 bytes: wrong");
	CHECK_INT("SERVER 2", REP_SERVER, r[1].type);
	CHECK_INT("SERVER 2 length", 4 + 2, r[1].len);
	CHECK(!memcmp(r[1].data, "\0\0\0\2ro", 6), "SERVER 2 bytes: wrong");
	CHECK_INT("LIST ACK", REP_ACK, r[2].type);

	out.len = b.len = 0;
	put_option(&b, OPT_LIST, "x", 1);
	CHECK_INT("LIST with data", NBD_HS_MORE, feed(h, &b, &out));
	CHECK_INT("LIST with data replies", 1, replies(&out, 0, r, 4));
	CHECK_INT("LIST with data refused", REP_ERR_INVALID, r[0].type);
	nbd_handshake_free(h);
	nbd_out_free(&out);

	/* No list function: an empty list. */
	{
		struct nbd_handshake *h2 = NULL;
		size_t consumed;

		nbd_handshake_new(lookup, NULL, NULL, &out, &h2);
		out.len = b.len = 0;
		put32(&b, 1);
		put_option(&b, OPT_LIST, NULL, 0);
		CHECK_INT("LIST without a list", NBD_HS_MORE,
			  nbd_handshake_input(h2, b.data, b.len, &consumed, &out));
		CHECK_INT("LIST without a list replies", 1, replies(&out, 0, r, 4));
		CHECK_INT("LIST without a list: ACK", REP_ACK, r[0].type);
		nbd_handshake_free(h2);
		nbd_out_free(&out);
	}
}

static void test_other_options(void)
{
	struct nbd_out out = { 0 };
	struct nbd_handshake *h = start(&out, 1);
	struct buf b = { .len = 0 };
	struct reply r[4];
	const uint32_t unsup[] = {
		OPT_STRUCTURED_REPLY, OPT_STARTTLS, 4, 9, 10, 11, 99, 0xffffffff
	};

	for (size_t i = 0; i < sizeof(unsup) / sizeof(unsup[0]); i++) {
		char what[64];

		snprintf(what, sizeof(what), "option %u", unsup[i]);
		out.len = b.len = 0;
		put_option(&b, unsup[i], "abc", 3);
		CHECK_INT(what, NBD_HS_MORE, feed(h, &b, &out));
		CHECK_INT(what, 1, replies(&out, 0, r, 4));
		CHECK_INT(what, REP_ERR_UNSUP, r[0].type);
		CHECK_INT(what, unsup[i], r[0].opt);
	}
	CHECK(!nbd_handshake_structured(h), "structured: said yes after refusing");

	/* ABORT: an ACK, then close; data with it is ignored. */
	out.len = b.len = 0;
	put_option(&b, OPT_ABORT, "zz", 2);
	CHECK_INT("ABORT", NBD_HS_CLOSE, feed(h, &b, &out));
	CHECK_INT("ABORT replies", 1, replies(&out, 0, r, 4));
	CHECK_INT("ABORT acked", REP_ACK, r[0].type);
	CHECK_INT("ABORT ack option", OPT_ABORT, r[0].opt);
	CHECK_INT("ABORT ack length", 0, r[0].len);
	CHECK_STR("ABORT reason", "client aborted", nbd_handshake_error(h));
	nbd_handshake_free(h);
	nbd_out_free(&out);
}

static void test_bounds(void)
{
	/* Bad magic on an option. */
	{
		struct nbd_out out = { 0 };
		struct nbd_handshake *h = start(&out, 1);
		struct buf b = { .len = 0 };

		put_option(&b, OPT_LIST, NULL, 0);
		b.data[0] ^= 1;
		CHECK_INT("bad option magic", NBD_HS_CLOSE, feed(h, &b, &out));
		CHECK_INT("bad option magic: nothing sent", 0, out.len);
		CHECK(strstr(nbd_handshake_error(h), "magic"), "reason: %s",
		      nbd_handshake_error(h));
		nbd_handshake_free(h);
		nbd_out_free(&out);
	}
	/* Data over 8 KiB: closed on the header alone; exactly 8 KiB is fine. */
	{
		struct nbd_out out = { 0 };
		struct nbd_handshake *h = start(&out, 1);
		struct buf b = { .len = 0 };
		static uint8_t big[NBD_OPTION_MAX_DATA + 1];
		size_t consumed;
		struct reply r[2];

		put_option(&b, 99, big, NBD_OPTION_MAX_DATA);
		CHECK_INT("8 KiB option", NBD_HS_MORE, feed(h, &b, &out));
		CHECK_INT("8 KiB option refused", 1, replies(&out, 0, r, 2));
		out.len = b.len = 0;
		put_option(&b, 99, big, NBD_OPTION_MAX_DATA + 1);
		CHECK_INT("oversized option", NBD_HS_CLOSE,
			  nbd_handshake_input(h, b.data, NBD_OPTION_HEADER_SIZE, &consumed, &out));
		CHECK_INT("oversized: nothing sent", 0, out.len);
		CHECK(strstr(nbd_handshake_error(h), "8192"), "reason: %s", nbd_handshake_error(h));
		nbd_handshake_free(h);
		nbd_out_free(&out);
	}
	/* 64 options are fine, the 65th closes. */
	{
		struct nbd_out out = { 0 };
		struct nbd_handshake *h = start(&out, 1);
		struct buf b = { .len = 0 };
		struct reply r[NBD_OPTIONS_MAX + 1];

		for (int i = 0; i < NBD_OPTIONS_MAX; i++)
			put_option(&b, i % 2 ? 99 : OPT_STRUCTURED_REPLY, NULL, 0);
		CHECK_INT("64 options", NBD_HS_MORE, feed(h, &b, &out));
		CHECK_INT("64 replies", NBD_OPTIONS_MAX, replies(&out, 0, r, NBD_OPTIONS_MAX + 1));
		out.len = b.len = 0;
		put_go(&b, OPT_GO, "disk", NULL, 0);
		CHECK_INT("the 65th", NBD_HS_CLOSE, feed(h, &b, &out));
		CHECK_INT("the 65th: nothing sent", 0, out.len);
		CHECK(strstr(nbd_handshake_error(h), "options"), "reason: %s",
		      nbd_handshake_error(h));
		nbd_handshake_free(h);
		nbd_out_free(&out);
	}
}

/* A whole conversation fed at once and a byte at a time says the same. */
static void test_partial_feeds(void)
{
	static const uint16_t infos[] = { 3, 1, 2 };
	struct buf b = { .len = 0 };
	struct nbd_out whole = { 0 }, bytes = { 0 };
	struct nbd_handshake *h1 = NULL, *h2 = NULL;
	size_t consumed, off = 0, tail;

	put32(&b, 1);
	put_option(&b, OPT_STRUCTURED_REPLY, NULL, 0);
	put_option(&b, OPT_LIST, NULL, 0);
	put_go(&b, OPT_INFO, "ro", infos, 3);
	put_go(&b, OPT_GO, "nope", infos, 3);
	put_go(&b, OPT_GO, "disk", infos, 3);
	tail = b.len;
	put_bytes(&b, "\x25\x60\x95\x13 more", 9);

	nbd_handshake_new(lookup, list, NULL, &whole, &h1);
	CHECK_INT("whole", NBD_HS_GO, nbd_handshake_input(h1, b.data, b.len, &consumed, &whole));
	CHECK_INT("whole consumed", tail, consumed);

	nbd_handshake_new(lookup, list, NULL, &bytes, &h2);
	for (size_t end = 1; end <= b.len; end++) {
		enum nbd_handshake_result res =
			nbd_handshake_input(h2, b.data + off, end - off, &consumed, &bytes);

		off += consumed;
		if (res != NBD_HS_MORE) {
			CHECK_INT("byte at a time", NBD_HS_GO, res);
			break;
		}
	}
	CHECK_INT("byte at a time consumed", tail, off);
	CHECK(whole.len == bytes.len && !memcmp(whole.data, bytes.data, whole.len),
	      "same replies: %zu bytes whole, %zu a byte at a time", whole.len, bytes.len);
	CHECK_STR("byte at a time export", "disk", nbd_handshake_export(h2));
	nbd_handshake_free(h1);
	nbd_handshake_free(h2);
	nbd_out_free(&whole);
	nbd_out_free(&bytes);
}

/* ---- transmission ---- */

static void put_request(uint8_t *p, uint32_t magic, uint16_t flags, uint16_t type, uint64_t cookie,
			uint64_t offset, uint32_t length)
{
	put_be32(p, magic);
	put_be16(p + 4, flags);
	put_be16(p + 6, type);
	put_be64(p + 8, cookie);
	put_be64(p + 16, offset);
	put_be32(p + 24, length);
}

static void test_request_parse(void)
{
	uint8_t p[NBD_REQUEST_SIZE + 4];
	struct nbd_request r = { 0 };

	put_request(p, 0x25609513, 0x0102, 0x0304, 0x1122334455667788ull, 0x99aabbccddeeff00ull,
		    0xdeadbeef);
	for (size_t len = 0; len < NBD_REQUEST_SIZE; len++)
		CHECK_INT("short request", 0, nbd_request_parse(p, len, &r));
	CHECK_INT("request", NBD_REQUEST_SIZE, nbd_request_parse(p, sizeof(p), &r));
	CHECK_INT("flags", 0x0102, r.flags);
	CHECK_INT("type", 0x0304, r.type);
	CHECK(r.cookie == 0x1122334455667788ull, "cookie: 0x%llx", (unsigned long long)r.cookie);
	CHECK(r.offset == 0x99aabbccddeeff00ull, "offset: 0x%llx", (unsigned long long)r.offset);
	CHECK_HEX32("length", 0xdeadbeef, r.length);

	for (int i = 0; i < 4; i++) {
		uint8_t q[NBD_REQUEST_SIZE];

		memcpy(q, p, sizeof(q));
		q[i] ^= 0x40;
		CHECK_INT("bad magic", -EPROTO, nbd_request_parse(q, sizeof(q), &r));
		CHECK_INT("bad magic, 4 bytes in", -EPROTO, nbd_request_parse(q, 4, &r));
	}
	/* The simple reply's magic is not a request's. */
	put_request(p, 0x67446698, 0, 0, 0, 0, 0);
	CHECK_INT("reply magic", -EPROTO, nbd_request_parse(p, NBD_REQUEST_SIZE, &r));
}

static void test_request_check(void)
{
	const struct nbd_export rw = { .size = 1 << 20, .max_block = 1 << 16 };
	const struct nbd_export ro = { .size = 1 << 20, .read_only = true };
	const struct nbd_export aligned = {
		.size = 1 << 20, .min_block = 512, .preferred_block = 4096, .max_block = 1 << 20
	};
	const struct {
		const struct nbd_export *e;
		uint16_t type, flags;
		uint64_t offset;
		uint32_t length;
		uint32_t error;
	} cases[] = {
		/* served */
		{ &rw, NBD_CMD_READ, 0, 0, 4096, 0 },
		{ &rw, NBD_CMD_READ, 0, (1 << 20) - 1, 1, 0 },
		{ &rw, NBD_CMD_WRITE, 0, 0, 1 << 16, 0 },
		{ &rw, NBD_CMD_WRITE, NBD_CMD_FLAG_FUA, 1, 511, 0 },
		{ &rw, NBD_CMD_TRIM, NBD_CMD_FLAG_FUA, 0, 1 << 20, 0 }, /* over max: no payload */
		{ &rw, NBD_CMD_WRITE_ZEROES, NBD_CMD_FLAG_NO_HOLE | NBD_CMD_FLAG_FUA, 0, 1 << 20,
		  0 },
		{ &rw, NBD_CMD_FLUSH, 0, 0, 0, 0 },
		{ &rw, NBD_CMD_FLUSH, NBD_CMD_FLAG_FUA, 0, 0, 0 },
		{ &rw, NBD_CMD_READ, NBD_CMD_FLAG_FUA, 0, 1, 0 }, /* FUA valid on all */
		{ &rw, NBD_CMD_DISC, 0, 0, 0, 0 },
		{ &ro, NBD_CMD_READ, 0, 0, 1 << 20, 0 },
		{ &ro, NBD_CMD_FLUSH, 0, 0, 0, 0 },
		{ &aligned, NBD_CMD_WRITE, 0, 512, 1024, 0 },
		/* flags */
		{ &rw, NBD_CMD_READ, NBD_CMD_FLAG_NO_HOLE, 0, 1, NBD_EINVAL },
		{ &rw, NBD_CMD_WRITE, NBD_CMD_FLAG_NO_HOLE, 0, 1, NBD_EINVAL },
		{ &rw, NBD_CMD_READ, NBD_CMD_FLAG_DF, 0, 1, NBD_EINVAL }, /* no SEND_DF */
		{ &rw, NBD_CMD_WRITE_ZEROES, NBD_CMD_FLAG_FAST_ZERO, 0, 1, NBD_EINVAL },
		{ &rw, NBD_CMD_FLUSH, NBD_CMD_FLAG_NO_HOLE, 0, 0, NBD_EINVAL },
		{ &rw, NBD_CMD_TRIM, 0x8000, 0, 1, NBD_EINVAL },
		/* commands */
		{ &rw, NBD_CMD_CACHE, 0, 0, 1, NBD_EINVAL },
		{ &rw, NBD_CMD_BLOCK_STATUS, 0, 0, 1, NBD_EINVAL },
		{ &rw, 8, 0, 0, 1, NBD_EINVAL },
		{ &rw, 0xffff, 0, 0, 0, NBD_EINVAL },
		/* read-only */
		{ &ro, NBD_CMD_WRITE, 0, 0, 1, NBD_EPERM },
		{ &ro, NBD_CMD_TRIM, 0, 0, 1, NBD_EPERM },
		{ &ro, NBD_CMD_WRITE_ZEROES, 0, 0, 1, NBD_EPERM },
		{ &ro, NBD_CMD_WRITE, 0, 1 << 20, 1, NBD_EPERM }, /* before the range */
		/* lengths */
		{ &rw, NBD_CMD_READ, 0, 0, 0, NBD_EINVAL },
		{ &rw, NBD_CMD_WRITE, 0, 0, 0, NBD_EINVAL },
		{ &rw, NBD_CMD_TRIM, 0, 0, 0, NBD_EINVAL },
		{ &rw, NBD_CMD_WRITE_ZEROES, 0, 0, 0, NBD_EINVAL },
		{ &rw, NBD_CMD_READ, 0, 0, (1 << 16) + 1, NBD_EINVAL },
		{ &rw, NBD_CMD_WRITE, 0, 0, (1 << 16) + 1, NBD_EINVAL },
		{ &ro, NBD_CMD_READ, 0, 0, (32 << 20) + 1, NBD_EINVAL }, /* default max */
		{ &rw, NBD_CMD_FLUSH, 0, 0, 1, NBD_EINVAL },
		{ &rw, NBD_CMD_FLUSH, 0, 1, 0, NBD_EINVAL },
		{ &rw, NBD_CMD_DISC, 0, 0, 1, NBD_EINVAL },
		/* alignment */
		{ &aligned, NBD_CMD_READ, 0, 1, 512, NBD_EINVAL },
		{ &aligned, NBD_CMD_WRITE, 0, 0, 100, NBD_EINVAL },
		{ &aligned, NBD_CMD_TRIM, 0, 256, 512, NBD_EINVAL },
		/* range */
		{ &rw, NBD_CMD_READ, 0, 1 << 20, 1, NBD_EINVAL },
		{ &rw, NBD_CMD_READ, 0, (1 << 20) - 1, 2, NBD_EINVAL },
		{ &rw, NBD_CMD_TRIM, 0, (1 << 20) - 1, 2, NBD_EINVAL },
		{ &rw, NBD_CMD_WRITE, 0, (1 << 20) - 1, 2, NBD_ENOSPC },
		{ &rw, NBD_CMD_WRITE_ZEROES, 0, 1 << 20, 1, NBD_ENOSPC },
		{ &rw, NBD_CMD_READ, 0, UINT64_MAX, 1, NBD_EINVAL },
		{ &rw, NBD_CMD_WRITE, 0, UINT64_MAX - 10, 4096, NBD_ENOSPC }, /* wraps */
		{ &rw, NBD_CMD_TRIM, 0, UINT64_MAX - 10, 0xffffffff, NBD_EINVAL },
	};

	for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
		struct nbd_request r = { .flags = cases[i].flags,
					 .type = cases[i].type,
					 .cookie = i,
					 .offset = cases[i].offset,
					 .length = cases[i].length };
		const char *why = "unset";
		uint32_t err = nbd_request_check(&r, cases[i].e, &why);
		char what[96];

		snprintf(what, sizeof(what), "case %zu: %s flags 0x%x offset %llu length %u", i,
			 nbd_cmd_name(r.type), r.flags, (unsigned long long)r.offset, r.length);
		CHECK_INT(what, cases[i].error, err);
		if (err)
			CHECK(why && *why, "%s: no reason", what);
		else
			CHECK(why == NULL, "%s: a reason with no error", what);
	}
}

static void test_reply_simple(void)
{
	static const uint8_t expected[32] = {
		0x67, 0x44, 0x66, 0x98, 0,    0,    0,	  0,	0x01, 0x02, 0x03,
		0x04, 0x05, 0x06, 0x07, 0x08, 0x67, 0x44, 0x66, 0x98, 0,    0,
		0,    0x1c, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xfe,
	};
	struct nbd_out out = { 0 };

	CHECK_INT("reply", 0, nbd_reply_simple(&out, 0x0102030405060708ull, 0));
	CHECK_INT("reply", 0, nbd_reply_simple(&out, 0xfffffffffffffffeull, NBD_ENOSPC));
	CHECK(out.len == 32 && !memcmp(out.data, expected, 32), "reply bytes: %zu bytes", out.len);
	nbd_out_consume(&out, 16);
	CHECK(out.len == 16 && !memcmp(out.data, expected + 16, 16), "consume: %zu bytes", out.len);
	CHECK_INT("append", 0, nbd_out_append(&out, "xyz", 3));
	CHECK(out.len == 19 && !memcmp(out.data + 16, "xyz", 3), "append bytes: wrong");
	nbd_out_free(&out);
	CHECK(out.data == NULL && out.len == 0 && out.cap == 0, "freed: not reset");
}

static void test_errno(void)
{
	const struct {
		int err;
		uint32_t nbd;
	} cases[] = {
		{ 0, 0 },
		{ EIO, NBD_EIO },
		{ -EIO, NBD_EIO },
		{ ENOSPC, NBD_ENOSPC },
		{ -ENOSPC, NBD_ENOSPC },
		{ EDQUOT, NBD_ENOSPC },
		{ EFBIG, NBD_ENOSPC },
		{ EPERM, NBD_EPERM },
		{ -EPERM, NBD_EPERM },
		{ EINVAL, NBD_EINVAL },
		{ ENOMEM, NBD_ENOMEM },
		{ EOVERFLOW, NBD_EOVERFLOW },
		{ ENOTSUP, NBD_ENOTSUP },
		{ EOPNOTSUPP, NBD_ENOTSUP },
		{ ESHUTDOWN, NBD_ESHUTDOWN },
		{ -ESHUTDOWN, NBD_ESHUTDOWN },
		{ EACCES, NBD_EIO },
		{ EBADMSG, NBD_EIO },
		{ ETIMEDOUT, NBD_EIO },
		{ 99999, NBD_EIO },
	};

	/* The protocol's numbers are fixed, whatever the host's errno says. */
	CHECK_INT("NBD_EPERM", 1, NBD_EPERM);
	CHECK_INT("NBD_EIO", 5, NBD_EIO);
	CHECK_INT("NBD_ENOMEM", 12, NBD_ENOMEM);
	CHECK_INT("NBD_EINVAL", 22, NBD_EINVAL);
	CHECK_INT("NBD_ENOSPC", 28, NBD_ENOSPC);
	CHECK_INT("NBD_EOVERFLOW", 75, NBD_EOVERFLOW);
	CHECK_INT("NBD_ENOTSUP", 95, NBD_ENOTSUP);
	CHECK_INT("NBD_ESHUTDOWN", 108, NBD_ESHUTDOWN);
	for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
		char what[48];

		snprintf(what, sizeof(what), "errno %d", cases[i].err);
		CHECK_INT(what, cases[i].nbd, nbd_error_from_errno(cases[i].err));
	}
}

int main(void)
{
	test_greeting();
	test_client_flags();
	test_export_name();
	test_go_info();
	test_list();
	test_other_options();
	test_bounds();
	test_partial_feeds();
	test_request_parse();
	test_request_check();
	test_reply_simple();
	test_errno();
	if (failures) {
		fprintf(stderr, "%d of %d checks failed\n", failures, checks);
		return 1;
	}
	printf("%d checks passed\n", checks);
	return 0;
}
