//! The shader registry: owns every WGSL source (`shaders/`, compiled in), the bind group layout
//! each kernel family expects, and the compute pipelines, built on first use and cached.
//!
//! Must not know what the kernels compute: the ranker and the kernel runners bind buffers and
//! dispatch; this module only hands out pipelines and layouts.

use std::collections::HashMap;
use std::sync::Mutex;

/// Prepended to every family: the shared structs and helpers.
pub const COMMON: &str = include_str!("../../shaders/common.wgsl");

/// How a kernel family binds one slot of group 0.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Slot {
    /// A uniform buffer.
    Uniform,
    /// A read-only storage buffer.
    Read,
    /// A read-write storage buffer.
    ReadWrite,
}

/// A file of `shaders/`: a family of kernels sharing one bind group layout.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Family {
    /// Dense similarity and the lexical blend.
    Similarity,
    /// Pull propagation (SpMM).
    Propagate,
    /// Radix top-k selection.
    Select,
    /// Anchor seeding; inhibition fused with the sigmoid.
    Activation,
    /// Hybrid score and the output record.
    Score,
    /// PageRank power iteration.
    PageRank,
    /// all-MiniLM-L6-v2's forward (`gpu::bert`); not prefixed with `common.wgsl`.
    Bert,
    /// The learned relevance's forward (`gpu::sage`); not prefixed with `common.wgsl`.
    Sage,
}

use Slot::{Read, ReadWrite, Uniform};

impl Family {
    /// Every family.
    pub const ALL: [Family; 8] = [
        Family::Similarity,
        Family::Propagate,
        Family::Select,
        Family::Activation,
        Family::Score,
        Family::PageRank,
        Family::Bert,
        Family::Sage,
    ];

    /// The file name under `shaders/`.
    pub fn file(self) -> &'static str {
        match self {
            Family::Similarity => "similarity.wgsl",
            Family::Propagate => "propagate.wgsl",
            Family::Select => "select.wgsl",
            Family::Activation => "activation.wgsl",
            Family::Score => "score.wgsl",
            Family::PageRank => "pagerank.wgsl",
            Family::Bert => "bert.wgsl",
            Family::Sage => "sage.wgsl",
        }
    }

    fn body(self) -> &'static str {
        match self {
            Family::Similarity => include_str!("../../shaders/similarity.wgsl"),
            Family::Propagate => include_str!("../../shaders/propagate.wgsl"),
            Family::Select => include_str!("../../shaders/select.wgsl"),
            Family::Activation => include_str!("../../shaders/activation.wgsl"),
            Family::Score => include_str!("../../shaders/score.wgsl"),
            Family::PageRank => include_str!("../../shaders/pagerank.wgsl"),
            Family::Bert => include_str!("../../shaders/bert.wgsl"),
            Family::Sage => include_str!("../../shaders/sage.wgsl"),
        }
    }

    /// The complete WGSL source: `common.wgsl` followed by the family's file (the ranking's
    /// families; the models' files stand alone).
    pub fn source(self) -> String {
        match self {
            Family::Bert | Family::Sage => self.body().to_string(),
            _ => format!("{COMMON}\n{}", self.body()),
        }
    }

    /// Slot kinds of group 0, by binding number.
    pub fn slots(self) -> &'static [Slot] {
        match self {
            Family::Similarity => &[Uniform, Read, Read, Read, Read, Read, Read, ReadWrite, ReadWrite, Read],
            Family::Propagate => &[Uniform, Read, Read, Read, Read, Read, Read, ReadWrite],
            Family::Select => &[Uniform, Read, Read, Read, ReadWrite, ReadWrite, ReadWrite, Uniform, ReadWrite],
            Family::Activation => &[Uniform, Read, Read, Read, Read, ReadWrite, Read, Read, Read, ReadWrite],
            Family::Score => {
                &[Uniform, Read, Read, Read, Read, Read, ReadWrite, Read, Read, Read, Read, Read, ReadWrite]
            }
            Family::PageRank => &[Uniform, Read, Read, Read, Read, Read, Read, Read, Read, ReadWrite, ReadWrite],
            Family::Bert | Family::Sage => &[Uniform, Read, Read, Read, Read, ReadWrite],
        }
    }

    /// Its entry points.
    pub fn entry_points(self) -> &'static [&'static str] {
        match self {
            Family::Similarity => &["dense_scan", "lexical_blend"],
            Family::Propagate => &["propagate"],
            Family::Select => &["select_init", "select_histogram", "select_choose", "select_gather", "select_sort"],
            Family::Activation => &["seed_clear", "seed_anchors", "inhibit_sigmoid"],
            Family::Score => &["hybrid", "walk"],
            Family::PageRank => &["pagerank_dangling", "pagerank_step"],
            Family::Bert => &["embed_tokens", "add_norm", "linear", "attention", "pool"],
            Family::Sage => &["sage_layer"],
        }
    }
}

