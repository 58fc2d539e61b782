/* The backing store's header and partitions (node/storage/store.c) on real
 * files, and a node's flash device, which has the same header. */
#define _GNU_SOURCE /* O_DIRECT */
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

static int init_with(const char *path, const char *const *parts, size_t n_parts,
		     const char *const *access, size_t n_access, bool force, char *err,
		     size_t err_len)
{
	const struct store_settings set = { .kind = STORE_KIND_STORE,
					    .size = SIZE,
					    .page_size = 4096,
					    .partitions = parts,
					    .n_partitions = n_parts,
					    .access = access,
					    .n_access = n_access };
	struct store_layout l;
	int r = store_layout_from_settings(&set, &l, err, err_len);

	return r < 0 ? r : store_init(path, &l, force, err, err_len);
}

/* `ftvmctl store init`'s layout is what the nodes find: named partitions,
 * sizes, a read-only one before them, which no node claims. */
static void test_init(void)
{
	const char *path = path_of("init");
	const char *parts[] = { "gold=4M", "b=40%", "a=40%" }, *access[] = { "gold=ro" };
	struct store *a = NULL, *b = NULL, *c = NULL;
	struct store_layout l, again;
	uint64_t start, length;
	char err[512] = "";

	CHECK_INT("init", 0, init_with(path, parts, 3, access, 1, false, err, sizeof(err)));
	CHECK_INT("read back", 0, store_read_layout(path, &l, err, sizeof(err)));
	CHECK(l.version == 2 && l.kind == STORE_KIND_STORE && l.n == 3 && l.size == SIZE,
	      "version %u kind %d with %u partitions", l.version, (int)l.kind, l.n);
	CHECK(strcmp(l.part[0].id, "gold") == 0 && l.part[0].access == STORE_ACCESS_RO &&
		      l.part[0].start == STORE_HEADER_SPACE && l.part[0].length == 4 << 20,
	      "gold first, read-only, 4M");
	CHECK(strcmp(l.part[1].id, "b") == 0 && l.part[1].start == STORE_HEADER_SPACE + (4 << 20) &&
		      l.part[1].length == (SIZE - STORE_HEADER_SPACE) / 100 * 40 / 4096 * 4096,
	      "b next, 40%% of the space: %llu", (unsigned long long)l.part[1].length);
	CHECK_INT("a opens", 0, store_open(path, SIZE, 4096, "a", false, &a, err, sizeof(err)));
	CHECK_INT("b opens", 0, store_open(path, SIZE, 4096, "b", false, &b, err, sizeof(err)));
	CHECK(store_partition_start(a) == l.part[2].start &&
		      store_partition_start(b) == l.part[1].start,
	      "each node has the partition named for it");
	store_partition_range(a, true, &start, &length);
	CHECK(start == l.part[1].start && length == l.part[1].length, "a's partner's is b's");
	CHECK(store_partition_index(b) == 0 && store_partition_index(a) == 1,
	      "fence slots by writable partition: b %u, a %u", store_partition_index(b),
	      store_partition_index(a));
	CHECK_INT("a third node", -EPERM,
		  store_open(path, SIZE, 4096, "c", false, &c, err, sizeof(err)));
	CHECK(strstr(err, "'b' and 'a'") && strstr(err, "'c'"), "reason: %s", err);

	/* Not again, and not under a node that has it open. */
	CHECK_INT("init again", -EEXIST,
		  init_with(path, parts, 3, access, 1, false, err, sizeof(err)));
	CHECK(strstr(err, "initialised already") && strstr(err, "--force"), "reason: %s", err);
	CHECK_INT("init --force while open", -EAGAIN,
		  init_with(path, parts, 3, access, 1, true, err, sizeof(err)));
	CHECK(strstr(err, "in use"), "reason: %s", err);
	CHECK_INT("unchanged", 0, store_read_layout(path, &again, err, sizeof(err)));
	CHECK(memcmp(again.id, l.id, sizeof(l.id)) == 0, "the store's id is the same");
	store_close(a);
	store_close(b);
	/* A node whose name is on a read-only partition has none to write. */
	CHECK_INT("init with a read-only a", 0,
		  init_with(path_of("ro-a"), (const char *[]){ "b=10%", "x=10%", "a=10%" }, 3,
			    (const char *[]){ "a=ro", "x=rw" }, 2, false, err, sizeof(err)));
	CHECK_INT("a cannot open it", -EPERM,
		  store_open(path_of("ro-a"), SIZE, 4096, "a", false, &c, err, sizeof(err)));
	CHECK(strstr(err, "named 'a' is read-only"), "reason: %s", err);

	CHECK_INT("init --force once closed", 0,
		  init_with(path, parts, 2, NULL, 0, true, err, sizeof(err)));
	CHECK_INT("read back", 0, store_read_layout(path, &again, err, sizeof(err)));
	CHECK(memcmp(again.id, l.id, sizeof(l.id)) != 0 && again.n == 2, "a new store");
}

