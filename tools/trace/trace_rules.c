/* trace_rules.h. The table below is the one place that says which fields of
 * an answer may differ between the recorded run and the replay; TRACE.md
 * lists the same fields with the reasons. */
#include "trace_rules.h"

#include <errno.h>
#include <inttypes.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "pb_field.h"

enum rule {
	RULE_EXACT,
	RULE_IGNORE,
	RULE_TEXT, /* compared once the bound guids and owners are put in */
	/* a scalar added after traces were recorded: compared exactly where
	 * the trace has a value, and not missed where an older trace has none */
	RULE_SINCE,
	/* mapped, each in its own namespace */
	RULE_MAP_GUID,
	RULE_MAP_OWNER,
	RULE_MAP_EPOCH,
	RULE_MAP_LSN, /* the node's own journal positions; the partner's are replayed as
		       * recorded, so what the node says it applied of them is exact */
	RULE_MAP_SEQ, /* the node's own request numbers */
	RULE_MAP_OFFSET,
	RULE_MAP_EXTENT,
	N_MAPS = RULE_MAP_EXTENT - RULE_MAP_GUID + 1,
};

static const char *const map_names[N_MAPS] = { "guid", "owner",	 "epoch",	"lsn",
					       "seq",  "offset", "store offset" };

/* message "*": any message; field "*": every field of the message. The most
 * specific entry wins: message and field, then message and "*", then "*"
 * and field. */
static const struct {
	const char *message, *field;
	enum rule rule;
} rules[] = {
	{ "Envelope", "seq", RULE_MAP_SEQ },
	{ "Envelope", "epoch", RULE_MAP_EPOCH },
	{ "Envelope", "lsn", RULE_MAP_LSN },
	/* The node's Hello is never compared; these say what it would be. The
	 * partner's that the replayer sends at a new link (replay_failover.c)
	 * gets its epoch by trace_rewrite() and its applied_lsn, which is the
	 * node's, by trace_maps_node_lsn(); its own_lsn is the partner's and
	 * goes as recorded. */
	{ "Hello", "epoch", RULE_MAP_EPOCH },
	{ "Hello", "own_lsn", RULE_MAP_LSN },
	{ "ResyncBegin", "epoch", RULE_MAP_EPOCH },
	{ "ResyncBegin", "freed", RULE_MAP_GUID },
	{ "ResyncEnd", "epoch", RULE_MAP_EPOCH },
	{ "ResyncEnd", "lsn", RULE_MAP_LSN },
	{ "*", "guid", RULE_MAP_GUID },
	{ "*", "owner", RULE_MAP_OWNER },
	{ "LockStatus", "owners", RULE_MAP_OWNER },
	{ "PointerReply", "offset", RULE_MAP_OFFSET },
	{ "AllocateMemory", "store_offset", RULE_MAP_EXTENT },
	{ "Heartbeat", "sent_us", RULE_IGNORE },
	/* Where a node's copy rests follows its own devices and policies. */
	{ "Header", "media", RULE_IGNORE },
	{ "Header", "partition", RULE_IGNORE },
	{ "SpaceStatus", "media", RULE_IGNORE },
	/* What a SpaceRequest names since the partner's media are asked. */
	{ "SpaceRequest", "policy", RULE_SINCE },
	{ "SpaceRequest", "pages", RULE_SINCE },
	{ "SpaceRequest", "block_size", RULE_SINCE },
	/* Since a write pointer's partner pages its copy in (node/vmm/VMM.md). */
	{ "AllocateWrite", "page_in", RULE_SINCE },
	{ "LockRequest", "wait_ms", RULE_IGNORE },
	/* A client's session id is random, made by libftvm per client. */
	{ "AllocateMemory", "session", RULE_IGNORE },
	{ "AllocRequest", "session", RULE_IGNORE },
	{ "SessionQuery", "session", RULE_IGNORE },
	{ "SessionRequest", "session", RULE_IGNORE },
	/* One-sided page data: where the free frames are, and the generations
	 * and keys of the pool's registrations, differ run to run. */
	{ "Landing", "frame", RULE_IGNORE },
	{ "Landing", "generation", RULE_IGNORE },
	{ "PoolRegion", "generation", RULE_IGNORE },
	{ "PoolRegion", "addr", RULE_IGNORE },
	{ "PoolRegion", "rkey", RULE_IGNORE },
	{ "RegionUpdate", "*", RULE_IGNORE },
	{ "StatusReply", "*", RULE_IGNORE },
	{ "StatusReply", "node", RULE_EXACT },
	{ "StatusReply", "page_size", RULE_EXACT },
	{ "StatusReply", "frames_total", RULE_EXACT },
	{ "SenseInformation", "destage_queue", RULE_IGNORE },
	{ "SenseInformation", "replacement_queue", RULE_IGNORE },
	/* The device discovery table: the endpoints are the run's addresses, and
	 * the rest each node's view of the pair and of its media at the time. */
	{ "DiscoveredNode", "*", RULE_IGNORE },
	{ "DiscoveredNode", "self", RULE_EXACT },
	{ "*", "reason", RULE_TEXT },
};

