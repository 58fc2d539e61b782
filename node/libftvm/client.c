/* libftvm (ftvm.h): blocking calls over the node's unix socket.
 *
 * Every public call is one ClientRequest out and the ClientReply with the same
 * id back, through call(); adding a request means filling its oneof member,
 * calling call() and copying the answer out. Replies with another id are
 * answers to earlier calls that timed out on this side, and are skipped.
 *
 * Threads: a client may be shared. call() holds c->lock from sending the
 * request to consuming its reply, so the connection state (fd, rbuf, next_id,
 * broken) is only touched under it; everything else in struct ftvm_client is
 * set once in ftvm_connect(). The reason of a failure is not client state: it
 * lives in thread-local storage (struct last_error), tagged with the client's
 * serial number, so each thread reads the reason of its own last call and no
 * lock is needed to write or read it.
 *
 * This is library code linked into other people's programs: it logs nothing,
 * never raises SIGPIPE (MSG_NOSIGNAL) and never trusts the node's bytes. */
#include "ftvm.h"

#include <errno.h>
#include <inttypes.h>
#include <pthread.h>
#include <stdarg.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/socket.h>
#include <sys/time.h>
#include <sys/un.h>
#include <time.h>
#include <unistd.h>

#include "client.pb-c.h"
#include "crc32c.h"
#include "frame.h"

typedef Ftvm__Client__ClientRequest Request;
typedef Ftvm__Client__ClientReply Reply;

#define CALL_TIMEOUT_MS 10000
#define RBUF_MIN 65536u

struct ftvm_client {
	/* Names this client in a thread's last_error; never reused, unlike the
	 * address once the client is freed. */
	uint64_t serial;
	pthread_mutex_t lock; /* serialises calls: held for one request and its reply */
	int fd;
	/* The stream lost its frame boundary (bad frame, half-sent request, node
	 * gone): nothing more can be read or sent on it. */
	bool broken;
	uint64_t next_id;
	size_t max_payload;
	uint8_t *rbuf; /* received bytes not yet consumed */
	size_t rlen, rcap;
	int received_fd; /* a descriptor the node passed with a reply, -1 */
	/* The node's frame pool, mapped at the first pointer call. */
	pthread_mutex_t map_lock;
	uint8_t *pool;
	size_t pool_size;
};

/* The outcome of this thread's last call: on the client numbered serial
 * (0: none yet, serials start at 1). */
struct last_error {
	uint64_t serial;
	char error[256];
	bool from_node; /* error holds the node's refusal */
};

static _Thread_local struct last_error last_error;
static atomic_uint_fast64_t next_serial = 1;

/* Starts a call on c: this thread's last error is now c's, and empty. */
static void error_reset(const struct ftvm_client *c)
{
	last_error.serial = c->serial;
	last_error.error[0] = '\0';
	last_error.from_node = false;
}

static int fail(const struct ftvm_client *c, int r, const char *fmt, ...)
	__attribute__((format(printf, 3, 4)));

/* Every failure goes through here, so from_node is only true when call()
 * sets it after a refusal. */
static int fail(const struct ftvm_client *c, int r, const char *fmt, ...)
{
	va_list ap;

	error_reset(c);
	va_start(ap, fmt);
	vsnprintf(last_error.error, sizeof(last_error.error), fmt, ap);
	va_end(ap);
	return r;
}

static uint64_t now_ms(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000 + (uint64_t)ts.tv_nsec / 1000000;
}

static int set_timeout(int fd, int opt, uint64_t ms)
{
	struct timeval tv = { .tv_sec = (time_t)(ms / 1000),
			      .tv_usec = (suseconds_t)(ms % 1000) * 1000 };

	if (ms == 0)
		tv.tv_usec = 1000; /* 0 would mean "no timeout" */
	return setsockopt(fd, SOL_SOCKET, opt, &tv, sizeof(tv)) < 0 ? -errno : 0;
}

static const char *status_name(int status)
{
	static const char *const names[] = {
		[FTVM__PARTNER__STATUS__STATUS_OK] = "OK",
		[FTVM__PARTNER__STATUS__STATUS_DENIED] = "DENIED",
		[FTVM__PARTNER__STATUS__STATUS_NOT_FOUND] = "NOT_FOUND",
		[FTVM__PARTNER__STATUS__STATUS_LOCKED] = "LOCKED",
		[FTVM__PARTNER__STATUS__STATUS_NO_SPACE] = "NO_SPACE",
		[FTVM__PARTNER__STATUS__STATUS_PARTNER_UNAVAILABLE] = "PARTNER_UNAVAILABLE",
		[FTVM__PARTNER__STATUS__STATUS_TIMEOUT] = "TIMEOUT",
		[FTVM__PARTNER__STATUS__STATUS_STALE_EPOCH] = "STALE_EPOCH",
		[FTVM__PARTNER__STATUS__STATUS_BAD_REQUEST] = "BAD_REQUEST",
		[FTVM__PARTNER__STATUS__STATUS_UNSUPPORTED] = "UNSUPPORTED",
		[FTVM__PARTNER__STATUS__STATUS_INTERNAL] = "INTERNAL",
		[FTVM__PARTNER__STATUS__STATUS_SHUTTING_DOWN] = "SHUTTING_DOWN",
		[FTVM__PARTNER__STATUS__STATUS_ABORTED] = "ABORTED",
		[FTVM__PARTNER__STATUS__STATUS_FENCED] = "FENCED",
	};

	if (status < 0 || (size_t)status >= sizeof(names) / sizeof(names[0]) || !names[status])
		return "unknown status";
	return names[status];
}

