//! The platforms an image holds a binary for: Linux on amd64 and on arm64
//! (Graviton and the like), each a static musl binary.

/// One platform of an image.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub(crate) enum Platform {
    Amd64,
    Arm64,
}

impl Platform {
    /// Every platform, in the order an image index lists them.
    pub(crate) const ALL: [Self; 2] = [Self::Amd64, Self::Arm64];

    /// `--platform`'s default: every platform.
    pub(crate) const DEFAULT: &str = "linux/amd64,linux/arm64";

    /// The Rust target its binary is built for.
    pub(crate) const fn target(self) -> &'static str {
        match self {
            Self::Amd64 => "x86_64-unknown-linux-musl",
            Self::Arm64 => "aarch64-unknown-linux-musl",
        }
    }

    /// The OCI `architecture`.
    pub(crate) fn architecture(self) -> &'static str {
        match self {
            Self::Amd64 => "amd64",
            Self::Arm64 => "arm64",
        }
    }

    /// The OCI `variant`: arm64 images say `v8`, as `docker buildx` writes.
    pub(crate) fn variant(self) -> Option<&'static str> {
        match self {
            Self::Amd64 => None,
            Self::Arm64 => Some("v8"),
        }
    }

    /// `linux/amd64`, as `--platform` and `docker pull --platform` spell it.
    pub(crate) fn name(self) -> String {
        format!("linux/{}", self.architecture())
    }

    /// `linux-amd64`: the directory of its archive and SBOM.
    pub(crate) fn dir_name(self) -> String {
        format!("linux-{}", self.architecture())
    }

    /// Whether this machine runs its binaries itself (else under qemu).
    pub(crate) fn is_host(self) -> bool {
        match self {
            Self::Amd64 => cfg!(target_arch = "x86_64"),
            Self::Arm64 => cfg!(target_arch = "aarch64"),
        }
    }

    /// The ELF `e_machine` of its binaries.
    fn elf_machine(self) -> u16 {
        match self {
            Self::Amd64 => 62,
            Self::Arm64 => 183,
        }
    }

    /// The platform an ELF binary is built for, from its header.
    pub(crate) fn of_elf(header: &[u8]) -> Option<Self> {
        let machine = u16::from_le_bytes([*header.get(18)?, *header.get(19)?]);
        (header.starts_with(b"\x7fELF"))
            .then(|| Self::ALL.into_iter().find(|p| p.elf_machine() == machine))
            .flatten()
    }

    /// `--platform`'s parser for one platform.
    pub(crate) fn parse(value: &str) -> Result<Self, String> {
        match value.trim() {
            "linux/amd64" => Ok(Self::Amd64),
            "linux/arm64" | "linux/arm64/v8" => Ok(Self::Arm64),
            other => Err(format!(
                "unknown platform `{other}`: one of linux/amd64, linux/arm64"
            )),
        }
    }
}

/// `--platform`'s values, sorted and without repeats.
pub(crate) fn distinct(platforms: &[Platform]) -> Vec<Platform> {
    let mut list = platforms.to_vec();
    list.sort();
    list.dedup();
    list
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn platforms_parse_as_docker_spells_them() {
        assert_eq!(Platform::parse("linux/amd64"), Ok(Platform::Amd64));
        assert_eq!(Platform::parse("linux/arm64"), Ok(Platform::Arm64));
        assert_eq!(Platform::parse("linux/arm64/v8"), Ok(Platform::Arm64));
        let err = Platform::parse("linux/s390x").unwrap_err();
        assert!(
            err.contains("linux/s390x") && err.contains("linux/arm64"),
            "{err}"
        );
        let every: Vec<_> = Platform::DEFAULT
            .split(',')
            .map(|p| Platform::parse(p).unwrap())
            .collect();
        assert_eq!(every, Platform::ALL);
    }

    #[test]
    fn the_elf_header_names_the_platform() {
        let mut header = b"\x7fELF\x02\x01\x01".to_vec();
        header.resize(20, 0);
        header[18] = 183;
        assert_eq!(Platform::of_elf(&header), Some(Platform::Arm64));
        header[18] = 62;
        assert_eq!(Platform::of_elf(&header), Some(Platform::Amd64));
        header[18] = 40;
        assert_eq!(Platform::of_elf(&header), None);
        assert_eq!(Platform::of_elf(b"#!/bin/sh\n"), None);
        let this = std::fs::read(std::env::current_exe().unwrap()).unwrap();
        assert!(Platform::of_elf(&this).is_some_and(Platform::is_host));
    }

    #[test]
    fn distinct_sorts_and_drops_repeats() {
        use Platform::*;
        assert_eq!(distinct(&[Arm64, Amd64, Arm64]), vec![Amd64, Arm64]);
    }
}
