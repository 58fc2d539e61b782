/* One-sided page data on an RDMA connection (replica/RDMA.md, "One-sided
 * page writes"): the partner's view of its pool, and page blocks placed in
 * it by RDMA WRITE ahead of the message that names them. The WRITEs and the
 * message go on the one RC queue pair, the message last, so the partner has
 * the bytes when the message arrives. */
#pragma once

#include <stddef.h>
#include <stdint.h>

#include "rdma_conn.h"
#include "rdma_planner.h"

/* The WRITEs in front of one queued frame, and how far their posting got. */
struct rdma_write_job {
	struct rdma_plan plan;
	size_t n_xfers;
	struct rdma_xfer xfers[];
};

/* The transport ops of transport.h's one-sided section, on a connection. */
bool rdma_onesided_conn_ok(const struct repl_conn *c);
int rdma_onesided_remote_open(struct repl_conn *c, uint32_t blocks, char *reason,
			      size_t reason_len);
int rdma_onesided_remote_update(struct repl_conn *c, const struct rdma_remote_block *b,
				char *reason, size_t reason_len);
int rdma_onesided_send_after_writes(struct repl_conn *c, const struct repl_remote_write *w,
				    size_t n, const void *payload, size_t len, char *reason,
				    size_t reason_len);

/* Posts the job's next WRITEs as write slots allow. 0 or a failed post's
 * -errno; rdma_plan_done() says whether all went. */
int rdma_onesided_post(struct rdma_conn *c, struct rdma_write_job *j);
/* A signalled WRITE completed: the send-queue entries it stood for are free. */
void rdma_onesided_completed(struct rdma_conn *c, uint64_t wr_id);