struct Built {
    layout: wgpu::BindGroupLayout,
    pipeline_layout: wgpu::PipelineLayout,
    module: wgpu::ShaderModule,
}

/// Builds each family's module and layout once, and each pipeline on first use.
pub struct Registry {
    families: HashMap<Family, Built>,
    pipelines: Mutex<HashMap<(Family, &'static str), wgpu::ComputePipeline>>,
}

impl std::fmt::Debug for Registry {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Registry").field("families", &self.families.len()).finish()
    }
}

impl Registry {
    /// Compiles every family's module on `device`.
    pub fn new(device: &wgpu::Device) -> Registry {
        let families = Family::ALL
            .into_iter()
            .map(|family| {
                let entries: Vec<wgpu::BindGroupLayoutEntry> = family
                    .slots()
                    .iter()
                    .enumerate()
                    .map(|(binding, slot)| wgpu::BindGroupLayoutEntry {
                        binding: binding as u32,
                        visibility: wgpu::ShaderStages::COMPUTE,
                        ty: wgpu::BindingType::Buffer {
                            ty: match slot {
                                Slot::Uniform => wgpu::BufferBindingType::Uniform,
                                Slot::Read => wgpu::BufferBindingType::Storage { read_only: true },
                                Slot::ReadWrite => wgpu::BufferBindingType::Storage { read_only: false },
                            },
                            has_dynamic_offset: false,
                            min_binding_size: None,
                        },
                        count: None,
                    })
                    .collect();
                let layout = device.create_bind_group_layout(&wgpu::BindGroupLayoutDescriptor {
                    label: Some(family.file()),
                    entries: &entries,
                });
                let pipeline_layout = device.create_pipeline_layout(&wgpu::PipelineLayoutDescriptor {
                    label: Some(family.file()),
                    bind_group_layouts: &[Some(&layout)],
                    immediate_size: 0,
                });
                let module = device.create_shader_module(wgpu::ShaderModuleDescriptor {
                    label: Some(family.file()),
                    source: wgpu::ShaderSource::Wgsl(family.source().into()),
                });
                (family, Built { layout, pipeline_layout, module })
            })
            .collect();
        Registry { families, pipelines: Mutex::new(HashMap::new()) }
    }

    /// The bind group layout of a family.
    pub fn layout(&self, family: Family) -> &wgpu::BindGroupLayout {
        &self.families[&family].layout
    }

    /// The pipeline of one entry point, built on first use.
    pub fn pipeline(&self, device: &wgpu::Device, family: Family, entry: &'static str) -> wgpu::ComputePipeline {
        let mut cache = self.pipelines.lock().unwrap_or_else(|e| e.into_inner());
        cache
            .entry((family, entry))
            .or_insert_with(|| {
                let built = &self.families[&family];
                device.create_compute_pipeline(&wgpu::ComputePipelineDescriptor {
                    label: Some(entry),
                    layout: Some(&built.pipeline_layout),
                    module: &built.module,
                    entry_point: Some(entry),
                    compilation_options: Default::default(),
                    cache: None,
                })
            })
            .clone()
    }

