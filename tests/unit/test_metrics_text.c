/* metrics_text_write(): the Prometheus text of a status whose every number
 * row has a value no other row has (1000 + its place in FTVM_STATUS_FIELDS)
 * and of a sense with every medium.
 *
 * The text is read back by a parser of the exposition format written here,
 * which checks every line (a HELP then a TYPE once per family, before its
 * samples; names and labels well formed; label values escaped; values
 * numbers; no series twice; _total on counters alone), and then each line of
 * metrics_table.h is looked for: a number row's sample with its value, a
 * string row's as its line says, and no sample anywhere carrying a value of
 * a row the table does not export. */
#include <ctype.h>
#include <inttypes.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "check.h"
#include "metrics_table.h"
#include "metrics_text.h"

#define SAMPLES_MAX 512
#define LABELS_MAX 4

struct label {
	char key[64];
	char value[256];
};

struct sample {
	char name[128];
	struct label labels[LABELS_MAX];
	size_t n_labels;
	double value;
	char value_text[64];
};

struct family {
	char name[128];
	char type[16];
};

struct text {
	struct sample samples[SAMPLES_MAX];
	size_t n;
	struct family families[SAMPLES_MAX];
	size_t n_families;
};

/* ---- reading the exposition format back ---- */

static bool name_valid(const char *s, size_t n)
{
	if (n == 0 || !(isalpha((unsigned char)s[0]) || s[0] == '_' || s[0] == ':'))
		return false;
	for (size_t i = 1; i < n; i++)
		if (!(isalnum((unsigned char)s[i]) || s[i] == '_' || s[i] == ':'))
			return false;
	return true;
}

static bool ends_with(const char *s, const char *end)
{
	size_t n = strlen(s), m = strlen(end);

	return n >= m && strcmp(s + n - m, end) == 0;
}

/* key="value",... up to }: unescaped into smp; the rest after } in *end. */
static bool parse_labels(const char *p, struct sample *smp, const char **end, int line)
{
	while (*p != '}') {
		struct label *l;
		size_t n = strcspn(p, "=");
		size_t k = 0;

		if (smp->n_labels == LABELS_MAX || !name_valid(p, n) || n >= sizeof(l->key)) {
			FAIL("line %d: bad label name at '%s'", line, p);
			return false;
		}
		l = &smp->labels[smp->n_labels++];
		memcpy(l->key, p, n);
		l->key[n] = '\0';
		p += n;
		if (p[0] != '=' || p[1] != '"') {
			FAIL("line %d: label %s without =\"", line, l->key);
			return false;
		}
		for (p += 2; *p != '"'; p++) {
			char c = *p;

			if (!c || c == '\n') {
				FAIL("line %d: label %s's value not closed", line, l->key);
				return false;
			}
			if (c == '\\') {
				p++;
				c = *p == 'n' ? '\n' : *p;
				if (*p != 'n' && *p != '\\' && *p != '"') {
					FAIL("line %d: label %s: bad escape \\%c", line, l->key,
					     *p);
					return false;
				}
			}
			if (k + 1 < sizeof(l->value))
				l->value[k++] = c;
		}
		l->value[k] = '\0';
		p++;
		if (*p == ',')
			p++;
		else if (*p != '}') {
			FAIL("line %d: after label %s: '%s'", line, l->key, p);
			return false;
		}
	}
	*end = p + 1;
	return true;
}

static const struct family *family_of(const struct text *t, const char *name)
{
	for (size_t i = 0; i < t->n_families; i++)
		if (strcmp(t->families[i].name, name) == 0)
			return &t->families[i];
	return NULL;
}

static bool same_series(const struct sample *a, const struct sample *b)
{
	if (strcmp(a->name, b->name) != 0 || a->n_labels != b->n_labels)
		return false;
	for (size_t i = 0; i < a->n_labels; i++)
		if (strcmp(a->labels[i].key, b->labels[i].key) != 0 ||
		    strcmp(a->labels[i].value, b->labels[i].value) != 0)
			return false;
	return true;
}

