/* The fence thread and the slot format (storage/sbd.h, node/ha/HA.md). The thread does
 * all of the slot I/O so that a store that hangs stops the heartbeat (which
 * the partner then sees) but never the event loop. */
#define _GNU_SOURCE /* O_DIRECT */
#include "sbd.h"

#include <endian.h>
#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>
#include <sys/eventfd.h>
#include <time.h>
#include <unistd.h>

#include <event2/event.h>

#include "clock.h"
#include "crc32c.h"
#include "log.h"
#include "store.h"

#define LOG_SUBSYSTEM "sbd"
#define SBD_VERSION 1u

/* On disk at the start of the sector, little-endian; the rest is zero. */
struct sbd_disk {
	char magic[8];
	uint32_t version;
	uint32_t state;		      /* slot: enum sbd_state; mailbox: 0 */
	uint64_t epoch;		      /* slot: the node's; mailbox: fence at most this */
	uint64_t counter;	      /* bumped by each write */
	char node[CONFIG_ID_MAX + 1]; /* slot: its node; mailbox: who asks */
	uint8_t pad[7];
	uint32_t crc32c; /* of everything before it */
};

_Static_assert(sizeof(struct sbd_disk) <= STORE_SECTOR, "a slot fits a sector");
_Static_assert(offsetof(struct sbd_disk, crc32c) == SBD_CRC_OFFSET,
	       "storage/sbd.h has the checksum's place");

static const char slot_magic[8] = "FTVMSLOT", mailbox_magic[8] = "FTVMMAIL";

static void encode(const char *magic, uint32_t state, uint64_t epoch, uint64_t counter,
		   const char *node, uint8_t *sector)
{
	struct sbd_disk d = { .version = htole32(SBD_VERSION) };

	memcpy(d.magic, magic, sizeof(d.magic));
	d.state = htole32(state);
	d.epoch = htole64(epoch);
	d.counter = htole64(counter);
	strncpy(d.node, node, sizeof(d.node) - 1);
	d.crc32c = htole32(crc32c(0, &d, offsetof(struct sbd_disk, crc32c)));
	memset(sector, 0, STORE_SECTOR);
	memcpy(sector, &d, sizeof(d));
}

static int decode(const char *magic, const uint8_t *sector, struct sbd_disk *ret)
{
	static const struct sbd_disk zero;

	memcpy(ret, sector, sizeof(*ret));
	if (memcmp(ret, &zero, sizeof(zero)) == 0)
		return -ENOENT;
	if (memcmp(ret->magic, magic, sizeof(ret->magic)) != 0 ||
	    le32toh(ret->version) != SBD_VERSION ||
	    le32toh(ret->crc32c) != crc32c(0, ret, offsetof(struct sbd_disk, crc32c)) ||
	    memchr(ret->node, '\0', sizeof(ret->node)) == NULL)
		return -EBADMSG;
	return 0;
}

void sbd_slot_encode(const struct sbd_slot *s, uint8_t *sector)
{
	encode(slot_magic, s->state, s->epoch, s->counter, s->node, sector);
}

int sbd_slot_decode(const uint8_t *sector, struct sbd_slot *ret)
{
	struct sbd_disk d;
	int r = decode(slot_magic, sector, &d);

	if (r < 0)
		return r;
	if (le32toh(d.state) > SBD_STATE_STOPPED)
		return -EBADMSG;
	memcpy(ret->node, d.node, sizeof(ret->node));
	ret->state = le32toh(d.state);
	ret->epoch = le64toh(d.epoch);
	ret->counter = le64toh(d.counter);
	return 0;
}

void sbd_mailbox_encode(const struct sbd_mailbox *m, uint8_t *sector)
{
	encode(mailbox_magic, 0, m->epoch, m->counter, m->from, sector);
}

int sbd_mailbox_decode(const uint8_t *sector, struct sbd_mailbox *ret)
{
	struct sbd_disk d;
	int r = decode(mailbox_magic, sector, &d);

	if (r < 0)
		return r;
	memcpy(ret->from, d.node, sizeof(ret->from));
	ret->epoch = le64toh(d.epoch);
	ret->counter = le64toh(d.counter);
	return 0;
}

const char *sbd_state_name(uint32_t state)
{
	static const char *const names[] = {
		[SBD_STATE_EMPTY] = "empty",	     [SBD_STATE_STARTING] = "starting",
		[SBD_STATE_ACTIVE] = "active",	     [SBD_STATE_SOLO] = "solo",
		[SBD_STATE_RESYNCING] = "resyncing", [SBD_STATE_FENCED] = "fenced",
		[SBD_STATE_STOPPED] = "stopped",
	};

	return state < sizeof(names) / sizeof(names[0]) ? names[state] : "invalid";
}

