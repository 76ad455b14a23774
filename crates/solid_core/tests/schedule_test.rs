//! Schedules: every syntax form and error, DST in Europe/Paris and
//! America/New_York, calendar edges, and property tests against a
//! brute-force matcher that knows nothing of the search in schedule.rs.

use std::collections::BTreeSet;

use jiff::civil::DateTime;
use jiff::tz::{AmbiguousOffset, TimeZone};
use jiff::Timestamp;
use proptest::prelude::*;
use solid_core::schedule::{Field, Schedule, ScheduleError, MAX_EVERY_SECS};

fn ms(iso: &str) -> u64 {
    iso.parse::<Timestamp>().unwrap_or_else(|e| panic!("{iso}: {e}")).as_millisecond() as u64
}

fn iso(t_ms: u64) -> String {
    Timestamp::from_millisecond(t_ms as i64).unwrap().to_string()
}

fn cron(spec: &str) -> Schedule {
    Schedule::cron(spec, None).unwrap_or_else(|e| panic!("{spec}: {e}"))
}

fn cron_in(spec: &str, zone: &str) -> Schedule {
    Schedule::cron(spec, Some(zone)).unwrap_or_else(|e| panic!("{spec} in {zone}: {e}"))
}

/// The first `n` ticks strictly after `from`, as UTC ISO strings.
fn ticks(s: &Schedule, from: &str, n: usize) -> Vec<String> {
    let mut t = ms(from);
    (0..n)
        .map(|_| {
            t = s.next_after(t).expect("a next tick");
            iso(t)
        })
        .collect()
}

/// Every tick in (from, to], as UTC ISO strings.
fn ticks_between(s: &Schedule, from: &str, to: &str) -> Vec<String> {
    let (mut t, end) = (ms(from), ms(to));
    let mut out = Vec::new();
    while let Some(n) = s.next_after(t).filter(|&n| n <= end) {
        out.push(iso(n));
        t = n;
    }
    out
}

fn err(spec: &str) -> ScheduleError {
    match Schedule::cron(spec, None) {
        Ok(s) => panic!("{spec} parsed: {s:?}"),
        Err(e) => e,
    }
}

// ---------------------------------------------------------------- syntax

#[test]
fn five_fields_every_five_minutes() {
    assert_eq!(
        ticks(&cron("*/5 * * * *"), "2024-01-01T00:00:00Z", 3),
        ["2024-01-01T00:05:00Z", "2024-01-01T00:10:00Z", "2024-01-01T00:15:00Z"]
    );
    // Strictly after: a time on a tick moves to the next one; a time inside
    // a second rounds up to the next tick, not to its own second.
    assert_eq!(cron("*/5 * * * *").next_after(ms("2024-01-01T00:05:00Z")), Some(ms("2024-01-01T00:10:00Z")));
    assert_eq!(cron("*/5 * * * *").next_after(ms("2024-01-01T00:04:59.999Z")), Some(ms("2024-01-01T00:05:00Z")));
}

#[test]
fn single_values_lists_and_ranges() {
    assert_eq!(ticks(&cron("0 9 * * *"), "2024-05-01T10:00:00Z", 2), ["2024-05-02T09:00:00Z", "2024-05-03T09:00:00Z"]);
    assert_eq!(
        ticks(&cron("5,20,40 * * * *"), "2024-05-01T10:00:00Z", 4),
        ["2024-05-01T10:05:00Z", "2024-05-01T10:20:00Z", "2024-05-01T10:40:00Z", "2024-05-01T11:05:00Z"]
    );
    assert_eq!(
        ticks(&cron("0 22-23,1 * * *"), "2024-05-01T21:00:00Z", 4),
        ["2024-05-01T22:00:00Z", "2024-05-01T23:00:00Z", "2024-05-02T01:00:00Z", "2024-05-02T22:00:00Z"]
    );
}

#[test]
fn steps_over_ranges_and_stars() {
    // 1-10/2: 1, 3, 5, 7, 9.
    assert_eq!(
        ticks(&cron("1-10/2 * * * *"), "2024-05-01T10:00:00Z", 6),
        [
            "2024-05-01T10:01:00Z",
            "2024-05-01T10:03:00Z",
            "2024-05-01T10:05:00Z",
            "2024-05-01T10:07:00Z",
            "2024-05-01T10:09:00Z",
            "2024-05-01T11:01:00Z"
        ]
    );
    // */7 on minutes restarts at 0 each hour: 49, 56, then 0.
    assert_eq!(
        ticks(&cron("*/7 * * * *"), "2024-05-01T10:48:00Z", 3),
        ["2024-05-01T10:49:00Z", "2024-05-01T10:56:00Z", "2024-05-01T11:00:00Z"]
    );
    // Hours 0-23/6 and days of the month */10 (1, 11, 21, 31).
    assert_eq!(
        ticks(&cron("0 0-23/6 */10 * *"), "2024-01-01T19:00:00Z", 2),
        ["2024-01-11T00:00:00Z", "2024-01-11T06:00:00Z"]
    );
    assert_eq!(
        ticks(&cron("0 0 */10 * *"), "2024-01-21T00:00:00Z", 3),
        ["2024-01-31T00:00:00Z", "2024-02-01T00:00:00Z", "2024-02-11T00:00:00Z"]
    );
}

#[test]
fn month_and_weekday_names_in_any_case() {
    // 2024-06-03 is a Monday.
    let weekdays = ticks(&cron("0 8 * * MON-FRI"), "2024-06-01T00:00:00Z", 6);
    assert_eq!(
        weekdays,
        [
            "2024-06-03T08:00:00Z",
            "2024-06-04T08:00:00Z",
            "2024-06-05T08:00:00Z",
            "2024-06-06T08:00:00Z",
            "2024-06-07T08:00:00Z",
            "2024-06-10T08:00:00Z"
        ]
    );
    assert_eq!(ticks(&cron("0 8 * * mon-fri"), "2024-06-01T00:00:00Z", 6), weekdays);
    assert_eq!(ticks(&cron("0 8 * * 1-5"), "2024-06-01T00:00:00Z", 6), weekdays);
    assert_eq!(
        ticks(&cron("0 0 1 jan,Jul * "), "2024-03-01T00:00:00Z", 3),
        ["2024-07-01T00:00:00Z", "2025-01-01T00:00:00Z", "2025-07-01T00:00:00Z"]
    );
    assert_eq!(
        ticks(&cron("0 0 1 JAN-DEC/3 *"), "2024-03-01T00:00:00Z", 3),
        ["2024-04-01T00:00:00Z", "2024-07-01T00:00:00Z", "2024-10-01T00:00:00Z"]
    );
    assert_eq!(
        ticks(&cron("0 12 * * sun,Sat"), "2024-06-05T00:00:00Z", 2),
        ["2024-06-08T12:00:00Z", "2024-06-09T12:00:00Z"]
    );
}

