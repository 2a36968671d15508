//! Packet-level cross-check (to come).
