/* What each row of FTVM_STATUS_FIELDS (ftvm_status.h) is as a Prometheus
 * metric (`ftvmctl metrics`, ftvmd's [metrics] listen; metrics_text.c
 * writes them).
 *
 * Design. Every status row has exactly one line here, so a row added to the
 * status table cannot be forgotten silently: metrics_text.c does not build
 * while a row has no line (METRIC_ROW_<row> undeclared), while a line names
 * no row (STATUS_KIND_OF_<row> undeclared), names one twice (redeclared), or
 * makes a number of a string or a string of a number (a failed
 * _Static_assert naming the row). A row that is not exported says why, in
 * NOT(why). The lines are in the order the metrics are written: the lines
 * of one family (one metric name, with labels telling its rows apart) must
 * be together, the first with the family's help; tests/unit/
 * test_metrics_text.c checks the text that comes out (each family's HELP and
 * TYPE once, names unique, every line valid, every exported row's value).
 *
 * Every sample has the label node="<status node>". Names follow
 * Prometheus's conventions: ftvm_ first, the unit last (_bytes, _seconds;
 * frames, pages and rows are counts and say so in the name), _total last of
 * a counter and of nothing else.
 *
 * M(row, how), how being one of:
 *  - NODE_LABEL: the node row, the node label of every sample.
 *  - COUNTER(name, label, help), GAUGE(name, label, help): the number.
 *    label is "" or "key=value", the label telling the rows of one family
 *    apart; help is "" for every line of a family but its first.
 *  - SECONDS(name, label, help): a gauge of milliseconds written as
 *    seconds (a name ending _seconds).
 *  - STATE(name, label, values, help): a string of a known set, values
 *    (space-separated): one sample per value, 1 for the string's and 0 for
 *    the others, so an alert can watch one; a string outside the set gets a
 *    sample of its own, 1 (nothing is hidden), an empty one none.
 *  - INFO(name, label, help): a string as a label; the INFO lines of one
 *    family make one sample, of value 1.
 *  - IS(name, word, help): 1 when the string is word, else 0.
 *  - NONEMPTY(name, help): 1 when the string is not empty, else 0.
 *  - NOT(why): not exported, and why.
 *
 * Sense (struct ftvm_sense) adds the families ftvm_media_capacity_bytes,
 * ftvm_media_free_bytes and ftvm_queue_depth after these (metrics_text.c):
 * it has no table, its media are a list. */
#pragma once

