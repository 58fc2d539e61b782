/* libftvm's asynchronous page calls (ftvm.h, "Asynchronous calls"):
 * ftvm_submit_write_page(), ftvm_submit_read_page(), ftvm_reap() and
 * ftvm_completion_fd(), on the same connection, mutex and failover as the
 * blocking calls of client.c.
 *
 * A submitted request holds one of the client's FTVM_SUBMIT_MAX slots from
 * its submit until its completion is reaped:
 *
 *   submit -> QUEUED --its frame wholly left--> SENT --its reply came--> ARRIVED
 *               ^  (off > 0: partly sent)        |                         | settle()
 *               |                                | the client left the     v
 *               +-- again(): it reached no node  | connection unanswered  DONE --reap--> free
 *                   that acted (partly sent at a v (drop())                ^
 *                   move, FENCED, SHUTTING_DOWN) LOST --where the client---+
 *                                                     went (submit_conn_moved())
 *
 * The table of client.c, "Failover", holds for each request as for a call:
 * one that had not wholly left when its connection went, or that the node
 * refused FENCED or SHUTTING_DOWN, is sent again to the node that serves
 * (at most MOVES_MAX times); one that had left and got no answer fails with
 * its outcome unknown (LOST until the move's end names the new node).
 *
 * There is no thread of the library's own: whoever holds the client's lock
 * moves requests along. A submit sends what the socket takes without
 * waiting; a blocking call keeps the replies to submitted requests it reads
 * (submit_take_reply()) and completes a partly sent frame before its own;
 * ftvm_reap() does the rest (pump()): it sends, reads, settles replies,
 * times requests out and moves the client. ftvm_completion_fd() is an epoll
 * instance over the connection, an eventfd and a timerfd (sync_fds()), so
 * the caller's poll wakes whenever a reap has something to do, across
 * moves, though no thread of ours waits.
 *
 * Library code: logs nothing, never raises SIGPIPE (MSG_NOSIGNAL), bounds
 * every length the node sends. */
#include <errno.h>
#include <inttypes.h>
#include <poll.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/eventfd.h>
#include <sys/socket.h>
#include <sys/timerfd.h>
#include <unistd.h>

#include "client_internal.h"
#include "crc32c.h"
#include "frame.h"

/* The rows a caller compiled against the first struct ftvm_completion
 * passes: nothing shorter is one (ftvm.h, "Compatibility"). */
#define COMPLETION_V1_SIZE \
	(offsetof(struct ftvm_completion, error) + sizeof(((struct ftvm_completion *)NULL)->error))

enum req_state {
	REQ_FREE,
	REQ_QUEUED,
	REQ_SENT,
	REQ_ARRIVED,
	REQ_LOST,
	REQ_DONE,
};

struct req {
	enum req_state state;
	bool read;
	uint64_t seq; /* submission order: requests leave in it */
	uint64_t id;  /* its ClientRequest id: a client's ids are never reused */
	char guid[FTVM_GUID_MAX];
	uint64_t page;
	void *buf; /* a read's */
	size_t buf_len;
	/* The request as it goes on the wire, kept until it completes to be
	 * sent again after a move; off of its bytes left on this connection. */
	uint8_t *frame;
	size_t frame_len, off;
	uint64_t generation; /* the connection it (partly) left on */
	uint64_t deadline;   /* SENT: CALL_TIMEOUT_MS after it wholly left, in ms */
	int moves;	     /* times it was sent again */
	Reply *reply;	     /* ARRIVED */
	/* LOST: result and from_node, with error the start of its reason;
	 * DONE: its completion. */
	struct ftvm_completion done;
};

struct submit_queue {
	struct req req[FTVM_SUBMIT_MAX];
	unsigned used; /* slots not FREE: submitted and not reaped */
	uint64_t next_seq;
	/* DONE slots in the order they completed: a ring. */
	unsigned done[FTVM_SUBMIT_MAX];
	unsigned done_head, n_done;
	/* ftvm_completion_fd(): an epoll instance over watched_fd (the
	 * connection, -1: none), evfd (set while ev_set) and tfd (armed for
	 * timer_ms, 0: disarmed). */
	int epfd, evfd, tfd;
	int watched_fd;
	uint32_t watched_events;
	bool ev_set;
	uint64_t timer_ms;
	/* Since when the socket took none of the queued requests' bytes (ms, 0:
	 * it took the last ones offered): queued requests time out when the
	 * node reads nothing for CALL_TIMEOUT_MS, not for waiting behind others
	 * while it reads. */
	uint64_t stalled_since;
	/* Why the connection broke, when this file saw it break: broken_seen
	 * is that connection's generation + 1 (0: none seen). */
	uint64_t broken_seen;
	int broken_r;
	char broken_why[256];
	/* The node the last drop() left and why, until the move's end. */
	bool leaving;
	char left_why[FTVM_COMPLETION_ERROR_MAX];
};

/* A move a pump decided on: client_move()'s arguments. */
struct leave {
	bool need;
	int r;
	char what[64];
	char cause[FTVM_COMPLETION_ERROR_MAX];
	uint64_t drain_ms;
};

