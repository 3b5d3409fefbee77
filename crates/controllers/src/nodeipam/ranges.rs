//! The IPv4 ranges of dual-stack mode: `--cluster-cidr` cut into
//! `/--node-cidr-mask-size` ranges, one per node (upstream's `cidrset`).

use std::collections::BTreeSet;
use std::net::Ipv4Addr;

use ipnet::Ipv4Net;

/// Upstream's bound on how many ranges one cluster CIDR is cut into (2^16).
const MAX_SPLIT_BITS: u8 = 16;

/// Which ranges of the cluster CIDR are taken.
#[derive(Debug)]
pub(crate) struct Ipv4Ranges {
    cluster: Ipv4Net,
    mask: u8,
    used: BTreeSet<u32>,
    next: u32,
}

impl Ipv4Ranges {
    /// Ranges of `/mask` in `cluster`.
    ///
    /// # Errors
    /// When `mask` is shorter than the cluster's prefix, longer than 32, or
    /// cuts it into more than 2^16 ranges.
    pub(crate) fn new(cluster: Ipv4Net, mask: u8) -> Result<Self, String> {
        check(cluster, mask)?;
        Ok(Self {
            cluster: cluster.trunc(),
            mask,
            used: BTreeSet::new(),
            next: 0,
        })
    }

    fn count(&self) -> u32 {
        1u32 << (self.mask - self.cluster.prefix_len())
    }

    fn index_of(&self, net: Ipv4Net) -> Option<u32> {
        if net.prefix_len() != self.mask || !self.cluster.contains(&net) {
            return None;
        }
        let offset = u32::from(net.network()) - u32::from(self.cluster.network());
        Some(offset >> (32 - u32::from(self.mask)))
    }

    fn range(&self, index: u32) -> Option<Ipv4Net> {
        let step = 1u64 << (32 - u32::from(self.mask));
        let start = u64::from(u32::from(self.cluster.network())) + u64::from(index) * step;
        let start = u32::try_from(start).ok()?;
        Ipv4Net::new(Ipv4Addr::from(start), self.mask).ok()
    }

    /// Marks `net` as taken (a node already has it); false when it is not
    /// one of these ranges.
    pub(crate) fn occupy(&mut self, net: Ipv4Net) -> bool {
        match self.index_of(net) {
            Some(index) => {
                self.used.insert(index);
                true
            }
            None => false,
        }
    }

    /// Gives `net` back.
    pub(crate) fn release(&mut self, net: Ipv4Net) {
        if let Some(index) = self.index_of(net) {
            self.used.remove(&index);
        }
    }

    /// The next free range, round-robin as upstream, or `None` when every
    /// range is taken.
    pub(crate) fn allocate(&mut self) -> Option<Ipv4Net> {
        let count = self.count();
        for step in 0..count {
            let index = (self.next + step) % count;
            if self.used.insert(index) {
                self.next = (index + 1) % count;
                return self.range(index);
            }
        }
        None
    }
}

/// Whether `--node-cidr-mask-size` fits `--cluster-cidr`, as upstream's
/// `NewCIDRSet` checks.
///
/// # Errors
/// One line naming the flag.
pub(crate) fn check(cluster: Ipv4Net, mask: u8) -> Result<(), String> {
    if mask > 32 || mask < cluster.prefix_len() {
        return Err(format!(
            "--node-cidr-mask-size={mask}: must be between the --cluster-cidr prefix length ({}) and 32",
            cluster.prefix_len()
        ));
    }
    if mask - cluster.prefix_len() > MAX_SPLIT_BITS {
        return Err(format!(
            "--node-cidr-mask-size={mask}: cuts --cluster-cidr {cluster} into more than 2^{MAX_SPLIT_BITS} ranges"
        ));
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn net(s: &str) -> Ipv4Net {
        s.parse().expect("a CIDR")
    }

    #[test]
    fn ranges_are_handed_out_in_order_skipping_occupied_ones() {
        let mut ranges = Ipv4Ranges::new(net("10.0.0.0/22"), 24).expect("fits");
        assert!(ranges.occupy(net("10.0.1.0/24")));
        assert_eq!(ranges.allocate(), Some(net("10.0.0.0/24")));
        assert_eq!(ranges.allocate(), Some(net("10.0.2.0/24")));
        assert_eq!(ranges.allocate(), Some(net("10.0.3.0/24")));
        assert_eq!(ranges.allocate(), None, "all four are taken");
        ranges.release(net("10.0.2.0/24"));
        assert_eq!(ranges.allocate(), Some(net("10.0.2.0/24")));
    }

    #[test]
    fn ranges_outside_the_cluster_cidr_are_not_occupied() {
        let mut ranges = Ipv4Ranges::new(net("10.0.0.0/16"), 24).expect("fits");
        assert!(!ranges.occupy(net("10.1.0.0/24")));
        assert!(!ranges.occupy(net("10.0.0.0/25")));
    }

    #[test]
    fn masks_that_do_not_fit_are_refused() {
        assert!(check(net("10.0.0.0/16"), 8).is_err());
        assert!(check(net("10.0.0.0/8"), 28).is_err());
        assert!(check(net("10.0.0.0/16"), 33).is_err());
        assert!(check(net("10.0.0.0/16"), 24).is_ok());
    }
}
