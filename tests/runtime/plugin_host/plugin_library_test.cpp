// Loading: finding a plugin by name or path, and every load-time refusal with its message.
#define BOOST_TEST_MODULE plugin_host
#include <boost/test/unit_test.hpp>

#include <cstdlib>
#include <filesystem>
#include <fstream>

#include "runtime/core/error.hpp"
#include "runtime/plugin_host/plugin_library.hpp"
#include "runtime/plugin_host/plugin_policy.hpp"

using namespace troupe::plugin_host;
using troupe::errc;

namespace {

// Runs f, which must throw troupe::error with `code`; returns the message.
template <class F>
std::string error_of(F&& f, errc code) {
  try {
    f();
  } catch (const troupe::error& e) {
    BOOST_TEST((e.code() == code), "code " << troupe::to_string(e.code()) << ": " << e.what());
    return e.what();
  }
  BOOST_FAIL("no troupe::error thrown");
  return {};
}

bool contains(const std::string& s, const std::string& part) { return s.find(part) != std::string::npos; }

}  // namespace

BOOST_AUTO_TEST_CASE(builtin_names_resolve_to_the_build_tree) {
  for (auto [name, file] : {std::pair{"fcfs", "troupe_policy_fcfs.so"}, {"fair-share", "troupe_policy_fair_share.so"},
                            {"shortest-first", "troupe_policy_shortest_first.so"}}) {
    auto path = resolve_plugin(name, {});
    BOOST_TEST(std::filesystem::path(path).filename() == file);
    BOOST_TEST(std::filesystem::is_regular_file(path));
    BOOST_TEST(plugin_library::open(path)->name() == std::string_view(name));
  }
}

BOOST_AUTO_TEST_CASE(paths_are_taken_as_given_and_dirs_searched_in_order) {
  BOOST_TEST(resolve_plugin("./x/y.so", {}) == "./x/y.so");
  BOOST_TEST(resolve_plugin("custom.so", {}) == "custom.so");
  auto dir = std::filesystem::temp_directory_path() / ("troupe_plugin_dirs_" + std::to_string(::getpid()));
  std::filesystem::create_directories(dir);
  std::filesystem::copy_file(TROUPE_POLICY_PRIORITY, dir / "troupe_policy_my_policy.so",
                             std::filesystem::copy_options::overwrite_existing);
  BOOST_TEST(resolve_plugin("my-policy", {dir.string()}) == (dir / "troupe_policy_my_policy.so").string());
  ::setenv("TROUPE_PLUGIN_PATH", ("/nonexistent:" + dir.string()).c_str(), 1);
  BOOST_TEST(resolve_plugin("my_policy", {}) == (dir / "troupe_policy_my_policy.so").string());
  ::unsetenv("TROUPE_PLUGIN_PATH");
  std::filesystem::remove_all(dir);
}

BOOST_AUTO_TEST_CASE(unknown_names_say_where_they_looked) {
  auto m = error_of([] { resolve_plugin("no-such-policy", {"/opt/mine"}); }, errc::invalid_argument);
  BOOST_TEST(contains(m, "no scheduling policy plugin 'no-such-policy': looked for\n  /opt/mine/troupe_policy_no_such_policy.so"), m);
  BOOST_TEST(contains(m, "built-in: fcfs, priority, fair-share, shortest-first, cache-aware"), m);
  m = error_of([] { resolve_plugin("bad name!", {}); }, errc::invalid_argument);
  BOOST_TEST(contains(m, "name 'bad name!' has a character other than"), m);
  m = error_of([] { resolve_plugin("", {}); }, errc::invalid_argument);
  BOOST_TEST(contains(m, "empty name"), m);
}

BOOST_AUTO_TEST_CASE(files_that_are_not_plugins_are_refused) {
  auto m = error_of([] { plugin_library::open("/nonexistent/troupe_policy_x.so"); }, errc::invalid_argument);
  BOOST_TEST(contains(m, "scheduling policy plugin /nonexistent/troupe_policy_x.so: cannot be loaded: "), m);
  auto text = std::filesystem::temp_directory_path() / ("troupe_not_a_plugin_" + std::to_string(::getpid()) + ".so");
  std::ofstream(text) << "not an ELF file\n";
  m = error_of([&] { plugin_library::open(text.string()); }, errc::invalid_argument);
  BOOST_TEST(contains(m, "cannot be loaded: "), m);
  std::filesystem::remove(text);
  m = error_of([] { plugin_library::open(TROUPE_BAD_NO_ENTRY); }, errc::invalid_argument);
  BOOST_TEST(contains(m, "has no symbol troupe_policy_entry (is it a Troupe scheduling policy?"), m);
}

BOOST_AUTO_TEST_CASE(abi_mismatches_are_refused_naming_both_versions) {
  auto m = error_of([] { plugin_library::open(TROUPE_BAD_ABI); }, errc::unsupported);
  BOOST_TEST(contains(m, "was built for policy ABI version 999 but this server speaks version 1; rebuild it"), m);
  m = error_of([] { plugin_library::open(TROUPE_BAD_SIZE); }, errc::unsupported);
  BOOST_TEST(contains(m, "its troupe_policy_api is 16 bytes, less than the " + std::to_string(sizeof(troupe_policy_api)) +
                             " of ABI version 1"),
             m);
  m = error_of([] { plugin_library::open(TROUPE_BAD_REFUSE); }, errc::unsupported);
  BOOST_TEST(contains(m, "troupe_policy_entry refused the host's ABI version 1 (returned NULL)"), m);
}

BOOST_AUTO_TEST_CASE(missing_entry_points_and_names_are_refused) {
  auto m = error_of([] { plugin_library::open(TROUPE_BAD_NULL_FN); }, errc::invalid_argument);
  BOOST_TEST(contains(m, "policy 'bad' leaves rank_waiting NULL"), m);
  m = error_of([] { plugin_library::open(TROUPE_BAD_NO_NAME); }, errc::invalid_argument);
  BOOST_TEST(contains(m, "its troupe_policy_api has no name"), m);
}

BOOST_AUTO_TEST_CASE(a_refused_config_is_a_clear_error_and_counted) {
  host_options opts;
  opts.counters = std::make_shared<policy_counters>();
  auto m = error_of([&] { load_policy("fair-share", "weight.a=-1", opts); }, errc::invalid_argument);
  BOOST_TEST(contains(m, "scheduling policy 'fair-share' ("), m);
  BOOST_TEST(contains(m, "refused its config \"weight.a=-1\": policy 'fair-share': config key 'weight.a' is '-1'"), m);
  m = error_of([&] { load_policy(TROUPE_ROGUE, "mode=fail_create", opts); }, errc::invalid_argument);
  BOOST_TEST(contains(m, "rogue: told to fail in create"), m);
  error_of([&] { load_policy(TROUPE_BAD_ABI, "", opts); }, errc::unsupported);
  BOOST_TEST(opts.counters->load_failures.load() == 3);
  BOOST_TEST(opts.counters->fallbacks.load() == 0);
}