/* A sample line, of the family whose HELP and TYPE came last. */
static void parse_sample(struct text *t, const char *s, const char *family, int line)
{
	struct sample *smp = &t->samples[t->n];
	size_t n = strcspn(s, "{ ");
	const char *p;
	char *end;

	if (t->n == SAMPLES_MAX) {
		FAIL("line %d: more than %d samples", line, SAMPLES_MAX);
		return;
	}
	memset(smp, 0, sizeof(*smp));
	CHECK(name_valid(s, n) && n < sizeof(smp->name), "line %d: bad name in '%s'", line, s);
	snprintf(smp->name, sizeof(smp->name), "%.*s", (int)n, s);
	CHECK(family && strcmp(smp->name, family) == 0,
	      "line %d: sample %s not under its own HELP and TYPE (last family %s)", line,
	      smp->name, family ? family : "none");
	p = s + n;
	if (*p == '{' && !parse_labels(p + 1, smp, &p, line))
		return;
	CHECK(*p == ' ', "line %d: no space before the value: '%s'", line, s);
	snprintf(smp->value_text, sizeof(smp->value_text), "%s", p + 1);
	smp->value = strtod(p + 1, &end);
	CHECK(end != p + 1 && *end == '\0', "line %d: value '%s' is not a number", line, p + 1);
	CHECK(smp->n_labels > 0 && strcmp(smp->labels[0].key, "node") == 0 &&
		      strcmp(smp->labels[0].value, "a") == 0,
	      "line %d: node=\"a\" is not its first label: %s", line, s);
	for (size_t i = 0; i < t->n; i++)
		CHECK(!same_series(&t->samples[i], smp), "line %d: series twice: %s", line, s);
	t->n++;
}

/* Reads the whole text into t, checking each line. */
static void parse(struct text *t, char *text)
{
	const char *family = NULL;
	bool want_type = false;
	int line = 0;

	memset(t, 0, sizeof(*t));
	CHECK(text[0] && text[strlen(text) - 1] == '\n', "the text does not end with a newline");
	for (char *s = strtok(text, "\n"); s; s = strtok(NULL, "\n")) {
		char name[128], type[16];
		struct family *fam;

		line++;
		if (strncmp(s, "# HELP ", 7) == 0) {
			size_t n = strcspn(s + 7, " ");

			CHECK(!want_type, "line %d: HELP where the TYPE of %s was due", line,
			      family);
			CHECK(name_valid(s + 7, n) && n < sizeof(name), "line %d: '%s'", line, s);
			snprintf(name, sizeof(name), "%.*s", (int)n, s + 7);
			CHECK(!family_of(t, name), "line %d: a second HELP of %s", line, name);
			CHECK(s[7 + n] == ' ' && s[8 + n], "line %d: %s has no help", line, name);
			CHECK(!strchr(s, '\\') || strstr(s, "\\\\") || strstr(s, "\\n"),
			      "line %d: a lone backslash in help", line);
			fam = &t->families[t->n_families++];
			snprintf(fam->name, sizeof(fam->name), "%s", name);
			family = fam->name;
			want_type = true;
		} else if (strncmp(s, "# TYPE ", 7) == 0) {
			CHECK(want_type && family, "line %d: TYPE without its HELP before", line);
			if (!family)
				continue;
			CHECK(sscanf(s + 7, "%127s %15s", name, type) == 2 &&
				      strcmp(name, family) == 0,
			      "line %d: '%s' is not the TYPE of %s", line, s, family);
			CHECK(strcmp(type, "counter") == 0 || strcmp(type, "gauge") == 0,
			      "line %d: type %s", line, type);
			snprintf(t->families[t->n_families - 1].type, sizeof(type), "%s", type);
			CHECK(strncmp(family, "ftvm_", 5) == 0, "line %d: %s is not ftvm_", line,
			      family);
			CHECK(ends_with(family, "_total") == (strcmp(type, "counter") == 0),
			      "line %d: %s %s: _total on counters and on counters alone", line,
			      type, family);
			want_type = false;
		} else {
			CHECK(s[0] != '#', "line %d: a comment that is not HELP or TYPE: %s", line,
			      s);
			CHECK(!want_type, "line %d: a sample before the TYPE of %s", line, family);
			parse_sample(t, s, family, line);
		}
	}
	for (size_t i = 0; i < t->n_families; i++) {
		size_t n = 0;

		for (size_t j = 0; j < t->n; j++)
			n += strcmp(t->samples[j].name, t->families[i].name) == 0;
		CHECK(n > 0, "family %s has no sample", t->families[i].name);
	}
}

