/* libFuzzer target: a client's requests through the node's own dispatch and
 * validation (node.c's on_client_request, the memory manager's operations
 * behind vmm_client_request), on a real pair. In this process, on one event
 * loop: two nodes made with node_new() from configs in a scratch directory
 * under /tmp, linked over loopback TCP with a key as two ftvmd would be, each
 * with a frame pool of 256 frames, a small shared store and a policy "big" of
 * 16 KiB blocks. Per input, one client on node a's socket sends the input
 * (fuzz_stream.h: the first byte's bit 0 chooses raw bytes or payloads put in
 * frames made right) and shuts down its sending side; the harness reads until
 * the node closes. Every reply must be a valid frame holding a ClientReply to
 * an id that was sent, one per request when every frame held one. Nothing may
 * crash, leak or hang.
 *
 * Guids. The node names allocations "a-N" from a counter, so an input cannot
 * know them: a guid of one byte c in a request is replaced by a real one,
 * c % 4 choosing one of the two allocations made for each input (three pages
 * of the default policy, four blocks of "big") or the first or second the
 * input makes itself.
 *
 * What is bounded before it is sent, in whatever frame it comes:
 *   cut_link of 1 to 600000 ms  sent as 0 ms (refused by the node): a cut
 *        drops the partner traffic in flight, which makes the pair fail over
 *        and resync for seconds; the ms the node refuses go as they are;
 *   trace start to an absolute path  to a path in the scratch directory,
 *        which the input may not write outside of.
 *
 * Between inputs: a client that has not had a byte for STALL_MS after
 * sending everything is waiting on itself (a read that waits behind its own
 * write pointer, an allocation waiting for space) and is closed, which lets
 * go of what it held. Then the harness's own client on node a stops a trace
 * the input started, frees every allocation, checks the pool has every frame
 * free again and no descriptor was left open, and makes the two allocations
 * for the next input, within CALL_MS: a node that does not answer by then is
 * wedged, and the target aborts saying so.
 *
 * FUZZ_DEBUG=1 in the environment shows the nodes' debug log. */
#include <dirent.h>
#include <errno.h>
#include <signal.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <unistd.h>

#include <event2/event.h>

#include "client.pb-c.h"
#include "clock.h"
#include "config.h"
#include "frame.h"
#include "free_port.h"
#include "fuzz_stream.h"
#include "fuzz_util.h"
#include "log.h"
#include "node.h"

#define STALL_MS 50
#define CALL_MS 10000  /* for one harness request */
#define START_MS 20000 /* for the pair to link and go active */
#define FIXED 2	       /* allocations made for each input */
#define REFS 4	       /* what a one-byte guid may name: FIXED + 2 of the input's */
#define CUT_MS_MAX 600000u

typedef Ftvm__Client__ClientRequest ClientRequest;
typedef Ftvm__Client__ClientReply ClientReply;

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

/* A client connection of the harness's own. */
struct peer {
	int fd;
	uint8_t *in;
	size_t in_len, in_cap;
};

static struct event_base *base;
static struct ftvm_config *configs[2];
static struct node *nodes[2];
static struct peer ctl;	 /* the harness's client of node a */
static char *trace_path; /* where an input's trace goes */
static uint64_t next_id = 1;
static char refs[REFS][32]; /* the guids a one-byte guid names */
static size_t fds_open;	    /* after setup */

/* One input's requests, as bounded. */
static struct {
	uint64_t *ids;
	size_t n_ids, cap_ids;
	bool clean; /* every whole frame held a ClientRequest */
	bool traced;
} in;

static void noop(evutil_socket_t fd, short what, void *arg)
{
}

/* Runs the loop until something happened, fd is ready for what (fd < 0:
 * nothing to wait for), or ms passed. */
static void drive(int fd, short what, int ms)
{
	struct timeval tv = { .tv_sec = ms / 1000, .tv_usec = ms % 1000 * 1000 };
	struct event *ev = event_new(base, fd, fd < 0 ? 0 : what, noop, NULL);

	if (!ev)
		abort();
	event_add(ev, &tv);
	event_base_loop(base, EVLOOP_ONCE);
	event_free(ev);
}

