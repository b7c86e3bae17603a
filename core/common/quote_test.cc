#include "core/common/quote.h"

#include <string>

#include "gtest/gtest.h"

namespace streamlearn {
namespace {

TEST(QuoteForErrorTest, PrintableTextIsQuotedAsIs) {
  EXPECT_EQ(QuoteForError("demo-1.x"), "'demo-1.x'");
}

TEST(QuoteForErrorTest, BinaryBytesAreEscaped) {
  EXPECT_EQ(QuoteForError(std::string("a\xff\n", 3)), "'a\\xff\\n'");
}

TEST(QuoteForErrorTest, LongTextIsCutAndItsLengthSaid) {
  const std::string q = QuoteForError(std::string(20000, 'x'));
  EXPECT_EQ(q, "'" + std::string(kQuoteMaxBytes, 'x') + "'... (20000 bytes)");
}

}  // namespace
}  // namespace streamlearn
