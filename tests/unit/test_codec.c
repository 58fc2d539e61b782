/* The partner codec: every Envelope message round-trips through a frame with
 * every field intact, and everything a broken or hostile peer could send is
 * refused with -EBADMSG and a reason, never a crash. */
#include <errno.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "check.h"
#include "codec.h"
#include "frame.h"
#include "pb_arena.h"
#include "pb_pieces.h"

#define PV_CURRENT FTVM__PARTNER__PROTOCOL_VERSION__PROTOCOL_VERSION_CURRENT
#define ARRAY_SIZE(a) (sizeof(a) / sizeof((a)[0]))

/* ---- Field comparisons, named by where the field sits ------------------ */

static void eq_u(const char *ctx, const char *field, uint64_t e, uint64_t g)
{
	if (e != g)
		FAIL("%s: %s: expected %llu (0x%llx), got %llu (0x%llx)", ctx, field,
		     (unsigned long long)e, (unsigned long long)e, (unsigned long long)g,
		     (unsigned long long)g);
}

static void eq_s(const char *ctx, const char *field, const char *e, const char *g)
{
	if (!g || strcmp(e, g) != 0)
		FAIL("%s: %s: expected \"%s\", got \"%s\"", ctx, field, e, g ? g : "(null)");
}

static void eq_b(const char *ctx, const char *field, ProtobufCBinaryData e, ProtobufCBinaryData g)
{
	if (e.len != g.len)
		FAIL("%s: %s: expected %zu bytes, got %zu", ctx, field, e.len, g.len);
	else if (e.len && memcmp(e.data, g.data, e.len) != 0)
		FAIL("%s: %s: the %zu bytes differ", ctx, field, e.len);
}

#define EQ_U(f) eq_u(ctx, #f, (uint64_t)e->f, (uint64_t)g->f)
#define EQ_S(f) eq_s(ctx, #f, e->f, g->f)
#define EQ_B(f) eq_b(ctx, #f, e->f, g->f)

/* "Every field set to a non-default value" is checked on what is sent, by
 * walking the descriptors, so a field added to partner.proto later fails
 * here until this test sets (and compares) it too. */
static void check_all_set(const char *path, const ProtobufCMessage *m)
{
	const ProtobufCMessageDescriptor *d = m->descriptor;

	for (unsigned i = 0; i < d->n_fields; i++) {
		const ProtobufCFieldDescriptor *f = &d->fields[i];
		const char *member = (const char *)m + f->offset;
		int unset = 0;

		if (f->flags & PROTOBUF_C_FIELD_FLAG_ONEOF) {
			uint32_t which;

			memcpy(&which, (const char *)m + f->quantifier_offset, sizeof(which));
			if (which != f->id)
				continue;
		}
		if (f->label == PROTOBUF_C_LABEL_REPEATED) {
			size_t n;

			memcpy(&n, (const char *)m + f->quantifier_offset, sizeof(n));
			if (n == 0)
				FAIL("%s.%s: the test sends it empty", path, f->name);
			if (f->type == PROTOBUF_C_TYPE_MESSAGE) {
				const ProtobufCMessage *const *elems;

				memcpy(&elems, member, sizeof(elems));
				for (size_t k = 0; k < n; k++)
					check_all_set(f->name, elems[k]);
			}
			continue;
		}
		switch (f->type) {
		case PROTOBUF_C_TYPE_INT32:
		case PROTOBUF_C_TYPE_SINT32:
		case PROTOBUF_C_TYPE_SFIXED32:
		case PROTOBUF_C_TYPE_UINT32:
		case PROTOBUF_C_TYPE_FIXED32:
		case PROTOBUF_C_TYPE_ENUM:
		case PROTOBUF_C_TYPE_BOOL:
		case PROTOBUF_C_TYPE_FLOAT: {
			uint32_t v;

			memcpy(&v, member, sizeof(v));
			unset = v == 0;
			break;
		}
		case PROTOBUF_C_TYPE_INT64:
		case PROTOBUF_C_TYPE_SINT64:
		case PROTOBUF_C_TYPE_SFIXED64:
		case PROTOBUF_C_TYPE_UINT64:
		case PROTOBUF_C_TYPE_FIXED64:
		case PROTOBUF_C_TYPE_DOUBLE: {
			uint64_t v;

			memcpy(&v, member, sizeof(v));
			unset = v == 0;
			break;
		}
		case PROTOBUF_C_TYPE_STRING: {
			const char *s;

			memcpy(&s, member, sizeof(s));
			unset = !s || !*s;
			break;
		}
		case PROTOBUF_C_TYPE_BYTES: {
			ProtobufCBinaryData b;

			memcpy(&b, member, sizeof(b));
			unset = b.len == 0;
			break;
		}
		case PROTOBUF_C_TYPE_MESSAGE: {
			const ProtobufCMessage *sub;

			memcpy(&sub, member, sizeof(sub));
			if (sub)
				check_all_set(f->name, sub);
			unset = !sub;
			break;
		}
		}
		if (unset)
			FAIL("%s.%s: the test sends the default value", path, f->name);
	}
}

/* ---- What is sent: one of each, every field non-default ---------------- */

/* Distinct values per field, wide enough to catch truncation to 32 bits or a
 * sign bit. */
static const uint8_t blob[] = { 0x00, 0xff, 0x01, 0x80, 'h', 'd', 'r', 0x00, 0x7f };
static uint8_t page_data[4096];
static char owner_a[] = "owner-a", owner_b[] = "owner-b", owner_c[] = "";
static char *owners[] = { owner_a, owner_b, owner_c };
static uint64_t page_versions[] = { 1, 0x0000000100000000ull, 0xffffffffffffffffull };
static uint32_t page_crcs[] = { 0xe3069283u, 0x00000001u, 0x80000000u };
static uint64_t busy_pages[] = { 2, 0x0000000100000000ull };

/* A batch carries whole packed envelopes: these three, the ones of a
 * whole-page write to a page homed on the other node (vmm/VMM.md, Batches). */
#define BATCH_N 3
static Envelope batch_inner[BATCH_N];

struct sent {
	Ftvm__Partner__AuthChallenge auth_challenge;
	Ftvm__Partner__AuthProof auth_proof;
	Ftvm__Partner__SessionQuery session_query;
	Ftvm__Partner__MakeVolume make_volume;
	Ftvm__Partner__ConnectionRetired connection_retired;
	Ftvm__Partner__Hello hello;
	Ftvm__Partner__PoolRegion region[2];
	Ftvm__Partner__PoolRegion *region_ptrs[2];
	Ftvm__Partner__RegionUpdate region_update;
	Ftvm__Partner__Landing landed, landing;
	Ftvm__Partner__Landing grant[2];
	Ftvm__Partner__Landing *grant_ptrs[2];
	Ftvm__Partner__LandingGrant landing_grant;
	Ftvm__Partner__LandingRevoke landing_revoke;
	Ftvm__Partner__Heartbeat heartbeat;
	Ftvm__Partner__CommandComplete command_complete;
	Ftvm__Partner__SpaceStatus space;
	Ftvm__Partner__LockStatus lock;
	Ftvm__Partner__Header header;
	Ftvm__Partner__MediaCapacity media[2];
	Ftvm__Partner__MediaCapacity *media_ptrs[2];
	Ftvm__Partner__AllocationDigest digest[2];
	Ftvm__Partner__AllocationDigest *digest_ptrs[2];
	Ftvm__Partner__SenseInformation sense;
	Ftvm__Partner__SpaceRequest space_request;
	Ftvm__Partner__AllocateMemory allocate_memory;
	Ftvm__Partner__ReleaseMemory release_memory;
	Ftvm__Partner__LockRequest lock_request;
	Ftvm__Partner__ReadHeader read_header;
	Ftvm__Partner__WritePage write_page;
	Ftvm__Partner__SenseRequest sense_request;
	Ftvm__Partner__AllocateRead allocate_read;
	Ftvm__Partner__AllocateWrite allocate_write;
	Ftvm__Partner__ReleasePointer release_pointer;
	Ftvm__Partner__Batch batch;
	ProtobufCBinaryData batch_bytes[BATCH_N];
	Ftvm__Partner__Destaged destaged;
	Ftvm__Partner__ResyncBegin resync_begin;
	Ftvm__Partner__PageState page_state[2];
	Ftvm__Partner__PageState *page_state_ptrs[2];
	Ftvm__Partner__ResyncAllocation resync_allocation;
	Ftvm__Partner__ResyncPage resync_page;
	Ftvm__Partner__ResyncLandings resync_landings;
	Ftvm__Partner__ResyncEnd resync_end;
	Ftvm__Partner__OwnerChange owner_change;
};

static Envelope envelope(Ftvm__Partner__Envelope__MessageCase which, void *msg);

static const char *const resync_freed[] = { "a-3", "b-19" };
static uint32_t resync_frames[] = { 1, 0x00010000u, 0x80000002u };

