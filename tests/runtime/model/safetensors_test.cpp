// safetensors reader and writer: round trips of every dtype, the reference layout, and one
// rejection per kind of corrupt header (each naming the file and, where there is one, the tensor).
#include <boost/test/unit_test.hpp>

#include <cstring>
#include <numeric>
#include <vector>

#include "runtime/model/safetensors.hpp"
#include "tests/runtime/model/test_util.hpp"

using namespace troupe;
using troupe::test::expect_error;

namespace {

std::string f32_bytes(std::initializer_list<float> v) {
  std::string s(v.size() * 4, '\0');
  std::memcpy(s.data(), std::data(v), s.size());
  return s;
}

}  // namespace

BOOST_AUTO_TEST_SUITE(safetensors)

BOOST_AUTO_TEST_CASE(round_trip_every_dtype) {
  test::temp_dir dir;
  const std::string path = dir.str("a.safetensors");
  std::vector<float> f(6);
  std::iota(f.begin(), f.end(), 1.0f);
  std::vector<uint16_t> h = {f32_to_bf16(1.5f), f32_to_bf16(-2.0f), f32_to_bf16(3.25f)};
  std::vector<int8_t> q = {-1, 2, -3, 4, 5};
  std::vector<int64_t> big = {1, -1};
  std::vector<tensor_to_write> ts = {
      {"w.f32", dtype::f32, {2, 3}, f.data(), {}},
      {"w.bf16", dtype::bf16, {3}, h.data(), {}},
      {"w.i8", dtype::i8, {5}, q.data(), {}},
      {"w.i64", dtype::i64, {2}, big.data(), {}},
      {"scalar", dtype::f32, {}, f.data(), {}},
      {"empty", dtype::f16, {0, 4}, nullptr, {}},
      {"filled", dtype::u8, {3, 2}, nullptr,
       [](uint8_t* out, uint64_t at, uint64_t n) {
         for (uint64_t i = 0; i < n; ++i) out[i] = static_cast<uint8_t>(10 + at + i);
       }},
  };
  write_safetensors(path, ts, {{"format", "pt"}, {"note", "x"}});

  safetensors_file file(path);
  BOOST_TEST(file.data_start() % 8 == 0);
  BOOST_TEST(file.metadata().at("format") == "pt");
  BOOST_TEST(file.metadata().at("note") == "x");
  BOOST_TEST(file.tensors().size() == 7u);
  const tensor_info* a = file.find("w.f32");
  BOOST_REQUIRE(a);
  BOOST_TEST((a->type == dtype::f32));
  BOOST_TEST(a->shape == (std::vector<int64_t>{2, 3}));
  BOOST_TEST(std::memcmp(a->data, f.data(), 24) == 0);
  const tensor_info* b = file.find("w.bf16");
  BOOST_REQUIRE(b);
  BOOST_TEST(std::memcmp(b->data, h.data(), 6) == 0);
  BOOST_TEST(std::memcmp(file.find("w.i8")->data, q.data(), 5) == 0);
  BOOST_TEST(std::memcmp(file.find("w.i64")->data, big.data(), 16) == 0);
  BOOST_TEST(file.find("scalar")->shape.empty());
  BOOST_TEST(file.find("scalar")->numel() == 1);
  BOOST_TEST(file.find("empty")->bytes() == 0u);
  const tensor_info* u = file.find("filled");
  for (int i = 0; i < 6; ++i) BOOST_TEST(u->data[i] == 10 + i);
  BOOST_TEST(file.find("absent") == nullptr);
  // Every tensor is aligned to its element size, with no holes (largest elements first).
  uint64_t end = 0;
  std::vector<const tensor_info*> by_offset;
  for (const auto& t : file.tensors()) {
    BOOST_TEST(reinterpret_cast<uintptr_t>(t.data) % dtype_size(t.type) == 0u);
    by_offset.push_back(&t);
  }
  std::sort(by_offset.begin(), by_offset.end(), [](auto x, auto y) { return x->begin < y->begin; });
  for (auto* t : by_offset) {
    BOOST_TEST(t->begin == end);
    end = t->end;
  }
  BOOST_TEST(file.data_start() + end == std::filesystem::file_size(path));
}