static int connect_to(const char *path)
{
	struct sockaddr_un sa = { .sun_family = AF_UNIX };
	int fd = socket(AF_UNIX, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);

	snprintf(sa.sun_path, sizeof(sa.sun_path), "%s", path);
	if (fd < 0 || connect(fd, (struct sockaddr *)&sa, sizeof(sa)) < 0) {
		perror(path);
		abort();
	}
	return fd;
}

/* req in a frame made right, malloc'd; its length in *ret_len. */
static uint8_t *frame_request(const ClientRequest *req, size_t *ret_len)
{
	size_t len = ftvm__client__client_request__get_packed_size(req);
	uint8_t *f = malloc(FRAME_HEADER_SIZE + len);

	if (!f)
		abort();
	ftvm__client__client_request__pack(req, f + FRAME_HEADER_SIZE);
	frame_seal(f, len);
	*ret_len = FRAME_HEADER_SIZE + len;
	return f;
}

/* The first reply in p's buffer, taken out of it; NULL while none is whole.
 * Anything but a valid frame holding a ClientReply aborts. */
static ClientReply *take_reply(uint8_t *buf, size_t *len)
{
	const uint8_t *payload;
	size_t plen;
	const char *why;
	ClientReply *reply;
	int r = frame_decode(buf, *len, FRAME_MAX_PAYLOAD_DEFAULT, &payload, &plen, &why);

	if (r < 0) {
		fprintf(stderr, "fuzz_node_request: bad reply frame: %s\n", why);
		abort();
	}
	if (r == 0)
		return NULL;
	reply = ftvm__client__client_reply__unpack(NULL, plen, payload);
	if (!reply) {
		fprintf(stderr, "fuzz_node_request: reply does not parse as a ClientReply\n");
		abort();
	}
	memmove(buf, buf + r, *len - (size_t)r);
	*len -= (size_t)r;
	return reply;
}

/* The harness's request to the node behind p, answered within CALL_MS. */
static ClientReply *call(struct peer *p, ClientRequest *req)
{
	uint64_t deadline = clock_now_ms() + CALL_MS;
	size_t len, sent = 0;
	uint8_t *f;
	ClientReply *reply = NULL;

	req->id = next_id++;
	f = frame_request(req, &len);
	while (!reply) {
		ssize_t n = 0;

		if (sent < len) {
			n = send(p->fd, f + sent, len - sent, MSG_NOSIGNAL);
			if (n > 0)
				sent += (size_t)n;
		}
		do
			n = fuzz_recv_more(p->fd, &p->in, &p->in_len, &p->in_cap);
		while (n > 0);
		if (n == 0 || (n < 0 && errno != EAGAIN)) {
			fprintf(stderr,
				"fuzz_node_request: the node closed the harness's client\n");
			abort();
		}
		reply = take_reply(p->in, &p->in_len);
		if (!reply && clock_now_ms() > deadline) {
			fprintf(stderr,
				"fuzz_node_request: request %d not answered in %d ms: node wedged\n",
				(int)req->request_case, CALL_MS);
			abort();
		}
		if (!reply)
			drive(p->fd, sent < len ? EV_WRITE : EV_READ, 100);
	}
	free(f);
	if (reply->id != req->id)
		abort();
	return reply;
}

static void expect_ok(ClientReply *reply, const char *what)
{
	if (reply->status == FTVM__PARTNER__STATUS__STATUS_OK)
		return;
	fprintf(stderr, "fuzz_node_request: %s: status %d: %s\n", what, (int)reply->status,
		reply->reason);
	abort();
}

static ClientReply *call_status(struct peer *p)
{
	Ftvm__Client__StatusRequest st = FTVM__CLIENT__STATUS_REQUEST__INIT;
	ClientRequest req = FTVM__CLIENT__CLIENT_REQUEST__INIT;
	ClientReply *reply;

	req.request_case = FTVM__CLIENT__CLIENT_REQUEST__REQUEST_STATUS;
	req.status = &st;
	reply = call(p, &req);
	expect_ok(reply, "status");
	if (reply->reply_case != FTVM__CLIENT__CLIENT_REPLY__REPLY_STATUS_REPLY)
		abort();
	return reply;
}

