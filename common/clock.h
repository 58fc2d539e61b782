/* Monotonic time: every deadline, heartbeat and latency in ftvm uses it. */
#pragma once

#include <stdint.h>

uint64_t clock_now_us(void);
uint64_t clock_now_ms(void);
