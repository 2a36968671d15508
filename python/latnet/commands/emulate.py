"""`latnet run --mode emu|both`: a scenario on real packets, beside the simulator.

The `run` subcommand itself lives in ``latnet.cli``; this module holds its emulation half and
registers no subcommand of its own.
"""

from __future__ import annotations

import argparse
from pathlib import Path

from ..table import (
    LBF_OUTCOMES,
    TCP_HEADERS,
    TCP_TITLE,
    emulation_timing,
    flow_table,
    fmt_us,
    lbf_outcomes,
    render,
    tcp_row,
    tcp_table,
)


def register(subparsers) -> None:  # noqa: ARG001 (the `run` subcommand carries --mode)
    return None


def side_by_side(sim: dict, emu: dict) -> str:
    """One row per flow: simulated and emulated packets, loss and latency."""
    rows = []
    by_name = {f["name"]: f for f in emu["flows"]}
    for f in sim["flows"]:
        e = by_name.get(f["name"])
        for label, x in (("sim", f), ("emu", e)):
            if x is None:
                continue
            lat = x["latency_ns"] or {}
            settled = max(1, x["sent"] - x["in_flight_at_end"])
            rows.append(
                [
                    f["name"] if label == "sim" else "",
                    label,
                    x["sent"],
                    x["received"],
                    f"{100.0 * x['dropped'] / settled:.2f}",
                    f"{x['throughput_bps'] / 1e6:.2f}",
                    fmt_us(lat.get("min")),
                    fmt_us(lat.get("p50")),
                    fmt_us(lat.get("p99")),
                    fmt_us(lat.get("max")),
                ]
            )
    headers = ["flow", "mode", "sent", "recv", "loss%", "Mbit/s", "min", "p50", "p99", "max"]
    title = (
        f"{sim['scenario']}: simulated (latency {sim['latency_convention']}) vs emulated "
        "(real packets, latency physical, us)"
    )
    return render(headers, rows, title)


def tcp_side_by_side(sim: dict, emu: dict) -> str | None:
    """One row per TCP flow and mode: the simulator's TCP and Linux's (RTT: the simulator's
    samples, the kernel's smoothed RTT); ``None`` without TCP flows."""
    by_name = {f["name"]: f for f in emu["flows"]}
    rows = []
    for f in sim["flows"]:
        e = by_name.get(f["name"])
        for label, x in (("sim", f), ("emu", e)):
            if x is not None and x.get("tcp"):
                rows.append([f["name"] if label == "sim" else "", label, *tcp_row(x)])
    if not rows:
        return None
    return render(["flow", "mode", *TCP_HEADERS], rows, f"{TCP_TITLE}: simulated vs Linux")


def machine_hystart() -> bool | None:
    """Whether this machine's CUBIC runs HyStart (its ``tcp_cubic`` module parameters; None when
    they cannot be read)."""
    base = Path("/sys/module/tcp_cubic/parameters")
    try:
        return int((base / "hystart").read_text()) != 0
    except (OSError, ValueError):
        return None


def linux_defaults_note(path: Path, hystart: bool | None) -> str | None:
    """A note when TCP flows leave out ``hystart`` (CUBIC) or ``rack_tlp``, and so does
    ``[defaults.tcp]``: the simulator then runs standard slow start or RFC 6675 loss detection,
    while Linux's TCP runs its defaults (HyStart when ``hystart``, this machine's setting, is
    true; RACK-TLP always), so the two tables compare different TCPs. None when nothing is left
    out."""
    import tomllib

    doc = tomllib.loads(path.read_text())
    defaults = doc.get("defaults", {}).get("tcp", {})  # [defaults.tcp]
    tcp = [
        (f.get("name", f"f{i}"), {**defaults, **f["traffic"]})
        for i, f in enumerate(doc.get("flows", []))
        if f.get("traffic", {}).get("kind") in ("tcp-bulk", "tcp-rr")
    ]
    missing = {
        "hystart": [
            name
            for name, t in tcp
            if hystart and t.get("cc", "cubic") == "cubic" and "hystart" not in t
        ],
        "rack_tlp": [name for name, t in tcp if "rack_tlp" not in t],
    }
    what = {"hystart": "HyStart", "rack_tlp": "RACK-TLP"}
    parts = [f"{what[k]} ({', '.join(v)})" for k, v in missing.items() if v]
    if not parts:
        return None
    keys = " and ".join(f"`{k} = true`" for k, v in missing.items() if v)
    return (
        f"note: Linux's TCP here runs {' and '.join(parts)}, which the simulator leaves off "
        f"unless asked; set {keys} in those flows' traffic or in [defaults.tcp] to compare like "
        "with like"
    )