static void sent_init(struct sent *s)
{
	for (size_t i = 0; i < sizeof(page_data); i++)
		page_data[i] = (uint8_t)(i * 7 + 3);

	s->auth_challenge = (Ftvm__Partner__AuthChallenge)FTVM__PARTNER__AUTH_CHALLENGE__INIT;
	s->auth_challenge.node_id = "node-b";
	s->auth_challenge.method = FTVM__PARTNER__AUTH_METHOD__AUTH_METHOD_HMAC_SHA256;
	s->auth_challenge.nonce = (ProtobufCBinaryData){ .len = 32, .data = page_data + 64 };
	s->auth_proof = (Ftvm__Partner__AuthProof)FTVM__PARTNER__AUTH_PROOF__INIT;
	s->auth_proof.mac = (ProtobufCBinaryData){ .len = 32, .data = page_data + 96 };
	s->session_query = (Ftvm__Partner__SessionQuery)FTVM__PARTNER__SESSION_QUERY__INIT;
	s->session_query.session = "0f1e2d3c4b5a69788796a5b4c3d2e1f0";
	s->connection_retired =
		(Ftvm__Partner__ConnectionRetired)FTVM__PARTNER__CONNECTION_RETIRED__INIT;
	s->make_volume = (Ftvm__Partner__MakeVolume)FTVM__PARTNER__MAKE_VOLUME__INIT;
	s->make_volume.name = "vol.db-2";
	s->make_volume.size = 0x0000000300000005ull;
	s->make_volume.uid = 1000;
	s->make_volume.client = "app.1";

	s->hello = (Ftvm__Partner__Hello)FTVM__PARTNER__HELLO__INIT;
	s->hello.node_id = "node-b";
	s->hello.version = 0x80000001u;
	s->hello.epoch = 0x1111222233334444ull;
	s->hello.page_size = 65536;
	s->hello.frame_count = 0xfffffffffffffffeull;
	s->hello.initiator = 1;
	s->hello.state = FTVM__PARTNER__NODE_STATE__NODE_STATE_RESYNCING;
	s->hello.applied_lsn = 0x0000000b00000001ull;
	s->hello.own_lsn = 0x8000000c00000002ull;
	s->hello.one_sided = 1;
	s->hello.marks_retired = 1;
	s->hello.answers_runs = 1;
	s->hello.ack = "durable";
	s->hello.pool_block_frames = 0x0000000100000400ull;
	for (int i = 0; i < 2; i++) {
		s->region[i] = (Ftvm__Partner__PoolRegion)FTVM__PARTNER__POOL_REGION__INIT;
		s->region[i].block = 0x80000001u + (uint32_t)i;
		s->region[i].generation = 0x0000000300000001ull + (uint64_t)i;
		s->region[i].addr = 0x00007f0000001000ull << i;
		s->region[i].length = 0x0000000104000000ull + (uint64_t)i;
		s->region[i].rkey = 0xfffffff0u - (uint32_t)i;
		s->region_ptrs[i] = &s->region[i];
	}
	s->hello.n_regions = 2;
	s->hello.regions = s->region_ptrs;
	s->region_update = (Ftvm__Partner__RegionUpdate)FTVM__PARTNER__REGION_UPDATE__INIT;
	s->region_update.n_regions = 2;
	s->region_update.regions = s->region_ptrs;
	s->landed = (Ftvm__Partner__Landing)FTVM__PARTNER__LANDING__INIT;
	s->landed.frame = 0x0000000500000010ull;
	s->landed.frames = 0x80000010u;
	s->landed.generation = 0x8000000000000005ull;
	s->landing = (Ftvm__Partner__Landing)FTVM__PARTNER__LANDING__INIT;
	s->landing.frame = 0x0000000600000020ull;
	s->landing.frames = 0x00010000u;
	s->landing.generation = 0x0000000700000003ull;
	for (int i = 0; i < 2; i++) {
		s->grant[i] = (Ftvm__Partner__Landing)FTVM__PARTNER__LANDING__INIT;
		s->grant[i].frame = 0x0000000800000040ull + (uint64_t)i;
		s->grant[i].frames = 0x00020000u << i;
		s->grant[i].generation = 0x8000000900000007ull - (uint64_t)i;
		s->grant_ptrs[i] = &s->grant[i];
	}
	s->landing_grant = (Ftvm__Partner__LandingGrant)FTVM__PARTNER__LANDING_GRANT__INIT;
	s->landing_grant.n_landings = 2;
	s->landing_grant.landings = s->grant_ptrs;
	s->landing_revoke = (Ftvm__Partner__LandingRevoke)FTVM__PARTNER__LANDING_REVOKE__INIT;
	s->landing_revoke.n_landings = 1;
	s->landing_revoke.landings = &s->grant_ptrs[1];

	s->heartbeat = (Ftvm__Partner__Heartbeat)FTVM__PARTNER__HEARTBEAT__INIT;
	s->heartbeat.sent_us = 0x0000123456789abcull;
	s->heartbeat.state = FTVM__PARTNER__NODE_STATE__NODE_STATE_FENCED;

	s->space = (Ftvm__Partner__SpaceStatus)FTVM__PARTNER__SPACE_STATUS__INIT;
	s->space.free_bytes = 0x0000000500000001ull;
	s->space.total_bytes = 0x0000000a00000002ull;
	s->space.media = "flash";

	s->lock = (Ftvm__Partner__LockStatus)FTVM__PARTNER__LOCK_STATUS__INIT;
	s->lock.mode = FTVM__PARTNER__LOCK_MODE__LOCK_MODE_READ;
	s->lock.n_owners = ARRAY_SIZE(owners);
	s->lock.owners = owners;
	s->lock.version = 0x0000000800000003ull;

	s->header = (Ftvm__Partner__Header)FTVM__PARTNER__HEADER__INIT;
	s->header.guid = "6f1c2a9e-0d2b-4c8e-9a51-3b7d1e0f4a22";
	s->header.size = 0x0000010000000000ull;
	s->header.block_size = 0x80001000u;
	s->header.pages = 0x00000000ffffffffull + 2;
	s->header.policy = "mirrored";
	s->header.home = "node-a";
	s->header.owner = "node-b";
	s->header.uid = 0xfffffffeu;
	s->header.client = "app.client_1";
	s->header.session = true;
	s->header.media = "flash";
	s->header.partition = "server-memory";
	s->header.volume = "vol.db-1";
	s->header.header = (ProtobufCBinaryData){ sizeof(blob), (uint8_t *)blob };

	for (int i = 0; i < 2; i++) {
		s->media[i] = (Ftvm__Partner__MediaCapacity)FTVM__PARTNER__MEDIA_CAPACITY__INIT;
		s->media[i].type = i ? "flash" : "dram";
		s->media[i].capacity = 0x100000000ull << i;
		s->media[i].free = 0x30000000ull + (uint64_t)i;
		s->media_ptrs[i] = &s->media[i];
	}
	s->sense = (Ftvm__Partner__SenseInformation)FTVM__PARTNER__SENSE_INFORMATION__INIT;
	s->sense.n_media = 2;
	s->sense.media = s->media_ptrs;
	s->sense.paging_queue = 0x100000001ull;
	s->sense.destage_queue = 0x200000002ull;
	s->sense.replacement_queue = 0x300000003ull;
	for (int i = 0; i < 2; i++) {
		s->digest[i] =
			(Ftvm__Partner__AllocationDigest)FTVM__PARTNER__ALLOCATION_DIGEST__INIT;
		s->digest[i].header = &s->header;
		s->digest[i].n_page_version = ARRAY_SIZE(page_versions) - (size_t)i;
		s->digest[i].page_version = page_versions;
		s->digest[i].n_page_crc32c = ARRAY_SIZE(page_crcs) - (size_t)i;
		s->digest[i].page_crc32c = page_crcs;
		s->digest[i].n_busy_pages = ARRAY_SIZE(busy_pages) - (size_t)i;
		s->digest[i].busy_pages = busy_pages;
		s->digest_ptrs[i] = &s->digest[i];
	}
	s->sense.n_allocations = 2;
	s->sense.allocations = s->digest_ptrs;
	s->sense.resync = true;
	s->sense.n_cache = 2;
	s->sense.cache = s->media_ptrs;

	s->command_complete = (CommandComplete)FTVM__PARTNER__COMMAND_COMPLETE__INIT;
	s->command_complete.status = FTVM__PARTNER__STATUS__STATUS_SHUTTING_DOWN;
	s->command_complete.reason = "node-b is stopping";
	s->command_complete.applied_lsn = 0x0000000700000001ull;
	/* Outside the payload oneof: set with every payload. */
	s->command_complete.n_grants = 2;
	s->command_complete.grants = s->grant_ptrs;
	s->command_complete.n_landings = 1;
	s->command_complete.landings = &s->grant_ptrs[1];

	s->space_request = (Ftvm__Partner__SpaceRequest)FTVM__PARTNER__SPACE_REQUEST__INIT;
	s->space_request.bytes = 0x0000000200000003ull;
	s->space_request.policy = "stripe";
	s->space_request.pages = 0x0000000100000007ull;
	s->space_request.block_size = 0x00010000u;
	s->space_request.volume = true;

	s->allocate_memory = (Ftvm__Partner__AllocateMemory)FTVM__PARTNER__ALLOCATE_MEMORY__INIT;
	s->allocate_memory.guid = "a1";
	s->allocate_memory.size = 0x0000002000000000ull;
	s->allocate_memory.block_size = 0x80000200u;
	s->allocate_memory.policy = "immediate";
	s->allocate_memory.home = "node-a";
	s->allocate_memory.header = (ProtobufCBinaryData){ sizeof(blob), (uint8_t *)blob };
	s->allocate_memory.store_offset = 0x0000010000000000ull;
	s->allocate_memory.uid = 65534;
	s->allocate_memory.client = "db-main.2";
	s->allocate_memory.session = "ffeeddccbbaa99887766554433221100";
	s->allocate_memory.volume = "vol-7";

	s->release_memory = (Ftvm__Partner__ReleaseMemory)FTVM__PARTNER__RELEASE_MEMORY__INIT;
	s->release_memory.guid = "a2";

	s->lock_request = (Ftvm__Partner__LockRequest)FTVM__PARTNER__LOCK_REQUEST__INIT;
	s->lock_request.guid = "a3";
	s->lock_request.page = 0x0000000100000007ull;
	s->lock_request.mode = FTVM__PARTNER__LOCK_MODE__LOCK_MODE_WRITE;
	s->lock_request.ticket = 0x0000000200000009ull;
	s->lock_request.wait_ms = 30000;

	s->read_header = (Ftvm__Partner__ReadHeader)FTVM__PARTNER__READ_HEADER__INIT;
	s->read_header.guid = "a4";

	s->write_page = (Ftvm__Partner__WritePage)FTVM__PARTNER__WRITE_PAGE__INIT;
	s->write_page.guid = "a5";
	s->write_page.page = 0xfffffffffffffff0ull;
	s->write_page.data = (ProtobufCBinaryData){ sizeof(page_data), page_data };
	s->write_page.crc32c = 0xe3069283u;
	s->write_page.landed = &s->landed;

	s->sense_request = (Ftvm__Partner__SenseRequest)FTVM__PARTNER__SENSE_REQUEST__INIT;
	s->sense_request.capacity = 1;
	s->sense_request.queues = 1;
	s->sense_request.page_table = 1;

	s->allocate_read = (Ftvm__Partner__AllocateRead)FTVM__PARTNER__ALLOCATE_READ__INIT;
	s->allocate_read.guid = "a6";
	s->allocate_read.page = 0x0000000300000009ull;
	s->allocate_read.owner = "reader-1";

	s->allocate_write = (Ftvm__Partner__AllocateWrite)FTVM__PARTNER__ALLOCATE_WRITE__INIT;
	s->allocate_write.guid = "a7";
	s->allocate_write.page = 0x000000040000000bull;
	s->allocate_write.owner = "writer-1";
	s->allocate_write.page_in = true;

	s->release_pointer = (Ftvm__Partner__ReleasePointer)FTVM__PARTNER__RELEASE_POINTER__INIT;
	s->release_pointer.guid = "a8";
	s->release_pointer.page = 0x000000050000000dull;
	s->release_pointer.owner = "writer-2";
	s->release_pointer.modified = 1;
	s->release_pointer.version = 0x0000000600000001ull;
	s->release_pointer.crc32c = 0x9a71bb4cu;

	batch_inner[0] = envelope(FTVM__PARTNER__ENVELOPE__MESSAGE_LOCK_REQUEST, &s->lock_request);
	batch_inner[1] =
		envelope(FTVM__PARTNER__ENVELOPE__MESSAGE_ALLOCATE_WRITE, &s->allocate_write);
	batch_inner[2] = envelope(FTVM__PARTNER__ENVELOPE__MESSAGE_WRITE_PAGE, &s->write_page);
	s->destaged = (Ftvm__Partner__Destaged)FTVM__PARTNER__DESTAGED__INIT;
	s->destaged.guid = "a9";
	s->destaged.page = 0x123456789ull;
	s->destaged.version = 0x8000000000000003ull;
	s->destaged.crc32c = 0xdeadbeefu;

	s->resync_begin = (Ftvm__Partner__ResyncBegin)FTVM__PARTNER__RESYNC_BEGIN__INIT;
	s->resync_begin.epoch = 0x8000000000000007ull;
	s->resync_begin.allocations = 0x0000000100000003ull;
	s->resync_begin.incremental = 1;
	s->resync_begin.n_freed = 2;
	s->resync_begin.freed = (char **)resync_freed;
	for (int i = 0; i < 2; i++) {
		s->page_state[i] = (Ftvm__Partner__PageState)FTVM__PARTNER__PAGE_STATE__INIT;
		s->page_state[i].version = 0x0000000700000001ull + (uint64_t)i;
		s->page_state[i].crc32c = 0x80000001u + (uint32_t)i;
		s->page_state[i].dirty = 1;
		s->page_state_ptrs[i] = &s->page_state[i];
	}
	s->resync_allocation =
		(Ftvm__Partner__ResyncAllocation)FTVM__PARTNER__RESYNC_ALLOCATION__INIT;
	s->resync_allocation.allocation = &s->allocate_memory;
	s->resync_allocation.owner = "node-b";
	s->resync_allocation.n_pages = 2;
	s->resync_allocation.pages = s->page_state_ptrs;
	s->resync_page = (Ftvm__Partner__ResyncPage)FTVM__PARTNER__RESYNC_PAGE__INIT;
	s->resync_page.guid = "b-12";
	s->resync_page.page = 0x0000000900000002ull;
	s->resync_page.data.data = page_data;
	s->resync_page.data.len = sizeof(page_data);
	s->resync_page.state = &s->page_state[1];
	s->resync_page.landed = &s->landed;
	s->resync_landings = (Ftvm__Partner__ResyncLandings)FTVM__PARTNER__RESYNC_LANDINGS__INIT;
	s->resync_landings.n_frames = ARRAY_SIZE(resync_frames);
	s->resync_landings.frames = resync_frames;
	s->resync_end = (Ftvm__Partner__ResyncEnd)FTVM__PARTNER__RESYNC_END__INIT;
	s->resync_end.epoch = 0x8000000000000008ull;
	s->resync_end.lsn = 0x0000000a00000005ull;
	s->owner_change = (Ftvm__Partner__OwnerChange)FTVM__PARTNER__OWNER_CHANGE__INIT;
	s->owner_change.guid = "b-77";
	s->owner_change.owner = "node-b";

	s->batch = (Ftvm__Partner__Batch)FTVM__PARTNER__BATCH__INIT;
	for (int i = 0; i < BATCH_N; i++) {
		batch_inner[i].seq += (uint64_t)i;
		batch_inner[i].lsn += (uint64_t)i;
		if (codec_payload_pack(&batch_inner[i].base, &s->batch_bytes[i].data,
				       &s->batch_bytes[i].len) < 0) {
			fprintf(stderr, "codec_payload_pack failed\n");
			exit(99);
		}
	}
	s->batch.n_envelopes = BATCH_N;
	s->batch.envelopes = s->batch_bytes;
}

static void sent_free(struct sent *s)
{
	for (int i = 0; i < BATCH_N; i++)
		free(s->batch_bytes[i].data);
}

/* An envelope around one message. */
static Envelope envelope(Ftvm__Partner__Envelope__MessageCase which, void *msg)
{
	Envelope env = FTVM__PARTNER__ENVELOPE__INIT;

	env.version = PV_CURRENT;
	env.sender = "node-a";
	env.epoch = 0x0123456789abcdefull;
	env.seq = 0x00000001fffffffeull;
	env.answers = 0x0000000100000001ull;
	env.lsn = 0x0000000200000005ull;
	env.answers_count = 0x40;
	env.message_case = which;
	/* Every member of the union is a pointer; which one is in message_case. */
	env.hello = msg;
	return env;
}

