/* Trace files (trace_file.h; the layout is in TRACE.md). */
#define _GNU_SOURCE /* asprintf */
#include "trace_file.h"

#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/uio.h>
#include <unistd.h>

#include "be_bytes.h"
#include "clock.h"
#include "crc32c.h"

/* length, time, channel, direction, peer length */
#define RECORD_HEAD_SIZE 16u
#define RECORD_CRC_SIZE 4u
#define HEADER_ENTRIES_MAX 256u

struct trace_writer {
	int fd;
	uint64_t t0_us;
	uint64_t records;
	int error; /* the first write error, kept for close */
};

struct header_entry {
	const char *key, *value; /* into reader->header_copy */
};

struct trace_reader {
	char *name;
	uint8_t *data;
	size_t len;
	size_t off;	  /* of the next record */
	uint64_t next;	  /* its number */
	size_t torn;	  /* bytes of an incomplete last record */
	uint16_t version; /* of the format */
	char *header_text;
	char *header_copy; /* header_text cut into keys and values */
	struct header_entry entries[HEADER_ENTRIES_MAX];
	size_t n_entries;
};

const char *trace_channel_name(enum trace_channel c)
{
	return c == TRACE_CHANNEL_PARTNER ? "partner" : c == TRACE_CHANNEL_CLIENT ? "client" : "?";
}

const char *trace_direction_name(enum trace_direction d)
{
	return d == TRACE_IN ? "in" : d == TRACE_OUT ? "out" : "?";
}

/* ---- writing ---- */

static int write_all(int fd, const struct iovec *iov, int n)
{
	size_t want = 0;
	ssize_t done;

	for (int i = 0; i < n; i++)
		want += iov[i].iov_len;
	done = writev(fd, iov, n);
	if (done < 0)
		return -errno;
	/* A regular file takes a whole writev unless the disk is full. */
	return (size_t)done == want ? 0 : -ENOSPC;
}

int trace_writer_create_exact(const char *path, const char *header_text, struct trace_writer **ret)
{
	uint8_t head[TRACE_FILE_HEADER_SIZE], crc_be[4];
	size_t text_len = strlen(header_text);
	struct trace_writer *w;
	int r;

	if (text_len > TRACE_HEADER_TEXT_MAX)
		return -E2BIG;
	w = calloc(1, sizeof(*w));
	if (!w)
		return -ENOMEM;
	w->t0_us = clock_now_us();
	w->fd = open(path, O_WRONLY | O_CREAT | O_EXCL | O_APPEND | O_CLOEXEC, 0640);
	if (w->fd < 0) {
		r = -errno;
		free(w);
		return r;
	}
	memcpy(head, TRACE_MAGIC, TRACE_MAGIC_SIZE);
	put_be16(head + 8, TRACE_FORMAT_VERSION);
	put_be16(head + 10, 0);
	put_be32(head + 12, (uint32_t)text_len);
	put_be32(crc_be, crc32c(crc32c(0, head, sizeof(head)), header_text, text_len));
	r = write_all(w->fd,
		      (const struct iovec[]){
			      { .iov_base = head, .iov_len = sizeof(head) },
			      { .iov_base = (void *)header_text, .iov_len = text_len },
			      { .iov_base = crc_be, .iov_len = sizeof(crc_be) },
		      },
		      3);
	if (r < 0) {
		close(w->fd);
		unlink(path);
		free(w);
		return r;
	}
	*ret = w;
	return 0;
}

int trace_writer_create(const char *path, const char *header_text, struct trace_writer **ret)
{
	uint64_t t0 = clock_now_us();
	char *text;
	int r;

	if (asprintf(&text, "%sstarted_monotonic_us=%" PRIu64 "\n", header_text, t0) < 0)
		return -ENOMEM;
	r = trace_writer_create_exact(path, text, ret);
	free(text);
	if (r == 0)
		(*ret)->t0_us = t0;
	return r;
}

int trace_writer_append(struct trace_writer *w, enum trace_channel channel,
			enum trace_direction direction, const char *peer, const void *payload,
			size_t len)
{
	return trace_writer_append_at(w, clock_now_us() - w->t0_us, channel, direction, peer,
				      payload, len);
}

