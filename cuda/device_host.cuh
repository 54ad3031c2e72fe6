// What the kernels' shared functions are compiled as: device functions under nvcc, plain
// inline functions under a host compiler (so that a machine without a GPU can test them),
// and how they read the read-only inputs (through the read-only cache on the device).
#pragma once

#ifdef __CUDACC__
#define HD __device__ __forceinline__
#define LOAD(p) __ldg(p)
#else
#define HD static inline
#define LOAD(p) (*(p))
#endif