/* ---- the thread ---- */

struct sbd {
	int fd;
	unsigned index;
	uint32_t interval_ms;
	uint8_t *sector; /* aligned for O_DIRECT; the thread's alone */
	pthread_t thread;
	bool started;

	pthread_mutex_t lock; /* guards everything below */
	pthread_cond_t wake;
	bool stop;
	bool due;		  /* something to write before the next interval */
	struct sbd_slot own;	  /* what the next write says */
	uint64_t fence_epoch;	  /* a fence request to write, 0: none */
	uint64_t mailbox_counter; /* of our writes to the partner's mailbox */
	struct sbd_report report; /* the last round's */

	int event_fd;
	struct event *event;
	void (*changed)(const struct sbd_report *r, void *arg);
	void *arg;
};

static int sector_io(struct sbd *s, bool write, uint64_t offset)
{
	ssize_t n = write ? pwrite(s->fd, s->sector, STORE_SECTOR, (off_t)offset)
			  : pread(s->fd, s->sector, STORE_SECTOR, (off_t)offset);

	if (n == (ssize_t)STORE_SECTOR)
		return 0;
	return n < 0 ? -errno : -EIO;
}

static void note_error(struct sbd_report *r, const char *what, int err)
{
	if (!r->error[0])
		snprintf(r->error, sizeof(r->error), "%s: %s", what, strerror(-err));
}

/* One round: our slot, a fence request if one is due, then what the partner
 * wrote. Runs on the thread, without the lock except to copy in and out. */
static void round_io(struct sbd *s)
{
	struct sbd_report r;
	struct sbd_slot own;
	struct sbd_mailbox req = { 0 };
	unsigned partner = 1 - s->index;
	int err;

	pthread_mutex_lock(&s->lock);
	own = s->own;
	own.counter = ++s->own.counter;
	if (s->fence_epoch) {
		req.epoch = s->fence_epoch;
		req.counter = ++s->mailbox_counter;
		memcpy(req.from, own.node, sizeof(req.from));
	}
	r = s->report;
	pthread_mutex_unlock(&s->lock);

	r.error[0] = '\0';
	sbd_slot_encode(&own, s->sector);
	err = sector_io(s, true, store_slot_offset(s->index));
	r.own_written = err == 0;
	if (err == 0) {
		r.own = own;
		r.own_ok_ms = clock_now_ms();
	} else {
		note_error(&r, "writing our slot", err);
	}
	if (req.epoch) {
		sbd_mailbox_encode(&req, s->sector);
		err = sector_io(s, true, store_mailbox_offset(partner));
		if (err < 0)
			note_error(&r, "writing the partner's mailbox", err);
	}

	err = sector_io(s, false, store_slot_offset(partner));
	if (err == 0) {
		struct sbd_slot p;
		bool valid = sbd_slot_decode(s->sector, &p) == 0;

		if (valid && (!r.partner_valid || p.counter != r.partner.counter))
			r.partner_changed_ms = clock_now_ms();
		r.partner_valid = valid;
		if (valid)
			r.partner = p;
	} else {
		note_error(&r, "reading the partner's slot", err);
	}
	err = sector_io(s, false, store_mailbox_offset(s->index));
	if (err == 0)
		r.mailbox_valid = sbd_mailbox_decode(s->sector, &r.mailbox) == 0;
	else
		note_error(&r, "reading our mailbox", err);

	r.round_ms = clock_now_ms();
	pthread_mutex_lock(&s->lock);
	if (req.epoch && s->fence_epoch == req.epoch && !r.error[0])
		s->fence_epoch = 0; /* written */
	s->report = r;
	pthread_mutex_unlock(&s->lock);
}

static void *thread_main(void *arg)
{
	struct sbd *s = arg;
	uint64_t one = 1;
	bool stop;

	for (;;) {
		struct timespec until;

		round_io(s);
		if (write(s->event_fd, &one, sizeof(one)) < 0 && errno != EAGAIN)
			break;
		clock_gettime(CLOCK_MONOTONIC, &until);
		until.tv_nsec += (long)(s->interval_ms % 1000) * 1000000L;
		until.tv_sec += s->interval_ms / 1000 + until.tv_nsec / 1000000000L;
		until.tv_nsec %= 1000000000L;
		pthread_mutex_lock(&s->lock);
		/* Woken early by sbd_set() or a fence request: write now. */
		if (!s->stop && !s->due)
			pthread_cond_timedwait(&s->wake, &s->lock, &until);
		s->due = false;
		stop = s->stop;
		pthread_mutex_unlock(&s->lock);
		if (stop)
			break;
	}
	return NULL;
}