static int status_to_errno(int status)
{
	switch (status) {
	case FTVM__PARTNER__STATUS__STATUS_OK:
		return 0;
	case FTVM__PARTNER__STATUS__STATUS_NOT_FOUND:
		return -ENOENT;
	case FTVM__PARTNER__STATUS__STATUS_LOCKED:
		return -EBUSY;
	case FTVM__PARTNER__STATUS__STATUS_NO_SPACE:
		return -ENOSPC;
	case FTVM__PARTNER__STATUS__STATUS_DENIED:
		return -EACCES;
	case FTVM__PARTNER__STATUS__STATUS_PARTNER_UNAVAILABLE:
		return -EHOSTUNREACH;
	case FTVM__PARTNER__STATUS__STATUS_TIMEOUT:
		return -ETIMEDOUT;
	case FTVM__PARTNER__STATUS__STATUS_UNSUPPORTED:
		return -EOPNOTSUPP;
	case FTVM__PARTNER__STATUS__STATUS_BAD_REQUEST:
		return -EINVAL;
	case FTVM__PARTNER__STATUS__STATUS_ABORTED:
		return -ECANCELED;
	case FTVM__PARTNER__STATUS__STATUS_FENCED:
		return -ESHUTDOWN;
	case FTVM__PARTNER__STATUS__STATUS_STALE_EPOCH:
		return -ESTALE;
	default:
		return -EIO;
	}
}

static int send_all(struct ftvm_client *c, const uint8_t *buf, size_t len, uint64_t deadline)
{
	size_t off = 0;
	uint64_t now;
	ssize_t n;
	int r;

	while (off < len) {
		now = now_ms();
		if (now >= deadline)
			goto timeout;
		r = set_timeout(c->fd, SO_SNDTIMEO, deadline - now);
		if (r < 0)
			return fail(c, r, "cannot set a send timeout: %s", strerror(-r));
		n = send(c->fd, buf + off, len - off, MSG_NOSIGNAL);
		if (n < 0) {
			if (errno == EINTR)
				continue;
			if (errno == EAGAIN || errno == EWOULDBLOCK)
				goto timeout;
			r = -errno;
			if (off > 0)
				c->broken = true;
			if (r == -EPIPE || r == -ECONNRESET) {
				c->broken = true;
				return fail(c, -ECONNRESET, "the node closed the connection");
			}
			return fail(c, r, "cannot send to the node: %s", strerror(-r));
		}
		off += (size_t)n;
	}
	return 0;
timeout:
	/* Half a frame on the wire: the node would read the next request as
	 * its rest. */
	if (off > 0)
		c->broken = true;
	return fail(c, -ETIMEDOUT, "the node did not take the request within %d s",
		    CALL_TIMEOUT_MS / 1000);
}

/* recv() that also takes a descriptor the node passes (SCM_RIGHTS). */
static ssize_t recv_with_fd(struct ftvm_client *c)
{
	char control[CMSG_SPACE(sizeof(int))];
	struct iovec iov = { .iov_base = c->rbuf + c->rlen, .iov_len = c->rcap - c->rlen };
	struct msghdr msg = { .msg_iov = &iov,
			      .msg_iovlen = 1,
			      .msg_control = control,
			      .msg_controllen = sizeof(control) };
	ssize_t n = recvmsg(c->fd, &msg, MSG_CMSG_CLOEXEC);

	for (struct cmsghdr *cm = n > 0 ? CMSG_FIRSTHDR(&msg) : NULL; cm;
	     cm = CMSG_NXTHDR(&msg, cm)) {
		if (cm->cmsg_level != SOL_SOCKET || cm->cmsg_type != SCM_RIGHTS)
			continue;
		if (c->received_fd >= 0)
			close(c->received_fd);
		memcpy(&c->received_fd, CMSG_DATA(cm), sizeof(int));
	}
	return n;
}

/* Reads until rbuf starts with a whole, valid frame. Returns its length and
 * sets *ret_payload and *ret_len, or -errno. */
static int recv_frame(struct ftvm_client *c, uint64_t deadline, const uint8_t **ret_payload,
		      size_t *ret_len)
{
	const char *why;
	uint64_t now;
	size_t need;
	ssize_t n;
	int r;

	for (;;) {
		need = FRAME_HEADER_SIZE;
		if (c->rlen >= FRAME_HEADER_SIZE) {
			r = frame_header_check(c->rbuf, c->max_payload, &why);
			if (r < 0)
				goto bad;
			need = FRAME_HEADER_SIZE + (size_t)r;
			if (c->rlen >= need) {
				r = frame_decode(c->rbuf, c->rlen, c->max_payload, ret_payload,
						 ret_len, &why);
				if (r < 0)
					goto bad;
				if (r > 0)
					return r;
			}
		}
		if (need > c->rcap) {
			size_t cap = need < RBUF_MIN ? RBUF_MIN : need;
			uint8_t *p = realloc(c->rbuf, cap);

			if (!p)
				return fail(c, -ENOMEM, "out of memory for a %zu byte reply", need);
			c->rbuf = p;
			c->rcap = cap;
		}
		now = now_ms();
		if (now >= deadline)
			goto timeout;
		r = set_timeout(c->fd, SO_RCVTIMEO, deadline - now);
		if (r < 0)
			return fail(c, r, "cannot set a receive timeout: %s", strerror(-r));
		n = recv_with_fd(c);
		if (n == 0) {
			c->broken = true;
			return fail(c, -ECONNRESET, "the node closed the connection");
		}
		if (n < 0) {
			if (errno == EINTR)
				continue;
			if (errno == EAGAIN || errno == EWOULDBLOCK)
				goto timeout;
			r = -errno;
			c->broken = true;
			if (r == -ECONNRESET)
				return fail(c, r, "the node closed the connection");
			return fail(c, r, "cannot receive from the node: %s", strerror(-r));
		}
		c->rlen += (size_t)n;
	}
bad:
	/* Where the next frame starts is unknown now. */
	c->broken = true;
	return fail(c, -EBADMSG, "bad reply frame from the node: %s", why);
timeout:
	return fail(c, -ETIMEDOUT, "no reply from the node within %d s", CALL_TIMEOUT_MS / 1000);
}

