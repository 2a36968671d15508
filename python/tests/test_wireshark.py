"""tools/wireshark/latnet.lua against latnet's own parsers: on the simulator's captures and
on damaged copies of them, tshark with the dissector and latnet.read_pcap must read the same
LBF blocks and large-flow options and find the same ones malformed, for the same reason."""

from __future__ import annotations

import io
import random
import shutil
import struct
import subprocess
from pathlib import Path

import pandas as pd
import pytest

import latnet

ROOT = Path(__file__).resolve().parents[2]
LUA = ROOT / "tools" / "wireshark" / "latnet.lua"
MODES = {"latency-so-far": 0, "timestamp": 1, "rest-slo": 2, "damper": 3}
FIELDS = ["lbf.carrier", "lbf.mode", "lbf.late", "lbf.lower_ns", "lbf.upper_ns", "lbf.value_ns"]
LF_FIELDS = ["largeflow.type", "largeflow.filled", "largeflow.count", "largeflow.rate_kbps"]


def tshark(pcap: Path) -> pd.DataFrame:
    exe = shutil.which("tshark")
    assert exe, "tshark is missing: `make setup` installs it (scripts/apt-deps.sh)"
    cmd = [exe, "-n", "-X", f"lua_script:{LUA}", "-r", str(pcap), "-T", "fields"]
    cmd += [
        "-E",
        "header=y",
        "-E",
        "separator=/t",
        "-E",
        "occurrence=a",
        "-E",
        "aggregator=|",
        "-e",
        "frame.number",
    ]
    for f in [*FIELDS, *LF_FIELDS, "_ws.expert.message"]:
        cmd += ["-e", f]
    out = subprocess.run(cmd, capture_output=True, text=True, timeout=120)
    assert out.returncode == 0, out.stderr
    # tshark warns on stderr when run as root, and Lua errors would land there too
    assert "Lua" not in out.stderr and "rror" not in out.stderr, out.stderr
    return pd.read_csv(io.StringIO(out.stdout), sep="\t", dtype=str, keep_default_na=False)


def captures(tmp_path: Path, encap: str, carry1: str, carry2: str) -> Path:
    """The seed's test 2 for 30 ms, F1 with a tight upper bound it misses now and then (marked
    late), F2 with a block too; every LBF mode over the two carriers."""
    text = (ROOT / "experiments" / "lbf" / "test2.toml").read_text()
    edits = [
        ('duration = "10s"', 'duration = "30ms"'),
        ('budget = "equal"', 'budget = "equal"\nupper = "mark"\ndamper_bound = "50us"'),
        (
            'slo = { lower = "700us" }',
            f'slo = {{ lower = "300us", upper = "560us", carry = "{carry1}", encap = "{encap}" }}',
        ),
        (
            'burst_rate = "57Mbps", period = "10ms", burst = "1ms" }',
            'burst_rate = "57Mbps", period = "10ms", burst = "1ms" }\n'
            f'slo = {{ lower = "0us", carry = "{carry2}", encap = "{encap}" }}',
        ),
    ]
    for old, new in edits:
        assert text.count(old) == 1, old
        text = text.replace(old, new)
    res = latnet.run(text=text, packets=False, pcap=True)
    res.write(tmp_path)
    return tmp_path / "pcap"


def side_by_side(pcap: Path):
    """latnet.read_pcap's rows, then (index, latnet's row, tshark's row, tshark's expert
    messages) per frame, after checking that both read every frame and Lua raised nothing."""
    ours = latnet.read_pcap(pcap)
    ws = tshark(pcap)
    assert len(ws) == len(ours)
    rows = []
    for i, row in ours.iterrows():
        w = ws.iloc[i]
        msgs = w["_ws.expert.message"].split("|")
        assert not any("Lua" in m for m in msgs), (pcap.name, i, msgs)
        rows.append((i, row, w, msgs))
    return ours, rows


def is_large_flow_error(msg: str) -> bool:
    """A message about the large-flow option (the only IP option both readers decode)."""
    return msg.startswith("IPv") and ("large-flow" in msg or "duplicate option" in msg)


