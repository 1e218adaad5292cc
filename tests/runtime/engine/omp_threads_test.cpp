// omp_threads_scope: the calling thread's parallel regions get the scope's team size, the
// caller's own setting comes back after it, 0 changes nothing, and another thread's setting is
// its own (why a shard executor sets it on its own thread).
#define BOOST_TEST_MODULE troupe_omp_threads
#include <boost/test/unit_test.hpp>

#include <omp.h>

#include <thread>

#include "runtime/engine/omp_threads.hpp"

using namespace troupe;

namespace {
// The team size a parallel region opened here gets.
int team_size() {
  int n = 0;
#pragma omp parallel
  {
#pragma omp single
    n = omp_get_num_threads();
  }
  return n;
}
}  // namespace

BOOST_AUTO_TEST_CASE(a_scope_sets_the_team_size_and_puts_the_callers_back) {
  omp_set_dynamic(0);  // teams of exactly the asked size
  omp_set_num_threads(3);
  BOOST_TEST(team_size() == 3);
  {
    omp_threads_scope s(2);
    BOOST_TEST(omp_threads_now() == 2);
    BOOST_TEST(team_size() == 2);
    {
      omp_threads_scope inner(1);
      BOOST_TEST(team_size() == 1);
    }
    BOOST_TEST(team_size() == 2);
  }
  BOOST_TEST(omp_threads_now() == 3);
  BOOST_TEST(team_size() == 3);
}

BOOST_AUTO_TEST_CASE(zero_leaves_the_setting_alone) {
  omp_set_dynamic(0);
  omp_set_num_threads(3);
  {
    omp_threads_scope s(0);
    BOOST_TEST(team_size() == 3);
  }
  BOOST_TEST(omp_threads_now() == 3);
}

BOOST_AUTO_TEST_CASE(the_setting_is_the_calling_threads_own) {
  omp_set_dynamic(0);
  omp_set_num_threads(3);
  int other = 0;
  std::thread t([&] {
    omp_threads_scope s(1);
    other = team_size();
  });
  t.join();
  BOOST_TEST(other == 1);
  BOOST_TEST(team_size() == 3);  // untouched by the other thread's scope
}
