/* The partner session faked below replica/session.h for the memory
 * manager's unit tests: fake_session.h says what it does. */
#include "fake_session.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "vmm.h"

/* An envelope the partner would read: packed and decoded again. */
struct held {
	uint8_t *payload;
	size_t len;
};

struct repl_session {
	char node_id[64], partner_id[64];
	bool link_up;
	uint64_t epoch;
	uint64_t next_seq;    /* ours */
	uint64_t partner_seq; /* what fake_session_deliver numbers */
	unsigned batches;
	struct fake_request **reqs;
	size_t n_reqs;
	Envelope **answers;	 /* answers that went out, decoded */
	size_t *requests_before; /* how many requests had gone before each */
	size_t n_answers;
	unsigned answer_calls;
};

static void *grow(void *array, size_t n, size_t size)
{
	void *p = realloc(array, (n + 1) * size);

	if (!p) {
		fprintf(stderr, "fake session: out of memory\n");
		exit(99);
	}
	return p;
}

static void fill_header(const struct repl_session *s, Envelope *env, const char *sender)
{
	env->version = FTVM__PARTNER__PROTOCOL_VERSION__PROTOCOL_VERSION_CURRENT;
	env->sender = (char *)sender;
	env->epoch = s->epoch;
}

static void pack(const Envelope *env, struct held *ret)
{
	if (codec_payload_pack(&env->base, &ret->payload, &ret->len) < 0) {
		fprintf(stderr, "fake session: an envelope does not pack\n");
		exit(99);
	}
}

/* What the other side reads of payload; exits on a payload that does not
 * decode: the vmm sent something the wire cannot carry. */
static Envelope *decode(const struct held *h)
{
	char err[256];
	Envelope *env;

	if (codec_envelope_decode(h->payload, h->len, &env, err, sizeof(err)) < 0) {
		fprintf(stderr, "fake session: an envelope does not decode: %s\n", err);
		exit(99);
	}
	return env;
}

static Envelope *round_trip(const Envelope *env)
{
	struct held h;
	Envelope *out;

	pack(env, &h);
	out = decode(&h);
	free(h.payload);
	return out;
}

struct repl_session *fake_session_new(const char *node_id, const char *partner_id)
{
	struct repl_session *s = calloc(1, sizeof(*s));

	if (!s)
		return NULL;
	snprintf(s->node_id, sizeof(s->node_id), "%s", node_id);
	snprintf(s->partner_id, sizeof(s->partner_id), "%s", partner_id);
	s->link_up = true;
	return s;
}

void fake_session_free(struct repl_session *s)
{
	if (!s)
		return;
	for (size_t i = 0; i < s->n_reqs; i++) {
		codec_envelope_free(s->reqs[i]->env);
		free(s->reqs[i]);
	}
	for (size_t i = 0; i < s->n_answers; i++)
		codec_envelope_free(s->answers[i]);
	free(s->reqs);
	free(s->answers);
	free(s->requests_before);
	free(s);
}

void fake_session_set_link(struct repl_session *s, bool up)
{
	s->link_up = up;
}

size_t fake_session_requests(const struct repl_session *s)
{
	return s->n_reqs;
}

struct fake_request *fake_session_request(struct repl_session *s, size_t i)
{
	return i < s->n_reqs ? s->reqs[i] : NULL;
}

struct fake_request *fake_session_pending(struct repl_session *s, int message_case)
{
	for (size_t i = 0; i < s->n_reqs; i++)
		if (!s->reqs[i]->answered && (int)s->reqs[i]->env->message_case == message_case)
			return s->reqs[i];
	return NULL;
}

size_t fake_session_pending_count(const struct repl_session *s)
{
	size_t n = 0;

	for (size_t i = 0; i < s->n_reqs; i++)
		n += !s->reqs[i]->answered;
	return n;
}

void fake_session_answer(struct repl_session *s, struct fake_request *r, const CommandComplete *cc)
{
	Envelope env = FTVM__PARTNER__ENVELOPE__INIT, *got;

	if (r->answered) {
		fprintf(stderr, "fake session: seq %llu answered twice\n",
			(unsigned long long)r->seq);
		exit(99);
	}
	r->answered = true;
	fill_header(s, &env, s->partner_id);
	env.answers = r->seq;
	env.message_case = FTVM__PARTNER__ENVELOPE__MESSAGE_COMMAND_COMPLETE;
	env.command_complete = (CommandComplete *)cc;
	got = round_trip(&env);
	r->done(got->command_complete, r->arg);
	codec_envelope_free(got);
}

void fake_session_answer_status(struct repl_session *s, struct fake_request *r, int status,
				const char *reason)
{
	CommandComplete cc = FTVM__PARTNER__COMMAND_COMPLETE__INIT;

	cc.status = status;
	cc.reason = (char *)(reason ? reason : "");
	fake_session_answer(s, r, &cc);
}

size_t fake_session_answer_all(struct repl_session *s)
{
	size_t n = 0;

	/* Answers may make requests: the list is read again after each. */
	for (size_t i = 0; i < s->n_reqs; i++)
		if (!s->reqs[i]->answered) {
			fake_session_answer_status(s, s->reqs[i], FTVM__PARTNER__STATUS__STATUS_OK,
						   NULL);
			n++;
		}
	return n;
}

void fake_session_fail_pending(struct repl_session *s, int status, const char *reason)
{
	for (size_t i = 0; i < s->n_reqs; i++)
		if (!s->reqs[i]->answered)
			fake_session_answer_status(s, s->reqs[i], status, reason);
}

