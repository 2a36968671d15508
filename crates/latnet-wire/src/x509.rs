//! Two dates of RFC 5280 read from DER, for the TLS files of latnet's control service and its
//! host agents: when a certificate revocation list says the next one is due (`nextUpdate`,
//! section 5.1.2.5), so a list already past it is refused when it is loaded, naming the date,
//! instead of locking every peer out at their handshakes (rustls checks it there too, for a
//! list that expires while in use, but only says "expired"); and when a certificate expires
//! (`notAfter`, section 4.1.2.5), which rustls does not check for a peer's own certificate:
//! the service and the agent warn ahead of both ([`left`]), once a day while due ([`Reminder`]).
//!
//! A small walk over the first fields, not a parser: rustls parses and checks the whole list
//! or certificate. It reads only the lengths and tags it needs and answers `None` for anything
//! else, never panicking (tested on every prefix and every one-byte change of real ones, and
//! fuzzed). No clock is read here: callers pass the time.

/// An instant a TLS file names: when a certificate expires, when a revocation list is due for
/// renewal.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Due {
    /// Seconds since 1970-01-01 00:00:00 UTC.
    pub unix_secs: i64,
    /// As written: `YYYY-MM-DD HH:MM:SS UTC`.
    pub shown: String,
}

/// How long until a [`Due`] instant, told the way a warning says it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Left {
    /// It has passed (or is now).
    Passed,
    /// It comes within the warning window, in this many days (to the nearest day).
    Days(i64),
    /// It comes later than the warning window.
    Later,
}

/// As a warning says it: "in 3 days", "in 1 day", "within a day", "passed", "later".
impl core::fmt::Display for Left {
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        match self {
            Left::Passed => f.write_str("passed"),
            Left::Days(0) => f.write_str("within a day"),
            Left::Days(1) => f.write_str("in 1 day"),
            Left::Days(n) => write!(f, "in {n} days"),
            Left::Later => f.write_str("later"),
        }
    }
}

/// How long from `now` (seconds since 1970-01-01 UTC) until `due`, with a warning window of
/// `window_days` days.
pub fn left(due: &Due, now: i64, window_days: i64) -> Left {
    let secs = due.unix_secs.saturating_sub(now);
    if secs <= 0 {
        Left::Passed
    } else if secs < window_days.saturating_mul(86_400) {
        Left::Days((secs + 43_200) / 86_400)
    } else {
        Left::Later
    }
}

/// When due warnings are said: at once, then again at most once a day while they stay due
/// (a service or an agent runs for months; its log should say it, but not at every poll).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Reminder {
    /// When warnings were last said (seconds since 1970-01-01 UTC).
    said_at: Option<i64>,
}

impl Reminder {
    /// Warnings are said again no sooner than this after the last (a day), in seconds.
    pub const AGAIN_SECS: i64 = 86_400;

    /// The warnings `due` gives, to say at `now`; none, without asking `due`, if some were said
    /// less than a day before. The reminder remembers `now` when it returns any.
    pub fn say(&mut self, now: i64, due: impl FnOnce() -> Vec<String>) -> Vec<String> {
        if self.said_at.is_some_and(|t| now.saturating_sub(t) < Self::AGAIN_SECS) {
            return Vec::new();
        }
        let said = due();
        if !said.is_empty() {
            self.said_at = Some(now);
        }
        said
    }

    /// Warnings were said at `now` by other means (a start or a reload's message).
    pub fn said(&mut self, now: i64) {
        self.said_at = Some(now);
    }
}

/// `nextUpdate` of the DER certificate revocation list `der`; `None` if the list has none or
/// `der` is not such a list.
pub fn next_update(der: &[u8]) -> Option<Due> {
    let (0x30, list, _) = tlv(der)? else { return None };
    let (0x30, mut fields, _) = tlv(list)? else { return None };
    // version (optional), signature algorithm, issuer, thisUpdate, then nextUpdate if present
    let mut times = 0;
    for _ in 0..5 {
        let (tag, value, rest) = tlv(fields)?;
        match (tag, times) {
            (0x17 | 0x18, 1) => return time(tag, value),
            (0x17 | 0x18, _) => times += 1,
            (_, 1) => return None,
            _ => {}
        }
        fields = rest;
    }
    None
}

