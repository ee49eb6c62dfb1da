"""The dtypes cumm multiplies and how close a result must be to a float64 product, defined once."""

import numpy as np

F32 = np.dtype(np.float32)  # the accumulator's and FP32 rungs' dtype, compared against arrays' dtypes
DTYPES = ("float32", "float16", "bfloat16")  # what matmul takes and a spec may declare
HALF = ("float16", "bfloat16")  # inputs rounded to 11 or 8 significant bits, FP32 accumulation
# FP8 (torch's names): cumm.scaled_matmul's inputs only, with scales; matmul refuses them. A spec may declare them.
FP8 = ("float8_e4m3fn", "float8_e5m2")
SPEC_DTYPES = DTYPES + FP8
# What scaled_matmul writes (FP32 accumulation); FP8 (one byte an element) times scale_result, as torch._scaled_mm
SCALED_OUT = ("bfloat16", "float16", "float32", *FP8)
# FP8 of either format: bench's and tune's --dtype fp8, and the tuned tables' dtype of the FP8 rungs' entries (a tiling
# tuned on e4m3 x e4m3 with bfloat16 out, stored without the formats: it serves every format pair and output)
FP8_DTYPE = "fp8"

# Relative Frobenius error against a float64 product of the same inputs, per input dtype. FP32 kernels (SIMT,
# 3xTF32) land near 1e-6; a half product's error is its inputs' rounding (2^-11, 2^-8) summed over K.
TOLERANCE = {"float32": 1e-5, "float16": 2e-3, "bfloat16": 1.5e-2}
# scaled_matmul against float64 of the dequantized FP8 inputs, bfloat16 out (C's rounding to 8 significant bits
# dominates): the tuner's check and the fixed bound of tests/test_fp8_gpu.py (block scales, e5m2 x e5m2)
FP8_TOLERANCE = 8e-3
