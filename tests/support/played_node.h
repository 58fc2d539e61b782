/* A node played in a test: the client protocol's framing on one connection
 * (frame.h, proto/client.proto), the answers the test's own. For tests
 * that check what libftvm makes of a node's bytes without a node:
 * tests/unit/test_discover.c, tests/unit/test_reap_deadline.c,
 * tests/status/fake_status.c. */
#pragma once

#include "client.pb-c.h"

/* Answers req on fd (played_node_reply(), or nothing): < 0 ends the
 * connection's service. */
typedef int (*played_answer_fn)(int fd, const Ftvm__Client__ClientRequest *req, void *arg);

/* Reads fd's requests, frame by frame, and hands each to answer, until the
 * client closes (0), a frame is bad or a request does not parse (-EBADMSG,
 * *why says what), or answer returns < 0 (its value). fd stays open. */
int played_node_serve(int fd, played_answer_fn answer, void *arg, const char **why);

/* Listens on a new unix socket at path: the descriptor, or -1 with errno. */
int played_node_listen(const char *path, int backlog);

/* Accepts one connection on lfd and serves it (played_node_serve()), then
 * closes it: what played_node_serve() returns, or -errno when accept()
 * failed. */
int played_node_serve_one(int lfd, played_answer_fn answer, void *arg, const char **why);

/* A node on a thread of its own: pthread_create(..., played_node_thread,
 * &node) serves one connection on node.lfd, and result says how it ended
 * (played_node_serve_one()'s), why what a bad frame was. */
struct played_node {
	int lfd;
	played_answer_fn answer;
	void *arg;
	int result;
	const char *why;
};
void *played_node_thread(void *node);

/* Writes reply to fd as one whole frame: 0, or -1 with errno. */
int played_node_reply(int fd, const Ftvm__Client__ClientReply *reply);