/* Descriptors open but pipes: the sanitizers open pipes to their
 * symbolizer when they first print a stack, and keep them. */
static size_t count_fds(void)
{
	DIR *d = opendir("/proc/self/fd");
	struct dirent *de;
	size_t n = 0;

	if (!d)
		abort();
	while ((de = readdir(d))) {
		char link[64];
		ssize_t len = readlinkat(dirfd(d), de->d_name, link, sizeof(link) - 1);

		if (len < 0)
			continue; /* "." and ".." */
		link[len] = '\0';
		if (strncmp(link, "pipe:", 5) != 0)
			n++;
	}
	closedir(d);
	return n;
}

static void make_allocations(void)
{
	static const struct {
		uint64_t size;
		const char *policy;
	} fixed[FIXED] = { { 3 * 4096, "" }, { 4 * 16384, "big" } };
	unsigned long long number = 0;

	for (int i = 0; i < FIXED; i++) {
		Ftvm__Client__AllocRequest a = FTVM__CLIENT__ALLOC_REQUEST__INIT;
		ClientRequest req = FTVM__CLIENT__CLIENT_REQUEST__INIT;
		ClientReply *reply;

		a.size = fixed[i].size;
		a.policy = (char *)fixed[i].policy;
		a.immediate = true;
		req.request_case = FTVM__CLIENT__CLIENT_REQUEST__REQUEST_ALLOC;
		req.alloc = &a;
		reply = call(&ctl, &req);
		expect_ok(reply, "alloc");
		snprintf(refs[i], sizeof(refs[i]), "%s", reply->alloc->guid);
		if (sscanf(refs[i], "a-%llu", &number) != 1)
			abort();
		ftvm__client__client_reply__free_unpacked(reply, NULL);
	}
	/* The input's own allocations come next from the counter. */
	for (int i = FIXED; i < REFS; i++)
		snprintf(refs[i], sizeof(refs[i]), "a-%llu", number + 1 + (unsigned)(i - FIXED));
}

/* The pointers of a client that went are released after its close, a write
 * pointer's once the partner has the page: until then a free is LOCKED. A
 * free of the input's own that was under way may have taken it meanwhile
 * (NOT_FOUND); reset() lists again until none is left. */
static void free_allocation(char *guid)
{
	Ftvm__Client__FreeRequest fr = FTVM__CLIENT__FREE_REQUEST__INIT;
	ClientRequest req = FTVM__CLIENT__CLIENT_REQUEST__INIT;
	uint64_t deadline = clock_now_ms() + CALL_MS;

	fr.guid = guid;
	req.request_case = FTVM__CLIENT__CLIENT_REQUEST__REQUEST_FREE;
	req.free = &fr;
	for (;;) {
		ClientReply *reply = call(&ctl, &req);
		bool locked = reply->status == FTVM__PARTNER__STATUS__STATUS_LOCKED;

		if (reply->status == FTVM__PARTNER__STATUS__STATUS_NOT_FOUND)
			reply->status = FTVM__PARTNER__STATUS__STATUS_OK;
		if (!locked || clock_now_ms() > deadline)
			expect_ok(reply, "free after the input's client went");
		ftvm__client__client_reply__free_unpacked(reply, NULL);
		if (!locked)
			return;
		drive(-1, 0, 1);
	}
}

