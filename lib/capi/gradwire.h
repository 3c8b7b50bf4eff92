/** @file gradwire.h
 * gradwire's C API (C11): collectives and point-to-point messages between the ranks of a job,
 * over any gradwire transport (tcp, dpdk, rdma). A thin layer over the C++ Communicator, Group
 * and Transport; no C++ exception crosses it.
 *
 * Use: gw_init(GW_API_VERSION), gw_transport_open("tcp", &t), gw_comm_init_env(t, 0, &c),
 * then gw_allreduce(c, ...), gw_comm_destroy(c).
 *
 * Errors: every call returns a gw_status_t; on failure gw_last_error() says what failed and
 * where (function, rank, peer). A collective that failed (dead peer, timeout, mismatched
 * calls) breaks the communicator: every later collective returns that error; destroy it.
 * Thread-safety: a communicator (and its requests and registrations) is used by one thread at
 * a time; different communicators may be used from different threads.
 * Build: `cc prog.c $(pkg-config --cflags --libs gradwire)` and `#include <gradwire.h>`.
 */
#ifndef GRADWIRE_H
#define GRADWIRE_H

#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

/** API version this header describes: major << 16 | minor. A library accepts a program built
 *  against the same major and a minor not above its own. */
#define GW_API_VERSION_MAJOR 1
#define GW_API_VERSION_MINOR 4
#define GW_API_VERSION ((GW_API_VERSION_MAJOR << 16) | GW_API_VERSION_MINOR)

#define GW_API __attribute__((visibility("default")))

/** Status codes; mirror gw::Code. */
typedef enum gw_status {
  GW_OK = 0,
  GW_ERR_INVALID_ARGUMENT = 1,   /**< bad pointer, size, dtype, rank; or ranks called apart */
  GW_ERR_NOT_SUPPORTED = 2,      /**< the transport or build cannot do this; version mismatch */
  GW_ERR_UNAVAILABLE = 3,        /**< a device, driver, launcher or peer is not there */
  GW_ERR_TIMEOUT = 4,            /**< a deadline passed */
  GW_ERR_RESOURCE_EXHAUSTED = 5, /**< too many requests in flight, out of memory */
  GW_ERR_REMOTE = 6,             /**< a peer failed, closed or reset */
  GW_ERR_PROTOCOL = 7,           /**< malformed data from a peer */
  GW_ERR_SYSTEM = 8,             /**< a system call failed */
  GW_ERR_INTERNAL = 9,           /**< a bug in gradwire */
  GW_ERR_ABORTED = 10            /**< a rank called gw_comm_abort (API 1.1) */
} gw_status_t;

/** Element types; mirror gw::DataType. */
typedef enum gw_dtype {
  GW_FLOAT32 = 0,
  GW_FLOAT64 = 1,
  GW_FLOAT16 = 2,  /**< IEEE binary16, reduced in float32 */
  GW_BFLOAT16 = 3, /**< reduced in float32 */
  GW_INT32 = 4,
  GW_INT64 = 5,
  GW_UINT8 = 6,
  GW_DTYPE_MAX_ENUM = 0x7FFFFFFF /**< not a type: keeps any int value valid (checked at run time) */
} gw_dtype_t;

/** Reduction operators; mirror gw::ReduceOp. Integer sum/prod wrap; AVG divides once. */
typedef enum gw_op {
  GW_SUM = 0,
  GW_PROD = 1,
  GW_MIN = 2,
  GW_MAX = 3,
  GW_AVG = 4,
  GW_OP_MAX_ENUM = 0x7FFFFFFF /**< not an op (as GW_DTYPE_MAX_ENUM) */
} gw_op_t;

typedef struct gw_transport gw_transport_t; /**< one driver on one device */
typedef struct gw_comm gw_comm_t;           /**< ranks, their connections, the collectives */
typedef struct gw_request gw_request_t;     /**< a started collective, send or receive */
typedef struct gw_mr gw_mr_t;               /**< a memory registration */

