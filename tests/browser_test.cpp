// The pages attn writes, loaded in a real browser: Debian's Chromium, headless, from file://
// URLs with every host unresolvable (the pages must need no network). Each page must log
// nothing to the console; the explorer drives itself in its test mode (#selftest: clicks,
// keys, hovers) and reports; a screenshot must show the colours the test put in the weights.
// Skipped, saying why, when Chromium is not installed (scripts/bootstrap --browser).
#include <gtest/gtest.h>
#include <sys/wait.h>

#include <cstdlib>
#include <fstream>
#include <nlohmann/json.hpp>
#include <regex>
#include <string>

#include "attn/io.hpp"
#include "attn/viz.hpp"
#include "png_reader.hpp"
#include "test_util.hpp"

namespace attn {
namespace {

using testing::slurp;

std::string chromium() {
  for (const char* candidate : {"/usr/bin/chromium", "/usr/bin/chromium-browser"}) {
    if (std::ifstream(candidate).good()) return candidate;
  }
  return "";
}

class Browser : public testing::TempDirTest {
 protected:
  void SetUp() override {
    TempDirTest::SetUp();
    browser_ = chromium();
    if (browser_.empty()) {
      GTEST_SKIP() << "Chromium is not installed: scripts/bootstrap --browser installs it";
    }
  }

  int run(const std::string& command) const {
    const int raw = std::system((command + " >" + path("out") + " 2>" + path("err")).c_str());
    return WIFEXITED(raw) ? WEXITSTATUS(raw) : 128 + WTERMSIG(raw);
  }
  int attn(const std::string& args) const { return run(std::string(ATTN_CLI_PATH) + " " + args); }

  // Chromium on the page: its DOM after the scripts ran (stdout) or a screenshot, and its
  // console (stderr). A fixed window and scale, so that a layout read in one run holds in the
  // next; its own profile directory; no network.
  std::string load(const std::string& page, const std::string& hash, const std::string& action) {
    const std::string command = "timeout 120 " + browser_ +
                                " --headless --no-sandbox --disable-gpu --no-first-run"
                                " --user-data-dir=" +
                                path("profile") +
                                " --host-resolver-rules='MAP * ~NOTFOUND'"
                                " --window-size=1400,1000 --force-device-scale-factor=1"
                                " --hide-scrollbars --enable-logging=stderr --v=0 " +
                                action + " 'file://" + page + hash + "'";
    EXPECT_EQ(run(command), 0) << command << "\n" << slurp(path("err"));
    console_ = console_lines(slurp(path("err")));
    return slurp(path("out"));
  }

  // What the page wrote to the console or threw: Chromium logs each as a CONSOLE line.
  static std::vector<std::string> console_lines(const std::string& log) {
    std::vector<std::string> lines;
    std::istringstream in(log);
    for (std::string line; std::getline(in, line);) {
      if (line.find(":CONSOLE") != std::string::npos ||
          line.find("Uncaught") != std::string::npos) {
        lines.push_back(line);
      }
    }
    return lines;
  }

