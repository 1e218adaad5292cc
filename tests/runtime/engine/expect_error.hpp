// The engine tests' check of a refusal: f() throws troupe::error with `code` and `needle` in its text.
#pragma once

#include <boost/test/unit_test.hpp>

#include <string>

#include "runtime/core/error.hpp"

namespace troupe::testing {

template <class F>
void expect_error(F&& f, errc code, const std::string& needle) {
  try {
    f();
    BOOST_FAIL("expected an error containing '" << needle << "'");
  } catch (const troupe::error& e) {
    BOOST_TEST(static_cast<int>(e.code()) == static_cast<int>(code), e.what());
    BOOST_TEST(std::string(e.what()).find(needle) != std::string::npos, e.what());
  }
}

}  // namespace troupe::testing