static void consume(struct ftvm_client *c, size_t len)
{
	memmove(c->rbuf, c->rbuf + len, c->rlen - len);
	c->rlen -= len;
}

/* call() with c->lock held. */
static int call_locked(struct ftvm_client *c, Request *req,
		       Ftvm__Client__ClientReply__ReplyCase expect, Reply **ret_reply)
{
	/* The timeout counts from when this call has the connection, not
	 * while it waits for other threads' calls. */
	uint64_t deadline = now_ms() + CALL_TIMEOUT_MS;
	const uint8_t *payload;
	size_t len, payload_len;
	uint8_t *frame;
	Reply *reply;
	int r;

	if (c->broken)
		return fail(c, -ENOTCONN, "the connection to the node failed earlier; reconnect");

	req->id = ++c->next_id;
	len = ftvm__client__client_request__get_packed_size(req);
	if (len > c->max_payload)
		return fail(c, -EMSGSIZE, "request of %zu bytes is above the %zu byte frame limit",
			    len, c->max_payload);
	frame = malloc(FRAME_HEADER_SIZE + len);
	if (!frame)
		return fail(c, -ENOMEM, "out of memory for a %zu byte request", len);
	ftvm__client__client_request__pack(req, frame + FRAME_HEADER_SIZE);
	frame_seal(frame, len);
	r = send_all(c, frame, FRAME_HEADER_SIZE + len, deadline);
	free(frame);
	if (r < 0)
		return r;

	for (;;) {
		r = recv_frame(c, deadline, &payload, &payload_len);
		if (r < 0)
			return r;
		reply = ftvm__client__client_reply__unpack(NULL, payload_len, payload);
		consume(c, (size_t)r);
		if (!reply)
			return fail(c, -EBADMSG, "the node's reply does not parse (%zu bytes)",
				    payload_len);
		if (reply->id == req->id)
			break;
		/* The answer to an earlier call that timed out here. */
		ftvm__client__client_reply__free_unpacked(reply, NULL);
	}

	r = status_to_errno(reply->status);
	if (r < 0) {
		/* Without the node's words, the meaning of r, or the status's name
		 * where r does not tell it (-EIO stands for several). */
		if (reply->reason && reply->reason[0])
			fail(c, r, "%s", reply->reason);
		else if (r == -EIO)
			fail(c, r, "%s", status_name(reply->status));
		else
			fail(c, r, "%s", ftvm_strerror(r));
		last_error.from_node = true;
		goto out;
	}
	if (expect != FTVM__CLIENT__CLIENT_REPLY__REPLY__NOT_SET && reply->reply_case != expect) {
		r = fail(c, -EBADMSG, "the node answered OK without the expected reply (got %d)",
			 (int)reply->reply_case);
		goto out;
	}
	*ret_reply = reply;
	return 0;
out:
	ftvm__client__client_reply__free_unpacked(reply, NULL);
	return r;
}

/* Sends req (its id is set here) and waits for its reply, holding the
 * client's lock so other threads' calls wait their turn. On 0, *ret_reply
 * holds a reply with status OK and the oneof member expect set (any member,
 * or none, when expect is REPLY__NOT_SET); it owns its bytes (nothing points
 * into c->rbuf), so the caller reads it without the lock and frees it with
 * ftvm__client__client_reply__free_unpacked(). Otherwise -errno with the
 * reason in this thread's last_error. */
static int call(struct ftvm_client *c, Request *req, Ftvm__Client__ClientReply__ReplyCase expect,
		Reply **ret_reply)
{
	int r;

	error_reset(c);
	r = pthread_mutex_lock(&c->lock);
	if (r != 0)
		return fail(c, -r, "cannot lock the client: %s", strerror(r));
	r = call_locked(c, req, expect, ret_reply);
	pthread_mutex_unlock(&c->lock);
	return r;
}

static void copy_str(char *dst, size_t size, const char *src)
{
	snprintf(dst, size, "%s", src ? src : "");
}

