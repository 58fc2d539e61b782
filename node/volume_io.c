/* Block requests on volumes as page requests (volume_io.h; node/NBD.md).
 *
 * A request (struct block_op) is cut into pieces, one per page it touches
 * (struct piece), OP_PIECES at a time: the next are cut as earlier ones
 * end, so that a TRIM of a whole volume holds little memory. A FLUSH is one
 * piece. A piece's
 * answer comes through its call's reply callback, which may run inside the
 * memory manager (even inside the call that asked): it only copies what the
 * reply says and queues the piece. The queue is worked from an event of its
 * own, where a piece goes on (a partial write's release after its pointer)
 * or counts as done; the request is answered when its last piece is, and a
 * FUA request asks a flush of its pages first.
 *
 * At most PIECES_ASKING pieces are asked at a time, the rest wait their
 * turn in order: a 4 MiB request is a thousand pages, and the memory
 * manager's paging queue is not meant for a hundred thousand waiters.
 *
 * Read-ahead (node/NBD.md, "Read-ahead"), per connection: a READ that
 * starts where the last one ended is sequential, and the pages past it are
 * staged ahead, a window that starts at READ_AHEAD_FIRST pages and doubles
 * with each sequential READ up to READ_AHEAD_MAX; any other READ closes the
 * window (random access stages nothing).
 *
 * A partial page is read, modified and written under a write pointer: the
 * bytes go into its frames, whose address is the pool's base plus the
 * pointer's offset, and the release mirrors the page. */
#define LOG_SUBSYSTEM "nbd"

#include "volume_io.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <event2/event.h>

#include "client_server.h"
#include "log.h"
#include "vmm.h"

#define PIECES_ASKING 256
#define OP_PIECES 64 /* a request's pieces cut and not done */
#define READ_AHEAD_FIRST 4
#define READ_AHEAD_MAX 64

struct volume_io {
	struct vmm *vmm; /* NULL once it is gone: nothing more is asked of it */
	uid_t uid;	 /* the daemon's, which its page requests act for */
	struct event *work;
	struct piece *queue, **queue_tail;     /* answered, to work on */
	struct piece *waiting, **waiting_tail; /* not asked yet, in order */
	unsigned asking;		       /* pieces asked and not done */
};

/* An export open on one connection. */
struct volume_export {
	struct volume_io *vio;
	char name[65];
	struct vmm_volume_info info;
	uint64_t client_id; /* the connection's, inside the node */
	/* Read-ahead: where a sequential READ would start, the window in
	 * pages (0: closed), and the first page not staged ahead yet. */
	uint64_t ra_expect;
	uint32_t ra_window;
	uint64_t ra_next;
};

enum piece_step {
	STEP_READ,    /* ReadPageRequest */
	STEP_WRITE,   /* WritePageRequest: a whole page (or zeroes) */
	STEP_POINTER, /* GetPointerRequest for part of a page... */
	STEP_RELEASE, /* ...then ReleasePointerRequest, modified */
	STEP_FLUSH,   /* FlushRequest */
};

struct block_op {
	struct volume_export *ex;
	struct nbd_io *io;
	uint64_t cursor; /* the first byte not cut yet */
	unsigned pending;
	int err;
	bool flushed; /* a FUA request's flush was asked */
};

struct piece {
	struct piece *next; /* in the work queue */
	struct block_op *op;
	enum piece_step step;
	uint64_t page;
	uint32_t at, len;   /* the slice of the page */
	const uint8_t *src; /* a write's bytes (NULL: zeroes) */
	uint8_t *dst;	    /* a read's */
	bool go_on;	    /* the pointer came: its release is next */
	int status;	    /* the reply's, Ftvm__Partner__Status */
	char reason[160];
	Ftvm__Client__ClientRequest req;
	union {
		Ftvm__Client__ReadPageRequest read;
		Ftvm__Client__WritePageRequest write;
		Ftvm__Client__GetPointerRequest get;
		Ftvm__Client__ReleasePointerRequest release;
		Ftvm__Client__FlushRequest flush;
	} m;
};

static int errno_of(int status)
{
	switch (status) {
	case FTVM__PARTNER__STATUS__STATUS_OK:
		return 0;
	case FTVM__PARTNER__STATUS__STATUS_NO_SPACE:
		return -ENOSPC;
	case FTVM__PARTNER__STATUS__STATUS_BAD_REQUEST:
		return -EINVAL;
	case FTVM__PARTNER__STATUS__STATUS_DENIED:
		return -EPERM;
	case FTVM__PARTNER__STATUS__STATUS_SHUTTING_DOWN:
	case FTVM__PARTNER__STATUS__STATUS_FENCED:
		return -ESHUTDOWN;
	default:
		return -EIO;
	}
}

