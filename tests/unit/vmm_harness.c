/* One memory manager over fakes, for the unit tests of its core:
 * vmm_harness.h says what it offers. */
#define _GNU_SOURCE
#include "vmm_harness.h"

#include <endian.h>
#include <errno.h>
#include <fcntl.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "check.h"
#include "client_server.h"
#include "config.h"
#include "crc32c.h"
#include "log.h"
#include "store.h"
#include "vmm.h"
#include "vmm_msg.h"

static __attribute__((noreturn, format(printf, 1, 2))) void setup_failed(const char *fmt, ...)
{
	va_list ap;

	fputs("ERROR ", stderr);
	va_start(ap, fmt);
	vfprintf(stderr, fmt, ap);
	va_end(ap);
	fputc('\n', stderr);
	exit(99);
}

static void write_file(const char *path, const char *text)
{
	FILE *f = fopen(path, "w");

	if (!f || fputs(text, f) < 0 || fclose(f) != 0)
		setup_failed("%s: %s", path, strerror(errno));
}

/* What the partner says of a's partition: a SpaceRequest's answer. */
static uint64_t partition_length(struct harness *h)
{
	Envelope env = FTVM__PARTNER__ENVELOPE__INIT;
	Ftvm__Partner__SpaceRequest m = FTVM__PARTNER__SPACE_REQUEST__INIT;
	const CommandComplete *cc;

	env.message_case = FTVM__PARTNER__ENVELOPE__MESSAGE_SPACE_REQUEST;
	env.space_request = &m;
	cc = harness_answer(h, harness_deliver(h, &env));
	if (!cc || cc->payload_case != FTVM__PARTNER__COMMAND_COMPLETE__PAYLOAD_SPACE)
		setup_failed("no answer to a SpaceRequest");
	return cc->space->total_bytes;
}

void harness_start(struct harness *h, const char *name, const char *memory, const char *store,
		   const char *policies)
{
	char path[512], text[2048], err[512];
	const char *debug = getenv("FTVM_TEST_DEBUG");
	int r;

	memset(h, 0, sizeof(*h));
	log_set_max_level(debug && *debug == '1' ? LOG_LEVEL_DEBUG : LOG_LEVEL_WARNING);
	scratch_dir_make(h->dir, sizeof(h->dir), name);
	snprintf(text, sizeof(text),
		 "[node]\nid = a\nstate_dir = .\n"
		 "[memory]\nsize = %s\npool_block_size = %s\n"
		 "[store]\npath = store\nsize = %s\n%s",
		 memory, memory, store, policies);
	snprintf(path, sizeof(path), "%s/a.conf", h->dir);
	write_file(path, text);
	if (config_load(path, &h->config, err, sizeof(err)) < 0)
		setup_failed("%s", err);
	h->base = event_base_new();
	if (!h->base)
		setup_failed("event_base_new");
	r = vmm_new(h->base, h->config, &h->v);
	if (r < 0)
		setup_failed("vmm_new: %s", strerror(-r));
	h->s = fake_session_new("a", "b");
	if (!h->s || vmm_set_session(h->v, h->s) < 0)
		setup_failed("the fake session");
	vmm_set_mode(h->v, VMM_MODE_MIRRORED, "linked (a unit test)");
	h->client = fake_client_new(1, 0, 4242, CLIENT_RIGHT_ADMIN | CLIENT_RIGHT_POINTERS);
	h->partition = partition_length(h);
}

unsigned harness_stop(struct harness *h)
{
	unsigned unanswered;

	/* As node.c at a stop: what waits for the partner fails while the vmm
	 * that asked is whole. */
	fake_session_fail_pending(h->s, FTVM__PARTNER__STATUS__STATUS_SHUTTING_DOWN,
				  "this node is stopping");
	vmm_free(h->v);
	unanswered = fake_client_unanswered(h->client);
	fake_client_free(h->client);
	fake_session_free(h->s);
	event_base_free(h->base);
	config_free(h->config);
	scratch_dir_remove(h->dir);
	return unanswered;
}

