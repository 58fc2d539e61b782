/* common/pb_pieces.c: a message packed in pieces adds up to exactly what
 * protobuf_c_message_pack makes, with the large bytes fields named
 * referenced, not copied, and the others copied; messages, fields and bytes
 * appended one after another add up to their bytes end to end, also where
 * the walk gives a message to protobuf-c halfway, and again after a clear
 * that kept the memory; flattening keeps the bytes. */
#include <errno.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "check.h"
#include "pb_pieces.h"

#include "partner.pb-c.h"

typedef Ftvm__Partner__Envelope Envelope;

static uint8_t *packed(const ProtobufCMessage *m, size_t *ret_len)
{
	size_t len = protobuf_c_message_get_packed_size(m);
	uint8_t *buf = xmalloc(len ? len : 1);

	protobuf_c_message_pack(m, buf);
	*ret_len = len;
	return buf;
}

/* The pieces, end to end. */
static uint8_t *joined(const struct pb_pieces *p)
{
	struct iovec *iov = xmalloc((p->n ? p->n : 1) * sizeof(*iov));
	uint8_t *buf = xmalloc(p->len ? p->len : 1), *at = buf;

	pb_pieces_iov(p, iov);
	for (size_t i = 0; i < p->n; i++) {
		memcpy(at, iov[i].iov_base, iov[i].iov_len);
		at += iov[i].iov_len;
	}
	CHECK((size_t)(at - buf) == p->len, "pieces add up to %zu bytes, len says %zu",
	      (size_t)(at - buf), p->len);
	free(iov);
	return buf;
}

static bool references(const struct pb_pieces *p, const void *data)
{
	for (size_t i = 0; i < p->n; i++)
		if (p->piece[i].ref == data)
			return true;
	return false;
}

static void write_page(Envelope *env, Ftvm__Partner__WritePage *wp, uint8_t *data, size_t len)
{
	ftvm__partner__envelope__init(env);
	ftvm__partner__write_page__init(wp);
	env->version = 1;
	env->sender = "a";
	env->seq = 77;
	env->lsn = 1234567;
	wp->guid = "a-1";
	wp->page = 3;
	wp->crc32c = 0xdeadbeef;
	wp->data = (ProtobufCBinaryData){ .len = len, .data = data };
	env->message_case = FTVM__PARTNER__ENVELOPE__MESSAGE_WRITE_PAGE;
	env->write_page = wp;
}

/* Packed in pieces (refs named) and packed whole: the same bytes. */
static void check_same(const char *what, const ProtobufCMessage *m, const ProtobufCBinaryData *refs,
		       size_t n_refs, struct pb_pieces *ret)
{
	size_t len;
	uint8_t *want = packed(m, &len), *got;

	memset(ret, 0, sizeof(*ret));
	CHECK(pb_pieces_add(ret, m, refs, n_refs) == 0, "%s: packs", what);
	CHECK(pb_pieces_size(m) == len, "%s: sized %zu, packed %zu", what, pb_pieces_size(m), len);
	got = joined(ret);
	CHECK(ret->len == len && memcmp(got, want, len) == 0, "%s: %zu bytes in pieces, %zu packed",
	      what, ret->len, len);
	free(got);
	free(want);
}

static void test_block_referenced(void)
{
	static const size_t sizes[] = {
		0, 1, 100, PB_PIECES_REF_MIN - 1, PB_PIECES_REF_MIN, 4096, 65536, 1 << 20
	};

	for (size_t k = 0; k < sizeof(sizes) / sizeof(sizes[0]); k++) {
		size_t len = sizes[k];
		uint8_t *data = xmalloc(len ? len : 1);
		Ftvm__Partner__WritePage wp;
		struct pb_pieces p;
		Envelope env;
		char what[64];

		for (size_t i = 0; i < len; i++)
			data[i] = (uint8_t)(i * 7 + k);
		write_page(&env, &wp, data, len);
		snprintf(what, sizeof(what), "WritePage of %zu bytes", len);
		/* Not named: copied, however long. */
		check_same(what, &env.base, NULL, 0, &p);
		CHECK(!references(&p, data) && p.n == 1, "%s, not named: referenced", what);
		pb_pieces_free(&p);
		check_same(what, &env.base, &wp.data, 1, &p);
		if (len >= PB_PIECES_REF_MIN) {
			CHECK(references(&p, data), "%s: the block is referenced", what);
			CHECK(p.own_len < 64, "%s: %zu bytes copied", what, p.own_len);
			CHECK(p.n == 3, "%s: head, block, tail: %zu pieces", what, p.n);
		} else {
			CHECK(!references(&p, data) && p.n == 1, "%s: copied, one piece (%zu)",
			      what, p.n);
		}
		/* Flattened: the same bytes, one piece of its own. */
		{
			size_t want_len;
			uint8_t *want = packed(&env.base, &want_len);
			const uint8_t *flat = pb_pieces_bytes(&p);

			CHECK(flat && p.n == 1 && !p.piece[0].ref, "%s: flat", what);
			CHECK(flat && p.len == want_len && memcmp(flat, want, want_len) == 0,
			      "%s: flattened bytes", what);
			memset(data, 0xee, len); /* the original may go now */
			CHECK(flat && memcmp(flat, want, want_len) == 0,
			      "%s: flattened references nothing", what);
			free(want);
		}
		pb_pieces_free(&p);
		free(data);
	}
}