static void say(char *dst, size_t size, const char *fmt, ...) __attribute__((format(printf, 3, 4)));

static void say(char *dst, size_t size, const char *fmt, ...)
{
	va_list ap;

	va_start(ap, fmt);
	vsnprintf(dst, size, fmt, ap);
	va_end(ap);
}

static bool pair(const struct ftvm_client *c)
{
	return c->n_sockets == 2;
}

/* The connection can carry requests now. */
static bool usable(const struct ftvm_client *c)
{
	return c->current >= 0 && c->conn.fd >= 0 && !c->conn.broken;
}

static bool any(const struct submit_queue *q, enum req_state state)
{
	for (unsigned i = 0; i < FTVM_SUBMIT_MAX; i++)
		if (q->req[i].state == state)
			return true;
	return false;
}

/* Of the connection the client talks to now. */
static bool here(const struct ftvm_client *c, const struct req *r)
{
	return c->current >= 0 && r->generation == c->generation;
}

static void complete(struct submit_queue *q, struct req *r, int result, bool from_node,
		     const char *fmt, ...) __attribute__((format(printf, 5, 6)));

/* r's completion is result; it waits for ftvm_reap(). */
static void complete(struct submit_queue *q, struct req *r, int result, bool from_node,
		     const char *fmt, ...)
{
	char error[sizeof(r->done.error)];
	va_list ap;

	/* fmt's arguments may be r->done.error itself (a LOST one's cause). */
	va_start(ap, fmt);
	vsnprintf(error, sizeof(error), fmt, ap);
	va_end(ap);
	memcpy(r->done.error, error, sizeof(error));
	r->done.result = result;
	r->done.from_node = result < 0 && from_node;
	free(r->frame);
	r->frame = NULL;
	if (r->reply)
		ftvm__client__client_reply__free_unpacked(r->reply, NULL);
	r->reply = NULL;
	r->state = REQ_DONE;
	q->done[(q->done_head + q->n_done) % FTVM_SUBMIT_MAX] = (unsigned)(r - q->req);
	q->n_done++;
}

/* r reached no node that acted on it: it goes out again, from its start, to
 * the node the client talks to (once it has one), unless it went out too
 * often already. */
static void again(struct ftvm_client *c, struct req *r, const char *cause)
{
	if (r->reply)
		ftvm__client__client_reply__free_unpacked(r->reply, NULL);
	r->reply = NULL;
	r->off = 0;
	r->state = REQ_QUEUED;
	if (++r->moves > MOVES_MAX)
		complete(c->queue, r, -ENOTCONN, false,
			 "sent %d times to nodes that did not act on it (the last: %s): nothing "
			 "was applied, call again",
			 r->moves, cause);
}

/* Marks the connection broken, with why, unless it was seen broken before. */
static void broke(struct ftvm_client *c, int r, const char *why)
{
	struct submit_queue *q = c->queue;

	c->conn.broken = true;
	if (q->broken_seen == c->generation + 1)
		return;
	q->broken_seen = c->generation + 1;
	q->broken_r = r;
	say(q->broken_why, sizeof(q->broken_why), "%s", why);
}

/* The next request to send: the one partly sent, else the first submitted. */
static struct req *next_to_send(struct submit_queue *q)
{
	struct req *best = NULL;

	for (unsigned i = 0; i < FTVM_SUBMIT_MAX; i++) {
		struct req *r = &q->req[i];

		if (r->state != REQ_QUEUED)
			continue;
		if (r->off > 0)
			return r;
		if (!best || r->seq < best->seq)
			best = r;
	}
	return best;
}

/* r's frame wholly left: its reply is due within a call's timeout. */
static void sent(struct req *r)
{
	r->off = r->frame_len;
	r->state = REQ_SENT;
	r->deadline = client_now_ms() + CALL_TIMEOUT_MS;
}

/* Sends queued requests, in submission order, as far as the socket takes
 * them now. */
static void send_some(struct ftvm_client *c)
{
	struct submit_queue *q = c->queue;
	struct req *r = NULL;
	char why[128];
	ssize_t n;

	while (usable(c) && (r = next_to_send(q))) {
		if (r->off == 0)
			r->generation = c->generation;
		n = send(c->conn.fd, r->frame + r->off, r->frame_len - r->off,
			 MSG_DONTWAIT | MSG_NOSIGNAL);
		if (n < 0) {
			if (errno == EINTR)
				continue;
			if (errno == EAGAIN || errno == EWOULDBLOCK) {
				if (!q->stalled_since)
					q->stalled_since = client_now_ms();
				return;
			}
			if (errno == EPIPE || errno == ECONNRESET) {
				broke(c, -ECONNRESET, "the node closed the connection");
			} else {
				n = -errno;
				say(why, sizeof(why), "cannot send to the node: %s",
				    strerror(errno));
				broke(c, (int)n, why);
			}
			return;
		}
		q->stalled_since = 0;
		r->off += (size_t)n;
		if (r->off == r->frame_len)
			sent(r);
	}
	if (!r)
		q->stalled_since = 0; /* nothing waits to be sent */
}