/* A store made before partitions had access (version 1) opens, and a claim
 * keeps it in its version. */
static void test_version_1(void)
{
	const char *path = path_of("v1");
	struct store_layout l;
	struct store *a = NULL;
	char err[512] = "";

	store_layout_default(&l, STORE_KIND_STORE, SIZE, 4096);
	l.version = 1;
	CHECK_INT("write a version 1 header", 0, store_init(path, &l, false, err, sizeof(err)));
	CHECK_INT("a opens it", 0, store_open(path, SIZE, 4096, "a", false, &a, err, sizeof(err)));
	CHECK_INT("read back", 0, store_read_layout(path, &l, err, sizeof(err)));
	CHECK(l.version == 1 && strcmp(l.part[0].id, "a") == 0, "version %u, claimed by '%s'",
	      l.version, l.part[0].id);
	store_close(a);
}

/* Settings that make no store say which and why; nothing is written. */
static void test_bad_settings(void)
{
	static const struct {
		const char *parts[3], *access;
		const char *says;
	} bad[] = {
		{ { "a" }, NULL, "want ID=SIZE" },
		{ { "A=10%" }, NULL, "not a node id" },
		{ { "a=0%" }, NULL, "is not a size" },
		{ { "a=101%" }, NULL, "is not a size" },
		{ { "a=10Q" }, NULL, "is not a size" },
		{ { "a=1M@1000" }, NULL, "not a multiple of the page size" },
		{ { "a=1G", "b=1M" }, NULL, "not inside" },
		{ { "a=1M@64K", "b=1M@1M" }, NULL, "overlap" },
		{ { "a=1M", "a=1M" }, NULL, "both named 'a'" },
		{ { "a=10%" }, NULL, "two writable partitions" },
		{ { "a=10%", "b=10%", "c=10%" }, NULL, "two writable partitions" },
		{ { "a=10%", "b=10%" }, "c=ro", "no partition 'c'" },
		{ { "a=10%", "b=10%" }, "a=rx", "want rw or ro" },
		{ { "a=10%", "b=10%" }, "a=ro", "two writable partitions" },
		{ { NULL }, "a=ro", "needs the partitions named" },
	};
	const char *path = path_of("bad");

	for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
		size_t n = 0;
		char err[512] = "";

		while (n < 3 && bad[i].parts[n])
			n++;
		CHECK_INT(bad[i].says, -EINVAL,
			  init_with(path, bad[i].parts, n, &bad[i].access, bad[i].access ? 1 : 0,
				    false, err, sizeof(err)));
		CHECK(strstr(err, bad[i].says), "%s: reason: %s", bad[i].says, err);
	}
	CHECK(access(path, F_OK) != 0, "nothing was written");
}

/* A flash device made without settings: one unclaimed writable partition of
 * all the space after the header, in whole pages. */
