// GPTQ and AWQ checkpoints (tests/data/gptq, tests/data/awq, written by
// tools/reference/gptq_awq_golden.py from tiny-dense): each weight loads as INT8 codes (4-bit ones
// as u4, half a byte a weight) whose code * scale is, bit for bit, what the format's own
// dequantisation gives (reference.safetensors); the model runs as the float32 model on those
// weights, and a u4 model gives the logits of the same model widened to INT8 codes bit for bit; a
// model written by `troupe quantize` reloads as the same weights; and every field or tensor Troupe
// cannot run is refused by name. Single packed layers written here cover the shapes those sets lack:
// inputs a multiple of 8 but not of 16 (INT8 codes, not u4) and shapes the 4-bit words cannot hold.
#include <boost/test/unit_test.hpp>

#include <cmath>
#include <cstring>
#include <random>

#include <nlohmann/json.hpp>

#include "kernels/kernels.hpp"
#include "runtime/model/safetensors.hpp"
#include "runtime/quant/load.hpp"
#include "runtime/quant/packed_int.hpp"
#include "runtime/model/weight_files.hpp"
#include "runtime/quant/write.hpp"
#include "tests/runtime/engine/golden.hpp"
#include "tests/runtime/quant/checkpoint_edits.hpp"
#include "tests/runtime/quant/test_util.hpp"

using namespace troupe;
using namespace troupe::testing;
using json = nlohmann::json;
namespace fs = std::filesystem;

namespace {

// "gptq/tiny-dense-gptq8" -> its directory.
std::string data_dir(const std::string& set) { return std::string(TROUPE_TEST_DATA_DIR) + "/" + set; }

const char* kSets[] = {"gptq/tiny-dense-gptq8", "gptq/tiny-dense-gptq4", "awq/tiny-dense-awq", "gptq/tiny-moe-gptq4"};

// The golden set a packed set was made from.
std::string base_set(const std::string& set) { return set.find("tiny-moe") != std::string::npos ? "tiny-moe" : "tiny-dense"; }

// The model of `q` with every linear weight replaced by reference.safetensors' float32 tensor.
std::unique_ptr<checkpoint> reference_model(const checkpoint& q, const safetensors_file& ref) {
  return with_float_weights(q, [&](const expected_tensor& t, const kernels::weight_ref& r, auto&) {
    const tensor_info* f = ref.find(t.name);
    if (!f) throw std::runtime_error("reference.safetensors lacks " + t.name);
    return kernels::weight_ref{f->data, dtype::f32, r.rows, r.cols};
  });
}

// Number of elements of the linear weights of `ck` that differ from reference.safetensors.
int64_t differing_weights(const checkpoint& ck, const safetensors_file& ref, int64_t& checked) {
  int64_t bad = 0;
  for (const auto& t : expected_tensors(ck.config)) {
    const kernels::weight_ref* r = weight_slot(const_cast<model_weights&>(ck.weights), t);
    if (!r || !r->scales) continue;
    const tensor_info* f = ref.find(t.name);
    BOOST_REQUIRE_MESSAGE(f, "reference.safetensors lacks " << t.name);
    const auto* want = reinterpret_cast<const float*>(f->data);
    for (int64_t i = 0; i < r->rows; ++i)
      for (int64_t j = 0; j < r->cols; ++j) {
        const float got = kernels::dequantized_at(*r, i, j);
        bad += std::memcmp(&got, &want[i * r->cols + j], sizeof(float)) != 0;
        ++checked;
      }
  }
  return bad;
}

const std::string kQ = "model.layers.1.self_attn.q_proj";

}  // namespace

