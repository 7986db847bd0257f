//! Which [`Protocol`] carries a workload's requests: one arm per
//! [`Api`]. The engine asks here; each kind lives in a module of its own.

use crate::Protocol;
use infer_bench_spec::Dialect;
use infer_bench_spec::raw::Api;

/// The request kind a workload asks for, writing bodies in `dialect`.
pub fn for_workload(
    workload: &infer_bench_spec::Workload,
    model: &str,
    dialect: Dialect,
) -> Box<dyn Protocol> {
    match workload.api {
        Api::Chat => Box::new(crate::openai::Chat::new(workload, model, dialect)),
        Api::Completions => Box::new(crate::openai::Completions::new(workload, model, dialect)),
        Api::Responses => Box::new(crate::responses::Responses::new(workload, model, dialect)),
        Api::Messages => Box::new(crate::messages::Messages::new(workload, model, dialect)),
        Api::Embeddings => Box::new(crate::embeddings::Embeddings::new(workload, model)),
        Api::Rerank => Box::new(crate::rerank::Rerank::new(workload, model, dialect)),
        Api::Generate => Box::new(crate::generate::Generate::new(workload, model)),
        // Its bodies wait for the model's metadata (`kserve::handshake`).
        Api::Kserve => match &workload.retrieval {
            Some(infer_bench_spec::retrieval::Retrieval::Tensors(t)) => {
                Box::new(crate::kserve::Kserve::unresolved(t, model))
            }
            _ => Box::new(crate::kserve::Kserve::unresolved(
                &infer_bench_spec::tensor::Tensors {
                    batch: 1,
                    inputs: Vec::new(),
                    binary: true,
                    version: None,
                },
                model,
            )),
        },
    }
}