static void test_flash_default(void)
{
	struct store_layout l;
	char err[512] = "";

	store_layout_default(&l, STORE_KIND_FLASH, SIZE + 1000, 4096);
	CHECK(l.kind == STORE_KIND_FLASH && l.n == 1 && l.size == SIZE + 1000,
	      "kind %d with %u partitions, %llu bytes", (int)l.kind, l.n,
	      (unsigned long long)l.size);
	CHECK(l.part[0].start == STORE_HEADER_SPACE &&
		      l.part[0].length == SIZE - STORE_HEADER_SPACE &&
		      l.part[0].access == STORE_ACCESS_RW && l.part[0].id[0] == '\0',
	      "one free rw partition of the whole space: %llu at %llu",
	      (unsigned long long)l.part[0].length, (unsigned long long)l.part[0].start);
	CHECK_INT("it keeps the rules", 0, store_layout_check(&l, "flash", err, sizeof(err)));

	/* Pages of 64K: what is left after the last whole page is not used. */
	store_layout_default(&l, STORE_KIND_FLASH, SIZE + 3 * 4096, 65536);
	CHECK(l.n == 1 && l.part[0].length == SIZE - STORE_HEADER_SPACE &&
		      l.part[0].length % 65536 == 0,
	      "rounded down to 64K pages: %llu", (unsigned long long)l.part[0].length);
}

static int flash_settings(const char *const *parts, size_t n_parts, const char *const *access,
			  size_t n_access, struct store_layout *l, char *err, size_t err_len)
{
	const struct store_settings set = { .kind = STORE_KIND_FLASH,
					    .size = SIZE,
					    .page_size = 4096,
					    .partitions = parts,
					    .n_partitions = n_parts,
					    .access = access,
					    .n_access = n_access };

	return store_layout_from_settings(&set, l, err, err_len);
}

/* A flash device is one node's: it needs a writable partition (one is
 * enough, where a store needs two), and settings that leave none are
 * refused naming that rule. */
static void test_flash_rule(void)
{
	struct store_layout l;
	char err[512] = "";

	store_layout_default(&l, STORE_KIND_FLASH, SIZE, 4096);
	l.part[0].access = STORE_ACCESS_RO;
	CHECK_INT("read-only only: refused", -EBADMSG,
		  store_layout_check(&l, "flash", err, sizeof(err)));
	CHECK(strstr(err, "a flash device needs a writable partition"), "reason: %s", err);

	err[0] = '\0';
	CHECK_INT("settings of two read-only partitions", -EINVAL,
		  flash_settings((const char *[]){ "a=10%", "x=10%" }, 2,
				 (const char *[]){ "a=ro", "x=ro" }, 2, &l, err, sizeof(err)));
	CHECK(strstr(err, "a flash device needs a writable partition"), "reason: %s", err);

	err[0] = '\0';
	CHECK_INT("one writable, one read-only: a flash device", 0,
		  flash_settings((const char *[]){ "a=10%", "x=10%" }, 2,
				 (const char *[]){ "x=ro" }, 1, &l, err, sizeof(err)));
	CHECK_STR("no error", "", err);
	CHECK_INT("the same as a store", -EINVAL,
		  init_with(path_of("flash-rule"), (const char *[]){ "a=10%", "x=10%" }, 2,
			    (const char *[]){ "x=ro" }, 1, false, err, sizeof(err)));
	CHECK(strstr(err, "two writable partitions"), "a store still needs two: %s", err);
}

/* `ftvmctl flash init`'s settings: the default one partition without
 * --partition, the named ones with it. */
