/* A free TCP port on loopback for a test or a benchmark to listen on; shell
 * scripts get one from ftvm-free-port (free_port_main.c). */
#pragma once

#include <stdint.h>

/* A port on 127.0.0.1 that could be bound just now, taken outside the
 * kernel's ephemeral range (ip_local_port_range): a port from that range may
 * be handed to a dialling socket meanwhile, even to the very socket that
 * dials it (a TCP self-connect), and its listener then cannot bind it.
 * 0 and -errno (-EADDRINUSE when none was found), the port in *ret_port. */
int free_port_pick(uint16_t *ret_port);
