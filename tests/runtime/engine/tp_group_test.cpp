// The tensor-parallel group's collective and its failure handling, on plain buffers.
#include <boost/test/unit_test.hpp>

#include <atomic>
#include <stdexcept>
#include <vector>

#include "runtime/core/error.hpp"
#include "runtime/engine/tp_group.hpp"

using namespace troupe;

BOOST_AUTO_TEST_SUITE(tp_group_collective)

// Values whose float32 sum depends on the order: every rank must get ((b0 + b1) + b2) + b3 exactly.
BOOST_AUTO_TEST_CASE(all_reduce_sums_in_rank_order_on_every_rank) {
  for (int32_t size : {1, 2, 3, 4}) {
    tp_group g(size, 1);
    const int64_t count = 1000;  // not a multiple of the 16-float slices
    std::vector<std::vector<float>> bufs(static_cast<size_t>(size), std::vector<float>(count));
    auto value = [](int32_t rank, int64_t i) {
      const float big[] = {1e8f, 1.0f, -1e8f, 3.0f};
      return big[rank % 4] * static_cast<float>(1 + i % 7) + static_cast<float>(i) * 1e-3f;
    };
    g.run([&](int32_t r) {
      auto& b = bufs[static_cast<size_t>(r)];
      for (int64_t i = 0; i < count; ++i) b[static_cast<size_t>(i)] = value(r, i);
      g.all_reduce_sum(r, b.data(), count);
    });
    for (int64_t i = 0; i < count; ++i) {
      float want = value(0, i);
      for (int32_t q = 1; q < size; ++q) want += value(q, i);
      for (int32_t r = 0; r < size; ++r)
        BOOST_TEST(bufs[static_cast<size_t>(r)][static_cast<size_t>(i)] == want,
                   "size " << size << " rank " << r << " element " << i);
    }
  }
}

// A rank that fails before a collective releases the others from it; the run rethrows that rank's
// error (not the release), and the group runs normally afterwards.
BOOST_AUTO_TEST_CASE(a_failing_rank_releases_the_others) {
  tp_group g(3, 1);
  std::vector<float> buf(3 * 64, 1.0f);
  try {
    g.run([&](int32_t r) {
      if (r == 1) throw_error(errc::internal, "rank 1 failed");
      g.all_reduce_sum(r, buf.data() + r * 64, 64);
      g.all_reduce_sum(r, buf.data() + r * 64, 64);
    });
    BOOST_FAIL("the run should have thrown");
  } catch (const troupe::error& e) {
    BOOST_TEST(std::string(e.what()).find("rank 1 failed") != std::string::npos, e.what());
  }
  std::atomic<int> ran{0};
  std::fill(buf.begin(), buf.end(), 1.0f);
  g.run([&](int32_t r) {
    g.all_reduce_sum(r, buf.data() + r * 64, 64);
    ++ran;
  });
  BOOST_TEST(ran.load() == 3);
  for (float v : buf) BOOST_TEST(v == 3.0f);
}

BOOST_AUTO_TEST_CASE(each_rank_runs_on_its_own_thread) {
  tp_group g(2, 1);
  BOOST_TEST(g.size() == 2);
  BOOST_TEST(g.threads_per_rank() == 1);
  std::vector<std::thread::id> ids(2);
  for (int round = 0; round < 3; ++round) g.run([&](int32_t r) { ids[static_cast<size_t>(r)] = std::this_thread::get_id(); });
  BOOST_TEST((ids[0] != ids[1]));
  BOOST_TEST((ids[0] != std::this_thread::get_id()));
}

BOOST_AUTO_TEST_SUITE_END()