/* ---- What came back: every field compared ------------------------------ */

/* The landing runs of a LandingGrant, a LandingRevoke or an answer's grants. */
static void cmp_landings(const char *ctx, Ftvm__Partner__Landing *const *es, size_t ne,
			 Ftvm__Partner__Landing *const *gs, size_t ng)
{
	for (size_t i = 0; i < ne && i < ng; i++) {
		const Ftvm__Partner__Landing *e = es[i], *g = gs[i];

		EQ_U(frame);
		EQ_U(frames);
		EQ_U(generation);
	}
}

static void cmp_command_complete(const char *ctx, const CommandComplete *e,
				 const CommandComplete *g)
{
	EQ_U(n_grants);
	cmp_landings(ctx, e->grants, e->n_grants, g->grants, g->n_grants);
	EQ_U(n_landings);
	cmp_landings(ctx, e->landings, e->n_landings, g->landings, g->n_landings);
	EQ_U(status);
	EQ_S(reason);
	EQ_U(applied_lsn);
	EQ_U(payload_case);
	if (e->payload_case != g->payload_case)
		return;
	switch (e->payload_case) {
	case FTVM__PARTNER__COMMAND_COMPLETE__PAYLOAD_SPACE:
		EQ_U(space->free_bytes);
		EQ_U(space->total_bytes);
		EQ_S(space->media);
		break;
	case FTVM__PARTNER__COMMAND_COMPLETE__PAYLOAD_LOCK:
		EQ_U(lock->mode);
		EQ_U(lock->n_owners);
		for (size_t i = 0; i < e->lock->n_owners && i < g->lock->n_owners; i++)
			EQ_S(lock->owners[i]);
		EQ_U(lock->version);
		break;
	case FTVM__PARTNER__COMMAND_COMPLETE__PAYLOAD_HEADER:
		EQ_S(header->guid);
		EQ_U(header->size);
		EQ_U(header->block_size);
		EQ_U(header->pages);
		EQ_S(header->policy);
		EQ_S(header->home);
		EQ_S(header->owner);
		EQ_U(header->uid);
		EQ_S(header->client);
		EQ_U(header->session);
		EQ_S(header->media);
		EQ_S(header->partition);
		EQ_B(header->header);
		break;
	case FTVM__PARTNER__COMMAND_COMPLETE__PAYLOAD_SENSE:
		EQ_U(sense->n_media);
		for (size_t i = 0; i < e->sense->n_media && i < g->sense->n_media; i++) {
			EQ_S(sense->media[i]->type);
			EQ_U(sense->media[i]->capacity);
			EQ_U(sense->media[i]->free);
		}
		EQ_U(sense->n_cache);
		for (size_t i = 0; i < e->sense->n_cache && i < g->sense->n_cache; i++) {
			EQ_S(sense->cache[i]->type);
			EQ_U(sense->cache[i]->free);
		}
		EQ_U(sense->paging_queue);
		EQ_U(sense->destage_queue);
		EQ_U(sense->replacement_queue);
		EQ_U(sense->n_allocations);
		for (size_t i = 0; i < e->sense->n_allocations && i < g->sense->n_allocations;
		     i++) {
			EQ_S(sense->allocations[i]->header->guid);
			EQ_U(sense->allocations[i]->header->size);
			EQ_U(sense->allocations[i]->header->block_size);
			EQ_U(sense->allocations[i]->header->pages);
			EQ_S(sense->allocations[i]->header->policy);
			EQ_S(sense->allocations[i]->header->home);
			EQ_S(sense->allocations[i]->header->owner);
			EQ_U(sense->allocations[i]->header->uid);
			EQ_S(sense->allocations[i]->header->client);
			EQ_B(sense->allocations[i]->header->header);
			EQ_U(sense->allocations[i]->n_page_version);
			for (size_t k = 0; k < e->sense->allocations[i]->n_page_version &&
					   k < g->sense->allocations[i]->n_page_version;
			     k++)
				EQ_U(sense->allocations[i]->page_version[k]);
			EQ_U(sense->allocations[i]->n_page_crc32c);
			for (size_t k = 0; k < e->sense->allocations[i]->n_page_crc32c &&
					   k < g->sense->allocations[i]->n_page_crc32c;
			     k++)
				EQ_U(sense->allocations[i]->page_crc32c[k]);
		}
		break;
	case FTVM__PARTNER__COMMAND_COMPLETE__PAYLOAD_LANDING:
		EQ_U(landing->frame);
		EQ_U(landing->frames);
		EQ_U(landing->generation);
		break;
	case FTVM__PARTNER__COMMAND_COMPLETE__PAYLOAD__NOT_SET:
	default:
		break;
	}
}

static void cmp_envelope(const char *ctx, const Envelope *e, const Envelope *g);

/* The pool regions of a Hello or a RegionUpdate. */
static void cmp_regions(const char *ctx, Ftvm__Partner__PoolRegion *const *es, size_t ne,
			Ftvm__Partner__PoolRegion *const *gs, size_t ng)
{
	for (size_t i = 0; i < ne && i < ng; i++) {
		const Ftvm__Partner__PoolRegion *e = es[i], *g = gs[i];

		EQ_U(block);
		EQ_U(generation);
		EQ_U(addr);
		EQ_U(length);
		EQ_U(rkey);
	}
}

/* A batch's envelopes came back byte for byte, and each decodes on its own to
 * the envelope that was packed into it. */
static void cmp_batch(const char *ctx, const Ftvm__Partner__Batch *e, const Ftvm__Partner__Batch *g)
{
	EQ_U(n_envelopes);
	for (size_t i = 0; i < e->n_envelopes && i < g->n_envelopes; i++) {
		char inner_ctx[128], err[256] = "";
		Envelope *inner = NULL;
		int r;

		snprintf(inner_ctx, sizeof(inner_ctx), "%s.envelopes[%zu]", ctx, i);
		eq_b(inner_ctx, "bytes", e->envelopes[i], g->envelopes[i]);
		r = codec_envelope_decode(g->envelopes[i].data, g->envelopes[i].len, &inner, err,
					  sizeof(err));
		if (r < 0 || !inner) {
			FAIL("%s: codec_envelope_decode: expected 0, got %d (%s)", inner_ctx, r,
			     err);
			continue;
		}
		if (i < BATCH_N) {
			cmp_envelope(inner_ctx, &batch_inner[i], inner);
			eq_s(inner_ctx, "codec_message_name", codec_message_name(&batch_inner[i]),
			     codec_message_name(inner));
		}
		codec_envelope_free(inner);
	}
}

static void cmp_envelope(const char *ctx, const Envelope *e, const Envelope *g)
{
	EQ_U(version);
	EQ_S(sender);
	EQ_U(epoch);
	EQ_U(seq);
	EQ_U(answers);
	EQ_U(answers_count);
	EQ_U(lsn);
	EQ_U(message_case);
	if (e->message_case != g->message_case)
		return;
	switch (e->message_case) {
	case FTVM__PARTNER__ENVELOPE__MESSAGE_AUTH_CHALLENGE:
		EQ_S(auth_challenge->node_id);
		EQ_U(auth_challenge->method);
		EQ_B(auth_challenge->nonce);
		break;
	case FTVM__PARTNER__ENVELOPE__MESSAGE_AUTH_PROOF:
		EQ_B(auth_proof->mac);
		break;
	case FTVM__PARTNER__ENVELOPE__MESSAGE_SESSION_QUERY:
		EQ_S(session_query->session);
		break;
	case FTVM__PARTNER__ENVELOPE__MESSAGE_CONNECTION_RETIRED:
		break; /* no fields: its case is all it says */
	case FTVM__PARTNER__ENVELOPE__MESSAGE_MAKE_VOLUME:
		EQ_S(make_volume->name);
		EQ_U(make_volume->size);
		EQ_U(make_volume->uid);
		EQ_S(make_volume->client);
		break;
	case FTVM__PARTNER__ENVELOPE__MESSAGE_HELLO:
		EQ_S(hello->node_id);
		EQ_U(hello->version);
		EQ_U(hello->epoch);
		EQ_U(hello->page_size);
		EQ_U(hello->frame_count);
		EQ_U(hello->initiator);
		EQ_U(hello->state);
		EQ_U(hello->applied_lsn);
		EQ_U(hello->own_lsn);
		EQ_U(hello->one_sided);
		EQ_U(hello->marks_retired);
		EQ_U(hello->answers_runs);
		EQ_S(hello->ack);
		EQ_U(hello->pool_block_frames);
		EQ_U(hello->n_regions);
		cmp_regions(ctx, e->hello->regions, e->hello->n_regions, g->hello->regions,
			    g->hello->n_regions);
		break;
	case FTVM__PARTNER__ENVELOPE__MESSAGE_LANDING_GRANT:
		EQ_U(landing_grant->n_landings);
		cmp_landings(ctx, e->landing_grant->landings, e->landing_grant->n_landings,
			     g->landing_grant->landings, g->landing_grant->n_landings);
		break;
	case FTVM__PARTNER__ENVELOPE__MESSAGE_LANDING_REVOKE:
		EQ_U(landing_revoke->n_landings);
		cmp_landings(ctx, e->landing_revoke->landings, e->landing_revoke->n_landings,
			     g->landing_revoke->landings, g->landing_revoke->n_landings);
		break;
	case FTVM__PARTNER__ENVELOPE__MESSAGE_REGION_UPDATE:
		EQ_U(region_update->n_regions);
		cmp_regions(ctx, e->region_update->regions, e->region_update->n_regions,
			    g->region_update->regions, g->region_update->n_regions);
		break;
	case FTVM__PARTNER__ENVELOPE__MESSAGE_HEARTBEAT:
		EQ_U(heartbeat->sent_us);
		EQ_U(heartbeat->state);
		break;
	case FTVM__PARTNER__ENVELOPE__MESSAGE_COMMAND_COMPLETE:
		cmp_command_complete(ctx, e->command_complete, g->command_complete);
		break;
	case FTVM__PARTNER__ENVELOPE__MESSAGE_SPACE_REQUEST:
		EQ_U(space_request->bytes);
		EQ_S(space_request->policy);
		EQ_U(space_request->pages);
		EQ_U(space_request->block_size);
		break;
	case FTVM__PARTNER__ENVELOPE__MESSAGE_ALLOCATE_MEMORY:
		EQ_S(allocate_memory->guid);
		EQ_U(allocate_memory->size);
		EQ_U(allocate_memory->block_size);
		EQ_S(allocate_memory->policy);
		EQ_S(allocate_memory->home);
		EQ_B(allocate_memory->header);
		EQ_U(allocate_memory->store_offset);
		EQ_U(allocate_memory->uid);
		EQ_S(allocate_memory->client);
		EQ_S(allocate_memory->session);
		break;
	case FTVM__PARTNER__ENVELOPE__MESSAGE_RELEASE_MEMORY:
		EQ_S(release_memory->guid);
		break;
	case FTVM__PARTNER__ENVELOPE__MESSAGE_LOCK_REQUEST:
		EQ_S(lock_request->guid);
		EQ_U(lock_request->page);
		EQ_U(lock_request->mode);
		EQ_U(lock_request->ticket);
		EQ_U(lock_request->wait_ms);
		break;
	case FTVM__PARTNER__ENVELOPE__MESSAGE_READ_HEADER:
		EQ_S(read_header->guid);
		break;
	case FTVM__PARTNER__ENVELOPE__MESSAGE_WRITE_PAGE:
		EQ_S(write_page->guid);
		EQ_U(write_page->page);
		EQ_B(write_page->data);
		EQ_U(write_page->crc32c);
		if (!g->write_page->landed != !e->write_page->landed)
			FAIL("%s: write_page.landed came back %s", ctx,
			     g->write_page->landed ? "set" : "unset");
		if (e->write_page->landed && g->write_page->landed) {
			EQ_U(write_page->landed->frame);
			EQ_U(write_page->landed->frames);
			EQ_U(write_page->landed->generation);
		}
		break;
	case FTVM__PARTNER__ENVELOPE__MESSAGE_SENSE_REQUEST:
		EQ_U(sense_request->capacity);
		EQ_U(sense_request->queues);
		EQ_U(sense_request->page_table);
		break;
	case FTVM__PARTNER__ENVELOPE__MESSAGE_ALLOCATE_READ:
		EQ_S(allocate_read->guid);
		EQ_U(allocate_read->page);
		EQ_S(allocate_read->owner);
		break;
	case FTVM__PARTNER__ENVELOPE__MESSAGE_ALLOCATE_WRITE:
		EQ_S(allocate_write->guid);
		EQ_U(allocate_write->page);
		EQ_S(allocate_write->owner);
		EQ_U(allocate_write->page_in);
		break;
	case FTVM__PARTNER__ENVELOPE__MESSAGE_RELEASE_POINTER:
		EQ_S(release_pointer->guid);
		EQ_U(release_pointer->page);
		EQ_S(release_pointer->owner);
		EQ_U(release_pointer->modified);
		EQ_U(release_pointer->version);
		EQ_U(release_pointer->crc32c);
		break;
	case FTVM__PARTNER__ENVELOPE__MESSAGE_BATCH:
		cmp_batch(ctx, e->batch, g->batch);
		break;
	case FTVM__PARTNER__ENVELOPE__MESSAGE_DESTAGED:
		EQ_S(destaged->guid);
		EQ_U(destaged->page);
		EQ_U(destaged->version);
		EQ_U(destaged->crc32c);
		break;
	case FTVM__PARTNER__ENVELOPE__MESSAGE_RESYNC_BEGIN:
		EQ_U(resync_begin->epoch);
		EQ_U(resync_begin->allocations);
		EQ_U(resync_begin->incremental);
		EQ_U(resync_begin->n_freed);
		for (size_t i = 0; i < e->resync_begin->n_freed && i < g->resync_begin->n_freed;
		     i++)
			EQ_S(resync_begin->freed[i]);
		break;
	case FTVM__PARTNER__ENVELOPE__MESSAGE_RESYNC_ALLOCATION:
		EQ_S(resync_allocation->allocation->guid);
		EQ_U(resync_allocation->allocation->size);
		EQ_U(resync_allocation->allocation->block_size);
		EQ_S(resync_allocation->allocation->policy);
		EQ_S(resync_allocation->allocation->home);
		EQ_B(resync_allocation->allocation->header);
		EQ_U(resync_allocation->allocation->store_offset);
		EQ_U(resync_allocation->allocation->uid);
		EQ_S(resync_allocation->allocation->client);
		EQ_S(resync_allocation->owner);
		EQ_U(resync_allocation->n_pages);
		for (size_t i = 0;
		     i < e->resync_allocation->n_pages && i < g->resync_allocation->n_pages; i++) {
			EQ_U(resync_allocation->pages[i]->version);
			EQ_U(resync_allocation->pages[i]->crc32c);
			EQ_U(resync_allocation->pages[i]->dirty);
		}
		break;
	case FTVM__PARTNER__ENVELOPE__MESSAGE_RESYNC_PAGE:
		EQ_S(resync_page->guid);
		EQ_U(resync_page->page);
		EQ_B(resync_page->data);
		EQ_U(resync_page->state->version);
		EQ_U(resync_page->state->crc32c);
		EQ_U(resync_page->state->dirty);
		EQ_U(resync_page->landed->frame);
		EQ_U(resync_page->landed->frames);
		EQ_U(resync_page->landed->generation);
		break;
	case FTVM__PARTNER__ENVELOPE__MESSAGE_RESYNC_LANDINGS:
		EQ_U(resync_landings->n_frames);
		for (size_t i = 0;
		     i < e->resync_landings->n_frames && i < g->resync_landings->n_frames; i++)
			EQ_U(resync_landings->frames[i]);
		break;
	case FTVM__PARTNER__ENVELOPE__MESSAGE_RESYNC_END:
		EQ_U(resync_end->epoch);
		EQ_U(resync_end->lsn);
		break;
	case FTVM__PARTNER__ENVELOPE__MESSAGE_OWNER_CHANGE:
		EQ_S(owner_change->guid);
		EQ_S(owner_change->owner);
		break;
	case FTVM__PARTNER__ENVELOPE__MESSAGE__NOT_SET:
	default:
		FAIL("%s: the test sent an envelope with message case %d", ctx, e->message_case);
		break;
	}
}

