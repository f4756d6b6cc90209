//! The host clock, as the kernel reads instants: RFC 3339 in UTC, to the
//! millisecond, as every host writes it. The kernel itself reads no clock.

use time::OffsetDateTime;

/// The current instant.
pub fn utc_now() -> String {
    let t = OffsetDateTime::now_utc();
    format!(
        "{:04}-{:02}-{:02}T{:02}:{:02}:{:02}.{:03}Z",
        t.year(),
        u8::from(t.month()),
        t.day(),
        t.hour(),
        t.minute(),
        t.second(),
        t.millisecond()
    )
}