void harness_settle(struct harness *h)
{
	/* Callbacks made active in a turn run in the next: a few turns run a
	 * commit and what it lets go (answers, the paging queue). */
	for (int i = 0; i < 8; i++)
		event_base_loop(h->base, EVLOOP_NONBLOCK);
}

/* ---- client calls ---- */

/* Sends m, the request_case member of ClientRequest's oneof, as c. */
static struct fake_call *send_request(struct harness *h, struct fake_client *c, int request_case,
				      void *m)
{
	ClientRequest req = FTVM__CLIENT__CLIENT_REQUEST__INIT;

	req.request_case = request_case;
	req.alloc = m; /* the oneof's members share one union: any of them names m */
	return fake_client_send(c ? c : h->client, h->v, &req);
}

struct fake_call *harness_alloc_call(struct harness *h, uint64_t size, const char *policy,
				     bool immediate)
{
	Ftvm__Client__AllocRequest m = FTVM__CLIENT__ALLOC_REQUEST__INIT;

	m.size = size;
	m.policy = (char *)(policy ? policy : "");
	m.immediate = immediate;
	return send_request(h, NULL, FTVM__CLIENT__CLIENT_REQUEST__REQUEST_ALLOC, &m);
}

struct fake_call *harness_named_alloc_call(struct harness *h, uint64_t size, const char *name)
{
	Ftvm__Client__AllocRequest m = FTVM__CLIENT__ALLOC_REQUEST__INIT;

	m.size = size;
	m.client = (char *)name;
	return send_request(h, NULL, FTVM__CLIENT__CLIENT_REQUEST__REQUEST_ALLOC, &m);
}

struct fake_call *harness_session_alloc_call(struct harness *h, uint64_t size, const char *session)
{
	Ftvm__Client__AllocRequest m = FTVM__CLIENT__ALLOC_REQUEST__INIT;

	m.size = size;
	m.session = (char *)session;
	return send_request(h, NULL, FTVM__CLIENT__CLIENT_REQUEST__REQUEST_ALLOC, &m);
}

struct fake_call *harness_session_call(struct harness *h, const char *session)
{
	Ftvm__Client__SessionRequest m = FTVM__CLIENT__SESSION_REQUEST__INIT;

	m.session = (char *)session;
	return send_request(h, NULL, FTVM__CLIENT__CLIENT_REQUEST__REQUEST_SESSION, &m);
}

struct fake_call *harness_free_call(struct harness *h, const char *guid)
{
	Ftvm__Client__FreeRequest m = FTVM__CLIENT__FREE_REQUEST__INIT;

	m.guid = (char *)guid;
	return send_request(h, NULL, FTVM__CLIENT__CLIENT_REQUEST__REQUEST_FREE, &m);
}

struct fake_call *harness_flush_call(struct harness *h, const char *guid, uint64_t first_page,
				     uint64_t pages)
{
	Ftvm__Client__FlushRequest m = FTVM__CLIENT__FLUSH_REQUEST__INIT;

	m.guid = (char *)guid;
	m.first_page = first_page;
	m.pages = pages;
	return send_request(h, NULL, FTVM__CLIENT__CLIENT_REQUEST__REQUEST_FLUSH, &m);
}

struct fake_call *harness_pointer_call(struct harness *h, struct fake_client *c, const char *guid,
				       uint64_t page, bool write, bool wait)
{
	Ftvm__Client__GetPointerRequest m = FTVM__CLIENT__GET_POINTER_REQUEST__INIT;

	m.guid = (char *)guid;
	m.page = page;
	m.write = write;
	m.wait = wait;
	return send_request(h, c, FTVM__CLIENT__CLIENT_REQUEST__REQUEST_GET_POINTER, &m);
}