/* ---- Round trips -------------------------------------------------------- */

struct round_trip_case {
	const char *ctx;
	const char *name; /* codec_message_name's answer */
	Ftvm__Partner__Envelope__MessageCase which;
	Ftvm__Partner__CommandComplete__PayloadCase payload;
};

static const struct round_trip_case round_trip_cases[] = {
	{ "Hello", "Hello", FTVM__PARTNER__ENVELOPE__MESSAGE_HELLO, 0 },
	{ "Heartbeat", "Heartbeat", FTVM__PARTNER__ENVELOPE__MESSAGE_HEARTBEAT, 0 },
	{ "CommandComplete{}", "CommandComplete", FTVM__PARTNER__ENVELOPE__MESSAGE_COMMAND_COMPLETE,
	  FTVM__PARTNER__COMMAND_COMPLETE__PAYLOAD__NOT_SET },
	{ "CommandComplete{space}", "CommandComplete",
	  FTVM__PARTNER__ENVELOPE__MESSAGE_COMMAND_COMPLETE,
	  FTVM__PARTNER__COMMAND_COMPLETE__PAYLOAD_SPACE },
	{ "CommandComplete{lock}", "CommandComplete",
	  FTVM__PARTNER__ENVELOPE__MESSAGE_COMMAND_COMPLETE,
	  FTVM__PARTNER__COMMAND_COMPLETE__PAYLOAD_LOCK },
	{ "CommandComplete{header}", "CommandComplete",
	  FTVM__PARTNER__ENVELOPE__MESSAGE_COMMAND_COMPLETE,
	  FTVM__PARTNER__COMMAND_COMPLETE__PAYLOAD_HEADER },
	{ "CommandComplete{sense}", "CommandComplete",
	  FTVM__PARTNER__ENVELOPE__MESSAGE_COMMAND_COMPLETE,
	  FTVM__PARTNER__COMMAND_COMPLETE__PAYLOAD_SENSE },
	{ "CommandComplete{landing}", "CommandComplete",
	  FTVM__PARTNER__ENVELOPE__MESSAGE_COMMAND_COMPLETE,
	  FTVM__PARTNER__COMMAND_COMPLETE__PAYLOAD_LANDING },
	{ "AuthChallenge", "AuthChallenge", FTVM__PARTNER__ENVELOPE__MESSAGE_AUTH_CHALLENGE, 0 },
	{ "AuthProof", "AuthProof", FTVM__PARTNER__ENVELOPE__MESSAGE_AUTH_PROOF, 0 },
	{ "SessionQuery", "SessionQuery", FTVM__PARTNER__ENVELOPE__MESSAGE_SESSION_QUERY, 0 },
	{ "MakeVolume", "MakeVolume", FTVM__PARTNER__ENVELOPE__MESSAGE_MAKE_VOLUME, 0 },
	{ "ConnectionRetired", "ConnectionRetired",
	  FTVM__PARTNER__ENVELOPE__MESSAGE_CONNECTION_RETIRED, 0 },
	{ "RegionUpdate", "RegionUpdate", FTVM__PARTNER__ENVELOPE__MESSAGE_REGION_UPDATE, 0 },
	{ "LandingGrant", "LandingGrant", FTVM__PARTNER__ENVELOPE__MESSAGE_LANDING_GRANT, 0 },
	{ "LandingRevoke", "LandingRevoke", FTVM__PARTNER__ENVELOPE__MESSAGE_LANDING_REVOKE, 0 },
	{ "SpaceRequest", "SpaceRequest", FTVM__PARTNER__ENVELOPE__MESSAGE_SPACE_REQUEST, 0 },
	{ "AllocateMemory", "AllocateMemory", FTVM__PARTNER__ENVELOPE__MESSAGE_ALLOCATE_MEMORY, 0 },
	{ "ReleaseMemory", "ReleaseMemory", FTVM__PARTNER__ENVELOPE__MESSAGE_RELEASE_MEMORY, 0 },
	{ "LockRequest", "LockRequest", FTVM__PARTNER__ENVELOPE__MESSAGE_LOCK_REQUEST, 0 },
	{ "ReadHeader", "ReadHeader", FTVM__PARTNER__ENVELOPE__MESSAGE_READ_HEADER, 0 },
	{ "WritePage", "WritePage", FTVM__PARTNER__ENVELOPE__MESSAGE_WRITE_PAGE, 0 },
	{ "SenseRequest", "SenseRequest", FTVM__PARTNER__ENVELOPE__MESSAGE_SENSE_REQUEST, 0 },
	{ "AllocateRead", "AllocateRead", FTVM__PARTNER__ENVELOPE__MESSAGE_ALLOCATE_READ, 0 },
	{ "AllocateWrite", "AllocateWrite", FTVM__PARTNER__ENVELOPE__MESSAGE_ALLOCATE_WRITE, 0 },
	{ "ReleasePointer", "ReleasePointer", FTVM__PARTNER__ENVELOPE__MESSAGE_RELEASE_POINTER, 0 },
	{ "Batch", "Batch", FTVM__PARTNER__ENVELOPE__MESSAGE_BATCH, 0 },
	{ "Destaged", "Destaged", FTVM__PARTNER__ENVELOPE__MESSAGE_DESTAGED, 0 },
	{ "ResyncBegin", "ResyncBegin", FTVM__PARTNER__ENVELOPE__MESSAGE_RESYNC_BEGIN, 0 },
	{ "ResyncAllocation", "ResyncAllocation",
	  FTVM__PARTNER__ENVELOPE__MESSAGE_RESYNC_ALLOCATION, 0 },
	{ "ResyncPage", "ResyncPage", FTVM__PARTNER__ENVELOPE__MESSAGE_RESYNC_PAGE, 0 },
	{ "ResyncEnd", "ResyncEnd", FTVM__PARTNER__ENVELOPE__MESSAGE_RESYNC_END, 0 },
	{ "ResyncLandings", "ResyncLandings", FTVM__PARTNER__ENVELOPE__MESSAGE_RESYNC_LANDINGS, 0 },
	{ "OwnerChange", "OwnerChange", FTVM__PARTNER__ENVELOPE__MESSAGE_OWNER_CHANGE, 0 },
};

/* The message a case sends, wired into s. */
static void *case_message(struct sent *s, const struct round_trip_case *c)
{
	switch (c->which) {
	case FTVM__PARTNER__ENVELOPE__MESSAGE_AUTH_CHALLENGE:
		return &s->auth_challenge;
	case FTVM__PARTNER__ENVELOPE__MESSAGE_AUTH_PROOF:
		return &s->auth_proof;
	case FTVM__PARTNER__ENVELOPE__MESSAGE_SESSION_QUERY:
		return &s->session_query;
	case FTVM__PARTNER__ENVELOPE__MESSAGE_MAKE_VOLUME:
		return &s->make_volume;
	case FTVM__PARTNER__ENVELOPE__MESSAGE_CONNECTION_RETIRED:
		return &s->connection_retired;
	case FTVM__PARTNER__ENVELOPE__MESSAGE_HELLO:
		return &s->hello;
	case FTVM__PARTNER__ENVELOPE__MESSAGE_HEARTBEAT:
		return &s->heartbeat;
	case FTVM__PARTNER__ENVELOPE__MESSAGE_REGION_UPDATE:
		return &s->region_update;
	case FTVM__PARTNER__ENVELOPE__MESSAGE_LANDING_GRANT:
		return &s->landing_grant;
	case FTVM__PARTNER__ENVELOPE__MESSAGE_LANDING_REVOKE:
		return &s->landing_revoke;
	case FTVM__PARTNER__ENVELOPE__MESSAGE_COMMAND_COMPLETE:
		s->command_complete.payload_case = c->payload;
		switch (c->payload) {
		case FTVM__PARTNER__COMMAND_COMPLETE__PAYLOAD_SPACE:
			s->command_complete.space = &s->space;
			break;
		case FTVM__PARTNER__COMMAND_COMPLETE__PAYLOAD_LOCK:
			s->command_complete.lock = &s->lock;
			break;
		case FTVM__PARTNER__COMMAND_COMPLETE__PAYLOAD_HEADER:
			s->command_complete.header = &s->header;
			break;
		case FTVM__PARTNER__COMMAND_COMPLETE__PAYLOAD_SENSE:
			s->command_complete.sense = &s->sense;
			break;
		case FTVM__PARTNER__COMMAND_COMPLETE__PAYLOAD_LANDING:
			s->command_complete.landing = &s->landing;
			break;
		default:
			s->command_complete.space = NULL;
			break;
		}
		return &s->command_complete;
	case FTVM__PARTNER__ENVELOPE__MESSAGE_SPACE_REQUEST:
		return &s->space_request;
	case FTVM__PARTNER__ENVELOPE__MESSAGE_ALLOCATE_MEMORY:
		return &s->allocate_memory;
	case FTVM__PARTNER__ENVELOPE__MESSAGE_RELEASE_MEMORY:
		return &s->release_memory;
	case FTVM__PARTNER__ENVELOPE__MESSAGE_LOCK_REQUEST:
		return &s->lock_request;
	case FTVM__PARTNER__ENVELOPE__MESSAGE_READ_HEADER:
		return &s->read_header;
	case FTVM__PARTNER__ENVELOPE__MESSAGE_WRITE_PAGE:
		return &s->write_page;
	case FTVM__PARTNER__ENVELOPE__MESSAGE_SENSE_REQUEST:
		return &s->sense_request;
	case FTVM__PARTNER__ENVELOPE__MESSAGE_ALLOCATE_READ:
		return &s->allocate_read;
	case FTVM__PARTNER__ENVELOPE__MESSAGE_ALLOCATE_WRITE:
		return &s->allocate_write;
	case FTVM__PARTNER__ENVELOPE__MESSAGE_RELEASE_POINTER:
		return &s->release_pointer;
	case FTVM__PARTNER__ENVELOPE__MESSAGE_BATCH:
		return &s->batch;
	case FTVM__PARTNER__ENVELOPE__MESSAGE_DESTAGED:
		return &s->destaged;
	case FTVM__PARTNER__ENVELOPE__MESSAGE_RESYNC_BEGIN:
		return &s->resync_begin;
	case FTVM__PARTNER__ENVELOPE__MESSAGE_RESYNC_ALLOCATION:
		return &s->resync_allocation;
	case FTVM__PARTNER__ENVELOPE__MESSAGE_RESYNC_PAGE:
		return &s->resync_page;
	case FTVM__PARTNER__ENVELOPE__MESSAGE_RESYNC_END:
		return &s->resync_end;
	case FTVM__PARTNER__ENVELOPE__MESSAGE_RESYNC_LANDINGS:
		return &s->resync_landings;
	case FTVM__PARTNER__ENVELOPE__MESSAGE_OWNER_CHANGE:
		return &s->owner_change;
	default:
		return NULL;
	}
}