/* The sample of name whose second label is key="value" (key NULL: none). */
static const struct sample *find(const struct text *t, const char *name, const char *key,
				 const char *value)
{
	for (size_t i = 0; i < t->n; i++) {
		const struct sample *s = &t->samples[i];

		if (strcmp(s->name, name) != 0)
			continue;
		if (!key && s->n_labels == 1)
			return s;
		if (key && s->n_labels >= 2 && strcmp(s->labels[1].key, key) == 0 &&
		    strcmp(s->labels[1].value, value) == 0)
			return s;
	}
	return NULL;
}

static const char *label_of(const struct sample *s, const char *key)
{
	for (size_t i = 0; i < s->n_labels; i++)
		if (strcmp(s->labels[i].key, key) == 0)
			return s->labels[i].value;
	return NULL;
}

/* ---- the status and sense written ---- */

#define ROW_INDEX(kind, name, wire, json, text) ROW_INDEX_##name,
enum {
	FTVM_STATUS_FIELDS(ROW_INDEX) N_ROWS
};

#define SET_ROW(kind, name, wire, json, text) SET_##kind(st->name, 1000 + ROW_INDEX_##name);
#define SET_U64(m, v) m = (v)
#define SET_U32(m, v) m = (v)
#define SET_I64(m, v) m = (v)
#define SET_BOOL(m, v) m = true
#define SET_STR(n) SET_NONE
#define SET_NONE(m, v)

static const char endpoint[] = "127.0.0.1:7102 \"quoted\" back\\slash\nnewline";

static void fill(struct ftvm_node_status *st, struct ftvm_sense *se)
{
	memset(st, 0, sizeof(*st));
	FTVM_STATUS_FIELDS(SET_ROW)
	strcpy(st->node, "a");
	strcpy(st->state, "active");
	strcpy(st->ack, "durable");
	strcpy(st->transport, "tcp");
	strcpy(st->transport_reason, "loopback 1000");
	strcpy(st->partner_id, "b");
	strcpy(st->partner_link, "up");
	strcpy(st->partner_state, "resyncing");
	snprintf(st->partner_endpoint, sizeof(st->partner_endpoint), "%s", endpoint);
	strcpy(st->partner_auth, "key");
	strcpy(st->partner_ack, "mirror");
	strcpy(st->partner_store_state, "active");
	strcpy(st->store_error, "cannot write the slot");
	strcpy(st->reason, "because 1001");

	memset(se, 0, sizeof(*se));
	strcpy(se->media[0].type, "dram");
	se->media[0].capacity = 16u << 20;
	se->media[0].free = 12u << 20;
	strcpy(se->media[1].type, "store");
	se->media[1].capacity = 64u << 20;
	se->media[1].free = 60u << 20;
	strcpy(se->media[2].type, "flash");
	se->media[2].capacity = 1u << 30;
	se->media[2].free = 1u << 29;
	se->n_media = 3;
	strcpy(se->cache[0].type, "dram");
	se->cache[0].capacity = 4u << 20;
	se->cache[0].free = 3u << 20;
	strcpy(se->cache[1].type, "flash");
	se->cache[1].capacity = 2u << 20;
	se->cache[1].free = 1u << 20;
	se->n_cache = 2;
	se->paging_queue = 7;
	se->destage_queue = 8;
	se->replacement_queue = 9;
}