int ftvm_connect(const char *socket_path, struct ftvm_client **ret)
{
	struct sockaddr_un sa = { .sun_family = AF_UNIX };
	struct ftvm_client *c;
	int r;

	if (!socket_path || !ret)
		return -EINVAL;
	if (socket_path[0] == '\0' || strlen(socket_path) >= sizeof(sa.sun_path))
		return -ENAMETOOLONG;
	strcpy(sa.sun_path, socket_path);

	c = calloc(1, sizeof(*c));
	if (!c)
		return -ENOMEM;
	c->serial = atomic_fetch_add(&next_serial, 1);
	c->max_payload = FRAME_MAX_PAYLOAD_DEFAULT;
	c->received_fd = -1;
	r = pthread_mutex_init(&c->lock, NULL);
	if (r != 0) {
		free(c);
		return -r;
	}
	r = pthread_mutex_init(&c->map_lock, NULL);
	if (r != 0) {
		pthread_mutex_destroy(&c->lock);
		free(c);
		return -r;
	}
	c->fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
	if (c->fd < 0) {
		r = -errno;
		goto fail;
	}
	/* connect() on a unix socket waits while the node's backlog is full
	 * (a hung node), bounded by the send timeout. */
	r = set_timeout(c->fd, SO_SNDTIMEO, CALL_TIMEOUT_MS);
	if (r < 0)
		goto fail;
	if (connect(c->fd, (struct sockaddr *)&sa, sizeof(sa)) < 0) {
		r = errno == EAGAIN ? -ETIMEDOUT : -errno;
		goto fail;
	}
	*ret = c;
	return 0;
fail:
	if (c->fd >= 0)
		close(c->fd);
	pthread_mutex_destroy(&c->map_lock);
	pthread_mutex_destroy(&c->lock);
	free(c);
	return r;
}

void ftvm_disconnect(struct ftvm_client *c)
{
	if (!c)
		return;
	close(c->fd);
	if (c->received_fd >= 0)
		close(c->received_fd);
	if (c->pool)
		munmap(c->pool, c->pool_size);
	pthread_mutex_destroy(&c->map_lock);
	pthread_mutex_destroy(&c->lock);
	free(c->rbuf);
	free(c);
}

const char *ftvm_last_error(const struct ftvm_client *c)
{
	if (!c)
		return "no client";
	return last_error.serial == c->serial ? last_error.error : "";
}

bool ftvm_last_error_from_node(const struct ftvm_client *c)
{
	return c && last_error.serial == c->serial && last_error.from_node;
}

int ftvm_status(struct ftvm_client *c, struct ftvm_node_status *ret)
{
	Ftvm__Client__StatusRequest status = FTVM__CLIENT__STATUS_REQUEST__INIT;
	Request req = FTVM__CLIENT__CLIENT_REQUEST__INIT;
	const Ftvm__Client__StatusReply *s;
	const Ftvm__Client__PartnerStatus *p;
	Reply *reply = NULL;
	int r;

	if (!c || !ret)
		return -EINVAL;
	req.request_case = FTVM__CLIENT__CLIENT_REQUEST__REQUEST_STATUS;
	req.status = &status;
	r = call(c, &req, FTVM__CLIENT__CLIENT_REPLY__REPLY_STATUS_REPLY, &reply);
	if (r < 0)
		return r;

	s = reply->status_reply;
	memset(ret, 0, sizeof(*ret));
	copy_str(ret->node, sizeof(ret->node), s->node);
	copy_str(ret->state, sizeof(ret->state), s->state);
	ret->epoch = s->epoch;
	copy_str(ret->transport, sizeof(ret->transport), s->transport);
	copy_str(ret->transport_reason, sizeof(ret->transport_reason), s->transport_reason);
	p = s->partner;
	if (p) {
		copy_str(ret->partner_id, sizeof(ret->partner_id), p->id);
		copy_str(ret->partner_link, sizeof(ret->partner_link), p->link);
		copy_str(ret->partner_state, sizeof(ret->partner_state), p->state);
		copy_str(ret->partner_endpoint, sizeof(ret->partner_endpoint), p->endpoint);
		ret->partner_link_changes = p->link_changes;
		ret->partner_last_seen_ms = p->last_seen_ms;
		copy_str(ret->partner_store_state, sizeof(ret->partner_store_state),
			 p->store_state);
		ret->partner_store_epoch = p->store_epoch;
		ret->partner_store_silent_ms = p->store_silent_ms;
	}
	ret->frames_total = s->frames_total;
	ret->frames_free = s->frames_free;
	ret->allocations_own = s->allocations_own;
	ret->allocations_partner = s->allocations_partner;
	ret->page_size = s->page_size;
	ret->pid = s->pid;
	copy_str(ret->reason, sizeof(ret->reason), s->reason);
	ret->takeovers = s->takeovers;
	ret->since_takeover_ms = s->since_takeover_ms;
	copy_str(ret->store_error, sizeof(ret->store_error), s->store_error);
	ret->resyncs = s->resyncs;
	ret->last_resync_pages = s->last_resync_pages;
	ret->last_resync_ms = s->last_resync_ms;
	ret->journal_rows = s->journal_rows;
	ftvm__client__client_reply__free_unpacked(reply, NULL);
	return 0;
}

bool ftvm_guid_valid(const char *guid)
{
	size_t i;

	if (!guid || !guid[0])
		return false;
	for (i = 0; guid[i]; i++) {
		/* Printable ASCII without space; also keeps a GUID one token in
		 * ftvmctl's text output and in log lines. */
		if (guid[i] <= ' ' || guid[i] > '~' || i + 1 >= FTVM_GUID_MAX)
			return false;
	}
	return true;
}

const char *ftvm_strerror(int r)
{
	switch (r) {
	case -ENOENT:
		return "not found";
	case -EBUSY:
		return "page is locked";
	case -ENOSPC:
		return "no space";
	case -EACCES:
		return "denied";
	case -EHOSTUNREACH:
		return "partner unavailable";
	case -ETIMEDOUT:
		return "timed out";
	case -EOPNOTSUPP:
		return "not supported by the node";
	case -EINVAL:
		return "invalid request";
	case -ECANCELED:
		return "not applied";
	case -EIO:
		return "the node failed";
	case -EBADMSG:
		return "bad reply from the node";
	case -ENOBUFS:
		return "buffer smaller than the block";
	case -EMSGSIZE:
		return "request too large";
	case -ECONNRESET:
		return "the node closed the connection";
	case -ENOTCONN:
		return "not connected";
	default:
		return r >= 0 ? "success" : strerror(-r);
	}
}

