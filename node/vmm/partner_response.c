/* The partner's message response method (seed 002, Fig. 10): what a node does
 * with each paging-synchronization message from its partner. Requests of one
 * batch are applied in order; after one fails, the rest are answered ABORTED.
 * Answers wait, copied (vmm_answer), until the changes are committed; then
 * the turn's answers go down together (vmm_flush).
 *
 * Where the receiver owns the allocation it arbitrates (vmm/VMM.md, "The lock
 * rule"): it refuses a conflicting lock with LOCKED. Otherwise it mirrors.
 * WritePage needs frames here (it brings the whole block); without any, it
 * is refused with NO_SPACE. A write pointer's AllocateWrite asks this node
 * to page its copy in (page_in), refused NO_SPACE the same way.
 * On a one-sided link the answer to AllocateWrite may carry a landing run,
 * and a WritePage naming it brings no data (pagedata/pointer_landings.c). */
#include "vmm_state.h"

#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "log.h"
#include "session.h"

#define LOG_SUBSYSTEM VMM_LOG_SUBSYSTEM

/* One answer being built, with room for its payload. */
struct answer {
	CommandComplete cc;
	char reason[256];
	Ftvm__Partner__SpaceStatus space;
	Ftvm__Partner__LockStatus lock;
	Ftvm__Partner__Header header;
	Ftvm__Partner__SenseInformation sense;
	bool sense_filled;
	Ftvm__Partner__Landing landing;
	Ftvm__Partner__Landing grant, *grant_ptr; /* a fresh grant, in cc.grants */
	bool held; /* answered later (a LandingRevoke waiting for writes) */
	Ftvm__Partner__Landing *runs, **run_ptrs; /* ResyncLandings' answer */
};

__attribute__((format(printf, 3, 4))) static void refuse(struct answer *ans, int status,
							 const char *fmt, ...)
{
	va_list ap;

	va_start(ap, fmt);
	vsnprintf(ans->reason, sizeof(ans->reason), fmt, ap);
	va_end(ap);
	ans->cc.status = status;
	ans->cc.reason = ans->reason;
}

static struct vmm_page *find_page(struct vmm *v, const char *guid, uint64_t page,
				  struct vmm_alloc **ret_alloc, struct answer *ans)
{
	struct vmm_alloc *a = vmm_table_find(v->table, guid);

	if (!a) {
		refuse(ans, FTVM__PARTNER__STATUS__STATUS_NOT_FOUND, "no allocation %s", guid);
		return NULL;
	}
	if (page >= a->pages) {
		refuse(ans, FTVM__PARTNER__STATUS__STATUS_BAD_REQUEST,
		       "%s has pages 0..%llu, not %llu", guid, (unsigned long long)a->pages - 1,
		       (unsigned long long)page);
		return NULL;
	}
	*ret_alloc = a;
	return &a->page[page];
}

/* Fig. 5 step 520: room for this node's copy of the originator's new
 * allocation, where this node's policy puts it (vmm/MEDIA.md, "Space
 * between the nodes"). NO_SPACE, naming the media, when there is none: the
 * AllocateMemory behind it in the batch is refused the same way, so
 * nothing is kept. A request without a policy (an older node) is told this
 * node's store partition, never refused: its allocation goes in its own. */
static void on_space_request(struct vmm *v, const Ftvm__Partner__SpaceRequest *m,
			     struct answer *ans)
{
	uint32_t page_size = frame_pool_page_size(v->pool);
	enum vmm_media media;
	char why[256];

	if (!m->policy[0] && !m->volume) {
		vmm_store_space(v, &ans->space.free_bytes, &ans->space.total_bytes);
	} else if (!m->pages || !m->block_size || m->block_size % page_size ||
		   m->pages > UINT64_MAX / 2 / m->block_size) {
		refuse(ans, FTVM__PARTNER__STATUS__STATUS_BAD_REQUEST,
		       "space for %llu pages of %u bytes (page size %u) cannot be",
		       (unsigned long long)m->pages, m->block_size, page_size);
		return;
	} else if (vmm_media_room(v, m->policy, m->volume, m->pages, m->block_size, &media,
				  &ans->space.free_bytes, &ans->space.total_bytes, why,
				  sizeof(why)) < 0) {
		refuse(ans, FTVM__PARTNER__STATUS__STATUS_NO_SPACE, "%s", why);
		return;
	} else {
		ans->space.media = (char *)vmm_media_name(media);
	}
	ans->cc.payload_case = FTVM__PARTNER__COMMAND_COMPLETE__PAYLOAD_SPACE;
	ans->cc.space = &ans->space;
}