/* After an input: node a as it was before it. */
static void reset(void)
{
	ClientRequest req = FTVM__CLIENT__CLIENT_REQUEST__INIT;
	Ftvm__Client__ListRequest list = FTVM__CLIENT__LIST_REQUEST__INIT;
	ClientReply *reply, *st;
	uint64_t deadline = clock_now_ms() + CALL_MS;

	if (in.traced) {
		Ftvm__Client__TraceRequest tr = FTVM__CLIENT__TRACE_REQUEST__INIT;

		tr.stop = true;
		req.request_case = FTVM__CLIENT__CLIENT_REQUEST__REQUEST_TRACE;
		req.trace = &tr;
		/* Refused when the input stopped it or never got one going. */
		ftvm__client__client_reply__free_unpacked(call(&ctl, &req), NULL);
		unlink(trace_path);
	}
	/* Allocations the input asked for may still be made after its client
	 * went: those being mirrored, and those waiting for space (kept for a
	 * client that is gone, until they fit or time out): free until none
	 * is left. */
	for (;;) {
		size_t n;

		req.request_case = FTVM__CLIENT__CLIENT_REQUEST__REQUEST_LIST;
		req.list = &list;
		reply = call(&ctl, &req);
		expect_ok(reply, "list");
		n = reply->list->n_allocations;
		for (size_t i = 0; i < n; i++)
			free_allocation(reply->list->allocations[i]->guid);
		ftvm__client__client_reply__free_unpacked(reply, NULL);
		st = call_status(&ctl);
		if (n == 0 && st->status_reply->allocations_own == 0)
			break;
		if (clock_now_ms() > deadline) {
			fprintf(stderr, "fuzz_node_request: allocations left after %d ms\n",
				CALL_MS);
			abort();
		}
		ftvm__client__client_reply__free_unpacked(st, NULL);
		drive(-1, 0, 1);
	}
	/* Nothing allocated, nothing held: every frame is free again. */
	if (st->status_reply->frames_free != st->status_reply->frames_total) {
		fprintf(stderr, "fuzz_node_request: after the input: %llu of %llu frames free\n",
			(unsigned long long)st->status_reply->frames_free,
			(unsigned long long)st->status_reply->frames_total);
		abort();
	}
	ftvm__client__client_reply__free_unpacked(st, NULL);
	/* Each page table opens its WAL once more at its first checkpoint
	 * (storage/pagetable_sqlite.c's wal_fd) and keeps it: two, and no more. */
	if (count_fds() > fds_open + 2) {
		fprintf(stderr, "fuzz_node_request: %zu descriptors open, %zu after setup\n",
			count_fds(), fds_open);
		abort();
	}
	make_allocations();
}

static void write_config(const char *id, uint16_t port, uint16_t partner_port)
{
	char text[1024], name[16], err[512], *path;
	struct ftvm_config **c = &configs[id[0] - 'a'];

	snprintf(text, sizeof(text),
		 "[node]\nid = %s\nlisten = 127.0.0.1:%u\npartner = 127.0.0.1:%u\n"
		 "transport = tcp\nkey_file = pair.key\nsocket = %s.sock\nstate_dir = %s\n"
		 "[memory]\nsize = 1M\npool_block_size = 256K\n"
		 "[store]\npath = store\n"
		 /* The loop runs only while the harness drives it: a pause between
		  * inputs must not look like a dead partner. */
		 "[failover]\nheartbeat_ms = 500\ndead_after_ms = 60000\n"
		 "[policy big]\nblock_size = 16K\n",
		 id, port, partner_port, id, id);
	snprintf(name, sizeof(name), "%s.conf", id);
	path = fuzz_tmp_path(name);
	fuzz_write_file(path, (const uint8_t *)text, strlen(text));
	if (config_load(path, c, err, sizeof(err)) < 0 ||
	    config_load_key(*c, err, sizeof(err)) < 0) {
		fprintf(stderr, "fuzz_node_request: %s\n", err);
		abort();
	}
	free(path);
}

static void teardown(void)
{
	free(ctl.in);
	if (ctl.fd > 0)
		close(ctl.fd);
	for (int i = 0; i < 2; i++) {
		node_free(nodes[i]);
		config_free(configs[i]);
	}
	event_base_free(base);
	free(trace_path);
	free(in.ids);
}

