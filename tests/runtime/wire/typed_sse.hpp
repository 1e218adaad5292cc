// The events of a stream of typed server-sent events, as the Responses API and Anthropic's
// Messages API write them: "event: TYPE\ndata: JSON\n\n", each JSON's "type" checked to be TYPE.
#pragma once

#include <boost/test/unit_test.hpp>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

namespace troupe::test {

inline std::vector<nlohmann::json> typed_events(const std::string& s) {
  std::vector<nlohmann::json> out;
  size_t at = 0;
  while ((at = s.find("event: ", at)) != std::string::npos) {
    const auto nl = s.find('\n', at);
    const auto type = s.substr(at + 7, nl - at - 7);
    BOOST_TEST_REQUIRE(s.compare(nl + 1, 6, "data: ") == 0);
    const auto end = s.find("\n\n", nl);
    out.push_back(nlohmann::json::parse(s.substr(nl + 7, end - nl - 7)));
    BOOST_TEST(out.back()["type"] == type);
    at = end + 2;
  }
  return out;
}

}  // namespace troupe::test
