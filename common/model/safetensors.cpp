#include "safetensors.h"

#include <fcntl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cassert>
#include <cstring>
#include <fstream>
#include <stdexcept>

#include <nlohmann/json.hpp>

namespace rootspec {

namespace {

[[noreturn]] void fail(const std::string& file, const std::string& what) {
  throw std::runtime_error(file + ": " + what);
}

TensorDtype parse_dtype(const std::string& s) {
  if (s == "F32") return TensorDtype::F32;
  if (s == "F16") return TensorDtype::F16;
  if (s == "BF16") return TensorDtype::BF16;
  return TensorDtype::Other;
}

bool file_exists(const std::string& path) {
  struct stat st;
  return ::stat(path.c_str(), &st) == 0;
}

}  // namespace

const char* dtype_name(TensorDtype dtype) {
  switch (dtype) {
    case TensorDtype::F32:
      return "F32";
    case TensorDtype::F16:
      return "F16";
    case TensorDtype::BF16:
      return "BF16";
    case TensorDtype::Other:
      break;
  }
  return "?";
}

int dtype_size(TensorDtype dtype) {
  assert(dtype != TensorDtype::Other);
  return dtype == TensorDtype::F32 ? 4 : 2;
}

SafetensorsFile::SafetensorsFile(const std::string& path) : path_(path) {
  const int fd = ::open(path.c_str(), O_RDONLY);
  if (fd < 0) fail(path, std::string("cannot open: ") + std::strerror(errno));
  struct stat st;
  if (::fstat(fd, &st) != 0) {
    ::close(fd);
    fail(path, "cannot stat");
  }
  size_ = static_cast<size_t>(st.st_size);
  if (size_ < 8) {
    ::close(fd);
    fail(path, "truncated file: " + std::to_string(size_) + " bytes, no header length");
  }
  base_ = ::mmap(nullptr, size_, PROT_READ, MAP_PRIVATE, fd, 0);
  ::close(fd);
  if (base_ == MAP_FAILED) {
    base_ = nullptr;
    fail(path, std::string("mmap failed: ") + std::strerror(errno));
  }
  try {
    tensors_ = parse_safetensors(static_cast<const uint8_t*>(base_), size_, path);
  } catch (...) {
    ::munmap(base_, size_);  // the destructor does not run for a throwing constructor
    base_ = nullptr;
    throw;
  }
}

namespace {

// A JSON list of integers (a shape, data offsets): floats and values past int64 are errors
// (nlohmann would convert them with undefined behaviour).
std::vector<int64_t> integers(const nlohmann::json& v, const std::string& path, const std::string& what) {
  if (!v.is_array()) fail(path, what + " must be a list of integers");
  std::vector<int64_t> out;
  for (const auto& x : v) {
    if (!x.is_number_integer() || (x.is_number_unsigned() && x.get<uint64_t>() > INT64_MAX))
      fail(path, what + " holds " + x.dump() + ", not a 64-bit integer");
    out.push_back(x.get<int64_t>());
  }
  return out;
}

}  // namespace

std::map<std::string, TensorView> parse_safetensors(const uint8_t* bytes, size_t size,
                                                    const std::string& path) {
  if (size < 8) fail(path, "truncated file: " + std::to_string(size) + " bytes, no header length");
  uint64_t header_len = 0;
  std::memcpy(&header_len, bytes, 8);  // little-endian u64
  if (header_len > size - 8)
    fail(path, "truncated file: header of " + std::to_string(header_len) + " bytes but only " +
                   std::to_string(size - 8) + " follow");
  nlohmann::json header;
  try {
    header = nlohmann::json::parse(bytes + 8, bytes + 8 + header_len);
  } catch (const std::exception& e) {
    fail(path, std::string("bad safetensors header: ") + e.what());
  }
  if (!header.is_object()) fail(path, "bad safetensors header: not an object");
  const size_t data_start = 8 + header_len;
  const size_t data_size = size - data_start;
  std::map<std::string, TensorView> tensors;
  for (auto it = header.begin(); it != header.end(); ++it) {
    if (it.key() == "__metadata__") continue;
    const auto& e = it.value();
    TensorView t;
    t.name = it.key();
    t.file = path;
    try {
      t.dtype_text = e.at("dtype").get<std::string>();
      t.shape = integers(e.at("shape"), path, "tensor '" + t.name + "': shape");
      const std::vector<int64_t> offsets =
          integers(e.at("data_offsets"), path, "tensor '" + t.name + "': data_offsets");
      for (int64_t o : offsets)
        if (o < 0) fail(path, "tensor '" + t.name + "': negative data offset");
      const std::vector<uint64_t> off(offsets.begin(), offsets.end());
      if (off.size() != 2 || off[0] > off[1]) fail(path, "tensor '" + t.name + "': bad data_offsets");
      if (off[1] > data_size)
        fail(path, "truncated file: tensor '" + t.name + "' ends at byte " +
                       std::to_string(data_start + off[1]) + " of " + std::to_string(size));
      t.data = bytes + data_start + off[0];
      t.nbytes = off[1] - off[0];
    } catch (const nlohmann::json::exception& ex) {
      fail(path, "tensor '" + t.name + "': bad header entry: " + ex.what());
    }
    // Dimensions are counts: never negative, and their product (times the element size) must
    // not wrap around to a byte count that happens to match.
    uint64_t n = 1;
    for (int64_t d : t.shape) {
      if (d < 0) fail(path, "tensor '" + t.name + "': negative dimension " + std::to_string(d));
      if (__builtin_mul_overflow(n, static_cast<uint64_t>(d), &n))
        fail(path, "tensor '" + t.name + "': its shape has more elements than 2^64");
    }
    t.dtype = parse_dtype(t.dtype_text);
    if (t.dtype != TensorDtype::Other) {
      uint64_t total = 0;
      if (__builtin_mul_overflow(n, static_cast<uint64_t>(dtype_size(t.dtype)), &total) || total != t.nbytes)
        fail(path, "tensor '" + t.name + "': " + std::to_string(t.nbytes) +
                       " bytes do not match its shape and dtype");
    }
    tensors.emplace(t.name, std::move(t));
  }
  return tensors;
}

SafetensorsFile::~SafetensorsFile() {
  if (base_) ::munmap(base_, size_);
}

const TensorView* SafetensorsFile::find(const std::string& name) const {
  auto it = tensors_.find(name);
  return it == tensors_.end() ? nullptr : &it->second;
}

void SafetensorsFile::release(const TensorView& t) const {
  const long page = ::sysconf(_SC_PAGESIZE);
  auto begin = reinterpret_cast<uintptr_t>(t.data);
  auto end = begin + t.nbytes;
  begin = (begin + page - 1) / page * page;  // whole pages inside the tensor only
  end = end / page * page;
  if (end > begin) ::madvise(reinterpret_cast<void*>(begin), end - begin, MADV_DONTNEED);
}

SafetensorsFolder::SafetensorsFolder(const std::string& dir) {
  const std::string single = dir + "/model.safetensors";
  const std::string index = dir + "/model.safetensors.index.json";
  if (file_exists(index)) {
    description_ = index;
    std::ifstream in(index);
    if (!in) fail(index, "cannot open");
    nlohmann::json j;
    try {
      in >> j;
    } catch (const std::exception& e) {
      fail(index, std::string("invalid JSON: ") + e.what());
    }
    if (!j.contains("weight_map") || !j["weight_map"].is_object())
      fail(index, "missing \"weight_map\" object");
    for (auto it = j["weight_map"].begin(); it != j["weight_map"].end(); ++it) {
      if (!it.value().is_string()) fail(index, "weight_map entry '" + it.key() + "' is not a file name");
      const std::string path = dir + "/" + it.value().get<std::string>();
      if (!files_.count(path)) {
        if (!file_exists(path)) fail(index, "shard '" + it.value().get<std::string>() + "' does not exist");
        files_.emplace(path, std::make_shared<SafetensorsFile>(path));
      }
      weight_map_[it.key()] = path;
    }
  } else if (file_exists(single)) {
    description_ = single;
    auto f = std::make_shared<SafetensorsFile>(single);
    for (const auto& kv : f->tensors()) weight_map_[kv.first] = single;
    files_.emplace(single, std::move(f));
  } else {
    fail(dir, "no model.safetensors or model.safetensors.index.json");
  }
}

bool SafetensorsFolder::has(const std::string& name) const {
  auto it = weight_map_.find(name);
  return it != weight_map_.end() && files_.at(it->second)->find(name) != nullptr;
}

const TensorView& SafetensorsFolder::get(const std::string& name) const {
  auto it = weight_map_.find(name);
  if (it == weight_map_.end()) fail(description_, "tensor '" + name + "' is missing");
  const TensorView* t = files_.at(it->second)->find(name);
  if (!t) fail(it->second, "tensor '" + name + "' is missing (listed in " + description_ + ")");
  return *t;
}

std::shared_ptr<const SafetensorsFile> SafetensorsFolder::file_of(const TensorView& t) const {
  return files_.at(t.file);
}

void write_safetensors(const std::string& path, const std::vector<TensorToWrite>& tensors,
                       const std::map<std::string, std::string>& metadata) {
  nlohmann::ordered_json header;
  if (!metadata.empty()) header["__metadata__"] = metadata;
  uint64_t offset = 0;
  for (const auto& t : tensors) {
    uint64_t n = 1;
    for (int64_t d : t.shape) n *= static_cast<uint64_t>(d);
    assert(n * dtype_size(t.dtype) == t.data.size());
    header[t.name] = {{"dtype", dtype_name(t.dtype)},
                      {"shape", t.shape},
                      {"data_offsets", {offset, offset + t.data.size()}}};
    offset += t.data.size();
  }
  std::string text = header.dump();
  while ((8 + text.size()) % 8 != 0) text.push_back(' ');
  std::ofstream out(path, std::ios::binary | std::ios::trunc);
  if (!out) fail(path, "cannot open for writing");
  const uint64_t len = text.size();
  out.write(reinterpret_cast<const char*>(&len), 8);
  out.write(text.data(), static_cast<std::streamsize>(text.size()));
  for (const auto& t : tensors)
    out.write(reinterpret_cast<const char*>(t.data.data()), static_cast<std::streamsize>(t.data.size()));
  if (!out) fail(path, "write failed");
}

uint16_t float_to_bf16(float f) {
  uint32_t x;
  std::memcpy(&x, &f, 4);
  if ((x & 0x7fffffff) > 0x7f800000) return static_cast<uint16_t>((x >> 16) | 0x40);  // NaN
  x += 0x7fff + ((x >> 16) & 1);
  return static_cast<uint16_t>(x >> 16);
}

float bf16_to_float(uint16_t b) {
  uint32_t x = static_cast<uint32_t>(b) << 16;
  float f;
  std::memcpy(&f, &x, 4);
  return f;
}

uint16_t float_to_half(float f) {
  uint32_t x;
  std::memcpy(&x, &f, 4);
  const uint32_t sign = (x >> 16) & 0x8000;
  const int32_t exp = static_cast<int32_t>((x >> 23) & 0xff) - 127 + 15;
  uint32_t mant = x & 0x7fffff;
  if (((x >> 23) & 0xff) == 0xff) return static_cast<uint16_t>(sign | 0x7c00 | (mant ? 0x200 : 0));
  if (exp >= 31) return static_cast<uint16_t>(sign | 0x7c00);  // overflow → inf
  if (exp <= 0) {                                              // subnormal or zero
    if (exp < -10) return static_cast<uint16_t>(sign);
    mant |= 0x800000;
    const int shift = 14 - exp;
    uint32_t h = mant >> shift;
    const uint32_t rem = mant & ((1u << shift) - 1), half = 1u << (shift - 1);
    if (rem > half || (rem == half && (h & 1))) ++h;
    return static_cast<uint16_t>(sign | h);
  }
  uint32_t h = (static_cast<uint32_t>(exp) << 10) | (mant >> 13);
  const uint32_t rem = mant & 0x1fff;
  if (rem > 0x1000 || (rem == 0x1000 && (h & 1))) ++h;  // may carry into the exponent: fine
  return static_cast<uint16_t>(sign | h);
}

float half_to_float(uint16_t h) {
  const uint32_t sign = static_cast<uint32_t>(h & 0x8000) << 16;
  uint32_t exp = (h >> 10) & 0x1f, mant = h & 0x3ff, x;
  if (exp == 0) {
    if (mant == 0) {
      x = sign;
    } else {  // subnormal: normalise
      exp = 1;
      while (!(mant & 0x400)) {
        mant <<= 1;
        --exp;
      }
      mant &= 0x3ff;
      x = sign | ((exp + 127 - 15) << 23) | (mant << 13);
    }
  } else if (exp == 31) {
    x = sign | 0x7f800000 | (mant << 13);
  } else {
    x = sign | ((exp + 127 - 15) << 23) | (mant << 13);
  }
  float f;
  std::memcpy(&f, &x, 4);
  return f;
}

}  // namespace rootspec
