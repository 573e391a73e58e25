// CUDA names the GPU sources use, as themselves (vendor_hip.hpp maps them to HIP). Only what is used.
#pragma once

#include <cuda_runtime.h>

#if defined(HEADROOM_HAVE_CUBLASLT)
#include <cublasLt.h>
#endif  // HEADROOM_HAVE_CUBLASLT
#if defined(HEADROOM_HAVE_NCCL)
#include <nccl.h>
#endif  // HEADROOM_HAVE_NCCL
#if defined(HEADROOM_HAVE_CUDNN)
#include <cudnn.h>
#endif  // HEADROOM_HAVE_CUDNN

#define HEADROOM_GPU_VENDOR "cuda"
