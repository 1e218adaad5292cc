// weight_files: the safetensors files of a Hugging Face directory, single or sharded.
#include "runtime/model/weight_files.hpp"

#include <filesystem>
#include <fstream>
#include <sstream>

#include <nlohmann/json.hpp>

#include "runtime/core/error.hpp"

namespace troupe {

namespace fs = std::filesystem;
using json = nlohmann::json;

namespace {
constexpr const char* single_name = "model.safetensors";
constexpr const char* index_name = "model.safetensors.index.json";
}  // namespace

std::string read_text(const fs::path& p) {
  std::ifstream in(p, std::ios::binary);
  if (!in) throw_error(errc::io_error, "cannot read " + p.string());
  std::ostringstream s;
  s << in.rdbuf();
  if (in.bad()) throw_error(errc::io_error, "cannot read " + p.string());
  return s.str();
}

bool is_weight_file(const std::string& file_name) {
  const std::string ext = ".safetensors";
  return file_name == index_name ||
         (file_name.size() > ext.size() && file_name.compare(file_name.size() - ext.size(), ext.size(), ext) == 0);
}

std::string weight_files::stored_name(const std::string& causal_lm) const {
  constexpr std::string_view prefix = "model.";
  return bare_model && causal_lm.compare(0, prefix.size(), prefix) == 0 ? causal_lm.substr(prefix.size()) : causal_lm;
}

const tensor_info* weight_files::find(const std::string& causal_lm, std::string& file_path) const {
  const std::string name = stored_name(causal_lm);
  if (index_path.empty()) {
    file_path = files[0].path();
    return files[0].find(name);
  }
  auto it = placement.find(name);
  if (it == placement.end()) {
    file_path = index_path;
    return nullptr;
  }
  file_path = files[it->second].path();
  return files[it->second].find(name);
}

namespace {
// No "model.embed_tokens.weight" but an "embed_tokens.weight": the tensors of Qwen3Model alone.
void detect_bare_model(weight_files& w) {
  std::string where;
  w.bare_model = false;
  if (w.find("model.embed_tokens.weight", where)) return;
  w.bare_model = true;  // find() now looks for "embed_tokens.weight"
  if (!w.find("model.embed_tokens.weight", where)) w.bare_model = false;  // neither: the loader's error
}
}  // namespace

weight_files open_weights(const fs::path& root, residency where) {
  weight_files w;
  std::error_code ec;
  if (fs::exists(root / single_name, ec)) {
    w.files.emplace_back((root / single_name).string(), where);
    detect_bare_model(w);
    return w;
  }
  const fs::path index = root / index_name;
  if (!fs::exists(index, ec)) {
    std::string why = root.string() + ": no " + single_name + " and no " + index_name +
                      "; expected the weights in safetensors format";
    if (fs::exists(root / "pytorch_model.bin", ec) || fs::exists(root / "pytorch_model.bin.index.json", ec))
      why += " (pytorch_model.bin checkpoints are not supported: convert them to safetensors)";
    throw_error(errc::invalid_checkpoint, why);
  }
  w.index_path = index.string();
  json j;
  try {
    j = json::parse(read_text(index));
  } catch (const json::exception& e) {
    throw_error(errc::invalid_checkpoint, w.index_path + ": not valid JSON (" + e.what() + ")");
  }
  if (!j.is_object() || !j.contains("weight_map") || !j["weight_map"].is_object())
    throw_error(errc::invalid_checkpoint, w.index_path + ": field 'weight_map' is missing; expected an object {tensor: file}");
  std::unordered_map<std::string, size_t> ids;
  std::vector<std::string> names;
  for (auto it = j["weight_map"].begin(); it != j["weight_map"].end(); ++it) {
    if (!it.value().is_string())
      throw_error(errc::invalid_checkpoint, w.index_path + ": weight_map entry for tensor '" + it.key() + "' is not a file name");
    const std::string file = it.value().get<std::string>();
    if (file.empty() || file.find('/') != std::string::npos || file == "." || file == "..")
      throw_error(errc::invalid_checkpoint, w.index_path + ": weight_map places tensor '" + it.key() + "' in '" + file +
                                                "'; expected a file name in " + root.string());
    auto [pos, added] = ids.emplace(file, names.size());
    if (added) {
      if (!fs::exists(root / file, ec))
        throw_error(errc::invalid_checkpoint, w.index_path + ": shard file '" + file + "' (holding tensor '" + it.key() +
                                                  "') does not exist; expected " + (root / file).string());
      names.push_back(file);
    }
    w.placement.emplace(it.key(), pos->second);
  }
  if (names.empty()) throw_error(errc::invalid_checkpoint, w.index_path + ": weight_map is empty; expected the model's tensors");
  w.files.reserve(names.size());
  for (const auto& n : names) w.files.emplace_back((root / n).string(), where);
  detect_bare_model(w);
  return w;
}


}  // namespace troupe
