/* libFuzzer target: bytes as they would arrive on the partner channel.
 *
 * The input is read as a stream, the way the TCP transport reads it: frames
 * are decoded from the front one after another and each payload goes through
 * the envelope checks, until the stream is bad or needs more bytes. The whole
 * input also goes through codec_envelope_decode_frame, the one-frame form that
 * traces and tools use, and once more as a bare payload: the checksum makes a
 * mutated frame fail before protobuf sees it, so this is what lets the fuzzer
 * reach the envelope parser and checks directly.
 *
 * Nothing may crash, leak or read out of bounds, and the decoders must keep
 * their promises (a reason with every error, an envelope only on success). */
#include <errno.h>
#include <stdint.h>
#include <stdlib.h>

#include "codec.h"
#include "frame.h"
#include "fuzz_util.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

/* A broken promise is a bug the fuzzer should report, like a crash. */
static void check_result(int r, Envelope *env, const char *err)
{
	if (r == 0) {
		if (!env)
			abort();
		(void)codec_message_name(env);
	} else if (r != -EBADMSG || env || err[0] == '\0') {
		abort();
	}
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	size_t off = 0;
	Envelope *env = NULL;
	char err[256];
	int r;

	data = fuzz_data(data);
	for (;;) {
		const uint8_t *payload = NULL;
		size_t payload_len = 0;
		const char *why = NULL;

		r = frame_decode(data + off, size - off, FRAME_MAX_PAYLOAD_DEFAULT, &payload,
				 &payload_len, &why);
		if (r < 0 && (r != -EBADMSG || !why))
			abort();
		if (r <= 0)
			break;
		if (payload < data + off || payload_len > size - off ||
		    payload + payload_len > data + off + (size_t)r)
			abort();
		off += (size_t)r;

		env = NULL;
		err[0] = '\0';
		r = codec_envelope_decode(payload, payload_len, &env, err, sizeof(err));
		check_result(r, env, err);
		codec_envelope_free(env);
	}

	env = NULL;
	err[0] = '\0';
	r = codec_envelope_decode_frame(data, size, FRAME_MAX_PAYLOAD_DEFAULT, &env, err,
					sizeof(err));
	check_result(r, env, err);
	codec_envelope_free(env);

	env = NULL;
	err[0] = '\0';
	r = codec_envelope_decode(data, size, &env, err, sizeof(err));
	check_result(r, env, err);
	codec_envelope_free(env);
	return 0;
}
