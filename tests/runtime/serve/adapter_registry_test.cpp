// The server's LoRA adapters by name and slot: start-up ones live in slots 0..n-1; a loaded one is
// invisible until published; names are unique among live and reserved ones; retiring hides the
// name and drains the slot, freeing drops the weights; slots are never reused.
#include <boost/test/unit_test.hpp>

#include "runtime/core/error.hpp"
#include "runtime/serve/adapter_registry.hpp"

using namespace troupe;
using troupe::serve::adapter_registry;

namespace {
std::shared_ptr<const lora_adapter> named(const std::string& name) {
  auto a = std::make_shared<lora_adapter>();
  a->name = name;
  a->identity = "id-" + name;
  return a;
}
}  // namespace

BOOST_AUTO_TEST_SUITE(adapter_registry_suite)

BOOST_AUTO_TEST_CASE(load_retire_free) {
  adapter_registry reg({named("sql"), named("chat")});
  BOOST_TEST(reg.names() == (std::vector<std::string>{"sql", "chat"}), boost::test_tools::per_element());
  BOOST_TEST(reg.find("chat")->slot == 1);
  BOOST_TEST(reg.find("chat")->identity == "id-chat");
  BOOST_TEST(!reg.find("nope").has_value());

  const int32_t s = reg.reserve(named("code"));
  BOOST_TEST(s == 2);
  BOOST_TEST(!reg.find("code").has_value());  // not until the executor holds it
  BOOST_TEST(!reg.is_live(s));
  BOOST_TEST(reg.slots().size() == 3u);  // a restarted executor takes it too
  BOOST_CHECK_THROW(reg.reserve(named("code")), troupe::error);
  BOOST_CHECK_THROW(reg.reserve(named("sql")), troupe::error);
  reg.publish(s);
  BOOST_TEST(reg.is_live(s));
  BOOST_TEST(reg.find("code")->slot == 2);

  BOOST_TEST(reg.retire("sql").value() == 0);
  BOOST_TEST(!reg.retire("sql").has_value());
  BOOST_TEST(!reg.find("sql").has_value());
  BOOST_TEST(!reg.is_live(0));
  BOOST_TEST(reg.draining() == std::vector<int32_t>{0}, boost::test_tools::per_element());
  BOOST_TEST(reg.slots()[0] != nullptr);  // running sequences may still name it
  reg.free(0);
  BOOST_TEST(reg.draining().empty());
  BOOST_TEST(reg.slots()[0] == nullptr);
  BOOST_TEST(reg.names() == (std::vector<std::string>{"chat", "code"}), boost::test_tools::per_element());

  // The name is free again; the new adapter gets a new slot, never the freed one.
  const int32_t again = reg.reserve(named("sql"));
  BOOST_TEST(again == 3);
  reg.release(again);  // the executor could not take it
  BOOST_TEST(reg.slots()[3] == nullptr);
  BOOST_TEST(!reg.find("sql").has_value());
  BOOST_TEST(reg.size() == 4u);
}

BOOST_AUTO_TEST_SUITE_END()