def compare(pcap: Path, other_errors: bool = False) -> pd.DataFrame:
    """Both readers' rows side by side; asserts that they agree frame by frame. With
    `other_errors`, a frame latnet rejects below the block (an IPv6 option or extension header
    it finds malformed) may read any way in Wireshark, as long as no Lua error is raised."""
    ours, rows = side_by_side(pcap)
    for i, row, w, msgs in rows:
        lbf_msgs = [m for m in msgs if m.startswith("LBF block")]
        msg = w["_ws.expert.message"]
        if other_errors and row["error"] != "" and not row["error"].startswith("LBF block"):
            continue
        if row["error"].startswith("LBF block: malformed"):
            # (latnet names the block first, then a malformed large-flow option, if any)
            want = [e for e in row["error"].split("; ") if e.startswith("LBF block")]
            assert lbf_msgs == want, (pcap.name, i, msgs, row["error"])
        elif "truncated" in row["error"]:
            # cut short by the capture: neither reader makes up a block or calls it malformed
            assert w["lbf.lower_ns"] == "" and not lbf_msgs, (pcap.name, i, msg)
        else:
            # no error, or only the large-flow option's (`compare_large_flow` reads those)
            errs = [e for e in row["error"].split("; ") if e != ""]
            assert all(is_large_flow_error(e) for e in errs), (pcap.name, i, row["error"])
            assert not lbf_msgs, (pcap.name, i, msg)
        if pd.isna(row["lbf_carrier"]):
            if row["error"] == "":
                assert w["lbf.lower_ns"] == "", (pcap.name, i)
            continue
        got = {k: w[k] for k in FIELDS}
        want = {
            "lbf.carrier": row["lbf_carrier"],
            "lbf.mode": str(MODES[row["lbf_mode"]]),
            "lbf.late": str(int(row["lbf_late"])),
            "lbf.lower_ns": str(int(row["lbf_lower_ns"])),
            "lbf.upper_ns": "0" if pd.isna(row["lbf_upper_ns"]) else str(int(row["lbf_upper_ns"])),
            "lbf.value_ns": str(int(row["lbf_value_ns"])),
        }
        assert got == want, (pcap.name, i)
    return ours


def read_blocks(pcap: Path) -> int:
    return int(latnet.read_pcap(pcap)["lbf_carrier"].notna().sum())


def records(pcap: bytes) -> list[tuple[bytes, bytearray]]:
    """(record header, frame) of each record of a pcap file."""
    out, pos = [], 24
    while pos < len(pcap):
        hdr = pcap[pos : pos + 16]
        caplen = struct.unpack("<I", hdr[8:12])[0]
        out.append((hdr, bytearray(pcap[pos + 16 : pos + 16 + caplen])))
        pos += 16 + caplen
    return out


# Ways to break the block at offset `b` of a frame; each returns whether the frame is now
# malformed (for latnet: the reason in DAMAGE).
def _set(i, v):
    def f(fr, b):
        fr[b + i] = v
        return True

    return f


def _or(i, v):
    def f(fr, b):
        fr[b + i] |= v
        return True

    return f


def _has_upper(fr, b):
    return fr[b + 1] & 0x40 != 0


def _clear_upper(fr, b):
    # breaks only a block with an upper bound (the field then holds it without the flag)
    had = _has_upper(fr, b)
    fr[b + 1] &= ~0x40 & 0xFF
    return had


def _udp_len(v):
    def f(fr, _b):
        fr[38:40] = v.to_bytes(2, "big")
        return True

    return f


def _lower_above_upper(fr, b):
    if not _has_upper(fr, b):
        return False
    fr[b + 4 : b + 12] = (int.from_bytes(fr[b + 12 : b + 20], "big") + 1).to_bytes(8, "big")
    return True


def _cut(fr, b):
    del fr[b + 10 :]
    return True


