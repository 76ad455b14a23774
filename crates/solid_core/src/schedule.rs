//! When a recurring task ticks: `cron:` specs in a time zone and `every:`
//! intervals, as instants in epoch milliseconds (UTC).
//!
//! Every node computes ticks from the configuration alone, so a tick is the
//! same instant on every node and can key the one atomic enqueue per
//! (schedule, tick) that makes the scheduler leader-free. Nothing here reads
//! a clock or keeps state: [`Schedule::next_after`] and
//! [`Schedule::latest_at_or_before`] are pure functions of the spec, the
//! zone and the instant asked about.
//!
//! # Syntax
//! Five fields `minute hour day-of-month month day-of-week`, or six with a
//! leading `second`. Each field is a comma list of `*`, `N`, `A-B`, `*/S`
//! or `A-B/S`; months take `JAN`-`DEC` and days of the week `SUN`-`SAT`
//! (any case), and Sunday is both 0 and 7. `@yearly` (`@annually`),
//! `@monthly`, `@weekly`, `@daily` (`@midnight`) and `@hourly` stand for
//! their usual five-field specs. Day-of-month and day-of-week combine as in
//! Vixie cron: when both fields are restricted a day matches either, and
//! when either field starts with `*` a day must match both (so
//! `0 0 */2 * 1` is odd days that are Mondays, not odd days or Mondays).
//!
//! # Time zones and DST
//! A cron spec is read in its IANA time zone (UTC by default), from the tz
//! database bundled into this build: nodes of one release agree on every
//! tick whatever tzdata their hosts have, which the exactly-once enqueue
//! per tick relies on (two nodes with different rules for a zone would key
//! different instants).
//!
//! A spec whose hour field names particular hours (anything but all 24)
//! is a time of day, and runs once for each local time it names:
//! - a local time skipped by a spring-forward (02:30 in Europe/Paris on the
//!   last Sunday of March) runs at the first instant after the gap (03:00
//!   CEST), once however many of the skipped times the spec names: what
//!   Vixie cron and cronie do for fixed-time jobs. Other choices were worse:
//!   skipping it silently loses a nightly job once a year, and shifting it
//!   by the gap's length (to 03:30, as RFC 5545 and Temporal do) can put it
//!   after a 03:00 or 03:15 tick of the same spec, so ticks would no longer
//!   follow local-time order, which is what lets the search below walk each
//!   stretch of constant offset in one pass;
//! - a local time repeated by a fall-back runs at its first occurrence only.
//!
//! A spec whose hour field covers all 24 hours (`*`, `*/1`, `0-23`) repeats
//! through the day, and follows real time instead: it ticks at every
//! instant whose local time it matches, so a skipped local time does not
//! exist and a repeated one ticks in both passes. `*/15 * * * *` thus ticks
//! every 900 s in UTC across both transitions, with no duplicate and no
//! missing quarter hour. (Vixie cron decides by whether the minute or hour
//! field starts with `*`, croner by whether the second, minute or hour
//! field is a wildcard or a step; either lets `*/15 2 * * *` skip the whole
//! spring-forward day. Naming hours is what makes a spec a time of day.)
//!
//! # `every: N`
//! An `every` schedule ticks at each multiple of N seconds since the Unix
//! epoch, in UTC with no time zone. That alignment is what lets every node
//! compute the same ticks without coordination, and keeps them in place
//! across restarts and deploys (a tick is never "N seconds after the
//! process started").
//!
//! # Range
//! Ticks lie between the Unix epoch and 9999-01-01T00:00:00Z: `next_after`
//! answers `None` past the end, `latest_at_or_before` before the first tick.
//!
//! The matcher is written here rather than taken from a cron crate. `cron`
//! (0.17) requires the seconds field, ANDs the two day fields and silently
//! skips local times a spring-forward removes; `saffron` (0.1, Quartz
//! syntax) evaluates in UTC only; `croner` (4.0) has the syntactic DST rule
//! above, reports errors as free text, and brings derive_builder and strum
//! with their proc macros. `jiff` supplies the tz database and the
//! transitions between offsets, which the search below walks.