size_t trace_record_size(const char *peer, size_t len)
{
	return RECORD_HEAD_SIZE + strnlen(peer, TRACE_PEER_MAX) + len + RECORD_CRC_SIZE;
}

size_t trace_record_encode(uint8_t *out, uint64_t t_us, enum trace_channel channel,
			   enum trace_direction direction, const char *peer, const void *payload,
			   size_t len)
{
	size_t peer_len = strnlen(peer, TRACE_PEER_MAX), total = trace_record_size(peer, len);

	put_be32(out, (uint32_t)(total - 4 - RECORD_CRC_SIZE));
	put_be64(out + 4, t_us);
	out[12] = (uint8_t)channel;
	out[13] = (uint8_t)direction;
	put_be16(out + 14, (uint16_t)peer_len);
	memcpy(out + RECORD_HEAD_SIZE, peer, peer_len);
	if (len)
		memcpy(out + RECORD_HEAD_SIZE + peer_len, payload, len);
	put_be32(out + total - RECORD_CRC_SIZE, crc32c(0, out, total - RECORD_CRC_SIZE));
	return total;
}

int trace_writer_append_at(struct trace_writer *w, uint64_t t_us, enum trace_channel channel,
			   enum trace_direction direction, const char *peer, const void *payload,
			   size_t len)
{
	size_t size = trace_record_size(peer, len);
	uint8_t *buf;
	int r;

	if (size > TRACE_RECORD_MAX)
		return -E2BIG;
	buf = malloc(size);
	if (!buf)
		return -ENOMEM;
	trace_record_encode(buf, t_us, channel, direction, peer, payload, len);
	r = trace_writer_append_encoded(w, buf, size, 1);
	free(buf);
	return r;
}

int trace_writer_append_encoded(struct trace_writer *w, const void *records, size_t len, uint64_t n)
{
	int r;

	if (w->error)
		return w->error;
	r = write_all(w->fd,
		      (const struct iovec[]){ { .iov_base = (void *)records, .iov_len = len } }, 1);
	if (r < 0) {
		w->error = r;
		return r;
	}
	w->records += n;
	return 0;
}

uint64_t trace_writer_now_us(const struct trace_writer *w)
{
	return clock_now_us() - w->t0_us;
}

uint64_t trace_writer_records(const struct trace_writer *w)
{
	return w->records;
}

int trace_writer_close(struct trace_writer *w)
{
	int r;

	if (!w)
		return 0;
	r = w->error;
	if (close(w->fd) < 0 && r == 0)
		r = -errno;
	free(w);
	return r;
}

/* ---- reading ---- */

__attribute__((format(printf, 5, 6))) static int
bad(const struct trace_reader *r, uint64_t record, char *err, size_t err_len, const char *fmt, ...)
{
	char what[256];
	va_list ap;

	va_start(ap, fmt);
	vsnprintf(what, sizeof(what), fmt, ap);
	va_end(ap);
	snprintf(err, err_len, "%s: record %" PRIu64 ": %s", r->name, record, what);
	return -EBADMSG;
}

static bool key_char(char c)
{
	return (c >= 'a' && c <= 'z') || (c >= '0' && c <= '9') || c == '_' || c == '.' || c == '-';
}

/* "key=value" lines, each ended by '\n'; keys unique. */
static int parse_header_text(struct trace_reader *r, char *err, size_t err_len)
{
	char *p = r->header_copy, *end = p + strlen(p);
	unsigned line = 0;

	while (p < end) {
		char *nl = memchr(p, '\n', (size_t)(end - p)), *eq;

		line++;
		if (!nl)
			return bad(r, 0, err, err_len, "header line %u does not end with a newline",
				   line);
		*nl = '\0';
		eq = strchr(p, '=');
		if (!eq || eq == p)
			return bad(r, 0, err, err_len, "header line %u is not key=value", line);
		*eq = '\0';
		for (const char *k = p; *k; k++)
			if (!key_char(*k))
				return bad(r, 0, err, err_len,
					   "header line %u: key has a character outside "
					   "[a-z0-9_.-]",
					   line);
		for (const char *v = eq + 1; *v; v++)
			if ((unsigned char)*v < 0x20)
				return bad(r, 0, err, err_len,
					   "header line %u: value has a control character", line);
		if (trace_reader_header_get(r, p))
			return bad(r, 0, err, err_len, "header line %u: key %s given twice", line,
				   p);
		if (r->n_entries == HEADER_ENTRIES_MAX)
			return bad(r, 0, err, err_len, "header has more than %u keys",
				   HEADER_ENTRIES_MAX);
		r->entries[r->n_entries++] = (struct header_entry){ .key = p, .value = eq + 1 };
		p = nl + 1;
	}
	return 0;
}

