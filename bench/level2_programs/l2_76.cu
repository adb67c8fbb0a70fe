// KernelBench level 2, problem 76 (Gemm_Add_ReLU): out = relu(x @ gemm_weight^T + bias), the Linear without
// its own bias. One cuBLASLt step: the product with the bias_relu epilogue (acc + bias, then max(., 0), in
// fp32 as PyTorch's add and relu are), the weight as PyTorch stores it ([out_features, in_features]).
/* kernelevolve-plan
{"steps": [
  {"library": "cublaslt.matmul",
   "args": ["x", "gemm_weight", "out", "batch_size", "out_features", "in_features", "bias"],
   "options": {"epilogue": "bias_relu", "b_transposed": "true"}}]}
*/