// A fill callback sees consecutive chunks that together cover the tensor exactly once.
BOOST_AUTO_TEST_CASE(large_tensor_is_streamed) {
  test::temp_dir dir;
  const std::string path = dir.str("big.safetensors");
  const int64_t n = 5'000'000;  // 20 MB: more than one 16 MiB chunk
  uint64_t calls = 0, covered = 0;
  tensor_to_write t{"big", dtype::f32, {n}, nullptr, [&](uint8_t* out, uint64_t at, uint64_t count) {
                      BOOST_REQUIRE(at == covered);
                      for (uint64_t i = 0; i < count / 4; ++i) {
                        float v = static_cast<float>(at / 4 + i);
                        std::memcpy(out + 4 * i, &v, 4);
                      }
                      covered += count;
                      ++calls;
                    }};
  write_safetensors(path, {t});
  BOOST_TEST(calls == 2u);
  BOOST_TEST(covered == static_cast<uint64_t>(4 * n));
  safetensors_file file(path);
  const float* v = reinterpret_cast<const float*>(file.find("big")->data);
  BOOST_TEST(v[0] == 0.0f);
  BOOST_TEST(v[4'194'304] == 4194304.0f);
  BOOST_TEST(v[n - 1] == static_cast<float>(n - 1));
}

// The writer gathers the header and tensors into whole 16 MB writes (2 MB folios in the page
// cache): tensors of odd sizes that straddle those pieces come back byte for byte.
BOOST_AUTO_TEST_CASE(tensors_straddling_the_writers_pieces_round_trip) {
  test::temp_dir dir;
  const std::string path = dir.str("pieces.safetensors");
  std::vector<float> a(4'400'001), c(4'200'003);
  std::vector<uint16_t> b(777);
  for (size_t i = 0; i < a.size(); ++i) a[i] = static_cast<float>(i) * 0.5f;
  for (size_t i = 0; i < b.size(); ++i) b[i] = static_cast<uint16_t>(i * 7);
  for (size_t i = 0; i < c.size(); ++i) c[i] = -static_cast<float>(i);
  write_safetensors(path, {{"a", dtype::f32, {static_cast<int64_t>(a.size())}, a.data(), {}},
                           {"b", dtype::bf16, {static_cast<int64_t>(b.size())}, b.data(), {}},
                           {"c", dtype::f32, {static_cast<int64_t>(c.size())}, c.data(), {}}});
  safetensors_file file(path);
  BOOST_TEST(std::memcmp(file.find("a")->data, a.data(), a.size() * 4) == 0);
  BOOST_TEST(std::memcmp(file.find("b")->data, b.data(), b.size() * 2) == 0);
  BOOST_TEST(std::memcmp(file.find("c")->data, c.data(), c.size() * 4) == 0);
}

BOOST_AUTO_TEST_CASE(writer_rejects_duplicates_and_reports_io_errors) {
  test::temp_dir dir;
  float x = 0;
  expect_error([&] {
    write_safetensors(dir.str("d.safetensors"), {{"a", dtype::f32, {1}, &x, {}}, {"a", dtype::f32, {1}, &x, {}}});
  }, errc::invalid_argument, {"'a'"});
  expect_error([&] { write_safetensors(dir.str("no/such/dir/x.safetensors"), {{"a", dtype::f32, {1}, &x, {}}}); },
               errc::io_error, {"no/such/dir/x.safetensors"});
}

