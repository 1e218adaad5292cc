// tokenizer.json reader (see tokenizer_json.hpp).
#include "runtime/tokenizer/tokenizer_json.hpp"

#include <nlohmann/json.hpp>

#include "runtime/core/error.hpp"
#include "runtime/core/mapped_file.hpp"
#include "runtime/tokenizer/byte_level.hpp"
#include "runtime/tokenizer/json_scan.hpp"
#include "runtime/tokenizer/pretokenizer.hpp"
#include "runtime/tokenizer/utf8.hpp"

namespace troupe::tok {

namespace {

using json = nlohmann::json;

struct reader {
  std::string path;
  tokenizer_data& out;

  [[noreturn]] void unsupported(const std::string& field, const json& value, const std::string& supported) {
    throw_error(errc::unsupported, path + ": " + field + " is " + value.dump() + "; Troupe supports " + supported);
  }

  json parse_slice(std::string_view text, const std::string& field) {
    try {
      return json::parse(text);
    } catch (const json::exception& e) {
      throw_error(errc::invalid_checkpoint, path + ": " + field + ": " + e.what());
    }
  }

  static bool is_empty_string_or_null(const json& v) { return v.is_null() || (v.is_string() && v.get<std::string>().empty()); }

  void check_normalizer(const json& n) {
    if (n.is_null()) return;
    if (n.is_object() && n.value("type", "") == "NFC") {
      out.nfc = true;
      return;
    }
    unsupported("normalizer", n, "null or NFC");
  }

  void check_byte_level(const json& b, const std::string& field, bool regex_expected) {
    if (!b.is_object() || b.value("type", "") != "ByteLevel") unsupported(field, b, "ByteLevel");
    if (b.value("add_prefix_space", false)) unsupported(field + ".add_prefix_space", b["add_prefix_space"], "false");
    if (b.contains("use_regex") && b["use_regex"].get<bool>() != regex_expected)
      unsupported(field + ".use_regex", b["use_regex"], regex_expected ? "true" : "false");
  }

  // null, ByteLevel (nothing to add), TemplateProcessing, or a Sequence of those.
  void read_post_processor(const json& p, const std::string& field) {
    if (p.is_null()) return;
    const std::string type = p.is_object() ? p.value("type", "") : "";
    if (type == "ByteLevel") return check_byte_level(p, field, p.value("use_regex", true));
    if (type == "Sequence" && p.contains("processors") && p["processors"].is_array()) {
      for (size_t i = 0; i < p["processors"].size(); ++i)
        read_post_processor(p["processors"][i], field + ".processors[" + std::to_string(i) + "]");
      return;
    }
    if (type != "TemplateProcessing")
      unsupported(field, p, "null, ByteLevel, TemplateProcessing or a Sequence of them");
    // Hugging Face's single-text template: special tokens around the one sequence "A".
    if (!p.contains("single") || !p["single"].is_array())
      throw_error(errc::invalid_checkpoint, path + ": " + field + ".single is missing; expected the template's pieces");
    const json specials = p.value("special_tokens", json::object());
    bool seen_text = false;
    for (const auto& piece : p["single"]) {
      if (piece.is_object() && piece.contains("Sequence")) {
        if (seen_text || piece["Sequence"].value("id", "") != "A")
          unsupported(field + ".single", p["single"], "one sequence \"A\" between special tokens");
        seen_text = true;
      } else if (piece.is_object() && piece.contains("SpecialToken") && piece["SpecialToken"].is_object()) {
        const std::string name = piece["SpecialToken"].value("id", "");
        const json* ids = specials.is_object() && specials.contains(name) && specials[name].is_object() &&
                                  specials[name].contains("ids") && specials[name]["ids"].is_array()
                              ? &specials[name]["ids"]
                              : nullptr;
        if (!ids)
          throw_error(errc::invalid_checkpoint, path + ": " + field + ".single names special token '" + name +
                                                    "', which special_tokens does not list with its ids");
        for (const auto& id : *ids) {
          if (!id.is_number_integer() || id.get<int64_t>() < 0 || id.get<int64_t>() > INT32_MAX)
            throw_error(errc::invalid_checkpoint, path + ": " + field + ".special_tokens['" + name + "'].ids holds " +
                                                      id.dump() + "; expected token ids");
          (seen_text ? out.special_suffix : out.special_prefix).push_back(static_cast<int32_t>(id.get<int64_t>()));
        }
      } else {
        unsupported(field + ".single", piece, "{\"Sequence\": ...} or {\"SpecialToken\": ...} pieces");
      }
    }
    if (!seen_text) unsupported(field + ".single", p["single"], "a template with the sequence \"A\" in it");
  }