static void setup(void)
{
	static const char key[] =
		"00112233445566778899aabbccddeeff00112233445566778899aabbccddeeff\n";
	struct sigaction old_int, old_term;
	uint16_t port[2];
	char *key_path = fuzz_tmp_path("pair.key");
	uint64_t deadline = clock_now_ms() + START_MS;
	struct peer b = { 0 };
	bool active = false;

	log_set_max_level(getenv("FUZZ_DEBUG") ? LOG_LEVEL_DEBUG : LOG_LEVEL_ERROR);
	/* As ftvmd: a client gone mid-reply must not kill the process. */
	signal(SIGPIPE, SIG_IGN);
	fuzz_write_file(key_path, (const uint8_t *)key, strlen(key));
	free(key_path);
	trace_path = fuzz_tmp_path("trace");
	if (free_port_pick(&port[0]) < 0 || free_port_pick(&port[1]) < 0 || port[0] == port[1])
		abort();
	write_config("a", port[0], port[1]);
	write_config("b", port[1], port[0]);
	/* Three priorities, as ftvmd's loop: the page table's idle fold runs
	 * in the lowest. */
	base = event_base_new();
	if (!base || event_base_priority_init(base, 3) < 0)
		abort();
	/* The nodes take SIGINT and SIGTERM to stop; libFuzzer keeps them. */
	sigaction(SIGINT, NULL, &old_int);
	sigaction(SIGTERM, NULL, &old_term);
	if (node_new(base, configs[0], &nodes[0]) < 0 || node_new(base, configs[1], &nodes[1]) < 0)
		abort();
	sigaction(SIGINT, &old_int, NULL);
	sigaction(SIGTERM, &old_term, NULL);
	atexit(teardown);

	ctl.fd = connect_to(configs[0]->socket_path);
	b.fd = connect_to(configs[1]->socket_path);
	while (!active) {
		ClientReply *sa = call_status(&ctl), *sb = call_status(&b);

		active = strcmp(sa->status_reply->state, "active") == 0 &&
			 strcmp(sb->status_reply->state, "active") == 0;
		ftvm__client__client_reply__free_unpacked(sa, NULL);
		ftvm__client__client_reply__free_unpacked(sb, NULL);
		if (!active && clock_now_ms() > deadline) {
			fprintf(stderr, "fuzz_node_request: the pair is not active after %d ms\n",
				START_MS);
			abort();
		}
		if (!active)
			drive(-1, 0, 20);
	}
	close(b.fd);
	free(b.in);
	make_allocations();
	fds_open = count_fds();
}

/* The guid field of req, if it has one. */
static char **guid_of(ClientRequest *req)
{
	switch (req->request_case) {
	case FTVM__CLIENT__CLIENT_REQUEST__REQUEST_WRITE_PAGE:
		return &req->write_page->guid;
	case FTVM__CLIENT__CLIENT_REQUEST__REQUEST_READ_PAGE:
		return &req->read_page->guid;
	case FTVM__CLIENT__CLIENT_REQUEST__REQUEST_HEADER:
		return &req->header->guid;
	case FTVM__CLIENT__CLIENT_REQUEST__REQUEST_FREE:
		return &req->free->guid;
	case FTVM__CLIENT__CLIENT_REQUEST__REQUEST_GET_POINTER:
		return &req->get_pointer->guid;
	case FTVM__CLIENT__CLIENT_REQUEST__REQUEST_RELEASE_POINTER:
		return &req->release_pointer->guid;
	default:
		return NULL;
	}
}

/* Rewrites req as the top of the file says; returns whether it changed.
 * A string field it points elsewhere is in *ret_slot, to be put back before
 * req is freed (*ret_slot stays NULL when only a number changed). */
static bool bound(ClientRequest *req, char ***ret_slot, char **ret_to)
{
	char **slot = guid_of(req);

	if (slot && strlen(*slot) == 1) {
		*ret_slot = slot;
		*ret_to = refs[(uint8_t)(*slot)[0] % REFS];
		return true;
	}
	if (req->request_case == FTVM__CLIENT__CLIENT_REQUEST__REQUEST_CUT_LINK &&
	    req->cut_link->ms > 0 && req->cut_link->ms <= CUT_MS_MAX) {
		req->cut_link->ms = 0;
		return true;
	}
	if (req->request_case == FTVM__CLIENT__CLIENT_REQUEST__REQUEST_TRACE && !req->trace->stop) {
		in.traced = true;
		if (req->trace->path[0] == '/') {
			*ret_slot = &req->trace->path;
			*ret_to = trace_path;
			return true;
		}
	}
	return false;
}

static void note_id(uint64_t id)
{
	if (in.n_ids == in.cap_ids) {
		in.cap_ids = in.cap_ids ? 2 * in.cap_ids : 64;
		in.ids = realloc(in.ids, in.cap_ids * sizeof(*in.ids));
		if (!in.ids)
			abort();
	}
	in.ids[in.n_ids++] = id;
}

