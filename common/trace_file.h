/* Trace files: what crossed a node's partner channel and client API, one
 * record per message, as common/TRACE.md specifies (the format, its version,
 * and what a reader does with a torn tail). The node writes them, ftvmctl
 * reads them; neither side needs to know protobuf here: a record's payload is
 * the message's bytes as they were on the wire.
 *
 * The reader takes the whole file into memory and hands out records one at a
 * time; every problem it finds is an error naming the file, the record number
 * (from 1, 0 for the file header) and what was wrong. */
#pragma once

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#define TRACE_FORMAT_VERSION 1u
#define TRACE_MAGIC "FTVMTRC\n"
#define TRACE_MAGIC_SIZE 8u
/* magic, version, reserved, header length */
#define TRACE_FILE_HEADER_SIZE (TRACE_MAGIC_SIZE + 8u)
#define TRACE_HEADER_TEXT_MAX 65536u
#define TRACE_PEER_MAX 255u
/* A record holds one frame's payload (8 MiB at most) and its framing. */
#define TRACE_RECORD_MAX ((8u << 20) + 1024u)

enum trace_channel {
	TRACE_CHANNEL_PARTNER = 1,
	TRACE_CHANNEL_CLIENT = 2,
};

enum trace_direction {
	TRACE_IN = 1,  /* to the recording node */
	TRACE_OUT = 2, /* from it */
};

struct trace_record {
	uint64_t number; /* from 1, in file order */
	uint64_t t_us;	 /* since the trace started, monotonic */
	enum trace_channel channel;
	enum trace_direction direction;
	char peer[TRACE_PEER_MAX + 1];
	const uint8_t *payload; /* valid until the next call on the reader */
	size_t len;
};

/* ---- writing ---- */

struct trace_writer;

/* Creates path (replacing nothing: -EEXIST when it exists) and writes the
 * file header: header_text ("key=value" lines, TRACE.md) and the
 * started_monotonic_us this writer's record times count from. */
int trace_writer_create(const char *path, const char *header_text, struct trace_writer **ret);
/* The same with the header text as given, byte for byte (converting a trace
 * from its text form): record times are the caller's then. */
int trace_writer_create_exact(const char *path, const char *header_text, struct trace_writer **ret);
/* Appends one record in one write(2), so a crash leaves whole records and at
 * most one torn one at the end. The time is taken here. */
int trace_writer_append(struct trace_writer *w, enum trace_channel channel,
			enum trace_direction direction, const char *peer, const void *payload,
			size_t len);
/* The same at a given time (microseconds since started_monotonic_us). */
int trace_writer_append_at(struct trace_writer *w, uint64_t t_us, enum trace_channel channel,
			   enum trace_direction direction, const char *peer, const void *payload,
			   size_t len);
/* Records for appending many at once (the node encodes them on its loop and
 * writes them from a thread): the bytes one record takes, and the record
 * itself in out (that many bytes). */
size_t trace_record_size(const char *peer, size_t len);
size_t trace_record_encode(uint8_t *out, uint64_t t_us, enum trace_channel channel,
			   enum trace_direction direction, const char *peer, const void *payload,
			   size_t len);
/* Appends n whole records, encoded, in one write(2). */
int trace_writer_append_encoded(struct trace_writer *w, const void *records, size_t len,
				uint64_t n);
/* The time a record made now carries. */
uint64_t trace_writer_now_us(const struct trace_writer *w);
/* Records appended so far. */
uint64_t trace_writer_records(const struct trace_writer *w);
/* Closes the file; NULL is fine. Returns the first write error seen, if any. */
int trace_writer_close(struct trace_writer *w);

/* ---- reading ---- */

struct trace_reader;

/* Reads path whole and checks its file header. err: "FILE: record 0: why". */
int trace_reader_open(const char *path, struct trace_reader **ret, char *err, size_t err_len);
/* The same over bytes in memory (fuzzing); name stands for the file. The
 * bytes are copied. */
int trace_reader_open_mem(const char *name, const uint8_t *data, size_t len,
			  struct trace_reader **ret, char *err, size_t err_len);
void trace_reader_free(struct trace_reader *r);

/* The next record: 1 with *rec filled, 0 at the end of the file, -EBADMSG
 * with err naming file, record number and problem. A file that ends inside a
 * record (a crash while writing) ends there: 0, with trace_reader_torn()
 * saying how many bytes were left over. */
int trace_reader_next(struct trace_reader *r, struct trace_record *rec, char *err, size_t err_len);
size_t trace_reader_torn(const struct trace_reader *r);

const char *trace_reader_name(const struct trace_reader *r);
uint16_t trace_reader_format_version(const struct trace_reader *r);
/* The header's text, its entries in file order, and one key's value (NULL
 * when absent). */
const char *trace_reader_header_text(const struct trace_reader *r);
size_t trace_reader_header_count(const struct trace_reader *r);
void trace_reader_header_entry(const struct trace_reader *r, size_t i, const char **ret_key,
			       const char **ret_value);
const char *trace_reader_header_get(const struct trace_reader *r, const char *key);

const char *trace_channel_name(enum trace_channel c);
const char *trace_direction_name(enum trace_direction d);
