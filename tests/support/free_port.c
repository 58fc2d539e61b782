/* See free_port.h. */
#include "free_port.h"

#include <arpa/inet.h>
#include <errno.h>
#include <netinet/in.h>
#include <stdio.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#define PORT_MIN 10000u
#define TRIES 1000

static void ephemeral_range(unsigned *low, unsigned *high)
{
	FILE *f = fopen("/proc/sys/net/ipv4/ip_local_port_range", "r");

	*low = 32768;
	*high = 60999;
	if (!f)
		return;
	if (fscanf(f, "%u %u", low, high) != 2) {
		*low = 32768;
		*high = 60999;
	}
	fclose(f);
}

/* Its own generator (xorshift32, seeded by pid and clock), so that two
 * processes start apart and the caller's random() is left alone. */
static uint32_t next_random(void)
{
	static uint32_t x;
	struct timespec ts;

	if (!x) {
		clock_gettime(CLOCK_MONOTONIC, &ts);
		x = ((uint32_t)getpid() * 2654435761u) ^ (uint32_t)ts.tv_nsec;
		x = x ? x : 1;
	}
	x ^= x << 13;
	x ^= x >> 17;
	x ^= x << 5;
	return x;
}

int free_port_pick(uint16_t *ret_port)
{
	unsigned low, high;

	ephemeral_range(&low, &high);
	for (int tries = 0; tries < TRIES; tries++) {
		uint16_t port = (uint16_t)(PORT_MIN + next_random() % (65536u - PORT_MIN));
		struct sockaddr_in sin = { .sin_family = AF_INET,
					   .sin_port = htons(port),
					   .sin_addr.s_addr = htonl(INADDR_LOOPBACK) };
		int fd, r;

		if (port >= low && port <= high)
			continue;
		fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
		if (fd < 0)
			return -errno;
		r = bind(fd, (struct sockaddr *)&sin, sizeof(sin));
		close(fd);
		if (r == 0) {
			*ret_port = port;
			return 0;
		}
	}
	return -EADDRINUSE;
}
