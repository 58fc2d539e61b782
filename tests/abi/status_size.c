/* ftvm-status-size SOCKET: the sized status and sense calls (ftvm.h,
 * "Compatibility") against a running node. A program built with a smaller
 * struct gets its prefix and not a byte more; one built with a larger
 * struct gets zeroes past what this library knows; a size of 0 is refused.
 * Prints one line per check, "ok: ..." or "FAIL: ...", and exits 1 on any
 * failure. */
#include <errno.h>
#include <stddef.h>
#include <stdio.h>
#include <string.h>

#include <ftvm.h>

#define CANARY 0xa5
#define SPARE 64 /* bytes past the struct, as a newer ftvm.h might add */

static int failed;

static void check(int cond, const char *what)
{
	printf("%s: %s\n", cond ? "ok" : "FAIL", what);
	if (!cond)
		failed = 1;
}

static int all_bytes(const unsigned char *p, size_t n, unsigned char value)
{
	for (size_t i = 0; i < n; i++)
		if (p[i] != value)
			return 0;
	return 1;
}

static void check_status(struct ftvm_client *c)
{
	int r;
	/* An older program: its struct ended before frames_total. */
	size_t older = offsetof(struct ftvm_node_status, frames_total);
	union {
		struct ftvm_node_status st;
		unsigned char bytes[sizeof(struct ftvm_node_status) + SPARE];
	} buf;

	memset(&buf, CANARY, sizeof(buf));
	r = ftvm_status_sized(c, &buf.st, older);
	check(r == 0, "status into an older, smaller struct");
	check(r == 0 && strlen(buf.st.node) < sizeof(buf.st.node) && buf.st.epoch >= 1,
	      "  its fields are filled");
	check(all_bytes(buf.bytes + older, sizeof(buf) - older, CANARY),
	      "  not a byte written past its size");

	memset(&buf, CANARY, sizeof(buf));
	check(ftvm_status_sized(c, &buf.st, sizeof(buf)) == 0,
	      "status into a newer, larger struct");
	check(all_bytes(buf.bytes + sizeof(buf.st), SPARE, 0),
	      "  the fields this library does not know are zero");

	check(ftvm_status_sized(c, &buf.st, 0) == -EINVAL, "status of size 0: -EINVAL");
}

static void check_sense(struct ftvm_client *c)
{
	int r;
	size_t older = offsetof(struct ftvm_sense, destage_queue);
	union {
		struct ftvm_sense s;
		unsigned char bytes[sizeof(struct ftvm_sense) + SPARE];
	} buf;

	memset(&buf, CANARY, sizeof(buf));
	r = ftvm_sense_sized(c, &buf.s, older);
	check(r == 0, "sense into an older, smaller struct");
	check(r == 0 && buf.s.n_media >= 1 && buf.s.n_media <= 4 &&
		      strlen(buf.s.media[0].type) < sizeof(buf.s.media[0].type),
	      "  its fields are filled");
	check(all_bytes(buf.bytes + older, sizeof(buf) - older, CANARY),
	      "  not a byte written past its size");

	memset(&buf, CANARY, sizeof(buf));
	check(ftvm_sense_sized(c, &buf.s, sizeof(buf)) == 0, "sense into a newer, larger struct");
	check(all_bytes(buf.bytes + sizeof(buf.s), SPARE, 0),
	      "  the fields this library does not know are zero");

	check(ftvm_sense_sized(c, &buf.s, 0) == -EINVAL, "sense of size 0: -EINVAL");
}

int main(int argc, char **argv)
{
	struct ftvm_client *c;
	int r;

	if (argc != 2) {
		fprintf(stderr, "usage: ftvm-status-size SOCKET\n");
		return 2;
	}
	r = ftvm_connect(argv[1], &c);
	if (r < 0) {
		fprintf(stderr, "ftvm-status-size: %s: %s\n", argv[1], ftvm_strerror(r));
		return 1;
	}
	check_status(c);
	check_sense(c);
	ftvm_disconnect(c);
	return failed;
}