/* The node's reason for closing the connection (id 0; a client past its
 * [client] max_clients): it acted on none of the requests on it. */
static void notice(struct ftvm_client *c, Reply *reply)
{
	struct submit_queue *q = c->queue;
	int e = client_status_errno(reply->status);
	const char *reason = reply->reason && reply->reason[0] ? reply->reason : "";

	broke(c, e < 0 ? e : -ECONNRESET, "the node closed the connection");
	for (unsigned i = 0; i < FTVM_SUBMIT_MAX; i++) {
		struct req *r = &q->req[i];

		if ((r->state == REQ_SENT && here(c, r)) || r->state == REQ_QUEUED)
			complete(q, r, e < 0 ? e : -ECONNRESET, true, "%s",
				 reason[0] ? reason : "the node closed the connection");
	}
	ftvm__client__client_reply__free_unpacked(reply, NULL);
}

/* Reads the replies the socket holds now, without waiting. */
static void read_some(struct ftvm_client *c)
{
	const uint8_t *payload;
	char why[256];
	size_t len;
	Reply *reply;
	int n;

	while (usable(c)) {
		n = client_recv_frame(c, &c->conn, 0, &payload, &len, why, sizeof(why));
		if (n == -EAGAIN)
			return;
		if (n < 0) {
			broke(c, n, why);
			return;
		}
		reply = ftvm__client__client_reply__unpack(NULL, len, payload);
		client_consume(&c->conn, (size_t)n);
		if (!reply) {
			/* Whose answer it was is unknown: it would wait for its
			 * timeout, and the node cannot be trusted with more. */
			c->conn.garbled = true;
			say(why, sizeof(why), "the node's reply does not parse (%zu bytes)", len);
			broke(c, -EBADMSG, why);
			return;
		}
		if (reply->id == 0) {
			notice(c, reply);
			return;
		}
		if (!submit_take_reply(c, reply))
			ftvm__client__client_reply__free_unpacked(reply, NULL);
	}
}

/* The node's refusal in words, as client.c's refused() puts it. */
static const char *refusal(const Reply *reply, int e)
{
	if (reply->reason && reply->reason[0])
		return reply->reason;
	return e == -EIO ? client_status_name(reply->status) : ftvm_strerror(e);
}

/* An OK reply for r: the block's copy and checks, as the blocking calls do. */
static void answered(struct submit_queue *q, struct req *r)
{
	const Reply *reply = r->reply;
	const Ftvm__Client__ReadPageReply *rp;
	uint32_t crc;

	if (!r->read) {
		if (reply->reply_case != FTVM__CLIENT__CLIENT_REPLY__REPLY_WRITE_PAGE ||
		    !reply->write_page)
			goto unexpected;
		r->done.crc32c = reply->write_page->crc32c;
		complete(q, r, 0, false, "%s", "");
		return;
	}
	if (reply->reply_case != FTVM__CLIENT__CLIENT_REPLY__REPLY_READ_PAGE || !reply->read_page)
		goto unexpected;
	rp = reply->read_page;
	/* End to end: the node checksummed the block under its read lock. */
	crc = crc32c(0, rp->data.data, rp->data.len);
	if (crc != rp->crc32c) {
		complete(q, r, -EBADMSG, false,
			 "%s page %" PRIu64 ": the %zu bytes received have crc32c 0x%08x, the node "
			 "said 0x%08x",
			 r->guid, r->page, rp->data.len, crc, rp->crc32c);
		return;
	}
	r->done.len = rp->data.len;
	if (rp->data.len > r->buf_len) {
		complete(q, r, -ENOBUFS, false,
			 "%s page %" PRIu64 " is %zu bytes, more than the %zu byte buffer", r->guid,
			 r->page, rp->data.len, r->buf_len);
		return;
	}
	if (rp->data.len > 0)
		memcpy(r->buf, rp->data.data, rp->data.len);
	r->done.crc32c = rp->crc32c;
	complete(q, r, 0, false, "%s", "");
	return;
unexpected:
	complete(q, r, -EBADMSG, false, "the node answered OK without the expected reply (got %d)",
		 (int)reply->reply_case);
}

/* Whether the node, having refused a request PARTNER_UNAVAILABLE, is one
 * that does not serve now: asked once per settle(). */
struct serving {
	bool asked, serves;
	char state[32];
};

/* r's reply came: its completion, as call_locked() would end the call. */
static void settle_one(struct ftvm_client *c, struct req *r, struct leave *leave,
		       struct serving *sv)
{
	struct submit_queue *q = c->queue;
	int status = r->reply->status, e = client_status_errno(status);
	char why[FTVM_COMPLETION_ERROR_MAX];
	struct ftvm_node_status st;