static int check_file_header(struct trace_reader *r, char *err, size_t err_len)
{
	uint32_t text_len;

	if (r->len < TRACE_FILE_HEADER_SIZE)
		return bad(r, 0, err, err_len, "%zu bytes: too short for a trace's header", r->len);
	if (memcmp(r->data, TRACE_MAGIC, TRACE_MAGIC_SIZE) != 0)
		return bad(r, 0, err, err_len, "not an ftvm trace (bad magic)");
	r->version = get_be16(r->data + 8);
	if (r->version != TRACE_FORMAT_VERSION)
		return bad(r, 0, err, err_len,
			   "trace format version %u, this build reads version %u", r->version,
			   TRACE_FORMAT_VERSION);
	if (get_be16(r->data + 10) != 0)
		return bad(r, 0, err, err_len, "reserved header bytes are not zero");
	text_len = get_be32(r->data + 12);
	if (text_len > TRACE_HEADER_TEXT_MAX)
		return bad(r, 0, err, err_len, "header text of %" PRIu32 " bytes, at most %u",
			   text_len, TRACE_HEADER_TEXT_MAX);
	if (r->len < TRACE_FILE_HEADER_SIZE + text_len + RECORD_CRC_SIZE)
		return bad(r, 0, err, err_len, "file ends inside its header");
	if (crc32c(0, r->data, TRACE_FILE_HEADER_SIZE + text_len) !=
	    get_be32(r->data + TRACE_FILE_HEADER_SIZE + text_len))
		return bad(r, 0, err, err_len, "header checksum mismatch");
	if (memchr(r->data + TRACE_FILE_HEADER_SIZE, '\0', text_len))
		return bad(r, 0, err, err_len, "header text holds a NUL byte");
	r->header_text = strndup((const char *)r->data + TRACE_FILE_HEADER_SIZE, text_len);
	r->header_copy = strdup(r->header_text ? r->header_text : "");
	if (!r->header_text || !r->header_copy)
		return -ENOMEM;
	r->off = TRACE_FILE_HEADER_SIZE + text_len + RECORD_CRC_SIZE;
	r->next = 1;
	return parse_header_text(r, err, err_len);
}

int trace_reader_open_mem(const char *name, const uint8_t *data, size_t len,
			  struct trace_reader **ret, char *err, size_t err_len)
{
	struct trace_reader *r = calloc(1, sizeof(*r));
	int e;

	if (!r)
		return -ENOMEM;
	r->name = strdup(name);
	r->data = malloc(len ? len : 1);
	if (!r->name || !r->data) {
		trace_reader_free(r);
		return -ENOMEM;
	}
	if (len)
		memcpy(r->data, data, len);
	r->len = len;
	e = check_file_header(r, err, err_len);
	if (e < 0) {
		if (e == -ENOMEM)
			snprintf(err, err_len, "%s: out of memory", name);
		trace_reader_free(r);
		return e;
	}
	*ret = r;
	return 0;
}

int trace_reader_open(const char *path, struct trace_reader **ret, char *err, size_t err_len)
{
	uint8_t *data = NULL;
	size_t len = 0;
	struct stat st;
	int fd, r;

	fd = open(path, O_RDONLY | O_CLOEXEC);
	if (fd < 0 || fstat(fd, &st) < 0) {
		r = -errno;
		snprintf(err, err_len, "%s: %s", path, strerror(-r));
		if (fd >= 0)
			close(fd);
		return r;
	}
	if (!S_ISREG(st.st_mode)) {
		close(fd);
		snprintf(err, err_len, "%s: not a regular file", path);
		return -EINVAL;
	}
	data = malloc(st.st_size ? (size_t)st.st_size : 1);
	if (!data) {
		close(fd);
		snprintf(err, err_len, "%s: out of memory for %lld bytes", path,
			 (long long)st.st_size);
		return -ENOMEM;
	}
	while (len < (size_t)st.st_size) {
		ssize_t n = read(fd, data + len, (size_t)st.st_size - len);

		if (n <= 0) {
			r = n < 0 ? -errno : -EIO;
			snprintf(err, err_len, "%s: cannot read: %s", path, strerror(-r));
			free(data);
			close(fd);
			return r;
		}
		len += (size_t)n;
	}
	close(fd);
	r = trace_reader_open_mem(path, data, len, ret, err, err_len);
	free(data);
	return r;
}

