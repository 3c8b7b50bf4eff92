// Logging never stalls its caller (issue 24 item 6): a rank whose stderr nobody reads keeps
// running, drops lines, and says how many once stderr drains.
#include <fcntl.h>
#include <gtest/gtest.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <string>

#include "log.h"

namespace {

bool wait_byte(int fd, int ms) {
  for (int i = 0; i < ms / 10; ++i) {
    char c;
    if (::read(fd, &c, 1) == 1) return true;
    ::usleep(10000);
  }
  return false;
}

std::string drain(int fd) {
  std::string s;
  char b[65536];
  ssize_t n;
  while ((n = ::read(fd, b, sizeof b)) > 0) s.append(b, static_cast<size_t>(n));
  return s;
}

TEST(Log, UnreadStderrDropsLinesInsteadOfBlocking) {
  int err[2], done[2], go[2];
  ASSERT_EQ(::pipe(err), 0);
  ASSERT_EQ(::pipe(done), 0);
  ASSERT_EQ(::pipe(go), 0);
  pid_t pid = ::fork();
  ASSERT_GE(pid, 0);
  if (pid == 0) {
    ::dup2(err[1], STDERR_FILENO);
    auto l = gw::log::get("gw.test.log");
    l->set_level(spdlog::level::info);
    // ~100 bytes a line: 20000 lines are 30x what the 64 KiB pipe holds.
    for (int i = 0; i < 20000; ++i) l->warn("line {} of a rank whose stderr nobody reads", i);
    (void)!::write(done[1], "d", 1);
    char c;
    (void)!::read(go[0], &c, 1);
    l->warn("final line");
    ::_exit(0);
  }
  ::close(err[1]);
  ::close(done[1]);
  ::close(go[0]);
  ::fcntl(done[0], F_SETFL, O_NONBLOCK);
  const bool flooded = wait_byte(done[0], 20000);
  ::fcntl(err[0], F_SETFL, O_NONBLOCK);
  std::string first = drain(err[0]);
  (void)!::write(go[1], "g", 1);
  int st = 0;
  if (!flooded) ::kill(pid, SIGKILL);
  ::waitpid(pid, &st, 0);
  ::fcntl(err[0], F_SETFL, 0);
  std::string rest = drain(err[0]);
  ASSERT_TRUE(flooded) << "20000 warnings into a full stderr pipe blocked the caller for 20 s";
  EXPECT_TRUE(WIFEXITED(st) && WEXITSTATUS(st) == 0);
  EXPECT_NE(first.find("line 0 of a rank"), std::string::npos);
  EXPECT_EQ(first.find("line 19999 of"), std::string::npos) << "nothing was dropped?";
  EXPECT_NE(rest.find("log lines dropped: stderr was not being read"), std::string::npos) << rest;
  EXPECT_NE(rest.find("final line"), std::string::npos) << rest;
}

}  // namespace
