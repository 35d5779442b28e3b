//! Instants in environment and task files: [`Timestamp`], whole Unix seconds, read from RFC 3339
//! (`2026-03-02T09:00:00Z`, `2026-03-02T11:00:00+02:00`) and always written back in UTC with a
//! `Z`.
//!
//! Written here rather than taken from `time` or `jiff`: the formats need one parse, one
//! format and a weekday, about a hundred lines of well-known calendar arithmetic (Howard
//! Hinnant's days-from-civil), while either crate would bring time zones, leap-second tables or
//! a dozen features nobody uses here. Promises: every `Timestamp` lies between
//! 0000-01-01T00:00:00Z and 9999-12-31T23:59:59Z, so it always formats as RFC 3339 with a
//! four-digit year; parsing refuses fractional seconds, leap seconds (`:60`), times without an
//! offset, and impossible dates (`2026-02-29`).

use std::fmt;
use std::str::FromStr;
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use serde::{Deserialize, Deserializer, Serialize, Serializer};

/// What a time must look like, for error messages.
pub const EXPECTED: &str = "an RFC 3339 time with an offset, such as `2026-03-02T09:00:00Z` or `2026-03-02T11:00:00+02:00`";

/// Why a text is not a [`Timestamp`].
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("`{text}` is not a valid time: {problem}; expected {EXPECTED}")]
pub struct TimeError {
    pub text: String,
    pub problem: String,
}

const SECS_PER_DAY: i64 = 86_400;
/// 0000-01-01T00:00:00Z.
const MIN_UNIX: i64 = -62_167_219_200;
/// 9999-12-31T23:59:59Z.
const MAX_UNIX: i64 = 253_402_300_799;

/// An instant, in whole seconds since 1970-01-01T00:00:00Z, within years 0000 to 9999.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct Timestamp(i64);

/// A day of the week.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Weekday {
    Monday,
    Tuesday,
    Wednesday,
    Thursday,
    Friday,
    Saturday,
    Sunday,
}

impl Weekday {
    /// The English name: `Monday`.
    pub fn name(self) -> &'static str {
        match self {
            Weekday::Monday => "Monday",
            Weekday::Tuesday => "Tuesday",
            Weekday::Wednesday => "Wednesday",
            Weekday::Thursday => "Thursday",
            Weekday::Friday => "Friday",
            Weekday::Saturday => "Saturday",
            Weekday::Sunday => "Sunday",
        }
    }
}

impl fmt::Display for Weekday {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

impl Timestamp {
    /// The earliest instant: 0000-01-01T00:00:00Z.
    pub const MIN: Timestamp = Timestamp(MIN_UNIX);
    /// The latest instant: 9999-12-31T23:59:59Z.
    pub const MAX: Timestamp = Timestamp(MAX_UNIX);
    /// 1970-01-01T00:00:00Z.
    pub const UNIX_EPOCH: Timestamp = Timestamp(0);

    /// The instant `secs` seconds after 1970-01-01T00:00:00Z (negative: before); `None` outside
    /// years 0000 to 9999.
    pub fn from_unix_seconds(secs: i64) -> Option<Timestamp> {
        (MIN_UNIX..=MAX_UNIX)
            .contains(&secs)
            .then_some(Timestamp(secs))
    }

    /// Seconds since 1970-01-01T00:00:00Z (negative before it).
    pub fn unix_seconds(self) -> i64 {
        self.0
    }

    /// `self + secs`, or `None` past 9999-12-31T23:59:59Z.
    pub fn checked_add_secs(self, secs: u64) -> Option<Timestamp> {
        i64::try_from(secs)
            .ok()
            .and_then(|s| self.0.checked_add(s))
            .and_then(Timestamp::from_unix_seconds)
    }

    /// The same instant as a [`SystemTime`].
    pub fn to_system_time(self) -> SystemTime {
        let magnitude = Duration::from_secs(self.0.unsigned_abs());
        if self.0 >= 0 {
            UNIX_EPOCH + magnitude
        } else {
            UNIX_EPOCH - magnitude
        }
    }

