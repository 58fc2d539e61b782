#include "pb_arena.h"

#include <assert.h>
#include <stdalign.h>
#include <stdbool.h>
#include <stdlib.h>

/* Under ASan what no piece was given stays poisoned, so a read or write past
 * a piece into the rest of its block is reported as it would be with malloc. */
#if defined(__has_feature)
#if __has_feature(address_sanitizer)
#define __SANITIZE_ADDRESS__ 1
#endif
#endif
#ifdef __SANITIZE_ADDRESS__
#include <sanitizer/asan_interface.h>
#else
#define ASAN_POISON_MEMORY_REGION(addr, size) ((void)(addr), (void)(size))
#define ASAN_UNPOISON_MEMORY_REGION(addr, size) ((void)(addr), (void)(size))
#endif

#define ALIGN alignof(max_align_t)

struct block {
	struct block *next; /* the one filled before */
	size_t size, used;
	alignas(max_align_t) unsigned char data[];
};

/* Aligned so that the first block can follow it in the same malloc. */
struct pb_arena {
	alignas(max_align_t) ProtobufCAllocator allocator;
	struct block *current; /* where pieces come from */
	/* What the next unpack's message is prefixed with (see alloc()). */
	bool prefix_due, prefix_owns;
};

/* Right before each message unpacked here: pb_arena_free() and
 * pb_arena_unpack_with() find the arena from it. */
struct prefix {
	struct pb_arena *arena;
	bool owns;
};
#define PREFIX_SIZE ((sizeof(struct prefix) + ALIGN - 1) / ALIGN * ALIGN)

static struct block *block_new(size_t size)
{
	struct block *b = malloc(sizeof(*b) + size);

	if (!b)
		return NULL;
	b->next = NULL;
	b->size = size;
	b->used = 0;
	ASAN_POISON_MEMORY_REGION(b->data, size);
	return b;
}

static void *bump(struct pb_arena *a, size_t size)
{
	struct block *b = a->current;
	void *p;

	if (size > SIZE_MAX / 2)
		return NULL;
	size = (size + ALIGN - 1) / ALIGN * ALIGN;
	if (b->size - b->used < size) {
		b = block_new(size > b->size ? size : b->size);
		if (!b)
			return NULL;
		b->next = a->current;
		a->current = b;
	}
	p = b->data + b->used;
	b->used += size;
	ASAN_UNPOISON_MEMORY_REGION(p, size);
	return p;
}

/* protobuf-c asks for the message itself first (protobuf_c_message_unpack
 * has done so in every release), so that piece gets the prefix in front. */
static void *alloc(void *data, size_t size)
{
	struct pb_arena *a = data;
	struct prefix *pre;

	if (!a->prefix_due)
		return bump(a, size);
	if (size > SIZE_MAX / 2)
		return NULL;
	pre = bump(a, PREFIX_SIZE + size);
	if (!pre)
		return NULL;
	pre->arena = a;
	pre->owns = a->prefix_owns;
	a->prefix_due = false;
	return (unsigned char *)pre + PREFIX_SIZE;
}

/* Pieces go with the arena; protobuf-c's frees of them on a failed unpack
 * are no-ops. */
static void piece_free(void *data, void *p)
{
}

/* The arena freed last (its first block, which came with it), kept for the
 * next unpack that fits in it: a node unpacks every frame it reads and every
 * client request into an arena of twice the payload (10 KiB for a page
 * write), and freeing it to take the same again from glibc cost a large
 * malloc each time, and with it the consolidation of glibc's small free
 * chunks. One per thread, the largest seen lately. */
static _Thread_local struct pb_arena *spare;

static void arena_free(struct pb_arena *a)
{
	struct block *b = a->current, *next;

	/* The first block came with the arena. */
	for (; b->next; b = next) {
		next = b->next;
		free(b);
	}
	if (spare && spare->current->size >= b->size) {
		free(a);
		return;
	}
	free(spare);
	a->current = b;
	ASAN_POISON_MEMORY_REGION(b->data, b->size); /* nothing may use it now */
	spare = a;
}