#[test]
fn sunday_is_zero_and_seven() {
    let zero = ticks(&cron("0 0 * * 0"), "2024-06-01T00:00:00Z", 5);
    assert_eq!(zero[0], "2024-06-02T00:00:00Z");
    assert_eq!(ticks(&cron("0 0 * * 7"), "2024-06-01T00:00:00Z", 5), zero);
    assert_eq!(ticks(&cron("0 0 * * SUN"), "2024-06-01T00:00:00Z", 5), zero);
    // 5-7: Friday, Saturday, Sunday.
    assert_eq!(
        ticks(&cron("0 0 * * 5-7"), "2024-06-01T00:00:00Z", 4),
        ["2024-06-02T00:00:00Z", "2024-06-07T00:00:00Z", "2024-06-08T00:00:00Z", "2024-06-09T00:00:00Z"]
    );
    // 0-7 and * are every day.
    assert_eq!(
        ticks(&cron("0 0 * * 0-7"), "2024-06-01T00:00:00Z", 9),
        ticks(&cron("0 0 * * *"), "2024-06-01T00:00:00Z", 9)
    );
}

#[test]
fn six_fields_lead_with_seconds() {
    assert_eq!(
        ticks(&cron("*/20 * * * * *"), "2024-01-01T00:00:00Z", 4),
        ["2024-01-01T00:00:20Z", "2024-01-01T00:00:40Z", "2024-01-01T00:01:00Z", "2024-01-01T00:01:20Z"]
    );
    assert_eq!(
        ticks(&cron("30 0 12 * * *"), "2024-01-01T12:00:30Z", 2),
        ["2024-01-02T12:00:30Z", "2024-01-03T12:00:30Z"]
    );
    assert_eq!(
        ticks(&cron("* * * * * *"), "2024-01-01T23:59:58.5Z", 3),
        ["2024-01-01T23:59:59Z", "2024-01-02T00:00:00Z", "2024-01-02T00:00:01Z"]
    );
    // Five fields tick on second 0.
    assert_eq!(ticks(&cron("* * * * *"), "2024-01-01T00:00:01Z", 1), ["2024-01-01T00:01:00Z"]);
}

#[test]
fn aliases_stand_for_their_specs() {
    for (alias, spec) in [
        ("@yearly", "0 0 1 1 *"),
        ("@annually", "0 0 1 1 *"),
        ("@monthly", "0 0 1 * *"),
        ("@weekly", "0 0 * * 0"),
        ("@daily", "0 0 * * *"),
        ("@midnight", "0 0 * * *"),
        ("@hourly", "0 * * * *"),
        ("@HOURLY", "0 * * * *"),
    ] {
        let expected = ticks(&cron(spec), "2023-12-30T10:00:00Z", 5);
        assert_eq!(ticks(&cron(alias), "2023-12-30T10:00:00Z", 5), expected, "{alias}");
        assert_eq!(
            ticks(&cron_in(alias, "Asia/Tokyo"), "2023-12-30T10:00:00Z", 5),
            ticks(&cron_in(spec, "Asia/Tokyo"), "2023-12-30T10:00:00Z", 5)
        );
    }
    assert_eq!(ticks(&cron("@yearly"), "2024-06-01T00:00:00Z", 2), ["2025-01-01T00:00:00Z", "2026-01-01T00:00:00Z"]);
    assert_eq!(ticks(&cron("@weekly"), "2024-06-01T00:00:00Z", 1), ["2024-06-02T00:00:00Z"]);
}

#[test]
fn whitespace_between_fields_is_free() {
    assert_eq!(ticks(&cron("  0\t9  * *   1 "), "2024-06-01T00:00:00Z", 1), ["2024-06-03T09:00:00Z"]);
}

#[test]
fn day_fields_combine_as_vixie_cron() {
    // Both restricted: the 13th OR a Friday. June 2024: Fri 7, Thu 13, Fri 14.
    assert_eq!(
        ticks(&cron("0 0 13 * 5"), "2024-06-06T00:00:00Z", 4),
        ["2024-06-07T00:00:00Z", "2024-06-13T00:00:00Z", "2024-06-14T00:00:00Z", "2024-06-21T00:00:00Z"]
    );
    // Day of the month starting with *: both must match, odd days that are
    // Mondays (June 2024: Mondays 3, 10, 17, 24; odd ones 3 and 17).
    assert_eq!(
        ticks(&cron("0 0 */2 * 1"), "2024-06-01T00:00:00Z", 2),
        ["2024-06-03T00:00:00Z", "2024-06-17T00:00:00Z"]
    );
    // Day of the week starting with *: both must match, the 1st falling on
    // Sunday, Wednesday or Saturday (*/3 = 0, 3, 6; 2024-09-01 is a Sunday).
    assert_eq!(ticks(&cron("0 0 1 * */3"), "2024-06-01T00:00:00Z", 1), ["2024-09-01T00:00:00Z"]);
    // One of them plain *: the other alone decides.
    assert_eq!(ticks(&cron("0 0 * * 1"), "2024-06-01T00:00:00Z", 2), ["2024-06-03T00:00:00Z", "2024-06-10T00:00:00Z"]);
    assert_eq!(ticks(&cron("0 0 15 * *"), "2024-06-01T00:00:00Z", 2), ["2024-06-15T00:00:00Z", "2024-07-15T00:00:00Z"]);
}

