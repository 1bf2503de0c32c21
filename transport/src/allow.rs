//! `--auth-allow`: the client networks a server accepts connections from
//! (GlusterFS `auth.allow`), as CIDR blocks. Checked on accept, before a
//! single byte is read (TCP), or before the connection is accepted (RDMA).

use std::net::IpAddr;

/// An address block: `10.0.0.0/8`, `192.168.1.7` (a /32), `::1/128`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Cidr {
    net: IpAddr,
    bits: u8,
}

impl Cidr {
    pub fn contains(&self, ip: IpAddr) -> bool {
        // An IPv4 client reached over an IPv6 socket shows up mapped.
        let ip = match ip {
            IpAddr::V6(v6) => v6.to_ipv4_mapped().map_or(ip, IpAddr::V4),
            v4 => v4,
        };
        match (self.net, ip) {
            (IpAddr::V4(n), IpAddr::V4(a)) => prefix(&n.octets(), &a.octets(), self.bits),
            (IpAddr::V6(n), IpAddr::V6(a)) => prefix(&n.octets(), &a.octets(), self.bits),
            _ => false,
        }
    }
}

fn prefix(net: &[u8], addr: &[u8], bits: u8) -> bool {
    let (whole, rest) = ((bits / 8) as usize, bits % 8);
    if net[..whole] != addr[..whole] {
        return false;
    }
    rest == 0 || (net[whole] ^ addr[whole]) >> (8 - rest) == 0
}

impl std::str::FromStr for Cidr {
    type Err = String;
    fn from_str(s: &str) -> Result<Cidr, String> {
        let (addr, bits) = match s.trim().split_once('/') {
            Some((a, b)) => (a, Some(b)),
            None => (s.trim(), None),
        };
        let net: IpAddr = addr.parse().map_err(|_| format!("{s:?} is not an address or CIDR block (e.g. 10.0.0.0/8)"))?;
        let max = if net.is_ipv4() { 32 } else { 128 };
        let bits = match bits {
            None => max,
            Some(b) => b.parse::<u8>().ok().filter(|b| *b <= max).ok_or_else(|| format!("{s:?}: prefix length must be 0..={max}"))?,
        };
        let c = Cidr { net, bits };
        if !c.contains(net) || !host_bits_clear(&c) {
            return Err(format!("{s:?}: host bits are set below /{bits} (did you mean the network address?)"));
        }
        Ok(c)
    }
}

fn host_bits_clear(c: &Cidr) -> bool {
    let o: Vec<u8> = match c.net {
        IpAddr::V4(n) => n.octets().to_vec(),
        IpAddr::V6(n) => n.octets().to_vec(),
    };
    (0..o.len() * 8).filter(|i| *i >= c.bits as usize).all(|i| o[i / 8] & (0x80 >> (i % 8)) == 0)
}

/// Whether `list` lets `ip` in (an empty list lets everyone in).
pub fn allows(list: &[Cidr], ip: IpAddr) -> bool {
    list.is_empty() || list.iter().any(|c| c.contains(ip))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn blocks_parse_and_match() {
        let c: Cidr = "10.1.0.0/16".parse().unwrap();
        assert!(c.contains("10.1.200.3".parse().unwrap()));
        assert!(!c.contains("10.2.0.1".parse().unwrap()));
        assert!(c.contains("::ffff:10.1.0.9".parse().unwrap()), "v4-mapped v6");
        let one: Cidr = "127.0.0.1".parse().unwrap();
        assert!(one.contains("127.0.0.1".parse().unwrap()) && !one.contains("127.0.0.2".parse().unwrap()));
        let odd: Cidr = "192.168.4.0/22".parse().unwrap();
        assert!(odd.contains("192.168.7.255".parse().unwrap()) && !odd.contains("192.168.8.0".parse().unwrap()));
        let v6: Cidr = "fd00::/8".parse().unwrap();
        assert!(v6.contains("fd12::1".parse().unwrap()) && !v6.contains("fe80::1".parse().unwrap()));
        assert!("0.0.0.0/0".parse::<Cidr>().unwrap().contains("8.8.8.8".parse().unwrap()));
        for bad in ["10.0.0.1/8", "10.0.0.0/33", "host", "10.0.0.0/x", ""] {
            assert!(bad.parse::<Cidr>().is_err(), "{bad} accepted");
        }
        assert!(allows(&[], "1.2.3.4".parse().unwrap()));
        assert!(!allows(&[c], "1.2.3.4".parse().unwrap()));
    }
}