void fake_session_deliver(struct repl_session *s, struct vmm *v, Envelope *const *envs, size_t n)
{
	Envelope **got = calloc(n ? n : 1, sizeof(*got));

	if (!got)
		exit(99);
	for (size_t i = 0; i < n; i++) {
		fill_header(s, envs[i], s->partner_id);
		envs[i]->seq = ++s->partner_seq;
		envs[i]->answers = 0;
		got[i] = round_trip(envs[i]);
	}
	vmm_partner_request(v, got, n);
	for (size_t i = 0; i < n; i++)
		codec_envelope_free(got[i]);
	free(got);
}

const CommandComplete *fake_session_completion(const struct repl_session *s, uint64_t seq)
{
	for (size_t i = 0; i < s->n_answers; i++)
		if (s->answers[i]->answers == seq)
			return s->answers[i]->command_complete;
	return NULL;
}

size_t fake_session_requests_before(const struct repl_session *s, uint64_t seq)
{
	for (size_t i = 0; i < s->n_answers; i++)
		if (s->answers[i]->answers == seq)
			return s->requests_before[i];
	return SIZE_MAX;
}

unsigned fake_session_answer_calls(const struct repl_session *s)
{
	return s->answer_calls;
}

/* ---- replica/session.h, as far as the memory manager calls it ---- */

int repl_session_request_batch(struct repl_session *s, Envelope *const *envs, size_t n,
			       uint32_t timeout_ms, pending_done_fn done, void *const *args)
{
	if (!s->link_up)
		return -ENOTCONN;
	s->batches++;
	for (size_t i = 0; i < n; i++) {
		struct fake_request *r = calloc(1, sizeof(*r));

		if (!r)
			exit(99);
		fill_header(s, envs[i], s->node_id);
		envs[i]->seq = ++s->next_seq;
		envs[i]->answers = 0;
		r->seq = envs[i]->seq;
		r->batch = s->batches;
		r->env = round_trip(envs[i]);
		r->done = done;
		r->arg = args[i];
		s->reqs = grow(s->reqs, s->n_reqs, sizeof(*s->reqs));
		s->reqs[s->n_reqs++] = r;
	}
	return 0;
}

int repl_session_request(struct repl_session *s, Envelope *env, uint32_t timeout_ms,
			 pending_done_fn done, void *arg)
{
	return repl_session_request_batch(s, &env, 1, timeout_ms, done, &arg);
}

int repl_session_request_batch_landed(struct repl_session *s, Envelope *const *envs, size_t n,
				      uint32_t timeout_ms, pending_done_fn done, void *const *args,
				      const struct repl_page_write *writes, size_t n_writes)
{
	if (!n_writes)
		return repl_session_request_batch(s, envs, n, timeout_ms, done, args);
	return -EOPNOTSUPP; /* TCP: nothing one-sided */
}

bool repl_session_inline_instead(int r)
{
	return r == -ESTALE || r == -ENOENT || r == -ERANGE || r == -EOPNOTSUPP;
}

int repl_session_answer(struct repl_session *s, const struct repl_answer *answers, size_t n)
{
	if (!s->link_up)
		return -ENOTCONN;
	s->answer_calls++;
	for (size_t i = 0; i < n; i++) {
		Envelope env = FTVM__PARTNER__ENVELOPE__INIT;
		struct held h;

		fill_header(s, &env, s->node_id);
		env.answers = answers[i].seq;
		env.message_case = FTVM__PARTNER__ENVELOPE__MESSAGE_COMMAND_COMPLETE;
		env.command_complete = (CommandComplete *)answers[i].cc;
		pack(&env, &h);
		s->answers = grow(s->answers, s->n_answers, sizeof(*s->answers));
		s->requests_before =
			grow(s->requests_before, s->n_answers, sizeof(*s->requests_before));
		s->answers[s->n_answers] = decode(&h);
		s->requests_before[s->n_answers++] = s->n_reqs;
		free(h.payload);
	}
	return 0;
}

bool repl_session_link_up(const struct repl_session *s)
{
	return s->link_up;
}

const char *repl_session_partner_id(const struct repl_session *s)
{
	return s->partner_id;
}

void repl_session_set_epoch(struct repl_session *s, uint64_t epoch)
{
	s->epoch = epoch;
}

bool repl_session_one_sided(const struct repl_session *s)
{
	return false;
}

int repl_session_landing_open(struct repl_session *s, uint64_t frame, uint32_t frames,
			      struct repl_landing *ret)
{
	return -EOPNOTSUPP;
}

int repl_session_landing_check(const struct repl_session *s, const struct repl_landing *l,
			       char *reason, size_t reason_len)
{
	snprintf(reason, reason_len, "the link does not take page data one-sided");
	return -EOPNOTSUPP;
}

int repl_session_pool_block_out(struct repl_session *s, uint32_t block, char *reason,
				size_t reason_len)
{
	return 0;
}

int repl_session_pool_block_in(struct repl_session *s, uint32_t block, char *reason,
			       size_t reason_len)
{
	return 0;
}

int repl_session_pool_purge(struct repl_session *s, char *reason, size_t reason_len)
{
	return 0;
}

void repl_session_pool_stats(const struct repl_session *s, struct repl_pool_stats *ret)
{
	memset(ret, 0, sizeof(*ret));
}

int repl_session_staging_take(struct repl_session *s, uint64_t length, void **ret_addr)
{
	return -EOPNOTSUPP;
}

void repl_session_staging_give(struct repl_session *s, void *addr)
{
}

void repl_session_staging_trim(struct repl_session *s)
{
}
