// The op registry: one OpDef per op with its schema (params, kwargs with
// defaults), accepted dtypes, shape-inference function and per-backend kernels.
// GET /v1/ops publishes it. Registration happens once at start
// (register_all_ops); afterwards the registry is read-only and thread-safe.
#pragma once

#include <atomic>
#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <optional>
#include <set>
#include <string>
#include <string_view>
#include <vector>

#include "ops/attr.h"
#include "ops/device.h"
#include "ops/dtype_list.h"
#include "ops/tensor.h"
#include "streams/stream.h"

namespace tensord {

class Backend;
struct GraphHooks;
namespace dist {
class ProcessGroup;
}
class MemoryAccount;
class ThreadPool;

enum class ParamKind {
  kTensor,          // a value name or inline tensor
  kTensorList,      // a list of value names
  kScalarOrTensor,  // a tensor, or a JSON number bound as a wrapped 0-d tensor
  kInt,
  kFloat,
  kBool,
  kString,
  kDType,
  kIntList,  // also accepts a single int
  kFloatList,
};
std::string_view param_kind_name(ParamKind k);

struct ParamSpec {
  std::string name;
  ParamKind kind;
  // Default when the caller omits it. A none default on a non-optional
  // param means "required".
  Attr default_value;
  bool optional = false;  // may be omitted / null with no default
  bool kwarg_only = false;
};

class OpDef;

// Bound arguments, indexed like OpDef::params. T is TensorMeta during shape
// inference and Tensor when running.
template <class T>
struct OpArgs {
  const OpDef* op = nullptr;
  std::string node;                     // program node id, for messages
  std::vector<std::vector<T>> tensors;  // per param: 1 (tensor), n (list), 0
  std::vector<Attr> attrs;              // per param: the attr value or none
  // Per param, the names the tensors were given by ("x", "$stored/w1", or ""
  // for inline constants): in-place ops learn which stored tensors they update.
  std::vector<std::vector<std::string>> names;

  const T& tensor(size_t i) const { return tensors[i].at(0); }
  bool has_tensor(size_t i) const { return !tensors[i].empty(); }
  const std::vector<T>& list(size_t i) const { return tensors[i]; }
  const Attr& attr(size_t i) const { return attrs[i]; }
};

// The tenant's stored tensors as seen by a running job (optimizer state).
// Reads see this job's earlier writes, else the stored value; writes are
// buffered and committed with the job, all or nothing, only if every node
// succeeds. Used from one job thread at a time.
class StoredIO {
 public:
  virtual ~StoredIO() = default;
  virtual std::optional<Tensor> read(const std::string& name) const = 0;
  virtual void write(const std::string& name, Tensor t) = 0;
};

// What a kernel may use: where to allocate outputs, the worker pool, and the
// cancellation flag it should poll in long loops.
struct OpContext {
  Backend* backend = nullptr;
  Device device{};
  std::shared_ptr<MemoryAccount> account;
  ThreadPool* pool = nullptr;
  const std::atomic<bool>* cancelled = nullptr;
  StoredIO* stored = nullptr;  // null outside a job (e.g. unit tests)
  // The job's stream (its partition runner's): device kernels launch on it;
  // CPU kernels run inline on the runner, which is the stream's only user,
  // so they are in stream order.
  Stream stream{};
  // The rank's group in an SPMD job (API.md 8): the dist.* kernels run
  // their collectives on it. Null outside one: a group of one rank.
  dist::ProcessGroup* group = nullptr;
  // What a graph's runner (graphs/: a replay plan, a device graph's
  // capture) hands the kernel it calls (ops/graph_hooks.h); null for a
  // program run node by node and outside graphs.
  const GraphHooks* graph = nullptr;

