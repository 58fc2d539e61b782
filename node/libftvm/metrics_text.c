/* Prometheus text of a status and a sense (metrics_text.h), from the rows
 * of metrics_table.h.
 *
 * The table is checked against FTVM_STATUS_FIELDS here, at build time (see
 * metrics_table.h, "Design"): each status row must have its line, each line
 * a status row, numbers numbers and strings strings. */
#include "metrics_text.h"

#include <assert.h>
#include <errno.h>
#include <inttypes.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include "metrics_table.h"

enum how {
	HOW_NODE_LABEL,
	HOW_COUNTER,
	HOW_GAUGE,
	HOW_SECONDS,
	HOW_STATE,
	HOW_INFO,
	HOW_IS,
	HOW_NONEMPTY,
	HOW_NOT,
};

/* What a row's member holds, and what a line wants of it. */
enum want {
	WANT_NUMBER,
	WANT_STRING,
	WANT_ANY,
};

enum kind {
	KIND_U64,
	KIND_U32,
	KIND_I64,
	KIND_BOOL,
	KIND_STR,
};

/* ---- the build-time checks ---- */

/* METRIC_ROW_<row>: each line's place in the table. A status row without a
 * line stops the build at places[] below; a line twice, here. */
#define ROW_ENUM(row, how) METRIC_ROW_##row,
enum {
	METRICS_ROWS(ROW_ENUM) N_METRIC_ROWS
};

/* STATUS_KIND_OF_<row>: number or string, by the status table. A line that
 * names no status row stops the build at its _Static_assert. */
#define KIND_ENUM(kind, name, wire, json, text) STATUS_KIND_OF_##name = WANT_OF_##kind,
#define WANT_OF_U64 WANT_NUMBER
#define WANT_OF_U32 WANT_NUMBER
#define WANT_OF_I64 WANT_NUMBER
#define WANT_OF_BOOL WANT_NUMBER
#define WANT_OF_STR(n) WANT_STRING
enum {
	FTVM_STATUS_FIELDS(KIND_ENUM)
};

#define WANTS_NODE_LABEL WANT_STRING
#define WANTS_COUNTER(name, label, help) WANT_NUMBER
#define WANTS_GAUGE(name, label, help) WANT_NUMBER
#define WANTS_SECONDS(name, label, help) WANT_NUMBER
#define WANTS_STATE(name, label, values, help) WANT_STRING
#define WANTS_INFO(name, label, help) WANT_STRING
#define WANTS_IS(name, word, help) WANT_STRING
#define WANTS_NONEMPTY(name, help) WANT_STRING
#define WANTS_NOT(why) WANT_ANY
#define KIND_CHECK(row, how)                                                                     \
	_Static_assert(WANTS_##how == WANT_ANY || (int)WANTS_##how == (int)STATUS_KIND_OF_##row, \
		       "metrics_table.h: row " #row " is a number made a string metric, or "     \
		       "a string made a number");
METRICS_ROWS(KIND_CHECK)

