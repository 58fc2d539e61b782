/* trace_text.h. The form:
 *
 *   ftvm-trace-text 1
 *   format 1
 *   header KEY=VALUE                         one per header line, in order
 *   # 12  0.004870 partner out b  seq=3 ...  the dump's rendering (ignored)
 *   record T_US CHANNEL DIRECTION "PEER"
 *     0a0b0c...                              the message, 32 bytes a line
 *
 * Lines starting with '#' and blank lines are comments; everything else is
 * data, so editing a comment changes nothing and the data alone makes the
 * binary file. */
#define _GNU_SOURCE /* getline */
#include "trace_text.h"

#include <errno.h>
#include <inttypes.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "trace_dump.h"
#include "trace_file.h"

#define TEXT_MAGIC "ftvm-trace-text 1"
#define HEX_PER_LINE 32u

static void print_peer(const char *peer)
{
	putchar('"');
	for (const unsigned char *p = (const unsigned char *)peer; *p; p++) {
		if (*p == '"' || *p == '\\' || *p < ' ' || *p >= 0x7f)
			printf("\\x%02x", *p);
		else
			putchar(*p);
	}
	putchar('"');
}

static void text_header(const struct trace_reader *r, void *arg)
{
	printf("%s\n# %s; ftvmctl trace binary makes the binary trace back from the lines\n"
	       "# that do not start with '#' (common/TRACE.md).\nformat %u\n",
	       TEXT_MAGIC, (const char *)arg, trace_reader_format_version(r));
	for (size_t i = 0; i < trace_reader_header_count(r); i++) {
		const char *k, *v;

		trace_reader_header_entry(r, i, &k, &v);
		printf("header %s=%s\n", k, v);
	}
}

static int text_record(const struct trace_record *rec, void *arg, char *why, size_t len)
{
	/* A message that does not decode is still data to keep. */
	if (trace_dump_record(stdout, "#", rec, false, why, len) < 0)
		printf("# %" PRIu64 ": does not decode: %s\n", rec->number, why);
	printf("record %" PRIu64 " %s %s ", rec->t_us, trace_channel_name(rec->channel),
	       trace_direction_name(rec->direction));
	print_peer(rec->peer);
	putchar('\n');
	for (size_t i = 0; i < rec->len; i += HEX_PER_LINE) {
		fputs("  ", stdout);
		for (size_t j = i; j < rec->len && j < i + HEX_PER_LINE; j++)
			printf("%02x", rec->payload[j]);
		putchar('\n');
	}
	return 0;
}

int trace_text_run(const char *path)
{
	return trace_walk(path, text_header, text_record, (void *)path);
}

/* ---- text to binary ---- */

struct parse {
	const char *path;
	FILE *in;
	unsigned line;
	char *buf;
	size_t cap;
	char *header; /* "key=value\n" lines as they come */
	size_t header_len;
	struct trace_writer *w;
	const char *out;
	/* the record being read */
	bool in_record;
	uint64_t t_us;
	enum trace_channel channel;
	enum trace_direction direction;
	char peer[TRACE_PEER_MAX + 1];
	uint8_t *payload;
	size_t len, payload_cap;
	uint64_t records;
};

static int bad(struct parse *p, const char *fmt, ...) __attribute__((format(printf, 2, 3)));

static int bad(struct parse *p, const char *fmt, ...)
{
	va_list ap;

	fprintf(stderr, "ftvmctl: %s:%u: ", p->path, p->line);
	va_start(ap, fmt);
	vfprintf(stderr, fmt, ap);
	va_end(ap);
	fputc('\n', stderr);
	return -EINVAL;
}

static int hex_digit(char c)
{
	if (c >= '0' && c <= '9')
		return c - '0';
	if (c >= 'a' && c <= 'f')
		return c - 'a' + 10;
	return -1;
}

