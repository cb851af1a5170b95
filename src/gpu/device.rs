//! One GPU device (wgpu): the adapter's choice and own limits, buffers, error scopes, and
//! submit-and-readback; the device tests run on. Must not know what a kernel computes.

use std::sync::Arc;

use super::config::AdapterDescription;
#[cfg(any(test, feature = "testing"))]
use super::config::REQUIRE_GPU_ENV;
use super::registry::Registry;
use crate::error::{Error, Result};

/// One GPU device with its queue and compiled kernels. Cheap to clone.
#[derive(Clone)]
pub struct Gpu {
    inner: Arc<Inner>,
}

struct Inner {
    device: wgpu::Device,
    queue: wgpu::Queue,
    registry: Registry,
    adapter: AdapterDescription,
    limits: wgpu::Limits,
}

impl std::fmt::Debug for Gpu {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Gpu").field("adapter", &self.inner.adapter).finish()
    }
}

impl Gpu {
    /// Opens the best adapter (high performance first; `WGPU_BACKEND` and `WGPU_ADAPTER_NAME`
    /// narrow the choice) with the largest limits it offers.
    pub fn new() -> Result<Gpu> {
        let instance = wgpu::Instance::new(wgpu::InstanceDescriptor::new_without_display_handle_from_env());
        let adapter = match pollster::block_on(wgpu::util::initialize_adapter_from_env(&instance, None)) {
            Ok(adapter) => adapter,
            Err(_) => pollster::block_on(instance.request_adapter(&wgpu::RequestAdapterOptions {
                power_preference: wgpu::PowerPreference::from_env().unwrap_or(wgpu::PowerPreference::HighPerformance),
                ..Default::default()
            }))
            .map_err(|e| Error::Gpu(format!("no usable GPU adapter: {e}")))?,
        };
        let info = adapter.get_info();
        let description = AdapterDescription {
            name: info.name.clone(),
            device_type: format!("{:?}", info.device_type),
            backend: format!("{:?}", info.backend),
            driver: format!("{} {}", info.driver, info.driver_info).trim().to_string(),
            software: info.device_type == wgpu::DeviceType::Cpu,
        };
        let limits = adapter.limits();
        let (device, queue) = pollster::block_on(adapter.request_device(&wgpu::DeviceDescriptor {
            label: Some("myelin"),
            required_features: wgpu::Features::empty(),
            required_limits: limits.clone(),
            ..Default::default()
        }))
        .map_err(|e| Error::Gpu(format!("{description}: cannot open the device: {e}")))?;
        // Errors outside a batch's scopes are logged, not fatal; a lost device fails the next
        // batch, which then runs on the CPU.
        device.on_uncaptured_error(std::sync::Arc::new(|e: wgpu::Error| tracing::error!("gpu: {e}")));
        device.set_device_lost_callback(|reason, message| tracing::error!("gpu device lost ({reason:?}): {message}"));
        let scope = device.push_error_scope(wgpu::ErrorFilter::Validation);
        let registry = Registry::new(&device);
        if let Some(e) = pollster::block_on(scope.pop()) {
            return Err(Error::Gpu(format!("{description}: the kernels do not compile: {e}")));
        }
        Ok(Gpu { inner: Arc::new(Inner { device, queue, registry, adapter: description, limits }) })
    }

    /// The device.
    pub fn device(&self) -> &wgpu::Device {
        &self.inner.device
    }

    /// Its queue.
    pub fn queue(&self) -> &wgpu::Queue {
        &self.inner.queue
    }

    /// The kernels.
    pub fn registry(&self) -> &Registry {
        &self.inner.registry
    }

    /// What the adapter is.
    pub fn adapter(&self) -> &AdapterDescription {
        &self.inner.adapter
    }

    /// The device's limits.
    pub fn limits(&self) -> &wgpu::Limits {
        &self.inner.limits
    }

    /// Largest buffer that can be bound as one storage binding, in bytes.
    pub fn max_binding(&self) -> u64 {
        self.inner.limits.max_storage_buffer_binding_size.min(self.inner.limits.max_buffer_size)
    }

