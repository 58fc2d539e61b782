/* fold_map: each page keeps its row of highest seq, whatever order the rows
 * come in; what it cannot hold it refuses, holding what it had. */
#include <errno.h>
#include <stdio.h>
#include <string.h>

#include "check.h"
#include "fold_map.h"

struct seen {
	unsigned n;
	uint64_t version_sum;
	bool page1_of_b;
};

static int count(const struct fold_row *r, void *arg)
{
	struct seen *s = arg;

	s->n++;
	s->version_sum += r->version;
	if (strcmp(r->guid, "b-2") == 0 && r->page == 1)
		s->page1_of_b = r->dirty && r->crc32c == 0x22u && r->version == 20;
	return 0;
}

static int stop_at_first(const struct fold_row *r, void *arg)
{
	(*(unsigned *)arg)++;
	return -ECANCELED;
}

static void test_newest_by_seq(void)
{
	struct fold_map *m;
	struct seen s = { 0 };
	unsigned calls = 0;
	char guid[8] = "b-2";

	CHECK_INT("new", 0, fold_map_new(3, &m));
	/* Page 1 of b-2: seq 5, then seq 9, then seq 7 (older, comes last). */
	CHECK_INT("seq 5", 0, fold_map_put(m, &(struct fold_row){ guid, 1, 5, 10, 0x11u, false }));
	CHECK_INT("seq 9", 0, fold_map_put(m, &(struct fold_row){ guid, 1, 9, 20, 0x22u, true }));
	CHECK_INT("seq 7", 0, fold_map_put(m, &(struct fold_row){ guid, 1, 7, 30, 0x33u, false }));
	/* The guid is copied: the caller's buffer may change. */
	strcpy(guid, "b-3");
	CHECK_INT("page 0 of b-3", 0,
		  fold_map_put(m, &(struct fold_row){ guid, 0, 8, 1, 0, false }));
	CHECK_INT("page 1 of b-3", 0,
		  fold_map_put(m, &(struct fold_row){ guid, 1, 6, 2, 0, false }));
	CHECK_INT("a fourth page refused", -ENOSPC,
		  fold_map_put(m, &(struct fold_row){ "b-4", 0, 10, 3, 0, false }));
	CHECK_INT("a page it holds still taken", 0,
		  fold_map_put(m, &(struct fold_row){ "b-3", 1, 11, 4, 0, false }));
	CHECK_INT("an empty guid", -EINVAL,
		  fold_map_put(m, &(struct fold_row){ "", 0, 12, 5, 0, false }));
	CHECK_INT(
		"a guid too long", -ENAMETOOLONG,
		fold_map_put(
			m,
			&(struct fold_row){
				"0123456789012345678901234567890123456789012345678901234567890123",
				0, 13, 6, 0, false }));
	CHECK_INT("walk", 0, fold_map_each(m, count, &s));
	CHECK_INT("each page once", 3, s.n);
	CHECK_INT("versions: 20 + 1 + 4", 25, s.version_sum);
	CHECK(s.page1_of_b, "page 1 of b-2 holds the row of seq 9");
	CHECK_INT("a walk stopped", -ECANCELED, fold_map_each(m, stop_at_first, &calls));
	CHECK_INT("at the first", 1, calls);
	fold_map_free(m);
}

/* Many pages, many guids: none lost to a collision. */
static void test_many(void)
{
	enum {
		PAGES = 3000
	};
	struct fold_map *m;
	struct seen s = { 0 };
	char guid[16];

	CHECK_INT("new", 0, fold_map_new(PAGES, &m));
	for (unsigned round = 0; round < 2; round++)
		for (unsigned i = 0; i < PAGES; i++) {
			snprintf(guid, sizeof(guid), "a-%u", i % 37);
			if (fold_map_put(m, &(struct fold_row){ guid, i / 37, round * PAGES + i,
								round, 0, false }) < 0)
				FAIL("put %u of round %u", i, round);
		}
	CHECK_INT("walk", 0, fold_map_each(m, count, &s));
	CHECK_INT("every page", PAGES, s.n);
	CHECK_INT("each once, at the second round's row", PAGES, s.version_sum);
	fold_map_free(m);
}

int main(void)
{
	test_newest_by_seq();
	test_many();
	if (failures) {
		fprintf(stderr, "%d check(s) failed\n", failures);
		return 1;
	}
	printf("%d checks passed\n", checks);
	return 0;
}
