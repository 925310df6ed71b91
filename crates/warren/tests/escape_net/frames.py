# Run inside a zone as its root (python3 from the host's /usr): craft and send Ethernet
# frames on eth0, or watch eth0 for marked frames. Used by tests/escape_net.rs only.
#
#   frames.py sniff SECONDS            print "ready", then "seen M1 M2 ..." (markers WMKxx)
#                                      once WMKzz (the sender's last frame) or time is up
#   frames.py send KIND KEY=VALUE...   send one frame (see KINDS below)
#   frames.py udp IP PORT MARK         send a datagram through the kernel's own stack
#   frames.py mac                      print eth0's MAC
import re
import socket
import struct
import sys
import time


def csum(b):
    if len(b) % 2:
        b += b"\0"
    s = sum(struct.unpack("!%dH" % (len(b) // 2), b))
    while s >> 16:
        s = (s & 0xFFFF) + (s >> 16)
    return (~s) & 0xFFFF


def mac(s):
    return bytes.fromhex(s.replace(":", ""))


def ip4(s):
    return socket.inet_pton(socket.AF_INET, s)


def ip6(s):
    return socket.inet_pton(socket.AF_INET6, s)


def eth(dst, src, typ, payload):
    f = dst + src + struct.pack("!H", typ) + payload
    return f + b"\0" * max(0, 60 - len(f))


def ipv4(src, dst, proto, payload):
    h = struct.pack("!BBHHHBBH4s4s", 0x45, 0, 20 + len(payload), 0x1234, 0, 64, proto, 0, src, dst)
    h = h[:10] + struct.pack("!H", csum(h)) + h[12:]
    return h + payload


def udp4(src, dst, sp, dp, data):
    return ipv4(src, dst, 17, struct.pack("!HHHH", sp, dp, 8 + len(data), 0) + data)


def icmp4(src, dst, typ, code, body):
    m = struct.pack("!BBH", typ, code, 0) + body
    m = m[:2] + struct.pack("!H", csum(m)) + m[4:]
    return ipv4(src, dst, 1, m)


def ipv6(src, dst, nh, payload, hl=255):
    return struct.pack("!IHBB", 0x60000000, len(payload), nh, hl) + src + dst + payload


def sum6(src, dst, nh, payload):
    return csum(src + dst + struct.pack("!I3xB", len(payload), nh) + payload)


def icmp6(src, dst, typ, code, body):
    m = struct.pack("!BBH", typ, code, 0) + body
    m = m[:2] + struct.pack("!H", sum6(src, dst, 58, m)) + m[4:]
    return ipv6(src, dst, 58, m)


def udp6(src, dst, sp, dp, data):
    u = struct.pack("!HHHH", sp, dp, 8 + len(data), 0) + data
    u = u[:6] + struct.pack("!H", sum6(src, dst, 17, u) or 0xFFFF) + u[8:]
    return ipv6(src, dst, 17, u, 64)


def mark_opt(m):
    # An unassigned ND option type (250): receivers skip it, the sniffer finds it.
    body = m.encode()
    n = (len(body) + 2 + 7) // 8 * 8
    return struct.pack("!BB", 250, n // 8) + body + b"\0" * (n - 2 - len(body))


def arp(op, sha, spa, tha, tpa):
    return struct.pack("!HHBBH", 1, 0x0800, 6, 4, op) + sha + spa + tha + tpa


BCAST = b"\xff" * 6
ALL_NODES = "ff02::1"
ALL_NODES_MAC = bytes.fromhex("333300000001")


def frame(kind, a):
    m = a.get("mark", "WMK00").encode()
    me, bmac, gwmac = mac(a["me_mac"]), mac(a.get("b_mac", "00" * 6)), mac(a.get("gw_mac", "00" * 6))
    if kind == "udp4":  # src/dst IPv4, src MAC given or own, to dst MAC
        src_mac = mac(a["src_mac"]) if "src_mac" in a else me
        p = udp4(ip4(a["src"]), ip4(a["dst"]), 40000, int(a["port"]), m)
        return eth(mac(a["dst_mac"]), src_mac, 0x0800, p)
    if kind == "arp_reply":  # "spa is at sha", to the gateway
        p = arp(2, me, ip4(a["spa"]), gwmac, ip4(a["gw"])) + m
        return eth(gwmac, me, 0x0806, p)
    if kind == "garp":  # gratuitous request for spa, broadcast
        p = arp(1, me, ip4(a["spa"]), b"\0" * 6, ip4(a["spa"])) + m
        return eth(BCAST, me, 0x0806, p)
    if kind == "icmp_redirect":  # to B: "use me as the gateway for 10.0.0.0"
        inner = ipv4(ip4(a["b"]), ip4("192.0.2.1"), 17, b"\0" * 8)
        p = icmp4(ip4(a["src"]), ip4(a["b"]), 5, 1, ip4(a["src"]) + inner + m)
        return eth(bmac, me, 0x0800, p)
    if kind == "dhcp_offer":
        body = struct.pack("!BBBB", 2, 1, 6, 0) + b"\x12\x34\x56\x78" + b"\0" * 8 + ip4(a["b"]) + b"\0" * 8 + m
        return eth(BCAST, me, 0x0800, udp4(ip4(a["src"]), ip4("255.255.255.255"), 67, 68, body))
    if kind == "dhcp6_advertise":
        body = b"\x02\x12\x34\x56" + m
        return eth(bmac, me, 0x86DD, udp6(ip6(a["src6"]), ip6(a["b6"]), 547, 546, body))
    if kind == "ra":  # default router + prefix to all nodes
        prefix = ip6(a["prefix"])
        body = struct.pack("!BBHII", 64, 0, 1800, 0, 0)
        body += struct.pack("!BB6s", 1, 1, me)
        body += struct.pack("!BBBBIII16s", 3, 4, 64, 0xC0, 86400, 14400, 0, prefix)
        body += mark_opt(m.decode())
        return eth(ALL_NODES_MAC, me, 0x86DD, icmp6(ip6(a["src6"]), ip6(ALL_NODES), 134, 0, body))
    if kind == "icmp6_redirect":  # to B: "2001:db8::1 is reached through me"
        body = b"\0" * 4 + ip6(a["src6"]) + ip6("2001:db8::1") + mark_opt(m.decode())
        return eth(bmac, me, 0x86DD, icmp6(ip6(a["src6"]), ip6(a["b6"]), 137, 0, body))
    if kind == "na":  # unsolicited router + override: "target is at my MAC"
        # (The router flag keeps an earlier advertisement's default route in place.)
        body = struct.pack("!I", 0xA0000000) + ip6(a["target"]) + struct.pack("!BB6s", 2, 1, me)
        body += mark_opt(m.decode())
        return eth(ALL_NODES_MAC, me, 0x86DD, icmp6(ip6(a["src6"]), ip6(ALL_NODES), 136, 0, body))
    if kind == "dad_ns":  # duplicate address detection for target, from ::
        target = ip6(a["target"])
        group = ip6("ff02::1:ff00:0")[:13] + target[13:]
        body = b"\0" * 4 + target + mark_opt(m.decode())
        dst_mac = b"\x33\x33\xff" + target[13:]
        return eth(dst_mac, me, 0x86DD, icmp6(ip6("::"), group, 135, 0, body))
    if kind == "udp6":
        return eth(bmac, me, 0x86DD, udp6(ip6(a["src6"]), ip6(a["b6"]), 40000, 9, m))
    if kind == "vlan":  # an 802.1Q frame carrying IPv4 from the gateway's address
        p = struct.pack("!HH", 5, 0x0800) + udp4(ip4(a["src"]), ip4(a["b"]), 40000, 9, m)
        return eth(bmac, me, 0x8100, p)
    raise SystemExit("unknown kind " + kind)


def main():
    cmd = sys.argv[1]
    if cmd == "sniff":
        s = socket.socket(socket.AF_PACKET, socket.SOCK_RAW, socket.htons(3))
        s.bind(("eth0", 0))
        s.settimeout(0.2)
        print("ready", flush=True)
        seen = set()
        end = time.time() + float(sys.argv[2])
        while time.time() < end and "WMKzz" not in seen:
            try:
                f = s.recv(65535)
            except socket.timeout:
                continue
            for mk in re.findall(rb"WMK[a-z0-9]{2}", f):
                seen.add(mk.decode())
        print("seen", " ".join(sorted(seen)), flush=True)
    elif cmd == "send":
        a = dict(kv.split("=", 1) for kv in sys.argv[3:])
        s = socket.socket(socket.AF_PACKET, socket.SOCK_RAW)
        s.bind(("eth0", 0))
        # The bound packet socket's own address is eth0's MAC (the zone's /sys may
        # show another namespace's devices).
        a["me_mac"] = s.getsockname()[4].hex()
        s.send(frame(sys.argv[2], a))
        print("sent", sys.argv[2])
    elif cmd == "mac":
        s = socket.socket(socket.AF_PACKET, socket.SOCK_RAW)
        s.bind(("eth0", 0))
        print(":".join("%02x" % c for c in s.getsockname()[4]))
    elif cmd == "udp":
        fam = socket.AF_INET6 if ":" in sys.argv[2] else socket.AF_INET
        s = socket.socket(fam, socket.SOCK_DGRAM)
        for _ in range(3):
            s.sendto(sys.argv[4].encode(), (sys.argv[2], int(sys.argv[3])))
            time.sleep(0.1)
        print("sent udp")
    else:
        raise SystemExit("unknown command " + cmd)


main()