BOOST_AUTO_TEST_CASE(truncated_and_short_files) {
  test::temp_dir dir;
  const auto p = dir.path() / "t.safetensors";
  test::write_file(p, "");
  expect_error([&] { safetensors_file f(p.string()); }, errc::invalid_checkpoint,
               {p.string(), "truncated", "0 bytes"});
  test::write_file(p, std::string(5, '\0'));
  expect_error([&] { safetensors_file f(p.string()); }, errc::invalid_checkpoint, {p.string(), "truncated"});
  // Data cut short: the last tensor runs past the end of the file.
  const std::string header = R"({"w":{"dtype":"F32","shape":[4],"data_offsets":[0,16]}})";
  test::write_file(p, test::raw_safetensors(header, std::string(12, '\0')));
  expect_error([&] { safetensors_file f(p.string()); }, errc::invalid_checkpoint,
               {p.string(), "truncated", "tensor 'w'", "holds only 12 data bytes"});
  expect_error([&] { safetensors_file f(dir.str("missing.safetensors")); }, errc::io_error,
               {"missing.safetensors"});
}

BOOST_AUTO_TEST_CASE(corrupt_headers) {
  test::temp_dir dir;
  const auto p = dir.path() / "c.safetensors";
  auto expect_corrupt = [&](const std::string& bytes, std::initializer_list<std::string> needles) {
    test::write_file(p, bytes);
    std::vector<std::string> all = {p.string()};
    all.insert(all.end(), needles);
    try {
      safetensors_file f(p.string());
      BOOST_ERROR("accepted a corrupt header: " << bytes.substr(8, 80));
    } catch (const troupe::error& e) {
      BOOST_TEST_INFO(e.what());
      BOOST_TEST(to_string(e.code()) == "invalid_checkpoint");
      for (const auto& n : all) {
        BOOST_TEST_INFO(e.what() << " / " << n);
        BOOST_TEST(std::string(e.what()).find(n) != std::string::npos);
      }
    }
  };
  const std::string data = f32_bytes({1, 2, 3, 4});
  // Header length beyond the file.
  std::string bad_len = test::raw_safetensors("{}", data);
  bad_len[0] = '\x7f';
  bad_len[3] = '\x01';
  expect_corrupt(bad_len, {"header length", "exceeds the file size"});
  std::string huge_len = test::raw_safetensors("{}", data);
  huge_len[7] = '\x10';
  expect_corrupt(huge_len, {"header length"});
  // Not JSON, not an object, wrong entry shapes. Unknown fields of an entry are ignored.
  test::write_file(p, test::raw_safetensors(
                          R"({"w":{"x":{"y":[1,{"z":null}]},"dtype":"F32","shape":[4],"data_offsets":[0,16]}})", data));
  BOOST_TEST(safetensors_file(p.string()).find("w")->numel() == 4);
  expect_corrupt(test::raw_safetensors(R"({"w":{"dtype":"F32",)", data), {"not valid JSON"});
  expect_corrupt(test::raw_safetensors(R"([1,2,3])", data), {"not a JSON object"});
  expect_corrupt(test::raw_safetensors(R"({"w":{"dtype":"F32","shape":[4]}})", data),
                 {"tensor 'w'", "data_offsets"});
  // Offsets out of range / inconsistent with dtype x shape / reversed / overlapping.
  expect_corrupt(test::raw_safetensors(R"({"w":{"dtype":"F32","shape":[4],"data_offsets":[16,32]}})", data),
                 {"tensor 'w'", "truncated"});
  expect_corrupt(test::raw_safetensors(R"({"w":{"dtype":"F32","shape":[3],"data_offsets":[0,16]}})", data),
                 {"tensor 'w'", "expected 12 bytes"});
  expect_corrupt(test::raw_safetensors(R"({"w":{"dtype":"F32","shape":[0],"data_offsets":[8,0]}})", data),
                 {"tensor 'w'", "end before begin"});
  expect_corrupt(test::raw_safetensors(R"({"w":{"dtype":"F32","shape":[-4],"data_offsets":[0,16]}})", data),
                 {"tensor 'w'", "non-negative"});
  expect_corrupt(
      test::raw_safetensors(R"({"a":{"dtype":"F32","shape":[3],"data_offsets":[0,12]},)"
                            R"("b":{"dtype":"F32","shape":[2],"data_offsets":[8,16]}})", data),
      {"'a'", "'b'", "overlap"});
  expect_corrupt(test::raw_safetensors(R"({"w":{"dtype":"F32","shape":[4294967296,4294967296,4],"data_offsets":[0,16]}})", data),
                 {"tensor 'w'", "too large"});
  expect_corrupt(test::raw_safetensors(R"({"__metadata__":{"a":1}})", data), {"__metadata__", "'a'"});
  expect_corrupt(test::raw_safetensors(R"({"__metadata__":["a"]})", data), {"__metadata__"});
  // Entries of the wrong kind, at every level.
  expect_corrupt(test::raw_safetensors(R"({"w":5})", data), {"tensor 'w'", "not an object"});
  expect_corrupt(test::raw_safetensors(R"({"w":[1]})", data), {"tensor 'w'", "not an object"});
  expect_corrupt(test::raw_safetensors(R"({"w":{"dtype":5,"shape":[4],"data_offsets":[0,16]}})", data),
                 {"tensor 'w'", "dtype that is not a string"});
  expect_corrupt(test::raw_safetensors(R"({"w":{"dtype":"F32","shape":[[4]],"data_offsets":[0,16]}})", data),
                 {"tensor 'w'", "non-negative"});
  expect_corrupt(test::raw_safetensors(R"({"w":{"dtype":"F32","shape":{"a":4},"data_offsets":[0,16]}})", data),
                 {"tensor 'w'", "non-negative"});
  expect_corrupt(test::raw_safetensors(R"({"w":{"dtype":"F32","shape":[4.0],"data_offsets":[0,16]}})", data),
                 {"tensor 'w'", "non-negative"});
  expect_corrupt(test::raw_safetensors(R"({"w":{"dtype":"F32","shape":[4],"data_offsets":[0,16,32]}})", data),
                 {"tensor 'w'", "data_offsets"});
  expect_corrupt(test::raw_safetensors(R"({"w":{"dtype":"F32","shape":[4],"data_offsets":"0-16"}})", data),
                 {"tensor 'w'", "data_offsets"});
  expect_corrupt(test::raw_safetensors(R"({"w":{"dtype":"F32","shape":[2],"data_offsets":[0,8]},)"
                                       R"("w":{"dtype":"F32","shape":[2],"data_offsets":[8,16]}})", data),
                 {"tensor 'w'", "appears twice"});
  expect_corrupt(test::raw_safetensors(R"({} {})", data), {"not valid JSON"});
  expect_corrupt(test::raw_safetensors(R"("w")", data), {"not a JSON object"});
}