  // A fresh output tensor on the context's device (host memory when backend
  // is null), charged to the account (or the next pre-bound slot of the
  // graph's out_slots when it matches).
  Tensor empty(DType dtype, Shape shape) const;
  // True when the backend is a device's (not the CPU backend, not none).
  bool on_device() const;
  // This context for a CPU kernel or host buffers: beside a device backend,
  // host memory charged to the same account (backend null, the CPU device);
  // otherwise the context itself.
  OpContext for_host() const;
  // Runs fn(begin, end) over [0, n) in chunks of at least `grain`, on the
  // pool when there is one, else inline.
  void parallel_for(int64_t n, int64_t grain, const std::function<void(int64_t, int64_t)>& fn) const;
};

// Whether a node's results are equal on every rank of an SPMD job:
// kFollowsOperands: when all its operands are; kReplicated: always (an
// all_reduce); kPerRank: never (a reduce_scatter); kWhenSeeded: only with
// its `seed` given (the random ops).
enum class RankReplication : uint8_t { kFollowsOperands, kReplicated, kPerRank, kWhenSeeded };

using InferFn = std::function<std::vector<TensorMeta>(const OpArgs<TensorMeta>&)>;
using KernelFn = std::function<std::vector<Tensor>(const OpContext&, const OpArgs<Tensor>&)>;

class OpDef {
 public:
  std::string name;
  std::string doc;  // one line
  std::vector<ParamSpec> params;
  std::vector<std::string> outputs;  // names of results, e.g. {"eigenvalues", "eigenvectors"}
  // The dtypes the op accepts, in DType order (ops/dtype_list.h): those of
  // its tensor operands when they share that one dtype (a creation op: its
  // dtype=), operands with a fixed dtype of their own aside (where's
  // condition, mx.dequantize's scale). GET /v1/ops lists their names.
  DTypeList dtypes;
  // What the list does not say, in words: how the result's dtype follows
  // ("promoted", "-> bool"), operands with their own rule. Often empty.
  std::string dtype_note;
  int mutates = -1;  // index of a param written in place, or -1
  // Takes MX tensors (ops/mx_tensor.h) as operands (mx.dequantize); the
  // program compiler refuses an MX operand to any other op (422
  // dtype_mismatch), since their kernels would read the packed bytes.
  bool takes_mx = false;
  // The CPU kernel is one elementwise-engine loop whose arguments depend on
  // metas, attrs, constants and buffer addresses only: a graph replay may
  // record it and call the loop directly (ops/recorded_block.h).
  bool records_blocks = false;
  InferFn infer;
  std::map<std::string, KernelFn, std::less<>> kernels;  // backend name -> kernel
  // Per backend, the calls its kernel takes, judged on the operands' metas
  // and the attrs (a device kernel for float32 only, say); a node it refuses
  // runs on the CPU kernel (graphs/device_placement.h). Absent: every call.
  std::map<std::string, std::function<bool(const OpArgs<TensorMeta>&)>, std::less<>> accepts;
  // Backends whose kernel may be stream-captured into a device graph
  // (graphs/device_graph.h): it only launches work on ctx.stream, allocates
  // only through ctx.empty, and never waits for the device.
  std::set<std::string, std::less<>> capture_safe;
  // A collective (dist.*): captured only at a device graph's top level, and
  // only where the graph may hold collectives (an SPMD graph's member whose
  // group enqueues on the capturing stream: DeviceGraph::capturable).
  bool collective = false;
  // What the SPMD planner (scheduler/spmd_plan.cpp) knows of the results
  // across an SPMD job's ranks (they commit rank 0's stored values only
  // where every rank's are equal).
  RankReplication replication = RankReplication::kFollowsOperands;
  // A collective whose operand may differ across ranks along the dim this
  // param names (all_gather's `dim`); -1: the operands must be equal.
  int rank_varying_dim = -1;
  // Writes the tenant's stored tensors through StoredIO, beyond a param
  // written in place (`mutates`): the optimizers' params and state.
  bool writes_stored_state = false;

  int param_index(std::string_view pname) const;  // -1 if absent
  std::string signature() const;  // "add(Tensor input, Scalar|Tensor other, *, Scalar alpha=1) -> Tensor"
};

class OpRegistry {
 public:
  // The process-wide registry with every op registered.
  static const OpRegistry& global();

  OpDef& add(OpDef def);  // asserts unique name
  const OpDef* find(std::string_view name) const;
  OpDef* find_mutable(std::string_view name);
  // Up to `max` registered names closest to `name` (edit distance), for
  // unknown_op messages.
  std::vector<std::string> close_names(std::string_view name, size_t max = 3) const;
  std::vector<const OpDef*> all() const;  // sorted by name

 private:
  std::map<std::string, std::unique_ptr<OpDef>, std::less<>> ops_;
};

// Registers every op family (one function per family, one place).
void register_all_ops(OpRegistry& r);

// Kernels a backend library adds to the ops registered above (the CUDA
// library's, a test's fake-device kernels), as TORCH_LIBRARY_IMPL does: a
// namespace-scope KernelRegistration runs before main, and its function runs
// once, when the global registry is built, after every op exists. Adding a
// kernel for an op that is not registered is a bug (asserted).
class KernelRegistration {
 public:
  explicit KernelRegistration(void (*fn)(OpRegistry&));
};

}  // namespace tensord
