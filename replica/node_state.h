/* STATE(ACTIVE) for FTVM__PARTNER__NODE_STATE__NODE_STATE_ACTIVE: the node
 * states of the partner protocol (proto/partner.proto, NodeState), which every
 * Hello and heartbeat carries and the fence slots share (storage/sbd.h). Names
 * only, next to codec_node_state_name(): what a state means and when a node
 * moves between them is node/ha/ha.c's. */
#pragma once

#include "partner.pb-c.h"

#define STATE(x) FTVM__PARTNER__NODE_STATE__NODE_STATE_##x