static char *write_text(const struct ftvm_node_status *st, const struct ftvm_sense *se)
{
	char *buf = NULL;
	size_t len = 0;
	FILE *f = open_memstream(&buf, &len);

	if (!f)
		die("open_memstream");
	CHECK_INT("metrics_text_write", 0, metrics_text_write(f, st, se));
	if (fclose(f) != 0)
		die("fclose");
	return buf;
}

/* ---- each line of metrics_table.h in the text ---- */

enum t_how {
	T_NODE,
	T_COUNTER,
	T_GAUGE,
	T_SECONDS,
	T_STATE,
	T_INFO,
	T_IS,
	T_NONEMPTY,
	T_NOT
};

/* A line of the table as the test reads it. */
struct t_line {
	const char *row;
	int index; /* in FTVM_STATUS_FIELDS */
	enum t_how how;
	const char *name, *label, *values;
};
#define T_LINE(row, how) { #row, ROW_INDEX_##row, T_LINE_##how },
#define T_LINE_NODE_LABEL T_NODE, NULL, NULL, NULL
#define T_LINE_COUNTER(n, l, h) T_COUNTER, n, l, NULL
#define T_LINE_GAUGE(n, l, h) T_GAUGE, n, l, NULL
#define T_LINE_SECONDS(n, l, h) T_SECONDS, n, l, NULL
#define T_LINE_STATE(n, l, v, h) T_STATE, n, l, v
#define T_LINE_INFO(n, l, h) T_INFO, n, l, NULL
#define T_LINE_IS(n, w, h) T_IS, n, w, NULL
#define T_LINE_NONEMPTY(n, h) T_NONEMPTY, n, NULL, NULL
#define T_LINE_NOT(why) T_NOT, NULL, NULL, NULL
static const struct t_line t_lines[] = { METRICS_ROWS(T_LINE) };
#define N_T_LINES (sizeof(t_lines) / sizeof(t_lines[0]))

/* A number row's sample: its name, its label, its value, its family's type. */
static void check_number(const struct text *t, const struct t_line *l)
{
	const struct family *fam = family_of(t, l->name);
	const char *type = l->how == T_COUNTER ? "counter" : "gauge";
	const char *eq = strchr(l->label, '=');
	unsigned v = 1000 + (unsigned)l->index;
	char key[64] = "", expected[32];
	const struct sample *s;

	if (eq)
		snprintf(key, sizeof(key), "%.*s", (int)(eq - l->label), l->label);
	s = find(t, l->name, eq ? key : NULL, eq ? eq + 1 : NULL);
	CHECK(fam && strcmp(fam->type, type) == 0, "row %s: %s is not a %s", l->row, l->name, type);
	CHECK((l->how == T_SECONDS) == ends_with(l->name, "_seconds"),
	      "row %s: %s: _seconds on the milliseconds made seconds, and on them alone", l->row,
	      l->name);
	if (l->how == T_SECONDS)
		snprintf(expected, sizeof(expected), "%u.%03u", v / 1000, v % 1000);
	else if (strcmp(l->row, "journal_given_up") == 0)
		snprintf(expected, sizeof(expected), "1"); /* the BOOL row: true */
	else
		snprintf(expected, sizeof(expected), "%u", v);
	CHECK(s && strcmp(s->value_text, expected) == 0, "row %s: %s{%s} is %s, expected %s",
	      l->row, l->name, l->label, s ? s->value_text : "missing", expected);
}

