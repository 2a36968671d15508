-- latnet's own headers for Wireshark and tshark (4.0 or later): the Latency-Based Forwarding
-- block and the large-flow option of switch-assisted TCP pacing.
--
--   wireshark -X lua_script:tools/wireshark/latnet.lua out/pcap/FWD4-R1.pcap
--   tshark -X lua_script:tools/wireshark/latnet.lua -r FWD4-R1.pcap -Y lbf \
--     -T fields -e frame.time_epoch -e lbf.lower_ns -e lbf.value_ns
--   tshark -X lua_script:tools/wireshark/latnet.lua -r left-l0.pcap -Y largeflow -O largeflow
--
-- or copy the file into Wireshark's personal Lua plugins folder.
--
-- The LBF block (28 octets, big endian; crates/latnet-wire/src/lbf.rs is the authority):
--   octet 0     version (high 4 bits, 1) and mode (low 4 bits: 0 latency so far,
--               1 sender timestamp, 2 rest-SLO, 3 damper)
--   octet 1     flags: 0x80 late, 0x40 upper bound present, the rest reserved (0)
--   octets 2-3  reserved (0)
--   octets 4-11 lower bound, ns; 12-19 upper bound, ns (0 unless the U flag); 20-27 value, ns
-- Carriers: IPv6 hop-by-hop option type 0x3E with 28 octets of data, or a UDP shim at the
-- start of the payload: "LB", length 28, one reserved octet (0), then the block.
--
-- The large-flow option (crates/latnet-wire/src/large_flow.rs): IPv4 option kind 0x5E or IPv6
-- hop-by-hop option type 0x1E, 10 octets of data: message type (1 register, 2 report,
-- 3 deregister), flags (0x01 filled), count of large flows (16 bits), 16 reserved bits, the
-- port's rate in kbit/s (32 bits).
--
-- It checks what latnet's parsers check and flags a malformed block or option with the same
-- words as latnet.read_pcap's `error` column ("LBF block: malformed reserved", "IPv4 option:
-- malformed large-flow message type", ...). Like a latnet switch that expects the shim, it
-- takes every UDP payload starting with "LB" for one; turn the heuristic off (Analyze >
-- Enabled Protocols > lbf_udp) where that is wrong.

local lbf = Proto("lbf", "latnet Latency-Based Forwarding block")

local MODES = {
  [0] = "latency so far",
  [1] = "sender timestamp",
  [2] = "rest-SLO",
  [3] = "damper",
}
-- What the value field holds, by mode.
local VALUE_MEANING = {
  [0] = "latency so far",
  [1] = "sender's timestamp",
  [2] = "unused in rest-SLO mode",
  [3] = "damper hold at the next hop",
}
local BLOCK_LEN = 28
local SHIM_LEN = 4 + BLOCK_LEN
local OPTION_TYPE = 0x3E

-- Bit fields by arithmetic, so the file runs on Lua 5.2 to 5.4 with or without `bit`.
local function version(b)
  return math.floor(b / 16)
end
local function mode(b)
  return b % 16
end
local function flag(b, mask)
  return math.floor(b / mask) % 2 == 1
end

local f = lbf.fields
f.carrier = ProtoField.string("lbf.carrier", "Carrier")
f.shim_magic = ProtoField.string("lbf.shim.magic", "Shim magic")
f.shim_len = ProtoField.uint8("lbf.shim.length", "Shim block length", base.DEC)
f.shim_reserved = ProtoField.uint8("lbf.shim.reserved", "Shim reserved", base.HEX)
f.version = ProtoField.uint8("lbf.version", "Version", base.DEC, nil, 0xF0)
f.mode = ProtoField.uint8("lbf.mode", "Mode", base.DEC, MODES, 0x0F)
f.flags = ProtoField.uint8("lbf.flags", "Flags", base.HEX)
f.late = ProtoField.bool("lbf.late", "Late", 8, nil, 0x80)
f.has_upper = ProtoField.bool("lbf.upper_present", "Upper bound present", 8, nil, 0x40)
f.flags_reserved = ProtoField.uint8("lbf.flags.reserved", "Reserved flags", base.HEX, nil, 0x3F)
f.reserved = ProtoField.uint16("lbf.reserved", "Reserved", base.HEX)
f.lower = ProtoField.uint64("lbf.lower_ns", "Lower bound (ns)", base.DEC)
f.upper = ProtoField.uint64("lbf.upper_ns", "Upper bound (ns)", base.DEC)
f.value = ProtoField.uint64("lbf.value_ns", "Value (ns)", base.DEC)

