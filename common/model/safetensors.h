// Safetensors: memory-mapped reading and plain writing of `.safetensors` files, and the
// Hugging Face folder form (`model.safetensors` or a sharded `model.safetensors.index.json`).
//
// Reading never copies tensor bytes: a TensorView points into the read-only mapping, which
// lives as long as any SafetensorsFile handle (shared_ptr) that owns it.
#pragma once

#include <cstdint>
#include <map>
#include <memory>
#include <string>
#include <vector>

namespace rootspec {

enum class TensorDtype { F32, F16, BF16, Other };

const char* dtype_name(TensorDtype dtype);  // "F32", "F16", "BF16"
int dtype_size(TensorDtype dtype);          // bytes per element; asserts a supported dtype

struct TensorView {
  std::string name;
  std::string file;  // the .safetensors file holding it (for error messages)
  TensorDtype dtype = TensorDtype::Other;
  std::string dtype_text;  // as written in the header ("I64" for an unsupported one)
  std::vector<int64_t> shape;
  const void* data = nullptr;  // inside the mapping
  size_t nbytes = 0;
};

class SafetensorsFile {
 public:
  // Maps `path` read-only and parses its header; throws naming the file for an unreadable or
  // truncated file, a bad header, or tensor offsets past the end of the file.
  explicit SafetensorsFile(const std::string& path);
  ~SafetensorsFile();
  SafetensorsFile(const SafetensorsFile&) = delete;
  SafetensorsFile& operator=(const SafetensorsFile&) = delete;

  const std::string& path() const { return path_; }
  const TensorView* find(const std::string& name) const;  // nullptr when absent
  const std::map<std::string, TensorView>& tensors() const { return tensors_; }
  // Drops the mapped pages of one tensor from resident memory (after it was converted).
  void release(const TensorView& t) const;

 private:
  std::string path_;
  void* base_ = nullptr;
  size_t size_ = 0;
  std::map<std::string, TensorView> tensors_;
};

// The tensors of a safetensors file's bytes (header length, JSON header, data), pointing into
// `bytes`; throws std::runtime_error naming `path` for a truncated file, a bad header, a
// negative dimension, a shape whose element count overflows, offsets past the end, or a byte
// count that does not match the shape and dtype. SafetensorsFile parses its mapping with it.
std::map<std::string, TensorView> parse_safetensors(const uint8_t* bytes, size_t size,
                                                    const std::string& path);

// A model folder's weights: model.safetensors, or the shards listed by
// model.safetensors.index.json ("weight_map": tensor → shard file).
class SafetensorsFolder {
 public:
  explicit SafetensorsFolder(const std::string& dir);
  // The tensor, or throws "<file>: tensor '<name>' is missing".
  const TensorView& get(const std::string& name) const;
  bool has(const std::string& name) const;
  // Shared handle of the file that holds `t` (keeps its mapping alive).
  std::shared_ptr<const SafetensorsFile> file_of(const TensorView& t) const;
  const std::string& description() const { return description_; }  // file or index path

 private:
  std::string description_;
  std::map<std::string, std::shared_ptr<SafetensorsFile>> files_;  // path → file
  std::map<std::string, std::string> weight_map_;                  // tensor → path
};

// One tensor to write: data holds shape-product × dtype_size bytes.
struct TensorToWrite {
  std::string name;
  TensorDtype dtype = TensorDtype::F32;
  std::vector<int64_t> shape;
  std::vector<uint8_t> data;
};

// Writes a .safetensors file (header padded to 8 bytes, tensors in the given order); throws
// naming the path on an I/O error.
void write_safetensors(const std::string& path, const std::vector<TensorToWrite>& tensors,
                       const std::map<std::string, std::string>& metadata = {});

// fp32 → fp16 / bf16 (round to nearest even) and back, for writing and tests.
uint16_t float_to_half(float f);
uint16_t float_to_bf16(float f);
float half_to_float(uint16_t h);
float bf16_to_float(uint16_t b);

}  // namespace rootspec
