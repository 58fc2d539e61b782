/* The pair's shared key for the partner channel ([node] key_file): reading
 * one, checked as a secret must be, and making a new one (ftvmctl keygen).
 * The key is the file's content, whatever its bytes. */
#pragma once

#include <stddef.h>
#include <stdint.h>

#define KEYFILE_MIN 32u	  /* bytes: 256 bits when they are random */
#define KEYFILE_MAX 4096u /* a key, not a document */
/* What keyfile_generate() writes: this many random bytes, as hex, and a
 * newline. */
#define KEYFILE_RANDOM_BYTES 32u

/* Reads the key in path into buf (KEYFILE_MAX bytes) and its length into
 * *ret_len. -EINVAL with the reason in err when the file is not a regular
 * file, has fewer than KEYFILE_MIN or more than KEYFILE_MAX bytes, or is
 * open to group or others (mode & 077: the key would not be secret);
 * -errno when it cannot be read. Nothing of a refused key stays in buf. */
int keyfile_load(const char *path, uint8_t buf[KEYFILE_MAX], size_t *ret_len, char *err,
		 size_t err_len);

/* Creates path, mode 0600, with KEYFILE_RANDOM_BYTES bytes from the
 * kernel's random pool written as hex. -EEXIST when path exists (a key is
 * never overwritten), -errno otherwise; err says why. */
int keyfile_generate(const char *path, char *err, size_t err_len);