def lbf_side_by_side(sim: dict, emu: dict) -> str | None:
    """One row per flow with an SLO and mode: how its packets fared against the bounds (the
    emulated count against the measured, physical latency); ``None`` without LBF."""
    if not sim.get("lbf") or not emu.get("lbf"):
        return None
    by_name = {f["flow"]: f for f in emu["lbf"]["flows"]}
    rows = []
    for f in sim["lbf"]["flows"]:
        for label, x in (("sim", f), ("emu", by_name.get(f["flow"]))):
            if x is None:
                continue
            rows.append([f["flow"] if label == "sim" else "", label, *lbf_outcomes(x)])
    if not rows:
        return None
    headers = ["flow", "mode", *LBF_OUTCOMES]
    title = (
        f"LBF flows: simulated (latency {sim['lbf']['latency_convention']}) vs emulated "
        f"(latency {emu['lbf']['latency_convention']})"
    )
    return render(headers, rows, title)


def hops_side_by_side(sim: dict, emu: dict) -> str | None:
    """One row per flow and hop: the latency at the start of transmission there, simulated
    and emulated (from the sender's stamp: the sender's stack included), and the difference of
    the medians; ``None`` when the emulation measured no hop (TCP flows only)."""
    by_name = {f["name"]: f for f in emu["flows"]}
    rows = []
    for f in sim["flows"]:
        e = by_name.get(f["name"])
        emu_hops = {h["hop"]: h for h in (e or {}).get("hops", [])}
        for h in f["hops"]:
            eh = emu_hops.get(h["hop"])
            if eh is None or eh["latency_ns"] is None or h["latency_ns"] is None:
                continue
            s, m = h["latency_ns"], eh["latency_ns"]
            rows.append(
                [
                    f["name"],
                    h["hop"],
                    f"{h['node']}->{h['toward']}",
                    m["count"],
                    fmt_us(s["p50"]),
                    fmt_us(m["p50"]),
                    fmt_us(m["p50"] - s["p50"]),
                    fmt_us(s["p99"]),
                    fmt_us(m["p99"]),
                ]
            )
    if not rows:
        return None
    headers = ["flow", "hop", "port", "emu n", "sim p50", "emu p50", "diff", "sim p99", "emu p99"]
    title = (
        f"latency at the start of transmission from each hop: simulated (latency "
        f"{sim['latency_convention']}) vs emulated (from the sender's stamp, us)"
    )
    return render(headers, rows, title)


def cmd_run_emu(args: argparse.Namespace) -> int:
    from .. import run as run_sim
    from ..emu import run_emu
    from ..plot import latency_cdf
    from ..testbed import require_root

    require_root("latnet run --mode emu")
    path = Path(args.scenario)
    base = Path(args.out) if args.out else Path("out") / path.stem
    emu_out = base / "emu" if args.mode == "both" else base
    # --pcap, else the scenario's [output] pcap (the switches read its [output] queues)
    emu = run_emu(
        path,
        emu_out,
        seed=args.seed,
        pcap=args.pcap or None,
        queues=args.queues,
        switch_processes=None if args.switch_processes == "auto" else args.switch_processes,
        packets=args.packets,
        host_nics=args.host_nics,
    )
    captures = ", queues.csv" if emu.queues is not None else ""
    captures += ", packets.csv" if emu.packets is not None else ""
    captures += ", hops.csv" if emu.hops is not None else ""
    if args.plot and emu.packets is not None:
        latency_cdf(emu, emu_out / "latency_cdf.png")
        captures += ", latency_cdf.png"
    captures += ", timeseries.csv" if emu.timeseries is not None else ""
    captures += f", pcap/ ({len(emu.pcaps)} link captures)" if emu.pcaps else ""
    if args.mode == "emu":
        print(flow_table(emu))
        tcp = tcp_table(emu)
        if tcp is not None:
            print("\n" + tcp)
        print(emulation_timing(emu.summary))
        if not args.quiet:
            print(
                f"\nwrote results.json, flows.csv{captures} to {emu_out}/ "
                f"(run files: {emu_out}/emu-run/)"
            )
        return 0
    sim = run_sim(
        path, seed=args.seed, packets=args.packets, pcap=args.pcap or None, queues=args.queues
    )
    sim_out = base / "sim"
    sim.write(sim_out)
    if args.plot and sim.packets is not None:
        latency_cdf(sim, sim_out / "latency_cdf.png")
    print(side_by_side(sim.summary, emu.summary))
    print(emulation_timing(emu.summary))
    tcp = tcp_side_by_side(sim.summary, emu.summary)
    if tcp is not None:
        print("\n" + tcp)
        note = linux_defaults_note(path, machine_hystart())
        if note is not None:
            print(note)
    hops = hops_side_by_side(sim.summary, emu.summary)
    if hops is not None:
        print("\n" + hops)
    lbf = lbf_side_by_side(sim.summary, emu.summary)
    if lbf is not None:
        print("\n" + lbf)
    if not args.quiet:
        print(f"\nwrote {sim_out}/ and {emu_out}/")
    return 0