	if (e == 0) {
		answered(q, r);
		return;
	}
	if (pair(c) && (status == FTVM__PARTNER__STATUS__STATUS_FENCED ||
			status == FTVM__PARTNER__STATUS__STATUS_SHUTTING_DOWN)) {
		/* It applied nothing: to the node that serves. */
		say(why, sizeof(why), "%s", refusal(r->reply, e)); /* again() frees the reply */
		if (here(c, r) && !leave->need) {
			*leave = (struct leave){ .need = true,
						 .r = -ECONNRESET,
						 .drain_ms = DRAIN_MS };
			say(leave->what, sizeof(leave->what), "stopped serving during the call");
			say(leave->cause, sizeof(leave->cause), "%s", why);
		}
		again(c, r, why);
		return;
	}
	if (pair(c) && e == -EHOSTUNREACH && here(c, r)) {
		/* The partner link failed under the request (its outcome is
		 * unknown), or the node does not serve now: a node leaving
		 * already does not. */
		if (!sv->asked && !leave->need) {
			sv->asked = true;
			sv->serves = true;
			if (client_node_status(c, &st) == 0 &&
			    (strcmp(st.state, "starting") == 0 ||
			     strcmp(st.state, "resyncing") == 0 ||
			     strcmp(st.state, "fenced") == 0)) {
				sv->serves = false;
				say(sv->state, sizeof(sv->state), "%s", st.state);
			}
		}
		if (leave->need || !sv->serves) {
			if (!leave->need) {
				*leave = (struct leave){ .need = true,
							 .r = -EHOSTUNREACH,
							 .drain_ms = DRAIN_MS };
				say(leave->what, sizeof(leave->what), "does not serve (state %s)",
				    sv->state);
				say(leave->cause, sizeof(leave->cause), "%s", refusal(r->reply, e));
			}
			r->state = REQ_LOST;
			r->done.result = e;
			r->done.from_node = true;
			say(r->done.error, sizeof(r->done.error), "node at %s %s (%s)",
			    c->sockets[c->current], leave->what, refusal(r->reply, e));
			ftvm__client__client_reply__free_unpacked(r->reply, NULL);
			r->reply = NULL;
			return;
		}
	}
	complete(q, r, e, true, "%s", refusal(r->reply, e));
}

/* Every reply that came. A status request of settle_one() may bring more:
 * the pump comes back for them. */
static void settle(struct ftvm_client *c, struct leave *leave)
{
	struct submit_queue *q = c->queue;
	struct serving sv = { 0 };

	for (unsigned i = 0; i < FTVM_SUBMIT_MAX; i++)
		if (q->req[i].state == REQ_ARRIVED)
			settle_one(c, &q->req[i], leave, &sv);
}

/* Requests past their deadline on the connection: as a call that times out.
 * A frame stuck half sent breaks the connection (the node would read the
 * next request as its rest); a pair client whose other node serves alone
 * moves there (client_timed_out()). */
static void expire(struct ftvm_client *c)
{
	struct submit_queue *q = c->queue;
	uint64_t now = client_now_ms();
	bool stalled, late;

	if (!usable(c))
		return;
	stalled =
		q->stalled_since && now >= q->stalled_since + CALL_TIMEOUT_MS && any(q, REQ_QUEUED);
	late = stalled;
	for (unsigned i = 0; i < FTVM_SUBMIT_MAX; i++) {
		struct req *r = &q->req[i];

		if (stalled && r->state == REQ_QUEUED && r->off > 0) {
			broke(c, -ETIMEDOUT, "the node did not take the request within 10 s");
			return;
		}
		if (r->state == REQ_SENT && here(c, r) && r->deadline <= now)
			late = true;
	}
	if (!late)
		return;
	if (pair(c) && client_timed_out(c, -ETIMEDOUT, "no reply from the node within 10 s") == 0)
		return;
	for (unsigned i = 0; i < FTVM_SUBMIT_MAX; i++) {
		struct req *r = &q->req[i];

		/* Its late reply, if one comes, is dropped: the id is no one's. */
		if (r->state == REQ_SENT && here(c, r) && r->deadline <= now)
			complete(q, r, -ETIMEDOUT, false, "no reply from the node within %d s",
				 CALL_TIMEOUT_MS / 1000);
		else if (stalled && r->state == REQ_QUEUED)
			complete(q, r, -ETIMEDOUT, false,
				 "the node did not take the request within %d s: nothing was "
				 "applied",
				 CALL_TIMEOUT_MS / 1000);
	}
	if (stalled)
		q->stalled_since = 0;
}

/* A ftvm_connect() client's connection broke: it never moves, so what was
 * on it fails as the blocking call fails, and the rest cannot be sent. */
static void fail_broken(struct ftvm_client *c)
{
	struct submit_queue *q = c->queue;
	bool seen = q->broken_seen == c->generation + 1;

	for (unsigned i = 0; i < FTVM_SUBMIT_MAX; i++) {
		struct req *r = &q->req[i];

		if (r->state == REQ_SENT)
			complete(q, r, seen ? q->broken_r : -ECONNRESET, false,
				 "%s: the call's outcome is unknown, check or retry",
				 seen ? q->broken_why
				      : "the connection failed during another call");
		else if (r->state == REQ_QUEUED)
			complete(q, r, -ENOTCONN, false,
				 "the connection to the node failed earlier; reconnect");
	}
}

