/// @file gw_core.h
/// The transport core: what every driver needs and none should write again. A driver moves
/// bytes; the core matches them to receives, buffers what came early, reports completions and
/// fails an endpoint's requests when it breaks. See gw_transport_driver.h for the contract.
///
/// Matching rule (every driver): messages of one endpoint are matched in the order the peer
/// sent them; each takes the earliest posted receive whose tag matches, on its endpoint or
/// any-source (whichever was posted first); with none posted it is unexpected and buffered
/// within the transport's budget, beyond which the driver leaves it in the network
/// (back-pressure) -- a healthy peer is never failed for sending early.
#pragma once

#include "gw_endpoint_core.h"   // per endpoint: receives, messages in flight, its error
#include "gw_transport_core.h"  // per transport: completions, any-source, budget, abort
