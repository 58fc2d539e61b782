#include "fuzz_stream.h"

#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>

#include "frame.h"

uint8_t *fuzz_stream(const uint8_t *data, size_t size, size_t *ret_len)
{
	uint8_t *out = malloc(size ? size / 2 * (FRAME_HEADER_SIZE + 2) + size : 1);
	size_t len = 0, off = 1;

	if (!out)
		abort();
	if (!(data[0] & 1)) {
		memcpy(out, data + 1, size - 1);
		*ret_len = size - 1;
		return out;
	}
	while (off + 2 <= size) {
		size_t n = (size_t)data[off] | (size_t)data[off + 1] << 8;

		off += 2;
		if (n > size - off)
			n = size - off;
		memcpy(out + len + FRAME_HEADER_SIZE, data + off, n);
		frame_seal(out + len, n);
		len += FRAME_HEADER_SIZE + n;
		off += n;
	}
	*ret_len = len;
	return out;
}

ssize_t fuzz_recv_more(int fd, uint8_t **buf, size_t *len, size_t *cap)
{
	ssize_t n;

	if (*len == *cap) {
		*cap = *cap ? 2 * *cap : 65536;
		*buf = realloc(*buf, *cap);
		if (!*buf)
			abort();
	}
	n = recv(fd, *buf + *len, *cap - *len, 0);
	if (n > 0)
		*len += (size_t)n;
	return n;
}