  void check_pre_tokenizer(const json& p) {
    const json* split = nullptr;
    const json* byte_level = nullptr;
    if (p.is_object() && p.value("type", "") == "Sequence" && p.contains("pretokenizers") &&
        p["pretokenizers"].is_array() && p["pretokenizers"].size() == 2) {
      split = &p["pretokenizers"][0];
      byte_level = &p["pretokenizers"][1];
    } else if (p.is_object() && p.value("type", "") == "ByteLevel") {
      // GPT-2 style: ByteLevel with its own regex.
      check_byte_level(p, "pre_tokenizer", true);
      out.split = tokenizer_data::split_kind::regex;
      out.split_pattern = R"('s|'t|'re|'ve|'m|'ll|'d| ?\p{L}+| ?\p{N}+| ?[^\s\p{L}\p{N}]+|\s+(?!\S)|\s+)";
      return;
    } else {
      unsupported("pre_tokenizer", p, "Sequence[Split(Regex, Isolated), ByteLevel] or ByteLevel");
    }
    const json& s = *split;
    if (!s.is_object() || s.value("type", "") != "Split" || !s.contains("pattern") || !s["pattern"].is_object() ||
        !s["pattern"].contains("Regex") || !s["pattern"]["Regex"].is_string())
      unsupported("pre_tokenizer.pretokenizers[0]", s, "Split with a Regex pattern");
    if (s.value("behavior", "") != "Isolated")  // (const operator[] on a missing key is undefined)
      unsupported("pre_tokenizer Split behavior", s.contains("behavior") ? s["behavior"] : json(), "Isolated");
    if (s.value("invert", false)) unsupported("pre_tokenizer Split invert", s["invert"], "false");
    check_byte_level(*byte_level, "pre_tokenizer.pretokenizers[1]", false);
    out.split_pattern = s["pattern"]["Regex"].get<std::string>();
    out.split = out.split_pattern == qwen_pattern ? tokenizer_data::split_kind::qwen : tokenizer_data::split_kind::regex;
  }

  void check_model_option(std::string_view key, const json& v) {
    std::string k(key);
    if (k == "type") {
      if (v != "BPE") unsupported("model.type", v, "BPE");
    } else if (k == "dropout") {
      if (!v.is_null()) unsupported("model.dropout", v, "null");
    } else if (k == "continuing_subword_prefix" || k == "end_of_word_suffix") {
      if (!is_empty_string_or_null(v)) unsupported("model." + k, v, "\"\" or null");
    } else if (k == "byte_fallback") {
      if (v != false) unsupported("model.byte_fallback", v, "false");
    } else if (k == "ignore_merges") {
      if (!v.is_boolean()) unsupported("model.ignore_merges", v, "a boolean");
      out.bpe.set_ignore_merges(v.get<bool>());
    }
    // unk_token and fuse_unk cannot matter: byte-level BPE has a token for every byte.
  }

