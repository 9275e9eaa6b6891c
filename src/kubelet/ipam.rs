//! Pod addresses of a simulated node: its pod CIDR ([`Ipv4Cidr`], [`default_pod_cidr`])
//! and the next-fit allocator over it ([`IpAllocator`]). Pure; no IO.
//!
//! Invariant: only pod addresses are handed out (never the network, gateway or broadcast
//! address), each to one holder at a time.

use std::collections::HashSet;
use std::fmt;
use std::net::Ipv4Addr;
use std::str::FromStr;

/// An IPv4 network in CIDR notation, e.g. `10.244.7.0/24`: a node's pod address range.
#[derive(Copy, Clone, Debug, PartialEq, Eq, Hash)]
pub struct Ipv4Cidr {
    network: Ipv4Addr,
    prefix_len: u8,
}

/// Why a string is not a usable pod CIDR.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("invalid pod CIDR {input:?}: {reason}")]
pub struct ParseCidrError {
    pub input: String,
    pub reason: String,
}

impl Ipv4Cidr {
    /// Longest prefix that still leaves an address for a pod (network, gateway and
    /// broadcast addresses are never handed out).
    pub const MAX_PREFIX_LEN: u8 = 30;

    /// The network `network/prefix_len`.
    ///
    /// # Errors
    /// When the prefix is longer than [`Ipv4Cidr::MAX_PREFIX_LEN`] or `network` has
    /// host bits set.
    pub fn new(network: Ipv4Addr, prefix_len: u8) -> Result<Ipv4Cidr, String> {
        if prefix_len > Self::MAX_PREFIX_LEN {
            return Err(format!(
                "prefix length /{prefix_len} leaves no pod addresses (at most /{})",
                Self::MAX_PREFIX_LEN
            ));
        }
        let mask = u32::MAX
            .checked_shl(32 - u32::from(prefix_len))
            .unwrap_or(0);
        let bits = u32::from(network);
        if bits & !mask != 0 {
            return Err(format!(
                "host bits are set; did you mean {}/{prefix_len}?",
                Ipv4Addr::from(bits & mask)
            ));
        }
        Ok(Ipv4Cidr {
            network,
            prefix_len,
        })
    }

    /// The network address, e.g. `10.244.7.0`.
    pub fn network(&self) -> Ipv4Addr {
        self.network
    }

    pub fn prefix_len(&self) -> u8 {
        self.prefix_len
    }

    /// Addresses in the network, network and broadcast included (256 for a /24).
    fn size(&self) -> u64 {
        1u64 << (32 - u32::from(self.prefix_len))
    }

    /// The addresses pods get: all but the network, the gateway (network + 1) and the
    /// broadcast address, so `.2` to `.254` of a /24.
    pub fn pod_addresses(&self) -> u64 {
        self.size() - 3
    }

    /// Whether `ip` is one of the [`Ipv4Cidr::pod_addresses`].
    pub fn is_pod_address(&self, ip: Ipv4Addr) -> bool {
        self.offset_of(ip)
            .is_some_and(|offset| (2..self.size() - 1).contains(&offset))
    }

    /// `ip`'s distance from the network address, if it is inside the network.
    fn offset_of(&self, ip: Ipv4Addr) -> Option<u64> {
        let offset = u64::from(u32::from(ip)).checked_sub(u64::from(u32::from(self.network)))?;
        (offset < self.size()).then_some(offset)
    }

    fn at_offset(&self, offset: u64) -> Ipv4Addr {
        let offset = u32::try_from(offset).expect("offsets stay inside the network");
        Ipv4Addr::from(u32::from(self.network) + offset)
    }
}

impl fmt::Display for Ipv4Cidr {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}/{}", self.network, self.prefix_len)
    }
}

impl FromStr for Ipv4Cidr {
    type Err = ParseCidrError;