static void on_allocate_memory(struct vmm *v, const Ftvm__Partner__AllocateMemory *m,
			       const struct pt_origin *o, struct answer *ans)
{
	uint32_t page_size = frame_pool_page_size(v->pool);
	char reason[256];
	struct vmm_alloc *a;

	if (!m->guid[0] || vmm_table_find(v->table, m->guid)) {
		refuse(ans, FTVM__PARTNER__STATUS__STATUS_BAD_REQUEST, "allocation '%s' %s",
		       m->guid, m->guid[0] ? "exists already" : "has no guid");
		return;
	}
	if (m->size == 0 || m->block_size == 0 || m->block_size % page_size ||
	    m->header.len > VMM_HEADER_MAX || !m->home[0]) {
		refuse(ans, FTVM__PARTNER__STATUS__STATUS_BAD_REQUEST,
		       "allocation %s: size %llu, block_size %u (page size %u), header %zu bytes",
		       m->guid, (unsigned long long)m->size, m->block_size, page_size,
		       m->header.len);
		return;
	}
	if (!vmm_extent_fits(v, m)) {
		refuse(ans, FTVM__PARTNER__STATUS__STATUS_BAD_REQUEST,
		       "allocation %s: %llu bytes at store offset %llu do not fit in %s's "
		       "partition of the store",
		       m->guid, (unsigned long long)m->size, (unsigned long long)m->store_offset,
		       m->home);
		return;
	}
	a = vmm_alloc_new(m->guid, m->home, m->home, m->policy, m->size, m->block_size,
			  m->header.data, m->header.len);
	if (!a) {
		refuse(ans, FTVM__PARTNER__STATUS__STATUS_INTERNAL, "out of memory");
		return;
	}
	a->store_offset = m->store_offset;
	a->uid = m->uid;
	if (vmm_alloc_set_client(a, m->client) < 0) {
		vmm_alloc_free(a);
		refuse(ans, FTVM__PARTNER__STATUS__STATUS_BAD_REQUEST,
		       "%s: client name '%.80s' is not one ([A-Za-z0-9._-]{0,%d})", m->guid,
		       m->client, CONFIG_CLIENT_NAME_MAX);
		return;
	}
	if (vmm_alloc_set_session(a, m->session) < 0) {
		vmm_alloc_free(a);
		refuse(ans, FTVM__PARTNER__STATUS__STATUS_BAD_REQUEST,
		       "%s: session '%.80s' is not one (%d hex digits)", m->guid, m->session,
		       CONFIG_SESSION_ID_LEN);
		return;
	}
	if (vmm_alloc_set_volume(a, m->volume) < 0 ||
	    (m->volume[0] && m->block_size != page_size)) {
		vmm_alloc_free(a);
		refuse(ans, FTVM__PARTNER__STATUS__STATUS_BAD_REQUEST,
		       "%s: volume '%.80s' is not one (a name of [A-Za-z0-9._-], blocks of the "
		       "page size)",
		       m->guid, m->volume);
		return;
	}
	/* Both nodes making one name at once: each refuses the other's. */
	if (m->volume[0] && vmm_volume_name_taken(v, m->volume)) {
		vmm_alloc_free(a);
		refuse(ans, FTVM__PARTNER__STATUS__STATUS_DENIED, "volume %s exists on %s",
		       m->volume, vmm_node_id(v));
		return;
	}
	/* Its copy here rests where this node's policy and devices say: the
	 * allocation is not made when there is no room for it. */
	if (vmm_media_place(v, a, VMM_PLACE_NEW, reason, sizeof(reason)) < 0) {
		vmm_alloc_free(a);
		refuse(ans, FTVM__PARTNER__STATUS__STATUS_NO_SPACE, "allocation %s: %s", m->guid,
		       reason);
		return;
	}
	vmm_table_insert(v->table, a);
	if (vmm_persist_alloc(v, a, o) < 0)
		refuse(ans, FTVM__PARTNER__STATUS__STATUS_INTERNAL, "page table write failed");
	else
		vmm_tell_volume(v, a, "created");
}

