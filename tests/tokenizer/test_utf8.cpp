// UTF-8 sanitising (WHATWG replacement), the incremental decoder, and NFC.
#include "utf8.h"
#include "utf8_nfc.h"

#include <gtest/gtest.h>

#include <random>

using namespace rootspec;

static const std::string R = "\xEF\xBF\xBD";  // U+FFFD

TEST(Utf8, SanitizeReplacesMaximalSubparts) {
  EXPECT_EQ(utf8_sanitize("abc"), "abc");
  EXPECT_EQ(utf8_sanitize("\xFF"), R);
  EXPECT_EQ(utf8_sanitize("\xC3"), R);                          // truncated 2-byte
  EXPECT_EQ(utf8_sanitize("\xE2\x82"), R);                      // truncated 3-byte: one U+FFFD
  EXPECT_EQ(utf8_sanitize("\xED\xA0\x80"), R + R + R);          // encoded surrogate
  EXPECT_EQ(utf8_sanitize("\xC0\xAF"), R + R);                  // overlong
  EXPECT_EQ(utf8_sanitize("\xF4\x90\x80\x80"), R + R + R + R);  // above U+10FFFF
  EXPECT_EQ(utf8_sanitize("\xC2\x41"), R + "A");                // the breaking byte starts over
  EXPECT_EQ(utf8_sanitize("\xF0\x9F\x98"), R);
  EXPECT_EQ(utf8_sanitize("\xF0\x9F\x98\x80"), "\xF0\x9F\x98\x80");
  EXPECT_FALSE(utf8_is_valid("\xED\xA0\x80"));
  EXPECT_TRUE(utf8_is_valid("\xF4\x8F\xBF\xBF"));
}

TEST(Utf8, StreamDecoderMatchesWholeDecodeForAnyCut) {
  std::mt19937 rng(1);
  const std::string pieces[] = {"a",    "\xC3\xA9", "\xE4\xBD\xA0", "\xF0\x9F\x98\x80",
                                "\xFF", "\xC3",     "\xE2\x82",     "\xED\xA0\x80",
                                "\x80"};
  for (int round = 0; round < 2000; ++round) {
    std::string bytes;
    for (int k = rng() % 12; k >= 0; --k) bytes += pieces[rng() % 9];
    Utf8StreamDecoder dec;
    std::string out;
    for (size_t i = 0; i < bytes.size();) {
      const size_t n = 1 + rng() % 3;
      const std::string part = dec.push(bytes.substr(i, n));
      EXPECT_TRUE(utf8_is_valid(part));
      out += part;
      i += n;
    }
    out += dec.flush();
    ASSERT_EQ(out, utf8_sanitize(bytes)) << "round " << round;
  }
}

TEST(Utf8, StreamDecoderHoldsIncompleteCharacter) {
  Utf8StreamDecoder dec;
  EXPECT_EQ(dec.push("a\xF0\x9F"), "a");
  EXPECT_TRUE(dec.pending());
  EXPECT_EQ(dec.push("\x98"), "");
  EXPECT_EQ(dec.push("\x80!"), "\xF0\x9F\x98\x80!");
  EXPECT_EQ(dec.push("\xE4"), "");
  EXPECT_EQ(dec.flush(), R);
}

TEST(Utf8, Nfc) {
  EXPECT_EQ(utf8_nfc("e\xCC\x81"), "\xC3\xA9");     // e + acute -> é
  EXPECT_EQ(utf8_nfc("\xE2\x84\xAB"), "\xC3\x85");  // Angstrom sign -> Å (singleton)
  EXPECT_EQ(utf8_nfc("\xE1\x84\x80\xE1\x85\xA1\xE1\x86\xA8"), "\xEA\xB0\x81");  // Hangul jamo L V T -> 각
  EXPECT_EQ(utf8_nfc("a\xCC\x82\xCC\xA3"), "\xE1\xBA\xAD");  // a + circumflex + dot below (reordered) -> ậ
  EXPECT_EQ(utf8_nfc("\xE0\xA5\x98"), "\xE0\xA4\x95\xE0\xA4\xBC");  // U+0958 is excluded from composition
  EXPECT_EQ(utf8_nfc("\xCC\x81start"), "\xCC\x81start");            // leading combining mark stays
  EXPECT_EQ(utf8_nfc("plain ascii"), "plain ascii");
  EXPECT_TRUE(utf8_nfc_quick_check("caf\xC3\xA9 \xE4\xBD\xA0\xE5\xA5\xBD"));
  EXPECT_FALSE(utf8_nfc_quick_check("cafe\xCC\x81"));
}
