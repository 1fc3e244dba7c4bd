// Precompiled header of rootspec_model's torch translation units.
#pragma once

#include <torch/torch.h>
