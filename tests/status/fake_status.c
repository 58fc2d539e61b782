/* ftvm-fake-status SOCKET: a node that answers `status` alone, on its client
 * socket, with every row of FTVM_STATUS_FIELDS (ftvm_status.h) set to a
 * value no other row has: row i's number is 1000 + i (a BOOL true), its
 * string "s<i>". The numbers go into the reply through the node's own
 * status_counts_to_reply(). Other requests are answered UNSUPPORTED.
 *
 * ftvm-fake-status --no-list SOCKET: the same as a node from before
 * StatusReply.counters answers, without the list: its LIST rows (ftvm_status.h,
 * "wire") must then read as 0.
 *
 * ftvm-fake-status --rows: what `ftvmctl status` should then show, a line
 * per row: its jq path in the JSON, its value there, and the text that
 * shows it with its value (empty: not shown as a number). Used by
 * tests/e2e/test_status_fields.sh. */
#include <errno.h>
#include <inttypes.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <unistd.h>

#include "client.pb-c.h"
#include "played_node.h"
#include "status_counts.h"

#define STR_MAX 16

struct fake {
	struct status_counts c;
	char strings[128][STR_MAX]; /* by row */
	Ftvm__Client__StatusReply reply;
	Ftvm__Client__PartnerStatus partner;
	Ftvm__Client__PageTableStatus pagetable;
	uint64_t counters[STATUS_LIST_SIZE];
};

/* Row i's value: the numbers into c, the strings straight into the reply. */
#define FAKE_SET(kind, name, wire, json, text) FAKE_SET_##kind(f, name, FAKE_WIRE_##wire, i++)
#define FAKE_WIRE_PB(msg, field) f->msg.field
#define FAKE_WIRE_LIST(i) f->counters[i] /* numbers alone: set by status_counts_to_reply() */
#define FAKE_SET_U64 FAKE_SET_NUM
#define FAKE_SET_U32 FAKE_SET_NUM
#define FAKE_SET_I64 FAKE_SET_NUM
#define FAKE_SET_BOOL FAKE_SET_NUM
#define FAKE_SET_NUM(f, name, field, i) f->c.name = (1000 + (i));
#define FAKE_SET_STR(n) FAKE_SET_STRING
#define FAKE_SET_STRING(f, name, field, i)                      \
	do {                                                    \
		unsigned row = (i);                             \
		snprintf(f->strings[row], STR_MAX, "s%u", row); \
		field = f->strings[row];                        \
	} while (0);

static void fake_fill(struct fake *f)
{
	unsigned i = 0;

	memset(f, 0, sizeof(*f));
	ftvm__client__status_reply__init(&f->reply);
	ftvm__client__partner_status__init(&f->partner);
	ftvm__client__page_table_status__init(&f->pagetable);
	FTVM_STATUS_FIELDS(FAKE_SET)
	f->reply.partner = &f->partner;
	f->reply.pagetable = &f->pagetable;
	status_counts_to_reply(&f->c, &f->reply, &f->partner, &f->pagetable, f->counters);
}

/* One line per row for --rows. The jq path: .key, or .group.key. */
#define FAKE_ROW(kind, name, wire, json, text)                \
	fake_row_##kind(i, FAKE_ROW_##json, FAKE_ROW_##text); \
	i++;
#define FAKE_ROW_JSON(slot, group, pos, key) #group, key
#define FAKE_ROW_TEXT(line, pos, how, before, after) #how, before, after
#define FAKE_ROW_TEXT_IF FAKE_ROW_TEXT
#define FAKE_ROW_TEXT_HEAD "", "", ""
#define FAKE_ROW_TEXT_NONE "", "", ""
#define fake_row_U64 fake_row_number
#define fake_row_U32 fake_row_number
#define fake_row_I64 fake_row_number
#define fake_row_BOOL fake_row_bool
#define fake_row_STR(n) fake_row_string

static void print_path(const char *group, const char *key)
{
	if (strcmp(group, "top") == 0)
		printf(".%s\t", key);
	else
		printf(".%s.%s\t", group, key);
}

