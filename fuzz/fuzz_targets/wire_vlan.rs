//! 802.1Q tags: one-tag repr round trip, stack walk, and pop/push restoring the frame.
#![no_main]

use latnet_wire::{pop_vlan, push_vlan, vlan_stack, VlanHeader, VlanTag, MAX_TAGS};
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    if let Ok(h) = VlanHeader::new_checked(data) {
        if let Ok(tag) = VlanTag::parse(&h) {
            let mut out = [0u8; 4];
            tag.emit(&mut VlanHeader::new_unchecked(&mut out[..]));
            assert_eq!(out[..], data[..4]);
            assert_eq!(VlanTag::parse(&VlanHeader::new_unchecked(&out[..])), Ok(tag));
        }
    }
    if let Ok(stack) = vlan_stack(data) {
        assert!(stack.len() <= MAX_TAGS);
        let tags: Vec<VlanTag> = stack.iter().collect();
        assert_eq!(tags.len(), stack.len());
        // Popping every tag and pushing them back, innermost first, restores the frame.
        let mut f = data.to_vec();
        for t in &tags {
            assert_eq!(pop_vlan(&mut f), Ok(Some(*t)));
        }
        assert_eq!(pop_vlan(&mut f), Ok(None));
        assert_eq!(vlan_stack(&f).map(|s| s.len()), Ok(0));
        for t in tags.iter().rev() {
            push_vlan(&mut f, *t).expect("re-push a popped tag");
        }
        assert_eq!(f, data);
    }
    let mut f = data.to_vec();
    if let Ok(Some(tag)) = pop_vlan(&mut f) {
        push_vlan(&mut f, tag).expect("re-push a popped tag");
        assert_eq!(f, data);
    }
});