static void space_freed(void *arg)
{
	vmm_space_freed(arg);
}

static void on_release_memory(struct vmm *v, const Ftvm__Partner__ReleaseMemory *m,
			      const struct pt_origin *o, struct answer *ans)
{
	struct vmm_alloc *a = vmm_table_find(v->table, m->guid);
	int r;

	if (!a) {
		refuse(ans, FTVM__PARTNER__STATUS__STATUS_NOT_FOUND, "no allocation %s", m->guid);
		return;
	}
	if (vmm_is_owner(v, a) && (a->freeing || vmm_alloc_locked(a))) {
		refuse(ans, FTVM__PARTNER__STATUS__STATUS_LOCKED, "%s has pages locked on %s",
		       m->guid, vmm_node_id(v));
		return;
	}
	r = pagetable_alloc_delete(v->pt, a->guid, o);
	vmm_changed(v);
	if (r < 0) {
		refuse(ans, FTVM__PARTNER__STATUS__STATUS_INTERNAL, "page table: %s",
		       pagetable_last_error(v->pt));
		return;
	}
	vmm_tell_volume(v, a, "deleted");
	vmm_table_remove(v->table, a);
	vmm_alloc_give_frames(v, a);
	vmm_alloc_free(a);
	/* After the answer: an allocation of ours waiting for room on the
	 * partner asks again behind it, once the partner dropped its copy. */
	vmm_after_commit(v, space_freed, v);
}

static void lock_status(struct vmm_page *p, struct answer *ans)
{
	ans->lock.mode = p->lock_mode;
	ans->lock.owners = p->owners;
	ans->lock.n_owners = p->n_owners;
	ans->lock.version = p->version;
	ans->cc.payload_case = FTVM__PARTNER__COMMAND_COMPLETE__PAYLOAD_LOCK;
	ans->cc.lock = &ans->lock;
}

static void on_lock_request(struct vmm *v, const Ftvm__Partner__LockRequest *m, struct answer *ans)
{
	struct vmm_alloc *a;
	struct vmm_page *p = find_page(v, m->guid, m->page, &a, ans);
	const char *conflict;
	char queued[64];

	if (!p)
		return;
	lock_status(p, ans);
	if (!vmm_is_owner(v, a) || m->mode == FTVM__PARTNER__LOCK_MODE__LOCK_MODE_NONE)
		return;
	conflict = vmm_page_conflict(a, p, m->mode);
	if (!conflict)
		conflict = vmm_ticket_turn(v, m, queued, sizeof(queued));
	if (!conflict)
		return;
	refuse(ans, FTVM__PARTNER__STATUS__STATUS_LOCKED, "%s page %llu is %s", m->guid,
	       (unsigned long long)m->page, conflict);
	vmm_ticket_queue(v, m);
}

/* A write pointer's lock with page_in: this copy must be able to take the
 * release, so it is made resident now, unless a landing will take the block
 * (vmm/VMM.md, "The partner pages in"). The lock keeps it so. false, with
 * NO_SPACE, when no frames can be had: the caller unlocks. */
static bool page_in_for_pointer(struct vmm *v, struct vmm_alloc *a, uint64_t page,
				struct answer *ans)
{
	const struct vmm_page *p = &a->page[page];
	bool in_flight = p->pagein || p->filling;
	char why[200];
	int r = vmm_page_make_resident(v, a, page, why, sizeof(why));

	if (r == -ENOSPC) {
		refuse(ans, FTVM__PARTNER__STATUS__STATUS_NO_SPACE, "%s page %llu: %s", a->guid,
		       (unsigned long long)page, why);
		return false;
	}
	if (r < 0) /* its release's WritePage takes frames then, as without */
		log_warning("%s page %llu: not paged in for the partner's pointer: %s", a->guid,
			    (unsigned long long)page, why);
	else
		v->counted.partner_page_ins += r == 0 && !in_flight;
	return true;
}

