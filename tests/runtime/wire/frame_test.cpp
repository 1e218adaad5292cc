// Frame codec: exact header bytes, reassembly across arbitrary splits, the size limit.
#include <boost/test/unit_test.hpp>

#include "runtime/wire/frame.hpp"

using troupe::wire::frame_decoder;
using status = frame_decoder::status;
BOOST_TEST_DONT_PRINT_LOG_VALUE(status)

BOOST_AUTO_TEST_SUITE(frame)

BOOST_AUTO_TEST_CASE(header_is_big_endian_length) {
  std::string out;
  troupe::wire::append_frame(out, "abc");
  BOOST_TEST(out == std::string("\x00\x00\x00\x03" "abc", 7));
  out.clear();
  troupe::wire::append_frame_header(out, 0x01020304u);
  BOOST_TEST(out == std::string("\x01\x02\x03\x04", 4));
}

BOOST_AUTO_TEST_CASE(frames_split_byte_by_byte_are_reassembled) {
  std::string stream;
  troupe::wire::append_frame(stream, "hello");
  troupe::wire::append_frame(stream, "");
  troupe::wire::append_frame(stream, std::string(300, 'x'));
  frame_decoder d(1024);
  std::vector<std::string> got;
  std::string payload;
  for (char c : stream) {
    d.feed(std::string_view(&c, 1));
    while (d.next(payload) == status::frame) got.push_back(payload);
  }
  BOOST_REQUIRE_EQUAL(got.size(), 3u);
  BOOST_TEST(got[0] == "hello");
  BOOST_TEST(got[1] == "");
  BOOST_TEST(got[2] == std::string(300, 'x'));
  BOOST_TEST(d.buffered_bytes() == 0u);
}

BOOST_AUTO_TEST_CASE(several_frames_in_one_read) {
  std::string stream;
  for (int i = 0; i < 5; ++i) troupe::wire::append_frame(stream, std::string(1, char('a' + i)));
  frame_decoder d(16);
  d.feed(stream.substr(0, stream.size() - 2));  // last frame incomplete
  std::string p, all;
  while (d.next(p) == status::frame) all += p;
  BOOST_TEST(all == "abcd");
  BOOST_TEST(d.next(p) == status::need_more);
  d.feed(stream.substr(stream.size() - 2));
  BOOST_TEST(d.next(p) == status::frame);
  BOOST_TEST(p == "e");
}

BOOST_AUTO_TEST_CASE(frame_at_the_limit_passes_one_above_is_refused) {
  frame_decoder d(8);
  std::string s;
  troupe::wire::append_frame(s, "12345678");
  d.feed(s);
  std::string p;
  BOOST_TEST(d.next(p) == status::frame);
  BOOST_TEST(p == "12345678");
  // Only the header of a 9-byte frame: refused before any payload arrives.
  std::string h;
  troupe::wire::append_frame_header(h, 9);
  d.feed(h);
  BOOST_TEST(d.next(p) == status::too_large);
  BOOST_TEST(d.declared_bytes() == 9u);
  // The stream cannot be resynchronised: everything after stays refused.
  std::string ok;
  troupe::wire::append_frame(ok, "a");
  d.feed(ok);
  BOOST_TEST(d.next(p) == status::too_large);
}

BOOST_AUTO_TEST_CASE(huge_declared_length_is_refused_without_buffering) {
  frame_decoder d(1 << 20);
  d.feed(std::string("\xff\xff\xff\xff", 4));
  std::string p;
  BOOST_TEST(d.next(p) == status::too_large);
  BOOST_TEST(d.declared_bytes() == 0xffffffffu);
  BOOST_TEST(d.buffered_bytes() == 0u);
}

BOOST_AUTO_TEST_SUITE_END()
