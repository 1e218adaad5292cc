// The prefix-cache metrics text: exact lines for the hit rate and the shared-store families.
#include <boost/test/unit_test.hpp>

#include "runtime/prefix/prefix_metrics.hpp"

using namespace troupe::prefix;

BOOST_AUTO_TEST_SUITE(prefix_metrics_suite)

BOOST_AUTO_TEST_CASE(local_only_renders_the_hit_rate) {
  prefix_metrics m;
  std::string text;
  m.render(text, "model_name=\"q\"");
  BOOST_TEST(text.find("troupe:prefix_cache_hit_rate{model_name=\"q\"} 0\n") != std::string::npos);
  prefix_stats s;
  s.num_queries = 4;
  s.num_hits = 3;
  s.query_tokens = 400;
  s.hit_tokens = 100;
  s.cached_blocks = 9;
  m.set_local(s);
  text.clear();
  m.render(text, "model_name=\"q\"");
  BOOST_TEST(text.find("# TYPE troupe:prefix_cache_queries_total counter\n"
                       "troupe:prefix_cache_queries_total{model_name=\"q\"} 400\n") != std::string::npos);
  BOOST_TEST(text.find("troupe:prefix_cache_hits_total{model_name=\"q\"} 100\n") != std::string::npos);
  BOOST_TEST(text.find("troupe:prefix_cache_hit_rate{model_name=\"q\"} 0.25\n") != std::string::npos);
  BOOST_TEST(text.find("troupe:prefix_cache_cached_blocks{model_name=\"q\"} 9\n") != std::string::npos);
  BOOST_TEST(text.find("remote") == std::string::npos);  // no shared store: no remote families
}

BOOST_AUTO_TEST_CASE(remote_families) {
  auto cost = std::make_shared<cost_model>();
  prefix_metrics m(cost);
  remote_stats f;
  f.decisions = {5, 1, 2, 3};
  f.rejected[static_cast<size_t>(check_status::checksum_mismatch)] = 2;
  f.bytes_fetched = 1000;
  m.set_fetch(f, store_health{true, 1, 0, 0, 0, 0});
  m.add_publish_dropped(7);
  std::string text;
  m.render(text, "model_name=\"q\"");
  for (const char* line : {"troupe:prefix_cache_remote_lookups_total{model_name=\"q\",decision=\"fetch\"} 5\n",
                           "troupe:prefix_cache_remote_lookups_total{model_name=\"q\",decision=\"unavailable\"} 3\n",
                           "troupe:prefix_cache_remote_rejected_total{model_name=\"q\",reason=\"checksum_mismatch\"} 2\n",
                           "troupe:prefix_cache_remote_rejected_total{model_name=\"q\",reason=\"bad_magic\"} 0\n",
                           "troupe:prefix_cache_remote_bytes_total{model_name=\"q\",direction=\"read\"} 1000\n",
                           "troupe:prefix_cache_remote_published_blocks_total{model_name=\"q\",outcome=\"dropped\"} 7\n",
                           "troupe:prefix_cache_redis_up{model_name=\"q\"} 1\n",
                           "troupe:prefix_cache_estimated_fetch_bytes_per_second{model_name=\"q\"} 1000000000\n"})
    BOOST_TEST(text.find(line) != std::string::npos, line);
}

BOOST_AUTO_TEST_SUITE_END()
