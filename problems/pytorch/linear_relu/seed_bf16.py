import triton
import triton.language as tl


@triton.jit
def linear_relu_bf16(x, fc_weight, fc_bias, out, batch_size, in_features, out_features, BLOCK_M: tl.constexpr,
                     BLOCK_N: tl.constexpr, BLOCK_K: tl.constexpr, GROUP_M: tl.constexpr):
    # out = relu(x @ fc_weight^T + fc_bias) in bf16: the product on the tensor cores (tl.dot of bf16 tiles, fp32
    # accumulation), the bias and ReLU applied to the fp32 tile, rounded to bf16 once at the store. fc_weight is
    # nn.Linear's (out_features x in_features): its tile is read as the transpose, BLOCK_K x BLOCK_N. One program
    # per BLOCK_M x BLOCK_N tile, in groups of GROUP_M tile rows (weight tiles reused from L2). 64-bit offsets.
    M, K, N = batch_size, in_features, out_features
    pid = tl.program_id(0)
    tiles_m = tl.cdiv(M, BLOCK_M)
    tiles_n = tl.cdiv(N, BLOCK_N)
    per_group = GROUP_M * tiles_n
    first_m = (pid // per_group) * GROUP_M
    rows = min(tiles_m - first_m, GROUP_M)
    pid_m = first_m + (pid % per_group) % rows
    pid_n = (pid % per_group) // rows
    rm = pid_m.to(tl.int64) * BLOCK_M + tl.arange(0, BLOCK_M)
    rn = pid_n.to(tl.int64) * BLOCK_N + tl.arange(0, BLOCK_N)
    rk = tl.arange(0, BLOCK_K)
    x_ptrs = x + rm[:, None] * K + rk[None, :]
    w_ptrs = fc_weight + rn[None, :] * K + rk[:, None]
    acc = tl.zeros([BLOCK_M, BLOCK_N], dtype=tl.float32)
    for k in range(0, tl.cdiv(K, BLOCK_K)):
        left = K - k * BLOCK_K
        a = tl.load(x_ptrs, mask=(rm[:, None] < M) & (rk[None, :] < left), other=0.0)
        w = tl.load(w_ptrs, mask=(rk[:, None] < left) & (rn[None, :] < N), other=0.0)
        acc = tl.dot(a, w, acc)
        x_ptrs += BLOCK_K
        w_ptrs += BLOCK_K
    acc += tl.load(fc_bias + rn, mask=rn < N, other=0.0).to(tl.float32)[None, :]
    acc = tl.maximum(acc, 0.0)
    tl.store(out + rm[:, None] * N + rn[None, :], acc.to(tl.bfloat16), mask=(rm[:, None] < M) & (rn[None, :] < N))