/** One tensor of a fused allreduce bucket; send may equal recv. */
typedef struct gw_tensor {
  const void* send;
  void* recv;
  size_t count;
} gw_tensor_t;

/** A rendezvous the caller provides (e.g. its framework's key-value store). Keys are
 *  NUL-terminated; values are bytes. Every callback returns 0 on success. Callbacks are
 *  called from the thread that calls gw_comm_init_rendezvous, only during that call. */
typedef struct gw_rendezvous {
  void* user; /**< passed to every callback */
  /** Store (or overwrite) `key`. */
  int (*set)(void* user, const char* key, const void* value, size_t len);
  /** Copy the value of an existing `key` into buf (capacity cap) and set *len to its length;
   *  if it is longer than cap, set *len and return GW_RDZV_TOO_SMALL (called again). */
  int (*get)(void* user, const char* key, void* buf, size_t cap, size_t* len);
  /** Wait until all keys exist: 0, GW_RDZV_TIMEOUT after timeout_ms (0: check only once). */
  int (*wait)(void* user, const char* const* keys, size_t nkeys, int64_t timeout_ms);
} gw_rendezvous_t;
#define GW_RDZV_TIMEOUT 1
#define GW_RDZV_TOO_SMALL 2

/** Receive from any peer (gw_recv, gw_recv_start). */
#define GW_ANY_SOURCE (-1)

/** Check that the library speaks `api_version` (pass GW_API_VERSION); must succeed once
 *  before gw_transport_open. @return GW_ERR_NOT_SUPPORTED on a mismatch. */
GW_API gw_status_t gw_init(uint32_t api_version);
/** The library's API version (GW_API_VERSION of the header it was built from). */
GW_API uint32_t gw_api_version(void);
/** What the last failed call on this thread reported; "" after a successful call. The text
 *  stays valid until the next gradwire call on this thread. */
GW_API const char* gw_last_error(void);
/** The rank the last failed call on this thread blamed (the peer that died, stopped or
 *  aborted), or -1 when none was named. Reset with gw_last_error. (API 1.1) */
GW_API int gw_last_error_rank(void);
/** "OK", "InvalidArgument", ... */
GW_API const char* gw_status_name(gw_status_t status);

/** Open a transport: "tcp", "tcp:iface=lo", "dpdk:vdev=...", "rdma:dev=rxe0", or "auto".
 *  @return GW_ERR_INVALID_ARGUMENT (unknown driver/key), GW_ERR_UNAVAILABLE, GW_ERR_SYSTEM. */
GW_API gw_status_t gw_transport_open(const char* spec, gw_transport_t** out);
/** Close a transport that no communicator took. */
GW_API gw_status_t gw_transport_close(gw_transport_t* transport);

/** Join the job the launcher started: rank and size from GW_RANK/GW_WORLD_SIZE/GW_MASTER_ADDR/
 *  GW_MASTER_PORT, torchrun, Open MPI or Slurm; rank 0 serves the rendezvous. Takes
 *  `transport` (also on failure). timeout_ms bounds the setup and is every collective's
 *  default timeout (0: coll.timeout_ms, 60 s). @return GW_ERR_UNAVAILABLE (no launcher),
 *  GW_ERR_TIMEOUT (naming the missing ranks), GW_ERR_INVALID_ARGUMENT, connect errors. */
GW_API gw_status_t gw_comm_init_env(gw_transport_t* transport, int64_t timeout_ms, gw_comm_t** out);
/** As gw_comm_init_env, with rank and size given and addresses exchanged through `rdzv`
 *  (keys "gw/addr/<rank>" and "gw/host/<rank>"; prefix them in the callbacks to share a store
 *  between groups). */
GW_API gw_status_t gw_comm_init_rendezvous(gw_transport_t* transport, const gw_rendezvous_t* rdzv,
                                           int rank, int size, int64_t timeout_ms, gw_comm_t** out);