struct binding {
	char *recorded, *now;
};

struct map {
	struct binding *b;
	size_t n, cap;
};

struct trace_maps {
	struct map maps[N_MAPS];
};

static enum rule rule_of(const ProtobufCMessage *m, const ProtobufCFieldDescriptor *f)
{
	const char *msg = m->descriptor->short_name;
	int best = -1, score = 0;

	for (size_t i = 0; i < sizeof(rules) / sizeof(rules[0]); i++) {
		bool msg_eq = strcmp(rules[i].message, msg) == 0;
		bool field_eq = strcmp(rules[i].field, f->name) == 0;
		int s = msg_eq && field_eq				 ? 3
			: msg_eq && strcmp(rules[i].field, "*") == 0	 ? 2
			: strcmp(rules[i].message, "*") == 0 && field_eq ? 1
									 : 0;
		if (s > score) {
			score = s;
			best = (int)i;
		}
	}
	return best < 0 ? RULE_EXACT : rules[best].rule;
}

int trace_maps_new(struct trace_maps **ret)
{
	*ret = calloc(1, sizeof(**ret));
	return *ret ? 0 : -ENOMEM;
}

void trace_maps_free(struct trace_maps *maps)
{
	if (!maps)
		return;
	for (int k = 0; k < N_MAPS; k++) {
		for (size_t i = 0; i < maps->maps[k].n; i++) {
			free(maps->maps[k].b[i].recorded);
			free(maps->maps[k].b[i].now);
		}
		free(maps->maps[k].b);
	}
	free(maps);
}

static const char *lookup(const struct map *m, const char *recorded)
{
	for (size_t i = 0; i < m->n; i++)
		if (strcmp(m->b[i].recorded, recorded) == 0)
			return m->b[i].now;
	return NULL;
}

/* Binds recorded to now, or checks the binding made before. */
static int bind(struct map *m, const char *name, const char *recorded, const char *now, char *why,
		size_t why_len)
{
	struct binding *b;

	for (size_t i = 0; i < m->n; i++) {
		if (strcmp(m->b[i].recorded, recorded) == 0) {
			if (strcmp(m->b[i].now, now) == 0)
				return 0;
			snprintf(why, why_len,
				 "recorded %s %s stands for %s in this run, but here is %s", name,
				 recorded, m->b[i].now, now);
			return -1;
		}
		if (strcmp(m->b[i].now, now) == 0) {
			snprintf(why, why_len,
				 "%s %s of this run stands for recorded %s, but here for %s", name,
				 now, m->b[i].recorded, recorded);
			return -1;
		}
	}
	if (m->n == m->cap) {
		size_t cap = m->cap ? 2 * m->cap : 16;

		b = realloc(m->b, cap * sizeof(*b));
		if (!b)
			goto nomem;
		m->b = b;
		m->cap = cap;
	}
	b = &m->b[m->n];
	b->recorded = strdup(recorded);
	b->now = strdup(now);
	if (!b->recorded || !b->now) {
		free(b->recorded);
		free(b->now);
		goto nomem;
	}
	m->n++;
	return 0;
nomem:
	snprintf(why, why_len, "out of memory");
	return -1;
}

/* A number bound in map rule (numbers are bound as text), 0 when not. */
static uint64_t lookup_number(const struct trace_maps *maps, enum rule rule, uint64_t recorded)
{
	char rec[32];
	const char *now;

	snprintf(rec, sizeof(rec), "%" PRIu64, recorded);
	now = lookup(&maps->maps[rule - RULE_MAP_GUID], rec);
	return now ? strtoull(now, NULL, 10) : 0;
}

uint64_t trace_maps_node_seq(const struct trace_maps *maps, uint64_t recorded)
{
	return lookup_number(maps, RULE_MAP_SEQ, recorded);
}

