//! Adapter selection: the wgpu instance, adapter, device and queue a [`crate::GpuProgram`] runs on.

use std::fmt;
use std::sync::{Arc, OnceLock};

use crate::shaders::Pipelines;

/// Which adapter to use. The runners' `--device cpu` is handled by the caller (the CPU
/// reference interpreter); everything else lands here.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum DeviceChoice {
    /// The best adapter: a discrete or integrated GPU if there is one, else any (e.g. a CPU
    /// Vulkan implementation such as lavapipe).
    Auto,
    /// A hardware GPU only (discrete, integrated or virtual); CPU adapters are refused.
    Gpu,
    /// The best adapter whose name contains this text, or whose backend is this word (`vulkan`,
    /// `metal`, `dx12`), case-insensitive.
    Named(String),
}

impl DeviceChoice {
    /// Parses a runner's `--device` value (`auto`, `gpu`, or an adapter name); `cpu` is the
    /// caller's business and is returned as `None`.
    pub fn parse(s: &str) -> Option<DeviceChoice> {
        match s {
            "cpu" => None,
            "auto" => Some(DeviceChoice::Auto),
            "gpu" => Some(DeviceChoice::Gpu),
            name => Some(DeviceChoice::Named(name.to_string())),
        }
    }
}

/// One adapter, for diagnostics (`--list-devices`).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct AdapterSummary {
    pub name: String,
    pub backend: String,
    pub device_type: String,
    /// Whether the adapter offers `SHADER_F16`. Informational: f16 tensors are stored as packed
    /// halves and computed in f32, so they work on every adapter.
    pub shader_f16: bool,
}

impl fmt::Display for AdapterSummary {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{} ({}, {}{})", self.name, self.backend, self.device_type, if self.shader_f16 { ", shader-f16" } else { "" })
    }
}

fn summary(a: &wgpu::Adapter) -> AdapterSummary {
    let info = a.get_info();
    AdapterSummary {
        name: info.name,
        backend: format!("{:?}", info.backend),
        device_type: format!("{:?}", info.device_type),
        shader_f16: a.features().contains(wgpu::Features::SHADER_F16),
    }
}

/// The wgpu instance, and the backends it tries (compiled in, and allowed by `WGPU_BACKEND`)
/// for the error message when it finds nothing.
fn instance() -> Result<(wgpu::Instance, String), String> {
    let compiled = wgpu::Instance::enabled_backend_features();
    // `Instance::new` panics when no backend is compiled in for this target; report it instead.
    if compiled.is_empty() {
        return Err("no GPU adapter found (no wgpu backend is compiled in for this target)".into());
    }
    let desc = wgpu::InstanceDescriptor::new_without_display_handle_from_env();
    let tried = desc.backends & compiled;
    let mut names: Vec<String> = tried.iter_names().map(|(n, _)| n.to_lowercase()).collect();
    if names.is_empty() {
        names.push("none".into());
    }
    let mut tried = names.join(", ");
    if let Ok(env) = std::env::var("WGPU_BACKEND") {
        tried.push_str(&format!("; WGPU_BACKEND={env}"));
    }
    Ok((wgpu::Instance::new(desc), tried))
}

/// Every adapter wgpu can see, for diagnostics.
pub fn list_adapters() -> Result<Vec<AdapterSummary>, String> {
    let (inst, _) = instance()?;
    Ok(pollster::block_on(inst.enumerate_adapters(wgpu::Backends::all())).iter().map(summary).collect())
}

/// An opened adapter: device and queue, shared by the programs built on it.
#[derive(Clone)]
pub struct GpuDevice {
    pub(crate) device: wgpu::Device,
    pub(crate) queue: wgpu::Queue,
    pub(crate) info: AdapterSummary,
    pub(crate) limits: wgpu::Limits,
    /// The compiled kernels, built by the first program on this device and shared by the rest
    /// (a model's methods, a test's many programs).
    pub(crate) pipelines: Arc<OnceLock<Result<Arc<Pipelines>, String>>>,
}

impl fmt::Debug for GpuDevice {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("GpuDevice").field("adapter", &self.info).finish()
    }
}

fn rank(a: &wgpu::Adapter) -> u8 {
    match a.get_info().device_type {
        wgpu::DeviceType::DiscreteGpu => 0,
        wgpu::DeviceType::IntegratedGpu => 1,
        wgpu::DeviceType::VirtualGpu => 2,
        wgpu::DeviceType::Other => 3,
        wgpu::DeviceType::Cpu => 4,
    }
}

impl GpuDevice {
    /// Opens the adapter `choice` selects, with the adapter's own limits (large storage
    /// buffers) and no optional features.
    pub fn new(choice: &DeviceChoice) -> Result<GpuDevice, String> {
        let (inst, tried) = instance()?;
        let mut adapters = pollster::block_on(inst.enumerate_adapters(wgpu::Backends::all()));
        if adapters.is_empty() {
            return Err(format!("no GPU adapter found (wgpu backends tried: {tried})"));
        }
        adapters.sort_by_key(rank);
        let all: Vec<String> = adapters.iter().map(|a| summary(a).to_string()).collect();
        let adapter = match choice {
            DeviceChoice::Auto => adapters.into_iter().next(),
            DeviceChoice::Gpu => adapters.into_iter().find(|a| rank(a) <= 2),
            DeviceChoice::Named(n) => {
                let n = n.to_lowercase();
                adapters.into_iter().find(|a| {
                    let info = a.get_info();
                    info.name.to_lowercase().contains(&n) || format!("{:?}", info.backend).to_lowercase() == n
                })
            }
        };
        let Some(adapter) = adapter else {
            return Err(format!("no GPU adapter matches {choice:?} (adapters: {})", all.join("; ")));
        };
        let info = summary(&adapter);
        let limits = adapter.limits();
        let desc = wgpu::DeviceDescriptor {
            label: Some("rbuild-gpu"),
            // Only what profiling can use (`GpuProgram::set_profiling`); kernels need nothing.
            required_features: adapter.features() & wgpu::Features::TIMESTAMP_QUERY,
            required_limits: limits.clone(),
            ..Default::default()
        };
        let (device, queue) = pollster::block_on(adapter.request_device(&desc))
            .map_err(|e| format!("adapter {info}: cannot open a device: {e}"))?;
        // wgpu panics on errors outside an error scope by default; every call that can fail is
        // inside one (and reported as an error String), so anything else is only logged.
        let name = info.to_string();
        device.on_uncaptured_error(Arc::new(move |e: wgpu::Error| eprintln!("warning: wgpu ({name}): {e}")));
        Ok(GpuDevice { device, queue, info, limits, pipelines: Arc::default() })
    }

    /// The opened adapter.
    pub fn adapter(&self) -> &AdapterSummary {
        &self.info
    }

    /// Every kernel compiled for this device (once; an error names the shader and adapter).
    pub(crate) fn pipelines(&self) -> Result<Arc<Pipelines>, String> {
        self.pipelines.get_or_init(|| Pipelines::compile(self).map(Arc::new)).clone()
    }
}