#[test]
fn leap_days() {
    let s = cron("0 0 29 2 *");
    assert_eq!(
        ticks(&s, "2024-03-01T00:00:00Z", 3),
        ["2028-02-29T00:00:00Z", "2032-02-29T00:00:00Z", "2036-02-29T00:00:00Z"]
    );
    // 2100 is not a leap year; 2000 was.
    assert_eq!(ticks(&s, "2096-03-01T00:00:00Z", 1), ["2104-02-29T00:00:00Z"]);
    assert_eq!(s.latest_at_or_before(ms("2003-01-01T00:00:00Z")), Some(ms("2000-02-29T00:00:00Z")));
    assert_eq!(s.latest_at_or_before(ms("2105-01-01T00:00:00Z")), Some(ms("2104-02-29T00:00:00Z")));
    assert_eq!(s.latest_at_or_before(ms("2024-02-29T00:00:00Z")), Some(ms("2024-02-29T00:00:00Z")));
    assert_eq!(s.latest_at_or_before(ms("2024-02-28T23:59:59.999Z")), Some(ms("2020-02-29T00:00:00Z")));
    // Feb 29 OR a Monday (of February): Mondays carry it between leap years.
    assert_eq!(
        ticks(&cron("0 0 29 2 1"), "2025-02-20T00:00:00Z", 3),
        ["2025-02-24T00:00:00Z", "2026-02-02T00:00:00Z", "2026-02-09T00:00:00Z"]
    );
    assert_eq!(
        ticks_between(&cron("0 0 29 2 1"), "2028-02-20T00:00:00Z", "2028-03-31T00:00:00Z"),
        ["2028-02-21T00:00:00Z", "2028-02-28T00:00:00Z", "2028-02-29T00:00:00Z"]
    );
}

#[test]
fn month_ends() {
    // The 31st skips the months without one.
    assert_eq!(
        ticks(&cron("0 0 31 * *"), "2024-01-31T00:00:00Z", 4),
        ["2024-03-31T00:00:00Z", "2024-05-31T00:00:00Z", "2024-07-31T00:00:00Z", "2024-08-31T00:00:00Z"]
    );
    // The 30th skips February only.
    assert_eq!(ticks(&cron("0 0 30 * *"), "2025-01-30T00:00:00Z", 2), ["2025-03-30T00:00:00Z", "2025-04-30T00:00:00Z"]);
    // 28-31 is the last days of each month, however many it has.
    assert_eq!(
        ticks_between(&cron("0 0 28-31 * *"), "2025-02-01T00:00:00Z", "2025-03-29T00:00:00Z"),
        ["2025-02-28T00:00:00Z", "2025-03-28T00:00:00Z", "2025-03-29T00:00:00Z"]
    );
    assert_eq!(
        ticks_between(&cron("0 0 28-31 2 *"), "2024-02-01T00:00:00Z", "2024-12-31T00:00:00Z"),
        ["2024-02-28T00:00:00Z", "2024-02-29T00:00:00Z"]
    );
    // Crossing the year end.
    assert_eq!(ticks(&cron("59 23 31 12 *"), "2024-12-31T23:59:00Z", 1), ["2025-12-31T23:59:00Z"]);
    assert_eq!(cron("59 23 31 12 *").latest_at_or_before(ms("2025-01-01T00:00:00Z")), Some(ms("2024-12-31T23:59:00Z")));
}

// ---------------------------------------------------------------- errors

#[test]
fn errors_name_the_field_and_the_token() {
    use ScheduleError::*;
    let cases: Vec<(&str, ScheduleError, &str)> = vec![
        ("", Empty, "empty"),
        ("   ", Empty, "empty"),
        ("* * * *", FieldCount { spec: "* * * *".into(), count: 4 }, "has 4 fields"),
        ("* * * * * * *", FieldCount { spec: "* * * * * * *".into(), count: 7 }, "expected 5"),
        ("@reboot", UnknownAlias { alias: "@reboot".into() }, "\"@reboot\""),
        ("@every 5s", UnknownAlias { alias: "@every 5s".into() }, "unknown cron alias"),
        (
            "60 * * * *",
            OutOfRange { field: Field::Minute, token: "60".into() },
            "minute field: \"60\" is out of range 0-59",
        ),
        (
            "* 24 * * *",
            OutOfRange { field: Field::Hour, token: "24".into() },
            "hour field: \"24\" is out of range 0-23",
        ),
        (
            "* * 0 * *",
            OutOfRange { field: Field::DayOfMonth, token: "0".into() },
            "day-of-month field: \"0\" is out of range 1-31",
        ),
        ("* * 32 * *", OutOfRange { field: Field::DayOfMonth, token: "32".into() }, "1-31"),
        (
            "* * * 13 *",
            OutOfRange { field: Field::Month, token: "13".into() },
            "month field: \"13\" is out of range 1-12",
        ),
        (
            "* * * * 8",
            OutOfRange { field: Field::DayOfWeek, token: "8".into() },
            "day-of-week field: \"8\" is out of range 0-7",
        ),
        ("61 * * * * *", OutOfRange { field: Field::Second, token: "61".into() }, "second field"),
        ("1-75 * * * *", OutOfRange { field: Field::Minute, token: "75".into() }, "\"75\""),
        ("99999999999 * * * *", OutOfRange { field: Field::Minute, token: "99999999999".into() }, "out of range"),
        ("x * * * *", InvalidValue { field: Field::Minute, token: "x".into() }, "minute field: \"x\" is not a number"),
        ("* * * * MON-FUN", InvalidValue { field: Field::DayOfWeek, token: "FUN".into() }, "(SUN-SAT)"),
        ("* * * JANUARY *", InvalidValue { field: Field::Month, token: "JANUARY".into() }, "(JAN-DEC)"),
        ("* * * * JAN", InvalidValue { field: Field::DayOfWeek, token: "JAN".into() }, "day-of-week"),
        (
            "* MON * * *",
            InvalidValue { field: Field::Hour, token: "MON".into() },
            "hour field: \"MON\" is not a number",
        ),
        ("* * ? * *", InvalidValue { field: Field::DayOfMonth, token: "?".into() }, "\"?\""),
        ("* * L * *", InvalidValue { field: Field::DayOfMonth, token: "L".into() }, "\"L\""),
        ("-5 * * * *", InvalidValue { field: Field::Minute, token: "-5".into() }, "\"-5\""),
        ("+5 * * * *", InvalidValue { field: Field::Minute, token: "+5".into() }, "\"+5\""),
        (
            "10-5 * * * *",
            ReversedRange { field: Field::Minute, token: "10-5".into() },
            "range \"10-5\" ends before it starts",
        ),
        ("* * * * FRI-MON", ReversedRange { field: Field::DayOfWeek, token: "FRI-MON".into() }, "day-of-week"),
        ("*/0 * * * *", InvalidStep { field: Field::Minute, token: "*/0".into() }, "from 1 to 60"),
        ("*/61 * * * *", InvalidStep { field: Field::Minute, token: "*/61".into() }, "\"*/61\""),
        ("* */25 * * *", InvalidStep { field: Field::Hour, token: "*/25".into() }, "from 1 to 24"),
        ("*/x * * * *", InvalidStep { field: Field::Minute, token: "*/x".into() }, "whole number"),
        ("*/ * * * *", InvalidStep { field: Field::Minute, token: "*/".into() }, "\"*/\""),
        ("1-10/2/3 * * * *", InvalidStep { field: Field::Minute, token: "1-10/2/3".into() }, "step"),
        (
            "0/15 * * * *",
            StepWithoutRange { field: Field::Minute, token: "0/15".into() },
            "write \"0-59/15\" or \"*/15\"",
        ),
        ("1,,2 * * * *", EmptyItem { field: Field::Minute, text: "1,,2".into() }, "\"1,,2\" has an empty list item"),
        ("1, * * * *", EmptyItem { field: Field::Minute, text: "1,".into() }, "empty list item"),
        ("0 0 30 2 *", NeverFires { spec: "0 0 30 2 *".into() }, "never fires"),
        ("0 0 31 4,6,9,11 *", NeverFires { spec: "0 0 31 4,6,9,11 *".into() }, "never fires"),
        ("* * 15W * *", InvalidValue { field: Field::DayOfMonth, token: "15W".into() }, "\"15W\""),
        ("* * * * MON#2", InvalidValue { field: Field::DayOfWeek, token: "MON#2".into() }, "\"MON#2\""),
        ("0 0 31 2 */2", NeverFires { spec: "0 0 31 2 */2".into() }, "never fires"),
    ];
    for (spec, expected, fragment) in cases {
        let e = err(spec);
        assert_eq!(e, expected, "{spec}");
        assert!(e.to_string().contains(fragment), "{spec}: {e} lacks {fragment:?}");
    }
    // Restricted days of the week rescue an impossible day of the month
    // (either one matches), so these fire.
    assert_eq!(ticks(&cron("0 0 30 2 1"), "2024-02-01T00:00:00Z", 1), ["2024-02-05T00:00:00Z"]);
    assert!(Schedule::cron("0 0 29 2 *", None).is_ok());
}

