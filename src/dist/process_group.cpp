// The process group: MPI underneath, one communication thread per process (see the header).
#include "tensorcast/dist/process_group.h"

#include <mpi.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <deque>
#include <exception>
#include <functional>
#include <limits>
#include <mutex>
#include <thread>

#include "tensorcast/convert.h"
#include "tensorcast/error.h"
#include "tensorcast/factories.h"

namespace tc::dist {
namespace {

constexpr double kNaN = std::numeric_limits<double>::quiet_NaN();

// One collective: phases run one after another on the communication thread, each posting
// a non-blocking MPI call (or returning MPI_REQUEST_NULL after local work only);
// `done` runs after the last one (copy back, divide, round).
struct WorkImpl final : Work {
  std::string what;  // "all_reduce of 4096 bytes (float32, sum)", for errors
  int64_t payload = 0;
  std::vector<std::function<MPI_Request()>> phases;
  std::function<void()> done;

  mutable std::mutex mutex;
  std::condition_variable cv;
  bool completed = false;
  std::exception_ptr error;
  std::atomic<double> started{kNaN}, ended{kNaN};

  void wait() override;
  bool is_completed() const override {
    std::lock_guard lock(mutex);
    return completed;
  }
  double start_time() const override { return started.load(); }
  double end_time() const override { return ended.load(); }
  int64_t bytes() const override { return payload; }
};

struct Group {
  bool initialized = false;
  bool mpi = false;  // false: a world of one
  int rank = 0;
  int size = 1;
  double timeout = 300.0;
  MPI_Comm comm = MPI_COMM_NULL;