/** Destroy a communicator with its transport, requests and registrations. */
GW_API gw_status_t gw_comm_destroy(gw_comm_t* comm);
/** Abort the communicator; the one call that may come from any thread, while another thread
 *  is inside a call on `comm`. Every call in flight or blocked on this rank returns
 *  GW_ERR_ABORTED within about 50 ms (the thread driving it sees the request at its next
 *  poll; if none is, the next call on `comm` does), and every other rank's within about 200
 *  ms: they get GW_ERR_ABORTED and gw_last_error_rank() names this rank. Later calls return
 *  the same error; destroy the communicator. `reason` (may be NULL) goes into the text.
 *  A send/receive outliving its deadline aborts the communicator this way. (API 1.1) */
GW_API gw_status_t gw_comm_abort(gw_comm_t* comm, const char* reason);
/** Write this rank's flight record (its last calls, what it knows of each peer) as JSON to
 *  <coll.flight_dir>/gw-flight-<rank>.json; read every rank's with `gw-doctor DIR`. `path`
 *  (may be NULL) gets the file's name, cut to `path_len`. Same thread as the other calls.
 *  @return GW_ERR_NOT_SUPPORTED (coll.flight_records = 0), GW_ERR_SYSTEM. (API 1.3) */
GW_API gw_status_t gw_comm_dump_flight(gw_comm_t* comm, char* path, size_t path_len);
/** Go on without the ranks that failed (Communicator::shrink; NCCL's ncclCommShrink): every
 *  rank still alive calls it, typically after a call returned GW_ERR_REMOTE or
 *  GW_ERR_TIMEOUT. The callers agree on who is gone -- the ranks this one knows failed, those
 *  in `exclude` (ranks of `comm`) on any rank, and those that neither call nor are known
 *  failed within coll.shrink_wait_ms (10 s) -- so every survivor keeps the same set. *out
 *  gets a communicator of the survivors, renumbered in order (gw_comm_parent_rank maps them
 *  back), over the same connections: no rendezvous. Requests of `comm` in flight end; `comm`
 *  stays broken: destroy it when convenient (the transport lives on in *out). A rank that is
 *  not broken yet breaks first and tells the others, so every rank learns to call this.
 *  Needs gw_comm_init_env's store (GW_ERR_NOT_SUPPORTED after gw_comm_init_rendezvous).
 *  @return GW_ERR_ABORTED (this rank was excluded), GW_ERR_TIMEOUT. (API 1.4) */
GW_API gw_status_t gw_comm_shrink(gw_comm_t* comm, const int* exclude, size_t n_exclude,
                                  gw_comm_t** out);
/** Grow `comm` by `added` ranks (every member calls it alike, with nothing in flight): the new
 *  ranks call gw_comm_join_env with the same `name` (new to the job's store: one per grow)
 *  and take ranks size..size+added-1 in the order they arrive; only the new pairs connect.
 *  *out gets the grown communicator; `comm` stays, unusable: destroy it when convenient.
 *  timeout_ms 0: comm's default. @return GW_ERR_TIMEOUT naming the ranks that did not come.
 *  (API 1.4) */
GW_API gw_status_t gw_comm_grow(gw_comm_t* comm, int added, const char* name, int64_t timeout_ms,
                                gw_comm_t** out);
/** A new rank's side of gw_comm_grow: reach the job's store through GW_MASTER_ADDR/
 *  GW_MASTER_PORT (or MASTER_*), wait for the members' grow under `name`, connect. Takes
 *  `transport` (also on failure). (API 1.4) */
GW_API gw_status_t gw_comm_join_env(gw_transport_t* transport, const char* name, int64_t timeout_ms,
                                    gw_comm_t** out);
/** The rank that `rank` of `comm` had in the communicator it was shrunk or grown from (rank
 *  itself for one from gw_comm_init_*; -1 for a rank that joined). (API 1.4) */
GW_API gw_status_t gw_comm_parent_rank(const gw_comm_t* comm, int rank, int* parent);
GW_API gw_status_t gw_comm_rank(const gw_comm_t* comm, int* rank);
GW_API gw_status_t gw_comm_size(const gw_comm_t* comm, int* size);

