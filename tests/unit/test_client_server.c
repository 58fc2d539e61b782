/* client_server: a client that closes for good while its calls wait is told
 * gone at once, not when a reply finds it gone (a call waiting on the client
 * itself, a read behind its own write pointer, would only end at its
 * timeout, holding the client's pointers till then): closed at once, and
 * closed after shutting down its sending side first. One that only shut down
 * its sending side is still answered, and one that closes with nothing
 * outstanding is gone as ever. A call's request stays as it came until the
 * call is answered, however many requests are read meanwhile. Replies made
 * in one turn of the loop: the first goes at once, the rest at the turn's
 * end, in order. */
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <unistd.h>

#include <event2/event.h>

#include "check.h"
#include "client.pb-c.h"
#include "client_server.h"
#include "clock.h"
#include "frame.h"

#define DEADLINE_MS 2000

static struct event_base *base;
static struct client_call *held;		    /* the one call the owner keeps */
static uint64_t client;				    /* the connection it came on */
static unsigned gone;				    /* gone() for that connection */
static const Ftvm__Client__ClientRequest *held_req; /* its request */
static unsigned answered_at_once;		    /* calls that came while one was kept */
#define KEPT_MAX 5
static struct client_call *kept[KEPT_MAX]; /* keep_all: every call, in turn */
static unsigned n_kept;
static bool keep_all;

/* Keeps the first call; those that come while it is kept are answered.
 * With keep_all, keeps them all. */
static void on_request(struct client_call *call, const Ftvm__Client__ClientRequest *req, void *arg)
{
	if (keep_all) {
		if (n_kept == KEPT_MAX)
			die("more calls than kept[] holds");
		kept[n_kept++] = call;
		return;
	}
	if (held) {
		Ftvm__Client__ClientReply reply = FTVM__CLIENT__CLIENT_REPLY__INIT;

		client_call_reply(call, &reply);
		answered_at_once++;
		return;
	}
	held = call;
	held_req = req;
	client = client_call_client_id(call);
}

static void on_gone(uint64_t client_id, void *arg)
{
	if (client_id == client)
		gone++;
}

static void on_timer(evutil_socket_t fd, short what, void *arg)
{
}

/* Runs the loop until cond() or ms passed; returns cond(). */
static bool run_until(bool (*cond)(void), unsigned ms)
{
	uint64_t deadline = clock_now_ms() + ms;
	struct timeval tv = { .tv_sec = 0, .tv_usec = 10000 };
	struct event *tick = event_new(base, -1, EV_PERSIST, on_timer, NULL);

	if (!tick || event_add(tick, &tv) < 0)
		die("timer");
	while (!cond() && clock_now_ms() < deadline)
		event_base_loop(base, EVLOOP_ONCE);
	event_free(tick);
	return cond();
}

static bool call_held(void)
{
	return held != NULL;
}

static bool client_gone(void)
{
	return gone > 0;
}

static void send_request(int fd, const Ftvm__Client__ClientRequest *req)
{
	size_t len = ftvm__client__client_request__get_packed_size(req);
	uint8_t *frame = xmalloc(FRAME_HEADER_SIZE + len);

	ftvm__client__client_request__pack(req, frame + FRAME_HEADER_SIZE);
	frame_seal(frame, len);
	if (write(fd, frame, FRAME_HEADER_SIZE + len) != (ssize_t)(FRAME_HEADER_SIZE + len))
		die("write");
	free(frame);
}

static int connect_to(const char *path)
{
	struct sockaddr_un sa = { .sun_family = AF_UNIX };
	int fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);

	snprintf(sa.sun_path, sizeof(sa.sun_path), "%s", path);
	if (fd < 0 || connect(fd, (struct sockaddr *)&sa, sizeof(sa)) < 0)
		die("connect");
	return fd;
}

static void ask_list(int fd, uint64_t id)
{
	Ftvm__Client__ClientRequest req = FTVM__CLIENT__CLIENT_REQUEST__INIT;
	Ftvm__Client__ListRequest list = FTVM__CLIENT__LIST_REQUEST__INIT;

	req.id = id;
	req.request_case = FTVM__CLIENT__CLIENT_REQUEST__REQUEST_LIST;
	req.list = &list;
	send_request(fd, &req);
}