local e_malformed =
  ProtoExpert.new("lbf.malformed", "Malformed LBF block", expert.group.MALFORMED, expert.severity.ERROR)
lbf.experts = { e_malformed }

local function malformed(item, what)
  item:add_proto_expert_info(e_malformed, "LBF block: malformed " .. what)
end

-- The first rule latnet's LbfRepr::parse finds broken, or nil.
local function check(r)
  local ver_mode = r(0, 1):uint()
  local flags = r(1, 1):uint()
  if version(ver_mode) ~= 1 then
    return "version"
  end
  if MODES[mode(ver_mode)] == nil then
    return "mode"
  end
  if flags % 0x40 ~= 0 or r(2, 2):uint() ~= 0 then
    return "reserved"
  end
  local lower, upper = r(4, 8):uint64(), r(12, 8):uint64()
  if not flag(flags, 0x40) then
    if upper ~= UInt64(0) then
      return "upper without U flag"
    end
  elseif lower > upper then
    return "lower > upper"
  end
  return nil
end

-- Adds the 28 octets of `r` under `tree`.
local function add_block(tree, pinfo, r, carrier)
  local item = tree:add(lbf, r, "LBF block")
  item:add(f.carrier, carrier):set_generated()
  item:add(f.version, r(0, 1))
  item:add(f.mode, r(0, 1))
  local flags = item:add(f.flags, r(1, 1))
  flags:add(f.late, r(1, 1))
  flags:add(f.has_upper, r(1, 1))
  flags:add(f.flags_reserved, r(1, 1))
  item:add(f.reserved, r(2, 2))
  item:add(f.lower, r(4, 8))
  item:add(f.upper, r(12, 8))
  local value = item:add(f.value, r(20, 8))
  local meaning = VALUE_MEANING[mode(r(0, 1):uint())]
  if meaning then
    value:append_text(" (" .. meaning .. ")")
  end
  local bad = check(r)
  if bad then
    malformed(item, bad)
  else
    local m = MODES[mode(r(0, 1):uint())]
    local ub = ""
    if flag(r(1, 1):uint(), 0x40) then
      ub = string.format(", ub %.3f us", r(12, 8):uint64():tonumber() / 1000)
    end
    local text = string.format(
      "%s, lb %.3f us%s, value %s ns%s",
      m,
      r(4, 8):uint64():tonumber() / 1000,
      ub,
      r(20, 8):uint64(),
      flag(r(1, 1):uint(), 0x80) and ", late" or ""
    )
    item:append_text(" (" .. text .. ")")
    pinfo.cols.info:append(" [LBF " .. text .. "]")
  end
end