BOOST_AUTO_TEST_CASE(packed_weights_are_the_formats_own_dequantisation_bit_for_bit) {
  for (const std::string set : kSets) {
    const auto ck = quant::load_model(data_dir(set));
    const json qc = read_json(fs::path(data_dir(set)) / "config.json")["quantization_config"];
    const bool four_bit = qc.value("bits", 4) == 4;
    BOOST_TEST(to_string(ck->weights.layers[0].q_proj.type) == (four_bit ? "U4" : "I8"));
    BOOST_TEST(to_string(ck->weights.embed_tokens.type) == "BF16");  // as stored
    const quant::quant_config q = quant::weight_quantization(*ck);
    BOOST_TEST((q.kind == quant::method::int8));
    BOOST_TEST(q.group_size == qc["group_size"].get<int>());
    safetensors_file ref(data_dir(set) + "/reference.safetensors");
    int64_t checked = 0;
    const int64_t bad = differing_weights(*ck, ref, checked);
    BOOST_TEST(bad == 0, set << ": " << bad << " of " << checked << " weights differ from GPTQ's dequantisation");
    // Every linear layer came packed (lm_head, embeddings, norms and MoE routers stay as stored).
    int64_t linear = 0, packed = 0;
    for (const auto& t : expected_tensors(ck->config)) {
      if (t.name.size() < 12 || t.name.compare(t.name.size() - 12, 12, "_proj.weight") != 0) continue;
      ++linear;
      const kernels::weight_ref* r = weight_slot(const_cast<model_weights&>(ck->weights), t);
      // 4-bit weights stay 4-bit where their inputs are a multiple of 16 (all of them here).
      packed += r->type == (four_bit ? dtype::u4 : dtype::i8);
      BOOST_TEST(r->group_cols == qc["group_size"].get<int>(), t.name);
    }
    BOOST_TEST(linear > 0);
    BOOST_TEST(packed == linear, set << ": " << packed << " of " << linear << " linear layers packed");
    BOOST_TEST(checked > 0);
  }
}

BOOST_AUTO_TEST_CASE(packed_model_runs_as_the_float_model_on_its_weights) {
  for (const std::string set : kSets) {
    const auto ck = quant::load_model(data_dir(set));
    safetensors_file ref(data_dir(set) + "/reference.safetensors");
    const auto f = reference_model(*ck, ref);
    generator q(*ck), r(*f);
    const int64_t vocab = ck->config.vocab_size;
    for (const auto& c : load_golden(base_set(set))) {
      const auto lq = q.prompt_logits(c.prompt), lr = r.prompt_logits(c.prompt);
      BOOST_REQUIRE_EQUAL(lq.size(), lr.size());
      for (size_t pos = 0; pos < c.prompt.size(); ++pos) {
        const double err = row_error(lq.data() + pos * vocab, lr.data() + pos * vocab, vocab);
        BOOST_TEST(err <= 1e-4, set << " " << c.id << " position " << pos << ": relative error " << err);
      }
      generate_options o;
      o.max_tokens = 12;
      o.sampling.temperature = 0.0f;
      BOOST_TEST(q.generate(c.prompt, o).ids == r.generate(c.prompt, o).ids, boost::test_tools::per_element());
    }
  }
}

// A 4-bit model kept as u4 (the default) and the same model widened to INT8 codes
// (four_bit_codes false): the same logits bit for bit, in about half the bytes of the linear layers.
BOOST_AUTO_TEST_CASE(four_bit_weights_give_the_int8_codes_logits_in_half_the_bytes) {
  for (const std::string set : {"gptq/tiny-dense-gptq4", "awq/tiny-dense-awq", "gptq/tiny-moe-gptq4"}) {
    const auto u4 = quant::load_model(data_dir(set));
    quant::load_options o;
    o.four_bit_codes = false;
    const auto i8 = quant::load_model(data_dir(set), o);
    size_t u4_bytes = 0, i8_bytes = 0, zero_bytes = 0;
    for (const auto& t : expected_tensors(u4->config)) {
      const kernels::weight_ref* a = weight_slot(const_cast<model_weights&>(u4->weights), t);
      const kernels::weight_ref* b = weight_slot(const_cast<model_weights&>(i8->weights), t);
      if (!a || !a->scales) continue;
      BOOST_TEST((a->type == dtype::u4 && b->type == dtype::i8), t.name);
      u4_bytes += a->bytes();
      i8_bytes += b->bytes();
      zero_bytes += static_cast<size_t>(a->scale_rows() * a->scale_cols());
    }
    BOOST_TEST(u4_bytes * 2 == i8_bytes, set);
    BOOST_TEST(i8->weights.bytes - u4->weights.bytes == u4_bytes - zero_bytes, set);  // the zeros are read too
    generator gu(*u4), gi(*i8);
    for (const auto& c : load_golden(base_set(set))) {
      const auto lu = gu.prompt_logits(c.prompt), li = gi.prompt_logits(c.prompt);
      BOOST_REQUIRE_EQUAL(lu.size(), li.size());
      BOOST_TEST(std::memcmp(lu.data(), li.data(), lu.size() * sizeof(float)) == 0, set << " " << c.id);
      generate_options g;
      g.max_tokens = 8;
      g.sampling.temperature = 0.0f;
      BOOST_TEST(gu.generate(c.prompt, g).ids == gi.generate(c.prompt, g).ids, boost::test_tools::per_element());
    }
  }
}

