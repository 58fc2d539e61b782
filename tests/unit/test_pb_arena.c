/* pb_arena: messages unpacked into one arena read back intact; a message
 * unpacked into another's arena lives as long as that one (freeing it does
 * nothing); a bytes field larger than the arena's block, and a payload whose
 * pieces outgrow its block, get blocks of their own; what does not parse
 * leaves nothing behind (ASan's leak check in the sanitizer build); the
 * arena kept from the last free serves one message at a time.
 *
 * Early frees show in two ways: ASan reports the read of freed memory, and
 * without it the churn() between unpacking and reading hands the freed
 * blocks out again and scribbles on them, so the contents differ. */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "check.h"
#include "partner.pb-c.h"
#include "pb_arena.h"

typedef Ftvm__Partner__Envelope Envelope;

/* Mallocs of the sizes the arena used, filled and freed, then more kept
 * until the end: a block freed before its time is handed out and overwritten. */
static void *kept[64];
static size_t n_kept;

static void churn(size_t size)
{
	for (size_t s = 64; s <= 4 * size; s *= 2) {
		void *p = xmalloc(s);

		memset(p, 0xa5, s);
		free(p);
		if (n_kept < sizeof(kept) / sizeof(kept[0])) {
			kept[n_kept] = xmalloc(s);
			memset(kept[n_kept++], 0x5a, s);
		}
	}
}

static uint8_t *pack(const ProtobufCMessage *m, size_t *ret_len)
{
	uint8_t *buf = xmalloc(protobuf_c_message_get_packed_size(m));

	*ret_len = protobuf_c_message_pack(m, buf);
	return buf;
}

static uint8_t *pack_write_page(const char *guid, uint64_t page, const uint8_t *data, size_t len,
				size_t *ret_len)
{
	Envelope env = FTVM__PARTNER__ENVELOPE__INIT;
	Ftvm__Partner__WritePage wp = FTVM__PARTNER__WRITE_PAGE__INIT;

	wp.guid = (char *)guid;
	wp.page = page;
	wp.data.data = (uint8_t *)data;
	wp.data.len = len;
	env.sender = (char *)"a";
	env.seq = page + 1;
	env.message_case = FTVM__PARTNER__ENVELOPE__MESSAGE_WRITE_PAGE;
	env.write_page = &wp;
	return pack(&env.base, ret_len);
}

static void check_write_page(const char *ctx, const Envelope *e, const char *guid, uint64_t page,
			     const uint8_t *data, size_t len)
{
	CHECK(e && e->message_case == FTVM__PARTNER__ENVELOPE__MESSAGE_WRITE_PAGE,
	      "%s: not a WritePage", ctx);
	if (!e || !e->write_page)
		return;
	CHECK_STR(ctx, "a", e->sender);
	CHECK_INT(ctx, page + 1, e->seq);
	CHECK_STR(ctx, guid, e->write_page->guid);
	CHECK_INT(ctx, page, e->write_page->page);
	CHECK_INT(ctx, len, e->write_page->data.len);
	CHECK(e->write_page->data.len == len && memcmp(e->write_page->data.data, data, len) == 0,
	      "%s: the data differs", ctx);
}

static void fill(uint8_t *p, size_t len)
{
	for (size_t i = 0; i < len; i++)
		p[i] = (uint8_t)rng();
}

/* A Batch of writes, its envelopes unpacked into the Batch's arena and
 * freed (which must do nothing) before anything is read. */
static void test_batch_shares_arena(void)
{
	enum {
		N = 4
	};
	static uint8_t data[N][4096];
	ProtobufCBinaryData items[N];
	Ftvm__Partner__Batch batch = FTVM__PARTNER__BATCH__INIT;
	Envelope outer = FTVM__PARTNER__ENVELOPE__INIT, *got, *inner[N];
	uint8_t *payload;
	size_t len;

	for (int i = 0; i < N; i++) {
		fill(data[i], sizeof(data[i]));
		items[i].data = pack_write_page("g-batch", (uint64_t)i, data[i], sizeof(data[i]),
						&items[i].len);
	}
	batch.n_envelopes = N;
	batch.envelopes = items;
	outer.sender = (char *)"a";
	outer.message_case = FTVM__PARTNER__ENVELOPE__MESSAGE_BATCH;
	outer.batch = &batch;
	payload = pack(&outer.base, &len);

	got = (Envelope *)pb_arena_unpack(&ftvm__partner__envelope__descriptor, len, payload);
	CHECK(got && got->batch && got->batch->n_envelopes == N, "batch: unpack failed");
	if (!got || !got->batch || got->batch->n_envelopes != N)
		goto out;
	for (int i = 0; i < N; i++) {
		const ProtobufCBinaryData *b = &got->batch->envelopes[i];

		inner[i] = (Envelope *)pb_arena_unpack_with(
			&got->base, &ftvm__partner__envelope__descriptor, b->len, b->data);
		CHECK(inner[i] != NULL, "batch item %d: unpack_with failed", i);
		pb_arena_free(inner[i] ? &inner[i]->base : NULL);
	}
	churn(2 * len);
	for (int i = 0; i < N; i++) {
		char ctx[32];

		snprintf(ctx, sizeof(ctx), "batch item %d", i);
		if (inner[i])
			check_write_page(ctx, inner[i], "g-batch", (uint64_t)i, data[i],
					 sizeof(data[i]));
		CHECK(got->batch->envelopes[i].len == items[i].len &&
			      memcmp(got->batch->envelopes[i].data, items[i].data, items[i].len) ==
				      0,
		      "batch item %d: the Batch's copy differs", i);
	}
	pb_arena_free(&got->base);
out:
	for (int i = 0; i < N; i++)
		free(items[i].data);
	free(payload);
}