static void on_round(evutil_socket_t fd, short what, void *arg)
{
	struct sbd *s = arg;
	struct sbd_report r;
	uint64_t n;

	if (read(s->event_fd, &n, sizeof(n)) < 0)
		return;
	sbd_last(s, &r);
	s->changed(&r, s->arg);
}

/* O_DIRECT where the file system has it: a block device shared by two hosts
 * must not be read through this host's page cache. */
static int open_store(const char *path)
{
	int fd = open(path, O_RDWR | O_DSYNC | O_DIRECT | O_CLOEXEC);

	if (fd < 0 && errno == EINVAL)
		fd = open(path, O_RDWR | O_DSYNC | O_CLOEXEC);
	return fd < 0 ? -errno : fd;
}

int sbd_start(struct event_base *base, const char *path, unsigned index, const char *node_id,
	      uint32_t interval_ms, uint32_t state, uint64_t epoch,
	      void (*changed)(const struct sbd_report *r, void *arg), void *arg, struct sbd **ret)
{
	struct sbd *s = calloc(1, sizeof(*s));
	pthread_condattr_t ca;
	int r;

	if (!s)
		return -ENOMEM;
	s->fd = -1;
	s->event_fd = -1;
	s->index = index;
	s->interval_ms = interval_ms;
	s->changed = changed;
	s->arg = arg;
	snprintf(s->own.node, sizeof(s->own.node), "%s", node_id);
	s->own.state = state;
	s->own.epoch = epoch;
	/* Silence is measured from now: a partner is not dead for not having
	 * been seen before we looked. */
	s->report.partner_changed_ms = clock_now_ms();
	/* Our fence requests are numbered from the wall clock, so that one made
	 * after a restart never looks like one the partner already saw. */
	s->mailbox_counter = (uint64_t)time(NULL) * 1000;
	pthread_mutex_init(&s->lock, NULL);
	pthread_condattr_init(&ca);
	pthread_condattr_setclock(&ca, CLOCK_MONOTONIC);
	pthread_cond_init(&s->wake, &ca);
	pthread_condattr_destroy(&ca);

	r = posix_memalign((void **)&s->sector, STORE_SECTOR, STORE_SECTOR);
	if (r != 0) {
		s->sector = NULL;
		r = -r;
		goto fail;
	}
	r = open_store(path);
	if (r < 0) {
		log_error_errno(r, "store %s: cannot open it for the fence slots", path);
		goto fail;
	}
	s->fd = r;
	s->event_fd = eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC);
	if (s->event_fd < 0) {
		r = -errno;
		goto fail;
	}
	s->event = event_new(base, s->event_fd, EV_READ | EV_PERSIST, on_round, s);
	if (!s->event || event_add(s->event, NULL) < 0) {
		r = -ENOMEM;
		goto fail;
	}
	r = -pthread_create(&s->thread, NULL, thread_main, s);
	if (r < 0)
		goto fail;
	s->started = true;
	*ret = s;
	return 0;
fail:
	sbd_stop(s, SBD_STATE_EMPTY);
	return r;
}

static void wake(struct sbd *s)
{
	s->due = true;
	pthread_cond_signal(&s->wake);
}

void sbd_set(struct sbd *s, uint32_t state, uint64_t epoch)
{
	pthread_mutex_lock(&s->lock);
	s->own.state = state;
	s->own.epoch = epoch;
	wake(s);
	pthread_mutex_unlock(&s->lock);
}

void sbd_request_fence(struct sbd *s, uint64_t epoch)
{
	pthread_mutex_lock(&s->lock);
	s->fence_epoch = epoch;
	wake(s);
	pthread_mutex_unlock(&s->lock);
}

void sbd_last(struct sbd *s, struct sbd_report *ret)
{
	pthread_mutex_lock(&s->lock);
	*ret = s->report;
	pthread_mutex_unlock(&s->lock);
}

void sbd_stop(struct sbd *s, uint32_t final_state)
{
	if (!s)
		return;
	if (s->started) {
		pthread_mutex_lock(&s->lock);
		s->stop = true;
		wake(s);
		pthread_mutex_unlock(&s->lock);
		pthread_join(s->thread, NULL);
		if (final_state != SBD_STATE_EMPTY) {
			s->own.state = final_state;
			s->own.counter++;
			sbd_slot_encode(&s->own, s->sector);
			if (sector_io(s, true, store_slot_offset(s->index)) < 0)
				log_warning("cannot write our final fence slot (%s)",
					    sbd_state_name(final_state));
		}
	}
	if (s->event)
		event_free(s->event);
	if (s->event_fd >= 0)
		close(s->event_fd);
	if (s->fd >= 0)
		close(s->fd);
	free(s->sector);
	pthread_cond_destroy(&s->wake);
	pthread_mutex_destroy(&s->lock);
	free(s);
}