static int connect_and_ask(const char *path)
{
	int fd = connect_to(path);

	ask_list(fd, 7);
	return fd;
}

static void answer_held(void)
{
	Ftvm__Client__ClientReply reply = FTVM__CLIENT__CLIENT_REPLY__INIT;

	client_call_reply(held, &reply);
	held = NULL;
}

enum how {
	CLOSE,		    /* while the call waits */
	SHUTDOWN_CLOSE,	    /* the sending side first, then close */
	SHUTDOWN,	    /* the sending side only: the reply still comes */
	ANSWERED_THEN_CLOSE /* nothing outstanding at EOF: the plain end */
};

static void test_hangup(const char *path, enum how how)
{
	static const char *const names[] = { "close", "shutdown then close", "shutdown",
					     "answered then close" };
	int fd = connect_and_ask(path);
	uint8_t buf[256];

	held = NULL;
	client = 0;
	gone = 0;
	CHECK(run_until(call_held, DEADLINE_MS), "%s: the request reached the owner", names[how]);
	if (how == SHUTDOWN_CLOSE || how == SHUTDOWN) {
		shutdown(fd, SHUT_WR);
		/* The EOF is read, and a few hangup checks pass: the call
		 * still waits for its answer. */
		run_until(client_gone, 300);
		CHECK_INT("gone after shutdown alone", 0, gone);
	}
	switch (how) {
	case CLOSE:
	case SHUTDOWN_CLOSE:
		close(fd);
		CHECK(run_until(client_gone, DEADLINE_MS),
		      "%s: gone within %d ms while a call waits", names[how], DEADLINE_MS);
		answer_held(); /* dropped: nobody to tell */
		break;
	case SHUTDOWN:
		answer_held();
		CHECK(run_until(client_gone, DEADLINE_MS), "shutdown: closed once answered");
		CHECK(read(fd, buf, sizeof(buf)) > FRAME_HEADER_SIZE, "shutdown: reply read");
		close(fd);
		break;
	case ANSWERED_THEN_CLOSE:
		answer_held();
		/* Read first: a reply left unread makes the close a reset. */
		CHECK(read(fd, buf, sizeof(buf)) > FRAME_HEADER_SIZE, "answered: reply read");
		close(fd);
		CHECK(run_until(client_gone, DEADLINE_MS), "answered then close: gone");
		break;
	}
	CHECK_INT("gone", 1, gone);
}

static bool three_answered(void)
{
	return answered_at_once == 3;
}

/* The owner keeps a page write's call and reads its block after three more
 * requests were read and answered: the block is as the client sent it. */
static void test_request_kept(const char *path)
{
	static uint8_t block[64 << 10];
	Ftvm__Client__ClientRequest req = FTVM__CLIENT__CLIENT_REQUEST__INIT;
	Ftvm__Client__WritePageRequest wr = FTVM__CLIENT__WRITE_PAGE_REQUEST__INIT;
	int fd = connect_to(path);
	bool same;

	for (size_t i = 0; i < sizeof(block); i++)
		block[i] = (uint8_t)(i * 13 + 1);
	req.id = 1;
	req.request_case = FTVM__CLIENT__CLIENT_REQUEST__REQUEST_WRITE_PAGE;
	req.write_page = &wr;
	wr.guid = "a-1";
	wr.data = (ProtobufCBinaryData){ .len = sizeof(block), .data = block };
	held = NULL;
	answered_at_once = 0;
	send_request(fd, &req);
	CHECK(run_until(call_held, DEADLINE_MS), "the write reached the owner");
	for (uint64_t id = 2; id <= 4; id++)
		ask_list(fd, id);
	CHECK(run_until(three_answered, DEADLINE_MS), "three more answered meanwhile");
	same = held_req &&
	       held_req->request_case == FTVM__CLIENT__CLIENT_REQUEST__REQUEST_WRITE_PAGE &&
	       held_req->write_page->data.len == sizeof(block) &&
	       memcmp(held_req->write_page->data.data, block, sizeof(block)) == 0 &&
	       strcmp(held_req->write_page->guid, "a-1") == 0;
	CHECK(same, "the kept call's request is as it came");
	answer_held();
	close(fd);
}

static bool all_kept(void)
{
	return n_kept == KEPT_MAX;
}

static int client_fd;
static int bytes_in_turn = -1; /* what the client could read as the turn went on */

