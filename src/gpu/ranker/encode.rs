//! Recording one submit's work: the bind groups over a batch's pooled buffers and the
//! dispatches of each kernel family (dense scan and lexical blend, selection, seeding,
//! propagation, inhibition and sigmoid, score and walk, PageRank), and the whole ranking step.
//! An `impl Batch` block beside `ranker.rs`, which builds the batch and reads its results.
//!
//! Must not submit, read back or decide what a result means; `ranker.rs` does not import it.

use super::{Batch, RankSettings};
use crate::gpu::layout::{HIST_CHUNK, Params, SelectParams, WG};
use crate::gpu::registry::Family;
use crate::gpu::{Gpu, grid};

impl<'c> Batch<'c> {
    fn gpu(&self) -> &Gpu {
        &self.corpus.gpu
    }

    fn run(
        &self,
        pass: &mut wgpu::ComputePass,
        family: Family,
        entry: &'static str,
        bind: &wgpu::BindGroup,
        [x, y, z]: [u32; 3],
    ) {
        let gpu = self.gpu();
        pass.set_pipeline(&gpu.registry().pipeline(gpu.device(), family, entry));
        pass.set_bind_group(0, bind, &[]);
        pass.dispatch_workgroups(x, y, z);
    }

    /// One workgroup per WG elements of every query.
    fn per_element(
        &self,
        pass: &mut wgpu::ComputePass,
        family: Family,
        entry: &'static str,
        bind: &wgpu::BindGroup,
        n: u32,
    ) {
        let (x, z) = grid(n.div_ceil(WG), self.gpu().limits().max_compute_workgroups_per_dimension);
        self.run(pass, family, entry, bind, [x, self.segments.len() as u32, z]);
    }

    fn per_query(&self, pass: &mut wgpu::ComputePass, family: Family, entry: &'static str, bind: &wgpu::BindGroup) {
        self.run(pass, family, entry, bind, [1, self.segments.len() as u32, 1]);
    }

    fn bind(&self, family: Family, buffers: &[&wgpu::Buffer]) -> wgpu::BindGroup {
        self.pool.borrow_mut().bind(self.gpu(), family, buffers)
    }

    /// A pooled uniform holding `value`.
    fn uniform<T: bytemuck::Pod>(&self, name: String, value: &T) -> wgpu::Buffer {
        self.pool.borrow_mut().uniform(self.gpu(), name, value)
    }

    /// The pooled readback buffer, at least `size` bytes.
    pub(crate) fn staging(&self, size: u64) -> wgpu::Buffer {
        self.pool.borrow_mut().staging(self.gpu(), size)
    }

    pub(crate) fn encode_similarity(&self, pass: &mut wgpu::ComputePass) {
        let c = self.corpus;
        let bind = self.bind(
            Family::Similarity,
            &[
                &self.params_buf,
                &c.graphs.buffer,
                &self.segments_buf,
                &c.embeddings.buffer,
                &self.queries,
                &self.tiles_buf,
                &self.lexical,
                &self.dense,
                &self.sim,
                &c.turns.buffer,
            ],
        );
        let (x, z) = grid(self.n_max.div_ceil(WG), self.gpu().limits().max_compute_workgroups_per_dimension);
        self.run(pass, Family::Similarity, "dense_scan", &bind, [x, self.tiles, z]);
        if self.lex_max_n > 0 {
            self.per_element(pass, Family::Similarity, "lexical_blend", &bind, self.lex_max_n);
        }
    }

    /// Selects the `k` largest of `values` per query into `sorted` (64 bits: ids in rank
    /// order; 32 bits: values, descending).
    pub(crate) fn encode_select(&self, pass: &mut wgpu::ComputePass, values: &wgpu::Buffer, k: usize, bits: u32) {
        let c = self.corpus;
        let sel = self.uniform(format!("select {k} {bits}"), &SelectParams { k: k as u32, bits, _pad0: 0, _pad1: 0 });
        let bind = self.bind(
            Family::Select,
            &[
                &self.params_buf,
                &c.graphs.buffer,
                &self.segments_buf,
                values,
                &self.state,
                &self.hist,
                &self.list,
                &sel,
                &self.sorted,
            ],
        );
        self.per_query(pass, Family::Select, "select_init", &bind);
        let (x, z) = grid(self.n_max.div_ceil(HIST_CHUNK), self.gpu().limits().max_compute_workgroups_per_dimension);
        for _ in 0..bits / 8 {
            self.run(pass, Family::Select, "select_histogram", &bind, [x, self.segments.len() as u32, z]);
            self.per_query(pass, Family::Select, "select_choose", &bind);
        }
        self.per_element(pass, Family::Select, "select_gather", &bind, self.n_max);
        self.per_query(pass, Family::Select, "select_sort", &bind);
    }

    fn activation_bind(&self) -> wgpu::BindGroup {
        self.bind(
            Family::Activation,
            &[
                &self.params_buf,
                &self.corpus.graphs.buffer,
                &self.segments_buf,
                &self.sim,
                &self.u,
                &self.a,
                &self.state,
                &self.sorted,
                &self.bm25_anchors,
                &self.out,
            ],
        )
    }