DAMAGE = [
    ("version 2", _set(0, 0x20), "version"),
    ("mode 7", _set(0, 0x17), "mode"),
    ("reserved flag", _or(1, 0x01), "reserved"),
    ("reserved octet", _set(3, 0x80), "reserved"),
    ("upper without U", _clear_upper, "upper without U flag"),
    ("lower above upper", _lower_above_upper, "lower > upper"),
    ("capture cut in the block", _cut, "truncated"),
]


@pytest.mark.parametrize(
    "encap,carry1,carry2",
    [("udp-shim", "latency-so-far", "timestamp"), ("ipv6", "rest-slo", "damper")],
)
def test_dissector_reads_what_latnet_reads(tmp_path, encap, carry1, carry2):
    """Every capture of the run: same blocks, every mode, late marks included; then one damaged
    copy per rule of the block (and of the shim's header and length): the same frames flagged
    malformed with latnet's words, the others still read alike."""
    pcaps = captures(tmp_path, encap, carry1, carry2)
    seen = set()
    for p in sorted(pcaps.glob("*.pcap")):
        df = compare(p)
        blocks = df.dropna(subset=["lbf_carrier"])
        seen |= set(zip(blocks["lbf_carrier"], blocks["lbf_mode"], blocks["lbf_late"], strict=True))
    assert seen == {(encap, carry1, 0), (encap, carry1, 1), (encap, carry2, 0)}

    src = (pcaps / "FWD1-FWD2.pcap").read_bytes()
    recs = records(src)
    # where the block sits in the simulator's frames (checked against read_pcap, not assumed)
    b, mark = (46, b"LB\x1c\x00") if encap == "udp-shim" else (58, b"\x3e\x1c")

    def is_lbf(fr: bytearray) -> bool:
        return fr[b - len(mark) : b] == mark

    n_lbf = sum(is_lbf(fr) for _, fr in recs)
    assert n_lbf == read_blocks(pcaps / "FWD1-FWD2.pcap") > 50
    damage = list(DAMAGE)
    if encap == "udp-shim":
        damage += [
            ("shim length 27", _set(-2, 27), "shim header"),
            ("shim reserved", _set(-1, 1), "shim header"),
            ("udp length 28", _udp_len(28), "shim beyond UDP length"),
        ]
    for name, hurt, reason in damage:
        out, n, broken = bytearray(src[:24]), 0, 0
        for hdr, fr in recs:
            fr = bytearray(fr)
            if is_lbf(fr):
                n += 1
                if n % 3 == 0:
                    broken += hurt(fr, b)
            out += hdr[:8] + struct.pack("<I", len(fr)) + hdr[12:] + fr
        bad = tmp_path / f"damaged-{name.replace(' ', '-')}.pcap"
        bad.write_bytes(bytes(out))
        df = compare(bad)
        if reason == "truncated":
            hurt_n = df["error"].str.contains("truncated").sum()
        else:
            hurt_n = (df["error"] == f"LBF block: malformed {reason}").sum()
        assert hurt_n == broken > 5 and df["lbf_carrier"].notna().sum() == n - broken, name
    if encap == "ipv6":
        # the same option in a destination-options header is not a block for either reader
        out = bytearray(src[:24])
        for hdr, fr in recs:
            fr = bytearray(fr)
            if is_lbf(fr):
                fr[20] = 60  # IPv6 next header: destination options instead of hop-by-hop
            out += hdr + fr
        moved = tmp_path / "destination-options.pcap"
        moved.write_bytes(bytes(out))
        df = compare(moved)
        assert df["lbf_carrier"].isna().all() and (df["error"] == "").all()