void trace_reader_free(struct trace_reader *r)
{
	if (!r)
		return;
	free(r->name);
	free(r->data);
	free(r->header_text);
	free(r->header_copy);
	free(r);
}

int trace_reader_next(struct trace_reader *r, struct trace_record *rec, char *err, size_t err_len)
{
	const uint8_t *p = r->data + r->off;
	size_t left = r->len - r->off, total;
	uint32_t body;
	uint16_t peer_len;

	if (left == 0)
		return 0;
	if (left < 4) {
		r->torn = left;
		r->off = r->len;
		return 0;
	}
	body = get_be32(p);
	if (body < RECORD_HEAD_SIZE - 4 || body > TRACE_RECORD_MAX)
		return bad(r, r->next, err, err_len, "record length %" PRIu32 " out of range",
			   body);
	total = 4 + (size_t)body + RECORD_CRC_SIZE;
	if (left < total) {
		/* The writer died in the middle of this record: what came
		 * before is whole, and that is where the trace ends. */
		r->torn = left;
		r->off = r->len;
		return 0;
	}
	if (crc32c(0, p, total - RECORD_CRC_SIZE) != get_be32(p + total - RECORD_CRC_SIZE))
		return bad(r, r->next, err, err_len, "checksum mismatch");
	if (p[12] != TRACE_CHANNEL_PARTNER && p[12] != TRACE_CHANNEL_CLIENT)
		return bad(r, r->next, err, err_len, "unknown channel %u", p[12]);
	if (p[13] != TRACE_IN && p[13] != TRACE_OUT)
		return bad(r, r->next, err, err_len, "unknown direction %u", p[13]);
	peer_len = get_be16(p + 14);
	if (peer_len > TRACE_PEER_MAX || RECORD_HEAD_SIZE + peer_len > total - RECORD_CRC_SIZE)
		return bad(r, r->next, err, err_len, "peer name of %u bytes does not fit",
			   peer_len);
	if (memchr(p + RECORD_HEAD_SIZE, '\0', peer_len))
		return bad(r, r->next, err, err_len, "peer name holds a NUL byte");
	rec->number = r->next++;
	rec->t_us = get_be64(p + 4);
	rec->channel = p[12];
	rec->direction = p[13];
	memcpy(rec->peer, p + RECORD_HEAD_SIZE, peer_len);
	rec->peer[peer_len] = '\0';
	rec->payload = p + RECORD_HEAD_SIZE + peer_len;
	rec->len = total - RECORD_CRC_SIZE - RECORD_HEAD_SIZE - peer_len;
	r->off += total;
	return 1;
}

size_t trace_reader_torn(const struct trace_reader *r)
{
	return r->torn;
}

const char *trace_reader_name(const struct trace_reader *r)
{
	return r->name;
}

uint16_t trace_reader_format_version(const struct trace_reader *r)
{
	return r->version;
}

const char *trace_reader_header_text(const struct trace_reader *r)
{
	return r->header_text;
}

size_t trace_reader_header_count(const struct trace_reader *r)
{
	return r->n_entries;
}

void trace_reader_header_entry(const struct trace_reader *r, size_t i, const char **ret_key,
			       const char **ret_value)
{
	*ret_key = r->entries[i].key;
	*ret_value = r->entries[i].value;
}

const char *trace_reader_header_get(const struct trace_reader *r, const char *key)
{
	for (size_t i = 0; i < r->n_entries; i++)
		if (strcmp(r->entries[i].key, key) == 0)
			return r->entries[i].value;
	return NULL;
}
