/* libftvm's ftvm_discover_sized() against a node played here, on a unix
 * socket in a scratch directory and a thread of its own: every field of the
 * client protocol's DiscoverReply (proto/client.proto) comes through to
 * struct ftvm_device, each set to a value no other field has, and a field
 * added to DiscoveredNode or MediaCapacity later fails here until this test
 * sets it (and checks it arrives). The node's bytes are not trusted: rows
 * past the caller's room, media past four and strings past their fields are
 * left out, NUL terminated. Rows are written at the caller's row size
 * (ftvm.h, "Compatibility"): a smaller row gets its prefix and nothing past
 * it, a larger one zeroes past what the library knows. A node that does not
 * know the request (UNSUPPORTED) is -EOPNOTSUPP, one that answers OK without
 * the reply -EBADMSG, and arguments with no room are -EINVAL. */
#include <errno.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/un.h>
#include <unistd.h>

#include "check.h"
#include "client.pb-c.h"
#include "ftvm.h"
#include "played_node.h"

#define CANARY 0xa5
#define SPARE 32      /* bytes past the row, as a newer ftvm.h might add */
#define ROWS_SENT 3   /* one more than a pair: a node's bytes are not trusted */
#define MEDIA_SENT 5  /* one more than struct ftvm_device holds */
#define LONG_NAME 100 /* longer than any string field of the row */

enum mode {
	MODE_FULL,	  /* ROWS_SENT rows, every field set */
	MODE_UNSUPPORTED, /* a node older than the request */
	MODE_NO_REPLY,	  /* OK, but no DiscoverReply */
};

static atomic_int mode;
static atomic_uint requests;
static char long_name[LONG_NAME + 1];

/* ---- the node ---- */

/* Row i's strings, each unlike any other; row 1's node and endpoint are
 * longer than their fields. */
static void row_strings(unsigned i, char node[], char endpoint[], char state[], char reason[],
			size_t size)
{
	snprintf(node, size, "%s", i == 1 ? long_name : i == 0 ? "node-zero" : "node-two");
	snprintf(endpoint, size, "%s", i == 1 ? long_name : i == 0 ? "10.0.0.1:7101" : "x:1");
	snprintf(state, size, "state-%u", i);
	snprintf(reason, size, "reason %u", i);
}

struct fake_row {
	Ftvm__Client__DiscoveredNode node;
	Ftvm__Partner__MediaCapacity media[MEDIA_SENT];
	Ftvm__Partner__MediaCapacity *media_ptrs[MEDIA_SENT];
	char strings[4][LONG_NAME + 1];
	char types[MEDIA_SENT][32];
};

static void fake_row_fill(struct fake_row *r, unsigned i)
{
	ftvm__client__discovered_node__init(&r->node);
	row_strings(i, r->strings[0], r->strings[1], r->strings[2], r->strings[3],
		    sizeof(r->strings[0]));
	r->node.node = r->strings[0];
	r->node.endpoint = r->strings[1];
	r->node.state = r->strings[2];
	r->node.reason = r->strings[3];
	/* Row 0 all true; row 1 all false; row 2 true again. */
	r->node.self = i != 1;
	r->node.reachable = i != 1;
	r->node.serving = i != 1;
	for (unsigned m = 0; m < MEDIA_SENT; m++) {
		ftvm__partner__media_capacity__init(&r->media[m]);
		snprintf(r->types[m], sizeof(r->types[m]), "media-%u-%u", i, m);
		r->media[m].type = r->types[m];
		r->media[m].capacity = 1000000u * (i + 1) + m;
		r->media[m].free = 2000000u * (i + 1) + m;
		r->media_ptrs[m] = &r->media[m];
	}
	r->node.media = r->media_ptrs;
	r->node.n_media = MEDIA_SENT;
}

/* Every field of m is set to something other than its default (repeated:
 * not empty), through the descriptors, so a new field fails here. */