/* clang-format off */
#define METRICS_ROWS(M)                                                                            \
	M(node, NODE_LABEL)                                                                        \
	M(state, STATE("ftvm_state", "state", "starting active solo resyncing fenced",             \
		"This node's state: 1 for the one it is in, 0 for the others"))                    \
	M(epoch, GAUGE("ftvm_epoch", "", "The pair's epoch as this node knows it"))                \
	M(ack, STATE("ftvm_ack_level", "level", "mirror commit durable",                           \
		"When this node acknowledges a change ([node] ack): 1 for its level"))             \
	M(transport, STATE("ftvm_transport", "transport", "tcp rdma",                              \
		"The partner channel's transport: 1 for the one that runs"))                       \
	M(transport_reason, NOT("words for people, shown by ftvmctl status; as a label each "      \
		"wording would make a new series"))                                                \
	M(pid, NOT("the process's identity, not a measurement; a restart shows as the "            \
		"counters starting again"))                                                        \
	M(reason, NOT("words for people (why the node is in its state), shown by ftvmctl "         \
		"status; ftvm_state has the state"))                                               \
	M(partner_id, INFO("ftvm_partner_info", "partner",                                         \
		"The partner as this node knows it: its id (empty until its hello) and its "       \
		"partner-channel endpoint; always 1"))                                             \
	M(partner_endpoint, INFO("ftvm_partner_info", "endpoint", ""))                             \
	M(partner_link, IS("ftvm_partner_link_up", "up",                                           \
		"1 while the partner channel's link is up, 0 while it is down"))                   \
	M(partner_state, STATE("ftvm_partner_state", "state",                                      \
		"starting active solo resyncing fenced unknown",                                   \
		"The partner's state as its last heartbeat said it (unknown while the link is "    \
		"down): 1 for that one"))                                                          \
	M(partner_link_changes, COUNTER("ftvm_partner_link_changes_total", "",                    \
		"Transitions of the partner link, up or down, since start"))                       \
	M(partner_last_seen_ms, SECONDS("ftvm_partner_silent_seconds", "",                        \
		"Seconds since the partner was last heard (0 while the link is up)"))              \
	M(partner_auth, STATE("ftvm_partner_auth", "auth", "key none",                             \
		"How the partner channel authenticates: key ([node] key_file) or none "            \
		"(loopback only)"))                                                                \
	M(partner_auth_failures, COUNTER("ftvm_partner_auth_failures_total", "",                  \
		"Partner-channel connections closed since start for not proving the key"))         \
	M(partner_address_refused, COUNTER("ftvm_partner_address_refused_total", "",              \
		"Partner-channel connections closed since start for coming from another address "  \
		"than the partner's"))                                                             \
	M(partner_store_state, STATE("ftvm_partner_store_state", "state",                          \
		"empty starting active solo resyncing fenced stopped",                             \
		"The partner's fence slot in the store: 1 for the state it says"))                 \
	M(partner_store_epoch, GAUGE("ftvm_partner_store_epoch", "",                               \
		"The epoch in the partner's fence slot in the store"))                             \
	M(partner_store_silent_ms, SECONDS("ftvm_partner_store_silent_seconds", "",               \
		"Seconds since the partner's heartbeat in the store last moved"))                  \
	M(store_error, NONEMPTY("ftvm_fence_slot_failing",                                         \
		"1 while this node's last round on the fence slots in the store failed (ftvmctl "  \
		"status says why), else 0"))                                                       \
	M(takeovers, COUNTER("ftvm_takeovers_total", "",                                           \
		"Takeovers by this node since start"))                                             \
	M(since_takeover_ms, SECONDS("ftvm_since_takeover_seconds", "",                            \
		"Seconds since this node's last takeover finished (0: none since start)"))         \
	M(resyncs, COUNTER("ftvm_resyncs_total", "", "Resyncs sent or received since start"))      \
	M(last_resync_pages, GAUGE("ftvm_last_resync_pages", "",                                   \
		"Pages the last resync this node sent carried"))                                   \
	M(last_resync_ms, SECONDS("ftvm_last_resync_duration_seconds", "",                         \
		"How long the last resync this node sent took"))                                   \
	M(journal_rows, GAUGE("ftvm_journal_rows", "",                                             \
		"Rows of the page-table journal kept for a resync"))                               \
	M(journal_limit, GAUGE("ftvm_journal_limit_rows", "",                                      \
		"The journal's rows kept for a partner away at most ([failover] journal_limit)"))  \
	M(journal_given_up, GAUGE("ftvm_journal_given_up", "",                                     \
		"1 when the journal passed its limit while the partner was away: its next resync " \
		"is full"))                                                                        \
	M(frames_total, GAUGE("ftvm_frames", "",                                                   \
		"Frames of the pool for server memory (clients' allocations)"))                    \
	M(frames_free, GAUGE("ftvm_frames_free", "", "Frames of server memory not in use"))        \
	M(frames_revoked, GAUGE("ftvm_frames_revoked", "",                                         \
		"Frames set aside for pointers revoked at a fence"))                               \
	M(pointers_revoked, GAUGE("ftvm_pointers_revoked", "",                                     \
		"Pointers revoked at a fence that their clients have not released"))               \
	M(page_size, GAUGE("ftvm_page_size_bytes", "", "Bytes per frame"))                         \
	M(allocations_own, GAUGE("ftvm_allocations", "origin=own",                                 \
		"Allocations this node knows: made here (own) and mirrored from the partner"))     \
	M(allocations_partner, GAUGE("ftvm_allocations", "origin=partner", ""))                    \
	M(pages_one_sided, COUNTER("ftvm_page_writes_sent_total", "path=one_sided",               \
		"Page blocks sent to the partner since start, by RDMA WRITE (one_sided) and "      \
		"inline in WritePage"))                                                            \
	M(pages_inline, COUNTER("ftvm_page_writes_sent_total", "path=inline", ""))                 \
	M(landings_adopted, COUNTER("ftvm_partner_landings_total", "outcome=adopted",             \
		"The partner's one-sided blocks since start: taken (adopted) and refused (stale, " \
		"bad CRC-32C)"))                                                                   \
	M(landings_refused, COUNTER("ftvm_partner_landings_total", "outcome=refused", ""))         \
	M(landings_granted, COUNTER("ftvm_landing_runs_granted_total", "",                        \
		"Landing runs granted to the partner for whole-page writes since start"))          \
	M(pool_blocks, GAUGE("ftvm_pool_blocks", "",                                               \
		"The pool's registration blocks up to its ceiling"))                               \
	M(pool_blocks_in_use, GAUGE("ftvm_pool_blocks_in_use", "",                                 \
		"Registration blocks frames are taken from now"))                                  \
	M(pool_block_bytes, GAUGE("ftvm_pool_block_size_bytes", "",                                \
		"Bytes per registration block ([memory] pool_block_size, rounded)"))               \
	M(pool_grown, COUNTER("ftvm_pool_blocks_grown_total", "",                                  \
		"Registration blocks that came into use since start"))                             \
	M(pool_shrunk, COUNTER("ftvm_pool_blocks_shrunk_total", "",                                \
		"Registration blocks that left use since start, their memory back to the OS"))     \
	M(registrations_current, GAUGE("ftvm_rdma_registrations", "",                              \
		"The pool's RDMA registrations now (0 over TCP)"))                                 \
	M(registrations_stale, GAUGE("ftvm_rdma_registrations_stale", "",                          \
		"RDMA registrations left behind by blocks that left"))                             \
	M(registrations_purged, COUNTER("ftvm_rdma_registrations_purged_total", "",               \
		"Stale RDMA registrations deregistered since start"))                              \
	M(registrations_failed, COUNTER("ftvm_rdma_registrations_failed_total", "",               \
		"RDMA registrations the device refused since start (that block's data went "       \
		"inline)"))                                                                        \
	M(staging_slabs, GAUGE("ftvm_staging_slabs", "", "Registered staging slabs mapped now"))   \
	M(staging_allocated, COUNTER("ftvm_staging_slabs_allocated_total", "",                     \
		"Registered staging slabs mapped since start"))                                    \
	M(resync_pages_one_sided, COUNTER("ftvm_resync_pages_sent_total", "path=one_sided",       \
		"Resync blocks sent since start, by RDMA WRITE (one_sided) and inline"))           \
	M(resync_pages_inline, COUNTER("ftvm_resync_pages_sent_total", "path=inline", ""))         \
	M(resync_pages_dropped, COUNTER("ftvm_resync_pages_dropped_total", "",                    \
		"The partner's resync blocks dropped as older since start"))                       \
	M(pagetable_folds_idle, COUNTER("ftvm_pagetable_folds_total", "trigger=idle",             \
		"Folds of page writes into the page table since start: when idle, and by a "       \
		"commit with 1024 waiting (backstop)"))                                            \
	M(pagetable_folds_backstop, COUNTER("ftvm_pagetable_folds_total", "trigger=backstop",     \
		""))                                                                               \
	M(pagetable_fold_waiting, GAUGE("ftvm_pagetable_fold_waiting_writes", "",                  \
		"Page writes waiting for a fold"))                                                 \
	M(pagetable_checkpoints_idle, COUNTER("ftvm_pagetable_checkpoints_total",                  \
		"trigger=idle",                                                                    \
		"WAL checkpoints of the page table since start: when idle, and by a commit at "    \
		"the bound (backstop)"))                                                           \
	M(pagetable_checkpoints_backstop, COUNTER("ftvm_pagetable_checkpoints_total",              \
		"trigger=backstop", ""))                                                           \
	M(pagetable_wal_frames, GAUGE("ftvm_pagetable_wal_frames", "",                             \
		"WAL frames not in the page table's database yet"))                                \
	M(pagetable_wal_frames_peak, GAUGE("ftvm_pagetable_wal_frames_peak", "",                   \
		"The most WAL frames not in the database since start"))                            \
	M(pagetable_wal_checkpoint_frames, GAUGE("ftvm_pagetable_wal_checkpoint_frames", "",       \
		"WAL frames at which a commit checkpoints ([node] wal_checkpoint_frames)"))        \
	M(pagetable_commits, COUNTER("ftvm_pagetable_commits_total", "",                           \
		"Page-table transactions committed since start (group commits)"))                  \
	M(loop_pauses, COUNTER("ftvm_loop_pauses_total", "",                                       \
		"Pauses of the node's event loop longer than heartbeat_ms since start"))           \
	M(loop_pause_max_ms, SECONDS("ftvm_loop_pause_max_seconds", "",                            \
		"The longest pause of the node's event loop since start"))                         \
	M(recovered_pages, COUNTER("ftvm_recovered_pages_total", "",                               \
		"Pages that went back to the store's copy, their newer versions lost (kept "       \
		"across restarts; ftvmctl recovery lists them)"))                                  \
	M(recovered_last_at_ms, SECONDS("ftvm_recovered_last_timestamp_seconds", "",               \
		"When the last page went back to the store's copy, in seconds since the epoch "    \
		"(0: none)"))                                                                      \
	M(evictions, COUNTER("ftvm_evictions_total", "",                                           \
		"Pages evicted since start, their frames wanted for another"))                     \
	M(dirty_evictions, COUNTER("ftvm_dirty_evictions_total", "",                               \
		"Dirty pages evicted since start because this node's flash holds them (also in "   \
		"ftvm_evictions_total)"))                                                          \
	M(page_ins, COUNTER("ftvm_page_ins_total", "",                                             \
		"Pages read into frames since start, from the store or from flash"))               \
	M(partner_page_ins, COUNTER("ftvm_partner_page_ins_total", "",                             \
		"Page-ins a partner's write pointer asked for since start (also in "               \
		"ftvm_page_ins_total)"))                                                           \
	M(flash_page_ins, COUNTER("ftvm_flash_page_ins_total", "",                                 \
		"Page-ins read from this node's flash since start (also in ftvm_page_ins_total)")) \
	M(flash_writes, COUNTER("ftvm_flash_page_writes_total", "",                                \
		"Pages written to this node's flash since start"))                                 \
	M(flash_capacity, NOT("the same bytes as sense's flash: "                                  \
		"ftvm_media_capacity_bytes{media=\"flash\",partition=\"server\"}"))                \
	M(flash_free, NOT("the same bytes as sense's flash: "                                      \
		"ftvm_media_free_bytes{media=\"flash\",partition=\"server\"}"))                    \
	M(store_capacity, NOT("the same bytes as sense's store: "                                  \
		"ftvm_media_capacity_bytes{media=\"store\",partition=\"server\"}"))                \
	M(store_free, NOT("the same bytes as sense's store: "                                      \
		"ftvm_media_free_bytes{media=\"store\",partition=\"server\"}"))                    \
	M(header_asked, COUNTER("ftvm_read_header_asked_owner_total", "",                          \
		"Header calls asked of the owner since start, this node's record unconfirmed "     \
		"after a resync"))                                                                 \
	M(header_differed, COUNTER("ftvm_read_header_differed_total", "",                          \
		"Header calls whose owner's answer differed from this node's record since start")) \
	M(cache_frames_total, GAUGE("ftvm_cache_frames", "",                                       \
		"Frames of the pool's storage cache partition ([memory] cache)"))                  \
	M(cache_frames_free, GAUGE("ftvm_cache_frames_free", "",                                   \
		"Frames of the storage cache not in use"))                                         \
	M(cache_replacement_queue, GAUGE("ftvm_cache_evictable_pages", "",                         \
		"Pages of the storage cache that may be evicted"))                                 \
	M(readahead_pages, COUNTER("ftvm_readahead_pages_total", "",                               \
		"Pages of volumes staged by read-ahead since start"))                              \
	M(readahead_hits, COUNTER("ftvm_readahead_hits_total", "",                                 \
		"Pages staged by read-ahead that a read then found, since start"))                 \
	M(readahead_wasted, COUNTER("ftvm_readahead_wasted_total", "",                             \
		"Pages staged by read-ahead evicted unread, since start"))                         \
	M(nbd_connections, GAUGE("ftvm_nbd_connections", "", "NBD connections open now"))          \
	M(nbd_accepted, COUNTER("ftvm_nbd_connections_accepted_total", "",                         \
		"NBD connections accepted since start"))                                           \
	M(nbd_refused, COUNTER("ftvm_nbd_connections_refused_total", "",                           \
		"NBD connections closed at once since start: the most were open"))                 \
	M(nbd_requests, COUNTER("ftvm_nbd_requests_total", "", "NBD requests since start"))        \
	M(nbd_errors, COUNTER("ftvm_nbd_request_errors_total", "",                                 \
		"NBD requests answered with an error since start"))                                \
	M(nbd_protocol_errors, COUNTER("ftvm_nbd_protocol_errors_total", "",                       \
		"NBD connections closed for breaking the protocol since start"))                   \
	M(nbd_read_bytes, COUNTER("ftvm_nbd_read_bytes_total", "",                                 \
		"Bytes read by NBD clients since start"))                                          \
	M(nbd_written_bytes, COUNTER("ftvm_nbd_written_bytes_total", "",                           \
		"Bytes written by NBD clients since start"))                                       \
	M(event_followers, GAUGE("ftvm_event_followers", "",                                       \
		"Clients following this node's events now (ftvmctl events)"))                      \
	M(partner_ack, STATE("ftvm_partner_ack_level", "level", "mirror commit durable",           \
		"When the partner acknowledges a change, as it said when it linked: 1 for its "    \
		"level, 0 for all while it is down or does not say"))
/* clang-format on */