static int flush_record(struct parse *p)
{
	int r;

	if (!p->in_record)
		return 0;
	p->in_record = false;
	r = trace_writer_append_at(p->w, p->t_us, p->channel, p->direction, p->peer, p->payload,
				   p->len);
	if (r < 0)
		return bad(p, "cannot write record %" PRIu64 " to %s: %s", p->records + 1, p->out,
			   strerror(-r));
	p->records++;
	return 0;
}

static int parse_peer(struct parse *p, const char *s)
{
	size_t n = 0;

	if (*s++ != '"')
		return bad(p, "the peer must be quoted");
	for (; *s && *s != '"'; s++) {
		int hi, lo;

		if (n == TRACE_PEER_MAX)
			return bad(p, "peer longer than %u bytes", TRACE_PEER_MAX);
		if (*s != '\\') {
			p->peer[n++] = *s;
			continue;
		}
		if (s[1] != 'x' || (hi = hex_digit(s[2])) < 0 || (lo = hex_digit(s[3])) < 0 ||
		    (hi == 0 && lo == 0))
			return bad(p, "bad escape in the peer (want \\xHH, not \\x00)");
		p->peer[n++] = (char)(hi << 4 | lo);
		s += 3;
	}
	if (*s != '"' || s[1])
		return bad(p, "the peer's closing quote is missing or not at the end");
	p->peer[n] = '\0';
	return 0;
}

static int record_line(struct parse *p, const char *rest)
{
	char channel[16], direction[8];
	unsigned long long t;
	int used = 0;

	if (!p->w)
		return bad(p, "a record before the header's first line");
	if (flush_record(p) < 0)
		return -EINVAL;
	if (sscanf(rest, "%llu %15s %7s %n", &t, channel, direction, &used) != 3 || !used)
		return bad(p, "want: record T_US CHANNEL DIRECTION \"PEER\"");
	p->t_us = t;
	if (strcmp(channel, "partner") == 0)
		p->channel = TRACE_CHANNEL_PARTNER;
	else if (strcmp(channel, "client") == 0)
		p->channel = TRACE_CHANNEL_CLIENT;
	else
		return bad(p, "channel '%s' (want partner or client)", channel);
	if (strcmp(direction, "in") == 0)
		p->direction = TRACE_IN;
	else if (strcmp(direction, "out") == 0)
		p->direction = TRACE_OUT;
	else
		return bad(p, "direction '%s' (want in or out)", direction);
	if (parse_peer(p, rest + used) < 0)
		return -EINVAL;
	p->len = 0;
	p->in_record = true;
	return 0;
}

static int hex_line(struct parse *p, const char *s)
{
	size_t n = strlen(s);

	if (!p->in_record)
		return bad(p, "bytes outside a record");
	if (n % 2)
		return bad(p, "an odd number of hex digits");
	if (p->len + n / 2 > TRACE_RECORD_MAX)
		return bad(p, "a record longer than %u bytes", TRACE_RECORD_MAX);
	if (p->len + n / 2 > p->payload_cap) {
		size_t cap = (p->len + n / 2) * 2;
		uint8_t *b = realloc(p->payload, cap);

		if (!b)
			return bad(p, "out of memory");
		p->payload = b;
		p->payload_cap = cap;
	}
	for (size_t i = 0; i < n; i += 2) {
		int hi = hex_digit(s[i]), lo = hex_digit(s[i + 1]);

		if (hi < 0 || lo < 0)
			return bad(p, "'%.2s' is not two lowercase hex digits", s + i);
		p->payload[p->len++] = (uint8_t)(hi << 4 | lo);
	}
	return 0;
}

