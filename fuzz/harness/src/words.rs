//! Small pieces the generators share: picking from tables, words, timestamps.

use arbitrary::Unstructured;

/// A byte of the input, 0 once it is used up.
pub fn byte(u: &mut Unstructured) -> u8 {
    u.arbitrary().unwrap_or(0)
}

/// One of `options`, the first once the input is used up.
pub fn pick<T: Copy>(u: &mut Unstructured, options: &[T]) -> T {
    options[usize::from(byte(u)) % options.len()]
}

/// True one time in `n`.
pub fn one_in(u: &mut Unstructured, n: u8) -> bool {
    byte(u).checked_rem(n) == Some(0)
}

/// A number in `0..=max` (small when the input is used up).
pub fn upto(u: &mut Unstructured, max: u32) -> u32 {
    u.int_in_range(0..=max).unwrap_or(0)
}

pub const WORDS: &[&str] = &[
    "the", "planner", "keeps", "every", "tool", "call", "with", "its", "results", "deploys", "happen", "on", "Wednesday",
    "release", "staging", "rotation", "user", "prefers", "tabs", "over", "spaces", "budget", "session", "grows", "longer",
    "压缩", "上下文", "规划器", "会话", "用户", "🙂", "naïve", "café", "ß", "x/y", "a\"b", "back\\slash", "tab\tin", "line\nbreak",
    "remember", "always", "never", "API_KEY", "password", "secret", "42", "3.14", "-7", "1e308",
];

/// `n` words joined by spaces.
pub fn text(u: &mut Unstructured, n: u32) -> String {
    let mut out = String::new();
    for i in 0..n {
        if i > 0 {
            out.push(' ');
        }
        out.push_str(pick(u, WORDS));
    }
    out
}

/// RFC 3339 text of a UTC instant given in seconds since 1970, optionally
/// with a fraction and shown at a UTC offset of `offset_minutes`.
pub fn timestamp(seconds: i64, millis: Option<u32>, offset_minutes: i32) -> String {
    let local = seconds + i64::from(offset_minutes) * 60;
    let days = local.div_euclid(86_400);
    let secs = local.rem_euclid(86_400);
    let (y, m, d) = civil_from_days(days);
    let mut out = format!("{y:04}-{m:02}-{d:02}T{:02}:{:02}:{:02}", secs / 3600, secs / 60 % 60, secs % 60);
    if let Some(ms) = millis {
        out.push_str(&format!(".{ms:03}"));
    }
    if offset_minutes == 0 {
        out.push('Z');
    } else {
        let sign = if offset_minutes < 0 { '-' } else { '+' };
        let abs = offset_minutes.unsigned_abs();
        out.push_str(&format!("{sign}{:02}:{:02}", abs / 60, abs % 60));
    }
    out
}

/// Year, month, day of a day count since 1970-01-01 (proleptic Gregorian).
fn civil_from_days(days: i64) -> (i64, u32, u32) {
    let z = days + 719_468;
    let era = z.div_euclid(146_097);
    let doe = z.rem_euclid(146_097);
    let yoe = (doe - doe / 1460 + doe / 36_524 - doe / 146_096) / 365;
    let doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    let mp = (5 * doy + 2) / 153;
    let d = (doy - (153 * mp + 2) / 5 + 1) as u32;
    let m = if mp < 10 { mp + 3 } else { mp - 9 } as u32;
    let y = yoe + era * 400 + i64::from(m <= 2);
    (y, m, d)
}

#[cfg(test)]
mod tests {
    #[test]
    fn timestamps() {
        assert_eq!(super::timestamp(0, None, 0), "1970-01-01T00:00:00Z");
        assert_eq!(super::timestamp(1_780_304_400, Some(250), 120), "2026-06-01T11:00:00.250+02:00");
        assert_eq!(super::timestamp(951_782_400, None, 0), "2000-02-29T00:00:00Z");
    }
}