static void check_all_set(const char *what, const ProtobufCMessage *m)
{
	const ProtobufCMessageDescriptor *d = m->descriptor;

	for (unsigned i = 0; i < d->n_fields; i++) {
		const ProtobufCFieldDescriptor *f = &d->fields[i];
		const char *member = (const char *)m + f->offset;
		bool set = true;

		if (f->label == PROTOBUF_C_LABEL_REPEATED) {
			size_t n;

			memcpy(&n, (const char *)m + f->quantifier_offset, sizeof(n));
			CHECK(n > 0, "%s.%s is sent empty", what, f->name);
			if (n > 0 && f->type == PROTOBUF_C_TYPE_MESSAGE) {
				const ProtobufCMessage *const *elems;

				memcpy(&elems, member, sizeof(elems));
				check_all_set(f->name, elems[0]);
			}
			continue;
		}
		switch (f->type) {
		case PROTOBUF_C_TYPE_STRING: {
			const char *str;

			memcpy(&str, member, sizeof(str));
			set = str && str[0];
			break;
		}
		case PROTOBUF_C_TYPE_BOOL: {
			protobuf_c_boolean b;

			memcpy(&b, member, sizeof(b));
			set = b;
			break;
		}
		case PROTOBUF_C_TYPE_UINT64: {
			uint64_t u;

			memcpy(&u, member, sizeof(u));
			set = u != 0;
			break;
		}
		default:
			FAIL("%s.%s: a field of a type this test does not set", what, f->name);
			break;
		}
		CHECK(set, "%s.%s is sent with its default value", what, f->name);
	}
}

static int answer(int fd, const Ftvm__Client__ClientRequest *req, void *arg)
{
	Ftvm__Client__ClientReply reply = FTVM__CLIENT__CLIENT_REPLY__INIT;
	Ftvm__Client__DiscoverReply dr = FTVM__CLIENT__DISCOVER_REPLY__INIT;
	static struct fake_row rows[ROWS_SENT];
	Ftvm__Client__DiscoveredNode *nodes[ROWS_SENT];

	atomic_fetch_add(&requests, 1);
	reply.id = req->id;
	if (req->request_case != FTVM__CLIENT__CLIENT_REQUEST__REQUEST_DISCOVER ||
	    atomic_load(&mode) == MODE_UNSUPPORTED) {
		reply.status = FTVM__PARTNER__STATUS__STATUS_UNSUPPORTED;
		reply.reason = "this node does not know the request";
	} else if (atomic_load(&mode) == MODE_FULL) {
		for (unsigned i = 0; i < ROWS_SENT; i++) {
			fake_row_fill(&rows[i], i);
			nodes[i] = &rows[i].node;
		}
		check_all_set("DiscoveredNode", &rows[0].node.base);
		dr.nodes = nodes;
		dr.n_nodes = ROWS_SENT;
		reply.reply_case = FTVM__CLIENT__CLIENT_REPLY__REPLY_DISCOVER;
		reply.discover = &dr;
	}
	return played_node_reply(fd, &reply);
}

/* ---- the client ---- */

static bool all_bytes(const uint8_t *p, size_t n, uint8_t value)
{
	for (size_t i = 0; i < n; i++)
		if (p[i] != value)
			return false;
	return true;
}