#[test]
fn errors_convert_to_the_core_error() {
    let e: solid_core::Error = err("0/15 * * * *").into();
    assert_eq!(
        e,
        solid_core::Error::Invalid(
            "cron minute field: \"0/15\" steps from a single value: write \"0-59/15\" or \"*/15\"".into()
        )
    );
}

#[test]
fn time_zones_are_iana_names_and_default_to_utc() {
    assert_eq!(cron("0 3 * * *").time_zone(), "UTC");
    let paris = cron_in("0 3 * * *", "Europe/Paris");
    assert_eq!(paris.time_zone(), "Europe/Paris");
    assert_eq!(ticks(&paris, "2024-01-15T00:00:00Z", 1), ["2024-01-15T02:00:00Z"]);
    assert_eq!(ticks(&paris, "2024-07-15T00:00:00Z", 1), ["2024-07-15T01:00:00Z"]);
    assert_eq!(ticks(&cron_in("0 3 * * *", "UTC"), "2024-07-15T00:00:00Z", 1), ["2024-07-15T03:00:00Z"]);
    assert_eq!(ticks(&cron_in("0 3 * * *", "Asia/Kolkata"), "2024-07-15T00:00:00Z", 1), ["2024-07-15T21:30:00Z"]);
    // Names are looked up without regard to case.
    assert_eq!(ticks(&cron_in("0 3 * * *", "europe/paris"), "2024-07-15T00:00:00Z", 1), ["2024-07-15T01:00:00Z"]);
    for bad in ["Europe/Pariss", "Mars/Olympus", "", "Etc/Unknown", "CEST+2"] {
        let e = Schedule::cron("0 3 * * *", Some(bad)).unwrap_err();
        assert_eq!(e, ScheduleError::UnknownTimeZone { name: bad.into() });
        assert!(e.to_string().contains(&format!("unknown time zone \"{bad}\"")), "{e}");
    }
}

#[test]
fn every_ticks_on_epoch_multiples() {
    let s = Schedule::every(30).unwrap();
    assert_eq!(s.every_seconds(), Some(30));
    assert_eq!(s.time_zone(), "UTC");
    assert_eq!(s.next_after(0), Some(30_000));
    assert_eq!(s.next_after(29_999), Some(30_000));
    assert_eq!(s.next_after(30_000), Some(60_000));
    assert_eq!(s.latest_at_or_before(30_000), Some(30_000));
    assert_eq!(s.latest_at_or_before(59_999), Some(30_000));
    assert_eq!(s.latest_at_or_before(7), Some(0));
    // Not relative to any start: two nodes asking at different moments
    // land on the same ticks.
    let t = ms("2024-05-01T10:00:07.250Z");
    assert_eq!(iso(s.next_after(t).unwrap()), "2024-05-01T10:00:30Z");
    // 1_714_557_607 (10:00:07) is a multiple of 7.
    assert_eq!(iso(Schedule::every(7).unwrap().next_after(t).unwrap()), "2024-05-01T10:00:14Z");
    assert_eq!(iso(Schedule::every(86_400).unwrap().next_after(t).unwrap()), "2024-05-02T00:00:00Z");
    assert_eq!(Schedule::every(1).unwrap().next_after(1_500), Some(2_000));
    assert_eq!(Schedule::every(30).unwrap().next_after(u64::MAX - 5), None);
    assert_eq!(cron("0 3 * * *").every_seconds(), None);
    assert_eq!(Schedule::every(MAX_EVERY_SECS).unwrap().every_seconds(), Some(MAX_EVERY_SECS));
    for bad in [0, MAX_EVERY_SECS + 1, u64::MAX / 999] {
        let e = Schedule::every(bad).unwrap_err();
        assert_eq!(e, ScheduleError::InvalidInterval { seconds: bad });
        assert!(e.to_string().starts_with(&format!("every: {bad} is not a valid interval")), "{e}");
    }
}