use std::fmt;

use jiff::tz::TimeZone;
use jiff::Timestamp;

/// The last instant (epoch seconds) a tick may fall on: 9999-01-01T00:00:00Z.
const MAX_SECOND: i64 = 253_370_764_800;
/// Local times searched stay within two days of the instant range; no UTC
/// offset reaches a day.
const MAX_LOCAL: i64 = MAX_SECOND + 2 * 86_400;
const MIN_LOCAL: i64 = -2 * 86_400;
const ALL_HOURS: u64 = (1 << 24) - 1;

/// A field of a cron spec, named in error messages.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Field {
    Second,
    Minute,
    Hour,
    DayOfMonth,
    Month,
    DayOfWeek,
}

impl Field {
    pub fn name(self) -> &'static str {
        match self {
            Field::Second => "second",
            Field::Minute => "minute",
            Field::Hour => "hour",
            Field::DayOfMonth => "day-of-month",
            Field::Month => "month",
            Field::DayOfWeek => "day-of-week",
        }
    }

    fn bounds(self) -> (u32, u32) {
        match self {
            Field::Second | Field::Minute => (0, 59),
            Field::Hour => (0, 23),
            Field::DayOfMonth => (1, 31),
            Field::Month => (1, 12),
            Field::DayOfWeek => (0, 7),
        }
    }

    fn names(self) -> &'static [&'static str] {
        const MONTHS: [&str; 12] = ["jan", "feb", "mar", "apr", "may", "jun", "jul", "aug", "sep", "oct", "nov", "dec"];
        const WEEKDAYS: [&str; 7] = ["sun", "mon", "tue", "wed", "thu", "fri", "sat"];
        match self {
            Field::Month => &MONTHS,
            Field::DayOfWeek => &WEEKDAYS,
            _ => &[],
        }
    }
}

impl fmt::Display for Field {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

/// Why a schedule was refused. Each message names the field and the token
/// at fault, since it reaches users as a configuration error.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum ScheduleError {
    /// The spec is blank.
    Empty,
    /// Neither five nor six whitespace-separated fields.
    FieldCount { spec: String, count: usize },
    /// An `@` word that is not one of the aliases.
    UnknownAlias { alias: String },
    /// A value that is neither a number nor a name the field takes.
    InvalidValue { field: Field, token: String },
    /// A number outside the field's range.
    OutOfRange { field: Field, token: String },
    /// `A-B` with A after B.
    ReversedRange { field: Field, token: String },
    /// A step that is not a whole number from 1 to the field's span.
    InvalidStep { field: Field, token: String },
    /// `N/S`: a step needs `*` or a range to step through.
    StepWithoutRange { field: Field, token: String },
    /// `1,,2` or a trailing comma.
    EmptyItem { field: Field, text: String },
    /// The spec is valid but matches no date (`0 0 30 2 *`).
    NeverFires { spec: String },
    /// Not a zone of the bundled IANA database.
    UnknownTimeZone { name: String },
    /// A spec or time zone name longer than anything valid: refused before
    /// parsing, so no message repeats a huge input.
    TooLong { what: &'static str, len: usize, max: usize },
    /// `every:` below one second or above [`MAX_EVERY_SECS`].
    InvalidInterval { seconds: u64 },
}

impl fmt::Display for ScheduleError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        use ScheduleError::*;
        match self {
            Empty => write!(f, "cron spec is empty: expected five fields such as \"*/5 * * * *\" or an alias such as \"@hourly\""),
            FieldCount { spec, count } => write!(
                f,
                "cron spec \"{spec}\" has {count} field{}: expected 5 (minute hour day-of-month month day-of-week) \
                 or 6 (second minute hour day-of-month month day-of-week)",
                if *count == 1 { "" } else { "s" }
            ),
            UnknownAlias { alias } => write!(
                f,
                "unknown cron alias \"{alias}\": expected @yearly, @annually, @monthly, @weekly, @daily, @midnight or @hourly"
            ),
            InvalidValue { field, token } => {
                let names = field.names();
                if names.is_empty() {
                    write!(f, "cron {field} field: \"{token}\" is not a number")
                } else {
                    let (first, last) = (names[0].to_uppercase(), names[names.len() - 1].to_uppercase());
                    write!(f, "cron {field} field: \"{token}\" is not a number or a name ({first}-{last})")
                }
            }
            OutOfRange { field, token } => {
                let (lo, hi) = field.bounds();
                write!(f, "cron {field} field: \"{token}\" is out of range {lo}-{hi}")
            }
            ReversedRange { field, token } => {
                write!(f, "cron {field} field: range \"{token}\" ends before it starts (write it as a list)")
            }
            InvalidStep { field, token } => {
                let (lo, hi) = field.bounds();
                write!(f, "cron {field} field: the step in \"{token}\" must be a whole number from 1 to {}", hi - lo + 1)
            }
            StepWithoutRange { field, token } => {
                let (start, step) = token.split_once('/').unwrap_or((token, "S"));
                let hi = field.bounds().1;
                write!(f, "cron {field} field: \"{token}\" steps from a single value: write \"{start}-{hi}/{step}\" or \"*/{step}\"")
            }
            EmptyItem { field, text } => write!(f, "cron {field} field: \"{text}\" has an empty list item"),
            NeverFires { spec } => {
                write!(f, "cron spec \"{spec}\" never fires: none of its months has the day of the month it names")
            }
            TooLong { what, len, max } => write!(f, "{what} is {len} bytes long: at most {max}"),
            UnknownTimeZone { name } => {
                write!(f, "unknown time zone \"{name}\": expected an IANA name such as \"Europe/Paris\" or \"UTC\"")
            }
            InvalidInterval { seconds } => {
                write!(
                    f,
                    "every: {seconds} is not a valid interval: expected a whole number of seconds from 1 to \
                     {MAX_EVERY_SECS} (366 days)"
                )
            }
        }
    }
}

