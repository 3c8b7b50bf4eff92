// The PS server's checks of what a worker sends after the key tables (ps::ctrl_ok,
// ps::check_pull, ps::check_push; fuzz_ps_msgs_core fuzzes them). Regression: a pull carries
// its clock as a uint64, which the server took as an int64; at 2^63 or more that clock is
// negative and the SSP test (clock - staleness) and the staleness (clock - the part's clock)
// overflowed (undefined; with wrap-around the pull waited forever). It is refused now.
#include <gtest/gtest.h>

#include <cstdint>
#include <thread>
#include <vector>

#include "gw_ps.h"
#include "ps_group.h"
#include "ps_impl.h"

namespace gw {
namespace {

const std::vector<KeySpec> kKeys{{1, 8}, {2, 100}};

ps::Settings ssp() {
  ps::Settings s;
  s.o.mode = Consistency::kSsp;
  s.o.servers = 1;
  s.o.staleness = 1;
  s.min_part = 65536 / sizeof(float);  // ps.min_part_bytes' default, in elements
  return s;
}

ps::CtrlMsg pull(uint32_t part, uint64_t bytes, uint64_t clock) {
  ps::CtrlMsg m;
  m.type = static_cast<uint8_t>(ps::MsgType::kPull);
  m.part = part;
  m.slot = 0;
  m.bytes = bytes;
  m.clock = clock;
  return m;
}

TEST(PsMsgs, ControlMessagesAreWholeAndOurs) {
  ps::CtrlMsg m;
  EXPECT_TRUE(ps::ctrl_ok(m, sizeof m));
  EXPECT_FALSE(ps::ctrl_ok(m, sizeof m - 1));
  m.magic = 0;
  EXPECT_FALSE(ps::ctrl_ok(m, sizeof m));
}

TEST(PsMsgs, PullChecksNameWhatIsWrong) {
  const ps::Settings s = ssp();
  const PsLayout layout = PsLayout::make(kKeys, 1, s.min_part).value();
  std::vector<int32_t> local{0, 1};
  EXPECT_EQ(ps::check_pull(s, layout, local, 1, pull(0, 32, 5)), "");
  EXPECT_EQ(ps::check_pull(s, layout, local, 0, pull(0, 32, 5)), "pull from a server rank");
  EXPECT_EQ(ps::check_pull(s, layout, local, 1, pull(2, 32, 5)),
            "pull of part 2 from worker rank 1 which does not exist (the layout has 2 parts)");
  EXPECT_EQ(ps::check_pull(s, layout, local, 1, pull(0, 33, 5)),
            "pull of key 1 elements [0, 8) from worker rank 1 asks for 33 bytes; the part has 32 "
            "(8 float32)");
  local[1] = -1;
  EXPECT_EQ(ps::check_pull(s, layout, local, 1, pull(1, 400, 5)),
            "pull of part 1 from worker rank 1 (key 2 elements [0, 100)) which this server does "
            "not hold");
}

TEST(PsMsgs, PullAtAClockPastInt64IsRefused) {
  const ps::Settings s = ssp();
  const PsLayout layout = PsLayout::make(kKeys, 1, s.min_part).value();
  const std::vector<int32_t> local{0, 1};
  EXPECT_EQ(ps::check_pull(s, layout, local, 1, pull(0, 32, INT64_MAX)), "");
  EXPECT_EQ(ps::check_pull(s, layout, local, 1, pull(0, 32, uint64_t{1} << 63)),
            "pull of key 1 elements [0, 8) from worker rank 1 at clock 9223372036854775808, more "
            "than a worker can count");
  EXPECT_NE(ps::check_pull(s, layout, local, 1, pull(0, 32, ~uint64_t{0})), "");
}

TEST(PsMsgs, PushChecksNameWhatIsWrong) {
  const ps::Settings s = ssp();
  const PsLayout layout = PsLayout::make(kKeys, 1, s.min_part).value();
  EXPECT_EQ(ps::check_push(s, layout, 1, 1, Code::kOk, 400), "");
  const std::string bad =
      "push of key 2 elements [0, 100) from worker rank 1 has 64 bytes; the server expects 400 "
      "(100 float32)";
  EXPECT_EQ(ps::check_push(s, layout, 1, 1, Code::kOk, 64), bad);
  EXPECT_EQ(ps::check_push(s, layout, 1, 1, Code::kInvalidArgument, 400),
            "push of key 2 elements [0, 100) from worker rank 1 has 400 bytes; the server expects "
            "400 (100 float32)");
  EXPECT_EQ(ps::check_push(s, layout, 1, 0, Code::kOk, 400),
            "push of key 2 elements [0, 100) from server rank 0 has 400 bytes; the server expects "
            "400 (100 float32)");
}

// The real server answers such a pull with an error (it used to defer it, or worse).
TEST(PsMsgs, ServerRefusesAPullAtAClockPastInt64) {
  PsOptions o = ssp().o;
  o.timeout = Millis(10000);
  auto store = make_in_process_store();
  std::unique_ptr<Group> g1;
  std::string answer;
  std::thread worker([&] {
    g1 = join(store, 1);
    if (!g1) return;
    const std::vector<uint8_t> table = key_table(o, kKeys, kKeys.size());
    ps::CtrlMsg reply, bye;
    const ps::CtrlMsg m = pull(0, 32, uint64_t{1} << 63);
    bye.type = static_cast<uint8_t>(ps::MsgType::kBye);
    const RecvRequest r{&reply, sizeof reply, ps::tag(ps::TagKind::kCtrl), 9, nullptr};
    const SendRequest s[] = {{table.data(), table.size(), ps::tag(ps::TagKind::kTable), 1, nullptr},
                             {&m, sizeof m, ps::tag(ps::TagKind::kCtrl), 2, nullptr}};
    ASSERT_EQ(g1->endpoint(0).post_recv({&r, 1}).value(), 1u);
    ASSERT_EQ(g1->endpoint(0).post_send(s).value(), 2u);
    Completion c[8];
    Deadline dl(Millis(5000));
    while (answer.empty() && !dl.expired()) {
      auto n = g1->transport().cq().wait(c, Millis(50));
      for (size_t i = 0; n.ok() && i < *n; ++i)
        if (c[i].wr_id == 9 && c[i].code == Code::kOk) answer = std::string(reply.text_view());
    }
    const SendRequest b{&bye, sizeof bye, ps::tag(ps::TagKind::kCtrl), 3, nullptr};
    ASSERT_EQ(g1->endpoint(0).post_send({&b, 1}).value(), 1u);
    Deadline settle(Millis(1000));  // the server's closing BYE
    while (!settle.expired()) (void)g1->transport().cq().wait(c, Millis(50));
  });
  auto g0 = join(store, 0);
  ASSERT_NE(g0, nullptr);
  auto server = PsServer::create(*g0, kKeys, o, make_sum_updater());
  ASSERT_TRUE(server.ok()) << server.status().to_string();
  Status st = (*server)->serve(Millis(5000));
  worker.join();
  EXPECT_TRUE(st.ok()) << st.to_string();
  EXPECT_NE(answer.find("at clock 9223372036854775808, more than a worker can count"),
            std::string::npos)
      << answer;
}

}  // namespace
}  // namespace gw