/* block_follows: the batch brings the block in a WritePage right behind (a
 * whole-page write), so a landing would go unused. */
static void on_allocate_lock(struct vmm *v, const char *guid, uint64_t page, const char *owner,
			     int mode, bool block_follows, bool page_in, struct answer *ans)
{
	struct vmm_alloc *a;
	struct vmm_page *p = find_page(v, guid, page, &a, ans);
	const char *conflict;

	if (!p)
		return;
	if (!owner[0]) {
		refuse(ans, FTVM__PARTNER__STATUS__STATUS_BAD_REQUEST, "lock without an owner");
		return;
	}
	conflict = vmm_page_conflict(a, p, mode);
	if (conflict && vmm_is_owner(v, a)) {
		refuse(ans, FTVM__PARTNER__STATUS__STATUS_LOCKED, "%s page %llu is %s", guid,
		       (unsigned long long)page, conflict);
		return;
	}
	if (conflict)
		/* The owner granted it, so its view wins: ours was behind. */
		log_warning("%s page %llu: mirror shows it %s, owner %s granted %s", guid,
			    (unsigned long long)page, conflict, a->owner, owner);
	if (vmm_lock(v, p, mode, owner) < 0) {
		refuse(ans, FTVM__PARTNER__STATUS__STATUS_INTERNAL, "out of memory");
		return;
	}
	/* Where the partner's release can write the block one-sided. */
	if (mode == FTVM__PARTNER__LOCK_MODE__LOCK_MODE_WRITE && !block_follows &&
	    pagedata_landing_open(v->pagedata, a, page, owner, &ans->landing)) {
		ans->cc.payload_case = FTVM__PARTNER__COMMAND_COMPLETE__PAYLOAD_LANDING;
		ans->cc.landing = &ans->landing;
	} else if (page_in && !block_follows && !page_in_for_pointer(v, a, page, ans)) {
		vmm_unlock(v, a, page, owner);
	}
}

/* A whole-page write's block landed in a run granted ahead: adopted, and a
 * fresh grant goes back with the answer. */
static void on_landing_grant(struct vmm *v, const Ftvm__Partner__LandingGrant *m,
			     struct answer *ans)
{
	if (pagedata_granted_on_grant(v->pagedata, m, ans->reason, sizeof(ans->reason)) < 0) {
		ans->cc.status = FTVM__PARTNER__STATUS__STATUS_BAD_REQUEST;
		ans->cc.reason = ans->reason;
	}
}

/* Runs for as many of the survivor's blocks as free frames allow; the rest
 * come inline, so too few frames (or memory) is never a refusal. */
static void on_resync_landings(struct vmm *v, const Ftvm__Partner__ResyncLandings *m,
			       struct answer *ans)
{
	size_t n;

	if (!vmm_resync_receiving(v)) {
		refuse(ans, FTVM__PARTNER__STATUS__STATUS_BAD_REQUEST,
		       "ResyncLandings outside a resync");
		return;
	}
	ans->runs = calloc(m->n_frames + 1, sizeof(*ans->runs));
	ans->run_ptrs = calloc(m->n_frames + 1, sizeof(*ans->run_ptrs));
	if (!ans->runs || !ans->run_ptrs)
		return;
	n = pagedata_resync_landings_open(v->pagedata, m->frames, m->n_frames, ans->runs);
	for (size_t i = 0; i < n; i++)
		ans->run_ptrs[i] = &ans->runs[i];
	ans->cc.n_landings = n;
	ans->cc.landings = ans->run_ptrs;
}

