/* frame_seal() and frame_decode(): the header layout, round trips, partial
 * buffers, and every way a frame can be bad. */
#include <errno.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "check.h"
#include "crc32c.h"
#include "frame.h"

static uint32_t be32(const uint8_t *p)
{
	return (uint32_t)p[0] << 24 | (uint32_t)p[1] << 16 | (uint32_t)p[2] << 8 | p[3];
}

/* A frame with a random payload of len bytes, in a buffer with room for pad
 * more bytes after it (zeroed). */
static uint8_t *make_frame(size_t len, size_t pad)
{
	uint8_t *f = xcalloc(FRAME_HEADER_SIZE + len + pad);

	for (size_t i = 0; i < len; i++)
		f[FRAME_HEADER_SIZE + i] = (uint8_t)rng();
	frame_seal(f, len);
	return f;
}

static void test_layout(void)
{
	uint8_t *f = make_frame(5, 0);
	uint32_t crc;

	CHECK_INT("magic[0]", 'F', f[0]);
	CHECK_INT("magic[1]", 'V', f[1]);
	CHECK_INT("version", FRAME_VERSION, f[2]);
	CHECK_INT("flags", 0, f[3]);
	CHECK_INT("length", 5, be32(f + 4));
	crc = crc32c(crc32c(0, f, 8), f + FRAME_HEADER_SIZE, 5);
	CHECK_INT("checksum", crc, be32(f + 8));
	free(f);
}

static void test_round_trip(void)
{
	static const size_t lens[] = { 0, 1, 2, 11, 12, 13, 255, 4096, 65537, 1u << 20 };

	for (size_t i = 0; i < sizeof(lens) / sizeof(lens[0]); i++) {
		size_t len = lens[i];
		uint8_t *f = make_frame(len, 0);
		const uint8_t *payload = NULL;
		size_t payload_len = (size_t)-1;
		const char *why = NULL;
		char what[64];
		int r;

		r = frame_decode(f, FRAME_HEADER_SIZE + len, FRAME_MAX_PAYLOAD_DEFAULT, &payload,
				 &payload_len, &why);
		snprintf(what, sizeof(what), "decode of a %zu-byte payload", len);
		CHECK_INT(what, (long long)(FRAME_HEADER_SIZE + len), r);
		if (r > 0) {
			if (payload != f + FRAME_HEADER_SIZE)
				FAIL("%s: payload points %td bytes into the frame, expected %u",
				     what, payload - f, FRAME_HEADER_SIZE);
			CHECK_INT(what, (long long)len, (long long)payload_len);
		}
		if (why)
			FAIL("%s: success set a reason: \"%s\"", what, why);

		r = frame_header_check(f, FRAME_MAX_PAYLOAD_DEFAULT, &why);
		snprintf(what, sizeof(what), "header check of a %zu-byte payload", len);
		CHECK_INT(what, (long long)len, r);
		free(f);
	}

	/* Exactly the limit is allowed. */
	{
		uint8_t *f = make_frame(100, 0);
		const uint8_t *payload;
		size_t payload_len;
		const char *why = NULL;

		CHECK_INT("payload of exactly max_payload", FRAME_HEADER_SIZE + 100,
			  frame_decode(f, FRAME_HEADER_SIZE + 100, 100, &payload, &payload_len,
				       &why));
		free(f);
	}
}

/* A header built for a payload kept elsewhere is the header frame_seal()
 * writes in place, so either way of sending decodes the same. */
static void test_header_build(void)
{
	static const size_t lens[] = { 0, 1, 100, 4096 };

	for (size_t i = 0; i < sizeof(lens) / sizeof(lens[0]); i++) {
		size_t len = lens[i];
		uint8_t *sealed = make_frame(len, 0), *joined;
		uint8_t *elsewhere = xmalloc(len);
		uint8_t hdr[FRAME_HEADER_SIZE];
		const uint8_t *payload;
		size_t payload_len;
		const char *why = NULL;
		char what[64];

		joined = xmalloc(FRAME_HEADER_SIZE + len);
		if (len)
			memcpy(elsewhere, sealed + FRAME_HEADER_SIZE, len);
		frame_header_build(hdr, elsewhere, len);
		snprintf(what, sizeof(what), "header built for a %zu-byte payload", len);
		if (memcmp(hdr, sealed, FRAME_HEADER_SIZE) != 0)
			FAIL("%s: differs from frame_seal's", what);
		memcpy(joined, hdr, FRAME_HEADER_SIZE);
		if (len)
			memcpy(joined + FRAME_HEADER_SIZE, elsewhere, len);
		CHECK_INT(what, (long long)(FRAME_HEADER_SIZE + len),
			  frame_decode(joined, FRAME_HEADER_SIZE + len, FRAME_MAX_PAYLOAD_DEFAULT,
				       &payload, &payload_len, &why));
		free(joined);
		free(elsewhere);
		free(sealed);
	}
}

