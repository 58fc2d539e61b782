/* Envelopes to frame payloads and back, with the checks every receiver needs:
 * the payload parses, the protocol version is one we speak, the sender is
 * named. A failure returns -EBADMSG and says what was wrong in err. */
#pragma once

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "partner.pb-c.h"

typedef Ftvm__Partner__Envelope Envelope;
typedef Ftvm__Partner__CommandComplete CommandComplete;

/* The longest run of requests one CommandComplete answers
 * (Envelope.answers_count; replica/SESSION.md, "Answers in runs"). */
#define CODEC_ANSWERS_RUN_MAX 64

/* How many requests env answers: its run's length, or 1 (a CommandComplete
 * of one seq, or anything else). */
uint32_t codec_answers_in(const Envelope *env);

/* What a run's answer env says to request seq, one of its run: the
 * CommandComplete itself to the last, a plain success (status OK, nothing
 * else, not even an applied_lsn; made in *plain) to each before it. */
const CommandComplete *codec_run_answer(const Envelope *env, uint64_t seq, CommandComplete *plain);

/* Packs msg (any protobuf-c message) into a new frame: header + payload.
 * The caller frees *ret_frame. */
int codec_frame_pack(const ProtobufCMessage *msg, uint8_t **ret_frame, size_t *ret_len);

/* Packs msg into a new payload buffer without a header (for transports, which
 * frame what they send). The caller frees *ret_payload. */
int codec_payload_pack(const ProtobufCMessage *msg, uint8_t **ret_payload, size_t *ret_len);

struct pb_pieces;

/* env appended to p (common/pb_pieces.h): the bytes protobuf-c packs, with
 * the page block it carries inline (WritePage's or ResyncPage's data)
 * referenced, not copied, and its header written by hand rather than
 * walked. 0 or -ENOMEM. */
int codec_envelope_pieces(const Envelope *env, struct pb_pieces *p);

/* outer's header (fields 1 to 7; nothing else of it) and, as its member, a
 * Batch of the n envelopes envs, appended to p: the bytes protobuf-c packs
 * for outer with batch.envelopes the envs packed, each block referenced.
 * 0 or -ENOMEM. */
int codec_batch_pieces(const Envelope *outer, Envelope *const *envs, size_t n, struct pb_pieces *p);

/* A copy of cc that owns all it points to, for an answer kept past the
 * state it was read from (codec.c says how it is made). NULL when out of
 * memory. Free with codec_command_complete_free, and nothing else. */
CommandComplete *codec_command_complete_copy(const CommandComplete *cc);
void codec_command_complete_free(CommandComplete *cc);

/* Parses and checks one envelope payload (an answer names its seq, or a
 * run of at most CODEC_ANSWERS_RUN_MAX from seq 1 on). Free with codec_envelope_free
 * (common/pb_arena.h: never with protobuf-c's free_unpacked). */
int codec_envelope_decode(const uint8_t *payload, size_t len, Envelope **ret, char *err,
			  size_t err_len);

/* The same, but a Batch's entries may point into payload rather than be
 * copied (codec.c says when): payload must stay as it is until *ret is
 * freed. The session's receive path, where the frame outlives it. */
int codec_envelope_decode_borrowed(const uint8_t *payload, size_t len, Envelope **ret, char *err,
				   size_t err_len);

/* The same for envelope i of batch (a decoded envelope with a Batch), into
 * batch's memory: one allocation serves a Batch and all its envelopes. The
 * result is good until batch is freed; codec_envelope_free on it does
 * nothing. */
int codec_batch_envelope_decode(const Envelope *batch, size_t i, Envelope **ret, char *err,
				size_t err_len);

/* Decodes a buffer that must hold exactly one whole frame with an envelope
 * (traces, fuzzing, tests): truncation and trailing bytes are errors too. */
int codec_envelope_decode_frame(const uint8_t *buf, size_t len, size_t max_payload, Envelope **ret,
				char *err, size_t err_len);

/* Frees what codec_envelope_decode made. NULL is fine. */
void codec_envelope_free(Envelope *env);

/* "SpaceRequest", "CommandComplete", ... or "none" when no message is set
 * (a newer partner's message this build does not know). */
const char *codec_message_name(const Envelope *env);

/* "OK", "DENIED", ... for logs and tools. */
const char *codec_status_name(int status);

const char *codec_node_state_name(int state);