    /// A bind group of `family` over `buffers`, one per slot in binding order.
    pub fn bind(&self, device: &wgpu::Device, family: Family, buffers: &[&wgpu::Buffer]) -> wgpu::BindGroup {
        let entries: Vec<wgpu::BindGroupEntry> = buffers
            .iter()
            .enumerate()
            .map(|(i, b)| wgpu::BindGroupEntry { binding: i as u32, resource: b.as_entire_binding() })
            .collect();
        device.create_bind_group(&wgpu::BindGroupDescriptor {
            label: Some(family.file()),
            layout: self.layout(family),
            entries: &entries,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::gpu::layout::{BertParams, GraphInfo, Params, SageParams, Segment, SelectParams};

    fn module(family: Family) -> naga::Module {
        let source = family.source();
        let module = naga::front::wgsl::parse_str(&source)
            .unwrap_or_else(|e| panic!("{}: {}", family.file(), e.emit_to_string(&source)));
        naga::valid::Validator::new(naga::valid::ValidationFlags::all(), naga::valid::Capabilities::empty())
            .validate(&module)
            .unwrap_or_else(|e| panic!("{}: {}", family.file(), e.emit_to_string(&source)));
        module
    }

    #[test]
    fn every_shader_passes_naga_validation_and_declares_its_slots() {
        for family in Family::ALL {
            let m = module(family);
            let mut slots: Vec<(u32, Slot)> = m
                .global_variables
                .iter()
                .filter_map(|(_, v)| {
                    let b = v.binding.as_ref()?;
                    assert_eq!(b.group, 0, "{}: group {}", family.file(), b.group);
                    let slot = match v.space {
                        naga::AddressSpace::Uniform => Slot::Uniform,
                        naga::AddressSpace::Storage { access } if access.contains(naga::StorageAccess::STORE) => {
                            Slot::ReadWrite
                        }
                        naga::AddressSpace::Storage { .. } => Slot::Read,
                        other => panic!("{}: binding in {other:?}", family.file()),
                    };
                    Some((b.binding, slot))
                })
                .collect();
            slots.sort_by_key(|s| s.0);
            let declared: Vec<(u32, Slot)> = family.slots().iter().enumerate().map(|(i, s)| (i as u32, *s)).collect();
            assert_eq!(slots, declared, "{}: bindings differ from Family::slots", family.file());
            let entries: Vec<&str> = m.entry_points.iter().map(|e| e.name.as_str()).collect();
            assert_eq!(entries, family.entry_points(), "{}: entry points", family.file());
        }
    }

    #[test]
    fn shared_structs_have_the_wgsl_size() {
        let sizes = |family: Family| -> HashMap<String, u32> {
            module(family)
                .types
                .iter()
                .filter_map(|(_, t)| match (&t.name, &t.inner) {
                    (Some(name), naga::TypeInner::Struct { span, .. }) => Some((name.clone(), *span)),
                    _ => None,
                })
                .collect()
        };
        let common = sizes(Family::Select);
        for (name, rust) in [
            ("Params", size_of::<Params>()),
            ("Segment", size_of::<Segment>()),
            ("GraphInfo", size_of::<GraphInfo>()),
            ("SelectParams", size_of::<SelectParams>()),
            ("SelectState", crate::gpu::layout::SELECT_STATE_WORDS as usize * 4),
        ] {
            assert_eq!(common.get(name).copied(), Some(rust as u32), "{name}");
        }
        let bert = sizes(Family::Bert);
        assert_eq!(bert.get("BertParams").copied(), Some(size_of::<BertParams>() as u32), "BertParams");
        let sage = sizes(Family::Sage);
        assert_eq!(sage.get("SageParams").copied(), Some(size_of::<SageParams>() as u32), "SageParams");
    }

    /// The WGSL constants the host sizes its dispatches by are the ones `layout` names.
    #[test]
    fn host_constants_are_the_shaders() {
        use crate::gpu::layout::*;
        let constant = |family: Family, name: &str| -> u64 {
            let m = module(family);
            let (_, c) = m
                .constants
                .iter()
                .find(|(_, c)| c.name.as_deref() == Some(name))
                .unwrap_or_else(|| panic!("{}: no constant {name}", family.file()));
            match m.global_expressions[c.init] {
                naga::Expression::Literal(naga::Literal::U32(v)) => u64::from(v),
                ref other => panic!("{}: {name} is {other:?}", family.file()),
            }
        };
        for (family, name, host) in [
            (Family::Bert, "ROW_WG", BERT_ROW_WG as u64),
            (Family::Bert, "MAX_COLS", BERT_ROW_COLUMNS as u64),
            (Family::Bert, "TILE", u64::from(BERT_TILE)),
            (Family::Bert, "MAX_PIECES", BERT_MAX_PIECES as u64),
            (Family::Bert, "ATT_WG", BERT_ATTENTION_WG as u64),
            (Family::Sage, "WG", SAGE_WG as u64),
            (Family::Sage, "NODES", SAGE_NODES as u64),
            (Family::Sage, "HEAD", u64::from(SAGE_HEAD)),
        ] {
            assert_eq!(constant(family, name), host, "{}: {name}", family.file());
        }
    }
}