static void test_partial(void)
{
	static const size_t lens[] = { 0, 1, 37, 300 };

	for (size_t i = 0; i < sizeof(lens) / sizeof(lens[0]); i++) {
		size_t total = FRAME_HEADER_SIZE + lens[i];
		uint8_t *f = make_frame(lens[i], 0);

		for (size_t cut = 0; cut < total; cut++) {
			const uint8_t *payload;
			size_t payload_len;
			const char *why = NULL;
			int r = frame_decode(f, cut, FRAME_MAX_PAYLOAD_DEFAULT, &payload,
					     &payload_len, &why);

			if (r != 0)
				FAIL("first %zu of %zu bytes: expected 0 (need more), got %d (%s)",
				     cut, total, r, why ? why : "no reason");
		}
		free(f);
	}
}

/* Decodes buf and expects -EBADMSG with the given reason. */
static void expect_bad(const char *what, const uint8_t *buf, size_t len, size_t max_payload,
		       const char *reason)
{
	const uint8_t *payload;
	size_t payload_len;
	const char *why = NULL;
	int r = frame_decode(buf, len, max_payload, &payload, &payload_len, &why);

	if (r != -EBADMSG) {
		FAIL("%s: expected %d (-EBADMSG), got %d", what, -EBADMSG, r);
		return;
	}
	CHECK_STR(what, reason, why);
}

static void test_bad_header(void)
{
	uint8_t *f = make_frame(20, 0);
	size_t total = FRAME_HEADER_SIZE + 20;
	uint8_t hdr[FRAME_HEADER_SIZE];
	const char *why;

	f[0] = 'G';
	expect_bad("bad magic[0]", f, total, FRAME_MAX_PAYLOAD_DEFAULT,
		   "bad magic (not an ftvm frame)");
	f[0] = 'F';
	f[1] = 'v';
	expect_bad("bad magic[1]", f, total, FRAME_MAX_PAYLOAD_DEFAULT,
		   "bad magic (not an ftvm frame)");
	f[1] = 'V';
	f[2] = FRAME_VERSION + 1;
	expect_bad("version 2", f, total, FRAME_MAX_PAYLOAD_DEFAULT, "unknown frame version");
	f[2] = 0;
	expect_bad("version 0", f, total, FRAME_MAX_PAYLOAD_DEFAULT, "unknown frame version");
	f[2] = FRAME_VERSION;
	for (int bit = 0; bit < 8; bit++) {
		char what[32];

		f[3] = (uint8_t)(1u << bit);
		snprintf(what, sizeof(what), "flag bit %d", bit);
		expect_bad(what, f, total, FRAME_MAX_PAYLOAD_DEFAULT, "reserved flags set");
	}
	f[3] = 0;

	/* The header alone is enough to refuse these: a receiver must not wait
	 * for a payload that will never be valid. */
	memcpy(hdr, f, sizeof(hdr));
	hdr[0] = 0;
	CHECK_INT("header check, bad magic", -EBADMSG,
		  frame_header_check(hdr, FRAME_MAX_PAYLOAD_DEFAULT, &why));
	expect_bad("bad magic, header only", hdr, sizeof(hdr), FRAME_MAX_PAYLOAD_DEFAULT,
		   "bad magic (not an ftvm frame)");
	free(f);

	/* Length over the maximum, sealed so only the length is wrong. */
	f = make_frame(101, 0);
	expect_bad("101 bytes, max 100", f, FRAME_HEADER_SIZE + 101, 100, "frame too long");
	expect_bad("101 bytes, max 100, header only", f, FRAME_HEADER_SIZE, 100, "frame too long");
	CHECK_INT("header check, 101 bytes, max 100", -EBADMSG, frame_header_check(f, 100, &why));
	CHECK_STR("header check, 101 bytes, max 100", "frame too long", why);
	free(f);

	memset(hdr, 0, sizeof(hdr));
	frame_seal(hdr, 0);
	hdr[4] = 0xff; /* 4 GiB - something */
	expect_bad("length 0xff000000", hdr, sizeof(hdr), FRAME_MAX_PAYLOAD_DEFAULT,
		   "frame too long");
	hdr[4] = 0;
	hdr[5] = (FRAME_MAX_PAYLOAD_DEFAULT >> 16) & 0xff;
	hdr[7] = 1; /* default maximum + 1 */
	expect_bad("default maximum + 1", hdr, sizeof(hdr), FRAME_MAX_PAYLOAD_DEFAULT,
		   "frame too long");
}

