// main() of a GoogleTest program run under mpirun: every rank runs every test; rank 0
// prints as usual, the others only their failures (prefixed with the rank); one failing
// rank fails the job.
#pragma once
#include <gtest/gtest.h>

#include <cstdio>

#include "tensorcast/dist/process_group.h"
#include "tensorcast/factories.h"

namespace tc::testing {

class RankFailurePrinter : public ::testing::EmptyTestEventListener {
  void OnTestPartResult(const ::testing::TestPartResult& r) override {
    if (r.failed())
      std::fprintf(stderr, "rank %d: %s:%d: failure\n%s\n", dist::rank(), r.file_name() ? r.file_name() : "?",
                   r.line_number(), r.message());
  }
};

inline int run_tests_on_every_rank(int argc, char** argv) {
  ::testing::InitGoogleTest(&argc, argv);
  dist::init(dist::InitOptions().timeout_seconds(60));
  if (dist::rank() != 0) {
    auto& listeners = ::testing::UnitTest::GetInstance()->listeners();
    delete listeners.Release(listeners.default_result_printer());
    listeners.Append(new RankFailurePrinter);
  }
  const int failed = RUN_ALL_TESTS();
  Tensor any = full({}, failed ? 1.0 : 0.0, kInt32);
  dist::all_reduce(any, dist::ReduceOp::Max);
  const int result = any.item<int>();
  if (failed) std::fprintf(stderr, "rank %d: %d failure(s)\n", dist::rank(), failed);
  dist::finalize();
  return result;
}

}  // namespace tc::testing
