/**
 * @file ftvm_status.h
 * @brief The fields of struct ftvm_node_status (ftvm.h), in one table.
 *
 * Design. A node's status is one list of fields, FTVM_STATUS_FIELDS below,
 * and everything that carries a field reads it from here: the struct's
 * members (ftvm.h), the node putting its numbers into the reply
 * (node/status_counts.h, .c), libftvm reading the reply into the struct
 * (libftvm/reply_read.c) and `ftvmctl status` printing it as JSON and as
 * text (tools/ftvmctl.c). A counter added to the table is one row here, one
 * line where it is counted and one line in metrics_table.h (its Prometheus
 * metric, or why it has none; the build fails without it), nothing more:
 * the wire, the struct and both of ftvmctl's outputs follow from the row
 * (see "wire" below).
 *
 * Rows are in the struct's order, which is its ABI: a new row goes at the
 * end, so the struct only grows at its end (ftvm.h, "Compatibility"), and
 * no row is ever moved or removed (tests/abi/status_layout.c holds the
 * layout as released). The table lives here, with the client library, and
 * is installed beside ftvm.h because the public struct is made from it and
 * tools reach the node through ftvm.h alone; the node includes it as the
 * status's vocabulary. common/ stays the ground floor, with nothing of the
 * node's in it. A program may also expand the table itself, for instance to
 * print every field.
 *
 * Each row is X(kind, name, wire, json, text), columns that mean nothing
 * until a consumer's X pastes its own prefix to them (so no macro of the
 * including program can change them):
 *  - kind: U64, U32, I64 (uint64_t, uint32_t, int64_t), BOOL, or STR(n), a
 *    NUL-terminated string truncated to n bytes.
 *  - name: the member of struct ftvm_node_status.
 *  - wire: how the client API's StatusReply (proto/client.proto) carries
 *    it. PB(msg, field): a named field of its own, msg being reply
 *    (StatusReply itself), partner (StatusReply.partner) or pagetable
 *    (StatusReply.pagetable); the rows released with one keep it, so the
 *    bytes old clients, recorded traces (tests/traces/) and `ftvmctl trace
 *    dump` read stay as they were. LIST(i): StatusReply.counters[i], one
 *    list of numbers for the rows added since, which need no line in
 *    client.proto. i is the row's place among the LIST rows in table
 *    order (0, 1, ...: the next row's i is the last one's + 1) and, like a
 *    field number, forever; the node's build fails on a LIST row whose i
 *    is not its place (status_counts.c). Only U64 rows may be LIST (the
 *    list is of uint64; the build fails on any other kind): a gauge that
 *    may go negative or a flag keeps a field of its own. An older node
 *    sends no list, so a newer client reads its LIST rows as 0, as it
 *    reads the fields an older node does not know; an older client skips
 *    the list, as proto3 does any field it does not know; a node sends
 *    every LIST row it knows. `ftvmctl trace dump` shows the list as
 *    counters=[...], by index; the row says what index means what.
 *  - json: JSON(slot, group, pos, "key") in `ftvmctl --json status`: the
 *    key in the object group (top for the outer object, else the name of an
 *    object inside it, made on its first member), objects and keys of the
 *    outer object in slot order, keys of a group in pos order (0 in top).
 *  - text: in `ftvmctl status`: TEXT(line, pos, how, "before", "after"),
 *    printed in line and then pos order, a line ending with its last pos;
 *    TEXT_IF the same for the first field of a line shown only when that
 *    field is not zero; TEXT_HEAD for the fields of the lines about the node
 *    and its partner at the top, which ftvmctl words itself; TEXT_NONE for
 *    a field only JSON shows. how: NUM (the number), AGO (ms, as "1.5 s"),
 *    WALL (ms since the epoch, as UTC), FLAG (a BOOL: its words
 *    when true, nothing when false).
 *
 * Adding a counter, for example the pages evicted since start, counted by
 * the memory manager where it evicts one as
 * `v->counted.evictions++` (the row makes that member of struct
 * status_counts): a row at the end,
 *   X(U64, evictions, LIST(0), JSON(32, replacement, 1, "evictions"),
 *     TEXT(13, 1, NUM, "replacement: ", " evictions"))
 * (a new slot and line; or the next pos of a group or line already there;
 * the next LIST index), its metric in metrics_table.h,
 *   M(evictions, COUNTER("ftvm_evictions_total", "", "Pages evicted since start"))
 * and nothing else. A count kept elsewhere (HA, the session) is set in
 * node.c's status_gather() instead.
 * tests/e2e/test_status_fields.sh checks every row end to end.
 */