/* Moves the requests along as far as it can: sends, reads, settles, times
 * out, and moves a pair client as a blocking call would, which may take up
 * to CALL_TIMEOUT_MS. With c->lock held. */
static void pump(struct ftvm_client *c)
{
	struct submit_queue *q = c->queue;
	struct leave leave;
	char why[300];

	for (int round = 0; round < 4 * (MOVES_MAX + 1); round++) {
		if (pair(c) && c->current < 0 && any(q, REQ_QUEUED)) {
			/* A move found no node: look again, as the next call would. */
			client_search(c, why, sizeof(why));
			continue;
		}
		if (!pair(c) && c->conn.broken) {
			fail_broken(c);
			return;
		}
		send_some(c);
		read_some(c);
		leave = (struct leave){ 0 };
		settle(c, &leave);
		if (!leave.need)
			expire(c);
		if (!leave.need && pair(c) && c->current >= 0 && c->conn.broken) {
			bool seen = q->broken_seen == c->generation + 1;

			leave = (struct leave){ .need = true,
						.r = seen ? q->broken_r : -ECONNRESET };
			say(leave.what, sizeof(leave.what), "went away during the call");
			say(leave.cause, sizeof(leave.cause), "%s",
			    seen ? q->broken_why : "the connection failed");
		}
		if (leave.need) {
			client_move(c, leave.r, leave.what, leave.cause, leave.drain_ms, why,
				    sizeof(why));
			continue;
		}
		if (!any(q, REQ_ARRIVED) && !(pair(c) && c->current < 0 && any(q, REQ_QUEUED)))
			return;
	}
}

/* Watches fd (the connection, -1: none) with events in the epoll instance:
 * false when it cannot. */
static bool watch(struct submit_queue *q, int fd, uint32_t events)
{
	struct epoll_event ev = { .events = events };

	if (fd == q->watched_fd && (fd < 0 || events == q->watched_events))
		return true;
	if (fd == q->watched_fd) {
		if (epoll_ctl(q->epfd, EPOLL_CTL_MOD, fd, &ev) < 0)
			return false;
		q->watched_events = events;
		return true;
	}
	if (q->watched_fd >= 0)
		epoll_ctl(q->epfd, EPOLL_CTL_DEL, q->watched_fd, NULL);
	q->watched_fd = -1;
	if (fd < 0)
		return true;
	if (epoll_ctl(q->epfd, EPOLL_CTL_ADD, fd, &ev) < 0)
		return false;
	q->watched_fd = fd;
	q->watched_events = events;
	return true;
}

/* The descriptors say what the requests wait for (ftvm_completion_fd()):
 * the eventfd is readable while a reap has work without the node (replies
 * read by a blocking call, completions, a move to make), the connection is
 * watched while requests are on it, the timer is set to the next deadline. */
static void sync_fds(struct ftvm_client *c)
{
	struct submit_queue *q = c->queue;
	bool work = q->n_done > 0, on_conn = false, waiting = false;
	uint64_t deadline = 0, now = client_now_ms(), count = 1;
	struct itimerspec its = { 0 };
	int conn_fd;

	for (unsigned i = 0; i < FTVM_SUBMIT_MAX; i++) {
		const struct req *r = &q->req[i];

		if (r->state == REQ_ARRIVED || r->state == REQ_LOST)
			work = true;
		if (r->state == REQ_QUEUED)
			on_conn = waiting = true;
		if (r->state == REQ_SENT && here(c, r)) {
			on_conn = true;
			if (!deadline || r->deadline < deadline)
				deadline = r->deadline;
		}
	}
	if (waiting && q->stalled_since &&
	    (!deadline || q->stalled_since + CALL_TIMEOUT_MS < deadline))
		deadline = q->stalled_since + CALL_TIMEOUT_MS;
	/* No connection to wait on: only a reap moves them. The socket while
	 * requests are on it, and after them, so that the next submit need not
	 * add it again (with its removal, two system calls a request at queue
	 * depth 1), until a reap with nothing submitted stops watching it
	 * (ftvm_reap_sized()): a late reply to nobody, or the node's close,
	 * wakes the caller once, not again and again. EPOLLOUT: send_some()
	 * left requests waiting, so the socket was full. */
	if (on_conn && !usable(c))
		work = true;
	conn_fd = usable(c) && (on_conn || q->watched_fd == c->conn.fd) ? c->conn.fd : -1;
	if (!watch(q, conn_fd, EPOLLIN | (waiting ? (uint32_t)EPOLLOUT : 0)))
		work = true; /* wake the caller all the same */
	if (work != q->ev_set) {
		if (work)
			q->ev_set = write(q->evfd, &count, sizeof(count)) == sizeof(count);
		else
			q->ev_set = read(q->evfd, &count, sizeof(count)) != sizeof(count);
	}

	/* Set again when a deadline comes before the one it is armed for, when
	 * it fired (its count goes back to 0), and for one already past. Not
	 * when the earliest deadline moves later or goes (a request answered):
	 * it then fires early, once, and the reap that follows sets it again
	 * (disarms it, with nothing submitted), where setting it on every
	 * change cost two system calls a request at queue depth 1. */
	if (!usable(c))
		deadline = 0;
	if ((deadline && (!q->timer_ms || deadline < q->timer_ms)) ||
	    (q->timer_ms && q->timer_ms <= now) || (deadline && deadline <= now)) {
		its.it_value.tv_sec = (time_t)(deadline / 1000);
		its.it_value.tv_nsec = (long)(deadline % 1000) * 1000000;
		if (timerfd_settime(q->tfd, TFD_TIMER_ABSTIME, &its, NULL) == 0)
			q->timer_ms = deadline;
	}
}

