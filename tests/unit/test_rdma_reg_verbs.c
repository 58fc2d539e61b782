/* The registration table over the real verbs backend: blocks of malloc'd
 * memory and of a memfd mapping (as the frame pool is) registered on first
 * use, registered again after invalidation, purged. Needs an RDMA device
 * (Soft-RoCE will do): without one it is skipped (77), never passed. */
#define _GNU_SOURCE /* memfd_create */
#include <errno.h>
#include <infiniband/verbs.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

#include "check.h"
#include "rdma_reg_verbs.h"

#define BLOCK (64u * 1024)

static char reason[256];

static void exercise(struct rdma_regtable *t, void *mem, const char *what)
{
	struct rdma_block_key first, second;
	uint32_t block;
	int r;

	r = rdma_regtable_add(t, mem, BLOCK, &block, reason, sizeof(reason));
	CHECK(r == 0, "%s: add: %s", what, reason);
	if (r < 0)
		return;
	r = rdma_regtable_use(t, block, &first, reason, sizeof(reason));
	CHECK(r == 0 && first.registered_now, "%s: first use: %d (%s)", what, r, reason);
	r = rdma_regtable_invalidate(t, block, reason, sizeof(reason));
	CHECK_INT("invalidate", 0, r);
	r = rdma_regtable_use(t, block, &second, reason, sizeof(reason));
	CHECK(r == 0 && second.registered_now, "%s: use after invalidate: %d (%s)", what, r,
	      reason);
	CHECK(second.generation != first.generation, "%s: the generation stayed %llu", what,
	      (unsigned long long)first.generation);
	CHECK(rdma_regtable_check(t, block, first.generation, NULL, 0) == -ESTALE,
	      "%s: the first registration's generation is not stale", what);
	CHECK_INT("remove", 0, rdma_regtable_remove(t, block, reason, sizeof(reason)));
	r = rdma_regtable_purge(t, reason, sizeof(reason));
	CHECK(r == 1, "%s: purge: %d (%s)", what, r, reason);
}

int main(void)
{
	struct ibv_device **devices;
	struct ibv_context *ctx = NULL;
	struct rdma_reg_verbs verbs = { .access =
						IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_WRITE };
	struct rdma_regtable *t = NULL;
	void *heap = NULL, *shared = MAP_FAILED;
	char name[64];
	int n = 0, fd = -1;

	devices = ibv_get_device_list(&n);
	if (!devices || n == 0) {
		printf("SKIP: no RDMA device here (%s)\n",
		       devices ? "none listed" : strerror(errno));
		if (devices)
			ibv_free_device_list(devices);
		return 77;
	}
	snprintf(name, sizeof(name), "%s", ibv_get_device_name(devices[0]));
	ctx = ibv_open_device(devices[0]);
	if (!ctx || !(verbs.pd = ibv_alloc_pd(ctx)))
		die("opening the first RDMA device");
	if (rdma_regtable_new(4, &rdma_reg_verbs_ops, &verbs, &t, reason, sizeof(reason)) < 0) {
		fprintf(stderr, "ERROR rdma_regtable_new: %s\n", reason);
		return 99;
	}
	heap = xcalloc(BLOCK);
	exercise(t, heap, "malloc'd block");
	fd = memfd_create("test-frames", MFD_CLOEXEC);
	if (fd < 0 || ftruncate(fd, BLOCK) < 0)
		die("memfd");
	shared = mmap(NULL, BLOCK, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
	if (shared == MAP_FAILED)
		die("mmap of the memfd");
	exercise(t, shared, "memfd block");
	rdma_regtable_free(t);
	munmap(shared, BLOCK);
	close(fd);
	free(heap);
	ibv_dealloc_pd(verbs.pd);
	ibv_close_device(ctx);
	ibv_free_device_list(devices);
	if (failures) {
		fprintf(stderr, "%d of %d check(s) failed\n", failures, checks);
		return 1;
	}
	printf("rdma_reg_verbs on %s: all %d checks passed\n", name, checks);
	return 0;
}