impl std::error::Error for ScheduleError {}

impl From<ScheduleError> for crate::Error {
    fn from(e: ScheduleError) -> Self {
        crate::Error::Invalid(e.to_string())
    }
}

/// Longest cron spec accepted: far beyond any useful one (six fields of
/// lists), and short enough to quote in an error.
pub const MAX_SPEC_LEN: usize = 512;
/// Longest time zone name accepted (IANA names are under 40 bytes).
pub const MAX_ZONE_LEN: usize = 64;
/// Longest `every:` period: a year (366 days); longer periods are what cron
/// is for, and the bound keeps every tick and the state's retention within
/// the range Redis' PEXPIREAT and the script's arithmetic handle.
pub const MAX_EVERY_SECS: u64 = 366 * 24 * 3600;

/// A parsed schedule. Cheap to clone (the zone is shared).
#[derive(Debug, Clone)]
pub struct Schedule {
    rule: Rule,
}

#[derive(Debug, Clone)]
enum Rule {
    Every { period_ms: u64 },
    Cron { fields: Fields, tz: TimeZone, zone: String },
}

impl Schedule {
    /// A cron spec (five or six fields, or an alias) read in `time_zone`, an
    /// IANA name; `None` is UTC.
    pub fn cron(spec: &str, time_zone: Option<&str>) -> Result<Schedule, ScheduleError> {
        if spec.len() > MAX_SPEC_LEN {
            return Err(ScheduleError::TooLong { what: "cron spec", len: spec.len(), max: MAX_SPEC_LEN });
        }
        if let Some(name) = time_zone.filter(|n| n.len() > MAX_ZONE_LEN) {
            return Err(ScheduleError::TooLong { what: "time zone name", len: name.len(), max: MAX_ZONE_LEN });
        }
        let fields = Fields::parse(spec)?;
        let (tz, zone) = match time_zone {
            None => (TimeZone::UTC, "UTC".to_string()),
            Some(name) => (zone_named(name)?, name.to_string()),
        };
        Ok(Schedule { rule: Rule::Cron { fields, tz, zone } })
    }

