/* The client API server's calls faked for the memory manager's unit tests:
 * fake_client.h says what it does. */
#include "fake_client.h"

#include <stdio.h>
#include <stdlib.h>

#include "client_server.h"
#include "vmm.h"

struct fake_client {
	uint64_t id;
	uid_t uid;
	pid_t pid;
	unsigned rights;
	bool gone;
	uint64_t next_id;
	struct fake_call **calls;
	size_t n_calls;
};

/* What the vmm holds until it replies: client_call_reply frees it. A call
 * made inside the node has no client and replies to its maker's fn. */
struct client_call {
	struct fake_client *client;
	struct fake_call *slot;
	uint64_t internal_id;
	uid_t internal_uid;
	client_call_reply_fn reply_fn;
	void *reply_arg;
};

struct fake_client *fake_client_new(uint64_t id, uid_t uid, pid_t pid, unsigned rights)
{
	struct fake_client *c = calloc(1, sizeof(*c));

	if (!c)
		exit(99);
	c->id = id;
	c->uid = uid;
	c->pid = pid;
	c->rights = rights;
	return c;
}

void fake_client_free(struct fake_client *c)
{
	if (!c)
		return;
	for (size_t i = 0; i < c->n_calls; i++) {
		if (c->calls[i]->reply)
			ftvm__client__client_reply__free_unpacked(c->calls[i]->reply, NULL);
		free(c->calls[i]);
	}
	free(c->calls);
	free(c);
}

struct fake_call *fake_client_send(struct fake_client *c, struct vmm *v,
				   const Ftvm__Client__ClientRequest *req)
{
	struct client_call *call = calloc(1, sizeof(*call));
	struct fake_call *slot = calloc(1, sizeof(*slot));
	struct fake_call **calls = realloc(c->calls, (c->n_calls + 1) * sizeof(*calls));
	Ftvm__Client__ClientRequest copy = *req, *got;
	size_t len;
	uint8_t *buf;

	if (!call || !slot || !calls)
		exit(99);
	c->calls = calls;
	c->calls[c->n_calls++] = slot;
	slot->id = copy.id = ++c->next_id;
	call->client = c;
	call->slot = slot;
	/* As the server would hand it on: what the wire carries. */
	len = ftvm__client__client_request__get_packed_size(&copy);
	buf = malloc(len ? len : 1);
	if (!buf)
		exit(99);
	ftvm__client__client_request__pack(&copy, buf);
	got = ftvm__client__client_request__unpack(NULL, len, buf);
	free(buf);
	if (!got) {
		fprintf(stderr, "fake client: a request does not unpack\n");
		exit(99);
	}
	vmm_client_request(v, call, got);
	ftvm__client__client_request__free_unpacked(got, NULL);
	return slot;
}

void fake_client_close(struct fake_client *c, struct vmm *v)
{
	c->gone = true;
	vmm_client_gone(v, c->id);
}

unsigned fake_client_unanswered(const struct fake_client *c)
{
	unsigned n = 0;

	for (size_t i = 0; i < c->n_calls; i++)
		n += !c->calls[i]->answered;
	return n;
}

/* ---- node/client_server.h, as far as the memory manager calls it ---- */

struct client_call *client_call_new_internal(uint64_t client_id, uid_t uid,
					     const Ftvm__Client__ClientRequest *req,
					     client_call_reply_fn fn, void *arg)
{
	struct client_call *call = calloc(1, sizeof(*call));

	if (!call)
		exit(99);
	call->internal_id = client_id;
	call->internal_uid = uid;
	call->reply_fn = fn;
	call->reply_arg = arg;
	return call;
}

uint64_t client_internal_id_new(void)
{
	static uint64_t next = UINT64_C(1) << 62;

	return next++;
}

void client_call_reply(struct client_call *call, Ftvm__Client__ClientReply *reply)
{
	struct fake_call *slot = call->slot;
	size_t len;
	uint8_t *buf;

	if (!call->client) {
		call->reply_fn(reply, call->reply_arg);
		free(call);
		return;
	}
	reply->id = slot->id;
	slot->answered = true;
	if (!call->client->gone) {
		len = ftvm__client__client_reply__get_packed_size(reply);
		buf = malloc(len ? len : 1);
		if (!buf)
			exit(99);
		ftvm__client__client_reply__pack(reply, buf);
		slot->reply = ftvm__client__client_reply__unpack(NULL, len, buf);
		free(buf);
		if (!slot->reply) {
			fprintf(stderr, "fake client: a reply does not unpack\n");
			exit(99);
		}
	}
	free(call);
}

void client_call_reply_fd(struct client_call *call, Ftvm__Client__ClientReply *reply, int fd)
{
	if (call->slot)
		call->slot->had_fd = fd >= 0;
	client_call_reply(call, reply);
}

pid_t client_call_peer_pid(const struct client_call *call)
{
	return call->client ? call->client->pid : 1;
}

uid_t client_call_peer_uid(const struct client_call *call)
{
	return call->client ? call->client->uid : call->internal_uid;
}

bool client_call_may(const struct client_call *call, unsigned right)
{
	return !call->client || (call->client->rights & right) == right;
}

uint64_t client_call_client_id(const struct client_call *call)
{
	return call->client ? call->client->id : call->internal_id;
}

bool client_call_client_gone(const struct client_call *call)
{
	return call->client && call->client->gone;
}