// `troupe quantize --method int8` on a GPTQ or AWQ model writes Troupe's INT8 layout, which loads
// in place as the same codes and scales.
BOOST_AUTO_TEST_CASE(packed_model_written_as_troupe_int8_reloads_the_same_weights) {
  temp_dir dir("packed_write");
  int k = 0;
  for (const std::string set : {"gptq/tiny-dense-gptq4", "awq/tiny-dense-awq"}) {
    const std::string out = dir.str(std::to_string(k++));
    const auto ck = quant::load_model(data_dir(set));
    quant::write_quantized_checkpoint(*ck, data_dir(set), out);
    BOOST_TEST(read_json(fs::path(out) / "config.json")["quantization_config"]["quant_method"] == "troupe_int8");
    const auto back = quant::load_model(out);
    safetensors_file ref(data_dir(set) + "/reference.safetensors");
    int64_t checked = 0;
    BOOST_TEST(differing_weights(*back, ref, checked) == 0, set);
    BOOST_TEST(checked > 0);
  }
}

// Published GPTQ / AWQ models of 8B and up come in shards with model.safetensors.index.json: a
// layer's qweight, qzeros and scales may sit in different files.
BOOST_AUTO_TEST_CASE(sharded_packed_checkpoints_load_the_same_weights) {
  temp_dir dir("packed_shards");
  for (const std::string set : {"gptq/tiny-dense-gptq8", "awq/tiny-dense-awq"}) {
    const fs::path d = dir.path / fs::path(set).filename();
    copy_dir(data_dir(set), d);
    tensor_bytes keep;
    tensor_list all;
    {
      safetensors_file in((d / "model.safetensors").string());
      keep.reserve(in.tensors().size());
      for (const auto& t : in.tensors()) {
        keep.emplace_back(t.data, t.data + t.bytes());
        all.push_back({t.name, t.type, t.shape, keep.back().data(), {}});
      }
    }
    fs::remove(d / "model.safetensors");
    // Alternate tensors between the shards (sorted by name: qweight, qzeros and scales of a layer
    // are neighbours, so they land in different files).
    tensor_list shard[2];
    json index = {{"metadata", json::object()}, {"weight_map", json::object()}};
    const std::string names[2] = {"model-00001-of-00002.safetensors", "model-00002-of-00002.safetensors"};
    for (size_t i = 0; i < all.size(); ++i) {
      shard[i % 2].push_back(all[i]);
      index["weight_map"][all[i].name] = names[i % 2];
    }
    for (int k = 0; k < 2; ++k) write_safetensors((d / names[k]).string(), shard[k]);
    write_json(d / "model.safetensors.index.json", index);
    const auto ck = quant::load_model(d.string());
    safetensors_file ref(data_dir(set) + "/reference.safetensors");
    int64_t checked = 0;
    BOOST_TEST(differing_weights(*ck, ref, checked) == 0, set);
    BOOST_TEST(checked > 0);
  }
}

namespace {

struct config_edit {
  std::string field;
  json value;
  errc code;
};

// Each edit of `set`'s quantization_config, alone, is refused with its code, naming the field.
void expect_refused(const std::string& set, const std::vector<config_edit>& edits, const temp_dir& dir) {
  int k = 0;
  for (const auto& e : edits) {
    const fs::path d = dir.path / std::to_string(k++);
    copy_dir(data_dir(set), d);
    json c = read_json(d / "config.json");
    if (e.value.is_null())
      c["quantization_config"].erase(e.field);
    else
      c["quantization_config"][e.field] = e.value;
    write_json(d / "config.json", c);
    expect_error([&] { quant::load_model(d.string()); }, e.code,
                 {"quantization_config." + e.field, "config.json", e.value.is_null() ? "missing" : e.value.dump()});
  }
}

}  // namespace