@pytest.mark.parametrize("encap", ["udp-shim", "ipv6"])
def test_dissector_survives_random_damage(tmp_path, encap):
    """One to three random octets of each block's carrier header and block changed (and now and
    then the capture cut short): never a Lua error, and wherever latnet reads a block or names
    the block malformed, the dissector reads the same fields or the same reason."""
    carry2 = "timestamp" if encap == "udp-shim" else "damper"
    pcaps = captures(tmp_path, encap, "latency-so-far", carry2)
    recs = records((pcaps / "FWD1-FWD2.pcap").read_bytes())
    first = 42 if encap == "udp-shim" else 56  # the shim header / the option's type octet
    rng = random.Random(7)
    out, n = bytearray((pcaps / "FWD1-FWD2.pcap").read_bytes()[:24]), 0
    for _ in range(3):
        for hdr, fr in recs:
            fr = bytearray(fr)
            if len(fr) >= first + 32:
                n += 1
                for _ in range(rng.randint(1, 3)):
                    fr[rng.randrange(first, first + 32)] = rng.randrange(256)
                if rng.random() < 0.1:
                    del fr[rng.randrange(first, first + 32) :]
            out += hdr[:8] + struct.pack("<I", len(fr)) + hdr[12:] + fr
    bad = tmp_path / "random.pcap"
    bad.write_bytes(bytes(out))
    df = compare(bad, other_errors=True)
    errors = df["error"]
    # the damage reached every outcome: blocks still read, malformed blocks, cut captures
    assert n > 150 and df["lbf_carrier"].notna().sum() > 10
    assert errors.str.startswith("LBF block: malformed").sum() > 30
    assert errors.str.contains("truncated").sum() > 5


LF_TYPES = {"register": "1", "report": "2", "deregister": "3"}


def pacing_captures(tmp_path: Path) -> Path:
    """The pacing seed's per-connection run, 0.5 s with the four flows 0.1 s (five round trips)
    apart: SYNs register, the switch fills in the count, the senders get reports as it
    changes."""
    text = (ROOT / "experiments" / "pacing" / "per-connection.toml").read_text()
    edits = [('duration = "60.0s"', 'duration = "0.5s"')]
    edits += [
        (f'start = "{a}"', f'start = "{b}"') for a, b in (("15.0s", "0.1s"), ("30.0s", "0.2s"))
    ]
    edits += [('start = "45.0s"', 'start = "0.3s"')]
    for old, new in edits:
        assert text.count(old) == 1, old
        text = text.replace(old, new)
    latnet.run(text=text, packets=False, pcap=True).write(tmp_path)
    return tmp_path / "pcap"


def compare_large_flow(pcap: Path) -> pd.DataFrame:
    """As `compare`, for the large-flow option."""
    ours, rows = side_by_side(pcap)
    for i, row, w, msgs in rows:
        lf_msgs = [m for m in msgs if is_large_flow_error(m)]
        want = [e for e in row["error"].split("; ") if is_large_flow_error(e)]
        if want:
            assert lf_msgs == want, (pcap.name, i, msgs, row["error"])
            continue
        assert not lf_msgs, (pcap.name, i, msgs)
        got = [w[k] for k in LF_FIELDS]
        if pd.isna(row["lf_type"]):
            assert got == ["", "", "", ""], (pcap.name, i)
            continue
        filled = bool(row["lf_filled"])
        want = [LF_TYPES[row["lf_type"]], str(int(filled))]
        # a switch wrote count and rate only when filled: the dissector shows them then
        want += [str(row["lf_count"]), str(row["lf_rate_kbps"])]
        assert got == want, (pcap.name, i, got, want)
    return ours


def test_dissector_reads_large_flow_options_as_latnet_does(tmp_path):
    """Every capture of a switch-assisted pacing run: the same options (register unfilled from
    the host, filled by the switch, reports of each new count), and on a damaged copy the same
    frames malformed with latnet's words."""
    pcaps = pacing_captures(tmp_path)
    seen = set()
    for p in sorted(pcaps.glob("*.pcap")):
        df = compare_large_flow(p).dropna(subset=["lf_type"])
        seen |= {
            (t, int(f), int(c))
            for t, f, c in zip(df["lf_type"], df["lf_filled"], df["lf_count"], strict=True)
        }
    assert {("register", 0, 0), ("register", 1, 4), ("report", 1, 1), ("report", 1, 4)} <= seen
    # the switch's reports to l0: one per count, 1 to 4, on a 100 Mbit/s port
    reports = latnet.read_pcap(pcaps / "left-l0.pcap").dropna(subset=["lf_type"])
    assert list(reports["lf_count"]) == [1, 2, 3, 4] and (reports["lf_rate_kbps"] == 100_000).all()

    src = (pcaps / "left-right.pcap").read_bytes()
    for pos, value, reason in (
        (36, 9, "large-flow message type"),
        (35, 8, "large-flow option length"),
    ):
        out, n = bytearray(src[:24]), 0
        for hdr, fr in records(src):
            fr = bytearray(fr)
            if fr[34] == 0x5E:  # the option right after the IPv4 header
                fr[pos] = value
                n += 1
            out += hdr + fr
        bad = tmp_path / f"damaged-{pos}.pcap"
        bad.write_bytes(bytes(out))
        df = compare_large_flow(bad)
        assert (df["error"] == f"IPv4 option: malformed {reason}").sum() == n == 4, reason


