/* ftvm-status-size SOCKET: the sized status, sense, verify and discover
 * calls (ftvm.h, "Compatibility") against a running node. A program built
 * with a smaller struct (or discovery row) gets its prefix and not a byte
 * more; one built with a larger one gets zeroes past what this library
 * knows; a size of 0 is refused.
 * Prints one line per check, "ok: ..." or "FAIL: ...", and exits 1 on any
 * failure. */
#include <errno.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <ftvm.h>

#define CANARY 0xa5
#define SPARE 64 /* bytes past the struct, as a newer ftvm.h might add */

static int failed;

static void check(int cond, const char *what)
{
	printf("%s: %s\n", cond ? "ok" : "FAIL", what);
	if (!cond)
		failed = 1;
}

static int all_bytes(const unsigned char *p, size_t n, unsigned char value)
{
	for (size_t i = 0; i < n; i++)
		if (p[i] != value)
			return 0;
	return 1;
}

/* A sized call as the library exports it, and what says its result is
 * filled in. */
struct sized_call {
	const char *name;
	int (*call)(struct ftvm_client *c, void *ret, size_t ret_size);
	size_t size;  /* sizeof the struct, as this program knows it */
	size_t older; /* where an older program's struct ended */
	int (*filled)(const void *ret);
};

static int status_call(struct ftvm_client *c, void *ret, size_t ret_size)
{
	return ftvm_status_sized(c, ret, ret_size);
}

static int status_filled(const void *ret)
{
	const struct ftvm_node_status *st = ret;

	return strlen(st->node) < sizeof(st->node) && st->epoch >= 1;
}

static int sense_call(struct ftvm_client *c, void *ret, size_t ret_size)
{
	return ftvm_sense_sized(c, ret, ret_size);
}

static int sense_filled(const void *ret)
{
	const struct ftvm_sense *s = ret;

	return s->n_media >= 1 && s->n_media <= 4 &&
	       strlen(s->media[0].type) < sizeof(s->media[0].type);
}

static int verify_call(struct ftvm_client *c, void *ret, size_t ret_size)
{
	return ftvm_verify_sized(c, ret, ret_size);
}

/* The pair under test holds nothing: equal, no difference to free. */
static int verify_filled(const void *ret)
{
	const struct ftvm_verify *v = ret;

	return v->equal && v->n_differences == 0 && !v->differences;
}

static void check_sized(struct ftvm_client *c, const struct sized_call *sc)
{
	union {
		struct ftvm_node_status st;
		struct ftvm_sense s;
		struct ftvm_verify v;
		unsigned char bytes[sizeof(struct ftvm_node_status) + sizeof(struct ftvm_sense) +
				    sizeof(struct ftvm_verify) + SPARE];
	} buf;
	char what[80];
	int r;

	memset(&buf, CANARY, sizeof(buf));
	r = sc->call(c, &buf, sc->older);
	snprintf(what, sizeof(what), "%s into an older, smaller struct", sc->name);
	check(r == 0, what);
	check(r == 0 && sc->filled(&buf), "  its fields are filled");
	check(all_bytes(buf.bytes + sc->older, sizeof(buf) - sc->older, CANARY),
	      "  not a byte written past its size");

	memset(&buf, CANARY, sizeof(buf));
	snprintf(what, sizeof(what), "%s into a newer, larger struct", sc->name);
	check(sc->call(c, &buf, sc->size + SPARE) == 0, what);
	check(all_bytes(buf.bytes + sc->size, SPARE, 0),
	      "  the fields this library does not know are zero");

	snprintf(what, sizeof(what), "%s of size 0: -EINVAL", sc->name);
	check(sc->call(c, &buf, 0) == -EINVAL, what);
}

static const struct sized_call sized_calls[] = {
	/* An older program's status ended before frames_total. */
	{ "status", status_call, sizeof(struct ftvm_node_status),
	  offsetof(struct ftvm_node_status, frames_total), status_filled },
	{ "sense", sense_call, sizeof(struct ftvm_sense),
	  offsetof(struct ftvm_sense, destage_queue), sense_filled },
	/* Verify's ended at n_differences, before busy and rounds. */
	{ "verify", verify_call, sizeof(struct ftvm_verify), offsetof(struct ftvm_verify, busy),
	  verify_filled },
};

/* The discovery's rows are an array: sized by the row (ftvm.h,
 * "Compatibility"). An older program's rows ended before the media. */