/// `notAfter` of the DER certificate `der`; `None` if `der` is not a certificate.
pub fn not_after(der: &[u8]) -> Option<Due> {
    let (0x30, cert, _) = tlv(der)? else { return None };
    let (0x30, mut fields, _) = tlv(cert)? else { return None };
    // version ([0], optional), serial number, signature algorithm, issuer, then validity
    let (tag, _, rest) = tlv(fields)?;
    if tag == 0xa0 {
        fields = rest;
    }
    for want in [0x02, 0x30, 0x30] {
        let (tag, _, rest) = tlv(fields)?;
        if tag != want {
            return None;
        }
        fields = rest;
    }
    let (0x30, validity, _) = tlv(fields)? else { return None };
    let (0x17 | 0x18, _, rest) = tlv(validity)? else { return None };
    let (tag @ (0x17 | 0x18), value, _) = tlv(rest)? else { return None };
    time(tag, value)
}

/// The first tag-length-value of `input`: tag (one byte, low-tag-number form), value, rest.
fn tlv(input: &[u8]) -> Option<(u8, &[u8], &[u8])> {
    let (&tag, input) = input.split_first()?;
    let (&first, mut input) = input.split_first()?;
    let len = match first {
        0..=0x7f => usize::from(first),
        0x81..=0x84 => {
            let n = usize::from(first & 0x7f);
            let (bytes, rest) = input.split_at_checked(n)?;
            input = rest;
            bytes.iter().fold(0usize, |acc, &b| (acc << 8) | usize::from(b))
        }
        _ => return None,
    };
    let (value, rest) = input.split_at_checked(len)?;
    Some((tag, value, rest))
}

/// A UTCTime (`0x17`, `YYMMDDHHMMSSZ`, years 1950 to 2049) or GeneralizedTime (`0x18`,
/// `YYYYMMDDHHMMSSZ`) as RFC 5280 writes them (in UTC, whole seconds).
fn time(tag: u8, value: &[u8]) -> Option<Due> {
    let digits = value.strip_suffix(b"Z")?;
    if !digits.iter().all(u8::is_ascii_digit) {
        return None;
    }
    let num = |d: &[u8]| d.iter().fold(0i64, |acc, &b| acc * 10 + i64::from(b - b'0'));
    let (year, rest) = match (tag, digits.len()) {
        (0x17, 12) => {
            let yy = num(&digits[..2]);
            (if yy < 50 { 2000 + yy } else { 1900 + yy }, &digits[2..])
        }
        (0x18, 14) => (num(&digits[..4]), &digits[4..]),
        _ => return None,
    };
    let [month, day, hour, minute, second] = [0, 2, 4, 6, 8].map(|i| num(&rest[i..i + 2]));
    let leap = year % 4 == 0 && (year % 100 != 0 || year % 400 == 0);
    let days_in_month = match month {
        2 if leap => 29,
        2 => 28,
        4 | 6 | 9 | 11 => 30,
        _ => 31,
    };
    let valid = (1..=12).contains(&month)
        && (1..=days_in_month).contains(&day)
        && hour < 24
        && minute < 60
        && second < 60;
    if !valid {
        return None;
    }
    let secs = days_from_civil(year, month, day) * 86_400 + hour * 3600 + minute * 60 + second;
    let shown = format!("{year:04}-{month:02}-{day:02} {hour:02}:{minute:02}:{second:02} UTC");
    Some(Due { unix_secs: secs, shown })
}

