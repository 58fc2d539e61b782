/* systemd integration (sd_notify): READY, STATUS, STOPPING and the watchdog.
 * Outside systemd (no NOTIFY_SOCKET) every call is a harmless no-op. */
#pragma once

struct event_base;
struct notify_watchdog;

void notify_ready(const char *status);
void notify_status(const char *status);
void notify_stopping(void);
/* Around a reload of the configuration (SIGHUP): RELOADING=1, then READY=1. */
void notify_reloading(void);
void notify_reloaded(void);

/* Pings the watchdog at half of WATCHDOG_USEC when systemd set one; *ret is
 * NULL when there is none. */
int notify_watchdog_start(struct event_base *base, struct notify_watchdog **ret);
void notify_watchdog_free(struct notify_watchdog *w);