/* An arena with a first block of size bytes at least: the spare, or new. */
static struct pb_arena *arena_take(size_t size)
{
	struct pb_arena *a = spare;

	if (a && a->current->size >= size) {
		spare = NULL;
		size = a->current->size;
	} else {
		a = malloc(sizeof(*a) + sizeof(struct block) + size);
		if (!a)
			return NULL;
	}
	*a = (struct pb_arena){
		.allocator = { .alloc = alloc, .free = piece_free, .allocator_data = a },
		.current = (struct block *)(a + 1),
	};
	*a->current = (struct block){ .size = size };
	ASAN_POISON_MEMORY_REGION(a->current->data, size);
	return a;
}

static const struct prefix *prefix_of(const ProtobufCMessage *msg)
{
	return (const struct prefix *)((const unsigned char *)msg - PREFIX_SIZE);
}

static ProtobufCMessage *unpack(struct pb_arena *a, bool owns,
				const ProtobufCMessageDescriptor *desc, size_t len,
				const uint8_t *data)
{
	ProtobufCMessage *msg;

	a->prefix_due = true;
	a->prefix_owns = owns;
	msg = protobuf_c_message_unpack(desc, &a->allocator, len, data);
	assert(!msg || (prefix_of(msg)->arena == a && !a->prefix_due));
	return msg;
}

ProtobufCMessage *pb_arena_unpack(const ProtobufCMessageDescriptor *desc, size_t len,
				  const uint8_t *data)
{
	/* protobuf-c copies each string and bytes field once, so a payload
	 * needs about its length plus the structs; twice that leaves room for
	 * a Batch's envelopes, unpacked into the same arena after it. */
	size_t size = len < SIZE_MAX / 4 ? 2 * len + 2048 : SIZE_MAX / 2;
	struct pb_arena *a = arena_take(size);
	ProtobufCMessage *msg;

	if (!a)
		return NULL;
	msg = unpack(a, true, desc, len, data);
	if (!msg)
		arena_free(a);
	return msg;
}

ProtobufCMessage *pb_arena_message_new(const ProtobufCMessageDescriptor *desc, size_t size)
{
	struct pb_arena *a;
	ProtobufCMessage *msg;

	if (size > SIZE_MAX / 2)
		return NULL;
	a = arena_take(size + PREFIX_SIZE + desc->sizeof_message);
	if (!a)
		return NULL;
	a->prefix_due = true;
	a->prefix_owns = true;
	msg = alloc(a, desc->sizeof_message);
	if (!msg) {
		arena_free(a);
		return NULL;
	}
	desc->message_init(msg);
	return msg;
}

ProtobufCMessage *pb_arena_message_new_with(const ProtobufCMessage *owner,
					    const ProtobufCMessageDescriptor *desc)
{
	struct pb_arena *a = prefix_of(owner)->arena;
	ProtobufCMessage *msg;

	a->prefix_due = true;
	a->prefix_owns = false;
	msg = alloc(a, desc->sizeof_message);
	if (!msg) {
		a->prefix_due = false;
		return NULL;
	}
	desc->message_init(msg);
	return msg;
}

void *pb_arena_alloc(const ProtobufCMessage *owner, size_t size)
{
	return bump(prefix_of(owner)->arena, size ? size : 1);
}

ProtobufCMessage *pb_arena_unpack_with(const ProtobufCMessage *owner,
				       const ProtobufCMessageDescriptor *desc, size_t len,
				       const uint8_t *data)
{
	return unpack(prefix_of(owner)->arena, false, desc, len, data);
}

void pb_arena_free(const ProtobufCMessage *msg)
{
	if (msg && prefix_of(msg)->owns)
		arena_free(prefix_of(msg)->arena);
}