    /// Every `seconds` seconds, on the multiples of `seconds` since the Unix
    /// epoch (see the module doc).
    pub fn every(seconds: u64) -> Result<Schedule, ScheduleError> {
        if (1..=MAX_EVERY_SECS).contains(&seconds) {
            Ok(Schedule { rule: Rule::Every { period_ms: seconds * 1000 } })
        } else {
            Err(ScheduleError::InvalidInterval { seconds })
        }
    }

    /// The zone a cron spec is read in, as configured; `every` schedules
    /// count in UTC.
    pub fn time_zone(&self) -> &str {
        match &self.rule {
            Rule::Every { .. } => "UTC",
            Rule::Cron { zone, .. } => zone,
        }
    }

    /// The interval of an `every` schedule, in seconds.
    pub fn every_seconds(&self) -> Option<u64> {
        match self.rule {
            Rule::Every { period_ms } => Some(period_ms / 1000),
            Rule::Cron { .. } => None,
        }
    }

    /// The first tick strictly after `t_ms` (epoch milliseconds), or `None`
    /// past the supported range. Cron ticks fall on whole seconds.
    pub fn next_after(&self, t_ms: u64) -> Option<u64> {
        match &self.rule {
            Rule::Every { period_ms } => (t_ms / period_ms).checked_add(1)?.checked_mul(*period_ms),
            Rule::Cron { fields, tz, .. } => {
                let from = i64::try_from(t_ms / 1000).ok()?.checked_add(1)?;
                Search { fields, tz }.first_at_or_after(from).map(|s| s as u64 * 1000)
            }
        }
    }

    /// The most recent tick at or before `t_ms`, or `None` when there is none
    /// since the Unix epoch. Past the supported range it answers the last
    /// tick within it.
    pub fn latest_at_or_before(&self, t_ms: u64) -> Option<u64> {
        match &self.rule {
            Rule::Every { period_ms } => Some(t_ms / period_ms * period_ms),
            Rule::Cron { fields, tz, .. } => {
                let at = i64::try_from(t_ms / 1000).unwrap_or(i64::MAX).min(MAX_SECOND);
                Search { fields, tz }.last_at_or_before(at).map(|s| s as u64 * 1000)
            }
        }
    }
}

fn zone_named(name: &str) -> Result<TimeZone, ScheduleError> {
    // jiff answers "Etc/Unknown" with a stand-in zone (UTC under another
    // name): a typo'd zone must not quietly run on UTC.
    match TimeZone::get(name) {
        Ok(tz) if !tz.is_unknown() => Ok(tz),
        _ => Err(ScheduleError::UnknownTimeZone { name: name.to_string() }),
    }
}

/// The parsed fields: one bit per allowed value.
#[derive(Debug, Clone, PartialEq, Eq)]
struct Fields {
    seconds: u64,
    minutes: u64,
    hours: u64,
    days: u64,
    months: u64,
    /// Bit 0 is Sunday; a 7 in the spec sets bit 0.
    weekdays: u64,
    /// Vixie's rule: a day must match both day fields when either starts
    /// with `*`, and either one otherwise.
    days_and_weekdays: bool,
}

struct ParsedField {
    bits: u64,
    star: bool,
}

