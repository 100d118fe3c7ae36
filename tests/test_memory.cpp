// Tests for memory_stats: exact current/peak/count bookkeeping of tensor storage, peak
// reset, views and from_blob not allocating, and freeing when the last handle dies.
#include <vector>

#include "common/testing.h"

namespace tc {
namespace {

TEST(Memory, ExactBytesForASequenceOfAllocationsAndFrees) {
  const MemoryStats s0 = memory_stats();
  reset_peak_memory_stats();
  EXPECT_EQ(memory_stats().peak_bytes, s0.current_bytes);

  Tensor a = empty({3, 5}, kFloat32);  // 60 bytes (not rounded up)
  MemoryStats s = memory_stats();
  EXPECT_EQ(s.current_bytes, s0.current_bytes + 60);
  EXPECT_EQ(s.allocation_count, s0.allocation_count + 1);
  EXPECT_EQ(s.current_allocations, s0.current_allocations + 1);
  EXPECT_EQ(s.peak_bytes, s0.current_bytes + 60);

  Tensor b = zeros({7}, kBFloat16);  // 14
  Tensor c = ones({3}, kFloat64);    // 24
  Tensor d = empty({5}, kBool);      // 5
  Tensor e = empty({2, 2}, kInt64);  // 32
  Tensor f = empty({9}, kUInt8);     // 9
  Tensor g = empty({3}, kInt32);     // 12
  Tensor h = empty({1}, kFloat16);   // 2
  const int64_t total = 60 + 14 + 24 + 5 + 32 + 9 + 12 + 2;
  s = memory_stats();
  EXPECT_EQ(s.current_bytes, s0.current_bytes + total);
  EXPECT_EQ(s.allocation_count, s0.allocation_count + 8);
  EXPECT_EQ(s.current_allocations, s0.current_allocations + 8);
  EXPECT_EQ(s.peak_bytes, s0.current_bytes + total);
  for (Tensor* t : {&a, &b, &c, &d, &e, &f, &g, &h})
    EXPECT_EQ(static_cast<int64_t>(t->nbytes()), t->numel() * static_cast<int64_t>(element_size(t->dtype())));

  a = Tensor();
  c = Tensor();
  s = memory_stats();
  EXPECT_EQ(s.current_bytes, s0.current_bytes + total - 84);
  EXPECT_EQ(s.current_allocations, s0.current_allocations + 6);
  EXPECT_EQ(s.allocation_count, s0.allocation_count + 8);  // a count of allocations made, not live
  EXPECT_EQ(s.peak_bytes, s0.current_bytes + total);       // the peak remembers

  reset_peak_memory_stats();
  EXPECT_EQ(memory_stats().peak_bytes, s0.current_bytes + total - 84);
  Tensor big = empty({100}, kFloat32);  // 400
  big = Tensor();
  s = memory_stats();
  EXPECT_EQ(s.peak_bytes, s0.current_bytes + total - 84 + 400);
  EXPECT_EQ(s.current_bytes, s0.current_bytes + total - 84);

  b = d = e = f = g = h = Tensor();
  EXPECT_EQ(memory_stats().current_bytes, s0.current_bytes);
  EXPECT_EQ(memory_stats().current_allocations, s0.current_allocations);
}

TEST(Memory, ViewsShareTheirBaseStorage) {
  const MemoryStats s0 = memory_stats();
  Tensor a = zeros({4, 6});  // 96 bytes
  Tensor v1 = a.t();
  Tensor v2 = a.view({24}).slice(0, 0, 24, 5);
  Tensor v3 = a.select(0, 2).unsqueeze(0).expand({8, 6});
  Tensor v4 = a.detach();
  EXPECT_EQ(memory_stats().current_bytes, s0.current_bytes + 96);
  EXPECT_EQ(memory_stats().allocation_count, s0.allocation_count + 1);
  a = Tensor();  // the views keep the storage alive
  EXPECT_EQ(memory_stats().current_bytes, s0.current_bytes + 96);
  v1 = v2 = v3 = Tensor();
  EXPECT_EQ(memory_stats().current_bytes, s0.current_bytes + 96);
  v4 = Tensor();
  EXPECT_EQ(memory_stats().current_bytes, s0.current_bytes);
}

TEST(Memory, OpsAllocateExactlyTheirOutputs) {
  Tensor x = ones({10, 10});
  Tensor y = ones({10});
  const MemoryStats s0 = memory_stats();
  reset_peak_memory_stats();
  Tensor z = add(x, y);  // output only: 400 bytes (no grad, no temporaries kept)
  EXPECT_EQ(memory_stats().current_bytes, s0.current_bytes + 400);
  Tensor h = x.to(kBFloat16);  // 200 bytes
  EXPECT_EQ(memory_stats().current_bytes, s0.current_bytes + 600);
  z = h = Tensor();
  EXPECT_EQ(memory_stats().current_bytes, s0.current_bytes);
  EXPECT_GE(memory_stats().peak_bytes, s0.current_bytes + 600);
}

TEST(Memory, FromBlobIsNotCounted) {
  std::vector<double> buf(1000, 1.0);
  const MemoryStats s0 = memory_stats();
  {
    Tensor t = from_blob(buf.data(), {10, 100}, kFloat64);
    Tensor v = t.t();
    EXPECT_EQ(memory_stats().current_bytes, s0.current_bytes);
    EXPECT_EQ(memory_stats().allocation_count, s0.allocation_count);
    Tensor c = t.clone();  // a copy is ours and is counted
    EXPECT_EQ(memory_stats().current_bytes, s0.current_bytes + 8000);
  }
  EXPECT_EQ(memory_stats().current_bytes, s0.current_bytes);
  EXPECT_EQ(buf[999], 1.0);  // the caller's memory is not freed or touched
}

TEST(Memory, EmptyTensors) {
  const MemoryStats s0 = memory_stats();
  Tensor e = empty({0, 5});
  EXPECT_EQ(memory_stats().current_bytes, s0.current_bytes);
  EXPECT_EQ(e.numel(), 0);
  EXPECT_EQ(e.nbytes(), 0u);
  Tensor f = add(e, ones({5}));
  EXPECT_EQ(f.sizes(), (Shape{0, 5}));
  e = f = Tensor();
  EXPECT_EQ(memory_stats().current_allocations, s0.current_allocations);
}

}  // namespace
}  // namespace tc