-- UDP shim: a heuristic on UDP payloads.
local function shim_heuristic(tvb, pinfo, tree)
  if tvb:len() < 2 or tvb(0, 2):string() ~= "LB" then
    return false
  end
  pinfo.cols.protocol:append("/LBF")
  if tvb:reported_length_remaining() < SHIM_LEN then
    local item = tree:add(lbf, tvb(), "LBF shim")
    item:add(f.carrier, "udp-shim"):set_generated()
    malformed(item, "shim beyond UDP length")
    return true
  end
  if tvb:len() < SHIM_LEN then
    -- The datagram holds the shim but the capture was cut short: show what there is.
    tree:add(lbf, tvb(), "LBF shim [truncated by the capture]")
    return true
  end
  local shim = tree:add(lbf, tvb(0, SHIM_LEN), "LBF shim")
  shim:add(f.shim_magic, tvb(0, 2))
  shim:add(f.shim_len, tvb(2, 1))
  shim:add(f.shim_reserved, tvb(3, 1))
  if tvb(2, 1):uint() ~= BLOCK_LEN or tvb(3, 1):uint() ~= 0 then
    shim:add(f.carrier, "udp-shim"):set_generated()
    malformed(shim, "shim header")
    return true
  end
  add_block(shim, pinfo, tvb(4, BLOCK_LEN), "udp-shim")
  if tvb:len() > SHIM_LEN then
    Dissector.get("data"):call(tvb(SHIM_LEN):tvb(), pinfo, tree)
  end
  return true
end
lbf:register_heuristic("udp", shim_heuristic)

-- The large-flow option of switch-assisted pacing.
local lf = Proto("largeflow", "latnet large-flow option (switch-assisted TCP pacing)")
local LF_TYPES = { [1] = "register", [2] = "report", [3] = "deregister" }
local LF_DATA_LEN = 10
local LF_KIND_V4, LF_KIND_V6 = 0x5E, 0x1E
local g = lf.fields
g.type = ProtoField.uint8("largeflow.type", "Message", base.DEC, LF_TYPES)
g.flags = ProtoField.uint8("largeflow.flags", "Flags", base.HEX)
g.filled = ProtoField.bool("largeflow.filled", "Filled by a switch", 8, nil, 0x01)
g.count = ProtoField.uint16("largeflow.count", "Large flows at the port", base.DEC)
g.reserved = ProtoField.uint16("largeflow.reserved", "Reserved", base.HEX)
g.rate = ProtoField.uint32("largeflow.rate_kbps", "Port rate (kbit/s)", base.DEC)
g.carrier = ProtoField.string("largeflow.carrier", "Carrier")
local e_lf_malformed = ProtoExpert.new(
  "largeflow.malformed",
  "Malformed large-flow option",
  expert.group.MALFORMED,
  expert.severity.ERROR
)
lf.experts = { e_lf_malformed }

-- The option's type octet at `off` of `tvb`; `layer` is latnet's name for where it sits;
-- `dup`: the header held the option before (latnet rejects such a frame: which copy counts is
-- not defined).
local function add_large_flow(tvb, off, tree, pinfo, layer, carrier, dup)
  local len = tvb(off + 1, 1):uint()
  local data_len = carrier == "ipv4" and len - 2 or len
  if tvb:len() < off + 2 + data_len then
    tree:add(lf, tvb(off), "Large-flow option [truncated by the capture]")
    return
  end
  local item = tree:add(lf, tvb(off, 2 + data_len), "Large-flow option")
  item:add(g.carrier, carrier):set_generated()
  local bad
  if dup then
    item:add_proto_expert_info(e_lf_malformed, layer .. ": malformed duplicate option")
    return
  elseif data_len ~= LF_DATA_LEN then
    bad = "large-flow option length"
  elseif LF_TYPES[tvb(off + 2, 1):uint()] == nil then
    bad = "large-flow message type"
  end
  if data_len >= 1 then
    item:add(g.type, tvb(off + 2, 1))
  end
  if bad then
    item:add_proto_expert_info(e_lf_malformed, layer .. ": malformed " .. bad)
    return
  end
  local d = tvb(off + 2, LF_DATA_LEN)
  local flags = item:add(g.flags, d(1, 1))
  flags:add(g.filled, d(1, 1))
  item:add(g.count, d(2, 2))
  item:add(g.reserved, d(4, 2))
  item:add(g.rate, d(6, 4))
  local text = LF_TYPES[d(0, 1):uint()]
  if flag(d(1, 1):uint(), 0x01) then
    text = string.format("%s, %d flows on %d kbit/s", text, d(2, 2):uint(), d(6, 4):uint())
  end
  item:append_text(" (" .. text .. ")")
  pinfo.cols.protocol:append("/LF")
  pinfo.cols.info:append(" [large-flow " .. text .. "]")
