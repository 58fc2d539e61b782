/* A frame pool for the RDMA tests as ftvmd has one: a memfd mapping. */
#pragma once

#include <stddef.h>
#include <stdint.h>
#include <sys/mman.h>
#include <unistd.h>

#include "../unit/check.h"

/* bytes of a fresh memfd, mapped shared; dies when it cannot be had. */
static inline uint8_t *pool_memfd_map(size_t bytes)
{
	int fd = memfd_create("ftvm-test-pool", MFD_CLOEXEC);
	void *p;

	if (fd < 0 || ftruncate(fd, (off_t)bytes) < 0)
		die("memfd for the pool");
	p = mmap(NULL, bytes, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
	close(fd);
	if (p == MAP_FAILED)
		die("mmap of the pool");
	return p;
}
