/* The backing store's header and partitions (node/storage/store.c) on real files. */
#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <unistd.h>

#include "check.h"
#include "store.h"

static char dir[] = "/tmp/ftvm-test-store-XXXXXX";

static const char *path_of(const char *name)
{
	static char path[256];

	snprintf(path, sizeof(path), "%s/%s", dir, name);
	return path;
}

#define SIZE (UINT64_C(64) << 20)

static void test_two_nodes_and_a_third(void)
{
	const char *path = path_of("store");
	struct store *a, *b, *a2, *c = NULL;
	char err[512] = "";

	CHECK_INT("a creates the store", 0,
		  store_open(path, SIZE, 4096, "a", true, &a, err, sizeof(err)));
	CHECK_INT("b opens it", 0, store_open(path, SIZE, 4096, "b", true, &b, err, sizeof(err)));
	CHECK(store_partition_start(a) == STORE_HEADER_SPACE,
	      "a's partition starts after the header");
	CHECK(store_partition_start(b) == store_partition_start(a) + store_partition_length(a),
	      "b's partition follows a's");
	CHECK(store_partition_length(a) >= (SIZE - STORE_HEADER_SPACE) / 2 - 4096,
	      "each gets half: %llu", (unsigned long long)store_partition_length(a));
	/* a again (a restart) gets its own partition back. */
	CHECK_INT("a reopens", 0, store_open(path, SIZE, 4096, "a", true, &a2, err, sizeof(err)));
	CHECK(store_partition_start(a2) == store_partition_start(a), "a's partition is a's");
	/* A third node is refused, naming both owners. */
	CHECK_INT("c is refused", -EPERM,
		  store_open(path, SIZE, 4096, "c", true, &c, err, sizeof(err)));
	CHECK(strstr(err, "'a'") && strstr(err, "'b'") && strstr(err, "'c'"), "reason: %s", err);
	CHECK(c == NULL, "nothing returned");
	store_close(a);
	store_close(a2);
	store_close(b);
}

static void test_refused(void)
{
	struct store *s = NULL;
	char err[512] = "", junk[4096];
	int fd;

	/* Another page size. */
	CHECK_INT("create", 0,
		  store_open(path_of("ps"), SIZE, 4096, "a", true, &s, err, sizeof(err)));
	store_close(s);
	s = NULL;
	CHECK_INT("page size differs", -EINVAL,
		  store_open(path_of("ps"), SIZE, 8192, "b", true, &s, err, sizeof(err)));
	CHECK(strstr(err, "page_size 4096") && strstr(err, "8192"), "reason: %s", err);

	/* Not a store. */
	memset(junk, 'x', sizeof(junk));
	fd = open(path_of("junk"), O_CREAT | O_WRONLY, 0600);
	CHECK(write(fd, junk, sizeof(junk)) == (ssize_t)sizeof(junk), "junk");
	close(fd);
	CHECK_INT("junk refused", -EBADMSG,
		  store_open(path_of("junk"), SIZE, 4096, "a", true, &s, err, sizeof(err)));
	CHECK(strstr(err, "not an ftvm store"), "reason: %s", err);

	/* A flipped bit in the header. */
	CHECK_INT("create", 0,
		  store_open(path_of("flip"), SIZE, 4096, "a", true, &s, err, sizeof(err)));
	store_close(s);
	s = NULL;
	fd = open(path_of("flip"), O_RDWR);
	{
		/* Inverted, not overwritten: byte 20 is in the random store id and
		 * may be any value already. */
		uint8_t byte = 0;

		CHECK(pread(fd, &byte, 1, 20) == 1, "read byte 20");
		byte ^= 0xff;
		CHECK(pwrite(fd, &byte, 1, 20) == 1, "flip");
	}
	close(fd);
	CHECK_INT("bad checksum refused", -EBADMSG,
		  store_open(path_of("flip"), SIZE, 4096, "a", true, &s, err, sizeof(err)));
	CHECK(strstr(err, "checksum"), "reason: %s", err);

	/* Not to be made: a node whose data is in an existing store. */
	CHECK_INT("no store, none to be made", -ENOENT,
		  store_open(path_of("absent"), SIZE, 4096, "a", false, &s, err, sizeof(err)));
	CHECK(access(path_of("absent"), F_OK) != 0, "nothing was created");

	/* A folder that does not exist. */
	CHECK_INT(
		"missing folder", -ENOENT,
		store_open("/nonexistent/ftvm/store", SIZE, 4096, "a", true, &s, err, sizeof(err)));
	CHECK(strstr(err, "/nonexistent/ftvm/store"), "reason: %s", err);
}

/* A new store has every block reserved, not a sparse file that finds its
 * disk full at destage; with no room for it, the open is refused, naming
 * the size, and the file is left empty. The file size limit stands in for a
 * full disk (EFBIG where it would be ENOSPC). */
static void test_reserved(void)
{
	const char *path = path_of("reserved");
	struct store *s = NULL;
	struct rlimit unlimited, limit;
	struct stat st;
	char err[512] = "";

	if (getrlimit(RLIMIT_FSIZE, &unlimited) < 0)
		die("getrlimit");
	limit = unlimited;
	limit.rlim_cur = SIZE / 2;
	signal(SIGXFSZ, SIG_IGN);
	setrlimit(RLIMIT_FSIZE, &limit);
	CHECK_INT("no room: refused", -EFBIG,
		  store_open(path, SIZE, 4096, "a", true, &s, err, sizeof(err)));
	setrlimit(RLIMIT_FSIZE, &unlimited);
	CHECK(strstr(err, "cannot reserve 67108864 bytes for the store"), "reason: %s", err);
	CHECK(s == NULL, "nothing returned");
	CHECK(stat(path, &st) == 0 && st.st_size == 0, "the file is left empty: %lld bytes",
	      (long long)st.st_size);

	CHECK_INT("with room", 0, store_open(path, SIZE, 4096, "a", true, &s, err, sizeof(err)));
	CHECK(stat(path, &st) == 0 && (uint64_t)st.st_blocks * 512 >= SIZE,
	      "every block reserved: %lld of %llu bytes", (long long)st.st_blocks * 512,
	      (unsigned long long)SIZE);
	store_close(s);
}

static void test_extent_layout(void)
{
	/* 3 pages of 64K: records rounded up to one 4K page, then the blocks. */
	CHECK_INT("extent size", 4096 + 3 * 65536, store_extent_size(4096, 3, 65536));
	CHECK_INT("record of page 2", 1000 + 2 * sizeof(struct store_page_record),
		  store_record_offset(1000, 2));
	CHECK_INT("block of page 2", 1000 + 4096 + 2 * 65536,
		  store_block_offset(1000, 4096, 3, 65536, 2));
	/* 300 pages: 4800 bytes of records take two pages. */
	CHECK_INT("many records", 8192 + 300 * 4096, store_extent_size(4096, 300, 4096));
}

int main(void)
{
	if (!mkdtemp(dir))
		die("mkdtemp");
	test_two_nodes_and_a_third();
	test_refused();
	test_reserved();
	test_extent_layout();
	if (failures) {
		fprintf(stderr, "%d check(s) failed\n", failures);
		return 1;
	}
	printf("store: all %d checks passed\n", checks);
	return 0;
}