    /// The day of the week in UTC.
    pub fn weekday(self) -> Weekday {
        // 1970-01-01 was a Thursday: day 0 is index 3 counting from Monday.
        match (self.0.div_euclid(SECS_PER_DAY) + 3).rem_euclid(7) {
            0 => Weekday::Monday,
            1 => Weekday::Tuesday,
            2 => Weekday::Wednesday,
            3 => Weekday::Thursday,
            4 => Weekday::Friday,
            5 => Weekday::Saturday,
            _ => Weekday::Sunday,
        }
    }

    /// Parse RFC 3339: `YYYY-MM-DDTHH:MM:SS` then `Z` or `±HH:MM` (`t`, `z` and a space for
    /// the `T` are accepted too, as RFC 3339 allows).
    pub fn parse_rfc3339(text: &str) -> Result<Timestamp, TimeError> {
        let fail = |problem: &str| TimeError {
            text: text.to_string(),
            problem: problem.to_string(),
        };
        let b = text.as_bytes();
        if b.len() < 19 {
            return Err(fail("it is too short for a date and a time"));
        }
        let number = |range: std::ops::Range<usize>, what: &str| -> Result<i64, TimeError> {
            let digits = &b[range];
            if !digits.iter().all(u8::is_ascii_digit) {
                return Err(fail(&format!("the {what} is not a number")));
            }
            Ok(digits
                .iter()
                .fold(0i64, |n, d| n * 10 + i64::from(d - b'0')))
        };
        let year = number(0..4, "year (4 digits)")?;
        if b[4] != b'-' || b[7] != b'-' {
            return Err(fail("the date is not written YYYY-MM-DD"));
        }
        let month = number(5..7, "month")?;
        let day = number(8..10, "day")?;
        if !matches!(b[10], b'T' | b't' | b' ') {
            return Err(fail("the date and the time are not separated by `T`"));
        }
        if b[13] != b':' || b[16] != b':' {
            return Err(fail("the time is not written HH:MM:SS"));
        }
        let hour = number(11..13, "hour")?;
        let minute = number(14..16, "minute")?;
        let second = number(17..19, "second")?;
        if !(1..=12).contains(&month) {
            return Err(fail(&format!("month {month} does not exist")));
        }
        if day < 1 || day > days_in_month(year, month) {
            return Err(fail(&format!(
                "day {day} does not exist in {year:04}-{month:02}"
            )));
        }
        if hour > 23 || minute > 59 {
            return Err(fail(&format!("{hour:02}:{minute:02} is not a time of day")));
        }
        if second == 60 {
            return Err(fail("leap seconds (`:60`) are not supported"));
        }
        if second > 59 {
            return Err(fail(&format!("second {second} does not exist")));
        }
        let offset_secs = match &b[19..] {
            [] => return Err(fail("it has no offset (add `Z` for UTC, or `+HH:MM`)")),
            [b'.', ..] => {
                return Err(fail(
                    "fractional seconds are not supported (times are whole seconds)",
                ));
            }
            [b'Z' | b'z'] => 0,
            [sign @ (b'+' | b'-'), _, _, b':', _, _] => {
                let hours = number(20..22, "offset's hour")?;
                let minutes = number(23..25, "offset's minute")?;
                if hours > 23 || minutes > 59 {
                    return Err(fail("the offset is not between -23:59 and +23:59"));
                }
                let secs = hours * 3600 + minutes * 60;
                if *sign == b'+' { secs } else { -secs }
            }
            _ => return Err(fail("the offset is not `Z` or `±HH:MM`")),
        };
        let local =
            days_from_civil(year, month, day) * SECS_PER_DAY + hour * 3600 + minute * 60 + second;
        Timestamp::from_unix_seconds(local - offset_secs)
            .ok_or_else(|| fail("it falls outside years 0000 to 9999 in UTC"))
    }
}

impl fmt::Display for Timestamp {
    /// RFC 3339 in UTC: `2026-03-02T09:00:00Z`.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let days = self.0.div_euclid(SECS_PER_DAY);
        let secs = self.0.rem_euclid(SECS_PER_DAY);
        let (year, month, day) = civil_from_days(days);
        write!(
            f,
            "{year:04}-{month:02}-{day:02}T{:02}:{:02}:{:02}Z",
            secs / 3600,
            secs % 3600 / 60,
            secs % 60
        )
    }
}