/* ---- The codec reads envelopes by hand: always as protobuf-c would ------ */

/* got and want (both decoded) pack to the same bytes. */
static bool same_packed(const ProtobufCMessage *got, const ProtobufCMessage *want)
{
	size_t n = protobuf_c_message_get_packed_size(got);
	uint8_t *a, *b;
	bool same;

	if (n != protobuf_c_message_get_packed_size(want))
		return false;
	a = xmalloc(n ? n : 1);
	b = xmalloc(n ? n : 1);
	protobuf_c_message_pack(got, a);
	protobuf_c_message_pack(want, b);
	same = memcmp(a, b, n) == 0;
	free(a);
	free(b);
	return same;
}

/* The codec's decode of payload (alone, borrowed, and each entry of a Batch
 * as the session takes them) against protobuf-c's: what protobuf-c cannot
 * parse the codec refuses as such, and what it can the codec decodes to the
 * same message, or refuses for a rule of its own. */
static void same_as_protobuf_c(const char *what, const uint8_t *payload, size_t len)
{
	const ProtobufCMessageDescriptor *desc = &ftvm__partner__envelope__descriptor;
	ProtobufCMessage *want = pb_arena_unpack(desc, len, payload);

	for (int borrowed = 0; borrowed < 2; borrowed++) {
		Envelope *got = NULL;
		char err[256] = "";
		int r = borrowed ? codec_envelope_decode_borrowed(payload, len, &got, err,
								  sizeof(err))
				 : codec_envelope_decode(payload, len, &got, err, sizeof(err));
		bool unparsed = r < 0 && strstr(err, "does not parse");

		if (!want != unparsed)
			FAIL("%s%s: protobuf-c %s it, the codec said %d (%s)", what,
			     borrowed ? " (borrowed)" : "", want ? "parses" : "does not parse", r,
			     err);
		else if (r == 0 && !same_packed(&got->base, want))
			FAIL("%s%s: decoded unlike protobuf-c", what,
			     borrowed ? " (borrowed)" : "");
		if (r == 0 && got->message_case == FTVM__PARTNER__ENVELOPE__MESSAGE_BATCH)
			for (size_t i = 0; i < got->batch->n_envelopes; i++) {
				const ProtobufCBinaryData *b = &got->batch->envelopes[i];
				ProtobufCMessage *inner_want =
					pb_arena_unpack(desc, b->len, b->data);
				Envelope *inner = NULL;

				err[0] = '\0';
				r = codec_batch_envelope_decode(got, i, &inner, err, sizeof(err));
				if (!inner_want != (r < 0 && strstr(err, "does not parse") != NULL))
					FAIL("%s: batch entry %zu: protobuf-c and the codec differ "
					     "(%d, %s)",
					     what, i, r, err);
				else if (r == 0 && !same_packed(&inner->base, inner_want))
					FAIL("%s: batch entry %zu decoded unlike protobuf-c", what,
					     i);
				pb_arena_free(inner_want);
			}
		codec_envelope_free(got);
	}
	pb_arena_free(want);
}

/* Envelopes the hand reader must leave to protobuf-c, or read alike: a
 * field twice, the oneof twice (two members, or one twice), a field
 * it does not know, a wire type that is not the field's, values past 32
 * bits, an empty message, no message. */
static void test_decode_edges(void)
{
	static const uint8_t hdr[] = { 0x08, 0x01, 0x12, 0x01, 'a', 0x18, 0x05 };
	static const struct {
		const char *what;
		uint8_t tail[24];
		size_t len;
	} cases[] = {
		{ "no message", { 0 }, 0 },
		{ "empty Heartbeat", { 0x5a, 0x00 }, 2 },
		{ "Heartbeat", { 0x5a, 0x02, 0x08, 0x07 }, 4 },
		{ "Heartbeat twice (the last counts)",
		  { 0x5a, 0x02, 0x08, 0x07, 0x5a, 0x02, 0x10, 0x02 },
		  8 },
		{ "Heartbeat then CommandComplete",
		  { 0x5a, 0x02, 0x08, 0x07, 0x62, 0x02, 0x38, 0x03, 0x28, 0x09 },
		  10 },
		{ "seq twice", { 0x20, 0x01, 0x20, 0x02, 0x5a, 0x00 }, 6 },
		{ "sender twice", { 0x12, 0x01, 'b', 0x5a, 0x00 }, 5 },
		{ "an unknown field", { 0x5a, 0x00, 0xf8, 0x07, 0x01 }, 5 },
		{ "an unknown message field", { 0xd2, 0x0f, 0x01, 0x00 }, 4 },
		{ "epoch as bytes", { 0x1a, 0x01, 0x05 }, 3 },
		{ "Heartbeat as a varint", { 0x58, 0x01 }, 2 },
		{ "answers_count past 32 bits",
		  { 0x38, 0x80, 0x80, 0x80, 0x80, 0x10, 0x28, 0x01, 0x62, 0x00 },
		  10 },
		{ "version past 32 bits", { 0x08, 0x81, 0x80, 0x80, 0x80, 0x10, 0x5a, 0x00 }, 8 },
		{ "a Batch of two", { 0xf2, 0x01, 0x06, 0x0a, 0x00, 0x0a, 0x02, 0x08, 0x01 }, 9 },
		{ "a Batch with another field", { 0xf2, 0x01, 0x04, 0x0a, 0x00, 0x10, 0x01 }, 7 },
		{ "a truncated message", { 0x5a, 0x05, 0x08 }, 3 },
	};

	for (size_t i = 0; i < ARRAY_SIZE(cases); i++) {
		uint8_t buf[sizeof(hdr) + 24];

		memcpy(buf, hdr, sizeof(hdr));
		memcpy(buf + sizeof(hdr), cases[i].tail, cases[i].len);
		same_as_protobuf_c(cases[i].what, buf, sizeof(hdr) + cases[i].len);
	}
}

/* Whether one of p's pieces is data, referenced. */
static bool references(const struct pb_pieces *p, const void *data)
{
	for (size_t i = 0; i < p->n; i++)
		if (p->piece[i].ref == data)
			return true;
	return false;
}

/* p's bytes are want's (pb_pieces_bytes flattens p). */
static void same_bytes(const char *what, struct pb_pieces *p, const uint8_t *want, size_t want_len)
{
	const uint8_t *got = pb_pieces_bytes(p);

	checks++;
	if (!got || p->len != want_len || (want_len && memcmp(got, want, want_len) != 0))
		FAIL("%s: %zu bytes in pieces are not protobuf-c's %zu", what, p->len, want_len);
}

/* The block env carries inline (WritePage's or ResyncPage's data), NULL for
 * none. */
static const void *block_of(const Envelope *env)
{
	const ProtobufCBinaryData *b =
		env->message_case == FTVM__PARTNER__ENVELOPE__MESSAGE_WRITE_PAGE
			? &env->write_page->data
		: env->message_case == FTVM__PARTNER__ENVELOPE__MESSAGE_RESYNC_PAGE
			? &env->resync_page->data
			: NULL;

	return b && b->len ? b->data : NULL;
}

/* codec_envelope_pieces packs env as protobuf-c does (want), its block
 * referenced where it has one. */
static void same_pieces(const char *what, const Envelope *env, const uint8_t *want, size_t want_len)
{
	const void *block = block_of(env);
	struct pb_pieces p = { 0 };
	int r = codec_envelope_pieces(env, &p);

	checks++;
	if (r < 0) {
		FAIL("%s: codec_envelope_pieces: %d", what, r);
		return;
	}
	if (block && !references(&p, block))
		FAIL("%s: the block was copied, not referenced (%zu pieces)", what, p.n);
	same_bytes(what, &p, want, want_len);
	pb_pieces_free(&p);
}

/* The header's edges: every field zero or empty, none set but the member,
 * a member whose case is set and whose message is NULL, a long sender,
 * numbers of every width. */
static void test_pieces_edges(void)
{
	Ftvm__Partner__Heartbeat hb = FTVM__PARTNER__HEARTBEAT__INIT;
	char long_sender[300];
	struct {
		const char *what;
		Envelope env;
	} cases[6];
	uint8_t *payload;
	size_t len;

	memset(long_sender, 's', sizeof(long_sender) - 1);
	long_sender[sizeof(long_sender) - 1] = '\0';
	for (size_t i = 0; i < ARRAY_SIZE(cases); i++)
		cases[i].env = (Envelope)FTVM__PARTNER__ENVELOPE__INIT;
	cases[0].what = "nothing set";
	cases[1].what = "only the member";
	cases[1].env.message_case = FTVM__PARTNER__ENVELOPE__MESSAGE_HEARTBEAT;
	cases[1].env.heartbeat = &hb;
	cases[2].what = "a member case with no message";
	cases[2].env.message_case = FTVM__PARTNER__ENVELOPE__MESSAGE_HEARTBEAT;
	cases[3].what = "an empty sender";
	cases[3].env.sender = "";
	cases[3].env.seq = 1;
	cases[4].what = "a sender of 299 bytes (two bytes of length)";
	cases[4].env.sender = long_sender;
	cases[4].env.epoch = 3;
	cases[5].what = "numbers of every width";
	cases[5].env.version = UINT32_MAX;
	cases[5].env.sender = "a";
	cases[5].env.epoch = UINT64_MAX;
	cases[5].env.seq = 127;
	cases[5].env.answers = 128;
	cases[5].env.lsn = (uint64_t)1 << 35;
	cases[5].env.answers_count = 16383;
	for (size_t i = 0; i < ARRAY_SIZE(cases); i++) {
		if (codec_payload_pack(&cases[i].env.base, &payload, &len) < 0) {
			FAIL("%s: codec_payload_pack", cases[i].what);
			continue;
		}
		same_pieces(cases[i].what, &cases[i].env, payload, len);
		free(payload);
	}
}

