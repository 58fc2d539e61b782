#include "vmm_msg.h"

static Envelope *envelope(struct vmm_msg *msg, int message_case)
{
	ftvm__partner__envelope__init(&msg->env);
	msg->env.message_case = message_case;
	return &msg->env;
}

Envelope *vmm_msg_lock_request(struct vmm_msg *msg, const char *guid, uint64_t page, bool write,
			       uint64_t ticket, uint32_t wait_ms)
{
	Ftvm__Partner__LockRequest *m = &msg->m.lock_request;

	ftvm__partner__lock_request__init(m);
	m->guid = (char *)guid;
	m->page = page;
	m->mode = write ? FTVM__PARTNER__LOCK_MODE__LOCK_MODE_WRITE
			: FTVM__PARTNER__LOCK_MODE__LOCK_MODE_READ;
	m->ticket = ticket;
	m->wait_ms = wait_ms;
	envelope(msg, FTVM__PARTNER__ENVELOPE__MESSAGE_LOCK_REQUEST)->lock_request = m;
	return &msg->env;
}

Envelope *vmm_msg_allocate(struct vmm_msg *msg, const char *guid, uint64_t page, const char *owner,
			   bool write, bool page_in)
{
	if (write) {
		Ftvm__Partner__AllocateWrite *m = &msg->m.allocate_write;

		ftvm__partner__allocate_write__init(m);
		m->guid = (char *)guid;
		m->page = page;
		m->owner = (char *)owner;
		m->page_in = page_in;
		envelope(msg, FTVM__PARTNER__ENVELOPE__MESSAGE_ALLOCATE_WRITE)->allocate_write = m;
	} else {
		Ftvm__Partner__AllocateRead *m = &msg->m.allocate_read;

		ftvm__partner__allocate_read__init(m);
		m->guid = (char *)guid;
		m->page = page;
		m->owner = (char *)owner;
		envelope(msg, FTVM__PARTNER__ENVELOPE__MESSAGE_ALLOCATE_READ)->allocate_read = m;
	}
	return &msg->env;
}

Envelope *vmm_msg_write_page(struct vmm_msg *msg, const char *guid, uint64_t page, const void *data,
			     uint32_t len, uint32_t crc)
{
	Ftvm__Partner__WritePage *m = &msg->m.write_page;

	ftvm__partner__write_page__init(m);
	m->guid = (char *)guid;
	m->page = page;
	m->data.data = (uint8_t *)data;
	m->data.len = len;
	m->crc32c = crc;
	envelope(msg, FTVM__PARTNER__ENVELOPE__MESSAGE_WRITE_PAGE)->write_page = m;
	return &msg->env;
}

Envelope *vmm_msg_write_page_landed(struct vmm_msg *msg, const char *guid, uint64_t page,
				    uint32_t crc, const struct repl_landing *at)
{
	Envelope *env = vmm_msg_write_page(msg, guid, page, NULL, 0, crc);

	ftvm__partner__landing__init(&msg->landed);
	msg->landed.frame = at->frame;
	msg->landed.frames = at->frames;
	msg->landed.generation = at->generation;
	msg->m.write_page.landed = &msg->landed;
	return env;
}

Envelope *vmm_msg_release_pointer(struct vmm_msg *msg, const char *guid, uint64_t page,
				  const char *owner, bool modified, uint64_t version, uint32_t crc)
{
	Ftvm__Partner__ReleasePointer *m = &msg->m.release_pointer;

	ftvm__partner__release_pointer__init(m);
	m->guid = (char *)guid;
	m->page = page;
	m->owner = (char *)owner;
	m->modified = modified;
	m->version = version;
	m->crc32c = crc;
	envelope(msg, FTVM__PARTNER__ENVELOPE__MESSAGE_RELEASE_POINTER)->release_pointer = m;
	return &msg->env;
}

void vmm_msg_allocation(Ftvm__Partner__AllocateMemory *am, const struct vmm_alloc *a)
{
	ftvm__partner__allocate_memory__init(am);
	am->guid = a->guid;
	am->size = a->size;
	am->block_size = a->block_size;
	am->policy = a->policy;
	am->home = a->home;
	am->header.data = a->header;
	am->header.len = a->header_len;
	am->store_offset = a->store_offset;
	am->uid = a->uid;
	am->client = a->client;
	am->session = a->session;
	am->volume = a->volume;
}
