/* ftvm-session-client: a libftvm pair client with a session allocation
 * (ftvm_alloc_session()), driven line by line so a test can fail its node
 * under it and see the allocation stay or go (e2e/test_sessions.sh).
 *
 *   ftvm-session-client SOCKET_A SOCKET_B
 *
 * It connects with ftvm_connect_pair(), makes a session allocation of one
 * page and prints "alloc GUID on SOCKET". Then, for each line on standard
 * input:
 *   check   asks for the allocation's header (a pair client moves here when
 *           its node is gone) and prints "ok on SOCKET", or
 *           "error R: LAST_ERROR";
 * At end of input it disconnects and exits 0: its session then ends.
 * Exit 1 when the allocation fails, 2 on bad arguments. */
#include <stdio.h>
#include <string.h>

#include "ftvm.h"

int main(int argc, char **argv)
{
	struct ftvm_client *c;
	struct ftvm_alloc_info info;
	struct ftvm_header h;
	char line[64];
	int r;

	if (argc != 3) {
		fprintf(stderr, "usage: ftvm-session-client SOCKET_A SOCKET_B\n");
		return 2;
	}
	setvbuf(stdout, NULL, _IOLBF, 0);
	r = ftvm_connect_pair(argv[1], argv[2], &c);
	if (r < 0) {
		fprintf(stderr, "connect: %s: %s\n", ftvm_strerror(r), ftvm_last_error(NULL));
		return 1;
	}
	r = ftvm_set_name(c, "session-test");
	if (r == 0)
		r = ftvm_alloc_session(c, 4096, NULL, false, NULL, 0, &info);
	if (r < 0) {
		fprintf(stderr, "alloc: %s: %s\n", ftvm_strerror(r), ftvm_last_error(c));
		ftvm_disconnect(c);
		return 1;
	}
	printf("alloc %s on %s\n", info.guid, ftvm_connected_socket(c));
	while (fgets(line, sizeof(line), stdin)) {
		if (strncmp(line, "check", 5) != 0)
			continue;
		r = ftvm_header(c, info.guid, &h);
		if (r < 0)
			printf("error %d: %s\n", r, ftvm_last_error(c));
		else
			printf("ok on %s\n", ftvm_connected_socket(c));
	}
	ftvm_disconnect(c);
	return 0;
}
