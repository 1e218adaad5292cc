#include "runtime/core/json_in_order.hpp"

#include <stdexcept>
#include <string>
#include <unordered_set>
#include <utility>
#include <vector>

namespace troupe {

namespace {

using ojson = nlohmann::ordered_json;

// nlohmann's SAX interface; values are built in place on a stack of open containers.
class in_order_builder {
 public:
  explicit in_order_builder(ojson& root) : root_(root) {}

  bool null() { return put(nullptr); }
  bool boolean(bool b) { return put(b); }
  bool number_integer(ojson::number_integer_t v) { return put(v); }
  bool number_unsigned(ojson::number_unsigned_t v) { return put(v); }
  bool number_float(ojson::number_float_t v, const std::string&) { return put(v); }
  bool string(std::string& s) { return put(std::move(s)); }
  bool binary(ojson::binary_t& b) { return put(ojson::binary(std::move(b))); }

  bool start_object(std::size_t) {
    ojson* o = put_container(ojson::object());
    open_.push_back({o, {}, {}});
    return true;
  }
  bool key(std::string& k) {
    auto& top = open_.back();
    if (!top.seen.insert(k).second) throw std::invalid_argument("JSON object has key '" + k + "' twice");
    top.key = std::move(k);
    return true;
  }
  bool end_object() {
    open_.pop_back();
    return true;
  }
  bool start_array(std::size_t) {
    ojson* a = put_container(ojson::array());
    open_.push_back({a, {}, {}});
    return true;
  }
  bool end_array() {
    open_.pop_back();
    return true;
  }
  // Rethrown as the type nlohmann's own parse() throws (its message names the position).
  bool parse_error(std::size_t, const std::string&, const nlohmann::detail::exception& e) {
    if (const auto* p = dynamic_cast<const ojson::parse_error*>(&e)) throw *p;
    if (const auto* r = dynamic_cast<const ojson::out_of_range*>(&e)) throw *r;
    throw std::invalid_argument(e.what());
  }

 private:
  struct open_container {
    ojson* value;
    std::string key;                      // objects: the key of the next value
    std::unordered_set<std::string> seen; // objects: keys so far
  };

  template <class V>
  bool put(V&& v) {
    put_container(ojson(std::forward<V>(v)));
    return true;
  }

  // Places `v` as the root, the next array element or the value of the pending key; returns
  // where it now lives (stable: the parent does not grow again until this value is closed).
  ojson* put_container(ojson v) {
    if (open_.empty()) {
      root_ = std::move(v);
      return &root_;
    }
    auto& top = open_.back();
    if (top.value->is_array()) {
      auto& arr = top.value->get_ref<ojson::array_t&>();
      arr.push_back(std::move(v));
      return &arr.back();
    }
    return &append_member(*top.value, std::move(top.key), std::move(v));
  }

  ojson& root_;
  std::vector<open_container> open_;
};

}  // namespace

nlohmann::ordered_json& append_member(nlohmann::ordered_json& object, std::string key, nlohmann::ordered_json value) {
  // ordered_map is a vector of pairs; appending to the base skips its linear key search.
  auto& pairs = static_cast<std::vector<std::pair<const std::string, ojson>>&>(object.get_ref<ojson::object_t&>());
  pairs.emplace_back(std::move(key), std::move(value));
  return pairs.back().second;
}

nlohmann::ordered_json parse_json_in_order(std::string_view text) {
  ojson root;
  in_order_builder b(root);
  ojson::sax_parse(text, &b);
  return root;
}

}  // namespace troupe