/* Row i as the library should give it from the node's row i. */
static void check_row(const struct ftvm_device *d, unsigned i)
{
	char node[LONG_NAME + 1], endpoint[LONG_NAME + 1], state[LONG_NAME + 1],
		reason[LONG_NAME + 1], what[64], want[64];

	row_strings(i, node, endpoint, state, reason, sizeof(node));
	/* What fits of each, NUL terminated. */
	node[sizeof(d->node) - 1] = '\0';
	endpoint[sizeof(d->endpoint) - 1] = '\0';
	snprintf(what, sizeof(what), "row %u node", i);
	CHECK_STR(what, node, d->node);
	snprintf(what, sizeof(what), "row %u endpoint", i);
	CHECK_STR(what, endpoint, d->endpoint);
	snprintf(what, sizeof(what), "row %u state", i);
	CHECK_STR(what, state, d->state);
	snprintf(what, sizeof(what), "row %u reason", i);
	CHECK_STR(what, reason, d->reason);
	CHECK(d->self == (i != 1), "row %u self %d", i, d->self);
	CHECK(d->reachable == (i != 1), "row %u reachable %d", i, d->reachable);
	CHECK(d->serving == (i != 1), "row %u serving %d", i, d->serving);
	CHECK_INT("media kept (the rest has no room)", 4, d->n_media);
	for (unsigned m = 0; m < d->n_media && m < 4; m++) {
		snprintf(what, sizeof(what), "row %u media %u type", i, m);
		snprintf(want, sizeof(want), "media-%u-%u", i, m);
		CHECK_STR(what, want, d->media[m].type);
		snprintf(what, sizeof(what), "row %u media %u capacity", i, m);
		CHECK_INT(what, 1000000u * (i + 1) + m, d->media[m].capacity);
		snprintf(what, sizeof(what), "row %u media %u free", i, m);
		CHECK_INT(what, 2000000u * (i + 1) + m, d->media[m].free);
	}
}

static void test_full(struct ftvm_client *c)
{
	struct ftvm_device rows[FTVM_PAIR_NODES];
	size_t n = 99;

	atomic_store(&mode, MODE_FULL);
	memset(rows, CANARY, sizeof(rows));
	CHECK_INT("ftvm_discover", 0, ftvm_discover(c, rows, &n));
	CHECK_INT("rows kept of the 3 sent", FTVM_PAIR_NODES, n);
	check_row(&rows[0], 0);
	check_row(&rows[1], 1);
}

static void test_one_row(struct ftvm_client *c)
{
	union {
		struct ftvm_device row;
		uint8_t bytes[2 * sizeof(struct ftvm_device)];
	} buf;
	size_t n = 99;

	memset(&buf, CANARY, sizeof(buf));
	CHECK_INT("room for one row", 0,
		  ftvm_discover_sized(c, &buf.row, 1, &n, sizeof(struct ftvm_device)));
	CHECK_INT("rows filled", 1, n);
	check_row(&buf.row, 0);
	CHECK(all_bytes(buf.bytes + sizeof(buf.row), sizeof(buf.row), CANARY),
	      "a byte written past the one row");
}

/* A program built before the media: its rows end at media, and are that far
 * apart. */
static void test_older_row(struct ftvm_client *c)
{
	enum {
		OLD = offsetof(struct ftvm_device, media)
	};
	uint8_t buf[FTVM_PAIR_NODES * OLD + SPARE];
	struct ftvm_device d;
	size_t n = 99;

	memset(buf, CANARY, sizeof(buf));
	CHECK_INT("older, smaller rows", 0,
		  ftvm_discover_sized(c, (struct ftvm_device *)buf, FTVM_PAIR_NODES, &n, OLD));
	CHECK_INT("rows filled", FTVM_PAIR_NODES, n);
	for (unsigned i = 0; i < FTVM_PAIR_NODES; i++) {
		memset(&d, 0, sizeof(d));
		memcpy(&d, buf + i * OLD, OLD);
		/* Row 1's node is long_name cut to fit: found only at its stride. */
		if (i == 0)
			CHECK_STR("an older program's row 0 node", "node-zero", d.node);
		else
			CHECK(strlen(d.node) == sizeof(d.node) - 1 &&
				      strncmp(d.node, long_name, sizeof(d.node) - 1) == 0,
			      "an older program's row %u is not at its stride: node \"%.40s\"", i,
			      d.node);
		CHECK(d.self == (i != 1), "older row %u self", i);
	}
	CHECK(all_bytes(buf + FTVM_PAIR_NODES * OLD, SPARE, CANARY),
	      "a byte written past the older rows");
}