/* Collectives: every rank calls the same ones in the same order with the same counts, dtype,
 * op and root. Errors: GW_ERR_INVALID_ARGUMENT (bad argument or ranks called apart),
 * GW_ERR_REMOTE (a peer failed; the text names it, gw_last_error_rank() gives it), GW_ERR_TIMEOUT
 * (gw_last_error_rank(): the peer that stopped, found with the other ranks), GW_ERR_ABORTED,
 * GW_ERR_RESOURCE_EXHAUSTED
 * (16 requests in flight). The _start forms return at once; the buffers must stay untouched
 * until gw_wait/gw_test reports the request done -- and after a failure, until gw_comm_destroy:
 * the transport may still hold receives posted into them, and a peer's RDMA write under way
 * may still land (as NCCL asks for ncclCommAbort before such buffers are freed). */

/** recv = op over ranks of send (count elements); send == recv is in place. */
GW_API gw_status_t gw_allreduce(gw_comm_t* comm, const void* send, void* recv, size_t count,
                                gw_dtype_t dtype, gw_op_t op);
GW_API gw_status_t gw_allreduce_start(gw_comm_t* comm, const void* send, void* recv, size_t count,
                                      gw_dtype_t dtype, gw_op_t op, gw_request_t** req);
/** Fused bucket: each tensor reduced as by its own allreduce, in one collective. */
GW_API gw_status_t gw_allreduce_bucket(gw_comm_t* comm, const gw_tensor_t* tensors, size_t n,
                                       gw_dtype_t dtype, gw_op_t op);
GW_API gw_status_t gw_allreduce_bucket_start(gw_comm_t* comm, const gw_tensor_t* tensors, size_t n,
                                             gw_dtype_t dtype, gw_op_t op, gw_request_t** req);
/** send holds size * recv_count elements; rank r receives the reduced block r. */
GW_API gw_status_t gw_reduce_scatter(gw_comm_t* comm, const void* send, void* recv,
                                     size_t recv_count, gw_dtype_t dtype, gw_op_t op);
GW_API gw_status_t gw_reduce_scatter_start(gw_comm_t* comm, const void* send, void* recv,
                                           size_t recv_count, gw_dtype_t dtype, gw_op_t op,
                                           gw_request_t** req);
/** recv (size * send_count elements) gets every rank's send block in rank order. */
GW_API gw_status_t gw_allgather(gw_comm_t* comm, const void* send, void* recv, size_t send_count,
                                gw_dtype_t dtype);
GW_API gw_status_t gw_allgather_start(gw_comm_t* comm, const void* send, void* recv,
                                      size_t send_count, gw_dtype_t dtype, gw_request_t** req);
/** buf of `root` is copied to buf of every rank. */
GW_API gw_status_t gw_broadcast(gw_comm_t* comm, void* buf, size_t count, gw_dtype_t dtype,
                                int root);
GW_API gw_status_t gw_broadcast_start(gw_comm_t* comm, void* buf, size_t count, gw_dtype_t dtype,
                                      int root, gw_request_t** req);
GW_API gw_status_t gw_barrier(gw_comm_t* comm);
GW_API gw_status_t gw_barrier_start(gw_comm_t* comm, gw_request_t** req);
/** send holds size blocks of count elements: block j goes to rank j; recv block i (same
 *  layout) comes from rank i. send and recv must not overlap. (API 1.2) */
GW_API gw_status_t gw_alltoall(gw_comm_t* comm, const void* send, void* recv, size_t count,
                               gw_dtype_t dtype);
GW_API gw_status_t gw_alltoall_start(gw_comm_t* comm, const void* send, void* recv, size_t count,
                                     gw_dtype_t dtype, gw_request_t** req);
/** MPI_Alltoallv: send_counts[j] elements at send + send_displs[j] go to rank j, recv_counts[i]
 *  elements from rank i land at recv + recv_displs[i] (in elements; arrays of size entries,
 *  copied by the call; zero-length parts allowed). Counts differ between ranks: send_counts[j]
 *  here must equal recv_counts[this rank] on rank j. (API 1.2) */
