use super::*;
use proptest::prelude::*;

#[test]
fn tx_time_rounds_up_to_whole_ns() {
    // 300 B at 100 Mbps: exactly 24 us (the LBF seed's serialization time).
    assert_eq!(Rate::from_mbps(100).tx_time(Bytes::new(300)), Some(Duration::from_micros(24)));
    // 1500 B at 1 Gbps: 12 us exactly.
    assert_eq!(Rate::from_gbps(1).tx_time(Bytes::new(1500)), Some(Duration::from_micros(12)));
    // 300 B at 55 Mbps = 43,636.36.. ns: rounded up, down, nearest.
    let r = Rate::from_mbps(55);
    assert_eq!(r.tx_time(Bytes::new(300)), Some(Duration::from_nanos(43_637)));
    assert_eq!(
        r.tx_time_rounded(Bytes::new(300), Rounding::Down),
        Some(Duration::from_nanos(43_636))
    );
    assert_eq!(
        r.tx_time_rounded(Bytes::new(300), Rounding::Nearest),
        Some(Duration::from_nanos(43_636))
    );
    assert_eq!(Rate::ZERO.tx_time(Bytes::new(1)), None);
}

#[test]
fn bytes_in_and_rate_from_size_are_inverse_on_exact_values() {
    let r = Rate::from_gbps(1);
    assert_eq!(r.bytes_in(Duration::from_millis(1), Rounding::Down), Bytes::new(125_000));
    assert_eq!(
        Rate::from_size_per(Bytes::new(125_000), Duration::from_millis(1), Rounding::Down),
        Some(r)
    );
    assert_eq!(Rate::from_size_per(Bytes::new(1), Duration::ZERO, Rounding::Down), None);
}

#[test]
fn operators_saturate_and_checked_variants_detect() {
    assert_eq!(Time::from_nanos(5) - Time::from_nanos(9), Duration::ZERO);
    assert_eq!(Time::from_nanos(5).checked_duration_since(Time::from_nanos(9)), None);
    assert_eq!(Time::MAX + Duration::from_nanos(1), Time::MAX);
    assert_eq!(Duration::from_nanos(1).checked_sub(Duration::from_nanos(2)), None);
    assert_eq!(Rate::from_mbps(10).checked_sub(Rate::from_mbps(20)), None);
    assert_eq!(Rate::from_mbps(10) - Rate::from_mbps(20), Rate::ZERO);
}

#[test]
fn mul_div_rounding() {
    assert_eq!(mul_div(7, 1, 2, Rounding::Down), Some(3));
    assert_eq!(mul_div(7, 1, 2, Rounding::Up), Some(4));
    assert_eq!(mul_div(7, 1, 2, Rounding::Nearest), Some(4));
    assert_eq!(mul_div(5, 1, 3, Rounding::Nearest), Some(2));
    assert_eq!(mul_div(4, 1, 3, Rounding::Nearest), Some(1));
    assert_eq!(mul_div(1, 1, 0, Rounding::Down), None);
    assert_eq!(mul_div(u128::from(u64::MAX), 2, 1, Rounding::Down), None);
}

#[test]
fn parse_units() {
    assert_eq!("10ms".parse::<Duration>(), Ok(Duration::from_millis(10)));
    assert_eq!("1.5us".parse::<Duration>(), Ok(Duration::from_nanos(1_500)));
    assert_eq!(" 2 s ".parse::<Duration>(), Ok(Duration::from_secs(2)));
    assert_eq!("0.000000001s".parse::<Duration>(), Ok(Duration::from_nanos(1)));
    assert_eq!("1min".parse::<Duration>(), Ok(Duration::from_secs(60)));
    assert_eq!("1Gbps".parse::<Rate>(), Ok(Rate::from_gbps(1)));
    assert_eq!("1.5Mbit/s".parse::<Rate>(), Ok(Rate::from_kbps(1_500)));
    assert_eq!("900kbps".parse::<Rate>(), Ok(Rate::from_kbps(900)));
    assert_eq!("1500".parse::<Bytes>(), Ok(Bytes::new(1500)));
    assert_eq!("64KiB".parse::<Bytes>(), Ok(Bytes::new(65_536)));
    assert_eq!("1_000B".parse::<Bytes>(), Ok(Bytes::new(1000)));
}