struct fake_call *harness_release_call(struct harness *h, struct fake_client *c, const char *guid,
				       uint64_t page, bool modified)
{
	Ftvm__Client__ReleasePointerRequest m = FTVM__CLIENT__RELEASE_POINTER_REQUEST__INIT;

	m.guid = (char *)guid;
	m.page = page;
	m.modified = modified;
	return send_request(h, c, FTVM__CLIENT__CLIENT_REQUEST__REQUEST_RELEASE_POINTER, &m);
}

struct fake_call *harness_write_call(struct harness *h, const char *guid, uint64_t page,
				     const void *data, size_t len, bool wait)
{
	Ftvm__Client__WritePageRequest m = FTVM__CLIENT__WRITE_PAGE_REQUEST__INIT;

	m.guid = (char *)guid;
	m.page = page;
	m.data.data = (uint8_t *)data;
	m.data.len = len;
	m.wait = wait;
	return send_request(h, NULL, FTVM__CLIENT__CLIENT_REQUEST__REQUEST_WRITE_PAGE, &m);
}

struct fake_call *harness_read_call(struct harness *h, const char *guid, uint64_t page, bool wait)
{
	Ftvm__Client__ReadPageRequest m = FTVM__CLIENT__READ_PAGE_REQUEST__INIT;

	m.guid = (char *)guid;
	m.page = page;
	m.wait = wait;
	return send_request(h, NULL, FTVM__CLIENT__CLIENT_REQUEST__REQUEST_READ_PAGE, &m);
}

struct fake_call *harness_header_call(struct harness *h, const char *guid)
{
	Ftvm__Client__HeaderRequest m = FTVM__CLIENT__HEADER_REQUEST__INIT;

	m.guid = (char *)guid;
	return send_request(h, NULL, FTVM__CLIENT__CLIENT_REQUEST__REQUEST_HEADER, &m);
}

struct fake_call *harness_pointer(struct harness *h, struct fake_client *c, const char *guid,
				  uint64_t page, bool write)
{
	struct fake_call *call = harness_pointer_call(h, c, guid, page, write, false);

	fake_session_answer_all(h->s);
	if (!RUN_UNTIL(h, call->answered) || harness_status(call) != 0 || !call->reply->pointer)
		setup_failed("%s pointer to %s page %llu: %s", write ? "write" : "read", guid,
			     (unsigned long long)page,
			     call->reply ? call->reply->reason : "no reply");
	return call;
}

int harness_status(const struct fake_call *call)
{
	return call->reply ? (int)call->reply->status : -1;
}

uint64_t harness_alloc(struct harness *h, uint64_t size, char *guid, size_t len)
{
	struct fake_call *call = harness_alloc_call(h, size, NULL, false);
	struct fake_request *space =
		fake_session_pending(h->s, FTVM__PARTNER__ENVELOPE__MESSAGE_SPACE_REQUEST);
	struct fake_request *am =
		fake_session_pending(h->s, FTVM__PARTNER__ENVELOPE__MESSAGE_ALLOCATE_MEMORY);
	uint64_t offset;

	if (!space || !am)
		setup_failed("allocation of %llu bytes: no [SpaceRequest, AllocateMemory] sent",
			     (unsigned long long)size);
	offset = am->env->allocate_memory->store_offset;
	fake_session_answer_status(h->s, space, FTVM__PARTNER__STATUS__STATUS_OK, NULL);
	fake_session_answer_status(h->s, am, FTVM__PARTNER__STATUS__STATUS_OK, NULL);
	if (!RUN_UNTIL(h, call->answered) || harness_status(call) != 0 || !call->reply->alloc)
		setup_failed("allocation of %llu bytes: %s", (unsigned long long)size,
			     call->reply ? call->reply->reason : "no reply");
	snprintf(guid, len, "%s", call->reply->alloc->guid);
	return offset;
}