/* A 1 MiB page unpacked into the arena of a Heartbeat, whose block holds
 * some 2 KiB: the page gets a block of its own, and the Heartbeat still
 * reads back after it. */
static void test_large_bytes_gets_a_block(void)
{
	size_t big_len = 1u << 20, hb_len, wp_len;
	uint8_t *big = xmalloc(big_len), *hb_payload, *wp_payload;
	Envelope hb = FTVM__PARTNER__ENVELOPE__INIT, *owner, *wp;
	Ftvm__Partner__Heartbeat beat = FTVM__PARTNER__HEARTBEAT__INIT;

	fill(big, big_len);
	beat.sent_us = 123456789;
	hb.sender = (char *)"b";
	hb.message_case = FTVM__PARTNER__ENVELOPE__MESSAGE_HEARTBEAT;
	hb.heartbeat = &beat;
	hb_payload = pack(&hb.base, &hb_len);
	wp_payload = pack_write_page("g-big", 7, big, big_len, &wp_len);

	owner = (Envelope *)pb_arena_unpack(&ftvm__partner__envelope__descriptor, hb_len,
					    hb_payload);
	CHECK(owner != NULL, "heartbeat: unpack failed");
	if (!owner)
		goto out;
	wp = (Envelope *)pb_arena_unpack_with(&owner->base, &ftvm__partner__envelope__descriptor,
					      wp_len, wp_payload);
	CHECK(wp != NULL, "big page: unpack_with failed");
	churn(4096);
	if (wp)
		check_write_page("big page", wp, "g-big", 7, big, big_len);
	CHECK_STR("heartbeat sender", "b", owner->sender);
	CHECK(owner->heartbeat && owner->heartbeat->sent_us == 123456789,
	      "heartbeat: sent_us differs");
	pb_arena_free(&owner->base);
out:
	free(big);
	free(hb_payload);
	free(wp_payload);
}

/* A message made in another's arena (a Batch's envelope read by hand):
 * initialised, freeing it does nothing, it and what is allocated for it
 * stay until the owner goes (ASan says if not), and a message unpacked
 * after it into the same arena is whole. */
static void test_message_new_with(void)
{
	Envelope hb = FTVM__PARTNER__ENVELOPE__INIT, *owner, *made, *after;
	Ftvm__Partner__Heartbeat beat = FTVM__PARTNER__HEARTBEAT__INIT;
	size_t hb_len;
	uint8_t *hb_payload;
	char *name;

	beat.sent_us = 42;
	hb.sender = (char *)"b";
	hb.message_case = FTVM__PARTNER__ENVELOPE__MESSAGE_HEARTBEAT;
	hb.heartbeat = &beat;
	hb_payload = pack(&hb.base, &hb_len);
	owner = (Envelope *)pb_arena_unpack(&ftvm__partner__envelope__descriptor, hb_len,
					    hb_payload);
	CHECK(owner != NULL, "heartbeat: unpack failed");
	if (!owner)
		goto out;
	made = (Envelope *)pb_arena_message_new_with(&owner->base,
						     &ftvm__partner__envelope__descriptor);
	CHECK(made != NULL, "message_new_with failed");
	if (!made)
		goto free_owner;
	CHECK(made->base.descriptor == &ftvm__partner__envelope__descriptor &&
		      made->message_case == FTVM__PARTNER__ENVELOPE__MESSAGE__NOT_SET &&
		      made->seq == 0,
	      "not initialised");
	name = pb_arena_alloc(&made->base, 8);
	CHECK(name != NULL, "alloc for it failed");
	if (name)
		memcpy(name, "made-it", 8);
	pb_arena_free(&made->base); /* nothing: the owner's arena */
	churn(4096);
	after = (Envelope *)pb_arena_unpack_with(&owner->base, &ftvm__partner__envelope__descriptor,
						 hb_len, hb_payload);
	CHECK(after && after->heartbeat && after->heartbeat->sent_us == 42,
	      "unpacked after it: differs");
	CHECK(name && strcmp(name, "made-it") == 0, "its piece changed");
	made->seq = 7;
	CHECK(owner->heartbeat->sent_us == 42, "the owner changed");
free_owner:
	pb_arena_free(&owner->base);
out:
	free(hb_payload);
}