end

-- IPv6 hop-by-hop options (the LBF block, the large-flow option) and IPv4 options (the
-- large-flow option): Wireshark's IP dissectors show them as unknown options; a
-- post-dissector finds them from the option-type fields and decodes their data.
local v6_opt_type = Field.new("ipv6.opt.type")
local hbh = Field.new("ipv6.hopopts")
local ipv6 = Field.new("ipv6")
local ipv4 = Field.new("ip")
local v4_hdr_len = Field.new("ip.hdr_len")

-- The options of an IPv4 header (`hdr_len`: its field) holding the large-flow option.
local function ipv4_options(hdr_len, tree, pinfo)
  -- (Wireshark gives an unknown IPv4 option no type field: walk the options area.)
  local tvb, pos, seen = hdr_len.source, hdr_len.offset + 20, false
  local stop = math.min(hdr_len.offset + hdr_len.value, tvb:len())
  while pos < stop do
    local kind = tvb(pos, 1):uint()
    if kind == 0 then
      break
    elseif kind == 1 then
      pos = pos + 1
    else
      if pos + 1 >= stop then
        break
      end
      local len = tvb(pos + 1, 1):uint()
      if kind == LF_KIND_V4 and len >= 2 then
        add_large_flow(tvb, pos, tree, pinfo, "IPv4 option", "ipv4", seen)
        seen = true
      end
      if len < 2 then
        break
      end
      pos = pos + len
    end
  end
end

-- The options of the hop-by-hop header `first` (its field): the LBF block, the large-flow option.
local function ipv6_options(first, tree, pinfo)
  local found, seen = 0, false
  for _, fi in ipairs({ v6_opt_type() }) do
    local tvb, off = fi.source, fi.offset
    if off < first.offset or off >= first.offset + first.len then
      -- another header's (destination options, a packet inside): not ours to read
    elseif fi.value == LF_KIND_V6 then
      add_large_flow(tvb, off, tree, pinfo, "IPv6 option", "ipv6", seen)
      seen = true
    elseif fi.value == OPTION_TYPE then
      found = found + 1
      pinfo.cols.protocol:append("/LBF")
      local len = tvb(off + 1, 1):uint()
      if tvb:len() < off + 2 + len then
        -- The option is there but the capture was cut short.
        tree:add(lbf, tvb(off), "LBF block [truncated by the capture]")
      elseif found > 1 then
        local item = tree:add(lbf, tvb(off, 2 + len), "LBF block")
        item:add(f.carrier, "ipv6"):set_generated()
        malformed(item, "duplicate option")
      elseif len ~= BLOCK_LEN then
        local item = tree:add(lbf, tvb(off, 2 + len), "LBF block")
        item:add(f.carrier, "ipv6"):set_generated()
        malformed(item, "option length")
      else
        add_block(tree, pinfo, tvb(off + 2, BLOCK_LEN), "ipv6")
      end
    end
  end
end

local post = Proto("latnet_options", "latnet options in IP headers")
function post.dissector(_, pinfo, tree)
  -- As for latnet, only the frame's own network header counts (the first IP header, and for
  -- IPv6 the hop-by-hop header right after it), not an IP header inside it (IP in IP, the
  -- packet an ICMP error quotes), which Wireshark dissects too.
  local ip4, ip6 = ipv4(), ipv6()
  if ip4 and ip6 then
    if ip4.offset < ip6.offset then
      ip6 = nil
    else
      ip4 = nil
    end
  end
  if ip4 then
    local hdr_len = v4_hdr_len()
    if hdr_len and hdr_len.offset == ip4.offset then
      ipv4_options(hdr_len, tree, pinfo)
    end
  elseif ip6 then
    local first = hbh()
    if first and first.offset == ip6.offset + 40 then
      ipv6_options(first, tree, pinfo)
    end
  end
end
register_postdissector(post)