static void queue(struct volume_io *vio, struct piece *pc)
{
	pc->next = NULL;
	*vio->queue_tail = pc;
	vio->queue_tail = &pc->next;
	event_active(vio->work, 0, 0);
}

/* The reply to a piece's call: what it says is kept, the rest is the work
 * queue's. */
static void on_reply(const Ftvm__Client__ClientReply *reply, void *arg)
{
	struct piece *pc = arg;
	struct volume_io *vio = pc->op->ex->vio;
	uint8_t *frames;

	pc->status = reply->status;
	if (reply->status) {
		snprintf(pc->reason, sizeof(pc->reason), "%s", reply->reason ? reply->reason : "");
	} else if (pc->step == STEP_READ && reply->read_page &&
		   reply->read_page->data.len >= pc->at + pc->len) {
		memcpy(pc->dst, reply->read_page->data.data + pc->at, pc->len);
	} else if (pc->step == STEP_POINTER && reply->pointer && vio->vmm &&
		   reply->pointer->length >= pc->at + pc->len) {
		frames = (uint8_t *)vmm_pool_base(vio->vmm) + reply->pointer->offset;
		if (pc->src)
			memcpy(frames + pc->at, pc->src, pc->len);
		else
			memset(frames + pc->at, 0, pc->len);
		pc->go_on = true;
	} else if (pc->step == STEP_READ || pc->step == STEP_POINTER) {
		pc->status = FTVM__PARTNER__STATUS__STATUS_INTERNAL;
		snprintf(pc->reason, sizeof(pc->reason), "a reply without what it was asked");
	}
	queue(vio, pc);
}

/* Asks pc's request of the memory manager, as its step says. */
static void ask(struct piece *pc)
{
	struct volume_export *ex = pc->op->ex;
	struct client_call *call;

	ftvm__client__client_request__init(&pc->req);
	switch (pc->step) {
	case STEP_READ:
		ftvm__client__read_page_request__init(&pc->m.read);
		pc->m.read.guid = ex->info.guid;
		pc->m.read.page = pc->page;
		pc->m.read.wait = true;
		pc->req.request_case = FTVM__CLIENT__CLIENT_REQUEST__REQUEST_READ_PAGE;
		pc->req.read_page = &pc->m.read;
		break;
	case STEP_WRITE:
		ftvm__client__write_page_request__init(&pc->m.write);
		pc->m.write.guid = ex->info.guid;
		pc->m.write.page = pc->page;
		pc->m.write.data.data = (uint8_t *)pc->src;
		pc->m.write.data.len = pc->src ? pc->len : 0; /* none: a zeroed block */
		pc->m.write.wait = true;
		pc->req.request_case = FTVM__CLIENT__CLIENT_REQUEST__REQUEST_WRITE_PAGE;
		pc->req.write_page = &pc->m.write;
		break;
	case STEP_POINTER:
		ftvm__client__get_pointer_request__init(&pc->m.get);
		pc->m.get.guid = ex->info.guid;
		pc->m.get.page = pc->page;
		pc->m.get.write = true;
		pc->m.get.wait = true;
		pc->req.request_case = FTVM__CLIENT__CLIENT_REQUEST__REQUEST_GET_POINTER;
		pc->req.get_pointer = &pc->m.get;
		break;
	case STEP_RELEASE:
		ftvm__client__release_pointer_request__init(&pc->m.release);
		pc->m.release.guid = ex->info.guid;
		pc->m.release.page = pc->page;
		pc->m.release.modified = true;
		pc->req.request_case = FTVM__CLIENT__CLIENT_REQUEST__REQUEST_RELEASE_POINTER;
		pc->req.release_pointer = &pc->m.release;
		break;
	case STEP_FLUSH:
		ftvm__client__flush_request__init(&pc->m.flush);
		pc->m.flush.guid = ex->info.guid;
		pc->m.flush.first_page = pc->page;
		pc->m.flush.pages = pc->len;
		pc->req.request_case = FTVM__CLIENT__CLIENT_REQUEST__REQUEST_FLUSH;
		pc->req.flush = &pc->m.flush;
		break;
	}
	call = ex->vio->vmm ? client_call_new_internal(ex->client_id, ex->vio->uid, &pc->req,
						       on_reply, pc)
			    : NULL;
	if (!call) {
		pc->status = FTVM__PARTNER__STATUS__STATUS_SHUTTING_DOWN;
		snprintf(pc->reason, sizeof(pc->reason), "%s",
			 ex->vio->vmm ? "out of memory" : "the node is stopping");
		queue(ex->vio, pc);
		return;
	}
	vmm_client_request(ex->vio->vmm, call, &pc->req);
}