/* 5000 empty items: 2 bytes each on the wire, 16 each unpacked, so the
 * pieces outgrow the block sized from the payload. */
static void test_pieces_outgrow_the_block(void)
{
	enum {
		N = 5000
	};
	static ProtobufCBinaryData items[N];
	Ftvm__Partner__Batch batch = FTVM__PARTNER__BATCH__INIT;
	Envelope outer = FTVM__PARTNER__ENVELOPE__INIT, *got;
	uint8_t *payload;
	size_t len, bad = 0;

	for (size_t i = 0; i < N; i++)
		items[i] = (ProtobufCBinaryData){ .len = 0, .data = NULL };
	batch.n_envelopes = N;
	batch.envelopes = items;
	outer.sender = (char *)"a";
	outer.message_case = FTVM__PARTNER__ENVELOPE__MESSAGE_BATCH;
	outer.batch = &batch;
	payload = pack(&outer.base, &len);
	CHECK(len < 16 * N / 2, "the payload (%zu bytes) is not small against its pieces", len);

	got = (Envelope *)pb_arena_unpack(&ftvm__partner__envelope__descriptor, len, payload);
	CHECK(got && got->batch, "many items: unpack failed");
	if (got && got->batch) {
		churn(2 * len);
		CHECK_INT("many items: count", N, got->batch->n_envelopes);
		for (size_t i = 0; i < got->batch->n_envelopes; i++)
			bad += got->batch->envelopes[i].len != 0;
		CHECK_INT("many items: non-empty", 0, bad);
		CHECK_STR("many items: sender", "a", got->sender);
	}
	pb_arena_free(got ? &got->base : NULL);
	free(payload);
}

/* The arena freed last is kept and used again (pb_arena.c, spare): never
 * for two live messages at once, never for one it is too small for, and a
 * message unpacked into it reads back intact. */
static void test_spare_reused(void)
{
	static uint8_t data[4][65536];
	static const size_t lens[4] = { 4096, 100, 65536, 4096 };
	Envelope *live[4] = { NULL };
	uint8_t *payload[4];
	size_t len[4];

	for (int i = 0; i < 4; i++) {
		fill(data[i], lens[i]);
		payload[i] = pack_write_page("a-9", (uint64_t)i, data[i], lens[i], &len[i]);
	}
	/* A 4 KiB write freed: the next, smaller, takes its arena; the 64 KiB
	 * one after it cannot share it and is not put in it. */
	live[0] = (Envelope *)pb_arena_unpack(&ftvm__partner__envelope__descriptor, len[0],
					      payload[0]);
	pb_arena_free(live[0] ? &live[0]->base : NULL);
	for (int i = 1; i < 4; i++)
		live[i] = (Envelope *)pb_arena_unpack(&ftvm__partner__envelope__descriptor, len[i],
						      payload[i]);
	churn(2 * len[2]);
	for (int i = 1; i < 4; i++) {
		char ctx[32];

		snprintf(ctx, sizeof(ctx), "live message %d", i);
		check_write_page(ctx, live[i], "a-9", (uint64_t)i, data[i], lens[i]);
	}
	/* Freed in another order, then taken again: still intact. */
	pb_arena_free(live[2] ? &live[2]->base : NULL);
	pb_arena_free(live[1] ? &live[1]->base : NULL);
	live[0] = (Envelope *)pb_arena_unpack(&ftvm__partner__envelope__descriptor, len[0],
					      payload[0]);
	check_write_page("after the frees", live[0], "a-9", 0, data[0], lens[0]);
	check_write_page("the one left", live[3], "a-9", 3, data[3], lens[3]);
	pb_arena_free(live[0] ? &live[0]->base : NULL);
	pb_arena_free(live[3] ? &live[3]->base : NULL);
	for (int i = 0; i < 4; i++)
		free(payload[i]);
}

static void test_garbage(void)
{
	/* Field 2 (sender, a string) says 100 bytes and 3 follow. */
	static const uint8_t junk[] = { 0x12, 100, 'a', 'b', 'c' };

	CHECK(pb_arena_unpack(&ftvm__partner__envelope__descriptor, sizeof(junk), junk) == NULL,
	      "a truncated string parsed");
	pb_arena_free(NULL);
}

int main(void)
{
	rng_seed(0x9b1a5e);
	test_batch_shares_arena();
	test_large_bytes_gets_a_block();
	test_pieces_outgrow_the_block();
	test_spare_reused();
	test_garbage();
	test_message_new_with();
	for (size_t i = 0; i < n_kept; i++)
		free(kept[i]);
	if (failures) {
		fprintf(stderr, "%d of %d checks failed\n", failures, checks);
		return 1;
	}
	printf("pb_arena: all %d checks passed\n", checks);
	return 0;
}
