/// \file
/// Collectives across the processes of a job, on MPI (torch.distributed's functions).
///
/// \verbatim
///   mpirun -np 4 ./train            (or Slurm's srun; ranks come from the environment)
/// \endverbatim
///
/// \code{.cpp}
///   tc::dist::init();               // MPI when a launcher started us, else a world of one
///   tc::dist::all_reduce(t, tc::dist::ReduceOp::Avg);
/// \endcode
///
/// Without a launcher (no OMPI_COMM_WORLD_SIZE, PMIX_RANK or PMI_RANK in the environment)
/// init() makes a world of one process and never touches MPI, so a program written for N
/// processes runs unchanged as one.
///
/// Every collective is executed by one communication thread per process, in the order the
/// calling threads queued them: MPI needs the same order on every rank, and one thread
/// doing all MPI calls needs only MPI_THREAD_SERIALIZED. The thread posts non-blocking
/// MPI calls and polls them with short sleeps, so a collective waiting for a slower rank
/// leaves the cores to the computation; the *_async forms let backward run meanwhile.
///
/// 16-bit tensors (bf16, fp16; MPI has no type for them) are widened to fp32, reduced in
/// fp32 and rounded once: the result is the correctly rounded fp32 sum, the same on every
/// rank, at twice the bytes on the wire. DistributedDataParallel's bf16 communication
/// instead sends 16-bit values and accumulates in fp32 (all_reduce_ordered_async below).
///
/// Failures end the job, never hang it: an MPI error or a collective that has not
/// completed within the timeout prints what and where (rank, op, bytes) and calls
/// MPI_Abort, which makes mpirun stop every rank.
#pragma once
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "tensorcast/tensor.h"

namespace tc::dist {

/// How a collective combines the ranks' tensors.
enum class ReduceOp : uint8_t { Sum, Avg, Max, Min };

/// Options of init().
struct InitOptions {
  /// A collective not completed after this long aborts the job (a rank died or is stuck).
  TC_ARG(double, timeout_seconds) = 300.0;
};

/// True when a launcher (mpirun, srun with PMI/PMIx) started this process.
bool launched_by_mpi();
/// Idempotent. Initializes MPI when launched_by_mpi(), else a world of one.
void init(InitOptions options = {});
/// True between init() and finalize().
bool is_initialized();
int rank();        ///< 0 before init()
int world_size();  ///< 1 before init()
/// The collective timeout init() set.
double timeout_seconds();
/// Waits for queued collectives, stops the communication thread and finalizes MPI.
/// Called at exit when init() ran; explicit calls are fine.
void finalize();
/// Prints "[tc::dist] rank R: message" to stderr and ends the whole job (MPI_Abort when
/// under MPI, else exit(code)). Safe from any thread.
[[noreturn]] void abort(const std::string& message, int code = 1);

/// A queued collective. wait() returns when it is complete (rethrowing its error); the
/// timestamps (seconds on now()'s clock) say when the communication thread began and
/// finished it, which is how overlap with backward is measured.
class Work {
 public:
  virtual ~Work() = default;
  /// Waits until the collective has finished (rethrowing its error).
  virtual void wait() = 0;
  /// True when the collective has finished.
  virtual bool is_completed() const = 0;
  virtual double start_time() const = 0;  ///< NaN until started
  virtual double end_time() const = 0;    ///< NaN until completed
  virtual int64_t bytes() const = 0;      ///< payload bytes (the tensor's), not wire bytes
};
double now();  ///< a monotonic clock, in seconds

/// In place, on CPU tensors of every dtype; Avg needs a floating dtype, Max/Min no bool
/// restriction. A non-contiguous tensor is reduced through a contiguous copy. The async
/// form must not see `t` touched until wait() returns.
std::shared_ptr<Work> all_reduce_async(const Tensor& t, ReduceOp op = ReduceOp::Sum);
/// all_reduce_async(t, op)->wait(): every rank's t becomes the combination, in place.
void all_reduce(const Tensor& t, ReduceOp op = ReduceOp::Sum);
/// Root's values into `t` on every rank (same shape and dtype everywhere).
void broadcast(const Tensor& t, int root = 0);
/// world_size() tensors, rank i's `t` at index i (same shape and dtype everywhere).
std::vector<Tensor> all_gather(const Tensor& t);
/// Waits until every rank has reached it.
void barrier();

/// Sum (or average) of a contiguous fp32, bf16 or fp16 tensor, added in fp32 in rank order
/// on every rank: each rank receives its 1/p slice from every rank (all-to-all), adds them
/// as ((x_0 + x_1) + x_2) + ..., multiplies by 1/p for Avg, rounds once to the dtype, and the
/// slices are gathered back (all-gather). The same bytes as a ring all-reduce (2(p-1)/p of
/// the tensor per rank), and a result that does not depend on MPI's algorithm: bitwise
/// equal to one process accumulating the same p tensors. DistributedDataParallel reduces
/// its buckets this way. With bf16/fp16 on the wire (half the bytes) the error is at most
/// one rounding of each input and one of the sum (unit roundoff u = 2^-8 for bf16, 2^-11
/// for fp16: |err| <= 2u * sum|x_i|). In place, async.
std::shared_ptr<Work> all_reduce_ordered_async(const Tensor& t, ReduceOp op = ReduceOp::Sum);
/// The elements of an n-element tensor that each rank owns in the ordered collectives:
/// ceil(n / world_size()). Rank r owns [r * chunk, min((r + 1) * chunk, n)).
int64_t ordered_chunk(int64_t numel);
/// The first half of all_reduce_ordered_async: rank r's owned chunk of the sum (or average)
/// of every rank's `t`, added in fp32 in rank order and rounded once, written to `out`
/// (ordered_chunk(t.numel()) elements of t's dtype; past the end of `t`, zeros). Bitwise
/// the same values as all_reduce_ordered_async gives those elements, at half its bytes.
/// Neither tensor may be touched until wait() returns.
std::shared_ptr<Work> reduce_scatter_ordered_async(const Tensor& t, const Tensor& out, ReduceOp op = ReduceOp::Sum);
/// Every rank's contiguous `mine` into `out`, rank r's at elements [r * mine.numel(), ...)
/// (same size and dtype on every rank). Async: neither tensor may be touched until wait().
std::shared_ptr<Work> all_gather_chunks_async(const Tensor& mine, const Tensor& out);

}  // namespace tc::dist
