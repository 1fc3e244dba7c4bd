// kernels.cu compiled as C++ for the CPU execution of CUDA (ROOTSPEC_CUDA_ON_CPU): the same
// source, line for line, with the kernel language of cuda_device.h (kernels/cuda_on_cpu).
#include "cuda_device.h"
#include "kernels.cu"
