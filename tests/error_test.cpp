// attn::Error beyond its message: the kind, the argument and the file a front end acts on.
#include "attn/error.hpp"

#include <gtest/gtest.h>

#include <string>

#include "attn/files.hpp"
#include "attn/gpt.hpp"
#include "attn/gpt2_tokenizer.hpp"
#include "attn/tokenizer.hpp"

namespace attn {
namespace {

TEST(Error, AFileErrorNamesItsFileOnceHoweverOftenItIsPlaced) {
  const Error e = Error::about_file("run/ckpt", "cannot open: No such file or directory");
  EXPECT_EQ(e.kind(), ErrorKind::kFile);
  EXPECT_EQ(e.file(), "run/ckpt");
  EXPECT_STREQ(e.what(), "run/ckpt: cannot open: No such file or directory");
  EXPECT_STREQ(e.in_file("elsewhere").what(), e.what());  // it knew its file already
  const Error parsed = Error("not a JSON document").in_file("tok.json");
  EXPECT_EQ(parsed.kind(), ErrorKind::kFile);
  EXPECT_EQ(parsed.file(), "tok.json");
  EXPECT_STREQ(parsed.what(), "tok.json: not a JSON document");
}

TEST(Error, ReadersAndParsersSayWhatTheyKnow) {
  try {
    read_whole_file("/nonexistent/attn-error-test", 10);
    FAIL() << "no error";
  } catch (const Error& e) {
    EXPECT_EQ(e.kind(), ErrorKind::kFile);
    EXPECT_EQ(e.file(), "/nonexistent/attn-error-test");
  }
  try {
    Tokenizer::from_json("{");
    FAIL() << "no error";
  } catch (const Error& e) {
    EXPECT_EQ(e.file(), "") << "a parser of text knows no file; its caller adds it";
  }
}

TEST(Error, ConfigChecksNameTheSettingTheyRefuse) {
  GptConfig c;
  c.n_embd = 15;
  c.n_head = 4;
  try {
    validate(c);
    FAIL() << "no error";
  } catch (const Error& e) {
    EXPECT_EQ(e.kind(), ErrorKind::kInvalidArgument);
    EXPECT_EQ(e.argument(), "n_embd");
    EXPECT_STREQ(e.what(), "GptConfig: n_embd (15) must divide by n_head (4)");
  }
  c.n_embd = 16;
  c.n_kv_head = 3;
  try {
    validate(c);
    FAIL() << "no error";
  } catch (const Error& e) {
    EXPECT_EQ(e.argument(), "n_kv_head");
  }
  EXPECT_EQ(Error("plain").argument(), "");
  EXPECT_EQ(Error("plain").kind(), ErrorKind::kInvalidArgument);
}

// A message quotes at most a short excerpt of its input: a 50 MB line in merges.txt once
// gave a 50,000,103-byte message.
TEST(Error, MessagesQuoteExcerptsAndStayShort) {
  EXPECT_EQ(detail::excerpt("short"), "short");
  const std::string long_text(1000, 'q');
  EXPECT_EQ(detail::excerpt(long_text), std::string(80, 'q') + "… (1000 bytes)");
  const std::string accents = std::string(79, 'a') + "é";  // 'é' straddles byte 80
  EXPECT_EQ(detail::excerpt(accents + "tail"), std::string(79, 'a') + "… (85 bytes)");
  EXPECT_LT(std::string(Error(std::string(10 << 20, 'x')).what()).size(), 4200u);
  try {
    Gpt2Tokenizer::from_vocab_and_merges(R"({"a": 0})", "a " + std::string(50 << 20, 'q') + "\n");
    FAIL() << "no error";
  } catch (const Error& e) {
    EXPECT_LT(std::string(e.what()).size(), 300u) << std::string(e.what()).substr(0, 300);
  }
}

}  // namespace
}  // namespace attn
