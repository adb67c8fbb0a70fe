import triton
import triton.language as tl


@triton.jit
def gemm_bias_relu_scale(x, W, b, y, M, N, K, scale,
                         BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr, BLOCK_K: tl.constexpr):
    # y = relu(x W^T + b) * scale (x is M x K, W is N x K): program (j, i) computes the BLOCK_M x BLOCK_N
    # tile of y at rows i * BLOCK_M, columns j * BLOCK_N, stepping along K in slices of BLOCK_K (W read as
    # a BLOCK_K x BLOCK_N tile of W^T), with the epilogue applied in registers. Edges are zero-padded; the
    # products are full fp32 (input_precision "ieee": no TF32).
    rm = tl.program_id(1).to(tl.int64) * BLOCK_M + tl.arange(0, BLOCK_M)
    rn = tl.program_id(0).to(tl.int64) * BLOCK_N + tl.arange(0, BLOCK_N)
    rk = tl.arange(0, BLOCK_K)
    x_ptrs = x + rm[:, None] * K + rk[None, :]
    w_ptrs = W + rn[None, :] * K + rk[:, None]
    acc = tl.zeros([BLOCK_M, BLOCK_N], dtype=tl.float32)
    for k in range(0, K, BLOCK_K):
        a = tl.load(x_ptrs, mask=(rm[:, None] < M) & (rk[None, :] + k < K), other=0.0)
        wt = tl.load(w_ptrs, mask=(rk[:, None] + k < K) & (rn[None, :] < N), other=0.0)
        acc += tl.dot(a, wt, input_precision="ieee")
        x_ptrs += BLOCK_K
        w_ptrs += BLOCK_K
    acc += tl.load(b + rn, mask=rn < N, other=0.0)[None, :]
    out = tl.where(acc > 0.0, acc, 0.0) * scale
    tl.store(y + rm[:, None] * N + rn[None, :], out, mask=(rm[:, None] < M) & (rn[None, :] < N))
