// Configure-time probe of the io_uring driver (CMakeLists.txt): can this machine set up a ring
// with what the driver needs (one enter that submits and waits with a timeout, Linux 5.11)?
// Exit status 0 when it can; otherwise a line saying why.
#include <liburing.h>
#include <stdio.h>
#include <string.h>

int main(void) {
  struct io_uring ring;
  struct io_uring_params params;
  memset(&params, 0, sizeof params);
  int status = io_uring_queue_init_params(8, &ring, &params);
  if (status < 0) {
    printf("io_uring_queue_init: %s", strerror(-status));
    return 1;
  }
  int ext_arg = (params.features & IORING_FEAT_EXT_ARG) != 0;
  io_uring_queue_exit(&ring);
  if (!ext_arg) {
    printf("the kernel lacks IORING_FEAT_EXT_ARG (Linux 5.11)");
    return 1;
  }
  return 0;
}
