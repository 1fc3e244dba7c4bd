// The precompiled header of every torch translation unit (rootspec_library(... TORCH), CMakeLists.txt).
#pragma once

#include <torch/torch.h>