uint64_t trace_maps_node_lsn(const struct trace_maps *maps, uint64_t recorded)
{
	return lookup_number(maps, RULE_MAP_LSN, recorded);
}

uint64_t trace_maps_epoch(const struct trace_maps *maps, uint64_t recorded)
{
	return lookup_number(maps, RULE_MAP_EPOCH, recorded);
}

int trace_maps_bind_epoch(struct trace_maps *maps, uint64_t recorded, uint64_t now, char *why,
			  size_t why_len)
{
	char rec[32], new[32];

	snprintf(rec, sizeof(rec), "%" PRIu64, recorded);
	snprintf(new, sizeof(new), "%" PRIu64, now);
	return bind(&maps->maps[RULE_MAP_EPOCH - RULE_MAP_GUID],
		    map_names[RULE_MAP_EPOCH - RULE_MAP_GUID], rec, new, why, why_len);
}

/* s with every bound guid and owner replaced by its new value, longest
 * first so that "a-1" does not eat into "a-12". */
static char *substitute(const struct trace_maps *maps, const char *s)
{
	char *out = strdup(s);

	for (bool again = true; out && again;) {
		const struct binding *best = NULL;
		const char *at = NULL;

		again = false;
		for (int k = RULE_MAP_GUID; k <= RULE_MAP_OWNER; k++) {
			const struct map *m = &maps->maps[k - RULE_MAP_GUID];

			for (size_t i = 0; i < m->n; i++) {
				const char *p = strstr(out, m->b[i].recorded);

				if (p && strcmp(m->b[i].recorded, m->b[i].now) != 0 &&
				    (!best || strlen(m->b[i].recorded) > strlen(best->recorded))) {
					best = &m->b[i];
					at = p;
				}
			}
		}
		if (best) {
			size_t pre = (size_t)(at - out), rl = strlen(best->recorded);
			size_t nl = strlen(best->now), len = strlen(out) - rl + nl;
			char *n = malloc(len + 1);

			if (n) {
				memcpy(n, out, pre);
				memcpy(n + pre, best->now, nl);
				strcpy(n + pre + nl, at + rl);
			}
			free(out);
			out = n;
			again = true;
		}
	}
	return out;
}

struct walk {
	struct trace_maps *maps;
	char path[256];
	char why[384];
};

static int compare_message(struct walk *w, const ProtobufCMessage *e, const ProtobufCMessage *a);

static int compare_value(struct walk *w, const ProtobufCMessage *m,
			 const ProtobufCFieldDescriptor *f, const struct pb_value *e,
			 const struct pb_value *a)
{
	enum rule rule = rule_of(m, f);
	char et[128], at[128];

	if (f->type == PROTOBUF_C_TYPE_MESSAGE)
		return compare_message(w, e->msg, a->msg);
	if (rule == RULE_SINCE && pb_value_is_default(e))
		return 0; /* a trace from before the field */
	pb_value_format(e, f, et, sizeof(et));
	pb_value_format(a, f, at, sizeof(at));
	if (rule >= RULE_MAP_GUID && f->type != PROTOBUF_C_TYPE_BYTES) {
		/* Values are bound as text: one namespace for the numbers and the
		 * strings of a kind. */
		return bind(&w->maps->maps[rule - RULE_MAP_GUID], map_names[rule - RULE_MAP_GUID],
			    et, at, w->why, sizeof(w->why));
	}
	if (rule == RULE_TEXT && f->type == PROTOBUF_C_TYPE_STRING) {
		char *expected = substitute(w->maps, e->s);
		bool eq = expected && strcmp(expected, a->s) == 0;

		if (!eq)
			snprintf(w->why, sizeof(w->why), "expected \"%s\", got \"%s\"",
				 expected ? expected : e->s, a->s);
		free(expected);
		return eq ? 0 : -1;
	}
	if (pb_value_equal(e, a))
		return 0;
	if (f->type == PROTOBUF_C_TYPE_STRING)
		snprintf(w->why, sizeof(w->why), "expected \"%s\", got \"%s\"", et, at);
	else
		snprintf(w->why, sizeof(w->why), "expected %s, got %s", et, at);
	return -1;
}