BOOST_AUTO_TEST_CASE(bad_gptq_configs_name_the_field) {
  temp_dir dir("gptq_bad_config");
  expect_refused("gptq/tiny-dense-gptq8",
                 {{"bits", 3, errc::unsupported},
                  {"bits", "8", errc::invalid_checkpoint},
                  {"bits", nullptr, errc::invalid_checkpoint},
                  {"group_size", 16, errc::unsupported},
                  {"group_size", nullptr, errc::invalid_checkpoint},
                  {"lm_head", true, errc::unsupported},
                  {"checkpoint_format", "marlin", errc::unsupported},
                  {"desc_act", "no", errc::invalid_checkpoint},
                  {"pack_dtype", "int16", errc::unsupported},
                  {"sym", "yes", errc::invalid_checkpoint},
                  {"dynamic", {{"model.layers.0.mlp.down_proj", {{"bits", 4}}}}, errc::unsupported}},
                 dir);
}

BOOST_AUTO_TEST_CASE(bad_awq_configs_name_the_field) {
  temp_dir dir("awq_bad_config");
  expect_refused("awq/tiny-dense-awq",
                 {{"bits", 8, errc::unsupported},
                  {"group_size", 100, errc::unsupported},
                  {"zero_point", false, errc::unsupported},
                  {"version", "gemv", errc::unsupported},
                  {"bits", nullptr, errc::invalid_checkpoint}},
                 dir);
}

BOOST_AUTO_TEST_CASE(bad_gptq_tensors_name_the_tensor) {
  temp_dir dir("gptq_bad_tensor");
  int k = 0;
  auto broken = [&](const std::string& set, auto&& edit) {
    const fs::path d = dir.path / std::to_string(k++);
    copy_dir(data_dir(set), d);
    edit_tensors(d, edit);
    return d.string();
  };
  using tensors = tensor_list;
  using buffers = tensor_bytes;
  // A missing zero-point tensor.
  auto d = broken("gptq/tiny-dense-gptq8", [](tensors& ts, buffers&) {
    std::erase_if(ts, [](const tensor_to_write& t) { return t.name == kQ + ".qzeros"; });
  });
  expect_error([&] { quant::load_model(d); }, errc::invalid_checkpoint, {"missing tensor '" + kQ + ".qzeros'", "[2, 32]"});
  // qweight of the wrong shape (packed as if 4-bit).
  d = broken("gptq/tiny-dense-gptq8", [](tensors& ts, buffers&) { find_tensor(ts, kQ + ".qweight").shape = {8, 256}; });
  expect_error([&] { quant::load_model(d); }, errc::invalid_checkpoint, {kQ + ".qweight", "[8, 256]", "[16, 128]"});
  // Scales of an integer dtype.
  d = broken("gptq/tiny-dense-gptq8", [](tensors& ts, buffers& keep) {
    auto& t = find_tensor(ts, kQ + ".scales");
    keep.emplace_back(static_cast<size_t>(2 * 128 * 4), 0);
    t.type = dtype::i32;
    t.data = keep.back().data();
  });
  expect_error([&] { quant::load_model(d); }, errc::invalid_checkpoint, {kQ + ".scales", "I32", "F16"});
  // An act-order g_idx (two columns swapped between groups).
  d = broken("gptq/tiny-dense-gptq8", [](tensors& ts, buffers&) {
    auto* g = reinterpret_cast<int32_t*>(const_cast<void*>(find_tensor(ts, kQ + ".g_idx").data));
    std::swap(g[0], g[40]);
  });
  expect_error([&] { quant::load_model(d); }, errc::unsupported, {kQ + ".g_idx", "act-order", "column 0"});
  // 8-bit zero points away from 128 (asymmetric): code - zero leaves INT8.
  d = broken("gptq/tiny-dense-gptq8", [](tensors& ts, buffers&) {
    auto& t = find_tensor(ts, kQ + ".qzeros");
    std::memset(const_cast<void*>(t.data), 0, static_cast<size_t>(2 * 32 * 4));  // stored 0: zero point 1
  });
  expect_error([&] { quant::load_model(d); }, errc::unsupported, {kQ + ".qweight", "outside [-128, 127]", "zero point 1"});
  // AWQ codes stored in GPTQ's orientation ([in / 8, out] instead of [in, out / 8]).
  d = broken("awq/tiny-dense-awq", [](tensors& ts, buffers&) { find_tensor(ts, kQ + ".qweight").shape = {8, 128}; });
  expect_error([&] { quant::load_model(d); }, errc::invalid_checkpoint, {kQ + ".qweight", "[8, 128]", "[64, 16]"});
  // A packed embedding table (Troupe reads embeddings a row at a time, as floats).
  d = broken("gptq/tiny-dense-gptq8", [](tensors& ts, buffers&) {
    auto t = find_tensor(ts, kQ + ".qweight");
    t.name = "model.embed_tokens.qweight";
    ts.push_back(t);
  });
  expect_error([&] { quant::load_model(d); }, errc::unsupported, {"model.embed_tokens.weight", "embedding tables must stay"});
  // A GPTQ tensor the model does not have.
  d = broken("gptq/tiny-dense-gptq4", [](tensors& ts, buffers&) {
    auto t = find_tensor(ts, kQ + ".scales");
    t.name = "model.layers.1.self_attn.q_proj.bias";
    ts.push_back(t);
  });
  expect_error([&] { quant::load_model(d); }, errc::invalid_checkpoint, {"unexpected tensor 'model.layers.1.self_attn.q_proj.bias'", "qzeros"});
}