/// Days from 1970-01-01 to the given date of the proleptic Gregorian calendar (Howard
/// Hinnant's `days_from_civil`).
fn days_from_civil(year: i64, month: i64, day: i64) -> i64 {
    let y = if month <= 2 { year - 1 } else { year };
    let era = y.div_euclid(400);
    let yoe = y - era * 400;
    let mp = (month + 9) % 12;
    let doy = (153 * mp + 2) / 5 + day - 1;
    let doe = yoe * 365 + yoe / 4 - yoe / 100 + doy;
    era * 146_097 + doe - 719_468
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A list openssl wrote (`scripts/tls-revoke.sh DIR DIR/client.crt`, then `openssl ca
    /// -gencrl -crl_lastupdate 261127150000Z -crl_nextupdate 290301150000Z`): version 2, one
    /// revoked certificate, thisUpdate 2026-11-27 15:00:00, nextUpdate 2029-03-01 15:00:00.
    const LIST: &str = "\
-----BEGIN X509 CRL-----
MIHVMHwCAQEwCgYIKoZIzj0EAwIwFDESMBAGA1UEAwwJbGF0bmV0IENBFw0yNjEx
MjcxNTAwMDBaFw0yOTAzMDExNTAwMDBaMCcwJQIUMKiJlhziJo/iktdmv5XPyP7V
sOEXDTI2MTEyNzE0NDM1NFqgDjAMMAoGA1UdFAQDAgECMAoGCCqGSM49BAMCA0kA
MEYCIQDKSN7ZiMADwc5nV5P+fWh8PGcaR2UaHlsr0LLX0S1WRgIhALUPqHfkig9v
4FC14iy1gqsMGKRBAXxkE1BOYlVGBjYj
-----END X509 CRL-----
";

    /// A service certificate `scripts/tls-certs.sh` made (EC P-256, version 3), valid from
    /// 2026-11-27 14:43:54 to 2029-03-01 14:43:54 (UTCTime).
    const CERT: &str = "\
-----BEGIN CERTIFICATE-----
MIIBvTCCAWOgAwIBAgIUMKiJlhziJo/iktdmv5XPyP7VsOAwCgYIKoZIzj0EAwIw
FDESMBAGA1UEAwwJbGF0bmV0IENBMB4XDTI2MTEyNzE0NDM1NFoXDTI5MDMwMTE0
NDM1NFowFDESMBAGA1UEAwwJMTI3LjAuMC4xMFkwEwYHKoZIzj0CAQYIKoZIzj0D
AQcDQgAEe26+QA3Dt12CT6S4+N+TSG65g8nnz8ZGf4w03qU0+GVJh/0XPBnr8yjX
MZyEH7S6X0VxBAX515Q9SnYBaLMSX6OBkjCBjzAaBgNVHREEEzARhwR/AAABggls
b2NhbGhvc3QwDAYDVR0TAQH/BAIwADAOBgNVHQ8BAf8EBAMCB4AwEwYDVR0lBAww
CgYIKwYBBQUHAwEwHQYDVR0OBBYEFInmHSCGDwffVbrob8e1OsFt/95hMB8GA1Ud
IwQYMBaAFPDTIGqgy7MKi90Ku+LYzS/N37CTMAoGCCqGSM49BAMCA0gAMEUCIQDG
/GXzu0vuFfl38u7Uq6LqIKTHIFX+G731cHv7N7jOTQIgA6HkTxIlRmDvVrKuXuH/
2IQpCnZmT34SvImaoc9aqfA=
-----END CERTIFICATE-----
";

    fn cert() -> Vec<u8> {
        use rustls::pki_types::pem::PemObject;
        let der = rustls::pki_types::CertificateDer::from_pem_slice(CERT.as_bytes());
        der.unwrap().to_vec()
    }

    fn list() -> Vec<u8> {
        use rustls::pki_types::pem::PemObject;
        let der = rustls::pki_types::CertificateRevocationListDer::from_pem_slice(LIST.as_bytes());
        der.unwrap().to_vec()
    }

    #[test]
    fn reads_the_next_update_of_a_list_openssl_wrote() {
        let Due { unix_secs: secs, shown } = next_update(&list()).unwrap();
        assert_eq!(shown, "2029-03-01 15:00:00 UTC");
        // `date -u -d '2029-03-01 15:00:00' +%s`
        assert_eq!(secs, 1_867_071_600);
    }

    #[test]
    fn reads_when_a_certificate_openssl_made_expires() {
        let due = not_after(&cert()).unwrap();
        assert_eq!(due.shown, "2029-03-01 14:43:54 UTC");
        // `date -u -d '2029-03-01 14:43:54' +%s`
        assert_eq!(due.unix_secs, 1_867_070_634);
        // a list is not a certificate, nor a certificate a list
        assert_eq!(not_after(&list()), None);
        assert_eq!(next_update(&cert()), None);
    }

    #[test]
    fn what_is_left_until_a_date() {
        let due = Due { unix_secs: 100 * 86_400, shown: String::new() };
        assert_eq!(left(&due, 100 * 86_400, 14), Left::Passed);
        assert_eq!(left(&due, 101 * 86_400, 14), Left::Passed);
        assert_eq!(left(&due, 100 * 86_400 - 1, 14), Left::Days(0));
        assert_eq!(left(&due, 97 * 86_400 + 40_000, 14), Left::Days(3));
        assert_eq!(left(&due, 86 * 86_400 + 1, 14), Left::Days(14));
        assert_eq!(left(&due, 86 * 86_400, 14), Left::Later);
        assert_eq!(left(&due, i64::MIN, 14), Left::Later);
        assert_eq!(left(&due, i64::MAX, i64::MAX), Left::Passed);
        let said = [Left::Days(0), Left::Days(1), Left::Days(3)].map(|l| l.to_string());
        assert_eq!(said, ["within a day", "in 1 day", "in 3 days"]);
    }

    #[test]
    fn a_reminder_says_due_warnings_at_once_then_once_a_day() {
        let day = Reminder::AGAIN_SECS;
        let mut r = Reminder::default();
        let w = || vec!["w".to_owned()];
        assert!(r.say(100, Vec::new).is_empty(), "nothing due: nothing said, nothing kept");
        assert_eq!(r.say(101, w), ["w"]);
        assert!(r.say(101 + day - 1, || panic!("not asked within the day")).is_empty());
        assert_eq!(r.say(101 + day, w), ["w"]);
        r.said(5 * day);
        assert!(r.say(6 * day - 1, w).is_empty());
        assert_eq!(r.say(6 * day, w), ["w"]);
    }

    #[test]
    fn both_time_forms_and_the_calendar() {
        assert_eq!(time(0x17, b"700101000000Z").unwrap().unix_secs, 0);
        assert_eq!(time(0x17, b"491231235959Z").unwrap().shown, "2049-12-31 23:59:59 UTC");
        assert_eq!(time(0x17, b"500101000000Z").unwrap().shown, "1950-01-01 00:00:00 UTC");
        assert_eq!(time(0x18, b"20000229120000Z").unwrap().unix_secs, 951_825_600);
        assert_eq!(time(0x18, b"21000301000000Z").unwrap().unix_secs, 4_107_542_400);
        assert_eq!(time(0x18, b"20240229000000Z").unwrap().shown, "2024-02-29 00:00:00 UTC");
        let malformed =
            [&b"20261327000000Z"[..], b"2026112700000Z", b"20261127000000", b"2026112700000aZ"];
        // no such days: 2025 and 2100 are not leap years, April has 30
        let no_such_day = [&b"20250229000000Z"[..], b"21000229000000Z", b"20260431000000Z"];
        for bad in malformed.into_iter().chain(no_such_day) {
            assert_eq!(time(0x18, bad), None, "{}", String::from_utf8_lossy(bad));
        }
        assert_eq!(time(0x17, b"20261127000000Z"), None);
    }

    #[test]
    fn a_list_without_a_next_update_or_not_a_list_gives_none() {
        // SEQUENCE { SEQUENCE { INTEGER 1, SEQUENCE {}, SEQUENCE {}, thisUpdate, [0] {} } }
        let tbs = b"\x02\x01\x01\x30\x00\x30\x00\x17\x0d261127150000Z\xa0\x00";
        let mut der = vec![0x30, tbs.len() as u8 + 2, 0x30, tbs.len() as u8];
        der.extend_from_slice(tbs);
        assert_eq!(next_update(&der), None);
        // the same with a nextUpdate, and without the optional version
        let tbs = b"\x30\x00\x30\x00\x17\x0d261127150000Z\x18\x0f20270101000000Z";
        let mut der = vec![0x30, tbs.len() as u8 + 2, 0x30, tbs.len() as u8];
        der.extend_from_slice(tbs);
        assert_eq!(next_update(&der).unwrap().shown, "2027-01-01 00:00:00 UTC");
        assert_eq!(next_update(b""), None);
        assert_eq!(next_update(b"-----BEGIN X509 CRL-----"), None);
    }

    #[test]
    fn every_prefix_and_every_one_byte_change_is_answered_without_a_panic() {
        for (der, read) in [(list(), next_update as fn(&[u8]) -> _), (cert(), not_after)] {
            let whole = read(&der);
            assert!(whole.is_some());
            for n in 0..der.len() {
                // the outer length then claims more than there is
                assert_eq!(read(&der[..n]), None, "prefix of {n} bytes");
            }
            let mut changed = der.clone();
            for i in 0..der.len() {
                for b in [0x00, 0x01, 0x7f, 0x80, 0x81, 0x84, 0x85, 0xff, der[i] ^ 0x10] {
                    changed[i] = b;
                    let _ = read(&changed);
                }
                changed[i] = der[i];
            }
            assert_eq!(read(&changed), whole);
        }
    }
}