/* Makes c's queue at its first asynchronous call. With c->lock held. */
static int queue_get(struct ftvm_client *c, struct submit_queue **ret)
{
	struct epoll_event ev = { .events = EPOLLIN };
	struct submit_queue *q = c->queue;
	int r;

	if (q) {
		*ret = q;
		return 0;
	}
	q = calloc(1, sizeof(*q));
	if (!q)
		return client_fail(c, -ENOMEM, "out of memory for the submitted requests");
	q->watched_fd = -1;
	q->evfd = q->tfd = -1;
	q->epfd = epoll_create1(EPOLL_CLOEXEC);
	if (q->epfd < 0)
		goto fail;
	q->evfd = eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK);
	if (q->evfd < 0 || epoll_ctl(q->epfd, EPOLL_CTL_ADD, q->evfd, &ev) < 0)
		goto fail;
	q->tfd = timerfd_create(CLOCK_MONOTONIC, TFD_CLOEXEC | TFD_NONBLOCK);
	if (q->tfd < 0 || epoll_ctl(q->epfd, EPOLL_CTL_ADD, q->tfd, &ev) < 0)
		goto fail;
	c->queue = q;
	*ret = q;
	return 0;
fail:
	r = -errno;
	if (q->tfd >= 0)
		close(q->tfd);
	if (q->evfd >= 0)
		close(q->evfd);
	if (q->epfd >= 0)
		close(q->epfd);
	free(q);
	return client_fail(c, r, "cannot make the completion descriptor: %s", strerror(-r));
}

static int lock(struct ftvm_client *c)
{
	int r = pthread_mutex_lock(&c->lock);

	return r == 0 ? 0 : client_fail(c, -r, "cannot lock the client: %s", strerror(r));
}

static int submit(struct ftvm_client *c, bool read, const char *guid, uint64_t page,
		  const void *data, size_t len, void *buf, size_t buf_len, uint64_t cookie)
{
	Ftvm__Client__WritePageRequest write = FTVM__CLIENT__WRITE_PAGE_REQUEST__INIT;
	Ftvm__Client__ReadPageRequest rd = FTVM__CLIENT__READ_PAGE_REQUEST__INIT;
	Request req = FTVM__CLIENT__CLIENT_REQUEST__INIT;
	struct submit_queue *q;
	struct req *r = NULL;
	size_t size;
	int e;

	e = client_check_guid(c, guid);
	if (e < 0)
		return e;
	if (!read && len > 0 && !data)
		return client_fail(c, -EINVAL,
				   "data of %zu bytes for %s page %" PRIu64 " given as NULL", len,
				   guid, page);
	if (read && buf_len > 0 && !buf)
		return client_fail(c, -EINVAL, "a %zu byte buffer given as NULL", buf_len);
	client_error_reset(c);
	e = lock(c);
	if (e < 0)
		return e;
	e = queue_get(c, &q);
	if (e < 0)
		goto out;
	if (q->used == FTVM_SUBMIT_MAX) {
		e = client_fail(c, -EAGAIN,
				"%d requests submitted and not reaped, the most a client may have: "
				"reap first",
				FTVM_SUBMIT_MAX);
		goto out;
	}
	for (unsigned i = 0; !r; i++)
		if (q->req[i].state == REQ_FREE)
			r = &q->req[i];

	if (read) {
		rd.guid = (char *)guid;
		rd.page = page;
		rd.wait = true;
		req.request_case = FTVM__CLIENT__CLIENT_REQUEST__REQUEST_READ_PAGE;
		req.read_page = &rd;
	} else {
		write.guid = (char *)guid;
		write.page = page;
		write.data.data = (uint8_t *)data;
		write.data.len = len;
		write.wait = true;
		req.request_case = FTVM__CLIENT__CLIENT_REQUEST__REQUEST_WRITE_PAGE;
		req.write_page = &write;
	}
	req.id = c->next_id + 1;
	size = ftvm__client__client_request__get_packed_size(&req);
	if (size > c->max_payload) {
		e = client_fail(c, -EMSGSIZE,
				"request of %zu bytes is above the %zu byte frame limit", size,
				c->max_payload);
		goto out;
	}
	*r = (struct req){ .read = read, .page = page, .buf = buf, .buf_len = buf_len };
	r->frame = malloc(FRAME_HEADER_SIZE + size);
	if (!r->frame) {
		e = client_fail(c, -ENOMEM, "out of memory for a %zu byte request", size);
		goto out;
	}
	ftvm__client__client_request__pack(&req, r->frame + FRAME_HEADER_SIZE);
	frame_seal(r->frame, size);
	r->frame_len = FRAME_HEADER_SIZE + size;
	r->id = ++c->next_id;
	r->seq = q->next_seq++;
	snprintf(r->guid, sizeof(r->guid), "%s", guid);
	r->done.cookie = cookie;
	r->state = REQ_QUEUED;
	q->used++;
	send_some(c);
	sync_fds(c);
out:
	pthread_mutex_unlock(&c->lock);
	return e;
}