static int compare_field(struct walk *w, const ProtobufCMessage *e, const ProtobufCMessage *a,
			 const ProtobufCFieldDescriptor *f)
{
	size_t ne = pb_field_count(e, f), na = pb_field_count(a, f), len = strlen(w->path);

	if (rule_of(e, f) == RULE_IGNORE)
		return 0;
	snprintf(w->path + len, sizeof(w->path) - len, ".%s", f->name);
	if (ne != na) {
		if (f->label == PROTOBUF_C_LABEL_REPEATED)
			snprintf(w->why, sizeof(w->why), "expected %zu values, got %zu", ne, na);
		else
			snprintf(w->why, sizeof(w->why), "%s", ne ? "missing" : "not expected");
		return -1;
	}
	for (size_t i = 0; i < ne; i++) {
		struct pb_value ev = pb_field_get(e, f, i), av = pb_field_get(a, f, i);
		size_t l2 = strlen(w->path);

		if (f->label == PROTOBUF_C_LABEL_REPEATED)
			snprintf(w->path + l2, sizeof(w->path) - l2, "[%zu]", i);
		if (compare_value(w, e, f, &ev, &av) < 0)
			return -1;
		w->path[l2] = '\0';
	}
	w->path[len] = '\0';
	return 0;
}

static int compare_message(struct walk *w, const ProtobufCMessage *e, const ProtobufCMessage *a)
{
	const ProtobufCMessageDescriptor *d = e->descriptor;
	const ProtobufCFieldDescriptor *me = pb_oneof_member(e), *ma = pb_oneof_member(a);

	if (me != ma) {
		snprintf(w->why, sizeof(w->why), "carries %s, expected %s",
			 ma ? ma->name : "nothing", me ? me->name : "nothing");
		return -1;
	}
	for (unsigned i = 0; i < d->n_fields; i++)
		if (compare_field(w, e, a, &d->fields[i]) < 0)
			return -1;
	return 0;
}

int trace_compare(struct trace_maps *maps, const ProtobufCMessage *recorded,
		  const ProtobufCMessage *actual, char *where, size_t where_len)
{
	struct walk w = { .maps = maps };

	snprintf(w.path, sizeof(w.path), "%s", recorded->descriptor->short_name);
	if (recorded->descriptor != actual->descriptor) {
		snprintf(where, where_len, "a %s came, expected a %s",
			 actual->descriptor->short_name, recorded->descriptor->short_name);
		return -1;
	}
	if (compare_message(&w, recorded, actual) == 0)
		return 0;
	snprintf(where, where_len, "%s: %s", w.path, w.why);
	return -1;
}

/* Points *s at the maps' string: the message's memory is an arena
 * (common/pb_arena.h), which neither frees the recorded string nor would
 * free a copy, and the maps outlive every message of the replay. */
static void rewrite_string(struct trace_maps *maps, enum rule rule, char **s)
{
	const char *now = lookup(&maps->maps[rule - RULE_MAP_GUID], *s);

	if (now)
		*s = (char *)now;
}

/* The pair shares one sequence of epochs, so a recorded epoch stands for
 * the same new one in what either side says (unlike an LSN: the partner's
 * are sent as recorded). */
static void rewrite_epoch(const struct trace_maps *maps, uint64_t *epoch)
{
	uint64_t now = trace_maps_epoch(maps, *epoch);

	if (now)
		*epoch = now;
}

void trace_rewrite(struct trace_maps *maps, ProtobufCMessage *m)
{
	const ProtobufCMessageDescriptor *d = m->descriptor;

	for (unsigned i = 0; i < d->n_fields; i++) {
		const ProtobufCFieldDescriptor *f = &d->fields[i];
		enum rule rule = rule_of(m, f);
		size_t n = pb_field_count(m, f);
		char *base = (char *)m + f->offset;

		for (size_t j = 0; j < n; j++) {
			bool repeated = f->label == PROTOBUF_C_LABEL_REPEATED;

			if (f->type == PROTOBUF_C_TYPE_MESSAGE)
				trace_rewrite(maps, repeated ? (*(ProtobufCMessage ***)base)[j]
							     : *(ProtobufCMessage **)base);
			else if (f->type == PROTOBUF_C_TYPE_STRING &&
				 (rule == RULE_MAP_GUID || rule == RULE_MAP_OWNER))
				rewrite_string(maps, rule,
					       repeated ? &(*(char ***)base)[j] : (char **)base);
			else if (f->type == PROTOBUF_C_TYPE_UINT64 && !repeated &&
				 rule == RULE_MAP_EPOCH)
				rewrite_epoch(maps, (uint64_t *)base);
		}
	}
}