    fn from_str(input: &str) -> Result<Self, Self::Err> {
        let error = |reason: String| ParseCidrError {
            input: input.to_string(),
            reason,
        };
        let (address, prefix_len) = input
            .split_once('/')
            .ok_or_else(|| error("expected ADDRESS/PREFIX, e.g. 10.244.1.0/24".into()))?;
        let network: Ipv4Addr = address
            .parse()
            .map_err(|_| error(format!("{address:?} is not an IPv4 address")))?;
        let prefix_len: u8 = prefix_len
            .parse()
            .ok()
            .filter(|len| *len <= 32)
            .ok_or_else(|| error(format!("{prefix_len:?} is not a prefix length 0-32")))?;
        Ipv4Cidr::new(network, prefix_len).map_err(error)
    }
}

/// The pod CIDR of a node started without `--pod-cidr`: `10.244.N.0/24` with
/// `N = fnv1a32(node) % 254 + 1`.
///
/// FNV-1a rather than std's hasher because the result must not change between builds:
/// a restarted node has to find its pods' addresses inside its range. Different names
/// can collide (even odds by about 19 nodes); give nodes that share a cluster distinct
/// `--pod-cidr`s when that matters.
pub fn default_pod_cidr(node: &str) -> Ipv4Cidr {
    let mut hash: u32 = 0x811c_9dc5;
    for byte in node.bytes() {
        hash ^= u32::from(byte);
        hash = hash.wrapping_mul(0x0100_0193);
    }
    let n = u8::try_from(hash % 254 + 1).expect("1..=254 fits in u8");
    Ipv4Cidr::new(Ipv4Addr::new(10, 244, n, 0), 24).expect("a /24 with a zero host part")
}

/// Hands out the pod addresses of one CIDR, next-fit: the search resumes after the last
/// address handed out, so an address just freed is the last to be reused (as CNI's
/// host-local allocator does), which keeps a stale endpoint from pointing at a new pod.
#[derive(Debug, Clone)]
pub struct IpAllocator {
    cidr: Ipv4Cidr,
    used: HashSet<Ipv4Addr>,
    /// Offset from the network address where the next search starts.
    next: u64,
}

impl IpAllocator {
    pub fn new(cidr: Ipv4Cidr) -> IpAllocator {
        IpAllocator {
            cidr,
            used: HashSet::new(),
            next: 2,
        }
    }

    pub fn cidr(&self) -> Ipv4Cidr {
        self.cidr
    }

    /// Addresses currently handed out or reserved.
    pub fn in_use(&self) -> usize {
        self.used.len()
    }

    /// A free address, now marked used; `None` when the range is exhausted.
    pub fn allocate(&mut self) -> Option<Ipv4Addr> {
        let first = 2;
        let end = self.cidr.size() - 1; // the broadcast address
        let span = end - first;
        for step in 0..span {
            let offset = first + (self.next - first + step) % span;
            let ip = self.cidr.at_offset(offset);
            if self.used.insert(ip) {
                self.next = offset + 1;
                if self.next == end {
                    self.next = first;
                }
                return Some(ip);
            }
        }
        None
    }

    /// Marks `ip` used (an address a pod already holds). False, changing nothing, when
    /// `ip` is not a pod address of the range or is already used.
    pub fn reserve(&mut self, ip: Ipv4Addr) -> bool {
        self.cidr.is_pod_address(ip) && self.used.insert(ip)
    }