GW_API gw_status_t gw_alltoallv(gw_comm_t* comm, const void* send, const size_t* send_counts,
                                const size_t* send_displs, void* recv, const size_t* recv_counts,
                                const size_t* recv_displs, gw_dtype_t dtype);
GW_API gw_status_t gw_alltoallv_start(gw_comm_t* comm, const void* send, const size_t* send_counts,
                                      const size_t* send_displs, void* recv,
                                      const size_t* recv_counts, const size_t* recv_displs,
                                      gw_dtype_t dtype, gw_request_t** req);
/** recv of `root` (size * count elements) gets every rank's send block in rank order; recv
 *  may be NULL on other ranks. (API 1.2) */
GW_API gw_status_t gw_gather(gw_comm_t* comm, const void* send, void* recv, size_t count,
                             gw_dtype_t dtype, int root);
GW_API gw_status_t gw_gather_start(gw_comm_t* comm, const void* send, void* recv, size_t count,
                                   gw_dtype_t dtype, int root, gw_request_t** req);
/** send of `root` (size * count elements): block r goes to recv of rank r; send may be NULL
 *  on other ranks. (API 1.2) */
GW_API gw_status_t gw_scatter(gw_comm_t* comm, const void* send, void* recv, size_t count,
                              gw_dtype_t dtype, int root);
GW_API gw_status_t gw_scatter_start(gw_comm_t* comm, const void* send, void* recv, size_t count,
                                    gw_dtype_t dtype, int root, gw_request_t** req);

/* Point-to-point: reliable, ordered messages to one peer, matched by (peer, tag) in posting
 * order. Send/receive requests and collectives share the transport's completion queue, so
 * they are not in flight together: starting one kind while the other is in flight returns
 * GW_ERR_INVALID_ARGUMENT. Errors: as collectives; a message longer than the receive buffer
 * fails that receive with GW_ERR_INVALID_ARGUMENT. A send/receive not done within the
 * communicator's timeout fails with GW_ERR_TIMEOUT and breaks the communicator: the transport
 * cannot take back a posted receive, so keep its buffer until gw_comm_destroy. */

/** Send `bytes` bytes of buf to rank `peer` (not this rank). */
GW_API gw_status_t gw_send(gw_comm_t* comm, const void* buf, size_t bytes, int peer, uint32_t tag);
GW_API gw_status_t gw_send_start(gw_comm_t* comm, const void* buf, size_t bytes, int peer,
                                 uint32_t tag, gw_request_t** req);
/** Receive at most cap bytes from `peer` (or GW_ANY_SOURCE). When done, *received (if not
 *  NULL) holds the length and *source (if not NULL) the sender's rank. */
GW_API gw_status_t gw_recv(gw_comm_t* comm, void* buf, size_t cap, int peer, uint32_t tag,
                           size_t* received, int* source);
GW_API gw_status_t gw_recv_start(gw_comm_t* comm, void* buf, size_t cap, int peer, uint32_t tag,
                                 size_t* received, int* source, gw_request_t** req);

/** Drive progress until *req finishes or timeout_ms passes (negative: its own deadline).
 *  When it finishes, *req is freed and set to NULL, and its status is returned.
 *  @return the request's status, or GW_ERR_TIMEOUT with *req still valid (wait again). */
GW_API gw_status_t gw_wait(gw_request_t** req, int64_t timeout_ms);
/** Make progress without blocking; *done = 1 when finished (then as gw_wait), else 0. */
GW_API gw_status_t gw_test(gw_request_t** req, int* done);

/** Register caller memory for send/receive (rdma needs it; other transports ignore it).
 *  Without one, a transport that needs registration registers per request. Collectives
 *  register and cache their buffers themselves. Deregister after the requests using it. */
GW_API gw_status_t gw_mem_register(gw_comm_t* comm, void* addr, size_t length, gw_mr_t** out);
GW_API gw_status_t gw_mem_deregister(gw_mr_t* mr);

#ifdef __cplusplus
}
#endif
#endif /* GRADWIRE_H */