/* The stream as the node reads it (frame by frame, up to the first that is
 * bad or does not parse, which closes the connection), each request bounded;
 * the rest as it was. */
static uint8_t *bound_stream(const uint8_t *s, size_t len, size_t *ret_len)
{
	uint8_t *out = NULL;
	size_t off = 0, out_len = 0;

	in.clean = true;
	while (off < len) {
		const uint8_t *payload, *piece;
		size_t plen, piece_len;
		const char *why;
		ClientRequest *req;
		uint8_t *made = NULL;
		char **slot = NULL, *old = NULL, *to = NULL;
		int r = frame_decode(s + off, len - off, FRAME_MAX_PAYLOAD_DEFAULT, &payload, &plen,
				     &why);

		if (r <= 0) {
			in.clean = r == 0;
			break;
		}
		req = ftvm__client__client_request__unpack(NULL, plen, payload);
		if (!req) {
			in.clean = false;
			break;
		}
		note_id(req->id);
		piece = s + off;
		piece_len = (size_t)r;
		if (bound(req, &slot, &to)) {
			if (slot) {
				old = *slot;
				*slot = to;
			}
			piece = made = frame_request(req, &piece_len);
			if (slot)
				*slot = old;
		}
		ftvm__client__client_request__free_unpacked(req, NULL);
		out = realloc(out, out_len + piece_len + (len - off));
		if (!out)
			abort();
		memcpy(out + out_len, piece, piece_len);
		out_len += piece_len;
		free(made);
		off += (size_t)r;
	}
	out = realloc(out, out_len + (len - off) + 1);
	if (!out)
		abort();
	memcpy(out + out_len, s + off, len - off);
	*ret_len = out_len + (len - off);
	return out;
}

static bool id_sent(uint64_t id)
{
	for (size_t i = 0; i < in.n_ids; i++)
		if (in.ids[i] == id)
			return true;
	return false;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	uint8_t *raw, *stream, *rx = NULL;
	size_t raw_len, len, sent = 0, rx_len = 0, rx_cap = 0, replies = 0;
	uint64_t last = clock_now_ms();
	bool eof = false, shut = false;
	ClientReply *reply;
	int fd;

	if (size < 1)
		return 0;
	if (!nodes[0])
		setup();
	in.n_ids = 0;
	in.traced = false;
	raw = fuzz_stream(data, size, &raw_len);
	stream = bound_stream(raw, raw_len, &len);
	free(raw);

	fd = connect_to(configs[0]->socket_path);
	while (!eof) {
		ssize_t n;
		bool progress = false;

		if (sent < len) {
			n = send(fd, stream + sent, len - sent, MSG_NOSIGNAL);
			if (n > 0) {
				sent += (size_t)n;
				progress = true;
			} else if (n < 0 && errno != EAGAIN) {
				sent = len; /* the node closed: nothing more goes */
			}
		} else if (!shut) {
			shutdown(fd, SHUT_WR);
			shut = true;
			progress = true;
		}
		for (;;) {
			n = fuzz_recv_more(fd, &rx, &rx_len, &rx_cap);
			if (n < 0 && errno == EAGAIN)
				break;
			if (n <= 0) {
				eof = true;
				break;
			}
			progress = true;
		}
		if (progress)
			last = clock_now_ms();
		else if (shut && clock_now_ms() - last > STALL_MS)
			break; /* waiting on itself: closed below */
		if (!eof)
			drive(fd, sent < len ? EV_READ | EV_WRITE : EV_READ, STALL_MS);
	}
	close(fd);
	while ((reply = take_reply(rx, &rx_len))) {
		if (!id_sent(reply->id))
			abort();
		replies++;
		ftvm__client__client_reply__free_unpacked(reply, NULL);
	}
	/* A node that closed by itself after frames that all held requests
	 * answered each of them, every reply whole. */
	if (eof && in.clean && (rx_len != 0 || replies != in.n_ids)) {
		fprintf(stderr, "fuzz_node_request: %zu replies to %zu requests, %zu bytes left\n",
			replies, in.n_ids, rx_len);
		abort();
	}
	reset();
	free(rx);
	free(stream);
	return 0;
}