    /// Returns `ip` to the pool; false if it was not in use.
    pub fn release(&mut self, ip: Ipv4Addr) -> bool {
        self.used.remove(&ip)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[track_caller]
    fn check_parse(input: &str, expected: Result<&str, &str>) {
        match (input.parse::<Ipv4Cidr>(), expected) {
            (Ok(cidr), Ok(display)) => assert_eq!(cidr.to_string(), display),
            (Err(e), Err(part)) => {
                let message = e.to_string();
                assert!(
                    message.contains(part),
                    "{message:?} should contain {part:?}"
                );
                assert!(message.starts_with(&format!("invalid pod CIDR {input:?}")));
            }
            (got, want) => panic!("{input:?}: got {got:?}, want {want:?}"),
        }
    }

    #[test]
    fn cidr_parsing() {
        check_parse("10.244.7.0/24", Ok("10.244.7.0/24"));
        check_parse("10.0.0.0/8", Ok("10.0.0.0/8"));
        check_parse("192.168.1.4/30", Ok("192.168.1.4/30"));
        check_parse("10.244.7.5/24", Err("did you mean 10.244.7.0/24?"));
        check_parse("10.244.7.0", Err("expected ADDRESS/PREFIX"));
        check_parse("10.244.7/24", Err("not an IPv4 address"));
        check_parse("fd00::/64", Err("not an IPv4 address"));
        check_parse("10.244.7.0/33", Err("not a prefix length"));
        check_parse("10.244.7.0/x", Err("not a prefix length"));
        check_parse("10.244.7.0/31", Err("leaves no pod addresses"));
    }

    #[test]
    fn pod_addresses_skip_network_gateway_and_broadcast() {
        let cidr: Ipv4Cidr = "10.244.7.0/24".parse().unwrap();
        assert_eq!(cidr.pod_addresses(), 253);
        for (ip, expected) in [
            ("10.244.7.0", false),
            ("10.244.7.1", false),
            ("10.244.7.2", true),
            ("10.244.7.254", true),
            ("10.244.7.255", false),
            ("10.244.8.2", false),
            ("10.244.6.2", false),
        ] {
            assert_eq!(cidr.is_pod_address(ip.parse().unwrap()), expected, "{ip}");
        }
    }

    #[test]
    fn allocation_is_next_fit_over_the_whole_range() {
        let cidr: Ipv4Cidr = "10.244.7.0/24".parse().unwrap();
        let mut allocator = IpAllocator::new(cidr);
        let first: Vec<String> = (0..3)
            .map(|_| allocator.allocate().unwrap().to_string())
            .collect();
        assert_eq!(first, ["10.244.7.2", "10.244.7.3", "10.244.7.4"]);
        // A freed address is not reused while fresh ones remain.
        assert!(allocator.release("10.244.7.3".parse().unwrap()));
        assert!(!allocator.release("10.244.7.3".parse().unwrap()));
        assert_eq!(allocator.allocate().unwrap().to_string(), "10.244.7.5");
        let mut all: HashSet<Ipv4Addr> = HashSet::new();
        while let Some(ip) = allocator.allocate() {
            assert!(cidr.is_pod_address(ip), "{ip}");
            assert!(all.insert(ip), "{ip} handed out twice");
        }
        // 253 addresses, 3 of them held: the rest, the freed .3 included.
        assert_eq!(all.len(), 250);
        assert_eq!(allocator.in_use(), 253);
        assert!(all.contains(&"10.244.7.3".parse().unwrap()));
        // Wraps around to what is freed.
        allocator.release("10.244.7.100".parse().unwrap());
        assert_eq!(allocator.allocate().unwrap().to_string(), "10.244.7.100");
        assert_eq!(allocator.allocate(), None);
    }

    #[test]
    fn reserve_takes_only_free_pod_addresses_of_the_range() {
        let mut allocator = IpAllocator::new("10.244.7.0/24".parse().unwrap());
        assert!(allocator.reserve("10.244.7.2".parse().unwrap()));
        assert!(!allocator.reserve("10.244.7.2".parse().unwrap()));
        assert!(!allocator.reserve("10.244.7.1".parse().unwrap()));
        assert!(!allocator.reserve("10.244.8.9".parse().unwrap()));
        assert_eq!(allocator.allocate().unwrap().to_string(), "10.244.7.3");
    }

    #[test]
    fn smallest_range_has_one_address() {
        let mut allocator = IpAllocator::new("192.168.1.4/30".parse().unwrap());
        assert_eq!(allocator.allocate().unwrap().to_string(), "192.168.1.6");
        assert_eq!(allocator.allocate(), None);
    }

    #[test]
    fn default_cidr_is_a_stable_slash_24_of_10_244() {
        // Pinned values: a change of hash would move every restarted node's range.
        assert_eq!(default_pod_cidr("node-a").to_string(), "10.244.52.0/24");
        assert_eq!(default_pod_cidr("node-b").to_string(), "10.244.209.0/24");
        assert_eq!(default_pod_cidr("").to_string(), "10.244.132.0/24");
        for i in 0..2000 {
            let cidr = default_pod_cidr(&format!("node-{i}"));
            let [a, b, n, host] = cidr.network().octets();
            assert_eq!((a, b, host, cidr.prefix_len()), (10, 244, 0, 24));
            assert!((1..=254).contains(&n), "{cidr}");
        }
    }
}
