// Threads of this process, counted from /proc: how the evaluator and the worker notice a kernel's
// threads outliving its call.
#pragma once
#include <dirent.h>

namespace kernelevolve::eval {

inline int thread_count() {
  int n = 0;
  if (DIR* d = opendir("/proc/self/task")) {
    while (dirent* entry = readdir(d)) n += entry->d_name[0] != '.';
    closedir(d);
  }
  return n;
}

}  // namespace kernelevolve::eval