static void test_round_trips(void)
{
	struct sent s;
	int seen[64] = { 0 };

	sent_init(&s);
	for (size_t i = 0; i < ARRAY_SIZE(round_trip_cases); i++) {
		const struct round_trip_case *c = &round_trip_cases[i];
		Envelope sent = envelope(c->which, case_message(&s, c));
		Envelope *got = NULL;
		uint8_t *frame = NULL, *payload = NULL;
		size_t frame_len, payload_len;
		char err[256] = "";
		int r;

		seen[c->which] = 1;
		check_all_set(c->ctx, &sent.base);
		if (c->which == FTVM__PARTNER__ENVELOPE__MESSAGE_BATCH)
			for (int k = 0; k < BATCH_N; k++)
				check_all_set("Batch.envelopes", &batch_inner[k].base);
		eq_s(c->ctx, "codec_message_name(sent)", c->name, codec_message_name(&sent));

		r = codec_frame_pack(&sent.base, &frame, &frame_len);
		if (r < 0) {
			FAIL("%s: codec_frame_pack: %d", c->ctx, r);
			continue;
		}
		r = codec_envelope_decode_frame(frame, frame_len, FRAME_MAX_PAYLOAD_DEFAULT, &got,
						err, sizeof(err));
		if (r < 0 || !got) {
			FAIL("%s: codec_envelope_decode_frame: expected 0, got %d (%s)", c->ctx, r,
			     err);
		} else {
			cmp_envelope(c->ctx, &sent, got);
			eq_s(c->ctx, "codec_message_name(decoded)", c->name,
			     codec_message_name(got));
		}
		codec_envelope_free(got);
		got = NULL;

		/* The header-less form transports use decodes to the same. */
		r = codec_payload_pack(&sent.base, &payload, &payload_len);
		if (r < 0) {
			FAIL("%s: codec_payload_pack: %d", c->ctx, r);
		} else {
			if (payload_len != frame_len - FRAME_HEADER_SIZE ||
			    memcmp(payload, frame + FRAME_HEADER_SIZE, payload_len) != 0)
				FAIL("%s: codec_payload_pack differs from the frame's payload",
				     c->ctx);
			r = codec_envelope_decode(payload, payload_len, &got, err, sizeof(err));
			if (r < 0 || !got)
				FAIL("%s: codec_envelope_decode: expected 0, got %d (%s)", c->ctx,
				     r, err);
			else
				cmp_envelope(c->ctx, &sent, got);
			codec_envelope_free(got);
			same_as_protobuf_c(c->ctx, payload, payload_len);
			same_pieces(c->ctx, &sent, payload, payload_len);
		}
		free(payload);
		free(frame);
	}

	/* Every member of the oneof has a case above. */
	for (unsigned i = 0; i < ftvm__partner__envelope__descriptor.n_fields; i++) {
		const ProtobufCFieldDescriptor *f = &ftvm__partner__envelope__descriptor.fields[i];

		if ((f->flags & PROTOBUF_C_FIELD_FLAG_ONEOF) &&
		    (f->id >= ARRAY_SIZE(seen) || !seen[f->id]))
			FAIL("Envelope.%s (field %u) has no round-trip case", f->name, f->id);
	}
	sent_free(&s);
}

/* An envelope whose message this build does not know decodes, with no
 * message set (partner.proto: the receiver answers UNSUPPORTED, it does not
 * drop the link). */
static void test_unknown_message(void)
{
	Envelope sent = FTVM__PARTNER__ENVELOPE__INIT, *got = NULL;
	/* Field 99, length-delimited, 3 bytes: a message from a newer partner. */
	static const uint8_t extra[] = { 0x9a, 0x06, 0x03, 0x08, 0x01, 0x00 };
	uint8_t *frame, *bigger;
	size_t len;
	char err[256] = "";
	int r;

	sent.version = PV_CURRENT;
	sent.sender = "node-c";
	sent.seq = 9;
	eq_s("no message", "codec_message_name", "none", codec_message_name(&sent));
	if (codec_frame_pack(&sent.base, &frame, &len) < 0) {
		FAIL("codec_frame_pack failed");
		return;
	}
	bigger = xmalloc(len + sizeof(extra));
	memcpy(bigger, frame, len);
	memcpy(bigger + len, extra, sizeof(extra));
	frame_seal(bigger, len - FRAME_HEADER_SIZE + sizeof(extra));

	r = codec_envelope_decode_frame(frame, len, FRAME_MAX_PAYLOAD_DEFAULT, &got, err,
					sizeof(err));
	if (r < 0 || !got)
		FAIL("envelope with no message: expected 0, got %d (%s)", r, err);
	else
		eq_s("envelope with no message", "codec_message_name", "none",
		     codec_message_name(got));
	codec_envelope_free(got);
	got = NULL;

	r = codec_envelope_decode_frame(bigger, len + sizeof(extra), FRAME_MAX_PAYLOAD_DEFAULT,
					&got, err, sizeof(err));
	if (r < 0 || !got) {
		FAIL("envelope with an unknown field 99: expected 0, got %d (%s)", r, err);
	} else {
		eq_s("envelope with an unknown field 99", "codec_message_name", "none",
		     codec_message_name(got));
		eq_u("envelope with an unknown field 99", "seq", 9, got->seq);
	}
	codec_envelope_free(got);
	free(bigger);
	free(frame);
}

static void test_names(void)
{
	eq_s("codec_status_name", "OK", "OK", codec_status_name(FTVM__PARTNER__STATUS__STATUS_OK));
	eq_s("codec_status_name", "DENIED", "DENIED",
	     codec_status_name(FTVM__PARTNER__STATUS__STATUS_DENIED));
	eq_s("codec_status_name", "SHUTTING_DOWN", "SHUTTING_DOWN",
	     codec_status_name(FTVM__PARTNER__STATUS__STATUS_SHUTTING_DOWN));
	eq_s("codec_status_name", "ABORTED", "ABORTED",
	     codec_status_name(FTVM__PARTNER__STATUS__STATUS_ABORTED));
	eq_s("codec_status_name", "12", "ABORTED", codec_status_name(12));
	eq_s("codec_status_name", "1000", "UNKNOWN", codec_status_name(1000));
	eq_s("codec_status_name", "-1", "UNKNOWN", codec_status_name(-1));
	eq_s("codec_node_state_name", "ACTIVE", "active",
	     codec_node_state_name(FTVM__PARTNER__NODE_STATE__NODE_STATE_ACTIVE));
	eq_s("codec_node_state_name", "FENCED", "fenced",
	     codec_node_state_name(FTVM__PARTNER__NODE_STATE__NODE_STATE_FENCED));
	eq_s("codec_node_state_name", "99", "unknown", codec_node_state_name(99));
	eq_s("codec_node_state_name", "-1", "unknown", codec_node_state_name(-1));
}

/* ---- Refusals ----------------------------------------------------------- */

/* Decodes a whole frame (or with frame == 0, a bare payload) and expects
 * -EBADMSG, no envelope, and a reason; with want non-NULL the reason must
 * contain it. */
static void expect_bad(const char *what, const uint8_t *buf, size_t len, size_t max_payload,
		       int frame, const char *want)
{
	Envelope *got = NULL;
	char err[256];
	int r;

	memset(err, 0, sizeof(err));
	if (frame)
		r = codec_envelope_decode_frame(buf, len, max_payload, &got, err, sizeof(err));
	else
		r = codec_envelope_decode(buf, len, &got, err, sizeof(err));
	if (r != -EBADMSG)
		FAIL("%s: expected %d (-EBADMSG), got %d (%s)", what, -EBADMSG, r, err);
	if (got) {
		FAIL("%s: an envelope came back with the error", what);
		codec_envelope_free(got);
	}
	if (err[0] == '\0')
		FAIL("%s: no reason given", what);
	else if (want && !strstr(err, want))
		FAIL("%s: expected a reason mentioning \"%s\", got \"%s\"", what, want, err);
}

/* A valid frame around sent. */
static uint8_t *pack(const Envelope *sent, size_t *ret_len)
{
	uint8_t *frame;

	if (codec_frame_pack(&sent->base, &frame, ret_len) < 0) {
		fprintf(stderr, "codec_frame_pack failed\n");
		exit(99);
	}
	return frame;
}

/* A frame with any payload, sealed correctly. */
static uint8_t *seal(const uint8_t *payload, size_t len, size_t *ret_len)
{
	uint8_t *f = xmalloc(FRAME_HEADER_SIZE + len);

	if (len)
		memcpy(f + FRAME_HEADER_SIZE, payload, len);
	frame_seal(f, len);
	*ret_len = FRAME_HEADER_SIZE + len;
	return f;
}

static void test_truncated(struct sent *s)
{
	Envelope sent =
		envelope(FTVM__PARTNER__ENVELOPE__MESSAGE_ALLOCATE_MEMORY, &s->allocate_memory);
	size_t len;
	uint8_t *frame = pack(&sent, &len);

	for (size_t cut = 0; cut < len; cut++) {
		/* A copy of exactly cut bytes, so ASan sees any read past it. */
		uint8_t *part = xmalloc(cut);
		char what[64];

		memcpy(part, frame, cut);
		snprintf(what, sizeof(what), "first %zu of %zu bytes", cut, len);
		expect_bad(what, part, cut, FRAME_MAX_PAYLOAD_DEFAULT, 1, "truncated frame");
		free(part);
	}
	free(frame);
}

static void test_oversized(struct sent *s)
{
	Envelope sent = envelope(FTVM__PARTNER__ENVELOPE__MESSAGE_WRITE_PAGE, &s->write_page);
	uint8_t hdr[FRAME_HEADER_SIZE];
	size_t len;
	uint8_t *frame = pack(&sent, &len);

	/* A 4 KiB page against a 1 KiB limit: refused, whole or in part. */
	expect_bad("4 KiB page, 1 KiB limit", frame, len, 1024, 1, "too long");
	expect_bad("4 KiB page, 1 KiB limit, header only", frame, FRAME_HEADER_SIZE, 1024, 1,
		   "too long");
	expect_bad("4 KiB page, limit one byte short", frame, len, len - FRAME_HEADER_SIZE - 1, 1,
		   "too long");
	free(frame);

	/* A header claiming more than the default limit, nothing after it. */
	frame_seal(hdr, 0);
	hdr[4] = 0x7f;
	expect_bad("2 GiB claimed", hdr, sizeof(hdr), FRAME_MAX_PAYLOAD_DEFAULT, 1, "too long");
}

static void test_corrupted(struct sent *s)
{
	Envelope sent =
		envelope(FTVM__PARTNER__ENVELOPE__MESSAGE_RELEASE_POINTER, &s->release_pointer);
	size_t len;
	uint8_t *frame = pack(&sent, &len);

	for (size_t byte = 0; byte < len; byte++) {
		for (int bit = 0; bit < 8; bit++) {
			char what[64];

			snprintf(what, sizeof(what), "bit %d of byte %zu of %zu flipped", bit, byte,
				 len);
			frame[byte] ^= (uint8_t)(1u << bit);
			expect_bad(what, frame, len, FRAME_MAX_PAYLOAD_DEFAULT, 1, NULL);
			frame[byte] ^= (uint8_t)(1u << bit);
		}
		/* And the whole byte inverted. */
		frame[byte] ^= 0xff;
		expect_bad("byte inverted", frame, len, FRAME_MAX_PAYLOAD_DEFAULT, 1, NULL);
		frame[byte] ^= 0xff;
	}
	/* The checksum is what catches a flip in the payload. */
	frame[len - 1] ^= 1;
	expect_bad("last payload byte flipped", frame, len, FRAME_MAX_PAYLOAD_DEFAULT, 1,
		   "checksum");
	free(frame);
}

static void test_trailing(struct sent *s)
{
	Envelope sent = envelope(FTVM__PARTNER__ENVELOPE__MESSAGE_HEARTBEAT, &s->heartbeat);
	size_t len;
	uint8_t *frame = pack(&sent, &len);
	uint8_t *two = xmalloc(2 * len);

	memcpy(two, frame, len);
	memcpy(two + len, frame, len);
	expect_bad("one byte after the frame", two, len + 1, FRAME_MAX_PAYLOAD_DEFAULT, 1,
		   "after the frame");
	expect_bad("a second frame after the frame", two, 2 * len, FRAME_MAX_PAYLOAD_DEFAULT, 1,
		   "after the frame");
	free(two);
	free(frame);
}

static void test_bad_envelopes(struct sent *s)
{
	static const struct {
		const char *what;
		uint32_t version;
		const char *sender;
		uint64_t answers;
		uint32_t answers_count;
		int command_complete;
		const char *want;
	} cases[] = {
		{ "protocol version 2", PV_CURRENT + 1, "node-a", 1, 0, 0, "protocol version" },
		{ "protocol version 0xffffffff", 0xffffffffu, "node-a", 1, 0, 0,
		  "protocol version" },
		{ "no protocol version", 0, "node-a", 1, 0, 0, "protocol version" },
		{ "empty sender", PV_CURRENT, "", 1, 0, 0, "sender" },
		{ "CommandComplete with answers=0", PV_CURRENT, "node-a", 0, 0, 1, "answers" },
		{ "a run reaching below seq 1", PV_CURRENT, "node-a", 2, 3, 1,
		  "run of 3 requests ending at seq 2" },
		{ "a run longer than 64", PV_CURRENT, "node-a", 100, 65, 1, "run of 65" },
		{ "a run of 2^32 - 1", PV_CURRENT, "node-a", UINT64_MAX, UINT32_MAX, 1,
		  "run of 4294967295" },
	};

	for (size_t i = 0; i < ARRAY_SIZE(cases); i++) {
		Envelope sent;
		uint8_t *frame;
		size_t len;

		if (cases[i].command_complete) {
			s->command_complete.payload_case =
				FTVM__PARTNER__COMMAND_COMPLETE__PAYLOAD_SPACE;
			s->command_complete.space = &s->space;
			sent = envelope(FTVM__PARTNER__ENVELOPE__MESSAGE_COMMAND_COMPLETE,
					&s->command_complete);
		} else {
			sent = envelope(FTVM__PARTNER__ENVELOPE__MESSAGE_HELLO, &s->hello);
		}
		sent.version = cases[i].version;
		sent.sender = (char *)cases[i].sender;
		sent.answers = cases[i].answers;
		sent.answers_count = cases[i].answers_count;
		frame = pack(&sent, &len);
		expect_bad(cases[i].what, frame, len, FRAME_MAX_PAYLOAD_DEFAULT, 1, cases[i].want);
		expect_bad(cases[i].what, frame + FRAME_HEADER_SIZE, len - FRAME_HEADER_SIZE,
			   FRAME_MAX_PAYLOAD_DEFAULT, 0, cases[i].want);
		free(frame);
	}

	/* The bare minimum is fine: answers=0 matters only for CommandComplete. */
	{
		Envelope sent = envelope(FTVM__PARTNER__ENVELOPE__MESSAGE_HEARTBEAT, &s->heartbeat),
			 *got = NULL;
		char err[256] = "";
		uint8_t *frame;
		size_t len;
		int r;

		sent.answers = 0;
		sent.seq = 0;
		sent.epoch = 0;
		frame = pack(&sent, &len);
		r = codec_envelope_decode_frame(frame, len, FRAME_MAX_PAYLOAD_DEFAULT, &got, err,
						sizeof(err));
		if (r < 0)
			FAIL("Heartbeat with answers=0: expected 0, got %d (%s)", r, err);
		codec_envelope_free(got);
		free(frame);
	}
}