  std::string browser_;
  std::vector<std::string> console_;
};

// The text of the page's selftest report, and its panel rectangles.
struct SelfTest {
  std::string status, text;
  nlohmann::json panels;
};

SelfTest self_test(const std::string& dom) {
  std::smatch m;
  const std::regex re(
      "<pre id=\"selftest\" data-status=\"(\\w+)\"(?: data-panels=\"([^\"]*)\")?>([^<]*)</pre>");
  SelfTest t;
  if (!std::regex_search(dom, m, re)) return t;
  t.status = m[1].str();
  std::string panels = m[2].str();
  for (size_t at; (at = panels.find("&quot;")) != std::string::npos;) panels.replace(at, 6, 1, '"');
  if (!panels.empty()) t.panels = nlohmann::json::parse(panels);
  t.text = m[3].str();
  return t;
}

int count(const std::string& haystack, const std::string& needle) {
  int n = 0;
  for (size_t at = haystack.find(needle); at != std::string::npos;
       at = haystack.find(needle, at + 1)) {
    ++n;
  }
  return n;
}

// Colours drawn by a browser may differ by a unit in a channel (colour management).
bool near(Rgb a, Rgb b) {
  return std::abs(a.r - b.r) <= 3 && std::abs(a.g - b.g) <= 3 && std::abs(a.b - b.b) <= 3;
}

TEST_F(Browser, ExplorerOfDiagonalWeightsShowsABrightDiagonalAndDrivesItself) {
  // 2 layers × 3 heads of 8 tokens attending to themselves alone.
  const int64_t layers = 2, heads = 3, t = 8;
  Tensor w({layers, heads, t, t});
  for (int64_t l = 0; l < layers; ++l)
    for (int64_t h = 0; h < heads; ++h)
      for (int64_t i = 0; i < t; ++i) w.at({l, h, i, i}) = 1.0f;
  write_npy(path("diag.npy"), w);
  ASSERT_EQ(attn("explore --weights " + path("diag.npy") +
                 " --tokens 'the cat sat on the <mat> by me' --out " + path("diag.html")),
            0)
      << slurp(path("err"));
  const std::string page = slurp(path("diag.html"));
  EXPECT_EQ(page.find(" src="), std::string::npos) << "nothing is loaded from elsewhere";
  EXPECT_EQ(page.find(" href="), std::string::npos);

  const std::string dom = load(path("diag.html"), "#selftest", "--dump-dom");
  EXPECT_TRUE(console_.empty()) << console_.front();
  const SelfTest st = self_test(dom);
  EXPECT_EQ(st.status, "pass") << st.text;
  EXPECT_NE(st.text.find("6 panels for 2 x 3 heads"), std::string::npos) << st.text;
  EXPECT_EQ(count(dom, "class=\"panel"), layers * heads);
  EXPECT_NE(dom.find(">&lt;mat&gt;</text>"), std::string::npos) << "the token labels";
  ASSERT_EQ(st.panels.size(), static_cast<size_t>(layers * heads));

  load(path("diag.html"), "", "--screenshot=" + path("shot.png"));
  EXPECT_TRUE(console_.empty()) << console_.front();
  const testing::Image shot = testing::decode_png(slurp(path("shot.png")));
  ASSERT_EQ(shot.width, 1400);
  for (const auto& p : st.panels) {
    const double x = p[2], y = p[3], cell = p[4].get<double>() / t;
    for (int64_t i = 0; i < t; ++i) {
      for (int64_t j = 0; j < t; ++j) {
        const Rgb seen = shot.at(x + (j + 0.5) * cell, y + (i + 0.5) * cell);
        const Rgb expected = viridis(i == j ? 1.0f : 0.0f);
        EXPECT_TRUE(near(seen, expected))
            << "panel " << p << " cell (" << i << ", " << j << "): " << int(seen.r) << ","
            << int(seen.g) << "," << int(seen.b);
      }
    }
  }
}

// Tokens are the user's text: "<!--<script>" once put the page's script in a parser state
// where its own "</script>" no longer ended it, and the page stayed blank. Whatever the tokens
// hold, the page drives itself and shows them as text. (No "-->" among them: it would undo the
// state, and the old page passed.)
TEST_F(Browser, TheExplorerRunsWhateverTheTokensHold) {
  const int64_t t = 8;
  Tensor w({1, 1, t, t});
  for (int64_t i = 0; i < t; ++i) w.at({0, 0, i, i}) = 1.0f;
  write_npy(path("w.npy"), w);
  ASSERT_EQ(attn("explore --weights " + path("w.npy") +
                 " --tokens '<!--<script> a </script> b <!-- c d &amp;' --out " + path("p.html")),
            0)
      << slurp(path("err"));
  const std::string page = slurp(path("p.html"));
  EXPECT_EQ(page.find("<!--<script>"), std::string::npos) << "the data holds no markup";
  const std::string dom = load(path("p.html"), "#selftest", "--dump-dom");
  EXPECT_TRUE(console_.empty()) << console_.front();
  EXPECT_EQ(self_test(dom).status, "pass") << self_test(dom).text;
  EXPECT_NE(dom.find(">&lt;!--&lt;script&gt;</text>"), std::string::npos) << "the token as text";
  EXPECT_NE(dom.find(">&amp;amp;</text>"), std::string::npos);
}

TEST_F(Browser, ExplorerOfATrainedModelListsEveryHeadAndItsTokens) {
  std::ofstream(path("corpus.txt")) << std::string(2000, 'a') + "ROMEO: what light\n";
  ASSERT_EQ(attn("train --corpus " + path("corpus.txt") + " --out " + path("run") +
                 " --n-layer 2 --n-embd 16 --n-head 2 --block-size 16 --batch-size 2 "
                 "--max-iters 5 --eval-interval 5 --eval-iters 1 --threads 1"),
            0)
      << slurp(path("err"));
  ASSERT_EQ(
      attn("explore --checkpoint " + path("run") + " --text 'ROMEO: what' --out " + path("a.html")),
      0)
      << slurp(path("err"));
  const std::string dom = load(path("a.html"), "#selftest", "--dump-dom");
  EXPECT_TRUE(console_.empty()) << console_.front();
  const SelfTest st = self_test(dom);
  EXPECT_EQ(st.status, "pass") << st.text;
  EXPECT_EQ(count(dom, "class=\"panel"), 4);
  // The character tokenizer's display form: a space is "▁".
  EXPECT_NE(dom.find(">▁</text>"), std::string::npos);
  EXPECT_NE(dom.find(">R</text>"), std::string::npos);
}

// 300 tokens: 90 000 lines would be too many to draw, so the head view draws the pointed-at
// token's alone; the thumbnails are down-sampled. The page must still drive itself.
TEST_F(Browser, ExplorerOfALongSequenceDrawsThePointedAtLinesAlone) {
  const int64_t t = 300;
  Tensor w({1, 2, t, t});
  for (int64_t h = 0; h < 2; ++h)
    for (int64_t i = 0; i < t; ++i)
      for (int64_t j = 0; j <= i; ++j) w.at({0, h, i, j}) = 1.0f / static_cast<float>(i + 1);
  write_npy(path("long.npy"), w);
  ASSERT_EQ(attn("explore --weights " + path("long.npy") + " --out " + path("long.html")), 0)
      << slurp(path("err"));
  const std::string dom = load(path("long.html"), "#selftest", "--dump-dom");
  EXPECT_TRUE(console_.empty()) << console_.front();
  const SelfTest st = self_test(dom);
  EXPECT_EQ(st.status, "pass") << st.text;
  EXPECT_NE(st.text.find("highlights its 300 lines (300)"), std::string::npos) << st.text;
  EXPECT_NE(dom.find("90000 lines are too many to draw at once"), std::string::npos);
  ASSERT_EQ(st.panels.size(), 2u);
  EXPECT_LE(st.panels[0][4].get<double>(), 100.0) << "a down-sampled thumbnail";
}

TEST_F(Browser, TheDemosPageShowsItsFourHeads) {
  ASSERT_EQ(attn("demo --threads 1 --html " + path("demo.html")), 0) << slurp(path("err"));
  const std::string dom = load(path("demo.html"), "#selftest", "--dump-dom");
  EXPECT_TRUE(console_.empty()) << console_.front();
  const SelfTest st = self_test(dom);
  EXPECT_EQ(st.status, "pass") << st.text;
  EXPECT_NE(st.text.find("4 panels for 1 x 4 heads"), std::string::npos) << st.text;
  EXPECT_NE(dom.find(">▁quick</text>"), std::string::npos);
}

// The training report: the charts drawn, the log toggle working (the page's #selftest), the
// sample and the configuration present, and a resumed run's report holding the whole run.
TEST_F(Browser, TheTrainingReportDrawsItsChartsAndTogglesALogScale) {
  std::ofstream(path("corpus.txt")) << std::string(2000, 'a') + "ROMEO: what light\n";
  const std::string train = "train --corpus " + path("corpus.txt") + " --out " + path("run") +
                            " --n-layer 1 --n-embd 16 --n-head 2 --block-size 16 --batch-size 2 "
                            "--eval-interval 5 --eval-iters 1 --threads 1";
  ASSERT_EQ(attn(train + " --max-iters 10"), 0) << slurp(path("err"));
  ASSERT_EQ(attn(train + " --max-iters 20 --resume"), 0) << slurp(path("err"));
  const std::string dom = load(path("run/report.html"), "#selftest", "--dump-dom");
  EXPECT_TRUE(console_.empty()) << console_.front();
  const SelfTest st = self_test(dom);
  EXPECT_EQ(st.status, "pass") << st.text;
  EXPECT_NE(dom.find("20 steps recorded; at iteration 20"), std::string::npos)
      << "the resumed run's report starts at iteration 0";
  EXPECT_NE(dom.find(">validation loss</text>"), std::string::npos);
  EXPECT_NE(dom.find("200 tokens at iteration 20"), std::string::npos);
  EXPECT_NE(dom.find("<td>n_layer</td><td>1</td>"), std::string::npos);
}

}  // namespace
}  // namespace attn