#[test]
fn parse_errors_say_what_is_wrong() {
    let e = "10 parsecs".parse::<Duration>().unwrap_err().to_string();
    assert!(e.contains("unknown unit \"parsecs\""), "{e}");
    assert!(e.contains("ms"), "{e}");
    assert!("0.5ns".parse::<Duration>().unwrap_err().to_string().contains("decimal places"));
    assert!("".parse::<Rate>().is_err());
    assert!("ms".parse::<Duration>().is_err());
    assert!("10".parse::<Duration>().is_err(), "a bare number string needs a unit");
    assert!("1.2.3ms".parse::<Duration>().is_err());
    assert!("-1ms".parse::<Duration>().is_err());
    assert!("99999999999999999999s"
        .parse::<Duration>()
        .unwrap_err()
        .to_string()
        .contains("too large"));
}

#[test]
fn serde_accepts_integers_and_strings() {
    #[derive(serde::Deserialize, serde::Serialize, Debug, PartialEq)]
    struct C {
        d: Duration,
        r: Rate,
        b: Bytes,
    }
    let c: C = serde_json::from_str(r#"{"d":"1ms","r":1000,"b":"2kB"}"#).expect("valid");
    assert_eq!(c, C { d: Duration::from_millis(1), r: Rate::from_bps(1000), b: Bytes::new(2000) });
    assert_eq!(serde_json::to_string(&c).expect("ser"), r#"{"d":1000000,"r":1000,"b":2000}"#);
    let e = serde_json::from_str::<C>(r#"{"d":-1,"r":1,"b":1}"#).unwrap_err().to_string();
    assert!(e.contains("duration"), "{e}");
}

/// Under [`with_dilation`] durations and instants stretch and rates slow by the factor, in
/// either written form; sizes stay; a rate that would vanish or a duration that would overflow
/// is an error; outside the closure (and after a nested one) the factor is back.
#[test]
fn dilation_stretches_time_and_slows_rates_while_it_lasts() {
    #[derive(serde::Deserialize, Debug, PartialEq)]
    struct C {
        d: Duration,
        t: Time,
        r: Rate,
        b: Bytes,
    }
    let text = r#"{"d":"100us","t":7,"r":"55Mbps","b":"300B"}"#;
    let c: C = with_dilation(20, || serde_json::from_str(text)).expect("valid");
    let want = C {
        d: Duration::from_millis(2),
        t: Time::from_nanos(140),
        r: Rate::from_bps(2_750_000),
        b: Bytes::new(300),
    };
    assert_eq!(c, want);
    // nearest bit per second
    let r: Rate = with_dilation(3, || serde_json::from_str("5")).expect("valid");
    assert_eq!(r, Rate::from_bps(2));
    let e = with_dilation(3, || serde_json::from_str::<Rate>("1").unwrap_err().to_string());
    assert!(e.contains("below 1 bit/s"), "{e}");
    let e = with_dilation(2, || serde_json::from_str::<Duration>(&u64::MAX.to_string()))
        .unwrap_err()
        .to_string();
    assert!(e.contains("overflows"), "{e}");
    let nested: (Duration, Duration) = with_dilation(2, || {
        let inner = with_dilation(5, || serde_json::from_str("1").expect("valid"));
        (inner, serde_json::from_str("1").expect("valid"))
    });
    assert_eq!(nested, (Duration::from_nanos(5), Duration::from_nanos(2)));
    let plain: C = serde_json::from_str(text).expect("valid");
    assert_eq!(plain.d, Duration::from_micros(100));
}

proptest! {
    #[test]
    fn display_round_trips(v in any::<u64>()) {
        prop_assert_eq!(Duration::from_nanos(v).to_string().parse::<Duration>(), Ok(Duration::from_nanos(v)));
        prop_assert_eq!(Rate::from_bps(v).to_string().parse::<Rate>(), Ok(Rate::from_bps(v)));
        prop_assert_eq!(Bytes::new(v).to_string().parse::<Bytes>(), Ok(Bytes::new(v)));
    }

    #[test]
    fn parsing_never_panics(s in "\\PC{0,24}") {
        let _ = s.parse::<Duration>();
        let _ = s.parse::<Rate>();
        let _ = s.parse::<Bytes>();
    }

    #[test]
    fn tx_time_is_monotone_and_bounds_the_exact_value(bytes in 0u64..1<<40, bps in 1u64..1<<40) {
        let r = Rate::from_bps(bps);
        let up = r.tx_time(Bytes::new(bytes)).map(Duration::as_nanos);
        let down = r.tx_time_rounded(Bytes::new(bytes), Rounding::Down).map(Duration::as_nanos);
        if let (Some(up), Some(down)) = (up, down) {
            prop_assert!(up >= down && up - down <= 1);
            let exact = u128::from(bytes) * 8 * 1_000_000_000;
            prop_assert!(u128::from(down) * u128::from(bps) <= exact);
            prop_assert!(u128::from(up) * u128::from(bps) >= exact);
        }
    }
}
