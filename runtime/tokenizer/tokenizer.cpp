// troupe::tokenizer (see tokenizer.hpp). encode: validate UTF-8 once, cut the raw text at added
// tokens, NFC each stretch, split it into pre-tokens, and BPE each pre-token through the word
// cache. decode: concatenate the ids' bytes, then lossy UTF-8 as Hugging Face's ByteLevel does.
#include "runtime/tokenizer/tokenizer.hpp"

#include <cstdio>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <sstream>

#include "runtime/core/error.hpp"
#include "runtime/tokenizer/byte_level.hpp"
#include "runtime/tokenizer/hash.hpp"
#include "runtime/tokenizer/nfc.hpp"
#include "runtime/tokenizer/pretokenizer.hpp"
#include "runtime/tokenizer/tokenizer_json.hpp"
#include "runtime/tokenizer/utf8.hpp"
#include "runtime/tokenizer/word_cache.hpp"

namespace troupe {

using tok::npos;

struct tokenizer::impl {
  std::string model_dir;
  tok::tokenizer_data data;
  tok::added_token_matcher matcher;
  std::unique_ptr<tok::regex_splitter> regex;
  std::vector<int32_t> added_index;       // id -> index into data.added, -1 for vocabulary ids
  std::vector<std::string> added_bytes;   // what each added token decodes to
  std::optional<int32_t> eos, pad, bos, endoftext;
  uint32_t cache_owner = tok::next_word_cache_owner();

  size_t id_limit() const { return added_index.size(); }

  bool contains(int32_t id) const {
    if (id < 0 || static_cast<size_t>(id) >= added_index.size()) return false;
    return added_index[static_cast<size_t>(id)] >= 0 || data.bpe.has_id(id);
  }

  [[noreturn]] void bad_id(int32_t id) const {
    throw_error(errc::out_of_range, "token id " + std::to_string(id) + " is not in the vocabulary of " +
                                        model_dir + " (ids 0.." + std::to_string(id_limit() - 1) + ")");
  }

  std::string_view bytes_of(int32_t id) const {
    if (id < 0 || static_cast<size_t>(id) >= added_index.size()) bad_id(id);
    int32_t a = added_index[static_cast<size_t>(id)];
    if (a >= 0) return added_bytes[static_cast<size_t>(a)];
    if (!data.bpe.has_id(id)) bad_id(id);
    return data.bpe.token_bytes(id);
  }

  bool special(int32_t id) const {
    if (id < 0 || static_cast<size_t>(id) >= added_index.size()) return false;
    int32_t a = added_index[static_cast<size_t>(id)];
    return a >= 0 && data.added[static_cast<size_t>(a)].special;
  }

  std::optional<int32_t> lookup(std::string_view text) const {
    for (const tok::added_token& a : data.added)
      if (a.content == text) return a.id;
    return data.bpe.token_id(text);
  }

  void encode_piece(std::string_view w, tok::word_cache& cache, std::vector<int32_t>& out) const {
    if (w.size() == 1) {
      out.push_back(data.bpe.byte_id(static_cast<uint8_t>(w[0])));
      return;
    }
    if (w.size() > tok::word_cache::max_key_bytes) {
      data.bpe.encode_word(w, out);
      return;
    }
    uint64_t h = tok::hash_bytes(w);
    if (const auto* e = cache.find(cache_owner, h, w)) {
      out.insert(out.end(), e->ids, e->ids + e->num_ids);
      return;
    }
    size_t before = out.size();
    data.bpe.encode_word(w, out);
    cache.store(cache_owner, h, w, out.data() + before, out.size() - before);
  }