    /// a(0): the dense anchors (a 64-bit selection on the cosine) and the BM25 anchors.
    pub(crate) fn encode_seed(&self, pass: &mut wgpu::ComputePass) {
        self.encode_select(pass, &self.dense, self.params.anchor_k as usize, 64);
        let bind = self.activation_bind();
        self.per_element(pass, Family::Activation, "seed_clear", &bind, self.n_max);
        self.per_query(pass, Family::Activation, "seed_anchors", &bind);
    }

    pub(crate) fn encode_propagate(&self, pass: &mut wgpu::ComputePass, no_fan: bool) {
        let c = self.corpus;
        let coef = if no_fan { &c.coef_no_fan.buffer } else { &c.coef.buffer };
        let bind = self.bind(
            Family::Propagate,
            &[
                &self.params_buf,
                &c.graphs.buffer,
                &self.segments_buf,
                &c.ptr.buffer,
                &c.src.buffer,
                coef,
                &self.a,
                &self.u,
            ],
        );
        self.per_element(pass, Family::Propagate, "propagate", &bind, self.n_max);
    }

    /// Top-M selection on u (skipped when β = 0 or M = 0), then inhibition and the sigmoid.
    pub(crate) fn encode_inhibit_sigmoid(&self, pass: &mut wgpu::ComputePass) {
        if self.params.beta != 0.0 && self.params.top_m != 0 {
            self.encode_select(pass, &self.u, self.params.top_m as usize, 32);
        }
        let bind = self.activation_bind();
        self.per_element(pass, Family::Activation, "inhibit_sigmoid", &bind, self.n_max);
    }

    /// Hybrid score, the top out_k nodes per query, and the walk into episodes.
    pub(crate) fn encode_score(&self, pass: &mut wgpu::ComputePass) {
        let c = self.corpus;
        let bind = self.bind(
            Family::Score,
            &[
                &self.params_buf,
                &c.graphs.buffer,
                &self.segments_buf,
                &self.sim,
                &self.a,
                &c.pagerank.buffer,
                &self.score,
                &self.state,
                &self.sorted,
                &c.link_ptr.buffer,
                &c.link_dst.buffer,
                &c.turns.buffer,
                &self.out,
            ],
        );
        self.per_element(pass, Family::Score, "hybrid", &bind, self.n_max);
        self.encode_select(pass, &self.score, self.params.out_k as usize, 64);
        self.per_query(pass, Family::Score, "walk", &bind);
    }

    /// PageRank for `rounds` rounds from the teleport vectors in `sim` (normalised per query),
    /// alternating between `a` and `u`, with the dangling mass in `state`. Returns the buffer
    /// holding the result.
    pub(crate) fn encode_pagerank(
        &self,
        encoder: &mut wgpu::CommandEncoder,
        damping: f32,
        rounds: u32,
    ) -> &wgpu::Buffer {
        let c = self.corpus;
        let params = Params { damping, rounds, ..self.params };
        let params_buf = self.uniform("pagerank params".into(), &params);
        if self.work_words > 0 {
            encoder.copy_buffer_to_buffer(&self.sim, 0, &self.a, 0, self.work_words * 4);
        }
        let bind = |from: &wgpu::Buffer, to: &wgpu::Buffer| {
            self.bind(
                Family::PageRank,
                &[
                    &params_buf,
                    &c.graphs.buffer,
                    &self.segments_buf,
                    &c.pr_ptr.buffer,
                    &c.pr_src.buffer,
                    &c.pr_prob.buffer,
                    &c.dangling.buffer,
                    &self.sim,
                    from,
                    to,
                    &self.state,
                ],
            )
        };
        let forward = bind(&self.a, &self.u);
        let backward = bind(&self.u, &self.a);
        let mut pass = encoder
            .begin_compute_pass(&wgpu::ComputePassDescriptor { label: Some("pagerank"), timestamp_writes: None });
        for r in 0..rounds {
            let b = if r % 2 == 0 { &forward } else { &backward };
            self.per_query(&mut pass, Family::PageRank, "pagerank_dangling", b);
            self.per_element(&mut pass, Family::PageRank, "pagerank_step", b, self.n_max);
        }
        if rounds.is_multiple_of(2) { &self.a } else { &self.u }
    }

    /// The whole ranking step.
    pub(crate) fn encode_rank(&self, encoder: &mut wgpu::CommandEncoder, s: &RankSettings) {
        let mut pass =
            encoder.begin_compute_pass(&wgpu::ComputePassDescriptor { label: Some("rank"), timestamp_writes: None });
        self.encode_similarity(&mut pass);
        self.encode_seed(&mut pass);
        for _ in 0..s.steps {
            self.encode_propagate(&mut pass, s.no_fan);
            self.encode_inhibit_sigmoid(&mut pass);
        }
        self.encode_score(&mut pass);
    }
}