int ftvm_submit_write_page(struct ftvm_client *c, const char *guid, uint64_t page, const void *data,
			   size_t len, uint64_t cookie)
{
	return submit(c, false, guid, page, data, len, NULL, 0, cookie);
}

int ftvm_submit_read_page(struct ftvm_client *c, const char *guid, uint64_t page, void *buf,
			  size_t buf_len, uint64_t cookie)
{
	return submit(c, true, guid, page, NULL, 0, buf, buf_len, cookie);
}

/* Hands out up to max completions, oldest first, into rows of row_size. */
static int pop(struct submit_queue *q, struct ftvm_completion *out, unsigned max, size_t row_size)
{
	int n = 0;

	while ((unsigned)n < max && q->n_done > 0) {
		struct req *r = &q->req[q->done[q->done_head]];
		uint8_t *row = (uint8_t *)out + (size_t)n * row_size;
		size_t known = sizeof(r->done);

		memcpy(row, &r->done, row_size < known ? row_size : known);
		if (row_size > known)
			memset(row + known, 0, row_size - known);
		q->done_head = (q->done_head + 1) % FTVM_SUBMIT_MAX;
		q->n_done--;
		*r = (struct req){ .state = REQ_FREE };
		q->used--;
		n++;
	}
	return n;
}

int ftvm_reap_sized(struct ftvm_client *c, struct ftvm_completion *out, unsigned max,
		    int timeout_ms, size_t row_size)
{
	uint64_t deadline = 0, now;
	struct submit_queue *q;
	struct pollfd pfd;
	int n = 0, e, wait;

	if (!c)
		return -EINVAL;
	if (!out || max == 0)
		return client_fail(c, -EINVAL, "no room for completions");
	if (row_size < COMPLETION_V1_SIZE)
		return client_fail(c, -EINVAL,
				   "a completion row of %zu bytes is shorter than struct "
				   "ftvm_completion ever was (%zu)",
				   row_size, (size_t)COMPLETION_V1_SIZE);
	if (timeout_ms < -1)
		return client_fail(c, -EINVAL, "timeout of %d ms", timeout_ms);
	if (timeout_ms > 0)
		deadline = client_now_ms() + (uint64_t)timeout_ms;
	client_error_reset(c);
	e = lock(c);
	if (e < 0)
		return e;
	for (;;) {
		q = c->queue;
		if (!q)
			break;
		if (q->used == 0) {
			/* Nothing submitted: what woke the caller, if anything, was
			 * a timer that fired for nothing or bytes to nobody (a late
			 * reply, the node's close). The socket is watched again at
			 * the next submit, and the timer stops saying so. */
			watch(q, -1, 0);
			sync_fds(c);
			break;
		}
		pump(c);
		n = pop(q, out, max, row_size);
		sync_fds(c);
		if (n > 0 || q->used == 0 || timeout_ms == 0)
			break;
		wait = -1;
		if (timeout_ms > 0) {
			now = client_now_ms();
			if (now >= deadline)
				break;
			wait = (int)(deadline - now);
		}
		/* Unlocked: other threads' calls go on meanwhile, and one of
		 * them may reap what this one waits for. */
		pfd = (struct pollfd){ .fd = q->epfd, .events = POLLIN };
		pthread_mutex_unlock(&c->lock);
		poll(&pfd, 1, wait);
		e = lock(c);
		if (e < 0)
			return e;
	}
	pthread_mutex_unlock(&c->lock);
	/* Failures on the way are the completions', not the reap's. */
	client_error_reset(c);
	return n;
}

int ftvm_completion_fd(struct ftvm_client *c)
{
	struct submit_queue *q;
	int e;

	if (!c)
		return -EINVAL;
	client_error_reset(c);
	e = lock(c);
	if (e < 0)
		return e;
	e = queue_get(c, &q);
	if (e == 0) {
		sync_fds(c);
		e = q->epfd;
	}
	pthread_mutex_unlock(&c->lock);
	return e;
}

/* ---- hooks of client.c (client_internal.h) ---- */

int submit_flush_partial(struct ftvm_client *c, uint64_t deadline)
{
	struct submit_queue *q = c->queue;
	struct req *r;
	int e;

	if (!q || !usable(c))
		return 0;
	r = next_to_send(q);
	if (!r || r->off == 0)
		return 0;
	e = client_send_all(c, &c->conn, r->frame + r->off, r->frame_len - r->off, deadline);
	if (e < 0) {
		broke(c, e, client_error());
		return e;
	}
	sent(r);
	return 0;
}