  void read_added_tokens(const json& arr) {
    if (!arr.is_array()) unsupported("added_tokens", arr, "an array");
    for (size_t i = 0; i < arr.size(); ++i) {
      const json& t = arr[i];
      std::string where = "added_tokens[" + std::to_string(i) + "]";
      if (!t.is_object() || !t.contains("id") || !t["id"].is_number_integer() || !t.contains("content") ||
          !t["content"].is_string())
        throw_error(errc::invalid_checkpoint, path + ": " + where + " needs an integer id and a string content");
      for (const char* flag : {"single_word", "lstrip", "rstrip", "normalized"})
        if (t.value(flag, false)) unsupported(where + "." + flag, t[flag], "false");
      added_token a;
      const int64_t id = t["id"].get<int64_t>();
      if (id < 0 || id > INT32_MAX)
        throw_error(errc::invalid_checkpoint, path + ": " + where + " has id " + std::to_string(id) +
                                                  "; expected one in [0, 2147483647]");
      a.id = static_cast<int32_t>(id);
      a.content = t["content"].get<std::string>();
      a.special = t.value("special", false);
      out.added.push_back(std::move(a));
    }
  }

  // Entries are decoded in batches so the lookup-table slots can be prefetched before insertion.
  void read_vocab(json_scanner& sc) {
    constexpr size_t batch = 256;
    struct entry {
      int32_t id;
      uint32_t off, len;
      bool byte_level;
      uint64_t hash;
    };
    std::vector<entry> entries;
    entries.reserve(batch);
    std::string arena;
    std::string scratch;
    std::string_view key;
    auto flush = [&] {
      for (entry& e : entries) {
        e.hash = bpe_model::hash_token(std::string_view(arena).substr(e.off, e.len));
        out.bpe.prefetch_token_slot(e.hash);
      }
      for (const entry& e : entries)
        out.bpe.add_token(e.id, std::string_view(arena).substr(e.off, e.len), e.byte_level, e.hash);
      entries.clear();
      arena.clear();
    };
    sc.begin_object();
    while (sc.next_member(key, scratch)) {
      std::string_view token = key;
      std::string owned;
      if (token.data() == scratch.data()) owned = scratch, token = owned;  // escaped: decoded copy
      int64_t id = sc.read_int();
      if (id < 0 || id > INT32_MAX) sc.fail("a token id in [0, 2^31)");
      entry e{static_cast<int32_t>(id), static_cast<uint32_t>(arena.size()), 0, true, 0};
      if (!alphabet_to_bytes(token, arena)) {
        // Outside the alphabet: kept as UTF-8 text for decoding, never produced by merges.
        if (find_invalid_utf8(token) != npos) sc.fail("a vocabulary token of valid UTF-8");
        arena.resize(e.off);
        arena.append(token);
        e.byte_level = false;
      }
      e.len = static_cast<uint32_t>(arena.size() - e.off);
      entries.push_back(e);
      if (entries.size() == batch) flush();
    }
    flush();
  }

  // ByteLevel alphabet string -> raw bytes, appended to `out`. The alphabet is U+0021..U+0143,
  // one or two UTF-8 bytes; anything else (including malformed UTF-8) returns false.
  static bool alphabet_to_bytes(std::string_view s, std::string& out) {
    static const byte_level& bl = byte_level::get();
    const auto* p = reinterpret_cast<const unsigned char*>(s.data());
    const size_t n = s.size();
    for (size_t i = 0; i < n;) {
      unsigned c = p[i];
      char32_t cp;
      if (c < 0x80) {
        cp = c;
        i += 1;
      } else if (c >= 0xC2 && c <= 0xC5 && i + 1 < n && (p[i + 1] & 0xC0) == 0x80) {
        cp = ((c & 0x1F) << 6) | (p[i + 1] & 0x3F);
        i += 2;
      } else {
        return false;
      }
      int b = bl.char_to_byte(cp);
      if (b < 0) return false;
      out.push_back(static_cast<char>(b));
    }
    return true;
  }