static void on_write_page(struct vmm *v, const Ftvm__Partner__WritePage *m, struct answer *ans)
{
	struct pagedata_incoming in = { .write_page = m };
	struct vmm_alloc *a;
	struct vmm_page *p = find_page(v, m->guid, m->page, &a, ans);
	bool fresh;
	int r;

	if (!p)
		return;
	if (!vmm_page_write_locked(p)) {
		refuse(ans, FTVM__PARTNER__STATUS__STATUS_BAD_REQUEST,
		       "WritePage to %s page %llu, which nobody has write-locked", m->guid,
		       (unsigned long long)m->page);
		return;
	}
	r = pagedata_receive(v->pagedata, a, &in, &ans->grant, &fresh, ans->reason,
			     sizeof(ans->reason));
	if (r < 0) {
		ans->cc.status = r == -ENOSPC ? FTVM__PARTNER__STATUS__STATUS_NO_SPACE
					      : FTVM__PARTNER__STATUS__STATUS_BAD_REQUEST;
		ans->cc.reason = ans->reason;
		return;
	}
	if (fresh) {
		ans->grant_ptr = &ans->grant;
		ans->cc.n_grants = 1;
		ans->cc.grants = &ans->grant_ptr;
	}
}

/* Whether env (NULL: none) is a WritePage of guid's page: after an
 * AllocateWrite, the block comes with the lock; before a release, it was
 * applied, since the batch went on to the release. */
static bool write_page_of(const Envelope *env, const char *guid, uint64_t page)
{
	return env && env->message_case == FTVM__PARTNER__ENVELOPE__MESSAGE_WRITE_PAGE &&
	       env->write_page->page == page && strcmp(env->write_page->guid, guid) == 0;
}

/* The CRC-32C of the page's block as released: a WritePage just before the
 * release put a block of its crc32c in the page's frames (pagedata checked
 * it there, inline or landed), so that is the frames' CRC without reading
 * them again (a whole-page write's release; 1.2k instructions of the
 * partner's per write); otherwise the frames' own, a pointer's release. */
static uint32_t released_crc(struct vmm *v, struct vmm_alloc *a,
			     const Ftvm__Partner__ReleasePointer *m, const Envelope *prev)
{
	return write_page_of(prev, m->guid, m->page) ? prev->write_page->crc32c
						     : vmm_block_crc(v, a, m->page);
}

static void on_release_pointer(struct vmm *v, const Ftvm__Partner__ReleasePointer *m,
			       const struct pt_origin *o, const Envelope *prev, struct answer *ans)
{
	struct vmm_alloc *a;
	struct vmm_page *p = find_page(v, m->guid, m->page, &a, ans);

	if (!p)
		return;
	/* Every refusal comes before the unlock: a refused release keeps its
	 * lock. */
	if (!vmm_page_locked_by(p, m->owner)) {
		refuse(ans, FTVM__PARTNER__STATUS__STATUS_BAD_REQUEST,
		       "%s holds no lock on %s page %llu", m->owner, m->guid,
		       (unsigned long long)m->page);
		return;
	}
	if (m->modified && !vmm_page_write_locked(p)) {
		refuse(ans, FTVM__PARTNER__STATUS__STATUS_BAD_REQUEST,
		       "%s released %s page %llu as modified with a read lock", m->owner, m->guid,
		       (unsigned long long)m->page);
		return;
	}
	if (m->modified && !p->resident) {
		refuse(ans, FTVM__PARTNER__STATUS__STATUS_BAD_REQUEST,
		       "%s released %s page %llu as modified without its WritePage", m->owner,
		       m->guid, (unsigned long long)m->page);
		return;
	}
	vmm_unlock(v, a, m->page, m->owner);
	if (!m->modified)
		return;
	/* The owner assigns versions; a mirror takes the owner's. */
	if (vmm_page_modified(v, a, m->page, vmm_is_owner(v, a) ? p->version + 1 : m->version,
			      released_crc(v, a, m, prev), o) < 0)
		refuse(ans, FTVM__PARTNER__STATUS__STATUS_INTERNAL, "page table write failed");
	lock_status(p, ans);
}

static void on_read_header(struct vmm *v, const Ftvm__Partner__ReadHeader *m, struct answer *ans)
{
	struct vmm_alloc *a = vmm_table_find(v->table, m->guid);

	if (!a) {
		refuse(ans, FTVM__PARTNER__STATUS__STATUS_NOT_FOUND, "no allocation %s", m->guid);
		return;
	}
	vmm_alloc_header(a, &ans->header);
	ans->cc.payload_case = FTVM__PARTNER__COMMAND_COMPLETE__PAYLOAD_HEADER;
	ans->cc.header = &ans->header;
}

