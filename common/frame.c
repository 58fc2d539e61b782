#include "frame.h"

#include <errno.h>
#include <string.h>

#include "be_bytes.h"
#include "crc32c.h"

#define FRAME_MAGIC0 'F'
#define FRAME_MAGIC1 'V'

void frame_header_build_iov(uint8_t hdr[FRAME_HEADER_SIZE], const struct iovec *iov, size_t n,
			    size_t payload_len)
{
	uint32_t crc;

	hdr[0] = FRAME_MAGIC0;
	hdr[1] = FRAME_MAGIC1;
	hdr[2] = FRAME_VERSION;
	hdr[3] = 0;
	put_be32(hdr + 4, (uint32_t)payload_len);
	crc = crc32c(0, hdr, 8);
	for (size_t i = 0; i < n; i++)
		crc = crc32c(crc, iov[i].iov_base, iov[i].iov_len);
	put_be32(hdr + 8, crc);
}

void frame_header_build(uint8_t hdr[FRAME_HEADER_SIZE], const void *payload, size_t payload_len)
{
	struct iovec one = { .iov_base = (void *)payload, .iov_len = payload_len };

	frame_header_build_iov(hdr, &one, 1, payload_len);
}

void frame_seal(uint8_t *frame, size_t payload_len)
{
	frame_header_build(frame, frame + FRAME_HEADER_SIZE, payload_len);
}

int frame_header_check(const uint8_t hdr[FRAME_HEADER_SIZE], size_t max_payload,
		       const char **ret_why)
{
	uint32_t len;

	if (hdr[0] != FRAME_MAGIC0 || hdr[1] != FRAME_MAGIC1) {
		*ret_why = "bad magic (not an ftvm frame)";
		return -EBADMSG;
	}
	if (hdr[2] != FRAME_VERSION) {
		*ret_why = "unknown frame version";
		return -EBADMSG;
	}
	if (hdr[3] != 0) {
		*ret_why = "reserved flags set";
		return -EBADMSG;
	}
	len = get_be32(hdr + 4);
	if (len > max_payload) {
		*ret_why = "frame too long";
		return -EBADMSG;
	}
	return (int)len;
}

int frame_decode(const uint8_t *buf, size_t len, size_t max_payload, const uint8_t **ret_payload,
		 size_t *ret_payload_len, const char **ret_why)
{
	uint32_t crc;
	int payload_len;

	if (len < FRAME_HEADER_SIZE)
		return 0;
	payload_len = frame_header_check(buf, max_payload, ret_why);
	if (payload_len < 0)
		return payload_len;
	if (len < FRAME_HEADER_SIZE + (size_t)payload_len)
		return 0;
	crc = crc32c(0, buf, 8);
	crc = crc32c(crc, buf + FRAME_HEADER_SIZE, (size_t)payload_len);
	if (crc != get_be32(buf + 8)) {
		*ret_why = "checksum mismatch";
		return -EBADMSG;
	}
	*ret_payload = buf + FRAME_HEADER_SIZE;
	*ret_payload_len = (size_t)payload_len;
	return (int)(FRAME_HEADER_SIZE + (size_t)payload_len);
}
