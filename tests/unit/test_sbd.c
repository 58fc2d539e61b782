/* The fence slots (node/storage/sbd.c): the sector format, then two fence threads on
 * one real file, as the two nodes of a pair would run them on their store. */
#include <event2/event.h>
#include <fcntl.h>
#include <unistd.h>

#include "check.h"
#include "clock.h"
#include "sbd.h"
#include "store.h"

static void test_format(void)
{
	static uint8_t sector[STORE_SECTOR];
	struct sbd_slot slot = { .node = "node-a",
				 .state = SBD_STATE_SOLO,
				 .epoch = 3,
				 .counter = 99 },
			got;
	struct sbd_mailbox mb = { .from = "b", .epoch = 4, .counter = 2 }, mgot;

	memset(sector, 0, sizeof(sector));
	CHECK_INT("an empty sector", -ENOENT, sbd_slot_decode(sector, &got));
	CHECK_INT("an empty mailbox", -ENOENT, sbd_mailbox_decode(sector, &mgot));

	sbd_slot_encode(&slot, sector);
	CHECK_INT("decode", 0, sbd_slot_decode(sector, &got));
	CHECK_STR("node", "node-a", got.node);
	CHECK_INT("state", SBD_STATE_SOLO, got.state);
	CHECK_INT("epoch", 3, got.epoch);
	CHECK_INT("counter", 99, got.counter);
	CHECK_INT("a slot is not a mailbox", -EBADMSG, sbd_mailbox_decode(sector, &mgot));
	for (size_t bit = 0; bit < 8 * 76; bit += 7) { /* the 76 bytes it encodes */
		sector[bit / 8] ^= (uint8_t)(1u << (bit % 8));
		CHECK_INT("a flipped bit", -EBADMSG, sbd_slot_decode(sector, &got));
		sector[bit / 8] ^= (uint8_t)(1u << (bit % 8));
	}
	slot.state = 77;
	sbd_slot_encode(&slot, sector);
	CHECK_INT("an unknown state", -EBADMSG, sbd_slot_decode(sector, &got));

	sbd_mailbox_encode(&mb, sector);
	CHECK_INT("decode mailbox", 0, sbd_mailbox_decode(sector, &mgot));
	CHECK_STR("from", "b", mgot.from);
	CHECK_INT("fence epoch", 4, mgot.epoch);
	CHECK_STR("state name", "fenced", sbd_state_name(SBD_STATE_FENCED));
	CHECK_STR("bad state name", "invalid", sbd_state_name(1000));
}

struct seen {
	struct sbd_report last;
	unsigned rounds;
};

static void on_changed(const struct sbd_report *r, void *arg)
{
	struct seen *s = arg;

	s->last = *r;
	s->rounds++;
}

/* Runs the loop for ms milliseconds. */
static void run_for(struct event_base *base, unsigned ms)
{
	struct timeval tv = { .tv_sec = ms / 1000, .tv_usec = (ms % 1000) * 1000 };

	event_base_loopexit(base, &tv);
	event_base_dispatch(base);
}

/* Runs the loop until cond holds or timeout_ms pass; says whether it holds.
 * Generous deadlines: the fence threads are late on a loaded machine (ASan),
 * and a fixed window of a few rounds was seen too short there. */
#define RUN_UNTIL(cond, timeout_ms)                                 \
	({                                                          \
		uint64_t deadline_ = clock_now_ms() + (timeout_ms); \
		while (!(cond) && clock_now_ms() < deadline_)       \
			run_for(base, 10);                          \
		(cond);                                             \
	})

static void test_two_nodes(const char *dir)
{
	char path[300];
	struct event_base *base = event_base_new();
	struct sbd *a = NULL, *b = NULL;
	struct seen sa = { 0 }, sb = { 0 };
	uint64_t counter, t0;
	int fd;

	snprintf(path, sizeof(path), "%s/store", dir);
	fd = open(path, O_RDWR | O_CREAT | O_TRUNC, 0600);
	if (fd < 0 || ftruncate(fd, STORE_HEADER_SPACE) < 0)
		die("store file");
	close(fd);
	if (!base)
		die("event base");

	CHECK_INT("start a", 0,
		  sbd_start(base, path, 0, "a", 20, SBD_STATE_ACTIVE, 1, on_changed, &sa, &a));
	CHECK_INT("start b", 0,
		  sbd_start(base, path, 1, "b", 20, SBD_STATE_ACTIVE, 1, on_changed, &sb, &b));
	if (!a || !b)
		die("sbd_start");
	CHECK(RUN_UNTIL(sa.rounds >= 3 && sb.rounds >= 3 && sa.last.partner_valid &&
				sb.last.partner_valid,
			2000),
	      "rounds: a %u, b %u at 20 ms", sa.rounds, sb.rounds);
	CHECK(sa.last.own_written && sa.last.error[0] == '\0', "a writes its slot: %s",
	      sa.last.error);
	CHECK(sa.last.partner_valid, "a sees b's slot");
	CHECK_STR("a sees b", "b", sa.last.partner.node);
	CHECK_STR("b sees a", "a", sb.last.partner.node);
	CHECK_INT("b's state as a sees it", SBD_STATE_ACTIVE, sa.last.partner.state);
	CHECK(!sa.last.mailbox_valid && !sb.last.mailbox_valid, "no fence request yet");

	/* A state change reaches the partner (sbd_set writes it at once). */
	sbd_set(a, SBD_STATE_SOLO, 2);
	RUN_UNTIL(sb.last.partner.epoch == 2, 2000);
	CHECK_INT("b sees a's new state", SBD_STATE_SOLO, sb.last.partner.state);
	CHECK_INT("b sees a's new epoch", 2, sb.last.partner.epoch);

	sbd_request_fence(a, 1);
	RUN_UNTIL(sb.last.mailbox_valid, 2000);
	CHECK(sb.last.mailbox_valid, "b got a's fence request");
	CHECK_STR("from", "a", sb.last.mailbox.from);
	CHECK_INT("for epoch", 1, sb.last.mailbox.epoch);

	/* b stops: a sees it say so, then its heartbeat stand still. */
	sbd_stop(b, SBD_STATE_STOPPED);
	RUN_UNTIL(sa.last.partner.state == SBD_STATE_STOPPED, 2000);
	CHECK_INT("a sees b stopped", SBD_STATE_STOPPED, sa.last.partner.state);
	counter = sa.last.partner.counter;
	t0 = clock_now_ms();
	run_for(base, 150);
	CHECK_INT("b's counter stands still", counter, sa.last.partner.counter);
	CHECK(sa.last.partner_changed_ms <= t0, "a saw no change since b stopped");
	sbd_stop(a, SBD_STATE_STOPPED);
	event_base_free(base);
}

int main(void)
{
	const char *tmp = getenv("TMPDIR");
	char dir[256], cmd[300];

	snprintf(dir, sizeof(dir), "%s/ftvm-test-sbd-XXXXXX", tmp && *tmp ? tmp : "/tmp");
	if (!mkdtemp(dir))
		die("mkdtemp");
	test_format();
	test_two_nodes(dir);
	snprintf(cmd, sizeof(cmd), "rm -rf '%s'", dir);
	if (system(cmd) != 0)
		fprintf(stderr, "could not remove %s\n", dir);
	if (failures) {
		fprintf(stderr, "%d of %d check(s) failed\n", failures, checks);
		return 1;
	}
	printf("sbd: all %d checks passed\n", checks);
	return 0;
}