impl Fields {
    fn parse(spec: &str) -> Result<Fields, ScheduleError> {
        let text = spec.trim();
        if text.is_empty() {
            return Err(ScheduleError::Empty);
        }
        let expanded = match text.strip_prefix('@') {
            None => text,
            Some(alias) => match alias.to_ascii_lowercase().as_str() {
                "yearly" | "annually" => "0 0 1 1 *",
                "monthly" => "0 0 1 * *",
                "weekly" => "0 0 * * 0",
                "daily" | "midnight" => "0 0 * * *",
                "hourly" => "0 * * * *",
                _ => return Err(ScheduleError::UnknownAlias { alias: text.to_string() }),
            },
        };
        let parts: Vec<&str> = expanded.split_whitespace().collect();
        let (second, rest) = match parts.len() {
            5 => ("0", &parts[..]),
            6 => (parts[0], &parts[1..]),
            count => return Err(ScheduleError::FieldCount { spec: text.to_string(), count }),
        };
        let days = parse_field(Field::DayOfMonth, rest[2])?;
        let weekdays = parse_field(Field::DayOfWeek, rest[4])?;
        let fields = Fields {
            seconds: parse_field(Field::Second, second)?.bits,
            minutes: parse_field(Field::Minute, rest[0])?.bits,
            hours: parse_field(Field::Hour, rest[1])?.bits,
            days: days.bits,
            months: parse_field(Field::Month, rest[3])?.bits,
            weekdays: (weekdays.bits | (weekdays.bits >> 7)) & 0x7f,
            days_and_weekdays: days.star || weekdays.star,
        };
        if fields.never_fires() {
            return Err(ScheduleError::NeverFires { spec: text.to_string() });
        }
        Ok(fields)
    }

    /// Only a spec whose days of the month all lie past the ends of its
    /// months never fires: a restricted day-of-week alone matches some day
    /// of every month, and any (month, day) pair that exists falls on every
    /// weekday over the years (Feb 29 too, within 28 years).
    fn never_fires(&self) -> bool {
        const LONGEST: [u32; 12] = [31, 29, 31, 30, 31, 30, 31, 31, 30, 31, 30, 31];
        if !self.days_and_weekdays {
            return false;
        }
        !(1..=12u32).any(|m| has(self.months, m) && (1..=LONGEST[m as usize - 1]).any(|d| has(self.days, d)))
    }

    /// A time of day (see the module doc): not every hour is named.
    fn names_hours(&self) -> bool {
        self.hours != ALL_HOURS
    }

    fn day_matches(&self, c: &Civil) -> bool {
        let day = has(self.days, c.day);
        let weekday = has(self.weekdays, weekday(c.year, c.month, c.day));
        if self.days_and_weekdays {
            day && weekday
        } else {
            day || weekday
        }
    }

    /// The first matching local time in `[from, until)`, as local seconds
    /// (seconds since 1970-01-01T00:00 on the local calendar).
    fn next_local(&self, from: i64, until: i64) -> Option<i64> {
        let mut c = Civil::from_local(from);
        loop {
            // The cursor only moves forward, so past `until` nothing is left.
            if c.local() >= until {
                return None;
            }
            if !has(self.months, c.month) {
                c.next_month();
                continue;
            }
            if !self.day_matches(&c) {
                c.next_day();
                continue;
            }
            match next_bit(self.hours, c.hour) {
                None => {
                    c.next_day();
                    continue;
                }
                Some(h) if h > c.hour => (c.hour, c.minute, c.second) = (h, 0, 0),
                Some(_) => {}
            }
            match next_bit(self.minutes, c.minute) {
                None => {
                    c.next_hour();
                    continue;
                }
                Some(m) if m > c.minute => (c.minute, c.second) = (m, 0),
                Some(_) => {}
            }
            match next_bit(self.seconds, c.second) {
                None => c.next_minute(),
                Some(s) => {
                    c.second = s;
                    let local = c.local();
                    return (local < until).then_some(local);
                }
            }
        }
    }

    /// The last matching local time in `[since, at]`.
    fn last_local(&self, at: i64, since: i64) -> Option<i64> {
        let mut c = Civil::from_local(at);
        loop {
            if c.local() < since {
                return None;
            }
            if !has(self.months, c.month) {
                c.previous_month_end();
                continue;
            }
            if !self.day_matches(&c) {
                c.previous_day_end();
                continue;
            }
            match previous_bit(self.hours, c.hour) {
                None => {
                    c.previous_day_end();
                    continue;
                }
                Some(h) if h < c.hour => (c.hour, c.minute, c.second) = (h, 59, 59),
                Some(_) => {}
            }
            match previous_bit(self.minutes, c.minute) {
                None => {
                    c.previous_hour_end();
                    continue;
                }
                Some(m) if m < c.minute => (c.minute, c.second) = (m, 59),
                Some(_) => {}
            }
            match previous_bit(self.seconds, c.second) {
                None => c.previous_minute_end(),
                Some(s) => {
                    c.second = s;
                    let local = c.local();
                    return (local >= since).then_some(local);
                }
            }
        }
    }
}