def rewrite(src: bytes, edit) -> bytes:
    """A copy of pcap `src` with `edit(n, frame)` applied to each frame (a bytearray, edited in
    place; `n` counts frames); record lengths follow the frame's."""
    out = bytearray(src[:24])
    for n, (hdr, fr) in enumerate(records(src)):
        grown = len(fr)
        edit(n, fr)
        orig = struct.unpack("<I", hdr[12:16])[0] + len(fr) - grown
        out += hdr[:8] + struct.pack("<II", len(fr), orig) + fr
    return bytes(out)


def ipv4_checksum(fr: bytearray) -> None:
    hl = (fr[14] & 0x0F) * 4
    fr[24:26] = b"\0\0"
    s = sum(struct.unpack(f"!{hl // 2}H", fr[14 : 14 + hl]))
    while s > 0xFFFF:
        s = (s & 0xFFFF) + (s >> 16)
    fr[24:26] = struct.pack("!H", ~s & 0xFFFF)


def test_duplicate_and_doubly_malformed_options(tmp_path):
    """A header holding the large-flow option twice is malformed for both readers (IPv4 and
    IPv6: which copy counts is not defined); a frame with a malformed LBF block and a malformed
    large-flow option gets both named, by latnet in one error and by the dissector once each."""
    # IPv4: each large-flow option on the pacing run's bottleneck link copied after itself
    pcaps = pacing_captures(tmp_path / "pacing")
    dups = []

    def twice(_n, fr):
        if fr[34] == 0x5E and fr[35] == 12 and fr[14] == 0x48:
            fr[46:46] = fr[34:46]
            fr[14] += 3
            fr[16:18] = (int.from_bytes(fr[16:18], "big") + 12).to_bytes(2, "big")
            ipv4_checksum(fr)
            dups.append(len(fr))

    bad = tmp_path / "ipv4-twice.pcap"
    bad.write_bytes(rewrite((pcaps / "left-right.pcap").read_bytes(), twice))
    df = compare_large_flow(bad)
    assert (df["error"] == "IPv4 option: malformed duplicate option").sum() == len(dups) >= 4
    assert df["lf_type"].isna().all()

    # IPv6: F1's LBF blocks get a large-flow option after them, in three ways by turns
    pcaps = captures(tmp_path / "lbf", "ipv6", "latency-so-far", "timestamp")
    lf = bytes([0x1E, 10, 1, 0, 0, 0, 0, 0, 0, 0, 0, 0])  # an unfilled register
    way = {}

    def add(n, fr):
        if fr[56:58] != b"\x3e\x1c" or fr[55] != 3:
            return
        way[n] = len(way) % 3
        if way[n] == 0:  # LBF version 2 and a large-flow message of type 7
            fr[58] = 0x20
            extra = bytes([0x1E, 10, 7]) + lf[3:] + b"\x01\x02\0\0"
        elif way[n] == 1:  # the option twice
            extra = lf + lf
        else:  # well formed, both read
            extra = lf + b"\x01\x02\0\0"
        fr[86:86] = extra
        fr[55] += len(extra) // 8
        fr[18:20] = (int.from_bytes(fr[18:20], "big") + len(extra)).to_bytes(2, "big")

    bad = tmp_path / "ipv6-lbf-and-large-flow.pcap"
    bad.write_bytes(rewrite((pcaps / "FWD1-FWD2.pcap").read_bytes(), add))
    ours = compare(bad)
    compare_large_flow(bad)
    errs = {k: ours["error"][[n for n in way if way[n] == k]] for k in range(3)}
    assert (
        errs[0] == "LBF block: malformed version; IPv6 option: malformed large-flow message type"
    ).all() and len(errs[0]) > 20
    assert (errs[1] == "IPv6 option: malformed duplicate option").all() and len(errs[1]) > 20
    assert (errs[2] == "").all() and len(errs[2]) > 20
    read = ours.loc[[n for n in way if way[n] == 2]]
    assert (read["lf_type"] == "register").all() and read["lbf_carrier"].notna().all()
    assert ours.loc[[n for n in way if way[n] == 1], "lbf_carrier"].notna().all()