namespace {

// One packed linear layer "p.weight" of `rows` x `cols` in `dir`/model.safetensors, its codes,
// zeros and float32 scales random (seed), and what the format's formula gives for each weight
// (scale * (code - zero), exact in float32: scales of 4 significant bits times codes of 5).
struct packed_layer {
  std::vector<uint32_t> qweight, qzeros;
  std::vector<float> scales;
  std::vector<float> want;  // [rows, cols]
};

packed_layer write_packed_layer(const fs::path& dir, bool awq, int64_t rows, int64_t cols, int64_t group, uint64_t seed) {
  constexpr int pack = 8;  // 4-bit codes a 32-bit word
  const int64_t groups = (cols + group - 1) / group;
  std::mt19937_64 rng(seed);
  packed_layer l;
  auto word = [&] { return static_cast<uint32_t>(rng()); };
  // GPTQ: [cols / 8, rows], input c of output r in bits 4 (c % 8) of word [c / 8][r]; AWQ: [cols, rows / 8],
  // output 8p + m of input c in nibble [0, 4, 1, 5, 2, 6, 3, 7][m] of word [c][p].
  l.qweight.resize(static_cast<size_t>(awq ? cols * (rows / pack) : (cols / pack) * rows));
  l.qzeros.resize(static_cast<size_t>(groups * (rows / pack)));
  for (auto& w : l.qweight) w = word();
  for (auto& w : l.qzeros) w = word();
  for (int64_t i = 0; i < groups * rows; ++i)
    l.scales.push_back(std::ldexp(1.0f + static_cast<float>(rng() % 8) / 8.0f, -6 - static_cast<int>(rng() % 4)));
  constexpr int awq_slot[pack] = {0, 4, 1, 5, 2, 6, 3, 7};
  for (int64_t r = 0; r < rows; ++r)
    for (int64_t c = 0; c < cols; ++c) {
      const int64_t g = c / group;
      const uint32_t zw = l.qzeros[static_cast<size_t>(g * (rows / pack) + r / pack)];
      int code, zero;
      if (awq) {
        code = static_cast<int>((l.qweight[static_cast<size_t>(c * (rows / pack) + r / pack)] >> (4 * awq_slot[r % pack])) & 15);
        zero = static_cast<int>((zw >> (4 * awq_slot[r % pack])) & 15);
      } else {
        code = static_cast<int>((l.qweight[static_cast<size_t>((c / pack) * rows + r)] >> (4 * (c % pack))) & 15);
        zero = static_cast<int>((zw >> (4 * (r % pack))) & 15) + 1;  // the "gptq" (v1) format stores zero - 1
      }
      l.want.push_back(l.scales[static_cast<size_t>(g * rows + r)] * static_cast<float>(code - zero));
    }
  const std::vector<int64_t> wshape = awq ? std::vector<int64_t>{cols, rows / pack} : std::vector<int64_t>{cols / pack, rows};
  write_safetensors((dir / "model.safetensors").string(),
                    {{"p.qweight", dtype::i32, wshape, l.qweight.data(), {}},
                     {"p.qzeros", dtype::i32, {groups, rows / pack}, l.qzeros.data(), {}},
                     {"p.scales", dtype::f32, {groups, rows}, l.scales.data(), {}}});
  return l;
}

quant::quant_config four_bit_config(int64_t group) {
  quant::quant_config q;
  q.kind = quant::method::int8;
  q.bits = 4;
  q.group_size = static_cast<int32_t>(group);
  return q;
}

}  // namespace