/* Where each status row is in struct ftvm_node_status, by its line. */
struct place {
	size_t offset, size;
	enum kind kind;
};
#define PLACE(k, row, wire, json, text)                                             \
	[METRIC_ROW_##row] = { .offset = offsetof(struct ftvm_node_status, row),    \
			       .size = sizeof(((struct ftvm_node_status *)0)->row), \
			       .kind = PLACE_KIND_##k },
#define PLACE_KIND_U64 KIND_U64
#define PLACE_KIND_U32 KIND_U32
#define PLACE_KIND_I64 KIND_I64
#define PLACE_KIND_BOOL KIND_BOOL
#define PLACE_KIND_STR(n) KIND_STR
static const struct place places[N_METRIC_ROWS] = { FTVM_STATUS_FIELDS(PLACE) };

#define COUNT_ROW(kind, name, wire, json, text) +1
_Static_assert(N_METRIC_ROWS == 0 FTVM_STATUS_FIELDS(COUNT_ROW),
	       "metrics_table.h: not one line per status row");

/* ---- the lines ---- */

struct line {
	const char *row; /* its status row's name, for messages */
	enum how how;
	const char *name;
	/* COUNTER, GAUGE, SECONDS: "" or "key=value"; STATE, INFO: the label's
	 * name; IS: the word that is 1. */
	const char *label;
	const char *values; /* STATE: its values, space-separated */
	const char *help;   /* NOT: why */
};

#define LINE(r, how) [METRIC_ROW_##r] = { .row = #r, LINE_##how },
#define LINE_NODE_LABEL .how = HOW_NODE_LABEL
#define LINE_COUNTER(n, l, h) .how = HOW_COUNTER, .name = n, .label = l, .help = h
#define LINE_GAUGE(n, l, h) .how = HOW_GAUGE, .name = n, .label = l, .help = h
#define LINE_SECONDS(n, l, h) .how = HOW_SECONDS, .name = n, .label = l, .help = h
#define LINE_STATE(n, l, v, h) .how = HOW_STATE, .name = n, .label = l, .values = v, .help = h
#define LINE_INFO(n, l, h) .how = HOW_INFO, .name = n, .label = l, .help = h
#define LINE_IS(n, w, h) .how = HOW_IS, .name = n, .label = w, .help = h
#define LINE_NONEMPTY(n, h) .how = HOW_NONEMPTY, .name = n, .help = h
#define LINE_NOT(why) .how = HOW_NOT, .help = why
static const struct line lines[N_METRIC_ROWS] = { METRICS_ROWS(LINE) };

/* ---- writing ---- */

static const char *type_of(enum how how)
{
	return how == HOW_COUNTER ? "counter" : "gauge";
}

/* A label value or help text, escaped as the format wants: \\ and \n, and
 * in a label value \" too. */
static void put_escaped(FILE *f, const char *s, size_t max, bool quote)
{
	for (size_t i = 0; i < max && s[i]; i++) {
		if (s[i] == '\\')
			fputs("\\\\", f);
		else if (s[i] == '\n')
			fputs("\\n", f);
		else if (s[i] == '"' && quote)
			fputs("\\\"", f);
		else
			fputc(s[i], f);
	}
}

static void put_head(FILE *f, const char *name, const char *type, const char *help)
{
	fprintf(f, "# HELP %s ", name);
	put_escaped(f, help, SIZE_MAX, false);
	fprintf(f, "\n# TYPE %s %s\n", name, type);
}

/* name{node="..." and a label key="value"; the caller closes it. */
static void put_open(FILE *f, const char *name, const char *node, const char *key,
		     const char *value, size_t value_max)
{
	fprintf(f, "%s{node=\"", name);
	put_escaped(f, node, SIZE_MAX, true);
	fputc('"', f);
	if (key) {
		fprintf(f, ",%s=\"", key);
		put_escaped(f, value, value_max, true);
		fputc('"', f);
	}
}

/* name{node="...",key="value"} v, for a "key=value" label or "". */
static void put_sample_fixed(FILE *f, const char *name, const char *node, const char *label,
			     const char *v)
{
	const char *eq = strchr(label, '=');
	char key[64];

	if (eq) {
		snprintf(key, sizeof(key), "%.*s", (int)(eq - label), label);
		put_open(f, name, node, key, eq + 1, SIZE_MAX);
	} else {
		put_open(f, name, node, NULL, NULL, 0);
	}
	fprintf(f, "} %s\n", v);
}

static uint64_t number_at(const struct ftvm_node_status *st, const struct place *p)
{
	const char *at = (const char *)st + p->offset;

	switch (p->kind) {
	case KIND_U64:
		return *(const uint64_t *)at;
	case KIND_U32:
		return *(const uint32_t *)at;
	case KIND_I64:
		return (uint64_t) * (const int64_t *)at;
	case KIND_BOOL:
		return *(const bool *)at;
	case KIND_STR:
		break;
	}
	assert(!"a string row read as a number");
	return 0;
}

static const char *string_at(const struct ftvm_node_status *st, const struct place *p)
{
	assert(p->kind == KIND_STR);
	return (const char *)st + p->offset;
}

/* Whether the string of at most max bytes (terminated or not) is word. */
static bool string_is(const char *s, size_t max, const char *word, size_t word_len)
{
	return strnlen(s, max) == word_len && memcmp(s, word, word_len) == 0;
}

/* A number row's value as the format writes it. */
static void format_number(char *buf, size_t len, const struct line *l, const struct place *p,
			  const struct ftvm_node_status *st)
{
	uint64_t v = number_at(st, p);

	if (l->how == HOW_SECONDS)
		snprintf(buf, len, "%" PRIu64 ".%03u", v / 1000, (unsigned)(v % 1000));
	else if (p->kind == KIND_I64)
		snprintf(buf, len, "%" PRId64, (int64_t)v);
	else
		snprintf(buf, len, "%" PRIu64, v);
}

/* One sample per value of the set, and the string's own when it is not
 * one of them. */
static void put_state(FILE *f, const struct line *l, const char *node, const char *s, size_t max)
{
	const char *v = l->values;
	bool known = false;
	char value[64];

	while (*v) {
		size_t n = strcspn(v, " ");
		bool is = string_is(s, max, v, n);

		snprintf(value, sizeof(value), "%.*s", (int)n, v);
		put_open(f, l->name, node, l->label, value, SIZE_MAX);
		fprintf(f, "} %d\n", is);
		known |= is;
		v += n;
		v += strspn(v, " ");
	}
	if (!known && max > 0 && s[0]) {
		put_open(f, l->name, node, l->label, s, max);
		fputs("} 1\n", f);
	}
}

/* The lines of the INFO family starting at lines[i], one sample; returns
 * the index of its last line. */
static size_t put_info(FILE *f, size_t i, const char *node, const struct ftvm_node_status *st)
{
	size_t j = i;

	fprintf(f, "%s{node=\"", lines[i].name);
	put_escaped(f, node, SIZE_MAX, true);
	fputc('"', f);
	for (; j < N_METRIC_ROWS && lines[j].how == HOW_INFO &&
	       strcmp(lines[j].name, lines[i].name) == 0;
	     j++) {
		fprintf(f, ",%s=\"", lines[j].label);
		put_escaped(f, string_at(st, &places[j]), places[j].size, true);
		fputc('"', f);
	}
	fputs("} 1\n", f);
	return j - 1;
}

static void put_rows(FILE *f, const struct ftvm_node_status *st, const char *node)
{
	const char *family = NULL;
	char v[48];
	bool is;

	for (size_t i = 0; i < N_METRIC_ROWS; i++) {
		const struct line *l = &lines[i];
		const struct place *p = &places[i];

		if (l->how == HOW_NODE_LABEL || l->how == HOW_NOT)
			continue;
		if (!family || strcmp(family, l->name) != 0)
			put_head(f, l->name, type_of(l->how), l->help);
		family = l->name;
		switch (l->how) {
		case HOW_COUNTER:
		case HOW_GAUGE:
		case HOW_SECONDS:
			format_number(v, sizeof(v), l, p, st);
			put_sample_fixed(f, l->name, node, l->label, v);
			break;
		case HOW_STATE:
			put_state(f, l, node, string_at(st, p), p->size);
			break;
		case HOW_INFO:
			i = put_info(f, i, node, st);
			break;
		case HOW_IS:
			is = string_is(string_at(st, p), p->size, l->label, strlen(l->label));
			put_sample_fixed(f, l->name, node, "", is ? "1" : "0");
			break;
		case HOW_NONEMPTY:
			put_sample_fixed(f, l->name, node, "", string_at(st, p)[0] ? "1" : "0");
			break;
		case HOW_NODE_LABEL:
		case HOW_NOT:
			break;
		}
	}
}

/* The media of a sense: server memory's and the store's, then the storage
 * cache partitions; which of capacity or free by offset. */
static void put_media(FILE *f, const struct ftvm_sense *s, const char *node, const char *name,
		      size_t member)
{
	static const char *const partitions[] = { "server", "cache" };
	const struct ftvm_media *lists[] = { s->media, s->cache };
	size_t ns[] = { s->n_media, s->n_cache },
	       rooms[] = { sizeof(s->media) / sizeof(s->media[0]),
			   sizeof(s->cache) / sizeof(s->cache[0]) };

	for (size_t k = 0; k < 2; k++)
		for (size_t i = 0; i < ns[k] && i < rooms[k]; i++) {
			const struct ftvm_media *m = &lists[k][i];

			put_open(f, name, node, "media", m->type, sizeof(m->type));
			fprintf(f, ",partition=\"%s\"} %" PRIu64 "\n", partitions[k],
				*(const uint64_t *)((const char *)m + member));
		}
}

static void put_sense(FILE *f, const struct ftvm_sense *s, const char *node)
{
	char v[24];

	put_head(f, "ftvm_media_capacity_bytes", "gauge",
		 "Bytes of each medium of this node (the sense request), by partition: server "
		 "(room for clients' allocations; for the store, this node's partition of it) "
		 "and cache (the storage cache partitions)");
	put_media(f, s, node, "ftvm_media_capacity_bytes", offsetof(struct ftvm_media, capacity));
	put_head(f, "ftvm_media_free_bytes", "gauge",
		 "Bytes of each medium not in use, by partition as ftvm_media_capacity_bytes");
	put_media(f, s, node, "ftvm_media_free_bytes", offsetof(struct ftvm_media, free));
	put_head(f, "ftvm_queue_depth", "gauge",
		 "The sense request's queues: requests waiting for a lock or space (paging), "
		 "pages waiting to be written to the store (destage), frames waiting to be "
		 "reclaimed (replacement)");
	snprintf(v, sizeof(v), "%" PRIu64, s->paging_queue);
	put_sample_fixed(f, "ftvm_queue_depth", node, "queue=paging", v);
	snprintf(v, sizeof(v), "%" PRIu64, s->destage_queue);
	put_sample_fixed(f, "ftvm_queue_depth", node, "queue=destage", v);
	snprintf(v, sizeof(v), "%" PRIu64, s->replacement_queue);
	put_sample_fixed(f, "ftvm_queue_depth", node, "queue=replacement", v);
}

int metrics_text_write(FILE *f, const struct ftvm_node_status *st, const struct ftvm_sense *sense)
{
	char node[sizeof(st->node) + 1];

	snprintf(node, sizeof(node), "%.*s", (int)sizeof(st->node), st->node);
	put_rows(f, st, node);
	if (sense)
		put_sense(f, sense, node);
	return ferror(f) ? -EIO : 0;
}