/* Local checks, so a bad argument fails with a reason and without a round trip. */
/* Also the NULL client check of every call that takes a GUID. */
static int check_guid(struct ftvm_client *c, const char *guid)
{
	if (!c)
		return -EINVAL;
	if (!guid)
		return fail(c, -EINVAL, "no GUID given");
	if (!ftvm_guid_valid(guid))
		return fail(c, -EINVAL, "'%.*s' is not a GUID (want 1 to %d printable characters)",
			    FTVM_GUID_MAX, guid, FTVM_GUID_MAX - 1);
	return 0;
}

/* GUIDs are copied whole or not at all: a truncated one names another
 * allocation. */
static int copy_guid(struct ftvm_client *c, char dst[FTVM_GUID_MAX], const char *src)
{
	if (!ftvm_guid_valid(src))
		return fail(c, -EBADMSG, "the node answered with a malformed GUID");
	snprintf(dst, FTVM_GUID_MAX, "%s", src);
	return 0;
}

static int header_from_reply(struct ftvm_client *c, const Ftvm__Partner__Header *h,
			     struct ftvm_header *ret)
{
	int r;

	if (h->header.len > FTVM_HEADER_MAX)
		return fail(c, -EBADMSG, "the node sent a %zu byte header for %s (at most %d)",
			    h->header.len, h->guid, FTVM_HEADER_MAX);
	memset(ret, 0, sizeof(*ret));
	r = copy_guid(c, ret->guid, h->guid);
	if (r < 0)
		return r;
	ret->size = h->size;
	ret->block_size = h->block_size;
	ret->pages = h->pages;
	copy_str(ret->policy, sizeof(ret->policy), h->policy);
	copy_str(ret->home, sizeof(ret->home), h->home);
	copy_str(ret->owner, sizeof(ret->owner), h->owner);
	if (h->header.len > 0)
		memcpy(ret->header, h->header.data, h->header.len);
	ret->header_len = h->header.len;
	return 0;
}

int ftvm_alloc(struct ftvm_client *c, uint64_t size, const char *policy, bool immediate,
	       const void *header, size_t header_len, struct ftvm_alloc_info *ret)
{
	Ftvm__Client__AllocRequest alloc = FTVM__CLIENT__ALLOC_REQUEST__INIT;
	Request req = FTVM__CLIENT__CLIENT_REQUEST__INIT;
	Reply *reply = NULL;
	struct ftvm_alloc_info info = { 0 };
	int r;

	if (!c)
		return -EINVAL;
	if (!ret)
		return fail(c, -EINVAL, "no place for the result");
	if (size == 0)
		return fail(c, -EINVAL, "cannot allocate 0 bytes");
	if (header_len > FTVM_HEADER_MAX)
		return fail(c, -EINVAL, "header of %zu bytes is above the %d byte limit",
			    header_len, FTVM_HEADER_MAX);
	if (header_len > 0 && !header)
		return fail(c, -EINVAL, "header of %zu bytes given as NULL", header_len);

	alloc.size = size;
	alloc.policy = (char *)(policy ? policy : "");
	alloc.immediate = immediate;
	alloc.header.data = (uint8_t *)header;
	alloc.header.len = header_len;
	req.request_case = FTVM__CLIENT__CLIENT_REQUEST__REQUEST_ALLOC;
	req.alloc = &alloc;
	r = call(c, &req, FTVM__CLIENT__CLIENT_REPLY__REPLY_ALLOC, &reply);
	if (r < 0)
		return r;
	r = copy_guid(c, info.guid, reply->alloc->guid);
	if (r < 0)
		goto out;
	info.pages = reply->alloc->pages;
	info.block_size = reply->alloc->block_size;
	*ret = info;
out:
	ftvm__client__client_reply__free_unpacked(reply, NULL);
	return r;
}

static int write_page(struct ftvm_client *c, const char *guid, uint64_t page, const void *data,
		      size_t len, bool wait, uint32_t *ret_crc32c)
{
	Ftvm__Client__WritePageRequest write = FTVM__CLIENT__WRITE_PAGE_REQUEST__INIT;
	Request req = FTVM__CLIENT__CLIENT_REQUEST__INIT;
	Reply *reply = NULL;
	int r;

	r = check_guid(c, guid);
	if (r < 0)
		return r;
	if (len > 0 && !data)
		return fail(c, -EINVAL, "data of %zu bytes for %s page %" PRIu64 " given as NULL",
			    len, guid, page);

	write.guid = (char *)guid;
	write.page = page;
	write.data.data = (uint8_t *)data;
	write.data.len = len;
	write.wait = wait;
	req.request_case = FTVM__CLIENT__CLIENT_REQUEST__REQUEST_WRITE_PAGE;
	req.write_page = &write;
	r = call(c, &req, FTVM__CLIENT__CLIENT_REPLY__REPLY_WRITE_PAGE, &reply);
	if (r < 0)
		return r;
	if (ret_crc32c)
		*ret_crc32c = reply->write_page->crc32c;
	ftvm__client__client_reply__free_unpacked(reply, NULL);
	return 0;
}