#[test]
fn schedules_are_shared_across_threads() {
    let s = std::sync::Arc::new(cron_in("0 3 * * *", "Europe/Paris"));
    let t = ms("2024-03-30T12:00:00Z");
    let shared = s.clone();
    let other = std::thread::spawn(move || shared.next_after(t)).join().unwrap();
    assert_eq!(other, s.next_after(t));
    assert_eq!(other.map(iso).as_deref(), Some("2024-03-31T01:00:00Z"));
}

#[test]
fn range_ends() {
    assert_eq!(cron("0 0 1 1 *").latest_at_or_before(ms("1970-06-01T00:00:00Z")), Some(0));
    assert_eq!(cron("0 0 2 1 *").latest_at_or_before(ms("1970-06-01T00:00:00Z")), Some(86_400_000));
    assert_eq!(cron("0 0 2 1 *").latest_at_or_before(ms("1970-01-01T23:59:59Z")), None);
    assert_eq!(cron_in("0 0 1 1 *", "Europe/Paris").latest_at_or_before(ms("1970-06-01T00:00:00Z")), None);
    assert_eq!(cron("0 0 1 1 *").next_after(ms("9998-06-01T00:00:00Z")), Some(ms("9999-01-01T00:00:00Z")));
    assert_eq!(cron("0 0 1 1 *").next_after(ms("9999-01-01T00:00:00Z")), None);
    assert_eq!(cron("* * * * *").next_after(u64::MAX), None);
    assert_eq!(cron("0 0 1 1 *").latest_at_or_before(u64::MAX), Some(ms("9999-01-01T00:00:00Z")));
}

// ---------------------------------------------------------------- DST

// Europe/Paris 2024: 02:00 CET -> 03:00 CEST on 2024-03-31 (01:00Z);
// 03:00 CEST -> 02:00 CET on 2024-10-27 (01:00Z).
// America/New_York 2024: 02:00 EST -> 03:00 EDT on 2024-03-10 (07:00Z);
// 02:00 EDT -> 01:00 EST on 2024-11-03 (06:00Z).

#[test]
fn paris_0230_runs_once_after_the_spring_gap_and_once_on_fall_back() {
    let s = cron_in("30 2 * * *", "Europe/Paris");
    assert_eq!(
        ticks(&s, "2024-03-29T12:00:00Z", 4),
        [
            "2024-03-30T01:30:00Z", // 02:30 CET
            "2024-03-31T01:00:00Z", // 02:30 does not exist: 03:00 CEST, the first instant after the gap
            "2024-04-01T00:30:00Z", // 02:30 CEST
            "2024-04-02T00:30:00Z",
        ]
    );
    assert_eq!(
        ticks(&s, "2024-10-25T12:00:00Z", 3),
        [
            "2024-10-26T00:30:00Z", // 02:30 CEST
            "2024-10-27T00:30:00Z", // first 02:30 (CEST); not again at 01:30Z (02:30 CET)
            "2024-10-28T01:30:00Z", // 02:30 CET
        ]
    );
    assert_eq!(s.latest_at_or_before(ms("2024-03-31T01:00:00Z")), Some(ms("2024-03-31T01:00:00Z")));
    assert_eq!(s.latest_at_or_before(ms("2024-03-31T00:59:59Z")), Some(ms("2024-03-30T01:30:00Z")));
    assert_eq!(s.latest_at_or_before(ms("2024-03-31T12:00:00Z")), Some(ms("2024-03-31T01:00:00Z")));
    assert_eq!(s.latest_at_or_before(ms("2024-10-27T02:00:00Z")), Some(ms("2024-10-27T00:30:00Z")));
    // Seconds too: 02:30:30 runs at 03:00:00 CEST.
    assert_eq!(ticks(&cron_in("30 30 2 * * *", "Europe/Paris"), "2024-03-30T12:00:00Z", 1), ["2024-03-31T01:00:00Z"]);
}

#[test]
fn paris_0130_is_untouched_by_dst() {
    let s = cron_in("30 1 * * *", "Europe/Paris");
    assert_eq!(ticks(&s, "2024-03-30T12:00:00Z", 2), ["2024-03-31T00:30:00Z", "2024-03-31T23:30:00Z"]);
    assert_eq!(ticks(&s, "2024-10-26T12:00:00Z", 2), ["2024-10-26T23:30:00Z", "2024-10-28T00:30:00Z"]);
}

#[test]
fn new_york_0230_and_0130() {
    let s = cron_in("30 2 * * *", "America/New_York");
    // 02:30 is skipped on 2024-03-10: 03:00 EDT; it is not repeated in the fall.
    assert_eq!(
        ticks(&s, "2024-03-09T12:00:00Z", 3),
        ["2024-03-10T07:00:00Z", "2024-03-11T06:30:00Z", "2024-03-12T06:30:00Z"]
    );
    assert_eq!(ticks(&s, "2024-11-02T12:00:00Z", 2), ["2024-11-03T07:30:00Z", "2024-11-04T07:30:00Z"]);
    let s = cron_in("30 1 * * *", "America/New_York");
    // 01:30 exists on the spring day; on 2024-11-03 it exists twice (EDT
    // at 05:30Z, EST at 06:30Z) and runs the first time only.
    assert_eq!(ticks(&s, "2024-03-09T12:00:00Z", 2), ["2024-03-10T06:30:00Z", "2024-03-11T05:30:00Z"]);
    assert_eq!(ticks(&s, "2024-11-02T12:00:00Z", 2), ["2024-11-03T05:30:00Z", "2024-11-04T06:30:00Z"]);
    assert_eq!(s.latest_at_or_before(ms("2024-11-03T07:00:00Z")), Some(ms("2024-11-03T05:30:00Z")));
    // Named hours with every quarter hour: the repeated 01:xx runs once.
    assert_eq!(
        ticks_between(&cron_in("*/15 1 * * *", "America/New_York"), "2024-11-03T00:00:00Z", "2024-11-03T12:00:00Z"),
        ["2024-11-03T05:00:00Z", "2024-11-03T05:15:00Z", "2024-11-03T05:30:00Z", "2024-11-03T05:45:00Z"]
    );
    // Asked from inside the second pass of 01:00-02:00, the first pass is
    // already past and the next run is the next day's.
    assert_eq!(s.next_after(ms("2024-11-03T06:10:00Z")), Some(ms("2024-11-04T06:30:00Z")));
}