/* Asks the pieces waiting, while fewer than PIECES_ASKING are asked. */
static void pump(struct volume_io *vio)
{
	while (vio->waiting && vio->asking < PIECES_ASKING) {
		struct piece *pc = vio->waiting;

		vio->waiting = pc->next;
		if (!vio->waiting)
			vio->waiting_tail = &vio->waiting;
		vio->asking++;
		ask(pc);
	}
}

static void add_piece(struct block_op *op, enum piece_step step, uint64_t page, uint32_t at,
		      uint32_t len, const uint8_t *src, uint8_t *dst)
{
	struct volume_io *vio = op->ex->vio;
	struct piece *pc = calloc(1, sizeof(*pc));

	if (!pc) {
		if (!op->err)
			op->err = -ENOMEM;
		return;
	}
	pc->op = op;
	pc->step = step;
	pc->page = page;
	pc->at = at;
	pc->len = len;
	pc->src = src;
	pc->dst = dst;
	op->pending++;
	*vio->waiting_tail = pc;
	vio->waiting_tail = &pc->next;
	pump(vio);
}

/* The next pieces of op's request, while fewer than OP_PIECES are not
 * done; each counts in op->pending. */
static void cut(struct block_op *op)
{
	const struct nbd_request *r = &op->io->req;
	uint32_t page_size = op->ex->info.block_size;
	bool whole, zero = r->type == NBD_CMD_WRITE_ZEROES || r->type == NBD_CMD_TRIM;
	uint64_t at = op->cursor, end = r->offset + r->length;

	if (r->type == NBD_CMD_FLUSH) {
		if (!op->flushed) {
			op->flushed = true; /* its one piece, cut */
			add_piece(op, STEP_FLUSH, 0, 0, 0, NULL, NULL);
		}
		return;
	}
	for (; at < end && op->pending < OP_PIECES + 1; op->cursor = at) {
		uint64_t page = at / page_size;
		uint32_t in = (uint32_t)(at % page_size);
		uint32_t len = (uint32_t)(end - at < page_size - in ? end - at : page_size - in);
		size_t off = (size_t)(at - r->offset);

		whole = in == 0 && len == page_size;
		if (r->type == NBD_CMD_READ)
			add_piece(op, STEP_READ, page, in, len, NULL, op->io->data + off);
		else if (whole)
			add_piece(op, STEP_WRITE, page, 0, len, zero ? NULL : op->io->data + off,
				  NULL);
		else if (r->type != NBD_CMD_TRIM) /* part of a page: a trim's hint is dropped */
			add_piece(op, STEP_POINTER, page, in, len, zero ? NULL : op->io->data + off,
				  NULL);
		at += len;
	}
}

static bool wants_flush(const struct nbd_request *r)
{
	return (r->flags & NBD_CMD_FLAG_FUA) && r->type != NBD_CMD_READ && r->type != NBD_CMD_FLUSH;
}

/* op's pieces are done: a FUA request flushes its pages first. */
static void op_done(struct block_op *op)
{
	const struct nbd_request *r = &op->io->req;
	uint32_t page_size = op->ex->info.block_size;

	if (op->err == 0 && wants_flush(r) && !op->flushed) {
		uint64_t first = r->offset / page_size;
		uint64_t last = (r->offset + r->length - 1) / page_size;

		op->flushed = true;
		add_piece(op, STEP_FLUSH, first, 0, (uint32_t)(last - first + 1), NULL, NULL);
		if (op->pending)
			return;
	}
	nbd_io_done(op->io, op->err);
	free(op);
}

static void piece_done(struct piece *pc)
{
	struct block_op *op = pc->op;
	struct volume_io *vio = op->ex->vio;
	int err = errno_of(pc->status);

	if (err && !op->err) {
		op->err = err;
		log_warning("volume %s (%s): %s of %u bytes at %llu failed: page %llu: %s",
			    op->ex->name, op->ex->info.guid, nbd_cmd_name(op->io->req.type),
			    op->io->req.length, (unsigned long long)op->io->req.offset,
			    (unsigned long long)pc->page, pc->reason);
	}
	free(pc);
	vio->asking--;
	op->pending--;
	if (!op->err)
		cut(op);
	if (op->pending == 0)
		op_done(op);
	pump(vio);
}

static void work(evutil_socket_t fd, short what, void *arg)
{
	struct volume_io *vio = arg;

	while (vio->queue) {
		struct piece *pc = vio->queue;

		vio->queue = pc->next;
		if (!vio->queue)
			vio->queue_tail = &vio->queue;
		if (pc->go_on) {
			pc->go_on = false;
			pc->step = STEP_RELEASE;
			ask(pc);
		} else {
			piece_done(pc);
		}
	}
}