impl FromStr for Timestamp {
    type Err = TimeError;

    fn from_str(text: &str) -> Result<Self, Self::Err> {
        Timestamp::parse_rfc3339(text)
    }
}

impl Serialize for Timestamp {
    fn serialize<S: Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        serializer.collect_str(self)
    }
}

impl<'de> Deserialize<'de> for Timestamp {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        let text = String::deserialize(deserializer)?;
        Timestamp::parse_rfc3339(&text).map_err(serde::de::Error::custom)
    }
}

fn is_leap_year(year: i64) -> bool {
    year % 4 == 0 && (year % 100 != 0 || year % 400 == 0)
}

fn days_in_month(year: i64, month: i64) -> i64 {
    match month {
        2 if is_leap_year(year) => 29,
        2 => 28,
        4 | 6 | 9 | 11 => 30,
        _ => 31,
    }
}

/// Days since 1970-01-01 of a proleptic Gregorian date (Hinnant's `days_from_civil`).
fn days_from_civil(year: i64, month: i64, day: i64) -> i64 {
    let y = if month <= 2 { year - 1 } else { year };
    let era = y.div_euclid(400);
    let year_of_era = y - era * 400;
    let day_of_year = (153 * (month + if month > 2 { -3 } else { 9 }) + 2) / 5 + day - 1;
    let day_of_era = year_of_era * 365 + year_of_era / 4 - year_of_era / 100 + day_of_year;
    era * 146_097 + day_of_era - 719_468
}

