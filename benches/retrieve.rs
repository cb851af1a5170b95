//! Retrieval latency on the CPU at LoCoMo size, and the BM25 implementation choice.
//!
//! Setup (not timed): the LoCoMo conversation `conv-26` (the largest of the development file) is
//! read from `$MYELIN_DATASETS/locomo/locomo10-dev.json`, embedded with the real MiniLM weights,
//! and its memory graph built exactly as `myelin ingest` does; its 199 questions are embedded.
//! Then, per question (cycling through them):
//! - `retrieve/<mode>`: one [`Memory::retrieve`], query embedding excluded;
//! - `query/asks`: reading what a question asks for (`kind::Asks`: a timeline, the asker's own
//!   turns), which `Query::new` does once per query, outside `retrieve/<mode>`;
//! - `bm25/in-memory`: the in-memory index's scoring of every node;
//! - `bm25/lance-fts`: the same query through a Lance inverted index (`full_text_search`, top
//!   10) over the same texts, the alternative the in-memory index was chosen over.
//!
//! Run: `MYELIN_DATASETS=../shared/datasets cargo bench --bench retrieve`.

use std::path::PathBuf;
use std::sync::Arc;

use arrow_array::{RecordBatch, RecordBatchIterator, StringArray};
use arrow_schema::{DataType, Field, Schema};
use criterion::{BenchmarkId, Criterion, criterion_group, criterion_main};
use futures::TryStreamExt;
use lance::Dataset;
use lance::index::DatasetIndexExt;
use lance_index::IndexType;
use lance_index::scalar::FullTextSearchQuery;
use lance_index::scalar::inverted::tokenizer::InvertedIndexParams;
use myelin::config::Config;
use myelin::embed::{EMBEDDING_DIM, Embedder};
use myelin::ingest::{LoadOptions, load_path};
use myelin::pipeline::in_memory;
use myelin::retrieve::bm25::Analyzer;
use myelin::retrieve::{Memory, Mode, Query};

struct Fixture {
    memory: Memory,
    queries: Vec<Query>,
    texts: Vec<String>,
}

fn fixture() -> Fixture {
    let data = std::env::var_os("MYELIN_DATASETS").map_or_else(|| PathBuf::from("../shared/datasets"), PathBuf::from);
    let file = data.join("locomo/locomo10-dev.json");
    let loaded = load_path(&file, &LoadOptions::default()).expect("set MYELIN_DATASETS to the public data sets");
    let conversation = loaded.conversations.into_iter().find(|c| c.id == "conv-26").expect("conv-26");
    let config = Config::default();
    let embedder = Embedder::load(&config.embed).expect("model (scripts/fetch-model.sh)");
    let memory = in_memory(&conversation, &embedder, &config).expect("memory");
    let graph = memory.graph();
    eprintln!(
        "conv-26: {} episodes, {} concepts, {} edges, {} questions",
        memory.episodes().len(),
        graph.concepts.len(),
        graph.edges.len(),
        conversation.questions.len()
    );
    let texts: Vec<String> = memory.episodes().iter().map(|e| e.indexed_text()).collect();
    let mut analyzer = Analyzer::new().expect("analyzer");
    let questions: Vec<&str> = conversation.questions.iter().map(|q| q.text.as_str()).collect();
    let vectors = embedder.embed(&questions).expect("embed questions");
    let queries = questions
        .iter()
        .zip(vectors.chunks_exact(EMBEDDING_DIM))
        .map(|(q, v)| Query::new(&mut analyzer, q, v.to_vec()).expect("query"))
        .collect();
    Fixture { memory, queries, texts }
}

fn bench(c: &mut Criterion) {
    let f = fixture();
    let n = f.queries.len();
    let mut group = c.benchmark_group("retrieve");
    for mode in Mode::ALL {
        group.bench_function(BenchmarkId::from_parameter(mode.as_str()), |b| {
            let mut i = 0;
            b.iter(|| {
                i = (i + 1) % n;
                f.memory.retrieve(&f.queries[i], mode).expect("retrieve")
            })
        });
    }
    group.finish();

    let mut group = c.benchmark_group("query");
    group.bench_function("asks", |b| {
        let mut i = 0;
        b.iter(|| {
            i = (i + 1) % n;
            myelin::kind::Asks::of_question(&f.queries[i].text)
        })
    });
    group.finish();

    let mut group = c.benchmark_group("bm25");
    let mut analyzer = Analyzer::new().expect("analyzer");
    let docs: Vec<Vec<String>> = f.texts.iter().map(|t| analyzer.terms(t)).collect();
    let index = myelin::retrieve::bm25::Bm25Index::build(&docs, 1.2, 0.75);
    group.bench_function("in-memory", |b| {
        let mut i = 0;
        let mut scores = vec![0.0f32; index.len()];
        b.iter(|| {
            i = (i + 1) % n;
            scores.iter_mut().for_each(|s| *s = 0.0);
            index.score_into(&f.queries[i].terms, &mut scores);
            scores[0]
        })
    });
    let runtime = tokio::runtime::Builder::new_multi_thread().enable_all().build().expect("tokio");
    let dir = tempfile::tempdir().expect("tempdir");
    let uri = dir.path().join("fts.lance");
    let dataset = runtime.block_on(async {
        let schema = Arc::new(Schema::new(vec![Field::new("text", DataType::Utf8, false)]));
        let batch =
            RecordBatch::try_new(schema.clone(), vec![Arc::new(StringArray::from(f.texts.clone()))]).expect("batch");
        let reader = RecordBatchIterator::new(vec![Ok(batch)], schema);
        let mut ds = Dataset::write(reader, uri.to_str().expect("utf-8"), None).await.expect("write");
        ds.create_index(&["text"], IndexType::Inverted, None, &InvertedIndexParams::default(), true)
            .await
            .expect("inverted index");
        ds
    });
    group.bench_function("lance-fts", |b| {
        let mut i = 0;
        b.iter(|| {
            i = (i + 1) % n;
            let text = f.queries[i].text.clone();
            runtime.block_on(async {
                let mut scan = dataset.scan();
                scan.full_text_search(FullTextSearchQuery::new(text)).expect("fts");
                scan.limit(Some(10), None).expect("limit");
                let batches: Vec<RecordBatch> =
                    scan.try_into_stream().await.expect("stream").try_collect().await.expect("rows");
                batches.len()
            })
        })
    });
    group.finish();
}

criterion_group!(benches, bench);
criterion_main!(benches);