static void test_empty(void)
{
	Envelope env = FTVM__PARTNER__ENVELOPE__INIT;
	struct pb_pieces p;

	check_same("an empty envelope", &env.base, NULL, 0, &p);
	CHECK(p.len == 0 && p.n == 0, "nothing: %zu bytes, %zu pieces", p.len, p.n);
	CHECK(pb_pieces_bytes(&p) != NULL && p.len == 0, "an empty payload has bytes");
	pb_pieces_free(&p);
}

/* want + the bytes of m packed, in *at, growing it. */
static void then_packed(uint8_t **want, size_t *len, const ProtobufCMessage *m)
{
	size_t more = protobuf_c_message_get_packed_size(m);

	*want = realloc(*want, *len + more + 1);
	CHECK(*want != NULL, "room for what is wanted");
	protobuf_c_message_pack(m, *want + *len);
	*len += more;
}

/* Appended one after another: bytes written into room, a message as a field of an
 * Envelope (its key and length, then its fields, its block referenced), a
 * whole message, and an AllocationDigest whose header the walk packs
 * before its repeated numbers send it to protobuf-c, which starts it again:
 * what is appended adds up to each packed, end to end. Cleared, the same
 * again in the memory kept. */
static void test_appended(void)
{
	static uint8_t block[8192];
	Envelope env, member_only = FTVM__PARTNER__ENVELOPE__INIT;
	Ftvm__Partner__WritePage wp;
	Ftvm__Partner__AllocationDigest digest = FTVM__PARTNER__ALLOCATION_DIGEST__INIT;
	Ftvm__Partner__Header header = FTVM__PARTNER__HEADER__INIT;
	uint64_t versions[] = { 1, 300, 70000 };
	static const uint8_t raw[] = { 0x08, 0x01, 0x12, 0x01, 0x61 };
	struct pb_pieces p = { 0 };
	uint8_t *want = NULL, *got, *own;
	size_t len = 0;

	memset(block, 0x5c, sizeof(block));
	write_page(&env, &wp, block, sizeof(block));
	member_only.message_case = FTVM__PARTNER__ENVELOPE__MESSAGE_WRITE_PAGE;
	member_only.write_page = &wp;
	header.guid = "a-7";
	header.pages = 3;
	digest.header = &header;
	digest.n_page_version = 3;
	digest.page_version = versions;

	want = xmalloc(sizeof(raw));
	memcpy(want, raw, sizeof(raw));
	len = sizeof(raw);
	then_packed(&want, &len, &member_only.base);
	then_packed(&want, &len, &env.base);
	then_packed(&want, &len, &digest.base);

	for (int round = 0; round < 2; round++) {
		uint8_t *room = pb_pieces_room(&p, 4 * sizeof(raw));

		CHECK(room != NULL, "room for bytes");
		memcpy(room, raw, sizeof(raw));
		CHECK(pb_pieces_added(&p, sizeof(raw)) == 0, "bytes written into the room");
		CHECK(pb_pieces_add_field(&p, FTVM__PARTNER__ENVELOPE__MESSAGE_WRITE_PAGE, &wp.base,
					  pb_pieces_size(&wp.base), &wp.data, 1) == 0,
		      "a field appended");
		CHECK(pb_pieces_add(&p, &env.base, &wp.data, 1) == 0, "a message appended");
		CHECK(pb_pieces_add(&p, &digest.base, NULL, 0) == 0, "a digest appended");
		got = joined(&p);
		CHECK(p.len == len && memcmp(got, want, len) == 0,
		      "round %d: %zu bytes appended, %zu packed end to end", round, p.len, len);
		CHECK(references(&p, block) && p.n == 5,
		      "round %d: the block referenced twice, between copies: %zu pieces", round,
		      p.n);
		free(got);
		own = p.own;
		pb_pieces_clear(&p);
		CHECK(p.n == 0 && p.len == 0 && p.own == own, "round %d: cleared, memory kept",
		      round);
	}
	pb_pieces_free(&p);
	free(want);
}

