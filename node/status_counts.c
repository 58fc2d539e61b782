/* The status's numbers into the client API's StatusReply (status_counts.h). */
#include "status_counts.h"

/* Each number of c into the reply, where its row of FTVM_STATUS_FIELDS
 * (ftvm_status.h) says; the strings node.c words itself. */
#define TO_REPLY(kind, name, wire, json, text) TO_REPLY_##kind(WIRE_##wire, c->name)
#define WIRE_PB(msg, field) msg->field
#define TO_REPLY_U64 TO_REPLY_NUM
#define TO_REPLY_U32 TO_REPLY_NUM
#define TO_REPLY_I64 TO_REPLY_NUM
#define TO_REPLY_BOOL TO_REPLY_NUM
#define TO_REPLY_NUM(field, value) field = value;
#define TO_REPLY_STR(n) TO_REPLY_WORDS
#define TO_REPLY_WORDS(field, value)

void status_counts_to_reply(const struct status_counts *c, Ftvm__Client__StatusReply *reply,
			    Ftvm__Client__PartnerStatus *partner,
			    Ftvm__Client__PageTableStatus *pagetable)
{
	FTVM_STATUS_FIELDS(TO_REPLY)
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