void harness_partner_alloc(struct harness *h, const char *guid, uint64_t pages, uint64_t offset)
{
	Envelope env = FTVM__PARTNER__ENVELOPE__INIT;
	Ftvm__Partner__AllocateMemory m = FTVM__PARTNER__ALLOCATE_MEMORY__INIT;
	const CommandComplete *cc;

	m.guid = (char *)guid;
	m.size = pages * HARNESS_PAGE;
	m.block_size = HARNESS_PAGE;
	m.policy = "default";
	m.home = "b";
	m.store_offset = STORE_HEADER_SPACE + h->partition + offset;
	env.message_case = FTVM__PARTNER__ENVELOPE__MESSAGE_ALLOCATE_MEMORY;
	env.allocate_memory = &m;
	cc = harness_answer(h, harness_deliver(h, &env));
	if (!cc || cc->status != FTVM__PARTNER__STATUS__STATUS_OK)
		setup_failed("the partner's allocation %s: %s", guid,
			     cc ? cc->reason : "no answer");
}

/* ---- the partner's requests ---- */

uint64_t harness_deliver(struct harness *h, Envelope *env)
{
	fake_session_deliver(h->s, h->v, &env, 1);
	return env->seq;
}

const CommandComplete *harness_answer(struct harness *h, uint64_t seq)
{
	harness_settle(h);
	return fake_session_completion(h->s, seq);
}

/* ---- the page table on disk ---- */

bool harness_pt_alloc(struct harness *h, const char *guid, char *owner, size_t len)
{
	harness_settle(h);
	return vmm_peek_committed(h->v, guid, 0, owner, len, NULL);
}

bool harness_pt_page(struct harness *h, const char *guid, uint64_t page, struct pt_row *ret)
{
	harness_settle(h);
	return vmm_peek_committed(h->v, guid, page, NULL, 0, ret);
}

/* ---- the store ---- */

static void store_read(struct harness *h, void *buf, size_t len, uint64_t offset)
{
	int fd = open(h->config->store_path, O_RDONLY | O_CLOEXEC);

	if (fd < 0 || pread(fd, buf, len, (off_t)offset) != (ssize_t)len)
		setup_failed("%s: %s", h->config->store_path, strerror(errno));
	close(fd);
}

void harness_store_record(struct harness *h, uint64_t extent, uint64_t page, uint64_t *ret_version,
			  uint32_t *ret_crc)
{
	struct store_page_record rec;

	store_read(h, &rec, sizeof(rec), store_record_offset(extent, page));
	*ret_version = le64toh(rec.version);
	*ret_crc = le32toh(rec.crc32c);
}

void harness_store_block(struct harness *h, uint64_t extent, uint64_t pages, uint64_t page,
			 void *buf)
{
	store_read(h, buf, HARNESS_PAGE,
		   store_block_offset(extent, HARNESS_PAGE, pages, HARNESS_PAGE, page));
}

int harness_partner_writes(struct harness *h, const char *guid, uint64_t page, uint8_t byte,
			   uint64_t version)
{
	static uint8_t block[HARNESS_PAGE];
	struct vmm_msg msg[3];
	Envelope *envs[3];
	const CommandComplete *cc;
	uint32_t crc;

	memset(block, byte, sizeof(block));
	crc = crc32c(0, block, sizeof(block));
	envs[0] = vmm_msg_allocate(&msg[0], guid, page, "b/7/1", true, false);
	envs[1] = vmm_msg_write_page(&msg[1], guid, page, block, HARNESS_PAGE, crc);
	envs[2] = vmm_msg_release_pointer(&msg[2], guid, page, "b/7/1", true, version, crc);
	fake_session_deliver(h->s, h->v, envs, 3);
	harness_settle(h);
	for (int i = 0; i < 3; i++) {
		cc = fake_session_completion(h->s, envs[i]->seq);
		if (!cc || cc->status)
			return cc ? (int)cc->status : -1;
	}
	return 0;
}