/* Random WritePages against protobuf-c, sizes around the threshold. */
static void test_random(void)
{
	for (int round = 0; round < 500; round++) {
		size_t len = rng() % 3 ? rng() % (2 * PB_PIECES_REF_MIN) : rng() % 70000;
		uint8_t *data = xmalloc(len ? len : 1);
		Ftvm__Partner__WritePage wp;
		struct pb_pieces p;
		Envelope env;

		for (size_t i = 0; i < len; i++)
			data[i] = (uint8_t)rng();
		write_page(&env, &wp, data, len);
		env.seq = rng();
		wp.page = (uint64_t)rng() << (rng() % 32);
		check_same("random WritePage", &env.base, &wp.data, 1, &p);
		pb_pieces_free(&p);
		free(data);
	}
}

/* ---- Every message of the partner protocol, filled at random ---------- */

/* What a random message is made of, freed after each check. */
static void *made[4096];
static size_t n_made;

static void *make(size_t n)
{
	void *p = xcalloc(n ? n : 1);

	if (n_made == sizeof(made) / sizeof(made[0])) {
		fprintf(stderr, "a random message too large for the test\n");
		exit(99);
	}
	made[n_made++] = p;
	return p;
}

static void made_free(void)
{
	while (n_made)
		free(made[--n_made]);
}

/* Long enough bytes fields, to be named: referenced when packed. */
static ProtobufCBinaryData named_refs[64];
static size_t n_named;

static ProtobufCMessage *random_message(const ProtobufCMessageDescriptor *d, int depth);

/* A random value of f into value: often zero, empty or NULL. */
static void random_value(const ProtobufCFieldDescriptor *f, void *value, int depth)
{
	uint32_t pick = rng() % 8;

	switch (f->type) {
	case PROTOBUF_C_TYPE_BOOL:
		*(protobuf_c_boolean *)value = pick < 4;
		break;
	case PROTOBUF_C_TYPE_ENUM:
	case PROTOBUF_C_TYPE_INT32:
	case PROTOBUF_C_TYPE_SINT32:
		*(int32_t *)value = pick < 2   ? 0
				    : pick < 3 ? -(int32_t)(rng() % 1000)
					       : (int32_t)rng();
		break;
	case PROTOBUF_C_TYPE_UINT32:
	case PROTOBUF_C_TYPE_FIXED32:
	case PROTOBUF_C_TYPE_SFIXED32:
		*(uint32_t *)value = pick < 2 ? 0 : rng() >> (rng() % 32);
		break;
	case PROTOBUF_C_TYPE_INT64:
	case PROTOBUF_C_TYPE_UINT64:
	case PROTOBUF_C_TYPE_SINT64:
	case PROTOBUF_C_TYPE_FIXED64:
	case PROTOBUF_C_TYPE_SFIXED64:
		*(uint64_t *)value = pick < 2 ? 0 : ((uint64_t)rng() << 32 | rng()) >> (rng() % 64);
		break;
	case PROTOBUF_C_TYPE_FLOAT:
		*(float *)value = pick < 2 ? 0 : (float)rng();
		break;
	case PROTOBUF_C_TYPE_DOUBLE:
		*(double *)value = pick < 2 ? 0 : (double)rng();
		break;
	case PROTOBUF_C_TYPE_STRING: {
		size_t len = rng() % 40;
		char *str = make(len + 1);

		for (size_t i = 0; i < len; i++)
			str[i] = (char)('a' + rng() % 26);
		*(char **)value = pick < 2 ? NULL : pick < 3 ? (char *)"" : str;
		break;
	}
	case PROTOBUF_C_TYPE_BYTES: {
		ProtobufCBinaryData *b = value;

		b->len = pick < 2 ? 0 : pick < 5 ? rng() % 100 : rng() % (3 * PB_PIECES_REF_MIN);
		b->data = make(b->len);
		for (size_t i = 0; i < b->len; i++)
			b->data[i] = (uint8_t)rng();
		if (b->len >= PB_PIECES_REF_MIN && n_named < 64)
			named_refs[n_named++] = *b;
		break;
	}
	case PROTOBUF_C_TYPE_MESSAGE:
		*(ProtobufCMessage **)value =
			pick < 2 || depth > 4 ? NULL : random_message(f->descriptor, depth + 1);
		break;
	}
}

/* d filled at random: each oneof set to one of its members now and then,
 * repeated fields with 0 to 3 values, now and then an unknown field. */
