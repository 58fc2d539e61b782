/* What the fuzz targets share (tests/fuzz/): a scratch directory in /tmp for
 * parsers that only take a path, and the NULL that other drivers than
 * libFuzzer may pass for an empty input. */
#pragma once

#include <stddef.h>
#include <stdint.h>

/* data, or "" when data is NULL (size is then 0): data + 0 on NULL is
 * undefined, and libFuzzer passes a valid pointer but other drivers need not. */
const uint8_t *fuzz_data(const uint8_t *data);

/* dir/name in this process's scratch directory, /tmp/ftvm-fuzz-XXXXXX, made
 * at the first call and removed at exit with all it holds, directories too.
 * The string is the caller's to free. Aborts when the directory cannot be
 * made. */
char *fuzz_tmp_path(const char *name);

/* Writes data to path, replacing what was there; aborts on failure (the
 * target cannot say anything about its parser then). */
void fuzz_write_file(const char *path, const uint8_t *data, size_t size);

/* How many entries the scratch directory holds: a target whose parser must
 * not create files checks this did not grow. */
size_t fuzz_tmp_entries(void);