fn parse_field(field: Field, text: &str) -> Result<ParsedField, ScheduleError> {
    let (lo, hi) = field.bounds();
    let mut bits = 0u64;
    for item in text.split(',') {
        if item.is_empty() {
            return Err(ScheduleError::EmptyItem { field, text: text.to_string() });
        }
        let (base, step) = match item.split_once('/') {
            None => (item, None),
            Some((base, step)) => match number(step) {
                Some(n) if n >= 1 && n <= hi - lo + 1 => (base, Some(n)),
                _ => return Err(ScheduleError::InvalidStep { field, token: item.to_string() }),
            },
        };
        let (start, end) = if base == "*" {
            (lo, hi)
        } else if let Some((a, b)) = base.split_once('-') {
            let (a, b) = (value(field, a, item)?, value(field, b, item)?);
            if a > b {
                return Err(ScheduleError::ReversedRange { field, token: base.to_string() });
            }
            (a, b)
        } else {
            let v = value(field, base, item)?;
            if step.is_some() {
                return Err(ScheduleError::StepWithoutRange { field, token: item.to_string() });
            }
            (v, v)
        };
        let step = step.unwrap_or(1);
        let mut v = start;
        while v <= end {
            bits |= 1 << v;
            v += step;
        }
    }
    Ok(ParsedField { bits, star: text.starts_with('*') })
}

/// A field value: a number within the field's bounds, or a month or weekday
/// name. `item` (the list item) stands in for an empty token in messages.
fn value(field: Field, token: &str, item: &str) -> Result<u32, ScheduleError> {
    let (lo, hi) = field.bounds();
    if !token.is_empty() && token.bytes().all(|b| b.is_ascii_digit()) {
        return match number(token) {
            Some(v) if (lo..=hi).contains(&v) => Ok(v),
            _ => Err(ScheduleError::OutOfRange { field, token: token.to_string() }),
        };
    }
    let names = field.names();
    match names.iter().position(|n| n.eq_ignore_ascii_case(token)) {
        // Months count from 1, weekdays from 0 (Sunday).
        Some(i) => Ok(i as u32 + lo),
        None => Err(ScheduleError::InvalidValue {
            field,
            token: if token.is_empty() { item.to_string() } else { token.to_string() },
        }),
    }
}

fn number(token: &str) -> Option<u32> {
    if token.is_empty() || token.len() > 9 || !token.bytes().all(|b| b.is_ascii_digit()) {
        return None;
    }
    token.parse().ok()
}

fn has(bits: u64, v: u32) -> bool {
    bits & (1 << v) != 0
}

/// The lowest set bit at or above `v`.
fn next_bit(bits: u64, v: u32) -> Option<u32> {
    let above = bits & (!0u64 << v);
    (above != 0).then(|| above.trailing_zeros())
}

/// The highest set bit at or below `v` (v < 63).
fn previous_bit(bits: u64, v: u32) -> Option<u32> {
    let below = bits & ((2u64 << v) - 1);
    (below != 0).then(|| 63 - below.leading_zeros())
}

/// The search over one zone's timeline. The zone's transitions cut it into
/// stretches of constant offset, within which local time runs one to one
/// with real time; each stretch is searched in local time, and the edges
/// between stretches carry the DST rules of the module doc.
struct Search<'a> {
    fields: &'a Fields,
    tz: &'a TimeZone,
}