    /// A storage buffer holding `data` (at least 16 bytes: bindings may not be empty).
    pub fn upload<T: bytemuck::Pod>(&self, label: &str, data: &[T]) -> Result<wgpu::Buffer> {
        let bytes: &[u8] = bytemuck::cast_slice(data);
        let buffer = self.storage(label, bytes.len() as u64)?;
        if !bytes.is_empty() {
            self.inner.queue.write_buffer(&buffer, 0, bytes);
        }
        Ok(buffer)
    }

    /// An uninitialised storage buffer of `size` bytes (at least 16).
    pub fn storage(&self, label: &str, size: u64) -> Result<wgpu::Buffer> {
        let size = size.max(16).next_multiple_of(4);
        self.check_size(label, size)?;
        Ok(self.inner.device.create_buffer(&wgpu::BufferDescriptor {
            label: Some(label),
            size,
            usage: wgpu::BufferUsages::STORAGE | wgpu::BufferUsages::COPY_DST | wgpu::BufferUsages::COPY_SRC,
            mapped_at_creation: false,
        }))
    }

    /// A uniform buffer holding `value`.
    pub fn uniform<T: bytemuck::Pod>(&self, label: &str, value: &T) -> wgpu::Buffer {
        let buffer = self.inner.device.create_buffer(&wgpu::BufferDescriptor {
            label: Some(label),
            size: std::mem::size_of::<T>() as u64,
            usage: wgpu::BufferUsages::UNIFORM | wgpu::BufferUsages::COPY_DST,
            mapped_at_creation: false,
        });
        self.inner.queue.write_buffer(&buffer, 0, bytemuck::bytes_of(value));
        buffer
    }

    fn check_size(&self, label: &str, size: u64) -> Result<()> {
        if size > self.max_binding() {
            return Err(Error::Gpu(format!(
                "{label}: {size} bytes exceed the largest storage binding of {} ({} bytes)",
                self.inner.adapter.name,
                self.max_binding()
            )));
        }
        Ok(())
    }

    /// A buffer the host can map and read, of `size` bytes.
    pub fn staging(&self, size: u64) -> wgpu::Buffer {
        self.inner.device.create_buffer(&wgpu::BufferDescriptor {
            label: Some("readback"),
            size: size.max(4).next_multiple_of(4),
            usage: wgpu::BufferUsages::MAP_READ | wgpu::BufferUsages::COPY_DST,
            mapped_at_creation: false,
        })
    }

    /// Submits `encoder` after copying `regions` (buffer, bytes) into one staging buffer (the
    /// one given when it is large enough, else a new one), waits, and returns their contents as
    /// u32 words, one vector per region. Validation and out-of-memory errors raised while
    /// encoding and running surface here.
    pub fn finish(
        &self,
        mut encoder: wgpu::CommandEncoder,
        regions: &[(&wgpu::Buffer, u64)],
        scopes: ErrorScopes,
        staging: Option<&wgpu::Buffer>,
    ) -> Result<Vec<Vec<u32>>> {
        let total: u64 = regions.iter().map(|(_, s)| s.next_multiple_of(4)).sum::<u64>().max(4);
        let staging = match staging {
            Some(b) if b.size() >= total => b.clone(),
            _ => self.staging(total),
        };
        let mut at = 0;
        for (buffer, size) in regions {
            let size = size.next_multiple_of(4);
            if size > 0 {
                encoder.copy_buffer_to_buffer(buffer, 0, &staging, at, size);
            }
            at += size;
        }
        self.inner.queue.submit([encoder.finish()]);
        let (tx, rx) = std::sync::mpsc::channel();
        staging.slice(..total).map_async(wgpu::MapMode::Read, move |r| {
            let _ = tx.send(r);
        });
        self.inner
            .device
            .poll(wgpu::PollType::wait_indefinitely())
            .map_err(|e| Error::Gpu(format!("{}: waiting for the batch: {e}", self.inner.adapter.name)))?;
        scopes.check()?;
        rx.recv()
            .map_err(|_| Error::Gpu("readback callback dropped".into()))?
            .map_err(|e| Error::Gpu(format!("{}: reading back: {e}", self.inner.adapter.name)))?;
        let view = staging
            .slice(..total)
            .get_mapped_range()
            .map_err(|e| Error::Gpu(format!("{}: mapping the readback: {e}", self.inner.adapter.name)))?;
        let words: &[u32] = bytemuck::cast_slice(&view);
        let mut out = Vec::with_capacity(regions.len());
        let mut at = 0usize;
        for (_, size) in regions {
            let n = (*size as usize).div_ceil(4);
            out.push(words[at..at + n].to_vec());
            at += n;
        }
        drop(view);
        staging.unmap();
        Ok(out)
    }