static void fake_row_number(unsigned i, const char *group, const char *key, const char *how,
			    const char *before, const char *after)
{
	print_path(group, key);
	printf("%u\t", 1000 + i);
	/* AGO and WALL are worded by ftvmctl: only their words are checked. */
	if (strcmp(how, "NUM") == 0)
		printf("%s%u%s\n", before, 1000 + i, after);
	else
		printf("%s\n", before);
}

static void fake_row_bool(unsigned i, const char *group, const char *key, const char *how,
			  const char *before, const char *after)
{
	print_path(group, key);
	printf("true\t%s%s\n", before, after);
}

static void fake_row_string(unsigned i, const char *group, const char *key, const char *how,
			    const char *before, const char *after)
{
	print_path(group, key);
	printf("\"s%u\"\t\n", i);
}

/* One line per LIST row for --list-rows: its jq path. */
#define FAKE_LIST_ROW(kind, name, wire, json, text) FAKE_CALL(FAKE_LIST_ROW_##wire, FAKE_ROW_##json)
#define FAKE_CALL(macro, ...) macro(__VA_ARGS__)
#define FAKE_LIST_ROW_PB(msg, field) FAKE_LIST_ROW_NONE
#define FAKE_LIST_ROW_NONE(group, key)
#define FAKE_LIST_ROW_LIST(i) FAKE_LIST_ROW_PRINT
#define FAKE_LIST_ROW_PRINT(group, key) \
	print_path(group, key);         \
	printf("\n");

static int print_list_rows(void)
{
	FTVM_STATUS_FIELDS(FAKE_LIST_ROW)
	return 0;
}

static int print_rows(void)
{
	unsigned i = 0;

	FTVM_STATUS_FIELDS(FAKE_ROW)
	return 0;
}

static int answer(int fd, const Ftvm__Client__ClientRequest *req, void *arg)
{
	Ftvm__Client__ClientReply reply = FTVM__CLIENT__CLIENT_REPLY__INIT;
	struct fake *f = arg;

	reply.id = req->id;
	if (req->request_case == FTVM__CLIENT__CLIENT_REQUEST__REQUEST_STATUS) {
		reply.reply_case = FTVM__CLIENT__CLIENT_REPLY__REPLY_STATUS_REPLY;
		reply.status_reply = &f->reply;
	} else {
		reply.status = FTVM__PARTNER__STATUS__STATUS_UNSUPPORTED;
		reply.reason = "ftvm-fake-status answers status alone";
	}
	return played_node_reply(fd, &reply);
}

/* Answers the requests of one connection until it closes. */
static void serve(int fd, struct fake *f)
{
	const char *why = "";

	if (played_node_serve(fd, answer, f, &why) == -EBADMSG)
		fprintf(stderr, "ftvm-fake-status: %s\n", why);
}

int main(int argc, char **argv)
{
	static struct fake f;
	int lfd;

	bool no_list = argc == 3 && strcmp(argv[1], "--no-list") == 0;
	const char *path = argv[argc - 1];

	if (argc == 2 && strcmp(argv[1], "--rows") == 0)
		return print_rows();
	if (argc == 2 && strcmp(argv[1], "--list-rows") == 0)
		return print_list_rows();
	if ((argc != 2 && !no_list) ||
	    strlen(path) >= sizeof(((struct sockaddr_un *)0)->sun_path)) {
		fprintf(stderr,
			"usage: ftvm-fake-status [--no-list] SOCKET | --rows | --list-rows\n");
		return 2;
	}
	fake_fill(&f);
	if (no_list)
		f.reply.n_counters = 0;
	lfd = played_node_listen(path, 4);
	if (lfd < 0) {
		perror("ftvm-fake-status");
		return 1;
	}
	for (;;) {
		int fd = accept(lfd, NULL, NULL);

		if (fd < 0) {
			if (errno == EINTR)
				continue;
			perror("ftvm-fake-status: accept");
			return 1;
		}
		serve(fd, &f);
		close(fd);
	}
}
