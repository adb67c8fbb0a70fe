// KernelBench level 3, problem 1 (MLP): Linear(input_size, 16384), ReLU, Linear(16384, 16384), ReLU,
// Linear(16384, output_size), every Linear with its bias. Three cuBLASLt steps: the hidden layers with the
// bias_relu epilogue into two temporaries, the last with the bias epilogue (no ReLU) into the output. The
// hidden width 16384 is the module's own (layer_sizes); the import writes it as a number in the weights'
// shapes, so the plan does too.
/* kernelevolve-plan
{"temporaries": [{"name": "h1", "dtype": "f32", "shape": ["batch_size", "16384"]},
                 {"name": "h2", "dtype": "f32", "shape": ["batch_size", "16384"]}],
 "steps": [
  {"library": "cublaslt.matmul",
   "args": ["x", "network_0_weight", "h1", "batch_size", "16384", "input_size", "network_0_bias"],
   "options": {"epilogue": "bias_relu", "b_transposed": "true"}},
  {"library": "cublaslt.matmul",
   "args": ["h1", "network_2_weight", "h2", "batch_size", "16384", "16384", "network_2_bias"],
   "options": {"epilogue": "bias_relu", "b_transposed": "true"}},
  {"library": "cublaslt.matmul",
   "args": ["h2", "network_4_weight", "out", "batch_size", "output_size", "16384", "network_4_bias"],
   "options": {"epilogue": "bias", "b_transposed": "true"}}]}
*/