static void test_flash_settings(void)
{
	struct store_layout l;
	char err[512] = "";

	CHECK_INT("no partitions", 0, flash_settings(NULL, 0, NULL, 0, &l, err, sizeof(err)));
	CHECK(l.kind == STORE_KIND_FLASH && l.n == 1 && l.part[0].start == STORE_HEADER_SPACE &&
		      l.part[0].length == SIZE - STORE_HEADER_SPACE &&
		      l.part[0].access == STORE_ACCESS_RW,
	      "kind %d, %u partitions, the first %llu bytes", (int)l.kind, l.n,
	      (unsigned long long)l.part[0].length);

	CHECK_INT("named", 0,
		  flash_settings((const char *[]){ "a=50%", "spare=4M" }, 2,
				 (const char *[]){ "spare=ro" }, 1, &l, err, sizeof(err)));
	CHECK(l.kind == STORE_KIND_FLASH && l.n == 2, "kind %d, %u partitions", (int)l.kind, l.n);
	CHECK(strcmp(l.part[0].id, "a") == 0 && l.part[0].access == STORE_ACCESS_RW &&
		      l.part[0].start == STORE_HEADER_SPACE &&
		      l.part[0].length == (SIZE - STORE_HEADER_SPACE) / 2 / 4096 * 4096,
	      "a: rw, half the space: %llu", (unsigned long long)l.part[0].length);
	CHECK(strcmp(l.part[1].id, "spare") == 0 && l.part[1].access == STORE_ACCESS_RO &&
		      l.part[1].start == l.part[0].start + l.part[0].length &&
		      l.part[1].length == 4 << 20,
	      "spare: ro, 4M after a");
}

/* A node's first start makes its flash device and names the partition for
 * itself; the same node gets it back, another is refused. */
static void test_flash_open(void)
{
	const char *path = path_of("flash");
	struct store *a = NULL, *a2 = NULL, *b = NULL;
	struct store_layout l;
	struct stat st;
	char err[512] = "";

	CHECK(access(path, F_OK) != 0, "no file before");
	CHECK_INT("a makes its flash", 0,
		  store_open_flash(path, SIZE, 4096, "a", &a, err, sizeof(err)));
	CHECK(a && stat(path, &st) == 0 && (uint64_t)st.st_size == SIZE,
	      "the file is made, %llu bytes", (unsigned long long)st.st_size);
	if (!a)
		return;
	CHECK(store_partition_start(a) == STORE_HEADER_SPACE &&
		      store_partition_length(a) == SIZE - STORE_HEADER_SPACE,
	      "a has all the space: %llu at %llu", (unsigned long long)store_partition_length(a),
	      (unsigned long long)store_partition_start(a));
	CHECK_INT("read back", 0, store_read_layout(path, &l, err, sizeof(err)));
	CHECK(l.kind == STORE_KIND_FLASH && l.n == 1 && strcmp(l.part[0].id, "a") == 0,
	      "kind %d, %u partitions, the first named '%s'", (int)l.kind, l.n, l.part[0].id);

	CHECK_INT("a again", 0, store_open_flash(path, SIZE, 4096, "a", &a2, err, sizeof(err)));
	CHECK(a2 && store_partition_start(a2) == store_partition_start(a), "a's partition is a's");
	store_close(a2);
	CHECK_INT("b is refused", -EPERM,
		  store_open_flash(path, SIZE, 4096, "b", &b, err, sizeof(err)));
	CHECK(strstr(err, "'a'") && strstr(err, "'b'"), "reason names the owner: %s", err);
	CHECK(b == NULL, "nothing returned");
	store_close(a);

	CHECK_INT("a after a close", 0,
		  store_open_flash(path, SIZE, 4096, "a", &a, err, sizeof(err)));
	store_close(a);
}

/* A store is not a flash device, nor a flash device a store: each open says
 * which it found. */
