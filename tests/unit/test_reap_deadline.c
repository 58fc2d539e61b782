/* libftvm's completion descriptor and a request's deadline, against a node
 * played here (a unix socket and a thread, as test_discover.c): the timer
 * behind ftvm_completion_fd() is armed no later than the earliest deadline
 * of the requests on the connection, though it is not set again each time
 * that deadline moves (submit.c, sync_fds()), so it can fire for nothing.
 * - Idle: a write answered and reaped, nothing submitted after it. A reply
 *   to nobody comes, then the write's deadline passes: the descriptor may
 *   wake the poll once for each, and after a reap (which returns 0) it is
 *   quiet again, not readable over and over. The socket stays watched
 *   after a request (submit.c, sync_fds()) until such a reap.
 * - A deadline later than the armed one: a write answered, and a second,
 *   submitted 1.5 s later, never. Polling the descriptor alone (and reaping
 *   with timeout 0 whenever it is readable) must bring the second's
 *   completion, -ETIMEDOUT, once its 10 s are up, not before: the timer,
 *   armed for the first write's deadline, fires early, and the reap then
 *   must arm it for the second's. A few wakeups, not over and over. */
#include <errno.h>
#include <poll.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/un.h>
#include <unistd.h>

#include "check.h"
#include "client.pb-c.h"
#include "clock.h"
#include "ftvm.h"
#include "played_node.h"

#define TIMEOUT_MS 10000 /* libftvm's CALL_TIMEOUT_MS */
#define APART_MS 1500	 /* between the two submits */
#define GIVE_UP_MS (3 * TIMEOUT_MS)

static atomic_bool silent;	/* the node reads on and answers nothing */
static atomic_int node_fd = -1; /* the node's end of the connection */

/* ---- the node ---- */

static int answer(int fd, const Ftvm__Client__ClientRequest *req, void *arg)
{
	Ftvm__Client__ClientReply reply = FTVM__CLIENT__CLIENT_REPLY__INIT;
	Ftvm__Client__WritePageReply wr = FTVM__CLIENT__WRITE_PAGE_REPLY__INIT;

	atomic_store(&node_fd, fd);
	if (atomic_load(&silent))
		return 0;
	reply.id = req->id;
	reply.reply_case = FTVM__CLIENT__CLIENT_REPLY__REPLY_WRITE_PAGE;
	reply.write_page = &wr;
	wr.version = 1;
	return played_node_reply(fd, &reply);
}

/* ---- the client ---- */

static uint8_t block[4096];

/* A write the node answers, reaped. */
static void write_answered(struct ftvm_client *c, uint64_t cookie)
{
	struct ftvm_completion done[4];
	int r;

	CHECK_INT("a write submitted", 0,
		  ftvm_submit_write_page(c, "a-1", 0, block, sizeof(block), cookie));
	r = ftvm_reap(c, done, 4, GIVE_UP_MS);
	CHECK_INT("... and answered", 1, r);
	if (r == 1)
		CHECK_INT("... OK", 0, done[0].result);
}

static void test_idle(struct ftvm_client *c)
{
	Ftvm__Client__ClientReply stray = FTVM__CLIENT__CLIENT_REPLY__INIT;
	struct ftvm_completion done[4];
	uint64_t until;
	unsigned wakeups = 0;
	int fd = ftvm_completion_fd(c);

	CHECK(fd >= 0, "a completion descriptor: %d", fd);
	write_answered(c, 1);
	stray.id = 999999; /* no request has it */
	CHECK_INT("a reply to nobody sent", 0, played_node_reply(atomic_load(&node_fd), &stray));
	until = clock_now_ms() + TIMEOUT_MS + APART_MS;
	while (clock_now_ms() < until) {
		struct pollfd p = { .fd = fd, .events = POLLIN };

		if (poll(&p, 1, (int)(until - clock_now_ms())) <= 0)
			continue;
		wakeups++;
		CHECK_INT("idle: a reap finds nothing", 0, ftvm_reap(c, done, 4, 0));
		if (wakeups > 4)
			break;
	}
	CHECK(wakeups <= 2,
	      "idle, a reply to nobody, past the answered write's deadline: %u wakeups", wakeups);
}

static void test_deadline(struct ftvm_client *c)
{
	struct ftvm_completion done[4];
	uint64_t second_sent, completed_at = 0;
	unsigned wakeups = 0;
	int fd = ftvm_completion_fd(c), r, result = 0;

	write_answered(c, 1);
	usleep(APART_MS * 1000);
	atomic_store(&silent, true);
	second_sent = clock_now_ms();
	CHECK_INT("second write submitted", 0,
		  ftvm_submit_write_page(c, "a-1", 1, block, sizeof(block), 2));
	while (!completed_at && clock_now_ms() < second_sent + GIVE_UP_MS) {
		struct pollfd p = { .fd = fd, .events = POLLIN };

		if (poll(&p, 1, (int)(second_sent + GIVE_UP_MS - clock_now_ms())) <= 0)
			continue;
		wakeups++;
		r = ftvm_reap(c, done, 4, 0);
		if (r == 1 && done[0].cookie == 2) {
			completed_at = clock_now_ms();
			result = done[0].result;
		} else if (r != 0) {
			FAIL("a reap gave %d completions (cookie %llu)", r,
			     r > 0 ? (unsigned long long)done[0].cookie : 0ULL);
		}
	}
	CHECK(completed_at,
	      "the unanswered write completed through the descriptor alone "
	      "(%u wakeups in %d s)",
	      wakeups, GIVE_UP_MS / 1000);
	if (!completed_at)
		return;
	CHECK_INT("... timed out", -ETIMEDOUT, result);
	/* The early fire, then the deadline: a descriptor left readable would
	 * wake the poll over and over instead. */
	CHECK(wakeups <= 4, "... after %u wakeups", wakeups);
	CHECK(completed_at - second_sent >= TIMEOUT_MS,
	      "... not before its deadline (%llu ms after it left)",
	      (unsigned long long)(completed_at - second_sent));
}

int main(void)
{
	char dir[96], path[sizeof(((struct sockaddr_un *)0)->sun_path)];
	struct ftvm_client *c;
	struct played_node node = { .answer = answer };
	pthread_t thread;
	int lfd;

	scratch_dir_make(dir, sizeof(dir), "ftvm-test-reap");
	snprintf(path, sizeof(path), "%s/n.sock", dir);
	lfd = played_node_listen(path, 1);
	if (lfd < 0)
		die("listen");
	node.lfd = lfd;
	if (pthread_create(&thread, NULL, played_node_thread, &node) != 0)
		die("pthread_create");
	if (ftvm_connect(path, &c) < 0)
		die("ftvm_connect");

	test_idle(c);
	test_deadline(c);

	ftvm_disconnect(c);
	pthread_join(thread, NULL);
	if (node.result == -EBADMSG)
		FAIL("the node read a bad frame: %s", node.why);
	else if (node.result < 0)
		fprintf(stderr, "test_reap_deadline: accept: %s\n", strerror(-node.result));
	close(lfd);
	scratch_dir_remove(dir);
	if (failures) {
		fprintf(stderr, "%d of %d check(s) failed\n", failures, checks);
		return 1;
	}
	printf("reap_deadline: %d checks passed\n", checks);
	return 0;
}
