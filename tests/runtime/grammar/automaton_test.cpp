// automaton and automaton_cache: matchers on one automaton see the masks a private matcher sees
// and the second adds no state; a full automaton is left for a fresh one without losing the
// position; threads share an automaton safely; the cache keeps one automaton per text.
#include <boost/test/unit_test.hpp>

#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "runtime/core/error.hpp"
#include "runtime/grammar/automaton_cache.hpp"
#include "runtime/grammar/matcher.hpp"

using namespace troupe::grammar;

namespace {

// A small vocabulary where JSON needs several tokens per value.
std::shared_ptr<const token_table> json_tokens() {
  static const auto t = std::make_shared<const token_table>(std::vector<std::string>{
      "{", "}", "[", "]", ":", ",", "\"", " ", "\n", "a", "b", "ab", "\"a", "1", "12", "true", "null", "é", "\xC3", "\xA9",
      "\":", "\",", "{\"", "\"}", ""});
  return t;
}

const char* kJson = R"(
root   ::= value
value  ::= object | array | string | number | "true" | "null"
object ::= "{" ( string ":" value ("," string ":" value)* )? "}"
array  ::= "[" ( value ("," value)* )? "]"
string ::= "\"" [^"\\]* "\""
number ::= [0-9]+
)";

// Token ids of a text, greedy longest match over json_tokens (the text must be coverable).
std::vector<int32_t> tokenize(const std::string& text) {
  const auto& t = *json_tokens();
  std::vector<int32_t> ids;
  for (size_t i = 0; i < text.size();) {
    int32_t best = -1;
    size_t len = 0;
    for (size_t id = 0; id < t.id_limit(); ++id) {
      const auto b = t.bytes(static_cast<int32_t>(id));
      if (!b.empty() && b.size() > len && text.compare(i, b.size(), b) == 0) best = static_cast<int32_t>(id), len = b.size();
    }
    BOOST_REQUIRE(best >= 0);
    ids.push_back(best);
    i += len;
  }
  return ids;
}

std::vector<std::vector<uint64_t>> masks_along(matcher& m, const std::vector<int32_t>& ids) {
  std::vector<std::vector<uint64_t>> out;
  for (int32_t id : ids) {
    auto mask = m.allowed_mask();
    out.emplace_back(mask.begin(), mask.end());
    BOOST_REQUIRE(m.accept_token(id));
  }
  auto mask = m.allowed_mask();
  out.emplace_back(mask.begin(), mask.end());
  return out;
}

const std::string kDoc = R"({"a":[1,{"ab":"é"},true,null,[12,"b"]],"b":{"a":{"a":{"a":[[[1]]]}}}})";

// The grammar, kDoc's tokens, and the masks a matcher of its own sees along them.
struct reference_walk {
  std::shared_ptr<const grammar> g;
  std::vector<int32_t> ids;
  std::vector<std::vector<uint64_t>> masks;
};

reference_walk reference() {
  reference_walk r{std::make_shared<const grammar>(parse_gbnf(kJson)), tokenize(kDoc), {}};
  matcher alone(r.g, json_tokens(), {24});
  r.masks = masks_along(alone, r.ids);
  return r;
}

}  // namespace

BOOST_AUTO_TEST_CASE(matchers_share_what_an_automaton_learnt) {
  const auto [g, ids, want] = reference();
  auto shared = std::make_shared<automaton>(g, json_tokens());
  matcher first(shared, {24}), second(shared, {24});
  BOOST_TEST((masks_along(first, ids) == want));
  const size_t states = shared->num_states();
  BOOST_TEST((masks_along(second, ids) == want));
  BOOST_TEST(shared->num_states() == states);  // nothing new to learn
  BOOST_TEST(first.is_complete());
  BOOST_TEST(second.accept_token(24));
}

BOOST_AUTO_TEST_CASE(a_full_automaton_is_left_for_a_fresh_one) {
  const auto [g, ids, want] = reference();
  auto small = std::make_shared<automaton>(g, json_tokens(), /*max_states=*/8);
  matcher m(small, {24}), other(small, {24});
  BOOST_TEST((masks_along(m, ids) == want));  // the position survives every move
  BOOST_TEST((m.shared_automaton() != small));
  BOOST_TEST(m.shared_automaton()->max_states() == 8u);
  BOOST_TEST(other.shared_automaton() == small);  // the others stay until they move themselves
  BOOST_TEST((masks_along(other, ids) == want));
}

BOOST_AUTO_TEST_CASE(threads_share_an_automaton) {
  const auto [g, ids, want] = reference();
  auto shared = std::make_shared<automaton>(g, json_tokens());
  std::vector<int> ok(4, 0);
  std::vector<std::thread> threads;
  for (int t = 0; t < 4; ++t)
    threads.emplace_back([&, t] {
      bool same = true;
      for (int round = 0; round < 20; ++round) {
        matcher m(shared, {24});
        for (size_t i = 0; i < ids.size(); ++i) {
          auto mask = m.allowed_mask();
          same = same && std::vector<uint64_t>(mask.begin(), mask.end()) == want[i] && m.accept_token(ids[i]);
        }
      }
      ok[static_cast<size_t>(t)] = same;
    });
  for (auto& th : threads) th.join();
  BOOST_TEST(ok == std::vector<int>(4, 1), boost::test_tools::per_element());
}

BOOST_AUTO_TEST_CASE(the_cache_keeps_one_automaton_per_text) {
  automaton_cache cache(json_tokens(), /*capacity=*/2);
  const std::string a = "root ::= \"a\"", b = "root ::= \"b\"", c = "root ::= \"ab\"";
  auto first = cache.get(a);
  BOOST_TEST(cache.get(a) == first);
  BOOST_TEST(cache.get(b) != first);
  cache.get(a);  // a is now the most recent: c pushes b out
  cache.get(c);
  BOOST_TEST(cache.size() == 2u);
  BOOST_TEST(cache.get(a) == first);
  auto b2 = cache.get(b);  // parsed again
  BOOST_TEST(cache.get(b) == b2);
  BOOST_CHECK_THROW(cache.get("root ::= x"), troupe::error);
  BOOST_TEST(cache.size() == 2u);
  // A grammar over the size kept is parsed each time.
  std::string big = "root ::= \"a\" # " + std::string(automaton_cache::max_cached_text, 'x');
  BOOST_TEST(cache.get(big) != cache.get(big));
}

BOOST_AUTO_TEST_CASE(the_cache_makes_its_token_table_on_first_use_only) {
  int made = 0;
  automaton_cache cache([&] {
    ++made;
    return json_tokens();
  });
  BOOST_TEST(made == 0);
  auto a = cache.get("root ::= \"a\"");
  BOOST_TEST(made == 1);
  BOOST_TEST((a->tokens() == json_tokens()));
  cache.get("root ::= \"b\"");
  BOOST_TEST(made == 1);
}

BOOST_AUTO_TEST_CASE(a_full_cached_automaton_is_replaced) {
  automaton_cache cache(json_tokens());
  auto a = cache.get(kJson);
  // Fill it: walking documents through it makes states (default max is large, so fill by hand
  // with many distinct nesting depths).
  matcher m(a, {24});
  std::string deep;
  for (size_t i = 0; i <= automaton::default_max_states; ++i) deep += "[";  // a state per depth
  BOOST_REQUIRE(m.accept_bytes(deep));
  BOOST_REQUIRE(a->full());
  auto fresh = cache.get(kJson);
  BOOST_TEST(fresh != a);
  BOOST_TEST(!fresh->full());
  BOOST_TEST((fresh->grammar_ptr() == a->grammar_ptr()));  // not parsed again
}