def test_only_the_frames_own_ip_header_counts(tmp_path):
    """latnet reads the options of the frame's IP header only (for IPv6, of the hop-by-hop
    header right after it), not those of a packet inside it (IP in IP, or the packet an ICMP
    error quotes); neither does the dissector. Frames holding an option are wrapped in an outer
    header of their own version, by turns without options (nothing for either reader) and with a
    copy of the inner options (the outer copy read once, no duplicate)."""
    way = {}

    def wrap_v6(n, fr):
        if fr[56:58] != b"\x3e\x1c":  # F1's LBF block
            return
        way[n] = len(way) % 2
        inner = bytes(fr[14:])
        outer = bytearray(inner[:40])
        if way[n] == 0:
            outer[6], ext = 41, b""
        else:
            ext = bytes([41]) + inner[41 : 40 + 8 * (inner[41] + 1)]
        outer[4:6] = (len(ext) + len(inner)).to_bytes(2, "big")
        fr[14:] = bytes(outer) + ext + inner

    pcaps = captures(tmp_path / "lbf", "ipv6", "latency-so-far", "timestamp")
    bad = tmp_path / "ipv6-in-ipv6.pcap"
    bad.write_bytes(rewrite((pcaps / "FWD1-FWD2.pcap").read_bytes(), wrap_v6))
    ours = compare(bad)
    bare, copied = ([n for n in way if way[n] == k] for k in range(2))
    assert len(bare) > 20 and len(copied) > 20
    assert ours.loc[bare, "lbf_carrier"].isna().all(), ours.loc[bare]
    assert (ours.loc[copied, "lbf_carrier"] == "ipv6").all()
    assert (ours.loc[bare + copied, "error"] == "").all(), ours.loc[bare + copied, "error"]

    way.clear()

    def wrap_v4(n, fr):
        if fr[34] != 0x5E or fr[14] & 0x0F == 5:  # a large-flow option
            return
        way[n] = len(way) % 2
        inner = bytes(fr[14:])
        hl = 20 if way[n] == 0 else (inner[0] & 0x0F) * 4
        outer = bytearray(inner[:hl])
        outer[0] = 0x40 | hl // 4
        outer[9] = 4  # IPv4 in IPv4
        outer[2:4] = (hl + len(inner)).to_bytes(2, "big")
        fr[14:] = bytes(outer) + inner
        ipv4_checksum(fr)

    pcaps = pacing_captures(tmp_path / "pacing")
    bad = tmp_path / "ipv4-in-ipv4.pcap"
    bad.write_bytes(rewrite((pcaps / "left-right.pcap").read_bytes(), wrap_v4))
    ours = compare_large_flow(bad)
    bare, copied = ([n for n in way if way[n] == k] for k in range(2))
    assert len(bare) >= 2 and len(copied) >= 2, way
    assert ours.loc[bare, "lf_type"].isna().all(), ours.loc[bare]
    assert ours.loc[copied, "lf_type"].notna().all()
    assert (ours.loc[bare + copied, "error"] == "").all(), ours.loc[bare + copied, "error"]