static void on_sense_request(struct vmm *v, const Ftvm__Partner__SenseRequest *m,
			     struct answer *ans)
{
	if (vmm_sense_fill(v, m->page_table, &ans->sense) < 0) {
		refuse(ans, FTVM__PARTNER__STATUS__STATUS_INTERNAL, "out of memory");
		return;
	}
	ans->sense_filled = true;
	ans->cc.payload_case = FTVM__PARTNER__COMMAND_COMPLETE__PAYLOAD_SENSE;
	ans->cc.sense = &ans->sense;
}

/* prev, next: the requests before and after env in its batch, or NULL. */
static void apply(struct vmm *v, const Envelope *env, const Envelope *prev, const Envelope *next,
		  struct answer *ans)
{
	struct pt_origin o = { .node = env->sender, .lsn = env->lsn, .own = false };

	switch (env->message_case) {
	case FTVM__PARTNER__ENVELOPE__MESSAGE_SPACE_REQUEST:
		on_space_request(v, env->space_request, ans);
		break;
	case FTVM__PARTNER__ENVELOPE__MESSAGE_ALLOCATE_MEMORY:
		on_allocate_memory(v, env->allocate_memory, &o, ans);
		break;
	case FTVM__PARTNER__ENVELOPE__MESSAGE_RELEASE_MEMORY:
		on_release_memory(v, env->release_memory, &o, ans);
		break;
	case FTVM__PARTNER__ENVELOPE__MESSAGE_LOCK_REQUEST:
		on_lock_request(v, env->lock_request, ans);
		break;
	case FTVM__PARTNER__ENVELOPE__MESSAGE_READ_HEADER:
		on_read_header(v, env->read_header, ans);
		break;
	case FTVM__PARTNER__ENVELOPE__MESSAGE_WRITE_PAGE:
		on_write_page(v, env->write_page, ans);
		break;
	case FTVM__PARTNER__ENVELOPE__MESSAGE_SENSE_REQUEST:
		on_sense_request(v, env->sense_request, ans);
		break;
	case FTVM__PARTNER__ENVELOPE__MESSAGE_ALLOCATE_READ:
		on_allocate_lock(v, env->allocate_read->guid, env->allocate_read->page,
				 env->allocate_read->owner,
				 FTVM__PARTNER__LOCK_MODE__LOCK_MODE_READ, false, false, ans);
		break;
	case FTVM__PARTNER__ENVELOPE__MESSAGE_ALLOCATE_WRITE:
		on_allocate_lock(
			v, env->allocate_write->guid, env->allocate_write->page,
			env->allocate_write->owner, FTVM__PARTNER__LOCK_MODE__LOCK_MODE_WRITE,
			write_page_of(next, env->allocate_write->guid, env->allocate_write->page),
			env->allocate_write->page_in, ans);
		break;
	case FTVM__PARTNER__ENVELOPE__MESSAGE_RELEASE_POINTER:
		on_release_pointer(v, env->release_pointer, &o, prev, ans);
		break;
	case FTVM__PARTNER__ENVELOPE__MESSAGE_LANDING_GRANT:
		on_landing_grant(v, env->landing_grant, ans);
		break;
	case FTVM__PARTNER__ENVELOPE__MESSAGE_MAKE_VOLUME:
		if (vmm_volume_make_for_partner(v, env->make_volume, env->seq, ans->reason,
						sizeof(ans->reason)) < 0) {
			ans->cc.status = FTVM__PARTNER__STATUS__STATUS_BAD_REQUEST;
			ans->cc.reason = ans->reason;
		} else {
			ans->held = true;
		}
		break;
	case FTVM__PARTNER__ENVELOPE__MESSAGE_LANDING_REVOKE:
		ans->held = pagedata_granted_revoke(v->pagedata, env->landing_revoke, env->seq);
		break;
	case FTVM__PARTNER__ENVELOPE__MESSAGE_DESTAGED:
		vmm_destaged(v, env->destaged->guid, env->destaged->page, env->destaged->version,
			     env->destaged->crc32c);
		break;
	case FTVM__PARTNER__ENVELOPE__MESSAGE_OWNER_CHANGE:
		ans->cc.status =
			vmm_owner_changed(v, env->owner_change->guid, env->owner_change->owner, &o,
					  ans->reason, sizeof(ans->reason));
		if (ans->cc.status)
			ans->cc.reason = ans->reason;
		break;
	case FTVM__PARTNER__ENVELOPE__MESSAGE_RESYNC_LANDINGS:
		on_resync_landings(v, env->resync_landings, ans);
		break;
	case FTVM__PARTNER__ENVELOPE__MESSAGE_SESSION_QUERY:
		if (!vmm_session_live(v, env->session_query->session))
			refuse(ans, FTVM__PARTNER__STATUS__STATUS_NOT_FOUND,
			       "no connection here is bound to session %.8s",
			       env->session_query->session);
		break;
	case FTVM__PARTNER__ENVELOPE__MESSAGE_RESYNC_BEGIN:
	case FTVM__PARTNER__ENVELOPE__MESSAGE_RESYNC_ALLOCATION:
	case FTVM__PARTNER__ENVELOPE__MESSAGE_RESYNC_PAGE:
	case FTVM__PARTNER__ENVELOPE__MESSAGE_RESYNC_END:
		ans->cc.status = vmm_resync_apply(v, env, ans->reason, sizeof(ans->reason));
		if (ans->cc.status)
			ans->cc.reason = ans->reason;
		break;
	default:
		refuse(ans, FTVM__PARTNER__STATUS__STATUS_UNSUPPORTED,
		       "%s is not served by this node's version", codec_message_name(env));
		break;
	}
}