bool submit_take_reply(struct ftvm_client *c, Reply *reply)
{
	struct submit_queue *q = c->queue;

	if (!q || reply->id == 0)
		return false;
	for (unsigned i = 0; i < FTVM_SUBMIT_MAX; i++) {
		struct req *r = &q->req[i];

		if (r->state == REQ_SENT && r->id == reply->id && r->generation == c->generation) {
			r->reply = reply;
			r->state = REQ_ARRIVED;
			return true;
		}
	}
	return false;
}

/* Reads the answers of the requests on the connection the client leaves, for
 * up to drain_ms (0: only what came already). */
static void drain(struct ftvm_client *c, uint64_t drain_ms)
{
	uint64_t deadline = drain_ms ? client_now_ms() + drain_ms : 0;
	struct submit_queue *q = c->queue;
	const uint8_t *payload;
	char why[256];
	size_t len;
	Reply *reply;
	int n;

	if (c->conn.garbled)
		return;
	for (;;) {
		bool open = false;

		for (unsigned i = 0; i < FTVM_SUBMIT_MAX && !open; i++)
			open = q->req[i].state == REQ_SENT && here(c, &q->req[i]);
		if (!open)
			return;
		n = client_recv_frame(c, &c->conn, deadline, &payload, &len, why, sizeof(why));
		if (n < 0)
			return;
		reply = ftvm__client__client_reply__unpack(NULL, len, payload);
		client_consume(&c->conn, (size_t)n);
		if (!reply)
			return;
		if (reply->id == 0 || !submit_take_reply(c, reply))
			ftvm__client__client_reply__free_unpacked(reply, NULL);
	}
}

void submit_conn_leaving(struct ftvm_client *c, int r, const char *what, const char *cause,
			 uint64_t drain_ms)
{
	struct submit_queue *q = c->queue;

	if (!q)
		return;
	if (!cause && q->broken_seen == c->generation + 1) {
		r = q->broken_r;
		cause = q->broken_why;
	} else if (!cause) {
		cause = "the connection failed earlier";
	}
	if (q->watched_fd >= 0)
		epoll_ctl(q->epfd, EPOLL_CTL_DEL, q->watched_fd, NULL);
	q->watched_fd = -1;
	drain(c, drain_ms);
	q->leaving = true;
	say(q->left_why, sizeof(q->left_why), "node at %s %s (%s)", c->sockets[c->current], what,
	    cause);
	for (unsigned i = 0; i < FTVM_SUBMIT_MAX; i++) {
		struct req *rq = &q->req[i];

		if (rq->state == REQ_SENT && here(c, rq)) {
			/* It left: the node may have acted on it. */
			rq->state = REQ_LOST;
			rq->done.result = r;
			rq->done.from_node = false;
			say(rq->done.error, sizeof(rq->done.error), "%s", q->left_why);
		} else if (rq->state == REQ_QUEUED && rq->off > 0) {
			/* Half a frame: the node decodes whole ones only. */
			again(c, rq, q->left_why);
		}
	}
}

void submit_conn_moved(struct ftvm_client *c, const char *why)
{
	struct submit_queue *q = c->queue;

	if (!q)
		return;
	for (unsigned i = 0; i < FTVM_SUBMIT_MAX; i++) {
		struct req *r = &q->req[i];

		if (r->state == REQ_LOST && c->current >= 0)
			complete(q, r, r->done.result, r->done.from_node,
				 "%s; the client now talks to %s: the call's outcome is unknown, "
				 "check or retry",
				 r->done.error, c->sockets[c->current]);
		else if (r->state == REQ_LOST)
			complete(q, r, r->done.result, r->done.from_node,
				 "%s, and no node served within %d s (%s): the call's outcome is "
				 "unknown, check or retry; the next call looks again",
				 r->done.error, CALL_TIMEOUT_MS / 1000, why);
		else if (r->state == REQ_QUEUED && c->current >= 0)
			continue;
		else if (r->state == REQ_QUEUED && q->leaving)
			complete(
				q, r, -ENOTCONN, false,
				"%s, and no node served within %d s (%s): nothing was applied; the "
				"next call looks again",
				q->left_why, CALL_TIMEOUT_MS / 1000, why);
		else if (r->state == REQ_QUEUED)
			complete(q, r, -ENOTCONN, false,
				 "no node served within %d s (%s); the next call looks again",
				 CALL_TIMEOUT_MS / 1000, why);
	}
	q->leaving = false;
	q->stalled_since = 0; /* a new connection, or none */
}

void submit_call_done(struct ftvm_client *c)
{
	if (!c->queue)
		return;
	send_some(c);
	sync_fds(c);
}

void submit_free(struct ftvm_client *c)
{
	struct submit_queue *q = c->queue;

	if (!q)
		return;
	for (unsigned i = 0; i < FTVM_SUBMIT_MAX; i++) {
		free(q->req[i].frame);
		if (q->req[i].reply)
			ftvm__client__client_reply__free_unpacked(q->req[i].reply, NULL);
	}
	close(q->tfd);
	close(q->evfd);
	close(q->epfd);
	free(q);
	c->queue = NULL;
}