  // Merges are resolved in batches (see bpe_model::find_tokens). The merged token is usually
  // the one after the previous merge's (BPE training appends them in rank order), so that id
  // is tried first and checked; otherwise it is looked up like the parts.
  void read_merges(json_scanner& sc) {
    constexpr size_t batch = 256;
    std::string s1, s2;
    std::string arena;  // left bytes, right bytes, back to back
    std::vector<std::pair<uint32_t, uint32_t>> items;  // (offset, left length) into arena, per merge
    std::vector<uint32_t> right_len;
    std::vector<std::string_view> keys(2 * batch);
    std::vector<uint64_t> hashes(2 * batch);
    std::vector<int32_t> ids(2 * batch);
    std::vector<int32_t> merged_ids(batch);
    std::string joined;
    int32_t hint = -1;
    size_t rank = 0;
    const std::string where = path + ": model.merges";
    bpe_model& bpe = out.bpe;

    auto flush = [&] {
      size_t n = items.size();
      for (size_t k = 0; k < n; ++k) {
        std::string_view all(arena.data() + items[k].first, items[k].second + right_len[k]);
        keys[2 * k] = all.substr(0, items[k].second);
        keys[2 * k + 1] = all.substr(items[k].second);
        hashes[2 * k] = bpe_model::hash_token(keys[2 * k]);
        hashes[2 * k + 1] = bpe_model::hash_token(keys[2 * k + 1]);
      }
      bpe.find_tokens(keys.data(), hashes.data(), 2 * n, ids.data());
      for (size_t k = 0; k < n; ++k) {
        size_t r = rank - n + k;
        if (ids[2 * k] < 0 || ids[2 * k + 1] < 0)
          throw_error(errc::invalid_checkpoint, where + "[" + std::to_string(r) + "] has a part that is not in the vocabulary");
        std::string_view both(arena.data() + items[k].first, items[k].second + right_len[k]);
        int32_t merged = -1;
        if (hint >= 0 && bpe.has_id(hint) && bpe.token_bytes(hint) == both) {
          merged = hint;
        } else if (auto m = bpe.token_id(both)) {
          merged = *m;
        } else {
          throw_error(errc::invalid_checkpoint, where + "[" + std::to_string(r) + "] makes a token that is not in the vocabulary");
        }
        merged_ids[k] = merged;
        hint = merged + 1;
        bpe.prefetch_merge_slot(ids[2 * k], ids[2 * k + 1]);
      }
      for (size_t k = 0; k < n; ++k) bpe.add_merge_ids(ids[2 * k], ids[2 * k + 1], merged_ids[k]);
      items.clear();
      right_len.clear();
      arena.clear();
    };

    auto add = [&](std::string_view l, std::string_view r) {
      uint32_t off = static_cast<uint32_t>(arena.size());
      if (!alphabet_to_bytes(l, arena) || !alphabet_to_bytes(r, arena))
        throw_error(errc::unsupported, where + "[" + std::to_string(rank) + "] is not in the ByteLevel alphabet");
      items.emplace_back(off, static_cast<uint32_t>(alphabet_len(l)));
      right_len.push_back(static_cast<uint32_t>(arena.size() - off - items.back().second));
      ++rank;
      if (items.size() == batch) flush();
    };

    sc.begin_array();
    while (sc.next_element()) {
      if (sc.peek() == '[') {  // ["a", "b"] (tokenizers >= 0.20)
        sc.begin_array();
        if (!sc.next_element()) sc.fail("a merge of two strings");
        std::string_view l = sc.read_string(s1);
        if (!sc.next_element()) sc.fail("a merge of two strings");
        std::string_view r = sc.read_string(s2);
        if (sc.next_element()) sc.fail("']' after two merge parts");
        add(l, r);
      } else {  // "a b" (older files)
        std::string_view m = sc.read_string(s1);
        size_t sp = m.find(' ');
        if (sp == std::string_view::npos || m.find(' ', sp + 1) != std::string_view::npos)
          sc.fail("a merge \"left right\" with one space");
        add(m.substr(0, sp), m.substr(sp + 1));
      }
    }
    flush();
  }