// Kernels pack u4 codes 16 inputs to a word, so a 4-bit weight whose inputs are a multiple of 8
// but not of 16 (which GPTQ and AWQ both allow) becomes INT8 codes: the same values, one byte each.
// Inputs a multiple of 16 beside them stay u4; both equal the format's formula bit for bit.
BOOST_AUTO_TEST_CASE(four_bit_weights_of_inputs_not_a_multiple_of_16_load_as_int8_codes) {
  temp_dir dir("u4_fallback");
  struct shape {
    bool awq;
    int64_t rows, cols, group;
    dtype want;
  };
  const shape shapes[] = {{false, 16, 40, 32, dtype::i8}, {false, 24, 48, 32, dtype::u4}, {false, 8, 24, 128, dtype::i8},
                          {true, 16, 40, 32, dtype::i8},  {true, 16, 48, 32, dtype::u4},  {true, 8, 8, 32, dtype::i8}};
  uint64_t seed = 1;
  for (const shape& s : shapes) {
    const std::string what = std::string(s.awq ? "AWQ " : "GPTQ ") + std::to_string(s.rows) + "x" + std::to_string(s.cols);
    const fs::path d = dir.path / std::to_string(seed);
    fs::create_directories(d);
    const packed_layer l = write_packed_layer(d, s.awq, s.rows, s.cols, s.group, seed++);
    const troupe::weight_files wf = troupe::open_weights(d);
    const quant::quant_config q = four_bit_config(s.group);
    const quant::quantized_weight w = s.awq ? quant::read_awq_weight(wf, "p.weight", s.rows, s.cols, q)
                                            : quant::read_gptq_weight(wf, "p.weight", s.rows, s.cols, q);
    BOOST_TEST(to_string(w.ref.type) == to_string(s.want), what);
    int64_t bad = 0;
    for (int64_t r = 0; r < s.rows; ++r)
      for (int64_t c = 0; c < s.cols; ++c) {
        const float got = kernels::dequantized_at(w.ref, r, c), want = l.want[static_cast<size_t>(r * s.cols + c)];
        bad += std::memcmp(&got, &want, sizeof got) != 0;
      }
    BOOST_TEST(bad == 0, what << ": " << bad << " weights differ from the format's formula");
    // The matmul agrees with the float32 product on those values (every back-end is checked bit for
    // bit against the reference in kernels_quant_test; here: the weight is one it accepts).
    std::vector<float> x(static_cast<size_t>(s.cols)), y(static_cast<size_t>(s.rows));
    for (int64_t c = 0; c < s.cols; ++c) x[static_cast<size_t>(c)] = static_cast<float>(c % 7) - 3.0f;
    kernels::matmul(x.data(), 1, w.ref, y.data());
    for (int64_t r = 0; r < s.rows; ++r) {
      double want = 0;
      for (int64_t c = 0; c < s.cols; ++c) want += static_cast<double>(x[static_cast<size_t>(c)]) * l.want[static_cast<size_t>(r * s.cols + c)];
      BOOST_TEST(std::abs(y[static_cast<size_t>(r)] - want) <= 1e-5 * (1 + std::abs(want)), what << " row " << r);
    }
  }
}

// Shapes that the 4-bit words cannot hold are refused by name: GPTQ packs 8 inputs (and 8 outputs'
// zeros) a word, AWQ 8 outputs.
BOOST_AUTO_TEST_CASE(four_bit_weights_that_do_not_pack_into_words_are_refused) {
  temp_dir dir("u4_refused");
  write_packed_layer(dir.path, false, 16, 48, 32, 7);
  const troupe::weight_files wf = troupe::open_weights(dir.path);
  const quant::quant_config q = four_bit_config(32);
  expect_error([&] { quant::read_gptq_weight(wf, "p.weight", 16, 36, q); }, errc::unsupported,
               {"p.qweight", "16 x 36", "does not pack into 4-bit GPTQ words", "multiples of 8"});
  expect_error([&] { quant::read_gptq_weight(wf, "p.weight", 12, 48, q); }, errc::unsupported,
               {"p.qweight", "12 x 48", "does not pack into 4-bit GPTQ words"});
  expect_error([&] { quant::read_awq_weight(wf, "p.weight", 12, 48, q); }, errc::unsupported,
               {"p.qweight", "12 outputs", "does not pack into 4-bit AWQ words", "multiple of 8"});
}