static void check_discover(struct ftvm_client *c)
{
	enum {
		OLD = offsetof(struct ftvm_device, media),
		NEW = sizeof(struct ftvm_device) + SPARE
	};
	static unsigned char buf[FTVM_PAIR_NODES * NEW + SPARE];
	struct ftvm_device d[FTVM_PAIR_NODES];
	size_t n = 0;
	int r;

	memset(buf, CANARY, sizeof(buf));
	r = ftvm_discover_sized(c, (struct ftvm_device *)buf, FTVM_PAIR_NODES, &n, OLD);
	check(r == 0 && n == FTVM_PAIR_NODES, "discover into older, smaller rows");
	memset(d, 0, sizeof(d));
	for (size_t i = 0; i < FTVM_PAIR_NODES; i++)
		memcpy(&d[i], buf + i * OLD, OLD);
	check(d[0].self && d[0].reachable && d[0].node[0] && !d[1].self && d[1].node[0] &&
		      strcmp(d[0].node, d[1].node) != 0,
	      "  each row at its stride: this node, then its partner");
	check(all_bytes(buf + FTVM_PAIR_NODES * OLD, sizeof(buf) - FTVM_PAIR_NODES * OLD, CANARY),
	      "  not a byte written past the rows");

	memset(buf, CANARY, sizeof(buf));
	r = ftvm_discover_sized(c, (struct ftvm_device *)buf, FTVM_PAIR_NODES, &n, NEW);
	check(r == 0 && n == FTVM_PAIR_NODES, "discover into newer, larger rows");
	for (size_t i = 0; i < FTVM_PAIR_NODES; i++) {
		memcpy(&d[i], buf + i * NEW, sizeof(d[i]));
		check(all_bytes(buf + i * NEW + sizeof(d[i]), SPARE, 0),
		      "  the fields this library does not know are zero");
	}
	check(d[0].self && d[0].n_media >= 2 && d[1].reachable && d[1].n_media >= 2,
	      "  both rows filled, with their media");
	check(ftvm_discover_sized(c, d, FTVM_PAIR_NODES, &n, 0) == -EINVAL,
	      "discover with rows of size 0: -EINVAL");
}

/* The mapping's rows, sized by the row too: an older program's ended
 * before partition, and the exported ftvm_mapping and ftvm_mapping_of
 * (the names ftvm.h now makes macros) still give it those. */
static void check_mapping(struct ftvm_client *c)
{
	enum {
		OLD = offsetof(struct ftvm_mapping, partition),
		NEW = sizeof(struct ftvm_mapping) + SPARE
	};
	static unsigned char one[NEW + SPARE];
	struct ftvm_mapping m, *rows = NULL;
	size_t n = 0;
	int r;

	r = (ftvm_mapping)(c, &rows, &n);
	check(r == 0 && n >= 2, "mapping by the old name: a row per allocation");
	for (size_t i = 0; r == 0 && i < n; i++) {
		memset(&m, 0, sizeof(m));
		memcpy(&m, (unsigned char *)rows + i * OLD, OLD);
		check(m.guid[0] && m.media[0] && m.pages, "  each row at the old stride");
	}
	free(rows);
	r = ftvm_mapping(c, &rows, &n);
	check(r == 0 && n >= 2 && rows[0].partition[0] && rows[n - 1].partition[0],
	      "mapping with this program's rows: each has its partition");
	if (r < 0 || n == 0)
		return;
	memset(one, CANARY, sizeof(one));
	r = (ftvm_mapping_of)(c, rows[0].guid, (struct ftvm_mapping *)one);
	check(r == 0 && all_bytes(one + OLD, sizeof(one) - OLD, CANARY),
	      "mapping_of by the old name: not a byte written past the old row");
	memset(one, CANARY, sizeof(one));
	r = ftvm_mapping_of_sized(c, rows[0].guid, (struct ftvm_mapping *)one, NEW);
	memcpy(&m, one, sizeof(m));
	check(r == 0 && strcmp(m.partition, rows[0].partition) == 0 &&
		      all_bytes(one + sizeof(m), SPARE, 0),
	      "mapping_of into a newer, larger row: partition, then zeroes");
	check(ftvm_mapping_sized(c, &rows, &n, 0) == -EINVAL,
	      "mapping with rows of size 0: -EINVAL");
	free(rows);
}

int main(int argc, char **argv)
{
	struct ftvm_client *c;
	int r;

	if (argc != 2) {
		fprintf(stderr, "usage: ftvm-status-size SOCKET\n");
		return 2;
	}
	r = ftvm_connect(argv[1], &c);
	if (r < 0) {
		fprintf(stderr, "ftvm-status-size: %s: %s\n", argv[1], ftvm_strerror(r));
		return 1;
	}
	for (size_t i = 0; i < sizeof(sized_calls) / sizeof(sized_calls[0]); i++)
		check_sized(c, &sized_calls[i]);
	check_discover(c);
	check_mapping(c);
	ftvm_disconnect(c);
	return failed;
}