/* A program built with a newer ftvm.h: SPARE bytes more per row, zeroed. */
static void test_newer_row(struct ftvm_client *c)
{
	enum {
		NEW = sizeof(struct ftvm_device) + SPARE
	};
	uint8_t buf[FTVM_PAIR_NODES * NEW];
	size_t n = 99;

	memset(buf, CANARY, sizeof(buf));
	CHECK_INT("newer, larger rows", 0,
		  ftvm_discover_sized(c, (struct ftvm_device *)buf, FTVM_PAIR_NODES, &n, NEW));
	CHECK_INT("rows filled", FTVM_PAIR_NODES, n);
	for (unsigned i = 0; i < FTVM_PAIR_NODES; i++) {
		struct ftvm_device d;

		memcpy(&d, buf + i * NEW, sizeof(d));
		check_row(&d, i);
		CHECK(all_bytes(buf + i * NEW + sizeof(d), SPARE, 0),
		      "row %u: what this library does not know is not zero", i);
	}
}

static void test_refusals(struct ftvm_client *c)
{
	struct ftvm_device rows[FTVM_PAIR_NODES];
	unsigned before = atomic_load(&requests);
	size_t n;

	CHECK_INT("no rows", -EINVAL, ftvm_discover_sized(c, NULL, 2, &n, sizeof(rows[0])));
	CHECK_INT("room for 0 rows", -EINVAL, ftvm_discover_sized(c, rows, 0, &n, sizeof(rows[0])));
	CHECK_INT("no count", -EINVAL, ftvm_discover_sized(c, rows, 2, NULL, sizeof(rows[0])));
	CHECK_INT("rows of 0 bytes", -EINVAL, ftvm_discover_sized(c, rows, 2, &n, 0));
	CHECK_INT("no client", -EINVAL, ftvm_discover(NULL, rows, &n));
	CHECK_INT("requests sent for arguments refused", before, atomic_load(&requests));

	atomic_store(&mode, MODE_UNSUPPORTED);
	CHECK_INT("a node older than the request", -EOPNOTSUPP, ftvm_discover(c, rows, &n));
	CHECK(ftvm_last_error_from_node(c), "the refusal is the node's: %s", ftvm_last_error(c));
	atomic_store(&mode, MODE_NO_REPLY);
	CHECK_INT("OK without the reply", -EBADMSG, ftvm_discover(c, rows, &n));
}

int main(void)
{
	char dir[80], path[sizeof(((struct sockaddr_un *)0)->sun_path)];
	struct ftvm_client *c = NULL;
	struct played_node node = { .answer = answer };
	pthread_t thread;
	int lfd, r;

	memset(long_name, 'n', LONG_NAME);
	scratch_dir_make(dir, sizeof(dir), "ftvm-test-discover");
	snprintf(path, sizeof(path), "%s/node.sock", dir);
	lfd = played_node_listen(path, 1);
	if (lfd < 0)
		die("the node's socket");
	node.lfd = lfd;
	if (pthread_create(&thread, NULL, played_node_thread, &node) != 0)
		die("pthread_create");
	r = ftvm_connect(path, &c);
	if (r < 0) {
		errno = -r;
		die("ftvm_connect");
	}

	test_full(c);
	test_one_row(c);
	test_older_row(c);
	test_newer_row(c);
	test_refusals(c);

	ftvm_disconnect(c);
	pthread_join(thread, NULL);
	if (node.result == -EBADMSG)
		FAIL("the node read a bad frame: %s", node.why);
	else if (node.result < 0)
		fprintf(stderr, "test_discover: accept: %s\n", strerror(-node.result));
	close(lfd);
	scratch_dir_remove(dir);
	printf("%d checks, %d failures\n", checks, failures);
	return failures ? 1 : 0;
}