/* One turn answers every kept call. */
static void answer_kept(evutil_socket_t fd, short what, void *arg)
{
	for (unsigned i = 0; i < n_kept; i++) {
		Ftvm__Client__ClientReply reply = FTVM__CLIENT__CLIENT_REPLY__INIT;

		client_call_reply(kept[i], &reply);
	}
	n_kept = 0;
	if (ioctl(client_fd, FIONREAD, &bytes_in_turn) < 0)
		die("FIONREAD");
}

static size_t reply_frame_size(uint64_t id)
{
	Ftvm__Client__ClientReply reply = FTVM__CLIENT__CLIENT_REPLY__INIT;

	reply.id = id;
	return FRAME_HEADER_SIZE + ftvm__client__client_reply__get_packed_size(&reply);
}

static bool turn_answered(void)
{
	return bytes_in_turn >= 0;
}

/* Replies made in one turn to one client: the first goes at once, the rest
 * wait for the turn's end (one send for them all), and all come in order. */
static void test_replies_in_turns(const char *path)
{
	uint8_t buf[4096];
	size_t want = 0, got = 0, off = 0;
	unsigned ids_in_order = 0;

	client_fd = connect_to(path);
	keep_all = true;
	for (uint64_t id = 11; id < 11 + KEPT_MAX; id++) {
		ask_list(client_fd, id);
		want += reply_frame_size(id);
	}
	CHECK(run_until(all_kept, DEADLINE_MS), "%u calls kept", KEPT_MAX);
	keep_all = false;
	if (event_base_once(base, -1, EV_TIMEOUT, answer_kept, NULL, NULL) < 0)
		die("event_base_once");
	CHECK(run_until(turn_answered, DEADLINE_MS), "the turn answered them");
	CHECK_INT("in the turn, the first reply alone was sent", (int)reply_frame_size(11),
		  bytes_in_turn);
	while (got < want) {
		ssize_t n = recv(client_fd, buf + got, sizeof(buf) - got, MSG_DONTWAIT);

		if (n <= 0)
			break;
		got += (size_t)n;
	}
	CHECK_INT("after the turn, every reply", (int)want, (int)got);
	for (uint64_t id = 11; off < got && id < 11 + KEPT_MAX; id++) {
		const uint8_t *payload;
		size_t len;
		Ftvm__Client__ClientReply *reply;
		const char *why;

		if (frame_decode(buf + off, got - off, FRAME_MAX_PAYLOAD_DEFAULT, &payload, &len,
				 &why) <= 0)
			break;
		reply = ftvm__client__client_reply__unpack(NULL, len, payload);
		if (reply && reply->id == id)
			ids_in_order++;
		ftvm__client__client_reply__free_unpacked(reply, NULL);
		off += FRAME_HEADER_SIZE + len;
	}
	CHECK_INT("... in the order they were made", KEPT_MAX, (int)ids_in_order);
	close(client_fd);
}

int main(void)
{
	char dir[96], path[sizeof(((struct sockaddr_un *)0)->sun_path)]; /* dir + "/c.sock" fits */
	struct client_server_config c = {
		.mode = 0600,
		.group = (gid_t)-1,
		.admin_gid = (gid_t)-1,
		.pointer_gid = (gid_t)-1,
		.max_clients = 4,
		.output_limit = 1u << 20,
		.max_payload = FRAME_MAX_PAYLOAD_DEFAULT,
	};
	struct client_server *s;

	scratch_dir_make(dir, sizeof(dir), "ftvm-test-client");
	snprintf(path, sizeof(path), "%s/c.sock", dir);
	c.path = path;
	base = event_base_new();
	if (!base || client_server_new(base, &c, on_request, on_gone, NULL, &s) < 0)
		die("client_server_new");
	test_hangup(path, CLOSE);
	test_hangup(path, SHUTDOWN_CLOSE);
	test_hangup(path, SHUTDOWN);
	test_hangup(path, ANSWERED_THEN_CLOSE);
	test_request_kept(path);
	test_replies_in_turns(path);
	client_server_free(s);
	event_base_free(base);
	scratch_dir_remove(dir);
	if (failures) {
		fprintf(stderr, "%d of %d check(s) failed\n", failures, checks);
		return 1;
	}
	printf("client_server: %d checks passed\n", checks);
	return 0;
}
