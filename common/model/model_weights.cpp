#include "model_weights.h"

#include "model_tensors.h"

#include <cstdint>
#include <cstring>
#include <stdexcept>

namespace rootspec {

namespace {

torch::ScalarType torch_dtype_of(TensorDtype d) {
  switch (d) {
    case TensorDtype::F32:
      return torch::kFloat32;
    case TensorDtype::F16:
      return torch::kFloat16;
    case TensorDtype::BF16:
      return torch::kBFloat16;
    case TensorDtype::Other:
      break;
  }
  throw std::logic_error("torch_dtype_of: unsupported dtype");
}

class Loader {
 public:
  Loader(const std::string& dir, torch::Device device, torch::ScalarType dtype)
      : folder_(dir), device_(device), dtype_(dtype) {}

  // The tensor of `spec` on the runtime device and dtype; undefined when the model has none.
  torch::Tensor get(const TensorSpec& spec, int64_t* bytes) {
    if (!spec.present()) return torch::Tensor();
    const TensorView& t = checked_tensor(folder_, spec);
    const std::vector<int64_t>& shape = spec.shape;
    const torch::ScalarType src = torch_dtype_of(t.dtype);
    auto file = folder_.file_of(t);
    const bool aligned = reinterpret_cast<uintptr_t>(t.data) % dtype_size(t.dtype) == 0;
    torch::Tensor out;
    if (src == dtype_ && device_.is_cpu() && aligned) {
      // Zero copy: the tensor aliases the read-only mapping and keeps its file alive.
      out = torch::from_blob(
          const_cast<void*>(t.data), shape, [file](void*) {}, torch::TensorOptions().dtype(src));
    } else {
      torch::Tensor view;
      if (aligned) {
        view = torch::from_blob(const_cast<void*>(t.data), shape, torch::TensorOptions().dtype(src));
      } else {  // unaligned data: copy bytes first (rare; the writer pads headers to 8 bytes)
        view = torch::empty(shape, torch::TensorOptions().dtype(src));
        std::memcpy(view.data_ptr(), t.data, t.nbytes);
      }
      out = view.to(device_, dtype_, /*non_blocking=*/false, /*copy=*/true);
      file->release(t);
    }
    *bytes += out.numel() * out.element_size();
    return out;
  }

 private:
  SafetensorsFolder folder_;
  torch::Device device_;
  torch::ScalarType dtype_;
};

}  // namespace

ModelWeights load_weights(const std::string& dir, torch::Device device, torch::ScalarType dtype) {
  ModelWeights w;
  w.config = load_config(dir + "/config.json");
  Loader L(dir, device, dtype);
  const DecoderTensorSpecs specs = decoder_tensor_specs(w.config);
  int64_t* bytes = &w.bytes;
  w.embed = L.get(specs.embed, bytes);
  w.norm = L.get(specs.norm, bytes);
  w.lm_head = specs.lm_head.present() ? L.get(specs.lm_head, bytes) : w.embed;
  for (const LayerTensorSpecs& s : specs.layers) {
    LayerWeights l;
    l.input_norm = L.get(s.input_norm, bytes);
    l.wq = L.get(s.wq, bytes);
    l.wk = L.get(s.wk, bytes);
    l.wv = L.get(s.wv, bytes);
    l.wo = L.get(s.wo, bytes);
    l.bq = L.get(s.bq, bytes);
    l.bk = L.get(s.bk, bytes);
    l.bv = L.get(s.bv, bytes);
    l.bo = L.get(s.bo, bytes);
    l.q_norm = L.get(s.q_norm, bytes);
    l.k_norm = L.get(s.k_norm, bytes);
    l.post_norm = L.get(s.post_norm, bytes);
    l.gate = L.get(s.gate, bytes);
    l.up = L.get(s.up, bytes);
    l.down = L.get(s.down, bytes);
    w.layers.push_back(std::move(l));
  }
  return w;
}

}  // namespace rootspec