static void test_flash_kinds(void)
{
	struct store *s = NULL;
	char err[512] = "";

	CHECK_INT("make a flash device", 0,
		  store_open_flash(path_of("kind-flash"), SIZE, 4096, "a", &s, err, sizeof(err)));
	store_close(s);
	s = NULL;
	CHECK_INT("store_open of a flash device", -EINVAL,
		  store_open(path_of("kind-flash"), SIZE, 4096, "a", false, &s, err, sizeof(err)));
	CHECK(strstr(err, "is a flash device, not a store"), "reason: %s", err);
	CHECK(s == NULL, "nothing returned");

	CHECK_INT("make a store", 0,
		  store_open(path_of("kind-store"), SIZE, 4096, "a", true, &s, err, sizeof(err)));
	store_close(s);
	s = NULL;
	CHECK_INT("store_open_flash of a store", -EINVAL,
		  store_open_flash(path_of("kind-store"), SIZE, 4096, "a", &s, err, sizeof(err)));
	CHECK(strstr(err, "is a store device, not a flash device"), "reason: %s", err);
	CHECK(s == NULL, "nothing returned");
}

/* Whether this file system takes a page-aligned O_DIRECT read at all,
 * asked without store.c. */
static bool direct_io_works(const char *path)
{
	void *buf;
	bool ok;
	int fd = open(path, O_RDONLY | O_DIRECT | O_CLOEXEC);

	if (fd < 0)
		return false;
	if (posix_memalign(&buf, 4096, 4096))
		die("posix_memalign");
	ok = pread(fd, buf, 4096, STORE_HEADER_SPACE) == 4096;
	free(buf);
	close(fd);
	return ok;
}

/* The flash queue's fd: direct I/O where the file system has it, and whole
 * pages written through it read back, through it and through the file. */
static void test_flash_io(void)
{
	const char *path = path_of("flash-io");
	const size_t len = 2 * 4096;
	struct store *s = NULL;
	uint8_t *out, *in;
	char err[512] = "";
	uint64_t at;
	int fd;

	CHECK_INT("open", 0, store_open_flash(path, SIZE, 4096, "a", &s, err, sizeof(err)));
	if (!s)
		return;
	if (direct_io_works(path))
		CHECK(store_direct(s), "O_DIRECT works on %s, yet the flash does not use it", path);
	else
		printf("note: %s takes no O_DIRECT here: store_direct() not checked\n", dir);
	if (posix_memalign((void **)&out, 4096, len) || posix_memalign((void **)&in, 4096, len))
		die("posix_memalign");
	for (size_t i = 0; i < len; i++)
		out[i] = (uint8_t)(rng() >> 7);
	at = store_partition_start(s) + 4096;
	CHECK(pwrite(store_fd(s), out, len, (off_t)at) == (ssize_t)len, "write: %s",
	      strerror(errno));
	memset(in, 0, len);
	CHECK(pread(store_fd(s), in, len, (off_t)at) == (ssize_t)len, "read: %s", strerror(errno));
	CHECK(memcmp(in, out, len) == 0, "read back through store_fd");
	store_close(s);

	memset(in, 0, len);
	fd = open(path, O_RDONLY | O_CLOEXEC);
	CHECK(fd >= 0 && pread(fd, in, len, (off_t)at) == (ssize_t)len, "plain read: %s",
	      strerror(errno));
	CHECK(memcmp(in, out, len) == 0, "read back from the file");
	if (fd >= 0)
		close(fd);
	free(out);
	free(in);
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
	rng_seed(0x5a0f1a54);
	if (!mkdtemp(dir))
		die("mkdtemp");
	test_two_nodes_and_a_third();
	test_refused();
	test_reserved();
	test_init();
	test_version_1();
	test_bad_settings();
	test_flash_default();
	test_flash_rule();
	test_flash_settings();
	test_flash_open();
	test_flash_kinds();
	test_flash_io();
	test_extent_layout();
	scratch_dir_remove(dir); /* its files have every block reserved */
	if (failures) {
		fprintf(stderr, "%d check(s) failed\n", failures);
		return 1;
	}
	printf("store: all %d checks passed\n", checks);
	return 0;
}