  void encode_segment(std::string_view segment, std::vector<int32_t>& out) const {
    std::string storage;
    std::string_view text = data.nfc ? tok::nfc_normalize(segment, storage) : segment;
    tok::word_cache& cache = tok::word_cache::local();
    switch (data.split) {
      case tok::tokenizer_data::split_kind::qwen:
        tok::qwen_split(text, [&](size_t off, size_t len) { encode_piece(text.substr(off, len), cache, out); });
        break;
      case tok::tokenizer_data::split_kind::regex: {
        std::vector<std::pair<size_t, size_t>> pieces;
        regex->split(text, pieces);
        for (auto [off, len] : pieces) encode_piece(text.substr(off, len), cache, out);
        break;
      }
      case tok::tokenizer_data::split_kind::none:
        encode_piece(text, cache, out);
        break;
    }
  }
};

namespace {

// tokenizer_config.json names special tokens as a string or as {"content": ...}.
std::optional<std::string> config_token(const nlohmann::json& cfg, const char* key) {
  auto it = cfg.find(key);
  if (it == cfg.end() || it->is_null()) return std::nullopt;
  if (it->is_string()) return it->get<std::string>();
  if (it->is_object() && it->contains("content") && (*it)["content"].is_string())
    return (*it)["content"].get<std::string>();
  return std::nullopt;
}

}  // namespace

tokenizer::tokenizer(const std::string& model_dir) : impl_(std::make_unique<impl>()) {
  namespace fs = std::filesystem;
  impl& m = *impl_;
  m.model_dir = model_dir;
  const std::string json_path = (fs::path(model_dir) / "tokenizer.json").string();
  if (!fs::exists(json_path))
    throw_error(errc::io_error, "no tokenizer.json in " + model_dir + " (a Hugging Face model directory is expected)");
  m.data = tok::read_tokenizer_json(json_path);
  if (m.data.split == tok::tokenizer_data::split_kind::regex)
    m.regex = std::make_unique<tok::regex_splitter>(m.data.split_pattern);
  m.matcher = tok::added_token_matcher(m.data.added);

  size_t limit = m.data.bpe.id_limit();
  for (const tok::added_token& a : m.data.added) limit = std::max(limit, static_cast<size_t>(a.id) + 1);
  m.added_index.assign(limit, -1);
  const tok::byte_level& bl = tok::byte_level::get();
  for (size_t i = 0; i < m.data.added.size(); ++i) {
    const tok::added_token& a = m.data.added[i];
    int32_t& slot = m.added_index[static_cast<size_t>(a.id)];
    if (slot >= 0) throw_error(errc::invalid_checkpoint, json_path + ": added token id " + std::to_string(a.id) + " appears twice");
    slot = static_cast<int32_t>(i);
    // HF's ByteLevel decoder maps a token through the byte alphabet when every character is in
    // it, and otherwise keeps the token's UTF-8 as it is.
    auto bytes = bl.decode(a.content);
    m.added_bytes.push_back(bytes ? *bytes : a.content);
  }
  for (const auto* ids : {&m.data.special_prefix, &m.data.special_suffix})
    for (int32_t id : *ids)
      if (!contains(id))
        throw_error(errc::invalid_checkpoint, json_path + ": post_processor adds token id " + std::to_string(id) +
                                                  ", which is neither in the vocabulary nor an added token");

  const std::string cfg_path = (fs::path(model_dir) / "tokenizer_config.json").string();
  if (fs::exists(cfg_path)) {
    std::ifstream in(cfg_path, std::ios::binary);
    nlohmann::json cfg;
    try {
      cfg = nlohmann::json::parse(in);
    } catch (const nlohmann::json::exception& e) {
      throw_error(errc::invalid_checkpoint, cfg_path + ": " + e.what());
    }
    auto resolve = [&](const char* key) -> std::optional<int32_t> {
      auto text = config_token(cfg, key);
      if (!text) return std::nullopt;
      auto id = m.lookup(*text);
      if (!id) throw_error(errc::invalid_checkpoint, cfg_path + ": " + key + " \"" + *text + "\" is not a token of tokenizer.json");
      return id;
    };
    m.eos = resolve("eos_token");
    m.pad = resolve("pad_token");
    m.bos = resolve("bos_token");
  }
  m.endoftext = m.lookup("<|endoftext|>");
}

tokenizer::~tokenizer() = default;
tokenizer::tokenizer(tokenizer&&) noexcept = default;
tokenizer& tokenizer::operator=(tokenizer&&) noexcept = default;

std::vector<int32_t> tokenizer::encode(std::string_view text) const {
  std::vector<int32_t> out;
  out.reserve(text.size() / 3 + 4);
  encode(text, out);
  return out;
}

std::vector<int32_t> tokenizer::encode_with_special_tokens(std::string_view text) const {
  const auto& d = impl_->data;
  std::vector<int32_t> out(d.special_prefix);
  encode(text, out);
  out.insert(out.end(), d.special_suffix.begin(), d.special_suffix.end());
  return out;
}

void tokenizer::encode(std::string_view text, std::vector<int32_t>& out) const {
  if (text.size() > UINT32_MAX)  // merge loops index bytes with 32 bits
    throw_error(errc::invalid_input, "text of " + std::to_string(text.size()) + " bytes is longer than 4 GiB");
  if (size_t bad = tok::find_invalid_utf8(text); bad != npos) {
    char hex[8];
    std::snprintf(hex, sizeof hex, "0x%02X", static_cast<unsigned>(static_cast<unsigned char>(text[bad])));
    throw_error(errc::invalid_input, "text is not valid UTF-8: bad byte " + std::string(hex) + " at byte offset " +
                                         std::to_string(bad) + " of " + std::to_string(text.size()));
  }
  const impl& m = *impl_;
  size_t pos = 0;
  while (pos < text.size()) {
    auto hit = m.matcher.empty() ? tok::added_token_matcher::match{npos, 0, -1} : m.matcher.find(text, pos);
    size_t end = hit.offset == npos ? text.size() : hit.offset;
    if (end > pos) m.encode_segment(text.substr(pos, end - pos), out);
    if (hit.offset == npos) break;
    out.push_back(hit.id);
    pos = hit.offset + hit.length;
  }
}

std::string tokenizer::decode(std::span<const int32_t> ids, bool skip_special_tokens) const {
  const impl& m = *impl_;
  std::string bytes;
  bytes.reserve(ids.size() * 4);
  for (int32_t id : ids) {
    std::string_view b = m.bytes_of(id);  // checks the id first, even when it is skipped
    if (skip_special_tokens && m.special(id)) continue;
    bytes.append(b);
  }
  if (tok::find_invalid_utf8(bytes) == npos) return bytes;
  std::string out;
  out.reserve(bytes.size() + 8);
  tok::append_lossy(out, bytes);
  return out;
}

std::string_view tokenizer::token_bytes(int32_t id) const { return impl_->bytes_of(id); }
bool tokenizer::is_special(int32_t id) const { return impl_->special(id); }
bool tokenizer::contains(int32_t id) const { return impl_->contains(id); }
std::optional<int32_t> tokenizer::eos_token_id() const { return impl_->eos; }
std::optional<int32_t> tokenizer::pad_token_id() const { return impl_->pad; }
std::optional<int32_t> tokenizer::bos_token_id() const { return impl_->bos; }
std::optional<int32_t> tokenizer::endoftext_token_id() const { return impl_->endoftext; }
std::optional<int32_t> tokenizer::token_to_id(std::string_view text) const { return impl_->lookup(text); }
size_t tokenizer::id_limit() const { return impl_->id_limit(); }
size_t tokenizer::num_merges() const { return impl_->data.bpe.num_merges(); }
const std::string& tokenizer::model_dir() const { return impl_->model_dir; }

}  // namespace troupe