/* Whether a request after envs[i] in its batch carries the same LSN: the
 * change is not whole until that one applies too. */
static bool lsn_goes_on(Envelope *const *envs, size_t n, size_t i)
{
	for (size_t j = i + 1; j < n; j++)
		if (envs[j]->lsn == envs[i]->lsn)
			return true;
	return false;
}

/* The sender's LSN is noted as applied only when every request of the batch
 * that carries it applied: a whole-page write refused at its WritePage, after
 * its LockRequest and AllocateWrite went through, did not happen, and an LSN
 * noted for it would let a rejoin take the histories as equal (vmm/VMM.md, "The
 * whole-page write of a page owned by the partner"). So each answer's
 * applied_lsn claims only changes applied whole. */
void vmm_partner_request(struct vmm *v, Envelope *const *envs, size_t n)
{
	bool aborted = false;
	uint64_t failed_seq = 0;

	for (size_t i = 0; i < n; i++) {
		struct answer ans = { .cc = FTVM__PARTNER__COMMAND_COMPLETE__INIT };

		ftvm__partner__lock_status__init(&ans.lock);
		ftvm__partner__space_status__init(&ans.space);
		if (aborted)
			refuse(&ans, FTVM__PARTNER__STATUS__STATUS_ABORTED,
			       "not applied: seq %llu of the same batch failed",
			       (unsigned long long)failed_seq);
		else
			apply(v, envs[i], i ? envs[i - 1] : NULL, i + 1 < n ? envs[i + 1] : NULL,
			      &ans);
		if (ans.cc.status != FTVM__PARTNER__STATUS__STATUS_OK && !aborted) {
			aborted = true;
			failed_seq = envs[i]->seq;
			log_debug("partner seq %llu %s: %s", (unsigned long long)envs[i]->seq,
				  codec_message_name(envs[i]), ans.reason);
		} else if (!aborted && envs[i]->lsn > pagetable_partner_applied_lsn(v->pt) &&
			   !lsn_goes_on(envs, n, i)) {
			pagetable_note_partner_applied_lsn(v->pt, envs[i]->lsn);
		}
		ans.cc.applied_lsn = pagetable_partner_applied_lsn(v->pt);
		if (!ans.held)
			vmm_answer(v, envs[i]->seq, &ans.cc);
		if (ans.sense_filled)
			vmm_sense_release(&ans.sense);
		free(ans.runs);
		free(ans.run_ptrs);
	}
	if (v->flushes_recheck) {
		v->flushes_recheck = false;
		vmm_flush_check(v);
	}
	/* The answers leave with the commit, at the end of this turn. */
	vmm_changed(v);
}
