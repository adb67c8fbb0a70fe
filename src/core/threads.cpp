#include "core/threads.hpp"

#include <dirent.h>
#include <fcntl.h>
#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <cstring>

namespace kernelevolve {
namespace {

constexpr unsigned long kExitingFlag = 0x4;  // PF_EXITING in <linux/sched.h>: set first thing in do_exit()

// Whether task `tid` of this process is past running user code: dead or a zombie (state X, x or Z), or marked
// exiting (field 9 of stat, the task's flags, has PF_EXITING). The kernel sets that flag before the exiting
// thread releases its memory map, which is what clears its id and wakes a pthread_join. A task that vanished
// while we looked is gone too.
bool exiting(const char* tid) {
  char path[64];
  std::snprintf(path, sizeof path, "/proc/self/task/%s/stat", tid);
  const int fd = open(path, O_RDONLY | O_CLOEXEC);
  if (fd < 0) return true;
  char buf[1024];
  const ssize_t n = read(fd, buf, sizeof buf - 1);
  close(fd);
  if (n <= 0) return true;
  buf[n] = '\0';
  // The command name (field 2) is in parentheses and may hold spaces or ')': the fields resume after the last ')'.
  const char* p = std::strrchr(buf, ')');
  if (!p || p[1] != ' ') return false;
  p += 2;
  const char state = *p;
  if (state == 'Z' || state == 'X' || state == 'x') return true;
  for (int field = 3; field < 9; ++field) {  // from the state (field 3) to the flags (field 9)
    p = std::strchr(p, ' ');
    if (!p) return false;
    ++p;
  }
  return (std::strtoul(p, nullptr, 10) & kExitingFlag) != 0;
}

}  // namespace

int live_thread_count() {
  int n = 0;
  if (DIR* d = opendir("/proc/self/task")) {
    while (dirent* entry = readdir(d)) n += entry->d_name[0] != '.' && !exiting(entry->d_name);
    closedir(d);
  }
  return n;
}

}  // namespace kernelevolve
