/* Replies into ftvm.h's structs (reply_read.h). */
#include "reply_read.h"

#include <stdio.h>
#include <string.h>

static void copy_str(char *dst, size_t size, const char *src)
{
	snprintf(dst, size, "%s", src ? src : "");
}

/* Each row of FTVM_STATUS_FIELDS (ftvm_status.h) from its field of the reply. */
#define FROM_REPLY(kind, name, wire, json, text) FROM_REPLY_##kind(ret->name, WIRE_##wire);
#define WIRE_PB(msg, field) msg->field
#define WIRE_LIST(i) ((i) < reply->n_counters ? reply->counters[i] : 0)
#define FROM_REPLY_U64 FROM_REPLY_NUM
#define FROM_REPLY_U32 FROM_REPLY_NUM
#define FROM_REPLY_I64 FROM_REPLY_NUM
#define FROM_REPLY_BOOL FROM_REPLY_NUM
#define FROM_REPLY_NUM(member, value) member = value
#define FROM_REPLY_STR(n) FROM_REPLY_STRING
#define FROM_REPLY_STRING(member, value) copy_str(member, sizeof(member), value)

void reply_read_status(const Ftvm__Client__StatusReply *reply, struct ftvm_node_status *ret)
{
	static const Ftvm__Client__PartnerStatus no_partner = FTVM__CLIENT__PARTNER_STATUS__INIT;
	static const Ftvm__Client__PageTableStatus no_pagetable =
		FTVM__CLIENT__PAGE_TABLE_STATUS__INIT;
	const Ftvm__Client__PartnerStatus *partner = reply->partner ? reply->partner : &no_partner;
	const Ftvm__Client__PageTableStatus *pagetable =
		reply->pagetable ? reply->pagetable : &no_pagetable;

	memset(ret, 0, sizeof(*ret));
	FTVM_STATUS_FIELDS(FROM_REPLY)
}

size_t reply_read_media(struct ftvm_media *ret, size_t room,
			Ftvm__Partner__MediaCapacity *const *media, size_t n)
{
	size_t i;

	for (i = 0; i < n && i < room; i++) {
		copy_str(ret[i].type, sizeof(ret[i].type), media[i]->type);
		ret[i].capacity = media[i]->capacity;
		ret[i].free = media[i]->free;
	}
	return i;
}

void reply_read_sense(const Ftvm__Partner__SenseInformation *si, struct ftvm_sense *ret)
{
	memset(ret, 0, sizeof(*ret));
	ret->n_media = reply_read_media(ret->media, sizeof(ret->media) / sizeof(ret->media[0]),
					si->media, si->n_media);
	ret->paging_queue = si->paging_queue;
	ret->destage_queue = si->destage_queue;
	ret->replacement_queue = si->replacement_queue;
	ret->n_cache = reply_read_media(ret->cache, sizeof(ret->cache) / sizeof(ret->cache[0]),
					si->cache, si->n_cache);
}
