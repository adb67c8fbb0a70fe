// Threads of this process, counted from /proc: how the evaluator, the worker and the sandbox notice a
// kernel's threads outliving its call.
#pragma once

namespace kernelevolve {

// Threads of this process that can still run user code: those listed in /proc/self/task, less those already
// exiting. A thread that pthread_join has returned for can still be listed for a moment (an honest kernel that
// joins its threads failed 2 runs in 6 of a test that counted the list right after the call), but the kernel
// marks it exiting (PF_EXITING) before it wakes the joiner, so it is never counted here: the count right after
// a call is exact, with no wait. A wait would be wrong too: it would give a detached thread the time to finish
// the work the call left it.
int live_thread_count();

}  // namespace kernelevolve