#pragma once

#include <stdbool.h>
#include <stdint.h>

/* clang-format off */
#define FTVM_STATUS_FIELDS(X)                                                                      \
	/* this node's id; starting | active | solo | resyncing | fenced; the pair's epoch */      \
	X(STR(64), node, PB(reply, node), JSON(1, top, 0, "node"), TEXT_HEAD)                     \
	X(STR(16), state, PB(reply, state), JSON(2, top, 0, "state"), TEXT_HEAD)                  \
	X(U64, epoch, PB(reply, epoch), JSON(3, top, 0, "epoch"), TEXT_HEAD)                      \
	/* the partner channel's transport ("tcp", "rdma") and why it runs */                      \
	X(STR(16), transport, PB(reply, transport), JSON(4, top, 0, "transport"), TEXT_HEAD)      \
	X(STR(160), transport_reason, PB(reply, transport_reason),                                \
	  JSON(5, top, 0, "transport_reason"), TEXT_HEAD)                                          \
	/* the partner: its id (empty until its hello), "up" or "down", its own state ("unknown"   \
	 * while down), the channel's host:port, link transitions and ms since it was last heard   \
	 * (0 while up), since start */                                                            \
	X(STR(64), partner_id, PB(partner, id), JSON(20, partner, 1, "id"), TEXT_HEAD)            \
	X(STR(8), partner_link, PB(partner, link), JSON(20, partner, 2, "link"), TEXT_HEAD)       \
	X(STR(16), partner_state, PB(partner, state), JSON(20, partner, 3, "state"), TEXT_HEAD)   \
	X(STR(80), partner_endpoint, PB(partner, endpoint), JSON(20, partner, 4, "endpoint"),     \
	  TEXT_HEAD)                                                                               \
	X(U64, partner_link_changes, PB(partner, link_changes),                                   \
	  JSON(20, partner, 5, "link_changes"), TEXT_NONE)                                         \
	X(U64, partner_last_seen_ms, PB(partner, last_seen_ms),                                   \
	  JSON(20, partner, 6, "last_seen_ms"), TEXT_HEAD)                                         \
	/* frames in the pool and not in use; allocations made here and mirrored from the partner */ \
	X(U64, frames_total, PB(reply, frames_total), JSON(22, frames, 1, "total"),               \
	  TEXT(3, 1, NUM, "frames: ", " total"))                                                   \
	X(U64, frames_free, PB(reply, frames_free), JSON(22, frames, 2, "free"),                  \
	  TEXT(3, 2, NUM, ", ", " free"))                                                          \
	X(U64, allocations_own, PB(reply, allocations_own), JSON(23, allocations, 1, "own"),      \
	  TEXT(5, 1, NUM, "allocations: ", " own"))                                                \
	X(U64, allocations_partner, PB(reply, allocations_partner),                               \
	  JSON(23, allocations, 2, "partner"), TEXT(5, 2, NUM, ", ", " partner"))                 \
	/* bytes per frame; the node's process id; why it is in its state */                      \
	X(U32, page_size, PB(reply, page_size), JSON(7, top, 0, "page_size"),                     \
	  TEXT(3, 3, NUM, " (page size ", ")"))                                                    \
	X(I64, pid, PB(reply, pid), JSON(6, top, 0, "pid"), TEXT_NONE)                            \
	X(STR(256), reason, PB(reply, reason), JSON(8, top, 0, "reason"), TEXT_HEAD)              \
	/* the partner's fence slot in the store (node/ha/HA.md): its state, epoch, and ms since   \
	 * its store heartbeat last moved */                                                       \
	X(STR(16), partner_store_state, PB(partner, store_state),                                 \
	  JSON(20, partner, 7, "store_state"), TEXT_HEAD)                                          \
	X(U64, partner_store_epoch, PB(partner, store_epoch),                                     \
	  JSON(20, partner, 8, "store_epoch"), TEXT_HEAD)                                          \
	X(U64, partner_store_silent_ms, PB(partner, store_silent_ms),                             \
	  JSON(20, partner, 9, "store_silent_ms"), TEXT_HEAD)                                      \
	/* takeovers by this node since start, ms since the last finished (0: none); why our last  \
	 * fence-slot round failed ("" when it did not) */                                         \
	X(U64, takeovers, PB(reply, takeovers), JSON(9, top, 0, "takeovers"),                     \
	  TEXT_IF(1, 1, NUM, "takeovers: ", ""))                                                   \
	X(U64, since_takeover_ms, PB(reply, since_takeover_ms),                                   \
	  JSON(10, top, 0, "since_takeover_ms"), TEXT(1, 2, AGO, ", the last ", " ago"))          \
	X(STR(160), store_error, PB(reply, store_error), JSON(11, top, 0, "store_error"),         \
	  TEXT_HEAD)                                                                               \
	/* resyncs sent or received since start; pages the last one this node sent carried, and    \
	 * how long it took; the page-table journal's rows kept for a resync */                    \
	X(U64, resyncs, PB(reply, resyncs), JSON(12, top, 0, "resyncs"),                          \
	  TEXT_IF(2, 1, NUM, "resyncs: ", ""))                                                     \
	X(U64, last_resync_pages, PB(reply, last_resync_pages),                                   \
	  JSON(16, top, 0, "last_resync_pages"), TEXT(2, 2, NUM, "; the last sent ", " pages"))   \
	X(U64, last_resync_ms, PB(reply, last_resync_ms), JSON(17, top, 0, "last_resync_ms"),     \
	  TEXT(2, 3, NUM, " in ", " ms"))                                                          \
	X(U64, journal_rows, PB(reply, journal_rows), JSON(13, top, 0, "journal_rows"),           \
	  TEXT(6, 1, NUM, "journal: ", " rows"))                                                   \
	/* page blocks sent by RDMA WRITE and inline in WritePage since start; the partner's       \
	 * one-sided blocks taken, refused (stale, bad CRC-32C), and landing runs granted to it    \
	 * for whole-page writes */                                                                \
	X(U64, pages_one_sided, PB(reply, pages_one_sided), JSON(24, page_writes, 1, "one_sided"), \
	  TEXT(10, 1, NUM, "page writes sent: ", " one-sided"))                                    \
	X(U64, pages_inline, PB(reply, pages_inline), JSON(24, page_writes, 2, "inline"),         \
	  TEXT(10, 2, NUM, ", ", " inline"))                                                       \
	X(U64, landings_adopted, PB(reply, landings_adopted), JSON(25, landings, 1, "adopted"),   \
	  TEXT(10, 3, NUM, "; partner's landings: ", " adopted"))                                  \
	X(U64, landings_refused, PB(reply, landings_refused), JSON(25, landings, 2, "refused"),   \
	  TEXT(10, 4, NUM, ", ", " refused"))                                                      \
	X(U64, landings_granted, PB(reply, landings_granted), JSON(25, landings, 3, "granted"),   \
	  TEXT(10, 5, NUM, ", ", " granted"))                                                      \
	/* the pool's registration blocks up to its ceiling, those frames are taken from now,      \
	 * bytes per block ([memory] pool_block_size, rounded), blocks that came into use and      \
	 * left (their memory back to the OS) since start */                                       \
	X(U32, pool_blocks, PB(reply, pool_blocks), JSON(26, pool, 1, "blocks"),                  \
	  TEXT(12, 2, NUM, " of ", " blocks"))                                                     \
	X(U32, pool_blocks_in_use, PB(reply, pool_blocks_in_use),                                 \
	  JSON(26, pool, 2, "blocks_in_use"), TEXT(12, 1, NUM, "pool: ", ""))                     \
	X(U64, pool_block_bytes, PB(reply, pool_block_bytes), JSON(26, pool, 3, "block_bytes"),   \
	  TEXT(12, 3, NUM, " of ", " bytes in use"))                                               \
	X(U64, pool_grown, PB(reply, pool_grown), JSON(26, pool, 4, "grown"),                     \
	  TEXT(12, 4, NUM, " (", " grown"))                                                        \
	X(U64, pool_shrunk, PB(reply, pool_shrunk), JSON(26, pool, 5, "shrunk"),                  \
	  TEXT(12, 5, NUM, ", ", " shrunk)"))                                                      \
	/* the pool's RDMA registrations now (0 over TCP), left behind by blocks that left, and    \
	 * deregistered since start; registered staging slabs mapped now and since start */        \
	X(U32, registrations_current, PB(reply, registrations_current),                           \
	  JSON(27, registrations, 1, "current"), TEXT(12, 6, NUM, "; registrations: ", " current")) \
	X(U32, registrations_stale, PB(reply, registrations_stale),                               \
	  JSON(27, registrations, 2, "stale"), TEXT(12, 7, NUM, ", ", " stale"))                  \
	X(U64, registrations_purged, PB(reply, registrations_purged),                             \
	  JSON(27, registrations, 3, "purged"), TEXT(12, 8, NUM, ", ", " purged"))                \
	X(U32, staging_slabs, PB(reply, staging_slabs), JSON(28, staging, 1, "slabs"),            \
	  TEXT(12, 10, NUM, "; staging slabs: ", ""))                                              \
	X(U64, staging_allocated, PB(reply, staging_allocated), JSON(28, staging, 2, "allocated"), \
	  TEXT(12, 11, NUM, " (", " since start)"))                                                \
	/* resync blocks sent by RDMA WRITE and inline since start, and the partner's dropped as   \
	 * older */                                                                                \
	X(U64, resync_pages_one_sided, PB(reply, resync_pages_one_sided),                         \
	  JSON(29, resync, 1, "pages_one_sided"), TEXT(11, 1, NUM, "resync pages sent: ", " one-sided")) \
	X(U64, resync_pages_inline, PB(reply, resync_pages_inline),                               \
	  JSON(29, resync, 2, "pages_inline"), TEXT(11, 2, NUM, ", ", " inline"))                 \
	X(U64, resync_pages_dropped, PB(reply, resync_pages_dropped),                             \
	  JSON(29, resync, 3, "pages_dropped"), TEXT(11, 3, NUM, "; received: ", " dropped as older")) \
	/* the page table's housekeeping since start (node/vmm/VMM.md, "WAL checkpoints"): folds   \
	 * of page writes when idle and by a commit with 1024 waiting, page writes waiting now;    \
	 * WAL checkpoints when idle and by a commit at the bound; WAL frames not in the database  \
	 * yet, the most since start, and the bound ([node] wal_checkpoint_frames) */              \
	X(U64, pagetable_folds_idle, PB(pagetable, folds_idle),                                   \
	  JSON(30, pagetable, 1, "folds_idle"), TEXT(9, 2, NUM, " (folds: ", " idle"))            \
	X(U64, pagetable_folds_backstop, PB(pagetable, folds_backstop),                           \
	  JSON(30, pagetable, 2, "folds_backstop"), TEXT(9, 3, NUM, ", ", " backstop)"))          \
	X(U64, pagetable_fold_waiting, PB(pagetable, fold_waiting),                               \
	  JSON(30, pagetable, 3, "fold_waiting"),                                                  \
	  TEXT(9, 1, NUM, "page table: ", " page writes waiting for a fold"))                      \
	X(U64, pagetable_checkpoints_idle, PB(pagetable, checkpoints_idle),                       \
	  JSON(30, pagetable, 4, "checkpoints_idle"), TEXT(9, 7, NUM, " (checkpoints: ", " idle")) \
	X(U64, pagetable_checkpoints_backstop, PB(pagetable, checkpoints_backstop),               \
	  JSON(30, pagetable, 5, "checkpoints_backstop"), TEXT(9, 8, NUM, ", ", " backstop)"))    \
	X(U64, pagetable_wal_frames, PB(pagetable, wal_frames),                                   \
	  JSON(30, pagetable, 6, "wal_frames"), TEXT(9, 4, NUM, "; WAL: ", " frames"))            \
	X(U64, pagetable_wal_frames_peak, PB(pagetable, wal_frames_peak),                         \
	  JSON(30, pagetable, 7, "wal_frames_peak"), TEXT(9, 5, NUM, ", ", " at most"))           \
	X(U32, pagetable_wal_checkpoint_frames, PB(pagetable, wal_checkpoint_frames),             \
	  JSON(30, pagetable, 8, "wal_checkpoint_frames"), TEXT(9, 6, NUM, ", checkpoint by ", "")) \
	/* RDMA registrations the device refused since start (that block's data went inline) */   \
	X(U64, registrations_failed, PB(reply, registrations_failed),                             \
	  JSON(27, registrations, 4, "failed"), TEXT(12, 9, NUM, ", ", " failed"))                \
	/* pointers revoked at a fence that their clients have not released, and the frames set   \
	 * aside for them (node/ha/HA.md) */                                                       \
	X(U64, pointers_revoked, PB(reply, pointers_revoked), JSON(21, top, 0, "pointers_revoked"), \
	  TEXT_IF(4, 1, NUM, "revoked pointers: ", " not released yet by their clients"))          \
	X(U64, frames_revoked, PB(reply, frames_revoked), JSON(22, frames, 3, "revoked"),         \
	  TEXT(4, 2, NUM, ", ", " frames set aside for them"))                                     \
	/* pauses of the node's event loop over heartbeat_ms since start, and the longest */       \
	X(U64, loop_pauses, PB(reply, loop_pauses), JSON(18, top, 0, "loop_pauses"),              \
	  TEXT_IF(8, 1, NUM, "event loop: ", " pauses longer than heartbeat_ms"))                  \
	X(U64, loop_pause_max_ms, PB(reply, loop_pause_max_ms),                                   \
	  JSON(19, top, 0, "loop_pause_max_ms"), TEXT(8, 2, NUM, ", the longest ", " ms"))        \
	/* the partner channel's authentication: "key" ([node] key_file) or "none" (loopback     \
	 * only); connections that did not prove the key, and from another address than the       \
	 * partner, since start */                                                                 \
	X(STR(8), partner_auth, PB(partner, auth), JSON(20, partner, 10, "auth"), TEXT_HEAD)      \
	X(U64, partner_auth_failures, PB(partner, auth_failures),                                 \
	  JSON(20, partner, 11, "auth_failures"), TEXT_HEAD)                                       \
	X(U64, partner_address_refused, PB(partner, address_refused),                             \
	  JSON(20, partner, 12, "address_refused"), TEXT_HEAD)                                     \
	/* [failover] journal_limit, rows kept for a partner away, and whether the journal        \
	 * passed it: the partner's next resync is full */                                         \
	X(U64, journal_limit, PB(reply, journal_limit), JSON(14, top, 0, "journal_limit"),        \
	  TEXT(6, 2, NUM, " (limit ", ")"))                                                        \
	X(BOOL, journal_given_up, PB(reply, journal_given_up),                                    \
	  JSON(15, top, 0, "journal_given_up"),                                                    \
	  TEXT(6, 3, FLAG, "; passed while the partner was away: its next resync is full", ""))    \
	/* pages that went back to the store's copy (node/ha/HA.md, "Recovery"), and when the     \
	 * last went: ms since the epoch, 0: none */                                               \
	X(U64, recovered_pages, PB(reply, recovered_pages), JSON(31, recovery, 1, "pages"),       \
	  TEXT_IF(7, 1, NUM, "recovery: ",                                                         \
		  " pages went back to the store's copy, their newer versions lost"))              \
	X(U64, recovered_last_at_ms, PB(reply, recovered_last_at_ms),                             \
	  JSON(31, recovery, 2, "last_at_ms"),                                                     \
	  TEXT(7, 2, WALL, "; the last at ", " (`ftvmctl recovery` lists them)"))              \
	/* clean pages evicted since start, their frames wanted for another (node/vmm/VMM.md,     \
	 * "Replacement") */                                                                       \
	X(U64, evictions, LIST(0), JSON(32, replacement, 1, "evictions"),                         \
	  TEXT(13, 1, NUM, "replacement: ", " evictions"))                                        \
	/* pages read into frames since start, from the store or from flash */                    \
	X(U64, page_ins, LIST(1), JSON(32, replacement, 2, "page_ins"),                           \
	  TEXT(13, 2, NUM, ", ", " page-ins"))                                                    \
	/* this node's flash ([flash] path; node/vmm/MEDIA.md): bytes of its partition and   \
	 * those free for new extents, page-ins read there since start, and pages written      \
	 * there since start; all 0 without flash */                                            \
	X(U64, flash_capacity, LIST(2), JSON(33, flash, 1, "capacity"),                          \
	  TEXT_IF(14, 1, NUM, "flash: ", " bytes"))                                              \
	X(U64, flash_free, LIST(3), JSON(33, flash, 2, "free"), TEXT(14, 2, NUM, ", ", " free")) \
	X(U64, flash_page_ins, LIST(4), JSON(33, flash, 3, "page_ins"),                          \
	  TEXT(14, 3, NUM, ", ", " page-ins"))                                                   \
	X(U64, flash_writes, LIST(5), JSON(33, flash, 4, "writes"),                              \
	  TEXT(14, 4, NUM, ", ", " pages written"))                                              \
	/* this node's partition of the store: its bytes and those free for new extents */     \
	X(U64, store_capacity, LIST(6), JSON(34, store, 1, "capacity"),                          \
	  TEXT(15, 1, NUM, "store: ", " bytes"))                                                 \
	X(U64, store_free, LIST(7), JSON(34, store, 2, "free"), TEXT(15, 2, NUM, ", ", " free")) \
	/* page-ins of this node's copy that a partner's write pointer asked for (node/vmm/  \
	 * VMM.md, "The partner pages in"); also counted in page_ins */                       \
	X(U64, partner_page_ins, LIST(8), JSON(32, replacement, 3, "partner_page_ins"),       \
	  TEXT(13, 3, NUM, " (", " for the partner's pointers)"))                           \
	/* header calls asked of the owner, this node's record unconfirmed after a resync it  \
	 * received, and those whose answer differed from this node's record (node/vmm/      \
	 * VMM.md, "Read header: whose record answers") */                                     \
	X(U64, header_asked, LIST(9), JSON(35, read_header, 1, "asked_owner"),                \
	  TEXT_IF(16, 1, NUM, "read header: ", " asked of the owner after a resync"))          \
	X(U64, header_differed, LIST(10), JSON(35, read_header, 2, "differed"),               \
	  TEXT(16, 2, NUM, ", ", " differed from this node's record"))                          \
	/* the storage cache partition of the pool ([memory] cache; node/vmm/VMM.md,            \
	 * "Volumes"): its frames, those free, and its pages that may be evicted */             \
	X(U64, cache_frames_total, LIST(11), JSON(36, cache, 1, "frames_total"),                \
	  TEXT_IF(17, 1, NUM, "storage cache: ", " frames"))                                     \
	X(U64, cache_frames_free, LIST(12), JSON(36, cache, 2, "frames_free"),                  \
	  TEXT(17, 2, NUM, ", ", " free"))                                                       \
	X(U64, cache_replacement_queue, LIST(13), JSON(36, cache, 3, "replacement_queue"),      \
	  TEXT(17, 3, NUM, ", ", " evictable"))                                                  \
	/* the NBD server ([nbd]; node/NBD.md): connections since start, open now; requests,   \
	 * those answered with an error, connections closed for breaking the protocol, and     \
	 * bytes read and written, since start */                                               \
	X(U64, nbd_accepted, LIST(14), JSON(37, nbd, 1, "accepted"),                            \
	  TEXT_IF(18, 1, NUM, "nbd: ", " connections since start"))                              \
	X(U64, nbd_connections, LIST(15), JSON(37, nbd, 2, "connections"),                      \
	  TEXT(18, 2, NUM, " (", " open)"))                                                      \
	X(U64, nbd_requests, LIST(16), JSON(37, nbd, 3, "requests"),                            \
	  TEXT(18, 3, NUM, ", ", " requests"))                                                   \
	X(U64, nbd_errors, LIST(17), JSON(37, nbd, 4, "errors"), TEXT(18, 4, NUM, ", ", " failed")) \
	X(U64, nbd_protocol_errors, LIST(18), JSON(37, nbd, 5, "protocol_errors"),              \
	  TEXT(18, 5, NUM, ", ", " protocol errors"))                                            \
	X(U64, nbd_read_bytes, LIST(19), JSON(37, nbd, 6, "read_bytes"),                        \
	  TEXT(18, 6, NUM, ", ", " bytes read"))                                                 \
	X(U64, nbd_written_bytes, LIST(20), JSON(37, nbd, 7, "written_bytes"),                  \
	  TEXT(18, 7, NUM, ", ", " bytes written"))                                              \
	/* read-ahead of volumes' pages (node/NBD.md, "Read-ahead"), since start: pages       \
	 * staged, those a read then found (hits), those evicted unread (wasted) */             \
	X(U64, readahead_pages, LIST(21), JSON(38, readahead, 1, "pages"),                      \
	  TEXT_IF(19, 1, NUM, "read-ahead: ", " pages staged"))                                  \
	X(U64, readahead_hits, LIST(22), JSON(38, readahead, 2, "hits"),                        \
	  TEXT(19, 2, NUM, ", ", " hits"))                                                       \
	X(U64, readahead_wasted, LIST(23), JSON(38, readahead, 3, "wasted"),                    \
	  TEXT(19, 3, NUM, ", ", " wasted"))                                                     \
	/* dirty pages evicted since start because this node's flash holds them (a volume's:   \
	 * fast destage, node/vmm/VMM.md "Volumes"); also counted in evictions */              \
	X(U64, dirty_evictions, LIST(24), JSON(32, replacement, 4, "dirty_evictions"),          \
	  TEXT(13, 4, NUM, "; ", " evicted while dirty (flash held them)"))                                 \
	/* NBD connections closed at once since start: NBD_CONNECTIONS_MAX were open */         \
	X(U64, nbd_refused, LIST(25), JSON(37, nbd, 8, "refused"),                              \
	  TEXT(18, 8, NUM, ", ", " refused (too many)"))                                         \
	/* page-table transactions committed since start: the group commits, where the writes    \
	 * of a loop turn share one (node/vmm/VMM.md, "Ordering and durability") */                \
	X(U64, pagetable_commits, LIST(26), JSON(30, pagetable, 9, "commits"),                  \
	  TEXT(9, 9, NUM, "; ", " commits"))                                                     \
	/* when this node acknowledges a change ([node] ack): mirror, commit or durable */       \
	X(STR(16), ack, PB(reply, ack), JSON(39, top, 0, "ack"), TEXT_HEAD)                      \
	/* clients following this node's events now (`ftvmctl events`, node/EVENTS.md) */       \
	X(U64, event_followers, LIST(27), JSON(40, events, 1, "followers"),                     \
	  TEXT_IF(20, 1, NUM, "events: ", " followers"))                                        \
	/* the partner's [node] ack as its Hello said, while linked: mirror, commit or durable; \
	 * "" while down or from a partner that does not say */                                 \
	X(STR(16), partner_ack, PB(partner, ack), JSON(20, partner, 13, "ack"), TEXT_HEAD)
/* clang-format on */

/* The member a row makes in struct ftvm_node_status. */
#define FTVM_STATUS_MEMBER(kind, name, wire, json, text) \
	FTVM_STATUS_CTYPE_##kind name FTVM_STATUS_DIMS_##kind;
#define FTVM_STATUS_CTYPE_U64 uint64_t
#define FTVM_STATUS_CTYPE_U32 uint32_t
#define FTVM_STATUS_CTYPE_I64 int64_t
#define FTVM_STATUS_CTYPE_BOOL bool
#define FTVM_STATUS_CTYPE_STR(n) char
#define FTVM_STATUS_DIMS_U64
#define FTVM_STATUS_DIMS_U32
#define FTVM_STATUS_DIMS_I64
#define FTVM_STATUS_DIMS_BOOL
#define FTVM_STATUS_DIMS_STR(n) [n]