/* Payloads protobuf cannot parse, each in a frame that is itself fine. */
static void test_unparsable(void)
{
	static const struct {
		const char *what;
		uint8_t bytes[16];
		size_t len;
	} cases[] = {
		{ "wire type 7", { 0x0f }, 1 },
		{ "wire type 6", { 0x0e, 0x00 }, 2 },
		{ "field number 0", { 0x00, 0x01 }, 2 },
		{ "tag varint never ends", { 0x80, 0x80, 0x80, 0x80, 0x80 }, 5 },
		{ "version varint never ends", { 0x08, 0xff, 0xff }, 3 },
		{ "11-byte varint",
		  { 0x08, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0x01 },
		  12 },
		{ "sender longer than the payload", { 0x08, 0x01, 0x12, 0x10, 'n', 'o' }, 6 },
		{ "sender length varint cut", { 0x08, 0x01, 0x12, 0x80 }, 4 },
		{ "Hello longer than the payload",
		  { 0x08, 0x01, 0x12, 0x01, 'a', 0x52, 0x05, 0x0a },
		  8 },
		{ "Hello with a bad inner tag",
		  { 0x08, 0x01, 0x12, 0x01, 'a', 0x52, 0x01, 0x0f },
		  8 },
		{ "sender as a varint", { 0x08, 0x01, 0x10, 0x05 }, 4 },
		{ "fixed64 cut short", { 0x08, 0x01, 0x19, 0x01, 0x02 }, 5 },
	};

	for (size_t i = 0; i < ARRAY_SIZE(cases); i++) {
		size_t len;
		uint8_t *frame = seal(cases[i].bytes, cases[i].len, &len);

		expect_bad(cases[i].what, frame, len, FRAME_MAX_PAYLOAD_DEFAULT, 1, "parse");
		expect_bad(cases[i].what, cases[i].bytes, cases[i].len, FRAME_MAX_PAYLOAD_DEFAULT,
			   0, "parse");
		free(frame);
	}
	/* An empty payload parses, to an envelope with no version. */
	{
		size_t len;
		uint8_t *frame = seal(NULL, 0, &len);

		expect_bad("empty payload", frame, len, FRAME_MAX_PAYLOAD_DEFAULT, 1,
			   "protocol version");
		free(frame);
	}
}

/* A short error buffer truncates the reason and overruns nothing. */
static void test_short_err(void)
{
	char err[8];
	Envelope *got = NULL;
	static const uint8_t junk[] = { 'X', 'Y', 1, 0, 0, 0, 0, 0, 0, 0, 0, 0 };

	memset(err, 0x55, sizeof(err));
	if (codec_envelope_decode_frame(junk, sizeof(junk), FRAME_MAX_PAYLOAD_DEFAULT, &got, err,
					sizeof(err)) != -EBADMSG)
		FAIL("short error buffer: expected -EBADMSG");
	if (memchr(err, '\0', sizeof(err)) == NULL)
		FAIL("short error buffer: the reason is not terminated");
	codec_envelope_free(got);
}

/* Whatever comes in, decoding returns 0 with a well-formed envelope or
 * -EBADMSG with a reason. Three shapes of input: raw random bytes (they die at
 * the frame header), random payloads in valid frames (they reach protobuf),
 * and valid payloads with a few bytes changed, in valid frames (they get
 * deepest). The seed is fixed, so a failure reproduces. */
#define RANDOM_ROUNDS 20000

static void test_random(struct sent *s)
{
	Envelope templ =
		envelope(FTVM__PARTNER__ENVELOPE__MESSAGE_COMMAND_COMPLETE, &s->command_complete);
	uint8_t *valid;
	size_t valid_len;
	unsigned decoded[3] = { 0 };

	s->command_complete.payload_case = FTVM__PARTNER__COMMAND_COMPLETE__PAYLOAD_SENSE;
	s->command_complete.sense = &s->sense;
	valid = pack(&templ, &valid_len);

	rng_state = 0xdecafbadu;
	for (int round = 0; round < RANDOM_ROUNDS; round++) {
		int shape = round % 3;
		size_t len = rng() % 200;
		uint8_t *buf, *frame = NULL;
		size_t frame_len = 0;
		Envelope *got = NULL;
		char err[256];
		int r;

		if (shape == 2)
			len = valid_len - FRAME_HEADER_SIZE;
		buf = xmalloc(len);
		if (shape == 2) {
			int changes = 1 + (int)(rng() % 4);

			memcpy(buf, valid + FRAME_HEADER_SIZE, len);
			for (int k = 0; k < changes; k++)
				buf[rng() % len] = (uint8_t)rng();
		} else {
			for (size_t i = 0; i < len; i++)
				buf[i] = (uint8_t)rng();
		}
		if (shape == 0) {
			frame = buf;
			frame_len = len;
		} else {
			frame = seal(buf, len, &frame_len);
		}

		if (shape != 0)
			same_as_protobuf_c("a random payload", buf, len);
		err[0] = '\0';
		r = codec_envelope_decode_frame(frame, frame_len, FRAME_MAX_PAYLOAD_DEFAULT, &got,
						err, sizeof(err));
		if (shape == 0 && r != -EBADMSG) {
			FAIL("random round %d: %zu random bytes: expected -EBADMSG, got %d", round,
			     len, r);
		} else if (r == 0) {
			decoded[shape]++;
			if (!got || got->version != PV_CURRENT || !got->sender || !got->sender[0] ||
			    (got->message_case ==
				     FTVM__PARTNER__ENVELOPE__MESSAGE_COMMAND_COMPLETE &&
			     got->answers == 0))
				FAIL("random round %d: accepted an envelope that breaks the rules",
				     round);
			else
				(void)codec_message_name(got);
		} else if (r != -EBADMSG) {
			FAIL("random round %d: expected 0 or -EBADMSG, got %d", round, r);
		} else if (got) {
			FAIL("random round %d: an envelope came back with the error", round);
		} else if (err[0] == '\0') {
			FAIL("random round %d: -EBADMSG with no reason", round);
		}
		codec_envelope_free(got);
		if (frame != buf)
			free(frame);
		free(buf);
	}
	printf("codec: %d random inputs: %u raw, %u random payloads, %u mutated payloads "
	       "decoded\n",
	       RANDOM_ROUNDS, decoded[0], decoded[1], decoded[2]);
	free(valid);
}

/* The page block an envelope carries inline, referenced when packed in
 * pieces: WritePage's and ResyncPage's data; nothing of an empty one (a
 * landed ResyncPage) or of any other message. */
static void test_envelope_block(void)
{
	static uint8_t block[4096];
	Ftvm__Partner__WritePage wp = FTVM__PARTNER__WRITE_PAGE__INIT;
	Ftvm__Partner__ResyncPage rp = FTVM__PARTNER__RESYNC_PAGE__INIT;
	Ftvm__Partner__SpaceRequest sr = FTVM__PARTNER__SPACE_REQUEST__INIT;
	Envelope env = FTVM__PARTNER__ENVELOPE__INIT;
	struct pb_pieces p = { 0 };

	memset(block, 0x3c, sizeof(block));
	wp.data = (ProtobufCBinaryData){ .len = sizeof(block), .data = block };
	env.message_case = FTVM__PARTNER__ENVELOPE__MESSAGE_WRITE_PAGE;
	env.write_page = &wp;
	CHECK(codec_envelope_pieces(&env, &p) == 0 && references(&p, block), "WritePage's block");
	pb_pieces_clear(&p);
	rp.data = wp.data;
	env.message_case = FTVM__PARTNER__ENVELOPE__MESSAGE_RESYNC_PAGE;
	env.resync_page = &rp;
	CHECK(codec_envelope_pieces(&env, &p) == 0 && references(&p, block), "ResyncPage's block");
	pb_pieces_clear(&p);
	rp.data.len = 0; /* landed: no data */
	CHECK(codec_envelope_pieces(&env, &p) == 0 && p.n == 1 && !p.piece[0].ref,
	      "a landed ResyncPage referenced something");
	pb_pieces_clear(&p);
	env.message_case = FTVM__PARTNER__ENVELOPE__MESSAGE_SPACE_REQUEST;
	env.space_request = &sr;
	CHECK(codec_envelope_pieces(&env, &p) == 0 && p.n == 1 && !p.piece[0].ref,
	      "a SpaceRequest referenced something");
	pb_pieces_free(&p);
}

/* codec_batch_pieces against protobuf-c: an outer header and a Batch of the
 * first n of a page write's requests, its answer, a heartbeat, an envelope
 * with an unknown field (packed whole), one with no member and small and
 * large blocks, for n from 1 to past the plans the codec keeps on its
 * stack; every large block referenced. */
static void test_batch_pieces(void)
{
	enum {
		N = 12
	};
	static uint8_t blocks[N][4096];
	Envelope envs[N], *ptrs[N], outer = FTVM__PARTNER__ENVELOPE__INIT;
	Ftvm__Partner__WritePage wps[N];
	Ftvm__Partner__AllocateWrite aw = FTVM__PARTNER__ALLOCATE_WRITE__INIT;
	Ftvm__Partner__ReleasePointer rel = FTVM__PARTNER__RELEASE_POINTER__INIT;
	CommandComplete cc = FTVM__PARTNER__COMMAND_COMPLETE__INIT;
	Ftvm__Partner__Heartbeat hb = FTVM__PARTNER__HEARTBEAT__INIT;
	ProtobufCMessageUnknownField unknown = { .tag = 900,
						 .wire_type = PROTOBUF_C_WIRE_TYPE_VARINT,
						 .len = 1,
						 .data = (uint8_t[]){ 0x05 } };
	struct pb_pieces p = { 0 };

	aw.guid = rel.guid = "a-12";
	aw.page = rel.page = 9;
	aw.owner = rel.owner = "a/4242/7";
	rel.modified = true;
	rel.version = 301;
	rel.crc32c = 0xfeedf00d;
	cc.reason = "a reason";
	cc.applied_lsn = 77;
	hb.sent_us = 123456789;
	for (int i = 0; i < N; i++) {
		envs[i] = (Envelope)FTVM__PARTNER__ENVELOPE__INIT;
		envs[i].version = PV_CURRENT;
		envs[i].sender = "a";
		envs[i].epoch = 5;
		envs[i].seq = 1000 + (uint64_t)i;
		envs[i].lsn = i % 3 ? 0 : 40000 + (uint64_t)i;
		ptrs[i] = &envs[i];
		memset(blocks[i], 'A' + i, sizeof(blocks[i]));
		wps[i] = (Ftvm__Partner__WritePage)FTVM__PARTNER__WRITE_PAGE__INIT;
		wps[i].guid = "a-12";
		wps[i].page = (uint64_t)i;
		wps[i].crc32c = 0x1234u * (uint32_t)i;
		wps[i].data = (ProtobufCBinaryData){ .len = i % 4 == 1 ? 20 : sizeof(blocks[i]),
						     .data = blocks[i] };
		switch (i % 7) {
		case 0:
			envs[i].message_case = FTVM__PARTNER__ENVELOPE__MESSAGE_ALLOCATE_WRITE;
			envs[i].allocate_write = &aw;
			break;
		case 1:
		case 4:
			envs[i].message_case = FTVM__PARTNER__ENVELOPE__MESSAGE_WRITE_PAGE;
			envs[i].write_page = &wps[i];
			break;
		case 2:
			envs[i].message_case = FTVM__PARTNER__ENVELOPE__MESSAGE_RELEASE_POINTER;
			envs[i].release_pointer = &rel;
			break;
		case 3:
			envs[i].message_case = FTVM__PARTNER__ENVELOPE__MESSAGE_COMMAND_COMPLETE;
			envs[i].command_complete = &cc;
			envs[i].answers = 999;
			envs[i].answers_count = 3;
			break;
		case 5:
			envs[i].message_case = FTVM__PARTNER__ENVELOPE__MESSAGE_HEARTBEAT;
			envs[i].heartbeat = &hb;
			envs[i].base.n_unknown_fields = 1;
			envs[i].base.unknown_fields = &unknown;
			break;
		default:
			break; /* no member */
		}
	}
	outer.version = PV_CURRENT;
	outer.sender = "a";
	outer.epoch = 5;
	for (size_t n = 1; n <= N; n++) {
		Ftvm__Partner__Batch batch = FTVM__PARTNER__BATCH__INIT;
		ProtobufCBinaryData entries[N];
		Envelope whole = outer;
		uint8_t *want;
		size_t want_len;
		char what[64];

		for (size_t i = 0; i < n; i++)
			CHECK(codec_payload_pack(&envs[i].base, &entries[i].data,
						 &entries[i].len) == 0,
			      "entry %zu packs", i);
		batch.n_envelopes = n;
		batch.envelopes = entries;
		whole.message_case = FTVM__PARTNER__ENVELOPE__MESSAGE_BATCH;
		whole.batch = &batch;
		CHECK(codec_payload_pack(&whole.base, &want, &want_len) == 0, "the batch packs");
		snprintf(what, sizeof(what), "a batch of %zu", n);
		pb_pieces_clear(&p);
		CHECK(codec_batch_pieces(&outer, ptrs, n, &p) == 0, "%s: packed in pieces", what);
		for (size_t i = 0; i < n; i++)
			if (block_of(&envs[i]) && wps[i].data.len >= PB_PIECES_REF_MIN)
				CHECK(references(&p, blocks[i]), "%s: block %zu referenced", what,
				      i);
		same_bytes(what, &p, want, want_len);
		free(want);
		for (size_t i = 0; i < n; i++)
			free(entries[i].data);
	}
	pb_pieces_free(&p);
}