impl Search<'_> {
    fn offset_at(&self, s: i64) -> i64 {
        Timestamp::from_second(s).map_or(0, |ts| self.tz.to_offset(ts).seconds() as i64)
    }

    /// The stretch holding instant `s`: its offset, its first instant (the
    /// latest transition at or before `s`) with the offset before that
    /// transition, and its end (the next transition), if any.
    fn stretch(&self, s: i64) -> Stretch {
        let ts = Timestamp::from_second(s).unwrap_or(Timestamp::MAX);
        let start = Timestamp::from_second(s + 1)
            .ok()
            .and_then(|next| self.tz.preceding(next).next())
            .map(|t| t.timestamp().as_second());
        Stretch {
            offset: self.tz.to_offset(ts).seconds() as i64,
            start: start.map(|a| (a, self.offset_at(a - 1))),
            end: self.tz.following(ts).next().map(|t| t.timestamp().as_second()),
        }
    }

    /// For a time-of-day spec, whether it names a local time in the gap that
    /// a spring-forward at instant `at` skipped, from `before` to `after`.
    fn names_gap(&self, at: i64, before: i64, after: i64) -> bool {
        self.fields.names_hours() && before < after && self.fields.next_local(at + before, at + after).is_some()
    }

    fn first_at_or_after(&self, mut s: i64) -> Option<i64> {
        loop {
            if s > MAX_SECOND {
                return None;
            }
            let st = self.stretch(s);
            let mut from = s + st.offset;
            if let Some((a, before)) = st.start {
                if a == s && self.names_gap(a, before, st.offset) {
                    return Some(a);
                }
                // After a fall-back a time-of-day spec already ran the
                // repeated local times in their first pass (the stretch just
                // before, as in jiff's own disambiguation).
                if self.fields.names_hours() && before > st.offset {
                    from = from.max(a + before);
                }
            }
            let until = st.end.map_or(MAX_LOCAL, |e| e + st.offset).min(MAX_LOCAL);
            if let Some(local) = self.fields.next_local(from, until) {
                let tick = local - st.offset;
                return (tick <= MAX_SECOND).then_some(tick);
            }
            s = st.end?;
        }
    }

    fn last_at_or_before(&self, mut s: i64) -> Option<i64> {
        loop {
            if s < 0 {
                return None;
            }
            let st = self.stretch(s);
            let mut since = st.start.map_or(MIN_LOCAL, |(a, _)| a + st.offset);
            if let Some((a, before)) = st.start {
                if self.fields.names_hours() && before > st.offset {
                    since = a + before;
                }
            }
            if since <= s + st.offset {
                if let Some(local) = self.fields.last_local(s + st.offset, since) {
                    let tick = local - st.offset;
                    return (tick >= 0).then_some(tick);
                }
            }
            let (a, before) = st.start?;
            if self.names_gap(a, before, st.offset) {
                return (a >= 0).then_some(a);
            }
            s = a - 1;
        }
    }
}

struct Stretch {
    offset: i64,
    start: Option<(i64, i64)>,
    end: Option<i64>,
}

/// A local date and time on the proleptic Gregorian calendar; the cursor of
/// the searches. Always a valid date.
#[derive(Debug, Clone, Copy)]
struct Civil {
    year: i64,
    month: u32,
    day: u32,
    hour: u32,
    minute: u32,
    second: u32,
}

impl Civil {
    fn from_local(t: i64) -> Civil {
        let (year, month, day) = civil_from_days(t.div_euclid(86_400));
        let sod = t.rem_euclid(86_400) as u32;
        Civil { year, month, day, hour: sod / 3600, minute: sod / 60 % 60, second: sod % 60 }
    }

    fn local(&self) -> i64 {
        days_from_civil(self.year, self.month, self.day) * 86_400
            + (self.hour * 3600 + self.minute * 60 + self.second) as i64
    }

    fn next_month(&mut self) {
        if self.month == 12 {
            (self.year, self.month) = (self.year + 1, 1);
        } else {
            self.month += 1;
        }
        (self.day, self.hour, self.minute, self.second) = (1, 0, 0, 0);
    }

    fn next_day(&mut self) {
        if self.day == days_in_month(self.year, self.month) {
            self.next_month();
        } else {
            (self.day, self.hour, self.minute, self.second) = (self.day + 1, 0, 0, 0);
        }
    }