static int header_line(struct parse *p, const char *kv)
{
	size_t n = strlen(kv);
	char *h;

	if (p->w)
		return bad(p, "a header line after the first record");
	if (!strchr(kv, '=') || p->header_len + n + 1 > TRACE_HEADER_TEXT_MAX)
		return bad(p, "want: header KEY=VALUE (the header at most %u bytes)",
			   TRACE_HEADER_TEXT_MAX);
	h = realloc(p->header, p->header_len + n + 2);
	if (!h)
		return bad(p, "out of memory");
	p->header = h;
	memcpy(p->header + p->header_len, kv, n);
	p->header_len += n;
	p->header[p->header_len++] = '\n';
	p->header[p->header_len] = '\0';
	return 0;
}

/* The header is complete at the first record: the file is made then. */
static int open_out(struct parse *p)
{
	int r;

	if (p->w)
		return 0;
	r = trace_writer_create_exact(p->out, p->header ? p->header : "", &p->w);
	if (r < 0)
		return bad(p, "cannot create %s: %s", p->out, strerror(-r));
	return 0;
}

static int parse_line(struct parse *p, char *s)
{
	unsigned version;

	if (p->line == 1)
		return strcmp(s, TEXT_MAGIC) == 0
			       ? 0
			       : bad(p, "not a trace in text form (want '%s' first)", TEXT_MAGIC);
	if (s[0] == '#' || s[0] == '\0')
		return 0;
	if (strncmp(s, "  ", 2) == 0)
		return hex_line(p, s + 2);
	if (strncmp(s, "format ", 7) == 0) {
		if (sscanf(s + 7, "%u", &version) != 1 || version != TRACE_FORMAT_VERSION)
			return bad(p, "format %s, this build writes format %u", s + 7,
				   TRACE_FORMAT_VERSION);
		return 0;
	}
	if (strncmp(s, "header ", 7) == 0)
		return header_line(p, s + 7);
	if (strncmp(s, "record ", 7) == 0)
		return open_out(p) < 0 ? -EINVAL : record_line(p, s + 7);
	return bad(p, "not a header, record or bytes line");
}

/* The text's checks are the form's; what the header's keys and values may
 * be is the reader's (trace_file.c) alone. So the file made is read back
 * whole with the reader, and refused when it would not open in ftvmctl
 * trace dump or replay. */
static int read_back(struct parse *p)
{
	struct trace_reader *r;
	struct trace_record rec;
	char err[512];
	int e;

	e = trace_reader_open(p->out, &r, err, sizeof(err));
	if (e == 0) {
		while ((e = trace_reader_next(r, &rec, err, sizeof(err))) == 1)
			;
		trace_reader_free(r);
	}
	if (e < 0) {
		fprintf(stderr, "ftvmctl: %s: the trace made from it would not read back: %s\n",
			p->path, err);
		return -EINVAL;
	}
	return 0;
}

int trace_binary_run(const char *text_path, const char *out_path)
{
	struct parse p = { .path = text_path, .out = out_path };
	bool made = false;
	ssize_t n;
	int r = 0, e;

	p.in = fopen(text_path, "re");
	if (!p.in) {
		fprintf(stderr, "ftvmctl: %s: %s\n", text_path, strerror(errno));
		return 1;
	}
	while (r == 0 && (n = getline(&p.buf, &p.cap, p.in)) >= 0) {
		p.line++;
		if (n > 0 && p.buf[n - 1] == '\n')
			p.buf[--n] = '\0';
		made = made || p.w;
		r = parse_line(&p, p.buf);
		made = made || p.w;
	}
	if (r == 0 && p.line == 0)
		r = bad(&p, "empty file");
	if (r == 0)
		r = open_out(&p);
	made = made || p.w;
	if (r == 0)
		r = flush_record(&p);
	e = trace_writer_close(p.w);
	if (r == 0 && e < 0)
		r = bad(&p, "cannot write %s: %s", out_path, strerror(-e));
	if (r == 0)
		r = read_back(&p);
	if (r < 0 && made)
		unlink(out_path);
	free(p.buf);
	free(p.header);
	free(p.payload);
	fclose(p.in);
	return r < 0 ? 1 : 0;
}