/* 1 for the string's value of the set, 0 for each other. */
static void check_state(const struct text *t, const struct t_line *l, const char *value)
{
	char v[64];

	CHECK(value, "row %s: the test sets no string for it", l->row);
	for (const char *p = l->values; value && *p;) {
		size_t n = strcspn(p, " ");
		const struct sample *s;

		snprintf(v, sizeof(v), "%.*s", (int)n, p);
		s = find(t, l->name, l->label, v);
		CHECK(s && s->value == (strcmp(v, value) == 0),
		      "row %s: %s{%s=\"%s\"} is %s, expected %d", l->row, l->name, l->label, v,
		      s ? s->value_text : "missing", strcmp(v, value) == 0);
		p += n;
		p += strspn(p, " ");
	}
}

/* The row's own value (1000 + its place) is nowhere in the text. */
static void check_not(const struct text *t, const struct t_line *l)
{
	for (size_t i = 0; i < t->n; i++)
		CHECK(t->samples[i].value != 1000 + l->index,
		      "row %s is not exported, yet %s has its value %d", l->row, t->samples[i].name,
		      1000 + l->index);
}

static const char *string_of(const struct ftvm_node_status *st, const char *row)
{
	static const struct {
		const char *row;
		size_t offset;
	} strings[] = {
		{ "state", offsetof(struct ftvm_node_status, state) },
		{ "ack", offsetof(struct ftvm_node_status, ack) },
		{ "transport", offsetof(struct ftvm_node_status, transport) },
		{ "partner_state", offsetof(struct ftvm_node_status, partner_state) },
		{ "partner_auth", offsetof(struct ftvm_node_status, partner_auth) },
		{ "partner_ack", offsetof(struct ftvm_node_status, partner_ack) },
		{ "partner_store_state", offsetof(struct ftvm_node_status, partner_store_state) },
		{ "partner_id", offsetof(struct ftvm_node_status, partner_id) },
		{ "partner_endpoint", offsetof(struct ftvm_node_status, partner_endpoint) },
	};

	for (size_t i = 0; i < sizeof(strings) / sizeof(strings[0]); i++)
		if (strcmp(strings[i].row, row) == 0)
			return (const char *)st + strings[i].offset;
	return NULL;
}

/* Every line of the table, against the text of a status filled by fill(). */
static void test_every_row(void)
{
	struct ftvm_node_status st;
	struct ftvm_sense se;
	struct text *t = xcalloc(sizeof(*t));
	const struct sample *s;
	size_t not_exported = 0, media_samples = 0;
	char *text;

	fill(&st, &se);
	text = write_text(&st, &se);
	parse(t, text);
	CHECK_INT("lines in metrics_table.h", N_ROWS, N_T_LINES);
	for (size_t i = 0; i < N_T_LINES; i++) {
		const struct t_line *l = &t_lines[i];
		const char *str = string_of(&st, l->row);

		switch (l->how) {
		case T_NODE:
			break;
		case T_COUNTER:
		case T_GAUGE:
		case T_SECONDS:
			check_number(t, l);
			break;
		case T_STATE:
			check_state(t, l, str);
			break;
		case T_INFO:
			s = find(t, l->name, "partner", "b");
			CHECK(s && s->value == 1 && str && label_of(s, l->label) &&
				      strcmp(label_of(s, l->label), str) == 0,
			      "row %s: %s{%s} is not \"%s\"", l->row, l->name, l->label,
			      str ? str : "?");
			break;
		case T_IS:
			s = find(t, l->name, NULL, NULL);
			CHECK(s && s->value == 1, "row %s: %s should be 1 (the string is %s)",
			      l->row, l->name, l->label);
			break;
		case T_NONEMPTY:
			s = find(t, l->name, NULL, NULL);
			CHECK(s && s->value == 1, "row %s: %s should be 1 (the string is set)",
			      l->row, l->name);
			break;
		case T_NOT:
			check_not(t, l);
			not_exported++;
			break;
		}
	}
	printf("%zu lines of metrics_table.h checked (%zu not exported) in %zu samples of %zu "
	       "families\n",
	       N_T_LINES, not_exported, t->n, t->n_families);
	/* The sense's families. */
	s = find(t, "ftvm_media_free_bytes", "media", "flash");
	CHECK(s && s->value == (1u << 29) && strcmp(label_of(s, "partition"), "server") == 0,
	      "flash's free bytes: %s", s ? s->value_text : "missing");
	for (size_t i = 0; i < t->n; i++) {
		const struct sample *m = &t->samples[i];

		if (strcmp(m->name, "ftvm_media_capacity_bytes") == 0 &&
		    strcmp(label_of(m, "partition"), "cache") == 0 &&
		    strcmp(label_of(m, "media"), "dram") == 0)
			CHECK(m->value == (4u << 20), "the DRAM cache's capacity: %s",
			      m->value_text);
	}
	s = find(t, "ftvm_queue_depth", "queue", "destage");
	CHECK(s && s->value == 8, "the destage queue: %s", s ? s->value_text : "missing");
	for (size_t i = 0; i < t->n; i++)
		media_samples += strncmp(t->samples[i].name, "ftvm_media_", 11) == 0;
	CHECK_INT("media samples", 2 * (se.n_media + se.n_cache), media_samples);
	free(text);
	free(t);
}