int ftvm_write_page(struct ftvm_client *c, const char *guid, uint64_t page, const void *data,
		    size_t len, uint32_t *ret_crc32c)
{
	return write_page(c, guid, page, data, len, true, ret_crc32c);
}

int ftvm_write_page_try(struct ftvm_client *c, const char *guid, uint64_t page, const void *data,
			size_t len, uint32_t *ret_crc32c)
{
	return write_page(c, guid, page, data, len, false, ret_crc32c);
}

static int read_page(struct ftvm_client *c, const char *guid, uint64_t page, void *buf,
		     size_t buf_len, bool wait, size_t *ret_len, uint32_t *ret_crc32c)
{
	Ftvm__Client__ReadPageRequest read = FTVM__CLIENT__READ_PAGE_REQUEST__INIT;
	Request req = FTVM__CLIENT__CLIENT_REQUEST__INIT;
	const Ftvm__Client__ReadPageReply *rp;
	Reply *reply = NULL;
	uint32_t crc;
	int r;

	r = check_guid(c, guid);
	if (r < 0)
		return r;
	if (buf_len > 0 && !buf)
		return fail(c, -EINVAL, "a %zu byte buffer given as NULL", buf_len);

	read.guid = (char *)guid;
	read.page = page;
	read.wait = wait;
	req.request_case = FTVM__CLIENT__CLIENT_REQUEST__REQUEST_READ_PAGE;
	req.read_page = &read;
	r = call(c, &req, FTVM__CLIENT__CLIENT_REPLY__REPLY_READ_PAGE, &reply);
	if (r < 0)
		return r;
	rp = reply->read_page;
	/* End to end: the node checksummed the block under its read lock. */
	crc = crc32c(0, rp->data.data, rp->data.len);
	if (crc != rp->crc32c) {
		r = fail(c, -EBADMSG,
			 "%s page %" PRIu64 ": the %zu bytes received have crc32c 0x%08x, the node "
			 "said 0x%08x",
			 guid, page, rp->data.len, crc, rp->crc32c);
		goto out;
	}
	if (ret_len)
		*ret_len = rp->data.len;
	if (rp->data.len > buf_len) {
		r = fail(c, -ENOBUFS,
			 "%s page %" PRIu64 " is %zu bytes, more than the %zu byte buffer", guid,
			 page, rp->data.len, buf_len);
		goto out;
	}
	if (rp->data.len > 0)
		memcpy(buf, rp->data.data, rp->data.len);
	if (ret_crc32c)
		*ret_crc32c = rp->crc32c;
out:
	ftvm__client__client_reply__free_unpacked(reply, NULL);
	return r;
}

int ftvm_read_page(struct ftvm_client *c, const char *guid, uint64_t page, void *buf,
		   size_t buf_len, size_t *ret_len, uint32_t *ret_crc32c)
{
	return read_page(c, guid, page, buf, buf_len, true, ret_len, ret_crc32c);
}

int ftvm_read_page_try(struct ftvm_client *c, const char *guid, uint64_t page, void *buf,
		       size_t buf_len, size_t *ret_len, uint32_t *ret_crc32c)
{
	return read_page(c, guid, page, buf, buf_len, false, ret_len, ret_crc32c);
}

int ftvm_header(struct ftvm_client *c, const char *guid, struct ftvm_header *ret)
{
	Ftvm__Client__HeaderRequest header = FTVM__CLIENT__HEADER_REQUEST__INIT;
	Request req = FTVM__CLIENT__CLIENT_REQUEST__INIT;
	Reply *reply = NULL;
	int r;

	r = check_guid(c, guid);
	if (r < 0)
		return r;
	if (!ret)
		return fail(c, -EINVAL, "no place for the result");

	header.guid = (char *)guid;
	req.request_case = FTVM__CLIENT__CLIENT_REQUEST__REQUEST_HEADER;
	req.header = &header;
	r = call(c, &req, FTVM__CLIENT__CLIENT_REPLY__REPLY_HEADER, &reply);
	if (r < 0)
		return r;
	r = header_from_reply(c, reply->header, ret);
	ftvm__client__client_reply__free_unpacked(reply, NULL);
	return r;
}

int ftvm_free(struct ftvm_client *c, const char *guid)
{
	Ftvm__Client__FreeRequest free_req = FTVM__CLIENT__FREE_REQUEST__INIT;
	Request req = FTVM__CLIENT__CLIENT_REQUEST__INIT;
	Reply *reply = NULL;
	int r;

	r = check_guid(c, guid);
	if (r < 0)
		return r;

	free_req.guid = (char *)guid;
	req.request_case = FTVM__CLIENT__CLIENT_REQUEST__REQUEST_FREE;
	req.free = &free_req;
	/* ClientReply has no member for it: status OK is the answer. */
	r = call(c, &req, FTVM__CLIENT__CLIENT_REPLY__REPLY__NOT_SET, &reply);
	if (r < 0)
		return r;
	ftvm__client__client_reply__free_unpacked(reply, NULL);
	return 0;
}

int ftvm_drill_cut_link(struct ftvm_client *c, uint32_t ms)
{
	Ftvm__Client__CutLinkRequest cut = FTVM__CLIENT__CUT_LINK_REQUEST__INIT;
	Request req = FTVM__CLIENT__CLIENT_REQUEST__INIT;
	Reply *reply = NULL;
	int r;

	cut.ms = ms;
	req.request_case = FTVM__CLIENT__CLIENT_REQUEST__REQUEST_CUT_LINK;
	req.cut_link = &cut;
	r = call(c, &req, FTVM__CLIENT__CLIENT_REPLY__REPLY__NOT_SET, &reply);
	if (r < 0)
		return r;
	ftvm__client__client_reply__free_unpacked(reply, NULL);
	return 0;
}

