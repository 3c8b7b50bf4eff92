/// @file gw_transport_driver.h
/// For driver writers: the registry, and the contract between a driver and the transport core.
///
/// A driver implements Transport, Endpoint and CompletionQueue (gw_transport.h) and keeps
/// what is truly its own: moving bytes (framing, reliability, verbs, mbufs), registration,
/// its wire format and its fast paths. Everything else is the core's (gw_core.h):
///
/// The driver's Transport derives from core::DriverTransport<Driver, Endpoint> (CRTP,
/// gw_driver_base.h), which owns props_, addr_, the CQ (poll() calls the driver's progress()
/// directly), core_ (one core::TransportCore: init() it with the driver's cq_depth, receive
/// slots and unexpected budget), the endpoint list eps_ and endpoint_gone(), post_recv_any,
/// cancel_tags/accept_tags and abort() (below), stats() (the driver's driver_stats(),
/// "endpoints", core.add_stats()), register_memory's checks (check_region) and the device
/// staging of receives (is_device, rx_pool, rx_copies_, poll_rx_copies; open_gpu() at open).
/// The driver keeps its wire: connect, register_memory, the post paths, progress() (ending in
/// finish_pass(), then core.sink().drain(out)) and its own counters.
///
/// Per endpoint, one core::EndpointCore: init() it at connect time (it reserves the
/// endpoint-error event). Then:
///   - post_send: core::check_send(), then core.reserve() before taking a request (false:
///     accept no more now); core.complete() when done ("done" = the buffer may be reused).
///   - post_recv: core.post_recv(reqs, prep), prep being the driver's extra check.
///   - message arrival (hot path, inline): when the peer's next message in send order
///     begins, m = core.begin(seq, tag, len): -1 means leave it in the network and retry
///     later (back-pressure); else write its bytes to core.msg(m).base (null: drop them) and
///     call core.finish(m) when all are in. Fragments of a matched message find it again by
///     the driver's own map or core.find_active(seq).
///   - failure: if (core.set_error(st, orderly, sends_pending)) { complete the driver's
///     sends with st.code(); core.fail_receives(code, keep); release driver resources;
///     core.report_error(); } -- status() returns core.error().
///   - abort (Transport::abort, any thread): the base calls core.request_abort(reason), then
///     the driver's wake() if the driving thread may sleep long (tcp: an eventfd in its epoll
///     set). From then on the core refuses posts (post_send asks core.refusal() per burst;
///     post_recv and post_recv_any refuse on their own). The base's finish_pass(), at the end
///     of each progress pass (a single load), fails each endpoint through fail_aborted(ep,
///     core.abort_status()) (default: ep->fail) and calls core.fail_any(code); the driver
///     tells its peers as when it closes an endpoint.
/// RecvHooks lets a driver copy a buffered message into memory the CPU cannot write (GPU).
///
/// A driver with its own wire protocol (rdma) uses the same calls and a few more: begin(...,
/// defer=true) buffers a message whose bytes are not sent yet (a rendezvous request) without
/// bytes or budget -- the driver may give it a buffer from core.store() (a pull) or wait;
/// RecvHooks::claimed(m) tells it a receive took such a message; Posted::cookie marks a posted
/// receive (rdma: advertised to the peer), InMsg::cookie says which one a message matched, and
/// claim_posted(i) takes a receive the peer wrote into directly; init()'s max_unexpected
/// bounds buffered messages apart from message slots; set_any_source(false) keeps an endpoint
/// the caller does not have yet away from any-source receives; post_recv's `waiting(tag)`
/// lets a failed endpoint take receives for messages the driver still holds.
///
/// Guarantees: no allocation on the hot path (unexpected buffers are reused, within the
/// budget); a completion is never dropped; any-source receives reserve their completion;
/// matching follows the rule in gw_core.h on every driver.
#pragma once

#include <initializer_list>
#include <memory>

#include "gw_config.h"
#include "gw_options.h"
#include "gw_transport.h"

namespace gw {

/// Opens the driver with `cfg`, whose [<driver>] keys already hold the device arguments.
using DriverOpenFn = Result<std::unique_ptr<Transport>> (*)(const Config& cfg);

class DriverRegistrar {
 public:
  DriverRegistrar(const char* name, int priority, DriverOpenFn open);
};

}  // namespace gw

/// GW_REGISTER_DRIVER(tcp, 10, open_fn, kOptions): `kOptions` is the driver's option table
/// (gw_options.h; its keys are declared as "tcp.<name>"), constant so that it is ready first.
#define GW_REGISTER_DRIVER(name, priority, open_fn, table)           \
  static const ::gw::OptionKeys gw_option_keys_##name{#name, table}; \
  static const ::gw::DriverRegistrar gw_driver_##name { #name, priority, open_fn }