BOOST_AUTO_TEST_CASE(unknown_and_unsupported_dtypes) {
  test::temp_dir dir;
  const auto p = dir.path() / "d.safetensors";
  test::write_file(p, test::raw_safetensors(R"({"w":{"dtype":"Q4_K","shape":[4],"data_offsets":[0,16]}})",
                                            std::string(16, '\0')));
  expect_error([&] { safetensors_file f(p.string()); }, errc::invalid_checkpoint,
               {p.string(), "tensor 'w'", "unknown dtype \"Q4_K\""});
  test::write_file(p, test::raw_safetensors(R"({"w":{"dtype":"F64","shape":[2],"data_offsets":[0,16]}})",
                                            std::string(16, '\0')));
  expect_error([&] { safetensors_file f(p.string()); }, errc::unsupported, {p.string(), "tensor 'w'", "F64"});
}

BOOST_AUTO_TEST_CASE(reads_reference_files) {
  // The golden sets were written by the reference (Python) safetensors library.
  safetensors_file f(test::golden("tiny-dense") + "/model.safetensors");
  const tensor_info* e = f.find("model.embed_tokens.weight");
  BOOST_REQUIRE(e);
  BOOST_TEST((e->type == dtype::bf16));
  BOOST_TEST(e->shape == (std::vector<int64_t>{4096, 64}));
  BOOST_TEST(f.tensors().size() == 2u + 2u * 11u);  // embed + norm, 11 per layer
}

BOOST_AUTO_TEST_SUITE_END()
