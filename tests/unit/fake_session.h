/* A fake of the partner session (replica/session.h) for the memory manager's
 * unit tests: it implements the repl_session_* calls node/vmm/, node/pagedata/
 * and node/ha/ make (node.c's lifecycle calls aside) and nothing of the wire.
 * The real session is tested in test_session and, with real daemons, e2e.
 *
 * What it does:
 * - Requests the vmm sends (repl_session_request, _request_batch) get their
 *   seq, sender and epoch as the real session's would, and are kept packed
 *   and decoded again (what the partner would read), in the order sent, with
 *   the batch they went in. The test answers each (fake_session_answer) or
 *   leaves it pending; fake_session_fail_pending fails what is left, as the
 *   real one does at stop.
 * - Answers the vmm gives the partner (repl_session_answer) are kept, decoded,
 *   with how many requests had gone before them and how many calls brought
 *   them: a test sees an answer only once the vmm sent it.
 * - The link is up unless a test says otherwise; it is never one-sided (TCP):
 *   landings, one-sided writes and staging slabs are -EOPNOTSUPP, and the
 *   pool's blocks are nobody's business (0). */
#pragma once

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "codec.h"
#include "session.h"

struct vmm;

struct fake_request {
	uint64_t seq;
	unsigned batch; /* requests sent in one call share it (1, 2, ...) */
	Envelope *env;	/* as the partner would decode it */
	pending_done_fn done;
	void *arg;
	bool answered;
};

/* node_id: what the vmm's envelopes say they come from; partner_id: the
 * partner's name (repl_session_partner_id) and the sender of what
 * fake_session_deliver brings. */
struct repl_session *fake_session_new(const char *node_id, const char *partner_id);
/* Frees what it kept; requests still pending are dropped without a call
 * (fake_session_fail_pending first, as node.c does at stop). NULL is fine. */
void fake_session_free(struct repl_session *s);

void fake_session_set_link(struct repl_session *s, bool up);

/* The requests sent so far, in order; i from 0. */
size_t fake_session_requests(const struct repl_session *s);
struct fake_request *fake_session_request(struct repl_session *s, size_t i);
/* The first request not answered yet whose message is message_case
 * (FTVM__PARTNER__ENVELOPE__MESSAGE_*), or NULL. */
struct fake_request *fake_session_pending(struct repl_session *s, int message_case);
/* Requests not answered yet. */
size_t fake_session_pending_count(const struct repl_session *s);

/* The partner's answer to r: cc as given (packed and decoded, as the wire
 * would); runs r's completion now. */
void fake_session_answer(struct repl_session *s, struct fake_request *r, const CommandComplete *cc);
/* The same with status (and reason) alone. */
void fake_session_answer_status(struct repl_session *s, struct fake_request *r, int status,
				const char *reason);
/* Answers OK every request not answered yet, in order, including those the
 * answers make; how many. */
size_t fake_session_answer_all(struct repl_session *s);
/* Runs every pending request's completion with status and reason, as the
 * real session does at a stop or a lost link. */
void fake_session_fail_pending(struct repl_session *s, int status, const char *reason);

/* Brings the partner's requests envs (messages set) to the vmm as the real
 * session would: seq, sender (partner_id) and epoch filled, packed, decoded
 * and handed to vmm_partner_request in one call. Each envs[i]->seq is set,
 * for fake_session_completion. lsn is the caller's (0: none). */
void fake_session_deliver(struct repl_session *s, struct vmm *v, Envelope *const *envs, size_t n);
/* The vmm's answer to the partner's request seq, as it went out (decoded);
 * NULL while it is not sent yet. */
const CommandComplete *fake_session_completion(const struct repl_session *s, uint64_t seq);
/* How many of the vmm's requests went before its answer to seq (SIZE_MAX:
 * not answered). */
size_t fake_session_requests_before(const struct repl_session *s, uint64_t seq);
/* How many repl_session_answer calls there were. */
unsigned fake_session_answer_calls(const struct repl_session *s);
