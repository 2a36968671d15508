//! The shaper: an HTB qdisc per host interface, a class per admitted flow.

use super::*;

/// `tc` on one interface of a namespace.
#[derive(Debug)]
pub(super) struct Tc {
    netns: Option<PathBuf>,
    iface: String,
    /// The interface's rtnetlink socket and index, for its root qdisc, classes and their
    /// counters; `Err`: why it could not be opened, and all of that goes through `tc`.
    rtnl: Result<(crate::sys::rtnl::Rtnl, u32), String>,
}

impl Tc {
    fn run(&self, args: &[String]) -> Result<String, AgentError> {
        crate::tcp::run_tc(self.netns.as_deref(), args)
            .map_err(|e| AgentError::Kernel(e.to_string()))
    }

    fn words(&self, w: &str) -> Vec<String> {
        w.replace("IF", &self.iface).split_whitespace().map(str::to_owned).collect()
    }

    pub(super) fn new(netns: Option<PathBuf>, iface: &str) -> Tc {
        let rtnl = crate::sys::rtnl::Rtnl::open(netns.as_deref()).and_then(|r| {
            let index = match netns.as_deref() {
                Some(p) => crate::sys::in_netns(p, || crate::sys::if_index(iface))?,
                None => crate::sys::if_index(iface)?,
            };
            Ok((r, index))
        });
        Tc { netns, iface: iface.to_owned(), rtnl: rtnl.map_err(|e| e.to_string()) }
    }

    /// How the shaper is programmed: `"rtnetlink"`, or `tc` and why.
    pub(super) fn way(&self) -> String {
        match &self.rtnl {
            Ok(_) => "rtnetlink".to_owned(),
            Err(e) => format!("tc (no rtnetlink socket: {e})"),
        }
    }

    fn kernel_err(&self, what: &str) -> impl Fn(std::io::Error) -> AgentError + '_ {
        let what = what.to_owned();
        move |e| AgentError::Kernel(format!("{}: {what}: {e}", self.iface))
    }

    pub(super) fn setup(&self) -> Result<(), AgentError> {
        if let Ok((rtnl, index)) = &self.rtnl {
            let major = HTB_MAJOR as u16;
            return rtnl.htb_root(*index, major, 0).map_err(self.kernel_err("root HTB qdisc"));
        }
        eprintln!("latnet-switch agent: {}: shaping with {}", self.iface, self.way());
        self.run(&self.words("qdisc replace dev IF root handle 1: htb default 0")).map(drop)
    }

    pub(super) fn teardown(&self) {
        if let Ok((rtnl, index)) = &self.rtnl {
            let _ = rtnl.del_root(*index);
            return;
        }
        let _ = self.run(&self.words("qdisc del dev IF root"));
    }

    /// Shape class `1:minor` to `rate` bit/s with a bucket of `burst` bytes, counting
    /// `overhead` more bytes per frame than the kernel's length of it.
    pub(super) fn set_class(
        &self,
        minor: u32,
        rate: u64,
        burst: u64,
        overhead: u32,
    ) -> Result<(), AgentError> {
        let rate = rate.max(8);
        let burst = burst.max(1);
        if let Ok((rtnl, index)) = &self.rtnl {
            let c = crate::sys::rtnl::HtbClass {
                rate_bps: rate,
                ceil_bps: rate,
                burst,
                cburst: burst,
                quantum: 1600,
                overhead: u16::try_from(overhead).unwrap_or(u16::MAX),
            };
            return rtnl
                .htb_class(*index, HTB_MAJOR << 16, (HTB_MAJOR << 16) | minor, &c)
                .map_err(self.kernel_err(&format!("class 1:{minor:x}")));
        }
        let w = format!(
            "class replace dev IF parent 1: classid 1:{minor:x} htb rate {rate}bit ceil {rate}bit \
             burst {burst}b cburst {burst}b quantum 1600 overhead {overhead}"
        );
        self.run(&self.words(&w)).map(drop)
    }

    pub(super) fn del_class(&self, minor: u32) -> Result<(), AgentError> {
        if let Ok((rtnl, index)) = &self.rtnl {
            return rtnl
                .del_class(*index, (HTB_MAJOR << 16) | minor)
                .map_err(self.kernel_err(&format!("class 1:{minor:x}")));
        }
        self.run(&self.words(&format!("class del dev IF classid 1:{minor:x}"))).map(drop)
    }

    /// Per class minor: bytes and packets sent, drops, overlimits, backlog.
    pub(super) fn class_stats(&self) -> BTreeMap<u32, Value> {
        if let Ok((rtnl, index)) = &self.rtnl {
            return rtnl.class_stats(*index).map(|c| class_stats_of(&c)).unwrap_or_default();
        }
        self.run(&self.words("-s class show dev IF"))
            .map(|t| parse_class_stats(&t))
            .unwrap_or_default()
    }
}

/// The counters of the HTB classes of major `1:` in `classes`, per minor, as
/// [`parse_class_stats`] reads them from `tc -s class show`.
pub fn class_stats_of(classes: &[crate::sys::rtnl::ClassStats]) -> BTreeMap<u32, Value> {
    classes
        .iter()
        .filter(|c| c.classid >> 16 == HTB_MAJOR && c.kind() == "htb")
        .map(|c| {
            let v = json!({
                "sent_bytes": c.bytes, "sent_packets": c.packets, "dropped": c.drops,
                "overlimits": c.overlimits, "backlog_bytes": c.backlog_bytes,
                "backlog_packets": c.backlog_packets,
            });
            (c.classid & 0xffff, v)
        })
        .collect()
}

/// Read `tc -s class show` (text: iproute2 6.1 prints no JSON for classes) into, per class
/// minor of `1:`, bytes and packets sent, drops, overlimits and backlog.
pub fn parse_class_stats(text: &str) -> BTreeMap<u32, Value> {
    let mut out = BTreeMap::new();
    let mut minor = None;
    let num = |w: Option<&str>| -> Option<u64> {
        w.map(|w| w.trim_matches(|c: char| !c.is_ascii_digit())).and_then(|w| w.parse().ok())
    };
    for line in text.lines() {
        let w: Vec<&str> = line.split_whitespace().collect();
        match w.as_slice() {
            ["class", "htb", handle, ..] => {
                minor = handle.strip_prefix("1:").and_then(|m| u32::from_str_radix(m, 16).ok());
                if let Some(m) = minor {
                    out.insert(m, json!({}));
                }
            }
            // Sent 3000 bytes 2 pkt (dropped 0, overlimits 1 requeues 0)
            ["Sent", bytes, "bytes", pkts, "pkt", "(dropped", dropped, "overlimits", over, ..] => {
                if let Some(v) = minor.and_then(|m| out.get_mut(&m)) {
                    v["sent_bytes"] = json!(num(Some(bytes)));
                    v["sent_packets"] = json!(num(Some(pkts)));
                    v["dropped"] = json!(num(Some(dropped)));
                    v["overlimits"] = json!(num(Some(over)));
                }
            }
            // backlog 0b 0p requeues 0
            ["backlog", bytes, pkts, ..] => {
                if let Some(v) = minor.and_then(|m| out.get_mut(&m)) {
                    v["backlog_bytes"] = json!(num(Some(bytes)));
                    v["backlog_packets"] = json!(num(Some(pkts)));
                }
            }
            _ => {}
        }
    }
    out
}