int ftvm_failback(struct ftvm_client *c, uint64_t *ret_handed_back, uint64_t *ret_busy)
{
	Ftvm__Client__FailbackRequest fb = FTVM__CLIENT__FAILBACK_REQUEST__INIT;
	Request req = FTVM__CLIENT__CLIENT_REQUEST__INIT;
	Reply *reply = NULL;
	int r;

	req.request_case = FTVM__CLIENT__CLIENT_REQUEST__REQUEST_FAILBACK;
	req.failback = &fb;
	r = call(c, &req, FTVM__CLIENT__CLIENT_REPLY__REPLY_FAILBACK, &reply);
	if (r < 0)
		return r;
	if (ret_handed_back)
		*ret_handed_back = reply->failback->handed_back;
	if (ret_busy)
		*ret_busy = reply->failback->busy;
	ftvm__client__client_reply__free_unpacked(reply, NULL);
	return 0;
}

int ftvm_list(struct ftvm_client *c, struct ftvm_header **ret, size_t *ret_n)
{
	Ftvm__Client__ListRequest list = FTVM__CLIENT__LIST_REQUEST__INIT;
	Request req = FTVM__CLIENT__CLIENT_REQUEST__INIT;
	struct ftvm_header *headers = NULL;
	const Ftvm__Client__ListReply *lr;
	Reply *reply = NULL;
	size_t i;
	int r;

	if (!c)
		return -EINVAL;
	if (!ret || !ret_n)
		return fail(c, -EINVAL, "no place for the result");

	req.request_case = FTVM__CLIENT__CLIENT_REQUEST__REQUEST_LIST;
	req.list = &list;
	r = call(c, &req, FTVM__CLIENT__CLIENT_REPLY__REPLY_LIST, &reply);
	if (r < 0)
		return r;
	lr = reply->list;
	if (lr->n_allocations > 0) {
		headers = calloc(lr->n_allocations, sizeof(*headers));
		if (!headers) {
			r = fail(c, -ENOMEM, "out of memory for %zu allocations",
				 lr->n_allocations);
			goto out;
		}
	}
	for (i = 0; i < lr->n_allocations; i++) {
		r = header_from_reply(c, lr->allocations[i], &headers[i]);
		if (r < 0)
			goto out;
	}
	*ret = headers;
	*ret_n = lr->n_allocations;
	headers = NULL;
out:
	free(headers);
	ftvm__client__client_reply__free_unpacked(reply, NULL);
	return r;
}

int ftvm_sense(struct ftvm_client *c, struct ftvm_sense *ret)
{
	Ftvm__Client__SenseRequest sense = FTVM__CLIENT__SENSE_REQUEST__INIT;
	Request req = FTVM__CLIENT__CLIENT_REQUEST__INIT;
	const Ftvm__Partner__SenseInformation *si;
	Reply *reply = NULL;
	size_t i;
	int r;

	if (!c)
		return -EINVAL;
	if (!ret)
		return fail(c, -EINVAL, "no place for the result");

	req.request_case = FTVM__CLIENT__CLIENT_REQUEST__REQUEST_SENSE;
	req.sense = &sense;
	r = call(c, &req, FTVM__CLIENT__CLIENT_REPLY__REPLY_SENSE, &reply);
	if (r < 0)
		return r;
	si = reply->sense;
	memset(ret, 0, sizeof(*ret));
	for (i = 0; i < si->n_media && i < sizeof(ret->media) / sizeof(ret->media[0]); i++) {
		copy_str(ret->media[i].type, sizeof(ret->media[i].type), si->media[i]->type);
		ret->media[i].capacity = si->media[i]->capacity;
		ret->media[i].free = si->media[i]->free;
	}
	ret->n_media = i;
	ret->paging_queue = si->paging_queue;
	ret->destage_queue = si->destage_queue;
	ret->replacement_queue = si->replacement_queue;
	ftvm__client__client_reply__free_unpacked(reply, NULL);
	return 0;
}

void ftvm_verify_free(struct ftvm_verify *v)
{
	size_t i;

	if (!v)
		return;
	for (i = 0; i < v->n_differences; i++)
		free(v->differences[i]);
	free(v->differences);
	memset(v, 0, sizeof(*v));
}

int ftvm_verify(struct ftvm_client *c, struct ftvm_verify *ret)
{
	Ftvm__Client__VerifyRequest verify = FTVM__CLIENT__VERIFY_REQUEST__INIT;
	Request req = FTVM__CLIENT__CLIENT_REQUEST__INIT;
	const Ftvm__Client__VerifyReply *vr;
	struct ftvm_verify v = { 0 };
	Reply *reply = NULL;
	int r;

	if (ret)
		memset(ret, 0, sizeof(*ret));
	if (!c)
		return -EINVAL;
	if (!ret)
		return fail(c, -EINVAL, "no place for the result");

	req.request_case = FTVM__CLIENT__CLIENT_REQUEST__REQUEST_VERIFY;
	req.verify = &verify;
	r = call(c, &req, FTVM__CLIENT__CLIENT_REPLY__REPLY_VERIFY, &reply);
	if (r < 0)
		return r;
	vr = reply->verify;
	v.equal = vr->equal;
	v.allocations = vr->allocations;
	v.pages = vr->pages;
	if (vr->n_differences > 0) {
		v.differences = calloc(vr->n_differences, sizeof(*v.differences));
		if (!v.differences) {
			r = fail(c, -ENOMEM, "out of memory for %zu differences",
				 vr->n_differences);
			goto out;
		}
	}
	for (; v.n_differences < vr->n_differences; v.n_differences++) {
		v.differences[v.n_differences] = strdup(vr->differences[v.n_differences]);
		if (!v.differences[v.n_differences]) {
			r = fail(c, -ENOMEM, "out of memory for %zu differences",
				 vr->n_differences);
			goto out;
		}
	}
	*ret = v;
	memset(&v, 0, sizeof(v));
out:
	ftvm_verify_free(&v);
	ftvm__client__client_reply__free_unpacked(reply, NULL);
	return r;
}