/* A READ on ex: the window follows the pattern, and what lies in it ahead
 * of the READ is staged. */
static void read_ahead(struct volume_export *ex, const struct nbd_request *r)
{
	uint32_t page_size = ex->info.block_size;
	uint64_t end = r->offset + r->length, after = (end + page_size - 1) / page_size, from;

	if (r->offset != ex->ra_expect) {
		ex->ra_window = 0;
		ex->ra_next = 0;
	} else {
		ex->ra_window = ex->ra_window ? ex->ra_window * 2 : READ_AHEAD_FIRST;
		if (ex->ra_window > READ_AHEAD_MAX)
			ex->ra_window = READ_AHEAD_MAX;
	}
	ex->ra_expect = end;
	if (!ex->ra_window || !ex->vio->vmm)
		return;
	from = ex->ra_next > after ? ex->ra_next : after;
	if (from < after + ex->ra_window)
		vmm_volume_read_ahead(ex->vio->vmm, ex->info.guid, from,
				      after + ex->ra_window - from);
	ex->ra_next = after + ex->ra_window;
}

static void submit(void *arg, void *export, struct nbd_io *io)
{
	struct block_op *op = calloc(1, sizeof(*op));

	if (!op) {
		nbd_io_done(io, -ENOMEM);
		return;
	}
	op->ex = export;
	op->io = io;
	op->cursor = io->req.offset;
	op->pending = 1; /* until the first pieces are cut */
	cut(op);
	if (io->req.type == NBD_CMD_READ)
		read_ahead(op->ex, &io->req);
	if (--op->pending == 0)
		op_done(op);
}

static int lookup(void *arg, const char *name, struct nbd_export *ret)
{
	struct volume_io *vio = arg;
	struct vmm_volume_info info;

	if (!vio->vmm)
		return -ESHUTDOWN;
	if (vmm_volume_info(vio->vmm, name, &info) < 0)
		return -ENOENT;
	*ret = (struct nbd_export){
		.size = info.size,
		.min_block = 1,
		.preferred_block = info.block_size,
		.max_block = NBD_SERVER_MAX_BLOCK,
		/* A flush waits for what any connection to either node wrote
		 * (node/NBD.md, "The write-back cache's contract"). */
		.multi_conn = true,
	};
	return 0;
}

struct list_ctx {
	void (*emit)(void *ctx, const char *name, const char *description);
	void *ctx;
};

static void list_one(void *ctx, const char *name)
{
	struct list_ctx *l = ctx;

	l->emit(l->ctx, name, NULL);
}

static void list(void *arg, void (*emit)(void *ctx, const char *name, const char *description),
		 void *ctx)
{
	struct volume_io *vio = arg;
	struct list_ctx l = { emit, ctx };

	if (vio->vmm)
		vmm_volume_names(vio->vmm, list_one, &l);
}

static int open_export(void *arg, const char *name, void **ret)
{
	struct volume_io *vio = arg;
	struct volume_export *ex;

	if (!vio->vmm)
		return -ESHUTDOWN;
	ex = calloc(1, sizeof(*ex));
	if (!ex)
		return -ENOMEM;
	if (vmm_volume_info(vio->vmm, name, &ex->info) < 0) {
		free(ex);
		return -ENOENT;
	}
	ex->vio = vio;
	snprintf(ex->name, sizeof(ex->name), "%s", name);
	ex->client_id = client_internal_id_new();
	*ret = ex;
	return 0;
}

static void close_export(void *arg, void *export)
{
	struct volume_export *ex = export;

	if (ex->vio->vmm) /* what it held (a pointer in a failed release) goes */
		vmm_client_gone(ex->vio->vmm, ex->client_id);
	free(ex);
}

const struct nbd_backend_ops volume_io_nbd_ops = {
	.lookup = lookup,
	.list = list,
	.open = open_export,
	.submit = submit,
	.close = close_export,
};

int volume_io_new(struct event_base *base, struct vmm *v, struct volume_io **ret)
{
	struct volume_io *vio = calloc(1, sizeof(*vio));

	if (!vio)
		return -ENOMEM;
	vio->vmm = v;
	vio->uid = geteuid();
	vio->queue_tail = &vio->queue;
	vio->waiting_tail = &vio->waiting;
	vio->work = event_new(base, -1, 0, work, vio);
	if (!vio->work) {
		free(vio);
		return -ENOMEM;
	}
	*ret = vio;
	return 0;
}

void volume_io_free(struct volume_io *vio)
{
	if (!vio)
		return;
	/* The last answers, which the memory manager gave as it went: their
	 * requests end, and nothing more is asked of it. */
	vio->vmm = NULL;
	work(-1, 0, vio);
	event_free(vio->work);
	free(vio);
}
