// weft-test: driver-independent
// parse_http_date: the three HTTP-date forms of RFC 9110 5.6.7, the inverse of
// format_http_date, and what it refuses.
#include <gtest/gtest.h>

#include <ctime>
#include <optional>
#include <string>

#include "weft/http/message.hpp"
#include "weft/http/static_files.hpp"

namespace http = weft::http;

namespace {

// RFC 9110's example instant: Sun, 06 Nov 1994 08:49:37 GMT.
constexpr std::time_t example = 784111777;

TEST(HttpDateParse, ReadsAllThreeFormsOfTheSameInstant) {
  EXPECT_EQ(http::parse_http_date("Sun, 06 Nov 1994 08:49:37 GMT"), example);
  EXPECT_EQ(http::parse_http_date("Sunday, 06-Nov-94 08:49:37 GMT"), example);
  EXPECT_EQ(http::parse_http_date("Sun Nov  6 08:49:37 1994"), example);
  EXPECT_EQ(http::parse_http_date("Sun Nov 16 08:49:37 1994"), example + 10 * 86400);
  // Surrounding whitespace of a field value is not part of it.
  EXPECT_EQ(http::parse_http_date("  Sun, 06 Nov 1994 08:49:37 GMT "), example);
}

TEST(HttpDateParse, IsTheInverseOfFormatHttpDate) {
  for (std::time_t t : {std::time_t{0}, example, std::time_t{951782400} /* 2000-02-29 */,
                        std::time_t{1'700'000'000}, std::time_t{4'102'444'799}}) {
    EXPECT_EQ(http::parse_http_date(http::format_http_date(t)), t) << t;
  }
}

TEST(HttpDateParse, TwoDigitYearsLandWithinFiftyYearsOfNow) {
  std::time_t now = std::time(nullptr);
  std::tm utc{};
  gmtime_r(&now, &utc);
  int year = utc.tm_year + 1900;
  // Next year, in RFC 850 form, is next year, not a century earlier.
  int next = (year + 1) % 100;
  char text[64];
  std::snprintf(text, sizeof text, "Monday, 01-Jan-%02d 00:00:00 GMT", next);
  std::optional<std::time_t> parsed = http::parse_http_date(text);
  ASSERT_TRUE(parsed) << text;
  std::tm back{};
  gmtime_r(&*parsed, &back);
  EXPECT_EQ(back.tm_year + 1900, year + 1) << text;
  // 60 years ahead reads as 40 years back.
  std::snprintf(text, sizeof text, "Monday, 01-Jan-%02d 00:00:00 GMT", (year + 60) % 100);
  parsed = http::parse_http_date(text);
  ASSERT_TRUE(parsed) << text;
  gmtime_r(&*parsed, &back);
  EXPECT_EQ(back.tm_year + 1900, year - 40) << text;
}

TEST(HttpDateParse, RefusesWhatIsNotAnHttpDate) {
  for (std::string text : {"", "Sun, 06 Nov 1994 08:49:37", "Sun, 06 Nov 1994 08:49:37 UTC",
                           "Sun, 6 Nov 1994 08:49:37 GMT", "sun, 06 Nov 1994 08:49:37 GMT",
                           "Sun, 06 nov 1994 08:49:37 GMT", "Sun, 31 Feb 1994 08:49:37 GMT",
                           "Sun, 29 Feb 1994 08:49:37 GMT", "Sun, 06 Nov 1994 24:00:00 GMT",
                           "Sun, 06 Nov 1994 08:60:00 GMT", "Sun, 06 Nov 1994 08:49:37 GMT x",
                           "Sunday, 06-Nov-1994 08:49:37 GMT", "Sun Nov 6 08:49:37 1994",
                           "Xyz, 06 Nov 1994 08:49:37 GMT", "784111777",
                           "Sun, 06 Nov 1994 08:49:37 GMT, Mon, 07 Nov 1994 08:49:37 GMT"}) {
    EXPECT_FALSE(http::parse_http_date(text)) << text;
  }
}

}  // namespace
