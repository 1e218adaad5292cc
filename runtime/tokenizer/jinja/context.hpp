// Render-time state of the Jinja interpreter: variable frames (globals, then one per loop
// iteration or macro call) and the built-in filters, tests, methods and functions.
#pragma once

#include <string>
#include <unordered_map>
#include <vector>

#include "runtime/tokenizer/jinja/value.hpp"

namespace troupe::jinja {

class context {
 public:
  explicit context(std::unordered_map<std::string, value> globals);

  value lookup(const std::string& name) const;
  void assign(const std::string& name, value v) { frames_.back()[name] = std::move(v); }

  void push_frame() { frames_.emplace_back(); }
  void pop_frame() { frames_.pop_back(); }
  // A macro body sees the globals and its own frames, not its caller's locals.
  size_t enter_macro();
  void leave_macro(size_t saved_barrier);

  int depth = 0;  // macro nesting, bounded so a template cannot recurse forever

 private:
  std::vector<std::unordered_map<std::string, value>> frames_;
  size_t barrier_ = 1;  // frames [1, barrier_) are hidden from lookups
};

// Built-ins (builtins.cpp). Each throws troupe::error(invalid_input) on a wrong argument and
// errc::unsupported when the name is outside the subset.
value apply_filter(const std::string& name, value operand, std::vector<value>& args, kwargs& kw, context& ctx);
bool apply_test(const std::string& name, const value& operand, std::vector<value>& args, context& ctx);
value get_attribute(const value& obj, const std::string& name);  // methods and dict items
value get_item(const value& obj, const value& index);
bool contains(const value& container, const value& item);
std::unordered_map<std::string, value> builtin_globals();
// Python's iteration over a value (list items, dict keys, string characters).
list iterate(const value& v);

}  // namespace troupe::jinja