  std::mutex mutex;
  std::condition_variable cv;
  std::deque<std::shared_ptr<WorkImpl>> queue;
  bool stopping = false;
  std::thread worker;
};

Group& group() {
  static Group g;
  return g;
}

const auto g_clock_start = std::chrono::steady_clock::now();

void check_mpi(int rc, const char* call, const WorkImpl* w) {
  if (rc == MPI_SUCCESS) return;
  char text[MPI_MAX_ERROR_STRING] = {};
  int len = 0;
  MPI_Error_string(rc, text, &len);
  TC_FAIL("tc::dist", "rank ", group().rank, ": ", call, " failed", w ? " in " + w->what : std::string(), ": ", text);
}

// Polls `req` until it completes. MPI moves a large message only while it is polled, so
// for the first 200 ms polling is continuous (yielding the core to runnable threads: the
// computation goes on during an overlapped all-reduce); after that the peer is late, and
// short sleeps make the wait cost no core. Past the timeout the job is aborted (the peer
// is dead or stuck).
void poll(MPI_Request& req, const WorkImpl& w) {
  using std::chrono::steady_clock;
  const auto start = steady_clock::now();
  const auto spin_until = start + std::chrono::milliseconds(200);
  const auto deadline =
      start + std::chrono::duration_cast<steady_clock::duration>(std::chrono::duration<double>(group().timeout));
  for (;;) {
    int flag = 0;
    check_mpi(MPI_Test(&req, &flag, MPI_STATUS_IGNORE), "MPI_Test", &w);
    if (flag) return;
    const auto now = steady_clock::now();
    if (now < spin_until) {
      std::this_thread::yield();
      continue;
    }
    if (now > deadline)
      abort(detail::concat(w.what, " did not complete within ", group().timeout,
                           " s (a rank died, hangs, or stopped calling collectives in the same order); "
                           "the timeout is tc::dist::InitOptions::timeout_seconds / --dist-timeout"));
    std::this_thread::sleep_for(std::chrono::microseconds(20));
  }
}

void run(WorkImpl& w) {
  w.started = now();
  try {
    for (auto& phase : w.phases) {
      MPI_Request req = phase();
      if (req != MPI_REQUEST_NULL) poll(req, w);
    }
    if (w.done) w.done();
  } catch (...) {
    w.error = std::current_exception();
  }
  w.ended = now();
  {
    std::lock_guard lock(w.mutex);
    w.completed = true;
  }
  w.cv.notify_all();
}

void worker_loop() {
  Group& g = group();
  for (;;) {
    std::shared_ptr<WorkImpl> w;
    {
      std::unique_lock lock(g.mutex);
      g.cv.wait(lock, [&] { return g.stopping || !g.queue.empty(); });
      if (g.queue.empty()) return;  // stopping, nothing left
      w = std::move(g.queue.front());
      g.queue.pop_front();
    }
    run(*w);
  }
}

void WorkImpl::wait() {
  std::unique_lock lock(mutex);
  cv.wait(lock, [&] { return completed; });  // the worker enforces the timeout
  if (error) std::rethrow_exception(error);
}

std::shared_ptr<Work> submit(std::shared_ptr<WorkImpl> w) {
  Group& g = group();
  TC_CHECK(g.initialized, "tc::dist", "call tc::dist::init() before any collective");
  if (!g.mpi) {  // a world of one: run the phases here (they do local work only)
    run(*w);
    return w;
  }
  {
    std::lock_guard lock(g.mutex);
    TC_CHECK(!g.stopping, "tc::dist", "collective after tc::dist::finalize()");
    g.queue.push_back(w);
  }
  g.cv.notify_one();
  return w;
}

MPI_Datatype mpi_type(DType dt) {
  switch (dt) {
    case kFloat32:
      return MPI_FLOAT;
    case kFloat64:
      return MPI_DOUBLE;
    case kInt64:
      return MPI_INT64_T;
    case kInt32:
      return MPI_INT32_T;
    case kUInt8:
    case kBool:
      return MPI_UINT8_T;
    default:
      return MPI_DATATYPE_NULL;  // 16-bit: widened first
  }
}

MPI_Op mpi_op(ReduceOp op) {
  switch (op) {
    case ReduceOp::Max:
      return MPI_MAX;
    case ReduceOp::Min:
      return MPI_MIN;
    default:
      return MPI_SUM;
  }
}

const char* op_name(ReduceOp op) {
  switch (op) {
    case ReduceOp::Sum:
      return "sum";
    case ReduceOp::Avg:
      return "avg";
    case ReduceOp::Max:
      return "max";
    case ReduceOp::Min:
      return "min";
  }
  return "?";
}

bool is_16bit(DType dt) { return dt == kBFloat16 || dt == kFloat16; }

int count_of(const Tensor& t, const char* op) {
  TC_CHECK(t.numel() <= std::numeric_limits<int>::max(), op, "tensors of more than 2^31-1 elements are not supported");
  return static_cast<int>(t.numel());
}

void check_tensor(const Tensor& t, const char* op) {
  TC_CHECK(t.defined(), op, "the tensor is undefined");
  TC_CHECK(t.device().is_cpu(), op, "expected a CPU tensor, got one on ", t.device(),
           " (CUDA tensors need the NCCL process group)");
}

// `t` itself when contiguous, else a contiguous copy that `finish` copies back.
Tensor contiguous_buffer(const Tensor& t) { return t.is_contiguous() ? t : t.contiguous(); }

template <class T>
void scale_in_place(void* data, int64_t n, double factor) {
  T* p = static_cast<T*>(data);
  for (int64_t i = 0; i < n; ++i) p[i] = static_cast<T>(p[i] * factor);
}

}  // namespace

double now() { return std::chrono::duration<double>(std::chrono::steady_clock::now() - g_clock_start).count(); }

bool launched_by_mpi() {
  for (const char* var : {"OMPI_COMM_WORLD_SIZE", "PMIX_RANK", "PMI_RANK", "PMI_SIZE"})
    if (std::getenv(var) != nullptr) return true;
  return false;
}

void init(InitOptions options) {
  Group& g = group();
  if (g.initialized) return;
  TC_CHECK(options.timeout_seconds() > 0, "tc::dist::init", "timeout_seconds must be positive, got ",
           options.timeout_seconds());
  g.timeout = options.timeout_seconds();
  if (launched_by_mpi()) {
    int provided = 0;
    check_mpi(MPI_Init_thread(nullptr, nullptr, MPI_THREAD_SERIALIZED, &provided), "MPI_Init_thread", nullptr);
    TC_CHECK(provided >= MPI_THREAD_SERIALIZED, "tc::dist::init",
             "the MPI library does not provide MPI_THREAD_SERIALIZED (got level ", provided, ")");
    check_mpi(MPI_Comm_dup(MPI_COMM_WORLD, &g.comm), "MPI_Comm_dup", nullptr);
    MPI_Comm_set_errhandler(g.comm, MPI_ERRORS_RETURN);  // errors become tc::Error, then abort
    MPI_Comm_rank(g.comm, &g.rank);
    MPI_Comm_size(g.comm, &g.size);
    g.mpi = true;
    g.worker = std::thread(worker_loop);
    std::atexit([] { finalize(); });
  }
  g.initialized = true;
}

bool is_initialized() { return group().initialized; }
int rank() { return group().rank; }
int world_size() { return group().size; }
double timeout_seconds() { return group().timeout; }

void finalize() {
  Group& g = group();
  if (!g.initialized) return;
  if (g.mpi) {
    {
      std::lock_guard lock(g.mutex);
      g.stopping = true;
    }
    g.cv.notify_all();
    if (g.worker.joinable()) g.worker.join();
    MPI_Comm_free(&g.comm);
    int finalized = 0;
    MPI_Finalized(&finalized);
    if (!finalized) MPI_Finalize();
  }
  g.initialized = g.mpi = g.stopping = false;
  g.rank = 0;
  g.size = 1;
  g.comm = MPI_COMM_NULL;
}

void abort(const std::string& message, int code) {
  const Group& g = group();
  const std::string line = detail::concat("[tc::dist] rank ", g.rank, ": ", message, "\n");
  // One write: lines of several ranks do not interleave mid-line.
  [[maybe_unused]] auto n = ::write(2, line.data(), line.size());
  if (g.mpi) MPI_Abort(MPI_COMM_WORLD, code);
  std::_Exit(code);
}

std::shared_ptr<Work> all_reduce_async(const Tensor& t, ReduceOp op) {
  constexpr const char* kOp = "tc::dist::all_reduce";
  check_tensor(t, kOp);
  const DType dt = t.dtype();
  TC_CHECK(op != ReduceOp::Avg || is_floating(dt), kOp, "ReduceOp::Avg needs a floating tensor, got ", dtype_name(dt));
  TC_CHECK(!(dt == kBool && op == ReduceOp::Avg), kOp, "bool tensors reduce with Max, Min or Sum");
  auto w = std::make_shared<WorkImpl>();
  w->payload = t.nbytes();
  w->what = detail::concat("all_reduce of ", w->payload, " bytes (", dtype_name(dt), ", ", op_name(op), ")");
  // The buffer MPI reduces: the tensor, a contiguous copy, or an fp32 widening.
  Tensor buf = is_16bit(dt) ? t.to(kFloat32).contiguous() : contiguous_buffer(t);
  const int n = count_of(buf, kOp);
  const int size = world_size();
  Group& g = group();
  w->phases.push_back([buf, n, op, &g] {
    MPI_Request req = MPI_REQUEST_NULL;
    if (g.mpi && n > 0)
      check_mpi(MPI_Iallreduce(MPI_IN_PLACE, buf.raw_data(), n, mpi_type(buf.dtype()), mpi_op(op), g.comm, &req),
                "MPI_Iallreduce", nullptr);
    return req;
  });
  w->done = [t, buf, n, op, size] {
    if (op == ReduceOp::Avg && size > 1) {
      if (buf.dtype() == kFloat64)
        scale_in_place<double>(buf.raw_data(), n, 1.0 / size);
      else
        scale_in_place<float>(buf.raw_data(), n, 1.0 / size);
    }
    Tensor dst = t;
    if (buf.impl() != t.impl()) dst.copy_(buf);  // narrows 16-bit once, or fills the strided original
    increment_version(t);                        // MPI wrote into it in place
  };
  return submit(w);
}

void all_reduce(const Tensor& t, ReduceOp op) { all_reduce_async(t, op)->wait(); }

void broadcast(const Tensor& t, int root) {
  constexpr const char* kOp = "tc::dist::broadcast";
  check_tensor(t, kOp);
  TC_CHECK(root >= 0 && root < world_size(), kOp, "root ", root, " is not a rank of a world of ", world_size());
  auto w = std::make_shared<WorkImpl>();
  w->payload = t.nbytes();
  w->what = detail::concat("broadcast of ", w->payload, " bytes from rank ", root);
  Tensor buf = contiguous_buffer(t);
  const int nbytes = count_of(buf, kOp) * static_cast<int>(element_size(buf.dtype()));
  Group& g = group();
  w->phases.push_back([buf, nbytes, root, &g] {
    MPI_Request req = MPI_REQUEST_NULL;
    if (g.mpi && nbytes > 0)
      check_mpi(MPI_Ibcast(buf.raw_data(), nbytes, MPI_BYTE, root, g.comm, &req), "MPI_Ibcast", nullptr);
    return req;
  });
  w->done = [t, buf] {
    Tensor dst = t;
    if (buf.impl() != t.impl()) dst.copy_(buf);
    increment_version(t);  // MPI wrote into it in place
  };
  submit(w)->wait();
}

std::vector<Tensor> all_gather(const Tensor& t) {
  constexpr const char* kOp = "tc::dist::all_gather";
  check_tensor(t, kOp);
  const Tensor src = t.contiguous();
  const int p = world_size();
  Shape shape = src.sizes();
  shape.insert(shape.begin(), p);
  Tensor out = empty(shape, src.dtype());
  auto w = std::make_shared<WorkImpl>();
  w->payload = src.nbytes();
  w->what = detail::concat("all_gather of ", w->payload, " bytes per rank");
  const int nbytes = count_of(src, kOp) * static_cast<int>(element_size(src.dtype()));
  Group& g = group();
  w->phases.push_back([src, out, nbytes, &g] {
    MPI_Request req = MPI_REQUEST_NULL;
    if (!g.mpi)
      std::memcpy(out.raw_data(), src.raw_data(), static_cast<size_t>(nbytes));
    else if (nbytes > 0)
      check_mpi(MPI_Iallgather(src.raw_data(), nbytes, MPI_BYTE, out.raw_data(), nbytes, MPI_BYTE, g.comm, &req),
                "MPI_Iallgather", nullptr);
    return req;
  });
  submit(w)->wait();
  std::vector<Tensor> parts;
  for (int i = 0; i < p; ++i) parts.push_back(out.select(0, i));
  return parts;
}

void barrier() {
  auto w = std::make_shared<WorkImpl>();
  w->what = "barrier";
  Group& g = group();
  w->phases.push_back([&g] {
    MPI_Request req = MPI_REQUEST_NULL;
    if (g.mpi) check_mpi(MPI_Ibarrier(g.comm, &req), "MPI_Ibarrier", nullptr);
    return req;
  });
  submit(w)->wait();
}

namespace {

// The chunk each rank owns of an n-element tensor in the ordered collectives.
int64_t owned_chunk(int64_t n, int p, const char* op) {
  const int64_t chunk = ordered_chunk(n);
  TC_CHECK(chunk * p <= std::numeric_limits<int>::max(), op, "tensors of more than 2^31-1 elements are not supported");
  return chunk;
}

void check_ordered_input(const Tensor& t, ReduceOp op, const char* kOp) {
  check_tensor(t, kOp);
  TC_CHECK((is_16bit(t.dtype()) || t.dtype() == kFloat32) && t.is_contiguous(), kOp,
           "expected a contiguous float32, bf16 or fp16 tensor, got ", dtype_name(t.dtype()),
           t.is_contiguous() ? "" : " (not contiguous)");
  TC_CHECK(op == ReduceOp::Sum || op == ReduceOp::Avg, kOp, "only Sum and Avg accumulate in fp32");
}

// The reduce-scatter half of the ordered all-reduce, as two phases of `w`: every rank's
// copy of my chunk arrives (all-to-all), and is summed in fp32 in rank order into `mine`
// (chunk elements of t's dtype). `gather`, when set, is the phase's follow-up request.
void add_ordered_reduce_scatter(WorkImpl& w, const Tensor& t, const Tensor& mine, ReduceOp op,
                                std::function<MPI_Request()> gather) {
  const int p = world_size();
  const DType dt = t.dtype();
  const int64_t chunk = mine.numel();
  Tensor send = zeros({chunk * p}, dt), recv = empty({chunk * p}, dt);
  std::memcpy(send.raw_data(), t.raw_data(), static_cast<size_t>(t.nbytes()));
  Group& g = group();
  const int64_t elem = static_cast<int64_t>(element_size(dt));
  const int bytes = static_cast<int>(chunk * elem);
  w.phases.push_back([=, &g] {
    MPI_Request req = MPI_REQUEST_NULL;
    if (g.mpi)
      check_mpi(MPI_Ialltoall(send.raw_data(), bytes, MPI_BYTE, recv.raw_data(), bytes, MPI_BYTE, g.comm, &req),
                "MPI_Ialltoall", nullptr);
    else
      std::memcpy(recv.raw_data(), send.raw_data(), static_cast<size_t>(bytes));
    return req;
  });
  w.phases.push_back([=, gather = std::move(gather)] {
    // In rank order: the same result on every rank; then one rounding.
    std::vector<float> acc(static_cast<size_t>(chunk), 0.0f), tmp(static_cast<size_t>(chunk));
    const char* base = static_cast<const char*>(recv.raw_data());
    for (int r = 0; r < p; ++r) {
      convert(base + static_cast<int64_t>(r) * chunk * elem, dt, tmp.data(), kFloat32, chunk);
      for (int64_t i = 0; i < chunk; ++i) acc[static_cast<size_t>(i)] += tmp[static_cast<size_t>(i)];
    }
    if (op == ReduceOp::Avg) {
      const float inv = 1.0f / static_cast<float>(p);
      for (float& v : acc) v *= inv;
    }
    convert(acc.data(), kFloat32, mine.raw_data(), dt, chunk);
    return gather ? gather() : MPI_REQUEST_NULL;
  });
}

// An all-gather of every rank's `mine` into `out` (p * mine.nbytes() bytes).
std::function<MPI_Request()> gather_chunks(const Tensor& mine, const Tensor& out) {
  Group& g = group();
  const int bytes = static_cast<int>(mine.nbytes());
  return [=, &g] {
    MPI_Request req = MPI_REQUEST_NULL;
    if (g.mpi)
      check_mpi(MPI_Iallgather(mine.raw_data(), bytes, MPI_BYTE, out.raw_data(), bytes, MPI_BYTE, g.comm, &req),
                "MPI_Iallgather", nullptr);
    else
      std::memcpy(out.raw_data(), mine.raw_data(), static_cast<size_t>(bytes));
    return req;
  };
}

}  // namespace

int64_t ordered_chunk(int64_t numel) { return (numel + world_size() - 1) / world_size(); }

std::shared_ptr<Work> all_reduce_ordered_async(const Tensor& t, ReduceOp op) {
  constexpr const char* kOp = "tc::dist::all_reduce_ordered";
  check_ordered_input(t, op, kOp);
  const int p = world_size();
  const int64_t chunk = owned_chunk(t.numel(), p, kOp);
  auto w = std::make_shared<WorkImpl>();
  w->payload = t.nbytes();
  w->what = detail::concat("rank-ordered all_reduce of ", w->payload, " bytes (", dtype_name(t.dtype()), ")");
  // My reduced chunk is gathered from every rank into `t` (through the padded `gathered`).
  Tensor mine = empty({chunk}, t.dtype()), gathered = empty({chunk * p}, t.dtype());
  add_ordered_reduce_scatter(*w, t, mine, op, gather_chunks(mine, gathered));
  w->done = [t, gathered] {
    std::memcpy(t.raw_data(), gathered.raw_data(), static_cast<size_t>(t.nbytes()));
    increment_version(t);
  };
  return submit(w);
}

std::shared_ptr<Work> reduce_scatter_ordered_async(const Tensor& t, const Tensor& out, ReduceOp op) {
  constexpr const char* kOp = "tc::dist::reduce_scatter_ordered";
  check_ordered_input(t, op, kOp);
  const int64_t chunk = owned_chunk(t.numel(), world_size(), kOp);
  TC_CHECK(
      out.defined() && out.device().is_cpu() && out.is_contiguous() && out.dtype() == t.dtype() && out.numel() == chunk,
      kOp, "out must be a contiguous CPU tensor of ", chunk, " elements of ", dtype_name(t.dtype()),
      " (ordered_chunk of ", t.numel(), "), got ", out.defined() ? shape_str(out.sizes()) : "undefined", " of ",
      out.defined() ? dtype_name(out.dtype()) : "-");
  auto w = std::make_shared<WorkImpl>();
  w->payload = t.nbytes();
  w->what = detail::concat("rank-ordered reduce_scatter of ", w->payload, " bytes (", dtype_name(t.dtype()), ")");
  add_ordered_reduce_scatter(*w, t, out, op, nullptr);
  w->done = [out] { increment_version(out); };
  return submit(w);
}

std::shared_ptr<Work> all_gather_chunks_async(const Tensor& mine, const Tensor& out) {
  constexpr const char* kOp = "tc::dist::all_gather_chunks";
  check_tensor(mine, kOp);
  TC_CHECK(mine.is_contiguous() && out.defined() && out.device().is_cpu() && out.is_contiguous() &&
               out.dtype() == mine.dtype() && out.numel() == mine.numel() * world_size(),
           kOp, "expected contiguous tensors, `out` of ", world_size(), " x ", mine.numel(), " elements of ",
           dtype_name(mine.dtype()), ", got ", out.defined() ? shape_str(out.sizes()) : "undefined");
  count_of(out, kOp);
  auto w = std::make_shared<WorkImpl>();
  w->payload = mine.nbytes();
  w->what = detail::concat("all_gather of ", w->payload, " bytes per rank");
  w->phases.push_back(gather_chunks(mine, out));
  w->done = [out] { increment_version(out); };
  return submit(w);
}

}  // namespace tc::dist