/// The date of a day counted from 1970-01-01 (Hinnant's `civil_from_days`).
fn civil_from_days(days: i64) -> (i64, i64, i64) {
    let z = days + 719_468;
    let era = z.div_euclid(146_097);
    let day_of_era = z - era * 146_097;
    let year_of_era =
        (day_of_era - day_of_era / 1460 + day_of_era / 36_524 - day_of_era / 146_096) / 365;
    let day_of_year = day_of_era - (365 * year_of_era + year_of_era / 4 - year_of_era / 100);
    let mp = (5 * day_of_year + 2) / 153;
    let day = day_of_year - (153 * mp + 2) / 5 + 1;
    let month = if mp < 10 { mp + 3 } else { mp - 9 };
    let year = year_of_era + era * 400 + i64::from(month <= 2);
    (year, month, day)
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used, clippy::expect_used)]
    use super::*;

    fn t(text: &str) -> Timestamp {
        Timestamp::parse_rfc3339(text).unwrap()
    }

    #[test]
    fn parses_utc_and_formats_it_back() {
        let ts = t("2026-03-02T09:00:00Z");
        assert_eq!(ts.unix_seconds(), 1_772_442_000);
        assert_eq!(ts.to_string(), "2026-03-02T09:00:00Z");
        assert_eq!(t("1970-01-01T00:00:00Z"), Timestamp::UNIX_EPOCH);
    }

    #[test]
    fn offsets_are_applied_and_the_result_is_utc() {
        assert_eq!(t("2026-03-02T11:00:00+02:00"), t("2026-03-02T09:00:00Z"));
        assert_eq!(t("2026-03-02T04:30:00-04:30"), t("2026-03-02T09:00:00Z"));
        assert_eq!(t("2026-03-02t09:00:00z"), t("2026-03-02T09:00:00Z"));
        assert_eq!(t("2026-03-02 09:00:00-00:00"), t("2026-03-02T09:00:00Z"));
        // An offset that crosses midnight and a year boundary.
        assert_eq!(
            t("2026-01-01T01:00:00+02:00").to_string(),
            "2025-12-31T23:00:00Z"
        );
    }

    #[test]
    fn weekday_of_a_known_monday_and_its_week() {
        let monday = t("2026-03-02T09:00:00Z");
        assert_eq!(monday.weekday(), Weekday::Monday);
        assert_eq!(monday.weekday().to_string(), "Monday");
        let names: Vec<_> = (0..7)
            .map(|d| monday.checked_add_secs(d * 86_400).unwrap().weekday())
            .collect();
        assert_eq!(
            names,
            [
                Weekday::Monday,
                Weekday::Tuesday,
                Weekday::Wednesday,
                Weekday::Thursday,
                Weekday::Friday,
                Weekday::Saturday,
                Weekday::Sunday
            ]
        );
        assert_eq!(Timestamp::UNIX_EPOCH.weekday(), Weekday::Thursday);
        // Before the epoch, and the weekday is the UTC one, not the local one.
        assert_eq!(t("1969-12-31T23:59:59Z").weekday(), Weekday::Wednesday);
        assert_eq!(t("2026-03-02T01:00:00+02:00").weekday(), Weekday::Sunday);
    }

    #[test]
    fn round_trips_across_the_whole_range() {
        for text in [
            "0000-01-01T00:00:00Z",
            "0001-02-28T12:34:56Z",
            "1600-02-29T00:00:00Z",
            "1969-12-31T23:59:59Z",
            "2000-02-29T23:59:59Z",
            "2024-02-29T00:00:00Z",
            "2100-03-01T00:00:00Z",
            "9999-12-31T23:59:59Z",
        ] {
            assert_eq!(t(text).to_string(), text);
        }
        assert_eq!(t("0000-01-01T00:00:00Z"), Timestamp::MIN);
        assert_eq!(t("9999-12-31T23:59:59Z"), Timestamp::MAX);
        // Every day over four centuries goes out and comes back.
        for day in -200_000..200_000 {
            let ts = Timestamp::from_unix_seconds(day * 86_400 + 4_321).unwrap();
            assert_eq!(t(&ts.to_string()), ts);
        }
    }

    #[test]
    fn malformed_times_say_what_is_wrong() {
        for (text, problem) in [
            ("2026-03-02", "too short"),
            ("2026-03-02T09:00:00", "no offset"),
            ("2026-03-02T09:00:00.5Z", "fractional seconds"),
            ("2026-02-29T09:00:00Z", "day 29 does not exist"),
            ("2026-13-01T09:00:00Z", "month 13"),
            ("2026-03-02T24:00:00Z", "not a time of day"),
            ("2026-03-02T23:59:60Z", "leap seconds"),
            ("2026-03-02T09:00:00+2:00", "offset"),
            ("2026-03-02T09:00:00+24:00", "offset"),
            ("2026/03/02T09:00:00Z", "YYYY-MM-DD"),
            ("26-03-02T09:00:00+00:00", "year"),
            ("9999-12-31T23:59:59-01:00", "outside years"),
            ("next monday at nine", "year"),
        ] {
            let err = Timestamp::parse_rfc3339(text).unwrap_err();
            let message = err.to_string();
            assert!(message.contains(problem), "{text}: {message}");
            assert!(message.contains("2026-03-02T09:00:00Z"), "{message}");
        }
    }

    #[test]
    fn out_of_range_seconds_are_refused() {
        assert!(Timestamp::from_unix_seconds(MAX_UNIX + 1).is_none());
        assert!(Timestamp::from_unix_seconds(MIN_UNIX - 1).is_none());
        assert!(Timestamp::MAX.checked_add_secs(1).is_none());
        assert!(Timestamp::MIN.checked_add_secs(u64::MAX).is_none());
    }

    #[test]
    fn system_time_and_serde_agree() {
        let ts = t("2026-03-02T09:00:00Z");
        assert_eq!(
            ts.to_system_time(),
            UNIX_EPOCH + Duration::from_secs(1_772_442_000)
        );
        assert_eq!(
            t("1969-12-31T23:59:00Z").to_system_time(),
            UNIX_EPOCH - Duration::from_secs(60)
        );
        assert_eq!(
            serde_json::to_string(&ts).unwrap(),
            "\"2026-03-02T09:00:00Z\""
        );
        let back: Timestamp = serde_json::from_str("\"2026-03-02T11:00:00+02:00\"").unwrap();
        assert_eq!(back, ts);
        assert!(serde_json::from_str::<Timestamp>("\"yesterday\"").is_err());
    }
}
