#!/usr/bin/env python3
"""Plants one bug into a copy of the GPU path's sources (tests/planted/CMakeLists.txt).

    plant.py SOURCE_ROOT OUT_DIR BUG

Copies kernels/cuda and common/model into OUT_DIR and makes the bug's edits there, each of which
must match exactly once: a bug whose code moved fails the build instead of planting nothing.
"""
import shutil
import sys
from pathlib import Path

# Each bug: (file, text, replacement) edits. The comments say what a test must catch.
BUGS = {
    # A length passed to a captured kernel by value: tree attention reads the context length from
    # its by-value arguments instead of device memory, so a replayed graph keeps the length it was
    # captured at (CudaBackend.GraphReplayAtOtherContextLengthsAndTreeSizes…).
    "length-by-value": [
        ("kernels/cuda/attention_args.h", "  int splits = 1;\n",
         "  int splits = 1;\n  int context_by_value = 0;  // planted\n"),
        ("kernels/cuda/kernels.cu", "  const SequenceKv seq = sequence_of_row(a.sequences, r);\n",
         "  SequenceKv seq = sequence_of_row(a.sequences, r);\n  if (r < rows) seq.context = a.context_by_value;\n"),
        ("kernels/cuda/kernels.cu", "  const SequenceKv seq = sequence_kv(a.sequences, sequence);\n",
         "  SequenceKv seq = sequence_kv(a.sequences, sequence);\n  seq.context = a.context_by_value;\n"),
        ("common/model/cuda_backend.cpp", "    a.sequences = device_input_i32(layout_.sequences);\n",
         "    a.sequences = device_input_i32(layout_.sequences);\n    a.context_by_value = planted_context_;\n"),
        ("common/model/cuda_backend.cpp", "  int sm_count_ = 0;\n", "  int sm_count_ = 0;\n  int planted_context_ = 0;\n"),
        ("common/model/cuda_backend.cpp", "  sequence_table(batch, reinterpret_cast<int32_t*>(st + layout_.sequences));\n",
         "  sequence_table(batch, reinterpret_cast<int32_t*>(st + layout_.sequences));\n"
         "  planted_context_ = batch.context;\n"),
    ],
    # A removed __syncthreads: block_sum reads the warps' partial sums before every warp wrote
    # its own (CudaKernels.RmsNorm…; under ThreadSanitizer a data race).
    "no-barrier": [
        ("kernels/cuda/kernels.cu", "  if (lane == 0) scratch[warp] = v;\n  __syncthreads();\n  float total = 0;",
         "  if (lane == 0) scratch[warp] = v;\n  float total = 0;"),
    ],
    # The tree's mask skipped on the tile where the committed prefix ends and the tree's slots
    # begin: the tensor-core kernel takes the whole tile for prefix, so every row sees every
    # tree slot in it (CudaKernels.TreeAttentionOnTensorCores…).
    "mask-skipped": [
        ("kernels/cuda/kernels.cu", "const bool prefix_tile = base + kTile <= tree_begin;",
         "const bool prefix_tile = base <= tree_begin;"),
    ],
    # A wrong fragment address: the lanes that give V's rows to ldmatrix take the four 8 × 8
    # matrices in K's order (dims before keys), so the P·V product's B fragments mix two dim
    # tiles (CudaKernels.TreeAttentionOnTensorCores…).
    "fragment-index": [
        ("kernels/cuda/kernels.cu",
         "v_tile + (kb * 16 + lane % 16) * kTileStride<HD> + 8 * (lane / 16);",
         "v_tile + (kb * 16 + lane % 8 + 8 * (lane / 16)) * kTileStride<HD> + 8 * ((lane / 8) % 2);"),
    ],
    # The next tile's copy waited for as if one group more could still run: the warps read a
    # tile whose cp.async copies have not landed (NaN on the CPU execution, stale data on a GPU)
    # (CudaKernels.TreeAttentionOnTensorCores…).
    "async-copy-unwaited": [
        ("kernels/cuda/kernels.cu", "wait_async_copies<1>();  // this tile's group is done",
         "wait_async_copies<2>();  // this tile's group is done"),
    ],
    # A wrong transpose flag: the products take W untransposed (CudaBackend.PassesMatchTheCpuRuntime).
    "transpose": [
        ("common/model/cuda_gemm.cpp", "const cublasOperation_t transpose = CUBLAS_OP_T,",
         "const cublasOperation_t transpose = CUBLAS_OP_N,"),
    ],
    # Every processed member of a batched pass under the first member's law: the law staging
    # names law 0 for each member's rows (CudaBackend.BatchedProcessedRowsAreEachMembersOwn…).
    "first-members-law": [
        ("common/model/cuda_backend.cpp",
         "    for (int i = 0; i < rows; ++i) law_staging_.add_row(l, tokens + start[i], start[i + 1] - start[i]);\n",
         "    for (int i = 0; i < rows; ++i) law_staging_.add_row(0 * l, tokens + start[i], start[i + 1] - start[i]);\n"),
    ],
    # The staging buffer overwritten before its copy ran: a KV commit writes its move list over
    # the previous one's without waiting for that copy (CudaBackend.KvCommitsQueuedBackToBack…).
    "staging": [
        ("common/model/cuda_backend.cpp",
         '  check(cudaEventSynchronize(moves_copied_), "cudaEventSynchronize");  // the staging buffer is free\n', ""),
    ],
}


def main():
    source, out, bug = Path(sys.argv[1]), Path(sys.argv[2]), sys.argv[3]
    if bug not in BUGS:
        sys.exit(f"plant.py: no bug named {bug!r} (known: {', '.join(BUGS)})")
    for folder in ("kernels/cuda", "common/model"):
        shutil.rmtree(out / folder, ignore_errors=True)
        shutil.copytree(source / folder, out / folder)
    for name, text, replacement in BUGS[bug]:
        path = out / name
        code = path.read_text()
        count = code.count(text)
        if count != 1:
            sys.exit(f"plant.py: bug {bug}: {name} has {count} places matching {text!r}, not one")
        path.write_text(code.replace(text, replacement))
    (out / "planted").write_text(bug + "\n")


if __name__ == "__main__":
    main()
