// write_quantized_checkpoint: walks the architecture's tensor list of the quantized config, takes
// codes and scales from the quantized weights and everything else from the source files as stored.
#include "runtime/quant/write.hpp"

#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <memory>

#include <nlohmann/json.hpp>

#include "runtime/core/error.hpp"
#include "runtime/model/safetensors.hpp"
#include "runtime/model/tensor_layout.hpp"
#include "runtime/quant/load.hpp"
#include "runtime/quant/packed_int.hpp"
#include "runtime/model/weight_files.hpp"

namespace troupe::quant {

namespace fs = std::filesystem;
using json = nlohmann::json;

namespace {

void check_destination(const fs::path& out, bool force) {
  std::error_code ec;
  if (!fs::exists(out, ec)) return;
  if (!fs::is_directory(out, ec)) throw_error(errc::invalid_argument, out.string() + " exists and is not a directory");
  if (fs::is_empty(out, ec)) return;
  if (!force)
    throw_error(errc::invalid_argument, out.string() + " is not empty; choose a new directory or pass --force to replace a checkpoint");
  if (!fs::exists(out / "config.json", ec))
    throw_error(errc::invalid_argument, out.string() + " is not empty and holds no config.json: refusing to replace it");
}

}  // namespace

write_summary write_quantized_checkpoint(const checkpoint& ck, const std::string& src_dir, const std::string& out_dir,
                                         bool force) {
  const quant_config q = weight_quantization(ck);
  if (q.kind == method::none)
    throw_error(errc::invalid_argument, "write_quantized_checkpoint: the model holds no quantized weights");
  const fs::path src(src_dir), out(out_dir);
  check_destination(out, force);

  json config = json::parse(read_text(src / "config.json"));
  // A GPTQ or AWQ model (stored_as says so) is rewritten in Troupe's INT8 layout (the codes it
  // loaded as), which loads in place without unpacking; any other quantized source would be
  // quantized twice.
  if (config.contains("quantization_config") && !config["quantization_config"].is_null() &&
      !(q.kind == method::int8 && !ck.stored_as.empty()))
    throw_error(errc::invalid_argument, src_dir + " is already quantized: quantize the float checkpoint");
  config["quantization_config"] = json::parse(to_json(q));
  if (!ck.config.tie_word_embeddings) config["tie_word_embeddings"] = false;

  const weight_files wf = open_weights(src);
  std::vector<tensor_to_write> tensors;
  std::vector<std::shared_ptr<const void>> keep;  // buffers the tensors point into
  write_summary summary;
  std::string where;
  for (const auto& t : expected_tensors(ck.config)) {
    const kernels::weight_ref* w = weight_slot(ck.weights, t);
    if (w && w->scales) {
      if (w->type == dtype::u4) {  // a 4-bit GPTQ / AWQ weight: Troupe's INT8 layout stores q - zero
        auto codes = std::make_shared<std::vector<int8_t>>(int8_codes_of_u4(*w));
        tensors.push_back({t.name, dtype::i8, {w->rows, w->cols}, codes->data(), {}});
        keep.push_back(codes);
      } else {
        tensors.push_back({t.name, w->type, {w->rows, w->cols}, w->data, {}});
      }
      tensors.push_back({scale_tensor_name(t.name, q.kind), dtype::f32, {w->scale_rows(), w->scale_cols()}, w->scales, {}});
      ++summary.quantized_tensors;
      continue;
    }
    // As stored: the source's bytes (an untied lm_head made from a tied embedding is quantized,
    // so every float tensor here exists in the source under its own name).
    const tensor_info* info = wf.find(t.name, where);
    if (!info) throw_error(errc::invalid_checkpoint, where + ": missing tensor '" + t.name + "'");
    tensors.push_back({t.name, info->type, info->shape, info->data, {}});
  }

  const fs::path tmp = out.parent_path() / (out.filename().string() + ".tmp-" + std::to_string(::getpid()));
  std::error_code ec;
  fs::remove_all(tmp, ec);
  fs::create_directories(tmp);
  try {
    write_safetensors((tmp / "model.safetensors").string(), tensors, {{"format", "pt"}});
    {
      std::ofstream f(tmp / "config.json");
      f << config.dump(2) << "\n";
      if (!f) throw_error(errc::io_error, "cannot write " + (tmp / "config.json").string());
    }
    for (const auto& e : fs::directory_iterator(src)) {
      const std::string name = e.path().filename().string();
      if (!e.is_regular_file() || name == "config.json" || is_weight_file(name)) continue;
      fs::copy_file(e.path(), tmp / name, fs::copy_options::overwrite_existing);
    }
    summary.weight_bytes = fs::file_size(tmp / "model.safetensors");
    if (fs::exists(out, ec)) fs::remove_all(out);
    fs::rename(tmp, out);
  } catch (const fs::filesystem_error& e) {
    fs::remove_all(tmp, ec);
    throw_error(errc::io_error, std::string("writing ") + out_dir + ": " + e.what());
  } catch (...) {
    fs::remove_all(tmp, ec);
    throw;
  }
  return summary;
}

}  // namespace troupe::quant