/* ---- codec_envelope_decode_borrowed against codec_envelope_decode ------ */

/* An envelope's packed bytes (the caller frees them), NULL for NULL. */
static uint8_t *env_bytes(const Envelope *env, size_t *ret_len)
{
	size_t len;
	uint8_t *buf;

	if (!env)
		return NULL;
	len = protobuf_c_message_get_packed_size(&env->base);
	buf = xmalloc(len ? len : 1);
	protobuf_c_message_pack(&env->base, buf);
	*ret_len = len;
	return buf;
}

/* Both decoders on payload: the same verdict and, when they take it, the
 * same envelope and the same envelopes inside it. Returns whether the
 * borrowing one took it. */
static bool same_decoding(const char *what, const uint8_t *payload, size_t len)
{
	Envelope *a = NULL, *b = NULL;
	char err_a[256] = "", err_b[256] = "";
	int ra = codec_envelope_decode(payload, len, &a, err_a, sizeof(err_a));
	int rb = codec_envelope_decode_borrowed(payload, len, &b, err_b, sizeof(err_b));
	size_t la = 0, lb = 0;
	uint8_t *ba, *bb;

	if (ra != rb || (ra == 0) != (a != NULL) || (rb == 0) != (b != NULL)) {
		FAIL("%s: decode says %d (%s), borrowed %d (%s)", what, ra, err_a, rb, err_b);
		goto out;
	}
	if (ra < 0)
		goto out;
	ba = env_bytes(a, &la);
	bb = env_bytes(b, &lb);
	if (la != lb || memcmp(ba, bb, la) != 0)
		FAIL("%s: the envelopes differ (%zu and %zu bytes packed)", what, la, lb);
	free(ba);
	free(bb);
	if (a->message_case == FTVM__PARTNER__ENVELOPE__MESSAGE_BATCH &&
	    b->message_case == FTVM__PARTNER__ENVELOPE__MESSAGE_BATCH &&
	    a->batch->n_envelopes == b->batch->n_envelopes) {
		for (size_t i = 0; i < a->batch->n_envelopes; i++) {
			Envelope *ia = NULL, *ib = NULL;
			int ria = codec_batch_envelope_decode(a, i, &ia, err_a, sizeof(err_a));
			int rib = codec_batch_envelope_decode(b, i, &ib, err_b, sizeof(err_b));

			ba = env_bytes(ia, &la);
			bb = env_bytes(ib, &lb);
			if (ria != rib || (ba && bb && (la != lb || memcmp(ba, bb, la) != 0)))
				FAIL("%s: entry %zu decodes to %d and %d, or differently", what, i,
				     ria, rib);
			free(ba);
			free(bb);
		}
	}
out:
	codec_envelope_free(a);
	codec_envelope_free(b);
	return rb == 0;
}

/* A Batch of n random WritePages and answers, packed; the caller frees it. */
static uint8_t *random_batch(size_t n, size_t *ret_len)
{
	Envelope outer = FTVM__PARTNER__ENVELOPE__INIT, inner;
	Ftvm__Partner__Batch batch = FTVM__PARTNER__BATCH__INIT;
	ProtobufCBinaryData entries[8];
	Ftvm__Partner__WritePage wp;
	CommandComplete cc;
	uint8_t block[600], *out;

	for (size_t i = 0; i < n; i++) {
		ftvm__partner__envelope__init(&inner);
		inner.version = PV_CURRENT;
		inner.sender = rng() % 4 ? "a" : "node-with-a-longer-name";
		inner.epoch = rng() % 3;
		inner.seq = rng();
		inner.lsn = (uint64_t)rng() << (rng() % 32);
		if (rng() % 2) {
			ftvm__partner__write_page__init(&wp);
			for (size_t k = 0; k < sizeof(block); k++)
				block[k] = (uint8_t)rng();
			wp.guid = "a-17";
			wp.page = rng() % 64;
			wp.data = (ProtobufCBinaryData){ .len = rng() % sizeof(block),
							 .data = block };
			wp.crc32c = rng();
			inner.message_case = FTVM__PARTNER__ENVELOPE__MESSAGE_WRITE_PAGE;
			inner.write_page = &wp;
		} else {
			ftvm__partner__command_complete__init(&cc);
			cc.status = rng() % 3;
			cc.applied_lsn = rng();
			inner.answers = 1 + rng() % 1000;
			inner.message_case = FTVM__PARTNER__ENVELOPE__MESSAGE_COMMAND_COMPLETE;
			inner.command_complete = &cc;
		}
		entries[i].data = env_bytes(&inner, &entries[i].len);
	}
	outer.version = rng() % 8 ? PV_CURRENT : rng() % 3;
	outer.sender = rng() % 8 ? "b" : "";
	outer.epoch = rng() % 5;
	outer.seq = rng() % 4 ? 0 : rng();
	outer.answers = rng() % 4 ? 0 : rng();
	outer.lsn = rng() % 4 ? 0 : rng();
	batch.n_envelopes = n;
	batch.envelopes = entries;
	outer.message_case = FTVM__PARTNER__ENVELOPE__MESSAGE_BATCH;
	outer.batch = &batch;
	out = env_bytes(&outer, ret_len);
	for (size_t i = 0; i < n; i++)
		free(entries[i].data);
	return out;
}

/* Batches as sent, then each cut short and with bytes changed: the
 * borrowing decoder and protobuf-c's agree on every one. */
static void test_borrowed_decode(void)
{
	unsigned taken = 0, tried = 0;

	for (int round = 0; round < 300; round++) {
		size_t len;
		uint8_t *payload = random_batch(rng() % 8, &len), *bad;
		char what[64];

		snprintf(what, sizeof(what), "batch %d as sent", round);
		taken += same_decoding(what, payload, len);
		tried++;
		for (int k = 0; k < 4 && len; k++) {
			size_t cut = rng() % len;

			snprintf(what, sizeof(what), "batch %d cut at %zu", round, cut);
			bad = xmalloc(cut ? cut : 1);
			memcpy(bad, payload, cut);
			taken += same_decoding(what, bad, cut);
			free(bad);
			bad = xmalloc(len);
			memcpy(bad, payload, len);
			for (int c = 1 + (int)(rng() % 3); c > 0; c--)
				bad[rng() % len] = (uint8_t)rng();
			snprintf(what, sizeof(what), "batch %d with bytes changed", round);
			taken += same_decoding(what, bad, len);
			free(bad);
			tried += 2;
		}
		free(payload);
	}
	CHECK(taken > 300, "%u of %u inputs decoded: too few to compare", taken, tried);
}

/* cc packed, as bytes for comparison; the caller frees them. */
static uint8_t *cc_packed(const CommandComplete *cc, size_t *ret_len)
{
	size_t len = ftvm__partner__command_complete__get_packed_size(cc);
	uint8_t *buf = xmalloc(len ? len : 1);

	ftvm__partner__command_complete__pack(cc, buf);
	*ret_len = len;
	return buf;
}

/* A copy of cc packs to the same bytes after everything cc pointed to was
 * overwritten (and, under ASan, after the original's memory is gone). */
static void check_copy(const char *what, CommandComplete *cc, char *reason, size_t reason_len)
{
	size_t want_len, got_len;
	uint8_t *want = cc_packed(cc, &want_len), *got;
	CommandComplete *copy = codec_command_complete_copy(cc);

	CHECK(copy != NULL, "%s: copied", what);
	if (!copy) {
		free(want);
		return;
	}
	memset(reason, 'x', reason_len - 1);
	got = cc_packed(copy, &got_len);
	CHECK(got_len == want_len && memcmp(got, want, want_len) == 0,
	      "%s: the copy packs to %zu bytes, the original to %zu", what, got_len, want_len);
	codec_command_complete_free(copy);
	free(got);
	free(want);
}

/* codec_command_complete_copy: one as it is (status, reason, LSN), one
 * with a payload, one with runs; codec_command_complete_free(NULL). */
static void test_command_complete_copy(void)
{
	CommandComplete cc = FTVM__PARTNER__COMMAND_COMPLETE__INIT;
	Ftvm__Partner__LockStatus lock = FTVM__PARTNER__LOCK_STATUS__INIT;
	Ftvm__Partner__Landing run = FTVM__PARTNER__LANDING__INIT, *runs[1] = { &run };
	char reason[64], owner[16], *lock_owners[1] = { owner };

	snprintf(reason, sizeof(reason), "no frames for page 7 of a-12");
	cc.status = FTVM__PARTNER__STATUS__STATUS_NO_SPACE;
	cc.reason = reason;
	cc.applied_lsn = 0x123456789aull;
	check_copy("status, reason and LSN", &cc, reason, sizeof(reason));
	cc.reason = NULL;
	check_copy("no reason", &cc, reason, sizeof(reason));

	snprintf(reason, sizeof(reason), "locked");
	snprintf(owner, sizeof(owner), "a:client-3");
	cc.reason = reason;
	lock.mode = FTVM__PARTNER__LOCK_MODE__LOCK_MODE_WRITE;
	lock.n_owners = 1;
	lock.owners = lock_owners;
	lock.version = 41;
	cc.payload_case = FTVM__PARTNER__COMMAND_COMPLETE__PAYLOAD_LOCK;
	cc.lock = &lock;
	check_copy("a lock payload", &cc, owner, sizeof(owner));
	lock.n_owners = 0;
	lock.mode = FTVM__PARTNER__LOCK_MODE__LOCK_MODE_NONE;
	check_copy("a lock payload with no owner", &cc, reason, sizeof(reason));

	cc.payload_case = FTVM__PARTNER__COMMAND_COMPLETE__PAYLOAD__NOT_SET;
	cc.lock = NULL;
	run.frame = 4096;
	run.frames = 16;
	run.generation = 3;
	cc.n_grants = 1;
	cc.grants = runs;
	check_copy("a grant", &cc, reason, sizeof(reason));
	codec_command_complete_free(NULL);
}

int main(void)
{
	struct sent s;

	rng_seed(0x1234567u);
	test_round_trips();
	test_pieces_edges();
	test_unknown_message();
	test_decode_edges();
	test_names();
	test_envelope_block();
	test_batch_pieces();
	test_command_complete_copy();
	test_borrowed_decode();

	sent_init(&s);
	test_truncated(&s);
	test_oversized(&s);
	test_corrupted(&s);
	test_trailing(&s);
	test_bad_envelopes(&s);
	test_unparsable();
	test_short_err();
	test_random(&s);
	sent_free(&s);

	if (failures) {
		fprintf(stderr, "%d check(s) failed\n", failures);
		return 1;
	}
	printf("codec: all checks passed\n");
	return 0;
}
