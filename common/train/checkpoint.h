// Checkpoints: out/checkpoint/ holds model.safetensors + config.json (a model folder),
// optimizer.pt (AdamW moments and step counts) and state.json ({"step": …, "evals": […]}).
//
// Atomic: everything is written to out/checkpoint.tmp/, then the old checkpoint is moved to
// out/checkpoint.old/ and the new one renamed into place; a run killed at any point leaves a
// complete checkpoint in checkpoint/ or (between the two renames) checkpoint.old/, and
// load_checkpoint reads whichever is complete. The model folder out/ itself (config.json +
// model.safetensors) is refreshed at every checkpoint, each file renamed into place.
#pragma once

#include <cstdint>
#include <string>

#include <torch/torch.h>
#include <nlohmann/json.hpp>

#include "train_model.h"

namespace rootspec {

// Writes the checkpoint of `model` and `optimizer` after `state["step"]` steps.
void save_checkpoint(const std::string& out, const TrainModel& model, torch::optim::Optimizer& optimizer,
                     const nlohmann::json& state, const nlohmann::json& extra_config);

// The checkpoint folder to resume from (out/checkpoint or out/checkpoint.old), or "" if none.
std::string find_checkpoint(const std::string& out);

// Copies the checkpoint's weights into `model` (same config, else throws naming the folder),
// loads the optimizer state, returns state.json.
nlohmann::json load_checkpoint(const std::string& dir, TrainModel& model, torch::optim::Optimizer& optimizer);

}  // namespace rootspec
