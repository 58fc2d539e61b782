/* ftvm-free-port: prints a free TCP port on 127.0.0.1 (free_port.h) for a
 * shell test's node to listen on; exit 1 when there is none. */
#include <stdio.h>
#include <string.h>

#include "free_port.h"

int main(void)
{
	uint16_t port;
	int r = free_port_pick(&port);

	if (r < 0) {
		fprintf(stderr, "ftvm-free-port: no free port outside the ephemeral range: %s\n",
			strerror(-r));
		return 1;
	}
	printf("%u\n", port);
	return 0;
}