  // Number of bytes an alphabet string stands for (= its number of code points).
  static size_t alphabet_len(std::string_view s) {
    size_t n = 0;
    for (unsigned char c : s) n += (c & 0xC0) != 0x80;
    return n;
  }

  void read_model(json_scanner& sc) {
    std::string scratch;
    std::string_view key;
    bool saw_vocab = false, saw_merges = false;
    sc.begin_object();
    while (sc.next_member(key, scratch)) {
      if (key == "vocab") {
        read_vocab(sc);
        saw_vocab = true;
      } else if (key == "merges") {
        if (!saw_vocab) throw_error(errc::unsupported, path + ": model.merges comes before model.vocab");
        read_merges(sc);
        saw_merges = true;
      } else {
        std::string k(key);
        json v = parse_slice(sc.skip_value(), "model." + k);
        check_model_option(k, v);
      }
    }
    if (!saw_vocab || !saw_merges)
      throw_error(errc::invalid_checkpoint, path + ": model needs both vocab and merges");
  }
};

// One top-level member of tokenizer.json, the scanner just past its key: "model" through the
// scanner, the small sections sliced out and checked with nlohmann::json, the rest skipped.
void read_section(reader& r, json_scanner& sc, const std::string& k, bool& saw_model, bool& saw_pre, bool& saw_decoder) {
  if (k == "model") {
    r.read_model(sc);
    saw_model = true;
    return;
  }
  std::string_view raw = sc.skip_value();
  if (k == "added_tokens") {
    r.read_added_tokens(r.parse_slice(raw, k));
  } else if (k == "normalizer") {
    r.check_normalizer(r.parse_slice(raw, k));
  } else if (k == "pre_tokenizer") {
    r.check_pre_tokenizer(r.parse_slice(raw, k));
    saw_pre = true;
  } else if (k == "decoder") {
    json d = r.parse_slice(raw, k);
    r.check_byte_level(d, "decoder", d.value("use_regex", true));
    saw_decoder = true;
  } else if (k == "post_processor") {
    r.read_post_processor(r.parse_slice(raw, k), k);
  }
  // version, truncation, padding: batch options Troupe does not use.
}

}  // namespace

tokenizer_data read_tokenizer_json(const std::string& path) {
  mapped_file file(path);
  std::string_view text(reinterpret_cast<const char*>(file.data()), file.size());
  // UTF-8 is checked where it matters: vocabulary and merge strings here, the rest by nlohmann.
  tokenizer_data out;
  // Sized for Qwen3 (151,643 tokens, 151,387 merges); tables grow for bigger vocabularies.
  out.bpe.reserve(160000, 160000);
  reader r{path, out};
  json_scanner sc(text, path);
  std::string scratch;
  std::string_view key;
  bool saw_model = false, saw_pre = false, saw_decoder = false;
  sc.begin_object();
  while (sc.next_member(key, scratch)) {
    std::string k(key);
    // The sections' checks read fields with nlohmann::json, which throws its own type errors for
    // a field of the wrong type ("use_regex": "yes", a decoder that is a string, ...): those are
    // this file's error too.
    try {
      read_section(r, sc, k, saw_model, saw_pre, saw_decoder);
    } catch (const json::exception& e) {
      throw_error(errc::invalid_checkpoint, path + ": " + k + ": " + e.what());
    }
  }
  if (!sc.at_end()) sc.fail("the end of the file after the top-level object");
  if (!saw_model) throw_error(errc::invalid_checkpoint, path + ": no \"model\" section");
  if (!saw_pre) throw_error(errc::unsupported, path + ": no pre_tokenizer (Troupe needs byte-level BPE)");
  if (!saw_decoder) throw_error(errc::unsupported, path + ": no decoder (Troupe needs ByteLevel)");
  out.bpe.finish(path);
  return out;
}

}  // namespace troupe::tok