/// Consecutive ticks of `spec` in `zone` across 48 hours from `from` are all
/// `gap_s` apart: no duplicate and no missing tick in UTC terms.
fn assert_even(spec: &str, zone: &str, from: &str, gap_s: u64) {
    let s = cron_in(spec, zone);
    let start = s.next_after(ms(from)).unwrap();
    let mut t = start;
    let mut count = 0;
    while t < start + 48 * 3_600_000 {
        let n = s.next_after(t).unwrap();
        assert_eq!(n - t, gap_s * 1000, "{spec} in {zone}: {} -> {}", iso(t), iso(n));
        assert_eq!(s.latest_at_or_before(n - 1), Some(t), "{spec} in {zone} before {}", iso(n));
        t = n;
        count += 1;
    }
    assert_eq!(count, 48 * 3600 / gap_s, "{spec} in {zone}");
}

#[test]
fn every_quarter_hour_follows_real_time_through_both_transitions() {
    assert_even("*/15 * * * *", "Europe/Paris", "2024-03-30T12:00:00Z", 900);
    assert_even("*/15 * * * *", "Europe/Paris", "2024-10-26T12:00:00Z", 900);
    assert_even("*/15 * * * *", "America/New_York", "2024-03-09T12:00:00Z", 900);
    assert_even("*/15 * * * *", "America/New_York", "2024-11-02T12:00:00Z", 900);
    assert_even("0 * * * *", "America/New_York", "2024-11-02T12:00:00Z", 3600);
    assert_even("*/10 * * * * *", "Europe/Paris", "2024-10-26T12:00:00Z", 10);
    // In local time the fall-back day has 25 hours of quarter hours, the
    // spring-forward day 23.
    let s = cron_in("*/15 * * * *", "Europe/Paris");
    assert_eq!(ticks_between(&s, "2024-10-26T21:59:59Z", "2024-10-27T22:59:59Z").len(), 100);
    assert_eq!(ticks_between(&s, "2024-03-30T22:59:59Z", "2024-03-31T21:59:59Z").len(), 92);
    assert_eq!(
        ticks_between(&s, "2024-03-31T00:30:00Z", "2024-03-31T01:15:00Z"),
        ["2024-03-31T00:45:00Z", "2024-03-31T01:00:00Z", "2024-03-31T01:15:00Z"]
    );
}

#[test]
fn named_hours_with_wildcard_minutes_stay_a_time_of_day() {
    // 02:00-02:45 every quarter: skipped entirely on the spring day, it
    // runs once at 03:00 CEST; on the fall day only the first pass runs.
    let s = cron_in("*/15 2 * * *", "Europe/Paris");
    assert_eq!(ticks_between(&s, "2024-03-30T12:00:00Z", "2024-03-31T23:59:59Z"), ["2024-03-31T01:00:00Z"]);
    assert_eq!(
        ticks_between(&s, "2024-10-26T12:00:00Z", "2024-10-27T23:59:59Z"),
        ["2024-10-27T00:00:00Z", "2024-10-27T00:15:00Z", "2024-10-27T00:30:00Z", "2024-10-27T00:45:00Z"]
    );
    // A skipped time that coincides with a named one after the gap runs once.
    assert_eq!(
        ticks_between(&cron_in("0 2,3 * * *", "Europe/Paris"), "2024-03-30T12:00:00Z", "2024-03-31T12:00:00Z"),
        ["2024-03-31T01:00:00Z"]
    );
    assert_eq!(
        ticks_between(&cron_in("30 2,3 * * *", "Europe/Paris"), "2024-03-30T12:00:00Z", "2024-03-31T12:00:00Z"),
        ["2024-03-31T01:00:00Z", "2024-03-31T01:30:00Z"]
    );
}

#[test]
fn a_skipped_day_runs_at_the_end_of_the_gap() {
    // Samoa skipped 2011-12-30 entirely (-10:00 -> +14:00 at the end of the
    // 29th): noon that day runs at the first instant of the 31st.
    let s = cron_in("0 12 * * *", "Pacific/Apia");
    assert_eq!(
        ticks(&s, "2011-12-28T12:00:00Z", 4),
        [
            "2011-12-28T22:00:00Z", // the 28th, -10:00
            "2011-12-29T22:00:00Z", // the 29th, -10:00
            "2011-12-30T10:00:00Z", // the 30th: 00:00 on the 31st, +14:00
            "2011-12-30T22:00:00Z", // the 31st, +14:00
        ]
    );
    assert_eq!(s.latest_at_or_before(ms("2011-12-30T21:00:00Z")), Some(ms("2011-12-30T10:00:00Z")));
    // Hourly schedules follow real time: nothing that day.
    let hourly = cron_in("0 * * * *", "Pacific/Apia");
    assert_eq!(hourly.next_after(ms("2011-12-30T09:30:00Z")), Some(ms("2011-12-30T10:00:00Z")));
}

// ---------------------------------------------------------------- properties

/// A generated cron field: its text and, computed here from the text's
/// meaning, the values it allows.
#[derive(Debug, Clone)]
struct GenField {
    text: String,
    bits: u64,
}

fn render(v: u32, names: &[&str], as_name: bool, upper: bool) -> String {
    match names.get(v as usize) {
        Some(n) if as_name => {
            if upper {
                n.to_uppercase()
            } else {
                n.to_string()
            }
        }
        _ => v.to_string(),
    }
}

fn item(lo: u32, hi: u32, names: &'static [&'static str]) -> BoxedStrategy<(String, u64)> {
    let span = hi - lo + 1;
    let expand = move |a: u32, b: u32, step: u32| (a..=b).step_by(step as usize).fold(0u64, |m, v| m | 1 << v);
    prop_oneof![
        (1..=span.min(20)).prop_map(move |n| (format!("*/{n}"), expand(lo, hi, n))),
        (lo..=hi, any::<bool>(), any::<bool>()).prop_map(move |(v, nm, up)| (render(v, names, nm, up), 1u64 << v)),
        (lo..=hi, lo..=hi, any::<bool>()).prop_map(move |(a, b, nm)| {
            let (a, b) = (a.min(b), a.max(b));
            (format!("{}-{}", render(a, names, nm, true), render(b, names, nm, false)), expand(a, b, 1))
        }),
        (lo..=hi, lo..=hi, 1..=span.min(12)).prop_map(move |(a, b, n)| {
            let (a, b) = (a.min(b), a.max(b));
            (format!("{a}-{b}/{n}"), expand(a, b, n))
        }),
    ]
    .boxed()
}