namespace tc {
namespace {

TEST(Memory, LargeFreedBlocksAreCachedAndReused) {
  empty_cache();
  const MemoryStats before = memory_stats();
  const int64_t bytes = 4 << 20;  // 4 MiB: above the 1 MiB caching threshold
  void* first = nullptr;
  {
    Tensor t = empty({bytes / 4});
    first = t.raw_data();
  }
  const MemoryStats freed = memory_stats();
  EXPECT_EQ(freed.current_bytes, before.current_bytes);  // tensor accounting is unaffected
#if defined(TC_NO_ALLOC_CACHE)
  EXPECT_EQ(freed.cached_bytes, 0);
#else
  EXPECT_EQ(freed.cached_bytes, bytes);
  Tensor again = empty({bytes / 4});
  EXPECT_EQ(again.raw_data(), first);  // the same block, no fresh pages from the OS
  EXPECT_EQ(memory_stats().cached_bytes, 0);
  EXPECT_EQ(memory_stats().current_bytes, before.current_bytes + bytes);
  again = Tensor();
  Tensor other = empty({bytes / 4 + 1024});  // another size: not served from the cache
  EXPECT_EQ(memory_stats().cached_bytes, bytes);
#endif
  empty_cache();
  EXPECT_EQ(memory_stats().cached_bytes, 0);
}

}  // namespace
}  // namespace tc
