/* struct ftvm_node_status as libftvm 0.1 released it, member for member:
 * its layout is ABI (node/libftvm/ftvm.h, "Compatibility"). The struct is
 * made from FTVM_STATUS_FIELDS (ftvm_status.h) now; this checks, when it
 * compiles, that every member released is still at its offset with its
 * size, and that the struct only grew. A row moved or removed in the table
 * fails the build here. */
#include <stddef.h>

#include <ftvm.h>

struct status_released {
	char node[64];
	char state[16];
	uint64_t epoch;
	char transport[16];
	char transport_reason[160];
	char partner_id[64];
	char partner_link[8];
	char partner_state[16];
	char partner_endpoint[80];
	uint64_t partner_link_changes;
	uint64_t partner_last_seen_ms;
	uint64_t frames_total;
	uint64_t frames_free;
	uint64_t allocations_own;
	uint64_t allocations_partner;
	uint32_t page_size;
	int64_t pid;
	char reason[256];
	char partner_store_state[16];
	uint64_t partner_store_epoch;
	uint64_t partner_store_silent_ms;
	uint64_t takeovers;
	uint64_t since_takeover_ms;
	char store_error[160];
	uint64_t resyncs;
	uint64_t last_resync_pages;
	uint64_t last_resync_ms;
	uint64_t journal_rows;
	uint64_t pages_one_sided;
	uint64_t pages_inline;
	uint64_t landings_adopted;
	uint64_t landings_refused;
	uint64_t landings_granted;
	uint32_t pool_blocks;
	uint32_t pool_blocks_in_use;
	uint64_t pool_block_bytes;
	uint64_t pool_grown;
	uint64_t pool_shrunk;
	uint32_t registrations_current;
	uint32_t registrations_stale;
	uint64_t registrations_purged;
	uint32_t staging_slabs;
	uint64_t staging_allocated;
	uint64_t resync_pages_one_sided;
	uint64_t resync_pages_inline;
	uint64_t resync_pages_dropped;
	uint64_t pagetable_folds_idle;
	uint64_t pagetable_folds_backstop;
	uint64_t pagetable_fold_waiting;
	uint64_t pagetable_checkpoints_idle;
	uint64_t pagetable_checkpoints_backstop;
	uint64_t pagetable_wal_frames;
	uint64_t pagetable_wal_frames_peak;
	uint32_t pagetable_wal_checkpoint_frames;
	uint64_t registrations_failed;
	uint64_t pointers_revoked;
	uint64_t frames_revoked;
	uint64_t loop_pauses;
	uint64_t loop_pause_max_ms;
	char partner_auth[8];
	uint64_t partner_auth_failures;
	uint64_t partner_address_refused;
	uint64_t journal_limit;
	bool journal_given_up;
	uint64_t recovered_pages;
	uint64_t recovered_last_at_ms;
};

#define SAME(m)                                                                  \
	_Static_assert(offsetof(struct ftvm_node_status, m) ==                   \
				       offsetof(struct status_released, m) &&    \
			       sizeof(((struct ftvm_node_status *)0)->m) ==      \
				       sizeof(((struct status_released *)0)->m), \
		       #m " moved or changed size")

SAME(node);
SAME(state);
SAME(epoch);
SAME(transport);
SAME(transport_reason);
SAME(partner_id);
SAME(partner_link);
SAME(partner_state);
SAME(partner_endpoint);
SAME(partner_link_changes);
SAME(partner_last_seen_ms);
SAME(frames_total);
SAME(frames_free);
SAME(allocations_own);
SAME(allocations_partner);
SAME(page_size);
SAME(pid);
SAME(reason);
SAME(partner_store_state);
SAME(partner_store_epoch);
SAME(partner_store_silent_ms);
SAME(takeovers);
SAME(since_takeover_ms);
SAME(store_error);
SAME(resyncs);
SAME(last_resync_pages);
SAME(last_resync_ms);
SAME(journal_rows);
SAME(pages_one_sided);
SAME(pages_inline);
SAME(landings_adopted);
SAME(landings_refused);
SAME(landings_granted);
SAME(pool_blocks);
SAME(pool_blocks_in_use);
SAME(pool_block_bytes);
SAME(pool_grown);
SAME(pool_shrunk);
SAME(registrations_current);
SAME(registrations_stale);
SAME(registrations_purged);
SAME(staging_slabs);
SAME(staging_allocated);
SAME(resync_pages_one_sided);
SAME(resync_pages_inline);
SAME(resync_pages_dropped);
SAME(pagetable_folds_idle);
SAME(pagetable_folds_backstop);
SAME(pagetable_fold_waiting);
SAME(pagetable_checkpoints_idle);
SAME(pagetable_checkpoints_backstop);
SAME(pagetable_wal_frames);
SAME(pagetable_wal_frames_peak);
SAME(pagetable_wal_checkpoint_frames);
SAME(registrations_failed);
SAME(pointers_revoked);
SAME(frames_revoked);
SAME(loop_pauses);
SAME(loop_pause_max_ms);
SAME(partner_auth);
SAME(partner_auth_failures);
SAME(partner_address_refused);
SAME(journal_limit);
SAME(journal_given_up);
SAME(recovered_pages);
SAME(recovered_last_at_ms);

_Static_assert(sizeof(struct ftvm_node_status) >= sizeof(struct status_released),
	       "struct ftvm_node_status shrank");

int main(void)
{
	return 0;
}