    /// Opens error scopes for out-of-memory and validation errors; [`Gpu::finish`] closes them.
    pub fn scopes(&self) -> ErrorScopes {
        let oom = self.inner.device.push_error_scope(wgpu::ErrorFilter::OutOfMemory);
        let validation = self.inner.device.push_error_scope(wgpu::ErrorFilter::Validation);
        ErrorScopes { validation: Some(validation), oom: Some(oom), name: self.inner.adapter.name.clone() }
    }

    /// A command encoder.
    pub fn encoder(&self) -> wgpu::CommandEncoder {
        self.inner.device.create_command_encoder(&wgpu::CommandEncoderDescriptor { label: Some("myelin") })
    }

    /// Times an empty submit, wait and 4-byte readback `n` times: the floor of one GPU round
    /// trip. Returns the samples in microseconds.
    pub fn round_trip_us(&self, n: usize) -> Result<Vec<f64>> {
        let buffer = self.storage("round trip", 16)?;
        let staging = self.staging(4);
        let mut samples = Vec::with_capacity(n);
        for _ in 0..n {
            let t0 = std::time::Instant::now();
            let scopes = self.scopes();
            self.finish(self.encoder(), &[(&buffer, 4)], scopes, Some(&staging))?;
            samples.push(t0.elapsed().as_secs_f64() * 1e6);
        }
        Ok(samples)
    }
}

/// Error scopes around one batch.
pub struct ErrorScopes {
    validation: Option<wgpu::ErrorScopeGuard>,
    oom: Option<wgpu::ErrorScopeGuard>,
    name: String,
}

impl ErrorScopes {
    fn check(mut self) -> Result<()> {
        let validation = self.validation.take().and_then(|g| pollster::block_on(g.pop()));
        let oom = self.oom.take().and_then(|g| pollster::block_on(g.pop()));
        if let Some(e) = oom.or(validation) {
            return Err(Error::Gpu(format!("{}: {e}", self.name)));
        }
        Ok(())
    }
}

/// Workgroup counts (x, z) covering `chunks` chunks within the per-dimension limit; kernels
/// number chunks `z · x_count + x` (`element` in common.wgsl).
pub fn grid(chunks: u32, max_dim: u32) -> (u32, u32) {
    let chunks = chunks.max(1);
    let x = chunks.min(max_dim);
    (x, chunks.div_ceil(x))
}

/// The device tests run on: `None` (the test skips, saying so) when there is no adapter,
/// unless `MYELIN_REQUIRE_GPU` is set, in which case a missing adapter fails the test.
#[cfg(any(test, feature = "testing"))]
pub fn test_gpu() -> Option<Gpu> {
    static GPU: std::sync::OnceLock<Option<Gpu>> = std::sync::OnceLock::new();
    GPU.get_or_init(|| match Gpu::new() {
        Ok(gpu) => {
            eprintln!("gpu tests on {}", gpu.adapter());
            Some(gpu)
        }
        Err(e) if std::env::var_os(REQUIRE_GPU_ENV).is_some() => panic!("{REQUIRE_GPU_ENV} is set: {e}"),
        Err(e) => {
            eprintln!("gpu tests skipped: {e}");
            None
        }
    })
    .clone()
}
