//! Control messages in their JSON text form: parsing never panics, refused messages change
//! nothing, and a plain and a composite pipeline given the same accepted messages decide the
//! same for a packet made of the input bytes.
#![no_main]

use latnet_dataplane::classifier::{text, Algo, Classifier, FfpConfig, TableSpec};
use latnet_units::Time;
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    let Ok(s) = std::str::from_utf8(data) else { return };
    let mut plain = Classifier::new(Algo::Pof, None, 1);
    let mut comp = Classifier::new(Algo::Strong, Some(FfpConfig::default()), 2);
    let mut specs: Vec<TableSpec> = Vec::new();
    for line in s.lines().take(64) {
        let Ok(m) = text::parse_json(line, &specs) else { continue };
        let (a, b) = (plain.apply(Time::ZERO, &m), comp.apply(Time::ZERO, &m));
        assert_eq!(a.is_ok(), b.is_ok());
        if let (Ok(_), latnet_dataplane::classifier::Control::Table(tm)) = (&a, &m) {
            match tm {
                latnet_dataplane::classifier::TableMod::Add(t) => specs.push(t.clone()),
                latnet_dataplane::classifier::TableMod::Delete(id) => specs.retain(|t| t.id != *id),
                _ => {}
            }
        }
    }
    let mut p1 = data.to_vec();
    let mut p2 = data.to_vec();
    for _ in 0..2 {
        let x = plain.process(Time::ZERO, &mut p1, 0, 64);
        let y = comp.process(Time::ZERO, &mut p2, 0, 64);
        assert_eq!(x, y);
        assert_eq!(p1, p2);
    }
});
