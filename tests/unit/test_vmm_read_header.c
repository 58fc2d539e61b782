/* Read header (node/vmm/read_header.c; vmm/VMM.md, "Read header: whose
 * record answers") on node a over the fake partner session. a owns A; b owns
 * b-1. The end of a resync a received (vmm_headers_resynced, which the
 * resync's ResyncEnd calls; e2e-read_header runs a real one) leaves a's
 * record of b-1 unconfirmed:
 * - a record known current is answered here: no ReadHeader goes;
 * - unconfirmed, ReadHeader goes to the owner; its Header answers, and an
 *   equal one confirms the record, so the next header stays here;
 * - the owner's record differing: the owner's answers, counted, and the
 *   record stays unconfirmed; the owner knowing none: NOT_FOUND; the owner
 *   not answering: the record here answers;
 * - a's own allocation is never asked of anyone. */
#include <string.h>

#include "check.h"
#include "vmm.h"
#include "vmm_core.h"
#include "vmm_harness.h"

#define MSG(x) FTVM__PARTNER__ENVELOPE__MESSAGE_##x
#define STATUS(x) FTVM__PARTNER__STATUS__STATUS_##x

static struct harness h;

/* guid's header from a: its reply, NULL when refused; *asked whether a
 * ReadHeader waited for the owner (answered by answer, if not NULL). */
static const Ftvm__Partner__Header *header(const char *guid, const CommandComplete *answer,
					   bool *asked, int *status)
{
	struct fake_call *call = harness_header_call(&h, guid);
	struct fake_request *r;

	harness_settle(&h);
	r = fake_session_pending(h.s, MSG(READ_HEADER));
	*asked = r != NULL;
	if (r) {
		CHECK(!call->answered, "answered before the owner did");
		CHECK_STR("ReadHeader.guid", guid, r->env->read_header->guid);
		if (answer)
			fake_session_answer(h.s, r, answer);
		else
			fake_session_fail_pending(h.s, STATUS(PARTNER_UNAVAILABLE), "link down");
	}
	if (!RUN_UNTIL(&h, call->answered)) {
		FAIL("header %s: no reply", guid);
		return NULL;
	}
	*status = harness_status(call);
	return *status == 0 ? call->reply->header : NULL;
}

/* The owner's Header of b-1 as b would send it, with blob as its header. */
static void owners_header(Ftvm__Partner__Header *hd, CommandComplete *cc, const char *blob)
{
	ftvm__partner__header__init(hd);
	hd->guid = "b-1";
	hd->size = 2 * HARNESS_PAGE;
	hd->block_size = HARNESS_PAGE;
	hd->pages = 2;
	hd->policy = "default";
	hd->home = "b";
	hd->owner = "b";
	hd->client = "";
	hd->media = "flash"; /* b's copy: never a's answer */
	hd->header.data = (uint8_t *)blob;
	hd->header.len = strlen(blob);
	*cc = (CommandComplete)FTVM__PARTNER__COMMAND_COMPLETE__INIT;
	cc->payload_case = FTVM__PARTNER__COMMAND_COMPLETE__PAYLOAD_HEADER;
	cc->header = hd;
}

static uint64_t counted(bool differed)
{
	struct status_counts c;

	vmm_get_counts(h.v, &c);
	return differed ? c.header_differed : c.header_asked;
}

int main(void)
{
	const Ftvm__Partner__Header *got;
	Ftvm__Partner__Header hd;
	CommandComplete cc, refused = FTVM__PARTNER__COMMAND_COMPLETE__INIT;
	char A[64];
	bool asked;
	int status;

	harness_start(&h, "vmm-read-header", "64K", "1M", "");
	harness_alloc(&h, HARNESS_PAGE, A, sizeof(A));
	harness_partner_alloc(&h, "b-1", 2, 0);

	got = header("b-1", NULL, &asked, &status);
	CHECK(got && !asked, "b-1, known current: asked %d, status %d", asked, status);

	vmm_headers_resynced(h.v);
	got = header(A, NULL, &asked, &status);
	CHECK(got && !asked, "A, owned here: asked %d, status %d", asked, status);

	owners_header(&hd, &cc, "");
	got = header("b-1", &cc, &asked, &status);
	CHECK(got && asked, "b-1 after the resync: asked %d, status %d", asked, status);
	CHECK(got && strcmp(got->media, "store") == 0, "media %s, not this node's",
	      got ? got->media : "-");
	got = header("b-1", NULL, &asked, &status);
	CHECK(got && !asked, "b-1, confirmed: asked %d, status %d", asked, status);

	vmm_headers_resynced(h.v);
	owners_header(&hd, &cc, "newer");
	got = header("b-1", &cc, &asked, &status);
	CHECK(got && asked && got->header.len == 5 && memcmp(got->header.data, "newer", 5) == 0,
	      "b-1, the owner's record differing: asked %d, status %d", asked, status);
	CHECK_INT("differed", 1, counted(true));

	refused.status = STATUS(NOT_FOUND);
	refused.reason = "no allocation b-1";
	got = header("b-1", &refused, &asked, &status);
	CHECK(!got && asked && status == STATUS(NOT_FOUND),
	      "b-1, still unconfirmed, the owner knowing none: asked %d, status %d", asked, status);

	got = header("b-1", NULL, &asked, &status);
	CHECK(got && asked && got->header.len == 0,
	      "b-1, the owner unreachable: this node's record answers: asked %d, status %d", asked,
	      status);
	CHECK_INT("asked", 4, counted(false));
	CHECK_INT("calls unanswered", 0, harness_stop(&h));
	printf("%d checks, %d failed\n", checks, failures);
	return failures ? 1 : 0;
}
