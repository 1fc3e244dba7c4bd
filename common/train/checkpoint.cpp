#include "checkpoint.h"

#include <filesystem>
#include <fstream>
#include <stdexcept>

namespace rootspec {

namespace fs = std::filesystem;

void save_checkpoint(const std::string& out, const TrainModel& model, torch::optim::Optimizer& optimizer,
                     const nlohmann::json& state, const nlohmann::json& extra_config) {
  const std::string tmp = out + "/checkpoint.tmp", cur = out + "/checkpoint", old = out + "/checkpoint.old";
  fs::remove_all(tmp);
  model.save_folder(tmp, extra_config);
  torch::save(optimizer, tmp + "/optimizer.pt");
  {
    std::ofstream s(tmp + "/state.json");
    s << state.dump(2) << "\n";
    if (!s) throw std::runtime_error(tmp + "/state.json: write failed");
  }
  fs::remove_all(old);
  if (fs::exists(cur)) fs::rename(cur, old);
  fs::rename(tmp, cur);
  fs::remove_all(old);
  model.save_folder(out, extra_config);  // the usable model folder
}

std::string find_checkpoint(const std::string& out) {
  for (const char* name : {"/checkpoint", "/checkpoint.old"}) {
    const std::string d = out + name;
    if (fs::exists(d + "/state.json") && fs::exists(d + "/optimizer.pt") &&
        fs::exists(d + "/model.safetensors"))
      return d;
  }
  return "";
}

nlohmann::json load_checkpoint(const std::string& dir, TrainModel& model,
                               torch::optim::Optimizer& optimizer) {
  TrainModel saved(dir);
  const auto& a = model.named_parameters();
  const auto& b = saved.named_parameters();
  if (a.size() != b.size())
    throw std::runtime_error(dir + ": checkpoint has a different model shape than the options");
  {
    torch::NoGradGuard no_grad;
    for (size_t i = 0; i < a.size(); ++i) {
      if (a[i].first != b[i].first || !a[i].second.sizes().equals(b[i].second.sizes()))
        throw std::runtime_error(dir + ": tensor '" + b[i].first + "' does not match the model options");
      a[i].second.copy_(b[i].second);
    }
  }
  torch::load(optimizer, dir + "/optimizer.pt");
  std::ifstream s(dir + "/state.json");
  if (!s) throw std::runtime_error(dir + "/state.json: cannot read");
  nlohmann::json state;
  s >> state;
  if (!state.contains("step")) throw std::runtime_error(dir + "/state.json: no \"step\"");
  return state;
}

}  // namespace rootspec