static ProtobufCMessage *random_message(const ProtobufCMessageDescriptor *d, int depth)
{
	ProtobufCMessage *m = make(d->sizeof_message);
	uint8_t *base = (uint8_t *)m;

	d->message_init(m);
	for (unsigned i = 0; i < d->n_fields; i++) {
		const ProtobufCFieldDescriptor *f = &d->fields[i];
		void *member = base + f->offset;

		if (f->flags & PROTOBUF_C_FIELD_FLAG_ONEOF) {
			uint32_t *oneof_case = (uint32_t *)(base + f->quantifier_offset);

			if (*oneof_case || rng() % 6)
				continue;
			*oneof_case = f->id;
			random_value(f, member, depth);
		} else if (f->label == PROTOBUF_C_LABEL_REPEATED) {
			size_t n = rng() % 4, width;

			switch (f->type) {
			case PROTOBUF_C_TYPE_BYTES:
				width = sizeof(ProtobufCBinaryData);
				break;
			case PROTOBUF_C_TYPE_INT64:
			case PROTOBUF_C_TYPE_UINT64:
			case PROTOBUF_C_TYPE_SINT64:
			case PROTOBUF_C_TYPE_FIXED64:
			case PROTOBUF_C_TYPE_SFIXED64:
			case PROTOBUF_C_TYPE_DOUBLE:
			case PROTOBUF_C_TYPE_STRING:
			case PROTOBUF_C_TYPE_MESSAGE:
				width = 8;
				break;
			default:
				width = 4;
			}
			*(size_t *)(base + f->quantifier_offset) = n;
			*(void **)member = make(n * width);
			for (size_t j = 0; j < n; j++) {
				void *value = *(uint8_t **)member + j * width;

				random_value(f, value, depth);
				/* protobuf-c packs no NULL element. */
				if (f->type == PROTOBUF_C_TYPE_STRING && !*(char **)value)
					*(char **)value = (char *)"";
				if (f->type == PROTOBUF_C_TYPE_MESSAGE && !*(void **)value)
					*(void **)value = random_message(f->descriptor, 99);
			}
		} else if (f->label == PROTOBUF_C_LABEL_NONE) {
			random_value(f, member, depth);
		}
	}
	if (rng() % 20 == 0) {
		ProtobufCMessageUnknownField *u = make(sizeof(*u));

		u->tag = 1000 + rng() % 1000;
		u->wire_type = PROTOBUF_C_WIRE_TYPE_VARINT;
		u->len = 1;
		u->data = make(1);
		u->data[0] = 0x2a;
		m->n_unknown_fields = 1;
		m->unknown_fields = u;
	}
	return m;
}

/* Every message type the partner channel carries (an Envelope and all it
 * can hold), into list; returns how many. */
static size_t reachable(const ProtobufCMessageDescriptor *d,
			const ProtobufCMessageDescriptor **list, size_t n, size_t cap)
{
	for (size_t i = 0; i < n; i++)
		if (list[i] == d)
			return n;
	if (n == cap)
		return n;
	list[n++] = d;
	for (unsigned i = 0; i < d->n_fields; i++)
		if (d->fields[i].type == PROTOBUF_C_TYPE_MESSAGE)
			n = reachable(d->fields[i].descriptor, list, n, cap);
	return n;
}

/* Random messages of every type, and random Envelopes, packed in pieces
 * (their long bytes named) against protobuf-c: the same bytes, whether the
 * walk packs them or leaves them to protobuf-c. */
static void test_every_message(void)
{
	const ProtobufCMessageDescriptor *list[128];
	size_t n = reachable(&ftvm__partner__envelope__descriptor, list, 0, 128);
	unsigned failed_before = (unsigned)failures;

	CHECK(n > 30, "the partner protocol has %zu message types", n);
	for (size_t k = 0; k < n; k++) {
		for (int round = 0; round < 200; round++) {
			ProtobufCMessage *m;
			struct pb_pieces p;
			char what[128];

			n_named = 0;
			m = random_message(list[k], 0);
			snprintf(what, sizeof(what), "a random %s (round %d)", list[k]->short_name,
				 round);
			check_same(what, m, named_refs, n_named, &p);
			pb_pieces_free(&p);
			made_free();
			if ((unsigned)failures > failed_before + 5)
				return; /* enough said */
		}
	}
}

int main(void)
{
	rng_seed(0x5eed1e5);
	test_block_referenced();
	test_empty();
	test_appended();
	test_random();
	test_every_message();
	printf("pb_pieces: %d checks, %d failed\n", checks, failures);
	return failures ? 1 : 0;
}
