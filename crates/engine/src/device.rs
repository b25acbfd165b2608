//! Which device runs a model: `auto`, `cpu`, `gpu`, `gpu:N` or `gpu:NAME`.
//!
//! Parsing lives here, outside the GPU backend, so every build understands the flag;
//! a build without the `gpu` feature answers a GPU request with an error.

use std::fmt;
use std::str::FromStr;

/// Where a model's forward pass runs.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub enum DeviceChoice {
    /// A real (hardware) GPU when one is present, else the CPU; never a software one.
    Auto,
    /// The CPU engine.
    #[default]
    Cpu,
    /// A GPU, or an error when there is none.
    Gpu(AdapterPick),
}

/// Which GPU adapter `gpu…` means.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum AdapterPick {
    /// The first hardware adapter (`gpu`).
    First,
    /// The `N`th hardware adapter, from 0 (`gpu:N`).
    Index(usize),
    /// The first adapter, software ones included, whose name contains this text,
    /// case-insensitively (`gpu:NAME`, e.g. `gpu:llvmpipe`).
    Name(String),
}

/// A `-device` value that is none of the accepted forms.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
#[error("device {0:?} is not one of auto, cpu, gpu, gpu:N or gpu:NAME")]
pub struct BadDeviceChoice(String);

impl FromStr for DeviceChoice {
    type Err = BadDeviceChoice;

    fn from_str(s: &str) -> Result<Self, Self::Err> {
        let bad = || BadDeviceChoice(s.to_string());
        Ok(match s.trim().to_ascii_lowercase().as_str() {
            "auto" => DeviceChoice::Auto,
            "cpu" => DeviceChoice::Cpu,
            "gpu" => DeviceChoice::Gpu(AdapterPick::First),
            other => {
                let rest = other.strip_prefix("gpu:").ok_or_else(bad)?;
                if rest.is_empty() {
                    return Err(bad());
                }
                match rest.parse::<usize>() {
                    Ok(n) => DeviceChoice::Gpu(AdapterPick::Index(n)),
                    Err(_) => DeviceChoice::Gpu(AdapterPick::Name(rest.to_string())),
                }
            }
        })
    }
}

impl fmt::Display for DeviceChoice {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            DeviceChoice::Auto => f.write_str("auto"),
            DeviceChoice::Cpu => f.write_str("cpu"),
            DeviceChoice::Gpu(AdapterPick::First) => f.write_str("gpu"),
            DeviceChoice::Gpu(AdapterPick::Index(n)) => write!(f, "gpu:{n}"),
            DeviceChoice::Gpu(AdapterPick::Name(s)) => write!(f, "gpu:{s}"),
        }
    }
}

/// One GPU adapter as the system reports it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct GpuAdapter {
    pub name: String,
    /// `discrete`, `integrated`, `virtual`, `cpu` or `other`.
    pub kind: &'static str,
    /// `vulkan`, `metal` or `dx12`.
    pub backend: &'static str,
    /// A software rasterizer (lavapipe, WARP, SwiftShader): chosen only by name.
    pub software: bool,
}

impl fmt::Display for GpuAdapter {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}:{} ({})", self.backend, self.name, self.kind)
    }
}

/// The adapter `pick` names among `adapters` (in the system's order), if any.
pub(crate) fn pick_adapter(adapters: &[GpuAdapter], pick: &AdapterPick) -> Option<usize> {
    let mut hardware = adapters
        .iter()
        .enumerate()
        .filter(|(_, a)| !a.software)
        .map(|(i, _)| i);
    match pick {
        AdapterPick::First => hardware.next(),
        AdapterPick::Index(n) => hardware.nth(*n),
        AdapterPick::Name(part) => {
            let part = part.to_lowercase();
            adapters
                .iter()
                .position(|a| a.name.to_lowercase().contains(&part))
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn choices_parse_and_print_back() {
        for s in ["auto", "cpu", "gpu", "gpu:1", "gpu:llvmpipe"] {
            assert_eq!(s.parse::<DeviceChoice>().unwrap().to_string(), s);
        }
        assert_eq!(
            "GPU:LLVMpipe".parse::<DeviceChoice>().unwrap(),
            DeviceChoice::Gpu(AdapterPick::Name("llvmpipe".into()))
        );
        for bad in ["", "gpu:", "tpu", "cpu:0"] {
            assert!(bad.parse::<DeviceChoice>().is_err(), "{bad:?}");
        }
    }

    #[test]
    fn software_adapters_are_picked_only_by_name() {
        let a = |name: &str, software| GpuAdapter {
            name: name.into(),
            kind: if software { "cpu" } else { "discrete" },
            backend: "vulkan",
            software,
        };
        let soft_only = [a("llvmpipe (LLVM 15)", true)];
        assert_eq!(pick_adapter(&soft_only, &AdapterPick::First), None);
        assert_eq!(pick_adapter(&soft_only, &AdapterPick::Index(0)), None);
        let by_name = AdapterPick::Name("LLVMPIPE".into());
        assert_eq!(pick_adapter(&soft_only, &by_name), Some(0));
        let mixed = [a("llvmpipe", true), a("RTX A", false), a("RTX B", false)];
        assert_eq!(pick_adapter(&mixed, &AdapterPick::First), Some(1));
        assert_eq!(pick_adapter(&mixed, &AdapterPick::Index(1)), Some(2));
        assert_eq!(pick_adapter(&mixed, &AdapterPick::Index(2)), None);
        assert_eq!(
            pick_adapter(&mixed, &AdapterPick::Name("b".into())),
            Some(2)
        );
    }
}