/* Every single-bit flip anywhere in the frame is refused with the reason that
 * names the field it hit. The buffer is padded to max_payload so a flipped
 * length that still fits is checked against the checksum rather than waiting
 * for more bytes. */
static void test_bit_flips(void)
{
	const size_t len = 40, max_payload = 1024;
	size_t total = FRAME_HEADER_SIZE + len;
	uint8_t *f = make_frame(len, max_payload);

	for (size_t byte = 0; byte < total; byte++) {
		for (int bit = 0; bit < 8; bit++) {
			const uint8_t *payload;
			size_t payload_len;
			const char *why = NULL, *reason;
			char what[64];
			int r;

			snprintf(what, sizeof(what), "bit %d of byte %zu flipped", bit, byte);
			f[byte] ^= (uint8_t)(1u << bit);
			if (byte < 2)
				reason = "bad magic (not an ftvm frame)";
			else if (byte == 2)
				reason = "unknown frame version";
			else if (byte == 3)
				reason = "reserved flags set";
			else if (byte < 8 && be32(f + 4) > max_payload)
				reason = "frame too long";
			else
				reason = "checksum mismatch";
			expect_bad(what, f, FRAME_HEADER_SIZE + max_payload, max_payload, reason);

			/* With only the frame's own bytes, a grown length may just
			 * mean "wait for more", but it must never decode. */
			r = frame_decode(f, total, max_payload, &payload, &payload_len, &why);
			if (r > 0)
				FAIL("%s, exact buffer: decoded as a %d-byte frame", what, r);
			else if (r == 0 && !(byte >= 4 && byte < 8 && be32(f + 4) > len))
				FAIL("%s, exact buffer: expected -EBADMSG, got 0", what);
			f[byte] ^= (uint8_t)(1u << bit);
		}
	}
	free(f);
}

static void test_back_to_back(void)
{
	static const size_t lens[] = { 7, 0, 300, 1 };
	size_t n = sizeof(lens) / sizeof(lens[0]), total = 0, off = 0;
	uint8_t *frames[4], *stream;

	for (size_t i = 0; i < n; i++) {
		frames[i] = make_frame(lens[i], 0);
		total += FRAME_HEADER_SIZE + lens[i];
	}
	stream = xmalloc(total);
	for (size_t i = 0; i < n; i++) {
		memcpy(stream + off, frames[i], FRAME_HEADER_SIZE + lens[i]);
		off += FRAME_HEADER_SIZE + lens[i];
	}

	off = 0;
	for (size_t i = 0; i < n; i++) {
		const uint8_t *payload = NULL;
		size_t payload_len = 0;
		const char *why = NULL;
		char what[64];
		int r = frame_decode(stream + off, total - off, FRAME_MAX_PAYLOAD_DEFAULT, &payload,
				     &payload_len, &why);

		snprintf(what, sizeof(what), "frame %zu of %zu in the stream", i + 1, n);
		CHECK_INT(what, (long long)(FRAME_HEADER_SIZE + lens[i]), r);
		if (r <= 0)
			break;
		CHECK_INT(what, (long long)lens[i], (long long)payload_len);
		if (payload != stream + off + FRAME_HEADER_SIZE ||
		    memcmp(payload, frames[i] + FRAME_HEADER_SIZE, lens[i]) != 0)
			FAIL("%s: payload differs from what was sealed", what);
		off += (size_t)r;
	}
	CHECK_INT("bytes left after the stream", 0, (long long)(total - off));

	for (size_t i = 0; i < n; i++)
		free(frames[i]);
	free(stream);
}

int main(void)
{
	rng_seed(0x9e3779b9u);
	test_layout();
	test_round_trip();
	test_header_build();
	test_partial();
	test_bad_header();
	test_bit_flips();
	test_back_to_back();
	if (failures) {
		fprintf(stderr, "%d check(s) failed\n", failures);
		return 1;
	}
	printf("frame: all checks passed\n");
	return 0;
}
