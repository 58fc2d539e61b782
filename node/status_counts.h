/* A node's status as numbers, the way the node gathers them: one member for
 * each number row of FTVM_STATUS_FIELDS (libftvm/ftvm_status.h), named and
 * typed as in struct ftvm_node_status. vmm_get_counts() sets them all (the
 * memory manager's counters, kept in one of these as they are counted, and
 * its gauges); node.c adds the HA, session and config ones, words the
 * strings itself, and puts the numbers into the reply by the table. */
#pragma once

#include "client.pb-c.h"
#include "ftvm_status.h"

#define STATUS_COUNTS_MEMBER(kind, name, wire, json, text) STATUS_COUNTS_##kind(name)
#define STATUS_COUNTS_U64(name) uint64_t name;
#define STATUS_COUNTS_U32(name) uint32_t name;
#define STATUS_COUNTS_I64(name) int64_t name;
#define STATUS_COUNTS_BOOL(name) bool name;
#define STATUS_COUNTS_STR(n) STATUS_COUNTS_WORDS
#define STATUS_COUNTS_WORDS(name)

struct status_counts {
	FTVM_STATUS_FIELDS(STATUS_COUNTS_MEMBER)
};

/* The LIST(i) rows (ftvm_status.h, "wire"): STATUS_LIST_AT_<i> is the
 * row's place among them, STATUS_LIST_N how many there are. */
#define STATUS_LIST_ENUM(kind, name, wire, json, text) STATUS_LIST_ENUM_##wire
#define STATUS_LIST_ENUM_PB(msg, field)
#define STATUS_LIST_ENUM_LIST(i) STATUS_LIST_AT_##i,
enum {
	FTVM_STATUS_FIELDS(STATUS_LIST_ENUM) STATUS_LIST_N
};
/* The length of an array for them (never 0). */
#define STATUS_LIST_SIZE (STATUS_LIST_N > 0 ? STATUS_LIST_N : 1)

/* The numbers of c into reply and its partner and pagetable messages, each
 * into the field its row names, and the LIST rows into counters, which
 * reply->counters points to afterwards (so it must live as long as reply);
 * the strings are left as they are. */
void status_counts_to_reply(const struct status_counts *c, Ftvm__Client__StatusReply *reply,
			    Ftvm__Client__PartnerStatus *partner,
			    Ftvm__Client__PageTableStatus *pagetable,
			    uint64_t counters[STATUS_LIST_SIZE]);
/* dst gets src's numbers added: a component that counts some rows on its
 * own (pagedata_counted(), failover_counted()) adds them to what the memory
 * manager counted. */
void status_counts_add(struct status_counts *dst, const struct status_counts *src);
