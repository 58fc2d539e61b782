/* The status's numbers into the client API's StatusReply (status_counts.h). */
#include "status_counts.h"

/* A LIST row's i is its place among the LIST rows (a duplicate i is an
 * enumerator declared twice), and its kind U64. */
#define LIST_PLACE(kind, name, wire, json, text) LIST_PLACE_##wire
#define LIST_PLACE_PB(msg, field)
#define LIST_PLACE_LIST(i) \
	_Static_assert(STATUS_LIST_AT_##i == (i), "LIST(" #i "): the next LIST is the last + 1");
#define LIST_KIND(kind, name, wire, json, text) LIST_KIND_##wire(name)
#define LIST_KIND_PB(msg, field) LIST_KIND_NONE
#define LIST_KIND_NONE(name)
#define LIST_KIND_LIST(i) LIST_KIND_U64
#define LIST_KIND_U64(name)                                                                    \
	_Static_assert(_Generic(((struct status_counts *)0)->name, uint64_t : 1, default : 0), \
		       #name ": only U64 rows may be LIST rows");
FTVM_STATUS_FIELDS(LIST_PLACE)
FTVM_STATUS_FIELDS(LIST_KIND)

/* Each number of c into the reply, where its row of FTVM_STATUS_FIELDS
 * (ftvm_status.h) says; the strings node.c words itself. */
#define TO_REPLY(kind, name, wire, json, text) TO_REPLY_##kind(WIRE_##wire, c->name)
#define WIRE_PB(msg, field) msg->field
#define WIRE_LIST(i) counters[i]
#define TO_REPLY_U64 TO_REPLY_NUM
#define TO_REPLY_U32 TO_REPLY_NUM
#define TO_REPLY_I64 TO_REPLY_NUM
#define TO_REPLY_BOOL TO_REPLY_NUM
#define TO_REPLY_NUM(field, value) field = value;
#define TO_REPLY_STR(n) TO_REPLY_WORDS
#define TO_REPLY_WORDS(field, value)

void status_counts_to_reply(const struct status_counts *c, Ftvm__Client__StatusReply *reply,
			    Ftvm__Client__PartnerStatus *partner,
			    Ftvm__Client__PageTableStatus *pagetable,
			    uint64_t counters[STATUS_LIST_SIZE])
{
	FTVM_STATUS_FIELDS(TO_REPLY)
	reply->n_counters = STATUS_LIST_N;
	reply->counters = counters;
}

#define ADD(kind, name, wire, json, text) ADD_##kind(name)
#define ADD_U64(name) dst->name += src->name;
#define ADD_U32 ADD_U64
#define ADD_I64 ADD_U64
#define ADD_BOOL(name) dst->name = dst->name || src->name;
#define ADD_STR(n) ADD_WORDS
#define ADD_WORDS(name)

void status_counts_add(struct status_counts *dst, const struct status_counts *src)
{
	FTVM_STATUS_FIELDS(ADD)
}
