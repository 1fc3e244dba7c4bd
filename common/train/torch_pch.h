// Precompiled header of rootspec_train's torch translation units.
#pragma once

#include <torch/torch.h>