/* Strings a node does not say (an older node: no ack) or that are outside
 * their set; no sense. */
static void test_odd_strings(void)
{
	struct ftvm_node_status st;
	struct ftvm_sense se;
	struct text *t = xcalloc(sizeof(*t));
	const struct sample *s;
	char *text;

	fill(&st, &se);
	st.ack[0] = '\0';
	strcpy(st.transport, "carrier-pigeon");
	strcpy(st.partner_link, "down");
	st.store_error[0] = '\0';
	text = write_text(&st, NULL);
	parse(t, text);
	for (size_t i = 0; i < t->n; i++) {
		CHECK(strcmp(t->samples[i].name, "ftvm_ack_level") != 0 || t->samples[i].value == 0,
		      "an empty ack made ftvm_ack_level{level=\"%s\"} %s",
		      label_of(&t->samples[i], "level"), t->samples[i].value_text);
		CHECK(strncmp(t->samples[i].name, "ftvm_media_", 11) != 0 &&
			      strcmp(t->samples[i].name, "ftvm_queue_depth") != 0,
		      "no sense, yet %s", t->samples[i].name);
	}
	s = find(t, "ftvm_transport", "transport", "carrier-pigeon");
	CHECK(s && s->value == 1, "a transport outside the set is not shown");
	s = find(t, "ftvm_transport", "transport", "tcp");
	CHECK(s && s->value == 0, "tcp should be 0 now");
	s = find(t, "ftvm_partner_link_up", NULL, NULL);
	CHECK(s && s->value == 0, "link down should be 0");
	s = find(t, "ftvm_fence_slot_failing", NULL, NULL);
	CHECK(s && s->value == 0, "no store_error should be 0");
	free(text);
	free(t);
}

/* Strings filling their members to the last byte, unterminated. */
static void test_full_strings(void)
{
	struct ftvm_node_status full, *st = &full;
	struct text *t = xcalloc(sizeof(*t));
	char *text;
	const struct sample *s;

	memset(st, 'x', sizeof(*st));
	FTVM_STATUS_FIELDS(SET_ROW)
	strcpy(st->node, "a");
	text = write_text(st, NULL);
	parse(t, text);
	s = find(t, "ftvm_state", "state", "active");
	CHECK(s && s->value == 0, "state 'xxx...' is not active");
	for (size_t i = 0; i < t->n; i++)
		if (strcmp(t->samples[i].name, "ftvm_state") == 0 && t->samples[i].value == 1)
			CHECK_INT("the unknown state's length", sizeof(st->state),
				  strlen(label_of(&t->samples[i], "state")));
	free(text);
	free(t);
}

int main(void)
{
	test_every_row();
	test_odd_strings();
	test_full_strings();
	printf("%d checks, %d failed\n", checks, failures);
	return failures ? 1 : 0;
}
