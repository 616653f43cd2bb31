// Opening a path under the static root without ever leaving it (static_support.hpp), and the
// confinement mode the tests switch (weft/http/detail/static_confine.hpp).
//
// openat2 with RESOLVE_BENEATH does the whole job in one system call, race-free: the kernel
// refuses ".." above the starting directory, absolute symlinks, and (RESOLVE_NO_MAGICLINKS)
// /proc's fd links. Without it (kernels before 5.6, or a seccomp filter that does not know the
// call) the walk below gives the same answers with openat(2): every component is opened with
// O_NOFOLLOW relative to the descriptor of the one before, so no name is ever looked up twice
// and a component swapped for a symlink between two steps is seen as the symlink it is; each
// symlink is read and its target's components are walked the same way, from the directory
// that holds it, with ".." popping a descriptor and refused at the root.
#include <fcntl.h>
#include <linux/openat2.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cerrno>
#include <climits>
#include <cstddef>
#include <string>
#include <string_view>
#include <vector>

#include "http/static_support.hpp"
#include "weft/http/detail/static_confine.hpp"

namespace weft::http::detail {

namespace {

std::atomic<confine_mode> current_mode{confine_mode::automatic};

constexpr int file_flags = O_RDONLY | O_CLOEXEC | O_NOCTTY | O_NONBLOCK;
// As the kernel's MAXSYMLINKS: more symlinks than this in one lookup is ELOOP.
constexpr int max_symlinks = 40;

long openat2_call(int dir_fd, const char* path, std::uint64_t flags) noexcept {
  open_how how{};
  how.flags = flags;
  how.resolve = RESOLVE_BENEATH | RESOLVE_NO_MAGICLINKS;
  return syscall(SYS_openat2, dir_fd, path, &how, sizeof how);
}

int open_with_openat2(int root_fd, const std::string& relative) {
  // EAGAIN: a rename or mount somewhere on the path raced the lookup of a "..", which the
  // kernel refuses to judge; a retry sees a settled tree. A few are plenty.
  for (int attempt = 0;; ++attempt) {
    long fd = openat2_call(root_fd, relative.c_str(), file_flags);
    if (fd >= 0) return static_cast<int>(fd);
    if (errno != EAGAIN || attempt == 8) return -errno;
  }
}

// The descriptors of the directories the walk stands in, the root excluded (not ours).
class directory_stack {
 public:
  directory_stack() = default;
  directory_stack(const directory_stack&) = delete;
  directory_stack& operator=(const directory_stack&) = delete;
  ~directory_stack() {
    for (int fd : fds_) ::close(fd);
  }
  bool at_root() const noexcept { return fds_.empty(); }
  int top(int root_fd) const noexcept { return fds_.empty() ? root_fd : fds_.back(); }
  void push(int fd) { fds_.push_back(fd); }
  void pop() noexcept {
    ::close(fds_.back());
    fds_.pop_back();
  }

 private:
  std::vector<int> fds_;
};

// Pushes the components of `path` onto `pending` (a stack: the first component on top);
// empty ones ("a//b", a trailing '/') are skipped, as the kernel skips them.
void push_components(std::vector<std::string>& pending, std::string_view path) {
  std::size_t below = pending.size();
  while (!path.empty()) {
    std::size_t slash = path.find('/');
    if (slash != 0) pending.emplace_back(path.substr(0, slash));
    if (slash == std::string_view::npos) break;
    path.remove_prefix(slash + 1);
  }
  std::reverse(pending.begin() + static_cast<std::ptrdiff_t>(below), pending.end());
}

// The target of the symlink `name` in `dir_fd` ("" for `fd` itself, an O_PATH descriptor), or
// -errno. An absolute target is EXDEV, as RESOLVE_BENEATH has it: it would be resolved from
// the file system's root, not ours.
int read_link(int dir_fd, const char* name, std::string& target) {
  char buffer[PATH_MAX];
  ssize_t n = ::readlinkat(dir_fd, name, buffer, sizeof buffer);
  if (n < 0) return errno == EINVAL ? -ELOOP : -errno;  // no longer a symlink: a race, refuse
  if (n == static_cast<ssize_t>(sizeof buffer)) return -ENAMETOOLONG;
  if (n == 0) return -ENOENT;
  if (buffer[0] == '/') return -EXDEV;
  target.assign(buffer, static_cast<std::size_t>(n));
  return 0;
}

int open_with_walk(int root_fd, const std::string& relative) {
  std::vector<std::string> pending;
  push_components(pending, relative);
  directory_stack dirs;
  int symlinks = 0;
  std::string target;
  while (!pending.empty()) {
    std::string name = std::move(pending.back());
    pending.pop_back();
    if (name == ".") continue;
    if (name == "..") {
      if (dirs.at_root()) return -EXDEV;
      dirs.pop();
      continue;
    }
    int dir_fd = dirs.top(root_fd);
    if (pending.empty()) {
      // The last component: the file itself, opened for reading. O_NOFOLLOW makes a symlink
      // ELOOP, and only then is it read and walked.
      int fd = ::openat(dir_fd, name.c_str(), file_flags | O_NOFOLLOW);
      if (fd >= 0) return fd;
      if (errno != ELOOP) return -errno;
      if (++symlinks > max_symlinks) return -ELOOP;
      if (int err = read_link(dir_fd, name.c_str(), target); err < 0) return err;
      push_components(pending, target);
      continue;
    }
    int fd = ::openat(dir_fd, name.c_str(), O_PATH | O_NOFOLLOW | O_CLOEXEC);
    if (fd < 0) return -errno;
    struct stat st {};
    if (::fstat(fd, &st) < 0) {
      int err = errno;
      ::close(fd);
      return -err;
    }
    if (S_ISDIR(st.st_mode)) {
      dirs.push(fd);
      continue;
    }
    if (!S_ISLNK(st.st_mode)) {
      ::close(fd);
      return -ENOTDIR;
    }
    int err = ++symlinks > max_symlinks ? -ELOOP : read_link(fd, "", target);
    ::close(fd);
    if (err < 0) return err;
    push_components(pending, target);
  }
  // The last component was a symlink whose target ends in "." or ".." ("self -> ."): it names
  // the directory the walk stands in, which openat2 would open too.
  int fd = ::openat(dirs.top(root_fd), ".", file_flags);
  return fd >= 0 ? fd : -errno;
}

}  // namespace

void set_confine_mode(confine_mode mode) noexcept {
  current_mode.store(mode, std::memory_order_relaxed);
}

confine_mode get_confine_mode() noexcept { return current_mode.load(std::memory_order_relaxed); }

bool openat2_works(int dir_fd) noexcept {
  long fd = openat2_call(dir_fd, ".", O_PATH | O_CLOEXEC);
  if (fd >= 0) {
    ::close(static_cast<int>(fd));
    return true;
  }
  return errno != ENOSYS && errno != EPERM;
}

int open_beneath(int root_fd, const std::string& relative, bool use_openat2) {
  return use_openat2 ? open_with_openat2(root_fd, relative) : open_with_walk(root_fd, relative);
}

}  // namespace weft::http::detail