    fn next_hour(&mut self) {
        if self.hour == 23 {
            self.next_day();
        } else {
            (self.hour, self.minute, self.second) = (self.hour + 1, 0, 0);
        }
    }

    fn next_minute(&mut self) {
        if self.minute == 59 {
            self.next_hour();
        } else {
            (self.minute, self.second) = (self.minute + 1, 0);
        }
    }

    fn previous_month_end(&mut self) {
        if self.month == 1 {
            (self.year, self.month) = (self.year - 1, 12);
        } else {
            self.month -= 1;
        }
        self.day = days_in_month(self.year, self.month);
        (self.hour, self.minute, self.second) = (23, 59, 59);
    }

    fn previous_day_end(&mut self) {
        if self.day == 1 {
            self.previous_month_end();
        } else {
            (self.day, self.hour, self.minute, self.second) = (self.day - 1, 23, 59, 59);
        }
    }

    fn previous_hour_end(&mut self) {
        if self.hour == 0 {
            self.previous_day_end();
        } else {
            (self.hour, self.minute, self.second) = (self.hour - 1, 59, 59);
        }
    }

    fn previous_minute_end(&mut self) {
        if self.minute == 0 {
            self.previous_hour_end();
        } else {
            (self.minute, self.second) = (self.minute - 1, 59);
        }
    }
}

fn is_leap(year: i64) -> bool {
    year % 4 == 0 && (year % 100 != 0 || year % 400 == 0)
}

fn days_in_month(year: i64, month: u32) -> u32 {
    match month {
        2 if is_leap(year) => 29,
        2 => 28,
        4 | 6 | 9 | 11 => 30,
        _ => 31,
    }
}

/// Days since 1970-01-01 (Howard Hinnant's algorithm).
fn days_from_civil(year: i64, month: u32, day: u32) -> i64 {
    let y = if month <= 2 { year - 1 } else { year };
    let era = y.div_euclid(400);
    let yoe = y - era * 400;
    let mp = (month as i64 + 9) % 12;
    let doy = (153 * mp + 2) / 5 + day as i64 - 1;
    let doe = yoe * 365 + yoe / 4 - yoe / 100 + doy;
    era * 146_097 + doe - 719_468
}

fn civil_from_days(days: i64) -> (i64, u32, u32) {
    let z = days + 719_468;
    let era = z.div_euclid(146_097);
    let doe = z - era * 146_097;
    let yoe = (doe - doe / 1460 + doe / 36_524 - doe / 146_096) / 365;
    let doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    let mp = (5 * doy + 2) / 153;
    let day = (doy - (153 * mp + 2) / 5 + 1) as u32;
    let month = if mp < 10 { mp + 3 } else { mp - 9 } as u32;
    (if month <= 2 { yoe + era * 400 + 1 } else { yoe + era * 400 }, month, day)
}

/// 0 is Sunday.
fn weekday(year: i64, month: u32, day: u32) -> u32 {
    // 1970-01-01 was a Thursday.
    (days_from_civil(year, month, day) + 4).rem_euclid(7) as u32
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn civil_round_trips() {
        for days in [-800_000i64, -1, 0, 1, 11_016, 19_782, 2_932_896] {
            let (y, m, d) = civil_from_days(days);
            assert_eq!(days_from_civil(y, m, d), days, "{y}-{m}-{d}");
        }
        assert_eq!(civil_from_days(0), (1970, 1, 1));
        assert_eq!(civil_from_days(19_782), (2024, 2, 29));
        assert_eq!(weekday(2024, 2, 29), 4);
        assert_eq!(weekday(2000, 1, 2), 0);
    }

    #[test]
    fn bit_helpers() {
        assert_eq!(next_bit(0b1010, 0), Some(1));
        assert_eq!(next_bit(0b1010, 2), Some(3));
        assert_eq!(next_bit(0b1010, 4), None);
        assert_eq!(previous_bit(0b1010, 2), Some(1));
        assert_eq!(previous_bit(0b1010, 0), None);
        assert_eq!(previous_bit(1 << 59, 59), Some(59));
    }
}