/// `star_weight` in 0..=10: how often the field is a plain `*`.
fn field(lo: u32, hi: u32, names: &'static [&'static str], star_weight: u32) -> BoxedStrategy<GenField> {
    let all = (lo..=hi).fold(0u64, |m, v| m | 1 << v);
    prop_oneof![
        star_weight => Just(GenField { text: "*".into(), bits: all }),
        (10 - star_weight) => prop::collection::vec(item(lo, hi, names), 1..=3).prop_map(|items| GenField {
            text: items.iter().map(|(t, _)| t.as_str()).collect::<Vec<_>>().join(","),
            bits: items.iter().fold(0, |m, (_, b)| m | b),
        }),
    ]
    .boxed()
}

const MONTHS: &[&str] = &["", "jan", "feb", "mar", "apr", "may", "jun", "jul", "aug", "sep", "oct", "nov", "dec"];
const WEEKDAYS: &[&str] = &["sun", "mon", "tue", "wed", "thu", "fri", "sat"];

#[derive(Debug, Clone)]
struct GenSpec {
    second: Option<GenField>,
    minute: GenField,
    hour: GenField,
    day: GenField,
    month: GenField,
    weekday: GenField,
}

impl GenSpec {
    fn text(&self) -> String {
        let mut parts: Vec<&str> = self.second.iter().map(|f| f.text.as_str()).collect();
        parts.extend([&self.minute, &self.hour, &self.day, &self.month, &self.weekday].map(|f| f.text.as_str()));
        parts.join(" ")
    }

    fn weekdays(&self) -> u64 {
        (self.weekday.bits | self.weekday.bits >> 7) & 0x7f
    }

    fn day_ok(&self, day: u32, weekday: u32) -> bool {
        let d = self.day.bits & 1 << day != 0;
        let w = self.weekdays() & 1 << weekday != 0;
        if self.day.text.starts_with('*') || self.weekday.text.starts_with('*') {
            d && w
        } else {
            d || w
        }
    }

    fn matches(&self, dt: DateTime) -> bool {
        let second = self.second.as_ref().map_or(1, |f| f.bits);
        second & 1 << dt.second() != 0
            && self.minute.bits & 1 << dt.minute() != 0
            && self.hour.bits & 1 << dt.hour() != 0
            && self.month.bits & 1 << dt.month() != 0
            && self.day_ok(dt.day() as u32, dt.weekday().to_sunday_zero_offset() as u32)
    }

    fn names_hours(&self) -> bool {
        self.hour.bits != (1 << 24) - 1
    }

    fn step(&self) -> i64 {
        if self.second.is_some() {
            1
        } else {
            60
        }
    }
}

fn spec_strategy(with_seconds: bool) -> impl Strategy<Value = GenSpec> {
    (
        if with_seconds { field(0, 59, &[], 4).prop_map(Some).boxed() } else { Just(None).boxed() },
        field(0, 59, &[], 3),
        field(0, 23, &[], 5),
        field(1, 31, &[], 6),
        field(1, 12, MONTHS, 7),
        field(0, 7, WEEKDAYS, 6),
    )
        .prop_map(|(second, minute, hour, day, month, weekday)| GenSpec {
            second,
            minute,
            hour,
            day,
            month,
            weekday,
        })
}

const ZONES: &[&str] = &[
    "UTC",
    "Europe/Paris",
    "America/New_York",
    "Europe/London",
    "Australia/Sydney",
    "Australia/Lord_Howe", // 30-minute DST
    "Pacific/Chatham",     // +12:45 / +13:45
    "America/Havana",      // transitions at midnight
    "America/Santiago",    // 24:00 transitions
    "America/Sao_Paulo",   // DST until 2019
    "Antarctica/Troll",    // two-hour DST
    "Pacific/Apia",        // skipped 2011-12-30
    "Asia/Kolkata",        // fixed +05:30
];

/// A starting instant (epoch seconds): anywhere in a year, or within two
/// days before one of the zone's transitions that year.
fn start_strategy() -> impl Strategy<Value = (usize, i64)> {
    (0..ZONES.len(), 1975i16..2040, 0i64..366 * 86_400, any::<bool>(), 0usize..4).prop_map(
        |(z, year, into_year, near_transition, k)| {
            let tz = TimeZone::get(ZONES[z]).unwrap();
            let year_start = format!("{year}-01-01T00:00:00Z").parse::<Timestamp>().unwrap();
            let transition = tz.following(year_start).nth(k).map(|t| t.timestamp().as_second());
            let t = match transition {
                Some(tr) if near_transition => tr - into_year % (2 * 86_400),
                _ => year_start.as_second() + into_year,
            };
            (z, t)
        },
    )
}

fn ts(s: i64) -> Timestamp {
    Timestamp::from_second(s).unwrap()
}

/// Every tick in (start, end] (epoch seconds) by brute force: each instant
/// (real-time specs) or each local time resolved through jiff's own
/// disambiguation (time-of-day specs), stepping a minute (or a second).
fn brute_ticks(g: &GenSpec, tz: &TimeZone, start: i64, end: i64) -> BTreeSet<i64> {
    let step = g.step();
    let mut out = BTreeSet::new();
    if !g.names_hours() {
        let mut i = (start.div_euclid(step) + 1) * step;
        while i <= end {
            if g.matches(tz.to_datetime(ts(i))) {
                out.insert(i);
            }
            i += step;
        }
        return out;
    }
    // Local times within a day of the window cover every one that can
    // resolve into it.
    let local = |i: i64| i + tz.to_offset(ts(i)).seconds() as i64;
    let mut l = (local(start) - 86_400).div_euclid(step) * step;
    let last = local(end) + 86_400;
    while l <= last {
        let dt = TimeZone::UTC.to_datetime(ts(l));
        if g.matches(dt) {
            let tick = match tz.to_ambiguous_timestamp(dt).offset() {
                AmbiguousOffset::Unambiguous { offset } => l - offset.seconds() as i64,
                // The first occurrence: under the offset in force before.
                AmbiguousOffset::Fold { before, .. } => l - before.seconds() as i64,
                // The transition that opened the gap.
                AmbiguousOffset::Gap { before, .. } => {
                    let past = l - before.seconds() as i64;
                    tz.preceding(ts(past + 1)).next().unwrap().timestamp().as_second()
                }
            };
            if tick > start && tick <= end {
                out.insert(tick);
            }
        }
        l += step;
    }
    out
}

