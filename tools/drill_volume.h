/* ftvmctl drill --volume NAME (tools/drill_volume.c): a workload of block
 * writes to a volume over NBD (node/NBD.md), run beside the drill's page
 * workload, and its checks. Inside ftvmctl only: drill.c drives it. */
#pragma once

#include <stdbool.h>
#include <stdint.h>

#include <json-c/json.h>

struct ftvm_client;
struct ftvm_config;
struct drill_volume;

/* drill.c's: "ftvmctl: drill: " and the message on stderr, and the exit
 * code of a drill that failed; a pause of ms. */
__attribute__((format(printf, 1, 2))) int drill_failed(const char *fmt, ...);
void drill_sleep_ms(unsigned ms);

/* The bytes of write seq: a xorshift stream seeded by it (drill.c). */
void drill_fill(uint8_t *buf, size_t len, uint64_t seq);

/* Finds volume name in the pair (asked of c, a client of either node) and
 * each node's NBD endpoint ([nbd] socket, else [nbd] listen), connects to
 * both and lays out up to slots writes over the volume. victim and survivor
 * are the nodes' configs, kept by the caller until drill_volume_free(); a
 * request through the survivor waits at most timeout_ms. Returns 0, or ftvmctl's
 * exit code after saying why on stderr (no such volume, a node without
 * [nbd], an endpoint that refuses). */
int drill_volume_open(const char *name, struct ftvm_client *c, const struct ftvm_config *victim,
		      const struct ftvm_config *survivor, uint32_t slots, uint32_t timeout_ms,
		      struct drill_volume **ret);

/* Before the fault: every slot once, through the node its stream starts on
 * (half on each). *seq numbers the writes, shared with the page workload.
 * 0 or an exit code (said why). */
int drill_volume_write_all(struct drill_volume *v, uint64_t *seq);

/* The fault began: until the check a request through the victim waits at
 * most the survivor's dead_after_ms, and a stream whose request fails moves
 * to the survivor. */
void drill_volume_fault(struct drill_volume *v);

/* During the fault: one write on each stream (a failed write's slot is
 * rewritten first). Never fails: failures are counted and retried. */
void drill_volume_step(struct drill_volume *v, uint64_t *seq);

/* Writes acknowledged since drill_volume_fault(). */
uint64_t drill_volume_acked_during(const struct drill_volume *v);

/* After the fault: rewrites every slot whose last write failed until each
 * is acknowledged, within timeout_ms. 0 or an exit code (said why). */
int drill_volume_settle(struct drill_volume *v, uint64_t *seq, uint32_t timeout_ms);

/* The pair whole again: flushes through the survivor, then reads every
 * acknowledged write back through fresh connections to both nodes and
 * compares, saying on stderr what differs. */
void drill_volume_check(struct drill_volume *v);

/* Acknowledged writes that did not read back, counted on each node (0
 * before the check). */
uint64_t drill_volume_lost(const struct drill_volume *v);

/* The check's flush through the survivor was answered. */
bool drill_volume_flushed(const struct drill_volume *v);

/* The report: an object for --json, lines for the text. */
json_object *drill_volume_json(const struct drill_volume *v);
void drill_volume_print(const struct drill_volume *v);

void drill_volume_free(struct drill_volume *v);