/* ---- pointers into the node's frame pool ---- */

/* Maps the pool once per client: the node passes its memfd with the reply
 * to a MapRequest. */
static int ensure_mapped(struct ftvm_client *c)
{
	Ftvm__Client__MapRequest map = FTVM__CLIENT__MAP_REQUEST__INIT;
	Request req = FTVM__CLIENT__CLIENT_REQUEST__INIT;
	Reply *reply = NULL;
	void *pool;
	int r, fd;

	pthread_mutex_lock(&c->map_lock);
	if (c->pool) {
		pthread_mutex_unlock(&c->map_lock);
		return 0;
	}
	req.request_case = FTVM__CLIENT__CLIENT_REQUEST__REQUEST_MAP;
	req.map = &map;
	r = call(c, &req, FTVM__CLIENT__CLIENT_REPLY__REPLY_MAP, &reply);
	if (r < 0)
		goto out;
	pthread_mutex_lock(&c->lock);
	fd = c->received_fd;
	c->received_fd = -1;
	pthread_mutex_unlock(&c->lock);
	if (fd < 0) {
		r = fail(c, -EBADMSG, "the node sent no frame pool descriptor");
		goto out;
	}
	pool = mmap(NULL, reply->map->size, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
	close(fd);
	if (pool == MAP_FAILED) {
		r = fail(c, -errno, "cannot map the node's frame pool (%" PRIu64 " bytes): %s",
			 reply->map->size, strerror(errno));
		goto out;
	}
	c->pool = pool;
	c->pool_size = reply->map->size;
out:
	pthread_mutex_unlock(&c->map_lock);
	if (reply)
		ftvm__client__client_reply__free_unpacked(reply, NULL);
	return r;
}

static int get_pointer(struct ftvm_client *c, const char *guid, uint64_t page, bool write,
		       bool wait, void **ret, size_t *ret_len)
{
	Ftvm__Client__GetPointerRequest get = FTVM__CLIENT__GET_POINTER_REQUEST__INIT;
	Request req = FTVM__CLIENT__CLIENT_REQUEST__INIT;
	Reply *reply = NULL;
	int r;

	if (!c || !ret)
		return -EINVAL;
	r = check_guid(c, guid);
	if (r < 0)
		return r;
	r = ensure_mapped(c);
	if (r < 0)
		return r;
	get.guid = (char *)guid;
	get.page = page;
	get.write = write;
	get.wait = wait;
	req.request_case = FTVM__CLIENT__CLIENT_REQUEST__REQUEST_GET_POINTER;
	req.get_pointer = &get;
	r = call(c, &req, FTVM__CLIENT__CLIENT_REPLY__REPLY_POINTER, &reply);
	if (r < 0)
		return r;
	if (reply->pointer->offset > c->pool_size ||
	    reply->pointer->length > c->pool_size - reply->pointer->offset) {
		r = fail(c, -EBADMSG, "the node's pointer (%" PRIu64 " + %u) is outside its pool",
			 reply->pointer->offset, reply->pointer->length);
	} else {
		*ret = c->pool + reply->pointer->offset;
		if (ret_len)
			*ret_len = reply->pointer->length;
	}
	ftvm__client__client_reply__free_unpacked(reply, NULL);
	return r;
}

int ftvm_get_read_pointer(struct ftvm_client *c, const char *guid, uint64_t page, bool wait,
			  const void **ret, size_t *ret_len)
{
	return get_pointer(c, guid, page, false, wait, (void **)ret, ret_len);
}

int ftvm_get_write_pointer(struct ftvm_client *c, const char *guid, uint64_t page, bool wait,
			   void **ret, size_t *ret_len)
{
	return get_pointer(c, guid, page, true, wait, ret, ret_len);
}

int ftvm_release_pointer(struct ftvm_client *c, const char *guid, uint64_t page, bool modified,
			 uint32_t *ret_crc32c)
{
	Ftvm__Client__ReleasePointerRequest rel = FTVM__CLIENT__RELEASE_POINTER_REQUEST__INIT;
	Request req = FTVM__CLIENT__CLIENT_REQUEST__INIT;
	Reply *reply = NULL;
	int r;

	r = check_guid(c, guid);
	if (r < 0)
		return r;
	rel.guid = (char *)guid;
	rel.page = page;
	rel.modified = modified;
	req.request_case = FTVM__CLIENT__CLIENT_REQUEST__REQUEST_RELEASE_POINTER;
	req.release_pointer = &rel;
	r = call(c, &req, FTVM__CLIENT__CLIENT_REPLY__REPLY_RELEASE_POINTER, &reply);
	if (r < 0)
		return r;
	if (ret_crc32c)
		*ret_crc32c = reply->release_pointer->crc32c;
	ftvm__client__client_reply__free_unpacked(reply, NULL);
	return 0;
}