fn never_fires(g: &GenSpec) -> bool {
    const LONGEST: [u32; 12] = [31, 29, 31, 30, 31, 30, 31, 31, 30, 31, 30, 31];
    let and = g.day.text.starts_with('*') || g.weekday.text.starts_with('*');
    and && !(1..=12).any(|m| g.month.bits & 1 << m != 0 && (1..=LONGEST[m - 1]).any(|d| g.day.bits & 1 << d != 0))
}

/// Stepping with next_after from `start` visits exactly the brute-force
/// ticks of (start, start + window], and latest_at_or_before walks them back.
fn check_against_brute_force(g: &GenSpec, zone: &str, start: i64, window: i64) -> Result<(), TestCaseError> {
    let spec = g.text();
    let s = match Schedule::cron(&spec, Some(zone)) {
        Ok(s) => s,
        Err(ScheduleError::NeverFires { .. }) => {
            prop_assert!(never_fires(g), "{spec} refused as never firing");
            return Ok(());
        }
        Err(e) => return Err(TestCaseError::fail(format!("{spec}: {e}"))),
    };
    prop_assert!(!never_fires(g), "{spec} accepted");
    let tz = TimeZone::get(zone).unwrap();
    let end = start + window;
    let expected = brute_ticks(g, &tz, start, end);

    let mut seen = BTreeSet::new();
    let mut t = start as u64 * 1000;
    loop {
        let n = s.next_after(t).expect("a next tick");
        prop_assert!(n > t && n.is_multiple_of(1000), "{spec} in {zone}: next_after({}) = {}", iso(t), iso(n));
        if n > end as u64 * 1000 {
            break;
        }
        seen.insert(n as i64 / 1000);
        t = n;
    }
    if seen != expected {
        let missing: Vec<String> = expected.difference(&seen).take(5).map(|&x| iso(x as u64 * 1000)).collect();
        let extra: Vec<String> = seen.difference(&expected).take(5).map(|&x| iso(x as u64 * 1000)).collect();
        return Err(TestCaseError::fail(format!(
            "{spec} in {zone} from {}: missing {missing:?}, extra {extra:?}",
            iso(start as u64 * 1000)
        )));
    }
    // Backwards: each tick is its own latest, and just before it the
    // latest is the tick before (within the window).
    let mut previous: Option<i64> = None;
    for &tick in expected.iter().take(400) {
        let at = tick as u64 * 1000;
        prop_assert_eq!(s.latest_at_or_before(at), Some(at), "{} in {}", spec, zone);
        if let Some(p) = previous {
            prop_assert_eq!(
                s.latest_at_or_before(at - 1),
                Some(p as u64 * 1000),
                "{} in {} before {}",
                spec,
                zone,
                iso(at)
            );
        }
        previous = Some(tick);
    }
    if expected.is_empty() {
        let latest = s.latest_at_or_before(end as u64 * 1000);
        prop_assert!(latest.is_none_or(|l| l <= start as u64 * 1000), "{} in {}: latest {:?}", spec, zone, latest);
    }
    Ok(())
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(300))]

    #[test]
    fn five_fields_visit_every_tick_of_three_days((z, start) in start_strategy(), g in spec_strategy(false)) {
        check_against_brute_force(&g, ZONES[z], start, 3 * 86_400)?;
    }

    #[test]
    fn next_after_is_strictly_later_and_latest_is_consistent(
        z in 0..ZONES.len(),
        g in prop_oneof![spec_strategy(false), spec_strategy(true)],
        t in 0u64..4_102_444_800_000, // 1970..2100
    ) {
        let spec = g.text();
        let Ok(s) = Schedule::cron(&spec, Some(ZONES[z])) else { return Ok(()) };
        let n = s.next_after(t).expect("a next tick");
        prop_assert!(n > t && n.is_multiple_of(1000), "{spec}: next_after({t}) = {n}");
        prop_assert_eq!(s.latest_at_or_before(n), Some(n));
        prop_assert_eq!(s.latest_at_or_before(n - 1), s.latest_at_or_before(t));
        if let Some(l) = s.latest_at_or_before(t) {
            prop_assert!(l <= t && l.is_multiple_of(1000), "{spec}: latest_at_or_before({t}) = {l}");
            prop_assert_eq!(s.next_after(l), Some(n), "{}: nothing lies between the latest and the next", spec);
        }
    }

    #[test]
    fn every_is_epoch_aligned(n in 1u64..1_000_000, t in 0u64..u64::MAX / 2) {
        let s = Schedule::every(n).unwrap();
        let next = s.next_after(t).unwrap();
        let latest = s.latest_at_or_before(t).unwrap();
        prop_assert!(next > t && next - t <= n * 1000 && next.is_multiple_of(n * 1000));
        prop_assert!(latest <= t && t - latest < n * 1000 && latest.is_multiple_of(n * 1000));
        prop_assert_eq!(s.next_after(latest), Some(next));
    }
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(64))]

    #[test]
    fn six_fields_visit_every_tick_of_two_days((z, start) in start_strategy(), g in spec_strategy(true)) {
        check_against_brute_force(&g, ZONES[z], start, 2 * 86_400)?;
    }
}

#[test]
fn huge_specs_and_zone_names_are_refused_without_being_repeated() {
    let spec = format!("{} * * * *", "1,".repeat(50_000));
    let e = Schedule::cron(&spec, None).unwrap_err().to_string();
    assert!(e.len() < 100 && e.contains(&format!("cron spec is {} bytes long", spec.len())), "{e}");
    let zone = "Europe/".repeat(1_000);
    let e = Schedule::cron("* * * * *", Some(&zone)).unwrap_err().to_string();
    assert!(e.len() < 100 && e.contains("time zone name"), "{e}");
}
